"""tileplots.py: the tile-map animation and the row inspector, from plain traces; plotly only."""

import ast
import base64
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from flashviz.figures import tiles as tileplots
from flashviz.figures.tiles import (
    CURRENT,
    FULL,
    MAX_FRAMES,
    PARTIAL,
    PENDING,
    SKIPPED,
    fmt_bytes,
    fmt_flops,
    frame_indices,
    row_figure,
    tile_animation,
)
from flashviz.measure.trace import row_trace, schedule_trace

CODE = {"full": FULL, "partial": PARTIAL, "skipped": SKIPPED}


@given(st.integers(0, 5000), st.integers(2, 200))
def test_frame_indices_cover_first_and_last_and_respect_the_cap(n, cap):
    idx = frame_indices(n, cap)
    if n == 0:
        assert idx == []
        return
    assert idx[0] == 0 and idx[-1] == n - 1 and len(idx) <= cap
    assert idx == sorted(set(idx)) and len(idx) == min(n, cap)


def test_every_frame_paints_the_tiles_visited_so_far():
    tr = schedule_trace(160, 32, 32, causal=True, window=(50, 0), loop_order="kv_outer", d=16)
    fig = tile_animation([tr], row=70)
    computed = tr.computed_steps()
    assert len(fig.frames) == len(computed)  # 5 x 5 grid: one frame per computed tile, no subsampling
    for k, frame in enumerate(fig.frames):
        z = np.asarray(frame.data[0].z)
        step = computed[k]
        for s in range(tr.steps):
            i, j = tr.q_block[s], tr.k_block[s]
            expected = CODE[tr.status[s]] if s < step else CURRENT if s == step else PENDING
            assert z[i, j] == expected, (k, s)
        qx, qy = frame.data[1].x, frame.data[1].y  # the Q_i outline spans block row i
        assert (min(qy), max(qy)) == (tr.q_block[step] - 0.5, tr.q_block[step] + 0.5) and min(qx) == -0.5
        kx = frame.data[2].x
        assert (min(kx), max(kx)) == (tr.k_block[step] - 0.5, tr.k_block[step] + 0.5)
        assert f"tile {k + 1}/{len(computed)}" in frame.layout.annotations[0].text
        assert fmt_bytes(tr.hbm_bytes[step]) in frame.layout.annotations[0].text


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
    assert {"full: computed, no mask", "partial: computed, masked", "skipped: never loaded", "not visited yet",
            "in progress"} <= set(legend)
    assert fig.layout.legend.font.size >= 16 and fig.layout.font.size >= 18
    buttons = fig.layout.updatemenus[0].buttons
    assert [b.label for b in buttons] == ["▶ Play", "❚❚ Pause"] and buttons[0].args[1]["frame"]["redraw"] is True
    assert len(fig.layout.sliders[0].steps) == len(fig.frames) == 28  # 7 * 8 / 2 computed tiles of a 7 x 7 grid
    heat = [t for t in fig.data if t.type == "heatmap"]
    assert len(heat) == 2 and "%{customdata[4]}" in heat[0].hovertemplate


def test_a_64_by_64_grid_stays_under_5_mb_with_both_loop_orders():
    traces = [schedule_trace(8192, 128, 128, causal=True, loop_order=o, d=64) for o in ("kv_outer", "q_outer")]
    fig = tile_animation(traces, row=5000)
    assert len(fig.frames) == MAX_FRAMES
    size = len(fig.to_json())
    assert size <= 5 * 1024 * 1024, size
    last = json.loads(fig.to_json())["frames"][-1]["data"][0]["z"]
    z = np.frombuffer(base64.b64decode(last["bdata"]), dtype=np.dtype(last["dtype"])).reshape(64, 64)
    assert (z == CURRENT).sum() == 1 and (z == PENDING).sum() == 0  # the finished map, last tile in progress


def test_a_one_tile_grid_has_one_frame_and_an_empty_list_is_refused():
    tr = schedule_trace(1, 1, 1)  # the smallest grid: one full tile
    assert len(tile_animation([tr]).frames) == 1
    with pytest.raises(ValueError, match="at least one ScheduleTrace"):
        tile_animation([])


def test_row_figure_shows_m_and_l_per_order_and_the_exact_values():
    rows = [row_trace(64, 8, 16, 16, row=40, causal=True, loop_order=o) for o in ("kv_outer", "q_outer")]
    fig = row_figure(rows, n_steps=16)
    names = [t.name for t in fig.data]
    assert names[:4] == ["FA1: m after each tile", "FA1: l after each tile", "FA2: m after each tile",
                         "FA2: l after each tile"]
    assert "exact value over the whole row" in names
    assert list(fig.data[0].x) == [s + 1 for s in rows[0].step] and fig.data[0].y[-1] == rows[0].m[-1]
    assert tuple(fig.layout.xaxis.range) == (0.5, 16.5) and fig.layout.xaxis2.title.text
    assert fig.layout.title.text.startswith("Row inspector: query row 40")


def test_number_formats():
    assert (fmt_bytes(999), fmt_bytes(1234567), fmt_flops(1.5e9), fmt_flops(12)) == \
        ("999 B", "1.23 MB", "1.5 GFLOP", "12 FLOP")


def test_tileplots_imports_neither_torch_nor_streamlit():
    tree = ast.parse(Path(tileplots.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and node.module and not _type_checking_only(tree, node)}
    assert not imported & {"torch", "streamlit"}, imported


def _type_checking_only(tree: ast.Module, node: ast.ImportFrom) -> bool:
    """True for imports under `if TYPE_CHECKING:` (never executed)."""
    return any(isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING" and node in ast.walk(n)
               for n in tree.body)
