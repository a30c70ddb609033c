"""flashviz.numerics: FlashAttention-3's FP8 forward emulated, its Hadamard rotation, the error measures and the
outlier inputs.

Oracles: an independent float64 emulation of FA3's FP8 rounding written in this file (per-block scales, the casts
torch's own .to(torch.float8_e4m3fn / e5m2) makes, P~ 2^8 rounded to FP8 against the running max of each K/V block,
l summed unrounded); float64 SDPA (is_causal, enable_gqa); the error measures' formulas written out here.

Legend: B batch, H query heads, H_kv K/V heads, N_q / N_k lengths, d head dimension, Bq the quantisation block.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from flashviz.numerics import (
    OUTLIER_CHANNELS,
    OUTLIER_SCALE,
    error_stats,
    fp8_attention,
    hadamard_matrix,
    make_inputs,
    quantize_blocks,
    random_rotation,
)

DTYPES = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def quantized(x, dt, block):
    """Per-(b, h) blocks of `block` rows along N: scale = amax / fp8 max, round with torch's cast, dequantise."""
    top = torch.finfo(dt).max
    out = torch.empty_like(x, dtype=torch.float64)
    for n0 in range(0, x.shape[2], block):
        xb = x[:, :, n0:n0 + block].double()
        amax = xb.abs().amax(dim=(-2, -1), keepdim=True)
        s = torch.where(amax > 0, amax / top, torch.ones_like(amax))
        out[:, :, n0:n0 + block] = (xb / s).float().clamp(-top, top).to(dt).double() * s
    return out


def emulated_fp8(q, k, v, fmt="e4m3", block=128, causal=False, M=None, round_p=True):
    """FA3's FP8 forward in float64 with the FP8 casts: S on dequantised Q, K; per K/V block, P~ = e^(S - m) 2^8
    added to l unrounded, rounded to FP8 before P~ V (unless not round_p)."""
    dt = DTYPES[fmt]
    if M is not None:
        q, k = q.double() @ M, k.double() @ M
    G = q.shape[1] // k.shape[1]
    Q, K, V = quantized(q, dt, block), quantized(k, dt, block), quantized(v, dt, block)
    K, V = K.repeat_interleave(G, 1), V.repeat_interleave(G, 1)
    S_all = Q @ K.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, H, N_q, N_k)
    if causal:
        S_all = S_all.masked_fill(torch.ones(S_all.shape[-2:], dtype=torch.bool).triu(1), -math.inf)
    m = torch.full(S_all.shape[:-1], -math.inf, dtype=torch.float64)
    l = torch.zeros_like(m)
    acc = torch.zeros(Q.shape, dtype=torch.float64)
    for j0 in range(0, S_all.shape[-1], block):
        S = S_all[..., j0:j0 + block]
        m_new = torch.maximum(m, S.amax(-1))
        P = torch.exp(S - m_new[..., None]) * 256.0
        alpha = torch.exp(m - m_new)
        l = alpha * l + P.sum(-1)
        P_r = P.float().to(dt).double() if round_p else P
        acc = alpha[..., None] * acc + P_r @ V[..., j0:j0 + block, :]
        m = m_new
    return acc / l[..., None]


def sdpa64(q, k, v, causal=False):
    return F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal, enable_gqa=True)


def rmse(a, b):
    return (a.double() - b.double()).pow(2).mean().sqrt().item()


@pytest.mark.parametrize(("fmt", "block", "causal", "shape"), [
    ("e4m3", 128, False, (2, 2, 97, 130, 32)),
    ("e4m3", 32, True, (1, 3, 130, 130, 16)),
    ("e5m2", 64, False, (1, 2, 61, 257, 64)),
    ("e5m2", 16, True, (1, 1, 100, 100, 8)),
])
def test_fp8_attention_matches_an_independent_float64_emulation(fmt, block, causal, shape):
    b, h, n_q, n_k, d = shape
    q, k, v = make_inputs(b, h, n_q, n_k, d, outliers=True, seed=n_q)
    out = fp8_attention(q, k, v, fmt=fmt, block_size=block, causal=causal)
    want = emulated_fp8(q, k, v, fmt, block, causal)
    exact = sdpa64(q, k, v, causal)
    assert out.dtype == torch.float32 and out.shape == q.shape
    fp8_error = rmse(want, exact)  # what FP8 costs: 1e-2 .. 1e-1
    assert rmse(out, want) <= min(fp8_error / 100, 1e-4)  # the same rounding (fp32-vs-fp64 ties flip a few)
    p_unrounded = emulated_fp8(q, k, v, fmt, block, causal, round_p=False)
    assert rmse(out, p_unrounded) > 5 * rmse(out, want)  # P~ really is rounded to FP8 before P~ V


