"""The row inspector of the "How it works" view: the online softmax of one query row, tile by tile. Plotly only.

Input is flashviz.measure.trace.RowTrace (plain data from the real kernel's on_tile events); nothing here imports torch
or streamlit. Three panels share the x axis (the computed tile, counted as the tile map counts them: "tile k/n"):

    m       the running max before (open circle) and after (filled) each tile; a jump is a rescale;
    factor  e^(m_old - m_new): 1 where m did not move, below 1 where it grew (the old sum shrinks by that factor);
    l       the running sum before the rescale (open circle), after it (cross) and after adding the tile's own row
            sum (filled): a drop then a rise on every tile where m grew, a plain rise elsewhere.

Tiles where m grew are shaded across all three panels. References: FlashAttention (Dao et al., 2022) Algorithm 1,
lines 10-12; FlashAttention-2 (Dao, 2023) Algorithm 1, line 8.

The lesson's slides of the steps on this view (flashviz.app.slides) are here too, each drawn from its check's values
(flashviz.lesson.claims, flashviz.views.how.claims): S and P side by side (`scores_picture`), the tiles' fates
(`tiles_picture`) and the row inspector at a slide's size (`row_picture`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz.figures.palette import (
    AXIS_TITLE_FONT_PX,
    BASE_FONT_PX,
    LEGEND_FONT_PX,
    LINE_PX,
    LOOP_ORDER_COLORS,
    MARKER_PX,
    TICK_FONT_PX,
    TITLE_FONT_PX,
)
from flashviz.figures.slide import MARGIN, SLIDE_FIGURE_PX, finish_slide, slide_tile_map
from flashviz.figures.style import flashviz_template
from flashviz.vocab import KV_OUTER, LOOP_ORDER_SHORT, Q_OUTER

if TYPE_CHECKING:  # plain dataclasses; imported for type hints only, so this module never loads torch
    from collections.abc import Mapping
    from typing import Any

    from flashviz.measure.trace import RowTrace
    from flashviz.views.how.settings import HowSettings

ROW_FIG_HEIGHT_PX = 600  # three panels and a two-line legend: the whole figure fits a 1280 x 720 window
TOP_PX, BOTTOM_PX = 118, 140  # title and two subtitle lines; axis title and the legend
LEGEND_GAP_PX = 62  # from the bottom panel's edge to the legend's top: below the tick labels and the x title
OFFSET = 0.22  # x offset (steps) of "before" and "after" markers around a tile's step, so all three l values show
ORDER_GAP = 0.1  # x offset (steps) between loop orders: on a row both visit in the same key order, so FA1's and
# FA2's values are equal and, drawn at one x, one order's markers would hide the other's
ORDER_DASH = {KV_OUTER: "solid", Q_OUTER: "dash"}  # each loop order's connecting lines
BAR_WIDTH = 0.5  # the rescale factor bars of all loop orders together, in steps
GREW_SHADE = "rgba(197, 27, 125, 0.16)"  # pale magenta band behind the tiles where m grew
EXACT_COLOR = "#000000"
MARKER_BEFORE, MARKER_RESCALED, MARKER_AFTER = "circle-open", "x-thin-open", "circle"
PANELS = ("running max m (score units)", "rescale factor e^(m_old − m_new)", "running sum l = Σ e^(s − m)")
Y_TITLES = ("m (score)", "factor", "l (sum)")  # beside each panel; a lone rotated "l" would read as a dash


def _finite(values: Sequence[float]) -> list[float | None]:
    """-inf (the row has seen no key yet) becomes a gap."""
    return [v if math.isfinite(v) else None for v in values]


def _hover(tr: RowTrace) -> list[str]:
    """Per tile: every number of the update, in one box."""
    short, out = LOOP_ORDER_SHORT[tr.loop_order], []
    for t in range(len(tr.step)):
        m0, m1 = tr.m_before[t], tr.m[t]
        first = not math.isfinite(m0)
        grew = "m grew: rescale" if tr.grew[t] else "first tile: m starts here" if first else "m unchanged"
        out.append(
            f"<b>{short}</b> tile {tr.tile[t]} (key block j={tr.k_block[t]}, schedule step {tr.step[t] + 1}): "
            f"{grew}<br>"
            f"m: {m0:.4g} → {m1:.4g}<br>factor e^(m_old − m_new) = {tr.factor[t]:.4g}<br>"
            f"l: {tr.l_before[t]:.4g} → ×factor → {tr.l_rescaled[t]:.4g} → + tile row sum {tr.tile_sum[t]:.4g} "
            f"→ {tr.l[t]:.4g}")
    return out


def _pairs(xs: Sequence[float], lo: Sequence[float | None], hi: Sequence[float | None], dx: float
           ) -> tuple[list, list]:
    """Vertical segments from lo to hi at x - dx .. x + dx, as one polyline broken by gaps."""
    px, py = [], []
    for x, a, b in zip(xs, lo, hi, strict=True):
        if a is not None and b is not None:
            px += [x - dx, x + dx, None]
            py += [a, b, None]
    return px, py


def order_shift(k: int, n: int) -> float:
    """The x shift (steps) of the k-th of n loop orders drawn: side by side around the tile, 0 for one order.

    Example:
        >>> order_shift(0, 2), order_shift(1, 2), order_shift(0, 1)
        (-0.05, 0.05, 0.0)
    """
    return (k - (n - 1) / 2) * ORDER_GAP


def _add_order(fig: go.Figure, tr: RowTrace, k: int = 0, n_orders: int = 1) -> None:
    """The k-th of n loop orders: its markers and connecting lines on all three panels, in the order's colour and
    dash, shifted by order_shift(k, n) steps so that another order's equal values stay visible beside them."""
    shift = order_shift(k, n_orders)
    short, color = LOOP_ORDER_SHORT[tr.loop_order], LOOP_ORDER_COLORS[tr.loop_order]
    dash = ORDER_DASH.get(tr.loop_order, "solid")
    x = list(tr.tile)
    hover = _hover(tr)
    common = dict(legendgroup=short, hovertemplate="%{text}<extra></extra>", text=hover, showlegend=False)
    m0, m1 = _finite(tr.m_before), _finite(tr.m)
    px, py = _pairs([v + shift for v in x], m0, m1, OFFSET)
    fig.add_trace(go.Scatter(x=px, y=py, mode="lines", line=dict(color=color, width=LINE_PX, dash=dash),
                             hoverinfo="skip", name=f"{short}: m jump", legendgroup=short, showlegend=False),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=[v - OFFSET + shift for v in x], y=m0, mode="markers",
                             name=f"{short}: m before the tile",
                             marker=dict(symbol=MARKER_BEFORE, size=MARKER_PX + 2, color=color,
                                         line=dict(width=2.5, color=color)), **common), row=1, col=1)
    fig.add_trace(go.Scatter(x=[v + OFFSET + shift for v in x], y=m1, mode="lines+markers", line_shape="hv",
                             line=dict(color=color, width=1.5, dash=dash), name=f"{short}: m after each tile",
                             marker=dict(symbol=MARKER_AFTER, size=MARKER_PX + 2, color=color), **common), row=1, col=1)
    factor = [None if not math.isfinite(a) else f for a, f in zip(tr.m_before, tr.factor, strict=True)]
    width = BAR_WIDTH / n_orders
    fig.add_trace(go.Bar(x=x, y=factor, name=f"{short}: rescale factor", marker=dict(color=color), width=width,
                         offset=-BAR_WIDTH / 2 + k * width,
                         textposition="none", **common), row=2, col=1)
    lx = [v - OFFSET + shift for v in x] + [v + shift for v in x] + [v + OFFSET + shift for v in x]
    ly = list(tr.l_before) + list(tr.l_rescaled) + list(tr.l)
    order = sorted(range(len(lx)), key=lambda i: lx[i])
    fig.add_trace(go.Scatter(x=[lx[i] for i in order], y=[ly[i] for i in order], mode="lines",
                             line=dict(color=color, width=LINE_PX, dash=dash), hoverinfo="skip",
                             name=f"{short}: l path", legendgroup=short, showlegend=False), row=3, col=1)
    for name, xs, ys, symbol in (("l before the rescale", [v - OFFSET + shift for v in x], tr.l_before,
                                  MARKER_BEFORE),
                                 ("l after the rescale", [v + shift for v in x], tr.l_rescaled, MARKER_RESCALED),
                                 ("l after each tile", [v + OFFSET + shift for v in x], tr.l, MARKER_AFTER)):
        fig.add_trace(go.Scatter(x=xs, y=list(ys), mode="markers", name=f"{short}: {name}",
                                 marker=dict(symbol=symbol, size=MARKER_PX + 2, color=color,
                                             line=dict(width=2.5, color=color)), **common), row=3, col=1)


