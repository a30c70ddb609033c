"""The "Roofline" view: why FlashAttention is fast on a GPU, with numbers.

A kernel that does F FLOPs and moves B bytes between main memory and the chip needs at least
max(F / peak, B / bandwidth) seconds (the roofline model); on a GPU, with its L2 level, max(F / peak, HBM bytes / HBM
bandwidth, L2 bytes / L2 bandwidth) (flashviz.model.roofline), and the largest term is the regime (HBM, L2, compute)
that bounds the kernel and makes the GPUs' predictions differ, or not. The chart places naive attention, FA1
(kv_outer) and FA2 (q_outer) at the sidebar's settings on the published roofs of A100, H100, H200 and B200 (at a
tensor-core dtype: what FlashAttention runs on), each at its FLOPs per HBM byte and (dotted) per L2 byte, and on this
CPU's roof, measured (flashviz.measure.roof_probe). A Run button times
the three kernels here, so the predicted GPU speedup stands next to a measured one; where PyTorch sees a CUDA GPU
they are timed there too and join the chart as stars. Every sentence under the chart is computed from the same
DataFrames the chart draws (flashviz.views.roof.sentences), and every point timed here is on or under this CPU's roof:
a roof a kernel beat is measured again, and raised to what the kernel reached if it still is beaten, saying so.

Widgets -> flashviz.views.roof.data (the model's points: instant, no button) -> flashviz.views.roof.figures
figures; Run -> `measure` (data.measure_roofline, cached, under the timing lock, on the CPU and on CUDA
when present).
Legend: N sequence length (N_q = N_k), d head dimension, Br = block_q, Bc = block_k, B batch, H heads,
I arithmetic intensity (FLOP/byte).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from flashviz.kit import jobs
from flashviz.kit.drawing import not_run_ui, show_figure
from flashviz.kit.lock import timing_worker
from flashviz.kit.machine import cuda_available
from flashviz.kit.runs import remembered, run_button_ui, timed_run
from flashviz.kit.widgets import draw
from flashviz.measure.roof_probe import RoofCheck
from flashviz.measure.sweep import cut_short
from flashviz.model.roofline import Device
from flashviz.views.roof import data
from flashviz.views.roof.data import (
    CPU_NAME,
    CPU_TIMED,
    CUDA,
    REPEATS,
    RUN_IMPLS,
    TIMED,
    computed_tiles,
    costs,
    cpu_device,
    device_rates,
    model_points,
    timed_points,
    with_band,
)
from flashviz.views.roof.figures import roofline_figure, speedup_figure, speedup_table
from flashviz.views.roof.sentences import (
    bound_table_md,
    cpu_model_md,
    gap_md,
    gpu_speedups_md,
    gpus_differ_md,
    roof_md,
    settings_text,
    timed_md,
    traffic_md,
)
from flashviz.views.roof.settings import RoofSettings
from flashviz.vocab import NAIVE

measure = timed_run(data.measure_and_roof)  # naive, FA1 and FA2 timed, then the CPU roof that bounds them
cpu_roof = timed_run(cpu_device)  # this CPU's roof, probed in the timing worker


def _cpu_roof(threads: int):
    """This CPU's roof, probed in the timing worker (after any run queued there) and cached."""
    with st.spinner("Measuring this CPU's roof in the timing worker ..."):
        return cpu_roof(threads, _worker=timing_worker())


def points_of(s: RoofSettings, cpu: Device) -> pd.DataFrame:
    """model_points at the sidebar's settings (GPUs at the view's GPU dtype, this CPU at the sidebar's)."""
    return model_points(s.n, s.d, s.br, s.bc, s.causal, s.window, s.batch, s.heads, s.dtype, s.gpu_dtype, cpu)


