"""The "Correctness" view: the largest error of every implementation against SDPA computed in float64, across
head dimensions d and sequence lengths N (odd sizes hit ragged tiles), against a bar that suits the dtype
(figures.tolerance_for: 1e-5 for float32 / float64, 2 machine epsilons for float16 / bfloat16).

Widgets -> jobs.correctness (cached run_sweep, one repeat, under the timing lock) -> figures.correctness_figure
(error vs N against the bar) and a table.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from flashviz.figures.style import fmt_sci
from flashviz.kit import jobs
from flashviz.kit.drawing import not_run_ui, ran_with_ui, show_figure
from flashviz.kit.runs import run_button_ui
from flashviz.kit.widgets import draw
from flashviz.limits import LIVE_TIME_BUDGET_S
from flashviz.views.correct.figures import correctness_figure, tolerance_for
from flashviz.views.correct.settings import CorrectSettings
from flashviz.vocab import DTYPE_BYTES, IMPLS

RAN_WITH = ("br", "bc", "causal", "window", "dtype", "device", "threads", "correct_ds", "correct_ns")
EXACT_BYTES = 4  # dtypes of at least this many bytes per element (float32, float64) are held to the 1e-5 bar


def correctness_ui(s: CorrectSettings) -> None:
    """Draw the view for settings s."""
    tol, why = tolerance_for(s.dtype)
    bar = fmt_sci(tol)
    st.markdown(
        "Is the tiled kernel exact? Every implementation's output is compared with SDPA in **float64**; in "
        f"{s.dtype} the largest difference must stay under **{bar}** ({why}), and SDPA's own error is the yardstick. "
        f"Tiles Br = {s.br}, Bc = {s.bc}, the mask and the dtype are the sidebar's; the head dimensions d and lengths "
        "N are chosen below."
    )
    c1, c2 = st.columns(2)
    draw("correct_ds", c1)
    draw("correct_ns", c2)
    if not s.correct_ds or not s.correct_ns:
        st.error("Choose at least one head dimension and one sequence length.")
        return
    problem = jobs.work_guard(s.correct_ns, d=max(s.correct_ds), br=s.br, bc=s.bc, batch=1, heads=1, reps=1,
                              n_impls=4 * len(s.correct_ds))
    if problem:
        st.error(problem)
        return
    if DTYPE_BYTES[s.dtype] < EXACT_BYTES:
        st.warning(f"{s.dtype} keeps only 8-11 bits of mantissa, so errors near 1e-3 are expected: the bar here is "
                   f"{bar}, not float32's 1e-5. Choose float32 in the sidebar to check against 1e-5.")
    args = (s.correct_ds, s.correct_ns, s.br, s.bc, s.causal, s.window, s.dtype, s.device, s.threads)
    df = run_button_ui("correct", jobs.correctness, args, label="Run correctness check", title="Correctness check",
                       help=f"Runs every (d, N) once for {', '.join(IMPLS)} and compares with float64 SDPA.",
                       idle="Press **Run correctness check**.", estimate=jobs.correctness_estimate(s),
                       budget_s=LIVE_TIME_BUDGET_S)
    if df is None:
        return
    ran_with_ui(s, RAN_WITH)
    not_run_ui(df, CorrectSettings)
    table = df.pivot_table(index=["d", "N"], columns="impl", values="max_abs_err", aggfunc="max")
    table = table[[i for i in IMPLS if i in table.columns]]
    worst = float(table.max().max()) if table.size else float("nan")
    passed = worst <= tol
    (st.success if passed else st.error)(
        f"Largest error over every (d, N, implementation): **{worst:.2e}** "
        + (f"≤ {bar}, the {s.dtype} bar: pass." if passed else f"> {bar}, the {s.dtype} bar: fail.")
    )
    show_figure(correctness_figure(df, dtype=s.dtype), key="correct_figure")
    st.dataframe(_styled(table, tol), column_config={
        i: st.column_config.NumberColumn(f"{i}: max |err|", format="%.2e") for i in table.columns})


def _styled(table: pd.DataFrame, tol: float):
    """Cells over the bar in bold red, so a failure is visible from the back of the room."""
    return table.style.format("{:.2e}").map(lambda v: "color: #b00020; font-weight: bold" if v > tol else "")