def _add_key(fig: go.Figure, rows: Sequence[RowTrace]) -> None:
    """Legend-only entries: one per loop order (its colour) and one per marker meaning (neutral grey)."""
    for tr in rows:
        short = LOOP_ORDER_SHORT[tr.loop_order]
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines+markers", name=f"{short} ({tr.loop_order})",
                                 legendgroup=short, line=dict(color=LOOP_ORDER_COLORS[tr.loop_order], width=LINE_PX,
                                                              dash=ORDER_DASH.get(tr.loop_order, "solid")),
                                 marker=dict(size=MARKER_PX, color=LOOP_ORDER_COLORS[tr.loop_order])))
    for name, symbol in (("before the tile", MARKER_BEFORE), ("l after the rescale", MARKER_RESCALED),
                         ("after the tile", MARKER_AFTER)):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name, legendgroup=name, marker=dict(
            symbol=symbol, size=MARKER_PX + 2, color="#444444", line=dict(width=2.5, color="#444444"))))
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="m grew here (rescale)",
                             marker=dict(symbol="square", size=20, color=GREW_SHADE)))


def _add_exact(fig: go.Figure, r: RowTrace, n_tiles: int) -> None:
    """The exact m and l over the whole row, as dashed lines: where the last tile must land."""
    for panel, (name, value) in ((1, ("m", r.m_exact)), (3, ("l", r.l_exact))):
        if math.isfinite(value):
            fig.add_trace(go.Scatter(
                x=[0.5, n_tiles + 0.5], y=[value, value], mode="lines", line=dict(color=EXACT_COLOR, width=2,
                                                                                   dash="dash"),
                name="exact value over the whole row", legendgroup="exact", showlegend=panel == 1,
                hovertemplate=f"exact {name} = {value:.6g}<extra></extra>"), row=panel, col=1)


