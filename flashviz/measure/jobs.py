"""The timed runs behind the Benchmark, Block size, Correctness and Training views and `flashviz bench`: each a
sweep of flashviz.measure.sweep within a wall-clock time budget, its progress reported after each configuration.

They run in the timing worker (flashviz.measure.worker), the dashboard's through flashviz.kit.jobs and the command
line's through flashviz.cli, so both measure the same way: in a process of its own, at most the threads the cores
other work leaves free, calls the machine disturbed set aside. A run slower than planned skips its remaining rows
("not run: time budget ...") and ends; `complete` tells whether a result is whole (only whole results are cached).

Streamlit-free and importable in the worker: nothing of the dashboard comes with it.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd

from flashviz.limits import AUTO_BUDGET_S, AUTO_MAX_REPEATS, LIVE_TIME_BUDGET_S
from flashviz.measure.progress import Progress
from flashviz.measure.stats import min_repeats
from flashviz.measure.sweep import cut_short, run_block_sweep, run_sweep, settle
from flashviz.measure.timing import Adaptive
from flashviz.vocab import FORWARD, IMPLS, NAIVE, SDPA, TILED_IMPLS

WARMUP = 1  # untimed calls per row in the live sweeps (run_sweep's default)

Window = tuple[int, int] | None


def _any_cut_short(result: Any) -> bool:
    """Whether the time budget cut a sweep's DataFrame (or any of a tuple of them) short."""
    return any(cut_short(df) for df in (result if isinstance(result, tuple) else (result,)))


def complete(result: Any) -> bool:
    """Whether a run's result is whole (no row cut short by the time budget): only whole results are kept."""
    return not _any_cut_short(result)


def _left(budget_s: float, start: float) -> float:
    """Seconds of the run's budget still unused (>= 0)."""
    return max(0.0, budget_s - (time.perf_counter() - start))


def sweep(ns: tuple[int, ...], d: int, br: int, bc: int, causal: bool, window: Window, impls: tuple[str, ...],
          batch: int, heads: int, dtype: str, device: str, threads: int, reps: int, mode: str = FORWARD,
          sure: bool = False, time_budget_s: float = LIVE_TIME_BUDGET_S,
          progress: Progress | None = None) -> pd.DataFrame:
    """run_sweep over N, a timed_run (cached, under the timing lock); all N within time_budget_s.

    One run_sweep per N, so that `progress` gets the rows measured so far (its fourth argument) after each N. With
    `sure`, each N is timed until its medians are known (repeats_of)."""
    repeats = repeats_of(reps, sure, len(ns))
    frames: list[pd.DataFrame] = []
    used = 0.0  # seconds of the budget the earlier N took
    if sure:  # every rerun timed in the same allocator state (measure.sweep.settle)
        settle(ns, d=d, block_q=br, block_k=bc, causal=causal, window=window, impls=impls, batch=batch,
               heads=heads, dtype=dtype, device=device, threads=threads, mode=mode)
    for i, n in enumerate(ns):
        def report(done: int, total: int, what: str, i: int = i) -> None:  # done counts rows of this N
            if progress is not None:
                progress(i * len(impls) + done, len(ns) * len(impls), what)

        start = time.perf_counter()
        frames.append(run_sweep([n], d=d, block_q=br, block_k=bc, causal=causal, window=window, impls=impls,
                                batch=batch, heads=heads, dtype=dtype, device=device, threads=threads,
                                repeats=repeats, mode=mode, warmup=WARMUP, progress=report,
                                time_budget_s=max(0.0, time_budget_s - used)))
        used += time.perf_counter() - start
        if progress is not None:
            progress((i + 1) * len(impls), len(ns) * len(impls), f"N = {n} done",
                     pd.concat(frames, ignore_index=True))
    df = pd.concat(frames, ignore_index=True)
    df.attrs = frames[-1].attrs
    return df


