"""The Masks view's data and figures, without the app: document patterns always sum to N, the element map holds the
exact fraction visible, the tile grid counts the work inside computed tiles, bad names are refused with the choices,
and every figure carries its numbers in fonts a projector shows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention.flex_attention import create_mask

from flashviz.core.tiling import tile_schedule
from flashviz.figures.tilegrid import tile_map_figure
from flashviz.masks import causal_mask
from flashviz.units import format_bytes
from flashviz.views.masks.data import MaskSpec, build_mask, doc_lengths, element_map, score_curves, tile_grid
from flashviz.views.masks.figures import (
    block_mask_table_figure,
    element_mask_figure,
    masked_run_figure,
    score_mod_figure,
    sparsity_time_figure,
)
from flashviz.views.masks.presets import DOC_PATTERNS
from flashviz.views.masks.sentences import run_md, sweep_md
from tests._numbers import says

FONT_MIN_PX = 16  # readable on a projector


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(DOC_PATTERNS)), st.integers(1, 16384))
def test_document_patterns_always_sum_to_n(pattern, n):
    lengths = doc_lengths(pattern, n)
    assert sum(lengths) == n and all(x >= 1 for x in lengths) and len(lengths) <= len(DOC_PATTERNS[pattern].ratios)
    build_mask(MaskSpec("document", docs=pattern), n)  # document() accepts them: no length error can reach the page


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 300), st.integers(1, 64), st.sampled_from(["causal", "dilated", "document", "prefix_lm"]))
def test_element_map_cells_hold_the_exact_fraction_visible(n, cells_max, preset):
    mask = build_mask(MaskSpec(preset, window=7, dilation=3, prefix=5, docs="growing"), n).mask_mod
    m = element_map(mask, n, cells_max=cells_max)
    dense = create_mask(mask, 1, 1, n, n, device="cpu")[0, 0].double()
    assert m.visible == int(dense.sum()) and m.fraction.shape[0] <= cells_max
    c = m.cell
    for i in range(m.fraction.shape[0]):
        for j in range(m.fraction.shape[1]):
            assert m.fraction[i, j] == pytest.approx(dense[i * c:(i + 1) * c, j * c:(j + 1) * c].mean().item())


def test_tile_grid_counts_the_work_inside_computed_tiles():
    g = tile_grid(tile_schedule(100, 100, 32, 32, mask_mod=causal_mask))
    sched = tile_schedule(100, 100, 32, 32, mask_mod=causal_mask)
    assert g.computed_elements == sum(t.rows * t.cols for t in sched if t.status != "skipped")
    assert g.counts == sched.counts() and g.computed == g.tiles - g.counts["skipped"]


def test_build_mask_refuses_unknown_names_with_the_choices():
    with pytest.raises(ValueError, match="mask preset must be one of causal, sliding_window"):
        build_mask(MaskSpec("evil"), 16)
    with pytest.raises(ValueError, match="combine must be one of none, and, or"):
        build_mask(MaskSpec(combine="xor"), 16)
    with pytest.raises(ValueError, match="document pattern must be one of"):
        doc_lengths("1,2,3", 16)


# ----------------------------------------------------------------------------------------------------------------------
# figures


def fonts(obj) -> list[int]:
    """Every font size set anywhere in a figure's JSON."""
    found = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ("font", "tickfont") and isinstance(value, dict) and "size" in value:
                found.append(value["size"])
            found += fonts(value)
    elif isinstance(obj, list):
        for value in obj:
            found += fonts(value)
    return found


def assert_readable(fig) -> None:
    spec = fig.to_plotly_json()
    assert spec["layout"]["title"]["text"]
    sizes = fonts(spec) + fonts(fig.layout.template.to_plotly_json())
    assert sizes and min(sizes) >= FONT_MIN_PX, sizes


def test_element_figure_exact_and_downsampled():
    exact = element_mask_figure(np.tril(np.ones((8, 8))), n=8, cell=1, visible_fraction=36 / 64, tile_q=4, tile_k=4)
    assert_readable(exact)
    assert exact.layout.xaxis.title.text == "key position j" and exact.layout.yaxis.title.text == "query position i"
    assert not exact.data[0].showscale and [t.name for t in exact.data[1:]] == ["visible", "masked"]
    assert "56.2% of the 8² pairs visible<br>one pixel per element" in exact.layout.title.subtitle.text
    assert len(exact.layout.shapes) == 2  # one tile boundary across, one down
    assert "visible: %{z:.0%}" in exact.data[0].hovertemplate
    coarse = element_mask_figure(np.full((4, 4), 0.5), n=16, cell=4, visible_fraction=0.5)
    assert coarse.data[0].showscale and coarse.data[0].colorbar.orientation == "h"
    # the colour bar's title above the bar, not beside it: beside a horizontal bar it shares the row of the tick
    # labels, and the first one ("0%", centred on the bar's end) reaches into it (the browser test checks the boxes)
    assert coarse.data[0].colorbar.title.text == "visible" and coarse.data[0].colorbar.title.side == "top"
    assert "4 × 4 elements per pixel" in coarse.layout.title.subtitle.text
    assert list(coarse.data[0].x) == [1.5, 5.5, 9.5, 13.5]  # cell centres, in tokens


