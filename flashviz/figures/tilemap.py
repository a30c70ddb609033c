"""The animated tile map of the "How it works" view, as one self-contained SVG + CSS snippet (no plotly, no JS).

Input is the plain data of flashviz.measure.trace (ScheduleTrace); nothing here imports torch, numpy or streamlit, so
the map is the first thing a fresh dashboard can draw (plotly.js alone costs seconds in a browser on a small
laptop). The map is a grid of Q blocks (rows, i) x K/V blocks (columns, j) of the score matrix S = Q K^T. Every tile
shows its fate from the start: full (computed, no mask), partial (computed, masked inside) or skipped (never loaded),
pale until the schedule reaches it and in full colour once visited, so the mask and the saved work are visible before
Play. Play animates the visiting order, one frame per computed tile (FlashAttention-1 Algorithm 1 visits them column
by column, "kv_outer"; FlashAttention-2 row by row, "q_outer"); frames are subsampled to at most `max_frames`.

How it animates without JavaScript: every animated element runs a CSS animation whose delay is its frame's start
time, all paused (`animation-play-state: paused`) until the Play checkbox is checked; a paused animation's clock,
delay included, stands still, so Pause keeps the frame. A tile turns from pale to full colour at its frame, and the
tile a frame computes shows in the colour of the tile in progress during that frame (a second animation of the
tile); each frame's counter is visible for its frame only, and so are the outlines of the Q_i row and the K_j, V_j
column held on chip, drawn once per run of frames that hold the same row or column. Restart swaps every animation
for an identical copy, which starts it again from the first frame.

The markup says each thing once, because the browser turns all of it into elements before it draws the page's first
chart: tiles are placed in units of a tile (a scaled group), their size, gap and colours come from CSS classes,
frame K's start time is one CSS variable of class rK that every element of that frame reads, and the counter's
labels are drawn once per panel with only the numbers in each frame. Hover titles (about 90 bytes a tile) are given
to small grids only.

Legend: N sequence length, Br = block_q, Bc = block_k, Tr x Tc tiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING

from flashviz import vocab
from flashviz.figures.palette import (
    BASE_FONT_PX,
    CURRENT_TILE_COLOR,
    IMPL_COLORS,
    ROW_MARKER_COLOR,
    SRAM_OUTLINE_COLOR,
    TICK_FONT_PX,
    TILE_AHEAD_COLORS,
    TILE_COLORS,
    TITLE_FONT_PX,
)
from flashviz.units import format_bytes
from flashviz.vocab import LOOP_ORDER_SHORT, TILE_STATUS_LABELS

if TYPE_CHECKING:  # a plain dataclass; imported for type hints only, so this module never loads torch
    from flashviz.measure.trace import ScheduleTrace

MAX_FRAMES = 120  # frames per animation: a 15-25 s playthrough at 120-800 ms a frame
FRAME_S_MIN, FRAME_S_MAX, PLAY_S = 0.12, 0.8, 15.0  # seconds per frame, clamped; about PLAY_S for a whole run
TITLED_TILES = 100  # grids of at most this many tiles (10 x 10) get a hover title per tile: on larger ones the
#                     titles would be most of the markup
HOLD_S = 100000  # seconds a revealed tile's animation stays active: longer than any playthrough
ROOT_CLASS = "fv-tilemap"  # the snippet's outer <div>; tests and the first-chart benchmark look for it

# -- layout (px). The title, Play, the counters and both grids fit under the page's header in a 1280 x 720 window.
GRID_PX = {1: 330, 2: 300}  # the longer side of a grid, by panel count
LEFT_PX = 64  # room left of a grid: the y tick labels and the rotated y axis title
TOP_PX = 72  # room above a grid: the three-line counter
COUNTER_Y = (20, 42, 64)  # the counter's lines: the tile, its HBM traffic so far, standard attention's
COUNTER_LABELS = ("HBM traffic so far", "standard attention:")  # the second and third lines, drawn once a panel
VALUE_X_PX = 189  # where their numbers start: "standard attention:" is 174 px wide at 18 px in DejaVu Sans, the
#                   widest font the map falls back to (155 px in Arial)
BOTTOM_PX = 54  # room below a grid: the x tick labels and the x axis title
RIGHT_PX = 8
GAP_MIN_CELL_PX = 7  # cells at least this large get a 1 px gap (grid lines); smaller ones would lose their colour
MAP_HEIGHT_PX = 492  # a panel's SVG (counters, grid, axes) at most; the browser tests check the whole fit

FATES = vocab.TILE_STATUSES  # full, partial, skipped
NAIVE_COUNTER_COLOR = IMPL_COLORS[vocab.NAIVE]  # standard attention's counter, in naive's colour as on every chart
FATE_CLASS = {vocab.FULL: "f", vocab.PARTIAL: "p", vocab.SKIPPED: "s"}  # CSS class of a tile, by fate
GRID_COLOR = "#5a5a5a"  # the grid behind the tiles: the 1 px gaps between them


def frame_indices(n_computed: int, max_frames: int = MAX_FRAMES) -> list[int]:
    """Which computed tiles (0-based, in visiting order) get a frame: all, or an even subsample ending on the last.

    Example:
        >>> frame_indices(5, 3)
        [0, 2, 4]
    """
    if n_computed <= 0:
        return []
    if n_computed <= max_frames:
        return list(range(n_computed))
    picks = {round(k * (n_computed - 1) / (max_frames - 1)) for k in range(max_frames)}
    return sorted(picks)


def row_marker_y(n: int, block_q: int, row: int) -> float:
    """Where query row `row` sits on the map's y axis in block units (block i spans i .. i + 1): the middle of its
    line inside its block, which holds min(Br, N - i Br) rows (the last block may be ragged, or Br > N).

    Example:
        >>> row_marker_y(10, 4, 9)  # the last block holds rows 8 and 9: row 9 is the lower of its two lines
        2.75
    """
    i = row // block_q
    rows_in_block = min(block_q, n - i * block_q)
    return i + (row - i * block_q + 0.5) / rows_in_block


def frame_seconds(n_frames: int) -> float:
    """Seconds per frame: about PLAY_S for a whole run, clamped to [FRAME_S_MIN, FRAME_S_MAX].

    Example:
        >>> frame_seconds(10), frame_seconds(120)
        (0.8, 0.125)
    """
    return min(FRAME_S_MAX, max(FRAME_S_MIN, PLAY_S / max(1, n_frames)))


@dataclass(frozen=True)
class _Timeline:
    """When things happen, shared by the panels: frame k (start <= k < len(frames_at)) starts (k - start) * dt
    seconds after Play; it shows computed tile frames_at[k] of each panel."""

    frames_at: list[int]  # per frame: the index of the computed tile it shows
    start: int  # the frame drawn before Play
    dt: float  # seconds per frame

    def at(self, k: int) -> float:
        return (k - self.start) * self.dt


def _reveal_frames(tr: ScheduleTrace, computed: list[int], frames_at: list[int]) -> list[int]:
    """Per schedule step: the first frame at which the tile shows in full colour (the frame whose current tile comes
    later in the schedule); tiles after the last computed one get len(frames_at), the end of the run."""
    out, k = [], 0
    for step in range(tr.steps):
        while k < len(frames_at) and computed[frames_at[k]] <= step:
            k += 1
        out.append(k)
    return out


def map_css(uid: str) -> str:
    """The snippet's CSS, scoped to its root id. Each animation has two identical names (a, b): Restart switches.
    Shared by views/backward/tilemap.py, whose snippet has the same structure (root, Play and Restart inputs, .fv-bar,
    .fv-panels of SVGs whose tiles are .t rects and frames .fr groups)."""
    r = f"#{uid}"
    fates = "".join(f"{r} .t.{FATE_CLASS[s]}{{fill:{TILE_AHEAD_COLORS[s]}}}{r} .t.{FATE_CLASS[s]}.done"
                    f"{{fill:{TILE_COLORS[s]}}}" for s in FATES)
    keyframes = "".join(f"@keyframes fv-{FATE_CLASS[s]}{ab}{{to{{fill:{TILE_COLORS[s]}}}}}" for s in FATES
                        for ab in "ab")
    keyframes += "@keyframes fv-showa{from,to{visibility:visible}}@keyframes fv-showb{from,to{visibility:visible}}"
    anims = "".join(f"{r} .t.{FATE_CLASS[s]}.later{{animation-name:fv-{FATE_CLASS[s]}a}}"
                    f"{r} .fv-restart:checked~.fv-panels .t.{FATE_CLASS[s]}.later{{animation-name:fv-{FATE_CLASS[s]}b}}"
                    for s in FATES)
    return (
        f"<style>{r}{{font-family:Arial,Helvetica,sans-serif;font-size:{BASE_FONT_PX}px;color:#111}}"
        f"{r} .fv-title{{font-size:{TITLE_FONT_PX}px;font-weight:600;margin:0}}"
        f"{r} .counter.naive{{fill:{NAIVE_COUNTER_COLOR}}}"
        f"{r} .fv-sub{{margin:2px 0 6px 0;font-size:{BASE_FONT_PX}px}}"  # px: the same size on any page
        f"{r} input{{position:absolute;opacity:0;width:1px;height:1px}}"
        f"{r} label{{display:inline-block;border:1px solid #888;border-radius:6px;padding:3px 12px;margin:0 8px 4px 0;"
        f"cursor:pointer;user-select:none;background:#f6f6f6}}"
        f"{r} label:hover{{border-color:{CURRENT_TILE_COLOR}}}"
        f"{r} .fv-pause,{r} .fv-play:checked~.fv-bar .fv-go{{display:none}}"
        f"{r} .fv-play:checked~.fv-bar .fv-pause{{display:inline}}"
        f"{r} .fv-play:focus-visible~.fv-bar .fv-playlabel{{outline:2px solid {CURRENT_TILE_COLOR}}}"
        f"{r} .fv-legend{{display:flex;flex-wrap:wrap;gap:2px 14px;font-size:16px}}"
        f"{r} .fv-legend.beside{{flex-direction:column;flex-wrap:nowrap;max-width:330px;padding-top:{TOP_PX}px}}"
        f"{r} .fv-sw{{display:inline-block;width:14px;height:14px;border:1px solid #333;margin-right:5px;"
        f"vertical-align:-2px}}"
        f"{r} .fv-panels{{display:flex;flex-wrap:wrap;gap:4px 18px}}"
        # longhands only: a shorthand would reset animation-play-state, which Play alone sets. A tile's colour
        # jumps at the start of a long active phase (step-start), so it never depends on a short one being sampled.
        f"{r} .later{{animation-duration:{HOLD_S}s;animation-timing-function:step-start;"
        f"animation-fill-mode:forwards}}"
        f"{r} .fr{{visibility:hidden;animation-name:fv-showa;animation-duration:var(--d);"
        f"animation-timing-function:step-end}}"
        f"{r} .fr.last{{animation-fill-mode:forwards}}"
        f"{r} .fv-restart:checked~.fv-panels .fr{{animation-name:fv-showb}}"
        f"{anims}{r} .later,{r} .fr{{animation-play-state:paused}}"
        f"{r} .fv-play:checked~.fv-panels .later,{r} .fv-play:checked~.fv-panels .fr{{animation-play-state:running}}"
        f"{fates}{keyframes}</style>"
    )


def _cell_px(tr: ScheduleTrace, panels: int) -> float:
    return GRID_PX[panels] / max(tr.n_q_blocks, tr.n_k_blocks)


def _num(x: float, places: int = 3) -> str:
    """x in its shortest form with at most `places` decimals (no trailing zeros, no leading zero), as SVG and CSS
    read numbers.

    Example:
        >>> _num(0.625), _num(2.0), _num(20.625, 2), _num(-0.5)
        ('.625', '2', '20.62', '-.5')
    """
    text = f"{x:.{places}f}".rstrip("0").rstrip(".")
    sign, digits = ("-", text[1:]) if text.startswith("-") else ("", text)
    digits = digits[1:] if digits.startswith("0.") else digits
    return "0" if digits in ("", "0") else sign + digits


@dataclass(frozen=True)
class _Frames:
    """What a panel shows frame by frame, from the start frame on: its tile in progress and that tile's Q_i row and
    K_j, V_j column (outlined while held in SRAM), with runs of equal rows or columns drawn once per run."""

    steps: list[int]  # per frame k >= start (index k - start): the schedule step of the tile in progress
    row_runs: list[tuple[int, int, int]]  # (first frame, frames, Q block i) per run of frames on the same row
    col_runs: list[tuple[int, int, int]]  # (first frame, frames, K/V block j) per run of frames on the same column


def _runs(first: int, values: list[int]) -> list[tuple[int, int, int]]:
    """Runs of equal consecutive values: (frame of the first, length, value); frame numbers start at `first`."""
    out: list[tuple[int, int, int]] = []
    for k, v in enumerate(values, start=first):
        if out and out[-1][2] == v:
            out[-1] = (out[-1][0], out[-1][1] + 1, v)
        else:
            out.append((k, 1, v))
    return out


def _frames(tr: ScheduleTrace, computed: list[int], tl: _Timeline, still: bool) -> _Frames:
    """The panel's frames from the start frame on (a still map: the start frame only)."""
    end = tl.start + 1 if still else len(tl.frames_at)
    steps = [computed[tl.frames_at[k]] for k in range(tl.start, end)]
    return _Frames(steps, _runs(tl.start, [tr.q_block[s] for s in steps]),
                   _runs(tl.start, [tr.k_block[s] for s in steps]))


