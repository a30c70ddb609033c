"""iomodel.py: closed forms, a brute-force count from a dense mask, Theorem 2, and agreement with the kernels."""

import math

import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flashviz.core.flash import flash_attention_forward
from flashviz.core.tiling import tile_schedule
from flashviz.model.flops import FLOPS_PER_SCORE
from flashviz.model.iomodel import (
    IOCost,
    block_sizes,
    fa1_block_sizes,
    fa2_block_sizes,
    hbm_vs_memory,
    io_cost,
    io_trace,
    resolve_algorithm,
)


def dense_mask(n_q, n_k, causal, window):
    """(N_q, N_k) bool, True = visible, written straight from the mask conventions (not from tiling.py): query i
    sees keys j <= i under causal and i - left <= j <= i + right under a window."""
    i = torch.arange(n_q)[:, None]
    j = torch.arange(n_k)[None, :]
    mask = torch.ones(n_q, n_k, dtype=torch.bool)
    if causal:
        mask &= j <= i
    if window is not None:
        left, right = window
        if left is not None:
            mask &= j >= i - left
        if right is not None:
            mask &= j <= i + right
    return mask


def brute_force(algorithm, n_q, n_k, d, bq, bk, causal, window):
    """(reads, writes, flops) per (batch, head) from the dense mask and the IO model's accounting rules."""
    reads_q, reads_kv, writes, flops = brute_force_split(algorithm, n_q, n_k, d, bq, bk, causal, window)
    return reads_q + reads_kv, writes, flops


