"""The Ring view's figures: the N x N scores split into the ranks' rows and coloured by ring step (animated step by
step), each rank's work per layout, and from a real run: the timeline of every rank's compute and waits, the bytes
sent per step against the model, the merge of one row across the steps, and the error of fp32 and bf16 partials as
the world grows. No torch, no streamlit: plotly over the plain data of flashviz.views.ring.data (read here for type
checking only).

Legend: N positions, W ranks, r a rank, t a ring step, T tiles per side of one rank's step, L_t a step's partial
logsumexp, L the merged one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz.figures.palette import BASE_FONT_PX, LINE_PX, MARKER_PX, REFERENCE_COLOR, TILE_COLORS
from flashviz.figures.slide import slide_bars
from flashviz.figures.style import (
    flashviz_template,
    fmt_sci,
    log_axis,
    set_subtitle,
    style_figure,
    subtitle_lines,
)
from flashviz.units import GIB, format_bytes, format_flops
from flashviz.vocab import PARTIAL, SKIPPED

if TYPE_CHECKING:  # plain data; the data module itself imports torch
    from flashviz.views.ring.data import LayoutWork, MapGrid, MergeRow, PrecisionPoint
    from flashviz.views.ring.settings import RingSettings

FORWARD, BACKWARD = "forward", "backward"  # flashviz.ring's phase names (that module imports torch)
STEP_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")  # Okabe-Ito
STEP_PALE = ("#BFDCEC", "#F9E2B3", "#BFE7DC", "#F2DDE9", "#D4ECFA", "#F4D6BF", "#FBF6C8", "#BDBDBD")  # not reached
LAYOUT_COLORS = {"contiguous": "#D55E00", "zigzag": "#009E73", "striped": "#56B4E9"}
DTYPE_COLORS = {"float32": "#0072B2", "bfloat16": "#D55E00"}
DTYPE_SHORT = {"float32": "fp32", "bfloat16": "bf16"}
COMPUTE_COLORS = {FORWARD: "#0072B2", BACKWARD: "#009E73"}
WAIT_COLOR = "#E69F00"
SKIPPED_COLOR = TILE_COLORS[SKIPPED]  # never loaded: the How it works map's grey
MAP_HEIGHT_PX = 640
MAP_TEXT_TILES_MAX = 32  # tiles per side up to which partial tiles are marked "p" in their cell
MAP_SLIDER_TOP_PX = 78  # below the plot: under the axis title
SMALL_FIG_PX = 430
BAR_WIDTH = 0.27  # of one rank on the work chart: three layouts side by side
MS = 1e3


def step_color(t: int, pale: bool = False) -> str:
    """The colour of ring step t (pale: a tile whose step the animation has not reached)."""
    return (STEP_PALE if pale else STEP_COLORS)[t % len(STEP_COLORS)]


# ----------------------------------------------------------------------------------------------------------------------
# the score map, step by step


def _map_z(grid: MapGrid, shown: int) -> list[list[int]]:
    """Each tile's colour index after steps 0 .. shown: its step t (reached), W + t (not reached), 2W (skipped)."""
    W = grid.world
    return [[2 * W if s == SKIPPED else (t if (t := grid.step(i, j)) <= shown else W + t)
             for j, s in enumerate(row)] for i, row in enumerate(grid.status)]


def _map_colorscale(world: int) -> list[list]:
    """A discrete colour scale over the indices 0 .. 2W: the steps, the pale steps, skipped."""
    colors = [step_color(t) for t in range(world)] + [step_color(t, pale=True) for t in range(world)]
    colors.append(SKIPPED_COLOR)
    k = len(colors)
    scale = []
    for i, c in enumerate(colors):
        scale += [[i / k, c], [(i + 1) / k, c]]
    return scale


