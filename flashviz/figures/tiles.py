"""The animated tile map of the "How it works" view. Plotly only.

Input is the plain data of flashviz.measure.trace (ScheduleTrace); nothing here imports torch or streamlit. The map
is a grid of Q blocks (rows, i) x K/V blocks (columns, j) of the score matrix S = Q K^T. Every tile shows its fate
from the first frame: full (computed, no mask), partial (computed, masked inside) or skipped (never loaded), pale
until the schedule reaches it and in full colour once visited, so the mask and the saved work are visible before
Play; Play then animates the visiting order, one frame per computed tile (FlashAttention-1 Algorithm 1 visits them
column by column, "kv_outer"; FlashAttention-2 row by row, "q_outer"). Frames are subsampled to at most
`max_frames`, so a 64 x 64 grid stays a few MB.

Legend: N sequence length, Br = block_q, Bc = block_k, Tr x Tc tiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz import vocab
from flashviz.figures.palette import (
    BASE_FONT_PX,
    CURRENT_TILE_COLOR,
    LEGEND_FONT_PX,
    ROW_MARKER_COLOR,
    SRAM_OUTLINE_COLOR,
    TICK_FONT_PX,
    TILE_AHEAD_COLORS,
    TILE_COLORS,
    TITLE_FONT_PX,
)
from flashviz.figures.style import flashviz_template
from flashviz.vocab import LOOP_ORDER_LABELS, LOOP_ORDER_SHORT

if TYPE_CHECKING:  # a plain dataclass; imported for type hints only, so this module never loads torch
    from flashviz.measure.trace import ScheduleTrace

# -- tile codes in the heatmap: a fate not reached yet (pale), a fate reached (full colour), the tile in progress
AHEAD = {vocab.FULL: 0, vocab.PARTIAL: 1, vocab.SKIPPED: 2}  # pale: the schedule has not reached the tile yet
DONE = {vocab.FULL: 3, vocab.PARTIAL: 4, vocab.SKIPPED: 5}  # full colour: visited (computed, or passed over)
FULL, PARTIAL, SKIPPED = DONE[vocab.FULL], DONE[vocab.PARTIAL], DONE[vocab.SKIPPED]
CURRENT = 6  # the tile being computed in this frame
N_CODES = 7
COLORS = {**{AHEAD[s]: TILE_AHEAD_COLORS[s] for s in AHEAD}, **{DONE[s]: TILE_COLORS[s] for s in DONE},
          CURRENT: CURRENT_TILE_COLOR}
SHORT_STATUS_LABELS = {vocab.FULL: "full (no mask)", vocab.PARTIAL: "partial (masked)",
                       vocab.SKIPPED: "skipped (never loaded)"}
MAX_FRAMES = 120  # frames per animation: 64 x 64 grid x 2 panels x 120 frames ~ 2 MB of JSON

# -- layout (px). The figure must fit under the page's header in a 1280 x 720 window: DEFAULT_HEIGHT in all.
DEFAULT_HEIGHT = {1: 490, 2: 540}  # px by panel count; Play ends within PLAY_BOTTOM_MAX_PX of the top either way
PLAY_BOTTOM_MAX_PX = 490  # the grid, counters and Play fit a 1280 x 720 window under a page header of 230 px
BUTTON_PX = 36  # height of the Play / Pause buttons at BASE_FONT_PX
TOP = {1: 84, 2: 124}  # px above the grids: title, subtitle (+ the two-line counter over each of two panels)
BOTTOM = {1: 126, 2: 206}  # px below the grids: tick labels, axis title, slider (+ three legend rows for two panels)
LEGEND_TOP_PX = 118  # two panels: px from the grids' lower edge to the legend, below the slider and buttons
SMALL_LEGEND_FONT_PX = 16  # two panels: the legend's two rows under the grids
COUNTER_PX = 56  # one panel: the counter heads the right column, the legend starts this far below the grid's top
DOMAINS = {1: [(0.0, 0.52)], 2: [(0.0, 0.47), (0.53, 1.0)]}  # x extent of each panel; one panel: legend at the right
GRID_MIN_PX = 120  # a smaller grid is unreadable
LEGEND_X = 0.56  # one panel: left edge of the legend column (paper)
SLIDER_X = {1: 0.0, 2: 0.32}  # two panels: the buttons sit left of the slider, on the rail's line
BUTTON_ROOM_PX = 205  # width of the Play and Pause buttons at BASE_FONT_PX, with their padding


def _colorscale() -> list[list]:
    """Discrete colour scale for codes 0..N_CODES-1 with zmin = -0.5, zmax = N_CODES - 0.5: code c fills the band
    [c / N_CODES, (c + 1) / N_CODES]."""
    scale = []
    for code in range(N_CODES):
        scale += [[code / N_CODES, COLORS[code]], [(code + 1) / N_CODES, COLORS[code]]]
    return scale


def fmt_bytes(x: float) -> str:
    """1234567 -> '1.23 MB' (decimal units, as bandwidths are quoted)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.0f} B"


