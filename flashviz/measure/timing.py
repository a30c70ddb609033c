"""Honest timing: warm-up calls, then the median of timed calls with its confidence interval and interquartile range.

Each call is timed with `time.perf_counter` (or an injected clock), with the intra-op thread count set explicitly and
reported, and CUDA synchronised around every call. `time_calls` interleaves several implementations call by call, so
machine noise hits them alike: compare implementations as ratios measured side by side in one run. Both report their
progress between calls (flashviz.measure.progress), and a caller stops them by raising from that callback.

Every Timing carries the distribution-free 95% interval of its median (flashviz.measure.stats.median_ci) and says
whether it converged: whether that interval is a real 95% one (at least 6 calls) and at most +-5% of the median wide.
Two ways to choose the number of calls:

    repeats=10                 a fixed number of timed calls per implementation
    repeats="auto" / Adaptive  keep timing, round after round, until every implementation's median has converged or
                               a time budget or a largest number of repeats is spent (as pyperf, criterion and
                               torch.utils.benchmark's adaptive_autorange do)

flashviz.measure.verdict turns two Timings into a verdict that names a winner only when the intervals separate and
both medians converged.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from numbers import Real
from typing import Any

import torch

from flashviz.limits import AUTO_BUDGET_S, AUTO_MAX_REPEATS
from flashviz.measure.allocator import steady_allocator
from flashviz.measure.load import cpu_shares, disturbed, on_core_times, record, waited_long
from flashviz.measure.load import wait_clock as run_queue_clock
from flashviz.measure.memory import device_of
from flashviz.measure.progress import Progress
from flashviz.measure.stats import (
    CONFIDENCE,
    TARGET_REL_CI,
    is_converged,
    median_ci,
    min_repeats,
    rel_half_width,
    validate_fraction,
)

# ----------------------------------------------------------------------------------------------------------------------
# time


@dataclass(frozen=True)
class Timing:
    """Wall-clock time of repeated calls."""

    median: float  # seconds, median of the timed calls
    iqr: float  # seconds, interquartile range (75th - 25th percentile); 0 with fewer than 2 samples
    samples: tuple[float, ...]  # seconds, every timed call kept, in order (warm-up calls excluded); on one thread
    #                             with waits measured, each call's wall time less its wait for a core
    threads: int  # torch intra-op threads the calls ran with
    device: str  # "cpu" or "cuda:0", ...
    ci_low: float  # seconds, low end of the distribution-free interval of the median (stats.median_ci)
    ci_high: float  # seconds, high end of that interval
    ci_level: float  # what the interval covers: >= the confidence asked for from 6 calls on (at 95%), less below
    converged: bool  # ci_level reached the confidence and the interval's half-width is <= the target of the median
    calls: tuple[float, ...] = ()  # seconds of every timed call in order, those set aside included (() = samples)
    cpu: tuple[float, ...] = ()  # this process's CPU seconds over each of calls (() where not measured: CUDA, a clock)
    aside: tuple[bool, ...] = ()  # which of calls were set aside as disturbed (flashviz.measure.load.disturbed)
    threads_asked: int = 0  # the threads the caller asked for (more than `threads`: a thread_cap ran it with fewer;
    #                         0: not recorded, as many as it ran with)
    waits: tuple[float, ...] = ()  # seconds the kernel's threads waited for a core over each of calls, summed
    #                                (flashviz.measure.load.wait_clock; () where not measured)

    @property
    def repeats(self) -> int:
        """Timed calls behind the median."""
        return len(self.samples)

    @property
    def set_aside(self) -> int:
        """Timed calls set aside: the process lost its cores during them."""
        return sum(self.aside)

    @property
    def waited(self) -> int:
        """Calls on one thread that waited for a core for over a quarter of their wall time, and whose wait was taken
        off their time (flashviz.measure.load.on_core_times); on more threads such calls are set aside instead."""
        if self.threads != 1 or not self.waits:
            return 0
        return sum(waited_long(q, w) for q, w in zip(self.waits, self.calls, strict=True))

    @property
    def too_busy(self) -> bool:
        """More calls were set aside than kept clean: the machine was too busy for a clean timing."""
        return self.set_aside > len(self.calls or self.samples) - self.set_aside

    @property
    def capped(self) -> bool:
        """It ran with fewer threads than asked for (a thread_cap: other work kept cores busy)."""
        return self.threads_asked > self.threads

    def row(self) -> dict[str, float | int]:
        """The columns of a timed row that the verdict rule reads (flashviz.measure.verdict.row_estimate): the median,
        its interval and calls, the calls set aside, and the threads it ran with and was asked for.

        Example:
            >>> t = timing_of([1.0, 1.02, 0.98, 1.01, 0.99, 1.0], 1, "cpu", threads_asked=2)
            >>> t.capped, t.row()["time_lo_s"], t.row()["threads"], t.row()["threads_asked"]
            (True, 0.98, 1, 2)
        """
        return {"time_s": self.median, "time_lo_s": self.ci_low, "time_hi_s": self.ci_high, "repeats": self.repeats,
                "set_aside": self.set_aside, "threads": self.threads,
                "threads_asked": self.threads_asked or self.threads}

    @property
    def cpu_share(self) -> float:
        """The median share of the CPU the kept calls ran with (CPU seconds per wall second), NaN if not measured."""
        if not self.cpu:
            return math.nan
        kept = [s for s, a in zip(cpu_shares(self.calls, self.cpu), self.aside, strict=True) if not a]
        return statistics.median(kept) if kept else math.nan

    @property
    def rel_ci(self) -> float:
        """Half the interval's width as a fraction of the median (0.05: the median is known to +-5%)."""
        return rel_half_width(self.median, self.ci_low, self.ci_high)


