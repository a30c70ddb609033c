"""views/how/figures.py: the row inspector, from plain traces (the tile map: test_tilemap.py)."""

import ast
from pathlib import Path

import pytest

from flashviz.core.tiling import tile_schedule
from flashviz.figures import palette
from flashviz.measure.trace import pick_row, row_trace
from flashviz.views.how import figures as rowplots
from flashviz.views.how.figures import row_figure

# ----------------------------------------------------------------------------------------------------------------------
# the row inspector


def computed_steps(schedule) -> list[int]:
    """The schedule positions of its computed tiles, in visiting order: the k-th is the tile map's "tile k"."""
    return [s for s, tile in enumerate(schedule) if tile.status != "skipped"]


def test_row_figure_shows_m_factor_and_the_three_l_values_per_tile():
    pick = pick_row(64, 8, 16, 16, causal=True)
    rows = [row_trace(64, 8, 16, 16, row=pick.row, causal=True, loop_order=o) for o in ("kv_outer", "q_outer")]
    fig = row_figure(rows, n_tiles=10, note=pick.reason)  # 4 x 4 tiles, causal: 10 computed
    by_name = {t.name: t for t in fig.data}
    fa1 = rows[0]
    computed = computed_steps(tile_schedule(64, 64, 16, 16, causal=True))  # the tile map's "tile k/n" counts these
    x = [computed.index(s) + 1 for s in fa1.step]
    assert list(by_name["FA1: m after each tile"].y) == list(fa1.m)
    assert list(by_name["FA1: m before the tile"].y)[1:] == list(fa1.m_before)[1:]
    assert by_name["FA1: m before the tile"].y[0] is None  # -inf before the first tile: nothing drawn
    bars = by_name["FA1: rescale factor"]
    assert list(bars.x) == x and bars.y[0] is None and list(bars.y[1:]) == list(fa1.factor[1:])
    assert list(by_name["FA1: l before the rescale"].y) == list(fa1.l_before)
    assert list(by_name["FA1: l after the rescale"].y) == list(fa1.l_rescaled)
    assert list(by_name["FA1: l after each tile"].y) == list(fa1.l)
    assert "FA2: l after each tile" in by_name and "exact value over the whole row" in by_name
    assert by_name["FA1: m after each tile"].line.color == palette.IMPL_COLORS["flash"]
    assert by_name["FA2: m after each tile"].line.color == palette.IMPL_COLORS["flash2"]
    assert "factor e^(m_old − m_new)" in by_name["FA1: rescale factor"].text[1]


def test_fa1_and_fa2_stay_visible_side_by_side_where_their_values_are_equal():
    pick = pick_row(64, 8, 16, 16, causal=True)
    rows = [row_trace(64, 8, 16, 16, row=pick.row, causal=True, loop_order=o) for o in ("kv_outer", "q_outer")]
    fig = row_figure(rows, n_tiles=10, note=pick.reason)
    by_name = {t.name: t for t in fig.data}
    for what in ("m before the tile", "m after each tile", "l before the rescale", "l after the rescale",
                 "l after each tile"):
        fa1, fa2 = by_name[f"FA1: {what}"], by_name[f"FA2: {what}"]
        points1 = {(x, y) for x, y in zip(fa1.x, fa1.y, strict=True) if y is not None}
        points2 = {(x, y) for x, y in zip(fa2.x, fa2.y, strict=True) if y is not None}
        assert not points1 & points2, what  # no FA1 marker drawn exactly under an FA2 one
        shifts = {round(b - a, 9) for a, b in zip(fa1.x, fa2.x, strict=True)}
        if list(rows[0].tile) == list(rows[1].tile):  # the same tiles: FA2 drawn beside FA1 by the same step
            assert shifts == {round(rowplots.ORDER_GAP, 9)}
    bars = by_name["FA1: rescale factor"], by_name["FA2: rescale factor"]
    assert bars[0].offset + bars[0].width <= bars[1].offset  # the two bars of a tile side by side
    lines = {by_name[f"{o}: m after each tile"].line.dash for o in ("FA1", "FA2")}
    assert len(lines) == 2  # and told apart by their dash, not only their colour
    assert {t.line.dash for t in fig.data if t.name in ("FA1 (kv_outer)", "FA2 (q_outer)")} == lines  # the legend


def test_the_row_inspector_fits_a_1280_by_720_window():
    rows = [row_trace(64, 8, 16, 16, row=40, causal=True, loop_order=o) for o in ("kv_outer", "q_outer")]
    fig = row_figure(rows, n_tiles=10, note="picked")
    assert fig.layout.height <= 720 - 110  # under the subheader and the row controls above it
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    legend_top_px = -fig.layout.legend.y * plot_px  # below the plot's bottom edge
    assert legend_top_px + 2 * 36 <= fig.layout.margin.b  # two legend rows inside the figure


def test_row_figure_marks_the_tiles_where_m_grew_and_says_how_many():
    rows = [row_trace(16, 8, 4, 4, row=15, causal=True, loop_order=o) for o in ("kv_outer", "q_outer")]
    assert rows[0].rescales >= 1
    fig = row_figure(rows, n_tiles=10, note="picked")
    shaded = sorted({(s.x0, s.x1) for s in fig.layout.shapes})
    computed = {tr.loop_order: computed_steps(tile_schedule(16, 16, 4, 4, causal=True, loop_order=tr.loop_order))
                for tr in rows}
    expected = sorted({(computed[tr.loop_order].index(s) + 0.5, computed[tr.loop_order].index(s) + 1.5)
                       for tr in rows for s, g in zip(tr.step, tr.grew, strict=True) if g})
    assert shaded == expected and len(fig.layout.shapes) == 3 * len(expected)  # across the three panels
    assert f"m grew on {rows[0].rescales} of the row's {len(rows[0].step)} tiles" in fig.layout.title.subtitle.text
    assert fig.layout.title.subtitle.text.endswith("picked")
    flat = row_figure([row_trace(16, 8, 4, 4, row=0, causal=True)], n_tiles=10)  # one tile: nothing can grow
    assert "no rescale" in flat.layout.title.subtitle.text and not flat.layout.shapes


def test_row_figure_axis_titles_are_words_that_render():
    fig = row_figure([row_trace(64, 8, 16, 16, row=40, causal=True)], n_tiles=10)
    titles = [fig.layout[f"yaxis{k}"].title.text for k in ("", "2", "3")]
    assert all(len(t) >= 3 for t in titles), titles  # a lone rotated "l" reads as a dash on screen
    assert "computed tile k of 10" in fig.layout.xaxis3.title.text and tuple(fig.layout.xaxis.range) == (0.5, 10.5)
    assert fig.layout.title.text.startswith("Row inspector: query row 40")
    assert min(a.font.size for a in fig.layout.annotations) >= 16 and fig.layout.legend.font.size >= 16
    with pytest.raises(ValueError, match="at least one RowTrace"):
        row_figure([], n_tiles=4)


@pytest.mark.parametrize("module", [rowplots])
def test_the_row_figure_imports_neither_torch_nor_streamlit(module):
    tree = ast.parse(Path(module.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and node.module and not _type_checking_only(tree, node)}
    assert not imported & {"torch", "streamlit"}, imported


def _type_checking_only(tree: ast.Module, node: ast.ImportFrom) -> bool:
    """True for imports under `if TYPE_CHECKING:` (never executed)."""
    return any(isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING" and node in ast.walk(n)
               for n in tree.body)