def test_tile_map_figure_codes_hover_and_legend():
    status = tile_schedule(6, 6, 2, 2, mask_mod=causal_mask).status_grid()
    fig = tile_map_figure(status, n=6, block_q=2, block_k=2, counts={"full": 3, "partial": 3, "skipped": 3})
    assert_readable(fig)
    assert fig.data[0].z.tolist() == [[1, 2, 2], [0, 1, 2], [0, 0, 1]]
    assert fig.data[0].text[1][0] == "full: computed, no mask" and "%{text}" in fig.data[0].hovertemplate
    assert [t.name for t in fig.data[1:]] == ["3 full", "3 partial", "3 skipped"]
    assert "6 of 9 tiles computed (66.7%)" in fig.layout.title.subtitle.text
    assert list(fig.layout.yaxis.range) == [2.5, -0.5]  # query block 0 on top, as in the element mask


def test_block_mask_table_figure_lists_rows_and_truncates_long_index_lists():
    rows = [{"q_block": 0, "kv_num_blocks": 12, "kv_indices": list(range(12)), "full_kv_num_blocks": 0,
             "full_kv_indices": []}]
    fig = block_mask_table_figure(rows, n_q_blocks=5)
    assert_readable(fig)
    cells = fig.data[0].cells.values
    assert list(cells[2]) == ["[0, 1, 2, 3, 4, 5, ... 6 more]"] and list(cells[4]) == ["[]"]
    assert "the first 1 of 5 query blocks" in fig.layout.title.subtitle.text
    short = [{**rows[0], "kv_num_blocks": 1, "kv_indices": [0]}]
    wide = [{**rows[0], "kv_indices": list(range(100, 112))}]  # "[100, 101, ...]" wraps: the table grows for it
    assert block_mask_table_figure(wide, n_q_blocks=5).layout.height > block_mask_table_figure(
        short, n_q_blocks=5).layout.height


def test_score_mod_figures():
    curves = score_curves(MaskSpec(score="softcap", cap=5), 64, 1)
    soft = score_mod_figure(curves, kind="softcap", cap=5)
    assert_readable(soft)
    assert soft.layout.xaxis.title.text and soft.layout.yaxis.title.text
    assert max(soft.data[0].y) < 5 and min(soft.data[0].y) > -5
    ali = score_mod_figure(score_curves(MaskSpec(score="alibi"), 64, 12), kind="alibi", heads=12, n=64)
    assert_readable(ali)
    assert len(ali.data) == 8 and "The first 8 of 12 heads" in ali.layout.title.subtitle.text
    assert list(ali.layout.xaxis.range) == [-63, 0]


HALF = 0.01  # each median's 95% interval: +-1% of it, from REPEATS calls (intervals that separate where they differ)
REPEATS = 20


def timed(row: dict) -> dict:
    """A row with its median's 95% interval, as the view's runs record it."""
    return {**row, "time_lo_s": row["time_s"] * (1 - HALF), "time_hi_s": row["time_s"] * (1 + HALF),
            "repeats": REPEATS}


RUNS_UNTIMED = [  # data.masked_runs rows: 64 of 256 tiles computed with the mask, in 8 steps of 8 tiles; 32 unmasked
    {"kind": "masked", "label": "tiled, this mask", "time_s": 0.02, "iqr_s": 0.002, "peak_bytes": 3 << 20,
     "tiles_computed": 64, "tiles": 256, "tiles_partial": 16, "steps": 8, "build_s": 0.01},
    {"kind": "dense", "label": "SDPA, dense mask", "time_s": 0.05, "iqr_s": 0.004, "peak_bytes": 9 << 20,
     "tiles_computed": 256, "tiles": 256, "tiles_partial": 0, "steps": 0, "build_s": 0.003},
    {"kind": "unmasked", "label": "tiled, no mask", "time_s": 0.08, "iqr_s": 0.0, "peak_bytes": 3 << 20,
     "tiles_computed": 256, "tiles": 256, "tiles_partial": 0, "steps": 32, "build_s": 0.002}]
RUNS = [timed(r) for r in RUNS_UNTIMED]


