"""Decode speed: flash_decode against SDPA (enable_gqa) for one query row against a long KV cache, side by side.

Decoding is memory-bound: every step reads the whole K/V cache for a handful of FLOPs per byte, so the figure of
merit is K/V bytes / time against the machine's read bandwidth, measured here as the time of summing a tensor as
large as the cache. Prints, for one shape (default B=1, H_q=32, H_kv=8, d=128, N=32768, fp32: 256 MiB of K/V):
  1. flash_decode (auto split count) and SDPA: time, K/V bandwidth, ratio to SDPA, fraction of the read bandwidth,
  2. time vs num_splits,
  3. paged caches (page size 16 and 256; pages shuffled, and in order as in a freshly filled pool) relative to
     the contiguous cache,
  4. MHA vs GQA vs MQA at the same H_q: bytes of K/V read per step and time (cache length N / 4 to bound memory),
  5. the targets, each with PASS or MISS.
Run:  PYTHONPATH=$PWD python benchmarks/bench_decode.py                 (about 1 minute on 2 idle CPU cores)
      PYTHONPATH=$PWD python benchmarks/bench_decode.py --n 8192 --repeats 5
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _common import mib, print_table  # benchmarks/ is on sys.path when run

from flashviz import flash_decode
from flashviz.core.decode import MergeEvent
from flashviz.measure.timing import time_calls

GB = 1e9  # bytes per GB (decimal, as bandwidths are quoted)
SPLITS = (1, 2, 4, 8, 16, 32, 64)
PAGE_SIZES = (16, 256)
ORDERS = ("shuffled", "consecutive")  # physical page order of the logical pages
CPU = torch.device("cpu")


def paged(k: torch.Tensor, page_size: int, perm: torch.Tensor) -> torch.Tensor:
    """(1, H, N, d) -> (N / page_size, H, page_size, d) with logical page p stored at physical page perm[p]."""
    _, h, n, d = k.shape
    pages = k[0].view(h, n // page_size, page_size, d).transpose(0, 1)  # (pages, H, page_size, d) logical order
    out = torch.empty_like(pages, memory_format=torch.contiguous_format)
    out[perm] = pages
    return out


def medians(candidates: dict, repeats: int) -> dict[str, float]:
    """Median seconds of each candidate on the CPU: one warm-up call each, then `repeats` interleaved calls."""
    return {name: t.median for name, t in time_calls(candidates, warmup=1, repeats=repeats, sync_device=CPU).items()}


def used_splits(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> int:
    events: list = []
    flash_decode(q, k, v, on_split=events.append)
    return next(e.num_splits for e in events if isinstance(e, MergeEvent))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=32768, help="cache length N (a multiple of 256)")
    p.add_argument("--d", type=int, default=128, help="head dimension d")
    p.add_argument("--heads-q", type=int, default=32, help="query heads H_q")
    p.add_argument("--heads-kv", type=int, default=8, help="key/value heads H_kv")
    p.add_argument("--repeats", type=int, default=7, help="interleaved timed repeats per candidate")
    p.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch intra-op threads")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, args.heads_q, 1, args.d, generator=g)
    k, v = (torch.randn(1, args.heads_kv, args.n, args.d, generator=g) for _ in range(2))
    kv_bytes = 2 * k.numel() * k.element_size()  # K and V, read once per decode step
    big = torch.randn(kv_bytes // 4)  # as many fp32 bytes as the cache, for the read bandwidth
    print(f"B=1 H_q={args.heads_q} H_kv={args.heads_kv} d={args.d} N={args.n} fp32, K/V {mib(kv_bytes)} MiB, "
          f"threads={torch.get_num_threads()}, auto num_splits={used_splits(q, k, v)}")

    n_pages = {ps: args.n // ps for ps in PAGE_SIZES}
    perms = {(ps, order): torch.randperm(n_pages[ps], generator=g) if order == "shuffled" else torch.arange(n_pages[ps])
             for ps in PAGE_SIZES for order in ORDERS}  # logical page -> physical page
    caches = {key: (paged(k, key[0], perm), paged(v, key[0], perm), perm[None]) for key, perm in perms.items()}
    cand = {"read bandwidth (sum)": lambda: big.sum(),
            "sdpa (enable_gqa)": lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
            "flash_decode (auto)": lambda: flash_decode(q, k, v)}
    cand |= {f"flash_decode splits={s}": (lambda s=s: flash_decode(q, k, v, num_splits=s)) for s in SPLITS}
    cand |= {f"paged {ps} {order}": (lambda c=caches[ps, order]: flash_decode(q, c[0], c[1], block_table=c[2]))
             for ps, order in caches}
    t = medians(cand, args.repeats)
    bw = kv_bytes / t["read bandwidth (sum)"]
    sdpa = t["sdpa (enable_gqa)"]
    rows = [{"candidate": name, "ms": f"{s * 1e3:.1f}", "K/V GB/s": f"{kv_bytes / s / GB:.1f}",
             "x SDPA": f"{s / sdpa:.2f}", "x contiguous": f"{s / t['flash_decode (auto)']:.2f}",
             "of read bw": f"{kv_bytes / s / bw:.0%}"} for name, s in t.items()]
    print_table(rows, ["candidate", "ms", "K/V GB/s", "x SDPA", "x contiguous", "of read bw"])
    group_table(args)
    ratio, frac = t["flash_decode (auto)"] / sdpa, kv_bytes / t["flash_decode (auto)"] / bw
    worst_paged = max(t[f"paged {ps} {order}"] for ps, order in caches) / t["flash_decode (auto)"]
    print(f"\nmeasured read bandwidth: {bw / GB:.1f} GB/s")
    for label, ok in ((f"flash_decode / SDPA = {ratio:.2f} <= 0.5", ratio <= 0.5),
                      (f"flash_decode reads K/V at {frac:.0%} of the read bandwidth >= 50%", frac >= 0.5),
                      (f"paged / contiguous = {worst_paged:.2f} <= 1.2 (worst page size, order)", worst_paged <= 1.2)):
        print(f"  {'PASS' if ok else 'MISS'}  {label}")
    return 0


def group_table(args: argparse.Namespace) -> None:
    """MHA vs GQA vs MQA at the same H_q: K/V bytes shrink by the group size, and so should the time."""
    n = args.n // 4  # MHA's cache is G times GQA's: a quarter of the length keeps it near the main case's size
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, args.heads_q, 1, args.d, generator=g)
    kinds = {"MHA": args.heads_q, "GQA": args.heads_kv, "MQA": 1}
    kv = {name: tuple(torch.randn(1, h, n, args.d, generator=g) for _ in range(2)) for name, h in kinds.items()}
    cand = {}
    for name in kinds:
        k, v = kv[name]
        cand[f"{name} flash"] = lambda k=k, v=v: flash_decode(q, k, v)
        cand[f"{name} sdpa"] = lambda k=k, v=v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    t = medians(cand, args.repeats)
    rows = []
    for name, h in kinds.items():
        kv_bytes = 2 * h * n * args.d * 4  # K and V, fp32
        rows.append({"kind": name, "H_kv": h, "K/V MiB": mib(kv_bytes), "flash ms": f"{t[f'{name} flash'] * 1e3:.1f}",
                     "flash GB/s": f"{kv_bytes / t[f'{name} flash'] / GB:.1f}",
                     "sdpa ms": f"{t[f'{name} sdpa'] * 1e3:.1f}",
                     "flash / sdpa": f"{t[f'{name} flash'] / t[f'{name} sdpa']:.2f}"})
    print(f"\nMHA vs GQA vs MQA, H_q={args.heads_q}, N={n}:")
    print_table(rows, ["kind", "H_kv", "K/V MiB", "flash ms", "flash GB/s", "sdpa ms", "flash / sdpa"])


if __name__ == "__main__":
    raise SystemExit(main())
