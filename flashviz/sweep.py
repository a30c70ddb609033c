"""Sweeps: run many attention configurations and collect one tidy pandas DataFrame, one row per (impl, config).

Each row holds the time (median and IQR of repeated calls), the exact peak memory (`measure_memory`), the FLOPs and
achieved GFLOP/s, the modelled HBM traffic (`io_cost`) and the error against PyTorch's SDPA computed in float64.
Implementations, all called with the same (B, H, N, d) inputs:

    naive   flashviz.reference.naive_attention: materialises S and P (FA1 Algorithm 0)
    flash   flash_attention_forward(loop_order="kv_outer") (FA1 Algorithm 1)
    flash2  flash_attention_forward(loop_order="q_outer") (FA2 Algorithm 1)
    sdpa    torch.nn.functional.scaled_dot_product_attention (PyTorch's fused kernel)

In training mode every implementation runs forward + backward (autograd.grad with a fixed random dO); the tiled ones
use flashviz.backward.flash_attention (FA2 forward saving O and L, tiled backward by recomputation).

Guards keep one sweep from taking the machine down; a row they stop says "skipped: <why>" and the sweep goes on:
- memory: no configuration whose inputs (q, k, v, dO, the outputs and their float64 reference copies) exceed the
  memory budget (default: half the available memory, container limits included) is allocated, and naive attention
  runs only if its S and P fit in the budget too; an allocation that fails anyway skips its row;
- time: with `time_budget_s`, once the sweep has run that long the rows still to come are skipped.

Legend: B batch, H heads, N sequence length (N_q = N_k = N), d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from numbers import Integral, Real

import pandas as pd
import torch
import torch.nn.functional as F

from flashviz._validate import FLOAT_DTYPES, Window, validate_block, validate_causal, validate_window
from flashviz.backward import flash_attention
from flashviz.flash import flash_attention_forward
from flashviz.iomodel import io_cost
from flashviz.measure import (
    TRAINING_FLOP_FACTOR,
    attention_flops,
    peak_memory_and_result,
    threads_set_to,
    time_calls,
    visible_pairs,
)
from flashviz.reference import naive_attention
from flashviz.tiling import visible_mask

IMPLS = ("naive", "flash", "flash2", "sdpa")
TILED_IMPLS = ("flash", "flash2")
LOOP_ORDER = {"flash": "kv_outer", "flash2": "q_outer"}
MODES = ("forward", "training")
COLUMNS = ("impl", "N", "d", "block_q", "block_k", "causal", "window", "batch", "heads", "dtype", "device", "threads",
           "time_s", "time_iqr_s", "peak_bytes", "flops", "gflops", "hbm_bytes", "max_abs_err", "status")
MAX_N = 1 << 17  # 131072: beyond this even the tiled Python kernels take hours on a CPU
MAX_D = 1024  # largest head dimension a sweep accepts (real models use 64-256)
GIB = 1 << 30  # bytes per GiB
FALLBACK_RAM_BYTES = 4 * GIB  # assumed available RAM when neither /proc/meminfo nor sysconf can tell
MEMINFO = "/proc/meminfo"  # MemAvailable: the host's (or VM's) free memory, blind to a container's limit
CGROUP_V2_DIR = "/sys/fs/cgroup"  # cgroup v2: memory.max ("max" = no limit), memory.current, memory.stat
CGROUP_V1_DIR = "/sys/fs/cgroup/memory"  # cgroup v1: memory.limit_in_bytes, memory.usage_in_bytes, memory.stat
CGROUP_NO_LIMIT = 1 << 60  # bytes: cgroup v1 writes "no limit" as ~2^63 rounded down to a page; none is this large
INPUT_TENSORS = 4  # q, k, v and dO, each (B, H, N, d); dO is drawn in forward mode too
OUTPUT_TENSORS = {"forward": 1, "training": 4}  # (B, H, N, d) results per call: O; O, dQ, dK, dV
FP64_BYTES = 8  # bytes per float64 element: the error check's reference runs in float64
TIME_BUDGET_STATUS = "skipped: time budget"  # how every row that the time budget stopped starts its status
NAIVE_SCORE_COPIES = {"forward": 2, "training": 4}  # N x N matrices naive holds at its peak: S, P (+ dP, dS)
MASK_BYTES_PER_SCORE = 8 + 1 + 1  # visible_mask's int64 j - i, the bool mask and its negation, per (i, j)
OK = "ok"
MAX_REASON_CHARS = 160  # a failure's message is cut here in the status column


@dataclass(frozen=True)
class RunConfig:
    """One attention configuration that a sweep measures for each implementation."""

    n: int  # sequence length N (N_q = N_k)
    d: int  # head dimension
    block_q: int  # Br, query rows per tile (tiled impls only)
    block_k: int  # Bc, key columns per tile (tiled impls only)
    causal: bool  # top-left causal mask
    window: Window  # (left, right) sliding window or None
    batch: int  # B
    heads: int  # H
    dtype: torch.dtype  # input dtype
    device: torch.device  # where the tensors live
    mode: str  # "forward" or "training" (forward + backward)

    @property
    def dtype_bytes(self) -> int:
        return torch.empty((), dtype=self.dtype).element_size()  # bytes per element

    @property
    def masked(self) -> bool:
        return self.causal or self.window is not None


# ----------------------------------------------------------------------------------------------------------------------
# validation


def _validate_int(name: str, value: object, low: int, high: int | None = None, fix: str = "") -> int:
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
    out = [_validate_int("every N", n, 1, MAX_N, "Sequence lengths of 256 to 8192 show the N^2 story on a CPU.")
           for n in ns]
    if not out:
        raise ValueError("ns must list at least one sequence length, e.g. [256, 512, 1024].")
    return list(dict.fromkeys(out))


def validate_impls(impls: object, allowed: Sequence[str] = IMPLS) -> list[str]:
    if isinstance(impls, str) or not isinstance(impls, Iterable):
        raise TypeError(f"impls must be a list of implementation names from {tuple(allowed)}, got {impls!r}.")
    out = list(dict.fromkeys(impls))
    bad = [i for i in out if i not in allowed]
    if bad or not out:
        raise ValueError(f"impls must be a non-empty list drawn from {tuple(allowed)}, got {list(impls)!r}"
                         + (f" (unknown: {bad})." if bad else "."))
    return out


def resolve_dtype(dtype: object) -> torch.dtype:
    """A floating torch.dtype, from a dtype or its name ("float32", "bfloat16", ...)."""
    resolved = getattr(torch, dtype.strip().removeprefix("torch."), None) if isinstance(dtype, str) else dtype
    if not isinstance(resolved, torch.dtype) or resolved not in FLOAT_DTYPES:
        names = ", ".join(repr(str(t).removeprefix("torch.")) for t in FLOAT_DTYPES)
        if dtype is None or isinstance(dtype, (str, torch.dtype)):
            given = repr(dtype[:40]) if isinstance(dtype, str) else str(dtype)  # None, 'Tensor', torch.int8
        elif isinstance(dtype, type):
            given = f"the class {dtype.__module__}.{dtype.__qualname__}"
        else:
            given = f"an object of type {type(dtype).__name__}"
        raise TypeError(f"dtype must be one of {names} (or the torch.dtype itself, e.g. torch.float32), "
                        f"got {given}.")
    return resolved


def _validate_time_budget(seconds: object) -> float | None:
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, Real):
        raise TypeError(f"time_budget_s must be None (no limit) or a number of seconds, got {seconds!r} "
                        f"({type(seconds).__name__}).")
    try:
        value = float(seconds)
    except OverflowError:  # an int too large for a float: no limit in practice
        value = math.inf
    if math.isnan(value) or value < 0:
        raise ValueError(f"time_budget_s must be None (no limit) or a number of seconds >= 0, got {seconds!r}.")
    return value


def resolve_device(device: object) -> torch.device:
    try:
        dev = torch.device(device)
    except (TypeError, RuntimeError) as e:
        raise ValueError(f"device must be 'cpu' or 'cuda' (or 'cuda:1', ...), got {device!r}.") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch.cuda.is_available() is False here. Use device='cpu'.")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}.")
    return dev


def _validate_mode(mode: object) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES} ('training' times forward + backward), got {mode!r}.")
    return str(mode)


def _validate_progress(progress: object) -> Callable[[int, int, str], None] | None:
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be None or a callable progress(done, total, label), got {progress!r}.")
    return progress


# ----------------------------------------------------------------------------------------------------------------------
# memory guard


def _read_text(path: str) -> str | None:
    """A small system file's text, or None if it is missing or unreadable."""
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _read_int(path: str) -> int | None:
    """The integer a cgroup file holds, or None (missing, unreadable, or "max": no limit)."""
    text = _read_text(path)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _stat_bytes(path: str, key: str) -> int:
    """One "key value" line of a cgroup memory.stat file (0 if absent)."""
    for line in (_read_text(path) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _meminfo_available() -> int | None:
    for line in (_read_text(MEMINFO) or "").splitlines():
        if line.startswith("MemAvailable:"):
            try:
                return int(line.split()[1]) * 1024  # the file says kB (KiB)
            except (IndexError, ValueError):
                return None
    return None


def cgroup_free_bytes() -> int | None:
    """Bytes the memory cgroup (a container's limit) still lets this process allocate, or None without a limit.

    limit - usage + inactive file cache (page cache the kernel reclaims before it kills anything), read from cgroup v2
    (memory.max, memory.current) and v1 (memory.limit_in_bytes, memory.usage_in_bytes); the smaller one if both."""
    free = []
    for base, limit_file, usage_file, cache_key in (
            (CGROUP_V2_DIR, "memory.max", "memory.current", "inactive_file"),
            (CGROUP_V1_DIR, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")):
        limit = _read_int(os.path.join(base, limit_file))
        if limit is None or limit >= CGROUP_NO_LIMIT:
            continue
        usage = _read_int(os.path.join(base, usage_file)) or 0
        cache = min(_stat_bytes(os.path.join(base, "memory.stat"), cache_key), usage)
        free.append(max(0, limit - usage + cache))
    return min(free) if free else None


def available_memory_bytes(device: object = "cpu") -> int:
    """Bytes of memory free for new tensors: on CPU the smaller of MemAvailable (/proc/meminfo, or sysconf) and what
    the container's memory cgroup still allows (cgroup_free_bytes); on CUDA free GPU memory (mem_get_info)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0])
    host = _meminfo_available()
    if host is None:
        try:
            host = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            host = FALLBACK_RAM_BYTES
    container = cgroup_free_bytes()
    return host if container is None else min(host, container)


def default_memory_budget(device: object = "cpu") -> int:
    """Half of the available memory: the largest naive S and P a sweep will allocate by default."""
    return available_memory_bytes(device) // 2


def naive_bytes_needed(cfg: RunConfig) -> int:
    """Bytes naive attention's N x N matrices need at their peak: S and P (forward) or S, P, dP, dS (training),
    B H N^2 each, plus the (N, N) mask temporaries when a mask is set."""
    scores = cfg.batch * cfg.heads * cfg.n * cfg.n  # elements of one N x N matrix over all heads
    mask = MASK_BYTES_PER_SCORE * cfg.n * cfg.n if cfg.masked else 0
    return NAIVE_SCORE_COPIES[cfg.mode] * scores * cfg.dtype_bytes + mask


def input_bytes(n: int, d: int, *, batch: int = 1, heads: int = 1, dtype: torch.dtype | str = torch.float32,
                mode: str = "forward") -> int:
    """Bytes of the (B, H, N, d) tensors one row of a sweep holds whatever the implementation: q, k, v, dO and the
    outputs in the input dtype, plus float64 copies of them all for the error check (float64 inputs are their own
    copies). Naive attention's S and P come on top (naive_bytes_needed).

    Example:
        >>> input_bytes(1024, 64, dtype="float32")  # 65536 elements x (5 x 4 + 5 x 8) bytes
        3932160
    """
    dtype, mode = resolve_dtype(dtype), _validate_mode(mode)
    elements = batch * heads * n * d  # of one (B, H, N, d) tensor
    tensors = INPUT_TENSORS + OUTPUT_TENSORS[mode]
    fp64_copies = OUTPUT_TENSORS[mode] if dtype == torch.float64 else tensors
    return elements * (tensors * torch.empty((), dtype=dtype).element_size() + fp64_copies * FP64_BYTES)


def input_bytes_needed(cfg: RunConfig) -> int:
    """input_bytes for one configuration."""
    return input_bytes(cfg.n, cfg.d, batch=cfg.batch, heads=cfg.heads, dtype=cfg.dtype, mode=cfg.mode)


def calls_per_row(repeats: int, warmup: int) -> int:
    """Calls of one implementation per row: the warm-up and timed calls, one memory measurement, one reference."""
    return repeats + warmup + 2


def request_flops(ns: Iterable[int], *, d: int, batch: int = 1, heads: int = 1, n_impls: int = 1, calls: int = 1,
                  training: bool = False) -> int:
    """FLOPs a sweep request costs at most: dense attention at every N, for every implementation and call.

    Example:
        >>> request_flops([1024], d=64, n_impls=2, calls=3)  # 4 N^2 d x 2 x 3
        1610612736
    """
    per_call = sum(attention_flops(n, n, d, batch=batch, heads=heads, training=training) for n in ns)
    return per_call * n_impls * calls


def dense_mask_bytes(cfg: RunConfig) -> int:
    """Bytes of the dense (N, N) boolean mask (and its int64 construction) that SDPA needs for a window."""
    return MASK_BYTES_PER_SCORE * cfg.n * cfg.n if cfg.window is not None else 0


def format_bytes(nbytes: float) -> str:
    """Bytes in binary units for people: 4194304 -> '4.0 MiB'."""
    for unit, size in (("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes:.0f} B"


def _guard(impl: str, cfg: RunConfig, budget: int) -> str | None:
    """Why this (impl, config) must not run, or None when it fits."""
    need = naive_bytes_needed(cfg)
    if impl == "naive" and need > budget:
        what = "S and P" if cfg.mode == "forward" else "S, P, dP and dS"
        return (f"skipped: naive {what} would need {need} bytes ({format_bytes(need)}: "
                f"{NAIVE_SCORE_COPIES[cfg.mode]} x B x H x N^2 x {cfg.dtype_bytes} bytes"
                f"{' + the N x N mask' if cfg.masked else ''}), over the memory budget of {budget} bytes "
                f"({format_bytes(budget)}); lower N, or raise memory_budget_bytes")
    need = input_bytes_needed(cfg)
    if need > budget:
        elements = cfg.batch * cfg.heads * cfg.n * cfg.d  # of one (B, H, N, d) tensor
        return (f"skipped: inputs need {format_bytes(need)}, budget {format_bytes(budget)} ({need} > {budget} "
                f"bytes: q, k, v, dO and the outputs, plus float64 copies for the error check, "
                f"B x H x N x d = {elements} elements each); lower batch, heads, N or d, or raise memory_budget_bytes")
    need = dense_mask_bytes(cfg)
    if impl == "sdpa" and need > budget:
        return (f"skipped: sdpa with a window needs a dense N x N mask of {need} bytes ({format_bytes(need)}), "
                f"over the memory budget of {budget} bytes ({format_bytes(budget)}); "
                "lower N, or raise memory_budget_bytes")
    return None


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
                                               loop_order=LOOP_ORDER[impl], **mask)
    return lambda q, k, v: flash_attention_forward(q, k, v, block_q=cfg.block_q, block_k=cfg.block_k,
                                                   loop_order=LOOP_ORDER[impl], **mask)


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
    algorithm = "naive" if impl == "naive" else LOOP_ORDER[impl]
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
    return f"skipped: failed with {type(e).__name__}: {first_line}"


FAILURES = (RuntimeError, MemoryError)  # e.g. an allocation the guard did not foresee: the row says so, we go on
_now = time.perf_counter  # the time budget's clock (tests replace it)


class _TimeBudget:
    """Wall-clock seconds a sweep may run, counted from its start; None = no limit. Checked between measurements:
    a call already running finishes, so a sweep overruns its budget by at most one call of each implementation."""

    def __init__(self, seconds: float | None):
        self.seconds, self.start = seconds, _now()

    def used_up(self) -> bool:
        return self.seconds is not None and _now() - self.start >= self.seconds

    def status(self, when: str = "before this row ran") -> str:
        return (f"{TIME_BUDGET_STATUS} of {self.seconds:g} s used up {when}; lower N, the repeats or the number of "
                "implementations, or raise the time budget")


def _median_iqr(samples: list[float]) -> tuple[float, float]:
    """Median and interquartile range in seconds, as measure.Timing reports them (IQR 0 below two samples)."""
    if len(samples) < 2:
        return samples[0], 0.0
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return statistics.median(samples), q3 - q1


def _time_rows(fns: dict[str, Callable], inputs: tuple, *, warmup: int, repeats: int,
               clock: _TimeBudget) -> tuple[dict[str, tuple[float, float]], str | None]:
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
                    seed: int, report: Callable[[str], None], clock: _TimeBudget) -> list[dict]:
    """The rows of one configuration: guards, then peak memory and error of each impl in turn, then the times of
    all that ran, interleaved call by call (measure.time_calls) so that noise hits them alike."""
    if clock.used_up():
        return [_row(impl, cfg, threads, status=clock.status()) for impl in impls]
    why = {impl: _guard(impl, cfg, budget) for impl in impls}
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

    clock = _TimeBudget(time_budget_s)
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


def _configs(ns: list[int], block_pairs: list[tuple[int, int]], *, d, causal, window, batch, heads, dtype, device,
             mode) -> list[RunConfig]:
    d = _validate_int("d", d, 1, MAX_D, "Head dimensions are usually 64 or 128.")
    batch = _validate_int("batch", batch, 1)
    heads = _validate_int("heads", heads, 1)
    causal, window = validate_causal(causal), validate_window(window)
    dtype, device, mode = resolve_dtype(dtype), resolve_device(device), _validate_mode(mode)
    return [RunConfig(n, d, bq, bk, causal, window, batch, heads, dtype, device, mode)
            for n in ns for bq, bk in block_pairs]


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
        mode: "forward", or "training" for forward + backward (needs flashviz.backward).
        memory_budget_bytes: the memory a row may allocate (default half the available memory, container limit
            included): rows whose inputs (input_bytes) or whose naive S and P (naive_bytes_needed) exceed it are
            skipped with a status that says how many bytes they would need.
        seed: seeds the random q, k, v (and dO).
        time_budget_s: wall-clock seconds the sweep may run (None: no limit); once they are used up, the rows still
            to come are skipped with a status that starts "skipped: time budget" (checked between calls).
    Returns:
        DataFrame with columns COLUMNS: impl, N, d, block_q, block_k (<NA> for naive and sdpa), causal,
        window ("left,right" or None), batch, heads, dtype, device, threads, time_s, time_iqr_s (seconds),
        peak_bytes (bytes above the start level, output included), flops, gflops (GFLOP/s), hbm_bytes (modelled,
        NaN for sdpa and in training mode), max_abs_err (max |x - x_sdpa_fp64| over O and, in training, dQ, dK,
        dV), status ("ok" or "skipped: <why>"). df.attrs holds mode, memory_budget_bytes, repeats, seed and
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
    configs = _configs(ns, [(bq, bk)], d=d, causal=causal, window=window, batch=batch, heads=heads, dtype=dtype,
                       device=device, mode=mode)
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
    configs = _configs([n], list(dict.fromkeys(pairs)), d=d, causal=causal, window=window, batch=batch, heads=heads,
                       dtype=dtype, device=device, mode=mode)
    return _run(configs, impls, repeats=repeats, warmup=warmup, threads=threads,
                memory_budget_bytes=memory_budget_bytes, seed=seed, progress=progress, time_budget_s=time_budget_s)
