"""Grouped-query and multi-query attention (H_kv < H) in every kernel, against SDPA with enable_gqa=True.

Oracle: torch's scaled_dot_product_attention(..., enable_gqa=True) in float64, which pairs query head h with K/V head
h // (H / H_kv), with the mask as an explicit boolean written in the test (tests/_oracle.py). Rule (flash-attention's
tests/test_flash_attn.py): a kernel's fp32 error against it is at most 1e-5 and at most twice plain PyTorch's (naive
attention in fp32); gradients at most twice naive's + a small floor, and with a custom scale equal to SDPA's autograd
in float64. Then what GQA is for: K and V are never copied per query head (peak memory stays far below one expanded
copy of K).

Legend: B batch, H query heads, H_kv key/value heads, G = H / H_kv, N_q / N_k lengths, d head dimension.
"""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

from flashviz import flash_attention, flash_attention_backward, flash_attention_forward, naive_attention
from flashviz.measure.memory import measure_memory
from tests._oracle import FLOOR, grid, make_qkv, max_err, reference_grads, visible
from tests.test_backward import ABS_FLOOR

LOOP_ORDERS = ["kv_outer", "q_outer"]
HEADS = [(4, 4), (8, 2), (6, 3), (5, 1)]  # (H, H_kv): MHA, GQA G=4, GQA G=2, MQA
MASKS = [{}, {"causal": True}, {"window": (20, 5)}, {"causal": True, "window": (16, None)}]
# (N_q, N_k, d, Br, Bc): odd sizes, blocks that do not divide N, N_q != N_k both ways, a single query row
SHAPES = [(97, 97, 16, 32, 24), (61, 130, 59, 16, 48), (130, 61, 24, 48, 16), (1, 33, 8, 8, 8)]


def _ids(mask: dict) -> str:
    return "-".join(f"{k}={v}" for k, v in mask.items()) or "dense"


def sdpa(q, k, v, causal=False, window=None):
    """SDPA with enable_gqa=True and the mask as an explicit boolean (True = visible), in q's dtype."""
    vis = visible(q.shape[2], k.shape[2], causal, window)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=vis, enable_gqa=True)


def grads(attn, q, k, v, dO, **kwargs):
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    return torch.autograd.grad(attn(q, k, v, **kwargs), (q, k, v), dO)


# ---------------------------------------------------------------------------------------------------------------------
# forward


# fast suite: the first shape with every head grouping and mask in FA2's order (G = 4 in FA1's too); the others with
# MQA, no mask and causal
@pytest.mark.parametrize(("shape", "heads", "mask", "loop_order"), grid(
    lambda shape, heads, mask, loop_order: not (
        (shape == SHAPES[0] and (loop_order == "q_outer" or heads == (8, 2)))
        or (heads == (5, 1) and mask in MASKS[:2])),
    shape=SHAPES, heads=HEADS, mask=MASKS, loop_order=LOOP_ORDERS))
def test_forward_matches_sdpa_enable_gqa(shape, heads, mask, loop_order):
    n_q, n_k, d, block_q, block_k = shape
    H, H_kv = heads
    q, k, v = make_qkv(2, H, n_q, n_k, d, seed=n_q + H_kv, h_kv=H_kv)
    ref = sdpa(q.double(), k.double(), v.double(), **mask)
    plain = naive_attention(q, k, v, **mask)
    out = flash_attention_forward(q, k, v, block_q=block_q, block_k=block_k, loop_order=loop_order, **mask)
    assert out.shape == q.shape and out.dtype == q.dtype
    err, plain_err = max_err(out, ref), max_err(plain, ref)
    assert err <= 1e-5 and err <= 2 * plain_err + FLOOR[q.dtype], (err, plain_err)
    assert max_err(plain, sdpa(q, k, v, **mask)) <= 1e-5  # naive itself agrees with SDPA in fp32


