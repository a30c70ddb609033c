"""Figures: tidy DataFrames in, plotly Figures out. No torch, no streamlit: only pandas and plotly.

The sweep figures reproduce the seed's sections 5-7 (memory vs N, time vs N, the summary table) and add what the
FlashAttention paper argues with: achieved GFLOP/s, modelled HBM traffic, HBM accesses against on-chip memory M
(FA1 Theorem 2) and the block-size trade-off. Every figure shares one template (large fonts for a projector, hover
text carrying the numbers) and one colour per implementation, so "flash" is the same colour everywhere.

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
IMPL_LABELS = {
    "naive": "naive (standard attention)",
    "flash": "flash (FA1 loop order)",
    "flash2": "flash2 (FA2 loop order)",
    "sdpa": "PyTorch SDPA",
    "kv_outer": "FlashAttention-1 (kv_outer)",
    "q_outer": "FlashAttention-2 (q_outer)",
}
FALLBACK_COLOR = "#555555"  # implementations not in the map
SKIPPED_SYMBOL = "x"  # marker of a row that did not run
BASE_FONT_PX = 18  # readable from the back of a lecture hall
TITLE_FONT_PX = 24
AXIS_TITLE_FONT_PX = 20
LEGEND_FONT_PX = 16
TICK_FONT_PX = 16
MAX_LABELLED_TICKS = 12  # label every measured N on the x axis up to this many; beyond, plotly's own ticks
FIG_HEIGHT_PX = 560
TABLE_BASE_PX = 140  # title and margins of a table figure
TABLE_ROW_PX = 45  # per row, the header counted as one (its titles wrap onto two lines)
MIB = 1 << 20  # bytes per MiB
MS_PER_S = 1e3
GB = 1e9  # bytes per GB (decimal, as bandwidths are quoted)
OK = "ok"


# ----------------------------------------------------------------------------------------------------------------------
# shared look


def flashviz_template() -> go.layout.Template:
    """The plotly template every flashviz figure uses: white background, large fonts, unified hover."""
    return go.layout.Template(layout=go.Layout(
        font={"size": BASE_FONT_PX, "family": "Arial, Helvetica, sans-serif"},
        title={"font": {"size": TITLE_FONT_PX}, "x": 0.02, "xanchor": "left"},
        paper_bgcolor="white", plot_bgcolor="white",
        xaxis={"showgrid": True, "gridcolor": "#E5E5E5", "linecolor": "#444", "ticks": "outside",
               "tickfont": {"size": TICK_FONT_PX}, "title": {"font": {"size": AXIS_TITLE_FONT_PX}},
               "zeroline": False},
        yaxis={"showgrid": True, "gridcolor": "#E5E5E5", "linecolor": "#444", "ticks": "outside",
               "tickfont": {"size": TICK_FONT_PX}, "title": {"font": {"size": AXIS_TITLE_FONT_PX}},
               "zeroline": False},
        legend={"font": {"size": LEGEND_FONT_PX}, "bgcolor": "rgba(255,255,255,0.8)"},
        hoverlabel={"font": {"size": LEGEND_FONT_PX}},
        height=FIG_HEIGHT_PX, margin={"l": 90, "r": 30, "t": 80, "b": 80},
    ))


def style_figure(fig: go.Figure, *, title: str, x_title: str, y_title: str, log_x: bool = False,
                 log_y: bool = False) -> go.Figure:
    """Apply the shared template, a title and axis titles (with units) to a figure; returns the same figure.

    Example:
        >>> fig = style_figure(go.Figure(), title="t", x_title="N (tokens)", y_title="time (ms)", log_x=True)
        >>> fig.layout.xaxis.type
        'log'
    """
    fig.update_layout(template=flashviz_template(), title={"text": title}, showlegend=True)
    fig.update_xaxes(title_text=x_title, type="log" if log_x else "linear")
    fig.update_yaxes(title_text=y_title, type="log" if log_y else "linear")
    return fig


def impl_color(impl: str) -> str:
    """The fixed colour of an implementation (grey for unknown names)."""
    return IMPL_COLORS.get(impl, FALLBACK_COLOR)


def _note(fig: go.Figure, text: str, *, y: float = 0.5) -> None:
    fig.add_annotation(text=text, xref="paper", yref="paper", x=0.5, y=y, showarrow=False,
                       font={"size": BASE_FONT_PX, "color": "#666"})


def _impls_in(df: pd.DataFrame) -> list[str]:
    present = list(dict.fromkeys(df["impl"].astype(str))) if "impl" in df else []
    return [i for i in IMPL_ORDER if i in present] + [i for i in present if i not in IMPL_ORDER]


def _ok(df: pd.DataFrame) -> pd.Series:
    return df["status"].astype(str).eq(OK) if "status" in df else pd.Series(True, index=df.index)


# ----------------------------------------------------------------------------------------------------------------------
# curves against N


def _sweep_lines(df: pd.DataFrame | None, *, x: str, y: str, scale: float, title: str, x_title: str, y_title: str,
                 hover_value: str, log_x: bool = True, log_y: bool = True, error: str | None = None) -> go.Figure:
    """One line per implementation of y * scale against x; skipped rows as crosses on the bottom edge."""
    fig = go.Figure()
    style_figure(fig, title=title, x_title=x_title, y_title=y_title, log_x=log_x, log_y=log_y)
    if df is None or len(df) == 0 or x not in df or y not in df:
        _note(fig, "No data yet: run a sweep.")
        return fig
    df = df.sort_values(x)
    xs = sorted(pd.to_numeric(df[x], errors="coerce").dropna().unique())
    if 0 < len(xs) <= MAX_LABELLED_TICKS:  # label the measured Ns themselves: 256, 512, ... read better than 2, 5
        fig.update_xaxes(tickvals=xs, ticktext=[f"{v:g}" for v in xs])
    values = pd.to_numeric(df[y], errors="coerce") * scale
    drawn = _ok(df) & values.notna() & (values > 0 if log_y else True)
    floor = float(values[drawn].min()) / 2 if drawn.any() else 1.0  # where skipped rows sit on a log axis
    for impl in _impls_in(df):
        mine = df["impl"].astype(str).eq(impl)
        rows, vals = df[mine & drawn], values[mine & drawn]
        if len(rows):
            err = None
            if error is not None and error in rows:
                half = pd.to_numeric(rows[error], errors="coerce").fillna(0.0) * scale / 2
                err = {"type": "data", "array": half.tolist(), "visible": True, "thickness": 1.5}
            fig.add_trace(go.Scatter(
                x=rows[x], y=vals, mode="lines+markers", name=IMPL_LABELS.get(impl, impl), legendgroup=impl,
                line={"color": impl_color(impl), "width": 3}, marker={"size": 9}, error_y=err,
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
        plotly Figure, one trace per implementation (+ one per implementation with skipped rows).

    Example:
        >>> memory_figure(pd.DataFrame()).layout.title.text
        'Peak memory vs sequence length'
    """
    return _sweep_lines(df, x="N", y="peak_bytes", scale=1 / MIB, title="Peak memory vs sequence length",
                        x_title="sequence length N (tokens)", y_title="peak memory allocated (MiB)",
                        hover_value="peak=%{y:.3g} MiB")


