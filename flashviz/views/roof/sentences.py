"""What the Roofline view says, in words: each sentence computed from the DataFrames its charts draw (the model's
points, the roofs, the timed points) and from the roof check of flashviz.measure.roof_probe, so that a claim and the
chart next to it cannot disagree. No widgets here: flashviz.views.roof.page draws the view.

Legend: N sequence length (N_q = N_k), d head dimension, Br = block_q, Bc = block_k, B batch, H heads,
I arithmetic intensity (FLOP/byte).
"""

from __future__ import annotations

import pandas as pd

from flashviz.measure.roof_probe import COPY_BYTES, MATMUL_N, PROBE_REPEATS, RoofCheck
from flashviz.measure.verdict import Verdict, cell, compare, row_estimate
from flashviz.model.iomodel import IOCost
from flashviz.model.roofline import COMPUTE, MEMORY, Device
from flashviz.units import MIB, and_list, format_bytes
from flashviz.views.roof.data import CPU_NAME, CPU_TIMED, REPEATS, TIMED
from flashviz.views.roof.figures import SHORT
from flashviz.vocab import ALGORITHMS, DTYPE_BYTES, KV_OUTER, NAIVE, Q_OUTER

GIGA = 1e9  # FLOP/s per GFLOP/s, bytes/s per GB/s


def x(v: float) -> str:
    """A speedup: '1.31×'."""
    return f"{v:.2f}×"


def speed_verdict(by: pd.DataFrame, algorithm: str) -> Verdict | None:
    """Naive's timed row against a tiled kernel's (rows of timed_points by algorithm) by the verdict rule: its ratio is
    naive's time over the kernel's, the kernel's speed over naive's; None where either has no interval."""
    a, b = row_estimate(by.loc[NAIVE]), row_estimate(by.loc[algorithm])
    return None if a is None or b is None else compare(a, b, (SHORT[NAIVE], SHORT[algorithm]))


def speed_cell(by: pd.DataFrame, algorithm: str) -> str:
    """A tiled kernel's measured speed over naive as a verdict cell: the ratio with its interval only where the two
    medians' intervals separate, else "too close to call" and the interval (no interval: said so, no ratio)."""
    v = speed_verdict(by, algorithm)
    return "no interval" if v is None else cell(v)


def g3(v: float) -> str:
    return f"{v:.3g}"


def threads_text(threads: int) -> str:
    return f"{threads} thread{'' if threads == 1 else 's'}"


def settings_text(n: int, d: int, br: int, bc: int, batch: int, heads: int, causal: bool,
                  window: tuple[int, int] | None) -> str:
    """The sidebar settings the view shows, in one phrase.

    Example:
        >>> settings_text(1024, 64, 64, 64, 1, 4, True, None)
        'N = 1024, d = 64, Br = 64, Bc = 64, B = 1, H = 4, causal'
    """
    mask = ["causal"] if causal else []
    mask += [f"window ({window[0]}, {window[1]})"] if window is not None else []
    return f"N = {n}, d = {d}, Br = {br}, Bc = {bc}, B = {batch}, H = {heads}, {' + '.join(mask) or 'no mask'}"


def regime_word(bound: str, gpu: bool = True) -> str:
    """The regime in the view's words: "HBM" for a GPU's memory ("memory" for this CPU's RAM), "L2", "compute".

    Example:
        >>> regime_word("memory"), regime_word("memory", gpu=False), regime_word("L2")
        ('HBM', 'memory', 'L2')
    """
    return ("HBM" if gpu else "memory") if bound == MEMORY else bound


