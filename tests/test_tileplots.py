"""figures/tiles.py and figures/rows.py: the tile-map animation and the row inspector, from plain traces."""

import ast
import base64
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from flashviz.figures import palette
from flashviz.figures import rows as rowplots
from flashviz.figures import tiles as tileplots
from flashviz.figures.rows import row_figure
from flashviz.figures.tiles import (
    AHEAD,
    CURRENT,
    DONE,
    MAX_FRAMES,
    fmt_bytes,
    fmt_flops,
    frame_indices,
    row_marker_y,
    tile_animation,
)
from flashviz.measure.trace import pick_row, row_trace, schedule_trace


@given(st.integers(0, 5000), st.integers(2, 200))
def test_frame_indices_cover_first_and_last_and_respect_the_cap(n, cap):
    idx = frame_indices(n, cap)
    if n == 0:
        assert idx == []
        return
    assert idx[0] == 0 and idx[-1] == n - 1 and len(idx) <= cap
    assert idx == sorted(set(idx)) and len(idx) == min(n, cap)


def test_every_frame_shows_every_fate_pale_ahead_and_full_once_visited():
    tr = schedule_trace(160, 32, 32, causal=True, window=(90, 0), loop_order="kv_outer", d=16)
    fig = tile_animation([tr], row=70)
    computed = tr.computed_steps()
    assert len(fig.frames) == len(computed)  # 5 x 5 grid: one frame per computed tile, no subsampling
    assert {"full", "partial", "skipped"} <= set(tr.status)
    for k, frame in enumerate(fig.frames):
        z = np.asarray(frame.data[0].z)
        step = computed[k]
        for s in range(tr.steps):
            i, j = tr.q_block[s], tr.k_block[s]
            expected = DONE[tr.status[s]] if s < step else CURRENT if s == step else AHEAD[tr.status[s]]
            assert z[i, j] == expected, (k, s)
        qx, qy = frame.data[1].x, frame.data[1].y  # the Q_i outline spans block row i
        assert (min(qy), max(qy)) == (tr.q_block[step] - 0.5, tr.q_block[step] + 0.5) and min(qx) == -0.5
        kx = frame.data[2].x
        assert (min(kx), max(kx)) == (tr.k_block[step] - 0.5, tr.k_block[step] + 0.5)
        assert f"tile {k + 1}/{len(computed)}" in frame.layout.annotations[0].text
        assert fmt_bytes(tr.hbm_bytes[step]) in frame.layout.annotations[0].text


@pytest.mark.parametrize(("n", "br", "causal", "window"), [(8192, 128, True, None), (4096, 128, True, (512, 0)),
                                                             (16, 4, True, None), (1000, 64, False, None)])
def test_the_first_frame_drawn_shows_every_tiles_fate(n, br, causal, window):
    tr = schedule_trace(n, br, br, causal=causal, window=window)
    fig = tile_animation([tr])
    z = np.asarray(fig.data[0].z)  # what the page draws before Play
    first = tr.computed_steps()[0]
    for s in range(tr.steps):
        i, j = tr.q_block[s], tr.k_block[s]
        shown = z[i, j]
        assert shown == CURRENT if s == first else shown in (AHEAD[tr.status[s]], DONE[tr.status[s]]), (s, shown)
    codes = set(z.ravel().tolist())
    for status in set(tr.status):  # each fate present in the schedule has its own colour on the first frame
        assert codes & {AHEAD[status], DONE[status]}, status
    colors = dict(tileplots.COLORS)
    assert len({colors[c] for c in (*AHEAD.values(), *DONE.values(), CURRENT)}) == 7  # seven distinct colours


def test_start_frame_draws_that_frame_first_and_bad_values_are_refused():
    traces = [schedule_trace(256, 32, 32, causal=True, loop_order=o, d=8) for o in ("kv_outer", "q_outer")]
    fig = tile_animation(traces, start_frame=20)
    assert fig.layout.sliders[0].active == 20
    assert np.array_equal(np.asarray(fig.data[0].z), np.asarray(fig.frames[20].data[0].z))
    heat2 = [t for t in fig.data if t.type == "heatmap"][1]
    assert np.array_equal(np.asarray(heat2.z), np.asarray(fig.frames[20].data[3].z))
    assert [a.text for a in fig.layout.annotations] == [a.text for a in fig.frames[20].layout.annotations]
    with pytest.raises(ValueError, match=r"start_frame must be in 0\.\.35"):
        tile_animation(traces, start_frame=36)
    with pytest.raises(ValueError, match="start_frame"):
        tile_animation(traces, start_frame=-1)