def _tiles_svg(tr: ScheduleTrace, reveal: list[int], tl: _Timeline, fr: _Frames, still: bool) -> str:
    """One <rect> per tile at its (j, i) in units of a tile (the group scales them), classed by fate and by when
    it turns to full colour: "done" if reached by the start frame, else "rK" (pale until frame K's time, set once
    per frame in _reveal_css) or on a still map nothing (pale). A tile some frame computes ("c", and "last" on the
    last frame) shows in the current tile's colour during that frame, the frame before its reveal (on a still map:
    "now"). Grids of up to TITLED_TILES tiles get a hover title each (rows, keys, step), except on a still map."""
    titled = tr.steps <= TITLED_TILES and not still
    current, last = set(fr.steps), fr.steps[-1] if fr.steps else None
    out = []
    for step in range(tr.steps):
        i, j, fate = tr.q_block[step], tr.k_block[step], tr.status[step]
        if reveal[step] <= tl.start:
            when = " done"
        elif still:  # no timeline: a tile not reached yet stays pale, the start frame's tile in progress is marked
            when = " now" if step in current else ""
        else:
            when = f" r{reveal[step]}" + (" c" if step in current else "") + (" last" if step == last else "")
        rect = f'<rect class="t {FATE_CLASS[fate]}{when}" x="{j}" y="{i}"'
        if titled:
            rows = f"{i * tr.block_q}-{min((i + 1) * tr.block_q, tr.n) - 1}"
            keys = f"{j * tr.block_k}-{min((j + 1) * tr.block_k, tr.n) - 1}"
            rect += (f"><title>Q block i={i} (rows {rows}), K/V block j={j} (keys {keys}): {fate}, step {step + 1} "
                     f"of {tr.steps}</title></rect>")
        out.append(rect if titled else rect + "/>")
    return "".join(out)


