"""The forward's numerics options: FlashAttention-4's conditional rescale (rescale_threshold) and P rounded to a
low-precision dtype before P V (p_dtype).

Oracles: the scores S = scale log2(e) q k^T computed in float64 in this file, walked tile by tile with the threshold
rule written here (which rows move their max at which tile); float64 attention written here; an emulation in float64
of P~ rounded with torch's own .to(dtype) casts. Rule for the outputs: tau = 8 equals tau = 0 to fp32 rounding, and
both are within flash-attn's bound (twice plain PyTorch's fp32 error against float64).

Legend: B batch, H query heads, H_kv K/V heads, N_q / N_k lengths, d head dimension, Br x Bc tiles, tau in log2 units.
"""

from __future__ import annotations

import math

import pytest
import torch

from flashviz import flash_attention_forward, naive_attention
from flashviz import masks as M
from tests._oracle import FLOOR, make_qkv, max_err

LOOP_ORDERS = ["kv_outer", "q_outer"]
LOG2_E = 1 / math.log(2)
# (call, H, H_kv, N_q, N_k): plain, causal with N_q != N_k, a mask_mod (sliding window) and a window, GQA, a score_mod
CASES = {
    "dense": ({}, 2, 2, 97, 130),
    "causal": ({"causal": True}, 2, 2, 130, 97),
    "mask_mod": ({"mask_mod": M.sliding_window(40)}, 2, 2, 120, 120),
    "window": ({"window": (30, 5)}, 2, 2, 97, 97),
    "gqa": ({"causal": True}, 6, 2, 100, 100),
    "score_mod": ({"score_mod": M.softcap(30.0)}, 2, 1, 90, 90),
}


def spiky(h, h_kv, n_q, n_k, d=32, seed=0, spread=3.0):
    """Inputs whose scores vary by tens of log2 units, so that maxima keep moving and tau matters."""
    q, k, v = make_qkv(1, h, n_q, n_k, d, seed=seed, h_kv=h_kv)
    return q * spread, k * spread, v


def visible(n_q, n_k, call):
    """(N_q, N_k) bool, True where query i sees key j, from the mask written out here (top-left causal)."""
    i, j = torch.arange(n_q)[:, None], torch.arange(n_k)[None, :]
    vis = torch.ones(n_q, n_k, dtype=torch.bool)
    if call.get("causal"):
        vis &= j <= i
    if "window" in call:
        left, right = call["window"]
        vis &= (j >= i - left) & (j <= i + right)
    if "mask_mod" in call:  # the preset sliding_window(40): i - 40 <= j <= i (causal)
        vis &= (j <= i) & (j >= i - 40)
    return vis