def step_text(grid: MapGrid, t: int) -> str:
    """What the animation says at step t: whose K/V each rank holds, and the tiles computed and skipped so far.

    Example:
        >>> from flashviz.views.ring.data import MapGrid
        >>> g = MapGrid(4, 2, "contiguous", True, 2, 1, (("partial", "skipped"), ("full", "partial")), ((0, 1), (2, 3)))
        >>> step_text(g, 1)
        'step 1: ranks 0, 1 hold the K/V of ranks 1, 0; after it 3 of 4 tiles computed, 1 skipped'
    """
    W = grid.world
    done = sum(1 for i, row in enumerate(grid.status) for j, s in enumerate(row) if grid.step(i, j) <= t)
    skipped = sum(1 for i, row in enumerate(grid.status) for j, s in enumerate(row)
                  if grid.step(i, j) <= t and s == SKIPPED)
    total = len(grid.status) ** 2
    return (f"step {t}: ranks {', '.join(map(str, range(W)))} hold the K/V of ranks "
            f"{', '.join(str((r - t) % W) for r in range(W))}; after it {done - skipped} of {total} tiles computed, "
            f"{skipped} skipped")


def score_map_figure(grid: MapGrid) -> go.Figure:
    """The N x N scores as tiles, rows grouped by the rank that holds the queries and columns by the rank whose K/V
    they are, each tile coloured by the ring step that computes it (grey: skipped, never loaded), with frames for the
    steps (a tile turns from pale to its colour at its step) and "p" on the partial tiles (masked inside).

    Args:
        grid: the model's tiles (flashviz.views.ring.data.score_map).
    Returns:
        plotly Figure: one heatmap, frames "step 0" .. "step W-1" (the last drawn first: every tile's fate), a slider
        and Play / Pause.

    Example:
        >>> from flashviz.views.ring.data import MapGrid
        >>> g = MapGrid(4, 2, "contiguous", True, 2, 1, (("partial", "skipped"), ("full", "partial")), ((0, 1), (2, 3)))
        >>> [f.name for f in score_map_figure(g).frames]
        ['step 0', 'step 1']
    """
    W, T = grid.world, grid.tiles
    side = W * T
    text = [["p" if s == PARTIAL and side <= MAP_TEXT_TILES_MAX else "" for s in row] for row in grid.status]
    custom = [[(i // T, *grid.spans[i], j // T, *grid.spans[j], grid.step(i, j), s) for j, s in enumerate(row)]
              for i, row in enumerate(grid.status)]
    gap = 1 if side <= 64 else 0
    fig = go.Figure(go.Heatmap(
        z=_map_z(grid, W - 1), text=text, texttemplate="%{text}", textfont={"size": BASE_FONT_PX - 2},
        customdata=custom, colorscale=_map_colorscale(W), zmin=-0.5, zmax=2 * W + 0.5, showscale=False, xgap=gap,
        ygap=gap, hovertemplate=("queries of rank %{customdata[0]} (positions %{customdata[1]}–%{customdata[2]})<br>"
                                 "keys of rank %{customdata[3]} (positions %{customdata[4]}–%{customdata[5]})<br>"
                                 "ring step %{customdata[6]}: %{customdata[7]}<extra></extra>")))
    for t in range(W):  # legend entries: the heatmap has none
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"step {t}", showlegend=True,
                                 marker={"symbol": "square", "size": MARKER_PX + 3, "color": step_color(t)}))
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=SKIPPED, showlegend=True,
                             marker={"symbol": "square", "size": MARKER_PX + 3, "color": SKIPPED_COLOR}))
    centres = [r * T + (T - 1) / 2 for r in range(W)]
    ranks = [str(r) for r in range(W)]
    fig.update_layout(
        template=flashviz_template(), height=MAP_HEIGHT_PX, title={"text": "Scores by ring step, rank by rank"},
        legend={"x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"},
        margin={"l": 110, "r": 20, "b": MAP_SLIDER_TOP_PX + 80},
        xaxis={"title": {"text": "keys: the K/V shard of rank"}, "tickvals": centres, "ticktext": ranks,
               "showgrid": False, "constrain": "domain", "range": [-0.5, side - 0.5]},
        yaxis={"title": {"text": "queries of rank"}, "tickvals": centres, "ticktext": ranks,
               "showgrid": False, "autorange": False, "range": [side - 0.5, -0.5], "scaleanchor": "x"},
        shapes=[{"type": "line", "xref": "x", "yref": "y", "x0": -0.5, "x1": side - 0.5, "y0": r * T - 0.5,
                 "y1": r * T - 0.5, "line": {"color": "black", "width": 2}} for r in range(1, W)]
        + [{"type": "line", "xref": "x", "yref": "y", "y0": -0.5, "y1": side - 0.5, "x0": r * T - 0.5,
            "x1": r * T - 0.5, "line": {"color": "black", "width": 1, "dash": "dot"}} for r in range(1, W)])
    set_subtitle(fig, step_text(grid, W - 1))
    names = [f"step {t}" for t in range(W)]
    fig.frames = [go.Frame(name=name, data=[go.Heatmap(z=_map_z(grid, t))], traces=[0],
                           layout={"title": {"subtitle": {"text": subtitle_lines(step_text(grid, t))}}})
                  for t, name in enumerate(names)]
    fig.update_layout(**_controls(names, MAP_HEIGHT_PX - fig.layout.margin.t - fig.layout.margin.b))
    return fig