def _reveal_css(uid: str, tl: _Timeline) -> str:
    """Frame K's start time as the variable --t of class rK (K after the start frame; tiles revealed at the end of
    the run included): the animation delay of the tiles that turn to full colour at frame K, of frame K and of the
    outlines' runs that start at it (_forward_css reads --t; the start frame's is 0)."""
    return "".join(f"#{uid} .r{k}{{--t:{_num(tl.at(k))}s}}" for k in range(tl.start + 1, len(tl.frames_at) + 1))


def _forward_css(uid: str, tr: ScheduleTrace, cell: float, tl: _Timeline, still: bool) -> str:
    """What the forward map adds to map_css: one frame's duration (--f; --d, how long a frame or a run of outlines
    stays, is one frame unless a run sets its own); tiles of one unit in a group scaled to the cell, a 1 px gap drawn
    as a stroke in the grid's colour; the outlines of the Q_i row (solid) and the K_j, V_j column (dashed); the
    counters' lines (the numbers right of their labels); and, with Play, the tiles' animations (the reveal, and one
    frame in the colour of the tile in progress)."""
    r = f"#{uid}"
    gap = f";stroke:{GRID_COLOR};stroke-width:{_num(1 / cell, 4)}" if cell >= GAP_MIN_CELL_PX else ""
    css = (f"{r}{{--d:{_num(tl.dt)}s;--f:{_num(tl.dt)}s}}{r} .fv-grid .t{{width:1px;height:1px{gap}}}"
           f"{r} .t.now{{fill:{CURRENT_TILE_COLOR}}}"
           f"{r} .ro{{width:{tr.n_k_blocks}px;height:1px}}{r} .co{{width:1px;height:{tr.n_q_blocks}px;"
           f"stroke-dasharray:{_num(7 / cell, 4)} {_num(4 / cell, 4)}}}"
           f"{r} .ro,{r} .co{{fill:none;stroke:{SRAM_OUTLINE_COLOR};stroke-width:{_num(3 / cell, 4)}}}"
           f"{r} .fr>rect{{transform:translate(0,{TOP_PX - COUNTER_Y[0]}px) scale({_num(cell, 4)})}}"
           f"{r} .fr text+text{{transform:translate({VALUE_X_PX}px,{COUNTER_Y[1] - COUNTER_Y[0]}px)}}"
           f"{r} .fr text+text+text{{transform:translate({VALUE_X_PX}px,{COUNTER_Y[2] - COUNTER_Y[0]}px)}}"
           f"{r} .fr text+text+text,{r} .fv-lbl text+text{{fill:{NAIVE_COUNTER_COLOR}}}")
    if still:
        return css
    # longhands only (a shorthand would reset animation-play-state, which Play alone sets). A tile's colour jumps at
    # the start of a long active phase (step-start); a tile in progress has a second animation, one frame long
    # (none after it, but on the last frame), listed last so it wins while both run.
    css += (f"{r} .t:not(.done){{animation-duration:{HOLD_S}s;animation-timing-function:step-start;"
            f"animation-fill-mode:forwards;animation-play-state:paused}}{r} .t,{r} .fr{{animation-delay:var(--t,0s)}}"
            f"{r} .fv-play:checked~.fv-panels .t{{animation-play-state:running}}")
    for s in FATES:
        c = FATE_CLASS[s]
        css += (f"{r} .t.{c}:not(.done){{animation-name:fv-{c}a}}"
                f"{r} .fv-restart:checked~.fv-panels .t.{c}:not(.done){{animation-name:fv-{c}b}}")
    for s in (vocab.FULL, vocab.PARTIAL):  # the fates a tile in progress can have
        c = FATE_CLASS[s]
        css += (f"{r} .t.{c}.c{{animation-name:fv-{c}a,fv-ca}}"
                f"{r} .fv-restart:checked~.fv-panels .t.{c}.c{{animation-name:fv-{c}b,fv-cb}}")
    return (css + f"{r} .t.c{{animation-duration:{HOLD_S}s,var(--f);animation-fill-mode:forwards,none;"
            "animation-delay:var(--t),calc(var(--t) - var(--f))}"
            f"{r} .t.c.last{{animation-duration:{HOLD_S}s;animation-fill-mode:forwards}}"
            f"@keyframes fv-ca{{from,to{{fill:{CURRENT_TILE_COLOR}}}}}"
            f"@keyframes fv-cb{{from,to{{fill:{CURRENT_TILE_COLOR}}}}}")


