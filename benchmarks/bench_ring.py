"""Ring attention benchmark: W = 1, 2, 4 ranks on gloo (real processes on this machine), the three layouts, causal.

For each W, one set of W processes runs every configuration (flashviz.ring.run_ring_jobs), and this prints:
  1. per layout: the time of a ring forward + backward (the slowest rank's seconds inside ring_attention, median of
     --repeats runs interleaved layout by layout, after one untimed run; starting the processes is not counted),
     and the busiest rank's computed tiles over the mean, measured from the run's events and predicted by
     ring_schedule,
  2. the bytes each rank sent in the forward against the model (W - 1) x 2 B H_kv (N / W) d x element size,
  3. the error of the output against attention in float64 in one process, with fp32 and with bf16 inputs (bf16
     partial outputs, merged in fp32), not causal, so that every row merges the partials of all W steps.
Each rank runs one intra-op thread (as torchrun's default), and the W ranks share this machine's cores: what carries
over to a cluster is the work per rank (the imbalance) and the bytes; the times are those of W processes on one
machine, which a machine with fewer than W free cores serialises.
Run:  python benchmarks/bench_ring.py                  (N = 2048, d = 64, H = 4, B = 1, block 128, 3 repeats)
      python benchmarks/bench_ring.py --seq-len 1024 --worlds 2 4 --repeats 5
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
from _common import Figures, add_json_arg, print_table  # benchmarks/ on sys.path

from flashviz.ring import FORWARD, LAYOUTS, RingJob, ring_schedule, run_ring_jobs, shard_bytes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seq-len", type=int, default=2048, help="N, divisible by 2W for every W (default 2048)")
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument("--worlds", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--repeats", type=int, default=3, help="timed runs of each layout (default 3)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds one W's processes may take")
    add_json_arg(p)
    return p.parse_args(argv)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Attention (not causal) in float64 in one process."""
    q, k, v = (t.double() for t in (q, k, v))
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1) @ v  # (B, H, N, d)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    gen = torch.Generator().manual_seed(0)
    B, H, N, d = 1, args.heads, args.seq_len, args.head_dim
    q, k, v, dO = (torch.randn(B, H, N, d, generator=gen) for _ in range(4))
    ref32 = reference(q, k, v)
    q16, k16, v16 = (t.bfloat16() for t in (q, k, v))
    ref16 = reference(q16, k16, v16)  # the bf16 inputs' own exact answer: the error is the computation's
    figures = Figures()
    print(f"ring attention on gloo: N={N}, d={d}, H={H}, B={B}, fp32, causal, block {args.block_size}, forward + "
          f"backward; time = slowest rank inside the ring, median of {args.repeats}\n")
    rows, error_rows = [], []
    for W in args.worlds:
        timed = [RingJob(q, k, v, W, True, layout, args.block_size, dO) for _ in range(args.repeats)
                 for layout in LAYOUTS]
        precision = [RingJob(q, k, v, W, False, "zigzag", args.block_size),
                     RingJob(q16, k16, v16, W, False, "zigzag", args.block_size)]
        warmup = RingJob(q, k, v, W, True, LAYOUTS[0], args.block_size, dO)  # a fresh process's first call is slow
        t0 = time.perf_counter()
        runs = run_ring_jobs([warmup, *timed, *precision], timeout_s=args.timeout)[1:]
        wall = time.perf_counter() - t0
        kv_model = (W - 1) * shard_bytes(B, H, N, W, d)
        for layout in LAYOUTS:
            mine = [r for r in runs[:-2] if r.layout == layout]
            seconds = statistics.median(max(r.ring_s) for r in mine)
            run = mine[0]
            sent = max(sum(e.bytes_sent for e in run.of(FORWARD) if e.rank == rank) for rank in range(W))
            model = ring_schedule(N, W, layout, args.block_size, True, batch=B, heads=H, head_dim=d)
            rows.append({"W": W, "layout": layout, "time (ms)": f"{seconds * 1e3:.1f}",
                         "tiles per rank": " ".join(map(str, run.tiles_per_rank())),
                         "max/mean": f"{run.imbalance():.3f}", "model max/mean": f"{model.imbalance():.3f}",
                         "sent/rank (KiB)": f"{sent / 2**10:.0f}", "model (KiB)": f"{kv_model / 2**10:.0f}"})
            figures.add(f"time_w{W}_{layout}", seconds * 1e3, "ms",
                        f"W = {W}, {layout}: ring forward + backward, slowest rank")
            figures.add(f"imbalance_w{W}_{layout}", run.imbalance(), "x",
                        f"W = {W}, {layout}: busiest rank's tiles / mean (causal)")
            if layout == "zigzag":
                figures.add(f"bytes_w{W}", sent / kv_model if kv_model else 1.0, "x",
                            f"W = {W}: bytes a rank sends in the forward / model (W-1) 2 B H_kv (N/W) d elem")
        err32, err16 = (float((r.out.double() - ref).abs().max()) for r, ref in zip(runs[-2:], (ref32, ref16),
                                                                                       strict=True))
        error_rows.append({"W": W, "fp32 max |err|": f"{err32:.2e}", "bf16 max |err|": f"{err16:.2e}",
                           "processes' wall time (s)": f"{wall:.1f}"})
        figures.add(f"err_fp32_w{W}", err32, "", f"W = {W}: max |error| against float64, fp32 (W partials merged)")
        figures.add(f"err_bf16_w{W}", err16, "", f"W = {W}: max |error| against float64, bf16 partials merged in fp32")
    print_table(rows, list(rows[0]))
    print("\nerror against one process in float64 (zigzag, not causal: every row merges W partials); the wall time "
          "includes starting the processes\n")
    print_table(error_rows, list(error_rows[0]))
    figures.write(args.json)


if __name__ == "__main__":
    main()
