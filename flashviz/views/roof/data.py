"""The Roofline view's numbers: naive, FA1 (kv_outer) and FA2 (q_outer) placed by the roofline model on the published
GPUs and on this CPU's measured roof, and the same three kernels timed here (run_sweep, on the CPU and on CUDA when
present) as points at the FLOP/s they reached.

Legend: N sequence length (N_q = N_k), d head dimension, Br = block_q, Bc = block_k, B batch, H heads, I arithmetic
intensity (FLOP/byte).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import torch

from flashviz.core.tiling import tile_schedule
from flashviz.core.validate import Window
from flashviz.limits import LIVE_TIME_BUDGET_S
from flashviz.measure.guards import TimeBudget
from flashviz.measure.progress import Progress
from flashviz.measure.roof_probe import RoofCheck, bounded, machine_roof, measure_again, with_spread
from flashviz.measure.stats import min_repeats
from flashviz.measure.sweep import run_sweep
from flashviz.model.iomodel import IOCost, io_cost
from flashviz.model.roofline import GPUS, Device, roof_lines, roofline_points
from flashviz.vocab import ALGORITHMS, DTYPE_BYTES, FULL, IMPL_LOOP_ORDER, NAIVE, OK, PARTIAL, TILED_IMPLS

RUN_IMPLS = (NAIVE, *TILED_IMPLS)  # what the Run button times
IMPL_ALGORITHM = {NAIVE: NAIVE, **IMPL_LOOP_ORDER}  # sweep name -> roofline algorithm
REPEATS = min_repeats()  # timed calls per kernel: 6, the fewest whose median has a 95% interval (for a verdict)
WARMUP = 0  # run_sweep's memory measurement calls each kernel once before it is timed: that is the warm-up
CPU_NAME = "this CPU, measured"  # the roof's legend reads "this CPU, measured roof"
CPU_TIMED = "this CPU"  # the device_name of the CPU's timed rows
TIMED = " (timed here)"  # appended to a device's name on the points the Run button measured
CPU, CUDA = "cpu", "cuda"
COST_DTYPE = "float32"  # costs() counts bytes at this dtype; the traffic sentence reads element counts only
VERDICT_COLUMNS = ["time_lo_s", "time_hi_s", "repeats", "set_aside", "threads", "threads_asked"]  # row_estimate's
TIMED_COLUMNS = ["device", "algorithm", "flops", "hbm_bytes", "intensity", "attainable_flops", "time_s",
                 "speedup_vs_naive", "measured", *VERDICT_COLUMNS]


def cpu_device(threads: int, *, progress: object = None) -> Device:
    """This CPU as a roofline Device at `threads` threads: its matmul rate and read bandwidth, each the best of
    several calls (flashviz.measure.roof_probe), measured once per thread count and raised only by a later, better
    measurement. The page measures it as a timed run (in the timing worker; `progress` is a timed run's)."""
    return replace(machine_roof(threads), name=CPU_NAME)


def with_band(rates: pd.DataFrame, check: RoofCheck | None) -> pd.DataFrame:
    """The devices' rates with this CPU's spread over its probe calls (peak_q1, peak_q3, bandwidth_q1, bandwidth_q3),
    which the chart shades under its roof; unchanged without a measured spread."""
    if check is None or check.spread is None:
        return rates
    s, out = check.spread, rates.copy()
    for column, value in (("peak_q1", s.flops.q1), ("peak_q3", s.flops.q3), ("bandwidth_q1", s.bandwidth.q1),
                          ("bandwidth_q3", s.bandwidth.q3)):
        out[column] = float("nan")
        out.loc[out["device"].eq(CPU_NAME), column] = value
    return out


def timed_roof(df: pd.DataFrame, threads: int) -> RoofCheck:
    """The CPU roof that bounds every kernel `measure_roofline` timed on the CPU: measured again if one beat it, and
    raised to what it reached if it still does (flashviz.measure.roof_probe.bounded; the RoofCheck says which).

    Example:
        >>> df = measure_roofline(64, 8, 32, 32, False, None, 1, 1, "float32", "float16", (), 1)
        >>> check = timed_roof(df, 1)
        >>> cpu = timed_points(df)
        >>> bool((cpu["attainable_flops"] <= [min(check.roof.peak("float32"), i * check.roof.bandwidth) * (1 + 1e-9)
        ...                                    for i in cpu["intensity"]]).all())
        True
    """
    cpu = timed_points(df[df["device_name"].eq(CPU_TIMED)])
    reached = {str(r.algorithm): (float(r.intensity), float(r.attainable_flops)) for r in cpu.itertuples()}
    check = with_spread(bounded(cpu_device(threads), reached, lambda: measure_again(threads)), threads)
    return replace(check, roof=replace(check.roof, name=CPU_NAME))  # with the probe calls' spread (RoofCheck.spread)


def gpu_name() -> str:
    """The CUDA device's name as PyTorch reports it (e.g. "NVIDIA H100 80GB HBM3")."""
    return torch.cuda.get_device_name(0)


def costs(n: int, d: int, br: int, bc: int, causal: bool, window: Window, batch: int, heads: int
          ) -> dict[str, IOCost]:
    """io_cost of naive, FA1 and FA2 at these settings (element counts; bytes at float32).

    Example:
        >>> c = costs(1024, 64, 64, 64, False, None, 1, 1)
        >>> c["naive"].accesses == 4 * 1024 * 64 + 4 * 1024**2  # Q, K, V, O plus S and P written and read back
        True
    """
    return {a: io_cost(a, n, n, d, br, bc, causal=causal, window=window, batch=batch, heads=heads,
                       dtype_bytes=DTYPE_BYTES[COST_DTYPE]) for a in ALGORITHMS}


def model_points(n: int, d: int, br: int, bc: int, causal: bool, window: Window, batch: int, heads: int,
                 cpu_dtype: str, gpu_dtype: str, cpu: Device) -> pd.DataFrame:
    """roofline_points on A100, H100, H200, B200 at gpu_dtype and on this CPU at cpu_dtype, with a dtype column.

    The CPU rows keep measured=False: their roof is measured, but each point is placed by the model (stars are kept
    for kernels actually timed).

    Example:
        >>> cpu = Device(CPU_NAME, {"float32": 1e11}, 1e10, None, "a fake CPU")
        >>> df = model_points(256, 64, 64, 64, True, None, 1, 1, "float32", "float16", cpu)
        >>> len(df), sorted(set(df["dtype"]))  # 3 algorithms on 4 GPUs and the CPU
        (15, ['float16', 'float32'])
    """
    kw = dict(block_q=br, block_k=bc, causal=causal, window=window, batch=batch, heads=heads)
    gpus = roofline_points(n, d, dtype=gpu_dtype, devices=GPUS, **kw).assign(dtype=gpu_dtype)
    here = roofline_points(n, d, dtype=cpu_dtype, devices=(cpu,), **kw).assign(dtype=cpu_dtype, measured=False)
    return pd.concat([gpus, here], ignore_index=True)


def device_rates(gpu_dtype: str, cpu: Device, cpu_dtype: str) -> pd.DataFrame:
    """One row per device: device, peak_flops (FLOP/s), bandwidth (bytes/s), ridge (FLOP/byte), l2_bandwidth
    (bytes/s), l2_ridge (FLOP/byte; both NaN without L2), l2_bytes (NaN without L2), dtype."""
    roofs = pd.concat([roof_lines(GPUS, dtype=gpu_dtype).assign(dtype=gpu_dtype),
                       roof_lines([cpu], dtype=cpu_dtype).assign(dtype=cpu_dtype)], ignore_index=True)
    l2 = {d.name: float(d.l2_bytes) if d.l2_bytes else float("nan") for d in (*GPUS, cpu)}
    rates = roofs.drop_duplicates("device")[["device", "peak_flops", "bandwidth", "ridge", "l2_bandwidth", "l2_ridge",
                                             "dtype"]]
    return rates.assign(l2_bytes=rates["device"].map(l2))


def computed_tiles(n: int, br: int, bc: int, causal: bool, window: Window) -> int:
    """Tiles one tiled-kernel call computes (full + partial) at these settings.

    Example:
        >>> computed_tiles(128, 32, 32, True, None)  # 4 x 4 tiles, the lower triangle and the diagonal
        10
    """
    counts = tile_schedule(n, n, br, bc, causal=causal, window=window).counts()
    return counts[FULL] + counts[PARTIAL]


def timed_points(df: pd.DataFrame | None) -> pd.DataFrame:
    """Roofline rows (measured=True) of the kernels `measure_roofline` timed: I = modelled FLOPs / modelled bytes, at
    the FLOP/s the kernel reached (FLOPs / median time), one row per (device, algorithm) that ran (none for None),
    with the median's 95% interval, timed calls, calls set aside and threads (VERDICT_COLUMNS: NaN where the rows
    carry none).

    Example:
        >>> df = pd.DataFrame({"impl": ["naive", "flash2"], "status": ["ok", "ok"], "flops": [8e9, 8e9],
        ...                    "hbm_bytes": [4e8, 1e8], "time_s": [2.0, 1.0], "device_name": ["GPU", "GPU"]})
        >>> pts = timed_points(df)
        >>> pts[["device", "algorithm", "intensity", "speedup_vs_naive"]].values.tolist()
        [['GPU (timed here)', 'naive', 20.0, 1.0], ['GPU (timed here)', 'q_outer', 80.0, 2.0]]
        >>> pts["attainable_flops"].tolist()  # FLOPs / seconds
        [4000000000.0, 8000000000.0]
    """
    rows = []
    ok = df[df["status"].astype(str).eq(OK) & df["impl"].isin(RUN_IMPLS)] if df is not None else df
    for name, mine in ([] if ok is None else ok.groupby("device_name", sort=False)):
        naive = mine.loc[mine["impl"].eq(NAIVE), "time_s"]
        for r in mine.itertuples():
            rows.append({"device": f"{name}{TIMED}", "algorithm": IMPL_ALGORITHM[r.impl], "flops": r.flops,
                         "hbm_bytes": r.hbm_bytes, "intensity": r.flops / r.hbm_bytes,
                         "attainable_flops": r.flops / r.time_s, "time_s": r.time_s,
                         "speedup_vs_naive": float(naive.iloc[0]) / r.time_s if len(naive) else float("nan"),
                         "measured": True, **{c: getattr(r, c, float("nan")) for c in VERDICT_COLUMNS}})
    return pd.DataFrame(rows, columns=TIMED_COLUMNS)


def measure_and_roof(n: int, d: int, br: int, bc: int, causal: bool, window: Window, batch: int, heads: int,
                     cpu_dtype: str, gpu_dtype: str, devices: tuple[str, ...], threads: int,
                     time_budget_s: float = LIVE_TIME_BUDGET_S, *,
                     progress: Progress | None = None) -> tuple[pd.DataFrame, RoofCheck]:
    """measure_roofline (naive, flash and flash2 here, and on CUDA), then the CPU roof that bounds what it measured
    (timed_roof: measured again if a kernel beat it): the view's timed run."""
    df = measure_roofline(n, d, br, bc, causal, window, batch, heads, cpu_dtype, gpu_dtype, devices, threads,
                          time_budget_s, progress=progress)
    return df, timed_roof(df, threads)


def measure_roofline(n: int, d: int, br: int, bc: int, causal: bool, window: Window, batch: int, heads: int,
                     cpu_dtype: str, gpu_dtype: str, devices: tuple[str, ...], threads: int,
                     time_budget_s: float = LIVE_TIME_BUDGET_S, *,
                     progress: Progress | None = None) -> pd.DataFrame:
    """Time naive, flash and flash2 at one setting with run_sweep (REPEATS calls each, interleaved, the memory call
    as warm-up): on the CPU at cpu_dtype, and on CUDA at gpu_dtype when "cuda" is in devices, both within one time
    budget. run_sweep's rows plus device_name (CPU_TIMED or the GPU's name).

    Example:
        >>> df = measure_roofline(64, 8, 32, 32, False, None, 1, 1, "float32", "float16", (), 1)
        >>> df["impl"].tolist(), set(df["status"]), set(df["device_name"])
        (['naive', 'flash', 'flash2'], {'ok'}, {'this CPU'})
    """
    runs = [(CPU, cpu_dtype), *([(CUDA, gpu_dtype)] if CUDA in devices else [])]
    frames = []
    clock = TimeBudget(time_budget_s)  # one budget for every device
    for i, (device, dtype) in enumerate(runs):
        def step(done: int, total: int, what: str, i: int = i, device: str = device) -> None:
            if progress is not None:
                progress(i * len(RUN_IMPLS) + done, len(runs) * len(RUN_IMPLS), f"{device}: {what}")

        df = run_sweep([n], d=d, block_q=br, block_k=bc, causal=causal, window=window, impls=RUN_IMPLS,
                       batch=batch, heads=heads, dtype=dtype, device=device, threads=threads, repeats=REPEATS,
                       warmup=WARMUP, progress=step,
                       time_budget_s=max(0.0, time_budget_s - (clock.now() - clock.start)))
        frames.append(df.assign(device_name=gpu_name() if device == CUDA else CPU_TIMED))
    return pd.concat(frames, ignore_index=True)
