"""The 10-minute lesson (docs/lesson.md), step by step: each step's exact settings (a classroom preset or a link)
loaded in AppTest, the one claim the teacher makes there asserted on what the page shows, and the numbers the lesson
quotes checked against the page.

No test here asserts a wall-clock time: the Benchmark step checks memory (deterministic) and that a slower tiled
kernel always comes with the caption that says why.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from flashviz.core.backward import flash_attention
from flashviz.core.reference import naive_attention
from flashviz.core.tiling import tile_schedule
from flashviz.figures.tilemap import MAX_FRAMES
from flashviz.measure.trace import PICK_ROWS_MAX, pick_row, row_trace
from flashviz.ui.benchmark import speedups
from flashviz.ui.state import PRESET_KEEPS, PRESETS, Settings, apply_preset, spec_of
from flashviz.vocab import FULL, PARTIAL, SKIPPED
from tests._apptest import assert_clean, chart, decode, done_grid, subtitle, tile_map, tiles_computed

LESSON = (Path(__file__).resolve().parents[1] / "docs" / "lesson.md").read_text()

# Each step's settings, exactly as the lesson names them (links are relative to the dashboard's address).
TINY_GRID = "Tiny grid for the whiteboard"  # steps 1 and 2
SLIDING = "Sliding window"  # step 3
IO_LINK = {"view": "io", "n": "4096", "heads": "1"}  # step 4: ?view=io&n=4096&heads=1
IO_CAUSAL_LINK = {**IO_LINK, "causal": "1"}  # step 4, then the Causal mask toggle
BENCH_LINK = {"view": "bench"}  # step 5: the Benchmark's defaults
CORRECT_LINK = {"view": "correct"}  # step 6: float32
CORRECT_FP16_LINK = {"view": "correct", "dtype": "float16"}  # step 6's aside
TRAIN_LINK = {"view": "train"}  # step 7

IO_NAMES = {"naive": "naive (standard attention)", "kv_outer": "FlashAttention-1 (kv_outer)",
            "q_outer": "FlashAttention-2 (q_outer)"}


def test_the_lesson_names_the_settings_these_tests_load():
    for name in (TINY_GRID, SLIDING):
        assert f"Preset *{name}*" in LESSON
    for link in (IO_LINK, BENCH_LINK, CORRECT_LINK, CORRECT_FP16_LINK, TRAIN_LINK):
        assert "`?" + "&".join(f"{k}={v}" for k, v in link.items()) + "`" in LESSON, link


def with_preset(make_app, name: str, view: str = "how"):
    at = make_app(view=view)
    at.selectbox(key="preset").set_value(name).run()
    assert_clean(at)
    return at


def markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


# ----------------------------------------------------------------------------------------------------------------------
# step 1: the tile map shows every tile's fate before Play


def test_step1_tiny_grid_shows_10_computed_and_6_skipped_tiles_before_play(make_app):
    at = with_preset(make_app, TINY_GRID)
    m = tile_map(at)
    assert "4 × 4 = 16 tiles, 10 computed · causal" in m.subtitle
    fate = tile_schedule(16, 16, 4, 4, causal=True).status_grid()  # [i][j] -> full / partial / skipped
    assert len(m.panels) == 2  # FA1 and FA2 side by side
    for panel in m.panels:  # before Play: the current tile, every other tile pale in the colour of its fate
        assert panel.frames[0]["current"] == (0, 0)
        assert not any(done_grid(panel, 0).values())
        assert all(t["fate"] == fate[i][j] for (i, j), t in panel.tiles.items())
        rest = [t for ij, t in panel.tiles.items() if ij != (0, 0)]
        assert sum(t["fate"] == SKIPPED for t in rest) == 6
        assert sum(t["fate"] in (FULL, PARTIAL) for t in rest) == 9
    assert m.frames == 10 and tiles_computed(at) == [10, 10]
    third = [p.frames[2]["counter"][0] for p in m.panels]  # FA1 goes down a column, FA2 along a row
    assert "i=2, j=0" in third[0] and "i=1, j=1" in third[1]


# ----------------------------------------------------------------------------------------------------------------------
# step 2: the row inspector shows the rescale, and L is exact


def test_step2_row_inspector_shows_row_15_rescaling_and_the_exact_logsumexp(make_app):
    at = with_preset(make_app, TINY_GRID)
    row = chart(at, "Row inspector")
    assert "m grew on 3 of the row's 4 tiles" in subtitle(row) and "Picked automatically: row 15" in subtitle(row)
    assert all(p.row_marker["row"] == 15 for p in tile_map(at).panels)  # the map marks the same row
    (caption,) = [c.value for c in at.caption if c.value.startswith("Row 15 was picked automatically")]
    kernel, exact = (float(x) for x in re.findall(r"(-?\d+\.\d{6})", caption)[-2:])
    assert kernel == pytest.approx(exact, abs=2e-6)
    for order in ("kv_outer", "q_outer"):  # what the figure draws, from the real kernel
        tr = row_trace(16, 8, 4, 4, row=15, causal=True, loop_order=order)
        assert tr.rescales == 3
        assert all((f < 1) == g for f, g, first in zip(tr.factor, tr.grew, (True, False, False, False), strict=True)
                   if not first)
        assert all(after < before for after, before, g in zip(tr.l_rescaled, tr.l_before, tr.grew, strict=True)
                   if g)  # l shrinks where m grew
        assert np.allclose(tr.l, np.add(tr.l_rescaled, tr.tile_sum))
        assert abs(tr.lse_kernel - (tr.m_exact + math.log(tr.l_exact))) < 1e-5


@pytest.mark.parametrize("name", [None, *PRESETS])
def test_the_inspected_row_rescales_at_the_default_and_every_preset(make_app, name):
    at = make_app() if name is None else with_preset(make_app, name)
    s = Settings() if name is None else apply_preset(Settings(), name)
    pick = pick_row(s.n, s.d, s.br, s.bc, causal=s.causal, window=s.window, dtype=s.dtype, near=s.row)
    assert pick.rescales >= 1
    assert f"Picked automatically: {pick.reason}" in subtitle(chart(at, "Row inspector"))
    assert tile_map(at).panels[0].row_marker["row"] == pick.row
    if name is not None:  # the preset's own row is that row, so turning the toggle off keeps it
        assert s.row == pick.row


def test_the_user_can_still_choose_a_row(make_app):
    at = make_app(n="256", br="32", bc="32")
    assert at.number_input(key="row").disabled
    shown = at.number_input(key="row").value  # the picked row, so switching off starts from it
    at.toggle(key="autorow").set_value(False).run()
    assert not at.number_input(key="row").disabled and at.number_input(key="row").value == shown
    at.number_input(key="row").set_value(3).run()
    assert_clean(at)
    assert "Row 3, chosen by hand" in " ".join(c.value for c in at.caption)
    assert tile_map(at).panels[0].row_marker["row"] == 3
    assert "Picked automatically" not in subtitle(chart(at, "Row inspector"))


# ----------------------------------------------------------------------------------------------------------------------
# the tile map keeps its frame across a setting change


def test_the_tile_map_keeps_its_frame_when_a_setting_changes(make_app):
    at = make_app(n="256", br="32", bc="32")
    at.select_slider(key="frame").set_value(20).run()
    assert tile_map(at).start == 20 and at.query_params["frame"] == "20"
    at.toggle(key="causal").set_value(True).run()  # 36 frames: frame 20 still exists
    assert_clean(at)
    m = tile_map(at)
    assert m.start == 20 and m.frames == 36
    assert "tile 21/36" in m.panels[0].frames[20]["counter"][0] and m.panels[0].frames[20]["delay"] == 0
    at.select_slider(key="n").set_value(128).run()  # 10 frames: the map opens at its last one
    assert tile_map(at).start == 9
    assert spec_of("frame").hi == MAX_FRAMES - 1


# ----------------------------------------------------------------------------------------------------------------------
# step 3: the causal toggle removes tiles and traffic


def test_step3_sliding_window_then_causal_computes_150_instead_of_268_tiles(make_app):
    at = with_preset(make_app, SLIDING)
    assert tiles_computed(at) == [268] and "268 computed" in tile_map(at).subtitle
    before = at.metric[1].value
    at.toggle(key="causal").set_value(True).run()
    assert_clean(at)
    assert tiles_computed(at) == [150] and "150 computed" in tile_map(at).subtitle
    after = at.metric[1].value
    assert _mib(after) < _mib(before)
    assert f"from {before} to {after}" in LESSON.replace("\n   ", " ")  # what the lesson tells the class


def _mib(text: str) -> float:
    value, unit = text.split()
    return float(value) * {"KiB": 2**-10, "MiB": 1.0, "GiB": 2**10}[unit]


# ----------------------------------------------------------------------------------------------------------------------
# step 4: the IO curves move the way the page says


def io_curves(at) -> dict[str, dict[int, float]]:
    spec = chart(at, "HBM accesses vs on-chip memory M")
    out = {}
    for key, name in IO_NAMES.items():
        (trace,) = [t for t in spec["data"] if t.get("name") == name]
        out[key] = dict(zip(decode(trace["x"]).astype(int).tolist(), decode(trace["y"]).astype(float), strict=True))
    return out


def test_step4_io_model_flash_falls_like_1_over_m_and_flattens_from_4dn(make_app):
    at = make_app(**IO_LINK)
    assert_clean(at)
    curves, m_flat = io_curves(at), 4 * 64 * 4096  # 4dN = 2^20
    naive, fa1, fa2 = curves["naive"], curves["kv_outer"], curves["q_outer"]
    assert set(naive.values()) == {4 * 4096 * 64 + 4 * 4096**2}  # 68.2M, whatever M is
    for curve in (fa1, fa2):
        ms = sorted(curve)
        assert curve[ms[1]] / curve[ms[0]] == pytest.approx(0.5, abs=0.02)  # halves when M doubles
        assert all(curve[b] <= curve[a] for a, b in itertools.pairwise(ms))  # never rises
        assert all(curve[m] == curve[m_flat] for m in ms if m >= m_flat)
        assert curve[m_flat // 2] > curve[m_flat]
    assert all(fa2[m] < fa1[m] for m in fa1)
    assert (fa1[m_flat], fa2[m_flat]) == (6 * 4096 * 64 + 6 * 4096, 4 * 4096 * 64 + 4096)  # 1.60M, 1.05M
    text = markdown(at)
    assert "**Standard attention** is flat at 68.2M" in text and "**FA2 is below FA1 at every M shown**" in text
    assert text.count("flat from M = 1,048,576 (the first M ≥ 4dN") == 2
    assert {"A100 SRAM per SM", "H100 SRAM per SM"} <= {t.get("name") for t in
                                                        chart(at, "HBM accesses")["data"]}


def test_step4_with_causal_the_flash_curves_start_at_half_and_meet_the_unmasked_ones(make_app):
    plain, causal = io_curves(make_app(**IO_LINK)), io_curves(make_app(**IO_CAUSAL_LINK))
    assert causal["naive"] == plain["naive"]
    m_small, m_flat = 2**10, 4 * 64 * 4096
    for key in ("kv_outer", "q_outer"):
        assert causal[key][m_small] / plain[key][m_small] == pytest.approx(0.5, abs=0.01)
        ms = sorted(causal[key])
        assert all(causal[key][b] <= causal[key][a] for a, b in itertools.pairwise(ms))  # more SRAM, never more traffic
        assert all(causal[key][m] == plain[key][m] for m in ms if m >= m_flat)
        assert all(causal[key][m] < plain[key][m] for m in ms if m < m_flat)
    at = make_app(**IO_CAUSAL_LINK)
    assert markdown(at).count("With the mask it starts at 0.50 × the unmasked value and meets it from M = "
                              "1,048,576") == 2


# ----------------------------------------------------------------------------------------------------------------------
# step 5: the Benchmark's memory claim, and the caption wherever a tiled kernel is slower


def test_step5_benchmark_memory_grows_4x_for_naive_and_2x_for_the_tiled_kernels(make_app):
    at = make_app(**BENCH_LINK)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    peaks = {t["name"].split(" ")[0]: dict(zip(decode(t["x"]).astype(int).tolist(), decode(t["y"]).astype(float),
                                               strict=True))
             for t in chart(at, "Peak memory vs sequence length")["data"] if "not run" not in t["name"]}
    ns = sorted(peaks["naive"])
    assert ns == [512, 1024, 2048]
    for a, b in itertools.pairwise(ns):
        assert 3.5 < peaks["naive"][b] / peaks["naive"][a] < 4.5  # S and P: N²
        for impl in ("flash", "flash2"):  # O grows with N, the per-tile scratch not at all
            assert 1.0 < peaks[impl][b] / peaks[impl][a] <= 2.1, (impl, peaks[impl])
    for impl in ("flash", "flash2"):
        saving = [peaks["naive"][n] / peaks[impl][n] for n in ns]
        assert saving == sorted(saving) and saving[-1] > 10  # the gap widens with N
    df = next(d.value for d in at.dataframe if "time_s" in d.value.columns)
    slow = speedups(df)
    slow = slow[slow["speedup"] < 1]
    captions = [c.value for c in at.caption if "slower than naive" in c.value]
    assert bool(captions) == (len(slow) > 0)  # whichever way this machine's timings went
    for r in slow.itertuples():
        assert f"{r.impl} at N = {r.N}" in captions[0] and "Python loop iteration" in captions[0]


# ----------------------------------------------------------------------------------------------------------------------
# step 6: correctness under the dtype's bar


@pytest.mark.parametrize(("link", "bar"), [(CORRECT_LINK, "1e-5"), (CORRECT_FP16_LINK, "1.95e-3")])
def test_step6_every_implementation_is_under_its_dtype_bar(make_app, link, bar):
    at = make_app(**link)
    at.button(key="correct_run").click().run()
    assert_clean(at)
    (box,) = [s.value for s in at.success]
    assert box.endswith("bar: pass.") and f"≤ {bar}" in box
    worst = float(re.search(r"\*\*([0-9.e+-]+)\*\*", box).group(1))
    assert worst <= float(bar)


# ----------------------------------------------------------------------------------------------------------------------
# step 7: what training keeps, and the price of recomputing P


def saved_shapes(fn, n: int = 64, d: int = 8) -> list[tuple[int, ...]]:
    """Shapes of every tensor autograd keeps from fn's forward for its backward."""
    q, k, v = (torch.randn(1, 1, n, d, requires_grad=True) for _ in range(3))
    shapes = []

    def pack(t):
        shapes.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(q, k, v).sum().backward()
    return shapes


