"""Figures: tidy DataFrames in, plotly Figures out. No torch, no streamlit: only pandas and plotly.

The sweep figures reproduce the seed's sections 4-7 (max error against the 1e-5 bar, memory vs N, time vs N, the
summary table) and add what the FlashAttention paper argues with: achieved GFLOP/s, modelled HBM traffic, HBM
accesses against on-chip memory M (FA1 Theorem 2) and the block-size trade-off. Every figure shares one template
(large fonts for a projector, hover text carrying the numbers) and one colour, dash and marker per implementation, so
"flash" looks the same everywhere and stays visible where it coincides with "flash2". Log axes get a fixed range and
a few round ticks labelled with their unit ("1 ms", "256 KiB", "1M", "1e-5"), never the 2..9 minor labels.

Inputs are the DataFrames of flashviz.sweep (columns impl, N, ..., time_s, time_iqr_s, peak_bytes, gflops,
hbm_bytes, status) and flashviz.iomodel.hbm_vs_memory; a CSV read back with pandas works too. Rows whose status is
not "ok" are drawn as grey-edged crosses along the bottom of the plot, with the reason in their hover text; an empty
or all-skipped DataFrame gives a labelled, empty figure with a note, never an exception.

References: Dao et al., FlashAttention (2022), Figure 2 (speed and memory vs N) and Theorem 2 (HBM accesses vs M).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

IMPL_ORDER = ("naive", "flash", "flash2", "sdpa")
IMPL_COLORS = {  # fixed colour per implementation, shared by every figure (Okabe-Ito, colour-blind safe)
    "naive": "#D55E00",  # vermillion
    "flash": "#0072B2",  # blue
    "flash2": "#009E73",  # bluish green
    "sdpa": "#CC79A7",  # reddish purple
    "kv_outer": "#0072B2",  # the IO model's names for flash and flash2
    "q_outer": "#009E73",
}
IMPL_DASHES = {  # line style per implementation: flash and flash2 often coincide, the dashes keep both visible
    "naive": "solid", "flash": "solid", "flash2": "dash", "sdpa": "dashdot", "kv_outer": "solid", "q_outer": "dash",
}
IMPL_SYMBOLS = {  # marker per implementation: flash's large open square rings flash2's diamond where they coincide
    "naive": "circle", "flash": "square-open", "flash2": "diamond", "sdpa": "triangle-up",
    "kv_outer": "square-open", "q_outer": "diamond",
}
IMPL_LABELS = {
    "naive": "naive (standard attention)",
    "flash": "flash (FA1 loop order)",
    "flash2": "flash2 (FA2 loop order)",
    "sdpa": "PyTorch SDPA",
    "kv_outer": "FlashAttention-1 (kv_outer)",
    "q_outer": "FlashAttention-2 (q_outer)",
}
FALLBACK_COLOR = "#555555"  # implementations not in the map
REFERENCE_COLOR = "#B00020"  # a pass/fail bar (dark red)
SKIPPED_SYMBOL = "x"  # marker of a row that did not run
D_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "star", "hexagon", "cross", "pentagon")  # one per d
BASE_FONT_PX = 18  # readable from the back of a lecture hall
TITLE_FONT_PX = 24
AXIS_TITLE_FONT_PX = 20
LEGEND_FONT_PX = 18
TICK_FONT_PX = 18
LINE_PX = 3
MARKER_PX = 11
OPEN_MARKER_PX = 16  # open markers are drawn larger, around the filled ones
MAX_LABELLED_TICKS = 12  # label every measured N on the x axis up to this many (thinned where they would collide)
TICK_GAP_FRACTION = 1 / 14  # two labelled ticks on a measured axis are at least this fraction of its width apart
LOG_TICKS_MAX = 7  # labelled ticks on a log axis: decades, or 1-2-5 when the data spans too few decades
LOG_PAD_DECADES = 0.08  # white space around the data on a log axis (decades), plus 4 % of the span
FIG_HEIGHT_PX = 560
BLOCK_FIG_HEIGHT_PX = 640  # two panels with the legend underneath
TABLE_TITLE_PX = 100  # title, subtitle and top margin of a table figure
TABLE_BOTTOM_PX = 8
TABLE_HEADER_PX = 64  # two lines of header text (each column title is split over two lines)
TABLE_ROW_PX = 40  # one line of cell text at TABLE_FONT_PX, with padding
TABLE_FONT_PX = 20
TABLE_SLACK_PX = 12  # below the last row: its bottom border and rounding, so plotly never adds a scroll bar
MIB = 1 << 20  # bytes per MiB
MS_PER_S = 1e3
GB = 1e9  # bytes per GB (decimal, as bandwidths are quoted)
LOG10_2 = math.log10(2)
LOWER_ARM_MAX = 0.9  # an error bar's lower arm on a log axis stops at (1 - 0.9) x the value
OK = "ok"


# ----------------------------------------------------------------------------------------------------------------------
# shared look


def flashviz_template() -> go.layout.Template:
    """The plotly template every flashviz figure uses: white background, large fonts, hover with the numbers."""
    axis = {"showgrid": True, "gridcolor": "#E5E5E5", "linecolor": "#444", "ticks": "outside",
            "tickfont": {"size": TICK_FONT_PX}, "title": {"font": {"size": AXIS_TITLE_FONT_PX}}, "zeroline": False}
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


def _note(fig: go.Figure, text: str, *, y: float = 0.5) -> None:
    fig.add_annotation(text=text, xref="paper", yref="paper", x=0.5, y=y, showarrow=False,
                       font={"size": BASE_FONT_PX, "color": "#666"})


def _impls_in(df: pd.DataFrame) -> list[str]:
    present = list(dict.fromkeys(df["impl"].astype(str))) if "impl" in df else []
    return [i for i in IMPL_ORDER if i in present] + [i for i in present if i not in IMPL_ORDER]


def _ok(df: pd.DataFrame) -> pd.Series:
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


def log_axis(values: Sequence[float], unit: str = "si") -> dict:
    """Range and labelled ticks of a log axis showing `values` (non-positive and NaN values are ignored).

    Ticks are decades, or 1-2-5 where the data spans too few decades for three decade ticks (powers of two for
    unit="mib"), at most LOG_TICKS_MAX of them, labelled with their unit (UNIT_FORMATS: "si", "ms", "mib", "sci",
    "int"). No minor ticks. The range is fixed (log10 units, as plotly wants for log axes).

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
        fitting = [f for f in families if len(f) <= LOG_TICKS_MAX]
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