def traffic_md(phrase: str, gpu_dtype: str, cost: dict[str, IOCost]) -> str:
    """Bytes and FLOPs of the three algorithms, and why FA2 moves fewer (or more) bytes than FA1."""
    size = DTYPE_BYTES[gpu_dtype]
    naive, fa1, fa2 = (cost[a] for a in ALGORITHMS)
    work = (f"all three do {naive.flops / 1e9:.3g} GFLOP of matmuls" if naive.flops == fa1.flops == fa2.flops else
            f"naive does {naive.flops / 1e9:.3g} GFLOP (every score, masked afterwards), FA1 {fa1.flops / 1e9:.3g} "
            f"and FA2 {fa2.flops / 1e9:.3g} GFLOP (masked tiles are skipped)")
    moved = ", ".join(f"{SHORT[a]} {format_bytes(cost[a].accesses * size)}" for a in ALGORITHMS)
    fewer = "fewer" if fa2.accesses < fa1.accesses else "more"
    return (f"**Work and traffic.** At {phrase}, {work}; in {gpu_dtype} they move: {moved} "
            f"to and from the chip (through L2; what of it reaches HBM is in the table below). Naive writes S and P "
            f"and reads them back; the tiled kernels keep each tile of S and P on chip.\n\n"
            f"**Why FA2 moves {fewer} bytes than FA1 here.** FA1's outer loop runs over K/V blocks: it reads Q, O, l, "
            f"m again on every pass and writes O, l, m back ({fa1.reads - fa1.kv_reads:,} elements read besides K and "
            f"V, {fa1.writes:,} written). FA2's outer loop runs over Q blocks and keeps O_i, l_i, m_i on chip until "
            f"its row is done: it reads each Q_i once and writes O and L once ({fa2.reads - fa2.kv_reads:,} read "
            f"besides K and V, {fa2.writes:,} written), and pays instead by reading K and V once per Q block "
            f"({fa2.kv_reads:,} elements of K and V against FA1's {fa1.kv_reads:,}).")


def bound_table_md(points: pd.DataFrame, rates: pd.DataFrame) -> str:
    """Markdown table: per device its ridge points (HBM, and L2 where the model has one) and, per algorithm, the
    regime that bounds it with its intensity per HBM byte (and per L2 byte)."""
    by_device = rates.set_index("device")
    lines = ["| device | dtype | ridge: HBM · L2 | naive | FA1 | FA2 |", "|---|---|---|---|---|---|"]
    for device, mine in points.groupby("device", sort=False):
        by = mine.set_index("algorithm")
        gpu = device != CPU_NAME
        l2_ridge = by_device.at[device, "l2_ridge"] if "l2_ridge" in by_device else float("nan")
        has_l2 = pd.notna(l2_ridge)
        cells = [f"{regime_word(by.at[a, 'bound'], gpu)}-bound (I = {g3(by.at[a, 'intensity'])}"
                 + (f", L2 I = {g3(by.at[a, 'l2_intensity'])})" if has_l2 else ")") for a in ALGORITHMS]
        ridges = f"{g3(by_device.at[device, 'ridge'])}" + (f" · {g3(l2_ridge)}" if has_l2 else "")
        lines.append(f"| {device} | {mine['dtype'].iloc[0]} | {ridges} FLOP/byte | {' | '.join(cells)} |")
    return "\n".join(lines) + ("\n\nI: FLOPs per byte of HBM traffic (RAM on this CPU); L2 I: per byte through L2. "
                               "A kernel is bound by the level whose time, bytes / bandwidth or FLOPs / peak, is "
                               "the longest.")


def why_md(by: pd.DataFrame, dtype: str, gpu: bool = True, l2_bytes: float | None = None) -> str:
    """Which regime sets the predicted speedups on one device (rows: algorithms of roofline_points)."""
    if by.at[NAIVE, "bound"] == COMPUTE:
        tensor_cores = " FlashAttention runs fp16/bf16 on tensor cores: choose float16 above." if gpu else ""
        gain = ("with the same FLOPs they gain nothing" if by["flops"].nunique() == 1 else
                "the tiled kernels gain only the FLOPs they skip")
        return f"Naive is already compute-bound here at {dtype}: the FLOPs set its time, so {gain}.{tensor_cores}"
    regimes = {a: str(by.at[a, "bound"]) for a in ALGORITHMS}
    if set(regimes.values()) == {MEMORY}:
        return (f"All three are {regime_word(MEMORY, gpu)}-bound, so each speedup is the ratio of "
                f"{'HBM ' if gpu else ''}bytes moved.")
    said = ", ".join(f"{SHORT[a]} {regime_word(r, gpu)}-bound" for a, r in regimes.items())
    text = said[0].upper() + said[1:] + "."
    if l2_bytes is not None and pd.notna(l2_bytes) and "l2_hit" in by:
        fits = bool(by.at[NAIVE, "l2_hit"])
        text += (f" Naive's S and P {'fit' if fits else 'do not fit'} in the {format_bytes(float(l2_bytes))} L2"
                 + (", so it reads them back from L2." if fits else ", so it reads them back from HBM."))
    capped = [a for a in (KV_OUTER, Q_OUTER) if regimes[a] == COMPUTE]
    if capped:
        ratio = ", ".join(f"{SHORT[a]} {x(by.at[NAIVE, 'hbm_bytes'] / by.at[a, 'hbm_bytes'])}" for a in capped)
        text += (f" {' and '.join(SHORT[a] for a in capped)} reach{'es' if len(capped) == 1 else ''} the compute "
                 f"roof, so FLOPs cap the gain below the ratio of HBM bytes ({ratio}).")
    return text


