"""The Decoding view's measurement layer (flashviz.views.decode.data, flashviz.model.decode_batch) against oracles
written here: the paged copy holds the contiguous cache page by page, flash_decode reads it to the same result, each
block's m and l are the float64 formula's, naive decoding is SDPA's, and the bounds are each device's ridge test."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from flashviz.core.decode import flash_decode
from flashviz.model.decode_batch import bounds_by_device, decode_roofline_rows, variant_costs
from flashviz.model.roofline import GPUS
from flashviz.views.decode.data import (
    SPARE_PAGES,
    DecodeSetup,
    block_stats,
    decode_trace,
    naive_decode,
    paged_copy,
    timed_splits,
)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 200), min_size=1, max_size=4), st.sampled_from([1, 7, 16, 64]), st.integers(0, 5))
def test_the_paged_copy_holds_every_sequences_keys_in_its_pages(lens, page, seed):
    n_max = max(lens)
    k = torch.randn(len(lens), 2, n_max, 3, generator=torch.Generator().manual_seed(seed))
    k_p, v_p, table = paged_copy(k, k + 1, tuple(lens), page, seed=seed)
    used = [math.ceil(n / page) for n in lens]
    assert k_p.shape == (sum(used) + SPARE_PAGES, 2, page, 3) and table.shape == (len(lens), math.ceil(n_max / page))
    pages = [int(table[b, j]) for b in range(len(lens)) for j in range(used[b])]
    assert len(set(pages)) == len(pages)  # no page shared
    for b, n in enumerate(lens):
        gathered = torch.cat([k_p[table[b, j]] for j in range(used[b])], dim=1)  # (H_kv, pages * page, d)
        assert torch.equal(gathered[:, :n], k[b, :, :n]) and torch.equal(
            torch.cat([v_p[table[b, j]] for j in range(used[b])], dim=1)[:, :n], k[b, :, :n] + 1)


@pytest.mark.parametrize("lens, page, splits", [((97, 33), 16, 3), ((256,), 64, 2), ((5, 300, 41), 7, 4)])
def test_flash_decode_on_the_paged_copy_equals_the_contiguous_cache(lens, page, splits):
    g = torch.Generator().manual_seed(1)
    q = torch.randn(len(lens), 4, 1, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(len(lens), 2, max(lens), 8, generator=g, dtype=torch.float64) for _ in range(2))
    k_p, v_p, table = paged_copy(k, v, lens, page)
    seqlens = torch.tensor(lens)
    paged = flash_decode(q, k_p, v_p, cache_seqlens=seqlens, block_table=table, num_splits=splits)
    mask = (torch.arange(max(lens)) < seqlens[:, None])[:, None, None, :]  # (B, 1, 1, N)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    assert torch.allclose(paged, ref, atol=1e-12)
    assert decode_trace(lens, page, splits)[3] < 1e-5  # the animation's own paged-vs-contiguous check


def test_each_blocks_m_and_l_are_the_float64_formula():
    q0, k0 = torch.randn(16, dtype=torch.float64), torch.randn(100, 16, dtype=torch.float64)
    m, l = block_stats(q0, k0, 32)
    scores = (k0 @ q0).tolist()
    for i in range(4):
        block = [s / 4.0 for s in scores[32 * i: 32 * (i + 1)]]  # scaled by 1 / sqrt(16)
        assert m[i] == pytest.approx(max(block)) and l[i] == pytest.approx(sum(math.exp(s - max(block)) for s in block))


def test_naive_decoding_is_sdpa_on_the_valid_keys():
    g = torch.Generator().manual_seed(2)
    q = torch.randn(3, 6, 1, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(3, 2, 50, 8, generator=g, dtype=torch.float64) for _ in range(2))
    lens = (50, 17, 1)
    mask = (torch.arange(50) < torch.tensor(lens)[:, None])[:, None, None, :]
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    assert torch.allclose(naive_decode(q, k, v, lens), ref, atol=1e-12)


def test_timed_splits_time_each_schedule_once_and_name_the_heuristics_choice():
    one_block = DecodeSetup((200,), 8, 2, 16, 0, None, "float32", 2)  # one KV block: every request runs as S = 1
    assert timed_splits(one_block, units=2) == {"flash_decode S=1 (auto)": None}
    many = DecodeSetup((4096,), 4, 1, 16, 0, 8, "float32", 2)  # 16 blocks: S = 1, 2, 4 and the asked-for 8
    assert list(timed_splits(many, units=2).values()) == [1, 2, 4, 8]


def test_variant_costs_and_bounds_follow_the_model():
    costs = variant_costs((1000, 24), 64, 8, 2, "float16")
    assert costs["variant"].tolist() == ["MHA", "GQA (g = 4)", "MQA"] and costs["this"].tolist() == [False, True, False]
    assert costs["kv_bytes"].tolist() == [2 * h * 1024 * 64 * 2 for h in (8, 2, 1)]
    rows = decode_roofline_rows((1000, 24), 64, 8, 2, "float16")
    for kind in ("decode", "prefill"):
        mine = rows[rows["kind"] == kind]
        got = bounds_by_device(mine, GPUS, "float16")
        for d in GPUS:
            intensities = mine.loc[mine["device"] == d.name, "intensity"]
            memory = (intensities < d.peak("float16") / d.bandwidth).all()
            compute = (intensities >= d.peak("float16") / d.bandwidth).all()
            assert ((d.name, d.ridge("float16")) in got["memory"]) == memory
            assert ((d.name, d.ridge("float16")) in got["compute"]) == compute
