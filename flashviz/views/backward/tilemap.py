"""The backward's animated tile map, as one self-contained SVG + CSS snippet (no plotly, no script, no torch).

Input is flashviz.views.backward.data's BackwardSchedule (plain data). The grid is Q blocks (rows, i) x K/V blocks
(columns, j) of the score matrix, as on the forward's map (figures/tilemap.py), whose approach and CSS this map
shares: every tile shows its fate from the start (full, partial, skipped: pale until visited), and Play runs CSS
animations whose delays are their frames' start times, paused until the Play checkbox is checked.

What a frame shows, FlashAttention-2 Algorithm 2 (outer loop over K/V blocks j):
    the tile in progress; the column band: K_j, V_j loaded once and dK_j, dV_j accumulated, on chip for the whole
    column; the row outline: Q_i, dO_i, L_i, D_i streamed from HBM for this tile; the dQ marker right of the row:
    dQ_i read, updated and written back in HBM on every tile (an atomic add on a GPU).
With deterministic dQ a second pass follows (outer loop over Q blocks i): the row band is on chip (Q_i, dO_i, L_i,
D_i and the dQ_i accumulator), K_j, V_j stream in per tile (dashed column outline), every computed tile is visited
again (a purple mark) and dQ_i goes to HBM once, after the row's last tile. Counters over each grid: the tile, and the
IO model's HBM traffic so far against standard attention's backward. Given both schedules, the map draws them side by
side in lockstep (frame k is each one's k-th computed tile; the atomic one ends first) with a switch between them.

Legend: N sequence length, Br = block_q, Bc = block_k, Tr x Tc tiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

from flashviz import vocab
from flashviz.figures.palette import (
    BASE_FONT_PX,
    CURRENT_TILE_COLOR,
    DQ_MARKER_COLOR,
    ON_CHIP_BAND_COLOR,
    SECOND_PASS_COLOR,
    SRAM_OUTLINE_COLOR,
    TICK_FONT_PX,
    TILE_AHEAD_COLORS,
    TILE_COLORS,
    TITLE_FONT_PX,
)
from flashviz.figures.tilemap import (
    FATE_CLASS,
    GAP_MIN_CELL_PX,
    LEFT_PX,
    MAX_FRAMES,
    ROOT_CLASS,
    frame_indices,
    frame_seconds,
    map_css,
)
from flashviz.units import format_bytes
from flashviz.vocab import DQ_ATOMIC, DQ_DETERMINISTIC, TILE_STATUS_LABELS, TILE_STATUSES

if TYPE_CHECKING:  # a plain dataclass; imported for type hints only, so this module never loads torch
    from flashviz.views.backward.data import BackwardSchedule

GRID_PX = {1: 290, 2: 250}  # the longer side of a grid, by panel count: both fit beside each other, or beside the
#                                tile table, in a 1280 x 720 window with the sidebar open
TOP_PX = 94  # room above a grid: the panel's name and three counter lines
LINE_Y = (20, 42, 64, 86)  # baselines of those four lines (px)
COUNTER_X = 4  # px: the counters start at the panel's left edge, the y tick labels' column included
PANEL_NAMES = {DQ_ATOMIC: "atomic dQ", DQ_DETERMINISTIC: "deterministic dQ"}  # short: two panels share 760 px
BOTTOM_PX = 54  # the x tick labels and axis title
RIGHT_PX = 56  # the dQ_i marker and its label, right of the grid
MARKER_W = 12  # px width of the dQ_i marker
TITLE = "The backward pass, tile by tile (FlashAttention-2, Algorithm 2)"  # the map's default title
DONE = -1  # data-step of a panel's frames after its last tile
BOLD = ' font-weight="600"'  # the panel's name over its counters
STILL = ' data-still="1"'  # the root of a still map
CHECKED = ' checked="checked"'  # the switch's default (well-formed markup: the tests parse it as XML)


def _positions(n_computed: int, frames_at: list[int]) -> list[int | None]:
    """Per frame: the index of the panel's computed tile in progress, or None once the panel has finished."""
    return [f if f < n_computed else None for f in frames_at]


