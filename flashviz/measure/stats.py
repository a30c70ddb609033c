"""How sure a median of timed calls is: a distribution-free confidence interval of the median, from order statistics.

Timed calls are not normal (a busy machine adds a long right tail), so no mean and standard deviation: the interval
of the median comes from the binomial distribution alone. Sorted samples x_(1) <= ... <= x_(n) of a continuous
distribution with median M lie below M independently with probability 1/2 each, so the interval [x_(j), x_(n+1-j)]
misses M only when fewer than j samples lie on one side:

    P(x_(j) <= M <= x_(n+1-j)) = 1 - 2 P(Bin(n, 1/2) <= j - 1)

`median_ci` takes the narrowest such interval whose coverage is at least the confidence asked for (pyperf and
criterion report an interval like this one; torch.utils.benchmark's adaptive_autorange stops on a like criterion).
Below `min_repeats(confidence)` samples (6 at 95%) no pair of order statistics reaches the confidence: the interval is
then [min, max] and its `level` says what it covers. Its width shrinks about as 1/sqrt(n), which `repeats_for_width`
uses to say how many repeats a wanted width needs.

Pure Python (no torch): flashviz.measure.verdict and the dashboard use it without the kernels.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from fractions import Fraction
from numbers import Real

CONFIDENCE = 0.95  # the coverage asked of every interval of a median
TARGET_REL_CI = 0.05  # a median is "converged" when its interval's half-width is at most this fraction of it


def validate_fraction(name: str, value: object) -> float:
    """A number strictly between 0 and 1 (a confidence, a relative width)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 < float(value) < 1:
        raise ValueError(f"{name} must be a number strictly between 0 and 1, e.g. 0.95 or 0.05, got {value!r}.")
    return float(value)


def ci_rank(n: int, confidence: float = CONFIDENCE) -> tuple[int, float]:
    """The rank j of the interval [x_(j), x_(n+1-j)] of the median of n samples, and the interval's coverage.

    j is the largest rank whose coverage 1 - 2 P(Bin(n, 1/2) <= j - 1) is at least `confidence`; if even j = 1
    ([min, max]) falls short, j = 1 with its lower coverage 1 - 2^(1-n). Exact (integer binomial sums).

    Args:
        n: number of samples (>= 1).  confidence: the coverage wanted, in (0, 1).
    Returns:
        (j, level): 1-based rank and the coverage of [x_(j), x_(n+1-j)].

    Example:
        >>> ci_rank(6), ci_rank(20)[0], ci_rank(3)
        ((1, 0.96875), 6, (1, 0.75))
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1 (the number of samples), got {n!r}.")
    confidence = validate_fraction("confidence", confidence)
    total = 1 << n  # 2^n equally likely patterns of samples below and above the median
    allowed = (1 - Fraction(confidence)) * total  # the interval may miss in at most this many patterns (both sides)
    j, tail, c = 1, 1, 1  # tail = sum_{i < j} C(n, i); c = C(n, j - 1)
    while j + 1 <= (n + 1) // 2:
        c = c * (n - j + 1) // j  # C(n, j)
        if 2 * (tail + c) > allowed:
            break
        tail, j = tail + c, j + 1
    return j, float(1 - Fraction(2 * tail, total))


def min_repeats(confidence: float = CONFIDENCE) -> int:
    """The fewest samples whose [min, max] covers the median with at least `confidence`: 1 - 2^(1-n) >= confidence.

    Example:
        >>> min_repeats(0.95), min_repeats(0.99)
        (6, 8)
    """
    confidence = validate_fraction("confidence", confidence)
    return max(1, math.ceil(1 - math.log2(1 - confidence) - 1e-12))


def median_ci(samples: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """The distribution-free interval of the median of `samples` (see the module) and its coverage.

    Args:
        samples: the timed calls (>= 1), in any order.  confidence: the coverage wanted, in (0, 1).
    Returns:
        (low, high, level): the interval's ends (in the samples' unit) and what it covers; level < confidence when
        there are fewer than min_repeats(confidence) samples.

    Example:
        >>> median_ci([5.0, 1.0, 4.0, 2.0, 3.0, 6.0])
        (1.0, 6.0, 0.96875)
    """
    if len(samples) < 1:
        raise ValueError("samples must hold at least one timed call, got none.")
    ordered = sorted(samples)
    j, level = ci_rank(len(ordered), confidence)
    return ordered[j - 1], ordered[len(ordered) - j], level


def rel_half_width(median: float, low: float, high: float) -> float:
    """Half the interval's width as a fraction of the median: (high - low) / 2 / median (0 for a point, inf when the
    median is 0 or less but the interval is not a point).

    Example:
        >>> rel_half_width(10.0, 9.0, 11.5)
        0.125
    """
    if high == low:
        return 0.0
    return (high - low) / 2 / median if median > 0 else math.inf


def is_converged(samples: Sequence[float], target_rel_ci: float = TARGET_REL_CI,
                 confidence: float = CONFIDENCE) -> bool:
    """Whether the median of `samples` is known well enough: its interval covers at least `confidence` and its
    relative half-width is at most `target_rel_ci`.

    Example:
        >>> is_converged([1.0, 1.01, 0.99, 1.0, 1.02, 0.98]), is_converged([1.0, 1.0, 1.0])
        (True, False)
    """
    target_rel_ci = validate_fraction("target_rel_ci", target_rel_ci)
    low, high, level = median_ci(samples, confidence)
    return level >= confidence and rel_half_width(statistics.median(samples), low, high) <= target_rel_ci


def repeats_for_width(n: int, rel: float, target: float) -> int:
    """About how many samples bring a relative half-width `rel` measured on n samples down to `target`: the width of
    the median's interval shrinks as 1/sqrt(n), so n (rel / target)^2, and never fewer than n.

    Example:
        >>> repeats_for_width(10, 0.10, 0.05)
        40
    """
    if not (target > 0 and math.isfinite(rel)):
        raise ValueError(f"rel must be finite and target > 0, got rel={rel!r}, target={target!r}.")
    return max(n, math.ceil(n * (rel / target) ** 2 - 1e-9))
