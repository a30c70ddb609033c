"""Does the verdict survive a rerun? The Benchmark view's defaults (naive against flash2 at N = 1024, H = 4, d = 64,
256-wide tiles, one warm-up call) timed several times in a row, each time with run_sweep, and each run's verdict
(flashviz.measure.verdict) printed: a winner with its interval only when the 95% intervals of the two medians
separate, otherwise "too close to call here" and what would settle it.

With --repeats auto (the default) each run times until both medians are known to +-5% or its budget is spent
(flashviz.measure.timing.Adaptive); with --repeats 3, the dashboard's fixed default, three calls give no 95% interval
at all, so the verdict says so instead of naming a winner from noise.

A verdict "changed" when a run's (winner, what would settle it) differs from the run before.

Usage:
    python benchmarks/bench_verdict.py                       # 3 runs, adaptive
    python benchmarks/bench_verdict.py --runs 5 --repeats 3  # the old fixed default, for contrast
"""

from __future__ import annotations

import argparse
import sys
from itertools import pairwise

import torch
from _common import Figures, add_json_arg  # benchmarks/ is on sys.path when run

from flashviz.measure.context import run_context
from flashviz.measure.sweep import run_sweep
from flashviz.measure.timing import AUTO, Adaptive
from flashviz.measure.verdict import Verdict, compare, estimate_of, sentence
from flashviz.vocab import NAIVE, OK

FLASH2 = "flash2"


def one_run(args: argparse.Namespace) -> tuple[Verdict, dict]:
    """One run_sweep of naive and flash2 at the chosen settings, and its verdict."""
    repeats = Adaptive(budget_s=args.budget) if args.repeats == AUTO else int(args.repeats)
    df = run_sweep([args.n], d=args.d, block_size=args.block, impls=(NAIVE, FLASH2), heads=args.heads,
                   threads=args.threads, warmup=1, repeats=repeats)
    rows = df.set_index("impl")
    if not (rows["status"] == OK).all():
        raise SystemExit(f"a row was not run: {rows['status'].to_dict()}")
    est = {impl: estimate_of(float(r.time_s), float(r.time_lo_s), float(r.time_hi_s), int(r.repeats))
           for impl, r in rows.iterrows()}
    return compare(est[NAIVE], est[FLASH2], (NAIVE, FLASH2)), df.attrs["context"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="how many times to run the defaults (3)")
    parser.add_argument("--n", type=int, default=1024, help="sequence length N (1024)")
    parser.add_argument("--heads", type=int, default=4, help="heads H (4)")
    parser.add_argument("--d", type=int, default=64, help="head dimension d (64)")
    parser.add_argument("--block", type=int, default=256, help="tile size Br = Bc (256)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="intra-op threads")
    parser.add_argument("--repeats", default=AUTO, help="'auto' (until the medians are known) or a fixed count")
    parser.add_argument("--budget", type=float, default=Adaptive().budget_s,
                        help="seconds each adaptive run may time (default: Adaptive's)")
    add_json_arg(parser)
    args = parser.parse_args(argv)
    ctx = run_context(args.threads)
    print(f"naive vs flash2, N = {args.n}, H = {args.heads}, d = {args.d}, tile {args.block}, repeats "
          f"{args.repeats}, {ctx['threads']} threads, torch {ctx['torch_version']}, {ctx['cpu_model']}")
    keys = []
    for run in range(1, args.runs + 1):
        v, _ = one_run(args)
        keys.append((v.faster, v.settle))
        a, b = v.a, v.b
        print(f"run {run}: naive {a.median * 1e3:.1f} ms ({a.low * 1e3:.1f}-{a.high * 1e3:.1f}, {a.repeats} calls, "
              f"converged {a.converged}), flash2 {b.median * 1e3:.1f} ms ({b.low * 1e3:.1f}-{b.high * 1e3:.1f}, "
              f"{b.repeats} calls, converged {b.converged})")
        print(f"       {sentence(v)}")
    changed = sum(k != prev for prev, k in pairwise(keys))
    print(f"the verdict changed {changed} time(s) in {args.runs - 1} rerun(s)")
    figures = Figures()
    figures.add("verdict_changes", changed, "", f"times the verdict changed in {args.runs - 1} reruns")
    figures.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
