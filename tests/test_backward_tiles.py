"""The tiled backward reports its tiles: flash_attention_backward(..., on_tile=) against independent oracles.

Checked: the events come in the backward's visiting order (the computed tiles of tile_schedule's kv_outer order) with
their ranges and statuses; the gradients are bit for bit those of a call without the callback; tiles (and whole
blocks) the schedule skips are never read (NaN-poisoned); the recomputed P_ij's row sums equal a float64 softmax
written here, and add up to 1 over a row's tiles; the accumulator norms equal the float64 gradients' blocks.

Legend: B batch, H query heads, H_kv key/value heads, G = H / H_kv, N_q / N_k lengths, d head dimension,
Br = block_q, Bc = block_k.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flashviz import BackwardTileEvent
from flashviz.core.backward import flash_attention_backward
from flashviz.core.flash import flash_attention_forward
from flashviz.core.tiling import tile_schedule


def keys_below_40(b, h, q_idx, kv_idx):
    """A mask_mod that hides every key from 40 on: K/V blocks past it are skipped whole."""
    return kv_idx < 40


def two_documents(b, h, q_idx, kv_idx):
    """Two documents, queries and keys 0..49 and 50..: tiles across documents are skipped."""
    return (q_idx < 50) == (kv_idx < 50)


# (N_q, N_k, d, Br, Bc, H, H_kv, mask): causal, window, a mask_mod, GQA and ragged sizes
CASES = [
    pytest.param(97, 97, 59, 16, 32, 2, 2, {"causal": True}, id="causal-97-d59"),
    pytest.param(257, 257, 16, 64, 48, 1, 1, {"causal": True}, id="causal-257"),
    pytest.param(97, 130, 24, 32, 16, 2, 2, {"window": (20, 5)}, id="window-97x130"),
    pytest.param(100, 100, 16, 16, 16, 2, 2, {"mask_mod": two_documents}, id="mask_mod-documents"),
    pytest.param(97, 97, 59, 32, 16, 4, 2, {"causal": True}, id="gqa-4-2-causal"),
    pytest.param(257, 97, 16, 64, 32, 4, 1, {}, id="mqa-257x97-dense"),
    pytest.param(60, 90, 8, 16, 16, 2, 2, {"mask_mod": keys_below_40, "causal": True}, id="mask_mod-causal"),
]


def _inputs(n_q, n_k, d, H, H_kv, B=2, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q, dO = (torch.randn(B, H, n_q, d, generator=g, dtype=torch.float64).to(dtype) for _ in range(2))
    k, v = (torch.randn(B, H_kv, n_k, d, generator=g, dtype=torch.float64).to(dtype) for _ in range(2))
    return q, k, v, dO


def _visible(n_q, n_k, mask, B=1, H=1):
    """(B, H, N_q, N_k) bool from the mask conventions, written here: causal j <= i, window i-left <= j <= i+right."""
    i, j = torch.arange(n_q)[:, None], torch.arange(n_k)[None, :]
    vis = torch.ones(n_q, n_k, dtype=torch.bool)
    if mask.get("causal"):
        vis &= j <= i
    left, right = mask.get("window") or (None, None)
    if left is not None:
        vis &= j >= i - left
    if right is not None:
        vis &= j <= i + right
    vis = vis.expand(B, H, n_q, n_k).clone()
    if mask.get("mask_mod") is not None:
        b, h = torch.arange(B)[:, None, None, None], torch.arange(H)[None, :, None, None]
        vis &= mask["mask_mod"](b, h, i[None, None], j[None, None]).expand(B, H, n_q, n_k)
    return vis


def _float64_softmax(q, k, mask):
    """P = softmax(q k^T / sqrt(d)) in float64 with the mask, rows that see nothing all zero: (B, H, N_q, N_k)."""
    B, H, n_q, d = q.shape
    G = H // k.shape[1]
    k64 = k.double().repeat_interleave(G, dim=1)  # query head h reads K/V head h // G
    s = q.double() @ k64.transpose(-1, -2) / math.sqrt(d)
    vis = _visible(n_q, k.shape[2], mask, B, H)
    s = s.masked_fill(~vis, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.nan_to_num(p, nan=0.0)  # a row with no visible key: softmax of all -inf is NaN, the kernel gives 0


def _float64_grads(q, k, v, dO, mask):
    """dq, dk, dv of attention in float64 by autograd through the softmax above (K/V grads summed over groups)."""
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    G = q.shape[1] // k.shape[1]
    out = _float64_softmax(q64, k64, mask) @ v64.repeat_interleave(G, dim=1)
    return torch.autograd.grad(out, (q64, k64, v64), dO.double())


def _run(q, k, v, dO, Br, Bc, mask, on_tile=None):
    O, L = flash_attention_forward(q, k, v, block_q=Br, block_k=Bc, loop_order="q_outer", return_lse=True, **mask)
    return flash_attention_backward(dO, q, k, v, O, L, block_q=Br, block_k=Bc, on_tile=on_tile, **mask)


@pytest.mark.parametrize("n_q,n_k,d,Br,Bc,H,H_kv,mask", CASES)
def test_events_follow_the_kv_outer_schedule_and_gradients_are_bitwise_unchanged(n_q, n_k, d, Br, Bc, H, H_kv, mask):
    q, k, v, dO = _inputs(n_q, n_k, d, H, H_kv)
    events: list[BackwardTileEvent] = []
    with_events = _run(q, k, v, dO, Br, Bc, mask, on_tile=events.append)
    without = _run(q, k, v, dO, Br, Bc, mask)
    assert all(torch.equal(a, b) for a, b in zip(with_events, without, strict=True))
    sched = tile_schedule(n_q, n_k, Br, Bc, loop_order="kv_outer", batch=2, heads=H,
                          **{key: val for key, val in mask.items()})
    want = [(t.step, t.q_block, t.k_block, t.status, t.q_start, t.q_end, t.k_start, t.k_end) for t in sched.computed()]
    got = [(e.step, e.q_block, e.k_block, e.status, e.q_start, e.q_end, e.k_start, e.k_end) for e in events]
    assert got == want
    assert len(want) < len(sched) or not mask  # the masks here skip tiles: the events leave them out
    assert all(e.row_sums.shape == (e.q_end - e.q_start,) for e in events)


@pytest.mark.parametrize("n_q,n_k,d,Br,Bc,H,H_kv,mask", CASES)
def test_recomputed_row_sums_equal_a_float64_softmax_and_add_up_to_one(n_q, n_k, d, Br, Bc, H, H_kv, mask):
    q, k, v, dO = _inputs(n_q, n_k, d, H, H_kv)
    events: list[BackwardTileEvent] = []
    _run(q, k, v, dO, Br, Bc, mask, on_tile=events.append)
    P = _float64_softmax(q, k, mask)[0, 0]  # (N_q, N_k): batch 0, head 0
    total = torch.zeros(n_q, dtype=torch.float64)
    for e in events:
        want = P[e.q_start:e.q_end, e.k_start:e.k_end].sum(-1)  # the tile's share of each row
        assert torch.allclose(e.row_sums.double(), want, rtol=0, atol=2e-6), (e.q_block, e.k_block)
        total[e.q_start:e.q_end] += e.row_sums.double()
    sees = _visible(n_q, n_k, mask)[0, 0].any(-1)  # rows with at least one visible key
    assert torch.allclose(total[sees], torch.ones(int(sees.sum()), dtype=torch.float64), rtol=0, atol=4e-6)
    assert (total[~sees] == 0).all()


@pytest.mark.parametrize("n_q,n_k,d,Br,Bc,H,H_kv,mask", CASES)
def test_accumulator_norms_equal_the_float64_gradients_blocks(n_q, n_k, d, Br, Bc, H, H_kv, mask):
    q, k, v, dO = _inputs(n_q, n_k, d, H, H_kv)
    events: list[BackwardTileEvent] = []
    _run(q, k, v, dO, Br, Bc, mask, on_tile=events.append)
    dq, dk, dv = _float64_grads(q, k, v, dO, mask)
    last_of_column = {e.k_block: e for e in events}  # dK_j, dV_j are complete after the column's last tile
    for e in last_of_column.values():
        assert e.dv_norm == pytest.approx(float(dv[0, 0, e.k_start:e.k_end].norm()), rel=1e-4, abs=1e-5)
        assert e.dk_norm == pytest.approx(float(dk[0, 0, e.k_start:e.k_end].norm()), rel=1e-4, abs=1e-5)
    last_of_row = {e.q_block: e for e in events}  # dQ_i is complete after its last column's atomic add
    for e in last_of_row.values():
        assert e.dq_norm == pytest.approx(float(dq[0, 0, e.q_start:e.q_end].norm()), rel=1e-4, abs=1e-5)
    # inside a column the dV_j norm changes tile by tile: the events are taken after each tile, not at the end
    first = events[0]
    column = [e for e in events if e.k_block == first.k_block]
    if len(column) > 1:
        assert len({e.dv_norm for e in column}) > 1


def _poisoned_matches_clean(q, k, v, dO, Br, Bc, mask, poison):
    """Run on clean inputs and on inputs whose never-read blocks hold NaN; the gradients must agree (and be
    finite), the poisoned positions getting zero gradients. poison(q, k, v, dO) poisons in place, returns masks."""
    clean_O, clean_L = flash_attention_forward(q, k, v, block_q=Br, block_k=Bc, return_lse=True, **mask)
    clean = flash_attention_backward(dO, q, k, v, clean_O, clean_L, block_q=Br, block_k=Bc, **mask)
    bad = [t.clone() for t in (q, k, v, dO)]
    rows, keys = poison(*bad)
    for on_tile in (None, [].append):  # the event path reads the same tiles as the plain one
        grads = flash_attention_backward(bad[3], bad[0], bad[1], bad[2], clean_O, clean_L, block_q=Br, block_k=Bc,
                                         on_tile=on_tile, **mask)
        assert all(torch.isfinite(g).all() for g in grads)
        assert torch.equal(grads[0][:, :, ~rows], clean[0][:, :, ~rows]) and (grads[0][:, :, rows] == 0).all()
        for g, c in zip(grads[1:], clean[1:], strict=True):
            assert torch.equal(g[:, :, ~keys], c[:, :, ~keys]) and (g[:, :, keys] == 0).all()


def test_key_blocks_no_query_sees_are_never_read():
    # causal with N_k > N_q: keys 48..95 are seen by no query (blocks 3..5 of Bc = 16): skipped columns
    q, k, v, dO = _inputs(40, 96, 8, 2, 2)

    def poison(q, k, v, dO):
        k[:, :, 48:], v[:, :, 48:] = float("nan"), float("nan")
        keys = torch.zeros(96, dtype=torch.bool)
        keys[48:] = True
        return torch.zeros(40, dtype=torch.bool), keys

    _poisoned_matches_clean(q, k, v, dO, 16, 16, {"causal": True}, poison)


def test_query_blocks_that_see_no_key_are_never_read():
    # window (8, 0) with N_q = 64, N_k = 16: rows 24.. see no key; Q blocks 2 and 3 (rows 32..63) are skipped rows
    q, k, v, dO = _inputs(64, 16, 8, 2, 1)

    def poison(q, k, v, dO):
        q[:, :, 32:], dO[:, :, 32:] = float("nan"), float("nan")
        rows = torch.zeros(64, dtype=torch.bool)
        rows[32:] = True
        return rows, torch.zeros(16, dtype=torch.bool)

    _poisoned_matches_clean(q, k, v, dO, 16, 16, {"window": (8, 0)}, poison)


def test_key_blocks_a_mask_mod_hides_are_never_read():
    q, k, v, dO = _inputs(60, 90, 8, 2, 2)

    def poison(q, k, v, dO):
        k[:, :, 48:], v[:, :, 48:] = float("nan"), float("nan")  # keys >= 40 hidden: blocks 3.. never read
        keys = torch.zeros(90, dtype=torch.bool)
        keys[48:] = True
        return torch.zeros(60, dtype=torch.bool), keys

    _poisoned_matches_clean(q, k, v, dO, 16, 16, {"mask_mod": keys_below_40}, poison)


@pytest.mark.parametrize("bad", [[], "events", 3])
def test_a_callback_that_is_not_callable_is_refused_with_what_to_pass(bad):
    q, k, v, dO = _inputs(8, 8, 4, 1, 1)
    O, L = flash_attention_forward(q, k, v, 4, return_lse=True)
    with pytest.raises(TypeError, match=r"on_tile must be a callable taking a BackwardTileEvent .*got "
                                        + type(bad).__name__):
        flash_attention_backward(dO, q, k, v, O, L, 4, on_tile=bad)


def test_an_empty_batch_reports_its_tiles_with_empty_rows():
    q = torch.randn(0, 2, 8, 4)
    O, L = flash_attention_forward(q, q, q, 4, return_lse=True)
    events: list[BackwardTileEvent] = []
    flash_attention_backward(torch.ones_like(O), q, q, q, O, L, 4, causal=True, on_tile=events.append)
    assert [(e.q_block, e.k_block) for e in events] == [(0, 0), (1, 0), (1, 1)]
    assert all(e.row_sums.numel() == 0 and e.dq_norm == 0.0 for e in events)


@settings(max_examples=25, deadline=None)
@given(n_q=st.integers(1, 40), n_k=st.integers(1, 40), Br=st.integers(1, 16), Bc=st.integers(1, 16),
       causal=st.booleans(), left=st.none() | st.integers(0, 30), right=st.none() | st.integers(0, 30))
def test_property_events_are_the_computed_tiles_and_rows_sum_to_one(n_q, n_k, Br, Bc, causal, left, right):
    mask = {"causal": causal, "window": None if left is None and right is None else (left, right)}
    q, k, v, dO = _inputs(n_q, n_k, 4, 1, 1, B=1)
    events: list[BackwardTileEvent] = []
    _run(q, k, v, dO, Br, Bc, mask, on_tile=events.append)
    sched = tile_schedule(n_q, n_k, Br, Bc, loop_order="kv_outer", **mask)
    assert [(e.step, e.status) for e in events] == [(t.step, t.status) for t in sched.computed()]
    total = torch.zeros(n_q, dtype=torch.float64)
    for e in events:
        total[e.q_start:e.q_end] += e.row_sums.double()
    sees = _visible(n_q, n_k, mask)[0, 0].any(-1)
    assert torch.allclose(total, sees.double(), rtol=0, atol=4e-6)