def fmt_flops(x: float) -> str:
    """1.5e9 -> '1.5 GFLOP'."""
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.0f} FLOP"


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


def _visit_grid(tr: ScheduleTrace) -> tuple[np.ndarray, np.ndarray]:
    """(Tr, Tc) arrays: the schedule step at which each tile is visited, and its status word's index in AHEAD."""
    visit = np.empty((tr.n_q_blocks, tr.n_k_blocks), dtype=np.int64)
    fate = np.empty((tr.n_q_blocks, tr.n_k_blocks), dtype=np.int8)
    qi, kj = np.asarray(tr.q_block), np.asarray(tr.k_block)
    visit[qi, kj] = np.arange(tr.steps)
    fate[qi, kj] = [AHEAD[st] for st in tr.status]
    return visit, fate


def _grid_at(tr: ScheduleTrace, visit: np.ndarray, fate: np.ndarray, step: int | None) -> np.ndarray:
    """(Tr, Tc) int8 codes while schedule step `step` is computed: tiles before it in full colour, the tile itself
    CURRENT, every later tile pale in its own fate's colour (None: the finished map, everything visited)."""
    done = fate + np.int8(DONE[vocab.FULL] - AHEAD[vocab.FULL])  # (Tr, Tc) the same fate, in full colour
    if step is None:
        return done
    z = np.where(visit < step, done, fate).astype(np.int8)
    z[tr.q_block[step], tr.k_block[step]] = CURRENT
    return z


def _hover(tr: ScheduleTrace, visit: np.ndarray, fate: np.ndarray) -> tuple[np.ndarray, list[list[str]]]:
    """Per cell: numbers [first row, last row, first key, last key, step] and the status word, for the hover box."""
    i = np.arange(tr.n_q_blocks)[:, None] * tr.block_q + np.zeros((1, tr.n_k_blocks), dtype=np.int64)  # (Tr, Tc)
    j = np.arange(tr.n_k_blocks)[None, :] * tr.block_k + np.zeros((tr.n_q_blocks, 1), dtype=np.int64)  # (Tr, Tc)
    numbers = np.stack([i, np.minimum(i + tr.block_q, tr.n) - 1, j, np.minimum(j + tr.block_k, tr.n) - 1,
                        visit + 1], axis=-1)  # (Tr, Tc, 5)
    words = {AHEAD[vocab.FULL]: "full", AHEAD[vocab.PARTIAL]: "partial (masked)", AHEAD[vocab.SKIPPED]: "skipped"}
    return numbers.astype(np.int32), [[words[int(c)] for c in row] for row in fate]


def _band(tr: ScheduleTrace, step: int, axis: str) -> tuple[list[float], list[float]]:
    """Outline of the block row (axis="q") or block column (axis="k") of `step`, as a closed polyline."""
    if axis == "q":
        i = tr.q_block[step]
        x0, x1, y0, y1 = -0.5, tr.n_k_blocks - 0.5, i - 0.5, i + 0.5
    else:
        j = tr.k_block[step]
        x0, x1, y0, y1 = j - 0.5, j + 0.5, -0.5, tr.n_q_blocks - 0.5
    return [x0, x1, x1, x0, x0], [y0, y0, y1, y1, y0]


def row_marker_y(n: int, block_q: int, row: int) -> float:
    """Where query row `row` sits on the tile map's y axis (block i spans i - 0.5 .. i + 0.5): the middle of its
    line inside its block, which holds min(Br, N - i Br) rows (the last block may be ragged, or Br > N).

    Example:
        >>> row_marker_y(10, 4, 9)  # the last block holds rows 8 and 9: row 9 is the lower of its two lines
        2.25
    """
    i = row // block_q
    rows_in_block = min(block_q, n - i * block_q)
    return i - 0.5 + (row - i * block_q + 0.5) / rows_in_block