def test_step7_naive_keeps_p_flash_keeps_o_and_l_and_recomputing_costs_25_percent(make_app):
    n = 64
    assert (1, 1, n, n) in saved_shapes(naive_attention, n)  # P, N x N
    flash = saved_shapes(lambda q, k, v: flash_attention(q, k, v, block_q=16, block_k=16), n)
    assert flash and all(n * n not in (math.prod(s), *s[-2:]) for s in flash if len(s) >= 2)  # no N x N tensor
    at = make_app(**TRAIN_LINK)
    assert_clean(at)
    table = chart(at, "Backward: FLOPs added, memory saved")["data"][0]["cells"]["values"]
    assert table[0] == ["512", "1024", "2048"] and set(table[4]) == {"25"}
    text = markdown(at)
    assert "**25% more backward FLOPs**" in text and "1 × 4 × 2048² float32" in text and "64.0 MiB" in text
    assert "2.15 GFLOP more" in text
    lesson = LESSON.replace("\n   ", " ")
    assert "64.0 MiB at N = 2048" in lesson and "2.15 GFLOP at N = 2048" in lesson
    assert "25% more backward FLOPs" in lesson


# ----------------------------------------------------------------------------------------------------------------------
# the presets: each sets every setting it depends on, and its story is true


OTHER = Settings(n=97, d=111, br=8, bc=16, link=False, causal=True, window=(5, 3), order="fa2", dtype="float64",
                 batch=3, heads=7, row=50, autorow=False, frame=33, ns=(128,), impls=("sdpa",), bblock=8, reps=1,
                 blocks=(4,), cds=(8,), cns=(16,))


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_sets_every_setting_whatever_came_before(name):
    a, b = apply_preset(Settings(), name), apply_preset(OTHER, name)
    assert replace(b, **{k: getattr(a, k) for k in PRESET_KEEPS}) == a


