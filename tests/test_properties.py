"""Property test: random shapes, head groups, tile sizes, masks and dtypes; flash matches the fp64 oracle (SDPA in
float64, tests/_oracle.py), no NaN, and reports exactly the computed tiles. 30 cases in the fast suite, 200 in the
slow one.

Heads: H_kv K/V heads, each shared by G query heads (H = G H_kv): multi-head (G = 1), grouped-query and multi-query.
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flashviz import flash_attention_forward, tile_schedule
from flashviz.core.validate import FLOAT_DTYPES
from tests._oracle import assert_within_oracle_bound, make_qkv

side = st.one_of(st.none(), st.integers(0, 40))


CASES = dict(
    b=st.integers(1, 2),
    h_kv=st.integers(1, 3),
    group=st.integers(1, 3),
    n_q=st.integers(1, 70),
    n_k=st.integers(1, 70),
    d=st.integers(1, 24),
    block_q=st.integers(1, 80),
    block_k=st.integers(1, 80),
    causal=st.booleans(),
    window=st.one_of(st.none(), st.tuples(side, side)),
    dtype=st.sampled_from(FLOAT_DTYPES),
    loop_order=st.sampled_from(["kv_outer", "q_outer"]),
    seed=st.integers(0, 2**16),
)


@settings(max_examples=30, deadline=None)
@given(**CASES)
def test_flash_matches_oracle(b, h_kv, group, n_q, n_k, d, block_q, block_k, causal, window, dtype, loop_order, seed):
    check(b, h_kv, group, n_q, n_k, d, block_q, block_k, causal, window, dtype, loop_order, seed)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(**CASES)
def test_flash_matches_oracle_on_many_cases(b, h_kv, group, n_q, n_k, d, block_q, block_k, causal, window, dtype,
                                            loop_order, seed):
    check(b, h_kv, group, n_q, n_k, d, block_q, block_k, causal, window, dtype, loop_order, seed)


def check(b, h_kv, group, n_q, n_k, d, block_q, block_k, causal, window, dtype, loop_order, seed):
    h = h_kv * group
    q, k, v = make_qkv(b, h, n_q, n_k, d, dtype=dtype, seed=seed, h_kv=h_kv)
    events = []
    out, lse = flash_attention_forward(q, k, v, block_q=block_q, block_k=block_k, causal=causal, window=window,
                                       loop_order=loop_order, return_lse=True, on_tile=events.append)
    assert out.shape == q.shape and out.dtype == dtype and lse.shape == (b, h, n_q)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any()
    assert_within_oracle_bound(out, q, k, v, causal=causal, window=window)
    sched = tile_schedule(n_q, n_k, block_q, block_k, causal=causal, window=window, loop_order=loop_order)
    assert [e.step for e in events] == [t.step for t in sched.computed()]
