"""The Masks tab's data and figures, without the app: document patterns always sum to N, the element map holds the
exact fraction visible, the tile grid counts the work inside computed tiles, bad names are refused with the choices,
and every figure carries its numbers in fonts a projector shows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention.flex_attention import create_mask

from flashviz.core.tiling import tile_schedule
from flashviz.figures.masks import (
    block_mask_table_figure,
    element_mask_figure,
    masked_run_figure,
    score_mod_figure,
    sparsity_time_figure,
    tile_map_figure,
)
from flashviz.mask_presets import DOC_PATTERNS
from flashviz.masks import causal_mask
from flashviz.measure.maskview import MaskSpec, build_mask, doc_lengths, element_map, score_curves, tile_grid

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


def test_run_figures_carry_the_numbers():
    runs = [{"kind": "masked", "label": "tiled, this mask", "time_s": 0.02, "iqr_s": 0.002, "peak_bytes": 3 << 20},
            {"kind": "dense", "label": "SDPA, dense mask", "time_s": 0.05, "iqr_s": 0.004, "peak_bytes": 9 << 20},
            {"kind": "unmasked", "label": "tiled, no mask", "time_s": 0.08, "iqr_s": 0.0, "peak_bytes": 3 << 20}]
    fig = masked_run_figure(runs)
    assert_readable(fig)
    time_bars, memory_bars = fig.data
    assert list(time_bars.y) == [20.0, 50.0, 80.0] and list(time_bars.error_y.array) == [1.0, 2.0, 0.0]
    assert list(memory_bars.y) == [3.0, 9.0, 3.0] and list(memory_bars.x) == [r["label"] for r in runs]
    assert len(set(time_bars.marker.color)) == 3  # one colour per run
    points = [{"label": "causal", "computed": 0.53, "time_s": 0.04, "iqr_s": 0.0},
              {"label": "document", "computed": 0.2, "time_s": 0.02, "iqr_s": 0.002}]
    fig = sparsity_time_figure(points, unmasked_s=0.08)
    assert_readable(fig)
    assert list(fig.data[0].x) == [0.53, 0.2] and list(fig.data[0].text) == ["causal", "document"]
    assert list(fig.data[1].y) == [0.0, 80.0] and fig.layout.xaxis.tickformat == ".0%"
    assert "%{x:.1%} of tiles computed, %{y:.3g} ms" in fig.data[0].hovertemplate


