"""trace.py: the recorded schedule agrees with tile_schedule and the IO model; the row trace comes from the real
kernel and ends on the exact softmax statistics."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flashviz.core.tiling import tile_schedule
from flashviz.measure.trace import row_trace, schedule_trace
from flashviz.model.iomodel import io_cost


@pytest.mark.parametrize("loop_order", ["kv_outer", "q_outer"])
@pytest.mark.parametrize(("causal", "window"), [(False, None), (True, None), (True, (40, 0)), (False, (16, 16))])
def test_schedule_trace_is_the_tile_schedule_with_io_counters(loop_order, causal, window):
    n, br, bc, d = 200, 32, 48, 16  # ragged last row and column of tiles
    tr = schedule_trace(n, br, bc, causal=causal, window=window, loop_order=loop_order, d=d)
    sched = tile_schedule(n, n, br, bc, causal=causal, window=window, loop_order=loop_order)
    assert [(t.q_block, t.k_block, t.status) for t in sched] == list(zip(tr.q_block, tr.k_block, tr.status,
                                                                          strict=True))
    assert (tr.n_q_blocks, tr.n_k_blocks, tr.steps) == (sched.n_q_blocks, sched.n_k_blocks, len(sched))
    assert tr.computed_steps() == [t.step for t in sched.computed()]
    assert all(a <= b for a, b in zip(tr.hbm_bytes, tr.hbm_bytes[1:], strict=False))  # cumulative
    cost = io_cost(loop_order, n, n, d, br, bc, causal=causal, window=window)
    assert tr.hbm_bytes[-1] == cost.bytes and tr.flops[-1] == cost.flops


def test_schedule_trace_without_d_has_no_counters():
    tr = schedule_trace(64, 16, 16)
    assert tr.hbm_bytes is None and tr.flops is None and tr.causal is False and tr.window is None


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 70), br=st.integers(1, 24), bc=st.integers(1, 24), causal=st.booleans(),
       left=st.one_of(st.none(), st.integers(0, 40)), loop_order=st.sampled_from(["kv_outer", "q_outer"]),
       data=st.data())
def test_row_trace_ends_on_the_exact_max_and_sum(n, br, bc, causal, left, loop_order, data):
    row = data.draw(st.integers(0, n - 1))
    window = None if left is None else (left, 3)
    tr = row_trace(n, 8, br, bc, row=row, causal=causal, window=window, loop_order=loop_order, dtype="float64")
    sched = tile_schedule(n, n, br, bc, causal=causal, window=window, loop_order=loop_order)
    assert list(tr.step) == [t.step for t in sched.computed() if t.q_block == row // br]
    assert list(tr.k_block) == sorted(tr.k_block)  # key blocks arrive left to right in both loop orders
    assert all(a <= b for a, b in zip(tr.m, tr.m[1:], strict=False))  # the running max never falls
    assert tr.m[-1] == pytest.approx(tr.m_exact, abs=1e-12)
    assert tr.l[-1] == pytest.approx(tr.l_exact, rel=1e-12)
    assert tr.lse_kernel == pytest.approx(tr.m_exact + math.log(tr.l_exact), abs=1e-12)


def test_fa1_and_fa2_see_the_same_states_at_different_steps():
    fa1 = row_trace(256, 16, 32, 32, row=100, causal=True, loop_order="kv_outer")
    fa2 = row_trace(256, 16, 32, 32, row=100, causal=True, loop_order="q_outer")
    assert fa1.m == pytest.approx(fa2.m) and fa1.l == pytest.approx(fa2.l, rel=1e-6)
    assert fa1.step != fa2.step
    assert list(fa2.step) == list(range(fa2.step[0], fa2.step[0] + len(fa2.step)))  # FA2: one row, consecutive


def test_row_trace_restores_the_thread_count_and_rejects_bad_rows():
    before = torch.get_num_threads()
    row_trace(64, 8, 16, 16, row=3, threads=1)
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match=r"row must be a query row in 0\.\.63"):
        row_trace(64, 8, 16, 16, row=64)
    with pytest.raises(ValueError, match="dtype"):
        row_trace(64, 8, 16, 16, row=0, dtype="int8")