INTRO = (
    "A kernel that does F FLOPs and moves B bytes to and from memory needs at least **max(F / peak, B / bandwidth)** "
    "seconds. Its arithmetic intensity I = F / B places it on a device's roof: left of the ridge point (peak / "
    "bandwidth) the bandwidth bounds it, right of it the compute. A GPU has a second level, its L2 cache: everything "
    "a kernel moves passes through L2, and a re-read reaches HBM only when what is re-read does not fit in L2, so "
    "the GPU model takes **max(F / peak, HBM bytes / HBM bandwidth, L2 bytes / L2 bandwidth)**: filled points sit at "
    "F per HBM byte under the HBM roofs, hollow ones at F per L2 byte under the thin L2 roofs, and the one that "
    "touches its roof names the level that bounds the kernel. The GPUs' roofs are published peaks (the L2 bandwidth "
    "of Hopper a measured estimate): a model; this CPU's roof is its measured fp32 matmul rate and read bandwidth, "
    "and the points on it are placed by the two-level model. Stars are kernels timed here."
)
CHART_HEIGHT_PX = 700  # two panels side by side, the legend under them
CHART_BOTTOM_PX = 230  # bottom margin: tick labels, the x titles, then four rows of legend at 1280 px
LEGEND_GAP_PX = 85  # from the plot's bottom edge to the legend's top: below the tick labels and the x title
HERE = (CPU_NAME, f"{CPU_TIMED}{TIMED}")  # the devices of the chart's second panel: this CPU, modelled and timed


def roofline_ui(s: RoofSettings) -> None:
    """Draw the view for settings s: the chart first, the GPU dtype and the Run button under it, then the words."""
    cuda = (CUDA,) if cuda_available() else ()
    args = run_args(s, cuda)
    result = remembered("roof", args)
    chart = st.empty()
    _chart_ui(chart, s, result, key="roof_chart")
    c1, c2 = st.columns([1, 2], vertical_alignment="bottom")
    draw("gpu_dtype", c1)
    with c2:
        fresh = _run_ui(s, args, cuda)
    if fresh is not None and fresh is not result:  # measured just now: the stars and the checked roof join the chart
        result = fresh
        _chart_ui(chart, s, result, key="roof_chart_timed")
    df, check = result if result is not None else (None, None)
    cpu = check.roof if check is not None else _cpu_roof(s.threads)
    points, rates = points_of(s, cpu), device_rates(s.gpu_dtype, cpu, s.dtype)
    timed = timed_points(df)
    if df is not None:
        st.markdown(roof_md(check, timed[timed["device"].eq(f"{CPU_TIMED}{TIMED}")], s.threads))
    _speedup_ui(s, points, timed, df, cpu)
    st.markdown(INTRO)
    st.markdown(traffic_md(settings_text(s.n, s.d, s.br, s.bc, s.batch, s.heads, s.causal, s.window), s.gpu_dtype,
                           costs(s.n, s.d, s.br, s.bc, s.causal, s.window, s.batch, s.heads)))
    st.markdown(bound_table_md(points, rates))
    st.markdown(gpu_speedups_md(points, s.gpu_dtype, rates))
    st.markdown(gpus_differ_md(points, rates))
    st.markdown(cpu_model_md(points, cpu, s.dtype))


def run_args(s: RoofSettings, cuda: tuple[str, ...]) -> tuple:
    """The hashable arguments of `measure` for settings s."""
    return (s.n, s.d, s.br, s.bc, s.causal, s.window, s.batch, s.heads, s.dtype, s.gpu_dtype, cuda, s.threads)


def _chart_ui(slot, s: RoofSettings, result: tuple[pd.DataFrame, RoofCheck] | None, key: str) -> None:
    """The roofline chart in `slot`: the GPUs' panel and this CPU's, the model's points and stars for the kernels
    timed here (if any), on the CPU roof that bounds them."""
    df, check = result if result is not None else (None, None)
    cpu = check.roof if check is not None else _cpu_roof(s.threads)
    timed = timed_points(df)
    fig = roofline_figure(pd.concat([points_of(s, cpu), timed], ignore_index=True),
                          with_band(device_rates(s.gpu_dtype, cpu, s.dtype), check), here=HERE,
                          titles=(f"GPUs, {s.gpu_dtype}: published", f"this CPU, {s.dtype}: measured"),
                          subtitle="points: the model at the sidebar's settings"
                                   + (" · stars: timed here" if len(timed) else " · Time (below) adds stars"))
    plot_px = CHART_HEIGHT_PX - fig.layout.margin.t - CHART_BOTTOM_PX
    fig.update_layout(height=CHART_HEIGHT_PX, margin_b=CHART_BOTTOM_PX, legend={
        "orientation": "h", "x": 0, "xanchor": "left", "y": -LEGEND_GAP_PX / plot_px, "yanchor": "top"})
    with slot:
        show_figure(fig, key=key)