def counter_text(tr: ScheduleTrace, computed: list[int], f: int) -> tuple[str, str, str]:
    """The three counter lines over a panel while computed tile f is in progress: which tile, the IO model's
    running HBM traffic, and standard attention's for the same part of S (when the trace has them).

    Example:
        >>> from flashviz.measure.trace import schedule_trace
        >>> tr = schedule_trace(64, 32, 32, causal=True)
        >>> counter_text(tr, tr.computed_steps(), 1)
        ('FA1 tile 2/3: i=1, j=0', '', '')
        >>> counter_text(schedule_trace(64, 32, 32, d=16), [0, 1, 2, 3], 3)[1:]
        ('HBM traffic so far 38.5 KiB', 'standard attention: 80.0 KiB')
    """
    short = LOOP_ORDER_SHORT[tr.loop_order]
    if not computed:
        return f"{short}: every tile is masked,", "nothing is computed", ""
    first, *values = _counter_values(tr, computed, f)
    second, third = (f"{label} {v}" if v else "" for label, v in zip(COUNTER_LABELS, values, strict=True))
    return first, second, third


def _counter_values(tr: ScheduleTrace, computed: list[int], f: int) -> tuple[str, str, str]:
    """What changes from frame to frame in counter_text's lines: the first line, and the numbers after the second
    and third lines' labels (COUNTER_LABELS; empty where the trace has no IO counters)."""
    step = computed[f]
    hbm = format_bytes(tr.hbm_bytes[step]) if tr.hbm_bytes is not None else ""
    naive = format_bytes(tr.naive_bytes[step]) if tr.naive_bytes is not None else ""
    return (f"{LOOP_ORDER_SHORT[tr.loop_order]} tile {f + 1}/{len(computed)}: i={tr.q_block[step]}, "
            f"j={tr.k_block[step]}", hbm, naive)


