"""flash_attention's tiled backward (FlashAttention-2, Algorithm 2) against the oracle chain.

Oracle: torch's scaled_dot_product_attention in float64 with autograd, with the caller's scale and an explicit mask
(tests/_oracle.py; the float64 formula under autograd for a score_mod), never the project's own naive attention. A
flash gradient may be off the oracle by at most twice what plain PyTorch (naive_attention + autograd in the same
dtype) is off by, plus a small absolute floor for gradients plain PyTorch gets exactly (flash-attention's
tests/test_flash_attn.py uses the same rule). Then gradcheck in float64 on tiny shapes, the user's scale with every
option, the edges (rows that see no key, skipped tiles never read, double backward, bad input), and memory: a
training step never holds an N x N tensor and peaks at a small fraction of naive's.

Legend: B batch, H heads, N_q / N_k query / key lengths, d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from flashviz.core.backward import DOUBLE_BACKWARD_MESSAGE, flash_attention, flash_attention_backward
from flashviz.core.flash import flash_attention_forward
from flashviz.core.reference import naive_attention
from flashviz.masks import alibi, document, softcap
from flashviz.measure.memory import measure_memory
from tests._oracle import dense_mask, grid, make_qkv, reference, reference_grads

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# Absolute slack on top of 2 x plain PyTorch's error, for gradients plain PyTorch gets exactly. A row with a single
# visible key has dS_ij = P_ij (dP_ij - D_i) = 0: naive's softmax backward subtracts dP_ij from itself and is exact,
# while flash (by design, FA2 Algorithm 2) subtracts D_i = rowsum(dO_i * O_i), an O(sqrt(d)) dot product rounded
# separately, so its residual is a few fp32 ulps of |dP_ij| (~1e-6 at d = 59; worst seen over 1080 fp32 cases:
# 2.5e-6). For half types plain PyTorch is never that lucky and the floor only guards exact zeros.
ABS_FLOOR = {torch.float32: 5e-6, torch.float16: 1e-6, torch.bfloat16: 1e-6}

# (N_q, N_k, d, Br, Bc): odd sizes, blocks that do not divide N, N_q != N_k both ways, single-row and single-key
SHAPES = [
    (1, 1, 16, 64, 64),
    (1, 97, 59, 16, 32),
    (97, 97, 16, 32, 32),
    (97, 257, 128, 64, 48),
    (257, 97, 59, 48, 64),
    (257, 257, 16, 64, 128),
]
MASKS = [
    {},
    {"causal": True},
    {"window": (16, 0)},
    {"window": (8, 8)},
    {"window": (None, 4)},
    {"causal": True, "window": (16, None)},
]


def _mask_id(mask: dict) -> str:
    return "-".join(f"{k}={v}" for k, v in mask.items()) or "dense"


def _inputs(n_q: int, n_k: int, d: int, dtype: torch.dtype, device: str = "cpu", B: int = 2, H: int = 2, seed: int = 0):
    """q (B, H, N_q, d), k, v (B, H, N_k, d) and an upstream gradient dO (B, H, N_q, d)."""
    gen = torch.Generator().manual_seed(seed)
    q, dO = (torch.randn(B, H, n_q, d, generator=gen) for _ in range(2))
    k, v = (torch.randn(B, H, n_k, d, generator=gen) for _ in range(2))
    return tuple(x.to(device=device, dtype=dtype) for x in (q, k, v, dO))


def _grads(attn, q, k, v, dO, **kwargs) -> tuple[torch.Tensor, ...]:
    """(dq, dk, dv) of attn(q, k, v, **kwargs) for the upstream gradient dO, via autograd."""
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    return torch.autograd.grad(attn(q, k, v, **kwargs), (q, k, v), dO)


def _assert_within_twice_baseline(got, base, ref) -> None:
    """Each flash gradient's max error vs the fp64 oracle <= 2 x plain PyTorch's error + ABS_FLOOR[dtype]."""
    for name, g, b, r in zip(("dq", "dk", "dv"), got, base, ref, strict=True):
        assert g.dtype == b.dtype and g.shape == b.shape, f"{name}: got {g.dtype} {tuple(g.shape)}"
        assert torch.isfinite(g).all(), f"{name} has non-finite entries"
        err = (g.double() - r).abs().max().item()
        err_base = (b.double() - r).abs().max().item()
        bound = 2 * err_base + ABS_FLOOR[g.dtype]
        assert err <= bound, f"{name}: flash error {err:.3g} > 2 x naive error {err_base:.3g} + floor"


def _check_against_oracle(n_q, n_k, d, block_q, block_k, mask, dtype, device="cpu") -> None:
    q, k, v, dO = _inputs(n_q, n_k, d, dtype, device)
    ref = reference_grads(*(x.cpu() for x in (q, k, v, dO)), **mask)
    ref = tuple(r.to(device) for r in ref)
    base = _grads(naive_attention, q, k, v, dO, **mask)
    got = _grads(flash_attention, q, k, v, dO, block_q=block_q, block_k=block_k, **mask)
    _assert_within_twice_baseline(got, base, ref)


# ---------------------------------------------------------------------------------------------------------------------
# the matrix against the fp64 oracle


# fast suite: every mask on the shapes up to 257 x 97; the two largest shapes with causal and a window
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("shape", "mask"), grid(
    lambda shape, mask: shape[0] * shape[1] * shape[2] > 257 * 97 * 59 and len(mask) != 1,
    shape=SHAPES, mask=MASKS))
def test_fp32_grads_within_twice_naive_error(shape, mask, device):
    _check_against_oracle(*shape, mask, torch.float32, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mask", [{}, {"causal": True}, {"window": (8, 8)}], ids=_mask_id)
@pytest.mark.parametrize(("n_q", "n_k", "d", "block_q", "block_k"), [
    (97, 257, 59, 32, 64), pytest.param(257, 257, 128, 64, 64, marks=pytest.mark.slow)])
def test_half_grads_within_twice_naive_error(n_q, n_k, d, block_q, block_k, mask, dtype, device):
    _check_against_oracle(n_q, n_k, d, block_q, block_k, mask, dtype, device)


@settings(max_examples=25, deadline=None)
@given(
    n_q=st.integers(1, 40), n_k=st.integers(1, 40), d=st.integers(1, 20),
    block_q=st.integers(1, 48), block_k=st.integers(1, 48), causal=st.booleans(),
    left=st.one_of(st.none(), st.integers(0, 12)), right=st.one_of(st.none(), st.integers(0, 12)),
)
def test_property_random_shapes_blocks_and_masks(n_q, n_k, d, block_q, block_k, causal, left, right):
    mask = {"causal": causal, "window": (left, right)}
    q, k, v, dO = _inputs(n_q, n_k, d, torch.float64, B=1, H=2)
    got = _grads(flash_attention, q, k, v, dO, block_q=block_q, block_k=block_k, **mask)
    ref = reference_grads(q, k, v, dO, **mask)
    for g, r in zip(got, ref, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize(("n_q", "n_k", "d", "block_q", "block_k", "mask"), [
    (5, 7, 4, 2, 3, {}),
    (7, 5, 3, 3, 2, {"causal": True}),
    (6, 6, 4, 4, 4, {"window": (2, 1)}),
    (6, 8, 2, 3, 5, {"window": (None, 0)}),
    (7, 3, 2, 2, 2, {"window": (0, 0)}),  # rows 3..6 see no key: a skipped Q block and a partial one
    (6, 6, 3, 4, 2, {"causal": True, "window": (1, None)}),
])
def test_gradcheck_float64(n_q, n_k, d, block_q, block_k, mask):
    q, k, v, _ = _inputs(n_q, n_k, d, torch.float64, B=1, H=2)
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    attn = functools.partial(flash_attention, block_q=block_q, block_k=block_k, scale=0.7, **mask)
    assert torch.autograd.gradcheck(attn, (q, k, v), eps=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------------------------------------------------
# edges


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_rows_that_see_no_key_get_finite_zero_grads(dtype, device):
    # window (0, 0): query i sees only key i, so queries 8..19 see nothing. With Br = 6 the block of rows 6..11 is
    # partial (rows 6, 7 see a key) and the blocks 12..17 and 18..19 are skipped entirely.
    n_q, n_k = 20, 8
    q, k, v, dO = _inputs(n_q, n_k, 16, dtype, device)
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    out = flash_attention(q, k, v, block_q=6, block_k=4, window=(0, 0))
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dO)
    assert all(torch.isfinite(g).all() for g in (out, dq, dk, dv))
    assert (out[:, :, n_k:] == 0).all() and (dq[:, :, n_k:] == 0).all()  # rows that see nothing: exact zeros
    # each key j is seen by query j alone: dv_j = P_jj dO_j = dO_j, and dq_j = dk_j = 0 (a one-key softmax is
    # constant); flash gets these up to rounding (P_jj = exp(S_jj - L_j) = 1 and dP_jj - D_j = 0 up to ulps)
    torch.testing.assert_close(dv, dO[:, :, :n_k])
    zeros = torch.zeros_like(dk)
    torch.testing.assert_close(dk, zeros, rtol=0, atol=1e-5 if dtype == torch.float32 else 1e-2)
    torch.testing.assert_close(dq[:, :, :n_k], zeros, rtol=0, atol=1e-5 if dtype == torch.float32 else 1e-2)


def test_key_columns_nobody_sees_get_zero_grads():
    # causal with N_k > N_q: keys N_q.. are seen by no query, so their whole K/V block column is skipped
    q, k, v, dO = _inputs(10, 40, 8, torch.float64, B=1, H=1)
    dq, dk, dv = _grads(flash_attention, q, k, v, dO, block_size=8, causal=True)
    assert (dk[:, :, 10:] == 0).all() and (dv[:, :, 10:] == 0).all()
    for g, r in zip((dq, dk, dv), _grads(naive_attention, q, k, v, dO, causal=True), strict=True):
        torch.testing.assert_close(g, r)


def test_keys_nobody_sees_are_never_read():
    # causal with N_k > N_q: keys 10..39 are seen by no query. Poisoned with NaN, they must not reach any gradient:
    # a kernel that loaded them into a product would spread the NaN (0 * NaN = NaN).
    q, k, v, dO = _inputs(10, 40, 8, torch.float64, B=1, H=1)
    O, L = flash_attention_forward(q, k, v, 8, causal=True, return_lse=True)
    k_bad, v_bad = k.clone(), v.clone()
    k_bad[:, :, 16:], v_bad[:, :, 16:] = float("nan"), float("nan")  # key blocks 2..4 of 8: skipped columns
    got = flash_attention_backward(dO, q, k_bad, v_bad, O, L, 8, causal=True)
    for g, r in zip(got, flash_attention_backward(dO, q, k, v, O, L, 8, causal=True), strict=True):
        torch.testing.assert_close(g, r, rtol=0, atol=0)


# (N_q, N_k, Br, Bc, mask) with skipped tiles of every kind: above the diagonal, whole key columns (N_k > N_q), whole
# query rows that see nothing, both sides of a window, and between documents (a mask_mod, merged steps forward)
POISON_CASES = [
    (40, 40, 8, 8, {"causal": True}),
    (24, 56, 8, 16, {"causal": True}),
    (56, 24, 16, 8, {"window": (3, 2)}),
    (40, 40, 8, 8, {"causal": True, "window": (9, None)}),
    (40, 40, 8, 8, {"mask_mod": document([13, 27])}),
]


def _training_step(q, k, v, dO, **kwargs) -> tuple[torch.Tensor, ...]:
    """(O, dq, dk, dv) of one flash_attention forward + backward."""
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    out = flash_attention(q, k, v, **kwargs)
    return (out.detach(), *torch.autograd.grad(out, (q, k, v), dO))


@pytest.mark.parametrize("loop_order", ["kv_outer", "q_outer"])
@pytest.mark.parametrize(("n_q", "n_k", "block_q", "block_k", "mask"), POISON_CASES,
                         ids=["causal", "causal-nk>nq", "window-nq>nk", "causal-window", "document"])
def test_skipped_tiles_are_never_read_forward_or_backward(n_q, n_k, block_q, block_k, mask, loop_order):
    """For every tile that nothing in it sees (found from the dense mask written in the test, not from the schedule):
    NaN in its keys and values must not reach its query rows' output or dq, and NaN in its queries and dO must not
    reach its key columns' dk and dv. A kernel that loaded a skipped tile would spread the NaN (NaN * 0 = NaN)."""
    B, H, H_kv, d = 1, 4, 2, 8
    q, k, v = make_qkv(B, H, n_q, n_k, d, dtype=torch.float64, seed=n_q + n_k, h_kv=H_kv)
    dO = torch.randn(q.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    kw = dict(block_q=block_q, block_k=block_k, loop_order=loop_order, **mask)
    clean = _training_step(q, k, v, dO, **kw)
    for got, ref in zip(clean, (reference(q, k, v, **mask), *reference_grads(q, k, v, dO, **mask)), strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-9, atol=1e-10)
    seen = dense_mask(B, H, n_q, n_k, **mask).any(dim=(0, 1))  # (N_q, N_k): visible for some (b, h)
    skipped = [(i, j) for i in range(0, n_q, block_q) for j in range(0, n_k, block_k)
               if not seen[i:i + block_q, j:j + block_k].any()]
    assert len(skipped) >= 3, skipped
    for i, j in skipped[::max(1, len(skipped) // 5)]:  # five or so, spread over the grid (first one included)
        rows, cols = slice(i, i + block_q), slice(j, j + block_k)
        k_bad, v_bad = k.clone(), v.clone()
        k_bad[:, :, cols], v_bad[:, :, cols] = float("nan"), float("nan")
        out, dq, _, _ = _training_step(q, k_bad, v_bad, dO, **kw)
        torch.testing.assert_close(out[:, :, rows], clean[0][:, :, rows], rtol=0, atol=0)
        torch.testing.assert_close(dq[:, :, rows], clean[1][:, :, rows], rtol=0, atol=0)
        q_bad, dO_bad = q.clone(), dO.clone()
        q_bad[:, :, rows], dO_bad[:, :, rows] = float("nan"), float("nan")
        _, _, dk, dv = _training_step(q_bad, k, v, dO_bad, **kw)
        torch.testing.assert_close(dk[:, :, cols], clean[2][:, :, cols], rtol=0, atol=0)
        torch.testing.assert_close(dv[:, :, cols], clean[3][:, :, cols], rtol=0, atol=0)


# the user's scale reaches the backward, with every option (GQA: 4 query heads, 2 K/V heads)
SCALED = {
    "dense": {},
    "causal": {"causal": True},
    "window": {"window": (6, 3)},
    "mask_mod": {"mask_mod": document([11, 18])},
    "score_mod": {"score_mod": softcap(1.5)},
    "mask_and_score_mod": {"mask_mod": document([14, 15]), "score_mod": alibi(4), "window": (8, None)},
}


@pytest.mark.parametrize("loop_order", ["kv_outer", "q_outer"])
@pytest.mark.parametrize("option", SCALED, ids=str)
def test_a_custom_scale_reaches_the_backward_with_every_option(option, loop_order):
    options = SCALED[option] | {"scale": 0.61}  # not 1/sqrt(8) = 0.354
    q, k, v = make_qkv(2, 4, 29, 29, 8, dtype=torch.float64, seed=len(option), h_kv=2)
    dO = torch.randn(q.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    ref = reference_grads(q, k, v, dO, **options)  # SDPA's autograd (the formula's for a score_mod), float64
    got = _grads(flash_attention, q, k, v, dO, block_q=8, block_k=16, loop_order=loop_order, **options)
    O, L = flash_attention_forward(q, k, v, block_q=8, block_k=16, loop_order=loop_order, return_lse=True,
                                   **options)
    direct = flash_attention_backward(dO, q, k, v, O, L, block_q=16, block_k=8, **options)  # other tiles
    for name, g, h, r in zip(("dq", "dk", "dv"), got, direct, ref, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-10, msg=lambda m, name=name: f"{name}: {m}")
        torch.testing.assert_close(h, r, rtol=1e-9, atol=1e-10, msg=lambda m, name=name: f"{name} direct: {m}")


def test_double_backward_raises_a_clear_error():
    q, k, v, _ = _inputs(9, 9, 4, torch.float64, B=1, H=1)
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    out = flash_attention(q, k, v, block_size=4)
    with pytest.raises(RuntimeError, match="first-order gradients only") as info:
        torch.autograd.grad(out.square().sum(), (q, k, v), create_graph=True)
    assert str(info.value) == DOUBLE_BACKWARD_MESSAGE
    with pytest.raises(RuntimeError, match="first-order gradients only"):
        torch.autograd.gradgradcheck(flash_attention, (q, k, v))


def test_forward_matches_flash_forward_and_grads_keep_input_dtype_and_layout():
    q, k, v, dO = _inputs(33, 50, 8, torch.bfloat16)
    q_t = q.transpose(1, 2).contiguous().transpose(1, 2)  # non-contiguous (B, H, N, d) view, as from a projection
    out = flash_attention(q_t, k, v, block_q=16, block_k=8, causal=True)
    expected = flash_attention_forward(q, k, v, block_q=16, block_k=8, causal=True, loop_order="q_outer")
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    grads = _grads(flash_attention, q_t, k, v, dO, block_q=16, block_k=8, causal=True)
    assert [(g.dtype, g.shape) for g in grads] == [(x.dtype, x.shape) for x in (q, k, v)]


@pytest.mark.parametrize("mask", [{}, {"causal": True}, {"window": (8, 3)}], ids=_mask_id)
def test_both_forward_loop_orders_train_to_the_same_gradients(mask):
    q, k, v, dO = _inputs(45, 38, 16, torch.float64)
    fa1 = _grads(flash_attention, q, k, v, dO, block_q=16, block_k=8, loop_order="kv_outer", **mask)
    fa2 = _grads(flash_attention, q, k, v, dO, block_q=16, block_k=8, loop_order="q_outer", **mask)
    for g1, g2 in zip(fa1, fa2, strict=True):
        torch.testing.assert_close(g1, g2, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="loop_order"):
        flash_attention(q, k, v, loop_order="fa3")


def test_only_q_k_v_o_and_logsumexp_are_saved():
    B, H, n, d = 1, 2, 96, 8
    q, k, v, _ = _inputs(n, n, d, torch.float32, B=B, H=H)
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    saved = []

    def pack(t):
        saved.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        flash_attention(q, k, v, block_size=32)
    assert sorted(saved) == sorted([(B, H, n, d)] * 4 + [(B, H, n)]), saved  # q, k, v, O and L; never P


# ---------------------------------------------------------------------------------------------------------------------
# memory


class _LargestTensor(TorchDispatchMode):
    """Records the largest number of elements of any tensor an op returns."""

    largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def test_no_n_by_n_tensor_exists_during_a_training_step():
    B, H, n, d, block = 1, 2, 512, 16, 64
    q, k, v, dO = _inputs(n, n, d, torch.float32, B=B, H=H)
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    with _LargestTensor() as tracker:
        torch.autograd.grad(flash_attention(q, k, v, block_size=block, causal=True), (q, k, v), dO)
    assert tracker.largest <= max(B * H * n * d, B * H * block * block) < n * n  # O(N d) and one tile


@pytest.mark.slow  # N = 2048; the fast suite keeps test_no_n_by_n_tensor_exists_during_a_training_step
def test_training_step_peak_memory_is_a_small_fraction_of_naive():
    n = 2048
    q, k, v, dO = _inputs(n, n, 64, torch.float32, B=1, H=2)
    q, k, v = (x.requires_grad_() for x in (q, k, v))

    def step(attn, **kwargs):
        torch.autograd.grad(attn(q, k, v, **kwargs), (q, k, v), dO)

    flash = measure_memory(step, flash_attention, block_size=128)
    naive = measure_memory(step, naive_attention)
    assert flash <= 0.10 * naive, f"flash fwd+bwd peak {flash} B is {100 * flash / naive:.1f}% of naive's {naive} B"


def test_backward_validates_its_inputs():
    q, k, v, dO = _inputs(8, 8, 4, torch.float32)
    O, L = flash_attention_forward(q, k, v, 4, loop_order="q_outer", return_lse=True)
    with pytest.raises(ValueError, match="logsumexp of shape"):
        flash_attention_backward(dO, q, k, v, O, L[..., :-1], 4)
    with pytest.raises(ValueError, match="dO must be a tensor of q's shape"):
        flash_attention_backward(dO[:, :, :-1], q, k, v, O, L, 4)
    with pytest.raises(ValueError, match="block_q must be >= 1"):
        flash_attention_backward(dO, q, k, v, O, L, 0)


@pytest.mark.parametrize(("args", "kwargs", "error", "match"), [
    ((torch.zeros(8, 4),) * 3, {}, ValueError, "must be 4-D"),
    ((torch.zeros(1, 1, 8, 4, dtype=torch.int64),) * 3, {}, TypeError, "must be float16, bfloat16, float32"),
    ((torch.zeros(1, 1, 8, 4), torch.zeros(1, 1, 8, 4), torch.zeros(1, 1, 9, 4)), {}, ValueError, "same sequence"),
    ((torch.zeros(1, 1, 8, 4),) * 3, {"block_size": 0}, ValueError, "block_q must be >= 1"),
    ((torch.zeros(1, 1, 8, 4),) * 3, {"block_k": 2.5}, TypeError, "block_k must be a positive int"),
    ((torch.zeros(1, 1, 8, 4),) * 3, {"causal": "yes"}, TypeError, "causal must be True or False"),
    ((torch.zeros(1, 1, 8, 4),) * 3, {"window": (-1, 0)}, ValueError, "Use None"),
    ((torch.zeros(1, 1, 8, 4),) * 3, {"scale": float("nan")}, ValueError, "scale must be finite"),
])
def test_bad_input_raises_a_teaching_error(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        flash_attention(*args, **kwargs)
