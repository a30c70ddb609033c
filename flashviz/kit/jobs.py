"""Heavy work behind the Benchmark, Block size, Correctness and Training views: the timed runs of
flashviz.measure.jobs, run in the server's timing worker one at a time, and the caps that refuse a run before it
starts.

Each run is a `timed_run` (flashviz.kit.runs): cached on its hashable arguments (tuples, ints, strings), executed in the
timing worker after the runs queued before it, its progress passed on; run_button_ui adds `_progress`, `_worker` and
`_cancel`. Results are tidy DataFrames.

Each run has a wall-clock budget (limits.LIVE_TIME_BUDGET_S, counted once it runs): a run slower than work_guard
estimated skips its remaining rows ("not run: time budget ...", listed by drawing.not_run_ui) and lets the next user
have the worker. A result cut short that way is not kept in the cache, so asking again measures again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from flashviz.kit.runs import timed_run
from flashviz.limits import LIVE_INPUT_BYTES_MAX, WORK_FLOP_MAX, calls_per_row, tile_problem
from flashviz.measure import jobs as measure_jobs
from flashviz.measure.estimate import Speed, sweep_seconds
from flashviz.measure.guards import input_bytes, request_flops
from flashviz.measure.jobs import WARMUP, complete, repeats_of
from flashviz.measure.stats import min_repeats
from flashviz.units import format_bytes
from flashviz.vocab import FORWARD, IMPLS, NAIVE, SDPA, TILED_IMPLS, TRAINING

Window = tuple[int, int] | None

CACHE_ENTRIES = 32  # sweeps kept per cached function (a DataFrame of a few dozen rows each)

__all__ = ["WARMUP", "block_estimate", "block_sweep", "causal_pair", "complete", "correctness",
           "correctness_estimate", "repeats_of", "sweep", "sweep_args", "sweep_estimate", "work_guard"]

sweep = timed_run(measure_jobs.sweep, keep=complete)
block_sweep = timed_run(measure_jobs.block_sweep, keep=complete)
correctness = timed_run(measure_jobs.correctness, keep=complete)
causal_pair = timed_run(measure_jobs.causal_pair, keep=complete)


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


def sweep_args(s: Any, *, ns: tuple[int, ...] | None = None, impls: tuple[str, ...] | None = None,
               mode: str = FORWARD) -> tuple:
    """The hashable arguments of `sweep` for settings s (the Benchmark's own tile size, not the sidebar's)."""
    return (ns or s.ns, s.d, s.bench_block, s.bench_block, s.causal, s.window, impls or s.impls, s.batch, s.heads,
            s.dtype, s.device, s.threads, s.reps, mode, s.sure)


# ----------------------------------------------------------------------------------------------------------------------
# how long each run will take here (flashviz.measure.estimate): seconds at a measured Speed, shown before Run


def _calls(reps: int, sure: bool) -> int:
    """Timed calls a row gets: `reps`, or with `sure` at least the fewest that give a 95% interval."""
    return max(reps, min_repeats()) if sure else reps


def sweep_estimate(ns: Iterable[int], impls: Iterable[str], *, d: int, block: int, batch: int, heads: int, reps: int,
                   sure: bool, causal: bool = False, window: Window = None,
                   training: bool = False) -> Callable[[Speed], float]:
    """Seconds of `sweep` (or one half of `causal_pair`) at a measured Speed."""
    ns, impls = tuple(ns), tuple(impls)
    return lambda speed: sweep_seconds(speed, ns, impls, d=d, repeats=_calls(reps, sure), warmup=WARMUP, batch=batch,
                                       heads=heads, block_q=block, block_k=block, causal=causal, window=window,
                                       training=training)


def block_estimate(s: Any) -> Callable[[Speed], float]:
    """Seconds of `block_sweep` at the Block size view's settings: both loop orders at every tile size, then naive
    and SDPA as references."""
    def seconds(speed: Speed) -> float:
        common = dict(d=s.d, repeats=_calls(s.reps, s.sure), warmup=WARMUP, batch=s.batch, heads=s.heads,
                      causal=s.causal, window=s.window)
        return (sum(sweep_seconds(speed, (s.n,), TILED_IMPLS, block_q=b, block_k=b, **common) for b in s.blocks)
                + sweep_seconds(speed, (s.n,), (NAIVE, SDPA), **common))
    return seconds


def correctness_estimate(s: Any) -> Callable[[Speed], float]:
    """Seconds of `correctness` at the Correctness view's settings: every implementation once at every (d, N)."""
    return lambda speed: sum(sweep_seconds(speed, s.correct_ns, IMPLS, d=d, repeats=1, warmup=0, block_q=s.br,
                                           block_k=s.bc, causal=s.causal, window=s.window) for d in s.correct_ds)