def _runs_svg(fr: _Frames, n_frames: int, dt: float) -> str:
    """The row and column outlines that stay for more than one frame: one element per run, shown from its first
    frame (class rK) for its frames (--d); one-frame runs are drawn in their frame (_frames_svg)."""
    out = []
    for kind, attr, runs in (("ro", "y", fr.row_runs), ("co", "x", fr.col_runs)):
        for k, length, v in runs:
            if length > 1:
                last = " last" if k + length == n_frames else ""
                out.append(f'<rect class="fr {kind} r{k}{last}" {attr}="{v}" style="--d:{_num(length * dt)}s"/>')
    return "".join(out)


def _frames_svg(tr: ScheduleTrace, computed: list[int], tl: _Timeline, fr: _Frames) -> str:
    """One <g class="fr rK"> per frame K from the start frame on (a still map: the start frame only), visible for
    its frame only (the last one stays): the counter above the grid and the one-frame runs of the outlines."""
    single = {("ro", k): v for k, n, v in fr.row_runs if n == 1} | {("co", k): v for k, n, v in fr.col_runs if n == 1}
    out = []
    for k in range(tl.start, tl.start + len(fr.steps)):
        lines = "".join(f"<text>{escape(t)}</text>" for t in _counter_values(tr, computed, tl.frames_at[k]))
        outlines = "".join(f'<rect class="{kind}" {attr}="{single[kind, k]}"/>'
                           for kind, attr in (("ro", "y"), ("co", "x")) if (kind, k) in single)
        last = " last" if k == len(tl.frames_at) - 1 else ""
        out.append(f'<g class="fr r{k}{last}">{lines}{outlines}</g>')
    return "".join(out)