def time_figure(df: pd.DataFrame | None) -> go.Figure:
    """Median time (ms) against N, log-log, error bars spanning the interquartile range (median +/- IQR/2).

    Args:
        df: run_sweep output (columns impl, N, time_s, time_iqr_s, status).
    Returns:
        plotly Figure.

    Example:
        >>> time_figure(pd.DataFrame()).layout.yaxis.title.text
        'median time per call (ms)'
    """
    return _sweep_lines(df, x="N", y="time_s", scale=MS_PER_S, error="time_iqr_s",
                        title="Time vs sequence length (bars: interquartile range)",
                        x_title="sequence length N (tokens)", y_title="median time per call (ms)",
                        hover_value="median=%{y:.3g} ms, IQR=%{customdata:.2g} ms")


def gflops_figure(df: pd.DataFrame | None) -> go.Figure:
    """Achieved GFLOP/s (counted FLOPs / median time) against N, log x.

    Example:
        >>> gflops_figure(pd.DataFrame()).layout.yaxis.title.text
        'achieved throughput (GFLOP/s)'
    """
    return _sweep_lines(df, x="N", y="gflops", scale=1.0, title="Achieved throughput vs sequence length",
                        x_title="sequence length N (tokens)", y_title="achieved throughput (GFLOP/s)",
                        hover_value="%{y:.3g} GFLOP/s", log_y=False)