def test_fp8_attention_with_hadamard_matches_the_emulation_with_the_same_rotation():
    q, k, v = make_inputs(1, 2, 100, 100, 64, outliers=True, seed=4)
    out = fp8_attention(q, k, v, hadamard=True, seed=7, block_size=64)
    want = emulated_fp8(q, k, v, block=64, M=random_rotation(64, seed=7))
    plain = emulated_fp8(q, k, v, block=64)
    assert rmse(out, want) <= rmse(want, sdpa64(q, k, v)) / 50
    assert rmse(out, plain) > 10 * rmse(out, want)  # the rotation really ran


def test_fp8_attention_gqa_reads_each_kv_head_for_its_query_heads():
    q, k, v = make_inputs(1, 6, 64, 80, 32, seed=1, h_kv=2)
    out = fp8_attention(q, k, v, block_size=32)
    wide = fp8_attention(q, k.repeat_interleave(3, 1), v.repeat_interleave(3, 1), block_size=32)
    torch.testing.assert_close(out, wide, rtol=0, atol=0)  # quantised per K/V head, then shared
    assert rmse(out, sdpa64(q, k, v)) < 0.05


def test_fp8_attention_causal_is_top_left_as_sdpa():
    q, k, v = make_inputs(1, 2, 40, 100, 32, seed=2)  # N_q < N_k: top-left and bottom-right differ
    out = fp8_attention(q, k, v, causal=True, block_size=32)
    top_left = sdpa64(q, k, v, causal=True)
    assert rmse(out, top_left) < 0.05
    vis = torch.arange(100)[None, :] <= torch.arange(40)[:, None] + 60
    bottom_right = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=vis)
    assert rmse(out, bottom_right) > 10 * rmse(out, top_left)


@pytest.mark.parametrize("d", [1, 2, 8, 64, 128])
def test_hadamard_rotation_is_orthogonal_and_leaves_qk_unchanged_in_float64(d):
    H = hadamard_matrix(d)
    assert torch.equal(H.abs(), torch.full((d, d), 1 / math.sqrt(d), dtype=torch.float64))
    M = random_rotation(d, seed=3)
    torch.testing.assert_close(M @ M.T, torch.eye(d, dtype=torch.float64), rtol=0, atol=1e-12)
    q, k, _ = make_inputs(2, 2, 50, 70, d, dtype=torch.float64, outliers=d >= OUTLIER_CHANNELS, seed=d)
    S, S_rot = q @ k.transpose(-1, -2), (q @ M) @ (k @ M).transpose(-1, -2)
    assert (S_rot - S).abs().max().item() <= 1e-12 * S.abs().max().item() + 1e-12


def test_the_rotation_spreads_an_outlier_channel_over_every_channel():
    d = 64
    q, _, _ = make_inputs(1, 1, 256, 256, d, dtype=torch.float64, outliers=True, seed=0)
    peak = q.abs().amax(dim=(0, 1, 2))  # per channel
    peak_rot = (q @ random_rotation(d, 0)).abs().amax(dim=(0, 1, 2))
    assert peak.max() / peak.median() > 3 and peak_rot.max() / peak_rot.median() < 2


@pytest.mark.parametrize("seed", range(5))
def test_hadamard_lowers_the_fp8_rmse_on_outlier_inputs_and_barely_moves_it_on_plain_ones(seed):
    for outliers, lower in ((True, 1.5), (False, None)):
        q, k, v = make_inputs(1, 4, 256, 256, 64, outliers=outliers, seed=seed)
        exact = sdpa64(q, k, v)
        off, on = (rmse(fp8_attention(q, k, v, hadamard=h, seed=seed), exact) for h in (False, True))
        if lower is not None:
            assert on * lower < off, (seed, off, on)
        else:
            assert abs(on - off) < 0.1 * off, (seed, off, on)