MIN_REPEATS = min_repeats(CONFIDENCE)  # 6: the fewest timed calls whose [min, max] covers the median with 95%


@dataclass(frozen=True)
class Adaptive:
    """Time until every median is known well enough, or a budget is spent: the adaptive mode of `time_calls`.

    After the warm-up, rounds of one interleaved call per implementation run until, after at least `min_repeats`
    rounds, every implementation's interval reaches `confidence` and has a half-width of at most `target_rel_ci` of
    its median, or `max_repeats` rounds ran, or `budget_s` seconds passed since the timing began (warm-up
    included; checked between rounds, so it overruns by at most one round, and never stops before min_repeats).
    """

    target_rel_ci: float = TARGET_REL_CI  # wanted half-width of the median's interval, as a fraction of the median
    budget_s: float | None = AUTO_BUDGET_S  # seconds after which no new round starts (None: max_repeats only)
    min_repeats: int = MIN_REPEATS  # rounds always run (6: the fewest with a 95% interval)
    max_repeats: int = AUTO_MAX_REPEATS  # rounds at most; the progress total counts this many
    confidence: float = CONFIDENCE  # coverage of the interval of each median

    def __post_init__(self) -> None:
        validate_fraction("target_rel_ci", self.target_rel_ci)
        validate_fraction("confidence", self.confidence)
        budget = self.budget_s
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, Real) or math.isnan(budget)
                                   or budget < 0):
            raise ValueError(f"budget_s must be None (no time limit) or a number of seconds >= 0, got {budget!r}.")
        for name, value, low in (("min_repeats", self.min_repeats, 1), ("max_repeats", self.max_repeats,
                                                                         self.min_repeats)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}"
                                 + (" (max_repeats may not be below min_repeats)." if name == "max_repeats" else "."))


AUTO = "auto"  # repeats=AUTO: Adaptive() with its defaults
Repeats = int | str | Adaptive  # what `repeats` accepts: a fixed count, "auto" or an Adaptive


def resolve_repeats(repeats: object) -> int | Adaptive:
    """A fixed number of timed calls (an int >= 1) or an Adaptive; "auto" is Adaptive() with its defaults.

    Example:
        >>> resolve_repeats(5), resolve_repeats("auto").target_rel_ci
        (5, 0.05)
    """
    if isinstance(repeats, Adaptive):
        return repeats
    if isinstance(repeats, str) and repeats == AUTO:
        return Adaptive()
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1 (a fixed number of timed calls), {AUTO!r} or an "
                         f"Adaptive(...) (time until the median is known to +-5%), got {repeats!r}.")
    return repeats


