"""flashviz.triton's kernel against the oracle chain: its forward within 1e-5 of float64, its gradients within twice
plain PyTorch's own error, its arguments checked; on CUDA, the compiled kernel in fp16 and bf16.

Here (no CUDA) the kernel runs under Triton's interpreter, so the sizes stay small: every case takes well under a
second. Oracle: torch's SDPA in float64 (tests/_oracle.py), never the project's kernels.

Legend: B batch, H heads, N sequence length, d head dimension, Br = block_m, Bc = block_n.
"""

from __future__ import annotations

import pytest
import torch

from flashviz import triton as ft  # before triton: it sets TRITON_INTERPRET where there is no CUDA
from flashviz.core.reference import naive_attention
from tests._oracle import FLOOR, make_qkv, max_err, reference, reference_grads

pytest.importorskip("flashviz.triton.kernel")
pytest.importorskip("numpy")

CUDA = torch.cuda.is_available()
FORWARD_TOL = 1e-5  # fp32 forward against float64: the bound the issue sets


@pytest.mark.parametrize("tiles", [(64, 32), (32, 32)], ids=lambda t: f"{t[0]}x{t[1]}")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [32, 64])
@pytest.mark.parametrize("n", [64, 200, 256])  # 200: ragged in both Q and K blocks
def test_forward_fp32_within_1e5_of_float64(n, d, causal, tiles):
    q, k, v = make_qkv(1, 2, n, n, d, seed=n + d)
    out = ft.attention(q, k, v, causal=causal, block_m=tiles[0], block_n=tiles[1])
    assert out.dtype == torch.float32 and out.shape == q.shape
    err = max_err(out, reference(q, k, v, causal=causal))
    assert err <= FORWARD_TOL, f"error {err:.2e} against float64"


@pytest.mark.parametrize(("n", "causal", "tiles"), [(64, False, (64, 32)), (200, True, (64, 32)),
                                                    (200, False, (32, 32)), (256, True, (32, 16))])
def test_gradients_within_twice_plain_autograd(n, causal, tiles):
    q, k, v = make_qkv(2, 2, n, n, 32, seed=7 * n)
    dO = torch.randn(q.shape, generator=torch.Generator().manual_seed(n))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    got = torch.autograd.grad(ft.attention(*leaves, causal=causal, block_m=tiles[0], block_n=tiles[1]), leaves, dO)
    plain = [t.clone().requires_grad_() for t in (q, k, v)]
    base = torch.autograd.grad(naive_attention(*plain, causal=causal), plain, dO)
    ref = reference_grads(q, k, v, dO, causal=causal)
    for name, g, b, r in zip("qkv", got, base, ref, strict=True):
        bound = 2 * max_err(b, r) + FLOOR[torch.float32]
        assert max_err(g, r) <= bound, f"d{name}: {max_err(g, r):.2e} > 2 x plain {max_err(b, r):.2e} (+floor)"


def test_the_users_scale_and_a_single_row():
    q, k, v = make_qkv(1, 1, 1, 1, 16, seed=3)
    assert max_err(ft.attention(q, k, v, causal=True), v) <= FORWARD_TOL  # one key: O = V
    q, k, v = make_qkv(1, 1, 50, 50, 16, seed=4)
    out = ft.attention(q, k, v, scale=0.3, block_m=16, block_n=16)
    assert max_err(out, reference(q, k, v, scale=0.3)) <= FORWARD_TOL
    assert max_err(out, reference(q, k, v)) > 1e-3  # the default scale would be another answer


@pytest.mark.parametrize(("shape", "blocks", "words"), [
    ((1, 1, 8, 24), (64, 32), "power of two"),
    ((1, 1, 8, 16), (64, 48), "power of two"),
    ((1, 1, 8, 16), (32, 64), "must divide"),
    ((1, 1, 8, 16), (8, 8), "at least 16"),
])
def test_bad_arguments_say_how_to_fix(shape, blocks, words):
    q = torch.zeros(shape)
    with pytest.raises(ValueError, match=words):
        ft.attention(q, q, q, block_m=blocks[0], block_n=blocks[1])


def test_gqa_shapes_are_refused_with_a_way_out():
    q, k = torch.zeros(1, 4, 8, 16), torch.zeros(1, 2, 8, 16)
    with pytest.raises(ValueError, match="repeat_interleave"):
        ft.attention(q, k, k)


@pytest.mark.skipif(not CUDA, reason="the compiled kernel needs a CUDA GPU (here it runs under the interpreter)")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_cuda_compiled_half_precision_within_twice_plain(dtype, causal):
    q, k, v = make_qkv(2, 4, 1000, 1000, 64, dtype=dtype, device="cuda", seed=11)
    out = ft.attention(q, k, v, causal=causal, block_m=64, block_n=32)
    ref = reference(q.cpu(), k.cpu(), v.cpu(), causal=causal)
    plain = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert max_err(out.cpu(), ref) <= 2 * max_err(plain.cpu(), ref) + FLOOR[dtype]


@pytest.mark.skipif(not CUDA, reason="the compiled kernel needs a CUDA GPU (here it runs under the interpreter)")
def test_cuda_compiled_gradients_within_twice_plain():
    q, k, v = make_qkv(1, 2, 300, 300, 64, dtype=torch.float16, device="cuda", seed=12)
    dO = torch.randn_like(q)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    got = torch.autograd.grad(ft.attention(*leaves, causal=True), leaves, dO)
    plain = [t.clone().requires_grad_() for t in (q, k, v)]
    base = torch.autograd.grad(torch.nn.functional.scaled_dot_product_attention(*plain, is_causal=True), plain, dO)
    ref = reference_grads(*(t.cpu() for t in (q, k, v, dO)), causal=True)
    for g, b, r in zip(got, base, ref, strict=True):
        assert max_err(g.cpu(), r) <= 2 * max_err(b.cpu(), r) + FLOOR[torch.float16]


def test_the_benchmark_times_the_three_side_by_side(capsys):
    """benchmarks/bench_triton.py here: the interpreter's times next to SDPA's and the torch kernel's, all correct."""
    from bench_triton import main  # benchmarks/ is on pytest's pythonpath

    rows = main(["--ns", "48", "--repeats", "1", "--heads", "1"])
    assert [(r["causal"], r["impl"]) for r in rows] == [(c, i) for c in (False, True)
                                                         for i in ("triton", "sdpa", "flashviz torch")]
    assert all(float(r["ms"]) > 0 and float(r["max err"]) <= FORWARD_TOL for r in rows)
    assert "Triton interpreter on the CPU" in capsys.readouterr().out or CUDA
