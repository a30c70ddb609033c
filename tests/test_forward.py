"""Tiled forward against the oracle chain: SDPA -> naive -> flash (both loop orders).

The oracles (tests/_oracle.py) are torch's SDPA in float64 with the caller's scale and an explicit mask, and the
formula softmax(score_mod(scale q k^T) + mask) v written out in float64: none of them shares code with flashviz.
"""

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from flashviz import flash_attention_forward, naive_attention
from flashviz.core.softmax import online_softmax_step
from flashviz.masks import alibi, document, softcap
from tests._oracle import (
    FLOOR,
    assert_within_oracle_bound,
    dense_mask,
    formula_reference,
    make_qkv,
    max_err,
    reference,
    sdpa_reference,
    visible,
)

LOOP_ORDERS = ["kv_outer", "q_outer"]
MASKS = [
    dict(causal=False, window=None),
    dict(causal=True, window=None),
    dict(causal=False, window=(32, 0)),
    dict(causal=True, window=(16, 16)),
    dict(causal=False, window=(None, 7)),
]


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("n", [128, 300, pytest.param(1024, marks=pytest.mark.slow)])
def test_matches_sdpa_within_1e_5(n, d, causal, loop_order):
    q, k, v = make_qkv(2, 3, n, n, d, seed=n + d)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out = flash_attention_forward(q, k, v, block_size=128, causal=causal, loop_order=loop_order)
    assert out.dtype == q.dtype and out.shape == q.shape
    assert max_err(out, expected) < 1e-5


# Odd sizes that hit tile edges; the largest sizes run with the causal and unmasked cases only. The fast suite keeps
# N = 1025 at d = 16 and N = 257 at d <= 128; the rest runs in the slow one.
ODD_CASES = [
    pytest.param(n_q, n_k, d, mask, marks=[pytest.mark.slow] if (n_q == 1025 and d > 16) or (
        257 in (n_q, n_k) and d in (111, 256)) else [])
    for n_q, n_k in [(1, 1), (97, 97), (257, 257), (1025, 1025), (97, 257), (257, 97)]
    for d in [16, 59, 111, 128, 256]
    for mask in MASKS
    if n_q * n_k * d <= 257 * 257 * 128 or mask["window"] is None
]


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
@pytest.mark.parametrize("n_q,n_k,d,mask", ODD_CASES, ids=str)
def test_fp32_against_fp64_reference_odd_sizes(n_q, n_k, d, mask, loop_order):
    q, k, v = make_qkv(1, 2, n_q, n_k, d, seed=n_q * 7 + d)
    out = flash_attention_forward(q, k, v, block_q=64, block_k=48, loop_order=loop_order, **mask)
    assert_within_oracle_bound(out, q, k, v, **mask)


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
@pytest.mark.parametrize("block_q,block_k", [pytest.param(1, 1, marks=pytest.mark.slow), (3, 5), (16, 64), (100, 7),
                                             (97, 97), (512, 512)])
def test_any_block_sizes(block_q, block_k, loop_order):
    q, k, v = make_qkv(2, 2, 97, 61, 24, seed=block_q)
    for mask in MASKS:
        out = flash_attention_forward(q, k, v, block_q=block_q, block_k=block_k, loop_order=loop_order, **mask)
        assert_within_oracle_bound(out, q, k, v, **mask)


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mask", MASKS[:3], ids=str)
def test_half_precision_within_twice_plain_pytorch(dtype, mask, loop_order):
    q, k, v = make_qkv(1, 2, 193, 150, 64, dtype=dtype, seed=3)
    out = flash_attention_forward(q, k, v, block_q=64, block_k=32, loop_order=loop_order, **mask)
    assert out.dtype == dtype
    assert_within_oracle_bound(out, q, k, v, **mask)