def _counter(tr: ScheduleTrace, computed: list[int], f: int) -> str:
    """Two lines over a panel: which tile is computed now, and the IO model's running totals."""
    short = LOOP_ORDER_SHORT[tr.loop_order]
    if not computed:
        return f"<b>{short}</b>: every tile is masked,<br>nothing is computed"
    step = computed[f]
    text = f"<b>{short}</b> tile {f + 1}/{len(computed)}: i={tr.q_block[step]}, j={tr.k_block[step]}"
    if tr.hbm_bytes is not None:  # the lesson of the map: traffic (every computed tile costs the same FLOPs)
        text += f"<br>HBM traffic so far {fmt_bytes(tr.hbm_bytes[step])}"
    return text


def _annotations(traces: Sequence[ScheduleTrace], computed: list[list[int]], f: int) -> list[dict]:
    """The counters: over each panel when there are two, at the head of the right column when there is one."""
    if len(traces) == 1:
        return [dict(text=_counter(traces[0], computed[0], f), xref="paper", yref="paper", x=LEGEND_X, y=1.0,
                     xanchor="left", yanchor="top", showarrow=False, font=dict(size=BASE_FONT_PX), align="left")]
    return [
        dict(text=_counter(tr, computed[p], f), xref=f"x{'' if p == 0 else p + 1} domain", yref="paper", x=0.5,
             y=1.0, yanchor="bottom", showarrow=False, font=dict(size=BASE_FONT_PX), align="center")
        for p, tr in enumerate(traces)
    ]


def _add_panel(fig: go.Figure, tr: ScheduleTrace, p: int, visit: np.ndarray, fate: np.ndarray, step: int | None,
               row: int | None, panels: int) -> list[int]:
    """Panel p (0-based) of the map at schedule step `step`: the heatmap, the on-chip outlines, the row marker and
    the axes. Returns the indices of the traces the frames update (heatmap, Q_i outline, K_j outline)."""
    col = p + 1
    numbers, words = _hover(tr, visit, fate)
    animated = [len(fig.data)]
    fig.add_trace(go.Heatmap(
        z=_grid_at(tr, visit, fate, step), customdata=numbers, text=words, zmin=-0.5, zmax=N_CODES - 0.5,
        colorscale=_colorscale(), showscale=False,
        xgap=1 if tr.n_k_blocks <= 32 else 0, ygap=1 if tr.n_q_blocks <= 32 else 0,
        hovertemplate=("Q block i=%{y} (rows %{customdata[0]}-%{customdata[1]})<br>"
                       "K/V block j=%{x} (keys %{customdata[2]}-%{customdata[3]})<br>"
                       "%{text} tile, visited at step %{customdata[4]}<extra></extra>"),
        name=LOOP_ORDER_LABELS[tr.loop_order]), row=1, col=col)
    outlines = (("q", "solid", "Q_i in SRAM (block row)"), ("k", "dash", "K_j, V_j in SRAM (block column)"))
    for axis, dash, label in outlines if panels == 1 else [(a, d, lab.split(" (")[0]) for a, d, lab in outlines]:
        x, y = _band(tr, step, axis) if step is not None else ([None], [None])
        animated.append(len(fig.data))
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line=dict(color=SRAM_OUTLINE_COLOR, width=4, dash=dash),
                                 name=label, legendgroup=label, showlegend=p == 0, hoverinfo="skip"), row=1, col=col)
    if row is not None and 0 <= row < tr.n:
        y_row = row_marker_y(tr.n, tr.block_q, row)
        fig.add_trace(go.Scatter(
            x=[-0.5, tr.n_k_blocks - 0.5], y=[y_row, y_row], mode="lines",
            line=dict(color=ROW_MARKER_COLOR, width=3, dash="dot"), name=f"row {row}",
            legendgroup="row", showlegend=p == 0, hoverinfo="skip"), row=1, col=col)
    axis_font = dict(size=BASE_FONT_PX)
    fig.update_xaxes(range=[-0.5, tr.n_k_blocks - 0.5], autorange=False, domain=DOMAINS[panels][p], tick0=0,
                     dtick=_dtick(tr.n_k_blocks), title=dict(text=f"K/V block j (Bc = {tr.block_k} keys)",
                                                             font=axis_font, standoff=4),
                     tickfont=dict(size=TICK_FONT_PX), showgrid=False, zeroline=False, row=1, col=col)
    fig.update_yaxes(range=[tr.n_q_blocks - 0.5, -0.5], autorange=False, tick0=0, dtick=_dtick(tr.n_q_blocks),
                     title=dict(text=f"Q block i (Br = {tr.block_q} rows)" if p == 0 else "", font=axis_font,
                                standoff=4),  # one y title: a second would sit on the first grid
                     tickfont=dict(size=TICK_FONT_PX), showgrid=False, zeroline=False, row=1, col=col)
    return animated


