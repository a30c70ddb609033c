"""The summary table, measured: time, peak memory, GFLOP/s and modelled HBM traffic of every implementation.

For each head count H, one run_sweep over N measures naive, flash (FA1 loop order), flash2 (FA2 loop order) and
PyTorch's SDPA side by side in one process, then prints
    1. the measurements (median time and IQR, exact peak memory, achieved GFLOP/s, modelled HBM traffic, error),
    2. the summary table: speedup and memory saving of flash over naive at each N,
    3. naive attention's measured peak memory against its formula 2 * 4 B H N^2 + 4 B H N d (S and P of fp32
       plus the output), which the allocator events reproduce to the byte.
Times are this machine's, today: machines are noisy, so compare the rows of one run with one another (they are
measured side by side), never with another run.

Usage:
    python benchmarks/bench_table.py                          # N = 256 .. 4096, d = 64, B = 1, H = 1 and 8
    python benchmarks/bench_table.py --heads 1 --repeats 3    # quicker
    python benchmarks/bench_table.py --causal --threads 1
"""

from __future__ import annotations

import argparse
import sys
import time

import pandas as pd
import torch
from _common import Figures, add_json_arg  # benchmarks/ is on sys.path when run

from flashviz.figures.report import summary_table
from flashviz.measure.sweep import run_sweep
from flashviz.vocab import DTYPE_BYTES, IMPLS

MIB = 2**20  # bytes per MiB
FP32_BYTES = DTYPE_BYTES["float32"]  # bytes per fp32 element
NAIVE_MATRICES = 2  # S and P, both B x H x N x N, alive together at naive's peak


def naive_formula_bytes(batch: int, heads: int, n: int, d: int, elem: int = FP32_BYTES) -> int:
    """Peak bytes of naive attention by hand: S and P (2 B H N^2 elements) and the output O (B H N d)."""
    return NAIVE_MATRICES * elem * batch * heads * n * n + elem * batch * heads * n * d


def measurements(df: pd.DataFrame) -> str:
    view = pd.DataFrame({
        "N": df["N"], "impl": df["impl"], "time (ms)": df["time_s"] * 1e3, "IQR (ms)": df["time_iqr_s"] * 1e3,
        "peak (MiB)": df["peak_bytes"] / MIB, "GFLOP/s": df["gflops"], "HBM model (MiB)": df["hbm_bytes"] / MIB,
        "max err": df["max_abs_err"], "status": df["status"]})
    return view.to_string(index=False, na_rep="-", float_format=lambda x: f"{x:.4g}")


def naive_vs_formula(df: pd.DataFrame, batch: int, heads: int, d: int) -> str:
    naive = df[(df["impl"] == "naive") & (df["status"] == "ok")]
    rows = []
    for n, measured in zip(naive["N"], naive["peak_bytes"], strict=True):
        formula = naive_formula_bytes(batch, heads, int(n), d)
        rows.append({"N": int(n), "measured (bytes)": int(measured), "2*4*B*H*N^2 + 4*B*H*N*d (bytes)": formula,
                     "measured - formula (bytes)": int(measured) - formula, "measured / formula": measured / formula})
    return pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.4f}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", nargs="+", type=int, default=[256, 512, 1024, 2048, 4096], help="sequence lengths")
    parser.add_argument("--d", type=int, default=64, help="head dimension")
    parser.add_argument("--heads", nargs="+", type=int, default=[1, 8], help="head counts, one table each")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--block-size", type=int, default=128, help="Br = Bc of flash and flash2")
    parser.add_argument("--impls", nargs="+", choices=IMPLS, default=list(IMPLS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="default: torch's current count")
    parser.add_argument("--causal", action="store_true")
    add_json_arg(parser)
    return parser


def add_figures(figs: Figures, df: pd.DataFrame, heads: int, d: int, batch: int) -> None:
    """The sweep's headline figures at its largest N: time ratios of flash and SDPA to naive, the peaks in MiB and
    naive's measured peak against its formula."""
    ok = df[df["status"] == "ok"]
    n = int(ok["N"].max())
    at = ok[ok["N"] == n].set_index("impl")
    where = f"B={batch} H={heads} N={n} d={d}"
    if "naive" in at.index:
        for impl in at.index.drop("naive"):
            figs.add(f"h{heads}_{impl}_x_naive", at.loc[impl, "time_s"] / at.loc["naive", "time_s"], "x",
                     f"forward time, {impl} / naive, {where}")
        formula = naive_formula_bytes(batch, heads, n, d)
        figs.add(f"h{heads}_naive_peak_x_formula", at.loc["naive", "peak_bytes"] / formula, "x",
                 f"naive's measured peak / 2*4*B*H*N^2 + 4*B*H*N*d, {where}")
    for impl in at.index:
        figs.add(f"h{heads}_peak_mib_{impl}", at.loc[impl, "peak_bytes"] / MIB, "MiB", f"peak memory, {impl}, {where}")


def report_heads(args: argparse.Namespace, heads: int, figs: Figures) -> None:
    """Sweep N at one head count, print its three tables and add its headline figures to figs."""
    t0 = time.perf_counter()
    df = run_sweep(args.n, d=args.d, block_size=args.block_size, causal=args.causal, impls=args.impls,
                   batch=args.batch, heads=heads, repeats=args.repeats, threads=args.threads,
                   progress=lambda done, total, label: print(f"  [{done}/{total}] {label}", file=sys.stderr))
    print(f"\n=== B={args.batch}, H={heads}, threads={df['threads'].iloc[0]} "
          f"(sweep took {time.perf_counter() - t0:.0f} s) ===\n")
    print(measurements(df))
    if {"naive", "flash"} <= set(args.impls):
        print("\nSummary: flash vs naive (speedup = naive time / flash time; saving = naive peak / flash peak)\n")
        print(summary_table(df).to_string(index=False, na_rep="not run", float_format=lambda x: f"{x:.4g}"))
    if "naive" in args.impls:
        print("\nNaive peak memory, measured vs formula\n")
        print(naive_vs_formula(df, args.batch, heads, args.d))
    add_figures(figs, df, heads, args.d, args.batch)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads available, d={args.d}, B={args.batch}, "
          f"block {args.block_size}x{args.block_size}, causal={args.causal}, median of {args.repeats}")
    figs = Figures()
    for heads in args.heads:
        report_heads(args, heads, figs)
    figs.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