@pytest.mark.parametrize("mask", MASKS, ids=_ids)
@pytest.mark.parametrize("heads", HEADS, ids=str)
def test_naive_matches_sdpa_enable_gqa_in_float64(heads, mask):
    H, H_kv = heads
    q, k, v = make_qkv(2, H, 45, 70, 12, dtype=torch.float64, seed=H, h_kv=H_kv)
    torch.testing.assert_close(naive_attention(q, k, v, **mask), sdpa(q, k, v, **mask), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_gqa_within_twice_plain_pytorch(dtype, loop_order):
    q, k, v = make_qkv(1, 8, 97, 130, 32, dtype=dtype, seed=2, h_kv=2)
    ref = sdpa(q.double(), k.double(), v.double(), causal=True)
    out = flash_attention_forward(q, k, v, block_q=32, block_k=48, causal=True, loop_order=loop_order)
    assert out.dtype == dtype
    assert max_err(out, ref) <= 2 * max_err(naive_attention(q, k, v, causal=True), ref) + FLOOR[dtype]


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
def test_gqa_equals_mha_with_k_and_v_repeated_per_query_head(loop_order):
    # The definition of GQA: the same as MHA with K/V head h_kv copied to the G query heads of its group. The lse
    # and the on_tile events (batch 0, head 0: query head 0 with K/V head 0) must agree as well.
    q, k, v = make_qkv(2, 6, 70, 90, 16, dtype=torch.float64, seed=7, h_kv=2)
    k_rep, v_rep = (x.repeat_interleave(3, dim=1) for x in (k, v))  # (B, H, N_k, d): the test's oracle may copy
    ev_gqa, ev_mha = [], []
    kw = dict(block_q=16, block_k=32, causal=True, window=(40, None), loop_order=loop_order, return_lse=True)
    out, lse = flash_attention_forward(q, k, v, on_tile=ev_gqa.append, **kw)
    out_rep, lse_rep = flash_attention_forward(q, k_rep, v_rep, on_tile=ev_mha.append, **kw)
    torch.testing.assert_close(out, out_rep, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lse, lse_rep, rtol=1e-12, atol=1e-12)
    assert len(ev_gqa) == len(ev_mha) > 0
    for a, b in zip(ev_gqa, ev_mha, strict=True):
        assert (a.step, a.q_block, a.k_block, a.status) == (b.step, b.q_block, b.k_block, b.status)
        assert a.m.shape == (a.q_end - a.q_start,)
        torch.testing.assert_close(a.m, b.m, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(a.l, b.l, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
def test_rows_that_see_no_key_give_zeros_with_gqa(loop_order):
    q, k, v = make_qkv(1, 4, 40, 10, 8, seed=1, h_kv=2)
    out, lse = flash_attention_forward(q, k, v, block_size=4, window=(2, 0), loop_order=loop_order, return_lse=True)
    assert torch.equal(out[:, :, 12:], torch.zeros(1, 4, 28, 8)) and bool(torch.isneginf(lse[:, :, 12:]).all())
    ref = sdpa(q[:, :, :12].double(), k.double(), v.double(), window=(2, 0))
    assert max_err(out[:, :, :12], ref) <= 1e-5
    assert torch.equal(naive_attention(q, k, v, window=(2, 0))[:, :, 12:], torch.zeros(1, 4, 28, 8))


def test_empty_shapes_with_gqa():
    q, k, v = make_qkv(2, 4, 0, 5, 8, h_kv=2)
    assert flash_attention_forward(q, k, v).shape == (2, 4, 0, 8)
    q, k, v = make_qkv(2, 4, 5, 0, 8, h_kv=1)
    out, lse = flash_attention_forward(q, k, v, return_lse=True, loop_order="q_outer")
    assert torch.equal(out, torch.zeros(2, 4, 5, 8)) and bool(torch.isneginf(lse).all())
    q, k, v = make_qkv(0, 4, 5, 5, 8, h_kv=2)
    assert flash_attention(q, k, v).shape == naive_attention(q, k, v).shape == (0, 4, 5, 8)


# ---------------------------------------------------------------------------------------------------------------------
# backward


# fast suite: GQA G = 4 and MQA on the first shape with every mask; the other shapes once each, causal, G = 2
@pytest.mark.parametrize(("shape", "heads", "mask", "loop_order"), grid(
    lambda shape, heads, mask, loop_order: not ((shape == SHAPES[0] and heads in ((8, 2), (5, 1)))
                                                or (heads == (6, 3) and mask == {"causal": True})),
    shape=SHAPES[:3], heads=HEADS, mask=MASKS, loop_order=LOOP_ORDERS))
def test_grads_within_twice_naive_error(shape, heads, mask, loop_order):
    n_q, n_k, d, block_q, block_k = shape
    H, H_kv = heads
    q, k, v = make_qkv(2, H, n_q, n_k, d, seed=d + H, h_kv=H_kv)
    dO = torch.randn(q.shape, generator=torch.Generator().manual_seed(1))
    ref = grads(sdpa, *(x.double() for x in (q, k, v, dO)), **mask)
    base = grads(naive_attention, q, k, v, dO, **mask)
    got = grads(flash_attention, q, k, v, dO, block_q=block_q, block_k=block_k, loop_order=loop_order, **mask)
    for name, g, b, r in zip(("dq", "dk", "dv"), got, base, ref, strict=True):
        assert g.shape == b.shape == r.shape and g.dtype == q.dtype, name
        err, err_base = max_err(g, r), max_err(b, r)
        assert err <= 2 * err_base + ABS_FLOOR[torch.float32], f"{name}: {err:.3g} > 2 x naive {err_base:.3g}"


@pytest.mark.parametrize(("H", "H_kv", "mask"), [(4, 2, {}), (3, 1, {"causal": True}), (4, 1, {"window": (0, 0)})])
def test_gradcheck_float64_gqa(H, H_kv, mask):
    q, k, v = (x.requires_grad_() for x in make_qkv(1, H, 7, 5, 3, dtype=torch.float64, seed=H, h_kv=H_kv))
    attn = functools.partial(flash_attention, block_q=3, block_k=2, scale=0.7, **mask)
    assert torch.autograd.gradcheck(attn, (q, k, v), eps=1e-6, atol=1e-7)
    # gradcheck only shows the backward differentiates the forward; the values, scale 0.7 included, are SDPA's
    dO = torch.randn(q.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(H))
    for g, r in zip(grads(attn, q, k, v, dO), reference_grads(q, k, v, dO, scale=0.7, **mask), strict=True):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-10)


def test_kv_grads_sum_over_the_query_heads_of_the_group():
    # dK, dV of GQA = the MHA gradients of the repeated K/V summed over each group's G query heads
    q, k, v = make_qkv(2, 6, 33, 41, 8, dtype=torch.float64, seed=3, h_kv=3)
    dO = torch.randn(q.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    O, L = flash_attention_forward(q, k, v, 16, causal=True, return_lse=True)
    dq, dk, dv = flash_attention_backward(dO, q, k, v, O, L, 16, causal=True)
    k_rep, v_rep = (x.repeat_interleave(2, dim=1) for x in (k, v))
    dq_r, dk_r, dv_r = flash_attention_backward(dO, q, k_rep, v_rep, O, L, 16, causal=True)
    torch.testing.assert_close(dq, dq_r)
    torch.testing.assert_close(dk, dk_r.view(2, 3, 2, 41, 8).sum(2))
    torch.testing.assert_close(dv, dv_r.view(2, 3, 2, 41, 8).sum(2))


# ---------------------------------------------------------------------------------------------------------------------
# K/V are read once per group, never expanded

@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
@pytest.mark.parametrize("mask", [{}, {"causal": True}], ids=_ids)
def test_kv_is_never_copied_per_query_head(loop_order, mask):
    """Multi-query attention over a long cache: one copy of K expanded to the 8 query heads would alone take 2 MiB;
    the forward peaks far below it and a whole training step (dq, dk, dv included) below half of it."""
    B, H, H_kv, n_q, n_k, d = 1, 8, 1, 16, 4096, 16
    expanded = B * H * n_k * d * 4  # bytes of K (or V) repeated per query head, fp32
    q, k, v = make_qkv(B, H, n_q, n_k, d, seed=0, h_kv=H_kv)
    kw = dict(block_size=64, loop_order=loop_order, **mask)
    assert measure_memory(flash_attention_forward, q, k, v, **kw) < expanded / 8
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    dO = torch.ones(q.shape)

    def training_step():
        return torch.autograd.grad(flash_attention(q, k, v, **kw), (q, k, v), dO)

    assert measure_memory(training_step) < expanded / 2
    for g, r in zip(training_step(), grads(sdpa, q, k, v, dO, **mask), strict=True):
        assert max_err(g, r) <= 1e-4


# ---------------------------------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("fn", [naive_attention, flash_attention_forward, flash_attention])
def test_a_kv_head_count_that_does_not_divide_says_which_do(fn):
    q, k, v = make_qkv(1, 12, 8, 8, 4, h_kv=5)
    with pytest.raises(ValueError, match=r"H_kv=5 heads, which does not divide q's H_q=12.*divide 12: "
                                         r"1, 2, 3, 4, 6, 12 \(12 = multi-head, 1 = multi-query\)"):
        fn(q, k, v)
    with pytest.raises(ValueError, match=r"k and v must have the same number of heads.*k H=4 and v H=2"):
        fn(q, k[:, :1].expand(1, 4, 8, 4), v[:, :1].expand(1, 2, 8, 4))
    with pytest.raises(ValueError, match=r"H_kv=8 heads, which does not divide q's H_q=4"):
        fn(q[:, :4], k[:, :1].expand(1, 8, 8, 4), v[:, :1].expand(1, 8, 8, 4))  # more K/V heads than query heads
