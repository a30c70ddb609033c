"""Regenerate docs/benchmarks.md: every benchmark run several times, each headline figure as its median and range.

Each benchmark script prints its own tables and, with `--json PATH`, writes its headline figures (benchmarks/_common.py
`Figures`). This script runs every script `--runs` times in turn (one run of each, then the next round, so a busy
spell of the machine spreads over all of them), groups the figures by name and writes, for each, the median and the
range over the runs, with the command that prints it, the date, the machine (cores, CPU, torch) and its load average.
No other file quotes a benchmark figure: docs link here, and this page is only ever written by this command.

Usage:
    python benchmarks/run_all.py                       # every benchmark, 3 runs each (about 40 min on 2 cores)
    python benchmarks/run_all.py --only forward decode --runs 5
    python benchmarks/run_all.py --only ring --update  # rerun one benchmark: its section replaced in place, the others
                                                       # kept as they were, each refreshed section dated
    python benchmarks/run_all.py --list                # the benchmarks and their commands
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "benchmarks.md"
RUNS_MIN = 3  # runs of each benchmark a figure on the page is the median of
RUN_TIMEOUT_S = 1800  # one run of one script; a run that takes longer is reported as failed


@dataclass(frozen=True)
class Bench:
    """One benchmark script and the arguments the page runs it with."""

    name: str  # short name for --only
    script: str  # file under benchmarks/
    args: tuple[str, ...]  # its arguments (the page prints the whole command)
    title: str  # the section heading
    about: str  # one sentence: what it compares


BENCHES: tuple[Bench, ...] = (
    Bench("forward", "bench_forward.py", ("--repeats", "5"), "Forward: tiled kernels against SDPA and naive",
          "The tiled forward (best tile size of a scan, within a 256 x 256 on-chip budget) against PyTorch's SDPA "
          "and naive attention, and causal against non-causal, interleaved in one process."),
    Bench("backward", "bench_backward.py", ("--ns", "1024", "2048", "--repeats", "5"),
          "Training step: forward + backward", "flash_attention's tiled backward by recomputation against naive "
          "autograd and SDPA autograd: time and peak memory."),
    Bench("numerics", "bench_numerics.py", ("--repeats", "7"), "The forward's numerics options",
          "The default flash_attention_forward call against the same call with rescale_threshold=8.0 "
          "(FlashAttention-4's conditional rescale) and with p_dtype=torch.bfloat16, for both loop orders, dense and "
          "causal, as paired per-repeat ratios."),
    Bench("table", "bench_table.py", ("--n", "512", "1024", "2048", "4096", "--heads", "8", "--repeats", "3"),
          "The summary table", "run_sweep over N: time of every implementation relative to naive, exact peak "
          "memory, and naive's measured peak against its formula."),
    Bench("masks", "bench_mask_kernels.py", ("--repeats", "3"), "Masked kernels: against FlexAttention and SDPA",
          "The tiled kernel with a document AND causal mask_mod, its tile schedule built once as FlexAttention builds "
          "its BlockMask once, against torch.compile(flex_attention) and against SDPA with the dense boolean mask."),
    Bench("ring", "bench_ring.py", ("--repeats", "3"), "Ring attention: W ranks in processes on gloo",
          "flashviz.ring's forward + backward at W = 1, 2, 4 for the three layouts, causal: time, the busiest "
          "rank's tiles over the mean, the bytes a rank sends against the model, and the error against float64 "
          "with fp32 and bf16 partials."),
)
BY_NAME = {b.name: b for b in BENCHES}


@dataclass(frozen=True)
class Row:
    """One figure over all runs."""

    key: str  # the figure's name in the script's --json output
    label: str  # what it is (from the last run that reported it)
    unit: str  # its unit
    values: tuple[float, ...]  # one value per run that reported it


def command(b: Bench) -> str:
    """The command line the page prints for a benchmark (run from the repository root)."""
    return " ".join(["python", f"benchmarks/{b.script}", *b.args])


def run_once(b: Bench) -> tuple[list[dict], str | None]:
    """Run one benchmark once; returns its figures and None, or [] and why it failed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "figures.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")])}
        try:
            proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / b.script), *b.args, "--json", str(out)],
                                  cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return [], f"did not finish within {RUN_TIMEOUT_S} s"
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return [], f"exit code {proc.returncode}: {' / '.join(tail)}"
        return json.loads(out.read_text()), None


def collect(runs: Iterable[list[dict]]) -> list[Row]:
    """Group the figures of several runs by key, in the order they were first reported.

    Example:
        >>> rows = collect([[{"key": "a", "value": 1.0, "unit": "x", "label": "A"}],
        ...                 [{"key": "a", "value": 3.0, "unit": "x", "label": "A"}]])
        >>> rows[0].values, statistics.median(rows[0].values)
        ((1.0, 3.0), 2.0)
    """
    values: dict[str, list[float]] = {}
    meta: dict[str, tuple[str, str]] = {}
    for figures in runs:
        for f in figures:
            values.setdefault(f["key"], []).append(float(f["value"]))
            meta[f["key"]] = (f["label"], f["unit"])
    return [Row(key, *meta[key], tuple(vals)) for key, vals in values.items()]


def fmt(value: float, unit: str) -> str:
    """A figure with its unit: ratios as 1.23x, percentages as 12.3 %, the rest with 3 significant digits.

    Example:
        >>> fmt(1.2345, "x"), fmt(12.34, "%"), fmt(1031.9, "MiB")
        ('1.23x', '12.3 %', '1032 MiB')
    """
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "%":
        return f"{value:.1f} %"
    return (f"{value:.4g} {unit}" if abs(value) >= 1000 else f"{value:.3g} {unit}").rstrip()  # a bare number: no unit


