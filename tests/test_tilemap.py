"""figures/tilemap.py: the animated tile map, from plain traces, read back by tests/_tilemap."""

import ast
import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashviz.core.tiling import tile_schedule
from flashviz.figures import palette, tilemap
from flashviz.figures.tilemap import MAX_FRAMES, frame_indices, frame_seconds, row_marker_y, tile_map_html
from flashviz.measure.trace import schedule_trace
from flashviz.units import format_bytes, format_flops
from flashviz.vocab import TILE_STATUS_LABELS, TILE_STATUSES
from tests._numbers import counted, says, shows, stated, value
from tests._tilemap import SVG, parse


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
    m = parse(tile_map_html([tr], row=70))
    (panel,) = m.panels
    computed = tr.computed_steps()
    assert m.frames == len(panel.frames) == len(computed)  # 5 x 5 grid: one frame per computed tile
    assert {"full", "partial", "skipped"} <= set(tr.status)
    for k in range(m.frames):
        step = computed[k]
        for s in range(tr.steps):  # visited before this frame's tile: full colour from frame k on, else pale
            tile = panel.tiles[(tr.q_block[s], tr.k_block[s])]
            assert tile["fate"] == tr.status[s] and (tile["done"] or tile["reveal"] <= k) == (s < step), (k, s)
        frame = panel.frames[k]
        assert frame["current"] == (tr.q_block[step], tr.k_block[step])
        assert frame["counter"][0] == f"FA1 tile {k + 1}/{len(computed)}: i={tr.q_block[step]}, j={tr.k_block[step]}"
        assert frame["counter"][1] == f"HBM traffic so far {format_bytes(tr.hbm_bytes[step])}"
        assert frame["delay"] == pytest.approx(k * m.frame_s, abs=1e-3) and frame["last"] == (k == m.frames - 1)
    for tile in panel.tiles.values():  # a tile turns at its frame's time; all by the end of the run
        at = None if tile["done"] else tile["reveal"] * m.frame_s
        assert tile["done"] or (tile["reveal"] <= m.frames and tile["delay"] == pytest.approx(at, abs=1e-3))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 700), st.sampled_from([16, 32, 48, 64, 100]), st.sampled_from([16, 32, 64, 96]), st.booleans(),
       st.sampled_from([None, (0, 0), (100, 0), (37, 50)]), st.integers(0, 200), st.booleans(), st.integers(2, 130))
def test_every_frame_holds_its_counters_tile_row_and_column_said_once(n, br, bc, causal, window, start, both, cap):
    """The markup says each thing once (labels per panel, outlines per run of frames, a tile in progress by its
    class); read back, every frame is the trace's: counters, tile in progress, the Q_i row and K_j, V_j column."""
    traces = [schedule_trace(n, br, bc, causal=causal, window=window, loop_order=o, d=24)
              for o in ("kv_outer", "q_outer")[:1 + both]]
    computed = traces[0].computed_steps()
    frames_at = frame_indices(len(computed), cap)
    start = min(start, max(len(frames_at) - 1, 0))
    for still in (False, True):
        m = parse(tile_map_html(traces, max_frames=cap, start_frame=start, still=still))
        for panel, tr in zip(m.panels, traces, strict=True):
            assert sorted(panel.frames) == list(range(start, start + 1 if still else len(frames_at)))
            reveal = {(tr.q_block[s], tr.k_block[s]): k for s in range(tr.steps)
                      for k in [next((k for k, f in enumerate(frames_at) if computed[f] > s), len(frames_at))]}
            for k, frame in panel.frames.items():
                step = computed[frames_at[k]]
                assert frame["counter"] == list(tilemap.counter_text(tr, computed, frames_at[k]))
                assert frame["current"] == (tr.q_block[step], tr.k_block[step])
                assert (frame["row"], frame["column"]) == (tr.q_block[step], tr.k_block[step])
                assert frame["delay"] == pytest.approx(0 if still else (k - start) * m.frame_s, abs=2e-3)
            for ij, tile in panel.tiles.items():  # done by the start frame, or pale until its reveal (still: stays)
                assert tile["done"] == (reveal[ij] <= start)
                assert tile["reveal"] == (None if still or tile["done"] else reveal[ij])


@pytest.mark.parametrize(("n", "br", "causal", "window"), [(8192, 128, True, None), (4096, 128, True, (512, 0)),
                                                             (16, 4, True, None), (1000, 64, False, None)])
