"""The "Training" view: forward + backward time and peak memory, and what each implementation saves for the
backward pass versus recomputes, and the modelled price of recomputing (flashviz.model.training).

Widgets -> jobs.sweep(mode=TRAINING) (cached run_sweep under the timing lock) -> flashviz.figures.plots figures.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from flashviz.figures.plots import memory_figure, time_bars, time_figure
from flashviz.figures.report import TABLE_SLACK_PX, summary_table, summary_table_figure
from flashviz.figures.style import set_subtitle
from flashviz.kit import jobs
from flashviz.kit.drawing import csv_download_ui, not_run_ui, ran_with_ui, show_figure
from flashviz.kit.runs import run_button_ui
from flashviz.kit.widgets import draw
from flashviz.limits import LIVE_TIME_BUDGET_S
from flashviz.model.training import recompute_table
from flashviz.units import MIB, format_bytes
from flashviz.views.bench.page import RAN_WITH, slower_caption_ui, verdicts_ui
from flashviz.views.train.settings import TrainSettings
from flashviz.vocab import DTYPE_BYTES, NAIVE, TILED_IMPLS, TRAINING

GIGA = 1e9  # FLOP per GFLOP
SWEEP_WIDTHS = (2.6, 0.95, 0.75, 1.5)  # implementations, tile size, repeats, repeat until sure: one row at 1280 px
HOOK = "Naive keeps the N × N matrix P for the backward pass; FlashAttention **recomputes** it."

SAVED = (
    "| implementation | saved for the backward pass | recomputed in the backward pass | memory grows with |\n"
    "|---|---|---|---|\n"
    "| **naive** | P (B·H·N² elements), plus Q, K, V | nothing | **N²** |\n"
    "| **flash**, **flash2** (FA1 / FA2 forward, FA2 backward) | O and the logsumexp L = m + log l "
    "(B·H·N·(d + 1)), plus Q, K, V | S_ij and P_ij = exp(S_ij − L_i), one tile at a time | **N** |\n"
    "| **SDPA** | PyTorch's fused kernel: O and its logsumexp | its own tiles | **N** |\n"
)


def training_ui(s: TrainSettings) -> None:
    """Draw the view for settings s: the sweep's controls and its Run button first, the results under them, then what
    each implementation saves for the backward pass and the modelled price of recomputing P."""
    _sweep_controls_ui()
    _run_ui(s)
    st.subheader("What each implementation keeps for the backward pass")
    st.markdown(HOOK)
    st.markdown(SAVED)
    st.latex(r"P_{ij} = e^{S_{ij} - L_i},\quad D_i = \operatorname{rowsum}(dO_i \circ O_i),\quad "
             r"dS_{ij} = P_{ij} \circ (dP_{ij} - D_i)")
    _recompute_ui(s)


def _run_ui(s: TrainSettings) -> None:
    """The Run button and, for these settings, the measured forward + backward time and peak memory."""
    impls = s.impls
    problem = jobs.work_guard(s.ns, d=s.d, br=s.bench_block, bc=s.bench_block, batch=s.batch, heads=s.heads,
                              reps=s.reps, n_impls=len(impls), training=True, dtype=s.dtype)
    if problem:
        st.error(problem)
        return
    args = jobs.sweep_args(s, impls=impls, mode=TRAINING)
    df = run_button_ui("train", jobs.sweep, args, label="Run training benchmark", title="Training sweep",
                       help="Times forward + backward (autograd) for each implementation and N.",
                       idle=f"{HOOK} Press **Run training benchmark** to time forward + backward at N = "
                            f"{', '.join(map(str, s.ns))} for {', '.join(impls)}.",
                       estimate=jobs.sweep_estimate(s.ns, impls, d=s.d, block=s.bench_block, batch=s.batch,
                                                    heads=s.heads, reps=s.reps, sure=s.sure, causal=s.causal,
                                                    window=s.window, training=True), budget_s=LIVE_TIME_BUDGET_S)
    if df is None:
        return
    ran_with_ui(s, RAN_WITH)
    not_run_ui(df, TrainSettings, here=("ns",))
    show_figure(memory_figure(df).update_layout(title_text="Forward + backward: peak memory vs N"),
                key="train_memory")
    bars = "95% intervals" if time_bars(df).startswith("95%") else "interquartile range"
    show_figure(time_figure(df).update_layout(title_text=f"Forward + backward: time vs N (bars: {bars})"),
                key="train_time")
    for flash in TILED_IMPLS:
        if NAIVE in impls and flash in impls:
            show_figure(summary_table_figure(summary_table(df, flash_impl=flash),
                                             title=f"Training summary: {flash} vs naive"), key=f"train_summary_{flash}")
    verdicts_ui(df)
    slower_caption_ui(df, s, "in training", "")  # this view draws no traffic chart: the IO model view has it
    csv_download_ui(df, "flashviz-training.csv", "train_csv", "Every row of the training sweep (forward + backward), "
                    "one per (implementation, N), with the run's context.", report=jobs.sweep.report_of(args))
    with st.expander("All measurements"):
        st.dataframe(df, hide_index=True)


def _sweep_controls_ui() -> None:
    """The Benchmark view's sweep settings, drawn here too (one view is open at a time: the same widgets)."""
    draw("ns", st)
    for name, col in zip(("impls", "bench_block", "reps", "sure"), st.columns(SWEEP_WIDTHS,
                                                                              vertical_alignment="center"),
                         strict=True):
        draw(name, col)