def test_the_preset_stories_are_true_at_their_settings():
    def counts(name):
        s = apply_preset(Settings(), name)
        return tile_schedule(s.n, s.n, s.br, s.bc, causal=s.causal, window=s.window).counts()

    long = counts("Long-context causal")
    assert sum(long.values()) == 64 * 64 and 0.45 < long["skipped"] / (64 * 64) < 0.5  # "almost half"
    assert "150 of the band's 268 tiles" in PRESETS[SLIDING].story
    sliding = apply_preset(Settings(), SLIDING)
    band = tile_schedule(4096, 4096, 128, 128, window=sliding.window).counts()
    causal = tile_schedule(4096, 4096, 128, 128, causal=True, window=sliding.window).counts()
    assert (band["full"] + band["partial"], causal["full"] + causal["partial"]) == (268, 150)
    tiny = counts(TINY_GRID)
    assert (tiny["full"] + tiny["partial"], tiny["skipped"]) == (10, 6) and "10 computed, 6 skipped" in \
        PRESETS[TINY_GRID].story
    ragged = apply_preset(Settings(), "Ragged edges (odd N)")
    assert ragged.n - (ragged.n // ragged.br) * ragged.br == 40
    assert f"among up to {PICK_ROWS_MAX} rows" in spec_of("autorow").help
