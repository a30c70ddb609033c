"""Measuring honestly: exact peak memory, median time with error bars, and FLOP counts.

Peak memory (DESIGN.md, "Measuring honestly"):
    CPU   PyTorch's profiler with `profile_memory=True` records one event for every allocation and free of the
          c10 CPU allocator, including scratch buffers that fused C++ kernels (SDPA's flash kernel) allocate inside
          themselves. A running sum of those events, in time order, is the exact live-bytes curve; its maximum is the
          peak. It is repeatable to the byte.
    CUDA  `torch.cuda.reset_peak_memory_stats()`, run, synchronize, `max_memory_allocated()` minus the start level.
    A second, independent method, `measure_memory_dispatch`, tracks the tensors that flow through the dispatcher
    (a TorchDispatchMode). It agrees with the profiler on pure-PyTorch code and misses kernel-internal scratch: the
    difference between the two is exactly what a fused kernel allocates for itself.

Time: warm-up calls, then the median (and interquartile range) of `repeats` timed calls with `time.perf_counter`,
with the intra-op thread count set explicitly and reported, and CUDA synchronised around every call. `time_calls`
interleaves several implementations call by call, so machine noise hits them alike.

FLOPs: forward attention costs 4 N_q N_k d per (batch, head): 2 N_q N_k d for S = Q K^T and 2 N_q N_k d for P V
(FlashAttention-1, Section 3.2; softmax and masking are not counted). A tiled kernel does that work only on the
tiles it computes. torch 2.13's FlopCounterMode counts 0 for CPU SDPA (its CPU flash kernel has no registered FLOP
formula unless one passes a custom mapping), so we count analytically instead.

References:
    Dao et al., FlashAttention (2022), Section 3.2 and Appendix B (FLOP counts); Dao, FlashAttention-2 (2023), Section 4
    (backward = 2.5 x forward FLOPs).

Legend: B batch, H heads, N_q / N_k query / key lengths, d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from flashviz._validate import Window, validate_block, validate_causal, validate_length, validate_window
from flashviz.tiling import tile_schedule

FLOPS_PER_MAC = 2  # one multiply-accumulate = one multiply + one add
MATMULS_FORWARD = 2  # S = Q K^T and O = P V
BACKWARD_FLOP_FACTOR = 2.5  # FA2 paper, Section 4: the backward pass has 2.5x the FLOPs of the forward
TRAINING_FLOP_FACTOR = 1.0 + BACKWARD_FLOP_FACTOR  # forward + backward = 3.5 x forward
MEMORY_EVENT = "[memory]"  # name of the profiler's allocator events (one per allocation or free)
_PROFILER_LOCK = threading.Lock()  # one torch profiler at a time per process


# ----------------------------------------------------------------------------------------------------------------------
# peak memory


def _tensors_in(*trees: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(trees)
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def _device_of(args: tuple, kwargs: dict) -> torch.device:
    """The device the call runs on: the first CUDA tensor argument's, else CPU."""
    for t in _tensors_in(args, kwargs):
        if t.device.type == "cuda":
            return t.device
    return torch.device("cpu")


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 for a moment: libkineto prints 'USDT ... profiler_start/stop' lines straight to it
    (not through Python, and KINETO_LOG_LEVEL does not reach them), which would litter every CLI run."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (embedded interpreters): nothing to silence
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _peak_of_events(deltas: list[tuple[int, int, int]]) -> int:
    """Max of the running sum of (time_ns, order, bytes) allocator events, above 0 (the level at the start)."""
    level = peak = 0
    for _, _, nbytes in sorted(deltas):  # time order; ties keep the order the profiler recorded them in
        level += nbytes
        peak = max(peak, level)
    return peak


def _cpu_peak_and_result(fn: Callable, args: tuple, kwargs: dict) -> tuple[int, Any]:
    # The profiler is process-wide: two at once (threads of one server) crash the process with SIGSEGV.
    with _PROFILER_LOCK:
        prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        with _quiet_stderr():
            prof.__enter__()
        try:
            result = fn(*args, **kwargs)
        finally:
            with _quiet_stderr():
                prof.__exit__(None, None, None)
    # The raw kineto events: every allocator call is one "[memory]" event with a signed size (+alloc, -free).
    # Do NOT use prof.events()/key_averages(): there an allocation made inside an op is folded into that op's
    # cpu_memory_usage (which also sums its children), and a running sum over ops double-counts.
    deltas = [(e.start_ns(), order, e.nbytes()) for order, e in enumerate(prof.profiler.kineto_results.events())
              if e.name() == MEMORY_EVENT and e.device_type() == torch.autograd.DeviceType.CPU]
    return _peak_of_events(deltas), result


