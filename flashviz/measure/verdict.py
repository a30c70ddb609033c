"""Verdicts that survive a noisy machine: which of two timings is faster, said only when their intervals separate.

Two medians always differ; whether the difference is the kernels' or the machine's is what the intervals of the
medians (flashviz.measure.stats.median_ci, 95% each) say. `compare(a, b)` returns a Verdict:

    ratio                 median_a / median_b (> 1: b is faster)
    [ratio_low, high]     a.low / b.high .. a.high / b.low: every ratio the two intervals allow
    disjoint              the intervals do not overlap (the ratio's interval excludes 1)
    separated             disjoint, both real 95% intervals, and both medians converged (known to +-5%)

Separated: "flash2 is 1.42x faster than naive (1.31-1.55x)". Otherwise "too close to call here", and what would
settle it, from the numbers. Convergence is asked too because an interval holds only while the machine stays as it
was during the run: a machine too noisy to pin a median to +-5% within the budget also changes between runs (another
process takes a core, and a multi-threaded matmul suffers more than a Python tile loop), so intervals that happen to
part there would name a winner that the rerun reverses.

    more repeats   an interval is not a real 95% one (fewer than 6 calls) or is wider than the target (+-5% of its
                   median): about repeats_needed calls would narrow it (the width shrinks as 1/sqrt(repeats)), or a
                   quieter machine
    a quieter machine  the run marked a median unsettled because the machine was too busy for clean calls (more of
                   them set aside than kept: flashviz.measure.timing.Timing.too_busy), however narrow its interval
    the threads asked  a median was measured with fewer threads than asked for (other work kept cores busy, and the
                   timing worker capped the threads: flashviz.measure.timing.thread_cap). The kernels' ranking depends
                   on the threads (a matmul gains more from a second thread than a Python tile loop, so naive and
                   FA2 can tie at 1 thread and part at 2), so a winner at the threads that ran is no claim at the
                   threads asked: free cores, or ask for the threads that ran
    a larger N     both medians are known to the target and still overlap: the difference is below the noise at
                   this size (within what the two intervals reach towards each other); more work per call makes a
                   kernel's difference larger than the machine's jitter (repeats_needed: how many repeats would
                   separate them at this N, if the medians stayed put)

Pure Python (no torch): the dashboard and the CSV reader use it on rows, the benchmarks on Timings.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace
from numbers import Real

from flashviz.limits import AUTO_MAX_REPEATS
from flashviz.measure.load import threads_said
from flashviz.measure.stats import (
    CONFIDENCE,
    TARGET_REL_CI,
    ci_rank,
    is_converged,
    median_ci,
    min_repeats,
    rel_half_width,
    repeats_for_width,
    validate_fraction,
)
from flashviz.vocab import OK

SEPARATED = "separated"  # Verdict.settle when the intervals separate: nothing left to settle
MORE_REPEATS = "more repeats"  # Verdict.settle: an interval is too wide or not a real 95% one yet
LARGER_N = "a larger N"  # Verdict.settle: both medians are known, the difference is below the noise at this N
BUSY = "a quieter machine"  # Verdict.settle: a median the run marked unsettled (too busy for clean calls)
FEWER_THREADS = "the threads asked"  # Verdict.settle: a median measured with fewer threads than asked for


@dataclass(frozen=True)
class Estimate:
    """A median of timed calls and how sure it is (seconds, or any one unit shared by the two sides compared)."""

    median: float  # the median of the timed calls
    low: float  # low end of the median's interval
    high: float  # high end of the median's interval
    level: float  # what the interval covers (below the confidence asked for: fewer calls than min_repeats)
    repeats: int  # timed calls behind the median
    converged: bool  # level reached the confidence and the half-width is at most the target of the median
    busy: bool = False  # the run marked it unsettled: more of its calls were set aside than kept (never converged)
    threads: int = 0  # the intra-op threads its calls ran with (0: not recorded)
    threads_asked: int = 0  # the threads asked for (above threads: capped, because other work kept cores busy; 0:
    #                         not recorded)

    @property
    def capped(self) -> bool:
        """Measured with fewer threads than asked for: it names no winner at the threads asked."""
        return 0 < self.threads < self.threads_asked

    @property
    def rel_ci(self) -> float:
        """Half the interval's width as a fraction of the median."""
        return rel_half_width(self.median, self.low, self.high)


