"""The lesson (flashviz.lesson.steps), step by step: every step's check confirms its claim at the step's settings, and
the page the step opens (`?lesson=intro&step=k` in AppTest, the way a class sees it) shows the check's numbers, read
back from the page itself (the tile map's SVG, the charts' data, the text under them), next to an independent oracle (a
formula or a plain PyTorch computation written here). Then the classroom presets: each sets every setting, and each
story is true at its settings. Presenter mode itself (Previous / Next, the URL, hostile links) is in
tests/test_presenter.py.

No test here asserts a wall-clock time: the Benchmark step checks peak memory (the allocator's exact events) and that
a slower tiled kernel always comes with the caption that says why.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from flashviz.app.presenter import EXPLORE_KEY, EXPLORING_KEY, PRESENTING_KEY
from flashviz.app.query import parse_query
from flashviz.app.slides import PICTURES
from flashviz.app.state import PRESET_KEEPS, PRESETS, Settings, apply_preset, spec_of
from flashviz.core.backward import flash_attention
from flashviz.core.reference import naive_attention
from flashviz.core.tiling import tile_schedule
from flashviz.figures.tilegrid import STATUS_CODE
from flashviz.figures.tilemap import MAX_FRAMES
from flashviz.lesson.steps import INTRO, Result, lesson_markdown, step_settings
from flashviz.measure.trace import PICK_ROWS_MAX, pick_row
from flashviz.units import MIB
from flashviz.views.bench.sentences import slower_by, slower_cases
from flashviz.views.how.claims import tiles_fate
from flashviz.views.masks.data import doc_lengths
from flashviz.vocab import FULL, IMPL_LABELS, PARTIAL, SKIPPED
from tests._apptest import assert_clean, chart, decode, done_grid, subtitle, tile_map, tiles_computed
from tests._numbers import counted, shows, stated

ROOT = Path(__file__).resolve().parents[1]
LESSON_DOC = (ROOT / "docs" / "lesson.md").read_text()
STEPS = {step.check: (k, step) for k, step in enumerate(INTRO.steps, 1)}  # check name -> (k, Step)
TINY_GRID = "Tiny grid for the whiteboard"
SLIDING = "Sliding window"
IO_NAMES = {"naive": "naive (standard attention)", "kv_outer": "FlashAttention-1 (kv_outer)",
            "q_outer": "FlashAttention-2 (q_outer)"}


@functools.cache
def checked(name: str) -> Result:
    """The step's check at its settings, run once per test session (the memory step measures for seconds)."""
    return STEPS[name][1].run_check()


def open_slide(make_app, name: str):
    """The dashboard at `?lesson=intro&step=k` for the step whose check is `name`: its slide."""
    k, _ = STEPS[name]
    at = make_app(lesson=INTRO.slug, step=str(k))
    assert_clean(at)
    assert not at.session_state[EXPLORING_KEY]
    return at


def open_step(make_app, name: str):
    """The step whose check is `name`, its view explored from its slide: its settings, its view, its claim."""
    k, step = STEPS[name]
    at = open_slide(make_app, name)
    at.button(key=EXPLORE_KEY).click().run()
    assert_clean(at)
    assert at.session_state[PRESENTING_KEY] == (INTRO.slug, k)
    assert {key: at.query_params[key] for key in step.query} == step.query  # the step's own link, as loaded
    (callout,) = [box.value for box in at.info if step.text in box.value]  # the claim, as the class reads it
    assert f"Step {k} of {len(INTRO.steps)}" in callout
    return at


def markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def with_preset(make_app, name: str, view: str = "how"):
    at = make_app(view=view)
    at.selectbox(key="preset").set_value(name).run()
    assert_clean(at)
    return at


# ----------------------------------------------------------------------------------------------------------------------
# the lesson as data


@pytest.mark.parametrize("name", list(STEPS))
def test_every_check_confirms_its_claim_at_the_steps_settings(name):
    _, step = STEPS[name]
    result = checked(name)
    assert result.holds, result.why
    assert step.said_by(result) == step.text  # the numbers the class reads are the check's
    assert step.confirmed(result)


def test_a_claim_is_not_confirmed_when_its_check_fails_or_finds_other_numbers():
    _, step = STEPS["tiles_fate"]
    unmasked = tiles_fate(replace(step_settings(step), causal=False))  # no tile skipped: the claim is false there
    assert not unmasked.holds and "no tile is skipped" in unmasked.why and not step.confirmed(unmasked)
    other = Result({**checked("tiles_fate").values, "computed": 11}, True)  # true, but not what the text says
    assert not step.confirmed(other)


