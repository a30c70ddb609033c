"""Sweeps: run many attention configurations and collect one tidy pandas DataFrame, one row per (impl, config).

Each row holds the time (median, its 95% interval and IQR of repeated calls, how many and whether the median
converged: flashviz.measure.timing), the exact peak memory (`measure_memory`), the FLOPs and
achieved GFLOP/s (flashviz.model.flops), the modelled HBM traffic (`io_cost`) and the error against PyTorch's SDPA
computed in float64. What each implementation runs, and the RunConfig of one row, are in flashviz.measure.impls.

Guards (guards.py) keep one sweep from taking the machine down; a row they stop says "not run: <why>" and the
sweep goes on: no configuration whose inputs exceed the memory budget (default: half the available memory, container
limits included) is allocated, naive attention runs only if its S and P fit too, an allocation that fails anyway
refuses its row, and with `time_budget_s` the rows still to come once the sweep has run that long are not run.
repeats="auto" (or a timing.Adaptive) times each configuration until every median is known to +-5% or its
budget is spent (never past the sweep's time budget). df.attrs["context"] names the machine and torch version
(flashviz.measure.context.with_context writes it into a CSV's rows).
Every argument is checked once here, by a small `validate_*` helper that says how to fix the call.

Legend: B batch, H heads, N sequence length (N_q = N_k = N), d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, replace
from numbers import Integral, Real

import pandas as pd
import torch

from flashviz.core.validate import Window, validate_block, validate_causal, validate_window
from flashviz.measure import impls as runs
from flashviz.measure.allocator import steady_allocator
from flashviz.measure.context import run_context
from flashviz.measure.guards import (
    TIME_BUDGET_STATUS,
    TimeBudget,
    default_memory_budget,
    dense_mask_bytes,
    guard,
)
from flashviz.measure.impls import RunConfig, resolve_device, resolve_dtype, validate_mode
from flashviz.measure.memory import peak_memory_and_result
from flashviz.measure.timing import (
    AUTO,
    Adaptive,
    Repeats,
    Timing,
    resolve_repeats,
    threads_asked,
    threads_set_to,
    time_calls,
)
from flashviz.model.flops import impl_flops
from flashviz.model.iomodel import io_cost
from flashviz.vocab import FLASH, FORWARD, IMPL_LOOP_ORDER, IMPLS, NAIVE, OK, SDPA, TILED_IMPLS, TRAINING

MAX_N = 1 << 17  # 131072: beyond this even the tiled Python kernels take hours on a CPU
MAX_D = 1024  # largest head dimension a sweep accepts (real models use 64-256)
COLUMNS = ("impl", "N", "d", "block_q", "block_k", "causal", "window", "batch", "heads", "dtype", "device", "threads",
           "time_s", "time_iqr_s", "peak_bytes", "flops", "gflops", "hbm_bytes", "max_abs_err", "status",
           "time_lo_s", "time_hi_s", "repeats", "converged", "set_aside", "cpu_share", "threads_asked", "waited")
MAX_REASON_CHARS = 160  # a failure's message is cut here in the status column


# ----------------------------------------------------------------------------------------------------------------------
# arguments, checked once per public call


def validate_int(name: str, value: object, low: int, high: int | None = None, fix: str = "") -> int:
    """An int (not a bool) in [low, high]; `fix` says how to get one."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__}).")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"between {low} and {high}"
        raise ValueError(f"{name} must be {bound}, got {value}. {fix}".rstrip())
    return int(value)


def validate_ns(ns: object) -> list[int]:
    """The sequence lengths of a sweep: a non-empty list of ints in [1, MAX_N], duplicates dropped, order kept."""
    if isinstance(ns, (int, str)) or not isinstance(ns, Iterable):
        raise TypeError(f"ns must be a list of sequence lengths, e.g. [256, 512, 1024], got {ns!r}.")
    out = [validate_int("every N", n, 1, MAX_N, "Sequence lengths of 256 to 8192 show the N^2 story on a CPU.")
           for n in ns]
    if not out:
        raise ValueError("ns must list at least one sequence length, e.g. [256, 512, 1024].")
    return list(dict.fromkeys(out))