def _controls(names: list[str], plot_h: int) -> dict:
    """Play (always from step 0) and a slider under the plot, at the last frame: the whole ring before Play."""
    play = {"frame": {"duration": 1200, "redraw": True}, "transition": {"duration": 0}, "mode": "immediate"}
    pause = {"frame": {"duration": 0, "redraw": False}, "transition": {"duration": 0}, "mode": "immediate"}
    y = -MAP_SLIDER_TOP_PX / plot_h
    return {
        "updatemenus": [{"type": "buttons", "direction": "left", "x": 0, "y": y - 0.02, "xanchor": "right",
                         "yanchor": "top", "showactive": False, "font": {"size": BASE_FONT_PX},
                         "buttons": [{"label": "▶ Play", "method": "animate", "args": [names, play]},
                                     {"label": "❚❚", "method": "animate", "args": [[None], pause]}]}],
        "sliders": [{"active": len(names) - 1, "x": 0.02, "len": 0.98, "y": y, "yanchor": "top",
                     "currentvalue": {"prefix": "shown: up to ", "font": {"size": BASE_FONT_PX, "color": "#111111"}},
                     "font": {"size": 2, "color": "rgba(0,0,0,0)"}, "ticklen": 0, "minorticklen": 0,
                     "steps": [{"method": "animate", "label": name, "args": [[name], {
                         "mode": "immediate", "frame": {"duration": 0, "redraw": True},
                         "transition": {"duration": 0}}]} for name in names]}],
    }


# ----------------------------------------------------------------------------------------------------------------------
# work per rank and layout


def work_figure(model: Sequence[LayoutWork], measured: Sequence[LayoutWork] = ()) -> go.Figure:
    """Each rank's computed tiles and FLOPs over the forward ring, per layout: bars from the model, diamonds from a
    run's own events (when given).

    Example:
        >>> from flashviz.views.ring.data import LayoutWork
        >>> w = [LayoutWork("contiguous", (1, 3), (4, 12), 1.5), LayoutWork("zigzag", (2, 2), (8, 8), 1.0)]
        >>> sorted({t.name for t in work_figure(w, w[:1]).data})
        ['contiguous', 'contiguous, run', "the run's events", 'zigzag']
    """
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1)
    world = len(model[0].tiles) if model else 1
    k = len(model)
    offset = {w.layout: (i - (k - 1) / 2) * BAR_WIDTH for i, w in enumerate(model)}
    for w in model:
        x = [r + offset[w.layout] for r in range(world)]
        color = LAYOUT_COLORS.get(w.layout, "#555555")
        for row, ys in ((1, w.tiles), (2, [f / 1e6 for f in w.flops])):
            fig.add_trace(go.Bar(
                x=x, y=ys, width=BAR_WIDTH * 0.95, marker_color=color, name=w.layout, legendgroup=w.layout,
                showlegend=row == 1, customdata=[(r, t, format_flops(f)) for r, (t, f) in
                                                 enumerate(zip(w.tiles, w.flops, strict=True))],
                hovertemplate=f"{w.layout}, rank %{{customdata[0]}}: %{{customdata[1]}} tiles, %{{customdata[2]}} "
                              f"(model)<extra></extra>"), row=row, col=1)
    for w in measured:
        x = [r + offset.get(w.layout, 0) for r in range(len(w.tiles))]
        for row, ys in ((1, w.tiles), (2, [f / 1e6 for f in w.flops])):
            fig.add_trace(go.Scatter(
                x=x, y=ys, mode="markers", name=f"{w.layout}, run", legendgroup="run", showlegend=False,
                marker={"symbol": "diamond", "size": MARKER_PX, "color": "white", "line": {"width": 2,
                                                                                           "color": "black"}},
                hovertemplate=f"{w.layout}, rank %{{x:.0f}}: %{{y}} (the run's events)<extra></extra>"),
                row=row, col=1)
    if measured:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="the run's events", legendgroup="run",
                                 marker={"symbol": "diamond", "size": MARKER_PX, "color": "white",
                                         "line": {"width": 2, "color": "black"}}))
    fig.update_layout(template=flashviz_template(), height=SMALL_FIG_PX + 60, barmode="overlay",
                      title={"text": "Each rank's work, forward ring"},
                      legend={"orientation": "h", "x": 0, "y": -0.22, "yanchor": "top"},
                      margin={"t": 60, "b": 130})
    fig.update_xaxes(tickvals=list(range(world)), ticktext=[f"rank {r}" for r in range(world)],
                     range=[-0.5, world - 0.5], showgrid=False)
    fig.update_yaxes(title_text="tiles", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="MFLOP", rangemode="tozero", row=2, col=1)
    return fig


