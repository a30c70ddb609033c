"""The lesson's checks (flashviz.lesson): each takes a step's settings, computes the numbers its claim states from the
same functions the step's view draws with (the tile schedule and its traces, the real kernel's on_tile events, the IO
and roofline models, exact peak memory, the masks' tile grid and torch's create_block_mask) and returns a `Result`:
those numbers and whether the claim holds at them. The decoding steps' checks are in flashviz.lesson_checks_decode.

Deterministic: no wall-clock time enters a check (peak memory comes from the allocator's exact events, the random
inputs are seeded). This module imports torch; flashviz.lesson imports it only when a check runs.

Legend: N sequence length (N_q = N_k), d head dimension, Br = block_q, Bc = block_k, B batch, H heads, M on-chip memory
(elements), H_q / H_kv query / K/V heads, g = H_q / H_kv, S splits, L_s a split's logsumexp.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import TYPE_CHECKING

from flashviz.core.tiling import tile_schedule
from flashviz.lesson import Result
from flashviz.mask_presets import mask_settings
from flashviz.measure import impls as runs
from flashviz.measure.maskdata import mask_data, spec_matches_torch
from flashviz.measure.maskview import NO_SCORE, MaskSpec
from flashviz.measure.memory import peak_memory_and_result
from flashviz.measure.sweep import build_configs
from flashviz.measure.timing import threads_set_to
from flashviz.measure.trace import pick_row, row_trace, schedule_trace
from flashviz.model.iomodel import hbm_vs_memory
from flashviz.model.roofline import GPUS, H100, MEMORY, roofline_points
from flashviz.model.training import recompute_table
from flashviz.units import format_bytes
from flashviz.vocab import (
    ALGORITHMS,
    DTYPE_BYTES,
    FLASH,
    FLASH2,
    FORWARD,
    FULL,
    KV_OUTER,
    LOOP_ORDER_SHORT,
    NAIVE,
    PARTIAL,
    Q_OUTER,
    SKIPPED,
)

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.ui.state import Settings

LSE_TOL = 1e-5  # |L_kernel - L_exact| allowed in float32 (scores of order 1, a few ulps of a sum of exps)
M_EXPONENTS = range(10, 23)  # the IO model view's on-chip memories: M = 2^10 .. 2^22 elements
HALVES = (0.45, 0.55)  # a doubling of M "halves" the accesses when it multiplies them by a factor in this range
NAIVE_DOUBLING = (3.5, 4.5)  # naive's peak per doubling of N: S and P grow 4x, the output 2x
TILED_DOUBLING_MAX = 2.1  # the tiled kernels' per doubling of N: at most the output's 2x (and a little slack)
CAUSAL_SHARE = (0.5, 0.55)  # tiles a causal mask computes: (Tr + 1) / (2 Tr) of them, just over half


def tiles_fate(s: Settings) -> Result:
    """The tile map's fates before Play: the tile schedule's counts (every tile classified, none computed yet).

    Args:
        s: the step's settings (flashviz.ui.state.Settings: N, Br, Bc, the causal mask and window are read).
    Returns:
        Result: tiles, computed, full, partial, skipped; holds when some tile is skipped and every partial tile is on
        the diagonal.

    Example:
        >>> from flashviz.lesson import INTRO, step_settings
        >>> tiles_fate(step_settings(INTRO.steps[0])).values["computed"]
        10
    """
    sched = tile_schedule(s.n, s.n, s.br, s.bc, causal=s.causal, window=s.window)
    c, grid = sched.counts(), sched.status_grid()
    values = {"tiles": sum(c.values()), "computed": c[FULL] + c[PARTIAL], "full": c[FULL], "partial": c[PARTIAL],
              "skipped": c[SKIPPED]}
    off_diagonal = [(i, j) for i, row in enumerate(grid) for j, fate in enumerate(row) if fate == PARTIAL and i != j]
    return Result.of(values, {"no tile is skipped": not c[SKIPPED], "a partial tile is off the diagonal": bool(
        off_diagonal)})


def online_softmax(s: Settings) -> Result:
    """The row inspector's row (picked as the page picks it) through the real kernel, in every loop order shown: the
    rescales, l shrinking where m grew, and the kernel's logsumexp against the exact one.

    Args:
        s: the step's settings (N, d, Br, Bc, mask, dtype, loop order, row and automatic row are read).
    Returns:
        Result: row, rescales, tiles (of the row), lse (the kernel's L), exact (m + log l over the whole row); holds
        when the row rescales, every factor is below 1 exactly where m grew, l shrinks there, and L is exact.

    Example:
        >>> from flashviz.lesson import INTRO, step_settings
        >>> r = online_softmax(step_settings(INTRO.steps[1]))
        >>> r.holds, r.values["row"], r.values["rescales"]
        (True, 15, 3)
    """
    pick = pick_row(s.n, s.d, s.br, s.bc, causal=s.causal, window=s.window, dtype=s.dtype, near=s.row) \
        if s.autorow else None
    row = pick.row if pick else s.row
    traces = [row_trace(s.n, s.d, s.br, s.bc, row=row, causal=s.causal, window=s.window, loop_order=order,
                        dtype=s.dtype) for order in s.loop_orders]
    first = traces[0]
    values = {"row": row, "rescales": first.rescales, "tiles": len(first.step), "lse": first.lse_kernel,
              "exact": first.m_exact + math.log(first.l_exact)}
    failures = {"the row never rescales": first.rescales < 1}
    for tr in traces:
        later = list(zip(tr.factor, tr.grew, tr.l_rescaled, tr.l_before, strict=True))[1:]  # the first tile sets m
        failures[f"{tr.loop_order}: a factor below 1 where m did not grow, or not below 1 where it did"] = any(
            (f < 1) != g for f, g, _, _ in later)
        failures[f"{tr.loop_order}: l did not shrink where m grew"] = any(a >= b for _, g, a, b in later if g)
        failures[f"{tr.loop_order}: L differs from the exact logsumexp"] = not abs(
            tr.lse_kernel - (tr.m_exact + math.log(tr.l_exact))) <= LSE_TOL
        failures[f"{tr.loop_order}: a different number of rescales"] = tr.rescales != first.rescales
    return Result.of(values, failures)


def causal_halves(s: Settings) -> Result:
    """Tiles computed and the first loop order's HBM traffic per head (the How it works counters) with the page's
    causal mask and without any mask.

    Args:
        s: the step's settings (N, d, Br, Bc, mask, dtype, loop order are read).
    Returns:
        Result: computed, tiles, share, skipped, order (FA1 / FA2), traffic, unmasked (formatted bytes), ratio; holds
        when the mask is causal alone, about half the tiles are computed, only tiles above the diagonal are skipped
        and the traffic falls.

    Example:
        >>> from flashviz.lesson import INTRO, step_settings
        >>> r = causal_halves(step_settings(INTRO.steps[2]))
        >>> r.holds, r.values["computed"], r.values["traffic"]
        (True, 136, '7.3 MiB')
    """
    order = s.loop_orders[0]
    masked = schedule_trace(s.n, s.br, s.bc, causal=s.causal, window=s.window, loop_order=order, d=s.d,
                            dtype_bytes=DTYPE_BYTES[s.dtype])
    plain = schedule_trace(s.n, s.br, s.bc, loop_order=order, d=s.d, dtype_bytes=DTYPE_BYTES[s.dtype])
    computed, tiles = len(masked.computed_steps()), masked.steps
    sched = tile_schedule(s.n, s.n, s.br, s.bc, causal=s.causal, window=s.window)
    skipped_below = [t for t in sched if t.status == SKIPPED and t.k_block <= t.q_block]
    traffic, unmasked = masked.hbm_bytes[-1], plain.hbm_bytes[-1]
    values = {"computed": computed, "tiles": tiles, "share": computed / tiles, "skipped": tiles - computed,
              "order": LOOP_ORDER_SHORT[order], "traffic": format_bytes(traffic), "unmasked": format_bytes(unmasked),
              "ratio": traffic / unmasked}
    return Result.of(values, {"the mask is not causal alone": not s.causal or s.window is not None,
                            "a skipped tile is on or below the diagonal": bool(skipped_below),
                            "not about half the tiles": not CAUSAL_SHARE[0] <= computed / tiles <= CAUSAL_SHARE[1],
                            "the traffic does not fall": traffic >= unmasked})


def mask_spec(s: Settings) -> MaskSpec:
    """The Masks view's mask from its settings: each setting of flashviz.mask_presets' table fills its field.

    Example:
        >>> from flashviz.ui.state import Settings
        >>> mask_spec(Settings()).presets
        ('document', 'causal')
    """
    return MaskSpec(**{p.key: getattr(s, url_key) for url_key, p in mask_settings().items()})


def masks_tiles(s: Settings) -> Result:
    """The Masks view's tile grid of its mask, and its BlockMask against torch's create_block_mask.

    Args:
        s: the step's settings (N, Br, Bc, H and the Masks view's own settings are read).
    Returns:
        Result: docs (packed documents), n, computed, tiles, share, visible (fraction of pairs), equal ("yes" /
        "no"); holds when the mask is documents AND causal, some tile is skipped and the BlockMask equals torch's.

    Example:
        >>> from flashviz.lesson import INTRO, step_settings
        >>> masks_tiles(step_settings(INTRO.steps[3])).values["computed"]
        55
    """
    spec = mask_spec(s)
    data = mask_data(spec, s.n, s.br, s.bc, s.heads)
    equal = spec_matches_torch(replace(spec, score=NO_SCORE), s.n, s.br, s.bc)
    g = data.grid
    values = {"docs": len(data.doc_lengths), "n": s.n, "computed": g.computed, "tiles": g.tiles,
              "share": g.computed / g.tiles, "visible": data.elements.visible_fraction, "equal": "yes" if equal else
              "no"}
    return Result.of(values, {"the mask is not documents AND causal": spec.presets != ("document", "causal")
                            or spec.combine != "and", "no tile is skipped": g.computed == g.tiles,
                            "the BlockMask differs from create_block_mask": not equal})


def io_passes(s: Settings) -> Result:
    """The IO model's curves: standard attention against M, FA1's and FA2's fall with M and their flat part.

    Args:
        s: the step's settings (N, d, mask, dtype, B, H are read).
    Returns:
        Result: naive (millions of accesses), flat (the first M >= 4dN), fa1, fa2 (millions there), fa1_ratio,
        fa2_ratio (at the first doubling of M); holds when standard attention is flat, both flash curves halve at
        the first doubling, never rise and are flat from 4dN on, and FA2 is never above FA1.

    Example:
        >>> from flashviz.lesson import INTRO, step_settings
        >>> r = io_passes(step_settings(INTRO.steps[4]))
        >>> r.holds, r.values["flat"], round(r.values["naive"], 1)
        (True, 1048576, 68.2)
    """
    ms = tuple(2**e for e in M_EXPONENTS)
    df = hbm_vs_memory(ms, s.n, s.d, algorithms=ALGORITHMS, causal=s.causal, window=s.window, batch=s.batch,
                       heads=s.heads, dtype_bytes=DTYPE_BYTES[s.dtype])
    curves = {a: df[df["algorithm"].astype(str).eq(a)].set_index("M")["accesses"].astype(float).sort_index()
              for a in ALGORITHMS}
    flat = next(m for m in ms if m >= 4 * s.d * s.n)
    values = {"naive": float(curves[NAIVE].iloc[0]) / 1e6, "flat": flat,
              "fa1": float(curves[KV_OUTER].loc[flat]) / 1e6, "fa2": float(curves[Q_OUTER].loc[flat]) / 1e6}
    failures = {"standard attention moves with M": curves[NAIVE].nunique() != 1,
                "FA2 is above FA1 somewhere": bool((curves[Q_OUTER] > curves[KV_OUTER]).any())}
    for a, key in ((KV_OUTER, "fa1"), (Q_OUTER, "fa2")):
        c = curves[a]
        values[f"{key}_ratio"] = float(c.iloc[1] / c.iloc[0])
        failures[f"{key} does not halve at the first doubling"] = not HALVES[0] <= c.iloc[1] / c.iloc[0] <= HALVES[1]
        failures[f"{key} rises somewhere"] = any(b > a_ for a_, b in itertools.pairwise(c))
        failures[f"{key} is not flat from 4dN"] = c.loc[ms[ms.index(flat) - 1]] <= c.loc[flat] or \
            c.loc[flat:].nunique() != 1
    return Result.of(values, failures)


def roofline_gpu(s: Settings) -> Result:
    """The roofline model's points on the published GPUs at the view's GPU dtype (the CPU's measured roof does not
    enter): naive's intensity against the H100's ridge, and the predicted speedups there.

    Args:
        s: the step's settings (N, d, Br, Bc, mask, B, H and the GPU dtype are read).
    Returns:
        Result: gpu, dtype, intensity (naive's FLOP/byte), ridge (FLOP/byte), fa1, fa2 (predicted speedups on the
        H100); holds when naive is memory-bound on every GPU and FA2 beats FA1 beats naive on each.

    Example:
        >>> from flashviz.lesson import INTRO, step_settings
        >>> r = roofline_gpu(step_settings(INTRO.steps[5]))
        >>> r.holds, round(r.values["fa2"], 2)
        (True, 3.94)
    """
    df = roofline_points(s.n, s.d, block_q=s.br, block_k=s.bc, causal=s.causal, window=s.window, batch=s.batch,
                         heads=s.heads, dtype=s.gpu_dtype, devices=GPUS)
    h100 = df[df["device"].eq(H100.name)].set_index("algorithm")
    values = {"gpu": H100.name.split(" (")[0], "dtype": s.gpu_dtype,
              "intensity": float(h100.at[NAIVE, "intensity"]), "ridge": H100.ridge(s.gpu_dtype),
              "fa1": float(h100.at[KV_OUTER, "speedup_vs_naive"]), "fa2": float(h100.at[Q_OUTER, "speedup_vs_naive"])}
    naive = df[df["algorithm"].eq(NAIVE)]
    by = df.pivot(index="device", columns="algorithm", values="speedup_vs_naive")
    return Result.of(values, {"naive is compute-bound on a GPU": not naive["bound"].eq(MEMORY).all(),
                            "FA2 is not predicted faster than FA1 on every GPU": not (by[Q_OUTER] > by[KV_OUTER]).all(),
                            "FA1 is not predicted faster than naive on every GPU": not (by[KV_OUTER] > 1).all()})


def peaks(s: Settings, impls: tuple[str, ...] = (NAIVE, FLASH, FLASH2)) -> dict[str, dict[int, int]]:
    """Exact peak memory (bytes above the inputs, the allocator's events) of each implementation at each of the
    Benchmark's N: the calls and seeded inputs run_sweep measures, at its tile size, B, H, d, mask and dtype.

    Args:
        s: the settings (the Benchmark's N, tile size, the sidebar's d, mask, dtype, B, H, device, threads).
        impls: the implementations measured.
    Returns:
        {impl: {N: peak bytes}}.

    Example:
        >>> from flashviz.ui.state import Settings
        >>> p = peaks(Settings(ns=(64, 128), heads=1, d=16, bblock=32))
        >>> p["naive"][128] > 2 * 128 * 128 * 4  # S and P, fp32
        True
    """
    out: dict[str, dict[int, int]] = {impl: {} for impl in impls}
    configs = build_configs(list(s.ns), [(s.bblock, s.bblock)], d=s.d, causal=s.causal, window=s.window,
                            batch=s.batch, heads=s.heads, dtype=s.dtype, device=s.device, mode=FORWARD)
    with threads_set_to(s.threads):
        for cfg in configs:
            inputs = runs.make_inputs(cfg, 0)  # run_sweep's seed
            for impl in impls:
                out[impl][cfg.n], _ = peak_memory_and_result(runs.call_fn(impl, cfg), *inputs)
    return out


def memory_growth(s: Settings) -> Result:
    """Peak memory per doubling of N: naive's about 4x (S and P), the tiled kernels' at most 2x (the output).

    Args:
        s: the step's settings (as `peaks`; the Benchmark's N must double from one to the next).
    Returns:
        Result: naive_growth, fa1_growth, fa2_growth (geometric mean per doubling), n (the largest N), naive_peak
        (formatted), saving (naive over the larger tiled peak at that N), peaks (bytes, as `peaks`); holds when
        every doubling grows naive 3.5-4.5x and each tiled kernel at most 2.1x, and the saving widens with N.

    Example:
        >>> from flashviz.ui.state import Settings
        >>> memory_growth(Settings(ns=(128, 256, 512), heads=1, d=16, bblock=32)).holds
        True
    """
    p = peaks(s)
    ns = sorted(p[NAIVE])
    growth = {impl: {b: p[impl][b] / p[impl][a] for a, b in itertools.pairwise(ns)} for impl in p}
    mean = {impl: math.prod(g.values()) ** (1 / len(g)) for impl, g in growth.items()}  # geometric: per doubling
    saving = {n: min(p[NAIVE][n] / p[impl][n] for impl in (FLASH, FLASH2)) for n in ns}
    values = {"naive_growth": mean[NAIVE], "fa1_growth": mean[FLASH], "fa2_growth": mean[FLASH2], "n": ns[-1],
              "naive_peak": format_bytes(p[NAIVE][ns[-1]]), "saving": saving[ns[-1]], "peaks": p}
    return Result.of(values, {
        "the N are not successive doublings": any(b != 2 * a for a, b in itertools.pairwise(ns)) or len(ns) < 2,
        "naive does not grow about 4x per doubling": not all(NAIVE_DOUBLING[0] <= g <= NAIVE_DOUBLING[1]
                                                             for g in growth[NAIVE].values()),
        "a tiled kernel grows more than 2x per doubling": not all(1 < g <= TILED_DOUBLING_MAX for impl in
                                                                  (FLASH, FLASH2) for g in growth[impl].values()),
        "the saving does not widen with N": list(saving.values()) != sorted(saving.values())})


def training_recompute(s: Settings) -> Result:
    """The Training view's price of recomputation at its largest N: P kept against L, and the extra FLOPs.

    Args:
        s: the step's settings (the Benchmark's N and tile size, the sidebar's d, mask, dtype, B, H).
    Returns:
        Result: batch, heads, n, dtype, p and lse (formatted bytes kept), extra (fraction of backward FLOPs added),
        gflop (added); holds when P is B H N² elements, L is B H N fp32 values and the extra is a quarter.

    Example:
        >>> from flashviz.lesson import INTRO, step_settings
        >>> training_recompute(step_settings(INTRO.steps[7])).values["p"]
        '64.0 MiB'
    """
    table = recompute_table(s.ns, s.d, batch=s.batch, heads=s.heads, block_q=s.bblock, block_k=s.bblock,
                            causal=s.causal, window=s.window, dtype=s.dtype)
    last = table.loc[table["N"].idxmax()]
    n = int(last["N"])
    values = {"batch": s.batch, "heads": s.heads, "n": n, "dtype": s.dtype, "p": format_bytes(last["stored_p_bytes"]),
              "lse": format_bytes(last["stored_lse_bytes"]), "extra": float(last["extra_backward_fraction"]),
              "gflop": float(last["extra_flops"]) / 1e9}
    return Result.of(values, {
        "P is not B H N^2 elements": int(last["stored_p_bytes"]) != s.batch * s.heads * n * n * DTYPE_BYTES[s.dtype],
        "L is not B H N fp32 values": int(last["stored_lse_bytes"]) != s.batch * s.heads * n * 4,
        "recomputing is not one matmul in four": float(last["extra_backward_fraction"]) != 0.25})