def _extent(fig: go.Figure, axis: str, ref: str) -> list[float]:
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


# ----------------------------------------------------------------------------------------------------------------------
# curves against N


def _sweep_lines(df: pd.DataFrame | None, *, x: str, y: str, scale: float, title: str, x_title: str, y_title: str,
                 hover_value: str, unit: str, log_y: bool = True, error: str | None = None) -> go.Figure:
    """One line per implementation of y * scale against x (log x); skipped rows as crosses on the bottom edge."""
    fig = go.Figure()
    style_figure(fig, title=title, x_title=x_title, y_title=y_title, log_x=True, log_y=log_y)
    if df is None or len(df) == 0 or x not in df or y not in df:
        _note(fig, "No data yet: run a sweep.")
        return fig
    df = df.sort_values(x)
    values = pd.to_numeric(df[y], errors="coerce") * scale
    drawn = _ok(df) & values.notna() & (values > 0 if log_y else True)
    floor = float(values[drawn].min()) / 2 if drawn.any() else 1.0  # where skipped rows sit on a log axis
    if not log_y:
        floor = 0.0
    for impl in _impls_in(df):
        mine = df["impl"].astype(str).eq(impl)
        rows, vals = df[mine & drawn], values[mine & drawn]
        if len(rows):
            err = None
            if error is not None and error in rows:
                half = pd.to_numeric(rows[error], errors="coerce").fillna(0.0) * scale / 2
                err = iqr_bars(vals, half)
            fig.add_trace(go.Scatter(
                x=rows[x], y=vals, mode="lines+markers", name=IMPL_LABELS.get(impl, impl), legendgroup=impl,
                line=impl_line(impl), marker=impl_marker(impl), error_y=err,
                customdata=None if err is None else [2 * h for h in err["array"]],  # the IQR, in y's unit
                hovertemplate=f"<b>{impl}</b><br>{x}=%{{x}}<br>{hover_value}<extra></extra>"))
        skipped = df[mine & ~drawn]
        if len(skipped):
            fig.add_trace(go.Scatter(
                x=skipped[x], y=[floor] * len(skipped), mode="markers", name=f"{impl}: skipped",
                legendgroup=impl, marker={"symbol": SKIPPED_SYMBOL, "size": 14, "color": impl_color(impl),
                                          "line": {"width": 2, "color": "#444"}},
                text=skipped["status"].astype(str) if "status" in skipped else None,
                hovertemplate=f"<b>{impl}</b> {x}=%{{x}}<br>%{{text}}<extra></extra>"))
    fig.update_xaxes(**measured_axis(pd.to_numeric(df[x], errors="coerce").dropna().tolist()))
    if log_y:
        fig.update_yaxes(**log_axis(_extent(fig, "y", "y"), unit))
    if not drawn.any():
        _note(fig, "Every row was skipped: hover the crosses for the reasons.", y=0.9)
    elif (~drawn).any():
        _note(fig, "× = skipped (hover for why)", y=1.04)
    return fig


