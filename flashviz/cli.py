"""Command line: `python -m flashviz bench ...` measures and reports, `python -m flashviz check` verifies,
`python -m flashviz ring ...` runs ring attention across processes.

    python -m flashviz bench --n 256 512 1024 2048 4096 --d 64 --block-size 128 --out results.csv --html report.html
    python -m flashviz check
    python -m flashviz ring --seq-len 1024 --causal --layout zigzag --world 4
    torchrun --nproc-per-node 4 -m flashviz ring --seq-len 1024 --causal --layout zigzag

`bench` runs run_sweep with a progress bar on stderr, prints the measurements and the summary table (speedup and
memory saving of flash over naive at each N), writes the tidy CSV with --out and, with --html, a standalone report
whose figures carry plotly.js inline (it opens offline). `check` runs a correctness matrix of the tiled kernels against
PyTorch's SDPA in float64 and exits 1 if any error exceeds the bar. `ring` shards one sequence over W ranks
(flashviz.ring), runs the ring forward and backward and prints the error against one process in float64, the time of
every ring step and each rank's work; under torchrun (RANK and WORLD_SIZE in the environment) the ranks are torchrun's
and rank 0 prints, otherwise --world processes are started here. torchrun reads any option that is a prefix of one of
its own as its own (--n would be --nnodes), hence --seq-len, --head-dim. Bad arguments print a usage message and
exit 2. A ring that cannot run says why in one line on stderr and exits 2: --backend nccl without CUDA, a --world
other than torchrun's WORLD_SIZE, the sizes the dashboard's Ring view refuses (flashviz.views.ring.data.setup_problem),
and a float64 reference that would not fit in memory. A run estimated to take RING_LONG_S or more says its estimate
on stderr first: the busiest rank's tiles (ring_schedule) at a time per tile measured by a short probe of the same
kernel, and the reference's time measured at a small N and scaled by N^2.

Resource guards (flashviz.limits, shared with the dashboard): at most LIST_MAX sequence lengths, REPEATS_MAX repeats
and warm-up calls, BATCH_MAX x HEADS_MAX, TILES_MAX tiles per tiled call and BENCH_FLOP_MAX FLOPs per run, each
refused up front with a usage message; rows whose inputs or naive S and P exceed the memory budget are not run, and
so are the rows still to come once --time-budget seconds have passed (the CSV and report keep what was measured).
The `flashviz` console script is this module's `main`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TextIO

import torch
import torch.nn.functional as F

from flashviz.app.state import Settings
from flashviz.core.backward import flash_attention
from flashviz.core.flash import flash_attention_forward
from flashviz.core.tiling import visible_mask
from flashviz.figures import plots, report
from flashviz.limits import (
    AUTO_BUDGET_S,
    BATCH_MAX,
    BENCH_FLOP_MAX,
    BENCH_TIME_BUDGET_S,
    HEADS_MAX,
    LIST_MAX,
    REPEATS_MAX,
    calls_per_row,
    tile_problem,
)
from flashviz.measure.context import with_context
from flashviz.measure.guards import default_memory_budget, naive_bytes_needed, request_flops
from flashviz.measure.impls import RunConfig
from flashviz.measure.stats import TARGET_REL_CI, min_repeats
from flashviz.measure.sweep import MAX_D, MAX_N, cut_short
from flashviz.measure.timing import AUTO
from flashviz.measure.verdict import sentence
from flashviz.measure.worker import TimingWorker
from flashviz.model.iomodel import hbm_vs_memory
from flashviz.ring import (
    BACKENDS,
    BACKWARD,
    FORWARD_FLOPS_PER_ELEMENT,
    LAYOUTS,
    PHASES,
    check_layout,
    imbalance,
    ring_attention,
    ring_schedule,
    run_ring,
    shard,
    shard_bytes,
    tiles_per_rank,
    unshard,
)
from flashviz.ring.runner import THREADS_PER_RANK, float64_reference
from flashviz.units import format_bytes, format_flops
from flashviz.views.bench.sentences import speed_verdicts
from flashviz.views.ring.data import MAP_TILES_MAX, RingSetup, setup_problem
from flashviz.vocab import DTYPE_BYTES, DTYPES, FLASH, FORWARD, IMPLS, LOOP_ORDERS, NOT_RUN, OK, TILED_IMPLS, TRAINING

GRAD = "grad"  # the check's kernel id for the backward (dQ, dK, dV), next to the two loop orders

DASHBOARD = Settings()  # the dashboard's defaults: `bench` defaults to the Benchmark view's settings
DEFAULT_NS = DASHBOARD.ns
CHECK_N_MAX = 1 << 14  # longest N `check` accepts: (2^14 / 64)^2 = 65,536 default tiles per call, limits.TILES_MAX
CHECK_NS = (1, 97, 128, 257)  # a single row, ragged (97, 257) and exact multiples of the 64-wide tiles
CHECK_DS = (64, 128)
CHECK_TOL = 1e-5  # max |O - O_sdpa_fp64| an fp32 kernel must stay under
CHECK_BLOCK = 64
CHECK_HEADS = 2
CHECK_WINDOWS = ((32, 0), (16, 16))  # sliding windows checked at the largest N (with and without causal)
RING_WORLD_MAX = 16  # processes `ring` starts on one machine
RING_WORLD_DEFAULT = 2  # ranks `ring` starts when --world is not given (and not under torchrun)
RING_LONG_S = 10.0  # seconds: a ring run estimated to take longer says its estimate before it starts
RING_PROBE_TILES = 4  # the probe's tiles per side: calls of 4 x 4 tiles, forward (and backward)
RING_PROBE_CALLS = 3  # timed calls of each probe, after one untimed: their median counts
RING_PROBE_FLOPS = 2e9  # FLOPs one probe call may cost at most (~0.1 s at 20 GFLOP/s): fewer heads probe beyond
RING_PROBE_REF_N = 512  # positions of the float64 reference's probe (its time grows as N^2 beyond)
M_SWEEP = tuple(2 ** k for k in range(10, 19))  # on-chip memory sizes (elements) for the Theorem 2 figure
EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class ProgressBar:
    """progress(done, total, label) drawn as a one-line text bar on a stream (stderr): no extra dependencies."""

    def __init__(self, stream: TextIO | None = None, width: int = 30):
        self.stream = stream if stream is not None else sys.stderr
        self.width = width  # characters of the bar

    def __call__(self, done: int, total: int, label: str, partial: object = None) -> None:
        if label == "waiting":
            return
        filled = self.width * done // max(total, 1)
        line = f"\r[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} {label}"
        self.stream.write(f"{line:<80}")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


# ----------------------------------------------------------------------------------------------------------------------
# argument types: each raises argparse.ArgumentTypeError, which argparse turns into usage + exit 2


def _int_in(low: int, high: int | None, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f">= {low}" if high is None else f"between {low} and {high}"
            raise argparse.ArgumentTypeError(f"{what} must be {bound}, got {value}")
        return value
    return parse


def _positive_float(what: str, unbounded: tuple[str, ...] = ()):
    """A finite number > 0; the words in `unbounded` (e.g. "none") mean no limit and parse to None."""
    def parse(text: str) -> float | None:
        if text.strip().lower() in unbounded:
            return None
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a number, got {text!r}") from None
        if not math.isfinite(value) or value <= 0:
            words = f" (or {' / '.join(repr(u) for u in unbounded)} for no limit)" if unbounded else ""
            raise argparse.ArgumentTypeError(f"{what} must be a finite number > 0{words}, got {text!r}")
        return value
    return parse


def _repeats(text: str) -> int | str:
    """--repeats: an integer in 1..REPEATS_MAX, or "auto" (time until each median is known)."""
    if text.strip().lower() == AUTO:
        return AUTO
    return _int_in(1, REPEATS_MAX, f"repeats (or '{AUTO}')")(text)


def _window_side(text: str) -> int | None:
    if text.lower() in ("none", "inf", "-"):
        return None
    return _int_in(0, None, "a window side (or 'none' for unbounded)")(text)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flashviz", description="Measure and verify FlashAttention.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{bench,check,ring}")

    bench = sub.add_parser("bench", help="time and measure memory of attention implementations over N",
                           description="Sweep N; print the summary table; write a CSV and an HTML report.")
    bench.add_argument("--n", nargs="+", type=_int_in(1, MAX_N, "N"), default=list(DEFAULT_NS), metavar="N",
                       help=f"sequence lengths, at most {LIST_MAX} (1..{MAX_N}; default: "
                            f"{' '.join(map(str, DEFAULT_NS))})")
    bench.add_argument("--d", type=_int_in(1, MAX_D, "d"), default=64, help="head dimension (default 64)")
    bench.add_argument("--block-size", type=_int_in(1, None, "block size"), default=DASHBOARD.bench_block,
                       help=f"tile size Br = Bc of the tiled kernels (default {DASHBOARD.bench_block}, as the "
                            "dashboard)")
    bench.add_argument("--block-q", type=_int_in(1, None, "block_q"), default=None, help="Br, overrides --block-size")
    bench.add_argument("--block-k", type=_int_in(1, None, "block_k"), default=None, help="Bc, overrides --block-size")
    bench.add_argument("--causal", action="store_true", help="top-left causal mask")
    bench.add_argument("--window", nargs=2, type=_window_side, metavar=("LEFT", "RIGHT"), default=None,
                       help="sliding window: query i sees keys i-LEFT..i+RIGHT ('none' = unbounded side)")
    bench.add_argument("--impls", nargs="+", choices=IMPLS, default=list(DASHBOARD.impls),
                       help=f"implementations to measure (default: {' '.join(DASHBOARD.impls)}; flash and flash2 are "
                            "the FA1 and FA2 loop orders)")
    bench.add_argument("--repeats", type=_repeats, default=AUTO,
                       help=f"timed calls per row (1..{REPEATS_MAX}), or '{AUTO}' (default, as the dashboard's Repeat "
                            f"until sure): until each median's 95%% interval is within ±{TARGET_REL_CI * 100:g}%% or "
                            f"{AUTO_BUDGET_S:g} s pass, at least {min_repeats()} calls")
    bench.add_argument("--warmup", type=_int_in(0, REPEATS_MAX, "warmup"), default=1,
                       help=f"untimed calls per row (0..{REPEATS_MAX})")
    bench.add_argument("--batch", type=_int_in(1, BATCH_MAX, "batch"), default=1, help=f"batch size B (1..{BATCH_MAX})")
    bench.add_argument("--heads", type=_int_in(1, HEADS_MAX, "heads"), default=DASHBOARD.heads,
                       help=f"heads H (1..{HEADS_MAX}; default {DASHBOARD.heads}, as the dashboard)")
    bench.add_argument("--threads", type=_int_in(1, None, "threads"), default=None,
                       help="torch intra-op threads (default: torch's current count)")
    bench.add_argument("--dtype", choices=DTYPES, default="float32")
    bench.add_argument("--device", default="cpu", help="cpu or cuda")
    bench.add_argument("--training", action="store_true", help="time forward + backward instead of forward")
    bench.add_argument("--memory-budget-mib", type=_int_in(1, None, "memory budget"), default=None,
                       help="memory one row may allocate, in MiB: its inputs, and naive's S and P on top "
                            "(default: half the available RAM, container limit included)")
    bench.add_argument("--time-budget", type=_positive_float("--time-budget", ("none", "inf")),
                       default=BENCH_TIME_BUDGET_S, metavar="S",
                       help=f"wall-clock seconds for the whole run; rows still to come when it is used up are "
                            f"not run (default {BENCH_TIME_BUDGET_S:g}; 'none' for no limit)")
    bench.add_argument("--out", type=Path, default=None,
                       help="CSV file for the tidy results (default: none; the tables are printed either way)")
    bench.add_argument("--html", type=Path, default=None, help="also write a standalone HTML report here")
    bench.set_defaults(subparser=bench)

    check = sub.add_parser("check", help="correctness matrix of the tiled kernels against SDPA",
                           description="Compare flash_attention_forward (both loop orders) with SDPA in float64.")
    check.add_argument("--n", nargs="+", type=_int_in(1, CHECK_N_MAX, "N"), default=list(CHECK_NS), metavar="N",
                       help=f"sequence lengths, at most {LIST_MAX} (1..{CHECK_N_MAX})")
    check.add_argument("--d", nargs="+", type=_int_in(1, MAX_D, "d"), default=list(CHECK_DS), metavar="D",
                       help=f"head dimensions, at most {LIST_MAX} (1..{MAX_D})")
    check.add_argument("--block-size", type=_int_in(1, None, "block size"), default=CHECK_BLOCK)
    check.add_argument("--tol", type=_positive_float("--tol"), default=CHECK_TOL,
                       help=f"error bar, a finite number > 0 (default {CHECK_TOL:g})")
    check.set_defaults(subparser=check)

    ring = sub.add_parser("ring", help="ring attention (context parallelism) across processes, rank by rank",
                          description="Shard one sequence over W ranks, run ring attention forward and backward, and "
                                      "print the error against one process (float64), the time of every ring step "
                                      "and each rank's work. Under torchrun the ranks are torchrun's; otherwise "
                                      "--world processes are started on this machine.")
    ring.add_argument("--seq-len", type=_int_in(1, MAX_N, "--seq-len"), default=256,
                      help="N, the whole sequence (divisible by W, by 2W for zigzag; default 256)")
    ring.add_argument("--head-dim", type=_int_in(1, MAX_D, "--head-dim"), default=32, help="d (default 32)")
    ring.add_argument("--heads", type=_int_in(1, HEADS_MAX, "--heads"), default=2, help="query heads H (default 2)")
    ring.add_argument("--kv-heads", type=_int_in(1, HEADS_MAX, "--kv-heads"), default=None,
                      help="K/V heads H_kv dividing --heads (grouped-query attention; default: --heads)")
    ring.add_argument("--batch", type=_int_in(1, BATCH_MAX, "--batch"), default=1, help="batch B (default 1)")
    ring.add_argument("--causal", action="store_true", help="top-left causal over the global positions")
    ring.add_argument("--layout", choices=LAYOUTS, default=LAYOUTS[0],
                      help="how the positions are dealt to the ranks (default contiguous)")
    ring.add_argument("--block-size", type=_int_in(1, None, "--block-size"), default=64,
                      help="tile size Br = Bc of the kernel on each rank (default 64)")
    ring.add_argument("--dtype", choices=("float32", "float64", "bfloat16", "float16"), default="float32")
    ring.add_argument("--world", type=_int_in(1, RING_WORLD_MAX, "--world"), default=None,
                      help=f"ranks started here when not under torchrun (1..{RING_WORLD_MAX}; default "
                           f"{RING_WORLD_DEFAULT}); under torchrun, if given, it must be torchrun's world size")
    ring.add_argument("--backend", choices=BACKENDS, default="gloo",
                      help="gloo (CPU) or nccl (rank r on cuda:r)")
    ring.add_argument("--forward-only", action="store_true", help="skip the backward ring")
    ring.add_argument("--timeout", type=_positive_float("--timeout"), default=120.0,
                      help="seconds the whole run may take (default 120)")
    ring.add_argument("--seed", type=_int_in(0, None, "--seed"), default=0, help="seed of the random inputs")
    ring.set_defaults(subparser=ring)
    return parser


# ----------------------------------------------------------------------------------------------------------------------
# bench


def _measurements_text(df) -> str:
    """The tidy rows, in readable units, as a text table."""
    view = df.assign(**{
        "time (ms)": df["time_s"] * 1e3, "95% CI low": df["time_lo_s"] * 1e3, "high (ms)": df["time_hi_s"] * 1e3,
        "calls": df["repeats"], "peak (MiB)": df["peak_bytes"] / 2**20, "GFLOP/s": df["gflops"],
        "HBM model (MiB)": df["hbm_bytes"] / 2**20, "max err": df["max_abs_err"]})
    cols = ["impl", "N", "time (ms)", "95% CI low", "high (ms)", "calls", "peak (MiB)", "GFLOP/s", "HBM model (MiB)",
            "max err", "status"]
    return view[cols].to_string(index=False, na_rep="-", float_format=lambda x: f"{x:.4g}")


def _too_many(option: str, values: Sequence[int]) -> str | None:
    count = len(set(values))
    if count <= LIST_MAX:
        return None
    return (f"{option} lists {count} values; one run takes at most {LIST_MAX} (sweep size cap). "
            "Split the sweep into several runs.")


def _bench_problem(args: argparse.Namespace) -> str | None:
    """Why this bench request is too big to run (a sentence that says how to fix it), or None."""
    if problem := _too_many("--n", args.n):
        return problem
    block_q, block_k = args.block_q or args.block_size, args.block_k or args.block_size
    if any(i in TILED_IMPLS for i in args.impls) and (problem := tile_problem(args.n, block_q, block_k)):
        return problem.replace("Raise the block size", "Raise --block-size (or --block-q / --block-k)")
    flops = request_flops(set(args.n), d=args.d, batch=args.batch, heads=args.heads, n_impls=len(set(args.impls)),
                          calls=calls_per_row(min_repeats() if args.repeats == AUTO else args.repeats, args.warmup),
                          training=args.training)
    if flops > BENCH_FLOP_MAX:
        return (f"this run would compute about {flops:.2g} FLOPs (dense attention at every N, for every "
                f"implementation and call); the cap is {BENCH_FLOP_MAX:.0e} FLOPs, hours on a CPU. Lower the "
                "largest N, --d, --batch, --heads or --repeats, or measure fewer --impls.")
    return None


make_worker = TimingWorker  # the timing worker `bench` runs its sweep in (tests put an InlineWorker here)
SWEEP_JOB = "flashviz.measure.sweep:run_sweep"  # what `bench` runs there: the dashboard's sweeps run it too


def _bench(args: argparse.Namespace) -> int:
    if problem := _bench_problem(args):
        args.subparser.error(problem)  # usage + exit 2
    budget = None if args.memory_budget_mib is None else args.memory_budget_mib * 2**20
    sweep = dict(d=args.d, block_size=args.block_size, block_q=args.block_q, block_k=args.block_k,
                 causal=args.causal, window=None if args.window is None else tuple(args.window), impls=args.impls,
                 batch=args.batch, heads=args.heads, dtype=args.dtype, device=args.device, threads=args.threads,
                 repeats=args.repeats, warmup=args.warmup, mode=TRAINING if args.training else FORWARD,
                 memory_budget_bytes=budget, time_budget_s=args.time_budget)
    worker = make_worker()
    try:  # in the timing worker, as the dashboard's runs: a process of its own, the threads the free cores allow
        df, run = worker.run_reported(SWEEP_JOB, (args.n,), sweep, progress=ProgressBar())
    except (ValueError, TypeError) as e:
        args.subparser.error(str(e))  # usage + exit 2
    finally:
        worker.close()
    flash_impl = next((i for i in TILED_IMPLS if i in args.impls and (df["impl"].eq(i) & df["status"].eq(OK)).any()),
                      FLASH)
    table = report.summary_table(df, flash_impl=flash_impl)
    mode = "forward + backward" if args.training else FORWARD
    print(f"flashviz bench: {mode}, d={args.d}, B={args.batch}, H={args.heads}, {args.dtype}, "
          f"device={df['device'].iloc[0]}, threads={df['threads'].iloc[0]}, causal={args.causal}, "
          f"window={args.window}, repeats={args.repeats}\n")
    print(run.sentence())
    for said in (run.busy_sentence(), run.capped_sentence()):
        if said:
            print(said)
    print()
    print(_measurements_text(df))
    print(f"\nSummary: {flash_impl} vs naive (speedup = naive time / {flash_impl} time; "
          f"memory saving = naive peak / {flash_impl} peak)\n")
    print(table.to_string(index=False, na_rep=NOT_RUN, float_format=lambda x: f"{x:.4g}"))
    if verdicts := speed_verdicts(df):  # a winner only where the medians' 95% intervals separate
        print("\nNaive against the tiled kernels, N by N:")
        for n, _, v in verdicts:
            print(f"  N = {n}: {sentence(v)}")
    if cut_short(df):
        print(f"\nnote: the time budget of {args.time_budget:g} s ran out; {int((df['status'] != OK).sum())} "
              "row(s) were not measured. Raise --time-budget, or measure fewer or smaller configurations.",
              file=sys.stderr)

    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        # torch version, CPU model, ..., then when, which flashviz, the load, the thread policy, the calls set aside
        with_context(df, {**(df.attrs.get("context") or {}), **run.columns()}).to_csv(args.out, index=False)
        print(f"\nwrote {args.out}")
    if args.html is not None:
        n_max = max(args.n)
        theorem2 = hbm_vs_memory(M_SWEEP, n_max, args.d, causal=args.causal,
                                 window=None if args.window is None else tuple(args.window))
        figures = [report.summary_table_figure(table, title=f"Summary: {flash_impl} vs naive"),
                   plots.time_figure(df), plots.memory_figure(df), plots.gflops_figure(df), plots.hbm_figure(df),
                   plots.hbm_vs_memory_figure(theorem2, n=n_max, d=args.d)]
        intro = (f"{mode} pass, d={args.d}, B={args.batch}, H={args.heads}, {args.dtype}, "
                 f"device {df['device'].iloc[0]}, {df['threads'].iloc[0]} threads, causal={args.causal}, "
                 f"window={args.window}, block {args.block_q or args.block_size} x {args.block_k or args.block_size}, "
                 f"median of {args.repeats} calls. Peak memory is exact (allocator events); HBM traffic is the IO "
                 "model of flashviz.model.iomodel.")
        args.html.parent.mkdir(parents=True, exist_ok=True)
        args.html.write_text(report.report_html(figures, title="flashviz benchmark report", intro=intro, table=df),
                             encoding="utf-8")
        print(f"wrote {args.html}")
    return EXIT_OK


# ----------------------------------------------------------------------------------------------------------------------
# check


def _check_cases(ds: Sequence[int], ns: Sequence[int]) -> list[tuple]:
    """(d, N, causal, window, kernel) for every combination; windows on the largest N."""
    kernels = (*LOOP_ORDERS, GRAD)
    cases = [(d, n, causal, None, kernel) for d in ds for n in ns for causal in (False, True) for kernel in kernels]
    for window in CHECK_WINDOWS:
        cases += [(ds[0], max(ns), causal, window, kernel) for causal in (False, True) for kernel in kernels]
    return cases


def _check_error(d: int, n: int, causal: bool, window, kernel: str, block: int, gen: torch.Generator) -> float:
    """max |x - x_sdpa_fp64| over O (forward kernels) or over dQ, dK, dV (kernel 'grad')."""
    q, k, v, dO = (torch.randn(1, CHECK_HEADS, n, d, generator=gen) for _ in range(4))  # (B, H, N, d) fp32
    idx = torch.arange(n)
    mask = visible_mask(idx, idx, causal=causal, window=window) if window is not None else None  # (N, N) bool
    q64, k64, v64 = (t.double().requires_grad_(kernel == GRAD) for t in (q, k, v))
    ref = F.scaled_dot_product_attention(q64, k64, v64, attn_mask=mask, is_causal=causal and mask is None)
    if kernel != GRAD:
        out = flash_attention_forward(q, k, v, block, causal=causal, window=window, loop_order=kernel)
        return float((out.double() - ref).abs().max())
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    grads = torch.autograd.grad(flash_attention(q, k, v, block_size=block, causal=causal, window=window),
                                (q, k, v), dO)
    refs = torch.autograd.grad(ref, (q64, k64, v64), dO.double())
    return max(float((g.double() - r).abs().max()) for g, r in zip(grads, refs, strict=True))


def _check(args: argparse.Namespace) -> int:
    if problem := _too_many("--n", args.n) or _too_many("--d", args.d):
        args.subparser.error(problem)  # usage + exit 2
    cases = _check_cases(args.d, args.n)
    print(f"flashviz check: tiled kernels in fp32 (B=1, H={CHECK_HEADS}, block {args.block_size}) against SDPA in "
          f"float64; bar {args.tol:g}. kernel 'grad' = flash_attention's dQ, dK, dV\n")
    print(f"{'d':>4} {'N':>6} {'causal':>6} {'window':>10} {'kernel':>9} {'max |err|':>10}  result")
    failures = 0
    gen = torch.Generator().manual_seed(0)
    for d, n, causal, window, kernel in cases:
        err = _check_error(d, n, causal, window, kernel, args.block_size, gen)
        ok = err <= args.tol
        failures += not ok
        shown = "-" if window is None else f"{window[0]},{window[1]}"
        print(f"{d:>4} {n:>6} {causal!s:>6} {shown:>10} {kernel:>9} {err:>10.2e}  {'PASS' if ok else 'FAIL'}")
    print(f"\n{len(cases) - failures}/{len(cases)} passed" + ("" if failures == 0 else f", {failures} FAILED"))
    return EXIT_OK if failures == 0 else EXIT_FAIL


# ----------------------------------------------------------------------------------------------------------------------
# ring


def _ring_inputs(args: argparse.Namespace, device: torch.device) -> tuple[torch.Tensor, ...]:
    """q, k, v, dO for the whole sequence, the same on every rank (seeded), in --dtype on `device`."""
    gen = torch.Generator().manual_seed(args.seed)
    h_kv = args.kv_heads or args.heads
    shapes = [(args.batch, args.heads), (args.batch, h_kv), (args.batch, h_kv), (args.batch, args.heads)]
    dtype = getattr(torch, args.dtype)
    return tuple(torch.randn(*bh, args.seq_len, args.head_dim, generator=gen).to(device=device, dtype=dtype)
                 for bh in shapes)


def _ring_report(args: argparse.Namespace, world: int, how: str, got: dict, events, ref: dict) -> str:
    """The error against one process, every step's time and bytes, each rank's work against the model."""
    h_kv = args.kv_heads or args.heads
    lines = [f"flashviz ring: N={args.seq_len}, d={args.head_dim}, B={args.batch}, H={args.heads} (H_kv={h_kv}), "
             f"{args.dtype}, {'causal' if args.causal else 'not causal'}, {args.layout}, block {args.block_size}, "
             f"W={world} ({how}, {args.backend})", ""]
    errors = ", ".join(f"{name} {float((got[name].double() - ref[name]).abs().max()):.2e}"
                       for name in ("out", "lse", "dq", "dk", "dv") if got.get(name) is not None)
    lines += [f"max |error| against one process in float64: {errors}", ""]
    lines.append(f"{'phase':>8} {'step':>4} {'rank':>4} {'K/V of':>6} {'computed':>8} {'skipped':>7} "
                 f"{'compute ms':>10} {'wait ms':>8} {'sent':>10}")
    phases = PHASES[:1] if args.forward_only else PHASES  # forward, then backward
    for e in sorted(events, key=lambda e: (phases.index(e.phase), e.step, e.rank)):
        lines.append(f"{e.phase:>8} {e.step:>4} {e.rank:>4} {e.kv_rank:>6} {e.tiles_computed:>8} "
                     f"{e.tiles_skipped:>7} {e.compute_s * 1e3:>10.2f} {e.comm_s * 1e3:>8.2f} "
                     f"{format_bytes(e.bytes_sent):>10}")
    model = ring_schedule(args.seq_len, world, args.layout, args.block_size, args.causal, batch=args.batch,
                          heads=args.heads, heads_kv=h_kv, head_dim=args.head_dim, dtype=args.dtype,
                          backward=not args.forward_only)
    for phase in phases:
        steps = [e for e in events if e.phase == phase]
        per_step = [max(e.compute_s + e.comm_s for e in steps if e.step == t) * 1e3 for t in range(world)]
        lines += ["", f"{phase}: time per step (slowest rank) " + ", ".join(f"{t:.2f} ms" for t in per_step)]
        work = tiles_per_rank(steps, world)
        for r in range(world):
            mine = [e for e in steps if e.rank == r]
            flops, sent = sum(e.flops for e in mine), sum(e.bytes_sent for e in mine)
            lines.append(f"  rank {r}: {work[r]} tiles computed, {sum(e.tiles_skipped for e in mine)} skipped, "
                         f"{format_flops(flops)}, sent {format_bytes(sent)}")
        lines.append(f"  busiest rank / mean: {imbalance(work):.3f} (model {model.imbalance(phase):.3f})")
    kv = shard_bytes(args.batch, h_kv, args.seq_len, world, args.head_dim, args.dtype)
    sent = sum(e.bytes_sent for e in events if e.phase == PHASES[0] and e.rank == 0)
    lines.append(f"\nforward bytes sent per rank: {format_bytes(sent)}; model (W - 1) x 2 B H_kv (N / W) d x "
                 f"{DTYPE_BYTES[args.dtype]} bytes = {format_bytes((world - 1) * kv)}")
    return "\n".join(lines)


def _ring_refused(message: str) -> int:
    """A ring request that cannot run: one line on stderr, exit code 2 (no usage block, no traceback)."""
    print(f"flashviz ring: error: {' '.join(message.split())}", file=sys.stderr)
    return EXIT_USAGE


def _ring_world_problem(args: argparse.Namespace) -> str | None:
    """Why the ranks asked for cannot be had: nccl without CUDA, or a --world other than torchrun's world size."""
    if args.backend == "nccl" and not torch.cuda.is_available():
        return ("--backend nccl needs CUDA (rank r runs on cuda:r) and this machine's torch sees no GPU; use "
                "--backend gloo (CPU) here.")
    if "WORLD_SIZE" in os.environ and args.world is not None and args.world != int(os.environ["WORLD_SIZE"]):
        return (f"--world {args.world} differs from torchrun's world size {os.environ['WORLD_SIZE']} (WORLD_SIZE); "
                "under torchrun the ranks are torchrun's: drop --world or pass --nproc-per-node "
                f"{args.world} to torchrun.")
    return None


