"""What the forward's numerics options cost, and that the default path did not get slower.

Prints, for each loop order (FA1 kv_outer, FA2 q_outer), the default call flash_attention_forward(q, k, v) against
the same call with rescale_threshold=8.0 (FlashAttention-4's conditional rescale) and with p_dtype=torch.bfloat16
(P rounded before P V), as ratios to the default; with --checkout DIR (another checkout of this repository, e.g.
`git worktree add --detach /tmp/before <commit>`), also the default call of DIR's flashviz, imported in this same
process under its own copy of the package (each candidate runs with its own flashviz modules in sys.modules), so
every candidate is timed interleaved, call by call, with flashviz.measure.timing.time_calls.
Ratios > 1 are slower than this checkout's default path: the median over repeats of the paired ratio (each call
against the default call of the same repeat). Causal and dense, fp32, B = 1.
With --json PATH it also writes the headline ratios (tau = 8 / default and P bf16 / default, per loop order and mask,
and the checkout's default / this default with --checkout) for benchmarks/run_all.py.
Run:  PYTHONPATH=$PWD python benchmarks/bench_numerics.py
      PYTHONPATH=$PWD python benchmarks/bench_numerics.py --checkout /tmp/before --n 2048 --repeats 9
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch
from _common import Figures, add_json_arg, print_table  # benchmarks/ is on sys.path when run

from flashviz.core.flash import flash_attention_forward
from flashviz.measure.timing import time_calls

PACKAGE = "flashviz"
FIGURE_LABELS = {"tau=8": "time with tau = 8 (FA4's conditional rescale) / the default path",
                 "P bf16": "time with P rounded to bf16 before P V / the default path",
                 "checkout default": "the other checkout's default path / this checkout's"}


def _is_package_module(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".")


def package_modules() -> dict[str, ModuleType]:
    """The flashviz modules now in sys.modules (this checkout's, once imported)."""
    return {n: m for n, m in sys.modules.items() if _is_package_module(n)}


def load_checkout(root: Path) -> tuple[Callable, dict[str, ModuleType]]:
    """flash_attention_forward of the flashviz in `root`, imported as a second copy of the package, and that
    copy's modules; this checkout's modules are put back in sys.modules afterwards."""
    ours = package_modules()
    for name in ours:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    try:
        flash = importlib.import_module(f"{PACKAGE}.core.flash")
        theirs = package_modules()
    finally:
        sys.path.remove(str(root))
        for name in package_modules():
            del sys.modules[name]
        sys.modules.update(ours)
    if not Path(flash.__file__).resolve().is_relative_to(root):
        raise SystemExit(f"--checkout {root}: imported {flash.__file__}, not a module under {root}")
    return flash.flash_attention_forward, theirs


def with_modules(fn: Callable, modules: dict[str, ModuleType], **kwargs) -> Callable:
    """fn(q, k, v, **kwargs) run with `modules` as the flashviz in sys.modules (imports inside calls find them)."""

    def call(q, k, v):
        sys.modules.update(modules)
        return fn(q, k, v, **kwargs)

    return call


def paired_ratio(samples: tuple[float, ...], base: tuple[float, ...]) -> float:
    """The median over repeats of sample_r / base_r: calls of one repeat run back to back, so a burst of load on
    the shared machine hits both and cancels in their ratio (the ratio of the two medians does not cancel it)."""
    return statistics.median(a / b for a, b in zip(samples, base, strict=True))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1024, help="sequence length N = N_q = N_k")
    p.add_argument("--d", type=int, default=64, help="head dimension d")
    p.add_argument("--heads", type=int, default=8, help="heads H")
    p.add_argument("--block", type=int, default=64, help="tile size Br = Bc")
    p.add_argument("--repeats", type=int, default=7, help="interleaved timed calls per candidate")
    p.add_argument("--threads", type=int, default=None, help="intra-op threads (default: torch's current count)")
    p.add_argument("--checkout", type=lambda d: Path(d).resolve(), default=None, metavar="DIR",
                   help="another checkout of this repository whose default path is timed alongside")
    add_json_arg(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    before = None
    if args.checkout is not None:
        if not (args.checkout / PACKAGE / "core" / "flash.py").is_file():
            raise SystemExit(f"--checkout {args.checkout}: no flashviz/core/flash.py there; pass a checkout of this "
                             "repository")
        before = load_checkout(args.checkout)
    ours = package_modules()
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, args.heads, args.n, args.d, generator=g) for _ in range(3))
    rows = []
    figures = Figures()
    for loop_order in ("kv_outer", "q_outer"):
        for causal in (False, True):
            run = {"block_size": args.block, "loop_order": loop_order, "causal": causal}
            fns = {"default": with_modules(flash_attention_forward, ours, **run),
                   "tau=8": with_modules(flash_attention_forward, ours, rescale_threshold=8.0, **run),
                   "P bf16": with_modules(flash_attention_forward, ours, p_dtype=torch.bfloat16, **run)}
            if before is not None:
                fns["checkout default"] = with_modules(before[0], before[1], **run)
            t = time_calls(fns, q, k, v, warmup=1, repeats=args.repeats, threads=args.threads)
            base = t["default"].samples
            row = {"loop order": loop_order, "causal": causal, "default ms": f"{t['default'].median * 1e3:.1f}"}
            ratios = {name: paired_ratio(t[name].samples, base) for name in fns if name != "default"}
            row |= {f"{name} / default": f"{ratio:.3f}" for name, ratio in ratios.items()}
            rows.append(row)
            mask = "causal" if causal else "dense"
            for name, ratio in ratios.items():
                key = name.replace(" ", "_").replace("=", "").lower()
                figures.add(f"{loop_order}.{mask}.{key}", ratio, "x",
                            f"{'FA1' if loop_order == 'kv_outer' else 'FA2'} {mask}: {FIGURE_LABELS[name]}")
    threads = t["default"].threads
    print(f"B=1 H={args.heads} N={args.n} d={args.d} Br=Bc={args.block} fp32, {threads} threads, {args.repeats} "
          "interleaved repeats; ratios: the median over repeats of each call's time / the default call's in the same "
          "repeat (shared machine: compare the ratios, not the ms)")
    if before is not None:
        same = (fns["checkout default"](q, k, v) - fns["default"](q, k, v)).abs().max().item()
        print(f"checkout: {before[1]['flashviz'].__file__}; max |difference| of the two default outputs: {same:.2e}")
    print_table(rows, list(rows[0]))
    figures.write(args.json)


if __name__ == "__main__":
    main()
