"""Shared test helpers: random inputs and the error-bound rule of the oracle chain.

Rule (as flash-attention's own tests): a tiled kernel's error against an fp64 reference may be at most twice the
error of a plain PyTorch run (naive attention in the same dtype) against that reference, plus a tiny floor for
cases where the plain run happens to be exact.
"""

from __future__ import annotations

import torch

from flashviz import naive_attention

FLOOR = {torch.float64: 1e-12, torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 1e-2}


def make_qkv(b, h, n_q, n_k, d, dtype=torch.float32, seed=0, device="cpu", h_kv=None):
    """q (b, h, n_q, d) and k, v (b, h_kv, n_k, d) (h_kv defaults to h), standard normal, made in fp64 then cast."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, n_q, d, generator=g, dtype=torch.float64)
    k, v = (torch.randn(b, h if h_kv is None else h_kv, n_k, d, generator=g, dtype=torch.float64) for _ in range(2))
    return tuple(t.to(device=device, dtype=dtype) for t in (q, k, v))


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0


def assert_within_oracle_bound(out: torch.Tensor, q, k, v, **mask) -> None:
    """Check out against an fp64 reference with the twice-plain-PyTorch rule."""
    ref = naive_attention(q.double(), k.double(), v.double(), **mask)
    plain = naive_attention(q, k, v, **mask)
    err, plain_err = max_err(out, ref), max_err(plain, ref)
    bound = 2 * plain_err + FLOOR[q.dtype]
    assert err <= bound, f"error {err:.3e} exceeds 2 x plain PyTorch error {plain_err:.3e} (+floor) for {mask}"
