"""How long a run will take here, said before it starts: this machine's speed, measured in the timing worker, times
the work the run will do.

The work of one call is its FLOPs (flashviz.model.flops.impl_flops) at the measured matmul rate, plus, for a tiled
kernel, its computed tiles at the measured cost of one tile: the Python loop pays tens of microseconds a tile beyond
the tile's FLOPs, which is why the tiled kernels trail naive attention on a CPU at small N. `machine_speed` measures
both (a 256 x 256 matmul; FA2's loop over 64 tiles) in about half a second; `sweep_seconds` adds a sweep's calls.
An estimate, not a promise: the load can change while the run goes on, and the page says it measured just before.
Torch-free at import (the dashboard's shell imports it); the probe imports torch in the timing worker.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from flashviz.core.validate import Window
from flashviz.limits import calls_per_row
from flashviz.measure.load import threads_said
from flashviz.model.flops import impl_flops
from flashviz.units import format_flops
from flashviz.vocab import FLASH2, Q_OUTER, TILED_IMPLS

PROBE_N, PROBE_D, PROBE_BLOCK = 256, 64, 32  # the tile probe: FA2 at N = 256, d = 64, 32 x 32 tiles (64 tiles)
MM = 256  # the matmul probe: (MM x MM) @ (MM x MM), 2 MM^3 FLOPs
PROBE_CALLS = 5  # timed calls of each probe (the median is kept)
BACKWARD_TILE_FACTOR = 2.5  # a training call's tiles cost the forward's and the backward's (5 matmuls to 2)


@dataclass(frozen=True)
class Speed:
    """This machine's speed for the estimate, measured in the timing worker."""

    flops_per_s: float  # dense float32 matmul rate
    tile_s: float  # seconds a tiled kernel spends per computed tile beyond the tile's FLOPs
    threads: int  # intra-op threads the probes ran with

    def sentence(self) -> str:
        """The speed in words.

        Example:
            >>> Speed(4.8e10, 4.1e-5, 1).sentence()
            'a matmul ran at 48 GFLOP/s and the tile loop took 41 µs a tile, at 1 thread'
        """
        return (f"a matmul ran at {format_flops(self.flops_per_s)}/s and the tile loop took "
                f"{self.tile_s * 1e6:.0f} µs a tile, at {threads_said(self.threads)}")


def machine_speed(progress: object = None) -> Speed:
    """Measure Speed now (a timing job: run it in the worker, where the free cores set the threads).

    Example:
        >>> s = machine_speed()
        >>> s.flops_per_s > 1e6 and s.tile_s >= 0 and s.threads >= 1
        True
    """
    import torch

    from flashviz.core.flash import flash_attention_forward
    from flashviz.measure.load import cores
    from flashviz.measure.timing import threads_set_to, time_call

    with threads_set_to(cores()) as threads:
        a = torch.randn(MM, MM)
        mm = time_call(torch.mm, a, a, warmup=1, repeats=PROBE_CALLS, threads=threads).median
        rate = 2 * MM ** 3 / mm
        q = torch.randn(1, 1, PROBE_N, PROBE_D)
        tiled = time_call(flash_attention_forward, q, q, q, block_size=PROBE_BLOCK, loop_order=Q_OUTER, warmup=1,
                          repeats=PROBE_CALLS, threads=threads).median
    tiles = math.ceil(PROBE_N / PROBE_BLOCK) ** 2
    flops = impl_flops(FLASH2, PROBE_N, PROBE_D, block_q=PROBE_BLOCK, block_k=PROBE_BLOCK)
    return Speed(rate, max(0.0, (tiled - flops / rate) / tiles), threads)


def call_seconds(speed: Speed, impl: str, n: int, d: int, *, batch: int = 1, heads: int = 1, block_q: int = 64,
                 block_k: int = 64, causal: bool = False, window: Window = None, training: bool = False) -> float:
    """The estimated seconds of one call of impl at N.

    Example:
        >>> s = Speed(1e10, 5e-5, 1)
        >>> round(call_seconds(s, "naive", 1024, 64), 4), round(call_seconds(s, "flash2", 1024, 64, block_q=128,
        ...                                                                   block_k=128), 4)
        (0.0268, 0.03)
    """
    flops = impl_flops(impl, n, d, batch=batch, heads=heads, block_q=block_q, block_k=block_k, causal=causal,
                       window=window, training=training)
    seconds = flops / speed.flops_per_s
    if impl in TILED_IMPLS:
        from flashviz.core.tiling import tile_schedule

        computed = sum(1 for _ in tile_schedule(n, n, block_q, block_k, causal=causal, window=window).computed())
        seconds += computed * speed.tile_s * (BACKWARD_TILE_FACTOR if training else 1.0)
    return seconds


def sweep_seconds(speed: Speed, ns: Iterable[int], impls: Iterable[str], *, d: int, repeats: int, warmup: int = 1,
                  batch: int = 1, heads: int = 1, block_q: int = 64, block_k: int = 64, causal: bool = False,
                  window: Window = None, training: bool = False) -> float:
    """The estimated seconds of a sweep: every implementation at every N, calls_per_row calls each.

    Example:
        >>> s = Speed(1e10, 5e-5, 1)
        >>> round(sweep_seconds(s, [256, 512], ["naive", "flash2"], d=64, repeats=3), 3)
        0.125
    """
    calls = calls_per_row(repeats, warmup)
    return calls * sum(call_seconds(speed, impl, n, d, batch=batch, heads=heads, block_q=block_q, block_k=block_k,
                                    causal=causal, window=window, training=training)
                       for n in ns for impl in impls)


def estimate_sentence(seconds: float, speed: Speed, budget_s: float | None = None) -> str:
    """What the page says before Run.

    Example:
        >>> estimate_sentence(42.0, Speed(4.8e10, 4.1e-5, 1), 120.0)
        "About 42 s here, from this machine's speed measured just now in the timing worker (a matmul ran at 48 \
GFLOP/s and the tile loop took 41 µs a tile, at 1 thread)."
        >>> estimate_sentence(300.0, Speed(4.8e10, 4.1e-5, 1), 120.0).split(". ")[0]
        'About 300 s here, more than the run\\'s budget of 120 s: the rows it does not reach will say "not run"'
    """
    lead = "Under a second here" if seconds < 1 else f"About {seconds:.0f} s here"
    if budget_s is not None and seconds > budget_s:
        return (f"{lead}, more than the run's budget of {budget_s:.0f} s: the rows it does not reach will say "
                f"\"not run\". Measured just now in the timing worker: {speed.sentence()}.")
    return f"{lead}, from this machine's speed measured just now in the timing worker ({speed.sentence()})."
