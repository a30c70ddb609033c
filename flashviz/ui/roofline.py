"""The "Roofline" tab: why FlashAttention is fast on a GPU, with numbers.

A kernel that does F FLOPs and moves B bytes between main memory and the chip needs at least
max(F / peak, B / bandwidth) seconds (the roofline model). The chart places naive attention, FA1 (kv_outer) and FA2
(q_outer) at the sidebar's settings on the published roofs of A100, H100 and H200 (at a tensor-core dtype: what
FlashAttention runs on) and on this CPU's roof, measured (flashviz.model.roofline.this_machine). A Run button times
the three kernels here, so the predicted GPU speedup stands next to a measured one; where PyTorch sees a CUDA GPU
they are timed there too and join the chart as stars. Every sentence under the chart is computed from the same
DataFrames the chart draws.

Widgets -> flashviz.measure.roofline_runs (the model's points: instant, no button) -> flashviz.figures.roofline
figures; Run -> `measure` (roofline_runs.measure_roofline, cached, under the timing lock, on the CPU and on CUDA
when present).
Legend: N sequence length (N_q = N_k), d head dimension, Br = block_q, Bc = block_k, B batch, H heads,
I arithmetic intensity (FLOP/byte).
"""

from __future__ import annotations

import threading

import pandas as pd
import streamlit as st

from flashviz.figures.roofline import SHORT, roofline_figure, speedup_figure, speedup_table
from flashviz.figures.style import set_subtitle
from flashviz.limits import LIVE_TIME_BUDGET_S
from flashviz.measure import roofline_runs
from flashviz.measure.roofline_runs import (
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
)
from flashviz.measure.sweep import cut_short
from flashviz.model.iomodel import IOCost
from flashviz.model.roofline import MATMUL_N, MEMORY, Device
from flashviz.ui import jobs
from flashviz.ui.drawing import not_run_ui, show_figure
from flashviz.ui.lock import Progress, holding
from flashviz.ui.machine import machine_env
from flashviz.ui.runs import remembered, run_button_ui
from flashviz.ui.state import Settings
from flashviz.ui.widgets import draw
from flashviz.units import format_bytes
from flashviz.vocab import ALGORITHMS, DTYPE_BYTES, KV_OUTER, NAIVE, Q_OUTER


@st.cache_data(show_spinner=False, max_entries=16)
def measure(n: int, d: int, br: int, bc: int, causal: bool, window: tuple[int, int] | None, batch: int, heads: int,
            cpu_dtype: str, gpu_dtype: str, devices: tuple[str, ...], threads: int,
            time_budget_s: float = LIVE_TIME_BUDGET_S, _progress: Progress | None = None,
            _lock: threading.Lock | None = None) -> pd.DataFrame:
    """roofline_runs.measure_roofline under the timing lock: naive, flash and flash2 here (and on CUDA)."""
    with holding(_lock or threading.Lock(), _progress):
        return roofline_runs.measure_roofline(n, d, br, bc, causal, window, batch, heads, cpu_dtype, gpu_dtype,
                                              devices, threads, time_budget_s, progress=_progress)


def points_of(s: Settings, cpu: Device) -> pd.DataFrame:
    """model_points at the sidebar's settings (GPUs at the tab's GPU dtype, this CPU at the sidebar's)."""
    return model_points(s.n, s.d, s.br, s.bc, s.causal, s.window, s.batch, s.heads, s.dtype, s.gpu_dtype, cpu)


# ----------------------------------------------------------------------------------------------------------------------
# what the chart shows, in words: every number from the DataFrames the chart draws


def _x(v: float) -> str:
    return f"{v:.2f}×"


def _i(v: float) -> str:
    return f"{v:.3g}"


def settings_text(s: Settings) -> str:
    """The sidebar settings the tab shows, in one phrase."""
    mask = ["causal"] if s.causal else []
    mask += [f"window ({s.window[0]}, {s.window[1]})"] if s.window is not None else []
    return (f"N = {s.n}, d = {s.d}, Br = {s.br}, Bc = {s.bc}, B = {s.batch}, H = {s.heads}, "
            f"{' + '.join(mask) or 'no mask'}")