def _shade_growth(fig: go.Figure, rows: Sequence[RowTrace]) -> None:
    """A pale band across all three panels behind every tile where m grew."""
    tiles = sorted({t for tr in rows for t, grew in zip(tr.tile, tr.grew, strict=True) if grew})  # once per tile
    for t in tiles:
        for panel in (1, 2, 3):
            fig.add_vrect(x0=t - 0.5, x1=t + 0.5, fillcolor=GREW_SHADE, line_width=0, layer="below", row=panel, col=1,
                          exclude_empty_subplots=False)


def row_figure(rows: Sequence[RowTrace], *, n_tiles: int, note: str | None = None) -> go.Figure:
    """Row inspector: the online-softmax update of one query row on every tile, per loop order.

    Args:
        rows: one RowTrace per loop order (same row, same data).
        n_tiles: the computed tiles of the schedule (the tile map's n in "tile k/n"): the x range, so FA1 and FA2
            are comparable.
        note: optional line under the title, e.g. pick_row's reason for choosing this row.
    Returns:
        A three-panel Figure (m, rescale factor, l) with the exact m and l as dashed lines and the tiles where m grew
        shaded.

    Example:
        >>> from flashviz.measure.trace import row_trace
        >>> tr = row_trace(16, 8, 4, 4, row=15, causal=True)
        >>> fig = row_figure([tr], n_tiles=10)  # 4 x 4 tiles, causal: 10 computed
        >>> fig.layout.yaxis3.title.text, len(fig.layout.shapes) == 3 * tr.rescales, list(fig.data[3].x)
        ('l (sum)', True, [4, 7, 9, 10])
    """
    if not rows:
        raise ValueError("row_figure needs at least one RowTrace (one per loop order to show).")
    r = rows[0]
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.09, subplot_titles=PANELS,
                        row_heights=[0.36, 0.24, 0.40])
    _shade_growth(fig, rows)
    for k, tr in enumerate(rows):
        _add_order(fig, tr, k, len(rows))
    _add_exact(fig, r, n_tiles)
    _add_key(fig, rows)
    _style(fig, rows, n_tiles, note)
    return fig


