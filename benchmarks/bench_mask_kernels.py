"""The tiled kernel with a mask_mod against FlexAttention and dense SDPA, and its time against the computed tiles.

Prints, for B=1, H=8, N=4096, d=64 fp32 and a document mask (documents of 1000, 1500, 600, 996 tokens) AND causal:
  1. tiled forward with a prebuilt schedule (tile_schedule(..., mask_mod=) built once, outside the timing, exactly as
     flex_attention's BlockMask) / torch.compile(flex_attention) with create_block_mask (compile time reported
     separately; if torch.compile cannot run here, the reason is printed and eager flex_attention is timed instead,
     labelled "eager"); the two build times are printed side by side,
  2. tiled forward / SDPA with the dense boolean mask (which computes every tile), with the prebuilt schedule and
     with the schedule built inside every call (mask_mod= alone),
  3. tiled time against the fraction of computed tiles, over the presets of flashviz.masks.
All times in one process, interleaved call by call (flashviz.measure.timing.time_calls), medians of --repeats.
Run:  PYTHONPATH=$PWD python benchmarks/bench_mask_kernels.py            (a few minutes on 2 CPU cores)
      PYTHONPATH=$PWD python benchmarks/bench_mask_kernels.py --n 2048 --repeats 3 --no-compile
"""

from __future__ import annotations

import argparse
import warnings

import torch
import torch.nn.functional as F
from _common import Figures, add_json_arg, print_table  # benchmarks/ is on sys.path when run
from torch.nn.attention.flex_attention import and_masks, create_block_mask, flex_attention, noop_mask

from flashviz import flash_attention_forward
from flashviz import masks as M
from flashviz.core.maskeval import evaluate, index_grid
from flashviz.measure.timing import time_call, time_calls
from flashviz.views.masks.data import prebuilt_schedule
from flashviz.vocab import FULL, PARTIAL, Q_OUTER, SKIPPED

DOC_LENGTHS = [1000, 1500, 600, 996]  # tokens per packed document, summing to N = 4096


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=4096, help="sequence length N (document lengths scale with it)")
    p.add_argument("--d", type=int, default=64, help="head dimension d")
    p.add_argument("--heads", type=int, default=8, help="number of heads H")
    p.add_argument("--block", type=int, default=128, help="tile size Br = Bc of the tiled kernel and the BlockMask")
    p.add_argument("--repeats", type=int, default=5, help="interleaved timed repeats per candidate")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile (time eager flex_attention)")
    add_json_arg(p)
    return p.parse_args(argv)


def documents(n: int) -> list[int]:
    """DOC_LENGTHS scaled to n, the last document taking the rounding."""
    lengths = [max(1, round(x * n / sum(DOC_LENGTHS))) for x in DOC_LENGTHS[:-1]]
    return [*lengths, n - sum(lengths)]


def compiled_flex(args) -> tuple[object, str]:
    """torch.compile(flex_attention), or eager flex_attention with the reason compile could not be used."""
    if args.no_compile:
        return flex_attention, "eager (--no-compile)"
    return torch.compile(flex_attention, dynamic=False), "compiled"


def medians(candidates: dict, repeats: int) -> dict[str, float]:
    """Median seconds of each candidate: one warm-up call each, then `repeats` interleaved calls (time_calls)."""
    return {name: t.median for name, t in time_calls(candidates, warmup=1, repeats=repeats).items()}


def once(fn) -> float:
    """Seconds of one call of fn (a build, a compile: what happens once), through time_call."""
    return time_call(fn, warmup=0, repeats=1).median