def estimate(samples: Iterable[float], *, target_rel_ci: float = TARGET_REL_CI,
             confidence: float = CONFIDENCE) -> Estimate:
    """The Estimate of raw timed calls.

    Example:
        >>> e = estimate([1.0, 1.02, 0.98, 1.01, 0.99, 1.0])
        >>> e.median, e.low, e.high, e.repeats, e.converged
        (1.0, 0.98, 1.02, 6, True)
    """
    values = [float(x) for x in samples]
    if not values or not all(math.isfinite(x) and x >= 0 for x in values):
        raise ValueError(f"samples must be one or more finite times >= 0, got {values[:8]!r}.")
    low, high, level = median_ci(values, confidence)
    return Estimate(statistics.median(values), low, high, level, len(values),
                    is_converged(values, target_rel_ci, confidence))


def estimate_of(median: float, low: float, high: float, repeats: int, *, target_rel_ci: float = TARGET_REL_CI,
                confidence: float = CONFIDENCE) -> Estimate:
    """The Estimate of a summary (a sweep row's time_s, time_lo_s, time_hi_s, repeats): the interval's coverage
    follows from the number of calls alone (stats.ci_rank), and so whether it converged.

    Example:
        >>> estimate_of(1.0, 0.9, 1.2, 3).level, estimate_of(1.0, 0.99, 1.01, 20).converged
        (0.75, True)
    """
    if not (0 <= low <= median <= high and math.isfinite(high)):
        raise ValueError(f"need 0 <= low <= median <= high (finite), got low={low!r}, median={median!r}, "
                         f"high={high!r}.")
    level = ci_rank(int(repeats), confidence)[1]
    converged = level >= confidence and rel_half_width(median, low, high) <= validate_fraction(
        "target_rel_ci", target_rel_ci)
    return Estimate(float(median), float(low), float(high), level, int(repeats), converged)


def as_estimate(x: object, *, target_rel_ci: float = TARGET_REL_CI, confidence: float = CONFIDENCE) -> Estimate:
    """An Estimate from an Estimate, a Timing (flashviz.measure.timing: median, ci_low, ci_high, ci_level, samples,
    converged) or raw timed calls (a sequence of numbers)."""
    if isinstance(x, Estimate):
        return x
    if all(hasattr(x, a) for a in ("median", "ci_low", "ci_high", "ci_level", "samples", "converged")):
        return Estimate(x.median, x.ci_low, x.ci_high, x.ci_level, len(x.samples), bool(x.converged),
                        bool(getattr(x, "too_busy", False)), int(getattr(x, "threads", 0) or 0),
                        int(getattr(x, "threads_asked", 0) or 0))
    if isinstance(x, Iterable) and not isinstance(x, (str, bytes)):
        return estimate(x, target_rel_ci=target_rel_ci, confidence=confidence)
    raise TypeError(f"a timing must be an Estimate, a Timing or a list of timed calls in seconds, got "
                    f"{type(x).__name__}.")