def memory_figure(df: pd.DataFrame | None) -> go.Figure:
    """Peak memory (MiB) against N, log-log: naive grows like N^2, the tiled kernels like N.

    Args:
        df: run_sweep output (columns impl, N, peak_bytes, status).
    Returns:
        plotly Figure, one trace per implementation (+ one per implementation with skipped rows); y in MiB, ticks
        at powers of two labelled KiB / MiB / GiB.

    Example:
        >>> memory_figure(pd.DataFrame()).layout.title.text
        'Peak memory vs sequence length'
    """
    return _sweep_lines(df, x="N", y="peak_bytes", scale=1 / MIB, title="Peak memory vs sequence length",
                        x_title="sequence length N (tokens)", y_title="peak memory allocated (bytes)",
                        hover_value="peak=%{y:.3g} MiB", unit="mib")


def time_figure(df: pd.DataFrame | None) -> go.Figure:
    """Median time (ms) against N, log-log, error bars spanning the interquartile range (median +/- IQR/2).

    Args:
        df: run_sweep output (columns impl, N, time_s, time_iqr_s, status).
    Returns:
        plotly Figure; y in ms, ticks labelled µs / ms / s.

    Example:
        >>> time_figure(pd.DataFrame()).layout.yaxis.title.text
        'median time per call (ms)'
    """
    return _sweep_lines(df, x="N", y="time_s", scale=MS_PER_S, error="time_iqr_s",
                        title="Time vs sequence length (bars: interquartile range)",
                        x_title="sequence length N (tokens)", y_title="median time per call (ms)",
                        hover_value="median=%{y:.3g} ms, IQR=%{customdata:.2g} ms", unit="ms")


def gflops_figure(df: pd.DataFrame | None) -> go.Figure:
    """Achieved GFLOP/s (counted FLOPs / median time) against N, log x.

    Example:
        >>> gflops_figure(pd.DataFrame()).layout.yaxis.title.text
        'achieved throughput (GFLOP/s)'
    """
    return _sweep_lines(df, x="N", y="gflops", scale=1.0, title="Achieved throughput vs sequence length",
                        x_title="sequence length N (tokens)", y_title="achieved throughput (GFLOP/s)",
                        hover_value="%{y:.3g} GFLOP/s", unit="si", log_y=False)