def first_call(fn, label: str, eager_fallback) -> tuple[object, str, float]:
    """Run fn once (compiling it); on failure fall back to eager flex_attention and say why."""
    try:
        return fn, label, once(fn)
    except Exception as e:  # inductor needs a working C++ toolchain; report what failed
        print(f"torch.compile(flex_attention) failed here: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        return eager_fallback, "eager (compile failed)", float("nan")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.manual_seed(0)
    B, H, N, d, blk = 1, args.heads, args.n, args.d, args.block
    q, k, v = (torch.randn(B, H, N, d) for _ in range(3))
    lengths = documents(N)
    mask_mod = and_masks(M.document(lengths), M.causal_mask)
    print(f"B={B} H={H} N={N} d={d} fp32, document {lengths} AND causal, tiles {blk}x{blk}, "
          f"threads={torch.get_num_threads()}")

    built = {}
    bm_s = once(lambda: built.setdefault("block_mask", create_block_mask(mask_mod, B, H, N, N, device="cpu",
                                                                        BLOCK_SIZE=blk)))
    sched_s = once(lambda: built.setdefault("schedule", prebuilt_schedule(N, blk, blk, mask_mod, heads=H)))
    block_mask, sched = built["block_mask"], built["schedule"]
    counts = sched.counts()
    print(f"build once: create_block_mask {bm_s:.3f} s, tile_schedule with its partial tiles' masks {sched_s:.3f} s; "
          f"tiles full/partial/skipped: {counts[FULL]}/{counts[PARTIAL]}/{counts[SKIPPED]} "
          f"({(counts[FULL] + counts[PARTIAL]) / len(sched):.1%} computed)")
    b, h = index_grid(B, H)
    dense = evaluate(mask_mod, b, h, torch.arange(N)[:, None], torch.arange(N)[None, :])  # (1, 1, N, N) bool

    flex_fn, flex_label = compiled_flex(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = lambda: flex_attention(q, k, v, block_mask=block_mask)  # noqa: E731
        flex_call, flex_label, compile_s = first_call(lambda: flex_fn(q, k, v, block_mask=block_mask), flex_label,
                                                      eager)
        print(f"flex_attention ({flex_label}) first call (compile): {compile_s:.1f} s")
        def tiled():  # prebuilt schedule (its partial tiles' masks included), as flex_attention gets a BlockMask
            return flash_attention_forward(q, k, v, block_size=blk, loop_order=Q_OUTER, schedule=sched)

        def tiled_per_call():  # mask_mod alone: classifies the mask and evaluates partial tiles in every call
            return flash_attention_forward(q, k, v, block_size=blk, loop_order=Q_OUTER, mask_mod=mask_mod)

        flex_name = f"flex {flex_label}"
        # Two interleaved groups: SDPA first, then flex, so that each ratio is measured side by side and the
        # compiled kernel's OpenMP worker threads cannot slow the SDPA comparison.
        t = medians({"tiled": tiled, "tiled, schedule per call": tiled_per_call,
                     "sdpa dense mask": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=dense)},
                    args.repeats)
        t_flex = medians({"tiled": tiled, flex_name: flex_call}, args.repeats)
    print("\n1-2. document AND causal, median seconds (two interleaved groups); \"tiled\" and flex both reuse a "
          "mask structure built once (schedule / BlockMask)")
    rows = [{"group": "vs sdpa", "kernel": n, "time_s": f"{s:.4f}"} for n, s in t.items()]
    rows += [{"group": "vs flex", "kernel": n, "time_s": f"{s:.4f}"} for n, s in t_flex.items()]
    print_table(rows, ["group", "kernel", "time_s"])
    print(f"tiled / {flex_name}: {t_flex['tiled'] / t_flex[flex_name]:.2f}x (aim <= 1.3x, at most 2x)")
    sdpa_ratio = t["tiled"] / t["sdpa dense mask"]
    verdict = "PASS" if sdpa_ratio <= 0.35 else "MISS"
    print(f"tiled / SDPA dense boolean mask: {sdpa_ratio:.2f}x (target <= 0.35x): {verdict}; schedule built per "
          f"call: {t['tiled, schedule per call'] / t['sdpa dense mask']:.2f}x")
    sparsity_table(q, k, v, blk, lengths, args.repeats)
    where = f"document AND causal, B={B} H={H} N={N} d={d}, {blk}x{blk} tiles"
    figs = Figures()
    figs.add(f"tiled_x_flex_{flex_label.split()[0]}", t_flex["tiled"] / t_flex[flex_name], "x",  # compiled or eager
             f"forward time, tiled kernel (prebuilt schedule) / {flex_name} (BlockMask built once), {where}")
    figs.add("tiled_x_sdpa_dense", sdpa_ratio, "x",
             f"forward time, tiled kernel / SDPA with the dense boolean mask, {where}")
    figs.add("per_call_x_sdpa_dense", t["tiled, schedule per call"] / t["sdpa dense mask"], "x",
             f"forward time, tiled kernel building its schedule in every call / SDPA dense mask, {where}")
    figs.write(args.json)


def sparsity_table(q, k, v, blk: int, lengths: list[int], repeats: int) -> None:
    """3. Tiled time against the fraction of computed tiles, over the presets (interleaved with unmasked)."""
    N = q.shape[2]
    presets = {
        "none": noop_mask,  # no mask, on the same (mask_mod) path as the presets: every tile full
        "causal": M.causal_mask,
        "sliding_window(256, 0)": M.sliding_window(256, 0),
        "prefix_lm(N/4)": M.prefix_lm(N // 4),
        "document": M.document(lengths),
        "document AND causal": and_masks(M.document(lengths), M.causal_mask),
        "attention_sink(4, 256)": M.attention_sink(4, 256),
        "chunked(512)": M.chunked(512),
        "dilated(256, 2)": M.dilated(256, 2),
    }
    fractions, cands = {}, {}
    for name, mm in presets.items():
        sched = prebuilt_schedule(N, blk, blk, mm, heads=q.shape[1])
        c = sched.counts()
        fractions[name] = (c[FULL] + c[PARTIAL]) / sum(c.values())
        cands[name] = (lambda s=sched: flash_attention_forward(q, k, v, block_size=blk, loop_order=Q_OUTER,
                                                               schedule=s))
    t = medians(cands, repeats)
    print("\n3. tiled time against the fraction of computed tiles (q_outer, prebuilt schedule)")
    print_table([{"mask": n, "computed": f"{fractions[n]:.3f}", "time_s": f"{t[n]:.4f}",
                  "x_unmasked": f"{t[n] / t['none']:.3f}"} for n in presets],
                ["mask", "computed", "time_s", "x_unmasked"])


if __name__ == "__main__":
    main()
