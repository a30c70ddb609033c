"""The Training view's settings: it has none of its own; it times the Benchmark view's lengths, implementations, tile
size and repeats, forward and backward."""

from __future__ import annotations

from flashviz.kit.settings import view_settings
from flashviz.views.bench.settings import BenchSettings


@view_settings("Training", reads=("d", "causal", "window", "dtype", "batch", "heads", "device", "threads"),
               borrows=((BenchSettings, ("ns", "impls", "bench_block", "reps", "sure")),))
class TrainSettings:
    """The Training view's settings: the shared ones it reads and the Benchmark's it borrows."""