def _ring_settings_problem(args: argparse.Namespace, world: int) -> str | None:
    """Why these settings cannot run, and the fix: the layout's divisibility and the Ring view's own size check
    (flashviz.views.ring.data.setup_problem: at most MAP_TILES_MAX tiles per side of the N x N scores)."""
    if args.kv_heads is not None and args.heads % args.kv_heads:
        return f"--kv-heads {args.kv_heads} must divide --heads {args.heads} (each K/V head serves H / H_kv heads)."
    try:
        check_layout(args.seq_len, world, args.layout)
    except ValueError as e:
        return str(e).replace("N = ", "--seq-len ", 1)
    if setup_problem(RingSetup(args.seq_len, world, args.layout, args.causal, args.block_size, args.dtype,
                               args.heads, args.head_dim)):  # the dashboard refuses it: so does this command
        per_side = math.ceil(args.seq_len / args.block_size)
        return (f"--seq-len {args.seq_len} / --block-size {args.block_size} = {per_side} tiles per side of the N x N "
                f"scores; the Ring view, and this command, allow at most {MAP_TILES_MAX} (the kernel's tile loop runs "
                f"in Python). Raise --block-size to at least {math.ceil(args.seq_len / MAP_TILES_MAX)} or lower "
                "--seq-len.")
    return _reference_problem(args)