# ----------------------------------------------------------------------------------------------------------------------
# the run


def timeline_figure(events: Sequence) -> go.Figure:
    """Every rank's steps on one clock, a panel per phase: each step's compute (kernel and merge, or dK/dV
    accumulation) then its wait for the transfers the compute did not hide, in ms since the phase's first step began.

    Args:
        events: a run's RingStepEvent items (start_s, compute_s, comm_s per rank, step and phase).

    Example:
        >>> from types import SimpleNamespace as E
        >>> ev = [E(rank=r, step=0, kv_rank=r, phase="forward", tiles_computed=1, start_s=1.0, compute_s=0.01,
        ...         comm_s=0.002, bytes_sent=0) for r in range(2)]
        >>> [t.name for t in timeline_figure(ev).data]
        ['forward compute', 'waiting for transfers']
    """
    world = max(e.rank for e in events) + 1
    phases = [p for p in (FORWARD, BACKWARD) if any(e.phase == p for e in events)]
    fig = make_subplots(rows=len(phases), cols=1, vertical_spacing=0.3 if len(phases) > 1 else 0.1,
                        subplot_titles=[f"{p}: ms since its first step began" for p in phases])
    ranks = [f"rank {r}" for r in range(world)]
    for row, phase in enumerate(phases, start=1):
        steps = [e for e in events if e.phase == phase]
        t0 = min(e.start_s for e in steps)
        fig.add_trace(go.Bar(
            y=[f"rank {e.rank}" for e in steps], x=[e.compute_s * MS for e in steps],
            base=[(e.start_s - t0) * MS for e in steps], orientation="h", name=f"{phase} compute",
            marker={"color": COMPUTE_COLORS[phase], "line": {"width": 1, "color": "white"}},
            customdata=[(e.step, e.kv_rank, e.tiles_computed, e.compute_s * MS) for e in steps],
            hovertemplate=(f"%{{y}}, {phase} step %{{customdata[0]}} (K/V of rank %{{customdata[1]}}): "
                           "%{customdata[2]} tiles in %{customdata[3]:.2f} ms<extra></extra>")), row=row, col=1)
        fig.add_trace(go.Bar(
            y=[f"rank {e.rank}" for e in steps], x=[e.comm_s * MS for e in steps],
            base=[(e.start_s - t0 + e.compute_s) * MS for e in steps], orientation="h",
            name="waiting for transfers", showlegend=row == 1, legendgroup="wait", marker={"color": WAIT_COLOR},
            customdata=[(e.step, e.comm_s * MS, format_bytes(e.bytes_sent)) for e in steps],
            hovertemplate=(f"%{{y}}, {phase} step %{{customdata[0]}}: waited %{{customdata[1]:.2f}} ms for the "
                           "transfers (sent %{customdata[2]})<extra></extra>")), row=row, col=1)
        fig.update_yaxes(type="category", categoryorder="array", categoryarray=ranks[::-1], row=row, col=1)
        fig.update_xaxes(rangemode="tozero", row=row, col=1)
    fig.update_layout(template=flashviz_template(), barmode="overlay",
                      title={"text": "Each rank's steps, as measured in its process"},
                      height=140 + len(phases) * (90 + 34 * world),
                      legend={"orientation": "h", "x": 0, "y": -0.12 if len(phases) > 1 else -0.25, "yanchor": "top"},
                      margin={"t": 90, "b": 90})
    return fig