@pytest.mark.parametrize("k", range(1, len(INTRO.steps) + 1))
def test_every_step_is_a_link_the_dashboards_parser_reads_without_a_repair(k):
    step = INTRO.steps[k - 1]
    settings, notices = parse_query(step.query)
    assert notices == [] and settings.view == step.view
    assert settings == step_settings(step)


def test_the_whiteboard_steps_are_the_tiny_grid_preset():
    tiny = apply_preset(Settings(), TINY_GRID)
    for name in ("tiles_fate", "online_softmax"):
        assert step_settings(STEPS[name][1]) == tiny  # the preset keeps the view: How it works, both


def test_the_lesson_covers_every_idea_and_takes_ten_to_fifteen_minutes():
    ideas = {"scores_softmax", "tiles_fate",
             "online_softmax", "causal_halves", "masks_tiles", "io_passes", "roofline_gpu",
             "memory_growth", "training_recompute", "decode_merge", "gqa_bytes"}
    assert ideas <= set(STEPS)  # later steps may add ideas (the backward pass, numerics)
    assert 10 <= sum(step.minutes for step in INTRO.steps) <= 15
    assert len({step.title for step in INTRO.steps}) == len(INTRO.steps)


def test_the_problem_comes_before_the_cure():
    order = [step.check for step in INTRO.steps]
    assert order[:3] == ["scores_softmax", "memory_growth", "tiles_fate"]  # S and P, their N² memory, then tiles
    assert order.index("memory_growth") < min(order.index(c) for c in ("tiles_fate", "online_softmax", "io_passes"))


def test_the_readme_and_the_lesson_give_the_same_minutes():
    minutes = sum(step.minutes for step in INTRO.steps)
    readme = (ROOT / "README.md").read_text()
    stated = {int(m) for m in re.findall(r"(\d+)-minute lesson", readme)}
    assert stated == {round(minutes)}, f"README says {stated}-minute, the lesson takes {minutes}"
    assert f"{len(INTRO.steps)} steps, {round(minutes)}:00." in LESSON_DOC


@pytest.mark.parametrize("name", list(STEPS))
def test_every_slide_shows_the_numbers_its_claim_states_and_one_picture(make_app, name):
    k, step = STEPS[name]
    at = open_slide(make_app, name)
    assert step.numbers, f"step {k}: a slide shows the numbers its claim states"
    shown = [(m.label, m.value) for m in at.metric]
    assert shown == step.figures(checked(name).values) == step.figures(step.stated)  # the check's, as stated
    (callout,) = [box.value for box in at.info if box.value.startswith(f"**Step {k} of")]
    assert callout.endswith(step.text)
    assert len(at.get("plotly_chart")) == 1 and name in PICTURES  # its one picture, and no view under it
    assert tiles_computed(at) == [] and not any('class="fv-tilemap"' in m.value for m in at.markdown)


def test_the_tile_slides_picture_counts_every_fate_once(make_app):
    """The tile maps of the tiling and causal steps: a tile's colour is its fate (no tile in progress drawn over one),
    so each count the slide states is the number of tiles of that colour."""
    v = checked("tiles_fate").values
    z = decode(chart(open_slide(make_app, "tiles_fate"), "Tiles of S")["data"][0]["z"])
    assert [int((z == STATUS_CODE[s]).sum()) for s in (FULL, PARTIAL, SKIPPED)] == \
        [v["full"], v["partial"], v["skipped"]]
    v = checked("causal_halves").values
    z = decode(chart(open_slide(make_app, "causal_halves"), "Tiles of S")["data"][0]["z"])
    tr = 1024 // 64
    assert [int((z == STATUS_CODE[s]).sum()) for s in (FULL, PARTIAL, SKIPPED)] == \
        [v["computed"] - tr, tr, v["skipped"]]  # the oracle: the diagonal is partial, below it full


def test_the_memory_slide_measures_as_it_opens_and_draws_the_peaks_it_measured(make_app):
    v = checked("memory_growth").values
    at = open_slide(make_app, "memory_growth")  # no Run button: the slide ran the check
    spec = chart(at, "Peak memory vs sequence length")
    drawn = {trace["name"]: [round(y * MIB) for y in decode(trace["y"])] for trace in spec["data"]}
    assert drawn["naive"][-1] == v["peaks"]["naive"][v["n"]]
    assert (at.metric[0].label, at.metric[0].value) == (f"Standard attention at N = {v['n']:,}", v["naive_peak"])


