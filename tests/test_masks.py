"""Mask presets and the mask_mod tile schedule, against brute-force definitions and torch's own create_mask (vmap)."""

import doctest

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.nn.attention.flex_attention import and_masks, create_mask, or_masks

import flashviz.core.blockmask as blockmask_module
import flashviz.core.maskeval as maskeval_module
import flashviz.core.tiling as tiling_module
import flashviz.masks as masks_module
from flashviz import FULL, PARTIAL, SKIPPED, flash_attention_forward
from flashviz.core.maskeval import ELEMENT_BUDGET, classify_blocks
from flashviz.core.tilemask import TileMasks
from flashviz.core.tiling import tile_schedule
from flashviz.masks import (
    alibi,
    attention_sink,
    causal_mask,
    check_mask_lengths,
    chunked,
    dilated,
    document,
    prefix_lm,
    sliding_window,
    softcap,
)

# Each preset with an independent element-level definition: visible(i, j) for query i, key j.
DEFINITIONS = {
    "causal": (lambda: causal_mask, lambda i, j: j <= i),
    "window_3_1": (lambda: sliding_window(3, 1), lambda i, j: i - 3 <= j <= i + 1),
    "window_None_0": (lambda: sliding_window(None, 0), lambda i, j: j <= i),
    "window_2_None": (lambda: sliding_window(2, None), lambda i, j: j >= i - 2),
    "window_huge": (lambda: sliding_window(10**30, 10**20), lambda i, j: True),  # reach past int64: every key
    "dilated_huge_3": (lambda: dilated(10**30, 3), lambda i, j: (i - j) % 3 == 0),
    "prefix_lm_5": (lambda: prefix_lm(5), lambda i, j: j < 5 or j <= i),
    "sink_2_3": (lambda: attention_sink(2, 3), lambda i, j: j <= i and (j < 2 or j >= i - 3)),
    "chunked_4": (lambda: chunked(4), lambda i, j: j <= i and i // 4 == j // 4),
    "dilated_4_2": (lambda: dilated(4, 2), lambda i, j: abs(i - j) <= 4 and (i - j) % 2 == 0),
    "document_5_7_4": (lambda: document([5, 7, 4]), lambda i, j: DOC[i] == DOC[j]),
}
DOC = [0] * 5 + [1] * 7 + [2] * 4  # document of each of the 16 tokens of document([5, 7, 4])
N = 16


def dense(mask_mod, b=1, h=1, n_q=N, n_k=N):
    """torch's own element mask (vmap over scalar indices): (B, H, N_q, N_k) bool."""
    return create_mask(mask_mod, b, h, n_q, n_k, device="cpu")


def brute_status(vis, q0, q1, k0, k1):
    """Status of a tile from a (B, H, N_q, N_k) dense mask, over the union of (b, h)."""
    block = vis[:, :, q0:q1, k0:k1].flatten(2)  # (B, H, elements)
    if not block.any():
        return SKIPPED
    return FULL if block.all() else PARTIAL


@pytest.mark.parametrize("name", DEFINITIONS)
def test_preset_matches_its_definition_and_vmap(name):
    factory, visible = DEFINITIONS[name]
    expected = torch.tensor([[visible(i, j) for j in range(N)] for i in range(N)])
    assert torch.equal(dense(factory())[0, 0], expected)  # under torch's vmap, as FlexAttention calls it
    a = torch.arange(N)
    assert torch.equal(factory()(torch.tensor(0), torch.tensor(0), a[:, None], a[None, :]), expected)  # broadcast


def check_schedule(mask_mod, n_q, n_k, bq, bk, *, batch=1, heads=1, **geom):
    sched = tile_schedule(n_q, n_k, bq, bk, mask_mod=mask_mod, batch=batch, heads=heads, **geom)
    vis = dense(mask_mod, batch, heads, n_q, n_k)
    if geom.get("causal"):
        vis = vis & dense(causal_mask, 1, 1, n_q, n_k)
    if geom.get("window"):
        vis = vis & dense(sliding_window(*geom["window"]), 1, 1, n_q, n_k)
    for t in sched:
        assert t.status == brute_status(vis, t.q_start, t.q_end, t.k_start, t.k_end), t
        if t.status == PARTIAL:  # the tile mask the kernels apply is exactly the element mask
            hidden = TileMasks(sched, "cpu").hidden(t)
            want = ~vis[:, :, t.q_start:t.q_end, t.k_start:t.k_end]  # (B, H, rows, cols)
            assert torch.equal(hidden.expand(batch * heads, t.rows, t.cols), want.reshape(-1, t.rows, t.cols))
    return sched


@pytest.mark.parametrize("name", DEFINITIONS)
@pytest.mark.parametrize("size", [(16, 16, 4, 4), (16, 16, 3, 5), (16, 16, 16, 16), (16, 16, 1, 1), (16, 16, 32, 7)])
def test_schedule_classifies_every_preset_exactly(name, size):
    check_schedule(DEFINITIONS[name][0](), *size)


@pytest.mark.parametrize("n_q,n_k", [(13, 29), (29, 13), (1, 7)])
def test_schedule_with_unequal_lengths(n_q, n_k):
    for mask_mod in (causal_mask, sliding_window(2, 5), dilated(3, 2), chunked(3), prefix_lm(4)):
        check_schedule(mask_mod, n_q, n_k, 4, 3)


@pytest.mark.parametrize("geom", [dict(causal=True), dict(window=(2, 0)), dict(causal=True, window=(None, 3))])
def test_mask_mod_intersects_causal_and_window(geom):
    sched = check_schedule(document([5, 7, 4]), 16, 16, 4, 4, **geom)
    assert sched.counts()[SKIPPED] > tile_schedule(16, 16, 4, 4, mask_mod=document([5, 7, 4])).counts()[SKIPPED]


def test_rows_that_see_nothing_make_skipped_tiles():
    def late_keys(b, h, q_idx, kv_idx):  # queries 0..7 see no key at all
        return (q_idx >= 8) & (kv_idx <= q_idx)

    sched = check_schedule(late_keys, 16, 16, 4, 4)
    assert all(sched.tile(0, j).status == SKIPPED and sched.tile(1, j).status == SKIPPED for j in range(4))


def test_mask_reading_b_and_h_is_classified_over_their_union():
    def per_head(b, h, q_idx, kv_idx):  # head 0 causal, head 1 sees everything; batch 1 shifts the diagonal
        return (kv_idx <= q_idx + 4 * b) | (h == 1)

    sched = check_schedule(per_head, 16, 16, 4, 4, batch=2, heads=2)
    assert sched.mask_reads_bh and sched.block_any.shape == (2, 2, 4, 4)
    assert sched.tile(0, 3).status == PARTIAL  # skipped for (b=0, h=0), full for h=1: the union is partial
    head_only = tile_schedule(16, 16, 4, 4, mask_mod=lambda b, h, q, kv: (kv <= q) & (h >= 0), heads=3)
    assert TileMasks(head_only, "cpu").hidden(head_only.tile(0, 0)).shape == (3, 4, 4)
    plain = tile_schedule(16, 16, 4, 4, mask_mod=causal_mask, batch=2, heads=3)
    assert not plain.mask_reads_bh and TileMasks(plain, "cpu").hidden(plain.tile(0, 0)).shape == (4, 4)


def test_chunked_evaluation_equals_one_shot():
    mask_mod = and_masks(document([10, 30, 7, 14]), causal_mask)
    whole = classify_blocks(mask_mod, 61, 61, 8, 12, budget=10**9)
    for budget in (1, 5, 13, 70, 500, 5000):  # sub-tile pieces, single rows, several tiles, several rows of tiles
        parts = classify_blocks(mask_mod, 61, 61, 8, 12, budget=budget)
        assert all(torch.equal(x, y) for x, y in zip(whole, parts, strict=True)), budget


def test_schedule_without_mask_mod_stays_lazy_and_a_long_mask_costs_bounded_memory():
    assert len(tile_schedule(10**9, 10**9, 1, 1, causal=True)) == 10**18  # no mask_mod: O(1) per tile, nothing stored
    sizes = []

    def counting_causal(b, h, q_idx, kv_idx):
        out = q_idx >= kv_idx
        sizes.append(out.numel())
        return out

    n = 16384  # 2^28 mask elements: never more than ELEMENT_BUDGET at once
    sched = tile_schedule(n, n, 128, 128, mask_mod=counting_causal)
    assert [t.status for t in sched[:300]] == [t.status for t in tile_schedule(n, n, 128, 128, causal=True)[:300]]
    assert max(sizes) <= ELEMENT_BUDGET and sum(sizes) >= n * n


def test_kernel_with_a_mask_mod_schedule_computes_the_non_skipped_tiles():
    # The kernels' own mask_mod argument comes later; the schedule's tiles already drive them through `on_tile`.
    sched = tile_schedule(20, 20, 4, 4, mask_mod=causal_mask)
    plain = tile_schedule(20, 20, 4, 4, causal=True)
    assert [t.status for t in sched] == [t.status for t in plain]
    q = k = v = torch.randn(1, 1, 20, 8)
    events = []
    flash_attention_forward(q, k, v, block_size=4, causal=True, on_tile=events.append)
    assert [(e.q_block, e.k_block) for e in events] == [(t.q_block, t.k_block) for t in sched.computed()]


@pytest.mark.parametrize("factory,match", [
    (lambda: sliding_window(-1, 0), "None \\(not -1\\)"),
    (lambda: prefix_lm(-3), "prefix_len must be >= 0"),
    (lambda: document([4, -2]), "lengths\\[1\\] must be >= 1"),
    (lambda: document([]), "non-empty list"),
    (lambda: document("abc"), "non-empty list"),
    (lambda: attention_sink(1, -1), "window must be >= 0"),
    (lambda: chunked(0), "chunk must be >= 1"),
    (lambda: dilated(4, 0), "dilation=1 is a plain sliding window"),
    (lambda: alibi(0), "num_heads must be >= 1"),
    (lambda: softcap(0.0), "must be finite and > 0"),
    (lambda: softcap("big"), "positive real"),
    (lambda: chunked(2.5), "must be an int"),
])
def test_bad_preset_parameters_say_how_to_fix_them(factory, match):
    with pytest.raises((ValueError, TypeError), match=match):
        factory()


def test_document_lengths_must_sum_to_n():
    with pytest.raises(ValueError, match=r"sum to 10 .* 12 queries x 12 keys.*lengths \+ \[2\]"):
        tile_schedule(12, 12, 4, 4, mask_mod=document([4, 6]))
    with pytest.raises(ValueError, match="Shorten or drop the last documents by 3"):
        tile_schedule(7, 7, 4, 4, mask_mod=and_masks(causal_mask, document([4, 6])))  # found inside and_masks
    check_mask_lengths(or_masks(document([3, 4]), causal_mask), 7, 7)


@pytest.mark.parametrize("mask_mod,error,match", [
    (lambda b, h, q, kv: True, TypeError, "not a Python bool"),
    (lambda b, h, q, kv: (q - kv).float(), TypeError, "dtype torch.float32"),
    (lambda b, h, q, kv: (q >= kv).any(dim=1), ValueError, "does not broadcast"),
    (lambda b, h, q, kv: torch.zeros(3, 3, dtype=torch.bool), ValueError, "does not broadcast"),
    (lambda b, h, q, kv: torch.arange(4)[q] > kv, ValueError, "IndexError.*table must cover N_q and N_k"),
    (lambda score, b, h, q, kv: score, TypeError, "score_mod=..."),
    ("causal", TypeError, "must be a function"),
])
def test_bad_mask_mods_are_reported_with_a_fix(mask_mod, error, match):
    with pytest.raises(error, match=match):
        tile_schedule(8, 8, 4, 4, mask_mod=mask_mod)


def test_score_mods_match_their_definitions():
    score = torch.randn(2, 3, 5, 6)
    b, h = torch.arange(2).view(2, 1, 1, 1), torch.arange(3).view(1, 3, 1, 1)
    q, kv = torch.arange(5).view(5, 1), torch.arange(6).view(1, 6)
    slopes = torch.tensor([2 ** (-8 * (i + 1) / 3) for i in range(3)]).view(1, 3, 1, 1)
    torch.testing.assert_close(alibi(3)(score, b, h, q, kv), score + slopes * (kv - q))
    capped = softcap(2.0)(score * 100, b, h, q, kv)
    assert capped.abs().max() <= 2.0  # tanh saturates to exactly 1 in fp32
    torch.testing.assert_close(capped, 2.0 * torch.tanh(score * 50))


PRESETS = st.sampled_from([causal_mask, sliding_window(2, 1), sliding_window(0, None), prefix_lm(3),
                           attention_sink(1, 2), chunked(3), dilated(3, 2), document([4, 5, 3])])
MASKS = st.recursive(PRESETS, lambda inner: st.builds(lambda op, a, b: op(a, b), st.sampled_from([and_masks,
                                                                                                    or_masks]),
                                                       inner, inner), max_leaves=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mask_mod=MASKS, bq=st.integers(1, 13), bk=st.integers(1, 13), causal=st.booleans())
def test_random_compositions_are_classified_exactly(mask_mod, bq, bk, causal):
    check_schedule(mask_mod, 12, 12, bq, bk, causal=causal)


@pytest.mark.parametrize("module", [masks_module, maskeval_module, blockmask_module, tiling_module],
                         ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0, result