def reference_bytes(args: argparse.Namespace) -> int:
    """Bytes of the N x N matrices of the float64 reference the run is checked against (standard attention over the
    whole sequence in one process, flashviz.ring.runner.float64_reference), counted as the sweep's memory guard
    counts naive attention's: S and P (+ dP and dS with the backward) and the causal mask's temporaries."""
    config = RunConfig(n=args.seq_len, d=args.head_dim, block_q=args.block_size, block_k=args.block_size,
                       causal=args.causal, window=None, batch=args.batch, heads=args.heads, dtype=torch.float64,
                       device=torch.device("cpu"), mode=FORWARD if args.forward_only else TRAINING)
    return naive_bytes_needed(config)


def _reference_problem(args: argparse.Namespace) -> str | None:
    """Why the float64 reference would not fit in memory (a MemoryError or the OOM killer otherwise), or None."""
    need, budget = reference_bytes(args), default_memory_budget()
    if need <= budget:
        return None
    return (f"the float64 reference this run is checked against (attention over the whole sequence in one process) "
            f"needs {format_bytes(need)} for its N x N matrices at --seq-len {args.seq_len}; this command allows half "
            f"the memory available here, {format_bytes(budget)}. Lower --seq-len (the matrices grow as N^2), "
            "--heads or --batch.")


