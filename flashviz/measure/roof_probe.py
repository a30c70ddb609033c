"""This machine's roofline, measured: the fp32 matmul rate (the compute roof) and the memory read bandwidth (the
memory roof), each the best of several runs at the thread count the kernels are timed at, and a roof that bounds
every kernel timed on it.

A roof is the most a machine can do, so a kernel measured above it shows that the probe was slowed down (the machine
was busy while it ran) or does not reach the machine's best (a 512 x 512 matmul is smaller than a kernel's). `bounded`
measures the roof again when a timed kernel beats it and keeps the best of both; if a kernel still beats it, the roof
is raised to what that kernel reached, and the returned `RoofCheck` says so, with the numbers.

Every probe call is kept: `roof_spread` reports, per thread count, the best, median, quartiles and slowest rate over
all the probe's calls so far (a busy machine pulls a probe down, never up), so that a roof drawn from the best can
carry the spread beside it; `with_spread` attaches it to a RoofCheck.

Units: FLOP/s, bytes/s, FLOP/byte. The model that uses the roof is flashviz.model.roofline (pure arithmetic).
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from flashviz.measure.timing import threads_set_to, time_call
from flashviz.model.roofline import Device
from flashviz.vocab import DTYPE_BYTES

MATMUL_N = 512  # the matmul probe: (512 x 512) @ (512 x 512) fp32, 2 * 512^3 = 268 MFLOP per call
COPY_BYTES = 64 << 20  # the bandwidth probe: x.sum() over 64 MiB of fp32, more than a CPU's caches
PROBE_REPEATS = 5  # each probe keeps the best of this many calls (after a warm-up): noise only slows a call down
BEAT_MARGIN = 1.0  # a kernel beats the roof when it reaches more than this times the roof's rate at its intensity
_LOCK = threading.Lock()  # two sessions asking at once measure once, not twice at half speed
_ROOFS: dict[int, Device] = {}  # threads -> the best roof measured so far at that thread count
_RATES: dict[int, tuple[list[float], list[float]]] = {}  # threads -> (FLOP/s, bytes/s) of every probe call so far


@dataclass(frozen=True)
class Spread:
    """A probe's rate over its timed calls: the best is the roof, the rest how far a busy machine pulled calls down."""

    best: float  # the highest rate of any call: what the roof draws (FLOP/s or bytes/s)
    median: float  # the median call's rate
    q1: float  # 25th percentile of the rates
    q3: float  # 75th percentile of the rates
    lowest: float  # the slowest call's rate
    calls: int  # timed calls behind these figures

    @property
    def rel_iqr(self) -> float:
        """(q3 - q1) / median: the spread of the middle half of the calls, as a fraction of the median."""
        return (self.q3 - self.q1) / self.median


def spread_of(rates: Sequence[float]) -> Spread:
    """The Spread of a probe's rates (one per timed call, >= 1).

    Example:
        >>> spread_of([10.0, 8.0, 9.0, 4.0, 10.0])
        Spread(best=10.0, median=9.0, q1=8.0, q3=10.0, lowest=4.0, calls=5)
    """
    if not rates:
        raise ValueError("rates must hold at least one probe call's rate, got none.")
    q1, _, q3 = statistics.quantiles(rates, n=4, method="inclusive") if len(rates) > 1 else (rates[0],) * 3
    return Spread(max(rates), statistics.median(rates), q1, q3, min(rates), len(rates))


@dataclass(frozen=True)
class RoofSpread:
    """The spread of both probes behind a roof at one thread count."""

    flops: Spread  # the matmul probe's FLOP/s over its calls
    bandwidth: Spread  # the bandwidth probe's bytes/s over its calls
    threads: int  # the intra-op threads the probes ran with


def _rates(fn: Callable[[], object], work: float) -> list[float]:
    """work / seconds of each of PROBE_REPEATS timed calls after one warm-up (measure.time_call)."""
    return [work / s for s in time_call(fn, warmup=1, repeats=PROBE_REPEATS).calls]


