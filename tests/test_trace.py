"""trace.py: the recorded schedule agrees with tile_schedule and the IO model; the row trace comes from the real
kernel and ends on the exact softmax statistics."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flashviz.app.state import PRESETS, Settings, apply_preset
from flashviz.core.tiling import tile_schedule
from flashviz.measure.trace import pick_row, rescale_factor, row_rescales, row_trace, schedule_trace
from flashviz.model.iomodel import io_cost
from tests._oracle import visible


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


def _brute_force_row(n, d, br, bc, row, *, causal, window):
    """The rescale record of one row, recomputed from its scores alone: float64, the random Q, K of seed 0 (drawn
    exactly as row_trace draws them), key blocks left to right over the tiles row_trace reports."""
    gen = torch.Generator().manual_seed(0)
    q, k, _ = (torch.randn(1, 1, n, d, generator=gen).double() for _ in range(3))
    s = (q[0, 0, row] / math.sqrt(d)) @ k[0, 0].T  # (N,)
    s = s.masked_fill(~visible(n, n, causal, window)[row], -math.inf)  # the mask written from the conventions
    sched = tile_schedule(n, n, br, bc, causal=causal, window=window)
    blocks = sorted({t.k_block for t in sched.computed() if t.q_block == row // br})
    m, l, out = -math.inf, 0.0, []
    for j in blocks:
        tile = s[j * bc:(j + 1) * bc]
        m_new = max(m, float(tile.max()))
        factor = 1.0 if m_new == m else math.exp(m - m_new)
        tile_sum = float(torch.exp(tile - m_new).sum()) if math.isfinite(m_new) else 0.0
        out.append({"m_before": m, "m": m_new, "factor": factor, "l_before": l, "l_rescaled": factor * l,
                    "l": factor * l + tile_sum, "tile_sum": tile_sum, "grew": math.isfinite(m) and m_new > m})
        m, l = m_new, factor * l + tile_sum
    return out


@pytest.mark.parametrize("loop_order", ["kv_outer", "q_outer"])
@pytest.mark.parametrize(("n", "br", "bc", "row", "causal", "window"), [
    (16, 4, 4, 15, True, None),  # the whiteboard grid
    (100, 16, 24, 97, False, None),  # ragged last row and column of tiles
    (70, 32, 8, 40, True, (20, 0)),  # sliding window: partial tiles where the row sees nothing
    (10, 16, 3, 5, False, (2, 2)),  # Br > N
])
def test_the_rescale_record_matches_a_brute_force_recomputation(loop_order, n, br, bc, row, causal, window):
    tr = row_trace(n, 8, br, bc, row=row, causal=causal, window=window, loop_order=loop_order, dtype="float64")
    expected = _brute_force_row(n, 8, br, bc, row, causal=causal, window=window)
    assert len(tr.step) == len(expected) >= 1
    for name in ("m_before", "m", "factor", "l_before", "l_rescaled", "l", "tile_sum"):
        got, want = getattr(tr, name), [e[name] for e in expected]
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12), name
    assert list(tr.grew) == [e["grew"] for e in expected] and tr.rescales == sum(tr.grew)
    assert all(f < 1 for f, g in zip(tr.factor, tr.grew, strict=True) if g)  # a rescale shrinks the old sum
    assert tr.lse_kernel == pytest.approx(tr.m_exact + math.log(tr.l_exact), abs=1e-12)  # L is still exact


def test_rescale_factor_conventions():
    assert rescale_factor(2.0, 2.0) == 1.0 and rescale_factor(-math.inf, -math.inf) == 1.0
    assert rescale_factor(-math.inf, 0.5) == 0.0 and rescale_factor(1.0, 2.0) == pytest.approx(math.exp(-1))


def test_row_rescales_counts_what_the_kernel_does_on_every_row():
    n, d, br, bc = 40, 8, 8, 4
    counted = row_rescales(n, d, bc, range(n), causal=True)
    from_kernel = [row_trace(n, d, br, bc, row=r, causal=True).rescales for r in range(n)]
    assert counted == from_kernel and max(counted) >= 2


@pytest.mark.parametrize("preset", list(PRESETS))
def test_pick_row_finds_a_rescaling_row_at_every_dashboard_preset(preset):
    s = apply_preset(Settings(), preset)
    pick = pick_row(s.n, s.d, s.br, s.bc, causal=s.causal, window=s.window, dtype=s.dtype, near=s.row)
    assert 0 <= pick.row < s.n and pick.rescales >= 1
    assert pick.reason == f"row {pick.row}: the most rescales ({pick.rescales} of {pick.tiles} tiles) among " \
        f"{pick.checked} rows"
    if s.n * s.n * s.d <= 1024 * 1024 * 64:  # run the kernel where it is quick: it sees the same rescales
        tr = row_trace(s.n, s.d, s.br, s.bc, row=pick.row, causal=s.causal, window=s.window, dtype=s.dtype)
        assert tr.rescales == pick.rescales and len(tr.step) == pick.tiles


def test_pick_row_prefers_the_row_near_the_given_one_among_equals_and_refuses_bad_sizes():
    one_tile = pick_row(8, 4, 8, 8, near=3)  # one tile: nothing can rescale, every row ties at 0
    assert (one_tile.row, one_tile.rescales, one_tile.tiles, one_tile.checked) == (3, 0, 1, 8)
    big = pick_row(4096, 16, 512, 512)
    assert big.checked == 512 and big.rescales >= 1
    with pytest.raises(ValueError, match="block sizes >= 1"):
        pick_row(16, 8, 0, 4)