def _axes_svg(tr: ScheduleTrace, cell: float, width: float, height: float, y_title: bool) -> str:
    """Tick labels every _dtick blocks and the axis titles (the y title on the first panel only)."""
    x0, y0 = LEFT_PX, TOP_PX
    ticks = "".join(f'<text x="{x0 + (j + 0.5) * cell:.1f}" y="{y0 + height + 20:.1f}" text-anchor="middle" '
                    f'font-size="{TICK_FONT_PX}">{j}</text>' for j in range(0, tr.n_k_blocks, _dtick(tr.n_k_blocks)))
    ticks += "".join(f'<text x="{x0 - 6}" y="{y0 + (i + 0.5) * cell + 6:.1f}" text-anchor="end" '
                     f'font-size="{TICK_FONT_PX}">{i}</text>' for i in range(0, tr.n_q_blocks, _dtick(tr.n_q_blocks)))
    ticks += (f'<text x="{x0 + width / 2:.1f}" y="{y0 + height + 46:.1f}" text-anchor="middle">K/V block j '
              f"(Bc = {tr.block_k} keys)</text>")
    if y_title:
        cy = y0 + height / 2
        ticks += (f'<text transform="translate(16,{cy:.1f}) rotate(-90)" text-anchor="middle">Q block i '
                  f"(Br = {tr.block_q} rows)</text>")
    return ticks