def _reveals(steps: int, computed: list[int], pos: list[int | None]) -> list[int]:
    """Per step: the first frame whose tile in progress comes later (or the panel is done); len(pos) if none."""
    out, k = [], 0
    for step in range(steps):
        while k < len(pos) and pos[k] is not None and computed[pos[k]] <= step:
            k += 1
        out.append(k)
    return out


def _when(reveal: int, start: int, still: bool) -> str:
    """A tile's animation classes: full colour already at the start frame, pale on a still map, or reveal at K."""
    return "done" if reveal <= start else "" if still else f"later r{reveal}"


def _tiles_svg(s: BackwardSchedule, reveal: list[int], start: int, cell: float, still: bool) -> str:
    """One <rect class="t ..."> per grid tile (its fate; revealed at its first visit) and, for the second pass, a
    purple <rect class="t2 ..."> inside every computed tile, revealed at its second visit."""
    gap = 1.0 if cell >= GAP_MIN_CELL_PX else 0.0
    n_grid = s.n_q_blocks * s.n_k_blocks
    out = []
    for step in range(s.steps):
        i, j, fate = s.q_block[step], s.k_block[step], s.status[step]
        when = _when(reveal[step], start, still)
        if step < n_grid:
            out.append(f'<rect class="{f"t {FATE_CLASS[fate]} {when}".rstrip()}" data-i="{i}" data-j="{j}" '
                       f'x="{j * cell + gap / 2:.1f}" y="{i * cell + gap / 2:.1f}" width="{cell - gap:.1f}" '
                       f'height="{cell - gap:.1f}"/>')
        elif fate != vocab.SKIPPED:
            side = cell * 0.36
            out.append(f'<rect class="{f"t2 {when}".rstrip()}" data-i="{i}" data-j="{j}" '
                       f'x="{(j + 0.5) * cell - side / 2:.1f}" y="{(i + 0.5) * cell - side / 2:.1f}" '
                       f'width="{side:.1f}" height="{side:.1f}" fill="{SECOND_PASS_COLOR}"/>')
    return "".join(out)


def _dq_marker(i: int, cell: float, width: float) -> str:
    """dQ_i in HBM: a bar right of row i and its label."""
    return (f'<g class="dq" data-i="{i}"><rect x="{width + 4:.1f}" y="{i * cell:.2f}" width="{MARKER_W}" '
            f'height="{cell:.2f}" fill="{DQ_MARKER_COLOR}"/><text x="{width + 6 + MARKER_W:.1f}" '
            f'y="{(i + 0.5) * cell + 6:.1f}" font-size="{TICK_FONT_PX}" fill="{DQ_MARKER_COLOR}">dQ</text></g>')


def _overlay(s: BackwardSchedule, step: int, cell: float, last_of_row: set[int]) -> str:
    """The frame's drawing over the grid: the on-chip band, the streamed outline, the tile, the dQ_i marker."""
    i, j, second = s.q_block[step], s.k_block[step], s.passes[step] == 2
    width, height = s.n_k_blocks * cell, s.n_q_blocks * cell
    column = (f'x="{j * cell:.2f}" y="0" width="{cell:.2f}" height="{height:.2f}"')
    row = (f'x="0" y="{i * cell:.2f}" width="{width:.2f}" height="{cell:.2f}"')
    band, outline = (row, column) if second else (column, row)
    dash = ' stroke-dasharray="7 4"' if second else ""
    out = (f'<rect class="band" data-kind="{"row" if second else "column"}" {band} fill="{ON_CHIP_BAND_COLOR}" '
           f'fill-opacity="0.22" stroke="{ON_CHIP_BAND_COLOR}" stroke-width="3"/>'
           f'<rect class="cur" x="{j * cell:.2f}" y="{i * cell:.2f}" width="{cell:.2f}" height="{cell:.2f}" '
           f'fill="{CURRENT_TILE_COLOR}"/>'
           f'<rect class="stream" data-kind="{"column" if second else "row"}" {outline} fill="none" '
           f'stroke="{SRAM_OUTLINE_COLOR}" stroke-width="3"{dash}/>')
    if s.dq_mode == DQ_ATOMIC or (second and step in last_of_row):
        out += _dq_marker(i, cell, width)
    return out