UNIT_ROUNDOFF = {torch.float16: 2**-11, torch.bfloat16: 2**-8}  # half an ulp relative: 11 and 8 significand bits


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mask", MASKS[:3], ids=str)
def test_half_inputs_accumulate_in_fp32_so_only_the_output_rounding_is_lost(dtype, mask, loop_order):
    """With fp32 accumulators the only half-precision step is rounding O to the output dtype: every element is
    within two unit roundoffs of the float64 oracle (on the same half inputs), plus fp32's own slack. Accumulating
    in fp16 / bf16 over 150 keys is off by hundreds of unit roundoffs."""
    q, k, v = make_qkv(1, 2, 193, 150, 64, dtype=dtype, seed=3)
    out = flash_attention_forward(q, k, v, block_q=64, block_k=32, loop_order=loop_order, **mask)
    ref = reference(q, k, v, **mask)
    bound = 2 * UNIT_ROUNDOFF[dtype] * ref.abs() + 1e-6
    assert ((out.double() - ref).abs() <= bound).all(), ((out.double() - ref).abs() / bound).max()


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
def test_lse_matches_logsumexp_of_masked_scores(loop_order):
    q, k, v = make_qkv(2, 2, 70, 90, 32, dtype=torch.float64, seed=5)
    for mask in MASKS:
        _, lse = flash_attention_forward(q, k, v, block_q=16, block_k=32, loop_order=loop_order, return_lse=True,
                                         **mask)
        scores = (q @ k.transpose(-2, -1)) / 32**0.5
        scores = scores.masked_fill(~visible(70, 90, **mask), float("-inf"))
        assert lse.shape == (2, 2, 70)
        torch.testing.assert_close(lse, torch.logsumexp(scores, -1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
def test_rows_that_see_no_key_give_zeros_and_minus_inf(loop_order):
    # 40 queries, 10 keys, window (2, 0): queries 13.. see no key (i - 2 > 9)
    q, k, v = make_qkv(1, 2, 40, 10, 8, seed=1)
    out, lse = flash_attention_forward(q, k, v, block_size=4, window=(2, 0), loop_order=loop_order, return_lse=True)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any()
    assert torch.equal(out[:, :, 12:], torch.zeros_like(out[:, :, 12:]))
    assert bool(torch.isinf(lse[:, :, 12:]).all()) and bool((lse[:, :, 12:] < 0).all())
    assert_within_oracle_bound(out[:, :, :12], q[:, :, :12], k, v, window=(2, 0))
    # the oracle follows the same convention
    assert torch.equal(naive_attention(q, k, v, window=(2, 0))[:, :, 12:], torch.zeros(1, 2, 28, 8))


def test_online_softmax_step_folds_tiles_into_the_row_softmax():
    # Two tiles of one row block, the second with a row that sees nothing in either: the running (m, l) after both
    # steps is the max and sum of the whole row (base 2), and the fully masked row keeps m = -inf, l = 0, no NaN.
    g = torch.Generator().manual_seed(0)
    S = torch.randn(2, 3, 10, generator=g, dtype=torch.float64)  # (BH, Br, 2 Bc): two tiles of Bc = 5
    S[:, 2] = float("-inf")  # row 2 sees no key
    m = torch.full((2, 3), float("-inf"), dtype=torch.float64)
    l = torch.zeros(2, 3, dtype=torch.float64)
    m_first = None
    for tile in (S[..., :5], S[..., 5:]):
        P, m_new, l, alpha = online_softmax_step(tile.clone(), m, l, partial=True)  # P overwrites its input
        assert not (torch.isnan(P).any() or torch.isnan(l).any() or torch.isnan(alpha).any())
        torch.testing.assert_close(P, torch.exp2(tile - m_new.clamp(min=-1e300).unsqueeze(-1)))  # 2^(S - m_new)
        m_first = m_new if m_first is None else m_first
        m = m_new
    torch.testing.assert_close(alpha[:, :2], torch.exp2(m_first[:, :2] - m[:, :2]))  # rescales the first tile
    torch.testing.assert_close(m[:, :2], S[:, :2].amax(-1))
    torch.testing.assert_close(l[:, :2], torch.exp2(S[:, :2] - m[:, :2, None]).sum(-1))
    assert bool(torch.isneginf(m[:, 2]).all()) and bool((l[:, 2] == 0).all()) and bool((alpha[:, 2] == 0).all())


def test_empty_sequences():
    q, k, v = make_qkv(1, 1, 0, 5, 8)
    assert flash_attention_forward(q, k, v).shape == (1, 1, 0, 8)
    q, k, v = make_qkv(1, 1, 5, 0, 8)
    out, lse = flash_attention_forward(q, k, v, return_lse=True)
    assert torch.equal(out, torch.zeros(1, 1, 5, 8)) and bool(torch.isneginf(lse).all())


def test_loop_orders_agree_and_custom_scale():
    q, k, v = make_qkv(2, 4, 130, 130, 40, seed=9)
    a = flash_attention_forward(q, k, v, 32, scale=0.3, causal=True, loop_order="kv_outer")
    b = flash_attention_forward(q, k, v, 32, scale=0.3, causal=True, loop_order="q_outer")
    assert max_err(a, b) < 1e-5
    assert_within_oracle_bound(a, q, k, v, causal=True, scale=0.3)


# ---------------------------------------------------------------------------------------------------------------------
# the user's scale, with every option, against the independent oracles

SCALES = [0.3, -0.7, 2.5]  # none of them is 1/sqrt(d): a kernel that ignores the scale gets every one wrong
OPTIONS = {  # name -> options of one call; (B, H, H_kv) = (2, 4, 2) everywhere: grouped-query heads
    "dense": {},
    "causal": {"causal": True},
    "window": {"window": (7, 2)},
    "causal_window": {"causal": True, "window": (5, None)},
    "mask_mod": {"mask_mod": document([12, 25])},
    "score_mod": {"score_mod": softcap(2.0)},
    "mask_and_score_mod": {"mask_mod": document([20, 17]), "score_mod": alibi(4), "causal": True},
}


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("option", OPTIONS, ids=str)
def test_a_custom_scale_reaches_every_forward_kernel_and_option(option, scale):
    options = OPTIONS[option] | {"scale": scale}
    q, k, v = make_qkv(2, 4, 37, 37, 8, seed=len(option), h_kv=2)
    ref = reference(q, k, v, **options)
    plain = naive_attention(q, k, v, **options)
    assert max_err(plain, ref) <= 1e-5  # naive against the oracle: the first link of the chain
    for loop_order in ("kv_outer", "q_outer"):
        out, lse = flash_attention_forward(q, k, v, block_q=16, block_k=8, loop_order=loop_order, return_lse=True,
                                           **options)
        err = max_err(out, ref)
        assert err <= 1e-5 and err <= 2 * max_err(plain, ref) + FLOOR[q.dtype], (loop_order, err)
        if "score_mod" not in options:  # the logsumexp of the scaled, masked scores, natural log
            S = scale * q.double() @ k.double().repeat_interleave(2, dim=1).transpose(-2, -1)
            vis = dense_mask(2, 4, 37, 37, **{o: options[o] for o in ("causal", "window", "mask_mod") if o in options})
            S = S.masked_fill(~vis, float("-inf"))
            torch.testing.assert_close(lse.double(), torch.logsumexp(S, -1), rtol=1e-5, atol=1e-5)


def test_the_oracles_agree_with_each_other_and_with_flex_attention():
    """The written-out formula equals SDPA (scale, mask, GQA) and flex_attention (scale, mask_mod, score_mod)."""
    q, k, v = make_qkv(1, 4, 40, 40, 8, dtype=torch.float64, seed=3, h_kv=2)
    for options in ({"scale": 0.45, "causal": True}, {"scale": -1.3, "window": (6, 1)}, {"scale": 0.2}):
        torch.testing.assert_close(formula_reference(q, k, v, **options), sdpa_reference(q, k, v, **options))
    mm, sm = document([15, 25]), softcap(1.5)
    bm = create_block_mask(mm, 1, 4, 40, 40, device="cpu", BLOCK_SIZE=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        flex = flex_attention(q, k, v, score_mod=sm, block_mask=bm, scale=0.6, enable_gqa=True)
    torch.testing.assert_close(formula_reference(q, k, v, scale=0.6, mask_mod=mm, score_mod=sm), flex)


def test_non_contiguous_inputs():
    q, k, v = make_qkv(3, 2, 50, 50, 16, seed=2)
    qt, kt, vt = (t.transpose(0, 1).contiguous().transpose(0, 1) for t in (q, k, v))  # same values, odd strides
    assert not qt.is_contiguous()
    torch.testing.assert_close(flash_attention_forward(qt, kt, vt, 16), flash_attention_forward(q, k, v, 16))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cuda_matches_the_cpu_oracle(loop_order, dtype):
    q, k, v = make_qkv(2, 3, 257, 300, 64, dtype=dtype, seed=4, device="cuda")
    for mask in MASKS:
        out, lse = flash_attention_forward(q, k, v, block_q=64, block_k=128, loop_order=loop_order,
                                           return_lse=True, **mask)
        assert out.device.type == lse.device.type == "cuda" and out.dtype == dtype
        assert_within_oracle_bound(out.cpu(), q.cpu(), k.cpu(), v.cpu(), **mask)