def test_the_first_slide_draws_s_and_p_whose_rows_sum_to_1(make_app):
    v = checked("scores_softmax").values
    at = open_slide(make_app, "scores_softmax")
    spec = chart(at, "Standard attention at N = 16")
    s, p = (decode(trace["z"]).astype(float) for trace in spec["data"])
    q, k, _ = _row_inputs()  # the oracle: S from the same seeded Q and K, P its softmax, in float64
    oracle = (q[0, 0].double() @ k[0, 0].double().T) / math.sqrt(8)
    assert np.allclose(s, oracle.numpy(), atol=1e-5)
    assert np.allclose(p, torch.softmax(oracle, -1).numpy(), atol=1e-6)
    assert np.allclose(p.sum(1), 1, atol=1e-6) and v["scores"] == s.size == 256


def test_the_lesson_data_imports_neither_torch_nor_streamlit():
    code = (f"import sys, json; sys.path.insert(0, {str(ROOT)!r}); import flashviz.lesson.steps as L\n"
            "steps = [L.step_settings(s).view for s in L.INTRO.steps]\n"
            "print(json.dumps([m for m in ('torch', 'streamlit', 'pandas') if m in sys.modules]))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == []


def test_the_docs_lesson_is_written_from_the_data():
    assert lesson_markdown(INTRO) in LESSON_DOC, "run: python -m flashviz.lesson --write docs/lesson.md"
    for k, step in enumerate(INTRO.steps, 1):  # each step with both its links and its claim
        assert f"`{step.link}`, in the lesson `?lesson=intro&step={k}`" in LESSON_DOC
        assert f"> {step.text}" in LESSON_DOC


# ----------------------------------------------------------------------------------------------------------------------
# each step on the page: the numbers the page shows are the check's


def test_tiles_fate_the_map_shows_every_tiles_fate_before_play(make_app):
    at, v = open_step(make_app, "tiles_fate"), checked("tiles_fate").values
    m = tile_map(at)
    assert f"{v['tiles']} tiles, {v['computed']} computed · causal" in m.subtitle
    assert len(m.panels) == 2  # FA1 and FA2 side by side
    tr = 16 // 4
    oracle = {(i, j): FULL if j < i else PARTIAL if j == i else SKIPPED for i in range(tr) for j in range(tr)}
    for panel in m.panels:  # before Play: the first tile current, every other tile pale in the colour of its fate
        assert panel.frames[0]["current"] == (0, 0) and not any(done_grid(panel, 0).values())
        fates = {ij: t["fate"] for ij, t in panel.tiles.items()}
        assert fates == oracle
        assert [sum(f == s for f in fates.values()) for s in (FULL, PARTIAL, SKIPPED)] == \
            [v["full"], v["partial"], v["skipped"]]
    assert m.frames == v["computed"] and tiles_computed(at) == [v["computed"]] * 2
    third = [p.frames[2]["counter"][0] for p in m.panels]  # FA1 goes down a column, FA2 along a row
    assert "i=2, j=0" in third[0] and "i=1, j=1" in third[1]


def test_online_softmax_the_inspector_shows_the_rescales_and_the_exact_logsumexp(make_app):
    at, v = open_step(make_app, "online_softmax"), checked("online_softmax").values
    row = chart(at, "Row inspector")
    assert f"Picked automatically: row {v['row']}: the most rescales ({v['rescales']} of {v['tiles']} tiles)" in \
        subtitle(row)
    assert all(p.row_marker["row"] == v["row"] for p in tile_map(at).panels)  # the map marks the same row
    (caption,) = [c.value for c in at.markdown if c.value.startswith(f"Row {v['row']} was picked automatically")]
    assert f"m grew on {v['rescales']} of its {v['tiles']} tiles" in caption
    kernel, exact = (float(x) for x in re.findall(r"(-?\d+\.\d{6})", caption)[-2:])
    assert kernel == pytest.approx(v["lse"], abs=1e-6) and exact == pytest.approx(v["exact"], abs=1e-6)
    q, k, _ = _row_inputs()  # the oracle: the row's logsumexp in float64, from the scores themselves
    s = (q[0, 0, v["row"]].double() @ k[0, 0].double().T) / math.sqrt(8)
    assert float(torch.logsumexp(s[: v["row"] + 1], 0)) == pytest.approx(kernel, abs=2e-6)  # causal: keys j <= r


def _row_inputs():
    """The random Q, K, V the row inspector runs the kernel on (flashviz.measure.trace: seed 0, N = 16, d = 8)."""
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(1, 1, 16, 8, generator=g) for _ in range(3))


