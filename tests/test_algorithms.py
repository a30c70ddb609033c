"""The papers' plain algorithms (flashviz/core/algorithms.py) against the general kernels and independent oracles.

FA1 Algorithm 1 and FA2 Algorithm 1 against flash_attention_forward in the same loop order and against naive
attention; FA2 Algorithm 2 against the general tiled backward (flash_attention_backward, and flash_attention under
autograd) and against torch autograd through naive attention with a random dO. Then tests that fail when a term of
the algorithms is dropped: inputs whose row max grows at every K/V block (the rescale of l and O), shifting every key
by one vector (changes no output, so dK sums to zero over the keys only with the D_i term), and finite differences.

Legend: B batch, H heads, N query length, N_k key length, d head dimension, Br x Bc the tile.
"""

from __future__ import annotations

import pytest
import torch

from flashviz.core.algorithms import fa1_forward, fa2_backward, fa2_forward
from flashviz.core.backward import flash_attention, flash_attention_backward
from flashviz.core.flash import flash_attention_forward
from flashviz.core.reference import naive_attention

B, H = 2, 3
# (N, N_k, d, Br, Bc): tiles that divide N, ragged last tiles, Br != Bc, one tile larger than N, single-row tiles,
# and a key length other than N
SHAPES = [
    (16, 16, 8, 4, 4),
    (16, 16, 8, 8, 16),
    (13, 13, 5, 4, 4),
    (13, 13, 5, 5, 3),
    (7, 7, 4, 16, 16),
    (9, 9, 4, 1, 2),
    (11, 6, 4, 3, 4),
]
DTYPES = [torch.float64, torch.float32]
TOL = {torch.float64: {"rtol": 1e-12, "atol": 1e-12}, torch.float32: {"rtol": 2e-5, "atol": 2e-6}}