def _panel_svg(tr: ScheduleTrace, p: int, panels: int, tl: _Timeline, row: int | None, still: bool) -> str:
    """Panel p: the grid's background, its tiles (scaled from units of a tile), the row marker, the axes, the
    outlines' runs and the frames (counters over the grid)."""
    computed = tr.computed_steps()
    cell = _cell_px(tr, panels)
    width, height = tr.n_k_blocks * cell, tr.n_q_blocks * cell
    reveal = _reveal_frames(tr, computed, tl.frames_at)
    fr = _frames(tr, computed, tl, still) if computed else _Frames([], [], [])
    marker = ""
    if row is not None and 0 <= row < tr.n:
        y = row_marker_y(tr.n, tr.block_q, row) * cell
        marker = (f'<g transform="translate({LEFT_PX},{TOP_PX})"><line class="row-marker" data-row="{row}" x1="0" '
                  f'x2="{width:.2f}" y1="{y:.2f}" y2="{y:.2f}" stroke="{ROW_MARKER_COLOR}" stroke-width="3" '
                  'stroke-dasharray="6 4"/></g>')
    svg_w, svg_h = LEFT_PX + width + RIGHT_PX, TOP_PX + height + BOTTOM_PX
    grid = f'transform="translate({LEFT_PX},{TOP_PX}) scale({_num(cell, 4)})"'
    runs = _runs_svg(fr, len(tl.frames_at), tl.dt)
    if computed:  # the second and third lines' labels once, their numbers in each frame (_frames_svg)
        labels = "".join(f'<text y="{y - COUNTER_Y[0]}">{escape(label)}</text>' for y, label, has in
                         zip(COUNTER_Y[1:], COUNTER_LABELS, (tr.hbm_bytes, tr.naive_bytes), strict=True)
                         if has is not None)
        counters = f'<g class="fv-lbl">{labels}</g>{_frames_svg(tr, computed, tl, fr)}'
    else:
        counters = "".join(f'<text y="{y - COUNTER_Y[0]}">{escape(line)}</text>'
                           for y, line in zip(COUNTER_Y, counter_text(tr, [], 0), strict=True))
    return (f'<svg class="fv-grid" data-loop-order="{tr.loop_order}" data-cell="{cell:.4f}" width="{svg_w:.0f}" '
            f'height="{svg_h:.0f}" viewBox="0 0 {svg_w:.0f} {svg_h:.0f}" role="img" '
            f'aria-label="tile map, {tr.loop_order}">'
            f'<rect x="{LEFT_PX}" y="{TOP_PX}" width="{width:.2f}" height="{height:.2f}" fill="{GRID_COLOR}"/>'
            f"<g {grid}>{_tiles_svg(tr, reveal, tl, fr, still)}</g>{marker}"
            f"{_axes_svg(tr, cell, width, height, p == 0)}{f'<g {grid}>{runs}</g>' if runs else ''}"
            f'<g class="fv-cnt" transform="translate({LEFT_PX},{COUNTER_Y[0]})">{counters}</g></svg>')


def _legend(row: int | None, beside: bool) -> str:
    """The colour key: beside a single grid (a column), or under two (wrapped lines)."""
    items = [f'<span><span class="fv-sw" style="background:{TILE_COLORS[s]}"></span>{TILE_STATUS_LABELS[s]}</span>'
             for s in FATES]
    items.append(f'<span><span class="fv-sw" style="background:{TILE_AHEAD_COLORS[vocab.FULL]}"></span>pale: not '
                 "reached yet</span>")
    items.append(f'<span><span class="fv-sw" style="background:{CURRENT_TILE_COLOR}"></span>in progress, its Q_i '
                 "row (solid) and K_j, V_j column (dashed) in SRAM</span>")
    if row is not None:
        items.append(f'<span><span class="fv-sw" style="background:{ROW_MARKER_COLOR}"></span>row {row} '
                     "(the row inspector's)</span>")
    return f'<span class="fv-legend{" beside" if beside else ""}">{"".join(items)}</span>'


