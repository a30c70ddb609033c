"""The "Benchmark" tab: a live sweep over N for naive / flash / flash2 / SDPA, on request.

Widgets -> jobs.sweep (cached run_sweep under the timing lock) -> figures. The result stays on the
page while the settings that produced it are unchanged; any student asking for the same settings gets it at once.
"""

from __future__ import annotations

import streamlit as st

from flashviz.figures.plots import gflops_figure, hbm_figure, memory_figure, time_figure
from flashviz.figures.report import summary_table, summary_table_figure
from flashviz.ui import jobs
from flashviz.ui.common import not_run_ui, run_button_ui, show_figure
from flashviz.ui.state import Settings
from flashviz.ui.widgets import draw


def benchmark_ui(s: Settings) -> None:
    """Draw the tab for settings s."""
    st.markdown(
        "Time and peak memory of four implementations on the same random Q, K, V (B, H, N, d from the sidebar). "
        "Naive attention's memory grows with **N²**: it stores S and P. The tiled kernels grow with **N**. "
        "Timings are medians of repeated calls; error bars span the interquartile range."
    )
    c1, c2, c3 = st.columns([3, 3, 2])
    for name, col in zip(("ns", "impls", "reps"), (c1, c2, c3), strict=True):
        draw(name, col)
    if not s.ns or not s.impls:
        st.error("Choose at least one sequence length and one implementation.")
        return
    args = jobs.sweep_args(s)
    problem = jobs.work_guard(s.ns, d=s.d, br=s.br, bc=s.bc, batch=s.batch, heads=s.heads, reps=s.reps,
                              n_impls=len(s.impls), dtype=s.dtype)
    if problem:
        st.error(problem)
        return
    df = run_button_ui("bench", jobs.sweep, args, label="Run benchmark", title="Benchmark sweep",
                       help="Runs the sweep now (results are cached: the same settings come back at once).",
                       idle=f"Press **Run benchmark** to measure these settings (about "
                            f"{len(s.ns) * len(s.impls)} measurements, {s.reps} repeats each).")
    if df is None:
        return
    not_run_ui(df)
    show_figure(memory_figure(df), key="bench_memory")  # full width: legible from the back of the room
    show_figure(time_figure(df), key="bench_time")
    show_figure(gflops_figure(df), key="bench_gflops")
    show_figure(hbm_figure(df), key="bench_hbm")
    for flash in ("flash", "flash2"):  # a plotly table: its 20 px font reads on a projector, st.table's does not
        if "naive" in s.impls and flash in s.impls:
            show_figure(summary_table_figure(summary_table(df, flash_impl=flash), title=f"Summary: {flash} vs naive"),
                        key=f"bench_summary_{flash}")
    st.download_button("Download the measurements (CSV)", df.to_csv(index=False).encode(), file_name="flashviz.csv",
                       mime="text/csv", key="bench_csv", help="Every row of the sweep, one per (implementation, N).")
    with st.expander("All measurements"):
        st.dataframe(df, hide_index=True)