def hbm_figure(df: pd.DataFrame | None) -> go.Figure:
    """Modelled HBM traffic (MiB) against N, log-log (sdpa has no model and is left out).

    Example:
        >>> hbm_figure(pd.DataFrame()).layout.xaxis.type
        'log'
    """
    if df is not None and "impl" in df:  # a model needs no run: skipped rows still have their modelled traffic
        df = df[~df["impl"].astype(str).eq("sdpa")].assign(status=OK)
    return _sweep_lines(df, x="N", y="hbm_bytes", scale=1 / MIB, title="Modelled HBM traffic vs sequence length",
                        x_title="sequence length N (tokens)", y_title="HBM traffic (bytes, IO model)",
                        hover_value="traffic=%{y:.3g} MiB", unit="mib")


# ----------------------------------------------------------------------------------------------------------------------
# the summary table


def summary_table(df: pd.DataFrame | None, *, flash_impl: str = "flash", baseline: str = "naive") -> pd.DataFrame:
    """The seed's table: at each N, time and peak memory of naive and flash, the speedup and the memory saving.

    Args:
        df: run_sweep output.  flash_impl: the tiled implementation to compare ("flash" or "flash2").
        baseline: the implementation it is compared against.
    Returns:
        DataFrame indexed 0.., columns N, "<baseline> time (ms)", "<flash> time (ms)", "speedup (x)",
        "<baseline> peak (MiB)", "<flash> peak (MiB)", "memory saving (x)"; NaN where a row was skipped.
        speedup = baseline time / flash time; memory saving = baseline peak / flash peak.

    Example:
        >>> list(summary_table(pd.DataFrame()).columns)[:3]
        ['N', 'naive time (ms)', 'flash time (ms)']
    """
    b, f = baseline, flash_impl
    columns = ["N", f"{b} time (ms)", f"{f} time (ms)", "speedup (x)", f"{b} peak (MiB)", f"{f} peak (MiB)",
               "memory saving (x)"]
    if df is None or len(df) == 0 or not {"impl", "N"} <= set(df.columns):
        return pd.DataFrame(columns=columns)
    ok = df[_ok(df)]

    def pick(impl: str, col: str, scale: float) -> pd.Series:
        rows = ok[ok["impl"].astype(str).eq(impl)]
        return (pd.to_numeric(rows[col], errors="coerce") * scale).groupby(rows["N"]).first()

    ns = sorted(df["N"].unique())
    table = pd.DataFrame({"N": ns})
    tb, tf = pick(b, "time_s", MS_PER_S), pick(f, "time_s", MS_PER_S)
    mb, mf = pick(b, "peak_bytes", 1 / MIB), pick(f, "peak_bytes", 1 / MIB)
    table[columns[1]] = table["N"].map(tb)
    table[columns[2]] = table["N"].map(tf)
    table[columns[3]] = table[columns[1]] / table[columns[2]]
    table[columns[4]] = table["N"].map(mb)
    table[columns[5]] = table["N"].map(mf)
    table[columns[6]] = table[columns[4]] / table[columns[5]]
    return table.astype({c: "float64" for c in columns[1:]})


def _fmt(value: object) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "skipped"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _two_lines(column: str) -> str:
    """'naive time (ms)' -> 'naive<br>time (ms)': every header takes exactly two lines, so its height is known."""
    head, _, tail = str(column).partition(" ")
    return f"<b>{html.escape(head)}</b><br>{html.escape(tail)}" if tail else f"<b>{html.escape(head)}</b><br> "


def table_height(rows: int) -> int:
    """Height (px) of a summary_table_figure with `rows` rows: title, two-line header, one line per row."""
    return TABLE_TITLE_PX + TABLE_HEADER_PX + TABLE_ROW_PX * max(rows, 1) + TABLE_SLACK_PX + TABLE_BOTTOM_PX