def _add_legend_swatches(fig: go.Figure, panels: int) -> None:
    """Legend entries for the heatmap's colours (a heatmap has none of its own); shorter under two panels, where the
    legend must fit two rows."""
    labels = vocab.TILE_STATUS_LABELS if panels == 1 else SHORT_STATUS_LABELS
    swatches = [(labels[s], TILE_COLORS[s]) for s in vocab.TILE_STATUSES]
    swatches += [("pale: not reached yet", TILE_AHEAD_COLORS[vocab.FULL]), ("in progress", CURRENT_TILE_COLOR)]
    for name, color in swatches:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name, marker=dict(
            symbol="square", size=20, color=color, line=dict(color="#333333", width=1))))


def _frames(traces: Sequence[ScheduleTrace], grids: list, computed: list[list[int]], frames_at: list[int],
            animated: list[int]) -> list[go.Frame]:
    """One frame per entry of frames_at: each panel's heatmap and outlines at that computed tile, and the counters."""
    frames = []
    for k, f in enumerate(frames_at):
        data = []
        for p, tr in enumerate(traces):
            step = computed[p][f]
            data.append(go.Heatmap(z=_grid_at(tr, *grids[p], step)))
            for axis in ("q", "k"):
                x, y = _band(tr, step, axis)
                data.append(go.Scatter(x=x, y=y))
        frames.append(go.Frame(name=str(k), data=data, traces=animated,
                               layout=dict(annotations=_annotations(traces, computed, f))))
    return frames


def _controls(frames_at: list[int], n_computed: int, start: int, panels: int, plot_h: float) -> dict:
    """Play / Pause and the frame slider, below the grid: the slider's label ("computed tile k of n") on its own
    line and the buttons level with the rail, beside it (never over the label)."""
    frame_ms = int(min(800, max(200, 15000 / max(1, len(frames_at)))))  # 15-25 s a run; >= 200 ms to redraw
    slider_top = 62  # px below the grid: room for the tick labels and the axis title
    rail = slider_top + 34  # px below the grid: the rail, under the slider's label
    buttons_x = LEGEND_X if panels == 1 else 0.0
    slider_len = DOMAINS[1][0][1] if panels == 1 else 1.0 - SLIDER_X[2]
    play = dict(frame=dict(duration=frame_ms, redraw=True), fromcurrent=True, transition=dict(duration=0),
                mode="immediate")
    pause = dict(frame=dict(duration=0, redraw=False), transition=dict(duration=0), mode="immediate")
    return dict(
        updatemenus=[dict(type="buttons", direction="left", x=buttons_x, y=-(rail - 12) / plot_h, xanchor="left",
                          yanchor="top", pad=dict(r=0, t=0), showactive=False, font=dict(size=BASE_FONT_PX),
                          buttons=[dict(label="▶ Play", method="animate", args=[None, play]),
                                   dict(label="❚❚ Pause", method="animate", args=[[None], pause])])],
        sliders=[dict(
            active=start, x=SLIDER_X[panels], y=-slider_top / plot_h, len=slider_len, xanchor="left", yanchor="top",
            pad=dict(t=0, b=0, l=0, r=0),
            currentvalue=dict(prefix="computed tile ", suffix=f" of {n_computed}", xanchor="left",
                              font=dict(size=BASE_FONT_PX, color="#111111")),
            font=dict(size=2, color="rgba(0,0,0,0)"), ticklen=0, minorticklen=0,  # no step labels: the value says it
            steps=[dict(method="animate", label=str(f + 1), args=[[str(k)], dict(
                mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))])
                   for k, f in enumerate(frames_at)])],
    )