def test_causal_halves_the_tiles_and_the_traffic_on_the_page(make_app):
    at, v = open_step(make_app, "causal_halves"), checked("causal_halves").values
    tr = 1024 // 64
    assert v["computed"] == tr * (tr + 1) // 2 and v["tiles"] == tr * tr  # the oracle: the lower triangle
    assert tiles_computed(at) == [v["computed"]] and f"{v['computed']} computed" in tile_map(at).subtitle
    assert at.metric[1].value == v["traffic"]  # FA1's HBM traffic per head
    at.toggle(key="causal").set_value(False).run()  # the sidebar's toggle, as the teacher does
    assert_clean(at)
    assert tiles_computed(at) == [v["tiles"]] and at.metric[1].value == v["unmasked"]
    assert at.session_state[PRESENTING_KEY] == (INTRO.slug, STEPS["causal_halves"][0])  # still presenting


def test_masks_tiles_the_tile_map_and_the_block_mask_check_on_the_page(make_app):
    at, v = open_step(make_app, "masks_tiles"), checked("masks_tiles").values
    z = decode(chart(at, "Tile map")["data"][0]["z"])
    computed = int((z != STATUS_CODE[SKIPPED]).sum())
    assert (computed, z.size) == (v["computed"], v["tiles"])
    lengths = doc_lengths("mixed", 1024)  # the oracle: document ids, the element mask, its 64 x 64 tiles
    assert len(lengths) == v["docs"]
    doc = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))  # (N,)
    i, j = torch.arange(1024)[:, None], torch.arange(1024)[None, :]
    visible = (doc[:, None] == doc[None, :]) & (j <= i)  # (N, N)
    assert int(visible.view(16, 64, 16, 64).any(dim=3).any(dim=1).sum()) == computed
    assert f"**{v['computed']} of {v['tiles']} tiles computed ({v['share']:.1%})**" in markdown(at)
    assert any(s.value.startswith("**Equal to create_block_mask: yes.**") for s in at.success) == (v["equal"] == "yes")


def io_curves(at) -> dict[str, dict[int, float]]:
    spec = chart(at, "HBM accesses vs on-chip memory M")
    out = {}
    for key, name in IO_NAMES.items():
        (trace,) = [t for t in spec["data"] if t.get("name") == name]
        out[key] = dict(zip(decode(trace["x"]).astype(int).tolist(), decode(trace["y"]).astype(float), strict=True))
    return out