def test_quantize_blocks_keeps_each_block_max_exact_and_rounds_to_3_mantissa_bits():
    x = make_inputs(1, 2, 100, 100, 16, outliers=True, seed=5)[0]
    xq = quantize_blocks(x, "e4m3", block_size=32)
    for n0 in range(0, 100, 32):
        blk, blk_q = x[:, :, n0:n0 + 32], xq[:, :, n0:n0 + 32]
        torch.testing.assert_close(blk_q.abs().amax(dim=(-2, -1)), blk.abs().amax(dim=(-2, -1)), rtol=1e-6, atol=0)
        amax = blk.abs().amax(dim=(-2, -1), keepdim=True)
        normal = blk.abs() >= amax * 2.0 ** -6 / 448  # above e4m3's smallest normal, relative to the block scale
        rel = ((blk_q - blk).abs() / blk.abs().clamp(min=1e-30))[normal]
        assert rel.max().item() <= 2.0 ** -4 + 1e-6  # half an ulp of 3 mantissa bits
    assert torch.equal(quantize_blocks(torch.zeros(1, 1, 4, 2)), torch.zeros(1, 1, 4, 2))  # no 0 / 0


def test_error_stats_against_the_formulas():
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(2, 3, 7, 5, generator=g, dtype=torch.float64)
    out = (ref + 0.01 * torch.randn(ref.shape, generator=g, dtype=torch.float64)).float()
    e = error_stats(out, ref)
    diff = out.double() - ref
    assert e.max_abs == diff.abs().max().item()
    assert math.isclose(e.rmse, math.sqrt((diff ** 2).sum().item() / diff.numel()), rel_tol=1e-12)
    assert math.isclose(e.rel_rmse, e.rmse / math.sqrt((ref ** 2).mean().item()), rel_tol=1e-12)
    assert e.row_max_abs == tuple(max(abs(diff[b, h, i, c].item()) for b in range(2) for h in range(3)
                                      for c in range(5)) for i in range(7))


def test_make_inputs_outliers_are_a_few_shared_channels_of_q_and_k_and_seeded():
    q, k, v = make_inputs(1, 2, 2000, 2000, 64, dtype=torch.float64, outliers=True, seed=9)
    big_q = q.std(dim=(0, 1, 2)) > 2
    big_k = k.std(dim=(0, 1, 2)) > 2
    assert big_q.sum() == OUTLIER_CHANNELS and torch.equal(big_q, big_k)  # the same channels in q and k
    torch.testing.assert_close(q.std(dim=(0, 1, 2))[big_q], torch.full((4,), OUTLIER_SCALE, dtype=torch.float64),
                               rtol=0.1, atol=0)
    assert (v.std(dim=(0, 1, 2)) < 1.2).all()  # v has no outliers
    again = make_inputs(1, 2, 2000, 2000, 64, dtype=torch.float64, outliers=True, seed=9)
    assert all(torch.equal(a, b) for a, b in zip((q, k, v), again, strict=True))
    sparse = make_inputs(1, 4, 1000, 1000, 64, dtype=torch.float64, outliers="sparse", seed=1)[0]
    assert 0.0003 < (sparse.abs() > 6).double().mean().item() < 0.003  # ~0.1% of entries + N(0, 10^2)


@pytest.mark.parametrize(("call", "error", "words"), [
    ({"fmt": "e3m4"}, ValueError, "fmt must be one of"),
    ({"fmt": "e4m3", "hadamard": True, "d": 48}, ValueError, "power of two"),
    ({"hadamard": "yes"}, TypeError, "hadamard must be True or False"),
    ({"block_size": 0}, ValueError, "block_size must be >= 1"),
    ({"causal": 1}, TypeError, "causal must be True or False"),
])
def test_fp8_attention_bad_arguments_raise_errors_that_teach(call, error, words):
    call = dict(call)
    d = call.pop("d", 32)
    q, k, v = make_inputs(1, 1, 8, 8, d)
    with pytest.raises(error, match=words) as info:
        fp8_attention(q, k, v, **call)
    assert "got" in str(info.value)


def test_non_power_of_two_d_says_how_to_pad():
    with pytest.raises(ValueError, match="pad the head dimension with zeros to 64"):
        hadamard_matrix(48)


@pytest.mark.parametrize("bad", [{"outliers": "many"}, {"outlier_scale": 0.0}, {"outlier_scale": float("inf")}])
def test_make_inputs_bad_options_raise(bad):
    with pytest.raises(ValueError, match="got"):
        make_inputs(1, 1, 4, 4, 8, **bad)