@pytest.mark.parametrize(("n", "br", "row", "expected"), [
    (1000, 64, 990, 15 - 0.5 + (990 - 960 + 0.5) / 40),  # ragged last block: 40 rows
    (1000, 64, 999, 15 - 0.5 + 39.5 / 40),  # the very last row sits at the bottom of the grid, not below it
    (10, 16, 9, -0.5 + 9.5 / 10),  # Br > N: one block of 10 rows
    (1024, 64, 512, 8 - 0.5 + 0.5 / 64),
])
def test_the_row_marker_sits_inside_its_block_also_when_the_last_block_is_ragged(n, br, row, expected):
    assert row_marker_y(n, br, row) == pytest.approx(expected)
    tr = schedule_trace(n, br, br)
    fig = tile_animation([tr], row=row)
    (marker,) = [t for t in fig.data if t.legendgroup == "row"]
    y = marker.y[0]
    assert y == pytest.approx(expected) and row // br - 0.5 < y < row // br + 0.5 <= tr.n_q_blocks - 0.5 + 1e-9


def test_the_figure_has_fixed_axes_titles_legend_and_play_controls():
    fig = tile_animation([schedule_trace(100, 16, 16, causal=True, d=8), schedule_trace(100, 16, 16, causal=True,
                                                                                        loop_order="q_outer", d=8)])
    assert fig.layout.title.text and "causal" in fig.layout.title.subtitle.text
    for axis in (fig.layout.xaxis, fig.layout.xaxis2):
        assert tuple(axis.range) == (-0.5, 6.5) and axis.autorange is False and "Bc = 16" in axis.title.text
    for axis in (fig.layout.yaxis, fig.layout.yaxis2):
        assert tuple(axis.range) == (6.5, -0.5)
    assert "Br = 16" in fig.layout.yaxis.title.text  # one y title for both panels
    legend = [t.name for t in fig.data if t.showlegend is not False and t.name]
    assert {"full (no mask)", "partial (masked)", "skipped (never loaded)", "pale: not reached yet",
            "in progress", "Q_i in SRAM", "K_j, V_j in SRAM"} <= set(legend)
    one = tile_animation([schedule_trace(100, 16, 16, causal=True, d=8)])
    assert {"Q_i in SRAM (block row)", "K_j, V_j in SRAM (block column)", "full: computed, no mask",
            "partial: computed, masked", "skipped: never loaded"} <= {t.name for t in one.data}
    assert fig.layout.legend.font.size >= 16 and fig.layout.template.layout.font.size >= 16
    buttons = fig.layout.updatemenus[0].buttons
    assert [b.label for b in buttons] == ["▶ Play", "❚❚ Pause"] and buttons[0].args[1]["frame"]["redraw"] is True
    assert len(fig.layout.sliders[0].steps) == len(fig.frames) == 28  # 7 * 8 / 2 computed tiles of a 7 x 7 grid
    heat = [t for t in fig.data if t.type == "heatmap"]
    assert len(heat) == 2 and "%{customdata[4]}" in heat[0].hovertemplate


@pytest.mark.parametrize("panels", [1, 2])
def test_play_sits_beside_the_slider_rail_never_over_its_label_and_fits_720_px(panels):
    orders = ("kv_outer", "q_outer")[:panels]
    fig = tile_animation([schedule_trace(1024, 64, 64, loop_order=o, d=64) for o in orders])
    menu, slider = fig.layout.updatemenus[0], fig.layout.sliders[0]
    plot_h = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    if panels == 1:  # the buttons start right of where the slider (and its label) ends
        assert menu.x >= slider.x + slider.len
    else:  # the buttons end left of the slider; its label starts at the slider's left edge
        assert slider.currentvalue.xanchor == "left" and menu.x + tileplots.BUTTON_ROOM_PX / 682 <= slider.x
    play_bottom = fig.layout.margin.t + plot_h - menu.y * plot_h + tileplots.BUTTON_PX  # px from the figure's top
    assert play_bottom <= tileplots.PLAY_BOTTOM_MAX_PX == 490  # under a 230 px header: inside a 720 px window