def recompute_view(table: pd.DataFrame) -> pd.DataFrame:
    """recompute_table's rows as the page shows them: backward GFLOP with P kept and recomputed, the extra, and the
    memory that recomputing saves (MiB).

    Example:
        >>> from flashviz.model.training import recompute_table
        >>> float(recompute_view(recompute_table([1024], 64)).iloc[0]["extra %"])
        25.0
    """
    return pd.DataFrame({
        "N": table["N"].astype(int).astype(str),
        "naive GFLOP": table["backward_flops_stored_p"] / GIGA,
        "flash GFLOP": table["backward_flops"] / GIGA,
        "extra GFLOP": table["extra_flops"] / GIGA,
        "extra %": 100 * table["extra_backward_fraction"],
        "P MiB": table["stored_p_bytes"] / MIB,
        "saved MiB": table["memory_saved_bytes"] / MIB,
    })


def _recompute_ui(s: TrainSettings) -> None:
    """The price of recomputation at the Benchmark's N, the sidebar's B, H, d, mask and dtype: a model, no button."""
    if not s.ns:
        return
    table = recompute_table(s.ns, s.d, batch=s.batch, heads=s.heads, block_q=s.bench_block, block_k=s.bench_block,
                            causal=s.causal, window=s.window, dtype=s.dtype)
    last = table.iloc[-1] if table["N"].is_monotonic_increasing else table.loc[table["N"].idxmax()]
    st.subheader("The price of recomputation (modelled)")
    st.markdown(
        f"FlashAttention's backward recomputes S = QKᵀ tile by tile: five matmuls instead of four, "
        f"**{100 * last['extra_backward_fraction']:.0f}% more backward FLOPs** (about "
        f"{100 * last['extra_training_fraction']:.0f}% of a whole forward + backward pass), so that it never stores "
        f"P. At "
        f"N = {int(last['N'])} with B = {s.batch}, H = {s.heads}, d = {s.d}: "
        f"{last['extra_flops'] / GIGA:,.2f} GFLOP more, and P ({s.batch} × {s.heads} × {int(last['N'])}² {s.dtype} "
        f"values of {DTYPE_BYTES[s.dtype]} bytes, {format_bytes(last['stored_p_bytes'])}) replaced by the logsumexp L "
        f"({format_bytes(last['stored_lse_bytes'])}): {format_bytes(last['memory_saved_bytes'])} less kept between "
        "forward and backward.")
    show_figure(recompute_figure(table), key="train_recompute")


def recompute_figure(table: pd.DataFrame) -> go.Figure:
    """The table of recompute_table as a plotly table, tall enough for every row under its two-line subtitle: the
    subtitle grows the top margin, so the height grows with it (else the last rows are cut off).

    Example:
        >>> from flashviz.model.training import recompute_table
        >>> fig = recompute_figure(recompute_table([256, 512, 1024, 2048], 64))
        >>> t = fig.data[0]
        >>> fig.layout.height - fig.layout.margin.t - fig.layout.margin.b >= t.header.height + 4 * t.cells.height
        True
    """
    rows = recompute_view(table)
    fig = summary_table_figure(rows, title="Backward: FLOPs added, memory saved")
    set_subtitle(fig, "modelled: naive keeps P (4 matmuls), flash recomputes it (5); saved = P − L")
    (table,) = fig.data
    fig.update_layout(height=fig.layout.margin.t + table.header.height + table.cells.height * max(len(rows), 1)
                      + TABLE_SLACK_PX + fig.layout.margin.b)
    return fig