def brute_force_split(algorithm, n_q, n_k, d, bq, bk, causal, window):
    """(reads of Q/O/l/m/S/P, reads of K/V, writes, flops) per (batch, head)."""
    mask = dense_mask(n_q, n_k, causal, window)
    Tr, Tc = -(-n_q // bq), -(-n_k // bk)
    rows = [min(bq, n_q - i * bq) for i in range(Tr)]
    cols = [min(bk, n_k - j * bk) for j in range(Tc)]
    computed = [[bool(mask[i * bq:(i + 1) * bq, j * bk:(j + 1) * bk].any()) for j in range(Tc)] for i in range(Tr)]
    flops = sum(4 * rows[i] * cols[j] * d for i in range(Tr) for j in range(Tc) if computed[i][j])
    if algorithm == "naive":
        return n_q * d + 2 * n_q * n_k, 2 * n_k * d, 2 * n_q * n_k + n_q * d, 4 * n_q * n_k * d
    if algorithm == "kv_outer":
        reads_kv = sum(2 * cols[j] * d for j in range(Tc) if any(computed[i][j] for i in range(Tr)))
        reads_q = sum(2 * rows[i] * d + 2 * rows[i] for i in range(Tr) for j in range(Tc) if computed[i][j])
        writes = n_q * d + 2 * n_q
        writes += sum(rows[i] * d + 2 * rows[i] for i in range(Tr) for j in range(Tc) if computed[i][j])
        return reads_q, reads_kv, writes, flops
    reads_q = sum(rows[i] * d for i in range(Tr) if any(computed[i]))
    reads_kv = sum(2 * cols[j] * d for i in range(Tr) for j in range(Tc) if computed[i][j])
    return reads_q, reads_kv, n_q * d + n_q, flops


# ---------------------------------------------------------------------------------------------------------------------
# closed forms (divisible N)


@pytest.mark.parametrize("n,d,bq,bk", [(256, 64, 64, 64), (512, 16, 32, 128), (1024, 128, 128, 64)])
def test_closed_forms_for_divisible_n(n, d, bq, bk):
    Tr, Tc = n // bq, n // bk
    naive = io_cost("naive", n, n, d, bq, bk)
    assert (naive.reads, naive.writes) == (3 * n * d + 2 * n * n, 2 * n * n + n * d)
    assert naive.flops == 4 * n * n * d
    kv = io_cost("kv_outer", n, n, d, bq, bk)
    assert kv.reads == 2 * n * d + Tc * (2 * n * d + 2 * n)
    assert kv.writes == n * d + 2 * n + Tc * (n * d + 2 * n)
    q = io_cost("q_outer", n, n, d, bq, bk)
    assert q.reads == n * d + 2 * n * d * Tr
    assert q.writes == n * d + n
    assert kv.flops == q.flops == naive.flops


def test_bytes_batch_heads_and_aliases():
    one = io_cost("flash", 300, 200, 32, 64, 48, dtype_bytes=2)
    many = io_cost("kv_outer", 300, 200, 32, 64, 48, batch=3, heads=5, dtype_bytes=2)
    assert isinstance(one, IOCost) and one.algorithm == "kv_outer"
    assert (many.reads, many.writes, many.flops) == (15 * one.reads, 15 * one.writes, 15 * one.flops)
    assert one.bytes == (one.reads + one.writes) * 2 == one.accesses * 2
    assert one.intensity == pytest.approx(one.flops / one.bytes)
    assert resolve_algorithm("flash2") == "q_outer"
    assert io_cost("flash2", 64, 64, 8, 16, 16) == io_cost("q_outer", 64, 64, 8, 16, 16)


@pytest.mark.parametrize("bad,error", [({"algorithm": "flash3"}, ValueError), ({"d": 0}, ValueError),
                                       ({"block_q": 0}, ValueError), ({"n_q": -1}, ValueError),
                                       ({"causal": "yes"}, TypeError), ({"window": (1,)}, ValueError)])
def test_bad_arguments_say_what_was_expected(bad, error):
    args = {"algorithm": "kv_outer", "n_q": 64, "n_k": 64, "d": 8, "block_q": 16, "block_k": 16, "causal": False}
    args.update(bad)
    with pytest.raises(error, match="must"):
        io_cost(args.pop("algorithm"), args.pop("n_q"), args.pop("n_k"), args.pop("d"), args.pop("block_q"),
                args.pop("block_k"), **args)


# ---------------------------------------------------------------------------------------------------------------------
# ragged and masked against the brute force


@pytest.mark.parametrize("algorithm", ["naive", "kv_outer", "q_outer"])
@pytest.mark.parametrize("n_q,n_k,bq,bk,causal,window", [
    (97, 97, 32, 32, False, None),  # ragged last block
    (257, 130, 64, 48, False, None),  # N_q != N_k, different Br, Bc
    (257, 257, 64, 64, True, None),  # causal: tiles above the diagonal skipped
    (200, 200, 16, 32, False, (24, 8)),  # sliding window: a band of tiles
    (200, 200, 32, 16, True, (40, None)),  # causal + window
    (50, 90, 8, 8, True, (0, 0)),  # only the diagonal is visible
    (40, 10, 8, 4, True, (None, None)),  # rows past N_k see every key
])
def test_masked_and_ragged_cases_match_the_brute_force(algorithm, n_q, n_k, bq, bk, causal, window):
    d = 24
    c = io_cost(algorithm, n_q, n_k, d, bq, bk, causal=causal, window=window)
    assert (c.reads, c.writes, c.flops) == brute_force(algorithm, n_q, n_k, d, bq, bk, causal, window)


@settings(max_examples=60, deadline=None)
@given(n_q=st.integers(1, 70), n_k=st.integers(1, 70), bq=st.integers(1, 24), bk=st.integers(1, 24),
       d=st.integers(1, 8), causal=st.booleans(), left=st.none() | st.integers(0, 40),
       right=st.none() | st.integers(0, 40), algorithm=st.sampled_from(["kv_outer", "q_outer"]))
def test_property_io_cost_equals_the_brute_force(n_q, n_k, bq, bk, d, causal, left, right, algorithm):
    window = None if left is None and right is None else (left, right)
    c = io_cost(algorithm, n_q, n_k, d, bq, bk, causal=causal, window=window)
    assert (c.reads, c.writes, c.flops) == brute_force(algorithm, n_q, n_k, d, bq, bk, causal, window)


def test_a_masked_schedule_moves_less_than_an_unmasked_one():
    full = io_cost("q_outer", 1024, 1024, 64, 64, 64)
    causal = io_cost("q_outer", 1024, 1024, 64, 64, 64, causal=True)
    window = io_cost("q_outer", 1024, 1024, 64, 64, 64, window=(64, 0))
    assert window.reads < causal.reads < full.reads


# ---------------------------------------------------------------------------------------------------------------------
# the cumulative trace


@pytest.mark.parametrize("algorithm", ["naive", "kv_outer", "q_outer"])
@pytest.mark.parametrize("causal,window", [(False, None), (True, None), (False, (20, 5))])
def test_trace_ends_at_io_cost_and_never_decreases(algorithm, causal, window):
    args = ("naive" if algorithm == "naive" else algorithm, 90, 70, 16, 16, 24)
    trace = io_trace(*args, causal=causal, window=window, batch=2, heads=3)
    total = io_cost(*args, causal=causal, window=window, batch=2, heads=3)
    last = trace.iloc[-1]
    assert (last["reads"], last["writes"], last["flops"], last["hbm_bytes"]) == (
        total.reads, total.writes, total.flops, total.bytes)
    for col in ("reads", "writes", "flops", "hbm_bytes"):
        assert trace[col].is_monotonic_increasing
    if algorithm == "naive":
        assert len(trace) == 3
    else:
        schedule = tile_schedule(90, 70, 16, 24, causal=causal, window=window, loop_order=algorithm)
        assert len(trace) == len(schedule) + 1  # a start row, then one row per tile
        assert list(trace["status"].iloc[1:]) == [t.status for t in schedule]
        assert list(trace["step"]) == list(range(-1, len(schedule)))


def test_trace_of_a_skipped_tile_adds_nothing():
    trace = io_trace("kv_outer", 64, 64, 8, 16, 16, causal=True).set_index("step")
    for step in trace.index[1:]:
        if trace.loc[step, "status"] == "skipped":
            assert (trace.loc[step, ["reads", "writes", "flops"]] == trace.loc[step - 1, ["reads", "writes",
                                                                                         "flops"]]).all()


# ---------------------------------------------------------------------------------------------------------------------
# Theorem 2: tile sizes from on-chip memory M


def test_fa1_block_sizes_follow_algorithm_1():
    assert fa1_block_sizes(4 * 64 * 100, 64) == (64, 100)  # Bc = M / 4d, Br = min(Bc, d)
    assert fa1_block_sizes(1000, 64) == (4, 4)  # ceil(1000 / 256) = 4
    assert fa1_block_sizes(1, 64) == (1, 1)
    with pytest.raises(ValueError, match="M must be >= 1"):
        fa1_block_sizes(0, 64)


def test_fa2_block_sizes_swap_fa1s_so_the_outer_block_is_the_large_one():
    assert fa2_block_sizes(4 * 64 * 100, 64) == (100, 64)  # Br = M / 4d, Bc = min(Br, d)
    assert fa2_block_sizes(1000, 64) == (4, 4)
    assert block_sizes("q_outer", 2**20, 64) == (4096, 64) and block_sizes("flash", 2**20, 64) == (64, 4096)
    for M in (2**10, 2**14, 2**18, 12345):
        Br, Bc = fa2_block_sizes(M, 64)
        # FA1's occupancy: Q_i, O_i ~ M/2 (rounded up by less than one row each), K_j, V_j no more, S_ij <= Br d
        assert M / 2 <= 2 * Br * 64 < M / 2 + 2 * 64 and Bc <= Br and Bc <= 64
        assert (Bc, Br) == fa1_block_sizes(M, 64)


def test_flash_traffic_falls_as_m_grows_and_naive_does_not_move():
    n, d = 1024, 64
    ms = [2 ** k for k in range(12, 19)]  # Bc = 16 .. 1024 = N
    df = hbm_vs_memory(ms, n, d)
    flash = df[df.algorithm == "kv_outer"].set_index("M")
    naive = df[df.algorithm == "naive"].set_index("M")
    assert flash["accesses"].is_monotonic_decreasing and flash["accesses"].is_unique
    assert naive["accesses"].nunique() == 1
    # Theta(N^2 d^2 / M) while a tile holds fewer than N keys: accesses * M / (N^2 d^2) stays within a small band
    ratio = [flash.loc[M, "accesses"] * M / (n * n * d * d) for M in ms if fa1_block_sizes(M, d)[1] < n]
    assert max(ratio) / min(ratio) < 2
    # Theorem 2's crossover: FlashAttention moves less than standard attention once M is well above d^2
    assert flash.loc[ms[-1], "accesses"] < naive.loc[ms[-1], "accesses"]


IO_DEFAULT_MS = [2 ** k for k in range(10, 23)]  # the dashboard's IO-model axis: M = 2^10 .. 2^22 elements


@pytest.mark.parametrize("causal", [False, True])
def test_the_curves_at_the_dashboard_defaults_do_what_the_text_says(causal):
    n, d = 4096, 64
    df = hbm_vs_memory(IO_DEFAULT_MS, n, d, algorithms=("naive", "kv_outer", "q_outer"), causal=causal,
                       dtype_bytes=4)
    acc = df.pivot(index="M", columns="algorithm", values="accesses")
    naive, fa1, fa2 = acc["naive"], acc["kv_outer"], acc["q_outer"]
    assert naive.nunique() == 1 and naive.iloc[0] == 4 * n * d + 4 * n * n  # flat: no tiles, masks change nothing
    flat_from = 4 * d * n  # M at which one block holds every key
    for curve in (fa1, fa2):
        assert curve.is_monotonic_decreasing  # never rises on this grid
        falling = curve[curve.index <= flat_from]
        assert falling.is_unique  # strictly falls until one block holds every key...
        assert curve[curve.index >= flat_from].nunique() == 1  # ...then flattens
        halves = (falling.iloc[:-1].to_numpy() / falling.iloc[1:].to_numpy())[:5]
        assert all(1.85 < h <= 2.0 for h in halves)  # like 1 / M: about halves when M doubles
    assert fa1.iloc[-1] == 6 * n * d + 6 * n and fa2.iloc[-1] == 4 * n * d + n  # the flat values
    assert (fa2 < fa1).all()  # each with its own rule, FA2 moves less than FA1 at every M
    crossing = {name: acc.index[acc[name] < naive].min() for name in ("kv_outer", "q_outer")}
    assert crossing == ({"kv_outer": 2**13, "q_outer": 2**12} if causal else {"kv_outer": 2**14, "q_outer": 2**13})


def test_causal_halves_the_tiled_traffic_at_small_m_and_stops_saving_once_one_block_holds_every_key():
    n, d = 4096, 64
    cols = {}
    for causal in (False, True):
        df = hbm_vs_memory(IO_DEFAULT_MS, n, d, algorithms=("kv_outer", "q_outer"), causal=causal)
        cols[causal] = df.pivot(index="M", columns="algorithm", values="accesses")
    ratio = cols[True] / cols[False]
    assert ratio.loc[2**10].to_numpy() == pytest.approx([0.5, 0.5], abs=0.01)  # (T + 1) / 2 of T passes
    for name in ("kv_outer", "q_outer"):
        assert ratio[name].is_monotonic_increasing  # the saving shrinks as the blocks grow
    assert (ratio.loc[ratio.index >= 4 * d * n] == 1.0).all().all()  # one block holds every key: no saving


def test_fa2_with_causal_can_rise_between_powers_of_two_and_fa1s_rule_made_it_rise_for_good():
    n, d = 4096, 64
    # between grid points: M = 16460 gives Br = 65, Bc = 64, so each row block loads K/V up to the next multiple of
    # 64 past the diagonal, more than at M = 16233 (Br = Bc = 64)
    a, b = (io_cost("q_outer", n, n, d, *fa2_block_sizes(M, d), causal=True).accesses for M in (16233, 16460))
    assert b > a
    # FA1's rule applied to q_outer (Br = min(Bc, d) stays at d while Bc grows): the traffic rises with M
    misapplied = [io_cost("q_outer", n, n, d, *fa1_block_sizes(M, d), causal=True).accesses
                  for M in IO_DEFAULT_MS[-6:]]
    assert misapplied == sorted(misapplied) and misapplied[-1] > 1.5 * misapplied[0]


def test_hbm_vs_memory_with_a_causal_mask_and_bad_input():
    df = hbm_vs_memory([4096, 16384], 512, 32, causal=True, algorithms=("flash", "flash2", "naive"))
    assert set(df.algorithm) == {"kv_outer", "q_outer", "naive"}
    assert list(df.columns) == ["algorithm", "M", "block_q", "block_k", "reads", "writes", "accesses", "hbm_bytes",
                                "flops", "bound"]
    rows = df.set_index(["algorithm", "M"])
    assert (rows.loc[("q_outer", 16384), "block_q"], rows.loc[("q_outer", 16384), "block_k"]) == (128, 32)
    assert pd.isna(rows.loc[("naive", 4096), "block_q"])  # no tiles
    with pytest.raises(ValueError, match="at least one"):
        hbm_vs_memory([], 512, 32)


# ---------------------------------------------------------------------------------------------------------------------
# grouped-query attention: K/V traffic counts per K/V head


@pytest.mark.parametrize("algorithm", ["naive", "kv_outer", "q_outer"])
@pytest.mark.parametrize("causal", [False, True])
def test_gqa_counts_kv_traffic_once_per_kv_head(algorithm, causal):
    n_q, n_k, d, bq, bk, heads, heads_kv, batch = 90, 130, 16, 32, 24, 8, 2, 3
    reads_q, reads_kv, writes, flops = brute_force_split(algorithm, n_q, n_k, d, bq, bk, causal, None)
    c = io_cost(algorithm, n_q, n_k, d, bq, bk, causal=causal, batch=batch, heads=heads, heads_kv=heads_kv)
    assert c.reads == batch * (heads * reads_q + heads_kv * reads_kv)
    assert c.kv_reads == batch * heads_kv * reads_kv
    assert (c.writes, c.flops) == (batch * heads * writes, batch * heads * flops)
    mha = io_cost(algorithm, n_q, n_k, d, bq, bk, causal=causal, batch=batch, heads=heads)
    assert mha == io_cost(algorithm, n_q, n_k, d, bq, bk, causal=causal, batch=batch, heads=heads, heads_kv=heads)
    assert mha.reads - c.reads == batch * (heads - heads_kv) * reads_kv  # the saved K/V traffic
    trace = io_trace(algorithm, n_q, n_k, d, bq, bk, causal=causal, batch=batch, heads=heads, heads_kv=heads_kv)
    assert trace["reads"].iloc[-1] == c.reads


def test_a_kv_head_count_that_does_not_divide_is_refused_with_the_divisors():
    with pytest.raises(ValueError, match=r"Divisors of 12: \[1, 2, 3, 4, 6, 12\]"):
        io_cost("q_outer", 64, 64, 8, 16, 16, heads=12, heads_kv=5)


# ---------------------------------------------------------------------------------------------------------------------
# the model and the kernels agree


@pytest.mark.parametrize("loop_order", ["kv_outer", "q_outer"])
@pytest.mark.parametrize("causal,window", [(False, None), (True, None), (False, (30, 10))])
def test_model_counts_the_tiles_the_kernel_computes(loop_order, causal, window):
    n_q, n_k, d, bq, bk = 150, 110, 8, 32, 24
    q = torch.randn(1, 1, n_q, d)
    k, v = torch.randn(1, 1, n_k, d), torch.randn(1, 1, n_k, d)
    events = []
    flash_attention_forward(q, k, v, block_q=bq, block_k=bk, causal=causal, window=window, loop_order=loop_order,
                            on_tile=events.append)
    flops = sum(FLOPS_PER_SCORE * (e.q_end - e.q_start) * (e.k_end - e.k_start) * d for e in events)
    cost = io_cost(loop_order, n_q, n_k, d, bq, bk, causal=causal, window=window)
    assert flops == cost.flops
    # the operands each kernel loads once per outer block: K_j, V_j (kv_outer) or Q_i (q_outer)
    if loop_order == "kv_outer":
        kv = sum(2 * (e.k_end - e.k_start) * d for e in {(e.k_block, e.k_start, e.k_end): e for e in events}.values())
        per_tile = sum(2 * (e.q_end - e.q_start) * (d + 1) for e in events)
        assert cost.reads == kv + per_tile
    else:
        q_loads = sum((e.q_end - e.q_start) * d for e in {e.q_block: e for e in events}.values())
        kv_loads = sum(2 * (e.k_end - e.k_start) * d for e in events)
        assert cost.reads == q_loads + kv_loads
    trace = io_trace(loop_order, n_q, n_k, d, bq, bk, causal=causal, window=window)
    computed_steps = [s for s, status in zip(trace["step"], trace["status"], strict=True)
                      if status in ("full", "partial")]
    assert computed_steps == [e.step for e in events]
    assert not math.isnan(cost.intensity)