def counter_lines(s: BackwardSchedule, computed: list[int], f: int | None) -> tuple[str, str, str, str]:
    """The four lines over a panel while its computed tile f is in progress (None: after its last tile): the
    schedule's name, the tile, the IO model's HBM traffic so far, standard attention's backward for scale.

    Example:
        >>> from flashviz.views.backward.data import backward_schedule
        >>> s = backward_schedule(8, 4, 4, 4, causal=True)
        >>> counter_lines(s, s.computed_steps(), 1)
        ('atomic dQ', 'tile 2/3: i=1, j=0', 'HBM so far: 1.2 KiB', 'standard backward: 2.8 KiB')
    """
    name, standard = PANEL_NAMES[s.dq_mode], f"standard backward: {format_bytes(s.standard_hbm_bytes)}"
    if not computed:
        return name, "every tile is masked", f"HBM: {format_bytes(s.start_hbm_bytes)} (pre-pass)", standard
    if f is None:
        return name, f"done: {len(computed)} tiles", f"HBM in all: {format_bytes(s.hbm_bytes[-1])}", standard
    step = computed[f]
    second = "pass 2 · " if s.passes[step] == 2 else "pass 1 · " if s.dq_mode != DQ_ATOMIC else ""
    return (name, f"{second}tile {f + 1}/{len(computed)}: i={s.q_block[step]}, j={s.k_block[step]}",
            f"HBM so far: {format_bytes(s.hbm_bytes[step])}", standard)


def _frames_svg(s: BackwardSchedule, computed: list[int], pos: list[int | None], start: int, dt: float,
                cell: float, still: bool) -> str:
    """One <g class="fr"> per frame from the start frame on (still: the start frame only): counters and overlay."""
    grid = s.n_q_blocks * s.n_k_blocks
    last_of_row = {max(st for st in computed if st >= grid and s.q_block[st] == i) for i in
                   {s.q_block[st] for st in computed if st >= grid}}  # pass 2: where dQ_i is written
    out = []
    for k in range(start, start + 1 if still else len(pos)):
        f = pos[k]
        step = DONE if f is None else computed[f]
        texts = counter_lines(s, computed, f)
        lines = "".join(f'<text class="counter" x="{COUNTER_X}" y="{y}"{BOLD if n == 0 else ""}>{escape(t)}</text>'
                        for n, (y, t) in enumerate(zip(LINE_Y, texts, strict=True)))
        overlay = "" if f is None else _overlay(s, step, cell, last_of_row)
        hbm = s.hbm_bytes[step] if f is not None else (s.hbm_bytes[-1] if s.steps else s.start_hbm_bytes)
        last = " last" if k == len(pos) - 1 else ""
        out.append(f'<g class="fr{last}" data-frame="{k}" data-step="{step}" data-hbm-bytes="{hbm}" '
                   f'data-pass="{0 if f is None else s.passes[step]}" '
                   f'style="--d:{dt:.3f}s;animation-delay:{(k - start) * dt:.3f}s">{lines}'
                   f'<g transform="translate({LEFT_PX},{TOP_PX})">{overlay}</g></g>')
    return "".join(out)


def _axes_svg(s: BackwardSchedule, cell: float, y_title: bool) -> str:
    """Tick labels (every block up to 10, then about 8) and the axis titles (the y title on the first panel)."""
    width, height = s.n_k_blocks * cell, s.n_q_blocks * cell
    x0, y0 = LEFT_PX, TOP_PX
    out = "".join(f'<text x="{x0 + (j + 0.5) * cell:.1f}" y="{y0 + height + 20:.1f}" text-anchor="middle" '
                  f'font-size="{TICK_FONT_PX}">{j}</text>' for j in range(0, s.n_k_blocks, _dtick(s.n_k_blocks)))
    out += "".join(f'<text x="{x0 - 6}" y="{y0 + (i + 0.5) * cell + 6:.1f}" text-anchor="end" '
                   f'font-size="{TICK_FONT_PX}">{i}</text>' for i in range(0, s.n_q_blocks, _dtick(s.n_q_blocks)))
    out += (f'<text x="{x0 + width / 2:.1f}" y="{y0 + height + 46:.1f}" text-anchor="middle">K/V block j '
            f"(Bc = {s.block_k} keys)</text>")
    if y_title:
        out += (f'<text transform="translate(16,{y0 + height / 2:.1f}) rotate(-90)" text-anchor="middle">Q block i '
                f"(Br = {s.block_q} rows)</text>")
    return out