def gpu_speedups_md(points: pd.DataFrame, gpu_dtype: str, rates: pd.DataFrame | None = None) -> str:
    """The predicted speedup over naive on each GPU, and which regime sets it."""
    l2 = rates.set_index("device")["l2_bytes"] if rates is not None and "l2_bytes" in rates else pd.Series(dtype=float)
    lines = [f"**Predicted speedup over naive (a model)**, naive's time / the kernel's, each "
             f"max(FLOPs / peak, HBM bytes / HBM bandwidth, L2 bytes / L2 bandwidth), at {gpu_dtype}:"]
    for device, mine in points[~points["device"].eq(CPU_NAME)].groupby("device", sort=False):
        by = mine.set_index("algorithm")
        parts = [f"{SHORT[a]} {x(by.at[a, 'speedup_vs_naive'])}" for a in (KV_OUTER, Q_OUTER)]
        lines.append(f"- **{device}**: {', '.join(parts)}. {why_md(by, gpu_dtype, l2_bytes=l2.get(device))}")
    return "\n".join(lines)


def _rate(rates: pd.Series, regime: str) -> str:
    """The rate of a regime on a device: its peak, HBM bandwidth or L2 bandwidth."""
    if regime == COMPUTE:
        return f"{rates['peak_flops'] / 1e12:.3g} TFLOP/s"
    if regime == MEMORY:
        return f"HBM {rates['bandwidth'] / 1e12:.3g} TB/s"
    return f"L2 {rates['l2_bandwidth'] / 1e12:.3g} TB/s"


def gpus_differ_md(points: pd.DataFrame, rates: pd.DataFrame) -> str:
    """Where the GPUs' predictions differ and which regime makes them differ: per kernel, the GPUs grouped by the
    regime that bounds it and that regime's rate, with the predicted time. GPUs bound by the same regime at the same
    rate predict the same time; the regime whose rate differs is what separates them."""
    gpus = points[~points["device"].eq(CPU_NAME)]
    if gpus["device"].nunique() < 2:
        return ""
    by_rate = rates.set_index("device")
    lines = ["**Why the GPUs differ, or not.** Each kernel takes the time of its slowest level:"]
    for a in ALGORITHMS:
        mine = gpus[gpus["algorithm"].eq(a)]
        groups: dict[tuple[str, str], list[tuple[str, float]]] = {}
        for r in mine.itertuples():
            key = (str(r.bound), _rate(by_rate.loc[r.device], str(r.bound)))
            groups.setdefault(key, []).append((str(r.device).split(" (")[0], float(r.time_s)))
        parts = []
        for (regime, rate), members in groups.items():
            names = and_list([n for n, _ in members])
            times = list(dict.fromkeys(f"{g3(t * 1e6)} µs" for _, t in sorted(members, key=lambda m: m[1])))
            when = " / ".join(times)
            parts.append(f"{names} {regime_word(regime)}-bound ({rate}): {when}")
        same = mine["time_s"].max() <= mine["time_s"].min() * (1 + 1e-9)
        verdict = "the same on every GPU" if same else "the GPUs differ"
        lines.append(f"- **{SHORT[a]}**, {verdict}: {'; '.join(parts)}.")
    return "\n".join(lines)


def cpu_model_md(points: pd.DataFrame, cpu: Device, dtype: str) -> str:
    """What the model predicts on this CPU, whose roof was measured."""
    by = points[points["device"].eq(CPU_NAME)].set_index("algorithm")
    model = ", ".join(f"{SHORT[a]} {x(by.at[a, 'speedup_vs_naive'])}" for a in (KV_OUTER, Q_OUTER))
    return (f"**This CPU** (measured: {cpu.peak(dtype) / GIGA:.3g} GFLOP/s fp32 matmul, {cpu.bandwidth / GIGA:.3g} "
            f"GB/s read; ridge {g3(cpu.ridge(dtype))} FLOP/byte): naive is "
            f"{regime_word(by.at[NAIVE, 'bound'], gpu=False)}-bound at {dtype} "
            f"(I = {g3(by.at[NAIVE, 'intensity'])}), and the model predicts {model}. {why_md(by, dtype, gpu=False)}")