def traffic_md(s: Settings, gpu_dtype: str, cost: dict[str, IOCost]) -> str:
    """Bytes and FLOPs of the three algorithms, and why FA2 moves fewer (or more) bytes than FA1."""
    size = DTYPE_BYTES[gpu_dtype]
    naive, fa1, fa2 = (cost[a] for a in ALGORITHMS)
    work = (f"all three do {naive.flops / 1e9:.3g} GFLOP of matmuls" if naive.flops == fa1.flops == fa2.flops else
            f"naive does {naive.flops / 1e9:.3g} GFLOP (every score, masked afterwards), FA1 {fa1.flops / 1e9:.3g} "
            f"and FA2 {fa2.flops / 1e9:.3g} GFLOP (masked tiles are skipped)")
    moved = ", ".join(f"{SHORT[a]} {format_bytes(cost[a].accesses * size)}" for a in ALGORITHMS)
    fewer = "fewer" if fa2.accesses < fa1.accesses else "more"
    return (f"**Work and traffic.** At {settings_text(s)}, {work}; in {gpu_dtype} they move: {moved} "
            f"to and from HBM. Naive writes S and P to HBM and reads them back; the tiled kernels keep each tile of S "
            f"and P on chip.\n\n"
            f"**Why FA2 moves {fewer} bytes than FA1 here.** FA1's outer loop runs over K/V blocks: it reads Q, O, l, "
            f"m again on every pass and writes O, l, m back ({fa1.reads - fa1.kv_reads:,} elements read besides K and "
            f"V, {fa1.writes:,} written). FA2's outer loop runs over Q blocks and keeps O_i, l_i, m_i on chip until "
            f"its row is done: it reads each Q_i once and writes O and L once ({fa2.reads - fa2.kv_reads:,} read "
            f"besides K and V, {fa2.writes:,} written), and pays instead by reading K and V once per Q block "
            f"({fa2.kv_reads:,} elements of K and V against FA1's {fa1.kv_reads:,}).")


def bound_table_md(points: pd.DataFrame, rates: pd.DataFrame) -> str:
    """Markdown table: per device its ridge point and, per algorithm, memory- or compute-bound at intensity I."""
    ridge = rates.set_index("device")["ridge"]
    lines = ["| device | dtype | ridge point | naive | FA1 | FA2 |", "|---|---|---|---|---|---|"]
    for device, mine in points.groupby("device", sort=False):
        by = mine.set_index("algorithm")
        cells = [f"{by.at[a, 'bound']}-bound (I = {_i(by.at[a, 'intensity'])})" for a in ALGORITHMS]
        lines.append(f"| {device} | {mine['dtype'].iloc[0]} | {_i(ridge[device])} FLOP/byte | {' | '.join(cells)} |")
    return "\n".join(lines)


def gpu_speedups_md(points: pd.DataFrame, gpu_dtype: str) -> str:
    """The predicted speedup over naive on each GPU, and which roof sets it."""
    lines = [f"**Predicted speedup over naive (a model)**, naive's time / the kernel's, each "
             f"max(FLOPs / peak, bytes / bandwidth), at {gpu_dtype}:"]
    for device, mine in points[~points["device"].eq(CPU_NAME)].groupby("device", sort=False):
        by = mine.set_index("algorithm")
        parts = [f"{SHORT[a]} {_x(by.at[a, 'speedup_vs_naive'])}" for a in (KV_OUTER, Q_OUTER)]
        lines.append(f"- **{device}**: {', '.join(parts)}. {_why(by, gpu_dtype)}")
    return "\n".join(lines)


def _why(by: pd.DataFrame, dtype: str, gpu: bool = True) -> str:
    """Which roof sets the predicted speedups on one device (rows: algorithms of roofline_points)."""
    if by.at[NAIVE, "bound"] != MEMORY:
        tensor_cores = " FlashAttention runs fp16/bf16 on tensor cores: choose float16 above." if gpu else ""
        gain = ("with the same FLOPs they gain nothing" if by["flops"].nunique() == 1 else
                "the tiled kernels gain only the FLOPs they skip")
        return f"Naive is already compute-bound here at {dtype}: the FLOPs set its time, so {gain}.{tensor_cores}"
    capped = [a for a in (KV_OUTER, Q_OUTER) if by.at[a, "bound"] != MEMORY]
    if not capped:
        return "All three are memory-bound, so each speedup is the ratio of bytes moved."
    ratio = ", ".join(f"{SHORT[a]} {_x(by.at[NAIVE, 'hbm_bytes'] / by.at[a, 'hbm_bytes'])}" for a in capped)
    return (f"{' and '.join(SHORT[a] for a in capped)} reach{'es' if len(capped) == 1 else ''} the compute roof, so "
            f"FLOPs cap the gain below the ratio of bytes ({ratio}).")