def bytes_figure(events: Sequence, model_bytes: dict[tuple[str, int], int]) -> go.Figure:
    """Bytes each rank sent at each step (bars, one per rank) against the model's (a black dash per step).

    Args:
        events: a run's RingStepEvent items.  model_bytes: (phase, step) -> the bytes the model says each rank sends.
    """
    world = max(e.rank for e in events) + 1
    keys = [(p, t) for p in (FORWARD, BACKWARD) for t in range(world) if any(e.phase == p for e in events)]
    labels = [f"{'fwd' if p == FORWARD else 'bwd'} {t}" for p, t in keys]
    fig = go.Figure()
    for r in range(world):
        sent = {(e.phase, e.step): e.bytes_sent for e in events if e.rank == r}
        fig.add_trace(go.Bar(x=labels, y=[sent.get(k, 0) / 1024 for k in keys], name=f"rank {r}",
                             marker_color=step_color(r), offsetgroup=str(r),
                             hovertemplate=f"rank {r}, %{{x}}: sent %{{y:.4g}} KiB<extra></extra>"))
    fig.add_trace(go.Scatter(x=labels, y=[model_bytes[k] / 1024 for k in keys], mode="markers", name="model",
                             marker={"symbol": "line-ew-open", "size": 34, "color": "black",
                                     "line": {"width": 4, "color": "black"}},
                             hovertemplate="model, %{x}: %{y:.4g} KiB per rank<extra></extra>"))
    style_figure(fig, title="Bytes sent per step, against the model", x_title="ring step (forward, backward)",
                 y_title="KiB sent by each rank")
    fig.update_xaxes(type="category")
    fig.update_layout(barmode="group", height=SMALL_FIG_PX, legend={"orientation": "h", "x": 0, "y": -0.3,
                                                                    "yanchor": "top"}, margin={"t": 60, "b": 140})
    fig.update_yaxes(rangemode="tozero")
    return fig


def merge_figure(merge: MergeRow) -> go.Figure:
    """One row's merge: each step's partial logsumexp L_t against the merged L (left) and the weight exp(L_t - L)
    its partial output carries (right, summing to 1).

    Example:
        >>> from flashviz.views.ring.data import MergeRow
        >>> m = MergeRow(7, 1, 3, (1.0, float("-inf")), (1, 0), 1.0, (1.0, 0.0))
        >>> merge_figure(m).data[1].y
        (1.0, 0.0)
    """
    steps = list(range(len(merge.lse_steps)))
    labels = [str(t) for t in steps]
    finite = [x for x in merge.lse_steps if x > -math.inf]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.16,
                        subplot_titles=("partial L_t and the merged L", "weight exp(L_t − L)"))
    fig.add_trace(go.Bar(x=labels, y=[x if x > -math.inf else None for x in merge.lse_steps],
                         marker_color=[step_color(t) for t in steps], showlegend=False,
                         customdata=list(merge.kv_ranks),
                         hovertemplate="step %{x} (K/V of rank %{customdata}): L_t = %{y:.5g}<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Bar(x=labels, y=list(merge.weights), marker_color=[step_color(t) for t in steps],
                         text=[f"{w:.3f}" for w in merge.weights], textposition="outside", cliponaxis=False,
                         showlegend=False, hovertemplate="step %{x}: weight %{y:.6f}<extra></extra>"), row=1, col=2)
    fig.add_hline(y=merge.lse, line={"color": "black", "width": LINE_PX, "dash": "dash"}, row=1, col=1)
    fig.add_annotation(x=0.5, xref="x domain", y=merge.lse, yref="y", yshift=14, showarrow=False,
                       text=f"merged L = {merge.lse:.4g}", font={"size": BASE_FONT_PX})
    lo = min([*finite, merge.lse])
    fig.update_layout(template=flashviz_template(), height=SMALL_FIG_PX, showlegend=False,
                      title={"text": f"The merge of row {merge.position} (rank {merge.rank}) across the steps"},
                      margin={"t": 100, "b": 80})
    fig.update_xaxes(title_text="ring step t", type="category", row=1, col=1)
    fig.update_xaxes(title_text="ring step t", type="category", row=1, col=2)
    top = max([*finite, merge.lse])
    fig.update_yaxes(range=[min(0.0, lo - 0.5), top + 0.25 * (abs(top) + 1)], row=1, col=1)
    fig.update_yaxes(range=[0, 1.2], row=1, col=2)
    return fig


