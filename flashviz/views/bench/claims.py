"""The Benchmark view's claims: `peaks` measures each implementation's exact peak memory at the view's lengths, and
`memory_growth` says how it grows per doubling of N (standard attention about 4x, S and P being N²; the tiled kernels
at most the output's 2x).
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

from flashviz.measure import impls as runs
from flashviz.measure.memory import peak_memory_and_result
from flashviz.measure.sweep import build_configs
from flashviz.measure.timing import threads_set_to
from flashviz.units import format_bytes
from flashviz.views.claim import Result
from flashviz.vocab import (
    FLASH,
    FLASH2,
    FORWARD,
    NAIVE,
)

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.views.bench.settings import BenchSettings


NAIVE_DOUBLING = (3.5, 4.5)  # naive's peak per doubling of N: S and P grow 4x, the output 2x


TILED_DOUBLING_MAX = 2.1  # the tiled kernels' per doubling of N: at most the output's 2x (and a little slack)


def peaks(s: BenchSettings, impls: tuple[str, ...] = (NAIVE, FLASH, FLASH2)) -> dict[str, dict[int, int]]:
    """Exact peak memory (bytes above the inputs, the allocator's events) of each implementation at each of the
    Benchmark's N: the calls and seeded inputs run_sweep measures, at its tile size, B, H, d, mask and dtype.

    Args:
        s: the settings (the Benchmark's N, tile size, the sidebar's d, mask, dtype, B, H, device, threads).
        impls: the implementations measured.
    Returns:
        {impl: {N: peak bytes}}.

    Example:
        >>> from flashviz.views.bench.settings import BenchSettings
        >>> p = peaks(BenchSettings(ns=(64, 128), heads=1, d=16, bench_block=32))
        >>> p["naive"][128] > 2 * 128 * 128 * 4  # S and P, fp32
        True
    """
    out: dict[str, dict[int, int]] = {impl: {} for impl in impls}
    configs = build_configs(list(s.ns), [(s.bench_block, s.bench_block)], d=s.d, causal=s.causal, window=s.window,
                            batch=s.batch, heads=s.heads, dtype=s.dtype, device=s.device, mode=FORWARD)
    with threads_set_to(s.threads):
        for cfg in configs:
            inputs = runs.make_inputs(cfg, 0)  # run_sweep's seed
            for impl in impls:
                out[impl][cfg.n], _ = peak_memory_and_result(runs.call_fn(impl, cfg), *inputs)
    return out


def memory_growth(s: BenchSettings) -> Result:
    """Peak memory per doubling of N: naive's about 4x (S and P), the tiled kernels' at most 2x (the output).

    Args:
        s: the step's settings (as `peaks`; the Benchmark's N must double from one to the next).
    Returns:
        Result: naive_growth, fa1_growth, fa2_growth (geometric mean per doubling), n (the largest N), naive_peak
        (formatted), saving (naive over the larger tiled peak at that N), peaks (bytes, as `peaks`); holds when
        every doubling grows naive 3.5-4.5x and each tiled kernel at most 2.1x, and the saving widens with N.

    Example:
        >>> from flashviz.views.bench.settings import BenchSettings
        >>> memory_growth(BenchSettings(ns=(128, 256, 512), heads=1, d=16, bench_block=32)).holds
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