@dataclass(frozen=True)
class RingEstimate:
    """How long a ring run should take: the busiest rank's tiles, phase by phase, at a measured time per tile, and the
    float64 reference the run is checked against, at its measured time scaled by N^2."""

    tiles: dict[str, int]  # phase -> tiles the busiest rank computes (ring_schedule's model)
    tile_s: dict[str, float]  # phase -> seconds per tile, measured by the probe on this machine
    reference_s: float  # seconds of the float64 reference over the whole sequence (one process)
    world: int  # W processes
    cores: int  # cores this process may use; W > cores processes share them
    probe: str  # what the probe ran, in words

    @property
    def seconds(self) -> float:
        """sum over phases of busiest tiles x seconds per tile, x W / cores when the ranks share fewer cores; plus the
        reference."""
        share = max(1.0, self.world / self.cores)
        return share * sum(self.tiles[phase] * self.tile_s[phase] for phase in self.tiles) + self.reference_s

    def sentence(self) -> str:
        work = ", ".join(f"{self.tiles[p]:,} {p} tiles at {self.tile_s[p] * 1e3:.3g} ms" for p in self.tiles)
        share = f", {self.world} processes sharing {self.cores} cores" if self.world > self.cores else ""
        return (f"estimate: about {self.seconds:.0f} s, plus the processes' start (busiest rank: {work}{share}; "
                f"the float64 reference {self.reference_s:.1f} s; measured here by {self.probe}).")