def _dtick(n_blocks: int) -> int:
    return 1 if n_blocks <= 10 else max(1, n_blocks // 8)


def _panel_svg(s: BackwardSchedule, p: int, panels: int, frames_at: list[int], start: int, dt: float,
               still: bool) -> str:
    """One schedule's panel: counters, the grid with every tile's fate, the axes, the frames' overlays."""
    computed = s.computed_steps()
    cell = GRID_PX[panels] / max(s.n_q_blocks, s.n_k_blocks, 1)
    width, height = s.n_k_blocks * cell, s.n_q_blocks * cell
    pos = _positions(len(computed), frames_at)
    reveal = _reveals(s.steps, computed, pos)
    svg_w, svg_h = LEFT_PX + width + RIGHT_PX, TOP_PX + height + BOTTOM_PX
    return (f'<svg class="fv-grid fv-bw-{s.dq_mode}" data-dq-mode="{s.dq_mode}" data-cell="{cell:.4f}" '
            f'data-computed="{len(computed)}" width="{svg_w:.0f}" height="{svg_h:.0f}" '
            f'viewBox="0 0 {svg_w:.0f} {svg_h:.0f}" role="img" aria-label="backward tile map, {s.dq_mode} dQ">'
            f'<rect x="{LEFT_PX}" y="{TOP_PX}" width="{width:.2f}" height="{height:.2f}" fill="#5a5a5a"/>'
            f'<g transform="translate({LEFT_PX},{TOP_PX})">{_tiles_svg(s, reveal, start, cell, still)}</g>'
            f"{_axes_svg(s, cell, p == 0)}{_frames_svg(s, computed, pos, start, dt, cell, still)}</svg>")


def _extra_css(uid: str, modes: Sequence[str]) -> str:
    """What the backward map adds to the forward's CSS: the second-pass marks (hidden until their frame) and, with
    two panels, the switch that shows both, or one of them."""
    r = f"#{uid}"
    css = (f"{r} .t2{{opacity:0}}{r} .t2.done{{opacity:1}}{r} .t2.later{{animation-name:fv-t2a}}"
           f"{r} .fv-restart:checked~.fv-panels .t2.later{{animation-name:fv-t2b}}"
           "@keyframes fv-t2a{to{opacity:1}}@keyframes fv-t2b{to{opacity:1}}"
           f"{r} .fv-mode:focus-visible~.fv-bar .fv-modes{{outline:2px solid {CURRENT_TILE_COLOR}}}")
    if len(modes) == 2:
        for m, other in (modes, modes[::-1]):
            css += f"{r} .fv-m-{m}:checked~.fv-panels .fv-bw-{other}{{display:none}}"
        for m in ("both", *modes):
            css += f"{r} .fv-m-{m}:checked~.fv-bar .fv-lab-{m}{{background:#dfe6f0;border-color:#222;font-weight:600}}"
    return f"<style>{css}</style>"


def _switch(uid: str, modes: Sequence[str]) -> tuple[str, str]:
    """Radio inputs (placed before the panels) and their labels (in the bar): both schedules, or one."""
    if len(modes) < 2:
        return "", ""
    names = {"both": "both", **{m: PANEL_NAMES[m] for m in modes}}
    inputs = "".join(f'<input type="radio" name="{uid}-mode" id="{uid}-m-{m}" class="fv-mode fv-m-{m}"'
                     f'{CHECKED if m == "both" else ""} aria-label="show {names[m]}"/>' for m in names)
    labels = "".join(f'<label for="{uid}-m-{m}" class="fv-lab-{m}">{escape(names[m])}</label>' for m in names)
    return inputs, f'<span class="fv-modes">{labels}</span>'


def _legend(modes: Sequence[str]) -> str:
    """The colour key under the panels."""
    def sw(color: str, label: str, style: str = "") -> str:
        return f'<span><span class="fv-sw" style="background:{color};{style}"></span>{escape(label)}</span>'

    items = [sw(TILE_COLORS[st], TILE_STATUS_LABELS[st]) for st in TILE_STATUSES]
    items += [sw(TILE_AHEAD_COLORS[vocab.FULL], "pale: not reached yet"), sw(CURRENT_TILE_COLOR, "tile in progress"),
              sw(ON_CHIP_BAND_COLOR, "K_j, V_j, dK_j, dV_j on chip for the whole column (blue band)", "opacity:.5"),
              sw("#fff", "Q_i, dO_i, L_i, D_i streamed from HBM (black outline)", "border:3px solid #000"),
              sw(DQ_MARKER_COLOR, "dQ_i read and written back in HBM every tile (atomic add)")]
    items.append("<span>HBM so far: the tiled backward's traffic (IO model); standard backward: standard attention's, "
                 "in all (it writes P, dP, dS to HBM and reads them back)</span>")
    if vocab.DQ_DETERMINISTIC in modes:
        items += [sw(SECOND_PASS_COLOR, "visited again by the second pass (deterministic dQ): Q_i, dO_i, L_i, "
                                        "D_i, dQ_i on chip for the row, K_j, V_j streamed (dashed), dQ_i written once")]
    return f'<span class="fv-legend">{"".join(items)}</span>'


def backward_map_html(schedules: Sequence[BackwardSchedule], *, title: str | None = None,
                      subtitle: str | None = None, max_frames: int = MAX_FRAMES, start_frame: int = 0,
                      uid: str = "fv-bw", still: bool = False, header: bool = True) -> str:
    """The backward's animated tile map of one schedule, or of atomic and deterministic dQ side by side (lockstep,
    with a switch), as one line of HTML: an SVG per panel, CSS animations, Play/Pause and Restart, no script.

    Args:
        schedules: one or two BackwardSchedule of the same grid and mask (e.g. dq_mode "atomic" and
            "deterministic", from flashviz.views.backward.data.backward_schedule).
        title, subtitle: None names what the map shows and gives N, Br, Bc, the tiles computed and the mask.
        max_frames: at most this many frames (evenly subsampled); the last frame is the longest panel's last tile.
        start_frame: the frame drawn before Play (0 <= start_frame < frames).
        uid: the root element's id (unique on a page): the CSS is scoped to it.
        still: the start frame only, without Play, Restart or later frames.
        header: False leaves out the title and subtitle (a page draws map_header_html above the map and what stands
            beside it).
    Returns:
        HTML for st.markdown(..., unsafe_allow_html=True): no blank lines, no script.

    Example:
        >>> from flashviz.views.backward.data import backward_schedule
        >>> pair = [backward_schedule(32, 16, 8, 8, causal=True, dq_mode=m) for m in ("atomic", "deterministic")]
        >>> html = backward_map_html(pair)
        >>> html.count('class="t s '), html.count('class="t2 ')  # skipped tiles of both panels; second-pass marks
        (12, 10)
    """
    if len(schedules) not in GRID_PX:
        raise ValueError(f"backward_map_html draws one or two schedules, got {len(schedules)}. Pass "
                         "backward_schedule(..., dq_mode='atomic') and/or the 'deterministic' one.")
    grids = {(s.n, s.block_q, s.block_k, s.causal, s.window, s.status[:s.n_q_blocks * s.n_k_blocks])
             for s in schedules}
    if len(grids) > 1:
        raise ValueError("backward_map_html's schedules must share N, Br, Bc and the mask (they differ only in "
                         "dq_mode); build them from the same settings.")
    longest = max(len(s.computed_steps()) for s in schedules)
    frames_at = frame_indices(longest, max_frames) or [0]
    if not 0 <= start_frame < len(frames_at):
        raise ValueError(f"start_frame must be in 0..{len(frames_at) - 1} (this map has {len(frames_at)} frames), "
                         f"got {start_frame}. Start at 0 when the settings change the frame count.")
    dt = frame_seconds(len(frames_at))
    modes = [s.dq_mode for s in schedules]
    panels = "".join(_panel_svg(s, p, len(schedules), frames_at, start_frame, dt, still)
                     for p, s in enumerate(schedules))
    inputs, switch = _switch(uid, modes)
    controls = "" if still else (
        f'<input type="checkbox" id="{uid}-play" class="fv-play" aria-label="Play or pause the animation"/>'
        f'<input type="checkbox" id="{uid}-restart" class="fv-restart" aria-label="Restart the animation"/>{inputs}')
    play = "" if still or len(frames_at) < 2 else (
        f'<label for="{uid}-play" class="fv-playlabel"><span class="fv-go">▶ Play</span>'
        f'<span class="fv-pause">❚❚ Pause</span></label><label for="{uid}-restart">⟲ Restart</label>')
    reveal = "" if still else "<style>" + "".join(
        f"#{uid} .r{k}{{animation-delay:{(k - start_frame) * dt:.3f}s}}"
        for k in range(start_frame + 1, len(frames_at) + 1)) + "</style>"
    head = (f'<p class="fv-title">{escape(title or TITLE)}</p>'
            f'<p class="fv-sub">{escape(subtitle or map_subtitle(schedules[0]))}</p>') if header else ""
    return (f'<div id="{uid}" class="{ROOT_CLASS} fv-backward" data-frames="{len(frames_at)}" '
            f'data-start="{start_frame}" data-frame-s="{dt:.3f}"{STILL if still else ""}>'
            f"{map_css(uid)}{_extra_css(uid, modes)}{reveal}{head}{controls}"
            f'<div class="fv-bar">{play}{"" if still else switch}</div>'
            f'<div class="fv-panels">{panels}{_legend(modes)}</div></div>')


def map_header_html(schedule: BackwardSchedule, *, title: str | None = None, subtitle: str | None = None) -> str:
    """The map's title and subtitle as their own snippet, in the map's fonts: for a page that draws the map with
    header=False beside something else, so the header spans both.

    Example:
        >>> from flashviz.views.backward.data import backward_schedule
        >>> map_header_html(backward_schedule(32, 16, 8, 8, causal=True), title="Backward").count("<p ")
        2
    """
    return (f'<div class="fv-bw-head" style="font-family:Arial,Helvetica,sans-serif;color:#111">'
            f'<p style="font-size:{TITLE_FONT_PX}px;font-weight:600;margin:0">{escape(title or TITLE)}</p>'
            f'<p style="font-size:{BASE_FONT_PX}px;margin:2px 0 0 0">{escape(subtitle or map_subtitle(schedule))}</p>'
            "</div>")


def map_subtitle(s: BackwardSchedule) -> str:
    """The settings the map shows: N, d, the tiles, how many are computed, the mask, the heads and element size.

    Example:
        >>> from flashviz.views.backward.data import backward_schedule
        >>> map_subtitle(backward_schedule(32, 16, 8, 8, causal=True))
        'N = 32, d = 16, 8 × 8 tiles: 10 of 16 computed · causal · 1 head, 4-byte elements'
    """
    computed = sum(st != vocab.SKIPPED for st in s.status[:s.n_q_blocks * s.n_k_blocks])
    left, right = s.window if s.window is not None else (None, None)
    window = "" if s.window is None else f"window ({'∞' if left is None else left}, {'∞' if right is None else right})"
    mask = ", ".join(m for m in ("causal" if s.causal else "", window) if m) or "no mask"
    heads = f"{s.heads} head{'s' if s.heads > 1 else ''}" + (f" ({s.heads_kv} K/V)" if s.heads_kv != s.heads else "")
    return (f"N = {s.n}, d = {s.d}, {s.block_q} × {s.block_k} tiles: {computed} of {s.n_q_blocks * s.n_k_blocks} "
            f"computed · {mask} · {heads}, {s.dtype_bytes}-byte elements")