def hbm_figure(df: pd.DataFrame | None) -> go.Figure:
    """Modelled HBM traffic (MiB) against N, log-log (sdpa has no model and is left out).

    Example:
        >>> hbm_figure(pd.DataFrame()).layout.xaxis.type
        'log'
    """
    if df is not None and "impl" in df:  # a model needs no run: skipped rows still have their modelled traffic
        df = df[~df["impl"].astype(str).eq("sdpa")].assign(status=OK)
    return _sweep_lines(df, x="N", y="hbm_bytes", scale=1 / MIB, title="Modelled HBM traffic vs sequence length",
                        x_title="sequence length N (tokens)", y_title="HBM reads + writes (MiB, IO model)",
                        hover_value="traffic=%{y:.3g} MiB")


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


def summary_table_figure(table: pd.DataFrame, *, title: str = "Summary: flash vs naive") -> go.Figure:
    """A plotly table of `summary_table` (NaN shown as 'skipped').

    Example:
        >>> summary_table_figure(summary_table(None)).data[0].type
        'table'
    """
    fig = go.Figure(go.Table(
        header={"values": [f"<b>{html.escape(str(c))}</b>" for c in table.columns], "fill_color": "#DDE6F0",
                "font": {"size": BASE_FONT_PX}, "align": "center", "height": 36},
        cells={"values": [[_fmt(v) for v in table[c].tolist()] for c in table.columns],
               "font": {"size": BASE_FONT_PX}, "align": "right", "height": 32}))
    fig.update_layout(template=flashviz_template(), title={"text": title}, margin={"t": 70, "b": 10},
                      height=TABLE_BASE_PX + TABLE_ROW_PX * (len(table) + 1))
    if len(table) == 0:
        _note(fig, "No data yet: run a sweep.", y=0.3)
    return fig


# ----------------------------------------------------------------------------------------------------------------------
# the IO model: Theorem 2 and the block-size trade-off