def cpu_model_md(points: pd.DataFrame, cpu: Device, dtype: str) -> str:
    """What the model predicts on this CPU, whose roof was measured."""
    by = points[points["device"].eq(CPU_NAME)].set_index("algorithm")
    model = ", ".join(f"{SHORT[a]} {_x(by.at[a, 'speedup_vs_naive'])}" for a in (KV_OUTER, Q_OUTER))
    return (f"**This CPU** (measured: {cpu.peak(dtype) / 1e9:.3g} GFLOP/s fp32 matmul, {cpu.bandwidth / 1e9:.3g} "
            f"GB/s read; ridge {_i(cpu.ridge(dtype))} FLOP/byte): naive is {by.at[NAIVE, 'bound']}-bound at {dtype} "
            f"(I = {_i(by.at[NAIVE, 'intensity'])}), and the model predicts {model}. {_why(by, dtype, gpu=False)}")


def timed_md(timed: pd.DataFrame, points: pd.DataFrame, s: Settings, tiles: int) -> str:
    """What the Run button measured: the speedups over naive and the FLOP/s reached, per timed device."""
    lines = []
    model = points[points["device"].eq(CPU_NAME)].set_index("algorithm")
    for device, mine in timed.groupby("device", sort=False):
        by = mine.set_index("algorithm")
        cpu = device == f"{CPU_TIMED}{TIMED}"
        ran = [a for a in (KV_OUTER, Q_OUTER) if a in by.index and NAIVE in by.index]
        speed = ", ".join(f"{SHORT[a]} {_x(by.at[a, 'speedup_vs_naive'])}" for a in ran)
        rates = ", ".join(f"{SHORT[a]} {by.at[a, 'attainable_flops'] / 1e9:.3g} GFLOP/s"
                          + (f" ({by.at[a, 'attainable_flops'] / model.at[a, 'attainable_flops']:.0%})" if cpu else "")
                          for a in by.index)
        share = " (and the share of this CPU's roof at each one's intensity)" if cpu else ""
        dtype = s.dtype if cpu else s.gpu_dtype
        threads = f"{s.threads} thread{'' if s.threads == 1 else 's'}"
        speed = f"{speed} naive's speed" if speed else "no speedup to show (naive or the tiled kernels did not run)"
        text = (f"**Measured on {device.removesuffix(TIMED)}** ({dtype}, {threads}, median of {REPEATS} calls): "
                f"{speed}. Reached{share}: {rates}.")
        slower = [a for a in ran if cpu and by.at[a, "speedup_vs_naive"] < model.at[a, "speedup_vs_naive"]]
        if slower:
            text += (f" {' and '.join(SHORT[a] for a in slower)} fall{'s' if len(slower) == 1 else ''} short of the "
                     f"model's prediction: flashviz's kernels are plain PyTorch, one Python loop iteration with a few "
                     f"small matmuls per tile ({tiles:,} computed tiles per call here), a cost the roofline does not "
                     "count; it counts only FLOPs and bytes.")
        if cpu and (by["attainable_flops"] > model.loc[by.index, "attainable_flops"]).any():
            text += (f" A share above 100%: this CPU's roof is the rate of one {MATMUL_N} × {MATMUL_N} fp32 matmul, "
                     "measured once when the dashboard started; larger matmuls, or a machine quieter than it was "
                     "then, run faster.")
        if not cpu:
            text += (" These are flashviz's PyTorch kernels (a Python loop over tiles), not flash-attn's fused CUDA "
                     "kernel; the stars on the chart show where they land.")
        lines.append(text)
    return "\n\n".join(lines)


# ----------------------------------------------------------------------------------------------------------------------
# the tab


INTRO = (
    "A kernel that does F FLOPs and moves B bytes to and from memory needs at least **max(F / peak, B / bandwidth)** "
    "seconds. Its arithmetic intensity I = F / B places it on a device's roof: left of the ridge point (peak / "
    "bandwidth) the bandwidth bounds it, right of it the compute. The GPUs' roofs are their published peaks (a "
    "model); this CPU's roof is its measured fp32 matmul rate and read bandwidth, and the points on it are placed by "
    "the same model. Stars are kernels timed here."
)
CHART_HEIGHT_PX = 680  # the legend sits under the plot, so the plot keeps the chart's full width
CHART_BOTTOM_PX = 240  # bottom margin: tick labels, the x title, then up to four rows of legend at 1280 px
LEGEND_GAP_PX = 100  # from the plot's bottom edge to the legend's top: below the tick labels and the x title