@dataclass(frozen=True)
class Verdict:
    """Which of two timings is faster, and how sure: see the module for the rule."""

    names: tuple[str, str]  # the two sides, as compare() got them: (a, b)
    a: Estimate  # side a's median and interval
    b: Estimate  # side b's median and interval
    ratio: float  # a.median / b.median: above 1, b is faster
    ratio_low: float  # a.low / b.high: the smallest ratio the two intervals allow
    ratio_high: float  # a.high / b.low: the largest (inf if b.low is 0)
    disjoint: bool  # the intervals do not overlap: the ratio's interval excludes 1
    separated: bool  # disjoint, both intervals cover the confidence, both converged, neither measured with fewer
    #                  threads than asked: a faster side can be named
    settle: str  # SEPARATED, or what would settle it: BUSY, FEWER_THREADS, MORE_REPEATS or LARGER_N
    repeats_needed: int | None  # calls per side that would settle it at this N (None: separated, or equal medians)
    difference: float  # |median_a - median_b| / the larger median: how far apart the two are
    noise: float  # how far the two intervals reach towards each other (the faster's high end above its median plus
    #               the slower's median above its low end), / the larger median: they overlap iff difference <= noise
    widest: float  # the larger relative half-width of the two intervals (Estimate.rel_ci)
    confidence: float  # the coverage asked of each interval
    target_rel_ci: float  # the half-width (fraction of the median) at which a median counts as converged

    @property
    def faster(self) -> str | None:
        """The faster side's name when separated, else None."""
        if not self.separated:
            return None
        return self.names[1] if self.ratio > 1 else self.names[0]

    @property
    def slower(self) -> str | None:
        """The slower side's name when separated, else None."""
        if not self.separated:
            return None
        return self.names[0] if self.ratio > 1 else self.names[1]

    @property
    def speedup(self) -> tuple[float, float, float]:
        """(speedup, low, high): how many times faster the side with the smaller median is, with the interval of
        that factor (the ratio's interval, inverted when a is the faster-looking side). A winner only if separated."""
        if self.ratio >= 1:
            return self.ratio, self.ratio_low, self.ratio_high
        return 1 / self.ratio, 1 / self.ratio_high, (math.inf if self.ratio_low == 0 else 1 / self.ratio_low)


def compare(a: object, b: object, names: tuple[str, str] = ("a", "b"), *, target_rel_ci: float = TARGET_REL_CI,
            confidence: float = CONFIDENCE) -> Verdict:
    """Compare two timings of the same work (see the module): a winner only when their intervals separate.

    Args:
        a, b: each an Estimate, a Timing or a list of timed calls, in one unit (seconds).
        names: what to call a and b in the verdict's sentence.
        target_rel_ci: the half-width (fraction of the median) at which a median counts as converged.
        confidence: the coverage asked of each interval.
    Returns:
        Verdict.

    Example:
        >>> fast = estimate([1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01])
        >>> slow = estimate([2.0, 2.02, 1.98, 2.01, 1.99, 2.0, 2.03])
        >>> v = compare(slow, fast, ("naive", "flash2"))
        >>> v.separated, v.faster, round(v.ratio, 2), v.ratio_low <= 2 <= v.ratio_high
        (True, 'flash2', 2.0, True)
        >>> compare([1.0, 1.5, 0.8], [2.0, 2.4, 1.7]).settle  # three calls give no 95% interval
        'more repeats'
    """
    if not (isinstance(names, tuple) and len(names) == 2 and all(isinstance(n, str) for n in names)):
        raise TypeError(f"names must be a tuple of two strings, e.g. ('naive', 'flash2'), got {names!r}.")
    confidence = validate_fraction("confidence", confidence)
    target_rel_ci = validate_fraction("target_rel_ci", target_rel_ci)
    ea, eb = (as_estimate(x, target_rel_ci=target_rel_ci, confidence=confidence) for x in (a, b))
    for name, e in zip(names, (ea, eb), strict=True):
        if not (isinstance(e.median, Real) and e.median > 0 and math.isfinite(e.median)):
            raise ValueError(f"{name}'s median must be a finite time > 0 to take a ratio, got {e.median!r}.")
    ratio = ea.median / eb.median
    ratio_low = ea.low / eb.high
    ratio_high = ea.high / eb.low if eb.low > 0 else math.inf
    real = ea.level >= confidence and eb.level >= confidence
    disjoint = ratio_low > 1 or ratio_high < 1
    separated = disjoint and real and ea.converged and eb.converged and not (ea.capped or eb.capped)
    fast, slow = (ea, eb) if ea.median <= eb.median else (eb, ea)
    gap = slow.median - fast.median
    reach = (fast.high - fast.median) + (slow.median - slow.low)  # seconds the intervals reach towards each other
    difference, noise = gap / slow.median, reach / slow.median
    widest = max(ea.rel_ci, eb.rel_ci)
    n = max(ea.repeats, eb.repeats)
    if separated:
        settle, needed = SEPARATED, None
    elif ea.busy or eb.busy:
        settle, needed = BUSY, None
    elif ea.capped or eb.capped:
        settle, needed = FEWER_THREADS, None
    elif not (ea.converged and eb.converged):
        settle = MORE_REPEATS
        needed = max(min_repeats(confidence), repeats_for_width(n, widest, target_rel_ci) if math.isfinite(widest)
                     else min_repeats(confidence))
    else:  # the reach shrinks as 1/sqrt(n): it falls below the gap after n (reach / gap)^2 calls, if the medians stay
        settle, needed = LARGER_N, None if gap == 0 else max(n + 1, math.ceil(n * (reach / gap) ** 2))
    return Verdict(names, ea, eb, ratio, ratio_low, ratio_high, disjoint, separated, settle, needed, difference,
                   noise, widest, confidence, target_rel_ci)


