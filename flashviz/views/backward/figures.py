"""The Backward view's panels besides the tile map (views/backward/tilemap.py): the operations of one backward tile
with their shapes and where each operand lives (HTML), the measured price of recomputation (plotly), and the
lesson's slide of the backward's HBM traffic (`backward_picture`, flashviz.app.slides).

Inputs are flashviz.measure's plain data: TileOp tuples (views/backward/data.py) and a RecomputePrice
(views/backward/data.py). No torch, no streamlit.

References: Dao, FlashAttention-2 (2023), Algorithm 2 (lines 10-16: the tile's work) and Section 4 (the backward's
FLOPs); Dao et al., FlashAttention (2022), Section 3.1 (recomputation instead of storing P).
Legend: Br = block_q rows, Bc = block_k keys of the tile, d head dimension.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz.figures.palette import (
    AXIS_TITLE_FONT_PX,
    BASE_FONT_PX,
    DQ_MARKER_COLOR,
    ON_CHIP_BAND_COLOR,
    TICK_FONT_PX,
    TITLE_FONT_PX,
)
from flashviz.figures.slide import slide_bars
from flashviz.figures.style import (
    MIB,
    MS_PER_S,
    flashviz_template,
    fmt_mib,
    fmt_ms,
    impl_color,
    set_subtitle,
)
from flashviz.units import format_bytes, format_flops
from flashviz.vocab import (
    FLASH,
    FLASH2,
    HBM_READ_WRITE,
    HBM_STREAMED,
    NAIVE,
    NOT_RUN,
    OK,
    ON_CHIP_COLUMN,
    ON_CHIP_ROW,
    ON_CHIP_TILE,
    OPERAND_PLACES,
    SDPA,
)

if TYPE_CHECKING:  # plain dataclasses; imported for type hints only, so this module never loads torch
    from collections.abc import Mapping
    from typing import Any

    from flashviz.views.backward.data import RecomputePrice, TileOp
    from flashviz.views.backward.settings import BackwardSettings

PLACE_STYLE = {  # (background, border) of an operand's chip, by where it lives
    ON_CHIP_COLUMN: ("#D5E6F5", ON_CHIP_BAND_COLOR),  # the map's blue band
    ON_CHIP_ROW: ("#D5E6F5", ON_CHIP_BAND_COLOR),  # the second pass's row band: the same blue
    ON_CHIP_TILE: ("#EEEEEE", "#888888"),  # grey: exists on chip for this tile only
    HBM_STREAMED: ("#FFFFFF", "#000000"),  # the map's black outline
    HBM_READ_WRITE: ("#FBE0D1", DQ_MARKER_COLOR),  # the map's dQ marker
}
PRICE_FIG_HEIGHT_PX = 560  # two bar panels with their legend under them: fits a 1280 x 720 window
SHORT_NAMES = {FLASH2: "tiled", NAIVE: "naive", SDPA: "SDPA"}  # the x tick labels; the legend has the rest


def _chip(name: str, place: str, wrap: bool = False) -> str:
    bg, border = PLACE_STYLE[place]
    return (f'<span class="fv-op" data-place="{escape(place)}" title="{escape(place)}" style="display:inline-block;'
            f"background:{bg};border:2px solid {border};border-radius:5px;padding:0 6px;margin:1px 3px 1px 0;"
            f'white-space:{"normal" if wrap else "nowrap"}">{escape(name)}</span>')


def _tight(shape: str) -> str:
    """A shape without the spaces around × and · (a narrow column): (8×16)·(16×8) → (8×8).

    Example:
        >>> _tight("(8 × 16) · (16 × 8) → (8 × 8)")
        '(8×16)·(16×8) → (8×8)'
    """
    return shape.replace(" × ", "×").replace(") · (", ")·(")


def tile_ops_html(ops: Sequence[TileOp], *, title: str | None = None, caption: str | None = None,
                  uid: str = "fv-ops", compact: bool = False) -> str:
    """The operations of one backward tile as an HTML table: Algorithm 2's line, the operation, its shape, its
    FLOPs, its operands and its result, each operand a chip coloured by where it lives (the tile map's colours),
    with the colour key under the table.

    Args:
        ops: measure.backward_ops.tile_ops(rows, cols, d), or a BackwardTileRecord's .ops.
        title: None: "The seven steps of one backward tile".  caption: a line under the title (e.g. the tile).
        uid: the root element's id.  compact: two columns, the operation, its shape and its operands stacked in
            the second, the FLOPs only in the total (about 340 px wide: beside the tile map in a 1280 px window).
    Returns:
        HTML for st.markdown(..., unsafe_allow_html=True).

    Example:
        >>> from flashviz.views.backward.data import tile_ops
        >>> html = tile_ops_html(tile_ops(16, 16, 64))
        >>> html.count("<tr"), html.count('data-place="on chip, this tile only"') > 0
        (8, True)
        >>> tile_ops_html(tile_ops(16, 16, 64), compact=True).count("<td")
        14
    """
    if not ops:
        raise ValueError("tile_ops_html needs the tile's operations: pass tile_ops(rows, cols, d) from "
                         "flashviz.views.backward.data.")
    heads = (("line", "operation · shape (rows×cols) · inputs → result") if compact else
             ("line", "operation", "shape (rows × cols)", "FLOPs", "inputs", "result"))
    head = "".join(f'<th style="text-align:left;padding:4px 10px;border-bottom:2px solid #333">{h}</th>'
                   for h in heads)
    pad = "3px 6px" if compact else "4px 10px"
    body = []
    for op in ops:
        reads = "".join(_chip(name, place) for name, place in op.operands)
        flops = format_flops(op.flops) if op.flops else "elementwise"
        result = _chip(op.result, op.result_place)
        cells = ((str(op.line), f"<div>{escape(op.text)}</div><div>{escape(_tight(op.shape))}</div>"
                                f"<div>{reads} → {result}</div>") if compact else
                 (str(op.line), escape(op.text), escape(op.shape), flops, reads, result))
        body.append(f'<tr data-kind="{op.kind}" data-flops="{op.flops}">' + "".join(
            f'<td style="padding:{pad};border-bottom:1px solid #ddd;vertical-align:top">{c}</td>' for c in cells)
            + "</tr>")
    matmul_flops = sum(op.flops for op in ops)
    used = {place for op in ops for place in (op.result_place, *(p for _, p in op.operands))}
    key = " ".join(_chip(place, place, wrap=compact) for place in OPERAND_PLACES if place in used)
    steps = {5: "five", 6: "six", 7: "seven"}.get(len(ops), str(len(ops)))
    title = escape(title or (f"This tile's {steps} steps (Algorithm 2)" if compact else
                             f"The {steps} steps of one backward tile (FlashAttention-2, Algorithm 2, lines 10-16)"))
    caption = "" if caption is None else f'<p style="margin:2px 0 6px 0">{escape(caption)}</p>'
    return (f'<div id="{uid}" class="fv-tile-ops" style="font-family:Arial,Helvetica,sans-serif;'
            f'font-size:{BASE_FONT_PX}px;color:#111">'
            f'<p style="font-size:{TITLE_FONT_PX}px;font-weight:600;margin:0">{title}</p>{caption}'
            f'<table style="border-collapse:collapse;font-size:{BASE_FONT_PX}px"><tr>{head}</tr>{"".join(body)}'
            f'</table><p style="margin:6px 0">{_matmul_note(ops, matmul_flops)} Where each operand lives: {key}</p>'
            "</div>")


def _matmul_note(ops: Sequence[TileOp], flops: int) -> str:
    """The line under the table: how many matmuls the tile runs, against the forward's two, and their FLOPs."""
    count = sum(op.flops > 0 for op in ops)
    words = {3: "Three", 4: "Four", 5: "Five"}.get(count, str(count))
    against = " (the forward has two, so 2.5 × its FLOPs)" if count == 5 else " in this pass"
    return f"{words} matmuls{against}: {format_flops(flops)} for this tile."


def _bar_texts(values: Sequence[float], fmt, base: float) -> list[str]:
    """A bar's label: its value and, on a second line, its ratio to the tiled kernel's ("not run" for a row that did
    not run): two short lines stay within the bar's width, clear of the axis and of the next bar's label.

    Example:
        >>> _bar_texts([2.0, float("nan")], lambda v: f"{v:g} ms", 4.0)
        ['2 ms<br>(0.5×)', 'not run']
    """
    return [NOT_RUN if math.isnan(v) else f"{fmt(v)}<br>({v / base:.2g}×)" if base and not math.isnan(base)
            else fmt(v) for v in values]


def recompute_price_figure(price: RecomputePrice, *, title: str | None = None) -> go.Figure:
    """Measured forward + backward time and peak memory: the tiled kernel (recomputes P) against naive autograd
    (stores P, dP, dS) and SDPA autograd, one bar per implementation in two panels, each bar's value and its ratio to
    the tiled kernel under it, the median's IQR as error bars.

    Example:
        >>> from flashviz.views.backward.data import RecomputePrice
        >>> p = RecomputePrice(("flash2", "naive", "sdpa"), ("tiled", "naive", "SDPA"), (0.4, 0.35, 0.07),
        ...                    (0.01, 0.01, 0.0), (4.4e6, 7.4e7, 7.4e6), ("ok",) * 3, 1024, 64, 1, 4, 64, 64, True,
        ...                    None, "float32", "cpu", 2, 5)
        >>> fig = recompute_price_figure(p)
        >>> [t.name for t in fig.data][::2], fig.layout.yaxis2.title.text  # a time and a memory bar each
        (['tiled', 'naive', 'SDPA'], 'peak memory (MiB)')
        >>> fig.data[2].x[0]  # naive's time bar: its name, value and ratio to the tiled kernel
        'naive<br>350 ms<br>(0.88×)'
    """
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.16,
                        subplot_titles=("forward + backward time", "peak memory"))
    times = [t * MS_PER_S for t in price.time_s]
    peaks = [b / MIB for b in price.peak_bytes]
    iqr = [t * MS_PER_S for t in price.time_iqr_s]
    base_t, base_m = times[0], peaks[0]  # the tiled kernel comes first
    for k, (impl, label) in enumerate(zip(price.impls, price.labels, strict=True)):
        color, name = impl_color(impl), SHORT_NAMES.get(impl, impl)
        # the value and its ratio go under the bar, as its tick label: over it, the IQR's whisker would cross them
        fig.add_trace(go.Bar(x=[f"{name}<br>{_bar_texts([times[k]], fmt_ms, base_t)[0]}"],
                             y=[0 if math.isnan(times[k]) else times[k]], name=label, marker_color=color,
                             legendgroup=impl, error_y={"type": "data", "array": [iqr[k] / 2], "color": "#333"},
                             hovertemplate=f"{label}<br>%{{y:.3g}} ms median, IQR {fmt_ms(iqr[k])}<extra></extra>"),
                      row=1, col=1)
        fig.add_trace(go.Bar(x=[f"{name}<br>{_bar_texts([peaks[k]], fmt_mib, base_m)[0]}"],
                             y=[0 if math.isnan(peaks[k]) else peaks[k]], name=label, marker_color=color,
                             legendgroup=impl, showlegend=False,
                             hovertemplate=f"{label}<br>%{{y:.3g}} MiB peak<extra></extra>"), row=1, col=2)
    _style_price(fig, price, title)
    return fig


