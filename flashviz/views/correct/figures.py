"""The Correctness figure: the largest error of each implementation against float64 SDPA, against a bar that fits the
dtype. No torch, no streamlit: only pandas and plotly.

float32 outputs must stay under 1e-5. float16 and bfloat16 outputs cannot: rounding the output alone costs up to
half their machine epsilon (eps = 2^-10 and 2^-7), so their bar is a small multiple of eps, and the figure says so.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz.figures.palette import AXIS_TITLE_FONT_PX, REFERENCE_COLOR
from flashviz.figures.style import (
    add_not_run,
    add_note,
    axis_extent,
    fmt_sci,
    impl_line,
    impl_marker,
    impls_in,
    log_axis,
    measured_axis,
    ok_rows,
    reference_line,
    set_subtitle,
    style_figure,
)
from flashviz.vocab import IMPL_LABELS

FP32_BAR = 1e-5  # max |O - O_ref| for fp32/fp64 outputs: ~100 x fp32's eps (1.2e-7), room for N-term sums
DTYPE_EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}  # machine epsilon: the spacing of the dtype's numbers at 1
EPS_MULTIPLE = 2  # half-precision bar = 2 eps: rounding the output alone costs up to eps / 2 for |O| <= 1, and
#                   SDPA's own fp16/bf16 error stays under eps (measured: at most 0.4 eps for SDPA, 0.75 eps for naive)


def tolerance_for(dtype: str) -> tuple[float, str]:
    """The correctness bar for outputs of `dtype`, and one sentence saying why.

    float32 and float64: 1e-5. float16 and bfloat16 store about 3 significant digits, so no kernel can beat their
    rounding: the bar is EPS_MULTIPLE x the dtype's machine epsilon (the gap between 1 and the next number).

    Example:
        >>> tolerance_for("float32")[0], tolerance_for("float16")[0], tolerance_for("bfloat16")[0]
        (1e-05, 0.001953125, 0.015625)
    """
    if dtype in ("float32", "float64"):
        return FP32_BAR, f"{dtype}: the bar is {fmt_sci(FP32_BAR)}, far above fp32 rounding (1.2e-7) and its sums"
    if dtype not in DTYPE_EPS:
        raise ValueError(f"dtype must be one of float32, float64, float16, bfloat16, got {dtype!r}.")
    eps = DTYPE_EPS[dtype]
    return EPS_MULTIPLE * eps, (f"{dtype} keeps ~{-math.log10(eps):.0f} significant digits (eps = {fmt_sci(eps)}): the "
                                f"bar is {EPS_MULTIPLE} eps = {fmt_sci(EPS_MULTIPLE * eps)}, since rounding the output "
                                "alone costs up to eps / 2")


def correctness_figure(df: pd.DataFrame | None, *, tol: float | None = None, dtype: str | None = None) -> go.Figure:
    """Largest absolute error against float64 SDPA vs N, one panel per head dimension d (two to a row, one y range
    for all), one line per implementation in each, log-log, with the dtype's tolerance as a horizontal line in every
    panel (the "1e-5 bar" in float32; 2 eps in float16 / bfloat16).

    Colour, dash and marker say the implementation (the legend lists each once); the panel's title says d. Errors of
    exactly 0 cannot sit on a log axis: they are drawn at a floor (a tenth of the smallest non-zero error, or
    tol / 1000) and their hover says so. Rows not run are crosses on the floor, with the reason in the hover.

    Args:
        df: the Correctness view's run_sweep rows (columns impl, N, d, max_abs_err, status; dtype optional).
        tol: the pass bar; None: tolerance_for(dtype), and the subtitle says why.
        dtype: the outputs' dtype name; None: df's "dtype" column if it holds one name, else "float32".
    Returns:
        plotly Figure.

    Example:
        >>> correctness_figure(pd.DataFrame()).layout.yaxis.type
        'log'
    """
    if dtype is None:
        names = df["dtype"].dropna().astype(str).unique() if df is not None and "dtype" in df else []
        dtype = names[0] if len(names) == 1 else "float32"
    why = None
    if tol is None:
        tol, why = tolerance_for(dtype)
    ok_input = df is not None and len(df) and {"impl", "N", "max_abs_err"} <= set(df.columns)
    ds = sorted(pd.to_numeric(df["d"], errors="coerce").dropna().unique()) if ok_input and "d" in df else []
    cols = min(PANELS_PER_ROW, max(len(ds), 1))
    rows = -(-max(len(ds), 1) // cols)
    fig = make_subplots(rows=rows, cols=cols, shared_yaxes=True, horizontal_spacing=0.06,
                        vertical_spacing=0.5 / (rows + 1), subplot_titles=[f"d = {d:g}" for d in ds] or None)
    style_figure(fig, title="Largest error vs float64 SDPA", x_title="sequence length N (tokens)",
                 y_title="max |O − O_ref| (error)", log_x=True, log_y=True)
    if why is not None:
        set_subtitle(fig, why)
    fig.update_layout(margin_t=(fig.layout.margin.t or fig.layout.template.layout.margin.t) + PANEL_TITLE_PX)
    if not ok_input:
        add_note(fig, "No data yet: run the correctness check.")
        return fig
    df = df.assign(N=pd.to_numeric(df["N"], errors="coerce"), err=pd.to_numeric(df["max_abs_err"], errors="coerce"))
    if "d" not in df:
        df = df.assign(d=math.nan)
    df = df.sort_values("N")
    drawn = ok_rows(df) & df["err"].notna()
    positive = df.loc[drawn & (df["err"] > 0), "err"]
    floor = float(positive.min()) / 10 if len(positive) else tol / 1000
    cells = {d: (k // cols + 1, k % cols + 1) for k, d in enumerate(ds)} or {math.nan: (1, 1)}
    for impl in impls_in(df):
        mine = df["impl"].astype(str).eq(impl)
        for k, (d, (r, c)) in enumerate(cells.items()):
            here = mine & (df["d"].eq(d) if ds else True)
            _add_error_line(fig, df[here & drawn], impl, d, floor, tol, r, c, legend=k == 0)
            add_not_run(fig, df[here & ~drawn], impl, "N", floor, row=r, col=c, legend=k == 0)
    _finish_correctness(fig, df, drawn, floor, tol, cells)
    fig.update_layout(height=CORRECT_FRAME_PX + CORRECT_PANEL_PX * rows)
    return fig


PANEL_TITLE_PX = 30  # the panels' titles under the figure's subtitle
PANELS_PER_ROW = 2  # head dimensions side by side: each panel about 350 px wide on a 1280 px page
CORRECT_PANEL_PX = 230  # one row of panels
CORRECT_FRAME_PX = 330  # the title, subtitle, x titles and the legend underneath


def _add_error_line(fig: go.Figure, rows: pd.DataFrame, impl: str, d: float, floor: float, tol: float, row: int,
                    col: int, legend: bool) -> None:
    """The line of `impl` at head dimension d (its rows that ran), in its panel; the legend names it once."""
    if not len(rows):
        return
    errs = rows["err"].tolist()
    shown = [e if e > 0 else floor for e in errs]
    notes = [f"{e:.2e}" if e > 0 else f"0 (exact; drawn at {fmt_sci(floor)}, the floor of this log axis)"
             for e in errs]
    verdict = ["under the bar" if e <= tol else "OVER the bar" for e in errs]
    fig.add_trace(go.Scatter(
        x=rows["N"], y=shown, mode="lines+markers", name=f"{impl}, d={d:g}", legendgroup=impl, showlegend=False,
        line=impl_line(impl, width=2), marker=impl_marker(impl), customdata=list(zip(notes, verdict, strict=True)),
        hovertemplate=(f"<b>{impl}</b>, d={d:g}, N=%{{x}}<br>max |err| = %{{customdata[0]}}<br>"
                       f"%{{customdata[1]}} ({fmt_sci(tol)})<extra></extra>")), row=row, col=col)
    if legend:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines+markers", name=IMPL_LABELS.get(impl, impl),
                                 legendgroup=impl, line=impl_line(impl), marker=impl_marker(impl)), row=row, col=col)


def _finish_correctness(fig: go.Figure, df: pd.DataFrame, drawn: pd.Series, floor: float, tol: float,
                        cells: dict) -> None:
    """Axes (one y range for every panel), the labelled tolerance line across each panel, and the notes (zeros on
    the floor, nothing ran)."""
    x_axis = measured_axis(df["N"].dropna().tolist())
    fig.update_xaxes(**x_axis, title_text="")
    fig.update_yaxes(title_text="")  # the left panels name the axis for their row
    fig.update_annotations(font={"size": AXIS_TITLE_FONT_PX})  # the panels' titles: d = ...
    for k, (r, c) in enumerate(cells.values()):
        if "range" in x_axis:
            reference_line(fig, tol, x_range=x_axis["range"], name=f"{fmt_sci(tol)} bar (pass below)",
                           label=f"{fmt_sci(tol)} bar" if k == 0 else None, color=REFERENCE_COLOR, dash="dash",
                           legend=k == 0, hover=f"tolerance {fmt_sci(tol)}: every error must stay below", row=r, col=c)
        if r == max(rr for rr, _ in cells.values()):
            fig.update_xaxes(title_text="sequence length N (tokens)", row=r, col=c)
        if c == 1:
            fig.update_yaxes(title_text="max |O − O_ref| (error)", row=r, col=c)
    extent = [y for ax in ("y", *(f"y{k}" for k in range(2, len(cells) + 1))) for y in axis_extent(fig, "y", ax)]
    fig.update_yaxes(**log_axis([*extent, tol], "sci"))  # the floor only if a point sits on it
    plot_px = CORRECT_PANEL_PX * max(r for r, _ in cells.values())
    fig.update_layout(legend={"orientation": "h", "x": 0, "xanchor": "left", "yanchor": "top",
                              "y": -CORRECT_LEGEND_GAP_PX / plot_px}, margin={"b": CORRECT_BOTTOM_PX})
    if (drawn & df["err"].eq(0)).any():
        add_note(fig, f"errors of exactly 0 are drawn at {fmt_sci(floor)} (hover says so)", y=1.04)
    if not drawn.any():
        add_note(fig, "No row ran: hover the crosses for the reasons.", y=0.9)


CORRECT_LEGEND_GAP_PX = 80  # from the lowest panels' bottom to the legend: under their tick labels and x titles
CORRECT_BOTTOM_PX = 170  # the x titles and two rows of legend