_thread_cap: int | None = None  # the most threads any timing in this process may use now (see thread_cap)
_threads_asked: int | None = None  # the threads the innermost threads_set_to was asked for (None: outside any)


@contextlib.contextmanager
def thread_cap(most: int | None) -> Iterator[None]:
    """Inside the block, every `threads_set_to` uses at most `most` threads (None: no cap). The timing worker sets it
    per run to the cores other work leaves free (flashviz.measure.load.choose_threads); each result still reports
    the threads it ran with."""
    global _thread_cap
    before = _thread_cap
    _thread_cap = most
    try:
        yield
    finally:
        _thread_cap = before


@contextlib.contextmanager
def threads_set_to(threads: int | None) -> Iterator[int]:
    """Run the block with `threads` intra-op threads (None: keep the current count), or fewer under a `thread_cap`;
    restore the count after.

    Yields:
        the thread count in force inside the block.
    """
    global _threads_asked
    before, asked_before = torch.get_num_threads(), _threads_asked
    if threads is None:
        threads = asked_before or before  # inside another block, what that one was asked for
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1 or None (keep torch's current {before}), got {threads!r}.")
    _threads_asked = threads
    if _thread_cap is not None:
        threads = min(threads, _thread_cap)
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)
        _threads_asked = asked_before


def threads_asked() -> int:
    """The threads the innermost `threads_set_to` block was asked for (before a `thread_cap`), or torch's current
    count outside any.

    Example:
        >>> with thread_cap(1), threads_set_to(2) as n:
        ...     n, threads_asked()
        (1, 2)
    """
    return _threads_asked or torch.get_num_threads()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _validate_warmup(warmup: object) -> None:
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}.")