def _run_ui(s: RoofSettings, args: tuple, cuda: tuple[str, ...]) -> tuple[pd.DataFrame, RoofCheck] | None:
    """The Run button (refused with a fix when the run would be too big); the measurements for these settings."""
    problem = jobs.work_guard((s.n,), d=s.d, br=s.br, bc=s.bc, batch=s.batch, heads=s.heads, reps=REPEATS,
                              n_impls=len(RUN_IMPLS) * (1 + len(cuda)), dtype=s.dtype)
    if problem:
        st.error(f"Timing here is off at these settings: {problem}")
        return None
    where = "this CPU" + (" and the CUDA GPU" if cuda else "")
    result = run_button_ui("roof", measure, args, label="Time naive, FA1 and FA2 here", title="Roofline timing",
                           help=f"Times naive, flash (FA1) and flash2 (FA2) at the sidebar's settings on {where}: "
                                f"{REPEATS} calls each, the median kept. The measured speedup joins the bars below.",
                           idle=f"Press **Time naive, FA1 and FA2 here** to measure the speedup on {where} "
                                f"({len(RUN_IMPLS) * (1 + len(cuda))} kernels, {REPEATS} calls each).")
    if result is not None and cut_short(result[0]):
        measure.clear(*args)  # the next press measures again instead of showing the partial rows
    return result


def bar_label(device: str) -> str:
    """A short device name that fits under a bar at 1280 px: "A100", "CPU: model", "GPU: timed".

    Example:
        >>> [bar_label(d) for d in ("H100 (SXM)", CPU_NAME, CPU_TIMED + TIMED, "NVIDIA H100 80GB HBM3" + TIMED)]
        ['H100', 'CPU: model', 'CPU: timed', 'GPU: timed']
    """
    if device == CPU_NAME:
        return "CPU: model"
    if device.endswith(TIMED):
        return f"{'CPU' if device == CPU_TIMED + TIMED else 'GPU'}: timed"
    return device.split(" (")[0]


def _speedup_ui(s: RoofSettings, points: pd.DataFrame, timed: pd.DataFrame, df: pd.DataFrame | None,
                cpu: Device) -> None:
    """The predicted speedups next to the measured ones, what was measured, and why the two differ."""
    st.subheader("Predicted on a GPU, measured here")
    table = speedup_table(points)
    for device, mine in timed.groupby("device", sort=False):
        measured = mine.set_index("algorithm")["speedup_vs_naive"].drop(NAIVE, errors="ignore").dropna().to_dict()
        table = pd.concat([table, speedup_table(None, measured, measured_device=device)], ignore_index=True)
    table["device"] = table["device"].map(bar_label)
    show_figure(speedup_figure(table, caption=f"GPUs: the roofline model at {s.gpu_dtype}. This CPU: the model on "
                                              "its measured roof, and the kernels timed here (hatched)."),
                key="roof_speedup")
    if df is None:
        return
    not_run_ui(df, RoofSettings)
    st.markdown(timed_md(timed, points, s.dtype, s.gpu_dtype, s.threads))
    tiles = computed_tiles(s.n, s.br, s.bc, s.causal, s.window)
    st.markdown(gap_md(timed, points, cpu, s.dtype, tiles, s.br, s.bc, s.bench_block,
                       computed_tiles(s.n, s.bench_block, s.bench_block, s.causal, s.window)))
    with st.expander("The measurements"):
        st.dataframe(df, hide_index=True)