def block_sweep(n: int, blocks: tuple[int, ...], d: int, causal: bool, window: Window, batch: int, heads: int,
                dtype: str, device: str, threads: int, reps: int, sure: bool = False,
                time_budget_s: float = LIVE_TIME_BUDGET_S,
                progress: Progress | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """run_block_sweep of the tiled kernels (both loop orders) at one N, plus naive and SDPA at that N as reference
    lines; both share one time budget. With `sure`, each block size is timed until its medians are known."""
    repeats = repeats_of(reps, sure, len(blocks) + 1)
    if sure:  # every rerun timed in the same allocator state (measure.sweep.settle)
        settle([n], d=d, causal=causal, window=window, impls=(NAIVE, SDPA), batch=batch, heads=heads,
               dtype=dtype, device=device, threads=threads)
    start = time.perf_counter()
    tiled = run_block_sweep(n, list(blocks), d=d, causal=causal, window=window, impls=TILED_IMPLS,
                            batch=batch, heads=heads, dtype=dtype, device=device, threads=threads,
                            repeats=repeats, warmup=WARMUP, progress=progress, time_budget_s=time_budget_s)
    reference = run_sweep([n], d=d, causal=causal, window=window, impls=(NAIVE, SDPA), batch=batch,
                          heads=heads, dtype=dtype, device=device, threads=threads, repeats=repeats,
                          warmup=WARMUP, time_budget_s=_left(time_budget_s, start))
    return tiled, reference


def correctness(ds: tuple[int, ...], ns: tuple[int, ...], br: int, bc: int, causal: bool, window: Window,
                dtype: str, device: str, threads: int, time_budget_s: float = LIVE_TIME_BUDGET_S,
                progress: Progress | None = None) -> pd.DataFrame:
    """max_abs_err of every implementation against SDPA in float64, for each (d, N): run_sweep with one repeat;
    every d shares one time budget."""
    total = len(ds)
    frames = []
    start = time.perf_counter()
    for i, d in enumerate(ds):
        if progress is not None:
            progress(i, total, f"d = {d}")
        frames.append(run_sweep(list(ns), d=d, block_q=br, block_k=bc, causal=causal, window=window,
                                impls=IMPLS, dtype=dtype, device=device,
                                threads=threads, repeats=1, warmup=0, time_budget_s=_left(time_budget_s, start)))
    if progress is not None:
        progress(total, total, "done")
    return pd.concat(frames, ignore_index=True)


def causal_pair(n: int, d: int, block: int, impls: tuple[str, ...], batch: int, heads: int, dtype: str, device: str,
                threads: int, reps: int, sure: bool = False, time_budget_s: float = LIVE_TIME_BUDGET_S,
                progress: Progress | None = None) -> pd.DataFrame:
    """run_sweep at one N without and with the causal mask (rows tagged by the "causal" column); one time budget."""
    repeats = repeats_of(reps, sure, 2)
    frames = []
    if sure:  # every rerun timed in the same allocator state (measure.sweep.settle)
        settle([n], d=d, block_size=block, impls=impls, batch=batch, heads=heads, dtype=dtype, device=device,
               threads=threads)
    start = time.perf_counter()
    for i, causal in enumerate((False, True)):
        def report(done: int, total: int, what: str, i: int = i) -> None:
            if progress is not None:
                progress(i * len(impls) + done, 2 * len(impls), f"{'causal' if i else 'no mask'}: {what}")

        frames.append(run_sweep([n], d=d, block_q=block, block_k=block, causal=causal, impls=impls, batch=batch,
                                heads=heads, dtype=dtype, device=device, threads=threads, repeats=repeats,
                                warmup=WARMUP, progress=report, time_budget_s=_left(time_budget_s, start)))
    return pd.concat(frames, ignore_index=True)


def repeats_of(reps: int, sure: bool, configs: int) -> int | Adaptive:
    """The repeats a run times each configuration with: `reps` calls; or, `sure`, until every median's 95% interval is
    within +-5% of it (at least max(reps, 6) calls; the run's AUTO_BUDGET_S shared equally by its configurations).

    Example:
        >>> repeats_of(3, False, 3), repeats_of(3, True, 4).min_repeats, repeats_of(3, True, 4).budget_s
        (3, 6, 2.5)
    """
    if not sure:
        return reps
    return Adaptive(budget_s=AUTO_BUDGET_S / max(1, configs), min_repeats=max(reps, min_repeats()),
                    max_repeats=AUTO_MAX_REPEATS)
