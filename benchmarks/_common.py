"""Shared helpers for the benchmark scripts: interleaved timing and a plain-text table.

Machines are noisy, so implementations are compared as ratios measured side by side in one run: every repeat
times each candidate once, in turn (interleaved), and each candidate's figure is the median of its repeats.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def interleaved_medians(candidates: dict[str, Callable[[], object]], *, repeats: int = 7, warmup: int = 1,
                        sync: Callable[[], None] = lambda: None) -> dict[str, float]:
    """Median seconds of each candidate, timed round-robin so that drift in the machine's load hits all alike."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    sync()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            t0 = time.perf_counter()
            fn()
            sync()
            samples[name].append(time.perf_counter() - t0)
    return {name: statistics.median(s) for name, s in samples.items()}


def device_sync(device: torch.device) -> Callable[[], None]:
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


def print_table(rows: list[dict], columns: list[str]) -> None:
    """Print dict rows as an aligned plain-text table."""
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))


def mib(n_bytes: float) -> str:
    return f"{n_bytes / 2**20:.1f}"  # bytes -> MiB
