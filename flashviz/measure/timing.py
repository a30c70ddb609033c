"""Honest timing: warm-up calls, then the median (and interquartile range) of timed calls.

Each call is timed with `time.perf_counter`, with the intra-op thread count set explicitly and reported, and CUDA
synchronised around every call. `time_calls` interleaves several implementations call by call, so machine noise hits
them alike: compare implementations as ratios measured side by side in one run. Both report their progress between
calls (flashviz.measure.progress), and a caller stops them by raising from that callback.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from flashviz.measure.memory import device_of
from flashviz.measure.progress import Progress

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


def _validate_counts(warmup: object, repeats: object) -> None:
    for name, value, low in (("warmup", warmup, 0), ("repeats", repeats, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}.")


def time_call(fn: Callable, *args: Any, warmup: int = 2, repeats: int = 10, threads: int | None = None,
              progress: Progress | None = None, sync_device: torch.device | str | None = None,
              **kwargs: Any) -> Timing:
    """Time fn(*args, **kwargs): `warmup` untimed calls, then `repeats` timed ones (`time_calls` with one function).

    Args:
        fn: the callable to time.  *args, **kwargs: passed to fn (kwargs named `threads`, `progress` or
            `sync_device` are taken by this function).
        warmup: untimed calls first (>= 0): page faults, lazy init, allocator warm-up.
        repeats: timed calls (>= 1).
        threads: intra-op threads to run with; None keeps torch's current count. Always reported in the result.
        progress: called as progress(done, total, label) before every call and once after the last (see
            `time_calls`); raise from it to stop the timing.
        sync_device: the device synchronised after every call (CUDA work is asynchronous); None: the first CUDA
            tensor among args and kwargs, else the CPU. Give it when fn is a closure over CUDA tensors.
    Returns:
        Timing(median, iqr, samples, threads, device), seconds.

    Example:
        >>> t = time_call(torch.mm, torch.randn(64, 64), torch.randn(64, 64), repeats=5, threads=1)
        >>> t.threads, len(t.samples)
        (1, 5)
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}.")
    name = getattr(fn, "__name__", "call")
    return time_calls({name: fn}, *args, warmup=warmup, repeats=repeats, threads=threads, progress=progress,
                      sync_device=sync_device, **kwargs)[name]


def time_calls(fns: Mapping[str, Callable], *args: Any, warmup: int = 2, repeats: int = 10,
               threads: int | None = None, progress: Progress | None = None,
               sync_device: torch.device | str | None = None, **kwargs: Any) -> dict[str, Timing]:
    """Time several callables on the same arguments side by side, interleaved call by call.

    Every function gets its `warmup` untimed calls first; then repeat r calls every function once before repeat
    r + 1 starts, so a burst of machine noise (another process, frequency scaling) lands on all of them alike and
    their ratios stay honest. This is the project's one timing loop: every timing goes through it.

    Args:
        fns: name -> callable, each called as fn(*args, **kwargs).
        warmup, repeats, threads, sync_device: as for `time_call`.
        progress: called as progress(done, total, label) before each of the total = len(fns) * (warmup + repeats)
            calls (done = calls finished, label = the call about to run, e.g. "repeat 2 of 5: mm") and once after
            the last (done = total, label "timed"), never inside a timed interval. Raise from it to stop the
            timing: the exception propagates (the thread count is restored) and no result is returned.
    Returns:
        name -> Timing, in the order of fns.

    Example:
        >>> a, b = torch.randn(64, 64), torch.randn(64, 64)
        >>> sorted(time_calls({"mm": torch.mm, "add": torch.add}, a, b, repeats=3, threads=1))
        ['add', 'mm']
    """
    if not fns or not all(callable(f) for f in fns.values()):
        raise TypeError(f"fns must map names to callables, got {fns!r}.")
    _validate_counts(warmup, repeats)
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be a callable progress(done, total, label) or None, got {progress!r}.")
    device = device_of(args, kwargs) if sync_device is None else torch.device(sync_device)
    report = progress or (lambda done, total, label: None)
    total, done = len(fns) * (warmup + repeats), 0
    samples: dict[str, list[float]] = {name: [] for name in fns}
    with threads_set_to(threads) as n_threads:
        for name, fn in fns.items():
            for w in range(warmup):
                report(done, total, f"warm-up {w + 1} of {warmup}: {name}")
                fn(*args, **kwargs)
                done += 1
        _sync(device)
        for r in range(repeats):
            for name, fn in fns.items():
                report(done, total, f"repeat {r + 1} of {repeats}: {name}")
                t0 = time.perf_counter()
                fn(*args, **kwargs)
                _sync(device)
                samples[name].append(time.perf_counter() - t0)
                done += 1
        report(total, total, "timed")
    return {name: _timing(s, n_threads, device) for name, s in samples.items()}


def median_iqr(samples: list[float]) -> tuple[float, float]:
    """Median and interquartile range (75th - 25th percentile) of timed calls, in seconds; IQR 0 below two samples.

    Example:
        >>> median_iqr([1.0, 2.0, 3.0, 4.0, 5.0])
        (3.0, 2.0)
    """
    if len(samples) < 2:
        return samples[0], 0.0
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return statistics.median(samples), q3 - q1


def _timing(samples: list[float], threads: int, device: torch.device) -> Timing:
    median, iqr = median_iqr(samples)
    return Timing(median, iqr, tuple(samples), threads, str(device))


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