def summary_table_figure(table: pd.DataFrame, *, title: str = "Summary: flash vs naive") -> go.Figure:
    """A plotly table of `summary_table` (NaN shown as 'skipped'), tall enough for every row (no scrolling), in a
    font readable from the back of the room; the subtitle defines speedup and memory saving.

    Example:
        >>> summary_table_figure(summary_table(None)).data[0].type
        'table'
    """
    fig = go.Figure(go.Table(
        header={"values": [_two_lines(c) for c in table.columns], "fill_color": "#DDE6F0",
                "font": {"size": TABLE_FONT_PX}, "align": "right", "height": TABLE_HEADER_PX},
        cells={"values": [[_fmt(v) for v in table[c].tolist()] for c in table.columns],
               "fill_color": [["white", "#F4F6F9"] * (len(table) // 2 + 1)],  # zebra rows: easier to follow
               "font": {"size": TABLE_FONT_PX}, "align": "right", "height": TABLE_ROW_PX}))
    names = [str(c).split(" ")[0] for c in table.columns[1:3]]  # "naive time (ms)", "flash time (ms)"
    b, f = names if len(names) == 2 else ("naive", "flash")
    subtitle = f"speedup = {b} time / {f} time;  memory saving = {b} peak / {f} peak"
    fig.update_layout(template=flashviz_template(),
                      title={"text": title, "subtitle": {"text": subtitle, "font": {"size": BASE_FONT_PX}}},
                      margin={"t": TABLE_TITLE_PX, "b": TABLE_BOTTOM_PX, "l": 20, "r": 20},
                      height=table_height(len(table)))
    if len(table) == 0:
        _note(fig, "No data yet: run a sweep.", y=0.3)
    return fig


# ----------------------------------------------------------------------------------------------------------------------
# the IO model: Theorem 2 and the block-size trade-off


def hbm_vs_memory_figure(df: pd.DataFrame | None, *, n: int | None = None, d: int | None = None) -> go.Figure:
    """HBM accesses against on-chip memory M, log-log (FA1 Theorem 2), from iomodel.hbm_vs_memory.

    Lines: the model's counts, one style per algorithm; dotted: Theorem 2's order terms (N d + N^2 for standard
    attention, N^2 d^2 / M for FlashAttention: the same term for both loop orders, so it is drawn once).

    Args:
        df: hbm_vs_memory output (columns algorithm, M, block_q, block_k, accesses, bound).
        n, d: only for the title.
    Returns:
        plotly Figure.

    Example:
        >>> hbm_vs_memory_figure(pd.DataFrame()).layout.xaxis.title.text
        'on-chip memory M (elements)'
    """
    shape = f" (N={n}, d={d})" if n is not None and d is not None else ""
    fig = go.Figure()
    style_figure(fig, title=f"HBM accesses vs on-chip memory{shape}: FA1 Theorem 2",
                 x_title="on-chip memory M (elements)", y_title="HBM accesses (elements)",
                 log_x=True, log_y=True)
    if df is None or len(df) == 0 or not {"algorithm", "M", "accesses"} <= set(df.columns):
        _note(fig, "No data: give at least one M.")
        return fig
    bounds_drawn: set[str] = set()
    for algorithm in _impls_in(df.rename(columns={"algorithm": "impl"})):
        rows = df[df["algorithm"].astype(str).eq(algorithm)].sort_values("M")
        blocks = list(zip(rows.get("block_q", [None] * len(rows)), rows.get("block_k", [None] * len(rows)),
                          strict=True))
        fig.add_trace(go.Scatter(
            x=rows["M"], y=rows["accesses"], mode="lines+markers", name=IMPL_LABELS.get(algorithm, algorithm),
            legendgroup=algorithm, line=impl_line(algorithm), marker=impl_marker(algorithm), customdata=blocks,
            hovertemplate=(f"<b>{algorithm}</b><br>M=%{{x:,}} elements<br>Br=%{{customdata[0]}}, "
                           "Bc=%{customdata[1]}<br>accesses=%{y:.3s}<extra></extra>")))
        kind = "naive" if algorithm == "naive" else "flash"
        if "bound" in rows and kind not in bounds_drawn:
            bounds_drawn.add(kind)
            term = "N d + N²" if kind == "naive" else "N² d² / M"
            fig.add_trace(go.Scatter(
                x=rows["M"], y=rows["bound"], mode="lines", legendgroup=algorithm,
                name=f"Theorem 2: {term} (no constants)", line={"color": impl_color(algorithm), "width": 2,
                                                                 "dash": "dot"},
                hovertemplate=f"<b>{term}</b> (order term)<br>M=%{{x:,}}<br>%{{y:.3s}}<extra></extra>"))
    fig.update_xaxes(**log_axis(_extent(fig, "x", "x"), "si"))
    fig.update_yaxes(**log_axis(_extent(fig, "y", "y"), "si"))
    return fig


def _hline(fig: go.Figure, y: float, *, x_range: Sequence[float], name: str, color: str, hover: str,
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


def block_sweep_figure(df: pd.DataFrame | None, *, reference: pd.DataFrame | None = None) -> go.Figure:
    """Time and modelled HBM traffic against the tile size Br x Bc, side by side, from sweep.run_block_sweep.

    Args:
        df: run_block_sweep output (columns impl, block_q, block_k, time_s, time_iqr_s, hbm_bytes, status).
        reference: optional run_sweep rows at the same N (naive, sdpa): drawn as horizontal dotted lines across
            both panels (time; and HBM traffic where the IO model has one), labelled and with hover.
    Returns:
        plotly Figure with two panels (tile elements Br x Bc on log x axes ticked "16x16", "32x32", ...).

    Example:
        >>> len(block_sweep_figure(pd.DataFrame()).layout.annotations) >= 2
        True
    """
    fig = make_subplots(rows=1, cols=2, subplot_titles=("measured time", "modelled HBM traffic"),
                        horizontal_spacing=0.14)
    fig.update_layout(template=flashviz_template(), title={"text": "Tile size trade-off"}, height=BLOCK_FIG_HEIGHT_PX,
                      margin={"b": 170},  # the legend goes under the panels: both panels get the full width
                      legend={"orientation": "h", "x": 0, "xanchor": "left", "y": -0.22, "yanchor": "top"})
    fig.update_annotations(font={"size": AXIS_TITLE_FONT_PX})  # the two panel titles
    fig.update_xaxes(title_text="tile size Br × Bc (elements)", type="log")
    fig.update_yaxes(title_text="median time per call (ms)", type="log", row=1, col=1)
    fig.update_yaxes(title_text="HBM traffic (bytes, IO model)", type="log", row=1, col=2)
    if df is None or len(df) == 0 or not {"impl", "block_q", "block_k"} <= set(df.columns):
        _note(fig, "No data yet: run a block-size sweep.")
        return fig
    df = df.assign(tile=pd.to_numeric(df["block_q"]) * pd.to_numeric(df["block_k"])).sort_values("tile")
    ok = _ok(df)
    for impl in _impls_in(df):
        rows = df[df["impl"].astype(str).eq(impl) & ok]
        if not len(rows):
            continue
        labels = [f"{int(q)}×{int(k)}" for q, k in zip(rows["block_q"], rows["block_k"], strict=True)]
        common = {"mode": "lines+markers", "legendgroup": impl, "line": impl_line(impl), "marker": impl_marker(impl),
                  "text": labels}
        iqr = pd.to_numeric(rows.get("time_iqr_s", pd.Series(0.0, index=rows.index)), errors="coerce").fillna(0)
        fig.add_trace(go.Scatter(
            x=rows["tile"], y=rows["time_s"] * MS_PER_S, name=IMPL_LABELS.get(impl, impl),
            error_y=iqr_bars(rows["time_s"] * MS_PER_S, iqr * MS_PER_S / 2),
            customdata=(iqr * MS_PER_S).tolist(),
            hovertemplate=(f"<b>{impl}</b> Br x Bc=%{{text}}<br>median=%{{y:.3g}} ms, IQR=%{{customdata:.2g}} ms"
                           "<extra></extra>"), **common), row=1, col=1)
        fig.add_trace(go.Scatter(
            x=rows["tile"], y=rows["hbm_bytes"] / MIB, name=f"{impl}: HBM model", showlegend=False,
            hovertemplate=f"<b>{impl}</b> Br x Bc=%{{text}}<br>traffic=%{{y:.3g}} MiB<extra></extra>", **common),
            row=1, col=2)
    tiles = df[ok].drop_duplicates("tile")
    x_axis = measured_axis(tiles["tile"].tolist(), labels=[f"{int(q)}×{int(k)}" for q, k in
                                                           zip(tiles["block_q"], tiles["block_k"], strict=True)])
    fig.update_xaxes(**x_axis)
    if reference is not None and len(reference) and "range" in x_axis:
        for _, r in reference[_ok(reference)].iterrows():
            impl, n = str(r["impl"]), r.get("N", "?")
            t_ms = float(pd.to_numeric(r.get("time_s", math.nan), errors="coerce")) * MS_PER_S
            traffic = float(pd.to_numeric(r.get("hbm_bytes", math.nan), errors="coerce")) / MIB
            shown = False
            for col, value, what in ((1, t_ms, f"median {t_ms:.3g} ms"), (2, traffic, f"traffic {traffic:.3g} MiB")):
                if math.isfinite(value) and value > 0:
                    _hline(fig, value, x_range=x_axis["range"], name=f"{impl} at N={n} (untiled reference)",
                           color=impl_color(impl), legend=not shown, row=1, col=col,
                           hover=f"<b>{impl}</b> at N={n}, untiled<br>{what}")
                    shown = True
    if ok.any():
        fig.update_yaxes(**log_axis(_extent(fig, "y", "y"), "ms"), row=1, col=1)
        fig.update_yaxes(**log_axis(_extent(fig, "y", "y2"), "mib"), row=1, col=2)
    else:
        _note(fig, "Every row was skipped.", y=0.9)
    return fig


# ----------------------------------------------------------------------------------------------------------------------
# correctness


def correctness_figure(df: pd.DataFrame | None, *, tol: float = 1e-5) -> go.Figure:
    """Largest absolute error against float64 SDPA vs N, one line per (implementation, d), log-log, with the
    tolerance as a horizontal line ("1e-5 bar").

    Colour and dash say the implementation, the marker says d (the legend lists each once). Errors of exactly 0
    cannot sit on a log axis: they are drawn at a floor (a tenth of the smallest non-zero error, or tol / 1000)
    and their hover says so. Skipped rows are crosses on the floor, with the reason in the hover.

    Args:
        df: the Correctness tab's run_sweep rows (columns impl, N, d, max_abs_err, status).
        tol: the pass bar, drawn and labelled.
    Returns:
        plotly Figure.

    Example:
        >>> correctness_figure(pd.DataFrame()).layout.yaxis.type
        'log'
    """
    fig = go.Figure()
    style_figure(fig, title="Largest error vs float64 SDPA", x_title="sequence length N (tokens)",
                 y_title="max |O - O_ref| (absolute error)", log_x=True, log_y=True)
    if df is None or len(df) == 0 or not {"impl", "N", "max_abs_err"} <= set(df.columns):
        _note(fig, "No data yet: run the correctness check.")
        return fig
    df = df.assign(N=pd.to_numeric(df["N"], errors="coerce"), err=pd.to_numeric(df["max_abs_err"], errors="coerce"))
    if "d" not in df:
        df = df.assign(d=math.nan)
    df = df.sort_values("N")
    drawn = _ok(df) & df["err"].notna()
    positive = df.loc[drawn & (df["err"] > 0), "err"]
    floor = float(positive.min()) / 10 if len(positive) else tol / 1000
    ds = sorted(df["d"].dropna().unique())
    symbol_of = {d: D_SYMBOLS[i % len(D_SYMBOLS)] for i, d in enumerate(ds)}
    for impl in _impls_in(df):
        mine = df["impl"].astype(str).eq(impl)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines+markers", name=IMPL_LABELS.get(impl, impl),
                                 legendgroup=impl, line=impl_line(impl), marker=impl_marker(impl)))
        for d in ds if ds else [math.nan]:
            rows = df[mine & drawn & (df["d"].eq(d) if ds else True)]
            if not len(rows):
                continue
            errs = rows["err"].tolist()
            shown = [e if e > 0 else floor for e in errs]
            notes = [f"{e:.2e}" if e > 0 else f"0 (exact; drawn at {fmt_sci(floor)}, the floor of this log axis)"
                     for e in errs]
            verdict = ["under the bar" if e <= tol else "OVER the bar" for e in errs]
            fig.add_trace(go.Scatter(
                x=rows["N"], y=shown, mode="lines+markers", name=f"{impl}, d={d:g}", legendgroup=impl,
                showlegend=False, line=impl_line(impl, width=1.5), marker=impl_marker(impl, symbol_of.get(d)),
                customdata=list(zip(notes, verdict, strict=True)),
                hovertemplate=(f"<b>{impl}</b>, d={d:g}, N=%{{x}}<br>max |err| = %{{customdata[0]}}<br>"
                               f"%{{customdata[1]}} ({fmt_sci(tol)})<extra></extra>")))
        skipped = df[mine & ~drawn]
        if len(skipped):
            fig.add_trace(go.Scatter(
                x=skipped["N"], y=[floor] * len(skipped), mode="markers", name=f"{impl}: skipped",
                legendgroup=impl, marker={"symbol": SKIPPED_SYMBOL, "size": 14, "color": impl_color(impl),
                                          "line": {"width": 2, "color": "#444"}},
                text=skipped["status"].astype(str) if "status" in skipped else None,
                hovertemplate=f"<b>{impl}</b> N=%{{x}}<br>%{{text}}<extra></extra>"))
    for d in ds:  # one legend entry per d, showing its marker
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"d = {d:g}", legendgroup=f"d={d:g}",
                                 marker={"symbol": symbol_of[d], "size": MARKER_PX, "color": "#444"}))
    x_axis = measured_axis(df["N"].dropna().tolist())
    fig.update_xaxes(**x_axis)
    if "range" in x_axis:
        _hline(fig, tol, x_range=x_axis["range"], name=f"{fmt_sci(tol)} bar (pass below)", label=f"{fmt_sci(tol)} bar",
               color=REFERENCE_COLOR, dash="dash", hover=f"tolerance {fmt_sci(tol)}: every error must stay below")
    fig.update_yaxes(**log_axis([*_extent(fig, "y", "y"), tol], "sci"))  # the floor only if a point sits on it
    if (drawn & df["err"].eq(0)).any():
        _note(fig, f"errors of exactly 0 are drawn at {fmt_sci(floor)} (hover says so)", y=1.04)
    if not drawn.any():
        _note(fig, "Every row was skipped: hover the crosses for the reasons.", y=0.9)
    return fig