def _style(fig: go.Figure, rows: Sequence[RowTrace], n_tiles: int, note: str | None) -> None:
    r = rows[0]
    grew = r.rescales
    summary = (f"m grew on {grew} of the row's {len(r.step)} tiles: l and O were rescaled there" if grew else
               f"m never grew after the first tile ({len(r.step)} tiles): no rescale on this row")
    subtitle = summary if note is None else f"{summary}<br>{note}"
    fig.update_xaxes(range=[0.5, n_tiles + 0.5], tickfont=dict(size=TICK_FONT_PX), showgrid=False)
    fig.update_xaxes(title=dict(text=f"computed tile k of {n_tiles} (the tile map's \"tile k/{n_tiles}\")",
                                font=dict(size=AXIS_TITLE_FONT_PX)), row=3, col=1)
    for panel, title in enumerate(Y_TITLES, start=1):
        fig.update_yaxes(title=dict(text=title, font=dict(size=AXIS_TITLE_FONT_PX)), tickfont=dict(size=TICK_FONT_PX),
                         tickformat=".3~g", row=panel, col=1)
    fig.update_yaxes(range=_padded([v for tr in rows for v in (*tr.m, *tr.m_before)] + [r.m_exact]), row=1, col=1)
    fig.update_yaxes(range=[0, 1.08], tickvals=[0, 0.5, 1], row=2, col=1)
    fig.update_yaxes(range=_padded([v for tr in rows for v in (*tr.l, *tr.l_before)] + [r.l_exact, 0.0]),
                     row=3, col=1)
    fig.update_annotations(font=dict(size=BASE_FONT_PX), selector=dict(text=PANELS[0]))
    fig.update_annotations(font=dict(size=BASE_FONT_PX), selector=dict(text=PANELS[1]))
    fig.update_annotations(font=dict(size=BASE_FONT_PX), selector=dict(text=PANELS[2]))
    fig.update_layout(
        template=flashviz_template(), height=ROW_FIG_HEIGHT_PX, bargap=0.5,
        title=dict(text=f"Row inspector: query row {r.row} (Q block i={r.q_block})", font=dict(size=TITLE_FONT_PX),
                   subtitle=dict(text=subtitle, font=dict(size=BASE_FONT_PX, color="#333333")), x=0.01, y=0.99,
                   yanchor="top"),
        margin=dict(t=TOP_PX, b=BOTTOM_PX, l=90, r=20),
        legend=dict(orientation="h", x=0.0, y=-LEGEND_GAP_PX / (ROW_FIG_HEIGHT_PX - TOP_PX - BOTTOM_PX), xanchor="left",
                    yanchor="top", font=dict(size=LEGEND_FONT_PX)),
        hoverlabel=dict(font=dict(size=BASE_FONT_PX)),
    )


def _padded(values: Sequence[float]) -> list[float] | None:
    """A y range around the finite values with a margin, never thinner than 4% of their size (so a flat line
    does not turn rounding noise into a wall of digits). None when nothing is finite."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return None
    lo, hi = min(finite), max(finite)
    pad = max(0.08 * (hi - lo), 0.02 * max(abs(lo), abs(hi), 1.0))
    return [lo - pad, hi + pad]


# ----------------------------------------------------------------------------------------------------------------------
# the lesson's slides: settings and the step's check's values -> the one picture


def scores_picture(s: HowSettings, v: Mapping[str, Any]) -> go.Figure:
    """S and P = softmax(S) side by side, query rows downwards: the largest score of a row gets its largest weight."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.16,
                        subplot_titles=("S = QKᵀ/√d: scores", "P = softmax(S): weights"))
    keys = list(range(v["n"]))
    fig.add_trace(go.Heatmap(z=v["S"], x=keys, y=keys, colorscale="RdBu_r", zmid=0, name="S",
                             colorbar={"x": 0.42, "len": 0.9, "thickness": 14},
                             hovertemplate="query i = %{y}, key j = %{x}<br>S_ij = %{z:.3f}<extra></extra>"), 1, 1)
    fig.add_trace(go.Heatmap(z=v["P"], x=keys, y=keys, colorscale="Blues", zmin=0, name="P",
                             colorbar={"x": 1.0, "len": 0.9, "thickness": 14},
                             hovertemplate="query i = %{y}, key j = %{x}<br>P_ij = %{z:.3f}<extra></extra>"), 1, 2)
    for col in (1, 2):
        fig.update_xaxes(title_text="key j", row=1, col=col, constrain="domain")
        fig.update_yaxes(title_text="query i" if col == 1 else None, autorange="reversed", row=1, col=col,
                         scaleanchor=f"x{'' if col == 1 else col}", constrain="domain")
    finish_slide(fig, f"Standard attention at N = {v['n']}, d = {v['d']}: {v['scores']} scores", "", legend=False)
    return fig.update_layout(margin={**MARGIN, "t": 110})  # the panels' titles under the figure's


def tiles_picture(s: HowSettings, v: Mapping[str, Any]) -> go.Figure:
    """The tile schedule's fates: every tile in its final colour, the counts in the legend."""
    mask = "causal" if s.causal else "no mask"
    return slide_tile_map(v["status"], v["counts"], n=s.n, block_q=s.br, block_k=s.bc, title=f"Tiles of S, {mask}")


def row_picture(s: HowSettings, v: Mapping[str, Any]) -> go.Figure:
    """The row inspector's figure of the check's row: m, the rescale factor and l, tile by tile, per loop order."""
    fig = row_figure(v["traces"], n_tiles=v["n_tiles"])
    fig.update_layout(height=SLIDE_FIGURE_PX, margin={"l": 70, "r": 20, "t": 30, "b": 40}, title=None,
                      legend={"font": {"size": 13}})
    fig.update_annotations(font_size=14)  # the panels' titles
    return fig
