"""Timing that knows its own noise: the interval of a median (stats), the adaptive timing loop (timing.time_calls with
repeats="auto" / Adaptive) and verdicts that name a winner only when the intervals separate (verdict).

Nothing here reads the real clock: the timed calls move a fake clock by durations drawn from a seeded heavy-tailed
distribution (a Pareto tail, as a busy machine adds), injected through time_calls(clock=...), so every sample, median
and verdict is exact and the same on every machine.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
import subprocess
import sys

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from flashviz.measure.progress import Cancelled
from flashviz.measure.stats import ci_rank, median_ci, min_repeats, rel_half_width, repeats_for_width
from flashviz.measure.timing import Adaptive, time_call, time_calls
from flashviz.measure.verdict import (
    LARGER_N,
    MORE_REPEATS,
    SEPARATED,
    Estimate,
    as_estimate,
    compare,
    estimate,
    estimate_of,
    sentence,
)

PARETO_ALPHA = 1.5  # tail index of the injected noise: infinite variance, as bursts of a busy machine


class NoisyMachine:
    """A fake clock, and candidates whose every call moves it by true_s * (1 + noise * (Pareto - 1)): at least the
    true time, with a heavy right tail. The median call takes true_s * (1 + noise * (2^(1/alpha) - 1)), so two
    candidates with the same noise have medians in the ratio of their true times."""

    def __init__(self, seed: int):
        self.now = 0.0  # seconds on the fake clock
        self.rng = random.Random(seed)

    def clock(self) -> float:
        return self.now

    def candidate(self, true_s: float, noise: float):
        def call() -> None:
            self.now += true_s * (1 + noise * (self.rng.paretovariate(PARETO_ALPHA) - 1))

        return call


def noisy_timings(seed: int, true_a: float, true_b: float, noise: float, repeats) -> dict:
    m = NoisyMachine(seed)
    return time_calls({"a": m.candidate(true_a, noise), "b": m.candidate(true_b, noise)}, warmup=1,
                      repeats=repeats, threads=1, clock=m.clock)


# ---------------------------------------------------------------------------------------------------------------------
# the interval of a median


def brute_force_rank(n: int, confidence: float) -> tuple[int, float]:
    """The largest j whose [x_(j), x_(n+1-j)] covers the median with >= confidence, by counting every one of the
    2^n patterns of samples below / above the median: the interval covers it when j <= (number below) <= n - j."""
    best = (1, None)
    for j in range(1, (n + 1) // 2 + 1):
        covered = sum(j <= sum(p) <= n - j for p in itertools.product((0, 1), repeat=n)) / 2**n
        if j == 1:
            best = (1, covered)
        if covered >= confidence:
            best = (j, covered)
    return best


@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95, 0.99])
@pytest.mark.parametrize("n", range(1, 15))
def test_the_rank_of_the_interval_matches_counting_every_pattern(n, confidence):
    j, level = ci_rank(n, confidence)
    want_j, want_level = brute_force_rank(n, confidence)
    assert j == want_j and level == pytest.approx(want_level, abs=1e-12)
    assert (level >= confidence) == (n >= min_repeats(confidence))


def test_known_table_values_of_the_95_percent_interval():
    # the textbook table of distribution-free intervals of a median: n = 20 -> x_(6)..x_(15), n = 100 -> x_(40)..x_(61)
    assert ci_rank(20)[0] == 6 and ci_rank(20)[1] == pytest.approx(0.9586, abs=1e-4)
    assert ci_rank(100)[0] == 40
    assert min_repeats(0.95) == 6 and ci_rank(5)[1] < 0.95 <= ci_rank(6)[1]


def test_the_interval_covers_the_true_median_as_often_as_it_says():
    """An oracle: exponential samples have median ln 2. Over 4000 seeded sets of 12 calls, the interval covers ln 2
    as often as its level says (binomial standard error ~0.003 at 4000 sets)."""
    rng = random.Random(7)
    n, trials = 12, 4000
    covered = 0
    for _ in range(trials):
        low, high, _ = median_ci([rng.expovariate(1.0) for _ in range(n)])
        covered += low <= math.log(2) <= high
    level = ci_rank(n)[1]
    assert level >= 0.95 and abs(covered / trials - level) < 0.015, (covered / trials, level)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(1e-6, 10.0), min_size=1, max_size=60), st.sampled_from([0.9, 0.95, 0.99]))
def test_the_interval_brackets_the_median_and_is_made_of_samples(samples, confidence):
    low, high, level = median_ci(samples, confidence)
    assert low <= statistics.median(samples) <= high
    assert low in samples and high in samples
    assert 0 <= level < 1


def test_widths_and_repeats_needed():
    assert rel_half_width(2.0, 1.8, 2.2) == pytest.approx(0.1)
    assert rel_half_width(1.0, 1.0, 1.0) == 0.0 and rel_half_width(0.0, 0.0, 1.0) == math.inf
    assert repeats_for_width(10, 0.2, 0.05) == 160  # width ~ 1/sqrt(n): 4x narrower needs 16x the calls
    assert repeats_for_width(10, 0.01, 0.05) == 10  # already narrow enough: no fewer than measured
    with pytest.raises(ValueError, match="between 0 and 1"):
        ci_rank(10, 1.0)
    with pytest.raises(ValueError, match="at least one"):
        median_ci([])


# ---------------------------------------------------------------------------------------------------------------------
# the adaptive timing loop


def test_a_noise_free_call_converges_after_the_fewest_repeats_that_give_an_interval():
    m = NoisyMachine(0)
    t = time_calls({"a": m.candidate(0.01, 0.0), "b": m.candidate(0.02, 0.0)}, warmup=2, repeats="auto",
                   clock=m.clock)
    assert {x.repeats for x in t.values()} == {min_repeats()} and all(x.converged for x in t.values())
    assert t["a"].samples == pytest.approx((0.01,) * 6) and t["b"].median == pytest.approx(0.02)
    assert t["a"].ci_low == pytest.approx(0.01) == t["a"].ci_high


def test_adaptive_rounds_interleave_every_candidate():
    order: list = []
    now = [0.0]

    def call(name, seconds):
        def fn():
            order.append(name)
            now[0] += seconds
        return fn

    time_calls({"a": call("a", 1.0), "b": call("b", 2.0)}, warmup=1, repeats=Adaptive(min_repeats=7),
               clock=lambda: now[0])
    assert order == ["a", "b"] * 8  # one warm-up each, then 7 rounds of one call each, in turn


def test_adaptive_stops_when_its_budget_is_spent_and_says_it_did_not_converge():
    m = NoisyMachine(1)
    budget = 300.0  # fake seconds: well past the 6 rounds that always run
    t = time_calls({"a": m.candidate(1.0, 3.0), "b": m.candidate(1.0, 3.0)}, warmup=1,
                   repeats=Adaptive(budget_s=budget, max_repeats=1000), clock=m.clock)
    n = t["a"].repeats
    assert n == t["b"].repeats and min_repeats() < n < 1000
    spent = m.now  # warm-up and every timed call moved the fake clock; nothing else did
    last_round = t["a"].samples[-1] + t["b"].samples[-1]
    assert spent - last_round < budget <= spent  # the last round started before the budget was spent
    assert not (t["a"].converged and t["b"].converged)  # heavy noise: no +-5% interval within the budget


def test_adaptive_stops_at_max_repeats_and_never_before_min_repeats():
    m = NoisyMachine(2)
    t = time_call(m.candidate(1.0, 5.0), warmup=0, repeats=Adaptive(budget_s=None, min_repeats=6, max_repeats=9),
                  clock=m.clock)
    assert t.repeats == 9 and not t.converged and t.rel_ci > 0.05
    m = NoisyMachine(2)
    t = time_call(m.candidate(1.0, 5.0), warmup=0, repeats=Adaptive(budget_s=0.0, min_repeats=8), clock=m.clock)
    assert t.repeats == 8  # the budget was spent at once, but min_repeats rounds always run


def test_adaptive_progress_counts_up_to_max_repeats_and_cancel_still_stops_it():
    m = NoisyMachine(3)
    seen: list = []
    fns = {"a": m.candidate(0.01, 0.0), "b": m.candidate(0.01, 0.0)}
    time_calls(fns, warmup=1, repeats=Adaptive(max_repeats=40), clock=m.clock,
               progress=lambda *a: seen.append(a))
    assert {s[1] for s in seen} == {2 * (1 + 40)}  # the total counts max_repeats rounds
    assert [s[0] for s in seen] == [*range(2 + 2 * 6), 82]  # 2 warm-ups + 6 rounds of 2, then the jump to total
    assert seen[2][2] == "repeat 1 of at most 40: a" and seen[-1][2] == "timed"

    calls = []

    def stop_at_ten(done: int, total: int, label: str) -> None:
        if done == 10:
            raise Cancelled("stop")

    with pytest.raises(Cancelled):
        time_calls({"a": lambda: calls.append(1)}, warmup=0, repeats="auto", progress=stop_at_ten)
    assert len(calls) == 10


@pytest.mark.parametrize("repeats,match", [
    ("fast", "repeats must be"), (Adaptive, "repeats must be"), (0, "repeats must be"),
])
def test_bad_repeats_are_refused_with_the_choices(repeats, match):
    with pytest.raises(ValueError, match=match):
        time_call(lambda: None, repeats=repeats)


@pytest.mark.parametrize("kwargs,match", [
    ({"target_rel_ci": 0.0}, "target_rel_ci"), ({"confidence": 1.0}, "confidence"), ({"budget_s": -1}, "budget_s"),
    ({"min_repeats": 0}, "min_repeats"), ({"min_repeats": 10, "max_repeats": 5}, "max_repeats"),
])
def test_bad_adaptive_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Adaptive(**kwargs)


def test_a_bad_clock_is_refused():
    with pytest.raises(TypeError, match="clock must be"):
        time_calls({"a": lambda: None}, clock=3.0)


# ---------------------------------------------------------------------------------------------------------------------
# verdicts from injected noise


SEEDS = range(12)


@pytest.mark.parametrize("seed", SEEDS)
def test_equal_true_times_under_heavy_noise_are_too_close_to_call(seed):
    t = noisy_timings(seed, 0.02, 0.02, noise=1.0, repeats=Adaptive(budget_s=None, max_repeats=60))
    v = compare(t["a"], t["b"], ("a", "b"))
    assert not v.separated and v.faster is None
    assert v.settle in (MORE_REPEATS, LARGER_N)
    assert v.ratio_low <= 1 <= v.ratio_high  # the intervals overlap: the ratio's interval holds 1
    if v.settle == MORE_REPEATS:
        assert not (t["a"].converged and t["b"].converged) and v.repeats_needed > t["a"].repeats
    else:
        assert t["a"].converged and t["b"].converged


def test_three_repeats_show_a_winner_by_their_medians_that_the_verdict_refuses():
    """The old default: three calls each. Under the same heavy noise, equal true times give medians apart by 1.3x
    or more in some seeds (as 1.01x, 1.87x, 1.42x in three runs of one machine); the verdict names no winner in any
    of them, because three calls cover a median with 75%, not 95%."""
    ratios = []
    for seed in range(30):
        t = noisy_timings(seed, 0.02, 0.02, noise=1.0, repeats=3)
        v = compare(t["a"], t["b"], ("a", "b"))
        assert not v.separated and v.settle == MORE_REPEATS and v.repeats_needed >= min_repeats()
        assert v.a.level == 0.75
        ratios.append(max(v.ratio, 1 / v.ratio))
    assert max(ratios) >= 1.3  # the medians alone would have named a winner


@pytest.mark.parametrize("seed", SEEDS)
def test_twice_the_true_time_under_low_noise_is_separated_and_the_interval_holds_2(seed):
    t = noisy_timings(seed, 0.04, 0.02, noise=0.02, repeats="auto")
    v = compare(t["a"], t["b"], ("naive", "flash2"))
    assert t["a"].converged and t["b"].converged
    assert v.separated and v.settle == SEPARATED and v.repeats_needed is None
    assert v.faster == "flash2" and v.slower == "naive"
    speedup, low, high = v.speedup
    assert low <= 2.0 <= high and low <= speedup <= high
    assert f"{speedup:.2f}x" in sentence(v) and f"{high:.2f}x" in sentence(v)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_difference_below_the_noise_asks_for_a_larger_n(seed):
    """Both medians known to +-5%, 0.5% apart: more repeats of the same work would take thousands of calls; the verdict
    says the difference is below the noise at this N."""
    t = noisy_timings(seed, 0.02, 0.0201, noise=0.05, repeats=Adaptive(budget_s=None))
    v = compare(t["a"], t["b"], ("a", "b"))
    assert t["a"].converged and t["b"].converged
    assert not v.separated and v.settle == LARGER_N
    assert v.repeats_needed is not None and v.repeats_needed > t["a"].repeats
    assert v.difference <= v.noise  # overlapping: the gap is within what the intervals reach towards each other
    assert f"{v.difference:.1%}" in sentence(v) and f"{v.noise:.1%}" in sentence(v)


# ---------------------------------------------------------------------------------------------------------------------
# the verdict on its own (pure)


def interval(median: float, rel: float, repeats: int = 20) -> Estimate:
    return estimate_of(median, median * (1 - rel), median * (1 + rel), repeats)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.5, 2.0), st.floats(0.5, 2.0), st.floats(0.001, 0.3), st.floats(0.001, 0.3),
       st.integers(1, 40), st.integers(1, 40))
def test_separated_exactly_when_real_intervals_do_not_overlap(ma, mb, ra, rb, na, nb):
    a, b = interval(ma, ra, na), interval(mb, rb, nb)
    assume(min(abs(a.high - b.low), abs(b.high - a.low)) > 1e-9)  # not touching: rounding may fall either way
    v = compare(a, b)
    disjoint = a.high < b.low or b.high < a.low
    real = min(na, nb) >= min_repeats()
    assert v.disjoint == disjoint
    assert v.separated == (disjoint and real and a.converged and b.converged)
    assert v.ratio_low <= v.ratio <= v.ratio_high
    assert (v.ratio_low > 1 or v.ratio_high < 1) == disjoint  # the ratio's interval excludes 1 iff disjoint
    w = compare(b, a)  # the other way round: the same verdict, the ratio inverted
    assert w.separated == v.separated and w.faster == ("a" if v.faster == "b" else "b" if v.faster else None)
    assert w.ratio == pytest.approx(1 / v.ratio) and w.settle == v.settle
    assert (v.difference <= v.noise) == (not disjoint) and w.noise == pytest.approx(v.noise)
    if not v.separated:
        assert v.settle in (MORE_REPEATS, LARGER_N)
        assert (v.settle == MORE_REPEATS) == (not (a.converged and b.converged))


def test_intervals_that_part_on_a_noisy_machine_name_no_winner():
    """+-20% intervals 3x apart part, but a machine that noisy changes between runs: more repeats, no winner."""
    v = compare(interval(3.0, 0.2), interval(1.0, 0.2), ("naive", "flash2"))
    assert v.disjoint and not v.separated and v.faster is None and v.settle == MORE_REPEATS
    assert v.widest == pytest.approx(0.2) and v.repeats_needed == repeats_for_width(20, 0.2, 0.05)
    assert "intervals part" in sentence(v) and f"±{v.widest:.1%}" in sentence(v)
    calm = compare(interval(3.0, 0.04), interval(1.0, 0.04), ("naive", "flash2"))
    assert calm.separated and calm.faster == "flash2" and calm.speedup[0] == pytest.approx(3.0)


def test_the_settle_advice_follows_the_numbers():
    wide = compare(interval(1.0, 0.2), interval(1.1, 0.2))  # +-20% > the +-5% target: more repeats
    assert wide.settle == MORE_REPEATS and wide.repeats_needed == repeats_for_width(20, 0.2, 0.05) == 320
    narrow = compare(interval(1.0, 0.03), interval(1.02, 0.03))  # known to +-3%, 2% apart: a larger N
    assert narrow.settle == LARGER_N
    # what the intervals reach towards each other (0.03 above 1.0, 0.0306 below 1.02) must shrink below the 0.02
    # gap: (0.0606 / 0.02)^2 = 9.18 times the 20 calls
    assert narrow.repeats_needed == math.ceil(20 * (0.0606 / 0.02) ** 2)
    assert narrow.noise == pytest.approx(0.0606 / 1.02) and narrow.difference == pytest.approx(0.02 / 1.02)
    same = compare(interval(1.0, 0.03), interval(1.0, 0.03))
    assert same.settle == LARGER_N and same.repeats_needed is None  # equal medians: no number of calls separates


def test_estimates_come_from_timings_samples_and_rows_alike():
    samples = [1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 1.03]
    t = time_call(lambda: None, warmup=0, repeats=3)
    assert as_estimate(t).repeats == 3 and as_estimate(t).level == ci_rank(3)[1]
    e = estimate(samples)
    assert as_estimate(samples) == e
    assert estimate_of(e.median, e.low, e.high, e.repeats) == e
    with pytest.raises(TypeError, match="a timing must be"):
        as_estimate(3.0)
    with pytest.raises(ValueError, match="low <= median <= high"):
        estimate_of(1.0, 1.1, 1.2, 10)
    with pytest.raises(ValueError, match="median must be a finite time > 0"):
        compare([0.0] * 6, [1.0] * 6)
    with pytest.raises(TypeError, match="names"):
        compare(samples, samples, "ab")


def test_verdict_and_stats_import_without_torch():
    code = ("import sys; import flashviz.measure.verdict, flashviz.measure.stats; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_outlier_too_wide_for_any_number_of_repeats_asks_for_a_quieter_machine_not_a_count():
    """Six calls with one of 2 s among 10 ms ones: no number of repeats the dashboard would time (at most
    AUTO_MAX_REPEATS) narrows that interval, so the sentence names none; a merely wide interval still gets a count."""
    from flashviz.limits import AUTO_MAX_REPEATS

    wild = compare([0.010, 0.011, 2.0, 0.010, 0.012, 0.011], [0.005] * 5 + [1.5], ("naive", "flash2"))
    assert not wild.separated and wild.settle == MORE_REPEATS and wild.repeats_needed > AUTO_MAX_REPEATS
    said = sentence(wild)
    assert f"more than {AUTO_MAX_REPEATS} repeats" in said and str(wild.repeats_needed) not in said
    wide = compare([0.010, 0.011, 0.013, 0.010, 0.012, 0.011], [0.0105, 0.012, 0.0098, 0.011, 0.0102, 0.0113],
                   ("naive", "flash2"))
    assert wide.settle == MORE_REPEATS and wide.repeats_needed <= AUTO_MAX_REPEATS
    assert f"about {wide.repeats_needed} would narrow" in sentence(wide)