def tile_map_html(traces: Sequence[ScheduleTrace], *, row: int | None = None, max_frames: int = MAX_FRAMES,
                  title: str | None = None, subtitle: str | None = None, start_frame: int = 0,
                  uid: str = "fv-tm", still: bool = False) -> str:
    """The animated tile map of one or two loop orders (lockstep: frame k = each order's k-th computed tile), as
    one line of HTML (an SVG per panel, CSS animations, a Play/Pause and a Restart control).

    Args:
        traces: one ScheduleTrace per panel (same N, blocks and mask; e.g. kv_outer and q_outer).
        row: a query row to mark on the map (the row inspector's row), or None.
        max_frames: at most this many frames (evenly subsampled); the last frame is always the last computed tile.
        title, subtitle: None names what the map shows and gives N, Br, Bc, the tiles computed and the mask.
        start_frame: the frame drawn before Play (0 <= start_frame < frames), so a page keeps its place when a
            setting changes; Play and Restart run from it.
        uid: the root element's id (unique on a page): the CSS is scoped to it.
        still: the start frame as a still picture, a third to two thirds of the markup: every tile's fate, that
            frame's tile in progress, outlines and counters, no later frames, hover titles or Play and Restart (for
            a picture of one moment: a slide, a printout).
    Returns:
        HTML for st.markdown(..., unsafe_allow_html=True): no blank lines, no script.

    Example:
        >>> from flashviz.measure.trace import schedule_trace
        >>> html = tile_map_html([schedule_trace(256, 64, 64, causal=True)], start_frame=3)
        >>> html.count('<g class="fr'), html.count('class="t s ')  # frames from the start frame on; skipped tiles
        (7, 6)
    """
    if not traces:
        raise ValueError("tile_map_html needs at least one ScheduleTrace (one per loop order to show).")
    if len(traces) not in GRID_PX:
        raise ValueError(f"tile_map_html draws one or two panels, got {len(traces)} traces. Pass one per loop order.")
    computed = traces[0].computed_steps()
    frames_at = frame_indices(len(computed), max_frames)
    if not 0 <= start_frame < max(len(frames_at), 1):
        raise ValueError(f"start_frame must be in 0..{max(len(frames_at) - 1, 0)} (this map has {len(frames_at)} "
                         f"frames), got {start_frame}. Start at 0 when the settings change the frame count.")
    tl = _Timeline(frames_at, start_frame, frame_seconds(len(frames_at)))
    panels = "".join(_panel_svg(tr, p, len(traces), tl, row, still) for p, tr in enumerate(traces))
    title = escape(title or "Tile map of S = QKᵀ: computed, masked, skipped")
    subtitle = escape(subtitle or _subtitle(traces[0], len(computed)))
    controls = "" if still else (
        f'<input type="checkbox" id="{uid}-play" class="fv-play" aria-label="Play or pause the animation"/>'
        f'<input type="checkbox" id="{uid}-restart" class="fv-restart" aria-label="Restart the animation"/>')
    play = "" if len(frames_at) < 2 else (
        f'<label for="{uid}-play" class="fv-playlabel"><span class="fv-go">▶ Play</span>'
        f'<span class="fv-pause">❚❚ Pause</span></label><label for="{uid}-restart">⟲ Restart</label>')
    bar = '<div class="fv-bar" style="visibility:hidden" aria-hidden="true">' if still else '<div class="fv-bar">'
    # (a still map keeps the controls' place, hidden and tied to no input, so the animated map replaces it in place)
    cell = _cell_px(traces[0], len(traces))
    css = _forward_css(uid, traces[0], cell, tl, still) + ("" if still else _reveal_css(uid, tl))  # reveal: with Play
    still_attr = ' data-still="1"' if still else ""
    return (f'<div id="{uid}" class="{ROOT_CLASS}" data-frames="{len(frames_at)}" data-start="{start_frame}" '
            f'data-frame-s="{tl.dt:.3f}"{still_attr}>{map_css(uid)}<style>{css}</style>'
            f'<p class="fv-title">{title}</p><p class="fv-sub">{subtitle}</p>{controls}'
            f'{bar}{play}</div><div class="fv-panels">{panels}{_legend(row, beside=len(traces) == 1)}'
            "</div></div>")


def _subtitle(tr: ScheduleTrace, n_computed: int) -> str:
    """The settings the map shows: N, the tile sizes, how many tiles are computed, and the mask."""
    mask = ", ".join(m for m in ("causal" if tr.causal else "", _window_text(tr.window)) if m) or "no mask"
    return (f"N = {tr.n} · Br = {tr.block_q}, Bc = {tr.block_k} · {tr.n_q_blocks} × {tr.n_k_blocks} = {tr.steps} "
            f"tiles, {n_computed} computed · {mask}")


def _dtick(n_blocks: int) -> int:
    """Whole-number tick spacing: every block up to 10 blocks, then about 8 ticks."""
    return 1 if n_blocks <= 10 else max(1, round(n_blocks / 8 / 5) * 5) if n_blocks > 40 else max(1, n_blocks // 8)


def _window_text(window: tuple[int | None, int | None] | None) -> str:
    if window is None:
        return ""
    left, right = ("∞" if w is None else str(w) for w in window)
    return f"window ({left}, {right})"