def precision_figure(points: Sequence[PrecisionPoint], tolerance: float) -> go.Figure:
    """Mean and largest |error| against one process in float64 for fp32 and bf16 partials at each world size.

    Example:
        >>> from flashviz.views.ring.data import PrecisionPoint
        >>> p = [PrecisionPoint("float32", w, 1e-7 * w, 1e-8 * w, 1e-9) for w in (1, 2, 4)]
        >>> [t.name for t in precision_figure(p, 1e-5).data]
        ['fp32 mean', 'fp32 largest', 'fp32 bar (1e-5)']
    """
    fig = go.Figure()
    worlds = sorted({p.world for p in points})
    for dtype in dict.fromkeys(p.dtype for p in points):
        mine = sorted((p for p in points if p.dtype == dtype), key=lambda p: p.world)
        short = DTYPE_SHORT.get(dtype, dtype)
        color = DTYPE_COLORS.get(dtype, "#555555")
        fig.add_trace(go.Scatter(x=[str(p.world) for p in mine], y=[p.mean_error for p in mine],
                                 mode="lines+markers", name=f"{short} mean", line={"color": color, "width": LINE_PX},
                                 marker={"size": MARKER_PX, "color": color},
                                 hovertemplate=f"{short}, W = %{{x}}: mean |error| %{{y:.3g}}<extra></extra>"))
        fig.add_trace(go.Scatter(x=[str(p.world) for p in mine], y=[p.max_error for p in mine],
                                 mode="lines+markers", name=f"{short} largest",
                                 line={"color": color, "width": LINE_PX, "dash": "dot"},
                                 marker={"size": MARKER_PX, "color": color, "symbol": "diamond"},
                                 hovertemplate=f"{short}, W = %{{x}}: largest |error| %{{y:.3g}}<extra></extra>"))
    if any(p.dtype == "float32" for p in points):
        fig.add_trace(go.Scatter(x=[str(worlds[0]), str(worlds[-1])], y=[tolerance, tolerance], mode="lines",
                                 name=f"fp32 bar ({fmt_sci(tolerance)})",
                                 line={"color": REFERENCE_COLOR, "width": 2, "dash": "dash"},
                                 hovertemplate=f"fp32 bar: {fmt_sci(tolerance)}<extra></extra>"))
    style_figure(fig, title="Error against one process, as the world grows", x_title="W (ranks)",
                 y_title="|error| (float64 reference)", log_y=True)
    values = [v for p in points for v in (p.max_error, p.mean_error)] + [tolerance]
    fig.update_yaxes(**log_axis(values, "sci"))
    fig.update_layout(height=SMALL_FIG_PX, legend={"orientation": "h", "x": 0, "y": -0.3, "yanchor": "top"},
                      margin={"t": 60, "b": 140})
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=[str(w) for w in worlds])
    return fig


# ----------------------------------------------------------------------------------------------------------------------
# the lesson's slide


def context_picture(s: RingSettings, v: Mapping[str, Any]) -> go.Figure:
    """Why one sequence is split: the bytes of the whole K/V on one device, of one rank's shard, and of one layer's
    S and P in standard attention, on a log axis (the check's values: flashviz.views.ring.claims.context_parallel)."""
    names = ["K/V, one device", f"K/V, one of<br>W = {v['world']} ranks", "S and P, one<br>layer (standard)"]
    sizes = [v["kv_bytes"], v["kv_rank_bytes"], v["scores_bytes"]]
    colors = [STEP_COLORS[0], STEP_COLORS[2], REFERENCE_COLOR]
    return slide_bars(names, [b / GIB for b in sizes], [format_bytes(b) for b in sizes], colors,
                      title="Why split one sequence over devices", y_title="GiB (log)", log=True,
                      subtitle=f"N = {v['n']:,} tokens, {v['model']}")