def test_tile_map_uses_the_shared_style():
    fig = tile_animation([schedule_trace(64, 16, 16, causal=True)], row=40)
    assert fig.layout.template.layout.font.size == palette.BASE_FONT_PX
    assert fig.layout.xaxis.tickfont.size == palette.TICK_FONT_PX
    assert fig.layout.title.font.size == palette.TITLE_FONT_PX
    source = Path(tileplots.__file__).read_text()
    assert "#d55e00" not in source.lower() and "#0072b2" not in source.lower()  # colours come from palette.py
    assert set(tileplots.COLORS.values()).isdisjoint({c.upper() for c in palette.IMPL_COLORS.values()})


def test_a_64_by_64_grid_stays_under_5_mb_with_both_loop_orders():
    traces = [schedule_trace(8192, 128, 128, causal=True, loop_order=o, d=64) for o in ("kv_outer", "q_outer")]
    fig = tile_animation(traces, row=5000)
    assert len(fig.frames) == MAX_FRAMES
    size = len(fig.to_json())
    assert size <= 5 * 1024 * 1024, size
    last = json.loads(fig.to_json())["frames"][-1]["data"][0]["z"]
    z = np.frombuffer(base64.b64decode(last["bdata"]), dtype=np.dtype(last["dtype"])).reshape(64, 64)
    assert (z == CURRENT).sum() == 1 and not np.isin(z, list(AHEAD.values())).any()  # every tile reached


def test_a_one_tile_grid_has_one_frame_and_bad_input_is_refused():
    tr = schedule_trace(1, 1, 1)  # the smallest grid: one full tile
    assert len(tile_animation([tr]).frames) == 1
    with pytest.raises(ValueError, match="at least one ScheduleTrace"):
        tile_animation([])
    with pytest.raises(ValueError, match="one or two panels"):
        tile_animation([tr] * 3)
    with pytest.raises(ValueError, match="height=200 px"):
        tile_animation([tr], height=200)


# ----------------------------------------------------------------------------------------------------------------------
# the row inspector


def test_row_figure_shows_m_factor_and_the_three_l_values_per_tile():
    pick = pick_row(64, 8, 16, 16, causal=True)
    rows = [row_trace(64, 8, 16, 16, row=pick.row, causal=True, loop_order=o) for o in ("kv_outer", "q_outer")]
    fig = row_figure(rows, n_steps=16, note=pick.reason)
    by_name = {t.name: t for t in fig.data}
    fa1 = rows[0]
    x = [s + 1 for s in fa1.step]
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


def test_row_figure_marks_the_tiles_where_m_grew_and_says_how_many():
    rows = [row_trace(16, 8, 4, 4, row=15, causal=True, loop_order=o) for o in ("kv_outer", "q_outer")]
    assert rows[0].rescales >= 1
    fig = row_figure(rows, n_steps=16, note="picked")
    shaded = sorted({(s.x0, s.x1) for s in fig.layout.shapes})
    expected = sorted({(s + 0.5, s + 1.5) for tr in rows for s, g in zip(tr.step, tr.grew, strict=True) if g})
    assert shaded == expected and len(fig.layout.shapes) == 3 * len(expected)  # across the three panels
    assert f"m grew on {rows[0].rescales} of the row's {len(rows[0].step)} tiles" in fig.layout.title.subtitle.text
    assert fig.layout.title.subtitle.text.endswith("picked")
    flat = row_figure([row_trace(16, 8, 4, 4, row=0, causal=True)], n_steps=16)  # one tile: nothing can grow
    assert "no rescale" in flat.layout.title.subtitle.text and not flat.layout.shapes


def test_row_figure_axis_titles_are_words_that_render():
    fig = row_figure([row_trace(64, 8, 16, 16, row=40, causal=True)], n_steps=16)
    titles = [fig.layout[f"yaxis{k}"].title.text for k in ("", "2", "3")]
    assert all(len(t) >= 3 for t in titles), titles  # a lone rotated "l" reads as a dash on screen
    assert fig.layout.xaxis3.title.text and tuple(fig.layout.xaxis.range) == (0.5, 16.5)
    assert fig.layout.title.text.startswith("Row inspector: query row 40")
    assert min(a.font.size for a in fig.layout.annotations) >= 16 and fig.layout.legend.font.size >= 16
    with pytest.raises(ValueError, match="at least one RowTrace"):
        row_figure([], n_steps=4)


def test_number_formats():
    assert (fmt_bytes(999), fmt_bytes(1234567), fmt_flops(1.5e9), fmt_flops(12)) == \
        ("999 B", "1.23 MB", "1.5 GFLOP", "12 FLOP")


@pytest.mark.parametrize("module", [tileplots, rowplots])
def test_tile_and_row_figures_import_neither_torch_nor_streamlit(module):
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
