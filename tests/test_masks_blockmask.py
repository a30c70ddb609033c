"""to_block_mask equals torch's create_block_mask block for block, and flex_attention agrees with SDPA through it."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.nn.attention.flex_attention import and_masks, create_block_mask, create_mask, flex_attention, or_masks

from flashviz.core.blockmask import to_block_mask
from flashviz.core.tiling import tile_schedule
from flashviz.masks import (
    alibi,
    attention_sink,
    causal_mask,
    chunked,
    dilated,
    document,
    prefix_lm,
    sliding_window,
    softcap,
)

PRESETS = {
    "causal": causal_mask,
    "window": sliding_window(5, 2),
    "prefix_lm": prefix_lm(7),
    "document": document([9, 20, 4, 8]),  # 41 tokens
    "sink": attention_sink(2, 6),
    "chunked": chunked(6),
    "dilated": dilated(8, 3),
    "doc_causal": and_masks(document([9, 20, 4, 8]), causal_mask),
}
N = 41  # odd: the last row and column of tiles are ragged


def late_queries(b, h, q_idx, kv_idx):
    """Queries 0..11 see no key: whole rows (and whole rows of tiles) empty."""
    return (q_idx >= 12) & (kv_idx <= q_idx)


def per_head(b, h, q_idx, kv_idx):
    """Differs by batch and head, so the BlockMask differs per (b, h)."""
    return (kv_idx <= q_idx + 5 * h) & (kv_idx >= b * 3)


def assert_same_blocks(ours, theirs):
    """Equal partial and full blocks: counts, and the valid prefix of the index lists (the rest is unspecified)."""
    assert ours.BLOCK_SIZE == theirs.BLOCK_SIZE and ours.seq_lengths == theirs.seq_lengths
    for num, idx in (("kv_num_blocks", "kv_indices"), ("full_kv_num_blocks", "full_kv_indices")):
        n_ours, n_theirs = getattr(ours, num), getattr(theirs, num)
        assert n_ours.dtype == n_theirs.dtype and torch.equal(n_ours, n_theirs), num
        i_ours, i_theirs = getattr(ours, idx), getattr(theirs, idx)
        assert i_ours.shape == i_theirs.shape, idx
        valid = torch.arange(i_ours.shape[-1]) < n_ours.unsqueeze(-1)  # (B, H, Tr, Tc)
        assert torch.equal(i_ours[valid], i_theirs[valid]), idx


def compare(mask_mod, n_q, n_k, block, *, batch=1, heads=1, **geom):
    bq, bk = (block, block) if isinstance(block, int) else block
    ours = to_block_mask(tile_schedule(n_q, n_k, bq, bk, mask_mod=mask_mod, batch=batch, heads=heads, **geom))
    full_mask = and_masks(mask_mod, causal_mask) if geom.get("causal") else mask_mod
    theirs = create_block_mask(full_mask, batch, heads, n_q, n_k, device="cpu", BLOCK_SIZE=block)
    assert_same_blocks(ours, theirs)
    return ours, theirs


@pytest.mark.parametrize("name", [*PRESETS, "late_queries"])
@pytest.mark.parametrize("block", [8, (16, 5), 64, 1])
def test_block_mask_equals_create_block_mask(name, block):
    compare(PRESETS.get(name, late_queries), N, N, block)


@pytest.mark.parametrize("n_q,n_k", [(23, 41), (41, 23), (1, 9)])
@pytest.mark.parametrize("name", ["causal", "window", "prefix_lm", "sink", "chunked", "dilated"])
def test_block_mask_with_unequal_lengths(name, n_q, n_k):
    compare(PRESETS[name], n_q, n_k, (8, 6))


def test_block_mask_per_batch_and_head_and_with_causal_flag():
    ours, _ = compare(per_head, N, N, 8, batch=2, heads=3)
    assert ours.kv_num_blocks.shape == (2, 3, 6)
    compare(PRESETS["document"], N, N, 8, causal=True)  # the causal flag intersects like and_masks(.., causal)
    compare(causal_mask, N, N, 8, batch=2, heads=2)  # b/h-free mask: the same rows for every (b, h)


def test_block_mask_without_mask_mod_uses_the_exact_geometry():
    ours = to_block_mask(tile_schedule(N, N, 8, 8, causal=True, window=(10, None)))
    theirs = create_block_mask(and_masks(causal_mask, sliding_window(10, None)), 1, 1, N, N, device="cpu",
                               BLOCK_SIZE=8)
    assert_same_blocks(ours, theirs)
    with pytest.raises(TypeError, match="takes a TileSchedule"):
        to_block_mask("causal")


COMPOSABLE = st.sampled_from([causal_mask, sliding_window(3, 1), prefix_lm(4), attention_sink(1, 3), chunked(5),
                              dilated(4, 2), document([6, 9, 5]), late_queries])
MASKS = st.recursive(COMPOSABLE, lambda inner: st.builds(lambda op, a, b: op(a, b),
                                                          st.sampled_from([and_masks, or_masks]), inner, inner),
                     max_leaves=4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mask_mod=MASKS, bq=st.integers(1, 9), bk=st.integers(1, 9))
def test_random_compositions_equal_create_block_mask(mask_mod, bq, bk):
    compare(mask_mod, 20, 20, (bq, bk))


def run_flex(q, k, v, block_mask, score_mod=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # eager flex_attention warns that it is unfused
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


@pytest.mark.parametrize("name", [*PRESETS, "late_queries"])
@pytest.mark.parametrize("score_mod", [None, pytest.param(alibi(2), marks=pytest.mark.slow),
                                       pytest.param(softcap(3.0), marks=pytest.mark.slow)],
                         ids=["none", "alibi", "softcap"])  # the score_mods do not touch the BlockMask: slow suite
def test_flex_attention_same_output_with_our_block_mask(name, score_mod):
    mask_mod = PRESETS.get(name, late_queries)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, N, 8, generator=g) for _ in range(3))
    ours, theirs = compare(mask_mod, N, N, 16)
    out = run_flex(q, k, v, ours, score_mod)  # (1, 2, N, 8)
    torch.testing.assert_close(out, run_flex(q, k, v, theirs, score_mod), atol=1e-5, rtol=0)
    if score_mod is None:  # flex_attention equals SDPA with the dense boolean mask
        dense = create_mask(mask_mod, 1, 1, N, N, device="cpu")  # (1, 1, N, N), True = visible
        sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=dense)
        torch.testing.assert_close(out, sdpa, atol=1e-5, rtol=0)


def test_rows_that_see_nothing_output_zeros_in_flex_and_sdpa():
    """Defined behaviour: a query row that sees no key outputs zeros, in flex_attention (with our BlockMask) and in
    SDPA with the boolean mask in torch 2.13 (older versions of SDPA's math path gave NaN)."""
    q, k, v = (torch.randn(1, 1, N, 8) for _ in range(3))
    out = run_flex(q, k, v, to_block_mask(tile_schedule(N, N, 16, 16, mask_mod=late_queries)))
    assert torch.equal(out[0, 0, :12], torch.zeros(12, 8))
    assert out[0, 0, 12:].abs().sum(-1).gt(0).all()
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=create_mask(late_queries, 1, 1, N, N, device="cpu"))
    assert torch.equal(sdpa[0, 0, :12], torch.zeros(12, 8))