def with_time(runs: list[dict], kind: str, seconds: float, **more) -> list[dict]:
    return [timed({**r, "time_s": seconds, **more}) if r["kind"] == kind else r for r in runs]


def test_run_figures_carry_the_numbers():
    fig = masked_run_figure(RUNS)
    assert_readable(fig)
    time_bars, memory_bars, mark = fig.data
    assert list(time_bars.y) == [20.0, 50.0, 80.0] and list(time_bars.error_y.array) == [1.0, 2.0, 0.0]
    assert list(memory_bars.y) == [3.0, 9.0, 3.0] and list(memory_bars.x) == [r["label"] for r in RUNS]
    assert len(set(time_bars.marker.color)) == 3  # one colour per run
    # the time in proportion to the tiles, on the masked bar: 80 ms x 64 / 256
    assert list(mark.x) == ["tiled, this mask"] and list(mark.y) == [80.0 * 64 / 256]
    # bars of named runs need category axes: on a linear axis plotly draws strings as nothing (empty axes)
    assert fig.layout.xaxis.type == "category" and fig.layout.xaxis2.type == "category"


def test_the_sweep_figure_puts_each_preset_next_to_its_time_in_proportion():
    points = [{"label": "causal", "computed": 0.53, "time_s": 0.04, "iqr_s": 0.0},
              {"label": "document", "computed": 0.2, "time_s": 0.02, "iqr_s": 0.002}]
    fig = sparsity_time_figure(points, unmasked_s=0.08)
    assert_readable(fig)
    bars, marks = fig.data
    assert list(bars.y) == ["no mask · 100%", "causal · 53%", "document · 20%"]  # the unmasked bar first (on top)
    assert list(bars.x) == [80.0, 40.0, 20.0]
    assert list(marks.x) == pytest.approx([80.0, 80.0 * 0.53, 80.0 * 0.2]) and list(marks.y) == list(bars.y)
    assert fig.layout.yaxis.type == "category"


def stated_run(runs: list[dict]) -> tuple[float, ...]:
    """The numbers the run sentence's first paragraph states, computed here from the rows, in the order it states
    them: tiles computed of tiles (%), the masked time; the unmasked tiles and time; the time in proportion (% of the
    unmasked time) and the ratio to it; per computed tile with and without; per kernel step with its steps and tiles
    a step, without."""
    r = {row["kind"]: row for row in runs}
    m, u = r["masked"], r["unmasked"]
    c, n, t, t0 = m["tiles_computed"], m["tiles"], m["time_s"] * 1e3, u["time_s"] * 1e3
    expect = t0 * c / n
    s, c0, s0 = m["steps"], u["tiles_computed"], u["steps"]
    ratio = t / expect  # and its interval: the masked one over the unmasked one's, scaled to the tiles
    low, high = ratio * (1 - HALF) / (1 + HALF), ratio * (1 + HALF) / (1 - HALF)
    return (c, n, 100 * c / n, t, c0, t0, expect, 100 * c / n, t0, ratio, low, high, t / c, t0 / c0,
            t / s, s, c / s, t0 / s0, s0, c0 / s0)


def test_the_run_sentence_when_the_mask_saves_in_proportion_or_better():
    runs = with_time(RUNS, "masked", 0.018)  # 18 ms against 20 ms in proportion (64 / 256 of 80 ms)
    text = run_md(runs)
    assert says(text.split("\n\n")[0], *stated_run(runs)), text
    assert "Why more than in proportion" not in text and "more than in proportion" not in text  # the verdict
    faster = with_time(RUNS, "masked", 0.005)  # 5 ms: 0.25x its 20 ms
    text = run_md(faster)
    assert says(text.split("\n\n")[0], *stated_run(faster)) and "less than in proportion" in text