def _cuda_peak_and_result(fn: Callable, args: tuple, kwargs: dict, device: torch.device) -> tuple[int, Any]:
    torch.cuda.synchronize(device)
    start = torch.cuda.memory_allocated(device)  # bytes live before the call
    torch.cuda.reset_peak_memory_stats(device)
    result = fn(*args, **kwargs)
    torch.cuda.synchronize(device)
    return max(0, torch.cuda.max_memory_allocated(device) - start), result


def peak_memory_and_result(fn: Callable, *args: Any, **kwargs: Any) -> tuple[int, Any]:
    """`measure_memory`, also handing back what fn returned (so a sweep need not run fn twice).

    Returns:
        (peak bytes above the starting level, fn(*args, **kwargs)).
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable (the function to measure), got {type(fn).__name__}. "
                        "Example: measure_memory(naive_attention, q, k, v, causal=True).")
    device = _device_of(args, kwargs)
    if device.type == "cuda":
        return _cuda_peak_and_result(fn, args, kwargs, device)
    return _cpu_peak_and_result(fn, args, kwargs)


def measure_memory(fn: Callable, *args: Any, **kwargs: Any) -> int:
    """Peak bytes allocated during fn(*args, **kwargs), above the level at its start.

    The device is the first CUDA tensor among the arguments, else the CPU.

    What it sees:
        CPU: every allocation and free of PyTorch's CPU allocator during the call, as recorded by the profiler
        (`profile_memory=True`): the tensors the call creates, its output (still alive when it returns), autograd's
        saved tensors, and scratch buffers that C++ kernels allocate internally (SDPA's flash kernel buffers, bmm
        temporaries). Exact to the byte and repeatable. Frees of tensors that existed before the call lower the
        level below the start, so an in-place algorithm that frees its input can read less than its output.
        CUDA: the caching allocator's `max_memory_allocated`, which counts every tensor allocation on that device.
    What it cannot see:
        Memory that bypasses PyTorch's allocator: oneDNN/MKL/OpenBLAS private workspaces, Python objects, NumPy
        arrays, the profiler's own bookkeeping; allocator overheads (CUDA's cached-but-free blocks, glibc's rounding
        and the fresh pages mmap hands out for blocks above 32 MiB); other threads' allocations made outside the
        profiled thread's context; on CUDA, cuBLAS/cuDNN workspaces that are not allocated through PyTorch.
        It measures bytes *allocated*, not resident (RSS) or reserved.

    Args:
        fn: the callable to measure.  *args, **kwargs: passed to fn unchanged.
    Returns:
        int, bytes: max over the call of (live bytes - live bytes at the start), >= 0.

    Example:
        >>> measure_memory(torch.empty, 1 << 20)  # 2^20 fp32 elements
        4194304
    """
    return peak_memory_and_result(fn, *args, **kwargs)[0]


class _DispatchTracker(TorchDispatchMode):
    """Counts the bytes of every new storage returned by an op; a storage dies when its last Python tensor does."""

    def __init__(self) -> None:
        super().__init__()
        self._live: dict[int, list[int]] = {}  # storage data_ptr -> [tensors alive, nbytes]
        self.level = 0  # bytes alive now (above the start)
        self.peak = 0  # max of level

    def _release(self, key: int) -> None:
        entry = self._live.get(key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] == 0:
            self.level -= entry[1]
            del self._live[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in _tensors_in(args, kwargs)}
        for t in _tensors_in(out):
            storage = t.untyped_storage()
            key = storage.data_ptr()
            if key in inputs and key not in self._live:
                continue  # a view of, or in-place result on, a tensor that existed before the call
            entry = self._live.get(key)
            if entry is None:
                entry = self._live[key] = [0, storage.nbytes()]
                self.level += storage.nbytes()
                self.peak = max(self.peak, self.level)
            entry[0] += 1
            weakref.finalize(t, self._release, key)
        return out


def measure_memory_dispatch(fn: Callable, *args: Any, **kwargs: Any) -> int:
    """Peak bytes of the tensors that ops return during the call, seen through a TorchDispatchMode (second method).

    A cross-check for `measure_memory`: it sees every tensor that crosses the dispatcher, so on pure-PyTorch code
    (naive_attention, the tiled kernels) the two agree to within a few bytes of internal 0-dim scalars. It cannot see
    what a C++ kernel allocates for itself and frees before returning (SDPA's per-thread scratch), nor storages that
    C++ keeps alive after their Python tensors die (autograd's saved tensors), so it reads low for those.

    Args:
        fn: the callable to measure.  *args, **kwargs: passed to fn unchanged.
    Returns:
        int, bytes: peak of the live bytes of storages created during the call.

    Example:
        >>> measure_memory_dispatch(lambda: [torch.empty(1 << 20) for _ in range(3)])  # three 4 MiB tensors held
        12582912
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}.")
    with _DispatchTracker() as tracker:
        fn(*args, **kwargs)
    return tracker.peak


# ----------------------------------------------------------------------------------------------------------------------
# time


@dataclass(frozen=True)
class Timing:
    """Wall-clock time of repeated calls."""

    median: float  # seconds, median of the timed calls
    iqr: float  # seconds, interquartile range (75th - 25th percentile); 0 with fewer than 2 samples
    samples: tuple[float, ...]  # seconds, every timed call in order (warm-up calls excluded)
    threads: int  # torch intra-op threads the calls ran with
    device: str  # "cpu" or "cuda:0", ...


@contextlib.contextmanager
def threads_set_to(threads: int | None) -> Iterator[int]:
    """Run the block with `threads` intra-op threads (None: keep the current count); restore the count after.

    Yields:
        the thread count in force inside the block.
    """
    before = torch.get_num_threads()
    if threads is None:
        threads = before
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1 or None (keep torch's current {before}), got {threads!r}.")
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable, *args: Any, warmup: int = 2, repeats: int = 10, threads: int | None = None,
              **kwargs: Any) -> Timing:
    """Time fn(*args, **kwargs): `warmup` untimed calls, then `repeats` timed ones.

    Args:
        fn: the callable to time.  *args, **kwargs: passed to fn (a kwarg named `threads` is taken by this function).
        warmup: untimed calls first (>= 0): page faults, lazy init, allocator warm-up.
        repeats: timed calls (>= 1).
        threads: intra-op threads to run with; None keeps torch's current count. Always reported in the result.
    Returns:
        Timing(median, iqr, samples, threads, device), seconds.

    Example:
        >>> t = time_call(torch.mm, torch.randn(64, 64), torch.randn(64, 64), repeats=5, threads=1)
        >>> t.threads, len(t.samples)
        (1, 5)
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}.")
    for name, value, low in (("warmup", warmup, 0), ("repeats", repeats, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}.")
    device = _device_of(args, kwargs)
    with threads_set_to(threads) as n_threads:
        for _ in range(warmup):
            fn(*args, **kwargs)
        _sync(device)
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(*args, **kwargs)
            _sync(device)
            samples.append(time.perf_counter() - t0)
    return _timing(samples, n_threads, device)


def time_calls(fns: Mapping[str, Callable], *args: Any, warmup: int = 2, repeats: int = 10,
               threads: int | None = None, **kwargs: Any) -> dict[str, Timing]:
    """Time several callables on the same arguments side by side, interleaved call by call.

    Repeat r calls every function once before repeat r + 1 starts, so a burst of machine noise (another process,
    frequency scaling) lands on all of them alike and their ratios stay honest (DESIGN.md, "Measuring honestly").

    Args:
        fns: name -> callable, each called as fn(*args, **kwargs).
        warmup, repeats, threads: as for `time_call`.
    Returns:
        name -> Timing, in the order of fns.

    Example:
        >>> a, b = torch.randn(64, 64), torch.randn(64, 64)
        >>> sorted(time_calls({"mm": torch.mm, "add": torch.add}, a, b, repeats=3, threads=1))
        ['add', 'mm']
    """
    if not fns or not all(callable(f) for f in fns.values()):
        raise TypeError(f"fns must map names to callables, got {fns!r}.")
    for name, value, low in (("warmup", warmup, 0), ("repeats", repeats, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}.")
    device = _device_of(args, kwargs)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    with threads_set_to(threads) as n_threads:
        for fn in fns.values():
            for _ in range(warmup):
                fn(*args, **kwargs)
        _sync(device)
        for _ in range(repeats):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                fn(*args, **kwargs)
                _sync(device)
                samples[name].append(time.perf_counter() - t0)
    return {name: _timing(s, n_threads, device) for name, s in samples.items()}


def _timing(samples: list[float], threads: int, device: torch.device) -> Timing:
    if len(samples) >= 2:
        q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
        iqr = q3 - q1
    else:
        iqr = 0.0
    return Timing(statistics.median(samples), iqr, tuple(samples), threads, str(device))


def benchmark(fn: Callable, *args: Any, warmup: int = 2, repeats: int = 10, **kwargs: Any) -> float:
    """Median seconds of fn(*args, **kwargs) over `repeats` calls after `warmup` calls, at torch's current thread
    count (set explicitly; see `time_call` for the IQR, the samples and a chosen thread count).

    Args:
        fn: the callable to time.  *args, **kwargs: passed to fn.
        warmup: untimed calls first.  repeats: timed calls.
    Returns:
        float, seconds.

    Example:
        >>> benchmark(torch.mm, torch.randn(64, 64), torch.randn(64, 64), repeats=3) > 0
        True
    """
    return time_call(fn, *args, warmup=warmup, repeats=repeats, **kwargs).median


# ----------------------------------------------------------------------------------------------------------------------
# FLOPs


def attention_flops(n_q: int, n_k: int, d: int, *, batch: int = 1, heads: int = 1, block_q: int | None = None,
                    block_k: int | None = None, causal: bool = False, window: Window = None,
                    training: bool = False) -> int:
    """FLOPs of attention: 4 N_q N_k d per (batch, head) for the dense forward; a tiled kernel only on its tiles.

    Args:
        n_q, n_k: query and key lengths.  d: head dimension.  batch, heads: B and H.
        block_q, block_k: Br and Bc. Give both to count only the tiles that tile_schedule computes (a masked tiled
            kernel); give neither to count the dense matrix (naive attention computes every score, masked or not).
        causal, window: the mask (only used with block sizes).
        training: forward + backward, counted as 3.5 x forward (FA2 convention: backward = 2.5 x forward).
    Returns:
        int FLOPs (training counts are rounded to the nearest int).

    Example:
        >>> attention_flops(1024, 1024, 64)  # 4 N^2 d
        268435456
        >>> attention_flops(1024, 1024, 64, block_q=128, block_k=128, causal=True)  # 36 of 64 tiles computed
        150994944
    """
    n_q, n_k = validate_length("n_q", n_q), validate_length("n_k", n_k)
    d, batch, heads = validate_block("d", d), validate_block("batch", batch), validate_block("heads", heads)
    causal, window = validate_causal(causal), validate_window(window)
    if (block_q is None) != (block_k is None):
        raise ValueError(f"give both block_q and block_k (tiled count) or neither (dense count), got "
                         f"block_q={block_q!r}, block_k={block_k!r}.")
    if block_q is None:
        pairs = n_q * n_k  # (query, key) scores computed
    else:
        schedule = tile_schedule(n_q, n_k, block_q, block_k, causal=causal, window=window)
        pairs = sum(t.rows * t.cols for t in schedule.computed())
    forward = MATMULS_FORWARD * FLOPS_PER_MAC * pairs * d * batch * heads  # 4 pairs d per (batch, head)
    return round(forward * TRAINING_FLOP_FACTOR) if training else forward


def visible_pairs(n_q: int, n_k: int, *, causal: bool = False, window: Window = None) -> int:
    """Number of (query, key) pairs the mask lets through: the least work any exact kernel must do.

    Closed form per query row i: keys in [max(0, i - left), min(n_k - 1, i + right)] (right = 0 when causal).

    Example:
        >>> visible_pairs(4, 4, causal=True)
        10
    """
    n_q, n_k = validate_length("n_q", n_q), validate_length("n_k", n_k)
    causal, window = validate_causal(causal), validate_window(window)
    left, right = window if window is not None else (None, None)
    if causal:
        right = 0 if right is None else min(right, 0)
    if left is None and right is None:
        return n_q * n_k
    i = torch.arange(n_q, dtype=torch.int64)  # (N_q,) query positions
    lo = torch.zeros_like(i) if left is None else (i - left).clamp(min=0)  # first visible key of each row
    hi = torch.full_like(i, n_k - 1) if right is None else (i + right).clamp(max=n_k - 1)  # last visible key
    return int((hi - lo + 1).clamp(min=0).sum())
