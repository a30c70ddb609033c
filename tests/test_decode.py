"""flash_decode against its oracles: SDPA (enable_gqa, explicit mask), naive attention on the gathered pages, an fp64
reference with the twice-plain-PyTorch error rule, and itself across every split count and cache layout."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from _oracle import FLOOR, max_err

import flashviz.core.decode_layouts as decode_layouts
import flashviz.core.decode_paged as decode_paged
from flashviz import flash_decode, naive_attention
from flashviz.core.decode import MergeEvent, SplitEvent, decode_partials, merge_partials, num_splits_heuristic
from flashviz.core.decode_paged import pool_owners
from flashviz.numerics import make_inputs


def make_case(b, h_q, h_kv, n_q, n_max, d, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h_q, n_q, d, generator=g, dtype=torch.float64)
    k, v = (torch.randn(b, h_kv, n_max, d, generator=g, dtype=torch.float64) for _ in range(2))
    return q.to(dtype), k.to(dtype), v.to(dtype)


def visible(lens, n_q, n_max, causal):
    """(B, 1, N_q, N_max) bool: key j visible to row i of sequence b (bottom-right causal)."""
    lens = torch.as_tensor(lens).view(-1, 1, 1, 1)
    j = torch.arange(n_max).view(1, 1, 1, -1)
    limit = lens - (n_q - 1 - torch.arange(n_q)).view(1, 1, -1, 1) if causal else lens
    return j < limit


def naive_reference(q, k, v, lens, causal):
    """naive_attention per sequence on its valid keys, K/V expanded per group; rows that see nothing are zeros."""
    g = q.shape[1] // k.shape[1]
    out = torch.zeros_like(q)
    for b, n in enumerate(torch.as_tensor(lens).tolist()):
        if n == 0:
            continue
        kb, vb = (x[b : b + 1, :, :n].repeat_interleave(g, dim=1) for x in (k, v))
        if causal:  # bottom-right: prepend the n - N_q earlier rows so that top-left causal lines up, keep the last
            pad = q.new_zeros(1, q.shape[1], n - q.shape[2], q.shape[3])
            out[b : b + 1] = naive_attention(torch.cat([pad, q[b : b + 1]], 2), kb, vb, causal=True)[:, :, -q.shape[2]:]
        else:
            out[b : b + 1] = naive_attention(q[b : b + 1], kb, vb)
    return out


def to_paged(k, v, page_size, seed=0, pad_value=-1):
    """Scatter a contiguous cache into shuffled pages; unused table entries hold pad_value."""
    b, h, n_max, d = k.shape
    n_pages = math.ceil(n_max / page_size)
    k, v = (F.pad(x, (0, 0, 0, n_pages * page_size - n_max)) for x in (k, v))
    perm = torch.randperm(b * n_pages + 3, generator=torch.Generator().manual_seed(seed))[: b * n_pages]
    table = perm.view(b, n_pages)
    k_p = torch.randn(b * n_pages + 3, h, page_size, d, dtype=k.dtype)  # spare pages hold garbage
    v_p = torch.randn_like(k_p)
    for i in range(b):
        for p in range(n_pages):
            k_p[table[i, p]] = k[i, :, p * page_size : (p + 1) * page_size]
            v_p[table[i, p]] = v[i, :, p * page_size : (p + 1) * page_size]
    return k_p, v_p, table


CASES = [  # (B, H_q, H_kv, N_q, N_max, d, lens)
    (1, 4, 4, 1, 97, 16, [97]),  # MHA
    (2, 8, 2, 1, 257, 32, [257, 100]),  # GQA, ragged lengths
    (3, 6, 1, 3, 130, 8, [130, 3, 64]),  # MQA, speculative rows
    (2, 4, 2, 2, 1025, 64, [2, 1025]),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("num_splits", [None, 1, 3, 64])
def test_matches_sdpa_and_fp64_reference(case, causal, num_splits):
    b, h_q, h_kv, n_q, n_max, d, lens = case
    q, k, v = make_case(b, h_q, h_kv, n_q, n_max, d)
    lens_t = torch.tensor(lens)
    out = flash_decode(q, k, v, cache_seqlens=lens_t, causal=causal, num_splits=num_splits, block_k=16)
    mask = visible(lens, n_q, n_max, causal)
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    assert max_err(out, sdpa) <= 1e-5
    scaled = flash_decode(q, k, v, cache_seqlens=lens_t, causal=causal, num_splits=num_splits, block_k=16, scale=0.9)
    sdpa = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask, enable_gqa=True,
                                          scale=0.9)
    assert max_err(scaled, sdpa) <= 1e-5  # the user's scale, against SDPA's (not 1/sqrt(d))
    ref = naive_reference(q.double(), k.double(), v.double(), lens, causal)
    plain = naive_reference(q, k, v, lens, causal)
    err = max_err(out, ref)
    assert err <= 1e-5 and err <= 2 * max_err(plain, ref) + FLOOR[torch.float32]


def test_every_split_count_agrees():
    q, k, v = make_case(2, 8, 2, 2, 300, 16)
    lens = torch.tensor([300, 150])
    n_blocks = math.ceil(300 / 16)
    outs = [flash_decode(q, k, v, cache_seqlens=lens, block_k=16, num_splits=s, return_lse=True)
            for s in range(1, n_blocks + 1)]
    for out, lse in outs[1:]:
        assert max_err(out, outs[0][0]) <= 1e-6 and max_err(lse, outs[0][1]) <= 1e-5


@pytest.mark.parametrize("page_size", [1, 16, 7])
@pytest.mark.parametrize("causal", [False, True])
def test_paged_equals_contiguous(page_size, causal):
    q, k, v = make_case(3, 4, 2, 2, 100, 8)
    lens = torch.tensor([100, 2, 61])
    k_p, v_p, table = to_paged(k, v, page_size)
    for s in (None, 1, 4):
        paged = flash_decode(q, k_p, v_p, cache_seqlens=lens, block_table=table, num_splits=s, causal=causal)
        contiguous = flash_decode(q, k, v, cache_seqlens=lens, num_splits=s, causal=causal)
        assert max_err(paged, contiguous) <= 1e-6
        assert max_err(paged, naive_reference(q, k, v, lens, causal)) <= 1e-5


def test_padding_past_a_sequence_is_ignored():
    q, k, v = make_case(2, 2, 2, 1, 32, 8)
    k_p, v_p, table = to_paged(k, v, 8)
    lens = torch.tensor([32, 9])  # sequence 1 uses 2 of its 4 pages
    table[1, 2:] = 10**6
    out = flash_decode(q, k_p, v_p, cache_seqlens=lens, block_table=table)
    assert max_err(out, naive_reference(q, k, v, lens, False)) <= 1e-5


def test_rows_that_see_nothing_are_zero_with_lse_minus_inf():
    q, k, v = make_case(2, 4, 2, 1, 40, 8)
    out, lse = flash_decode(q, k, v, cache_seqlens=torch.tensor([0, 40]), num_splits=3, return_lse=True)
    assert torch.equal(out[0], torch.zeros_like(out[0])) and torch.isneginf(lse[0]).all()
    assert torch.isfinite(out).all() and torch.isfinite(lse[1]).all()
    out, lse = flash_decode(q, k, v, cache_seqlens=torch.tensor([0, 0]), return_lse=True)
    assert not out.any() and torch.isneginf(lse).all()


def test_lse_is_the_logsumexp_of_the_scaled_scores():
    q, k, v = make_case(2, 6, 3, 2, 50, 16, dtype=torch.float64)
    lens = torch.tensor([50, 20])
    _, lse = flash_decode(q, k, v, cache_seqlens=lens, return_lse=True, num_splits=4, scale=0.3, block_k=8)
    S = torch.einsum("bhid,bhjd->bhij", q, k.repeat_interleave(2, dim=1)) * 0.3  # G = 6 / 3
    S = S.masked_fill(~visible(lens, 2, 50, False), float("-inf"))
    assert max_err(lse, torch.logsumexp(S, -1)) <= 1e-12


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_dtypes_within_twice_sdpas_error(dtype):
    """flash-attn's rule against an fp32-scored reference: SDPA in the same dtype, per sequence on its own keys (a
    naive reference in bf16 would round S too, and let a kernel that rounds S pass). Outlier channels make the
    rows peaked, where rounding S shows (tests/test_dtype_rule.py runs every path)."""
    q, k, v = make_inputs(2, 4, 1, 200, 32, dtype=dtype, outliers=True, h_kv=2)
    lens = torch.tensor([200, 77])
    out = flash_decode(q, k, v, cache_seqlens=lens, num_splits=4, block_k=32)
    assert out.dtype == dtype
    for b, n in enumerate(lens.tolist()):
        x = (q[b : b + 1], k[b : b + 1, :, :n], v[b : b + 1, :, :n])
        ref = F.scaled_dot_product_attention(*(t.double() for t in x), enable_gqa=True)
        theirs = F.scaled_dot_product_attention(*x, enable_gqa=True)
        assert max_err(out[b : b + 1], ref) <= 2 * max_err(theirs, ref) + FLOOR[dtype]


def test_on_split_reports_splits_then_the_merge():
    q, k, v = make_case(2, 4, 2, 2, 100, 8)
    k_p, v_p, table = to_paged(k, v, 10)
    events = []
    out, lse = flash_decode(q, k_p, v_p, cache_seqlens=torch.tensor([95, 30]), block_table=table, num_splits=3,
                            return_lse=True, on_split=events.append)
    splits, merge = events[:-1], events[-1]
    assert all(isinstance(e, SplitEvent) for e in splits) and isinstance(merge, MergeEvent)
    assert len(splits) == merge.num_splits == 3  # 10 blocks of 10 keys -> 4, 4, 2 blocks
    assert [(e.start, e.stop) for e in splits] == [(0, 40), (40, 80), (80, 95)]
    assert splits[0].pages == tuple(table[0, :4].tolist()) and splits[2].pages == tuple(table[0, 8:10].tolist())
    for e in splits:
        assert e.m.shape == e.l.shape == e.lse.shape == (2,) and e.lse.device.type == "cpu"
        assert torch.allclose(e.lse, e.m + torch.log(e.l))
    assert torch.allclose(merge.weights.sum(0), torch.ones(2))
    assert torch.allclose(merge.lse, lse[0, 0]) and torch.allclose(merge.lse, torch.logsumexp(merge.lse_splits, 0))
    assert torch.allclose(merge.weights, torch.exp(merge.lse_splits - merge.lse))
    # the splits alone, recombined by their weights, give the output of batch 0, head 0
    parts = [flash_decode(q[:1, :1], k[:1, :1, e.start : e.stop], v[:1, :1, e.start : e.stop]) for e in splits]
    recombined = sum(w[:, None] * p[0, 0] for w, p in zip(merge.weights, parts, strict=True))
    assert max_err(recombined, out[0, 0]) <= 1e-6


def test_heuristic_follows_flash_attn():
    assert num_splits_heuristic(48, 108, 64) == 2  # flash-attn's worked example: efficiency 0.89
    assert num_splits_heuristic(8, 2, 128) == 1  # 8 groups fill 2 threads: never split
    assert num_splits_heuristic(1, 2, 128) == 2  # MQA, B=1 on 2 threads: one split per thread
    assert num_splits_heuristic(1, 16, 3) == 3  # no more splits than blocks
    for work in range(1, 40):
        s = num_splits_heuristic(work, 32, 50)
        assert 1 <= s <= 32 and (s == 1 or work < 0.8 * 32)


def test_auto_splits_on_a_short_cache_still_exact():
    q, k, v = make_case(1, 2, 1, 1, 5, 4)
    assert max_err(flash_decode(q, k, v), naive_reference(q, k, v, [5], False)) <= 1e-6


BAD = [
    (dict(k=torch.zeros(1, 3, 8, 4)), ValueError, "use H_kv in [1, 2, 4]"),
    (dict(cache_seqlens=torch.tensor([9])), ValueError, "exceed the cache's capacity"),
    (dict(cache_seqlens=torch.tensor([-1])), ValueError, "must be >= 0"),
    (dict(cache_seqlens=torch.tensor([2.0])), TypeError, "must hold integers"),
    (dict(cache_seqlens=torch.tensor([2, 3])), ValueError, "one valid length per sequence"),
    (dict(num_splits=0), ValueError, "num_splits must be >= 1"),
    (dict(num_splits=1.5), TypeError, "num_splits must be a positive int"),
    (dict(block_k=0), ValueError, "block_k must be >= 1"),
    (dict(q=torch.zeros(4, 1, 4)), ValueError, "q must be 4-D"),
    (dict(q=torch.zeros(1, 4, 1, 4, dtype=torch.int64)), TypeError, "q must be float16"),
    (dict(k=torch.zeros(1, 2, 8, 4, dtype=torch.float64)), TypeError, "share one dtype"),
    (dict(v=torch.zeros(1, 2, 8, 5)), ValueError, "k_cache and v_cache must have one shape"),
    (dict(q=torch.zeros(1, 4, 3, 4), causal=True, cache_seqlens=torch.tensor([2])), ValueError, "N_q = 3"),
    (dict(causal=1), TypeError, "causal must be True or False"),
]


@pytest.mark.parametrize(("change", "error", "message"), BAD)
def test_bad_inputs_say_how_to_fix(change, error, message):
    args = dict(q=torch.zeros(1, 4, 1, 4), k=torch.zeros(1, 2, 8, 4)) | change
    q, k = args.pop("q"), args.pop("k")
    v = args.pop("v", torch.zeros_like(k))
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        flash_decode(q, k, v, **args)


PAGED_BAD = [
    (torch.tensor([[0, 5]]), ValueError, r"block_table\[0, 1\] = 5 is not a page"),
    (torch.tensor([[0, -1]]), ValueError, r"block_table\[0, 1\] = -1 is not a page"),
    (torch.tensor([[0.0, 1.0]]), TypeError, "must hold integers"),
    (torch.tensor([0, 1]), ValueError, r"block_table must be \(B, max_pages\)"),
]


@pytest.mark.parametrize(("table", "error", "message"), PAGED_BAD)
def test_bad_block_tables_say_how_to_fix(table, error, message):
    k_p = torch.zeros(3, 2, 4, 8)  # 3 pages of 4 keys
    with pytest.raises(error, match=message):
        flash_decode(torch.zeros(1, 2, 1, 8), k_p, k_p, block_table=table, cache_seqlens=torch.tensor([8]))


def test_paged_block_k_must_hold_whole_pages():
    k_p = torch.zeros(3, 2, 4, 8)
    with pytest.raises(ValueError, match="multiple of page_size=4"):
        flash_decode(torch.zeros(1, 2, 1, 8), k_p, k_p, block_table=torch.tensor([[0, 1]]), block_k=6)


def test_paged_paths_pool_in_place_and_gathered_agree():
    """A full pool is read in place (pool_owners finds an owner per page); a sparse or shared one is gathered."""
    q, k, v = make_case(2, 4, 2, 1, 64, 8)
    k_p, v_p, table = to_paged(k, v, 8)  # 16 pages used of 19
    full, sparse = torch.tensor([64, 64]), torch.tensor([64, 3])  # 16 / 19 and 9 / 19 pages in use
    assert pool_owners(table, full, 8, k_p.shape[0]) is not None
    assert pool_owners(table, sparse, 8, k_p.shape[0]) is None
    shared = table.clone()
    shared[1, 0] = shared[0, 0]  # a shared prefix page: its owner is not unique, so gather
    assert pool_owners(shared, full, 8, k_p.shape[0]) is None
    k2, v2 = k.clone(), v.clone()
    k2[1, :, :8], v2[1, :, :8] = k[0, :, :8], v[0, :, :8]
    for view, lens, kk, vv in ((table, full, k, v), (table, sparse, k, v), (shared, full, k2, v2)):
        for s in (None, 1, 3):
            out = flash_decode(q, k_p, v_p, cache_seqlens=lens, block_table=view, num_splits=s, causal=True)
            assert max_err(out, naive_reference(q, kk, vv, lens, True)) <= 1e-5


def test_contiguous_splits_are_views_batched_when_they_tile_the_cache():
    """The full splits of a cache whose length they tile are ONE batch of views (no K/V copy); the others are views
    too, one batched matmul per split."""
    k = torch.randn(2, 3, 256, 8)
    pieces = list(decode_layouts.contiguous_pieces(k, k, chunk=64, n_splits=4, max_len=256, step=64))
    assert [(p[0], p[1], p[2], p[3]) for p in pieces] == [(0, 4, 0, 64)]  # split0, count, key0, size
    assert pieces[0][4].data_ptr() == k.data_ptr() and pieces[0][4].shape == (2 * 3 * 4, 64, 8)
    pieces = list(decode_layouts.contiguous_pieces(k, k, chunk=64, n_splits=3, max_len=150, step=64))
    assert [(p[0], p[1], p[2], p[3]) for p in pieces] == [(0, 1, 0, 64), (1, 1, 64, 64), (2, 1, 128, 22)]
    assert all(p[4].data_ptr() == k[:, :, p[2]].data_ptr() and p[4]._base is k for p in pieces)  # views of k


@pytest.mark.parametrize("num_splits", [1, 2, 3, 4, 8, 16])
def test_batched_split_path_matches_reference(num_splits):
    q, k, v = make_case(2, 6, 3, 2, 256, 16)  # 16 blocks of 16 keys tile the 256-key cache
    out = flash_decode(q, k, v, num_splits=num_splits, block_k=16, causal=True)
    assert max_err(out, naive_reference(q, k, v, [256, 256], True)) <= 1e-5


@pytest.mark.parametrize("num_splits", [None, 1, 2, 5])
def test_pool_fully_in_use_needs_no_mask(num_splits):
    """Every page full and in use (the benchmark's case): the in-place pool path skips masking."""
    q, k, v = make_case(2, 4, 2, 1, 64, 8)
    k_p, v_p = (x.view(2, 2, 4, 16, 8).permute(0, 2, 1, 3, 4).reshape(8, 2, 16, 8) for x in (k, v))
    table = torch.arange(8).view(2, 4)  # sequence b's page p is physical page 4b + p
    out = flash_decode(q, k_p, v_p, block_table=table, num_splits=num_splits)
    assert max_err(out, naive_reference(q, k, v, [64, 64], False)) <= 1e-5


def pool_with_nan_spares(k, v, page_size, table, spare):
    """The cache in pages placed where `table` says, plus `spare` unused pages full of NaN (freed, never written)."""
    b, h, n_max, d = k.shape
    n_pages = table.shape[1]
    k, v = (F.pad(x, (0, 0, 0, n_pages * page_size - n_max)) for x in (k, v))
    k_p = torch.full((b * n_pages + spare, h, page_size, d), float("nan"), dtype=k.dtype)
    v_p = torch.full_like(k_p, float("nan"))
    for i in range(b):
        for p in range(n_pages):
            k_p[table[i, p]] = k[i, :, p * page_size : (p + 1) * page_size]
            v_p[table[i, p]] = v[i, :, p * page_size : (p + 1) * page_size]
    return k_p, v_p


@pytest.mark.parametrize("page_size", [1, pytest.param(7, marks=pytest.mark.slow), 16,
                                       pytest.param(256, marks=pytest.mark.slow)])
@pytest.mark.parametrize("order", ["consecutive", "shuffled"])
@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("step_bytes", [None, 1536])  # None: the default; 1536 B: 3 pages per step, last one partial
def test_pool_read_in_place_equals_contiguous(page_size, order, batch, step_bytes, monkeypatch):
    """The in-place pool path (steps of pages, one sequence's queries reused or several gathered; one segment summed
    by the matmul, several by a 0/1 matrix product) equals the contiguous cache. Consecutive tables fill the whole
    pool (a fresh cache); shuffled ones leave two unused pages full of NaN, which must not leak."""
    if step_bytes is not None:
        monkeypatch.setattr(decode_paged, "STEP_ROW_BYTES", step_bytes)  # rows of a page: 2 * 4 * 16 * 4 B = 512 B
    n_pages, spare = 5, (0 if order == "consecutive" else 2)
    n = n_pages * page_size
    q, k, v = make_case(batch, 8, 2, 2, n, 16, seed=page_size)
    lens = torch.tensor([n, n - page_size // 2 - 1][:batch])
    table = torch.arange(batch * n_pages)
    if order == "shuffled":
        table = torch.randperm(batch * n_pages + spare, generator=torch.Generator().manual_seed(1))[: batch * n_pages]
    table = table.view(batch, n_pages)
    k_p, v_p = pool_with_nan_spares(k, v, page_size, table, spare)
    assert pool_owners(table, lens, page_size, k_p.shape[0]) is not None  # the in-place path, not the gather
    for causal in (False, True):
        for s in (None, 1, 3):
            contiguous = flash_decode(q, k, v, cache_seqlens=lens, num_splits=s, causal=causal, block_k=page_size)
            paged = flash_decode(q, k_p, v_p, cache_seqlens=lens, block_table=table, num_splits=s, causal=causal)
            assert max_err(paged, contiguous) <= 1e-6
            assert max_err(paged, naive_reference(q, k, v, lens, causal)) <= 1e-5


def _layouts():
    """(name, q, caches, kwargs, lens, the same keys and values as a contiguous cache) for every path of the tuned
    layouts: contiguous splits batched as one view and one by one, the page pool read in place, pages gathered (a
    sparse pool), a shared page (gathered)."""
    q, k, v = make_case(2, 6, 3, 2, 256, 16, seed=5)
    full = torch.tensor([256, 256])
    yield "contiguous_batched", q, (k, v), {"block_k": 16}, full, (k, v)
    yield "contiguous_ragged", q, (k, v), {"block_k": 16}, torch.tensor([250, 77]), (k, v)
    k_p, v_p = (x.view(2, 3, 16, 16, 16).transpose(1, 2).reshape(32, 3, 16, 16) for x in (k, v))
    table = torch.arange(32).view(2, 16)  # page p of sequence b is physical page 16 b + p: every page in use
    yield "paged_in_place", q, (k_p, v_p), {"block_table": table}, torch.tensor([256, 200]), (k, v)
    yield "paged_gathered", q, (k_p, v_p), {"block_table": table}, torch.tensor([100, 5]), (k, v)  # 8 of 32 pages
    shared = table.clone()
    shared[1, 0] = 0  # sequence 1 reads sequence 0's first page
    k2, v2 = k.clone(), v.clone()
    k2[1, :, :16], v2[1, :, :16] = k[0, :, :16], v[0, :, :16]
    yield "paged_shared_page", q, (k_p, v_p), {"block_table": shared}, full, (k2, v2)


LAYOUTS = [case[0] for case in _layouts()]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("num_splits", [1, 3, 16])
def test_plain_loop_over_splits_agrees_with_every_tuned_layout(layout, causal, num_splits):
    """decode_partials(plain=True), one short loop over the splits, gives the tuned paths' O_s and L_s, split for
    split, and merge_partials of them is flash_decode's output and logsumexp, and attention over the valid keys."""
    _, q, (kc, vc), kwargs, lens, (k, v) = next(case for case in _layouts() if case[0] == layout)
    call = dict(cache_seqlens=lens, num_splits=num_splits, causal=causal, **kwargs)
    if layout.startswith("paged"):  # the path the name promises
        in_place = pool_owners(kwargs["block_table"], lens, 16, kc.shape[0]) is not None
        assert in_place == (layout == "paged_in_place")
    plain_outs, plain_lses = decode_partials(q, kc, vc, plain=True, **call)
    outs, lses = decode_partials(q, kc, vc, **call)
    assert plain_outs.shape == outs.shape and plain_outs.shape[0] >= 1
    assert torch.equal(torch.isneginf(plain_lses), torch.isneginf(lses))  # the same splits see nothing
    assert max_err(plain_outs, outs) <= 1e-5
    assert max_err(plain_lses.nan_to_num(neginf=0.0), lses.nan_to_num(neginf=0.0)) <= 1e-5
    out, lse = flash_decode(q, kc, vc, return_lse=True, **call)
    merged, merged_lse = merge_partials(plain_outs, plain_lses)
    assert max_err(merged, out) <= 1e-5 and max_err(merged_lse, lse) <= 1e-5
    assert max_err(merged, naive_reference(q, k, v, lens, causal)) <= 1e-5


def test_merge_partials_is_attention_over_the_union_of_the_parts():
    """Parts of the keys of any sizes (one empty for some rows) merge to attention over all the keys; the merge runs in
    fp32 for half inputs and ignores an empty part's output, even NaN."""
    q, k, v = make_case(1, 2, 2, 5, 50, 8, seed=9)
    cuts = [0, 7, 20, 21, 50]
    outs, lses = [], []
    for a, b in itertools.pairwise(cuts):
        s = (q.double() @ k[:, :, a:b].double().transpose(-1, -2)) / math.sqrt(8)  # (1, 2, 5, n)
        if a == 20:
            s[:, :, :3] = -math.inf  # rows 0..2 see nothing of part [20, 21)
        lse = torch.logsumexp(s, dim=-1)
        o = torch.softmax(s, dim=-1) @ v[:, :, a:b].double()  # NaN where the row saw nothing
        outs.append(o)
        lses.append(lse)
    assert torch.isnan(outs[2][:, :, :3]).all()
    hidden = torch.zeros(5, 50, dtype=torch.bool)
    hidden[:3, 20] = True
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=~hidden)
    out, L = merge_partials(torch.stack(outs), torch.stack(lses))
    assert out.dtype == torch.float64 and max_err(out, want) <= 1e-12
    s_all = (q.double() @ k.double().transpose(-1, -2) / math.sqrt(8)).masked_fill(hidden, -math.inf)
    assert max_err(L, torch.logsumexp(s_all, dim=-1)) <= 1e-12
    half, half_L = merge_partials(torch.stack(outs).half(), torch.stack(lses).half())
    assert half.dtype == half_L.dtype == torch.float32 and max_err(half, want) <= 1e-2


def test_merge_partials_of_nothing_is_zero_and_minus_inf_and_shapes_are_checked():
    out, L = merge_partials(torch.full((3, 2, 4), float("nan")), torch.full((3, 2), -math.inf))
    assert torch.equal(out, torch.zeros(2, 4)) and torch.isneginf(L).all()
    out, L = merge_partials(torch.zeros(0, 2, 4), torch.zeros(0, 2))  # no parts at all
    assert torch.equal(out, torch.zeros(2, 4)) and torch.isneginf(L).all()
    with pytest.raises(ValueError, match=r"outs \(S, \.\.\., d\) and lses \(S, \.\.\.\)"):
        merge_partials(torch.zeros(3, 2, 4), torch.zeros(2, 3))
