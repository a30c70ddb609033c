"""Sweeps: run many attention configurations and collect one tidy pandas DataFrame, one row per (impl, config).

Each row holds the time (median and IQR of repeated calls), the exact peak memory (`measure_memory`), the FLOPs and
achieved GFLOP/s, the modelled HBM traffic (`io_cost`) and the error against PyTorch's SDPA computed in float64.
Implementations, all called with the same (B, H, N, d) inputs:

    naive   flashviz.core.reference.naive_attention: materialises S and P (FA1 Algorithm 0)
    flash   flash_attention_forward(loop_order="kv_outer") (FA1 Algorithm 1)
    flash2  flash_attention_forward(loop_order="q_outer") (FA2 Algorithm 1)
    sdpa    torch.nn.functional.scaled_dot_product_attention (PyTorch's fused kernel)

In training mode every implementation runs forward + backward (autograd.grad with a fixed random dO); the tiled ones
use flashviz.core.backward.flash_attention (FA2 forward saving O and L, tiled backward by recomputation).

Guards (guards.py) keep one sweep from taking the machine down; a row they stop says "not run: <why>" and the
sweep goes on: no configuration whose inputs exceed the memory budget (default: half the available memory, container
limits included) is allocated, naive attention runs only if its S and P fit too, an allocation that fails anyway
refuses its row, and with `time_budget_s` the rows still to come once the sweep has run that long are not run.
Arguments are checked and RunConfigs built by flashviz.measure.sweepconfig.

Legend: B batch, H heads, N sequence length (N_q = N_k = N), d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

import pandas as pd
import torch
import torch.nn.functional as F

from flashviz.core.backward import flash_attention
from flashviz.core.flash import flash_attention_forward
from flashviz.core.reference import naive_attention
from flashviz.core.tiling import visible_mask
from flashviz.core.validate import Window, validate_block
from flashviz.measure.guards import (
    TIME_BUDGET_STATUS,
    TimeBudget,
    default_memory_budget,
    dense_mask_bytes,
    guard,
)
from flashviz.measure.memory import peak_memory_and_result
from flashviz.measure.sweepconfig import (
    RunConfig,
    _validate_int,
    _validate_progress,
    _validate_time_budget,
    build_configs,
    validate_impls,
    validate_ns,
)
from flashviz.measure.timing import threads_set_to, time_calls
from flashviz.model.flops import TRAINING_FLOP_FACTOR, attention_flops, visible_pairs
from flashviz.model.iomodel import io_cost
from flashviz.vocab import IMPL_LOOP_ORDER, OK, TILED_IMPLS

COLUMNS = ("impl", "N", "d", "block_q", "block_k", "causal", "window", "batch", "heads", "dtype", "device", "threads",
           "time_s", "time_iqr_s", "peak_bytes", "flops", "gflops", "hbm_bytes", "max_abs_err", "status")
MAX_REASON_CHARS = 160  # a failure's message is cut here in the status column


# ----------------------------------------------------------------------------------------------------------------------
# implementations


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cfg: RunConfig) -> torch.Tensor:
    if cfg.window is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=cfg.causal)
    n = q.shape[2]
    idx = torch.arange(n, device=q.device)
    mask = visible_mask(idx, idx, causal=cfg.causal, window=cfg.window)  # (N, N) bool, True = visible
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _forward_fn(impl: str, cfg: RunConfig) -> Callable[..., torch.Tensor]:
    """q, k, v -> O for one implementation."""
    mask = {"causal": cfg.causal, "window": cfg.window}
    if impl == "naive":
        return lambda q, k, v: naive_attention(q, k, v, **mask)
    if impl == "sdpa":
        return lambda q, k, v: _sdpa(q, k, v, cfg)
    if cfg.mode == "training":
        return lambda q, k, v: flash_attention(q, k, v, block_q=cfg.block_q, block_k=cfg.block_k,
                                               loop_order=IMPL_LOOP_ORDER[impl], **mask)
    return lambda q, k, v: flash_attention_forward(q, k, v, block_q=cfg.block_q, block_k=cfg.block_k,
                                                   loop_order=IMPL_LOOP_ORDER[impl], **mask)


def _call_fn(impl: str, cfg: RunConfig) -> Callable[..., tuple[torch.Tensor, ...]]:
    """The timed callable: (q, k, v, dO) -> (O,) in forward mode, (O, dQ, dK, dV) in training mode."""
    forward = _forward_fn(impl, cfg)
    if cfg.mode == "forward":
        def run_forward(q, k, v, dO):
            with torch.no_grad():
                return (forward(q, k, v),)
        return run_forward

    def run_training(q, k, v, dO):
        O = forward(q, k, v)  # (B, H, N, d)
        return (O.detach(), *torch.autograd.grad(O, (q, k, v), dO))  # dQ, dK, dV: (B, H, N, d) each
    return run_training


def _inputs(cfg: RunConfig, seed: int) -> tuple[torch.Tensor, ...]:
    """q, k, v, dO of shape (B, H, N, d), drawn from a seeded generator on the CPU, then moved."""
    gen = torch.Generator().manual_seed(seed)
    shape = (cfg.batch, cfg.heads, cfg.n, cfg.d)
    q, k, v, dO = (torch.randn(shape, generator=gen, dtype=torch.float32).to(cfg.device, cfg.dtype)
                   for _ in range(4))
    if cfg.mode == "training":
        q, k, v = (t.requires_grad_() for t in (q, k, v))
    return q, k, v, dO


def _reference(q, k, v, dO, cfg: RunConfig) -> tuple[torch.Tensor, ...]:
    """SDPA in float64 on the same inputs: (O,) or (O, dQ, dK, dV)."""
    q64, k64, v64 = (t.detach().double().requires_grad_(cfg.mode == "training") for t in (q, k, v))
    return _call_fn("sdpa", replace(cfg, dtype=torch.float64))(q64, k64, v64, dO.double())


def _max_abs_err(out: tuple[torch.Tensor, ...], ref: tuple[torch.Tensor, ...] | None) -> float:
    if ref is None:
        return math.nan
    return max(float((a.double() - b).abs().max()) if a.numel() else 0.0 for a, b in zip(out, ref, strict=True))


# ----------------------------------------------------------------------------------------------------------------------
# the sweep


def _flops(impl: str, cfg: RunConfig) -> int:
    if impl == "naive":  # computes every score, masked or not
        f = attention_flops(cfg.n, cfg.n, cfg.d, batch=cfg.batch, heads=cfg.heads)
    elif impl == "sdpa":  # its own tiling is unknown to us: count the visible pairs, the work any exact kernel needs
        f = 4 * visible_pairs(cfg.n, cfg.n, causal=cfg.causal, window=cfg.window) * cfg.d * cfg.batch * cfg.heads
    else:
        f = attention_flops(cfg.n, cfg.n, cfg.d, batch=cfg.batch, heads=cfg.heads, block_q=cfg.block_q,
                            block_k=cfg.block_k, causal=cfg.causal, window=cfg.window)
    return round(f * TRAINING_FLOP_FACTOR) if cfg.mode == "training" else f


def _hbm_bytes(impl: str, cfg: RunConfig) -> float:
    """Modelled forward HBM traffic in bytes; NaN for sdpa (a black box) and in training mode (no backward model)."""
    if impl == "sdpa" or cfg.mode == "training":
        return math.nan
    algorithm = "naive" if impl == "naive" else IMPL_LOOP_ORDER[impl]
    return float(io_cost(algorithm, cfg.n, cfg.n, cfg.d, cfg.block_q, cfg.block_k, causal=cfg.causal,
                         window=cfg.window, batch=cfg.batch, heads=cfg.heads, dtype_bytes=cfg.dtype_bytes).bytes)


def _row(impl: str, cfg: RunConfig, threads: int, **values) -> dict:
    tiled = impl in TILED_IMPLS
    row = {"impl": impl, "N": cfg.n, "d": cfg.d, "block_q": cfg.block_q if tiled else pd.NA,
           "block_k": cfg.block_k if tiled else pd.NA, "causal": cfg.causal,
           "window": None if cfg.window is None else f"{cfg.window[0]},{cfg.window[1]}".replace("None", "inf"),
           "batch": cfg.batch, "heads": cfg.heads, "dtype": str(cfg.dtype).removeprefix("torch."),
           "device": str(cfg.device), "threads": threads, "time_s": math.nan, "time_iqr_s": math.nan,
           "peak_bytes": math.nan, "flops": _flops(impl, cfg), "gflops": math.nan, "hbm_bytes": _hbm_bytes(impl, cfg),
           "max_abs_err": math.nan, "status": OK}
    row.update(values)
    return row


def _failure(e: BaseException) -> str:
    first_line = str(e).strip().splitlines()[0][:MAX_REASON_CHARS] if str(e).strip() else ""
    return f"failed with {type(e).__name__}: {first_line}"


FAILURES = (RuntimeError, MemoryError)  # e.g. an allocation the guard did not foresee: the row says so, we go on
_now = time.perf_counter  # the time budget's clock (tests replace it)


def _median_iqr(samples: list[float]) -> tuple[float, float]:
    """Median and interquartile range in seconds, as measure.Timing reports them (IQR 0 below two samples)."""
    if len(samples) < 2:
        return samples[0], 0.0
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return statistics.median(samples), q3 - q1


def _time_rows(fns: dict[str, Callable], inputs: tuple, *, warmup: int, repeats: int,
               clock: TimeBudget) -> tuple[dict[str, tuple[float, float]], str | None]:
    """Time fns side by side, one interleaved repeat at a time (measure.time_calls), checking the time budget
    between repeats. Returns ({impl: (median, iqr)}, None), or ({}, why) if the budget ran out first."""
    samples: dict[str, list[float]] = {impl: [] for impl in fns}
    for r in range(repeats):
        if clock.used_up():
            return {}, clock.status(f"while timing ({r} of {repeats} repeats done)")
        for impl, t in time_calls(fns, *inputs, warmup=warmup if r == 0 else 0, repeats=1).items():
            samples[impl] += t.samples
    return {impl: _median_iqr(s) for impl, s in samples.items()}, None


def _measure_config(cfg: RunConfig, impls: list[str], *, budget: int, repeats: int, warmup: int, threads: int,
                    seed: int, report: Callable[[str], None], clock: TimeBudget) -> list[dict]:
    """The rows of one configuration: guards, then peak memory and error of each impl in turn, then the times of
    all that ran, interleaved call by call (measure.time_calls) so that noise hits them alike."""
    if clock.used_up():
        return [_row(impl, cfg, threads, status=clock.status()) for impl in impls]
    why = {impl: guard(impl, cfg, budget) for impl in impls}
    inputs = ref = None
    if any(w is None for w in why.values()):
        try:
            inputs = _inputs(cfg, seed)
        except FAILURES as e:  # the input guard's estimate was too low, or the machine is short of memory right now
            why = {impl: w or _failure(e) for impl, w in why.items()}
    if inputs is not None and dense_mask_bytes(cfg) <= budget:
        try:
            ref = _reference(*inputs, cfg)
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
        fn = _call_fn(impl, cfg)
        try:
            peak, out = peak_memory_and_result(fn, *inputs)
        except FAILURES as e:
            why[impl] = _failure(e)
            continue
        results[impl] = {"peak_bytes": peak, "max_abs_err": _max_abs_err(out, ref)}
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
        for impl, (median, iqr) in timings.items():
            results[impl].update(time_s=median, time_iqr_s=iqr,
                                 gflops=_flops(impl, cfg) / median / 1e9 if median > 0 else math.nan)
    return [_row(impl, cfg, threads, status=why[impl]) if why[impl] is not None else
            _row(impl, cfg, threads, **results[impl]) for impl in impls]


def _run(configs: list[RunConfig], impls: list[str], *, repeats: int, warmup: int, threads: int | None,
         memory_budget_bytes: int | None, seed: int, progress: Callable | None,
         time_budget_s: float | None) -> pd.DataFrame:
    repeats = _validate_int("repeats", repeats, 1, fix="Use 3-10; more only tightens the error bars.")
    warmup = _validate_int("warmup", warmup, 0)
    seed = _validate_int("seed", seed, 0)
    progress = _validate_progress(progress)
    time_budget_s = _validate_time_budget(time_budget_s)
    budget = (default_memory_budget(configs[0].device) if memory_budget_bytes is None
              else _validate_int("memory_budget_bytes", memory_budget_bytes, 1))
    rows, total = [], len(configs) * len(impls)

    def report(label: str) -> None:
        if progress is not None:
            progress(len(rows), total, label)

    clock = TimeBudget(time_budget_s, lambda: _now())  # looks _now up at each call
    with threads_set_to(threads) as n_threads:
        for cfg in configs:
            rows += _measure_config(cfg, impls, budget=budget, repeats=repeats, warmup=warmup, threads=n_threads,
                                    seed=seed, report=report, clock=clock)
    report("done")
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    df["block_q"] = df["block_q"].astype("Int64")  # nullable: naive and sdpa have no tiles
    df["block_k"] = df["block_k"].astype("Int64")
    df.attrs.update(mode=configs[0].mode, memory_budget_bytes=budget, repeats=repeats, seed=seed,
                    time_budget_s=time_budget_s)
    return df


def cut_short(df: pd.DataFrame) -> bool:
    """Whether the time budget stopped some rows of a sweep."""
    return bool(df["status"].astype(str).str.startswith(TIME_BUDGET_STATUS).any())


def run_sweep(ns: Iterable[int], *, d: int = 64, block_size: int = 128, causal: bool = False,
              impls: Sequence[str] = ("naive", "flash", "sdpa"), batch: int = 1, heads: int = 1,
              dtype: torch.dtype | str = torch.float32, repeats: int = 5, progress: Callable | None = None,
              block_q: int | None = None, block_k: int | None = None, window: Window = None,
              device: str | torch.device = "cpu", threads: int | None = None, mode: str = "forward",
              memory_budget_bytes: int | None = None, warmup: int = 1, seed: int = 0,
              time_budget_s: float | None = None) -> pd.DataFrame:
    """Measure every implementation at every sequence length: one tidy row per (impl, N).

    Args:
        ns: sequence lengths N (N_q = N_k), each in [1, MAX_N].
        d: head dimension.  batch, heads: B and H.  dtype: input dtype (torch.dtype or its name).
        block_size: Br = Bc of the tiled impls, unless block_q / block_k are given.
        causal, window: the mask (DESIGN.md conventions).
        impls: any of "naive", "flash" (FA1 loop order), "flash2" (FA2 loop order), "sdpa".
        repeats: timed calls per row (median and IQR reported); warmup: untimed calls before them.
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
        dV), status ("ok" or "not run: <why>"). df.attrs holds mode, memory_budget_bytes, repeats, seed and
        time_budget_s.

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
                    dtype: torch.dtype | str = torch.float32, repeats: int = 5, progress: Callable | None = None,
                    device: str | torch.device = "cpu", threads: int | None = None, mode: str = "forward",
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
