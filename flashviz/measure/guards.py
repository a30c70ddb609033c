"""Sweep guards: keep one sweep from taking the machine down. A row they stop says "not run: <why>" and the sweep
goes on.

- memory: how much memory is free (MemAvailable and the container's cgroup limit, or free GPU memory), what one
  row's inputs need (q, k, v, dO, the outputs and their float64 reference copies) and what naive attention's S and P
  need on top; `guard` says why an (impl, config) must not run under a memory budget (default: half the available
  memory), in a sentence that says how to fix it;
- time: `TimeBudget`, the wall-clock seconds a sweep may run, checked between measurements;
- request size: the FLOPs and calls a whole request costs, which flashviz.kit.jobs and flashviz.cli check up front
  against the caps in flashviz.limits.

Legend: B batch, H heads, N sequence length (N_q = N_k = N), d head dimension.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

import torch

from flashviz.measure.impls import RunConfig, dtype_bytes, resolve_dtype, validate_mode
from flashviz.model.flops import attention_flops
from flashviz.units import format_bytes
from flashviz.vocab import DTYPE_BYTES, FORWARD, NAIVE, SDPA, TRAINING

GIB = 1 << 30  # bytes per GiB
FALLBACK_RAM_BYTES = 4 * GIB  # assumed available RAM when neither /proc/meminfo nor sysconf can tell
MEMINFO = "/proc/meminfo"  # MemAvailable: the host's (or VM's) free memory, blind to a container's limit
CGROUP_V2_DIR = "/sys/fs/cgroup"  # cgroup v2: memory.max ("max" = no limit), memory.current, memory.stat
CGROUP_V1_DIR = "/sys/fs/cgroup/memory"  # cgroup v1: memory.limit_in_bytes, memory.usage_in_bytes, memory.stat
CGROUP_NO_LIMIT = 1 << 60  # bytes: cgroup v1 writes "no limit" as ~2^63 rounded down to a page; none is this large
INPUT_TENSORS = 4  # q, k, v and dO, each (B, H, N, d); dO is drawn in forward mode too
OUTPUT_TENSORS = {FORWARD: 1, TRAINING: 4}  # (B, H, N, d) results per call: O; O, dQ, dK, dV
FP64_BYTES = DTYPE_BYTES["float64"]  # the error check's reference runs in float64
TIME_BUDGET_STATUS = "not run: time budget"  # how every row that the time budget stopped starts its status
NAIVE_SCORE_COPIES = {FORWARD: 2, TRAINING: 4}  # N x N matrices naive holds at its peak: S, P (+ dP, dS)
MASK_BYTES_PER_SCORE = 8 + 1 + 1  # visible_mask's int64 j - i, the bool mask and its negation, per (i, j)


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
                mode: str = FORWARD) -> int:
    """Bytes of the (B, H, N, d) tensors one row of a sweep holds whatever the implementation: q, k, v, dO and the
    outputs in the input dtype, plus float64 copies of them all for the error check (float64 inputs are their own
    copies). Naive attention's S and P come on top (naive_bytes_needed).

    Example:
        >>> input_bytes(1024, 64, dtype="float32")  # 65536 elements x (5 x 4 + 5 x 8) bytes
        3932160
    """
    dtype, mode = resolve_dtype(dtype), validate_mode(mode)
    elements = batch * heads * n * d  # of one (B, H, N, d) tensor
    tensors = INPUT_TENSORS + OUTPUT_TENSORS[mode]
    fp64_copies = OUTPUT_TENSORS[mode] if dtype == torch.float64 else tensors  # float64 inputs are their own copies
    return elements * (tensors * dtype_bytes(dtype) + fp64_copies * FP64_BYTES)


def input_bytes_needed(cfg: RunConfig) -> int:
    """input_bytes for one configuration."""
    return input_bytes(cfg.n, cfg.d, batch=cfg.batch, heads=cfg.heads, dtype=cfg.dtype, mode=cfg.mode)


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


def guard(impl: str, cfg: RunConfig, budget: int) -> str | None:
    """Why this (impl, config) must not run, or None when it fits."""
    need = naive_bytes_needed(cfg)
    if impl == NAIVE and need > budget:
        what = "S and P" if cfg.mode == FORWARD else "S, P, dP and dS"
        return (f"not run: naive {what} would need {need} bytes ({format_bytes(need)}: "
                f"{NAIVE_SCORE_COPIES[cfg.mode]} x B x H x N^2 x {cfg.dtype_bytes} bytes"
                f"{' + the N x N mask' if cfg.masked else ''}), over the memory budget of {budget} bytes "
                f"({format_bytes(budget)}); lower N, or raise memory_budget_bytes (the CLI's --memory-budget-mib)")
    need = input_bytes_needed(cfg)
    if need > budget:
        elements = cfg.batch * cfg.heads * cfg.n * cfg.d  # of one (B, H, N, d) tensor
        return (f"not run: inputs need {format_bytes(need)}, budget {format_bytes(budget)} ({need} > {budget} "
                f"bytes: q, k, v, dO and the outputs, plus float64 copies for the error check, "
                f"B x H x N x d = {elements} elements each); lower batch, heads, N or d, or raise memory_budget_bytes "
                "(the CLI's --memory-budget-mib)")
    need = dense_mask_bytes(cfg)
    if impl == SDPA and need > budget:
        return (f"not run: sdpa with a window needs a dense N x N mask of {need} bytes ({format_bytes(need)}), "
                f"over the memory budget of {budget} bytes ({format_bytes(budget)}); "
                "lower N, or raise memory_budget_bytes (the CLI's --memory-budget-mib)")
    return None


class TimeBudget:
    """Wall-clock seconds a sweep may run, counted from its start; None = no limit. Checked between measurements:
    a call already running finishes, so a sweep overruns its budget by at most one call of each implementation."""

    def __init__(self, seconds: float | None, now: Callable[[], float] = time.perf_counter):
        self.seconds, self.now = seconds, now  # now: the clock, in seconds
        self.start = now()

    def used_up(self) -> bool:
        return self.seconds is not None and self.now() - self.start >= self.seconds

    def status(self, when: str = "before this row ran") -> str:
        return (f"{TIME_BUDGET_STATUS} of {self.seconds:g} s used up {when}; lower N, the repeats or the number of "
                "implementations, or raise time_budget_s (the CLI's --time-budget)")