def test_the_run_sentence_says_why_when_the_masked_kernel_is_slower_than_in_proportion():
    runs = with_time(RUNS, "masked", 0.06, iqr_s=0.001)  # 60 ms: 3x its 20 ms in proportion
    text = run_md(runs)
    assert says(text.split("\n\n")[0], *stated_run(runs)) and "more than in proportion" in text
    why = text.split("**Why more than in proportion here.** ")[1]
    assert "spread" not in why.split("\n\n")[0]  # 40 ms over, the repeats spread 1 ms: not noise
    assert "per step" not in why  # both pack 8: not the reason
    assert says(why.split("\n\n")[0], 16, 64)  # partial tiles of the computed ones: their element masks
    noisy = run_md(with_time(RUNS, "masked", 0.03, iqr_s=0.02))  # 10 ms over, the repeats spread 20 ms
    spread = noisy.split("**Why more than in proportion here.** ")[1].split("\n\n")[0]
    assert "spread" in spread and says(spread.split(". ")[0] + ".", 30 - 20, 20, 0)  # excess; IQRs with, without
    packed = [{**r, "steps": 64} if r["kind"] == "masked" else r for r in with_time(RUNS, "masked", 0.06)]
    steps_why = run_md(packed).split("**Why more than in proportion here.** ")[1].split("\n\n")[0]
    assert says(steps_why.split("without it")[0], 64 / 64, 256 / 32)  # tiles per step: with the mask, without
    # 64 steps against 32 is 2.00x the unmasked kernel's; it took 0.75x (tiles alone: 0.25x): closer to the tiles
    assert "follows its steps" not in steps_why
    steps = [{**r, "steps": 16} if r["kind"] == "masked" else r for r in with_time(RUNS, "masked", 0.04)]
    # 16 steps of 4 tiles against 32 of 8: 0.50x the steps, 0.50x the time (40 ms of 80), 0.25x the tiles
    follows = run_md(steps).split("follows its steps")[1].split(").")[0]
    assert says(follows, 16, 32, 16 / 32, 40 / 80, 64 / 256), follows  # steps, the ratios of steps, time and tiles


def test_the_run_sentence_quotes_memory_and_the_builds_with_the_one_byte_formatter():
    text = run_md(RUNS)
    memory = text.split("Peak memory")[1].split(". ")[0]
    assert memory.count(format_bytes(3 << 20)) == 2 and format_bytes(9 << 20) in memory  # masked, dense, unmasked
    assert says(memory, 3, 9, 3)  # MiB: masked tiled, dense SDPA, unmasked tiled
    builds = text.split("Each mask was built")[1]
    assert says(builds, 10, 2, 3)  # ms: the masked schedule, the unmasked one, the dense boolean mask


SWEEP_UNTIMED = [{"label": "causal", "computed": 0.5, "tiles_computed": 8, "tiles": 16, "tiles_partial": 4, "steps": 4,
          "time_s": 0.02, "iqr_s": 0.0, "build_s": 0.001},
         {"label": "sliding window", "computed": 0.25, "tiles_computed": 4, "tiles": 16, "tiles_partial": 4,
          "steps": 4, "time_s": 0.03, "iqr_s": 0.0, "build_s": 0.002},
         {"label": "no mask", "computed": 1.0, "tiles_computed": 16, "tiles": 16, "tiles_partial": 0, "steps": 4,
          "time_s": 0.04, "iqr_s": 0.0, "build_s": 0.0005}]
SWEEP = [timed(r) for r in SWEEP_UNTIMED]


def test_the_sweep_sentence_counts_the_presets_in_proportion_and_explains_the_others():
    text = sweep_md(SWEEP)  # causal: 20 ms = its 20 ms in proportion; sliding window: 30 ms against 10 ms
    head, *rest = text.split("\n")
    t0 = SWEEP[-1]["time_s"] * 1e3
    assert says(head, 1, 2, 1.2, t0) and head.endswith(": causal.")  # in proportion: 1 of 2 presets, within 1.2x
    (line,) = [x for x in rest if x.startswith("- **sliding window**")]
    window = SWEEP[1]
    expect = t0 * window["tiles_computed"] / window["tiles"]
    ratio = window["time_s"] * 1e3 / expect  # with its interval, from the two rows' intervals
    assert says(line, 100 * window["computed"], window["steps"], window["tiles_computed"] / window["steps"],
                window["time_s"] * 1e3, expect, ratio, ratio * (1 - HALF) / (1 + HALF),
                ratio * (1 + HALF) / (1 - HALF), window["time_s"] * 1e3 / window["steps"]), line
    why = text.split("**Why more than in proportion.**")[1].split("\n\n")[0]
    unmasked = SWEEP[-1]
    assert says(why, unmasked["steps"], unmasked["tiles_computed"] / unmasked["steps"], t0 / unmasked["steps"],
                1, 1), why  # 1 of these 1 presets packs fewer tiles a step (1 against 4)
    best = text.split("\n\n")[-1]
    assert best.startswith("**sliding window**")  # the fewest tiles: 4 of 16
    over = window["time_s"] * 1e3 / t0  # its time over the unmasked kernel's, by the verdict rule: separated
    assert says(best, window["tiles_computed"], window["tiles"], 100 * window["computed"], window["time_s"] * 1e3,
                over, over * (1 - HALF) / (1 + HALF), over * (1 + HALF) / (1 - HALF), t0, window["computed"],
                window["build_s"] * 1e3), best
    every = sweep_md([timed({**SWEEP[1], "time_s": 0.01}), SWEEP[2]])
    assert says(every.split("\n")[0], 1, 1, 1.2, t0) and "\n- **" not in every