def roofline_ui(s: Settings) -> None:
    """Draw the tab for settings s."""
    env = machine_env()
    cuda = tuple(d for d in env.devices if d == CUDA)
    cpu = cpu_device()
    points = points_of(s, cpu)
    rates = device_rates(s.gpu_dtype, cpu, s.dtype)
    args = run_args(s, cuda)
    before = remembered("roof", args)
    chart = st.empty()
    _chart_ui(chart, s, points, rates, before, key="roof_chart")
    c1, c2 = st.columns([1, 2], vertical_alignment="bottom")
    draw("gpu_dtype", c1)
    c2.caption("The GPU roofs are drawn at a tensor-core dtype by default: FlashAttention runs fp16/bf16 there. "
               "This CPU keeps the sidebar's dtype.")
    st.markdown(INTRO)
    st.markdown(traffic_md(s, s.gpu_dtype, costs(s.n, s.d, s.br, s.bc, s.causal, s.window, s.batch, s.heads)))
    st.markdown(bound_table_md(points, rates))
    st.markdown(gpu_speedups_md(points, s.gpu_dtype))
    st.markdown(cpu_model_md(points, cpu, s.dtype))
    st.subheader("Predicted on a GPU, measured here")
    df = _run_ui(s, args, cuda)
    if df is not None and df is not before:  # measured just now: the stars join the chart above
        _chart_ui(chart, s, points, rates, df, key="roof_chart_timed")
    _speedup_ui(s, points, timed_points(df) if df is not None else timed_points(None), df)


def run_args(s: Settings, cuda: tuple[str, ...]) -> tuple:
    """The hashable arguments of `measure` for settings s."""
    return (s.n, s.d, s.br, s.bc, s.causal, s.window, s.batch, s.heads, s.dtype, s.gpu_dtype, cuda, s.threads)


def _chart_ui(slot, s: Settings, points: pd.DataFrame, rates: pd.DataFrame, df: pd.DataFrame | None,
              key: str) -> None:
    """The roofline chart in `slot`: the model's points, and stars for the kernels timed here (if any)."""
    timed = timed_points(df)
    fig = roofline_figure(pd.concat([points, timed], ignore_index=True), rates)
    set_subtitle(fig, f"GPUs at {s.gpu_dtype}: published peaks, a model · this CPU at {s.dtype}: measured roof"
                      + (" · stars: timed here" if len(timed) else ""))
    plot_px = CHART_HEIGHT_PX - fig.layout.margin.t - CHART_BOTTOM_PX
    fig.update_layout(height=CHART_HEIGHT_PX, margin_b=CHART_BOTTOM_PX, legend={
        "orientation": "h", "x": 0, "xanchor": "left", "y": -LEGEND_GAP_PX / plot_px, "yanchor": "top"})
    with slot:
        show_figure(fig, key=key)


def _run_ui(s: Settings, args: tuple, cuda: tuple[str, ...]) -> pd.DataFrame | None:
    """The Run button (refused with a fix when the run would be too big); the measurements for these settings."""
    problem = jobs.work_guard((s.n,), d=s.d, br=s.br, bc=s.bc, batch=s.batch, heads=s.heads, reps=REPEATS,
                              n_impls=len(RUN_IMPLS) * (1 + len(cuda)), dtype=s.dtype)
    if problem:
        st.error(f"Timing here is off at these settings: {problem}")
        return None
    where = "this CPU" + (" and the CUDA GPU" if cuda else "")
    df = run_button_ui("roof", measure, args, label="Time naive, FA1 and FA2 here", title="Roofline timing",
                       help=f"Times naive, flash (FA1) and flash2 (FA2) at the sidebar's settings on {where}: "
                            f"{REPEATS} calls each, the median kept. The measured speedup joins the bars below.",
                       idle=f"Press **Time naive, FA1 and FA2 here** to measure the speedup on {where} "
                            f"({len(RUN_IMPLS) * (1 + len(cuda))} kernels, {REPEATS} calls each).")
    if df is not None and cut_short(df):
        measure.clear(*args)  # the next press measures again instead of showing the partial rows
    return df


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


def _speedup_ui(s: Settings, points: pd.DataFrame, timed: pd.DataFrame, df: pd.DataFrame | None) -> None:
    """The predicted speedups next to the measured ones, and what was measured."""
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
    not_run_ui(df)
    st.markdown(timed_md(timed, points, s, computed_tiles(s.n, s.br, s.bc, s.causal, s.window)))
    with st.expander("The measurements"):
        st.dataframe(df, hide_index=True)