def threads_capped(v: Verdict) -> tuple[int, int]:
    """(threads it ran with, threads asked for) of the capped side(s) of a verdict: the fewest that ran, the most
    asked; (0, 0) where neither side was capped.

    Example:
        >>> a, b = Estimate(1.0, 0.99, 1.01, 0.97, 20, True, threads=1, threads_asked=2), estimate([2.0] * 6)
        >>> threads_capped(compare(a, b))
        (1, 2)
    """
    capped = [e for e in (v.a, v.b) if e.capped]
    if not capped:
        return 0, 0
    return min(e.threads for e in capped), max(e.threads_asked for e in capped)


def fewer_threads(v: Verdict) -> str:
    """Why a FEWER_THREADS verdict names no winner, in words ("" where neither side was capped).

    Example:
        >>> a, b = Estimate(1.0, 0.99, 1.01, 0.97, 20, True, threads=1, threads_asked=2), estimate([2.0] * 6)
        >>> fewer_threads(compare(a, b))
        'measured with 1 thread of the 2 asked for (other work kept cores busy)'
    """
    ran, asked = threads_capped(v)
    return f"measured with {threads_said(ran)} of the {asked} asked for (other work kept cores busy)" if ran else ""


def _x(value: float) -> str:
    return f"{value:.2f}x" if math.isfinite(value) else "unbounded"


def sentence(v: Verdict) -> str:
    """The verdict in words, every number taken from it: a winner with its interval only when separated,
    otherwise "too close to call here" and what would settle it.

    Example:
        >>> v = compare([2.0, 2.02, 1.98, 2.01, 1.99, 2.0], [1.0, 1.01, 0.99, 1.02, 0.98, 1.0], ("naive", "flash2"))
        >>> sentence(v)
        'flash2 is 2.00x faster than naive (1.94-2.06x; 95% intervals of 6 and 6 timed calls).'
    """
    speedup, low, high = v.speedup
    calls = f"{v.a.repeats} and {v.b.repeats} timed calls"
    if v.separated:
        return (f"{v.faster} is {_x(speedup)} faster than {v.slower} ({_x(low).removesuffix('x')}-{_x(high)}; "
                f"{v.confidence:.0%} intervals of {calls}).")
    a, b = v.names
    call = "not settled here, though their intervals part" if v.disjoint else "too close to call here"
    lead = (f"{a} and {b} are {call}: {a} takes {_x(v.ratio)} {b}'s time "
            f"({_x(v.ratio_low).removesuffix('x')}-{_x(v.ratio_high)}) ")
    if v.settle == BUSY:
        return lead + (f"from {calls}: the machine was too busy for clean timings (more calls were set aside than "
                       "kept), so a median there does not count as settled, however narrow its interval. Rerun on a "
                       "quieter machine.")
    if v.settle == FEWER_THREADS:
        ran, asked = threads_capped(v)
        ran_said = threads_said(ran)
        return lead + (f"from {calls}, {fewer_threads(v)}. A ranking at {ran_said} need not hold at {asked}. "
                       f"Rerun when {asked} cores are free, or ask for {ran_said} (the dashboard's CPU threads, "
                       f"the CLI's --threads) to rank them there.")
    if v.settle == MORE_REPEATS:
        fewest = min_repeats(v.confidence)
        if min(v.a.repeats, v.b.repeats) < fewest:
            why = (f"from {calls}, and fewer than {fewest} calls give no {v.confidence:.0%} interval of a median. "
                   f"Time more repeats: at least {fewest}, about {v.repeats_needed} at this spread.")
        elif v.repeats_needed > AUTO_MAX_REPEATS:  # an outlier, not a spread that more repeats would average out
            why = (f"from {calls}. With intervals up to ±{v.widest:.1%} of the median the machine was too noisy "
                   f"for a verdict (target ±{v.target_rel_ci:.0%}), and more than {AUTO_MAX_REPEATS} repeats would "
                   "be needed to narrow them: rerun on a quieter machine.")
        else:
            why = (f"from {calls}. With intervals up to ±{v.widest:.1%} of the median the machine was too noisy "
                   f"for a verdict (target ±{v.target_rel_ci:.0%}): time more repeats (about {v.repeats_needed} "
                   f"would narrow them to ±{v.target_rel_ci:.0%}) or rerun on a quieter machine.")
        return lead + why
    more = ("" if v.repeats_needed is None else
            f"; at this N about {v.repeats_needed} repeats might separate them")
    return (lead + f"from {calls}: the {v.difference:.1%} difference is within the {v.noise:.1%} the two intervals "
            f"reach towards each other at this N. Try a larger N, where each call does more work{more}.")


