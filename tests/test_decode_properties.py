"""Property tests of flash_decode: random batches, head groupings, lengths, page sizes and split counts."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decode import make_case, naive_reference, to_paged

from flashviz import flash_decode


@st.composite
def decode_cases(draw):
    b = draw(st.integers(1, 3))
    h_kv = draw(st.integers(1, 3))
    group = draw(st.integers(1, 3))
    n_q = draw(st.integers(1, 3))
    causal = draw(st.booleans())
    n_max = draw(st.integers(n_q if causal else 1, 70))
    lens = draw(st.lists(st.integers(n_q if causal else 0, n_max), min_size=b, max_size=b))
    page_size = draw(st.sampled_from([None, 1, 4, 16]))
    block_k = draw(st.integers(1, 20)) if page_size is None else page_size * draw(st.integers(1, 3))
    num_splits = draw(st.one_of(st.none(), st.integers(1, 12)))
    return b, h_kv * group, h_kv, n_q, n_max, lens, causal, page_size, block_k, num_splits


@settings(max_examples=40, deadline=None)
@given(decode_cases(), st.integers(0, 2**16))
def test_flash_decode_matches_naive_on_random_caches(case, seed):
    b, h_q, h_kv, n_q, n_max, lens, causal, page_size, block_k, num_splits = case
    q, k, v = make_case(b, h_q, h_kv, n_q, n_max, 8, seed=seed)
    kwargs = dict(cache_seqlens=torch.tensor(lens), causal=causal, block_k=block_k, num_splits=num_splits)
    if page_size is None:
        out, lse = flash_decode(q, k, v, return_lse=True, **kwargs)
    else:
        k_p, v_p, table = to_paged(k, v, page_size, seed=seed)
        out, lse = flash_decode(q, k_p, v_p, block_table=table, return_lse=True, **kwargs)
    ref = naive_reference(q.double(), k.double(), v.double(), lens, causal)
    assert (out.double() - ref).abs().max().item() <= 1e-5
    empty = torch.tensor(lens) == 0
    assert torch.isneginf(lse[empty]).all() and torch.isfinite(lse[~empty]).all()