def section(b: Bench, rows: Sequence[Row], failures: Sequence[str], runs: int) -> str:
    """The page's section for one benchmark."""
    lines = [f"## {b.title}", "", b.about, "", f"`{command(b)}` ({runs} runs)", ""]
    if rows:
        lines += ["| figure | median | range over the runs | runs |", "|---|---|---|---|"]
        for r in rows:
            lo, hi = min(r.values), max(r.values)
            label = r.label.replace("|", "\\|")  # a label's own bars (|error|) would split the table's cells
            lines.append(f"| {label} | **{fmt(statistics.median(r.values), r.unit)}** | "
                         f"{fmt(lo, r.unit)} to {fmt(hi, r.unit)} | {len(r.values)} |")
    for why in failures:
        lines.append(f"\nA run failed: {why}")
    return "\n".join(lines) + "\n"


def machine() -> str:
    """Cores, CPU model, Python and torch of this machine."""
    import torch  # only to print its version and thread count

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError, StopIteration):  # not Linux, or no model name: keep platform's word
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    return (f"{cores} CPU cores ({model}, {platform.machine()}), Python {platform.python_version()}, torch "
            f"{torch.__version__}, {torch.get_num_threads()} intra-op threads by default")


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def page(benches: Sequence[Bench], results: dict[str, tuple[list[Row], list[str]]], runs: int, started: str,
         load_start: str, load_end: str) -> str:
    head = [
        "# Benchmarks", "",
        f"Written by `python benchmarks/run_all.py` on {started}; do not edit by hand, run the command again.", "",
        f"Machine: {machine()}. Load average (1 / 5 / 15 min): {load_start} at the start, {load_end} at the end.", "",
        f"Each figure is the median of {runs} runs of its command, with the range over those runs. A ratio (x) "
        "compares two candidates measured side by side in one process, interleaved call by call, so machine noise "
        "hits both alike: ratios carry over to another machine far better than times do. Times and ratios depend "
        "on the machine; peak memory (exact allocator events) does not.", "",
    ]
    body = [section(b, *results[b.name], runs) for b in benches]
    return "\n".join(head) + "\n" + "\n".join(body)


def updated(old: str, benches: Sequence[Bench], results: dict[str, tuple[list[Row], list[str]]], runs: int,
            started: str, load_start: str, load_end: str) -> str:
    """The page `old` with the sections of `benches` replaced (or added, in BENCHES' order), each saying when, where
    and under what load it was measured, since the page's header speaks for the other sections only."""
    head, *parts = old.split("\n## ")
    sections = {part.split("\n", 1)[0]: "## " + part for part in parts}  # title -> section text
    for b in benches:
        note = (f"Measured by `python benchmarks/run_all.py --only {b.name} --update` on {started}, apart from the "
                f"rest of this page: {machine()}; load average {load_start} at the start, {load_end} at the end.")
        text = section(b, *results[b.name], runs)
        title_line, rest = text.split("\n", 1)
        sections[b.title] = f"{title_line}\n\n{note}\n{rest}"
    known = [b.title for b in BENCHES]
    order = [t for t in known if t in sections] + [t for t in sections if t not in known]
    return head.rstrip("\n") + "\n\n" + "\n".join(sections[t].rstrip("\n") + "\n" for t in order)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=RUNS_MIN, help=f"runs of each benchmark (at least {RUNS_MIN})")
    p.add_argument("--only", nargs="+", choices=list(BY_NAME), help="run only these benchmarks")
    p.add_argument("--out", type=Path, default=OUT, help="the page to write (default docs/benchmarks.md)")
    p.add_argument("--list", action="store_true", help="print the benchmarks and their commands, run nothing")
    p.add_argument("--update", action="store_true",
                   help="with --only: replace (or add) just those sections of the existing page, each with the date, "
                        "machine and load of its own run; every other section stays as it was")
    args = p.parse_args(argv)
    if args.update and not args.only:
        p.error("--update refreshes the sections --only names: name them, e.g. --only ring --update")
    if args.runs < RUNS_MIN:
        p.error(f"--runs must be at least {RUNS_MIN}: the page gives a median and a range, got {args.runs}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    benches = [BY_NAME[n] for n in args.only] if args.only else list(BENCHES)
    if args.list:
        for b in benches:
            print(f"{b.name:10} {command(b)}")
        return 0
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_start = load()
    figures: dict[str, list[list[dict]]] = {b.name: [] for b in benches}
    failures: dict[str, list[str]] = {b.name: [] for b in benches}
    for r in range(args.runs):  # round by round: one run of each benchmark, then the next round
        for b in benches:
            print(f"[run {r + 1}/{args.runs}] {command(b)}", file=sys.stderr, flush=True)
            figs, why = run_once(b)
            if why:
                failures[b.name].append(why)
            else:
                figures[b.name].append(figs)
    results = {b.name: (collect(figures[b.name]), failures[b.name]) for b in benches}
    if args.update and args.out.exists():
        args.out.write_text(updated(args.out.read_text(), benches, results, args.runs, started, load_start, load()))
    else:
        args.out.write_text(page(benches, results, args.runs, started, load_start, load()))
    print(f"wrote {args.out}", file=sys.stderr)
    return 1 if any(failures.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
