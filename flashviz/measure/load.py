"""What the rest of the machine does to a timing: the load it ran under, the calls it disturbed, the threads to use.

A busy machine disturbs calls, not kernels. A call during which the process lost its cores (descheduled, or a thread
waiting at each small op for a descheduled peer) shows as CPU time well below its wall time. Each timed call records
both (flashviz.measure.timing), and `disturbed` sets aside the calls whose share of the CPU fell below
DISTURBED_SHARE of the share the kernel's own calls typically get. A share cannot be above 1 per thread, so with one
thread a clean call runs on the CPU nearly all of its wall time, and a call that spent a quarter of it waiting is
set aside whatever its neighbours did. Calls shorter than JUDGED_FROM_S are never set aside.

The scheduler also counts how long each thread waited for a core (runnable, not running: the second field of
/proc/self/task/<tid>/schedstat), and every timed call records that too (`wait_clock`).
- On one thread the wait is exactly the time the call lost to other work, so it is taken off the call's time
  (`on_core_times`) instead of setting the call aside. Under 2 browser pages reloading and 1 busy process on 2 cores,
  nearly every call of 20 ms or more waited: naive attention at N = 2048, H = 4 took 260-820 ms, 100-650 ms of it
  waiting, and 137-178 ms on the core in 8 of 10 calls, against 132 ms on the quiet machine. Setting such calls aside
  left nothing to time, and the medians of what was left ran up to 5x the kernel's.
- With more threads a wait is not taken off: while one thread waits, its peers spin at the next barrier, which counts
  as CPU time and is counted nowhere else. A call whose threads waited for more than a quarter of its wall time is
  set aside (`disturbed`). At 2 threads under that load, the calls the CPU time alone kept took 2-5x their quiet time.

The threads a timing uses come from the cores that are free (`choose_threads`; the timing worker measures them over
the 2 s before a run, `other_busy_before`, so that a burst of the page that asked does not count): on 2 cores with one
busy process, two intra-op threads wait for each other at every small op (measured: FA1 at N = 1024 took 30.7 ms at 2
threads against 16-17 ms at 1). `Load` is what a run reports: the load average, the cores other work kept busy while
it ran, and the threads it chose.

Linux reads /proc/stat (every core's busy and idle time since boot) and the load average; elsewhere the busy cores are
unknown (NaN) and the thread count is the one asked for. Pure Python: no torch.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

PROC_TASKS = Path("/proc/self/task")  # a folder per thread; its schedstat: "on-CPU ns, run-queue wait ns, slices"
PROC_STAT = Path("/proc/stat")  # "cpu  user nice system idle iowait irq softirq steal ..." in clock ticks
DISTURBED_SHARE = 0.75  # a call on the CPU for less than this share of its kernel's typical share is set aside
TYPICAL_QUANTILE = 0.75  # the kernel's typical share: this quantile of its calls' shares (robust to a few clean ones)
BUSY_SAMPLE_S = 0.2  # seconds over which choose_threads measures the cores other work keeps busy
BEFORE_RUN_S = 2.0  # seconds before a run over which the timing worker measures the load that chooses its threads
SNAPSHOT_SLACK_S = 0.5  # a snapshot this much older than BEFORE_RUN_S still opens the window (they are 0.25 s apart)
JUDGED_FROM_S = 1e-4  # seconds: a shorter call is never set aside (its share of the CPU is within the clocks' jitter)


def cores() -> int:
    """The CPU cores this process may run on (a container's --cpuset-cpus, not the host's count).

    Example:
        >>> cores() >= 1
        True
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def load_average() -> float:
    """The 1-minute load average (runnable processes), NaN where the system does not tell."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return math.nan


def _ticks_per_s() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100


def system_busy_s(stat: Path = PROC_STAT) -> float | None:
    """Seconds all cores together have been busy since boot (/proc/stat's first line less idle and iowait), or None.

    Example:
        >>> busy = system_busy_s()
        >>> busy is None or busy > 0
        True
    """
    try:
        fields = stat.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:9]] + [0] * max(0, 8 - len(fields[1:9]))
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
    return (user + nice + system + irq + softirq + steal) / _ticks_per_s()


def own_cpu_s() -> float:
    """CPU seconds of this process and of its children that have ended (the ring's ranks), all threads."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass(frozen=True)
class Load:
    """What else the machine did while a run measured."""

    seconds: float  # wall seconds of the stretch measured
    cores: int  # cores this process may use
    other_busy: float  # cores kept busy by other work on average over the stretch (NaN: not known here)
    load_start: float  # 1-minute load average when the stretch began (NaN: not known)
    load_end: float  # and when it ended

    @property
    def known(self) -> bool:
        """Whether the busy cores were measured (Linux)."""
        return not math.isnan(self.other_busy)

    def sentence(self) -> str:
        """The load in words.

        Example:
            >>> Load(10.0, 2, 1.04, 1.7, 2.1).sentence()
            'other work kept 1.0 of 2 cores busy (load average 1.7 -> 2.1)'
        """
        avg = "" if math.isnan(self.load_start) else f" (load average {self.load_start:.1f} -> {self.load_end:.1f})"
        if not self.known:
            return f"the cores other work kept busy are not known on this system{avg}"
        return f"other work kept {self.other_busy:.1f} of {self.cores} cores busy{avg}"


@dataclass(frozen=True)
class Snapshot:
    """The machine's busy seconds and this process's CPU seconds at one moment: two of them give the cores other
    work kept busy in between (`other_busy_between`)."""

    t: float  # time.monotonic()
    busy: float | None  # system_busy_s() (None: not known here)
    own: float  # own_cpu_s()


def snapshot() -> Snapshot:
    """The Snapshot of now."""
    return Snapshot(time.monotonic(), system_busy_s(), own_cpu_s())


def other_busy_between(then: Snapshot, now: Snapshot) -> float:
    """Cores other work kept busy between two snapshots, on average (NaN: not known here, or no time between).

    Example:
        >>> other_busy_between(Snapshot(0.0, 10.0, 1.0), Snapshot(2.0, 13.0, 2.0))  # 3 busy s, 1 of them ours
        1.0
    """
    seconds = now.t - then.t
    if then.busy is None or now.busy is None or seconds <= 0:
        return math.nan
    return min(float(cores()), max(0.0, (now.busy - then.busy - (now.own - then.own)) / seconds))


class LoadMeter:
    """Measures `Load` over a stretch: `start()`, then `stop()` (or use it as a context manager and read `.load`).

    Other work's busy cores = (the system's busy seconds - this process's CPU seconds) / wall seconds.

    Example:
        >>> with LoadMeter() as m:
        ...     _ = sum(range(10_000))
        >>> m.load.cores >= 1 and m.load.seconds >= 0
        True
    """

    def __init__(self) -> None:
        self.load: Load | None = None
        self._start: Snapshot | None = None
        self._avg0 = math.nan

    def start(self) -> LoadMeter:
        self._start, self._avg0 = snapshot(), load_average()
        return self

    def stop(self) -> Load:
        end = snapshot()
        self.load = Load(end.t - self._start.t, cores(), other_busy_between(self._start, end), self._avg0,
                         load_average())
        return self.load

    def __enter__(self) -> LoadMeter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def load_now(seconds: float = BUSY_SAMPLE_S, progress: object = None) -> Load:
    """The Load over the next `seconds` while this process sleeps: what other work does now. A timing job too
    (the progress argument is a job's; nothing to report).

    Example:
        >>> load_now(0.01).cores >= 1
        True
    """
    meter = LoadMeter().start()
    time.sleep(seconds)
    return meter.stop()


def busy_now(seconds: float = BUSY_SAMPLE_S) -> float:
    """Cores other work keeps busy now, measured over `seconds` while this process sleeps (NaN: not known here)."""
    return load_now(seconds).other_busy


def other_busy_before(history: Sequence[Snapshot], now: Snapshot, window_s: float = BEFORE_RUN_S) -> float | None:
    """The cores other work kept busy all through the `window_s` seconds before `now`: the least that any stretch
    between two snapshots taken while waiting saw (None where the snapshots span less than BUSY_SAMPLE_S or say
    nothing). A process that keeps a core busy shows in every stretch; a burst does not.

    A run's threads are chosen from this, not from the instant the run arrives: the page that asked for the run is
    busy drawing for a moment (measured: 0.9 of 2 cores over the 0.2 s after a Benchmark's Run on a quiet machine,
    1.6 over the 2 s before it while the page loaded, 0.2-0.3 over the whole run), and that moment would take a
    thread from every run.

    Example:
        >>> quiet = [Snapshot(t / 4, 10 + 0.05 * t / 4, 1.0) for t in range(9)]  # 2 s at 0.05 cores
        >>> burst = Snapshot(2.25, quiet[-1].busy + 0.25 * 0.9, 1.0)  # then 0.9 cores for 0.25 s
        >>> round(other_busy_before(quiet, burst), 2)
        0.05
        >>> other_busy_before(quiet, Snapshot(0.1, 10.0, 1.0)) is None  # 0.1 s: too short to say
        True
    """
    marks = [h for h in history if 0 < now.t - h.t <= window_s + SNAPSHOT_SLACK_S] + [now]
    if len(marks) < 2 or now.t - marks[0].t < BUSY_SAMPLE_S:
        return None
    stretches = [other_busy_between(a, b) for a, b in pairwise(marks)]
    known = [x for x in stretches if not math.isnan(x)]
    return min(known) if known else None


def threads_said(n: int) -> str:
    """A thread count with its noun.

    Example:
        >>> threads_said(1), threads_said(2)
        ('1 thread', '2 threads')
    """
    return f"{n} thread" if n == 1 else f"{n} threads"


@dataclass(frozen=True)
class ThreadChoice:
    """The intra-op threads a timing runs with, and why."""

    asked: int  # the most the caller allows (the dashboard's "CPU threads" setting, the CLI's --threads)
    threads: int  # what it runs with: the asked count, or fewer when other work keeps cores busy
    cores: int  # cores this process may use
    other_busy: float  # cores other work kept busy just before (NaN: not known here)

    def sentence(self) -> str:
        """The choice in words.

        Example:
            >>> ThreadChoice(2, 1, 2, 1.3).sentence()
            '1 thread of the 2 allowed: other work kept 1.3 of 2 cores busy'
            >>> ThreadChoice(2, 2, 2, 0.1).sentence()
            '2 threads, as allowed: other work kept 0.1 of 2 cores busy'
        """
        busy = ("the busy cores are not known here" if math.isnan(self.other_busy)
                else f"other work kept {self.other_busy:.1f} of {self.cores} cores busy")
        if self.threads == self.asked:
            return f"{threads_said(self.threads)}, as allowed: {busy}"
        return f"{threads_said(self.threads)} of the {self.asked} allowed: {busy}"


def choose_threads(asked: int, other_busy: float | None = None) -> ThreadChoice:
    """At most `asked` threads, and no more than the cores other work leaves free (rounded; at least 1).

    Args:
        asked: the most threads the caller allows (>= 1).
        other_busy: cores busy with other work; None: measured now over BUSY_SAMPLE_S (busy_now).
    Returns:
        ThreadChoice.

    Example:
        >>> choose_threads(2, 1.3).threads, choose_threads(2, 0.3).threads, choose_threads(1, 0.0).threads
        (1, 2, 1)
    """
    if isinstance(asked, bool) or not isinstance(asked, int) or asked < 1:
        raise ValueError(f"asked must be an int >= 1 (the most threads allowed), got {asked!r}.")
    busy = busy_now() if other_busy is None else float(other_busy)
    n = cores()
    free = asked if math.isnan(busy) else max(1, round(n - busy))
    return ThreadChoice(asked, max(1, min(asked, free)), n, busy)


def cpu_shares(walls: Sequence[float], cpus: Sequence[float]) -> list[float]:
    """Each call's CPU seconds per wall second (a share of one core; up to the thread count).

    Example:
        >>> [round(x, 2) for x in cpu_shares([0.010, 0.020], [0.0099, 0.010])]
        [0.99, 0.5]
    """
    return [c / w if w > 0 else 1.0 for w, c in zip(walls, cpus, strict=True)]


class RunQueueWait:
    """A clock of the seconds the threads that run a kernel have waited for a core: each thread's run-queue wait
    (runnable, not running) from the kernel's scheduler statistics, /proc/self/task/<tid>/schedstat, summed over the
    threads `wait_clock()` picks when it makes one.

    CPU time cannot see every such wait: a thread at an intra-op barrier spins on its core while its peer waits for
    one, and that spinning counts as CPU time. The scheduler counts the peer's wait itself.

    The threads are the ones alive when it is made (make it after the warm-up, which starts the pool); one that ends
    later adds nothing more. Call `close()` when done.
    """

    def __init__(self, paths: Sequence[Path]) -> None:
        self._fds: list[int] = []
        try:
            for path in paths:
                self._fds.append(os.open(path, os.O_RDONLY))
        except OSError:
            self.close()
            raise
        self._last = [0.0] * len(self._fds)

    def __call__(self) -> float:
        """Seconds waited so far, summed over the threads."""
        for k, fd in enumerate(self._fds):
            with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that ended keeps its last count
                self._last[k] = int(os.pread(fd, 128, 0).split()[1]) * 1e-9
        return sum(self._last)

    def close(self) -> None:
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []


def wait_clock(threads: int = 0, tasks: Path = PROC_TASKS) -> RunQueueWait | None:
    """A RunQueueWait over the threads that run a kernel with `threads` intra-op threads: the calling thread alone
    for 1; for any other count, the calling thread and every thread of this process not started by Python's threading
    (torch's pool; a Streamlit or server thread does not run the kernel). None where the scheduler's statistics cannot
    be read (not Linux, or a kernel built without them).

    Example:
        >>> clock = wait_clock()
        >>> (clock() if clock is not None else 0.0) >= 0
        True
        >>> if clock is not None:
        ...     clock.close()
    """
    me = threading.get_native_id()
    others = {t.native_id for t in threading.enumerate() if t is not threading.current_thread()}
    try:
        tids = [me] if threads == 1 else [int(t) for t in os.listdir(tasks) if t.isdigit() and int(t) not in others]
        paths = [tasks / str(tid) / "schedstat" for tid in tids]
        if not paths:
            return None
        clock = RunQueueWait(paths)
        clock()
    except (OSError, ValueError, IndexError):
        return None
    return clock


def waited_long(wait: float, wall: float) -> bool:
    """Whether a call's threads waited for a core for more than the rest of DISTURBED_SHARE, a quarter, of its wall
    time: on one thread such a wait is taken off the call's time (counted as `waited`), on more the call is set aside.

    Example:
        >>> waited_long(0.3, 1.0), waited_long(0.2, 1.0)
        (True, False)
    """
    return wait > (1 - DISTURBED_SHARE) * wall


def on_core_times(walls: Sequence[float], waits: Sequence[float] | None, threads: int) -> list[float]:
    """Each call's time: on one thread with its waits measured, its wall time less the time the thread waited for a
    core (the scheduler counts that wait exactly, and the kernel did nothing in it); else its wall time. With more
    threads a wait also holds up the peers at the next barrier by an amount no clock counts, so it is not taken off:
    such calls are set aside (`disturbed`).

    Example:
        >>> [round(t, 2) for t in on_core_times([0.30, 0.14], [0.16, 0.0], threads=1)]
        [0.14, 0.14]
        >>> on_core_times([0.30], [0.16], threads=2)
        [0.3]
    """
    if waits is None or threads != 1:
        return [float(w) for w in walls]
    return [w - min(max(q, 0.0), w) for w, q in zip(walls, waits, strict=True)]


def disturbed(walls: Sequence[float], cpus: Sequence[float], threads: int,
              waits: Sequence[float] | None = None) -> list[bool]:
    """Which calls the machine disturbed: on the CPU for less than DISTURBED_SHARE of the kernel's typical share, or,
    on more than one thread, with the kernel's threads waiting for a core (their run-queue waits, summed:
    `wait_clock`) for more than the rest, 1 - DISTURBED_SHARE, of the call's wall time. On one thread with its waits
    measured, a wait is taken off the call's time instead (`on_core_times`), and the share is of that time: the call
    is set aside only if it lost time neither running nor waiting for a core (asleep, or blocked on the disk).

    The typical share is the TYPICAL_QUANTILE of the calls' shares, and at least one full core: a call on one thread
    cannot run longer on the CPU than on the clock, so one that lost a quarter of its wall time off the CPU is set
    aside even when every call did. With more threads, a thread that spins at a barrier while its peer waits for a
    core keeps the share up; the waits show that call. Measured under 2 reloading browser pages and a busy process on
    2 cores, at 2 threads: the calls of FA2 at N = 1024 that the share kept had medians of 49 and 54 ms in two runs,
    against 10 and 11 ms quiet; in the run that read the waits, every call had waited for over a quarter of its time.

    Args:
        walls, cpus: each timed call's wall seconds and this process's CPU seconds over it, in order.
        threads: the intra-op threads the calls ran with.
        waits: each call's run-queue seconds, summed over the kernel's threads, or None (not measured).
    Returns:
        One bool per call: True where the call is set aside.

    Example:
        >>> disturbed([0.010, 0.010, 0.030, 0.010], [0.0098, 0.0099, 0.0101, 0.0097], threads=1)
        [False, False, True, False]
        >>> disturbed([0.010, 0.030], [0.020, 0.058], threads=2, waits=[0.0, 0.020])  # spun while its peer waited
        [False, True]
        >>> disturbed([0.010, 0.030, 0.030], [0.0099, 0.0099, 0.0099], threads=1, waits=[0.0, 0.020, 0.0])
        [False, False, True]
    """
    if len(walls) != len(cpus) or (waits is not None and len(waits) != len(walls)):
        raise ValueError(f"need one CPU time (and wait, if any) per call, got {len(walls)} walls, {len(cpus)} CPU "
                         f"times and {len(waits) if waits is not None else 'no'} waits.")
    if not walls:
        return []
    times = on_core_times(walls, waits, threads)
    shares = cpu_shares(times, cpus)
    typical = statistics.quantiles(shares, n=100, method="inclusive")[round(TYPICAL_QUANTILE * 100) - 1] \
        if len(shares) > 1 else shares[0]
    typical = min(float(threads), max(1.0, typical))
    waited = waits if waits is not None and threads != 1 else [0.0] * len(walls)
    return [(s < DISTURBED_SHARE * typical or waited_long(q, w)) and w >= JUDGED_FROM_S
            for s, w, q in zip(shares, walls, waited, strict=True)]


# ----------------------------------------------------------------------------------------------------------------------
# what one run saw: its threads, the load, the calls it set aside


@dataclass
class Tally:
    """Timed calls counted while a run measures (flashviz.measure.timing.time_calls adds every timing it makes)."""

    calls: int = 0  # timed calls, those set aside included
    set_aside: int = 0  # calls set aside as disturbed
    timings: int = 0  # timings made (one per implementation and configuration)
    too_busy: int = 0  # timings with more calls set aside than kept
    capped: int = 0  # timings that ran with fewer threads than asked for (a thread_cap: other work kept cores busy)
    threads: int = 0  # the fewest threads a capped timing ran with (0: none capped)
    threads_asked: int = 0  # the most threads a capped timing was asked for (0: none capped)
    waited: int = 0  # calls on one thread whose wait for a core (over a quarter of it) was taken off their time

    def add(self, calls: int, set_aside: int, too_busy: bool, threads: int = 0, threads_asked: int = 0,
            waited: int = 0) -> None:
        self.calls += calls
        self.waited += waited
        self.set_aside += set_aside
        self.timings += 1
        self.too_busy += int(too_busy)
        if 0 < threads < threads_asked:
            self.capped += 1
            self.threads = min(self.threads or threads, threads)
            self.threads_asked = max(self.threads_asked, threads_asked)


_TALLIES: list[Tally] = []  # the tallies open in this process (the timing worker opens one per run)


class tallying:
    """Count every timing made in this process inside the block: `with tallying() as t: ...`, then read t."""

    def __enter__(self) -> Tally:
        self.tally = Tally()
        _TALLIES.append(self.tally)
        return self.tally

    def __exit__(self, *exc: object) -> None:
        _TALLIES.remove(self.tally)


def record(calls: int, set_aside: int, too_busy: bool, threads: int = 0, threads_asked: int = 0,
           waited: int = 0) -> None:
    """Add one timing to every open tally (threads: what it ran with; threads_asked: what it was asked for; waited:
    its calls whose wait for a core was taken off their time)."""
    for t in _TALLIES:
        t.add(calls, set_aside, too_busy, threads, threads_asked, waited)


@dataclass(frozen=True)
class RunReport:
    """What one timed run saw: the threads it could use, the load while it ran, the calls it set aside, when, and
    which flashviz measured it. The dashboard shows its sentence under every run; the CLI prints it and writes its
    columns into the CSV."""

    choice: ThreadChoice  # the threads the run could use
    load: Load  # the load over the run
    calls: int  # timed calls, those set aside included
    set_aside: int  # calls set aside as disturbed
    too_busy: int  # timings (implementation x configuration) with more calls set aside than kept
    timestamp: str  # when the run began, ISO 8601 in UTC
    version: str  # flashviz's version
    capped: int = 0  # timings that ran with fewer threads than asked for: their comparisons name no winner
    threads: int = 0  # the fewest threads a capped timing ran with (0: none capped)
    threads_asked: int = 0  # the most threads a capped timing was asked for (0: none capped)
    waited: int = 0  # calls on one thread that waited for a core over a quarter of their time: the wait taken off

    def sentence(self) -> str:
        """The report in words.

        Example:
            >>> r = RunReport(ThreadChoice(2, 1, 2, 1.3), Load(9.5, 2, 1.2, 1.7, 2.1), 48, 3, 0, "2026-12-06T05:00Z",
            ...               "0.1.0")
            >>> print(r.sentence())
            Timed in the timing worker with 1 thread of the 2 allowed: other work kept 1.3 of 2 cores busy. Over the \
9.5 s run other work kept 1.2 of 2 cores busy (load average 1.7 -> 2.1); 3 of 48 timed calls were set aside as \
disturbed (the process lost its cores during them). flashviz 0.1.0, 2026-12-06T05:00Z.
            >>> from dataclasses import replace
            >>> "and 30 waited for a core for over a quarter of their time" in replace(r, waited=30).sentence()
            True
        """
        aside = (f"{self.set_aside} of {self.calls} timed calls were set aside as disturbed (the process lost its "
                 "cores during them)" if self.set_aside else f"none of its {self.calls} timed calls was disturbed")
        if self.waited:
            aside += (f", and {self.waited} waited for a core for over a quarter of their time: on one thread the "
                      "scheduler counts that wait, and it was taken off their times")
        return (f"Timed in the timing worker with {self.choice.sentence()}. Over the {self.load.seconds:.1f} s run "
                f"{self.load.sentence()}; {aside}. flashviz {self.version}, {self.timestamp}.")

    def short(self) -> str:
        """The report's gist, for one line.

        Example:
            >>> RunReport(ThreadChoice(2, 1, 2, 1.3), Load(9.5, 2, 1.2, 1.7, 2.1), 48, 3, 0, "t", "v").short()
            '1 thread of 2, 3 of 48 calls set aside'
            >>> RunReport(ThreadChoice(2, 2, 2, 0.0), Load(9.5, 2, 0.1, 0.2, 0.2), 48, 0, 0, "t", "v").short()
            '2 threads of 2, no call set aside'
            >>> RunReport(ThreadChoice(2, 1, 2, 1.9), Load(9.5, 2, 1.9, 3.0, 3.2), 48, 40, 2, "t", "v").short()
            'too busy for clean timings: 1 thread of 2, 40 of 48 calls set aside'
            >>> RunReport(ThreadChoice(2, 1, 2, 1.3), Load(9.5, 2, 1.2, 1.7, 2.1), 48, 3, 0, "t", "v", 6, 1, 2).short()
            '1 thread of the 2 asked (no winner named), 3 of 48 calls set aside'
            >>> RunReport(ThreadChoice(1, 1, 2, 1.6), Load(9.5, 2, 1.6, 2.7, 2.9), 48, 0, 0, "t", "v",
            ...           waited=30).short()
            '1 thread of 1, no call set aside, 30 waits for a core taken off'
        """
        aside = f"{self.set_aside} of {self.calls} calls set aside" if self.set_aside else "no call set aside"
        if self.waited:
            aside += f", {self.waited} waits for a core taken off"
        lead = "too busy for clean timings: " if self.too_busy else ""
        if self.capped:
            return f"{lead}{threads_said(self.threads)} of the {self.threads_asked} asked (no winner named), {aside}"
        return f"{lead}{threads_said(self.choice.threads)} of {self.choice.asked}, {aside}"

    def capped_sentence(self) -> str | None:
        """What to say when timings ran with fewer threads than asked for, else None.

        Example:
            >>> r = RunReport(ThreadChoice(2, 1, 2, 1.3), Load(9.5, 2, 1.2, 1.7, 2.1), 48, 3, 0, "t", "v", 6, 1, 2)
            >>> r.capped_sentence()[:64]
            'Other work kept cores busy, so 6 measurement(s) ran with 1 threa'
        """
        if not self.capped:
            return None
        ran = threads_said(self.threads)
        return (f"Other work kept cores busy, so {self.capped} measurement(s) ran with {ran} of the "
                f"{self.threads_asked} asked for. A kernel's ranking depends on its threads, so their comparisons "
                f"name no winner at {self.threads_asked}: close other programs and run again, or ask for {ran} (CPU "
                f"threads; --threads in the CLI) to rank them at {ran}.")

    def busy_sentence(self) -> str | None:
        """What to say when the machine was too busy for clean calls, else None.

        Example:
            >>> r = RunReport(ThreadChoice(2, 1, 2, 1.9), Load(30.0, 2, 1.8, 3.0, 3.4), 40, 25, 3, "t", "v")
            >>> r.busy_sentence().startswith("The machine was too busy for clean timings")
            True
        """
        if not self.too_busy:
            return None
        return (f"The machine was too busy for clean timings: in {self.too_busy} measurement(s) more calls were set "
                f"aside than kept ({self.set_aside} of {self.calls} calls in all), and {self.load.sentence()}. "
                "Those medians count as unsettled, so no verdict rests on them; close other programs and run again.")

    def columns(self) -> dict[str, str | int | float]:
        """The report as constant CSV columns.

        Example:
            >>> sorted(RunReport(ThreadChoice(2, 2, 2, 0.0), Load(1.0, 2, 0.0, 0.1, 0.1), 6, 0, 0, "t", "v")
            ...        .columns())[:3]
            ['calls_set_aside', 'calls_waited', 'flashviz_version']
        """
        return {"timestamp": self.timestamp, "flashviz_version": self.version, "threads_allowed": self.choice.asked,
                "threads_free": self.choice.threads, "other_busy_cores": round(self.load.other_busy, 2),
                "load_average": round(self.load.load_start, 2), "timed_calls": self.calls,
                "calls_set_aside": self.set_aside, "calls_waited": self.waited, "thread_policy": self.choice.sentence()}