def tile_animation(traces: Sequence[ScheduleTrace], *, row: int | None = None, max_frames: int = MAX_FRAMES,
                   title: str | None = None, start_frame: int = 0, height: int | None = None) -> go.Figure:
    """The animated tile map of one or two loop orders (lockstep: frame k = each order's k-th computed tile).

    Every tile shows its fate from the first frame drawn (pale until the schedule reaches it, full colour after).

    Args:
        traces: one ScheduleTrace per panel (same N, blocks and mask; e.g. kv_outer and q_outer).
        row: a query row to mark on the map (the row inspector's row), or None.
        max_frames: at most this many frames (evenly subsampled); the last frame is always the last computed tile.
        title: figure title; a default one names what the map shows (the subtitle gives N, Br, Bc and the mask).
        start_frame: the frame drawn first and where the slider starts (0 <= start_frame < len(fig.frames)), so
            a page can keep its place when a setting changes.
        height: figure height in px (grid, counters, slider and buttons all inside); None: DEFAULT_HEIGHT.
    Returns:
        A Figure with a heatmap per panel, on-chip outlines, frames, a slider and Play/Pause buttons.

    Example:
        >>> from flashviz.measure.trace import schedule_trace
        >>> fig = tile_animation([schedule_trace(256, 64, 64, causal=True)], start_frame=3)
        >>> len(fig.frames), fig.layout.sliders[0].active
        (10, 3)
    """
    if not traces:
        raise ValueError("tile_animation needs at least one ScheduleTrace (one per loop order to show).")
    if len(traces) not in DOMAINS:
        raise ValueError(f"tile_animation draws one or two panels, got {len(traces)} traces. Pass one per loop order.")
    first, panels = traces[0], len(traces)  # the panels share N, the tile sizes and the mask
    computed = [tr.computed_steps() for tr in traces]  # per panel: schedule steps of the computed tiles
    frames_at = frame_indices(len(computed[0]), max_frames)
    if not 0 <= start_frame < max(len(frames_at), 1):
        raise ValueError(f"start_frame must be in 0..{max(len(frames_at) - 1, 0)} (this map has {len(frames_at)} "
                         f"frames), got {start_frame}. Start at 0 when the settings change the frame count.")
    height, plot_h = _heights(panels, height)
    fig = make_subplots(rows=1, cols=panels, horizontal_spacing=0.06)
    grids = [_visit_grid(tr) for tr in traces]
    f0 = frames_at[start_frame] if frames_at else None
    animated = [i for p, tr in enumerate(traces)
                for i in _add_panel(fig, tr, p, *grids[p], computed[p][f0] if f0 is not None else None, row, panels)]
    _add_legend_swatches(fig, panels)
    fig.frames = _frames(traces, grids, computed, frames_at, animated)
    legend = (dict(orientation="v", x=LEGEND_X, y=1.0 - COUNTER_PX / plot_h, xanchor="left", yanchor="top")
              if panels == 1 else dict(orientation="h", x=0.0, y=-LEGEND_TOP_PX / plot_h, xanchor="left",
                                       yanchor="top"))
    fig.update_layout(
        template=flashviz_template(),
        title=dict(text=title or "Tile map of S = QKᵀ: computed, masked, skipped",
                   subtitle=dict(text=_subtitle(first, len(computed[0])), font=dict(size=BASE_FONT_PX)),
                   font=dict(size=TITLE_FONT_PX), x=0.01, y=0.99, yanchor="top"),
        annotations=_annotations(traces, computed, f0 if f0 is not None else 0),
        height=height, margin=dict(t=TOP[panels], b=BOTTOM[panels], l=70, r=10),
        plot_bgcolor="#5a5a5a",  # shows between tiles (xgap/ygap) as grid lines
        legend=dict(**legend, font=dict(size=LEGEND_FONT_PX if panels == 1 else SMALL_LEGEND_FONT_PX),
                    itemsizing="constant", tracegroupgap=0),
        **_controls(frames_at, len(computed[0]), start_frame, panels, plot_h),
    )
    return fig


def _heights(panels: int, height: int | None) -> tuple[int, int]:
    """The figure's height and its grid's (px); None: DEFAULT_HEIGHT."""
    height = DEFAULT_HEIGHT[panels] if height is None else height
    plot_h = height - TOP[panels] - BOTTOM[panels]
    if plot_h < GRID_MIN_PX:
        raise ValueError(f"height={height} px leaves {plot_h} px for the grid; give at least "
                         f"{TOP[panels] + BOTTOM[panels] + GRID_MIN_PX} px.")
    return height, plot_h


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
