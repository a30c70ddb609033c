"""Heavy work behind the Benchmark, Block size, Correctness and Training views: cached calls into
flashviz.measure.sweep, serialised by the process-wide timing lock, and the caps that refuse a run before it starts.

Each run is a `timed_run` (flashviz.app.runs): cached on its hashable arguments (tuples, ints, strings), under the
timing lock, its progress passed on; callers add `_progress` and `_lock`. Results are tidy DataFrames.

Each run has a wall-clock budget (limits.LIVE_TIME_BUDGET_S, counted once it holds the lock): a run slower than
work_guard estimated skips its remaining rows ("not run: time budget ...", listed by drawing.not_run_ui) and lets
the next user have the lock. A result cut short that way is not kept in the cache, so asking again measures again.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd

from flashviz.app.lock import Progress
from flashviz.app.runs import timed_run
from flashviz.app.state import Settings
from flashviz.limits import (
    AUTO_BUDGET_S,
    AUTO_MAX_REPEATS,
    LIVE_INPUT_BYTES_MAX,
    LIVE_TIME_BUDGET_S,
    WORK_FLOP_MAX,
    tile_problem,
)
from flashviz.measure.guards import calls_per_row, input_bytes, request_flops
from flashviz.measure.stats import min_repeats
from flashviz.measure.sweep import cut_short, run_block_sweep, run_sweep, settle
from flashviz.measure.timing import Adaptive
from flashviz.units import format_bytes
from flashviz.vocab import FORWARD, IMPLS, NAIVE, SDPA, TILED_IMPLS, TRAINING

WARMUP = 1  # untimed calls per row in the live sweeps (run_sweep's default)
CACHE_ENTRIES = 32  # sweeps kept per cached function (a DataFrame of a few dozen rows each)

Window = tuple[int, int] | None


def work_guard(ns: tuple[int, ...], *, d: int, br: int, bc: int, batch: int, heads: int, reps: int,
               n_impls: int, training: bool = False, dtype: str = "float32") -> str | None:
    """Why a sweep is too big to run live (a sentence that says how to fix it), or None.

    Checks the tiles per call (limits.TILES_MAX), the FLOPs of the whole request (limits.WORK_FLOP_MAX) and the
    memory of one row's inputs and outputs at the largest N (limits.LIVE_INPUT_BYTES_MAX). `dtype` defaults to
    float32, the costliest for the input check (float64 inputs double as their own reference copies).
    """
    if problem := tile_problem(ns, br, bc):
        return problem
    total = request_flops(ns, d=d, batch=batch, heads=heads, n_impls=n_impls, calls=calls_per_row(reps, WARMUP),
                          training=training)
    if total > WORK_FLOP_MAX:
        return (f"This request would compute about {total / 1e12:.1f} TFLOP; the live cap is "
                f"{WORK_FLOP_MAX / 1e12:.1f} TFLOP (a minute or two on a laptop CPU). Lower the largest N, d, "
                f"batch, heads or repeats, or run `python -m flashviz bench` from a terminal.")
    worst = max(ns)
    need = input_bytes(worst, d, batch=batch, heads=heads, dtype=dtype, mode=TRAINING if training else FORWARD)
    if need > LIVE_INPUT_BYTES_MAX:
        return (f"At N = {worst} one run's tensors need {format_bytes(need)}: q, k, v, dO and the outputs "
                f"(B x H x N x d = {batch} x {heads} x {worst} x {d} = {batch * heads * worst * d:,} elements each) "
                f"and float64 copies of them for the error check. The live cap is "
                f"{format_bytes(LIVE_INPUT_BYTES_MAX)} per run. Lower batch, heads, d or the largest N, or run "
                "`python -m flashviz bench` from a terminal.")
    return None


def _any_cut_short(result: Any) -> bool:
    """Whether the time budget cut a sweep's DataFrame (or any of a tuple of them) short."""
    return any(cut_short(df) for df in (result if isinstance(result, tuple) else (result,)))


def complete(result: Any) -> bool:
    """Whether a run's result is whole (no row cut short by the time budget): only whole results are kept."""
    return not _any_cut_short(result)


def _left(budget_s: float, start: float) -> float:
    """Seconds of the run's budget still unused (>= 0)."""
    return max(0.0, budget_s - (time.perf_counter() - start))


@timed_run(keep=complete)
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


@timed_run(keep=complete)
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


@timed_run(keep=complete)
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


@timed_run(keep=complete)
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


def sweep_args(s: Settings, *, ns: tuple[int, ...] | None = None, impls: tuple[str, ...] | None = None,
               mode: str = FORWARD) -> tuple:
    """The hashable arguments of `sweep` for settings s (the Benchmark's own tile size, not the sidebar's)."""
    return (ns or s.ns, s.d, s.bench_block, s.bench_block, s.causal, s.window, impls or s.impls, s.batch, s.heads,
            s.dtype, s.device, s.threads, s.reps, mode, s.sure)


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