def test_the_map_drawn_before_play_shows_every_tiles_fate(n, br, causal, window):
    tr = schedule_trace(n, br, br, causal=causal, window=window)
    (panel,) = parse(tile_map_html([tr])).panels
    fate = tile_schedule(n, n, br, br, causal=causal, window=window).status_grid()
    assert len(panel.tiles) == tr.steps
    assert all(t["fate"] == fate[i][j] for (i, j), t in panel.tiles.items())
    first = tr.computed_steps()[0]  # before Play only the tiles passed over before the first computed one are done
    assert {ij for ij, t in panel.tiles.items() if t["done"]} == {(tr.q_block[s], tr.k_block[s]) for s in range(first)}
    assert panel.frames[0]["current"] == (tr.q_block[first], tr.k_block[first])
    colours = {*palette.TILE_COLORS.values(), *palette.TILE_AHEAD_COLORS.values(), palette.CURRENT_TILE_COLOR}
    assert len(colours) == 7  # every fate, pale and full, and the tile in progress: seven distinct colours


def test_start_frame_draws_that_frame_first_and_bad_values_are_refused():
    traces = [schedule_trace(256, 32, 32, causal=True, loop_order=o, d=8) for o in ("kv_outer", "q_outer")]
    m = parse(tile_map_html(traces, start_frame=20))
    assert (m.start, m.frames) == (20, 36)
    for panel, tr in zip(m.panels, traces, strict=True):
        assert sorted(panel.frames) == list(range(20, 36))  # Play and Restart run from frame 20
        assert panel.frames[20]["delay"] == 0 and "tile 21/36" in panel.frames[20]["counter"][0]
        step = tr.computed_steps()[20]
        assert {ij for ij, t in panel.tiles.items() if t["done"]} == {(tr.q_block[s], tr.k_block[s])
                                                                       for s in range(step)}
    with pytest.raises(ValueError, match=r"start_frame must be in 0\.\.35"):
        tile_map_html(traces, start_frame=36)
    with pytest.raises(ValueError, match="start_frame"):
        tile_map_html(traces, start_frame=-1)


@pytest.mark.parametrize(("n", "br", "row", "expected"), [
    (1000, 64, 990, 15 + (990 - 960 + 0.5) / 40),  # ragged last block: 40 rows
    (1000, 64, 999, 15 + 39.5 / 40),  # the very last row sits at the bottom of the grid, not below it
    (10, 16, 9, 9.5 / 10),  # Br > N: one block of 10 rows
    (1024, 64, 512, 8 + 0.5 / 64),
])
def test_the_row_marker_sits_inside_its_block_also_when_the_last_block_is_ragged(n, br, row, expected):
    assert row_marker_y(n, br, row) == pytest.approx(expected)
    tr = schedule_trace(n, br, br)
    (panel,) = parse(tile_map_html([tr], row=row)).panels
    y = panel.row_marker["y"] / panel.cell
    assert panel.row_marker["row"] == row and y == pytest.approx(expected, abs=0.01)
    assert row // br < y < row // br + 1 <= tr.n_q_blocks


@pytest.mark.parametrize(("n", "br", "causal", "window", "start"), [(1024, 64, False, None, 0),
                                                                      (4096, 128, True, (512, 0), 7),
                                                                      (100, 16, True, None, 3)])
