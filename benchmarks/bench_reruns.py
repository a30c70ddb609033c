"""Do the Benchmark view's verdicts survive a rerun? Its own cached run (flashviz.kit.jobs.sweep at the view's default
settings: N 512, 1024, 2048, all four implementations, H = 4, d = 64, 256-wide tiles, Repeat until sure) made --runs
times in one process, the cache cleared before each, and each run's verdicts (FA1 and FA2 against naive at every N,
flashviz.views.bench.sentences.speed_verdicts) printed. Then the same number of runs the old way, 3 fixed repeats with
the faster median named, for contrast.

A named winner "reversed" when a rerun names the other side; a verdict "changed" when a winner became too close to
call or the other way round.

Usage:
    python benchmarks/bench_reruns.py              # 5 runs each way
    python benchmarks/bench_reruns.py --runs 3
"""

from __future__ import annotations

import argparse
from itertools import pairwise

from flashviz.app.state import Settings
from flashviz.kit import jobs
from flashviz.measure.verdict import sentence
from flashviz.views.bench.sentences import speed_verdicts
from flashviz.vocab import NAIVE, OK


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5, help="runs each way (default 5)")
    args = p.parse_args(argv)
    runs = []
    for i in range(args.runs):
        jobs.sweep.clear()
        df = jobs.sweep(*jobs.sweep_args(Settings()))
        verdicts = {(n, impl): v for n, impl, v in speed_verdicts(df)}
        runs.append(verdicts)
        print(f"run {i + 1}:")
        for (n, impl), v in sorted(verdicts.items()):
            print(f"  N = {n} {impl}: {sentence(v)}")
    keys = sorted(runs[0])
    reversed_ = sum(1 for a, b in pairwise(runs) for k in keys if a[k].faster and b[k].faster
                    and a[k].faster != b[k].faster)
    changed = sum(1 for a, b in pairwise(runs) for k in keys if a[k].faster != b[k].faster)
    comparisons = len(keys) * (args.runs - 1)
    print(f"repeat until sure: a named winner reversed {reversed_} times, a verdict changed {changed} times, "
          f"in {comparisons} rerun comparisons")
    old = []
    for _ in range(args.runs):
        jobs.sweep.clear()
        df = jobs.sweep(*jobs.sweep_args(Settings(sure=False, reps=3)))
        t = df[df["status"].astype(str) == OK].set_index(["N", "impl"])["time_s"]
        old.append({(n, impl): NAIVE if t[(n, NAIVE)] < t[(n, impl)] else impl for n, impl in keys})
    flips = sum(1 for a, b in pairwise(old) for k in keys if a[k] != b[k])
    print(f"3 repeats, the faster median named: the named winner reversed {flips} times in {comparisons} rerun "
          "comparisons")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
