"""The Correctness figure: the largest error of each implementation against float64 SDPA, against a bar that fits the
dtype. No torch, no streamlit: only pandas and plotly.

float32 outputs must stay under 1e-5. float16 and bfloat16 outputs cannot: rounding the output alone costs up to
half their machine epsilon (eps = 2^-10 and 2^-7), so their bar is a small multiple of eps, and the figure says so.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from flashviz.figures.palette import D_SYMBOLS, MARKER_PX, REFERENCE_COLOR
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
    """Largest absolute error against float64 SDPA vs N, one line per (implementation, d), log-log, with the
    dtype's tolerance as a horizontal line (the "1e-5 bar" in float32; 2 eps in float16 / bfloat16).

    Colour and dash say the implementation, the marker says d (the legend lists each once). Errors of exactly 0
    cannot sit on a log axis: they are drawn at a floor (a tenth of the smallest non-zero error, or tol / 1000)
    and their hover says so. Rows not run are crosses on the floor, with the reason in the hover.

    Args:
        df: the Correctness tab's run_sweep rows (columns impl, N, d, max_abs_err, status; dtype optional).
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
    fig = go.Figure()
    style_figure(fig, title="Largest error vs float64 SDPA", x_title="sequence length N (tokens)",
                 y_title="max |O - O_ref| (absolute error)", log_x=True, log_y=True)
    if why is not None:
        set_subtitle(fig, why)
    if df is None or len(df) == 0 or not {"impl", "N", "max_abs_err"} <= set(df.columns):
        add_note(fig, "No data yet: run the correctness check.")
        return fig
    df = df.assign(N=pd.to_numeric(df["N"], errors="coerce"), err=pd.to_numeric(df["max_abs_err"], errors="coerce"))
    if "d" not in df:
        df = df.assign(d=math.nan)
    df = df.sort_values("N")
    drawn = ok_rows(df) & df["err"].notna()
    positive = df.loc[drawn & (df["err"] > 0), "err"]
    floor = float(positive.min()) / 10 if len(positive) else tol / 1000
    ds = sorted(df["d"].dropna().unique())
    symbol_of = {d: D_SYMBOLS[i % len(D_SYMBOLS)] for i, d in enumerate(ds)}
    for impl in impls_in(df):
        mine = df["impl"].astype(str).eq(impl)
        _add_error_lines(fig, df[mine & drawn], impl, ds, symbol_of, floor, tol)
        add_not_run(fig, df[mine & ~drawn], impl, "N", floor)
    for d in ds:  # one legend entry per d, showing its marker
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"d = {d:g}", legendgroup=f"d={d:g}",
                                 marker={"symbol": symbol_of[d], "size": MARKER_PX, "color": "#444"}))
    _finish_correctness(fig, df, drawn, floor, tol)
    return fig


def _add_error_lines(fig: go.Figure, rows: pd.DataFrame, impl: str, ds: list, symbol_of: dict, floor: float,
                     tol: float) -> None:
    """One legend entry for `impl` and one line per head dimension d of its rows that ran."""
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines+markers", name=IMPL_LABELS.get(impl, impl),
                             legendgroup=impl, line=impl_line(impl), marker=impl_marker(impl)))
    for d in ds if ds else [math.nan]:
        mine = rows[rows["d"].eq(d)] if ds else rows
        if not len(mine):
            continue
        errs = mine["err"].tolist()
        shown = [e if e > 0 else floor for e in errs]
        notes = [f"{e:.2e}" if e > 0 else f"0 (exact; drawn at {fmt_sci(floor)}, the floor of this log axis)"
                 for e in errs]
        verdict = ["under the bar" if e <= tol else "OVER the bar" for e in errs]
        fig.add_trace(go.Scatter(
            x=mine["N"], y=shown, mode="lines+markers", name=f"{impl}, d={d:g}", legendgroup=impl,
            showlegend=False, line=impl_line(impl, width=1.5), marker=impl_marker(impl, symbol_of.get(d)),
            customdata=list(zip(notes, verdict, strict=True)),
            hovertemplate=(f"<b>{impl}</b>, d={d:g}, N=%{{x}}<br>max |err| = %{{customdata[0]}}<br>"
                           f"%{{customdata[1]}} ({fmt_sci(tol)})<extra></extra>")))


def _finish_correctness(fig: go.Figure, df: pd.DataFrame, drawn: pd.Series, floor: float, tol: float) -> None:
    """Axes, the labelled tolerance line across the whole plot, and the notes (zeros on the floor, nothing ran)."""
    x_axis = measured_axis(df["N"].dropna().tolist())
    fig.update_xaxes(**x_axis)
    if "range" in x_axis:
        reference_line(fig, tol, x_range=x_axis["range"], name=f"{fmt_sci(tol)} bar (pass below)",
                       label=f"{fmt_sci(tol)} bar", color=REFERENCE_COLOR, dash="dash",
                       hover=f"tolerance {fmt_sci(tol)}: every error must stay below")
    fig.update_yaxes(**log_axis([*axis_extent(fig, "y", "y"), tol], "sci"))  # the floor only if a point sits on it
    if (drawn & df["err"].eq(0)).any():
        add_note(fig, f"errors of exactly 0 are drawn at {fmt_sci(floor)} (hover says so)", y=1.04)
    if not drawn.any():
        add_note(fig, "No row ran: hover the crosses for the reasons.", y=0.9)