def qkv(n: int, n_k: int, d: int, dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Q (B, H, N, d), K, V (B, H, N_k, d); scores spread wide enough (x 2) that row maxima move between blocks."""
    g = torch.Generator().manual_seed(seed)
    Q = 2 * torch.randn(B, H, n, d, generator=g, dtype=torch.float64)
    K = 2 * torch.randn(B, H, n_k, d, generator=g, dtype=torch.float64)
    V = torch.randn(B, H, n_k, d, generator=g, dtype=torch.float64)
    return Q.to(dtype), K.to(dtype), V.to(dtype)


def naive_grads(Q, K, V, dO, **kw) -> tuple[torch.Tensor, ...]:
    """dQ, dK, dV by torch autograd through naive attention (it materialises S and P)."""
    Q, K, V = (t.detach().requires_grad_() for t in (Q, K, V))
    naive_attention(Q, K, V, **kw).backward(dO)
    return Q.grad, K.grad, V.grad


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fa1_forward_equals_the_kv_outer_kernel_and_naive_attention(shape, dtype):
    n, n_k, d, Br, Bc = shape
    Q, K, V = qkv(n, n_k, d, dtype)
    O = fa1_forward(Q, K, V, Br=Br, Bc=Bc)
    assert O.shape == (B, H, n, d) and O.dtype == dtype
    torch.testing.assert_close(O, flash_attention_forward(Q, K, V, block_q=Br, block_k=Bc, loop_order="kv_outer"),
                               **TOL[dtype])
    torch.testing.assert_close(O, naive_attention(Q, K, V), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fa2_forward_o_and_l_equal_the_q_outer_kernel_and_naive_attention(shape, dtype):
    n, n_k, d, Br, Bc = shape
    Q, K, V = qkv(n, n_k, d, dtype)
    O, L = fa2_forward(Q, K, V, Br=Br, Bc=Bc)
    assert O.shape == (B, H, n, d) and L.shape == (B, H, n) and O.dtype == L.dtype == dtype
    # the general kernel runs in base 2 but returns L in natural log, as fa2_forward does: the same numbers
    O_ref, L_ref = flash_attention_forward(Q, K, V, block_q=Br, block_k=Bc, loop_order="q_outer", return_lse=True)
    torch.testing.assert_close(O, O_ref, **TOL[dtype])
    torch.testing.assert_close(L, L_ref.to(dtype), **TOL[dtype])
    torch.testing.assert_close(O, naive_attention(Q, K, V), **TOL[dtype])
    torch.testing.assert_close(L, torch.logsumexp(Q @ K.mT / d**0.5, dim=-1), **TOL[dtype])  # natural log, not log2


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fa2_backward_equals_the_general_tiled_backward_and_autograd_through_naive(shape, dtype):
    n, n_k, d, Br, Bc = shape
    Q, K, V = qkv(n, n_k, d, dtype)
    dO = torch.randn(B, H, n, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(dtype)
    O, L = fa2_forward(Q, K, V, Br=Br, Bc=Bc)
    grads = fa2_backward(Q, K, V, O, dO, L, Br=Br, Bc=Bc)
    assert [(g.shape, g.dtype) for g in grads] == [(t.shape, dtype) for t in (Q, K, V)]
    tiled = flash_attention_backward(dO, Q, K, V, O, L, block_q=Br, block_k=Bc)
    q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
    flash_attention(q, k, v, block_q=Br, block_k=Bc).backward(dO)  # the public autograd entry
    for name, g, g_tiled, g_auto, g_naive in zip("QKV", grads, tiled, (q.grad, k.grad, v.grad),
                                                 naive_grads(Q, K, V, dO), strict=True):
        torch.testing.assert_close(g, g_tiled, **TOL[dtype], msg=f"d{name} vs flash_attention_backward")
        torch.testing.assert_close(g, g_auto, **TOL[dtype], msg=f"d{name} vs flash_attention autograd")
        torch.testing.assert_close(g, g_naive, **TOL[dtype], msg=f"d{name} vs autograd through naive")


def test_a_user_scale_and_the_default_block_size():
    Q, K, V = qkv(70, 70, 8, torch.float64)  # 70 > the default 64: two Q blocks, the second of 6 rows
    dO = torch.randn_like(Q)
    torch.testing.assert_close(fa1_forward(Q, K, V, scale=0.7), naive_attention(Q, K, V, scale=0.7))
    O, L = fa2_forward(Q, K, V, scale=0.7)
    torch.testing.assert_close(O, naive_attention(Q, K, V, scale=0.7))
    for g, g_naive in zip(fa2_backward(Q, K, V, O, dO, L, scale=0.7), naive_grads(Q, K, V, dO, scale=0.7),
                          strict=True):
        torch.testing.assert_close(g, g_naive)


def test_a_row_max_that_grows_at_every_kv_block_needs_the_rescale():
    """Keys of growing norm along one direction the queries share: every K/V block raises every row's max, so each
    tile must rescale l and O by e^(m_i - m_new) < 1. A kernel that skipped it would be off by orders of magnitude."""
    n, d, Bc = 12, 4, 3
    g = torch.Generator().manual_seed(0)
    Q = torch.ones(1, 1, n, d, dtype=torch.float64) + 0.1 * torch.randn(1, 1, n, d, generator=g, dtype=torch.float64)
    K = torch.arange(1, n + 1, dtype=torch.float64).view(1, 1, n, 1) * torch.ones(d, dtype=torch.float64)
    V = torch.randn(1, 1, n, d, generator=g, dtype=torch.float64)
    block_max = (Q @ K.mT / d**0.5).view(n, n // Bc, Bc).amax(dim=-1)  # (N, Tc): each row's max per K/V block
    assert (block_max.diff(dim=-1) > 1).all()  # the inputs do what the test needs: the max moves by > 1 each block
    expected = naive_attention(Q, K, V)
    torch.testing.assert_close(fa1_forward(Q, K, V, Br=5, Bc=Bc), expected, rtol=1e-12, atol=1e-12)
    O, L = fa2_forward(Q, K, V, Br=5, Bc=Bc)
    torch.testing.assert_close(O, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(L, torch.logsumexp(Q @ K.mT / d**0.5, dim=-1), rtol=1e-12, atol=1e-12)


def test_shifting_every_key_by_one_vector_changes_nothing_so_dk_sums_to_zero():
    """K_n -> K_n + u adds q_i . u to every score of row i: softmax ignores it, so sum_n dK_n = 0. In the algorithm
    that holds only because D_i = rowsum(dO_i * O_i) makes every row of dS sum to zero; drop D and it fails."""
    Q, K, V = qkv(13, 13, 5, torch.float64)
    dO = torch.randn(B, H, 13, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    O, L = fa2_forward(Q, K, V, Br=4, Bc=3)
    dK = fa2_backward(Q, K, V, O, dO, L, Br=4, Bc=3)[1]
    assert dK.abs().max() > 0.1  # the gradients are not trivially zero, yet they sum to zero over the keys
    torch.testing.assert_close(dK.sum(dim=2), torch.zeros(B, H, 5, dtype=torch.float64), rtol=0, atol=1e-12)
    # without the D term the same sum is far from zero: the check above can fail
    P = torch.softmax(Q @ K.mT / 5**0.5, dim=-1)
    dS_without_D = P * (dO @ V.mT)
    assert (dS_without_D.mT @ Q).sum(dim=2).abs().max() > 0.1


class _Algorithms(torch.autograd.Function):
    """fa2_forward with fa2_backward as its gradient, for gradcheck's finite differences."""

    @staticmethod
    def forward(ctx, Q, K, V):
        O, L = fa2_forward(Q, K, V, Br=2, Bc=3)
        ctx.save_for_backward(Q, K, V, O, L)
        return O

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, O, L = ctx.saved_tensors
        return fa2_backward(Q, K, V, O, dO, L, Br=2, Bc=3)


def test_fa2_backward_passes_gradcheck_against_finite_differences():
    g = torch.Generator().manual_seed(3)
    Q, K, V = (torch.randn(1, 2, 5, 3, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    assert torch.autograd.gradcheck(_Algorithms.apply, (Q, K, V))


def test_bad_inputs_are_refused_with_a_fix():
    Q, K, V = qkv(8, 8, 4, torch.float64)
    with pytest.raises(ValueError, match=r"grouped-query attention use flashviz\.flash_attention"):
        fa2_forward(Q, K[:, :1], V[:, :1])  # one K/V head for three query heads
    with pytest.raises(ValueError, match="Br must be >= 1"):
        fa1_forward(Q, K, V, Br=0)
    with pytest.raises(TypeError, match="Bc must be a positive int"):
        fa2_backward(Q, K, V, Q, Q, Q[..., 0], Bc=2.5)
    with pytest.raises(TypeError, match="float16, bfloat16, float32 or float64"):
        fa1_forward(Q.long(), K.long(), V.long())
