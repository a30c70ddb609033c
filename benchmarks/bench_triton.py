"""The Triton kernel (flashviz.triton) timed side by side with SDPA and flashviz's torch kernel (flash_attention).

On CUDA the kernel is compiled: fp16 by default, forward and forward + backward at each N, causal and not, with each
implementation's TFLOP/s (attention_flops) and its error against SDPA in float64 at the smallest N. Without CUDA it
runs under Triton's interpreter (numpy, program after program): the times are the interpreter's, for the record of
what a CPU costs, not a kernel's speed; fp32 and small N.
Run:  PYTHONPATH=$PWD python benchmarks/bench_triton.py                      (CUDA: N = 1024 .. 8192, B=4, H=16, d=64)
      PYTHONPATH=$PWD python benchmarks/bench_triton.py --ns 64,256 --repeats 3   (the interpreter: a few seconds)
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import torch
from _common import device_sync, interleaved_medians, print_table  # benchmarks/ is on sys.path when run

from flashviz import flash_attention
from flashviz import triton as ft  # it sets TRITON_INTERPRET where there is no CUDA, before triton is imported
from flashviz.model.flops import attention_flops

CUDA_NS, CPU_NS = (1024, 2048, 4096, 8192), (64, 256)


def rows_for(n: int, causal: bool, *, batch: int, heads: int, d: int, dtype: torch.dtype, device: torch.device,
             repeats: int, backward: bool) -> list[dict]:
    """One row per implementation at (n, causal): median seconds, TFLOP/s and error against float64 SDPA."""
    g = torch.Generator().manual_seed(n)
    q64, k64, v64 = (torch.randn(batch, heads, n, d, generator=g, dtype=torch.float64) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, is_causal=causal)
    q, k, v = (t.to(device=device, dtype=dtype).requires_grad_(backward) for t in (q64, k64, v64))
    impls = {"triton": lambda: ft.attention(q, k, v, causal=causal),
             "sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal),
             "flashviz torch": lambda: flash_attention(q, k, v, causal=causal, block_q=64, block_k=64)}

    def step(fn):
        return (lambda: fn().sum().backward()) if backward else fn

    seconds = interleaved_medians({name: step(fn) for name, fn in impls.items()}, repeats=repeats,
                                  sync=device_sync(device))
    flops = attention_flops(n, n, d, batch=batch, heads=heads, causal=causal, training=backward)
    out = []
    for name, fn in impls.items():
        with torch.no_grad():
            err = (fn().double().cpu() - ref).abs().max().item()
        out.append({"N": n, "causal": causal, "impl": name, "ms": f"{seconds[name] * 1e3:.2f}",
                    "TFLOP/s": f"{flops / seconds[name] / 1e12:.3g}", "max err": f"{err:.1e}"})
    return out


def main(argv: Sequence[str] | None = None) -> list[dict]:
    cuda = torch.cuda.is_available() and not ft.interpreted()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ns", default=",".join(map(str, CUDA_NS if cuda else CPU_NS)))
    parser.add_argument("--batch", type=int, default=4 if cuda else 1)
    parser.add_argument("--heads", type=int, default=16 if cuda else 2)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--dtype", default="float16" if cuda else "float32", choices=("float16", "bfloat16",
                                                                                         "float32"))
    parser.add_argument("--repeats", type=int, default=10 if cuda else 3)
    parser.add_argument("--backward", action="store_true", help="time forward + backward instead of the forward")
    args = parser.parse_args(argv)
    device = torch.device("cuda" if cuda else "cpu")
    rows = [r for n in map(int, args.ns.split(",")) for causal in (False, True)
            for r in rows_for(n, causal, batch=args.batch, heads=args.heads, d=args.d,
                              dtype=getattr(torch, args.dtype), device=device, repeats=args.repeats,
                              backward=args.backward)]
    where = f"compiled on {torch.cuda.get_device_name()}" if cuda else "Triton interpreter on the CPU"
    what = "forward + backward" if args.backward else "forward"
    print(f"{where}: B={args.batch} H={args.heads} d={args.d} {args.dtype}, {what}")
    print_table(rows, ["N", "causal", "impl", "ms", "TFLOP/s", "max err"])
    return rows


if __name__ == "__main__":
    main()
