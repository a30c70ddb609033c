"""Forward speed and memory of the tiled kernels against SDPA and naive attention, measured side by side.

Prints, for one shape (default B=1, H=8, N=4096, d=64, fp32):
  1. a block-size scan of both loop orders (time / SDPA time),
  2. the best tiled forward against SDPA and naive, time and peak extra memory,
  3. causal against non-causal time (tile skipping must show in the time),
  4. the targets, each with PASS or MISS.
Run:  python benchmarks/bench_forward.py            (about 2 minutes on 2 CPU cores)
      python benchmarks/bench_forward.py --n 2048 --heads 4 --repeats 5
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _common import Figures, add_json_arg, device_sync, interleaved_medians, mib, print_table  # benchmarks/ on sys.path

from flashviz import flash_attention_forward, naive_attention
from flashviz.measure.memory import measure_memory

BLOCKS = [(64, 64), (128, 128), (128, 512), (256, 256), (256, 512), (512, 512), (256, 1024)]
LOOP_ORDERS = {"kv_outer": "FA1", "q_outer": "FA2"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=4096, help="sequence length N")
    p.add_argument("--d", type=int, default=64, help="head dimension d")
    p.add_argument("--batch", type=int, default=1, help="batch size B")
    p.add_argument("--heads", type=int, default=8, help="number of heads H")
    p.add_argument("--repeats", type=int, default=7, help="interleaved timed repeats per candidate")
    p.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch intra-op threads")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--max-tile", type=int, default=256 * 256,
                   help="largest Br x Bc the best-block choice may use (scores per head per tile), like a kernel's "
                        "on-chip budget: bigger tiles run about as fast but hold more memory and skip coarser")
    add_json_arg(p)
    return p.parse_args(argv)


def tile_of(name: str) -> tuple[int, int]:
    """'q_outer 128x64' -> (128, 64)."""
    return tuple(map(int, name.split()[1].split("x")))


def block_scan(q, k, v, args, sync) -> tuple[str, int, int]:
    """1. Both loop orders over BLOCKS against SDPA in one round-robin; returns the best (loop order, Br, Bc)."""
    scan = {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v)}
    for order in LOOP_ORDERS:
        for bq, bk in BLOCKS:
            scan[f"{order} {bq}x{bk}"] = (
                lambda o=order, bq=bq, bk=bk: flash_attention_forward(q, k, v, block_q=bq, block_k=bk, loop_order=o))
    t = interleaved_medians(scan, repeats=args.repeats, sync=sync)
    print("\n1. block-size scan (time relative to SDPA in the same run)")
    print_table([{"kernel": name, "time_s": f"{s:.3f}", "x_sdpa": f"{s / t['sdpa']:.2f}"} for name, s in t.items()],
                ["kernel", "time_s", "x_sdpa"])
    fastest = min((n for n in t if n != "sdpa"), key=t.get)
    best = min((n for n in t if n != "sdpa" and tile_of(n)[0] * tile_of(n)[1] <= args.max_tile), key=t.get)
    print(f"fastest overall: {fastest} ({t[fastest] / t['sdpa']:.2f}x SDPA); best within the tile budget "
          f"Br x Bc <= {args.max_tile}: {best} ({t[best] / t['sdpa']:.2f}x SDPA)")
    return (best.split()[0], *tile_of(best))


def against_sdpa_and_naive(q, k, v, best: tuple[str, int, int], args, sync) -> tuple[dict, dict]:
    """2. The best tiled forward vs SDPA vs naive, non-causal and causal: median seconds and peak bytes by name."""
    order, bq, bk = best

    def flash(causal):
        return flash_attention_forward(q, k, v, block_q=bq, block_k=bk, loop_order=order, causal=causal)

    cands = {
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
        "naive": lambda: naive_attention(q, k, v),
        "flash": lambda: flash(False),
        "sdpa causal": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "naive causal": lambda: naive_attention(q, k, v, causal=True),
        "flash causal": lambda: flash(True),
    }
    t = interleaved_medians(cands, repeats=args.repeats, sync=sync)
    peak = {name: measure_memory(fn) for name, fn in cands.items()}
    out_bytes = q.numel() * q.element_size()
    print(f"\n2. best tiled forward: {LOOP_ORDERS[order]} ({order}), Br={bq}, Bc={bk}; output = {mib(out_bytes)} MiB")
    print_table([{"impl": n, "time_s": f"{t[n]:.3f}", "x_sdpa": f"{t[n] / t[n.replace(n.split()[0], 'sdpa')]:.2f}",
                  "peak_MiB": mib(peak[n]), "peak_x_sdpa": f"{peak[n] / peak[n.replace(n.split()[0], 'sdpa')]:.2f}"}
                 for n in cands], ["impl", "time_s", "x_sdpa", "peak_MiB", "peak_x_sdpa"])
    return t, peak


def report_figures(t: dict, peak: dict, best: tuple[str, int, int], args: argparse.Namespace) -> Figures:
    """The run's headline figures (for --json): ratios measured side by side, and the peak memory."""
    order, bq, bk = best
    shape = f"B={args.batch} H={args.heads} N={args.n} d={args.d}"
    figs = Figures()
    figs.add("flash_x_sdpa", t["flash"] / t["sdpa"], "x",
             f"forward time, best tiled kernel ({order}, {bq}x{bk} tiles) / SDPA, {shape}")
    figs.add("naive_x_sdpa", t["naive"] / t["sdpa"], "x", f"forward time, naive / SDPA, {shape}")
    figs.add("flash_causal_x_full", t["flash causal"] / t["flash"], "x",
             "forward time, tiled causal / tiled non-causal")
    figs.add("flash_causal_x_sdpa_causal", t["flash causal"] / t["sdpa causal"], "x",
             "forward time, tiled causal / SDPA causal")
    for name in ("sdpa", "naive", "flash"):
        figs.add(f"peak_mib_{name}", peak[name] / 2**20, "MiB", f"peak extra memory of one forward call, {name}")
    return figs


def print_targets(t: dict, peak: dict) -> None:
    """3. The forward's targets, each with PASS or MISS."""
    checks = [
        ("tiled forward time <= 1.3x SDPA (aim 1.15x)", t["flash"] / t["sdpa"], 1.3),
        ("tiled forward time < naive", t["flash"] / t["naive"], 1.0),
        ("causal time <= 0.6x non-causal", t["flash causal"] / t["flash"], 0.6),
        ("peak extra memory <= 2x SDPA's", peak["flash"] / peak["sdpa"], 2.0),
    ]
    print("\n3. targets")
    for label, ratio, bar in checks:
        print(f"  {'PASS' if ratio <= bar else 'MISS'}  {label}: {ratio:.2f}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    sync = device_sync(device)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(args.batch, args.heads, args.n, args.d, generator=g).to(device) for _ in range(3))
    print(f"torch {torch.__version__}, device {device}, threads {torch.get_num_threads()}, "
          f"B={args.batch} H={args.heads} N={args.n} d={args.d} fp32, median of {args.repeats} interleaved repeats")
    best = block_scan(q, k, v, args, sync)
    t, peak = against_sdpa_and_naive(q, k, v, best, args, sync)
    print_targets(t, peak)
    report_figures(t, peak, best, args).write(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