ROW_COLUMNS = ("time_s", "time_lo_s", "time_hi_s", "repeats")  # a measured row's median, its interval, its calls


def _number(value: object) -> float | None:
    """A finite number, or None (missing, NaN, pandas' NA)."""
    try:
        x = float(value)  # pandas' NA raises TypeError here
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def row_estimate(row: object) -> Estimate | None:
    """The Estimate of a measured row (a mapping or a pandas row with time_s, time_lo_s, time_hi_s and repeats: a
    sweep's row, or a view's timed row): estimate_of its summary; None where the row did not run (a status other than
    "ok") or carries no interval. A row with more calls set aside than kept (its `set_aside` above its `repeats`: the
    machine was too busy for clean calls, and its run marked it unsettled) is `busy`: it never names a winner. Its
    `threads` and `threads_asked` (where the row has them) make it `capped` when it ran with fewer threads than asked.

    Example:
        >>> row_estimate({"time_s": 1.0, "time_lo_s": 0.99, "time_hi_s": 1.01, "repeats": 20}).converged
        True
        >>> row_estimate({"time_s": 1.0, "time_lo_s": float("nan"), "time_hi_s": 1.1, "repeats": 3}) is None
        True
        >>> e = row_estimate({"time_s": 1.0, "time_lo_s": 0.99, "time_hi_s": 1.01, "repeats": 20, "set_aside": 21})
        >>> e.converged, e.busy
        (False, True)
        >>> row_estimate({"time_s": 1.0, "time_lo_s": 0.99, "time_hi_s": 1.01, "repeats": 20, "threads": 1,
        ...               "threads_asked": 2}).capped
        True
    """
    get = row.get if hasattr(row, "get") else (lambda key, default=None: default)
    if str(get("status", OK)) != OK:
        return None
    values = [_number(get(c)) for c in ROW_COLUMNS]
    if any(v is None for v in values) or values[3] < 1 or values[0] <= 0:
        return None
    threads, asked = (int(_number(get(c)) or 0) for c in ("threads", "threads_asked"))
    e = replace(estimate_of(values[0], values[1], values[2], int(values[3])), threads=threads, threads_asked=asked)
    aside = _number(get("set_aside"))
    return replace(e, converged=False, busy=True) if aside is not None and aside > values[3] else e


def cell(v: Verdict) -> str:
    """The verdict in a table cell, a's time over b's with the ratio's interval: the ratio only where the verdict
    separates, else "too close to call" with the interval, so that a bare point ratio never reads as a conclusion.

    Example:
        >>> slow, fast = [2.0, 2.02, 1.98, 2.01, 1.99, 2.0], [1.0, 1.01, 0.99, 1.02, 0.98, 1.0]
        >>> cell(compare(slow, fast)), cell(compare([1.0, 1.5, 0.8], [2.0, 2.4, 1.7]))
        ('2.00x (1.94-2.06x)', 'too close to call (0.33-0.88x)')
    """
    span = f"{_x(v.ratio_low).removesuffix('x')}-{_x(v.ratio_high)}"
    return f"{_x(v.ratio)} ({span})" if v.separated else f"too close to call ({span})"