def recount(q, k, call, block, tau):
    """Per (q_block, k_block) of every computed tile: the rows of batch 0, head 0 that rescale, walked in float64.

    A tile is computed when it holds a visible element; each row visits its tiles in increasing k_block (both loop
    orders), keeps a running max m (-inf at first) and moves it to the tile's max only when that exceeds m by more
    than tau; a move from a finite m is a rescale, the first visible key only sets m.
    """
    n_q, n_k, d = q.shape[2], k.shape[2], q.shape[3]
    vis = visible(n_q, n_k, call)
    s = q[0, 0].double() @ k[0, 0].double().T / math.sqrt(d)  # (N_q, N_k) natural units
    if "score_mod" in call:
        s = 30.0 * torch.tanh(s / 30.0)
    S = (s * LOG2_E).masked_fill(~vis, -math.inf)  # (N_q, N_k) log2 units
    want = {}
    for i0 in range(0, n_q, block):
        m = torch.full((min(block, n_q - i0),), -math.inf, dtype=torch.float64)
        for j0 in range(0, n_k, block):
            if not vis[i0:i0 + block, j0:j0 + block].any():
                continue  # skipped tile: never computed, no event
            m_tile = S[i0:i0 + block, j0:j0 + block].amax(dim=1)
            move = (m_tile - m) > tau  # NaN (both -inf) compares False
            want[(i0 // block, j0 // block)] = (move & torch.isfinite(m)).tolist()
            m = torch.where(move, m_tile, m)
    return want


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
@pytest.mark.parametrize("case", list(CASES))
def test_tau_8_equals_tau_0_to_fp32_rounding_and_rescales_fewer(case, loop_order):
    call, H, H_kv, n_q, n_k = CASES[case]
    q, k, v = spiky(H, H_kv, n_q, n_k, seed=len(case))
    ev0, ev8 = [], []
    O0, L0 = flash_attention_forward(q, k, v, 16, loop_order=loop_order, return_lse=True, on_tile=ev0.append, **call)
    O8, L8 = flash_attention_forward(q, k, v, 16, loop_order=loop_order, return_lse=True, on_tile=ev8.append,
                                     rescale_threshold=8.0, **call)
    ref = naive_attention(q.double(), k.double(), v.double(), **call)
    plain = max_err(naive_attention(q, k, v, **call), ref)
    assert max_err(O8, ref) <= 2 * plain + FLOOR[torch.float32]  # flash-attn's bound, as tau = 0 meets it
    assert max_err(O8, O0) <= 1e-5  # the same output, to fp32 rounding
    seen = torch.isfinite(L0)
    assert torch.equal(seen, torch.isfinite(L8))  # the same rows see nothing (L = -inf)
    torch.testing.assert_close(L8[seen], L0[seen], rtol=1e-6, atol=1e-5)  # L = m_stale + log l is exact
    n0, n8 = (sum(int(e.rescaled.sum()) for e in ev) for ev in (ev0, ev8))
    assert n0 > 0 and n8 < n0, (n0, n8)


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
@pytest.mark.parametrize("tau", [0.0, 2.5, 8.0])
@pytest.mark.parametrize("case", ["dense", "causal", "mask_mod", "gqa", "score_mod"])
def test_rescaled_flags_match_an_independent_recount_from_the_scores(case, tau, loop_order):
    call, H, H_kv, n_q, n_k = CASES[case]
    q, k, v = spiky(H, H_kv, n_q, n_k, seed=3)
    events = []
    flash_attention_forward(q, k, v, 16, loop_order=loop_order, on_tile=events.append, rescale_threshold=tau,
                            **call)
    want = recount(q, k, call, 16, tau)
    got = {(e.q_block, e.k_block): e.rescaled.tolist() for e in events}
    assert got == want
    assert all(e.rescaled.dtype == torch.bool and e.rescaled.shape == e.m.shape for e in events)
    first = {}
    for e in events:
        first.setdefault(e.q_block, e)
    assert not any(e.rescaled.any() for e in first.values())  # a row's first tile sets its max: not a rescale


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
def test_stale_max_stays_within_tau_of_the_true_max_and_l_times_e_to_m_is_unchanged(loop_order):
    """The running state with tau = 8 against tau = 0, tile by tile: m8 <= m0 <= m8 + tau ln 2 (so P~ <= 2^tau),
    and l e^m (the sum of e^s over the keys seen so far) is the same number."""
    q, k, v = spiky(2, 2, 97, 97, seed=5)
    ev0, ev8 = [], []
    for tau, ev in ((0.0, ev0), (8.0, ev8)):
        flash_attention_forward(q, k, v, 16, loop_order=loop_order, on_tile=ev.append, rescale_threshold=tau)
    gaps = []
    for a, b in zip(ev0, ev8, strict=True):
        assert (a.q_block, a.k_block) == (b.q_block, b.k_block)
        gap = a.m - b.m  # natural log units
        assert (gap >= 0).all() and (gap <= 8.0 * math.log(2) + 1e-5).all()
        torch.testing.assert_close(b.l * torch.exp(-gap), a.l, rtol=1e-5, atol=0)
        gaps.append(gap.max().item())
    assert max(gaps) > 1.0  # the stale max really lagged (P~ up to e^gap > 1)


def emulated_p_rounding(q, k, v, block, p_dtype, round_l=False):
    """FA2's loop in float64 (q_outer, tau = 0) with P~ rounded to p_dtype before P V; l sums the unrounded P~
    unless round_l. Returns O (B, H, N_q, d) and L (B, H, N_q)."""
    q, k, v = q.double(), k.double(), v.double()
    S_all = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) * LOG2_E  # (B, H, N_q, N_k) log2 units
    n_k = S_all.shape[-1]
    m = torch.full(S_all.shape[:-1], -math.inf, dtype=torch.float64)
    l = torch.zeros_like(m)
    acc = torch.zeros(q.shape, dtype=torch.float64)
    for j0 in range(0, n_k, block):
        S = S_all[..., j0:j0 + block]
        m_new = torch.maximum(m, S.amax(-1))
        P = torch.exp2(S - m_new[..., None])
        P_r = P.to(p_dtype).double()  # torch's own rounding to the low-precision type
        alpha = torch.exp2(m - m_new)
        l = alpha * l + (P_r if round_l else P).sum(-1)
        acc = alpha[..., None] * acc + P_r @ v[..., j0:j0 + block, :]
        m = m_new
    return acc / l[..., None], (m + torch.log2(l)) * math.log(2)


@pytest.mark.parametrize("p_dtype", [torch.bfloat16, torch.float16, torch.float8_e4m3fn])
def test_p_dtype_rounds_p_before_pv_and_sums_l_unrounded(p_dtype):
    q, k, v = make_qkv(1, 2, 100, 100, 32, seed=11)
    O, L = flash_attention_forward(q, k, v, 25, loop_order="q_outer", return_lse=True, p_dtype=p_dtype)
    O_emul, L_emul = emulated_p_rounding(q, k, v, 25, p_dtype)
    exact = naive_attention(q.double(), k.double(), v.double())
    rounding = max_err(O_emul, exact)  # what rounding P costs: fp16 ~1e-4, bf16 ~1e-3, FP8 ~1e-2
    assert rounding > 5e-5
    assert max_err(O, O_emul) <= rounding / 10  # the kernel rounds exactly there (up to fp32-vs-fp64 ties)
    _, L_rounded_l = emulated_p_rounding(q, k, v, 25, p_dtype, round_l=True)
    L_none = flash_attention_forward(q, k, v, 25, loop_order="q_outer", return_lse=True)[1]
    assert max_err(L, L_none) <= 1e-5  # l, hence L, sums the unrounded P~ ...
    assert max_err(L_rounded_l, L_emul) > 3e-5  # ... which a rounded l would not match (fp16: 7e-5, bf16: 5e-4)


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
def test_p_in_bf16_errs_between_fp32_and_a_full_bf16_run(loop_order):
    q, k, v = make_qkv(2, 2, 257, 257, 64, seed=2)
    ref = naive_attention(q.double(), k.double(), v.double(), causal=True)
    run = dict(block_size=64, loop_order=loop_order, causal=True)
    err_fp32 = max_err(flash_attention_forward(q, k, v, **run), ref)
    err_p = max_err(flash_attention_forward(q, k, v, p_dtype=torch.bfloat16, **run), ref)
    err_bf16 = max_err(flash_attention_forward(q.bfloat16(), k.bfloat16(), v.bfloat16(), **run), ref)
    assert err_fp32 < err_p < err_bf16, (err_fp32, err_p, err_bf16)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fp8_p_fits_e4m3_below_tau_log2_448_and_saturates_above(seed):
    """P~ <= 2^tau: with tau = 8 (256 < 448, e4m3's max) FP8 P never saturates; with tau = 20 it does, and the
    output is wrong by O(1). Even unsaturated, tau = 8 errs more than tau = 0 once P is rounded: with tau = 0 each
    row's largest weight is exactly 2^0 = 1 (no rounding error), with a stale max it is 2^gap, rounded."""
    q, k, v = spiky(2, 2, 64, 64, seed=seed)
    ref = naive_attention(q.double(), k.double(), v.double())
    err = {tau: max_err(flash_attention_forward(q, k, v, 16, rescale_threshold=tau, p_dtype=torch.float8_e4m3fn),
                        ref) for tau in (0.0, 8.0, 20.0)}
    assert err[0.0] < err[8.0] < 0.5 < 1.0 < err[20.0], err


@pytest.mark.parametrize(("kwargs", "error", "words"), [
    ({"rescale_threshold": -1.0}, ValueError, ">= 0"),
    ({"rescale_threshold": float("nan")}, ValueError, "finite"),
    ({"rescale_threshold": float("inf")}, ValueError, "finite"),
    ({"rescale_threshold": "8"}, TypeError, "real number"),
    ({"rescale_threshold": True}, TypeError, "real number"),
    ({"p_dtype": torch.int8}, TypeError, "floating dtype"),
    ({"p_dtype": "bfloat16"}, TypeError, "torch.dtype such as torch.bfloat16"),
])
def test_bad_numerics_options_raise_errors_that_teach(kwargs, error, words):
    q, k, v = make_qkv(1, 1, 8, 8, 4)
    with pytest.raises(error, match=words) as info:
        flash_attention_forward(q, k, v, 4, **kwargs)
    assert "got" in str(info.value)  # says what came
