"""Training-step benchmark: forward + backward time and peak memory of flash vs naive autograd vs SDPA autograd.

A training step is what FlashAttention-2's Algorithm 2 is for: naive attention keeps P (N x N) alive from the forward
to the backward and builds dP and dS (N x N) on the way back; flash_attention keeps only O and the logsumexp L and
recomputes P tile by tile. Everything runs side by side in one process, interleaved repeat by repeat, and the figures
are medians, so drift in the machine's load hits all candidates alike: compare figures of one run, not of two.

Prints:
  1. a block-size scan of flash's training step at --scan-n (time, causal/non-causal ratio), unless --block is given,
  2. for each N: time and peak memory of flash (best tiles), naive and SDPA, non-causal and causal,
  3. the training-step targets at N = 2048, H = 2, each with PASS or MISS:
     flash fwd+bwd peak <= 10% of naive's (aim 5%); causal fwd+bwd time <= 0.7x non-causal (aim 0.55).
Run:  python benchmarks/bench_backward.py                  (N = 1024 2048 4096, d = 64, B = 1, H = 2, fp32)
      python benchmarks/bench_backward.py --threads 1 --ns 2048 --block 256x256 --repeats 9
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F
from _common import Figures, add_json_arg, device_sync, interleaved_medians, mib, print_table  # benchmarks/ on sys.path

from flashviz import flash_attention, naive_attention
from flashviz.measure.memory import measure_memory

BLOCKS = [(64, 64), (128, 64), (128, 128), (128, 256), (256, 128), (256, 256)]  # (Br, Bc) candidates of the scan
TARGET_N = 2048  # the training-step targets are stated at N = 2048, H = 2


def training_step(attn: Callable[..., torch.Tensor], q, k, v, dO, **kwargs) -> Callable[[], None]:
    """One step: O = attn(q, k, v, **kwargs), then (dq, dk, dv) for the upstream gradient dO."""
    return lambda: torch.autograd.grad(attn(q, k, v, **kwargs), (q, k, v), dO)


def flash_step(q, k, v, dO, blocks: tuple[int, int], causal: bool) -> Callable[[], None]:
    return training_step(flash_attention, q, k, v, dO, block_q=blocks[0], block_k=blocks[1], causal=causal)


def parse_blocks(text: str) -> tuple[int, int]:
    """'128x64' -> (block_q=128, block_k=64); '128' -> (128, 128)."""
    parts = text.lower().split("x")
    if len(parts) not in (1, 2) or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"a tile size is 'BQxBK' or 'B' with positive ints (128x64), got {text!r}")
    return int(parts[0]), int(parts[-1])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ns", type=int, nargs="+", default=[1024, 2048, 4096], help="sequence lengths N")
    p.add_argument("--d", type=int, default=64, help="head dimension d")
    p.add_argument("--batch", type=int, default=1, help="batch size B")
    p.add_argument("--heads", type=int, default=2, help="number of heads H")
    p.add_argument("--block", type=parse_blocks, default=None, help="flash tiles BQxBK; skips the block-size scan")
    p.add_argument("--scan-n", type=int, default=TARGET_N, help="N of the block-size scan")
    p.add_argument("--repeats", type=int, default=5, help="interleaved timed repeats per candidate")
    p.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch intra-op threads")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    add_json_arg(p)
    return p.parse_args(argv)


def block_scan(inputs, args, sync) -> tuple[int, int]:
    """1. Flash's training step over BLOCKS, non-causal and causal in one round-robin; returns the (Br, Bc) of least
    time, non-causal and causal together."""
    q, k, v, dO = inputs
    scan = {f"{bq}x{bk}{' causal' if c else ''}": flash_step(q, k, v, dO, (bq, bk), c)
            for bq, bk in BLOCKS for c in (False, True)}
    t = interleaved_medians(scan, repeats=args.repeats, sync=sync)
    rows = []
    for bq, bk in BLOCKS:
        full, causal = f"{bq}x{bk}", f"{bq}x{bk} causal"
        rows.append({"tiles": full, "time_s": f"{t[full]:.3f}", "causal_s": f"{t[causal]:.3f}",
                     "causal/full": f"{t[causal] / t[full]:.2f}"})
    print(f"\n1. block-size scan of flash's training step at N={args.scan_n} (fwd+bwd, seconds)")
    print_table(rows, ["tiles", "time_s", "causal_s", "causal/full"])
    return min(BLOCKS, key=lambda b: t[f"{b[0]}x{b[1]}"] + t[f"{b[0]}x{b[1]} causal"])


def training_table(n: int, inputs, blocks: tuple[int, int], args, sync) -> dict[str, tuple[float, int]]:
    """2. One N: flash, naive and SDPA training steps, non-causal and causal; name -> (seconds, peak bytes)."""
    q, k, v, dO = inputs
    cands = {}
    for causal in (False, True):
        suffix = " causal" if causal else ""
        cands["flash" + suffix] = flash_step(q, k, v, dO, blocks, causal)
        cands["naive" + suffix] = training_step(naive_attention, q, k, v, dO, causal=causal)
        cands["sdpa" + suffix] = training_step(F.scaled_dot_product_attention, q, k, v, dO, is_causal=causal)
    t = interleaved_medians(cands, repeats=args.repeats, sync=sync)
    peak = {name: measure_memory(fn) for name, fn in cands.items()}
    rows = []
    for name in cands:
        naive = "naive causal" if name.endswith("causal") else "naive"
        rows.append({"N": n, "impl": name, "time_s": f"{t[name]:.3f}", "x_naive": f"{t[name] / t[naive]:.2f}",
                     "peak_MiB": mib(peak[name]), "peak_%_naive": f"{100 * peak[name] / peak[naive]:.1f}"})
    print_table(rows, ["N", "impl", "time_s", "x_naive", "peak_MiB", "peak_%_naive"])
    return {name: (t[name], peak[name]) for name in cands}


def print_targets(r: dict[str, tuple[float, int]], heads: int) -> None:
    """3. The training-step targets at N = TARGET_N, each with PASS or MISS; r as training_table returns it."""
    checks = [
        ("flash fwd+bwd peak <= 10% of naive's (aim 5%)", r["flash"][1] / r["naive"][1], 0.10),
        ("flash causal fwd+bwd peak <= 10% of naive's", r["flash causal"][1] / r["naive causal"][1], 0.10),
        ("flash causal fwd+bwd time <= 0.7x non-causal (aim 0.55)", r["flash causal"][0] / r["flash"][0], 0.7),
    ]
    print(f"\n3. targets at N={TARGET_N}, H={heads}")
    for label, ratio, bar in checks:
        print(f"  {'PASS' if ratio <= bar else 'MISS'}  {label}: {ratio:.3f}")


def report_figures(results: dict[int, dict[str, tuple[float, int]]], blocks: tuple[int, int],
                   args: argparse.Namespace) -> Figures:
    """The run's headline figures (for --json), at the largest N: times as ratios, peaks in MiB."""
    n = max(results)
    r = results[n]
    shape = f"B={args.batch} H={args.heads} N={n} d={args.d}, fwd+bwd"
    figs = Figures()
    figs.add("flash_x_naive", r["flash"][0] / r["naive"][0], "x",
             f"training-step time, flash_attention ({blocks[0]}x{blocks[1]} tiles) / naive autograd, {shape}")
    figs.add("sdpa_x_naive", r["sdpa"][0] / r["naive"][0], "x", f"training-step time, SDPA / naive autograd, {shape}")
    figs.add("flash_causal_x_full", r["flash causal"][0] / r["flash"][0], "x",
             "training-step time, flash_attention causal / non-causal")
    for name in ("naive", "sdpa", "flash"):
        figs.add(f"peak_mib_{name}", r[name][1] / 2**20, "MiB", f"peak memory of one training step, {name}")
    figs.add("flash_peak_pct_naive", 100 * r["flash"][1] / r["naive"][1], "%", "flash's peak as % of naive's")
    return figs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    sync = device_sync(device)
    print(f"torch {torch.__version__}, device {device}, threads {torch.get_num_threads()}, B={args.batch} "
          f"H={args.heads} d={args.d} fp32, forward + backward, median of {args.repeats} interleaved repeats")

    def inputs(n: int):
        g = torch.Generator().manual_seed(n)
        q, k, v, dO = (torch.randn(args.batch, args.heads, n, args.d, generator=g).to(device) for _ in range(4))
        return q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), dO

    blocks = args.block or block_scan(inputs(args.scan_n), args, sync)
    print(f"\n2. training step, flash with tiles Br={blocks[0]}, Bc={blocks[1]}; x_naive = relative to naive in the "
          "same run")
    results = {n: training_table(n, inputs(n), blocks, args, sync) for n in args.ns}
    if TARGET_N in results:
        print_targets(results[TARGET_N], args.heads)
    report_figures(results, blocks, args).write(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