def _median_s(call, prepare) -> float:
    """Seconds of the median of RING_PROBE_CALLS calls of call(prepare()), after one untimed: the median, not the
    fastest, so that the machine's other work weighs in as it will on the run."""
    times = []
    for i in range(RING_PROBE_CALLS + 1):
        state = prepare()
        start = time.perf_counter()
        call(state)
        if i:
            times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def _probe(args: argparse.Namespace, device: torch.device) -> tuple[dict[str, float], float, str]:
    """Seconds per tile of the ranks' kernel, forward and backward, and of the float64 reference, on this machine.

    The kernel: calls of RING_PROBE_TILES^2 tiles at the run's tile size, d and dtype on one thread (as each rank),
    the median of RING_PROBE_CALLS; fewer heads (scaled up) where the run's would cost more than RING_PROBE_FLOPS.
    The reference: float64_reference at RING_PROBE_REF_N positions, scaled by (N / RING_PROBE_REF_N)^2.
    """
    side = RING_PROBE_TILES * args.block_size
    per_head = FORWARD_FLOPS_PER_ELEMENT * side * side * args.head_dim  # one head's forward FLOPs of the probe
    heads = args.batch * args.heads
    probe_heads = max(1, min(heads, int(RING_PROBE_FLOPS // per_head)))
    dtype = getattr(torch, args.dtype)
    q, k, v, dO = (torch.randn(1, probe_heads, side, args.head_dim, device=device, dtype=dtype) for _ in range(4))

    def forward_with_grad():
        x = [t.detach().requires_grad_() for t in (q, k, v)]
        return flash_attention(*x, block_size=args.block_size)

    def synced(fn):
        return lambda state: (fn(state), device.type == "cuda" and torch.cuda.synchronize(device))

    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS_PER_RANK)
    try:
        forward = synced(lambda _: flash_attention_forward(q, k, v, args.block_size))
        seconds = {FORWARD: _median_s(forward, lambda: None)}
        if not args.forward_only:
            seconds[BACKWARD] = _median_s(synced(lambda out: out.backward(dO)), forward_with_grad)
    finally:
        torch.set_num_threads(threads)
    m = min(args.seq_len, RING_PROBE_REF_N)
    cut = [t[..., :m, :].cpu() for t in (q, k, v, dO)]
    reference = _median_s(lambda _: float64_reference(*cut[:3], None if args.forward_only else cut[3], args.causal),
                        lambda: None)
    scale = heads / probe_heads
    tile_s = {phase: t * scale / RING_PROBE_TILES ** 2 for phase, t in seconds.items()}
    reference_s = reference * scale * (args.seq_len / m) ** 2
    how = (f"the median of {RING_PROBE_CALLS} calls of {RING_PROBE_TILES} x {RING_PROBE_TILES} tiles at tile "
           f"{args.block_size}, d = {args.head_dim}, {args.dtype}, {THREADS_PER_RANK} thread, {probe_heads} of "
           f"B H = {heads} heads" + ("" if probe_heads == heads else f" (x {scale:g})")
           + f", and of the reference at N = {m}" + ("" if m == args.seq_len else f" (x (N / {m})^2)"))
    return tile_s, reference_s, how


def _ring_estimate(args: argparse.Namespace, world: int, device: torch.device) -> RingEstimate:
    """The run's work from the model (ring_schedule) at the probe's measured time per tile."""
    model = ring_schedule(args.seq_len, world, args.layout, args.block_size, args.causal, batch=args.batch,
                          heads=args.heads, heads_kv=args.kv_heads or args.heads, head_dim=args.head_dim,
                          dtype=args.dtype, backward=not args.forward_only)
    tile_s, reference_s, how = _probe(args, device)
    tiles = {phase: max(model.tiles_per_rank(phase)) for phase in tile_s}
    return RingEstimate(tiles, tile_s, reference_s, world, _cores(), how)


def _cores() -> int:
    """Cores this process may run on (its affinity where the OS says it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _say_estimate(args: argparse.Namespace, world: int, device: torch.device) -> None:
    """A long run says its estimate on stderr before it starts (and when --timeout would likely cut it)."""
    estimate = _ring_estimate(args, world, device)
    if estimate.seconds < RING_LONG_S:
        return
    late = (f" That is past --timeout {args.timeout:g} s: raise --timeout, or lower --seq-len or --heads."
            if estimate.seconds > args.timeout else "")
    print(estimate.sentence() + late, file=sys.stderr, flush=True)


def _ring_torchrun(args: argparse.Namespace) -> int:
    """One rank of a torchrun job: torchrun's rendezvous, this rank's shards; rank 0 gathers and prints."""
    import torch.distributed as dist

    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    if problem := _ring_settings_problem(args, world):
        return _ring_refused(problem)
    device = torch.device("cpu")
    if args.backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
        torch.cuda.set_device(device)
    if rank == 0:
        _say_estimate(args, world, device)
    dist.init_process_group(args.backend, timeout=timedelta(seconds=args.timeout))  # env://, torchrun's
    try:
        q, k, v, dO = _ring_inputs(args, device)
        mine = [shard(t, world, rank, args.layout).clone(memory_format=torch.contiguous_format) for t in (q, k, v)]
        for t in mine:
            t.requires_grad_(not args.forward_only)
        events = []
        out, lse = ring_attention(*mine, causal=args.causal, layout=args.layout, block_size=args.block_size,
                                  return_lse=True, on_step=events.append)
        if not args.forward_only:
            out.backward(shard(dO, world, rank, args.layout))
        part = {"out": out.detach().cpu(), "lse": lse.cpu(), "events": events}
        if not args.forward_only:
            part.update({name: t.grad.cpu() for name, t in zip(("dq", "dk", "dv"), mine, strict=True)})
        parts = [None] * world if rank == 0 else None
        dist.gather_object(part, parts, dst=0)
        if rank == 0:
            got = {name: unshard([p[name] for p in parts], args.layout) for name in parts[0] if name != "events"}
            ref = float64_reference(q.cpu(), k.cpu(), v.cpu(), None if args.forward_only else dO.cpu(), args.causal)
            print(_ring_report(args, world, "torchrun", got, [e for p in parts for e in p["events"]], ref))
    finally:
        dist.destroy_process_group()
    return EXIT_OK


def _ring(args: argparse.Namespace) -> int:
    if problem := _ring_world_problem(args):
        return _ring_refused(problem)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return _ring_torchrun(args)
    world = args.world or RING_WORLD_DEFAULT
    if problem := _ring_settings_problem(args, world):
        return _ring_refused(problem)
    _say_estimate(args, world, torch.device("cpu"))
    q, k, v, dO = _ring_inputs(args, torch.device("cpu"))
    run = run_ring(q, k, v, world=world, causal=args.causal, layout=args.layout, block_size=args.block_size,
                   backend=args.backend, dO=None if args.forward_only else dO, timeout_s=args.timeout)
    got = {"out": run.out, "lse": run.lse, "dq": run.dq, "dk": run.dk, "dv": run.dv}
    ref = float64_reference(q, k, v, None if args.forward_only else dO, args.causal)
    print(_ring_report(args, world, "processes started here", got, run.events, ref))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m flashviz` and the `flashviz` console script.

    Args:
        argv: arguments without the program name (default: sys.argv[1:]).
    Returns:
        exit code: 0 success, 1 a check failed, 2 bad arguments (usage printed on stderr).

    Example:
        >>> main(["check", "--n", "64", "--d", "16"])  # doctest: +SKIP
        0
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command == "bench":
            return _bench(args)
        if args.command == "ring":
            return _ring(args)
        return _check(args)
    except SystemExit as e:  # argparse's usage errors (2) and --help (0): return the code, no traceback
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130  # 128 + SIGINT
