"""The "Benchmark" view: a live sweep over N for naive / flash / flash2 / SDPA, on request, drawn as each N finishes;
then, at the largest N, the price of the causal mask.

Widgets -> jobs.sweep (cached run_sweep under the timing lock) -> figures. The result stays on the
page while the settings that produced it are unchanged; any student asking for the same settings gets it at once.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from flashviz.core.tiling import tile_schedule
from flashviz.figures.plots import gflops_figure, hbm_figure, memory_figure, time_figure
from flashviz.figures.report import summary_table, summary_table_figure
from flashviz.kit import jobs
from flashviz.kit.drawing import csv_download_ui, not_run_ui, ran_with_ui, show_figure
from flashviz.kit.runs import run_button_ui
from flashviz.kit.widgets import draw
from flashviz.limits import LIVE_TIME_BUDGET_S
from flashviz.views.bench.sentences import (
    causal_md,
    causal_ratios,
    plural,
    repeats_said,
    slower_by,
    slower_cases,
    slower_why,
    tiles_note,
    verdicts_md,
)
from flashviz.views.bench.settings import BenchSettings
from flashviz.vocab import FULL, NAIVE, PARTIAL, TILED_IMPLS

HOOK = "Naive attention stores S and P: its memory grows with **N²**, the tiled kernels' with **N**."
SWEEP_WIDTHS = (2.6, 0.95, 0.75, 1.5)  # implementations, tile size, repeats, repeat until sure: one row at 1280 px
RAN_WITH = ("d", "causal", "window", "dtype", "batch", "heads", "device", "threads", "ns", "bench_block", "reps",
            "sure")
CAUSAL_RAN_WITH = ("d", "dtype", "batch", "heads", "device", "threads", "bench_block", "reps", "sure")  # no window


def verdicts_ui(df: pd.DataFrame) -> None:
    """Which kernel is faster at each N, said only where the medians' 95% intervals separate (else: too close to call
    here, and what would settle it)."""
    text = verdicts_md(df)
    if text:
        st.markdown("**Naive against the tiled kernels, N by N**\n\n" + text)


def slower_caption_ui(df: pd.DataFrame, s: BenchSettings, where: str, traffic: str) -> None:
    """Say why the tiled kernels are slower than naive, only where they are slower beyond the noise (`traffic`: where
    the view shows the modelled HBM traffic, see slower_why)."""
    slow = slower_cases(df)
    if not slow:
        return
    cases = ", ".join(f"{v.slower} at N = {n} ({slower_by(v)})" for n, _, v in slow)
    st.markdown(f"**Why is the tiled kernel slower than naive {where}?** Slower beyond the noise: {cases}. "
                f"{slower_why(max(n for n, _, _ in slow), s.bench_block, s.heads, s.batch, traffic)}")


def benchmark_ui(s: BenchSettings) -> None:
    """Draw the view for settings s."""
    draw("ns", st)
    columns = st.columns(SWEEP_WIDTHS, vertical_alignment="center")  # all four implementation chips fit at 1280 px
    for name, col in zip(("impls", "bench_block", "reps", "sure"), columns, strict=True):
        draw(name, col)
    if not s.ns or not s.impls:
        st.error("Choose at least one sequence length and one implementation.")
        return
    problem = jobs.work_guard(s.ns, d=s.d, br=s.bench_block, bc=s.bench_block, batch=s.batch, heads=s.heads,
                              reps=s.reps, n_impls=len(s.impls), dtype=s.dtype)
    if problem:
        st.error(problem)
        return
    if s.bench_block >= min(s.ns):
        st.markdown(f"At N ≤ {s.bench_block} one {s.bench_block}-wide tile covers the whole sequence: the tiled "
                    "kernels run a single tile there, like naive attention with extra bookkeeping.")
    holder: dict[str, object] = {}

    def draw_so_far(partial: pd.DataFrame) -> None:  # called inside the run's status box
        if "live" not in holder:
            holder["live"] = st.empty()
        with holder["live"].container():
            show_figure(time_figure(partial).update_layout(title_text="Time vs sequence length (so far)"),
                        key=f"bench_live_{partial['N'].nunique()}")

    df = run_button_ui("bench", jobs.sweep, jobs.sweep_args(s), label="Run benchmark", title="Benchmark sweep",
                       help="Runs the sweep now (results are cached: the same settings come back at once).",
                       idle=f"{HOOK} Press **Run benchmark** to measure these settings (about "
                            f"{plural(len(s.ns) * len(s.impls), 'measurement')}, "
                            f"{repeats_said(s)} each).", on_partial=draw_so_far,
                       estimate=jobs.sweep_estimate(s.ns, s.impls, d=s.d, block=s.bench_block, batch=s.batch,
                                                    heads=s.heads, reps=s.reps, sure=s.sure, causal=s.causal,
                                                    window=s.window), budget_s=LIVE_TIME_BUDGET_S)
    if df is None:
        return
    _results_ui(s, df)
    _causal_ui(s)


def _results_ui(s: BenchSettings, df: pd.DataFrame) -> None:
    ran_with_ui(s, RAN_WITH)
    not_run_ui(df, BenchSettings)
    show_figure(memory_figure(df), key="bench_memory")  # full width: legible from the back of the room
    show_figure(time_figure(df), key="bench_time")
    verdicts_ui(df)
    slower_caption_ui(df, s, "here", "the modelled traffic chart below")
    show_figure(gflops_figure(df), key="bench_gflops")
    show_figure(hbm_figure(df, tiles_note(s.bench_block, s.br, s.bc)), key="bench_hbm")
    for flash in TILED_IMPLS:  # a plotly table: its 20 px font reads on a projector, st.table's does not
        if NAIVE in s.impls and flash in s.impls:
            show_figure(summary_table_figure(summary_table(df, flash_impl=flash), title=f"Summary: {flash} vs naive"),
                        key=f"bench_summary_{flash}")
    csv_download_ui(df, "flashviz.csv", "bench_csv", "Every row of the sweep, one per (implementation, N), with its "
                    "repeats, the median's 95% interval, the calls set aside, the waits for a core taken off and the "
                    "run's torch version, CPU model, threads and load.",
                    report=jobs.sweep.report_of(jobs.sweep_args(s)))
    with st.expander("All measurements"):
        st.dataframe(df, hide_index=True)


def _causal_ui(s: BenchSettings) -> None:
    n = max(s.ns)
    st.subheader(f"Causal vs no mask at N = {n}")
    tiles = tile_schedule(n, n, s.bench_block, s.bench_block, causal=True).counts()
    computed, total = tiles[FULL] + tiles[PARTIAL], sum(tiles.values())
    st.markdown(f"A causal mask hides the keys after each query, so the tiled kernels skip every tile above the "
                f"diagonal: at N = {n} with {s.bench_block}-wide tiles they compute {computed} of {total} tiles. Naive "
                "attention computes all N² scores and then masks them, so it saves nothing.")
    args = (n, s.d, s.bench_block, s.impls, s.batch, s.heads, s.dtype, s.device, s.threads, s.reps, s.sure)
    df = run_button_ui("causal", jobs.causal_pair, args, label="Compare causal and no mask",
                       title="Causal comparison", help=f"Times every chosen implementation at N = {n} with and "
                                                       "without the causal mask.",
                       idle=f"Press **Compare causal and no mask** to time both at N = {n} "
                            f"({plural(2 * len(s.impls), 'measurement')}, {repeats_said(s)} each).",
                       estimate=lambda speed: sum(jobs.sweep_estimate(
                           (n,), s.impls, d=s.d, block=s.bench_block, batch=s.batch, heads=s.heads, reps=s.reps,
                           sure=s.sure, causal=causal)(speed) for causal in (False, True)),
                       budget_s=LIVE_TIME_BUDGET_S)
    if df is None:
        return
    ran_with_ui(s, CAUSAL_RAN_WITH)
    not_run_ui(df, BenchSettings)
    st.dataframe(causal_ratios(df), hide_index=True, column_config={
        "no mask (ms)": st.column_config.NumberColumn(format="%.1f"),
        "causal (ms)": st.column_config.NumberColumn(format="%.1f"),
        "causal / no mask": st.column_config.TextColumn(
            help="Causal time / unmasked time with its 95% interval; below 1: the mask saved time. A ratio only "
                 "where the two medians' intervals separate.")})
    st.markdown(causal_md(df, computed, total))
