"""Shared test helpers: random inputs, the independent float64 oracles, and the error-bound rule of the oracle chain.

The oracles share no code with flashviz: the masks are written here from the conventions (causal top-left, query i
sees keys i - left <= j <= i + right), the softmax scale is the caller's number, and the attention itself is either
torch's scaled_dot_product_attention in float64 (`sdpa_reference`: scale=, attn_mask=, enable_gqa=) or the formula
softmax(score_mod(scale q k^T) + mask) v written out in float64 (`formula_reference`, differentiable, for score_mods
SDPA cannot express). A kernel that ignored the user's scale, or a mask off by one, disagrees with them even when
naive attention and the tiled kernels agree with each other. The chain: SDPA -> naive -> flash forward -> autograd
-> flash backward.

Rule (as flash-attention's own tests): a tiled kernel's error against an fp64 reference may be at most twice the
error of a plain PyTorch run (naive attention in the same dtype) against that reference, plus a tiny floor for
cases where the plain run happens to be exact.

Legend: B batch, H query heads, H_kv K/V heads (H_kv divides H; query head h reads K/V head h // (H / H_kv)),
N_q / N_k query / key lengths, d head dimension.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

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


def visible(n_q: int, n_k: int, causal: bool = False, window=None) -> torch.Tensor:
    """(N_q, N_k) bool, True = query i sees key j: j <= i under causal, i - left <= j <= i + right under a window
    (None on a side: unbounded), both when both are given."""
    i, j = torch.arange(n_q)[:, None], torch.arange(n_k)[None, :]
    vis = torch.ones(n_q, n_k, dtype=torch.bool)
    if causal:
        vis &= j <= i
    left, right = window if window is not None else (None, None)
    if left is not None:
        vis &= j >= i - min(left, 2**62)  # a reach past int64 sees every key
    if right is not None:
        vis &= j <= i + min(right, 2**62)
    return vis


def _index(B: int, H: int, n_q: int, n_k: int):
    """b (B,1,1,1), h (1,H,1,1), q_idx (1,1,N_q,1), kv_idx (1,1,1,N_k): FlexAttention's indices, broadcast."""
    return (torch.arange(B).view(B, 1, 1, 1), torch.arange(H).view(1, H, 1, 1), torch.arange(n_q).view(1, 1, n_q, 1),
            torch.arange(n_k).view(1, 1, 1, n_k))


def dense_mask(B: int, H: int, n_q: int, n_k: int, *, causal=False, window=None, mask_mod=None) -> torch.Tensor:
    """(B, H, N_q, N_k) bool, True = visible: causal AND window AND mask_mod(b, h, q_idx, kv_idx) (h: query head)."""
    vis = visible(n_q, n_k, causal, window).expand(B, H, n_q, n_k)
    if mask_mod is not None:
        vis = vis & mask_mod(*_index(B, H, n_q, n_k)).expand(B, H, n_q, n_k)
    return vis


def _scale(q: torch.Tensor, scale) -> float:
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)


def sdpa_reference(q, k, v, *, causal=False, window=None, scale=None, mask_mod=None) -> torch.Tensor:
    """torch's SDPA in float64 with the caller's scale, the mask as an explicit boolean attn_mask and enable_gqa.
    Rows that see no key are zeros (float64 SDPA runs the math kernel, which gives 0 there). Differentiable."""
    q, k, v = (t.double() for t in (q, k, v))
    B, H, n_q, _ = q.shape
    mask = (visible(n_q, k.shape[2], causal, window) if mask_mod is None  # (N_q, N_k) broadcasts: SDPA's fast path
            else dense_mask(B, H, n_q, k.shape[2], causal=causal, window=window, mask_mod=mask_mod))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=_scale(q, scale),
                                          enable_gqa=q.shape[1] != k.shape[1])


def formula_reference(q, k, v, *, causal=False, window=None, scale=None, mask_mod=None,
                      score_mod=None) -> torch.Tensor:
    """O = softmax(score_mod(scale q k^T) masked to -inf) v, written out in float64; rows that see no key are 0.

    score_mod(score, b, h, q_idx, kv_idx) gets the (B, H, N_q, N_k) scores and broadcast index tensors, as
    FlexAttention's. Differentiable (the all-masked rows have zero gradients, never NaN).
    """
    q, k, v = (t.double() for t in (q, k, v))
    B, H, n_q, _ = q.shape
    n_k = k.shape[2]
    G = H // k.shape[1] if k.shape[1] else 1
    k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)  # (B, H, N_k, d): the oracle may copy
    S = _scale(q, scale) * q @ k.transpose(-2, -1)  # (B, H, N_q, N_k)
    if score_mod is not None:
        S = score_mod(S, *_index(B, H, n_q, n_k)).expand(B, H, n_q, n_k)
    vis = dense_mask(B, H, n_q, n_k, causal=causal, window=window, mask_mod=mask_mod)
    S = S.masked_fill(~vis, float("-inf"))
    m = S.amax(-1, keepdim=True).detach() if n_k else S.new_zeros(B, H, n_q, 1)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # a row that sees nothing: exp(-inf - 0) = 0
    P = torch.exp(S - m)  # (B, H, N_q, N_k), 0 where masked
    l = P.sum(-1, keepdim=True)
    return (P / torch.where(l > 0, l, torch.ones_like(l))) @ v  # (B, H, N_q, d)


def reference(q, k, v, **options) -> torch.Tensor:
    """The float64 oracle of an attention call: SDPA, or the written-out formula when there is a score_mod."""
    if options.get("score_mod") is not None:
        return formula_reference(q, k, v, **options)
    return sdpa_reference(q, k, v, **{name: value for name, value in options.items() if name != "score_mod"})


def reference_grads(q, k, v, dO, **options) -> tuple[torch.Tensor, ...]:
    """(dq, dk, dv) in float64 of `reference` by autograd, for the upstream gradient dO."""
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    return torch.autograd.grad(reference(q, k, v, **options), (q, k, v), dO.double())


def assert_within_oracle_bound(out: torch.Tensor, q, k, v, **options) -> None:
    """Check out against the fp64 oracle with the twice-plain-PyTorch rule (plain: naive attention in q's dtype)."""
    ref = reference(q, k, v, **options)
    plain = naive_attention(q, k, v, **options)
    err, plain_err = max_err(out, ref), max_err(plain, ref)
    bound = 2 * plain_err + FLOOR[q.dtype]
    assert err <= bound, f"error {err:.3e} exceeds 2 x plain PyTorch error {plain_err:.3e} (+floor) for {options}"


def grid(slow, **axes) -> list:
    """Every combination of the axes (name -> values) as pytest.params in the order given, those for which
    slow(**combination) is true marked slow: a matrix whose corners run in the fast suite and the rest in the slow one.
    Ids join the values' str with '-'."""
    names = list(axes)
    return [pytest.param(*combo, id="-".join(map(str, combo)),
                         marks=[pytest.mark.slow] if slow(**dict(zip(names, combo, strict=True))) else [])
            for combo in itertools.product(*axes.values())]
