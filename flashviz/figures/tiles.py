"""Figures for the "How it works" view: the animated tile map and the row inspector. Plotly only.

Input is the plain data of flashviz.measure.trace (ScheduleTrace, RowTrace); nothing here imports torch or streamlit.
The tile map is a grid of Q blocks (rows, i) x K/V blocks (columns, j) of the score matrix S = Q K^T, one frame per
computed tile (FlashAttention-1 Algorithm 1 visits them column by column, "kv_outer"; FlashAttention-2 row by row,
"q_outer"). Frames are subsampled to at most `max_frames`, so a 64 x 64 grid stays a few MB.

Legend: N sequence length, Br = block_q, Bc = block_k, Tr x Tc tiles, m running max, l running sum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz import vocab
from flashviz.vocab import LOOP_ORDER_LABELS, LOOP_ORDER_SHORT

if TYPE_CHECKING:  # plain dataclasses; imported for type hints only, so this module never loads torch
    from flashviz.measure.trace import RowTrace, ScheduleTrace

# -- projector-readable sizes (px)
FONT = 18  # base font
TITLE_FONT = 24  # figure title
TICK_FONT = 16  # axis tick labels
LEGEND_FONT = 17  # legend entries

# -- tile codes in the heatmap, and their colours (Okabe-Ito-like: distinguishable with colour-blindness)
PENDING, FULL, PARTIAL, SKIPPED, CURRENT = 0, 1, 2, 3, 4
STATUS_CODE = {vocab.FULL: FULL, vocab.PARTIAL: PARTIAL, vocab.SKIPPED: SKIPPED}
COLORS = {
    PENDING: "#f4f4f4",  # not visited yet (near white)
    FULL: "#0072b2",  # computed, no mask (blue)
    PARTIAL: "#e69f00",  # computed with a mask inside the tile (orange)
    SKIPPED: "#8c8c8c",  # never loaded (mid grey)
    CURRENT: "#cc2f8f",  # the tile being computed now (magenta)
}
LABELS = {
    **{code: vocab.TILE_STATUS_LABELS[status] for status, code in STATUS_CODE.items()},
    PENDING: "not visited yet",
    CURRENT: "in progress",
}
ORDER_COLOR = {"kv_outer": "#0072b2", "q_outer": "#d55e00"}
MAX_FRAMES = 120  # frames per animation: 64 x 64 grid x 2 panels x 120 frames ~ 2 MB of JSON
TOP = 150  # px above the grid: title, subtitle and the per-frame counters
GRID_PX = 560  # px height of the grid area
BOTTOM = {1: 170, 2: 290}  # px below the grid, by panel count: axis title, Play/Pause and slider (+ legend for 2)


def _colorscale() -> list[list]:
    """Discrete colour scale for codes 0..4 with zmin = -0.5, zmax = 4.5: code c fills the band [c/5, (c+1)/5]."""
    scale = []
    for code in range(5):
        scale += [[code / 5, COLORS[code]], [(code + 1) / 5, COLORS[code]]]
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
    """(Tr, Tc) arrays: the schedule step at which each tile is visited, and its status code."""
    visit = np.empty((tr.n_q_blocks, tr.n_k_blocks), dtype=np.int64)
    code = np.empty((tr.n_q_blocks, tr.n_k_blocks), dtype=np.int8)
    qi, kj = np.asarray(tr.q_block), np.asarray(tr.k_block)
    visit[qi, kj] = np.arange(tr.steps)
    code[qi, kj] = [STATUS_CODE[st] for st in tr.status]
    return visit, code


def _grid_at(tr: ScheduleTrace, visit: np.ndarray, code: np.ndarray, step: int | None) -> np.ndarray:
    """(Tr, Tc) int8 codes while schedule step `step` is computed (None: the finished map)."""
    if step is None:
        return code.copy()
    z = np.where(visit < step, code, np.int8(PENDING)).astype(np.int8)
    z[tr.q_block[step], tr.k_block[step]] = CURRENT
    return z


def _hover(tr: ScheduleTrace, visit: np.ndarray, code: np.ndarray) -> tuple[np.ndarray, list[list[str]]]:
    """Per cell: numbers [first row, last row, first key, last key, step] and the status word, for the hover box."""
    i = np.arange(tr.n_q_blocks)[:, None] * tr.block_q + np.zeros((1, tr.n_k_blocks), dtype=np.int64)  # (Tr, Tc)
    j = np.arange(tr.n_k_blocks)[None, :] * tr.block_k + np.zeros((tr.n_q_blocks, 1), dtype=np.int64)  # (Tr, Tc)
    numbers = np.stack([i, np.minimum(i + tr.block_q, tr.n) - 1, j, np.minimum(j + tr.block_k, tr.n) - 1,
                        visit + 1], axis=-1)  # (Tr, Tc, 5)
    words = {FULL: "full", PARTIAL: "partial (masked)", SKIPPED: "skipped"}
    return numbers.astype(np.int32), [[words[int(c)] for c in row] for row in code]


def _band(tr: ScheduleTrace, step: int, axis: str) -> tuple[list[float], list[float]]:
    """Outline of the block row (axis="q") or block column (axis="k") of `step`, as a closed polyline."""
    if axis == "q":
        i = tr.q_block[step]
        x0, x1, y0, y1 = -0.5, tr.n_k_blocks - 0.5, i - 0.5, i + 0.5
    else:
        j = tr.k_block[step]
        x0, x1, y0, y1 = j - 0.5, j + 0.5, -0.5, tr.n_q_blocks - 0.5
    return [x0, x1, x1, x0, x0], [y0, y0, y1, y1, y0]


def _counter(tr: ScheduleTrace, computed: list[int], f: int) -> str:
    n_computed = len(computed)
    step = computed[f] if n_computed else 0
    text = (f"<b>{LOOP_ORDER_SHORT[tr.loop_order]}</b>  tile {f + 1}/{n_computed} computed "
            f"(step {step + 1}/{tr.steps}: i={tr.q_block[step]}, j={tr.k_block[step]})")
    if tr.hbm_bytes is not None and tr.flops is not None:
        text += f"<br>HBM traffic so far {fmt_bytes(tr.hbm_bytes[step])} · {fmt_flops(tr.flops[step])}"
    return text


def _annotations(traces: Sequence[ScheduleTrace], computed: list[list[int]], f: int) -> list[dict]:
    return [
        dict(text=_counter(tr, computed[p], f) if computed[p] else f"<b>{LOOP_ORDER_SHORT[tr.loop_order]}</b>: "
             "every tile is masked, nothing is computed",
             xref=f"x{'' if p == 0 else p + 1} domain", yref="paper", x=0.5, y=1.0, yanchor="bottom",
             showarrow=False, font=dict(size=FONT), align="center")
        for p, tr in enumerate(traces)
    ]


def tile_animation(traces: Sequence[ScheduleTrace], *, row: int | None = None, max_frames: int = MAX_FRAMES,
                   title: str | None = None) -> go.Figure:
    """The animated tile map of one or two loop orders (lockstep: frame k = each order's k-th computed tile).

    Args:
        traces: one ScheduleTrace per panel (same N, blocks and mask; e.g. kv_outer and q_outer).
        row: a query row to mark on the map (the row inspector's row), or None.
        max_frames: at most this many frames (evenly subsampled); the last frame is always the finished map.
        title: figure title; a default one names N, Br, Bc.
    Returns:
        A Figure with a heatmap per panel, SRAM outlines, frames, a slider and Play/Pause buttons.

    Example:
        >>> from flashviz.measure.trace import schedule_trace
        >>> fig = tile_animation([schedule_trace(256, 64, 64, causal=True)])
        >>> len(fig.frames)
        10
    """
    if not traces:
        raise ValueError("tile_animation needs at least one ScheduleTrace (one per loop order to show).")
    first = traces[0]
    computed = [tr.computed_steps() for tr in traces]  # per panel: schedule steps of the computed tiles
    n_computed = len(computed[0])
    frames_at = frame_indices(n_computed, max_frames)
    panels = len(traces)
    fig = make_subplots(rows=1, cols=panels, horizontal_spacing=0.06)
    domains = [(0.0, 0.56)] if panels == 1 else [(0.0, 0.47), (0.52, 0.99)]  # one panel: legend on the right
    visits = [_visit_grid(tr) for tr in traces]
    animated: list[int] = []  # indices of the traces the frames update
    for p, tr in enumerate(traces):
        col = p + 1
        visit, code = visits[p]
        z0 = _grid_at(tr, visit, code, computed[p][frames_at[0]] if frames_at else None)
        numbers, words = _hover(tr, visit, code)
        animated.append(len(fig.data))
        fig.add_trace(go.Heatmap(
            z=z0, customdata=numbers, text=words, zmin=-0.5, zmax=4.5, colorscale=_colorscale(), showscale=False,
            xgap=1 if tr.n_k_blocks <= 32 else 0, ygap=1 if tr.n_q_blocks <= 32 else 0,
            hovertemplate=("Q block i=%{y} (rows %{customdata[0]}-%{customdata[1]})<br>"
                           "K/V block j=%{x} (keys %{customdata[2]}-%{customdata[3]})<br>"
                           "%{text} tile, visited at step %{customdata[4]}<extra></extra>"),
            name=LOOP_ORDER_LABELS[tr.loop_order],
        ), row=1, col=col)
        for axis, dash, label in (("q", "solid", "Q_i in SRAM (block row)"),
                                  ("k", "dash", "K_j, V_j in SRAM (block column)")):
            x, y = _band(tr, computed[p][frames_at[0]], axis) if frames_at else ([None], [None])
            animated.append(len(fig.data))
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line=dict(color="#000000", width=4, dash=dash),
                                     name=label, legendgroup=label, showlegend=p == 0, hoverinfo="skip"),
                          row=1, col=col)
        if row is not None and 0 <= row < tr.n:
            y_row = row / tr.block_q - 0.5  # row r sits at fraction (r mod Br) / Br inside block r // Br
            fig.add_trace(go.Scatter(
                x=[-0.5, tr.n_k_blocks - 0.5], y=[y_row, y_row], mode="lines",
                line=dict(color="#009e73", width=3, dash="dot"), name=f"row {row} (inspector)",
                legendgroup="row", showlegend=p == 0, hoverinfo="skip"), row=1, col=col)
        fig.update_xaxes(range=[-0.5, tr.n_k_blocks - 0.5], autorange=False, domain=domains[p], tick0=0,
                         dtick=_dtick(tr.n_k_blocks),
                         title=dict(text=f"K/V block j (keys; Bc = {tr.block_k} per block)", font=dict(size=FONT)),
                         tickfont=dict(size=TICK_FONT), showgrid=False, zeroline=False, row=1, col=col)
        fig.update_yaxes(range=[tr.n_q_blocks - 0.5, -0.5], autorange=False, tick0=0, dtick=_dtick(tr.n_q_blocks),
                         title=dict(text=f"Q block i (queries; Br = {tr.block_q} per block)" if p == 0 else "",
                                    font=dict(size=FONT)),  # one y title: a second would sit on the first grid
                         tickfont=dict(size=TICK_FONT), showgrid=False, zeroline=False, row=1, col=col)
    for code in (FULL, PARTIAL, SKIPPED, PENDING, CURRENT):  # legend swatches for the heatmap colours
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=LABELS[code],
                                 marker=dict(symbol="square", size=20, color=COLORS[code],
                                             line=dict(color="#333333", width=1))))

    frames = []
    for k, f in enumerate(frames_at):
        data = []
        for p, tr in enumerate(traces):
            data.append(go.Heatmap(z=_grid_at(tr, *visits[p], computed[p][f])))
            for axis in ("q", "k"):
                x, y = _band(tr, computed[p][f], axis)
                data.append(go.Scatter(x=x, y=y))
        frames.append(go.Frame(name=str(k), data=data, traces=animated,
                               layout=dict(annotations=_annotations(traces, computed, f))))
    fig.frames = frames

    mask = ", ".join(m for m in ("causal" if first.causal else "", _window_text(first.window)) if m) or "no mask"
    subtitle = (f"N = {first.n} · Br = {first.block_q}, Bc = {first.block_k} · {first.n_q_blocks} × "
                f"{first.n_k_blocks} = {first.steps} tiles, {n_computed} computed · {mask}")
    frame_ms = int(min(800, max(200, 15000 / max(1, len(frames_at)))))  # 15-25 s a run; >= 200 ms to redraw
    plot_h = GRID_PX  # px of the plotting area: paper y = -px / plot_h lies px below it
    below = 90 if panels == 1 else 200  # px from the grid's bottom edge to the Play button
    legend = (dict(orientation="v", x=0.6, y=1.0, xanchor="left", yanchor="top") if panels == 1 else
              dict(orientation="h", x=0.0, y=-75 / plot_h, xanchor="left", yanchor="top"))
    fig.update_layout(
        title=dict(text=title or "Tile map of S = QK<sup>T</sup>: which tiles are computed, masked, skipped",
                   subtitle=dict(text=subtitle, font=dict(size=FONT, color="#333333")),
                   font=dict(size=TITLE_FONT), x=0.01, y=0.985, yanchor="top"),
        annotations=_annotations(traces, computed, frames_at[0] if frames_at else 0),
        font=dict(size=FONT), height=TOP + GRID_PX + BOTTOM[panels], margin=dict(t=TOP, b=BOTTOM[panels], l=80, r=20),
        plot_bgcolor="#5a5a5a",  # shows between tiles (xgap/ygap) as grid lines
        legend=dict(**legend, font=dict(size=LEGEND_FONT), itemsizing="constant"),
        hoverlabel=dict(font=dict(size=FONT)),
        updatemenus=[dict(
            type="buttons", direction="left", x=0.0, y=-below / plot_h, xanchor="left", yanchor="top",
            pad=dict(r=10, t=0),
            showactive=False, font=dict(size=FONT),
            buttons=[
                dict(label="▶ Play", method="animate",
                     args=[None, dict(frame=dict(duration=frame_ms, redraw=True), fromcurrent=True,
                                      transition=dict(duration=0), mode="immediate")]),
                dict(label="❚❚ Pause", method="animate",
                     args=[[None], dict(frame=dict(duration=0, redraw=False), transition=dict(duration=0),
                                        mode="immediate")]),
            ],
        )],
        sliders=[dict(
            active=0, x=0.22, y=-(below - 12) / plot_h, len=0.78, xanchor="left", yanchor="top",
            pad=dict(t=0, b=10),
            currentvalue=dict(prefix="computed tile ", suffix=f" of {n_computed}",
                              font=dict(size=FONT, color="#111111")),
            font=dict(size=2, color="rgba(0,0,0,0)"), ticklen=0, minorticklen=0,
            steps=[dict(method="animate", label=str(f + 1),
                        args=[[str(k)], dict(mode="immediate", frame=dict(duration=0, redraw=True),
                                             transition=dict(duration=0))])
                   for k, f in enumerate(frames_at)],
        )],
    )
    return fig


def _padded(values: Sequence[float]) -> list[float] | None:
    """A y range around the finite values with a margin, never thinner than 4% of their size (so a flat line
    does not turn rounding noise into a wall of digits). None when nothing is finite."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return None
    lo, hi = min(finite), max(finite)
    pad = max(0.08 * (hi - lo), 0.02 * max(abs(lo), abs(hi), 1.0))
    return [lo - pad, hi + pad]


def _dtick(n_blocks: int) -> int:
    """Whole-number tick spacing: every block up to 10 blocks, then about 8 ticks."""
    return 1 if n_blocks <= 10 else max(1, round(n_blocks / 8 / 5) * 5) if n_blocks > 40 else max(1, n_blocks // 8)


def _window_text(window: tuple[int | None, int | None] | None) -> str:
    if window is None:
        return ""
    left, right = ("∞" if w is None else str(w) for w in window)
    return f"window ({left}, {right})"


def row_figure(rows: Sequence[RowTrace], *, n_steps: int) -> go.Figure:
    """Row inspector: running max m and running sum l of one query row after each tile, per loop order.

    Args:
        rows: one RowTrace per loop order (same row, same data).
        n_steps: schedule length Tr * Tc (fixes the x range so FA1 and FA2 are comparable).
    Returns:
        A two-panel Figure (m on top, l below) with the exact values as dashed lines.

    Example:
        >>> from flashviz.measure.trace import row_trace
        >>> fig = row_figure([row_trace(16, 8, 4, 4, row=9, causal=True)], n_steps=16)
        >>> [t.name for t in fig.data][:2]
        ['FA1: m after each tile', 'FA1: l after each tile']
    """
    if not rows:
        raise ValueError("row_figure needs at least one RowTrace.")
    r = rows[0]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=("running max m (score units)", "running sum l = Σ e^(s − m) (unitless)"))
    for tr in rows:
        short, color = LOOP_ORDER_SHORT[tr.loop_order], ORDER_COLOR[tr.loop_order]
        x = [s + 1 for s in tr.step]
        for panel, (name, ys) in enumerate((("m", tr.m), ("l", tr.l)), start=1):
            fig.add_trace(go.Scatter(
                x=x, y=[y if math.isfinite(y) else None for y in ys],  # m = -inf: the row has seen no key yet
                customdata=list(tr.k_block), mode="lines+markers", line_shape="hv",
                name=f"{short}: {name} after each tile", legendgroup=short,
                line=dict(color=color, width=3), marker=dict(size=10, color=color),
                hovertemplate=(f"{short} step %{{x}} (key block j=%{{customdata}})<br>"
                               f"{name} = %{{y:.6g}}<extra></extra>"),
            ), row=panel, col=1)
    for panel, (name, value) in enumerate((("m", r.m_exact), ("l", r.l_exact)), start=1):
        if math.isfinite(value):
            fig.add_trace(go.Scatter(
                x=[0.5, n_steps + 0.5], y=[value, value], mode="lines",
                line=dict(color="#000000", width=2, dash="dash"),
                name="exact value over the whole row", legendgroup="exact", showlegend=panel == 1,
                hovertemplate=f"exact {name} = {value:.6g}<extra></extra>"), row=panel, col=1)
    fig.update_xaxes(range=[0.5, n_steps + 0.5], tickfont=dict(size=TICK_FONT))
    fig.update_xaxes(title=dict(text="schedule step (tile number, 1 = first)", font=dict(size=FONT)), row=2, col=1)
    fig.update_yaxes(tickfont=dict(size=TICK_FONT), tickformat=".4~g")
    for panel, (name, exact) in enumerate((("m", r.m_exact), ("l", r.l_exact)), start=1):
        values = [v for tr in rows for v in (tr.m if name == "m" else tr.l)] + [exact]
        fig.update_yaxes(title=dict(text=name, font=dict(size=FONT)), range=_padded(values), row=panel, col=1)
    fig.update_annotations(font=dict(size=FONT))
    fig.update_layout(
        title=dict(text=f"Row inspector: query row {r.row} (Q block i={r.q_block}), from the kernel's on_tile",
                   font=dict(size=TITLE_FONT)),
        font=dict(size=FONT), height=620, margin=dict(t=110, b=60, l=80, r=30),
        legend=dict(orientation="h", x=0.0, y=-0.16, yanchor="top", font=dict(size=LEGEND_FONT)),
        hoverlabel=dict(font=dict(size=FONT)),
    )
    return fig
