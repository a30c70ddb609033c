"""The Masks view's measurements (flashviz.views.masks.data): the timed calls reuse a schedule built once (they never
evaluate the mask_mod), the tile counts they report are the ones an independent tile_schedule gives, progress moves
one bar to its end, and a cancelled run raises and leaves nothing in the dashboard's cache."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention.flex_attention import and_masks

from flashviz.core.tiling import tile_schedule
from flashviz.masks import causal_mask, document, sliding_window
from flashviz.measure.progress import Cancelled
from flashviz.views.masks import data as maskruns
from flashviz.views.masks import page as masks_view
from flashviz.views.masks.data import (
    BUILD_REPEATS,
    RUN_REPEATS,
    SWEEP_REPEATS,
    MaskSpec,
    prebuilt_schedule,
    random_qkv,
    run_problem,
    sweep_problem,
    time_mask_runs,
    time_preset_runs,
)
from flashviz.views.masks.presets import PRESETS


class Counting:
    """A mask_mod that counts its calls, so a test can see when the mask is evaluated."""

    def __init__(self, mask_mod):
        self.mask_mod, self.calls = mask_mod, 0

    def __call__(self, b, h, q_idx, kv_idx):
        self.calls += 1
        return self.mask_mod(b, h, q_idx, kv_idx)


def computed(counts: dict[str, int]) -> int:
    return counts["full"] + counts["partial"]


def test_the_timed_calls_reuse_the_prebuilt_schedule_and_never_evaluate_the_mask():
    mask = Counting(and_masks(document([40, 57]), causal_mask))  # N = 97: ragged edge tiles
    q, k, v = random_qkv(97, 8, 2, "float32")
    seen: list[tuple[int, int, str]] = []  # (calls of the mask_mod so far, done, label) at every report
    rows = time_mask_runs(q, k, v, mask, None, block_q=16, block_k=16,
                          progress=lambda done, total, label: seen.append((mask.calls, done, label)))
    def calls_at(prefix: str, last: bool = False) -> int:
        return [calls for calls, _, label in seen if label.startswith(prefix)][-1 if last else 0]

    # the memory calls (up to the first build report) and the timed calls (up to the last report): no evaluation
    assert calls_at("peak memory") == calls_at("build:") and calls_at("timing:") == calls_at("timing:", last=True)
    assert calls_at("build:", last=True) > calls_at("build:")  # the builds, timed apart, do evaluate it
    want = tile_schedule(97, 97, 16, 16, mask_mod=and_masks(document([40, 57]), causal_mask)).counts()
    by = {r["kind"]: r for r in rows}
    assert (by["masked"]["tiles_computed"], by["masked"]["tiles"]) == (computed(want), 49)
    assert (by["unmasked"]["tiles_computed"], by["dense"]["tiles_computed"]) == (49, 49)
    # RUN_REPEATS clean calls each, fewer only where the machine disturbed more calls than could be run again
    assert all(1 <= r["repeats"] <= RUN_REPEATS and r["time_s"] > 0 and r["build_s"] > 0 for r in rows)


def test_the_masked_run_computes_attention_with_its_mask():
    """The timed masked call is the kernel on the prebuilt schedule: its output is SDPA's with the same mask."""
    q, k, v = random_qkv(97, 8, 2, "float64")
    mask = sliding_window(20, 3)
    schedule = prebuilt_schedule(97, 16, 16, mask, heads=2)
    out = maskruns.tiled_call(q, k, v, schedule)()
    i, j = torch.arange(97)[:, None], torch.arange(97)[None, :]
    visible = (j >= i - 20) & (j <= i + 3)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=visible)
    assert torch.allclose(out, ref, atol=1e-12)


def test_the_sweep_reports_each_presets_own_tiles_and_times_without_evaluating_masks():
    spec = MaskSpec(window=24, prefix=16, chunk=40, sinks=2, dilation=3, docs="growing")
    mods = {name: Counting(mod) for name, mod in maskruns.preset_mods(spec, 100).items()}
    q, k, v = random_qkv(100, 8, 1, "float32")
    seen: list[tuple[int, str]] = []
    rows = time_preset_runs(q, k, v, mods, block_q=16, block_k=16,
                            progress=lambda done, total, label: seen.append((sum(m.calls for m in mods.values()),
                                                                             label)))
    timed = {calls for calls, label in seen if label.startswith("timing")}
    assert len(timed) == 1  # from the first timed call's report to the last report: no mask_mod evaluated
    assert [r["preset"] for r in rows] == [*PRESETS, "none"]
    for r in rows:
        want = tile_schedule(100, 100, 16, 16, mask_mod=mods[r["preset"]].mask_mod).counts()
        assert (r["tiles_computed"], r["tiles"]) == (computed(want), 49), r["preset"]
        assert r["computed"] == computed(want) / 49 and 1 <= r["repeats"] <= SWEEP_REPEATS  # fewer: calls set aside


def test_progress_moves_one_bar_from_zero_to_its_end():
    seen: list[tuple[int, int, str]] = []
    maskruns.masked_runs(MaskSpec("causal"), 64, 8, 1, 32, 32, "float32", 1, progress=lambda *a: seen.append(a))
    done, totals = [s[0] for s in seen], {s[1] for s in seen}
    assert len(totals) == 1 and done[0] == 0 and done[-1] == totals.pop() and done == sorted(done)
    builds = [s[2] for s in seen if s[2].startswith("build: repeat")]
    assert len(builds) == 3 * BUILD_REPEATS and builds[0] == "build: repeat 1 of 3: masked"
    assert seen[-1][2] == "timing: timed"


def test_a_cancelled_run_raises_and_nothing_is_cached():
    args = (MaskSpec("chunked", chunk=20), 48, 8, 1, 16, 16, "float32", 1)
    masks_view.masked_runs.clear()

    def cancel_at_five(done: int, total: int, label: str) -> None:
        if done == 5:
            raise Cancelled("cancelled by the test")

    threads = torch.get_num_threads()
    with pytest.raises(Cancelled):
        masks_view.masked_runs(*args, _progress=cancel_at_five)
    assert torch.get_num_threads() == threads
    ran: list = []
    rows = masks_view.masked_runs(*args, _progress=lambda *a: ran.append(a))
    assert ran and len(rows) == 3  # measured anew: the cancelled run left no result behind
    again: list = []
    assert masks_view.masked_runs(*args, _progress=lambda *a: again.append(a)) == rows and not again  # now cached


def test_runs_too_large_are_refused_with_the_fix():
    assert "Lower N (sidebar)" in run_problem(16384, 64, 8, "float32")
    assert run_problem(1024, 64, 4, "float32") is None and sweep_problem(1024, 64, 4, "float32") is None
    flops = sweep_problem(8192, 512, 8, "float32")
    assert flops.startswith(f"{maskruns.sweep_calls()} calls at N = 8192, d = 512, H = 8") and "Lower N" in flops
    big = sweep_problem(16384, 512, 16, "float64")  # 4 x 16 x 16384 x 512 x 8 bytes
    assert big.startswith("q, k, v and the output at N = 16384, d = 512, H = 16 (float64) take 4.0 GiB")
