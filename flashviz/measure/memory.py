"""Exact peak memory of a call.

    CPU   PyTorch's profiler with `profile_memory=True` records one event for every allocation and free of the
          c10 CPU allocator, including scratch buffers that fused C++ kernels (SDPA's flash kernel) allocate inside
          themselves. A running sum of those events, in time order, is the exact live-bytes curve; its maximum is the
          peak. It is repeatable to the byte.
    CUDA  `torch.cuda.reset_peak_memory_stats()`, run, synchronize, `max_memory_allocated()` minus the start level.

A second, independent method, `measure_memory_dispatch`, tracks the tensors that flow through the dispatcher
(a TorchDispatchMode). It agrees with the profiler on pure-PyTorch code and misses kernel-internal scratch: the
difference between the two is exactly what a fused kernel allocates for itself.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

MEMORY_EVENT = "[memory]"  # name of the profiler's allocator events (one per allocation or free)
_PROFILER_LOCK = threading.Lock()  # one torch profiler at a time per process


# ----------------------------------------------------------------------------------------------------------------------
# peak memory


def tensors_in(*trees: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(trees)
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def device_of(args: tuple, kwargs: dict) -> torch.device:
    """The device the call runs on: the first CUDA tensor argument's, else CPU."""
    for t in tensors_in(args, kwargs):
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
    device = device_of(args, kwargs)
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
        inputs = {t.untyped_storage().data_ptr() for t in tensors_in(args, kwargs)}
        for t in tensors_in(out):
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