# ----------------------------------------------------------------------------------------------------------------------
# a standalone report


def report_html(figures: Sequence[go.Figure], *, title: str = "flashviz report", intro: str = "",
                table: pd.DataFrame | None = None) -> str:
    """One standalone HTML page: plotly.js embedded inline (opens offline), the figures, and an HTML table.

    Args:
        figures: plotly Figures, in page order.  title: page title.  intro: a paragraph of plain text.
        table: an optional DataFrame appended as an HTML table (e.g. the full sweep).
    Returns:
        The HTML document as a string.

    Example:
        >>> "plotly" in report_html([memory_figure(None)])
        True
    """
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             "<style>body{font-family:Arial,Helvetica,sans-serif;font-size:18px;margin:2em;max-width:1200px}"
             "table{border-collapse:collapse;font-size:15px}td,th{border:1px solid #ccc;padding:4px 8px;"
             "text-align:right}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    if intro:
        parts.append(f"<p>{html.escape(intro)}</p>")
    for i, fig in enumerate(figures):
        parts.append(fig.to_html(full_html=False, include_plotlyjs=(i == 0)))  # True: the whole plotly.js inline
    if table is not None:
        parts.append("<h2>All measurements</h2>")
        parts.append(table.to_html(index=False, na_rep="", float_format=lambda x: f"{x:.4g}"))
    parts.append("</body></html>")
    return "\n".join(parts)
