"""Building a mask's tile schedule against torch's create_block_mask, and the sparsity of each preset.

For each mask preset at one shape (default N = 4096, blocks 128 x 128, B = H = 1), timed side by side (interleaved):
  schedule      tile_schedule(..., mask_mod=m): element-level classification of every tile
  + BlockMask   to_block_mask(tile_schedule(...)): the same, exported as a torch BlockMask
  torch         create_block_mask(m, B, H, N, N, BLOCK_SIZE=...), the FlexAttention peer, eager
and prints the ratios (ours / torch: below 1 is faster), the fraction of tiles computed (full + partial) and a check
that the two BlockMasks list the same blocks. The kernel-time part (tiled kernel with a mask_mod against flex_attention
and SDPA) needs the kernels' mask_mod argument and is measured separately.
Run:  PYTHONPATH=$PWD python benchmarks/bench_masks.py                (about 1 minute on 2 CPU cores)
      PYTHONPATH=$PWD python benchmarks/bench_masks.py --n 8192 --block 128 --repeats 3
"""

from __future__ import annotations

import argparse

import torch
from _common import print_table  # benchmarks/ is on sys.path when run
from torch.nn.attention.flex_attention import and_masks, create_block_mask

from flashviz.core.blockmask import to_block_mask
from flashviz.core.tiling import tile_schedule
from flashviz.masks import (
    attention_sink,
    causal_mask,
    chunked,
    dilated,
    document,
    prefix_lm,
    sliding_window,
)
from flashviz.measure.timing import time_calls
from flashviz.vocab import SKIPPED

DOC_FRACTIONS = (1000, 1500, 600, 996)  # 4 packed documents at N = 4096 (tokens each), rescaled to other N


def presets(n: int) -> dict[str, object]:
    """Each preset at sequence length n, with parameters that scale with n."""
    lengths = [n * f // sum(DOC_FRACTIONS) for f in DOC_FRACTIONS]
    lengths[-1] += n - sum(lengths)  # the documents cover exactly N
    return {
        "causal": causal_mask,
        "sliding_window(N/16, 0)": sliding_window(n // 16, 0),
        "prefix_lm(N/4)": prefix_lm(n // 4),
        "document(4 docs)": document(lengths),
        "document AND causal": and_masks(document(lengths), causal_mask),
        "attention_sink(4, N/16)": attention_sink(4, n // 16),
        "chunked(N/4)": chunked(n // 4),
        "dilated(N/16, 4)": dilated(n // 16, 4),
    }


def same_blocks(a, b) -> bool:
    for num, idx in (("kv_num_blocks", "kv_indices"), ("full_kv_num_blocks", "full_kv_indices")):
        n_a, n_b = getattr(a, num), getattr(b, num)
        valid = torch.arange(getattr(a, idx).shape[-1]) < n_a.unsqueeze(-1)
        if not (torch.equal(n_a, n_b) and torch.equal(getattr(a, idx)[valid], getattr(b, idx)[valid])):
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=4096, help="sequence length N (N_q = N_k)")
    p.add_argument("--block", type=int, default=128, help="tile size Br = Bc = BLOCK_SIZE")
    p.add_argument("--repeats", type=int, default=5, help="interleaved timed repeats per candidate")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1, as torch.utils.benchmark.Timer: on a shared machine "
                        "multi-threaded elementwise ops mostly wait for busy cores)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    n, blk = args.n, args.block
    print(f"N = {n}, block {blk} x {blk}, B = H = 1, {args.threads} threads, median of {args.repeats} interleaved "
          "repeats; ratio = ours / create_block_mask (< 1: ours is faster)")
    rows = []
    for name, m in presets(n).items():
        timings = time_calls({
            "schedule": lambda m=m: tile_schedule(n, n, blk, blk, mask_mod=m),
            "export": lambda m=m: to_block_mask(tile_schedule(n, n, blk, blk, mask_mod=m)),
            "torch": lambda m=m: create_block_mask(m, 1, 1, n, n, device="cpu", BLOCK_SIZE=blk),
        }, warmup=1, repeats=args.repeats)
        times = {name: t.median for name, t in timings.items()}
        sched = tile_schedule(n, n, blk, blk, mask_mod=m)
        counts = sched.counts()
        same = same_blocks(to_block_mask(sched), create_block_mask(m, 1, 1, n, n, device="cpu", BLOCK_SIZE=blk))
        rows.append({
            "mask": name,
            "schedule ms": f"{times['schedule'] * 1e3:.1f}",
            "+BlockMask ms": f"{times['export'] * 1e3:.1f}",
            "create_block_mask ms": f"{times['torch'] * 1e3:.1f}",
            "schedule/torch": f"{times['schedule'] / times['torch']:.2f}",
            "+BlockMask/torch": f"{times['export'] / times['torch']:.2f}",
            "computed tiles": f"{1 - counts[SKIPPED] / len(sched):.3f}",
            "same blocks": "yes" if same else "NO",
        })
    print_table(rows, list(rows[0]))
    worst = max(float(r["+BlockMask/torch"]) for r in rows)
    print(f"worst +BlockMask/torch ratio: {worst:.2f} (target <= 1.00: {'PASS' if worst <= 1.0 else 'MISS'})")
    return 0 if all(r["same blocks"] == "yes" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