def _probe(threads: int) -> Device:
    """One measurement of the roof at `threads` intra-op threads; every call's rate is kept in _RATES."""
    with threads_set_to(threads), torch.no_grad():
        a, b = torch.randn(MATMUL_N, MATMUL_N), torch.randn(MATMUL_N, MATMUL_N)  # fp32
        flops = _rates(lambda: torch.mm(a, b), 2 * MATMUL_N**3)  # FLOP/s: 2 FLOPs per multiply-accumulate
        x = torch.ones(COPY_BYTES // 4)  # fp32: 4 bytes per element
        bandwidths = _rates(x.sum, COPY_BYTES)  # bytes/s
    kept = _RATES.setdefault(threads, ([], []))
    kept[0].extend(flops)
    kept[1].extend(bandwidths)
    rate, bandwidth = max(flops), max(bandwidths)
    return Device(f"this machine ({threads} thread{'s' if threads != 1 else ''}, measured)",
                  dict.fromkeys(DTYPE_BYTES, rate), bandwidth, None,
                  f"measured: fp32 matmul {MATMUL_N}^3 and x.sum() over 64 MiB, best of {PROBE_REPEATS} calls each, "
                  f"{threads} thread(s)", measured=True)


def _best(a: Device, b: Device) -> Device:
    """The higher compute roof and the higher memory roof of two measurements."""
    rate = max(a.peak("float32"), b.peak("float32"))
    return replace(a, peak_flops=dict.fromkeys(DTYPE_BYTES, rate), bandwidth=max(a.bandwidth, b.bandwidth))


def machine_roof(threads: int) -> Device:
    """This machine's roof at `threads` threads: measured on the first call for that thread count (about 0.2-1 s),
    then kept. The one measured matmul rate stands for every dtype (a CPU has no tensor cores).

    Example:
        >>> roof = machine_roof(1)
        >>> roof is machine_roof(1), roof.measured, roof.peak("float32") > 1e8, roof.bandwidth > 1e7
        (True, True, True, True)
    """
    with _LOCK:
        if threads not in _ROOFS:
            _ROOFS[threads] = _probe(threads)
        return _ROOFS[threads]


def roof_spread(threads: int) -> RoofSpread:
    """The spread of every probe call at `threads` threads so far (the roof is measured first if it was not yet):
    a roof drawn at `best` can show the median and the slowest call beside it.

    Example:
        >>> spread = roof_spread(1)
        >>> spread.flops.best == machine_roof(1).peak("float32"), spread.bandwidth.best == machine_roof(1).bandwidth
        (True, True)
        >>> spread.bandwidth.lowest <= spread.bandwidth.median <= spread.bandwidth.best
        True
    """
    machine_roof(threads)
    with _LOCK:
        flops, bandwidths = _RATES[threads]
        return RoofSpread(spread_of(flops), spread_of(bandwidths), threads)


def measure_again(threads: int) -> Device:
    """Measure the roof at `threads` threads once more and keep the best of everything measured so far."""
    with _LOCK:
        fresh = _probe(threads)
        _ROOFS[threads] = _best(_ROOFS[threads], fresh) if threads in _ROOFS else fresh
        return _ROOFS[threads]


@dataclass(frozen=True)
class RoofCheck:
    """What `bounded` found: the roof the chart draws and how it came to be."""

    roof: Device  # the roof every timed point is on or under
    probe_flops: float  # FLOP/s the probe measured first
    probe_bandwidth: float  # bytes/s the probe measured first
    beaten_by: tuple[str, ...]  # the kernels that reached more than the first roof at their intensity ("" if none)
    measured_again: bool  # the probe ran once more because a kernel beat it
    raised_flops: float | None  # FLOP/s the compute roof was raised to (the fastest kernel's), or None
    raised_bandwidth: float | None  # bytes/s the memory roof was raised to, or None
    spread: RoofSpread | None = None  # the probes' spread over their calls (with_spread), or None if not attached


def with_spread(check: RoofCheck, threads: int) -> RoofCheck:
    """The check with the spread of the probe calls at `threads` threads attached (roof_spread): the roof drawn is
    the best call, the spread says how far the others fell below it."""
    return replace(check, spread=roof_spread(threads))


def _attainable(roof: Device, intensity: float) -> float:
    return min(roof.peak("float32"), intensity * roof.bandwidth)


def bounded(roof: Device, reached: dict[str, tuple[float, float]], remeasure: Callable[[], Device]) -> RoofCheck:
    """A roof that bounds every kernel timed on it.

    Args:
        roof: the roof measured before the timing (machine_roof).
        reached: kernel name -> (intensity in FLOP/byte, FLOP/s reached): the timed points.
        remeasure: measures the roof again and returns the best so far (measure_again at the timing's threads);
            called only if a kernel beats the roof.
    Returns:
        RoofCheck: the roof (re-measured, and raised if a kernel still beats it) and what happened.

    Example:
        >>> fake = Device("cpu", {"float32": 1e10}, 1e9, None, "a fake", measured=True)
        >>> check = bounded(fake, {"naive": (20.0, 4e10), "flash": (5.0, 1e9)}, lambda: fake)
        >>> check.beaten_by, check.measured_again, check.raised_flops, check.roof.peak("float32")
        (('naive',), True, 40000000000.0, 40000000000.0)
        >>> bounded(fake, {"flash": (5.0, 1e9)}, lambda: 1 / 0).beaten_by  # under the roof: nothing measured again
        ()
    """
    first = roof
    beaten = tuple(k for k, (i, f) in reached.items() if f > BEAT_MARGIN * _attainable(roof, i))
    if not beaten:
        return RoofCheck(roof, first.peak("float32"), first.bandwidth, (), False, None, None)
    roof = _best(roof, remeasure())
    peak, bandwidth = roof.peak("float32"), roof.bandwidth
    over = {k: (i, f) for k, (i, f) in reached.items() if f > _attainable(roof, i)}
    raised_flops = max([f for i, f in over.values() if f > peak], default=None)
    raised_bw = max([f / i for i, f in over.values() if f <= peak and f / i > bandwidth], default=None)
    if raised_flops is not None:
        peak = raised_flops
        raised_bw = max([f / i for i, f in over.values() if f / i > bandwidth], default=raised_bw)
    if raised_bw is not None:
        bandwidth = raised_bw
    roof = replace(roof, peak_flops=dict.fromkeys(DTYPE_BYTES, peak), bandwidth=bandwidth)
    return RoofCheck(roof, first.peak("float32"), first.bandwidth, beaten, True, raised_flops, raised_bw)
