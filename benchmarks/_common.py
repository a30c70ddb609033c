"""Shared helpers for the benchmark scripts: interleaved timing, a plain-text table, and the figures a run reports.

Machines are noisy, so implementations are compared as ratios measured side by side in one run: every repeat
times each candidate once, in turn (interleaved), and each candidate's figure is the median of its repeats. The
timing itself is flashviz.measure.timing.time_calls, the one timing implementation of the project.

Every script takes `--json PATH`: it then also writes the headline figures of its run (name, value, unit, what it
is) to PATH, which benchmarks/run_all.py collects over several runs into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from flashviz.measure.timing import time_calls


def interleaved_medians(candidates: dict[str, Callable[[], object]], *, repeats: int = 7, warmup: int = 1,
                        sync: Callable[[], None] = lambda: None) -> dict[str, float]:
    """Median seconds of each candidate, timed round-robin (time_calls) so that drift in the machine's load hits
    all alike. `sync` runs inside each timed call (CUDA: the kernels' time, not their launch)."""
    timed = {name: (lambda fn=fn: (fn(), sync())) for name, fn in candidates.items()}
    return {name: t.median for name, t in time_calls(timed, warmup=warmup, repeats=repeats).items()}


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


@dataclass(frozen=True)
class Figure:
    """One headline figure of a benchmark run."""

    key: str  # stable identifier, the same in every run (run_all.py groups the runs by it)
    value: float  # the figure, in `unit`
    unit: str  # "x" for a ratio, "s", "ms", "MiB", "GB/s", ...
    label: str  # what it is, in words, as docs/benchmarks.md prints it


class Figures:
    """The headline figures of one run, in the order they were reported; written as JSON with --json."""

    def __init__(self) -> None:
        self.rows: list[Figure] = []

    def add(self, key: str, value: float, unit: str, label: str) -> None:
        self.rows.append(Figure(key, float(value), unit, label))

    def write(self, path: str | None) -> None:
        """Write the figures to `path` as a JSON list (nothing when path is None)."""
        if path:
            Path(path).write_text(json.dumps([asdict(f) for f in self.rows], indent=1))


def add_json_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="also write the run's headline figures to PATH as JSON (benchmarks/run_all.py reads it)")