def probe_text(threads: int) -> str:
    return (f"the best of {PROBE_REPEATS} calls of a {MATMUL_N} × {MATMUL_N} fp32 matmul and of a sum over "
            f"{COPY_BYTES // MIB} MiB, at {threads_text(threads)}")


def spread_md(check: RoofCheck) -> str:
    """How far the probe's calls spread under the best call the roof is drawn at (empty without a spread).

    Example:
        >>> from flashviz.measure.roof_probe import Spread, RoofSpread
        >>> s = RoofSpread(Spread(60e9, 50e9, 45e9, 55e9, 30e9, 7), Spread(28e9, 20e9, 12.7e9, 25e9, 10e9, 7), 2)
        >>> spread_md(RoofCheck(None, 60e9, 28e9, (), False, None, None, s)).split(": ")[1][:42]
        'the middle half of its 7 calls reached 45-'
    """
    s = check.spread
    if s is None:
        return ""
    return (f" The roof is each probe's best call: the middle half of its {s.flops.calls} calls reached "
            f"{s.flops.q1 / GIGA:.3g}-{s.flops.q3 / GIGA:.3g} GFLOP/s and {s.bandwidth.q1 / GIGA:.3g}-"
            f"{s.bandwidth.q3 / GIGA:.3g} GB/s (the slowest {s.bandwidth.lowest / GIGA:.3g} GB/s): the shaded band "
            "under the roof, how much a busy machine pulls a measurement down.")


def roof_md(check: RoofCheck, timed: pd.DataFrame, threads: int) -> str:
    """How this CPU's roof was measured, and what happened when a timed kernel beat it (measured again; raised)."""
    roof = check.roof
    text = (f"**This CPU's roof** is measured: {probe_text(threads)}, {check.probe_flops / GIGA:.3g} GFLOP/s and "
            f"{check.probe_bandwidth / GIGA:.3g} GB/s.")
    text += spread_md(check)
    if not check.beaten_by:
        return text + " Every kernel timed here is on or under it."
    by = timed.set_index("algorithm")
    over = ", ".join(f"{SHORT[a]} {by.at[a, 'attainable_flops'] / GIGA:.3g} GFLOP/s at I = {g3(by.at[a, 'intensity'])}"
                     for a in check.beaten_by)
    text += (f" The timing beat it ({over}), so the roof was measured again and keeps the best of both: "
             f"{roof.peak('float32') / GIGA:.3g} GFLOP/s and {roof.bandwidth / GIGA:.3g} GB/s"
             if check.raised_flops is None and check.raised_bandwidth is None else
             f" The timing beat it ({over}), so the roof was measured again; a kernel still beat that")
    if check.raised_flops is not None:
        text += (f": the compute roof is raised to {check.raised_flops / GIGA:.3g} GFLOP/s, the fastest rate a kernel "
                 f"reached here (the probe's {MATMUL_N}³ matmul ran slower than the kernels' own: the machine was "
                 "busy while it ran, or the kernels' shapes suit the CPU's matmul library better)")
    if check.raised_bandwidth is not None:
        text += (f"{',' if check.raised_flops is not None else ':'} the memory roof is raised to "
                 f"{check.raised_bandwidth / GIGA:.3g} GB/s: a kernel moved its modelled bytes faster than the probe "
                 "read RAM, so part of them came from the CPU's caches")
    return text + ". Every point on the chart is now on or under the roof."


