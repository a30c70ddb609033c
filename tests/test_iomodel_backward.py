"""io_cost(..., backward=True) and io_trace(..., backward=True) against counts written here, and against what the
tiled backward kernel actually loads.

Independent oracles: a brute-force count from a dense (N_q, N_k) mask and the accounting rules of FA1 Algorithm 3
and FA2 Algorithm 2 written out in this file; a hand count of the deterministic second pass on a 2 x 2 grid; and the
kernel itself, instrumented: in half precision every load of Q, K, V, dO or O is a conversion to fp32, which a
TorchDispatchMode counts element by element, and the per-tile traffic of L_i, D_i and dQ_i follows the kernel's own
tile events.

Legend: N_q, N_k lengths, d head dimension, Br = block_q, Bc = block_k, B batch, H heads, H_kv K/V heads.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from flashviz.core.backward import flash_attention_backward
from flashviz.core.flash import flash_attention_forward
from flashviz.core.tiling import tile_schedule
from flashviz.model.iomodel import io_cost, io_trace


def dense_mask(n_q, n_k, causal, window):
    """(N_q, N_k) bool, True = visible: query i sees keys j <= i (causal) and i - left <= j <= i + right."""
    i, j = torch.arange(n_q)[:, None], torch.arange(n_k)[None, :]
    mask = torch.ones(n_q, n_k, dtype=torch.bool)
    if causal:
        mask &= j <= i
    left, right = window if window is not None else (None, None)
    if left is not None:
        mask &= j >= i - left
    if right is not None:
        mask &= j <= i + right
    return mask


def brute_force(n_q, n_k, d, bq, bk, causal, window, dq_mode):
    """(reads of everything but K/V, reads of K/V, writes but dK/dV, writes of dK/dV, flops) per (batch, head) of the
    tiled backward, from the dense mask: a tile is computed when one of its elements is visible."""
    mask = dense_mask(n_q, n_k, causal, window)
    rows_of = [min(bq, n_q - a) for a in range(0, n_q, bq)]
    cols_of = [min(bk, n_k - a) for a in range(0, n_k, bk)]
    computed = [[bool(mask[i * bq:(i + 1) * bq, j * bk:(j + 1) * bk].any()) for j in range(len(cols_of))]
                for i in range(len(rows_of))]
    tiles = [(i, j) for i in range(len(rows_of)) for j in range(len(cols_of)) if computed[i][j]]
    r_q = 2 * n_q * d  # pre-pass: dO and O, D = rowsum(dO * O)
    w = n_q  # D
    r_kv = sum(2 * cols_of[j] * d for j in range(len(cols_of)) if any(computed[i][j] for i in range(len(rows_of))))
    w_kv = 2 * n_k * d  # dK, dV: outputs, written once
    mac = sum(rows_of[i] * cols_of[j] * d for i, j in tiles)  # multiply-adds of one matmul over the computed tiles
    r_q += sum(2 * rows_of[i] * d + 2 * rows_of[i] for i, _ in tiles)  # Q_i, dO_i, L_i, D_i per tile (pass 1)
    if dq_mode == "atomic":
        r_q += sum(rows_of[i] * d for i, _ in tiles)  # dQ_i read per tile
        w += n_q * d + sum(rows_of[i] * d for i, _ in tiles)  # dQ = 0, then dQ_i written back per tile
        return r_q, r_kv, w, w_kv, 2 * 5 * mac
    used_rows = {i for i, _ in tiles}
    r_q += sum(2 * rows_of[i] * d + 2 * rows_of[i] for i in used_rows)  # pass 2: Q_i, dO_i, L_i, D_i once per row
    r_kv += sum(2 * cols_of[j] * d for _, j in tiles)  # pass 2: K_j, V_j per tile
    w += n_q * d  # dQ written once
    return r_q, r_kv, w, w_kv, 2 * 7 * mac


MASKS = [(False, None), (True, None), (False, (24, 8)), (True, (40, None)), (True, (0, 0)), (False, (None, 5))]
SIZES = [(97, 97, 32, 32), (257, 130, 64, 48), (200, 200, 16, 32), (50, 90, 8, 8), (40, 10, 8, 4), (1, 1, 4, 4)]


@pytest.mark.parametrize("dq_mode", ["atomic", "deterministic"])
@pytest.mark.parametrize("causal,window", MASKS)
@pytest.mark.parametrize("n_q,n_k,bq,bk", SIZES)
def test_tiled_backward_counts_equal_the_brute_force(n_q, n_k, bq, bk, causal, window, dq_mode):
    d = 24
    r_q, r_kv, w, w_kv, flops = brute_force(n_q, n_k, d, bq, bk, causal, window, dq_mode)
    for algorithm in ("kv_outer", "q_outer"):  # both forwards share Algorithm 2
        c = io_cost(algorithm, n_q, n_k, d, bq, bk, causal=causal, window=window, backward=True, dq_mode=dq_mode)
        assert (c.reads, c.kv_reads, c.writes, c.kv_writes, c.flops) == (r_q + r_kv, r_kv, w + w_kv, w_kv, flops)
        assert c.backward and c.dq_mode == dq_mode


@settings(max_examples=60, deadline=None)
@given(n_q=st.integers(1, 60), n_k=st.integers(1, 60), bq=st.integers(1, 20), bk=st.integers(1, 20),
       d=st.integers(1, 6), causal=st.booleans(), left=st.none() | st.integers(0, 40),
       right=st.none() | st.integers(0, 40), dq_mode=st.sampled_from(["atomic", "deterministic"]),
       heads_kv=st.sampled_from([1, 2, 4]))
def test_property_backward_counts_and_trace_equal_the_brute_force(n_q, n_k, bq, bk, d, causal, left, right, dq_mode,
                                                                 heads_kv):
    window = None if left is None and right is None else (left, right)
    r_q, r_kv, w, w_kv, flops = brute_force(n_q, n_k, d, bq, bk, causal, window, dq_mode)
    B, H = 2, 4
    kw = {"causal": causal, "window": window, "batch": B, "heads": H, "heads_kv": heads_kv, "backward": True,
          "dq_mode": dq_mode}
    c = io_cost("q_outer", n_q, n_k, d, bq, bk, **kw)
    assert c.reads == B * (H * r_q + heads_kv * r_kv) and c.kv_reads == B * heads_kv * r_kv
    assert c.writes == B * (H * w + heads_kv * w_kv) and c.flops == B * H * flops
    last = io_trace("q_outer", n_q, n_k, d, bq, bk, **kw).iloc[-1]  # the trace ends where io_cost is
    assert (last["reads"], last["writes"], last["flops"], last["hbm_bytes"]) == (c.reads, c.writes, c.flops, c.bytes)


@pytest.mark.parametrize("n_q,n_k,d", [(1024, 1024, 64), (97, 257, 59), (257, 97, 16)])
def test_flop_ratios_tiled_backward_is_2_5x_its_forward_and_standard_2x(n_q, n_k, d):
    fwd = io_cost("q_outer", n_q, n_k, d, 64, 32)
    bwd = io_cost("q_outer", n_q, n_k, d, 64, 32, backward=True)
    assert bwd.flops == 2.5 * fwd.flops == 2.5 * 4 * n_q * n_k * d  # five matmuls against two
    naive_fwd, naive_bwd = (io_cost("naive", n_q, n_k, d, 64, 32, backward=b) for b in (False, True))
    assert naive_bwd.flops == 2 * naive_fwd.flops == 8 * n_q * n_k * d  # four matmuls against two
    det = io_cost("q_outer", n_q, n_k, d, 64, 32, backward=True, dq_mode="deterministic")
    assert det.flops == 7 / 5 * bwd.flops  # seven matmuls per tile against five
    causal = [io_cost("q_outer", n_q, n_k, d, 64, 32, causal=True, backward=b).flops for b in (False, True)]
    assert causal[1] == 2.5 * causal[0] < bwd.flops  # skipped tiles cost nothing, forward and backward alike


@pytest.mark.parametrize("n_q,n_k,d", [(1024, 1024, 64), (97, 130, 24)])
def test_standard_backward_follows_algorithm_3_and_a_mask_saves_nothing(n_q, n_k, d):
    c = io_cost("naive", n_q, n_k, d, 64, 64, backward=True)
    pp, qd, kd = n_q * n_k, n_q * d, n_k * d
    # reads: P twice (dV, dS), dP once, dS twice (dQ, dK); dO twice, Q once; K and V once each
    assert c.reads == 5 * pp + 3 * qd + 2 * kd and c.kv_reads == 2 * kd
    assert c.writes == 2 * pp + qd + 2 * kd and c.kv_writes == 2 * kd  # dP, dS; dQ; dK, dV
    assert io_cost("naive", n_q, n_k, d, 64, 64, causal=True, backward=True) == c
    trace = io_trace("naive", n_q, n_k, d, 64, 64, backward=True)
    assert list(trace["status"]) == ["dV = P^T dO", "dP = dO V^T", "dS = P * (dP - D)", "dQ = dS K", "dK = dS^T Q"]
    tiled = io_cost("q_outer", n_q, n_k, d, 64, 64, backward=True)
    assert tiled.bytes < c.bytes  # no N x N matrix moves


def test_the_deterministic_pass_extras_equal_a_hand_count_on_a_2x2_grid():
    # N = 4, d = 2, Br = Bc = 2, causal: tiles (0,0) and (1,1) partial, (1,0) full, (0,1) skipped. Every block is
    # 2 rows (or keys) of 2 elements: one Q-sized block is 4 elements, a row statistic (L_i or D_i) 2.
    atomic = io_cost("q_outer", 4, 4, 2, 2, 2, causal=True, backward=True, dq_mode="atomic")
    det = io_cost("q_outer", 4, 4, 2, 2, 2, causal=True, backward=True, dq_mode="deterministic")
    # atomic reads: dO, O for D (16); per computed tile Q_i, dO_i (8), L_i, D_i (4), dQ_i (4): 3 x 16 = 48;
    # K_j, V_j once for columns 0 and 1: 16. Writes: D (4), dQ = 0 (8), dQ_i per tile 3 x 4 = 12, dK, dV (16).
    assert (atomic.reads, atomic.writes) == (16 + 48 + 16, 4 + 8 + 12 + 16)
    # deterministic pass 1: no dQ: 3 x 12 = 36 per-tile reads; K, V 16. Pass 2: rows 0 and 1 load Q_i, dO_i, L_i,
    # D_i once (2 x 12 = 24) and K_j, V_j on each computed tile (3 x 8 = 24). Writes: D (4), dQ once (8), dK, dV (16)
    assert (det.reads, det.writes) == (16 + 36 + 16 + 24 + 24, 4 + 8 + 16)
    assert det.accesses - atomic.accesses == 144 - 120
    # FLOPs: one (2 x 2) x (2 x 2) matmul is 2 x 2 x 2 x 2 = 16; atomic 5 per tile, deterministic 4 + 3
    assert (atomic.flops, det.flops) == (3 * 5 * 16, 3 * 7 * 16)
    assert det.flops - atomic.flops == 3 * 2 * 16  # S_ij and dP_ij recomputed once more per tile


@pytest.mark.parametrize("dq_mode", ["atomic", "deterministic"])
@pytest.mark.parametrize("causal,window", [(False, None), (True, None), (False, (20, 5))])
def test_backward_trace_visits_algorithm_2s_order_then_the_second_pass(dq_mode, causal, window):
    args = ("kv_outer", 90, 70, 16, 16, 24)
    trace = io_trace(*args, causal=causal, window=window, batch=2, heads=3, backward=True, dq_mode=dq_mode)
    for col in ("reads", "writes", "flops", "hbm_bytes"):
        assert trace[col].is_monotonic_increasing
    kv = tile_schedule(90, 70, 16, 24, causal=causal, window=window, loop_order="kv_outer")
    q = tile_schedule(90, 70, 16, 24, causal=causal, window=window, loop_order="q_outer")
    want = [(t.q_block, t.k_block, t.status) for t in kv]
    if dq_mode == "deterministic":
        want += [(t.q_block, t.k_block, t.status) for t in q]
    got = list(zip(trace["q_block"][1:], trace["k_block"][1:], trace["status"][1:], strict=True))
    assert got == want and trace["status"].iloc[0] == "start"
    added = trace[["reads", "flops"]].diff().iloc[1:]
    skipped = (trace["status"].iloc[1:] == "skipped").to_numpy()
    assert (added[skipped] == 0).all().all()  # a skipped tile reads nothing and computes nothing


def test_gqa_counts_kv_and_dk_dv_once_per_kv_head():
    kw = {"causal": True, "batch": 3, "backward": True}
    mha = io_cost("q_outer", 90, 130, 16, 32, 24, heads=8, **kw)
    gqa = io_cost("q_outer", 90, 130, 16, 32, 24, heads=8, heads_kv=2, **kw)
    assert mha.kv_reads == 4 * gqa.kv_reads and mha.kv_writes == 4 * gqa.kv_writes
    assert mha.reads - mha.kv_reads == gqa.reads - gqa.kv_reads and mha.flops == gqa.flops


# ---------------------------------------------------------------------------------------------------------------------
# the model against the kernel's own loads


class LoadCounter(TorchDispatchMode):
    """Counts the elements of Q, K, V, dO and O the kernel loads: in half precision a load turns an input slice into
    an fp32 tile. A same-dtype copy (the GQA row layout) is the same operand moved, so the copy inherits its role."""

    def __init__(self, roles: dict[int, str]):
        super().__init__()
        self.roles = roles  # storage address -> "q", "k", "v", "dO" or "O"
        self.loaded: Counter[str] = Counter()
        self.kept: list[torch.Tensor] = []  # relayouts stay alive, so no later tensor reuses their address

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        sources = [a for a in args if isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr() in self.roles]
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for src in sources:
            where = src.untyped_storage().data_ptr()
            role = self.roles[where]
            for o in outs:
                if not isinstance(o, torch.Tensor) or o.untyped_storage().data_ptr() == where:
                    continue  # a view of the operand reads nothing
                if o.dtype == src.dtype:
                    self.roles[o.untyped_storage().data_ptr()] = role  # a relayout: still the operand, in HBM
                    self.kept.append(o)
                else:
                    self.loaded[role] += src.numel()  # a load into the fp32 tile
        return out


KERNEL_CASES = [
    pytest.param(97, 97, 59, 16, 32, 2, 2, {"causal": True}, id="causal-97-d59"),
    pytest.param(257, 130, 16, 64, 48, 2, 2, {"window": (30, 10)}, id="window-257x130"),
    pytest.param(97, 97, 16, 32, 16, 4, 2, {"causal": True}, id="gqa-4-2"),
    pytest.param(60, 90, 8, 16, 16, 2, 1, {}, id="mqa-dense"),
    pytest.param(100, 100, 8, 16, 16, 2, 2, {"mask_mod": lambda b, h, q, kv: (q < 50) == (kv < 50)}, id="mask_mod"),
]


@pytest.mark.parametrize("n_q,n_k,d,Br,Bc,H,H_kv,mask", KERNEL_CASES)
def test_model_counts_equal_the_operands_the_kernel_loads(n_q, n_k, d, Br, Bc, H, H_kv, mask):
    B = 2
    g = torch.Generator().manual_seed(0)
    q, dO = (torch.randn(B, H, n_q, d, generator=g).half() for _ in range(2))
    k, v = (torch.randn(B, H_kv, n_k, d, generator=g).half() for _ in range(2))
    O, L = flash_attention_forward(q, k, v, block_q=Br, block_k=Bc, return_lse=True, **mask)
    roles = {t.untyped_storage().data_ptr(): name for name, t in (("q", q), ("k", k), ("v", v), ("dO", dO),
                                                                  ("O", O))}
    events = []
    with LoadCounter(roles) as counter:
        flash_attention_backward(dO, q, k, v, O, L, block_q=Br, block_k=Bc, on_tile=events.append, **mask)
    cost = io_cost("q_outer", n_q, n_k, d, Br, Bc, batch=B, heads=H, heads_kv=H_kv, backward=True, **mask)
    loaded = counter.loaded
    assert loaded["k"] + loaded["v"] == cost.kv_reads  # K_j, V_j once per column, per K/V head
    assert loaded["O"] == B * H * n_q * d  # O only in the pre-pass D = rowsum(dO * O), never per tile
    rows = sum(e.q_end - e.q_start for e in events)  # the tiles' query rows, per (batch, head)
    assert loaded["q"] == B * H * rows * d  # Q_i per computed tile
    assert loaded["dO"] == B * H * (n_q * d + rows * d)  # the pre-pass, then dO_i per computed tile
    per_tile_stats = B * H * rows * (2 + d)  # L_i, D_i and the dQ_i read, per computed tile (events' ranges)
    assert cost.reads == sum(loaded.values()) + per_tile_stats
    # writes: D, dQ = 0 and dQ_i per tile (per query head), dK and dV (per K/V head)
    assert cost.writes == B * H * (n_q + n_q * d + rows * d) + B * H_kv * 2 * n_k * d
    flops = sum(2 * 5 * (e.q_end - e.q_start) * (e.k_end - e.k_start) * d for e in events) * B * H
    assert cost.flops == flops
