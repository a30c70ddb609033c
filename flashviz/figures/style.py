"""The shared look of every flashviz figure: one template, one colour / dash / marker per implementation, number
formatting with units, and log axes with a few round, labelled ticks. No torch, no streamlit: plotly, and pandas for the
DataFrame helpers (imported on first use); the colours, dashes, markers and sizes are figures/palette.py's.

Large fonts for a projector (>= 16 px everywhere) and hover text carrying the numbers; one colour per implementation
and loop order in every figure (FA1 = kv_outer = "flash" blue, FA2 = q_outer = "flash2" green, naive vermillion), and
"flash" stays visible where it coincides with "flash2". Log axes get a fixed range and a few round ticks labelled
with their unit ("1 ms", "256 KiB", "1M", "1e-5"), never the 2..9 minor labels. The other figure modules build
their figures from these pieces, including the small helpers (a note on the plot, the implementations present, the
rows that ran, an axis's extent, reference lines).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from flashviz._lazy import lazy_import
from flashviz.figures.palette import (
    AXIS_TITLE_FONT_PX,
    BASE_FONT_PX,
    FALLBACK_COLOR,
    IMPL_COLORS,
    IMPL_DASHES,
    IMPL_SYMBOLS,
    LEGEND_FONT_PX,
    LINE_PX,
    MARKER_PX,
    OPEN_MARKER_PX,
    SKIPPED_SYMBOL,
    TICK_FONT_PX,
    TITLE_FONT_PX,
)
from flashviz.vocab import IMPLS, OK

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_import("pandas")  # only ok_rows builds a Series; the row inspector and the tile map never load pandas

MAX_LABELLED_TICKS = 12  # label every measured N on the x axis up to this many (thinned where they would collide)
TICK_GAP_FRACTION = 1 / 14  # two labelled ticks on a measured axis are at least this fraction of its width apart
LOG_TICKS_MAX = 7  # labelled ticks on a log axis: decades, or 1-2-5 when the data spans too few decades
LOG_PAD_DECADES = 0.08  # white space around the data on a log axis (decades), plus 4 % of the span
FIG_HEIGHT_PX = 560
BLOCK_FIG_HEIGHT_PX = 640  # two panels with the legend underneath
MIB = 1 << 20  # bytes per MiB
MS_PER_S = 1e3
GB = 1e9  # bytes per GB (decimal, as bandwidths are quoted)
LOG10_2 = math.log10(2)
LOWER_ARM_MAX = 0.9  # an error bar's lower arm on a log axis stops at (1 - 0.9) x the value


# ----------------------------------------------------------------------------------------------------------------------
# shared look


def flashviz_template() -> go.layout.Template:
    """The plotly template every flashviz figure uses: white background, large fonts, hover with the numbers."""
    axis = {"showgrid": True, "gridcolor": "#E5E5E5", "linecolor": "#444", "ticks": "outside",
            "tickfont": {"size": TICK_FONT_PX}, "title": {"font": {"size": AXIS_TITLE_FONT_PX}, "standoff": 8},
            "zeroline": False, "automargin": True}  # the margin grows to fit long tick labels ("512 KiB") and titles
    return go.layout.Template(layout=go.Layout(
        font={"size": BASE_FONT_PX, "family": "Arial, Helvetica, sans-serif"},
        title={"font": {"size": TITLE_FONT_PX}, "x": 0.02, "xanchor": "left"},
        paper_bgcolor="white", plot_bgcolor="white", xaxis=axis, yaxis=axis,
        legend={"font": {"size": LEGEND_FONT_PX}, "bgcolor": "rgba(255,255,255,0.8)"},
        hoverlabel={"font": {"size": LEGEND_FONT_PX}},
        height=FIG_HEIGHT_PX, margin={"l": 100, "r": 30, "t": 80, "b": 80},
    ))


def style_figure(fig: go.Figure, *, title: str, x_title: str, y_title: str, log_x: bool = False,
                 log_y: bool = False) -> go.Figure:
    """Apply the shared template, a title and axis titles (with units) to a figure; returns the same figure.

    Example:
        >>> fig = style_figure(go.Figure(), title="t", x_title="N (tokens)", y_title="time (ms)", log_x=True)
        >>> fig.layout.xaxis.type
        'log'
    """
    fig.update_layout(template=flashviz_template(), title={"text": title}, showlegend=True,
                      height=FIG_HEIGHT_PX)  # explicit: plotly.js ignores a height set only in the template
    fig.update_xaxes(title_text=x_title, type="log" if log_x else "linear")
    fig.update_yaxes(title_text=y_title, type="log" if log_y else "linear")
    return fig


def impl_color(impl: str) -> str:
    """The fixed colour of an implementation (grey for unknown names)."""
    return IMPL_COLORS.get(impl, FALLBACK_COLOR)


def impl_line(impl: str, *, width: float = LINE_PX) -> dict:
    """Line style of an implementation: its colour and its dash."""
    return {"color": impl_color(impl), "width": width, "dash": IMPL_DASHES.get(impl, "solid")}


def impl_marker(impl: str, symbol: str | None = None) -> dict:
    """Marker of an implementation (or `symbol`, opened like the implementation's own if that is open)."""
    own = IMPL_SYMBOLS.get(impl, "circle")
    is_open = own.endswith("-open")
    if symbol is not None:
        own = f"{symbol}-open" if is_open else symbol
    return {"symbol": own, "size": OPEN_MARKER_PX if is_open else MARKER_PX, "color": impl_color(impl),
            "line": {"width": 2.5 if is_open else 0, "color": impl_color(impl)}}


def add_note(fig: go.Figure, text: str, *, y: float = 0.5) -> None:
    """A grey note centred on the plot at paper height y (e.g. "No data yet")."""
    fig.add_annotation(text=text, xref="paper", yref="paper", x=0.5, y=y, showarrow=False,
                       font={"size": BASE_FONT_PX, "color": "#666"})


SUBTITLE_CHARS = 72  # characters of an 18 px subtitle line that fit a 760 px wide figure (1280 px page)


def subtitle_lines(text: str, width: int = SUBTITLE_CHARS) -> str:
    """Plain text broken into lines of at most `width` characters joined by <br> (plotly never wraps).

    Example:
        >>> subtitle_lines("one two three", width=7)
        'one two<br>three'
    """
    return "<br>".join(textwrap.wrap(text, width)) if "<br>" not in text else text


SUBTITLE_LINE_PX = 28  # one 18 px subtitle line with its spacing
TITLE_BLOCK_PX = 90  # the top margin above the subtitle: the title line and the space around it


def set_subtitle(fig: go.Figure, text: str) -> None:
    """A subtitle under the figure's title, wrapped to the figure's width, with the top margin grown to hold it."""
    lines = subtitle_lines(text)
    fig.update_layout(title_subtitle_text=lines, title_subtitle_font_size=BASE_FONT_PX,
                      margin_t=TITLE_BLOCK_PX + SUBTITLE_LINE_PX * (lines.count("<br>") + 1))


def impls_in(df: pd.DataFrame) -> list[str]:
    """The implementations in df["impl"], in the vocabulary's order, unknown names last."""
    present = list(dict.fromkeys(df["impl"].astype(str))) if "impl" in df else []
    return [i for i in IMPLS if i in present] + [i for i in present if i not in IMPLS]


def ok_rows(df: pd.DataFrame) -> pd.Series:
    """Boolean mask of the rows that ran (status "ok"; every row when there is no status column)."""
    return df["status"].astype(str).eq(OK) if "status" in df else pd.Series(True, index=df.index)


# ----------------------------------------------------------------------------------------------------------------------
# log axes: decade (or 1-2-5, or power-of-two) ticks with unit-carrying labels, no minor-tick clutter


def _g(x: float) -> str:
    return f"{x:.3g}"


def _scaled(value: float, steps: Sequence[tuple[float, str]]) -> str:
    """value in the largest unit of `steps` ((size, name), ascending) that it reaches, e.g. 2e-3 s -> '2 ms'."""
    size, name = steps[0]
    for s, n in steps:
        if value >= s * (1 - 1e-9):
            size, name = s, n
    return f"{_g(value / size)}{name}"


def fmt_sci(value: float) -> str:
    """1e-05 -> '1e-5', 2.5e-07 -> '2.5e-7' (the way the tolerance is quoted)."""
    if value <= 0:
        return _g(value)
    e = math.floor(math.log10(value) + 1e-9)
    return f"{_g(value / 10 ** e)}e{e}"


def fmt_si(value: float) -> str:
    """Counts with SI prefixes: 1500 -> '1.5k', 2e9 -> '2G'; below 0.001 in e-notation."""
    if 0 < value < 1e-3:
        return fmt_sci(value)
    return _scaled(value, ((1, ""), (1e3, "k"), (1e6, "M"), (1e9, "G"), (1e12, "T"), (1e15, "P")))


def fmt_ms(value: float) -> str:
    """A duration given in ms, in the unit that reads best: 0.2 -> '200 µs', 1500 -> '1.5 s'."""
    return _scaled(value, ((1e-6, " ns"), (1e-3, " µs"), (1, " ms"), (1e3, " s")))


def fmt_mib(value: float) -> str:
    """A size given in MiB, in binary units: 0.25 -> '256 KiB', 2048 -> '2 GiB'."""
    return _scaled(value * MIB, ((1, " B"), (1 << 10, " KiB"), (1 << 20, " MiB"), (1 << 30, " GiB"), (1 << 40, " TiB")))


def fmt_int(value: float) -> str:
    """Tokens and tile sizes: 16384 -> '16384'."""
    value = float(value)
    return str(round(value)) if abs(value - round(value)) < 1e-9 else _g(value)


UNIT_FORMATS = {"si": fmt_si, "ms": fmt_ms, "mib": fmt_mib, "sci": fmt_sci, "int": fmt_int}


def _tick_families(unit: str, lo: float, hi: float) -> list[list[float]]:
    """Candidate tick sets in [lo, hi] (log10 units), in order of preference: decades, 1-2-5, every 2nd, 3rd or
    5th decade; for sizes in MiB, powers of two (every 1, 2, 5, 10 doublings). The finest family is widened."""
    if unit == "mib":  # v MiB = 2^(k - 20) bytes -> ticks at whole powers of two of bytes
        k_lo, k_hi = math.ceil(lo / LOG10_2 + 20 - 1e-9), math.floor(hi / LOG10_2 + 20 + 1e-9)
        return [[2.0 ** (k - 20) for k in range(k_lo, k_hi + 1) if k % step == 0] for step in (1, 2, 5, 10)]
    e_lo, e_hi = math.floor(lo) - 1, math.ceil(hi) + 1
    families = [[10.0 ** e for e in range(e_lo, e_hi + 1)], [m * 10.0 ** e for e in range(e_lo, e_hi + 1)
                                                              for m in (1, 2, 5)]]
    families += [[10.0 ** e for e in range(e_lo, e_hi + 1) if e % step == 0] for step in (2, 3, 5)]
    return [[t for t in f if lo - 1e-9 <= math.log10(t) <= hi + 1e-9] for f in families]


def log_axis(values: Sequence[float], unit: str = "si", ticks_max: int = LOG_TICKS_MAX) -> dict:
    """Range and labelled ticks of a log axis showing `values` (non-positive and NaN values are ignored).

    Ticks are decades, or 1-2-5 where the data spans too few decades for three decade ticks (powers of two for
    unit="mib"), at most `ticks_max` of them (a narrow panel passes fewer than LOG_TICKS_MAX, so its labels do not
    run into each other), labelled with their unit (UNIT_FORMATS: "si", "ms", "mib", "sci", "int"). No minor ticks.
    The range is fixed (log10 units, as plotly wants for log axes).

    Returns:
        dict for fig.update_xaxes / update_yaxes: type, range, tickmode, tickvals, ticktext (empty if no values).

    Example:
        >>> log_axis([0.01, 100], "ms")["ticktext"]
        ['10 µs', '100 µs', '1 ms', '10 ms', '100 ms']
    """
    pos = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    if not pos:
        return {"type": "log"}
    a, b = math.log10(min(pos)), math.log10(max(pos))
    pad = LOG_PAD_DECADES + 0.04 * (b - a)
    a, b = a - pad, b + pad
    for widened in range(3):
        families = _tick_families(unit, a, b)
        fitting = [f for f in families if len(f) <= ticks_max]
        ticks = next((f for f in fitting if len(f) >= 3), None)
        if ticks is not None or (widened and len(fitting[0]) >= 2) or widened == 2:
            break
        # fewer than 3 ticks fit (e.g. 2 decades, while 1-2-5 gives too many): widen the range to the next tick of
        # the finest family that is not too crowded, on the side where it is closer
        grid = [math.log10(t) for t in _tick_families(unit, a - 2, b + 2)[families.index(fitting[0])]]
        below = max((t for t in grid if t < a), default=a - 1)
        above = min((t for t in grid if t > b), default=b + 1)
        if a - below < above - b:
            a = below - 0.02
        else:
            b = above + 0.02
    ticks = ticks if ticks is not None else fitting[0]
    fmt = UNIT_FORMATS[unit]
    return {"type": "log", "range": [a, b], "tickmode": "array", "tickvals": ticks,
            "ticktext": [fmt(t) for t in ticks]}


def measured_axis(values: Sequence[float], fmt=fmt_int, labels: Sequence[str] | None = None) -> dict:
    """A log axis whose ticks are the measured values themselves (N = 256, 512, ...), thinned where two labels
    would collide; falls back to log_axis(values, "int") beyond MAX_LABELLED_TICKS values.

    Example:
        >>> measured_axis([256, 512, 1024])["ticktext"]
        ['256', '512', '1024']
    """
    pairs = sorted({float(v): (labels[i] if labels is not None else None) for i, v in enumerate(values)
                    if v is not None and math.isfinite(float(v)) and float(v) > 0}.items())
    if not pairs or len(pairs) > MAX_LABELLED_TICKS:
        return log_axis([v for v, _ in pairs], "int")
    a, b = math.log10(pairs[0][0]), math.log10(pairs[-1][0])
    pad = LOG_PAD_DECADES + 0.04 * (b - a)
    gap = (b - a + 2 * pad) * TICK_GAP_FRACTION
    kept: list[tuple[float, str | None]] = []
    for v, label in pairs:
        if not kept or math.log10(v) - math.log10(kept[-1][0]) >= gap:
            kept.append((v, label))
    return {"type": "log", "range": [a - pad, b + pad], "tickmode": "array", "tickvals": [v for v, _ in kept],
            "ticktext": [label if label is not None else fmt(v) for v, label in kept]}


def iqr_bars(values: Sequence[float], half: Sequence[float]) -> dict:
    """Error bars of +/- half (IQR / 2) around values, for a log axis: a lower arm reaching zero or below would run
    off the bottom of the plot, so it stops at a tenth of the value (the hover still gives the true IQR).

    Example:
        >>> iqr_bars([2.0, 2.0], [0.5, 4.0])["arrayminus"]
        [0.5, 1.8]
    """
    half = [float(h) for h in half]
    minus = [min(h, LOWER_ARM_MAX * float(v)) for v, h in zip(values, half, strict=True)]
    return {"type": "data", "symmetric": False, "array": half, "arrayminus": minus, "visible": True,
            "thickness": 1.5}


def axis_extent(fig: go.Figure, axis: str, ref: str) -> list[float]:
    """Every value the traces on axis `ref` ("y", "y2", ...) put on it, error bars included."""
    out: list[float] = []
    for t in fig.data:
        if (t[f"{axis}axis"] or axis) != ref or t[axis] is None:
            continue
        vals = [float(v) if v is not None else math.nan for v in t[axis]]
        out += vals
        err = t[f"error_{axis}"]
        if err is not None and err.array is not None and err.visible is not False:
            out += [v + float(e) for v, e in zip(vals, err.array, strict=False)]
            minus = err.arrayminus if err.arrayminus is not None else err.array
            out += [v - float(e) for v, e in zip(vals, minus, strict=False)]
    return out


def reference_line(fig: go.Figure, y: float, *, x_range: Sequence[float], name: str, color: str, hover: str,
           label: str | None = None,
           dash: str = "dot", legend: bool = True, row: int | None = None, col: int | None = None) -> None:
    """A horizontal reference line at data value y across the (log10) x_range, labelled at its right end if
    `label` is given (the legend names it in any case).

    A trace, not fig.add_hline: on log axes add_hline places its annotation at 10^y (plotly.py #2580; annotations
    take log10 coordinates, shapes data coordinates), which stretched the axis to 1e84. A trace also carries hover.
    """
    xs = [10 ** x_range[0], 10 ** x_range[1]]
    fig.add_trace(go.Scatter(
        x=xs, y=[y, y], mode="lines" if label is None else "lines+text", name=name, legendgroup=name,
        showlegend=legend, line={"color": color, "width": 2.5, "dash": dash},
        text=None if label is None else ["", label], textposition="top left",
        textfont={"size": LEGEND_FONT_PX, "color": color}, hovertemplate=f"{hover}<extra></extra>",
        cliponaxis=False), row=row, col=col)


def add_not_run(fig: go.Figure, not_run: pd.DataFrame, impl: str, x: str, floor: float, *, row: int | None = None,
                col: int | None = None, legend: bool = True) -> None:
    """Rows of `impl` that did not run, as crosses at y = floor, with the reason in the hover (in subplot row, col)."""
    if not len(not_run):
        return
    fig.add_trace(go.Scatter(showlegend=legend,
        x=not_run[x], y=[floor] * len(not_run), mode="markers", name=f"{impl}: not run", legendgroup=impl,
        marker={"symbol": SKIPPED_SYMBOL, "size": 14, "color": impl_color(impl), "line": {"width": 2, "color": "#444"}},
        text=not_run["status"].astype(str) if "status" in not_run else None,
        hovertemplate=f"<b>{impl}</b> {x}=%{{x}}<br>%{{text}}<extra></extra>"), row=row, col=col)