def test_the_still_map_is_the_start_frame_of_the_full_one_in_a_fraction_of_the_markup(n, br, causal, window, start):
    traces = [schedule_trace(n, br, br, causal=causal, window=window, loop_order=o, d=64)
              for o in ("kv_outer", "q_outer")]
    full, still = (tile_map_html(traces, row=n // 3, start_frame=start, still=flag) for flag in (False, True))
    f, m = parse(full), parse(still)
    assert (m.title, m.subtitle, m.legend, m.start, m.frames) == (f.title, f.subtitle, f.legend, f.start, f.frames)
    assert m.still and not f.still
    for pf, pm in zip(f.panels, m.panels, strict=True):
        # every tile's fate and whether it is reached at the start frame, the row marker: as in the full map
        assert {ij: (t["fate"], t["done"]) for ij, t in pm.tiles.items()} == \
            {ij: (t["fate"], t["done"]) for ij, t in pf.tiles.items()}
        assert pm.row_marker == pf.row_marker and pm.cell == pf.cell
        # the start frame alone, the same overlay and counters; nothing to hover, nothing to play
        assert list(pm.frames) == [start]
        assert {k: v for k, v in pm.frames[start].items() if k != "last"} == \
            {k: v for k, v in pf.frames[start].items() if k != "last"}
        assert all(t["title"] is None for t in pm.tiles.values())
    # no Play without the frames to play: the controls' place is kept (hidden from sight and from screen readers, tied
    # to no input), so a page that swaps in the animated map does not move
    bars = {flag: next(e for e in ET.fromstring(_xml(html)).iter("div") if e.get("class") == "fv-bar")
            for flag, html in ((False, full), (True, still))}
    assert m.controls == f.controls and not list(ET.fromstring(_xml(still)).iter("input"))
    assert bars[True].get("aria-hidden") == "true" and "visibility:hidden" in bars[True].get("style", "")
    assert bars[False].get("aria-hidden") is None and bars[False].get("style") is None
    assert len(list(ET.fromstring(_xml(full)).iter("input"))) == 2  # Play and Restart
    # nothing on a still map animates a tile: every tile's class alone sets its fill (pale until reached, else full)
    assert all(t["reveal"] is None and t["delay"] is None for p in m.panels for t in p.tiles.values())
    assert any(t["reveal"] is not None and t["delay"] is not None for p in f.panels for t in p.tiles.values())
    # every later frame, the reveal times, the hover titles and the controls left out; the tiles stay, and where the
    # full map has many frames and few tiles they are most of it
    assert len(still) < 2 / 3 * len(full)


def test_titles_axes_legend_controls_and_hover_text():
    traces = [schedule_trace(100, 16, 16, causal=True, d=8, loop_order=o) for o in ("kv_outer", "q_outer")]
    m = parse(tile_map_html(traces, row=40))
    assert m.title == "Tile map of S = QKᵀ: computed, masked, skipped"
    # the subtitle: the settings, and the tile counts the schedule gives (7 x 7 = 49 tiles, 28 computed)
    counts = tile_schedule(100, 100, 16, 16, causal=True).counts()
    total, computed = sum(counts.values()), counts["full"] + counts["partial"]
    sub = m.subtitle
    assert shows(stated(sub, r"N ="), 100) and shows(stated(sub, r"Br ="), 16) and shows(stated(sub, r"Bc ="), 16)
    assert [value(stated(sub, r"Bc = \d+ ·", k)) for k in range(3)] == [math.ceil(100 / 16)] * 2 + [total]
    assert shows(counted(sub, "tiles"), total) and shows(counted(sub, "computed"), computed)
    assert sub.endswith("· causal")  # the mask
    assert [p.loop_order for p in m.panels] == ["kv_outer", "q_outer"]
    assert m.controls == ["▶ Play❚❚ Pause", "⟲ Restart"] and m.frames == 28  # 7 * 8 / 2 computed tiles
    for word in (*(TILE_STATUS_LABELS[status] for status in TILE_STATUSES), "pale: not reached yet", "in progress",
                 "in SRAM", "row 40"):
        assert word in m.legend
    assert m.axis_titles.count("K/V block j (Bc = 16 keys)") == 2  # under each grid
    assert m.axis_titles.count("Q block i (Br = 16 rows)") == 1  # left of the first grid only
    tile = m.panels[0].tiles[(6, 2)]
    # the tile's hover: its block indices, rows and keys, its fate and its step in the schedule's own order
    sched = tile_schedule(100, 100, 16, 16, causal=True)
    step = next(k for k, t in enumerate(sched) if (t.q_block, t.k_block) == (6, 2))
    assert "): full, step" in tile["title"] and sched.status_grid()[6][2] == "full"
    assert says(tile["title"], 6, 96, 99, 2, 32, 47, step + 1, total)
    # FA2 goes along a row: its third computed tile is (1, 1), of 28
    fa2 = [(t.q_block, t.k_block) for t in tile_schedule(100, 100, 16, 16, causal=True, loop_order="q_outer")
           if t.computed]
    counter = m.panels[1].frames[2]["counter"][0]
    assert counter.startswith("FA2 tile") and says(counter.split(" ·")[0].removeprefix("FA2 "), 3, computed, *fa2[2])


def test_markup_is_safe_for_markdown_and_scoped():
    html = tile_map_html([schedule_trace(64, 16, 16, causal=True)], title="<b>x</b> $y$", uid="map-7")
    assert "\n" not in html and "<script" not in html.lower() and "javascript:" not in html.lower()
    assert parse(html).title == "<b>x</b> $y$"  # shown as text, never as markup
    assert "$" not in html.replace("$y$", "")  # no other dollar sign: markdown's maths would eat it
    style = html[html.index("<style>"):html.index("</style>")]
    rules = [r.split("{")[0] for r in style[len("<style>"):].split("}") if "{" in r]
    assert all(r.startswith(("#map-7", "@keyframes", "from", "to")) for r in rules), rules  # scoped to the map


@pytest.mark.parametrize("panels", [1, 2])
def test_grids_fit_the_space_the_page_gives_them(panels):
    traces = [schedule_trace(1024, 64, 32, loop_order=o, d=64) for o in ("kv_outer", "q_outer")[:panels]]
    m = parse(tile_map_html(traces))
    for panel in m.panels:
        width = (1 + max(j for _, j in panel.tiles)) * panel.cell  # px; the cell is rounded to 0.01 px
        height = (1 + max(i for i, _ in panel.tiles)) * panel.cell
        assert max(width, height) == pytest.approx(tilemap.GRID_PX[panels], rel=0.01) and min(width, height) >= 100
    assert tilemap.TOP_PX + tilemap.GRID_PX[1] + tilemap.BOTTOM_PX <= tilemap.MAP_HEIGHT_PX


def test_a_64_by_64_grid_with_both_loop_orders_stays_small_and_ends_with_every_tile_reached():
    traces = [schedule_trace(8192, 128, 128, causal=True, loop_order=o, d=64) for o in ("kv_outer", "q_outer")]
    html = tile_map_html(traces, row=5000)
    assert len(html.encode()) <= 1024 * 1024, len(html)
    m = parse(html)
    assert m.frames == MAX_FRAMES and m.frame_s == pytest.approx(frame_seconds(MAX_FRAMES), abs=1e-3)
    for panel in m.panels:
        assert len(panel.tiles) == 64 * 64 and len(panel.frames) == MAX_FRAMES
        assert all(t["done"] or t["reveal"] <= MAX_FRAMES for t in panel.tiles.values())
        assert all(t["title"] is None for t in panel.tiles.values())  # 4.7 px tiles: no hover titles
        assert panel.frames[MAX_FRAMES - 1]["current"] == (63, 63) and panel.frames[MAX_FRAMES - 1]["last"]


def test_a_one_tile_grid_has_one_frame_and_no_play_and_bad_input_is_refused():
    tr = schedule_trace(1, 1, 1)  # the smallest grid: one full tile
    m = parse(tile_map_html([tr]))
    assert m.frames == 1 and m.controls == []  # nothing to play
    empty = schedule_trace(8, 4, 4, window=(0, 0), causal=True)
    assert empty.computed_steps()  # the diagonal is always computed; a fully masked map is drawn as well:
    assert "nothing is computed" in tile_map_html([schedule_trace(8, 4, 4, mask_mod=lambda b, h, q, k: q < 0)])
    with pytest.raises(ValueError, match="at least one ScheduleTrace"):
        tile_map_html([])
    with pytest.raises(ValueError, match="one or two panels"):
        tile_map_html([tr] * 3)


def test_number_formats():
    assert (format_bytes(999), format_bytes(1234567), format_bytes(64 << 20), format_flops(1.5e9), format_flops(12)) \
        == ("999 B", "1.2 MiB", "64.0 MiB", "1.5 GFLOP", "12 FLOP")


def _xml(html: str) -> str:
    """A map's markup as XML ElementTree reads it (the SVG namespace added)."""
    return html[html.index('<div id="'):].replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" ')


def test_the_tile_map_imports_neither_torch_pandas_plotly_nor_streamlit():
    tree = ast.parse(Path(tilemap.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and node.module and "TYPE_CHECKING" not in ast.unparse(node)}
    assert not imported & {"torch", "streamlit", "plotly", "pandas", "numpy"}, imported
    code = ("import sys; from flashviz.figures.tilemap import tile_map_html; "
            "print(sorted(m for m in ('torch', 'pandas', 'plotly', 'numpy') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parents[1])
    assert run.stdout.strip() == "[]", run.stdout  # the first chart of a fresh dashboard waits for none of them