def _style_price(fig: go.Figure, price: RecomputePrice, title: str | None) -> None:
    mask = ", ".join(m for m in ("causal" if price.causal else "", "" if price.window is None else
                                 f"window {price.window}") if m) or "no mask"
    fig.update_layout(template=flashviz_template(), height=PRICE_FIG_HEIGHT_PX, barmode="group",
                      title={"text": title or "The price of recomputation: forward + backward, measured"},
                      legend={"orientation": "h", "y": -0.34, "x": 0, "font": {"size": TICK_FONT_PX}})
    set_subtitle(fig, f"N = {price.n}, d = {price.d}, B = {price.batch}, H = {price.heads}, {mask}, {price.dtype}, "
                      f"tiles {price.block_q} × {price.block_k}; {price.device}, {price.threads} threads, median "
                      f"of {price.repeats}. (×: ratio to the tiled kernel)")
    fig.update_layout(margin={"t": fig.layout.margin.t + 36, "b": 150})  # room for the panels' own titles
    fig.update_xaxes(tickfont_size=TICK_FONT_PX)  # the tick labels name each bar and give its value
    fig.update_yaxes(title_text="time (ms)", row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text="peak memory (MiB)", row=1, col=2, rangemode="tozero")
    for k, values in ((1, price.time_s), (2, price.peak_bytes)):  # head room for the error bars
        top = max((v for v in values if not math.isnan(v)), default=0.0) * (MS_PER_S if k == 1 else 1 / MIB)
        fig.update_yaxes(range=[0, top * 1.15 if top > 0 else 1], row=1, col=k)
    fig.update_annotations(font_size=AXIS_TITLE_FONT_PX)  # the subplot titles
    not_run = [f"{label}: {status}" for label, status in zip(price.labels, price.status, strict=True)
               if not status.startswith(OK)]
    if not_run:
        fig.add_annotation(text="<br>".join(escape(s[:90]) for s in not_run),
                           xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False, font={"size": 14})


def backward_picture(s: BackwardSettings, v: Mapping[str, Any]) -> go.Figure:
    """The lesson's slide: the backward's HBM traffic at a GPU's sizes, standard attention's, the tiled one's (atomic
    dQ) and with the deterministic second pass, from the check's comparison (v["traffic"], a DqComparison)."""
    c = v["traffic"]
    moved = [c.standard_bytes / MIB, c.atomic_bytes / MIB, c.deterministic_bytes / MIB]
    colors = [impl_color(NAIVE), impl_color(FLASH2), impl_color(FLASH)]
    return slide_bars(["standard<br>attention", "tiled,<br>atomic dQ", "tiled,<br>deterministic dQ"], moved,
                      [format_bytes(b * MIB) for b in moved], colors,
                      title=f"Backward HBM traffic per head, N = {v['n']:,}", y_title="MiB",
                      subtitle=f"d = {v['d']}, {v['block']}-wide tiles, causal: {v['saving']:.1f}× less")