def hbm_vs_memory_figure(df: pd.DataFrame | None, *, n: int | None = None, d: int | None = None) -> go.Figure:
    """HBM accesses against on-chip memory M, log-log (FA1 Theorem 2), from iomodel.hbm_vs_memory.

    Solid: the model's counts; dashed: Theorem 2's order terms (N d + N^2 and N^2 d^2 / M), same colour.

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
                 x_title="on-chip memory M (elements)", y_title="HBM accesses (elements read + written)",
                 log_x=True, log_y=True)
    if df is None or len(df) == 0 or not {"algorithm", "M", "accesses"} <= set(df.columns):
        _note(fig, "No data: give at least one M.")
        return fig
    for algorithm in _impls_in(df.rename(columns={"algorithm": "impl"})):
        rows = df[df["algorithm"].astype(str).eq(algorithm)].sort_values("M")
        color = impl_color(algorithm)
        blocks = list(zip(rows.get("block_q", [None] * len(rows)), rows.get("block_k", [None] * len(rows)),
                          strict=True))
        fig.add_trace(go.Scatter(
            x=rows["M"], y=rows["accesses"], mode="lines+markers", name=IMPL_LABELS.get(algorithm, algorithm),
            legendgroup=algorithm, line={"color": color, "width": 3}, marker={"size": 9}, customdata=blocks,
            hovertemplate=(f"<b>{algorithm}</b><br>M=%{{x:,}} elements<br>Br=%{{customdata[0]}}, "
                           "Bc=%{customdata[1]}<br>accesses=%{y:.3s}<extra></extra>")))
        if "bound" in rows:
            fig.add_trace(go.Scatter(
                x=rows["M"], y=rows["bound"], mode="lines", name=f"{algorithm}: Theorem 2 order term (no constants)",
                legendgroup=algorithm, line={"color": color, "width": 2, "dash": "dash"},
                hovertemplate=f"<b>{algorithm}</b> order term<br>M=%{{x:,}}<br>%{{y:.3s}}<extra></extra>"))
    return fig


def block_sweep_figure(df: pd.DataFrame | None, *, reference: pd.DataFrame | None = None) -> go.Figure:
    """Time and modelled HBM traffic against the tile size Br x Bc, side by side, from sweep.run_block_sweep.

    Args:
        df: run_block_sweep output (columns impl, block_q, block_k, time_s, time_iqr_s, hbm_bytes, status).
        reference: optional run_sweep rows at the same N (naive, sdpa): drawn as horizontal dotted lines.
    Returns:
        plotly Figure with two panels sharing the x axis (tile elements Br x Bc, log scale).

    Example:
        >>> len(block_sweep_figure(pd.DataFrame()).layout.annotations) >= 2
        True
    """
    fig = make_subplots(rows=1, cols=2, subplot_titles=("median time (ms)", "modelled HBM traffic (MiB)"),
                        horizontal_spacing=0.12)
    fig.update_layout(template=flashviz_template(), title={"text": "Tile size trade-off"})
    fig.update_xaxes(title_text="tile size Br x Bc (elements)", type="log")
    fig.update_yaxes(title_text="time (ms)", type="log", row=1, col=1)
    fig.update_yaxes(title_text="HBM traffic (MiB)", type="log", row=1, col=2)
    if df is None or len(df) == 0 or not {"impl", "block_q", "block_k"} <= set(df.columns):
        _note(fig, "No data yet: run a block-size sweep.")
        return fig
    df = df.assign(tile=pd.to_numeric(df["block_q"]) * pd.to_numeric(df["block_k"])).sort_values("tile")
    ok = _ok(df)
    for impl in _impls_in(df):
        rows = df[df["impl"].astype(str).eq(impl) & ok]
        if not len(rows):
            continue
        labels = [f"{int(q)}x{int(k)}" for q, k in zip(rows["block_q"], rows["block_k"], strict=True)]
        common = {"mode": "lines+markers", "legendgroup": impl, "line": {"color": impl_color(impl), "width": 3},
                  "marker": {"size": 9}, "text": labels}
        fig.add_trace(go.Scatter(
            x=rows["tile"], y=rows["time_s"] * MS_PER_S, name=IMPL_LABELS.get(impl, impl),
            error_y={"type": "data", "array": (rows["time_iqr_s"].fillna(0) * MS_PER_S / 2).tolist()},
            hovertemplate=f"<b>{impl}</b> Br x Bc=%{{text}}<br>median=%{{y:.3g}} ms<extra></extra>", **common),
            row=1, col=1)
        fig.add_trace(go.Scatter(
            x=rows["tile"], y=rows["hbm_bytes"] / MIB, name=f"{impl}: HBM model", showlegend=False,
            hovertemplate=f"<b>{impl}</b> Br x Bc=%{{text}}<br>traffic=%{{y:.3g}} MiB<extra></extra>", **common),
            row=1, col=2)
    if reference is not None and len(reference):
        for _, r in reference[_ok(reference)].iterrows():
            impl = str(r["impl"])
            for col, value in ((1, r.get("time_s", math.nan) * MS_PER_S), (2, r.get("hbm_bytes", math.nan) / MIB)):
                if pd.notna(value) and value > 0:
                    fig.add_hline(y=value, line={"color": impl_color(impl), "dash": "dot", "width": 2},
                                  annotation_text=impl, row=1, col=col)
    if not ok.any():
        _note(fig, "Every row was skipped.", y=0.9)
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