def test_io_passes_the_curves_halve_with_m_and_flatten_from_4dn(make_app):
    at, v = open_step(make_app, "io_passes"), checked("io_passes").values
    curves, n, d = io_curves(at), 4096, 64
    naive, fa1, fa2 = curves["naive"], curves["kv_outer"], curves["q_outer"]
    assert set(naive.values()) == {4 * n * d + 4 * n**2} and 4 * n * d + 4 * n**2 == pytest.approx(v["naive"] * 1e6)
    for curve, key in ((fa1, "fa1"), (fa2, "fa2")):
        ms = sorted(curve)
        assert curve[ms[1]] / curve[ms[0]] == pytest.approx(v[f"{key}_ratio"])
        assert all(curve[b] <= curve[a] for a, b in itertools.pairwise(ms))  # never rises
        assert all(curve[m] == curve[v["flat"]] for m in ms if m >= v["flat"]) and curve[v["flat"] // 2] > \
            curve[v["flat"]]
    assert v["flat"] == 4 * d * n
    assert (fa1[v["flat"]], fa2[v["flat"]]) == (6 * n * d + 6 * n, 4 * n * d + n)  # one pass: the formulas
    assert (fa1[v["flat"]], fa2[v["flat"]]) == (pytest.approx(v["fa1"] * 1e6), pytest.approx(v["fa2"] * 1e6))
    assert all(fa2[m] < fa1[m] for m in fa1)
    text = markdown(at)
    flat = text.split("**Standard attention**")[1]
    assert shows(stated(flat, "flat"), (4 * n * d + 4 * n**2) / 1e6)  # elements, in millions: one value at every M
    assert "**FA2 is below FA1 at every M shown**" in text  # the verdict of all(fa2 < fa1) above


def test_io_passes_with_causal_the_flash_curves_start_at_half_and_meet_the_unmasked_ones(make_app):
    plain = io_curves(open_step(make_app, "io_passes"))
    at = make_app(**{**STEPS["io_passes"][1].query, "causal": "1"})  # the step's Try: switch on the causal mask
    causal = io_curves(at)
    assert causal["naive"] == plain["naive"]
    m_small, m_flat = 2**10, 4 * 64 * 4096
    for key in ("kv_outer", "q_outer"):
        assert causal[key][m_small] / plain[key][m_small] == pytest.approx(0.5, abs=0.01)
        assert all(causal[key][m] == plain[key][m] for m in causal[key] if m >= m_flat)
        assert all(causal[key][m] < plain[key][m] for m in causal[key] if m < m_flat)
    assert markdown(at).count("With the mask it starts at 0.50 × the unmasked value and meets it from M = "
                              "1,048,576") == 2


def test_roofline_gpu_the_bound_table_and_the_speedup_bars_say_the_checks_numbers(make_app):
    at, v = open_step(make_app, "roofline_gpu"), checked("roofline_gpu").values
    n, d = 4096, 64
    assert v["intensity"] == pytest.approx(n * d / (2 * (d + n)))  # 4N²d FLOPs over (4Nd + 4N²) fp16 elements
    text = markdown(at)
    (row,) = [line for line in text.splitlines() if line.startswith(f"| {v['gpu']} (SXM) | {v['dtype']} |")]
    assert f"| {v['ridge']:.3g} · " in row and f"FLOP/byte | HBM-bound (I = {v['intensity']:.3g}, L2 I = " in row
    assert v["naive_bound"] == "memory" and v["fa2_bound"] == v["fa1_bound"] == "L2"  # the claim's regimes
    assert f"- **{v['gpu']} (SXM)**: FA1 {v['fa1']:.2f}×, FA2 {v['fa2']:.2f}×." in text
    bars = {t["name"]: dict(zip(t["x"], decode(t["y"]).astype(float), strict=True))
            for t in chart(at, "Speedup over naive")["data"] if t.get("type") == "bar"}
    assert bars["FA2: predicted (model)"][v["gpu"]] == pytest.approx(v["fa2"])
    assert bars["FA1: predicted (model)"][v["gpu"]] == pytest.approx(v["fa1"])


def test_memory_growth_the_benchmarks_memory_chart_has_the_checks_peaks(make_app):
    at = open_step(make_app, "memory_growth")
    at.button(key="bench_run").click().run()
    assert_clean(at)
    v = checked("memory_growth").values
    shown = {t["name"]: dict(zip(decode(t["x"]).astype(int).tolist(), decode(t["y"]).astype(float), strict=True))
             for t in chart(at, "Peak memory vs sequence length")["data"] if "not run" not in t["name"]}
    for impl, peaks in v["peaks"].items():  # MiB on the chart, bytes from the check: the same allocator events
        assert shown[IMPL_LABELS[impl]] == {n: pytest.approx(b / MIB, rel=1e-9) for n, b in peaks.items()}, impl
    for n, peak in v["peaks"]["naive"].items():  # the oracle: naive holds S and P (B H N² fp32 each), the tiled
        assert 2 * 4 * n * n * 4 <= peak < 2.2 * 4 * n * n * 4  # kernels less than one of them
        assert all(v["peaks"][impl][n] < 4 * n * n * 4 for impl in ("flash", "flash2"))
    df = next(d.value for d in at.dataframe if "time_s" in d.value.columns)
    slow = slower_cases(df)  # slower beyond the noise (the medians' 95% intervals separate)
    captions = [c.value for c in at.markdown if "slower than naive" in c.value]
    assert bool(captions) == bool(slow)  # whichever way this machine's timings went
    for n, _, v in slow:
        assert f"{v.slower} at N = {n} ({slower_by(v)})" in captions[0]  # the factor with its interval


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


def test_training_recompute_what_each_keeps_and_the_price_on_the_page(make_app):
    n = 64  # the oracle: what autograd really keeps
    assert (1, 1, n, n) in saved_shapes(naive_attention, n)  # P, N x N
    flash = saved_shapes(lambda q, k, v: flash_attention(q, k, v, block_q=16, block_k=16), n)
    assert flash and all(n * n not in (math.prod(s), *s[-2:]) for s in flash if len(s) >= 2)  # no N x N tensor
    at, v = open_step(make_app, "training_recompute"), checked("training_recompute").values
    table = chart(at, "Backward: FLOPs added, memory saved")["data"][0]["cells"]["values"]
    assert table[0] == ["512", "1024", "2048"] and set(table[4]) == {f"{100 * v['extra']:.0f}"}
    assert float(table[5][-1]) == pytest.approx(float(v["p"].split()[0]))  # P MiB at N = 2048
    text = markdown(at)
    assert f"**{100 * v['extra']:.0f}% more backward FLOPs**" in text and f"{v['gflop']:,.2f} GFLOP more" in text
    assert f"{v['batch']} × {v['heads']} × {v['n']}² {v['dtype']}" in text and f"{v['p']})" in text
    assert f"logsumexp L ({v['lse']})" in text


def test_decode_merge_the_animations_merge_frame_has_the_checks_numbers(make_app):
    at, v = open_step(make_app, "decode_merge"), checked("decode_merge").values
    fig = chart(at, "One decode step")
    (merge,) = [f for f in fig["frames"] if f["name"] == "merge"]
    weights = decode(merge["data"][-1]["y"]).astype(float)
    lse_s = np.array([c[1] for c in fig["data"][2 * v["splits"] + 1]["customdata"]], dtype=float)  # the merge bars
    assert len(weights) == len(lse_s) == v["splits"]
    merged = float(np.logaddexp.reduce(lse_s))  # the oracle: L = log sum_s exp(L_s), in float64 here
    assert merged == pytest.approx(v["lse"], abs=1e-5)
    assert np.allclose(weights, np.exp(lse_s - merged), atol=1e-6) and weights.sum() == pytest.approx(v["weights"])
    assert f"L = log Σ exp(L_s) = {v['lse']:.4g}" in merge["layout"]["title"]["subtitle"]["text"]
    assert f"**{v['keys']} keys in" in markdown(at) and f"**S = {v['splits']} split(s)**" in markdown(at)


def test_gqa_bytes_the_decode_story_and_table_have_the_checks_numbers(make_app):
    at, v = open_step(make_app, "gqa_bytes"), checked("gqa_bytes").values
    lens, d = (16384, round(16384 / 3)), 64  # the step's batch: N and N/3; the oracle: 2 H_kv N d fp32 bytes
    assert v["gqa"] == f"{2 * v['hkv'] * sum(lens) * d * 4 / MIB:.1f} MiB"
    assert v["mha"] == f"{2 * v['hq'] * sum(lens) * d * 4 / MIB:.1f} MiB"
    text = markdown(at)
    # the story's numbers: MHA's heads and K/V bytes, this step's K/V heads, and the bytes ratio, H_q / H_kv
    (story,) = re.findall(r"\*\*GQA reads fewer bytes\.\*\*[^\n]*", text)
    assert shows(stated(story, r"H_kv = H_q ="), v["hq"])
    written, unit = re.search(r"H_kv = H_q = \d+: (\S+) (MiB|GiB)\)", story).groups()
    assert shows(written, 2 * v["hq"] * sum(lens) * d * 4 / {"MiB": MIB, "GiB": 1024 * MIB}[unit])
    assert shows(counted(story, r"K/V head\(s\) read"), v["hkv"])
    assert shows(counted(story, r"× fewer K/V bytes"), v["hq"] / v["hkv"])
    assert v["ratio"] == pytest.approx(v["hq"] / v["hkv"])
    table = next(df.value for df in at.dataframe if "K/V per step (MiB)" in df.value.columns).set_index("variant")
    mib, gqa = table["K/V per step (MiB)"], f"GQA (g = {v['g']})"
    assert mib["MHA"] / mib[gqa] == pytest.approx(v["ratio"]) and f"{mib[gqa]:.1f} MiB" == v["gqa"]


def test_backward_recompute_the_views_traffic_rows_and_dq_say_the_checks_numbers(make_app):
    at, v = open_step(make_app, "backward_recompute"), checked("backward_recompute").values
    text = markdown(at)
    scale = next(line for line in text.splitlines() if "(the sidebar's sizes): tiled" in line)
    assert f"At N = {v['n']}, d = {v['d']}, Br = Bc = {v['block']}" in scale and f"{v['saving']:.2f}× less" in scale
    # the oracle: standard attention's backward (FA1 Algorithm 3) moves Theta(N^2) elements, the tiled one Theta(N d)
    # per pass of K/V: at 4096 x 64 in 128-wide tiles the ratio must be well above 1
    assert v["saving"] > 4
    assert f"sum to 1 within {v['row_err']:.1e}" in text
    assert "**bitwise-equal dQ**" in text and f"changes {v['reordered']} of the {v['values']} entries" in text
    assert f"(+{v['extra']:.0%})" in text  # FLOPs: atomic -> deterministic, in the dq table


def test_numerics_rounding_the_views_sentences_say_the_checks_numbers(make_app):
    at, v = open_step(make_app, "numerics_rounding"), checked("numerics_rounding").values
    text = markdown(at)
    assert f"({v['gap']:.0f} eps; " in text and "neither is wrong" in text
    assert f"With tau = {v['tau']:.0f}, FA2 rescales {v['lazy']} times instead of {v['classic']}" in text
    off, on = (float(x) for x in re.search(r"lowers FA3's FP8 \(e4m3\) RMSE from ([\d.e-]+) to ([\d.e-]+)",
                                           text).groups())
    assert off / on == pytest.approx(v["gain"], rel=0.05)  # the page's rounded RMSEs against the check's ratio


# ----------------------------------------------------------------------------------------------------------------------
# the How it works row inspector and tile map, at every preset


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
    at.toggle(key="auto_row").set_value(False).run()
    assert not at.number_input(key="row").disabled and at.number_input(key="row").value == shown
    at.number_input(key="row").set_value(3).run()
    assert_clean(at)
    assert "Row 3, chosen by hand" in " ".join(c.value for c in at.markdown)
    assert tile_map(at).panels[0].row_marker["row"] == 3
    assert "Picked automatically" not in subtitle(chart(at, "Row inspector"))


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
# the presets: each sets every setting it depends on, and its story is true


OTHER = Settings(n=97, d=111, br=8, bc=16, link=False, causal=True, window=(5, 3), order="fa2", dtype="float64",
                 batch=3, heads=7, row=50, auto_row=False, frame=33, ns=(128,), impls=("sdpa",), bench_block=8, reps=1,
                 blocks=(4,), correct_ds=(8,), correct_ns=(16,))


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
    assert f"among up to {PICK_ROWS_MAX} rows" in spec_of("auto_row").help


def test_the_sliding_window_preset_then_causal_computes_150_instead_of_268_tiles(make_app):
    at = with_preset(make_app, SLIDING)
    assert tiles_computed(at) == [268] and "268 computed" in tile_map(at).subtitle
    before = at.metric[1].value
    at.toggle(key="causal").set_value(True).run()
    assert_clean(at)
    assert tiles_computed(at) == [150] and "150 computed" in tile_map(at).subtitle
    assert float(at.metric[1].value.split()[0]) < float(before.split()[0]) and at.metric[1].value.split()[1] == \
        before.split()[1]


def test_the_roofline_slide_draws_the_regimes_its_claim_names():
    """Step 6 says naive is HBM-bound and the tiled kernels L2-bound: the slide's legend says the same from the
    check's numbers, and each L2-bound kernel's hollow point sits on the L2 roof at its FLOPs per L2 byte."""
    from flashviz.model.roofline import H100

    step = INTRO.step("roofline_gpu")
    s, v = step_settings(step), checked("roofline_gpu").values
    fig = PICTURES["roofline_gpu"](s, v)
    names = [t.name for t in fig.data if t.name and ":" in t.name]
    word = {"memory": "HBM", "L2": "L2", "compute": "compute"}
    assert names == [f"naive: {word[v['naive_bound']]}-bound", f"FA1: {word[v['fa1_bound']]}-bound",
                     f"FA2: {word[v['fa2_bound']]}-bound"]
    hollow = [t for t in fig.data if t.mode == "markers" and t.marker.color == "white"]
    assert len(hollow) == [v["fa1_bound"], v["fa2_bound"]].count("L2") == 2
    for t in hollow:  # on the L2 roof: attained TFLOP/s = FLOPs per L2 byte x L2 bandwidth (below the peak)
        assert t.y[0] == pytest.approx(min(t.x[0] * H100.l2_bandwidth, H100.peak(s.gpu_dtype)) / 1e12, rel=1e-9)