def timed_md(timed: pd.DataFrame, points: pd.DataFrame, dtype: str, gpu_dtype: str, threads: int) -> str:
    """What the Run button measured: the speedups over naive and the FLOP/s reached (with the share of this CPU's
    roof at each one's intensity), per timed device."""
    lines = []
    model = points[points["device"].eq(CPU_NAME)].set_index("algorithm")
    for device, mine in timed.groupby("device", sort=False):
        by = mine.set_index("algorithm")
        cpu = device == f"{CPU_TIMED}{TIMED}"
        ran = [a for a in (KV_OUTER, Q_OUTER) if a in by.index and NAIVE in by.index]
        speed = ", ".join(f"{SHORT[a]} {speed_cell(by, a)}" for a in ran)
        rates = ", ".join(f"{SHORT[a]} {by.at[a, 'attainable_flops'] / GIGA:.3g} GFLOP/s"
                          + (f" ({by.at[a, 'attainable_flops'] / model.at[a, 'attainable_flops']:.0%})" if cpu else "")
                          for a in by.index)
        share = " (and the share of this CPU's roof at each one's intensity)" if cpu else ""
        speed = (f"speed over naive (its time / theirs, by the verdict rule), {speed}" if speed
                 else "no speedup to show (naive or the tiled kernels did not run)")
        ran_as = (f"{dtype if cpu else gpu_dtype}, {threads_text(threads)}, median of {REPEATS} calls with its 95% "
                  "interval")
        text = f"**Measured on {device.removesuffix(TIMED)}** ({ran_as}): {speed}. Reached{share}: {rates}."
        if not cpu:
            text += (" These are flashviz's PyTorch kernels (a Python loop over tiles), not flash-attn's fused CUDA "
                     "kernel; the stars on the chart show where they land.")
        lines.append(text)
    return "\n\n".join(lines)


def gap_md(timed: pd.DataFrame, points: pd.DataFrame, cpu: Device, dtype: str, tiles: int, br: int, bc: int,
           bench_block: int, bench_tiles: int) -> str:
    """Why the measured speedups differ from the predicted ones, from the numbers: the time per computed tile
    against what its FLOPs need at this CPU's roof (the rest is per-tile overhead the roofline does not count), the
    Benchmark view's wider tiles (fewer loop iterations), and the GPU roofs against this CPU's."""
    by = timed[timed["device"].eq(f"{CPU_TIMED}{TIMED}")].set_index("algorithm")
    model = points[points["device"].eq(CPU_NAME)].set_index("algorithm")
    tiled = [a for a in (KV_OUTER, Q_OUTER) if a in by.index and NAIVE in by.index]
    if not tiled:
        return ""
    parts = []
    for a in tiled:
        per_tile = by.at[a, "time_s"] / max(tiles, 1)
        need = by.at[a, "flops"] / max(tiles, 1) / cpu.peak(dtype)
        parts.append(f"{SHORT[a]} took {per_tile * 1e3:.3g} ms per computed tile, where its FLOPs need "
                     f"{need * 1e3:.3g} ms at this CPU's roof: {max(0.0, 1 - need / per_tile):.0%} of its time is "
                     "per-tile overhead")
    speeds = ", ".join(f"{SHORT[a]} measured {speed_cell(by, a)} against "
                       f"{x(model.at[a, 'speedup_vs_naive'])} predicted on this CPU's roof" for a in tiled)
    text = (f"**Predicted against measured.** {speeds}. The roofline counts FLOPs and bytes only; flashviz's kernels "
            f"are plain PyTorch, one Python loop iteration with a few small matmuls per tile ({tiles:,} computed "
            f"tiles per call at Br × Bc = {br} × {bc}): {'; '.join(parts)}.")
    if bench_tiles != tiles:
        text += (f" The Benchmark view times its own tile size, {bench_block} × {bench_block}: {bench_tiles:,} "
                 f"computed tiles per call at these settings, {tiles / max(bench_tiles, 1):.3g}× "
                 f"{'fewer' if bench_tiles < tiles else 'more'} loop iterations than here, so its speedups differ.")
    gpu = points[~points["device"].eq(CPU_NAME)]
    if len(gpu):
        first = gpu["device"].iloc[0]
        g = gpu[gpu["device"].eq(first)].set_index("algorithm")
        text += (f" The GPU bars are the model on published roofs ({first.split(' (')[0]}: naive "
                 f"{regime_word(g.at[NAIVE, 'bound'])}-bound at I = {g3(g.at[NAIVE, 'intensity'])}); on this CPU "
                 f"naive is {regime_word(model.at[NAIVE, 'bound'], gpu=False)}-bound at I = "
                 f"{g3(model.at[NAIVE, 'intensity'])} (ridge "
                 f"{g3(cpu.ridge(dtype))}), so even the model predicts less here.")
    return text