def time_call(fn: Callable, *args: Any, warmup: int = 2, repeats: Repeats = 10, threads: int | None = None,
              progress: Progress | None = None, sync_device: torch.device | str | None = None,
              clock: Callable[[], float] | None = None, **kwargs: Any) -> Timing:
    """Time fn(*args, **kwargs): `warmup` untimed calls, then the timed ones (`time_calls` with one function).

    Args:
        fn: the callable to time.  *args, **kwargs: passed to fn (kwargs named `threads`, `progress`,
            `sync_device` or `clock` are taken by this function).
        warmup: untimed calls first (>= 0): page faults, lazy init, allocator warm-up.
        repeats: timed calls: an int >= 1, or "auto" / an Adaptive to time until the median is known (`time_calls`).
        threads: intra-op threads to run with; None keeps torch's current count. Always reported in the result.
        progress: called as progress(done, total, label) before every call and once after the last (see
            `time_calls`); raise from it to stop the timing.
        sync_device: the device synchronised after every call (CUDA work is asynchronous); None: the first CUDA
            tensor among args and kwargs, else the CPU. Give it when fn is a closure over CUDA tensors.
        clock: seconds now, read before and after every timed call and for the adaptive budget; None:
            time.perf_counter. Tests inject a fake one to make the samples exact.
    Returns:
        Timing(median, iqr, samples, threads, device, ci_low, ci_high, ci_level, converged), seconds.

    Example:
        >>> t = time_call(torch.mm, torch.randn(64, 64), torch.randn(64, 64), repeats=5, threads=1)
        >>> t.threads, len(t.samples), t.ci_low <= t.median <= t.ci_high
        (1, 5, True)
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}.")
    name = getattr(fn, "__name__", "call")
    return time_calls({name: fn}, *args, warmup=warmup, repeats=repeats, threads=threads, progress=progress,
                      sync_device=sync_device, clock=clock, **kwargs)[name]


def time_calls(fns: Mapping[str, Callable], *args: Any, warmup: int = 2, repeats: Repeats = 10,
               threads: int | None = None, progress: Progress | None = None,
               sync_device: torch.device | str | None = None, clock: Callable[[], float] | None = None,
               cpu_clock: Callable[[], float] | None = None, wait_clock: Callable[[], float] | None = None,
               stop: Callable[[], bool] | None = None, **kwargs: Any) -> dict[str, Timing]:
    """Time several callables on the same arguments side by side, interleaved call by call.

    Every function gets its `warmup` untimed calls first; then repeat r calls every function once before repeat
    r + 1 starts, so a burst of machine noise (another process, frequency scaling) lands on all of them alike and
    their ratios stay honest. This is the project's one timing loop: every timing goes through it.

    With repeats="auto" or an Adaptive, the rounds go on until every function's median has converged (its 95%
    interval at most +-5% of it, by default), or the Adaptive's max_repeats or budget_s is spent; every function is
    called in every round, so all get the same number of repeats over the same stretch of time.

    Each timed call records its wall time, this process's CPU time and the time the kernel's threads waited for a
    core. On the CPU, a call during which the process lost its cores (flashviz.measure.load.disturbed) is set aside:
    the median and its interval come from the other calls, and more rounds run in its place, up to as many again as
    asked for (or within the Adaptive's budget).

    Args:
        fns: name -> callable, each called as fn(*args, **kwargs).
        warmup, threads, sync_device, clock: as for `time_call`.
        repeats: an int >= 1 (that many rounds), or "auto" / Adaptive(target_rel_ci, budget_s, min_repeats,
            max_repeats, confidence) (until converged; see Adaptive).
        cpu_clock: this process's CPU seconds now, read with clock around every timed call; None:
            time.process_time on the CPU when clock is None, else no CPU time (and nothing set aside).
        wait_clock: seconds the kernel's threads have waited for a core so far, read with cpu_clock; None:
            flashviz.measure.load.wait_clock() over the threads alive after the warm-up, on the CPU when clock and
            cpu_clock are None (where the system tells), else no waits (calls are judged by their CPU time alone).
        stop: checked before the warm-up and before every later round; once it returns True no new round starts
            (the timings then hold fewer calls than asked: a caller's time budget ran out; before the first round,
            no timing at all: {}).
        progress: called as progress(done, total, label) before each call (done = calls finished, label = the call
            about to run, e.g. "repeat 2 of 5: mm", or "repeat 2 of at most 100: mm" in the adaptive mode) and once
            after the last (done = total, label "timed"), never inside a timed interval. total = len(fns) *
            (warmup + repeats); in the adaptive mode repeats is max_repeats, so a run that converges sooner jumps to
            total at its last report. Raise from it to stop the timing: the exception propagates (the thread count
            is restored) and no result is returned.
    Returns:
        name -> Timing, in the order of fns.

    Example:
        >>> a, b = torch.randn(64, 64), torch.randn(64, 64)
        >>> sorted(time_calls({"mm": torch.mm, "add": torch.add}, a, b, repeats=3, threads=1))
        ['add', 'mm']
        >>> now = [0.0]  # a fake clock that each call moves by 1 s: every median is exact at once
        >>> t = time_calls({"tick": lambda: now.__setitem__(0, now[0] + 1)}, repeats="auto", clock=lambda: now[0])
        >>> t["tick"].median, t["tick"].repeats, t["tick"].converged
        (1.0, 6, True)
    """
    if not fns or not all(callable(f) for f in fns.values()):
        raise TypeError(f"fns must map names to callables, got {fns!r}.")
    _validate_warmup(warmup)
    mode = resolve_repeats(repeats)
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be a callable progress(done, total, label) or None, got {progress!r}.")
    if clock is not None and not callable(clock):
        raise TypeError(f"clock must be None (time.perf_counter) or a callable returning seconds, got {clock!r}.")
    now = clock or time.perf_counter
    adaptive = mode if isinstance(mode, Adaptive) else None
    rounds = adaptive.max_repeats if adaptive else mode
    of = f"at most {rounds}" if adaptive else f"{rounds}"
    target = adaptive.target_rel_ci if adaptive else TARGET_REL_CI
    confidence = adaptive.confidence if adaptive else CONFIDENCE
    device = device_of(args, kwargs) if sync_device is None else torch.device(sync_device)
    own_waits = wait_clock is None and cpu_clock is None and clock is None and device.type == "cpu"  # real clocks
    if cpu_clock is None and clock is None and device.type == "cpu":
        cpu_clock = getattr(time, "process_time", None)  # None where the clock module gives no process time
    report = progress or (lambda done, total, label: None)
    total, done = len(fns) * (warmup + rounds), 0
    walls: dict[str, list[float]] = {name: [] for name in fns}
    cpus: dict[str, list[float]] = {name: [] for name in fns}
    waits: dict[str, list[float]] = {name: [] for name in fns}
    waited = wait_clock  # the default one is made after the warm-up, which starts torch's intra-op threads

    def kept(name: str, n_threads: int) -> list[float]:  # the calls not set aside
        if cpu_clock is None:
            return walls[name]
        seen = waits[name] if waited is not None else None
        aside = disturbed(walls[name], cpus[name], n_threads, seen)
        return [t for t, a in zip(on_core_times(walls[name], seen, n_threads), aside, strict=True) if not a]

    def more(r: int, n_threads: int) -> bool:  # whether round r + 1 runs
        if r > 0 and stop is not None and stop():  # round 0's look was before the warm-up
            return False
        if adaptive is None:
            if r < rounds:
                return True  # the rounds asked for, then as many again at most while calls are set aside
            return r < 2 * rounds and any(len(kept(name, n_threads)) < rounds for name in fns)
        if r < adaptive.min_repeats:
            return True
        if r >= rounds or (adaptive.budget_s is not None and now() - start >= adaptive.budget_s):
            return False
        return not all((clean := kept(name, n_threads)) and is_converged(clean, target, confidence) for name in fns)

    if stop is not None and stop():
        return {}
    with threads_set_to(threads) as n_threads, steady_allocator(), contextlib.ExitStack() as stack:
        asked = threads_asked() if device.type == "cpu" else n_threads  # a GPU kernel's time is not the CPU threads'
        start = now()
        for name, fn in fns.items():
            for w in range(warmup):
                report(done, total, f"warm-up {w + 1} of {warmup}: {name}")
                fn(*args, **kwargs)
                done += 1
        _sync(device)
        if own_waits and (waited := run_queue_clock(n_threads)) is not None:
            stack.callback(waited.close)
        r = 0
        while more(r, n_threads):
            for name, fn in fns.items():
                extra = " (in place of a disturbed call)" if r >= rounds else ""
                report(min(done, total - 1), total, f"repeat {r + 1} of {of}{extra}: {name}")
                s0 = now() if waited is not None else 0.0
                q0 = waited() if waited is not None else 0.0
                c0 = cpu_clock() if cpu_clock is not None else 0.0
                t0 = now()
                fn(*args, **kwargs)
                _sync(device)
                wall = now() - t0
                walls[name].append(wall)
                if cpu_clock is not None:
                    cpus[name].append(cpu_clock() - c0)
                if waited is not None:
                    q1 = waited()
                    waits[name].append(wait_within(q1 - q0, wall, now() - s0))
                done += 1
            r += 1
        report(total, total, "timed")
    if r == 0:
        return {}  # `stop` said so before the first round
    timings = {name: timing_of(walls[name], n_threads, device, cpu=cpus[name] if cpu_clock is not None else None,
                               at_most=None if adaptive else rounds, target_rel_ci=target, confidence=confidence,
                               threads_asked=asked,
                               waits=waits[name] if waited is not None else None)
               for name in fns}
    for t in timings.values():
        record(len(t.calls), t.set_aside, t.too_busy, t.threads, t.threads_asked, t.waited)
    return timings


def wait_within(waited: float, wall: float, span: float) -> float:
    """The part of `waited` seconds, read around a timed call of `wall` seconds, that fell within the call.

    The scheduler adds a wait to a thread's count when the thread gets its core back, so a wait that began after the
    call (while its clocks were read) can show in the reading after it. Such a wait also shows in the wall time of
    the whole `span` between the two readings, outside the call: that much is taken off, and what is left is at
    most the call's wall time.

    Example:
        >>> round(wait_within(0.0005, 0.002, 0.0021), 6)  # 0.1 ms of the span was outside the 2 ms call
        0.0004
        >>> round(wait_within(0.004, 0.001, 0.0051), 6)  # a 1 ms call, then a 4 ms wait while the clocks were read
        0.0
    """
    return min(wall, max(0.0, waited - max(0.0, span - wall)))


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


def timing_of(samples: list[float], threads: int, device: torch.device | str, *, cpu: list[float] | None = None,
              at_most: int | None = None, target_rel_ci: float = TARGET_REL_CI,
              confidence: float = CONFIDENCE, threads_asked: int | None = None,
              waits: list[float] | None = None) -> Timing:
    """The Timing of timed calls: median, IQR, the interval of the median and whether it converged.

    With `cpu`, the calls the machine disturbed (flashviz.measure.load.disturbed) are set aside: the median, IQR and
    interval come from the others. When more calls were set aside than kept (`too_busy`), the median is not
    converged, whatever its interval, and when none was kept, every call stands in the samples.

    Args:
        samples: seconds of every timed call (>= 1).  threads, device: what they ran with.
        cpu: this process's CPU seconds over each call, or None (nothing set aside).
        at_most: keep the first at_most clean calls (a fixed count asked for): the calls after the at_most-th clean
            one (run in place of calls set aside, of this kernel or of another in the same round) are left out, so
            the Timing's calls are the kept ones and those set aside. None: every call.
        target_rel_ci: the half-width, as a fraction of the median, at which the median counts as converged.
        confidence: coverage of the interval (stats.median_ci).
        threads_asked: the threads the caller asked for, when a thread_cap ran the calls with fewer (None: threads).
        waits: with cpu, the seconds the kernel's threads waited for a core over each call (None: not measured).
    Returns:
        Timing.

    Example:
        >>> t = timing_of([1.0, 1.02, 0.98, 1.01, 0.99, 1.0], 1, "cpu")
        >>> t.median, (t.ci_low, t.ci_high), t.converged, timing_of([1.0, 1.0, 1.0], 1, "cpu").converged
        (1.0, (0.98, 1.02), True, False)
        >>> t = timing_of([1.0, 1.0, 3.0, 1.0], 1, "cpu", cpu=[0.99, 0.98, 1.0, 0.99])  # the third lost 2 s
        >>> t.samples, t.set_aside, t.calls
        ((1.0, 1.0, 1.0), 1, (1.0, 1.0, 3.0, 1.0))
        >>> t = timing_of([1.0, 3.0, 1.0, 1.0], 1, "cpu", cpu=[0.99, 1.0, 0.98, 0.99], at_most=2)  # 2 asked for
        >>> t.samples, t.set_aside, len(t.calls)
        ((1.0, 1.0), 1, 3)
    """
    calls = tuple(float(x) for x in samples)
    waits = waits if cpu is not None else None
    aside = tuple(disturbed(calls, cpu, threads, waits)) if cpu is not None else (False,) * len(calls)
    if at_most is not None and aside.count(False) > at_most:  # enough clean calls: the later ones are not needed
        end = [k for k, a in enumerate(aside) if not a][at_most - 1] + 1
        calls, aside = calls[:end], aside[:end]
        cpu, waits = cpu[:end] if cpu is not None else None, waits[:end] if waits is not None else None
    times = on_core_times(calls, waits, threads)  # on one thread, each call's wait for a core taken off
    kept = [t for t, a in zip(times, aside, strict=True) if not a] or times[:at_most]
    median, iqr = median_iqr(kept)
    low, high, level = median_ci(kept, confidence)
    too_busy = 2 * sum(aside) > len(calls)
    return Timing(median, iqr, tuple(kept), threads, str(device), low, high, level,
                  is_converged(kept, target_rel_ci, confidence) and not too_busy, calls,
                  tuple(float(c) for c in cpu) if cpu is not None else (), aside,
                  threads if threads_asked is None else max(threads, int(threads_asked)),
                  tuple(float(q) for q in waits) if waits is not None else ())


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