def validate_impls(impls: object, allowed: Sequence[str] = IMPLS) -> list[str]:
    """A non-empty list of implementation names drawn from `allowed`, duplicates dropped, order kept."""
    if isinstance(impls, str) or not isinstance(impls, Iterable):
        raise TypeError(f"impls must be a list of implementation names from {tuple(allowed)}, got {impls!r}.")
    out = list(dict.fromkeys(impls))
    bad = [i for i in out if i not in allowed]
    if bad or not out:
        raise ValueError(f"impls must be a non-empty list drawn from {tuple(allowed)}, got {list(impls)!r}"
                         + (f" (unknown: {bad})." if bad else "."))
    return out


def validate_time_budget(seconds: object) -> float | None:
    """None (no limit) or a number of seconds >= 0 (an int too large for a float means no limit in practice)."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, Real):
        raise TypeError(f"time_budget_s must be None (no limit) or a number of seconds, got {seconds!r} "
                        f"({type(seconds).__name__}).")
    try:
        value = float(seconds)
    except OverflowError:
        value = math.inf
    if math.isnan(value) or value < 0:
        raise ValueError(f"time_budget_s must be None (no limit) or a number of seconds >= 0, got {seconds!r}.")
    return value


def validate_progress(progress: object) -> Callable[[int, int, str], None] | None:
    """None or a callable progress(done, total, label)."""
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be None or a callable progress(done, total, label), got {progress!r}.")
    return progress


def build_configs(ns: list[int], block_pairs: list[tuple[int, int]], *, d, causal, window, batch, heads, dtype,
                  device, mode) -> list[RunConfig]:
    """One RunConfig per (N, (Br, Bc)), N outermost, after validating the arguments the configurations share."""
    d = validate_int("d", d, 1, MAX_D, "Head dimensions are usually 64 or 128.")
    batch = validate_int("batch", batch, 1)
    heads = validate_int("heads", heads, 1)
    causal, window = validate_causal(causal), validate_window(window)
    dtype, device, mode = resolve_dtype(dtype), resolve_device(device), validate_mode(mode)
    return [RunConfig(n, d, bq, bk, causal, window, batch, heads, dtype, device, mode)
            for n in ns for bq, bk in block_pairs]


# ----------------------------------------------------------------------------------------------------------------------
# the sweep


def _flops(impl: str, cfg: RunConfig) -> int:
    return impl_flops(impl, cfg.n, cfg.d, batch=cfg.batch, heads=cfg.heads, block_q=cfg.block_q,
                      block_k=cfg.block_k, causal=cfg.causal, window=cfg.window, training=cfg.mode == TRAINING)


def _hbm_bytes(impl: str, cfg: RunConfig) -> float:
    """Modelled forward HBM traffic in bytes; NaN for sdpa (a black box) and in training mode (no backward model)."""
    if impl == SDPA or cfg.mode == TRAINING:
        return math.nan
    algorithm = NAIVE if impl == NAIVE else IMPL_LOOP_ORDER[impl]
    return float(io_cost(algorithm, cfg.n, cfg.n, cfg.d, cfg.block_q, cfg.block_k, causal=cfg.causal,
                         window=cfg.window, batch=cfg.batch, heads=cfg.heads, dtype_bytes=cfg.dtype_bytes).bytes)


def _row(impl: str, cfg: RunConfig, threads: tuple[int, int], **values) -> dict:
    tiled = impl in TILED_IMPLS
    row = {"impl": impl, "N": cfg.n, "d": cfg.d, "block_q": cfg.block_q if tiled else pd.NA,
           "block_k": cfg.block_k if tiled else pd.NA, "causal": cfg.causal,
           "window": None if cfg.window is None else f"{cfg.window[0]},{cfg.window[1]}".replace("None", "inf"),
           "batch": cfg.batch, "heads": cfg.heads, "dtype": str(cfg.dtype).removeprefix("torch."),
           "device": str(cfg.device), "threads": threads[0], "time_s": math.nan, "time_iqr_s": math.nan,
           "peak_bytes": math.nan, "flops": _flops(impl, cfg), "gflops": math.nan, "hbm_bytes": _hbm_bytes(impl, cfg),
           "max_abs_err": math.nan, "status": OK, "time_lo_s": math.nan, "time_hi_s": math.nan, "repeats": pd.NA,
           "converged": pd.NA, "set_aside": pd.NA, "cpu_share": math.nan, "threads_asked": threads[1],
           "waited": pd.NA}
    row.update(values)
    return row


def _failure(e: BaseException) -> str:
    first_line = str(e).strip().splitlines()[0][:MAX_REASON_CHARS] if str(e).strip() else ""
    return f"failed with {type(e).__name__}: {first_line}"


FAILURES = (RuntimeError, MemoryError)  # e.g. an allocation the guard did not foresee: the row says so, we go on
_now = time.perf_counter  # the time budget's clock (tests replace it)


def _time_rows(fns: dict[str, Callable], inputs: tuple, *, warmup: int, repeats: int | Adaptive,
               clock: TimeBudget) -> tuple[dict[str, Timing], str | None]:
    """Time fns side by side (measure.time_calls), within the sweep's time budget. A fixed count checks the budget
    between interleaved repeats (`stop`); an Adaptive runs with its own budget cut to what the sweep has left.
    Returns ({impl: Timing}, None), or ({}, why) if the budget ran out before the repeats asked for were done."""
    if isinstance(repeats, Adaptive):
        if clock.used_up():
            return {}, clock.status("before timing")
        if clock.seconds is not None:
            left = clock.seconds - (clock.now() - clock.start)
            repeats = replace(repeats, budget_s=left if repeats.budget_s is None else min(repeats.budget_s, left))
        return time_calls(fns, *inputs, warmup=warmup, repeats=repeats), None
    timed = time_calls(fns, *inputs, warmup=warmup, repeats=repeats, stop=clock.used_up)
    done = min((len(t.calls) for t in timed.values()), default=0)
    if done < repeats:
        return {}, clock.status(f"while timing ({done} of {repeats} repeats done)")
    return timed, None


def _measure_config(cfg: RunConfig, impls: list[str], *, budget: int, repeats: int | Adaptive, warmup: int,
                    threads: tuple[int, int],
                    seed: int, report: Callable[[str], None], clock: TimeBudget) -> list[dict]:
    """The rows of one configuration: guards, then peak memory and error of each impl in turn, then the times of
    all that ran, interleaved call by call (measure.time_calls) so that noise hits them alike."""
    if clock.used_up():
        return [_row(impl, cfg, threads, status=clock.status()) for impl in impls]
    why = {impl: guard(impl, cfg, budget) for impl in impls}
    inputs = ref = None
    if any(w is None for w in why.values()):
        try:
            inputs = runs.make_inputs(cfg, seed)
        except FAILURES as e:  # the input guard's estimate was too low, or the machine is short of memory right now
            why = {impl: w or _failure(e) for impl, w in why.items()}
    if inputs is not None and dense_mask_bytes(cfg) <= budget:
        try:
            ref = runs.reference(*inputs, cfg)
        except FAILURES:
            ref = None  # max_abs_err stays NaN; the measurements do not need the reference
    fns, results = {}, {}
    for impl in impls:
        if why[impl] is not None:
            continue
        if clock.used_up():
            why[impl] = clock.status()
            continue
        report(f"memory of {impl} at N={cfg.n}")
        fn = runs.call_fn(impl, cfg)
        try:
            peak, out = peak_memory_and_result(fn, *inputs)
        except FAILURES as e:
            why[impl] = _failure(e)
            continue
        results[impl] = {"peak_bytes": peak, "max_abs_err": runs.max_abs_err(out, ref)}
        fns[impl] = fn
        del out
    if fns:
        report(f"timing {', '.join(fns)} at N={cfg.n}")
        try:
            timings, late = _time_rows(fns, inputs, warmup=warmup, repeats=repeats, clock=clock)
        except FAILURES as e:
            timings, late = {}, _failure(e)
        if late is not None:
            why.update(dict.fromkeys(fns, late))
        for impl, t in timings.items():
            results[impl].update(time_s=t.median, time_iqr_s=t.iqr, time_lo_s=t.ci_low, time_hi_s=t.ci_high,
                                 repeats=t.repeats, converged=t.converged, set_aside=t.set_aside,
                                 cpu_share=t.cpu_share, waited=t.waited,
                                 gflops=_flops(impl, cfg) / t.median / 1e9 if t.median > 0 else math.nan)
    return [_row(impl, cfg, threads, status=why[impl]) if why[impl] is not None else
            _row(impl, cfg, threads, **results[impl]) for impl in impls]


def validate_repeats(repeats: object) -> int | Adaptive:
    """A fixed number of timed calls per row (an int >= 1), or an Adaptive ("auto": Adaptive())."""
    if (isinstance(repeats, str) and repeats == AUTO) or isinstance(repeats, Adaptive):
        return resolve_repeats(repeats)
    return validate_int("repeats", repeats, 1, fix=f"Use 3-10, or {AUTO!r} to time until the median is known.")


def _run(configs: list[RunConfig], impls: list[str], *, repeats: Repeats, warmup: int, threads: int | None,
         memory_budget_bytes: int | None, seed: int, progress: Callable | None,
         time_budget_s: float | None) -> pd.DataFrame:
    repeats = validate_repeats(repeats)
    warmup = validate_int("warmup", warmup, 0)
    seed = validate_int("seed", seed, 0)
    progress = validate_progress(progress)
    time_budget_s = validate_time_budget(time_budget_s)
    budget = (default_memory_budget(configs[0].device) if memory_budget_bytes is None
              else validate_int("memory_budget_bytes", memory_budget_bytes, 1))
    rows, total = [], len(configs) * len(impls)

    def report(label: str) -> None:
        if progress is not None:
            progress(len(rows), total, label)

    clock = TimeBudget(time_budget_s, lambda: _now())  # looks _now up at each call
    with threads_set_to(threads) as n_threads, steady_allocator():
        cpu = torch.device(configs[0].device).type == "cpu"  # on a GPU the CPU's threads do not rank the kernels
        ran_asked = (n_threads, threads_asked() if cpu else n_threads)  # fewer than asked under a thread_cap
        for cfg in configs:
            rows += _measure_config(cfg, impls, budget=budget, repeats=repeats, warmup=warmup, threads=ran_asked,
                                    seed=seed, report=report, clock=clock)
    report("done")
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    df["block_q"] = df["block_q"].astype("Int64")  # nullable: naive and sdpa have no tiles
    df["block_k"] = df["block_k"].astype("Int64")
    df["repeats"] = df["repeats"].astype("Int64")  # nullable: a row not run has none
    df["converged"] = df["converged"].astype("boolean")
    df["set_aside"] = df["set_aside"].astype("Int64")  # nullable: a row not run has none
    df.attrs.update(mode=configs[0].mode, memory_budget_bytes=budget,
                    repeats=AUTO if isinstance(repeats, Adaptive) else repeats, seed=seed, time_budget_s=time_budget_s,
                    adaptive=asdict(repeats) if isinstance(repeats, Adaptive) else None,
                    context=run_context(n_threads, configs[0].device))
    return df


def settle(ns: Iterable[int], *, d: int = 64, block_size: int = 128, impls: Sequence[str] = (NAIVE, FLASH, SDPA),
           batch: int = 1, heads: int = 1, dtype: torch.dtype | str = torch.float32, block_q: int | None = None,
           block_k: int | None = None, causal: bool = False, window: Window = None,
           device: str | torch.device = "cpu", threads: int | None = None, mode: str = FORWARD,
           memory_budget_bytes: int | None = None, seed: int = 0) -> int:
    """Call every implementation once at every N, smallest N first, untimed: the process's memory allocator then
    holds the state that the timing keeps. glibc raises its mmap threshold (up to 32 MiB) after it frees a large
    mmapped block, so the first calls of standard attention in a fresh process pay page faults for S and P that
    later calls at the same N do not (measured: naive at N = 512, H = 4 took 3.7 ms over 15 calls in a fresh
    process's first sweep, 1.4 ms in its second). Timing after settle() measures every rerun in the same state.

    Takes run_sweep's arguments; a call the memory guard refuses is skipped. Returns the number of calls made.

    Example:
        >>> settle([32, 64], d=8, block_size=16, impls=("naive", "flash2"))
        4
    """
    ns = validate_ns(ns)
    bq, bk = block_q or block_size, block_k or block_size
    configs = build_configs(sorted(ns), [(bq, bk)], d=d, causal=causal, window=window, batch=batch, heads=heads,
                            dtype=dtype, device=device, mode=mode)
    budget = (default_memory_budget(configs[0].device) if memory_budget_bytes is None
              else validate_int("memory_budget_bytes", memory_budget_bytes, 1))
    calls = 0
    with threads_set_to(threads), steady_allocator():
        for cfg in configs:
            inputs = runs.make_inputs(cfg, seed)
            for impl in validate_impls(impls):
                if guard(impl, cfg, budget) is None:
                    runs.call_fn(impl, cfg)(*inputs)
                    calls += 1
    return calls


def cut_short(df: pd.DataFrame) -> bool:
    """Whether the time budget stopped some rows of a sweep."""
    return bool(df["status"].astype(str).str.startswith(TIME_BUDGET_STATUS).any())


def run_sweep(ns: Iterable[int], *, d: int = 64, block_size: int = 128, causal: bool = False,
              impls: Sequence[str] = (NAIVE, FLASH, SDPA), batch: int = 1, heads: int = 1,
              dtype: torch.dtype | str = torch.float32, repeats: Repeats = 5, progress: Callable | None = None,
              block_q: int | None = None, block_k: int | None = None, window: Window = None,
              device: str | torch.device = "cpu", threads: int | None = None, mode: str = FORWARD,
              memory_budget_bytes: int | None = None, warmup: int = 1, seed: int = 0,
              time_budget_s: float | None = None) -> pd.DataFrame:
    """Measure every implementation at every sequence length: one tidy row per (impl, N).

    Args:
        ns: sequence lengths N (N_q = N_k), each in [1, MAX_N].
        d: head dimension.  batch, heads: B and H.  dtype: input dtype (torch.dtype or its name).
        block_size: Br = Bc of the tiled impls, unless block_q / block_k are given.
        causal, window: the mask: top-left causal and/or a (left, right) sliding window.
        impls: any of "naive", "flash" (FA1 loop order), "flash2" (FA2 loop order), "sdpa".
        repeats: timed calls per row (median, its 95% interval and IQR reported), or "auto" / a
            timing.Adaptive: time each configuration's impls, interleaved, until every median is known to +-5% (the
            Adaptive's target) or its budget (cut to what time_budget_s leaves) or max_repeats is spent.
            warmup: untimed calls before them.
        progress: progress(done, total, label) with done = rows finished so far (non-decreasing), called before each
            memory measurement and each timing phase, and once at the end with done == total and label "done".
        device: "cpu" or "cuda".  threads: torch intra-op threads (None: torch's current count), reported per row.
        mode: "forward", or "training" for forward + backward (needs flashviz.core.backward).
        memory_budget_bytes: the memory a row may allocate (default half the available memory, container limit
            included): rows whose inputs (input_bytes) or whose naive S and P (naive_bytes_needed) exceed it are
            not run, with a status that says how many bytes they would need.
        seed: seeds the random q, k, v (and dO).
        time_budget_s: wall-clock seconds the sweep may run (None: no limit); once they are used up, the rows still
            to come are not run, with a status that starts "not run: time budget" (checked between calls).
    Returns:
        DataFrame with columns COLUMNS: impl, N, d, block_q, block_k (<NA> for naive and sdpa), causal,
        window ("left,right" or None), batch, heads, dtype, device, threads, time_s, time_iqr_s (seconds),
        peak_bytes (bytes above the start level, output included), flops, gflops (GFLOP/s), hbm_bytes (modelled,
        NaN for sdpa and in training mode), max_abs_err (max |x - x_sdpa_fp64| over O and, in training, dQ, dK,
        dV), status ("ok" or "not run: <why>"), time_lo_s and time_hi_s (the distribution-free 95% interval of
        the median, seconds; [min, max] below 6 repeats), repeats (timed calls behind the median, <NA> if not
        run), converged (a 95% interval at most +-5% of the median), set_aside (timed calls set aside because the
        process lost its cores during them: flashviz.measure.load; more calls were run in their place) and
        cpu_share (the kept calls' median CPU seconds per wall second; NaN where not measured), threads_asked (the
        threads asked for: above threads where the timing worker's thread_cap ran the rows with fewer, because
        other work kept cores busy; such rows name no winner, flashviz.measure.verdict), waited (calls on one
        thread that waited for a core for over a quarter of their time: the wait was taken off their time_s,
        flashviz.measure.load.on_core_times).
        df.attrs holds mode, memory_budget_bytes,
        repeats (an int or "auto"), adaptive (the Adaptive's fields, or None), seed, time_budget_s and context
        (context.run_context: torch version, threads, CPU model, ...).

    Example:
        >>> df = run_sweep([64, 128], d=16, block_size=32, repeats=1)
        >>> list(df["impl"]), set(df["status"])
        (['naive', 'flash', 'sdpa', 'naive', 'flash', 'sdpa'], {'ok'})
    """
    ns = validate_ns(ns)
    impls = validate_impls(impls)
    bq = validate_block("block_q", block_size if block_q is None else block_q)
    bk = validate_block("block_k", block_size if block_k is None else block_k)
    configs = build_configs(ns, [(bq, bk)], d=d, causal=causal, window=window, batch=batch, heads=heads,
                            dtype=dtype, device=device, mode=mode)
    return _run(configs, impls, repeats=repeats, warmup=warmup, threads=threads,
                memory_budget_bytes=memory_budget_bytes, seed=seed, progress=progress, time_budget_s=time_budget_s)


def run_block_sweep(n: int, block_sizes: Iterable[int | tuple[int, int]], *, d: int = 64, causal: bool = False,
                    window: Window = None, impls: Sequence[str] = TILED_IMPLS, batch: int = 1, heads: int = 1,
                    dtype: torch.dtype | str = torch.float32, repeats: Repeats = 5, progress: Callable | None = None,
                    device: str | torch.device = "cpu", threads: int | None = None, mode: str = FORWARD,
                    warmup: int = 1, seed: int = 0, time_budget_s: float | None = None,
                    memory_budget_bytes: int | None = None) -> pd.DataFrame:
    """Time, peak memory and modelled HBM traffic of the tiled kernels against the tile size, at a fixed N.

    Args:
        n: sequence length.
        block_sizes: square tile sizes (Br = Bc = b) or (Br, Bc) pairs.
        impls: "flash" and/or "flash2" (naive and sdpa have no tiles: take them from run_sweep([n]) as references).
        other arguments: as for run_sweep.
    Returns:
        DataFrame with run_sweep's columns, one row per (impl, block size), in the order given.

    Example:
        >>> df = run_block_sweep(128, [16, 64], d=16, repeats=1)
        >>> df["block_q"].tolist(), df["impl"].tolist()
        ([16, 16, 64, 64], ['flash', 'flash2', 'flash', 'flash2'])
    """
    n = validate_ns([n])[0]
    impls = validate_impls(impls, TILED_IMPLS)
    if isinstance(block_sizes, (int, str)) or not isinstance(block_sizes, Iterable):
        raise TypeError(f"block_sizes must be a list of tile sizes or (Br, Bc) pairs, e.g. [16, 32, 64, 128], "
                        f"got {block_sizes!r}.")
    pairs = []
    for b in block_sizes:
        bq, bk = b if isinstance(b, tuple) else (b, b)
        pairs.append((validate_block("block_q", bq), validate_block("block_k", bk)))
    if not pairs:
        raise ValueError("block_sizes must list at least one tile size, e.g. [16, 32, 64, 128].")
    configs = build_configs([n], list(dict.fromkeys(pairs)), d=d, causal=causal, window=window, batch=batch,
                            heads=heads, dtype=dtype, device=device, mode=mode)
    return _run(configs, impls, repeats=repeats, warmup=warmup, threads=threads,
                memory_budget_bytes=memory_budget_bytes, seed=seed, progress=progress, time_budget_s=time_budget_s)
