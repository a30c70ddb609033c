"""mask_mod and score_mod in the kernels, against torch's flex_attention and SDPA with the dense boolean mask.

Oracles: flex_attention (eager on CPU) with create_block_mask for the same mask_mod / score_mod, in float64; SDPA with
the dense boolean mask; the float64 formula of tests/_oracle.py. Rule (flash-attention's): fp32 error <= 1e-5 and
<= 2x naive attention's; gradients (flex has no CPU backward) within 2x naive's error against the float64 formula
under autograd (itself checked against flex_attention's forward and SDPA's autograd).
Over every preset of flashviz.masks, ALiBi and soft-capping, odd sizes, N_q != N_k, rows that see nothing,
grouped-query heads (h is the query head) and random and_masks / or_masks compositions (hypothesis).

Legend: B batch, H query heads, H_kv K/V heads, N_q / N_k lengths, d head dimension, Br / Bc tile sizes.
"""

from __future__ import annotations

import functools
import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention.flex_attention import and_masks, create_block_mask, flex_attention, or_masks

from flashviz import flash_attention, flash_attention_forward, naive_attention, tile_schedule
from flashviz import masks as M
from flashviz.core.maskeval import evaluate, index_grid
from flashviz.core.tilemask import TileMasks
from flashviz.measure.memory import measure_memory
from tests._oracle import FLOOR, grid, make_qkv, max_err, reference, reference_grads
from tests.test_backward import ABS_FLOOR

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
LOOP_ORDERS = ["kv_outer", "q_outer"]
N = 97  # odd: ragged last tiles at every block size used here
PRESETS = {  # name -> mask_mod on N x N
    "causal": M.causal_mask,
    "sliding_window": M.sliding_window(9, 3),
    "prefix_lm": M.prefix_lm(20),
    "document": M.document([30, 40, 27]),
    "document_causal": and_masks(M.document([30, 40, 27]), M.causal_mask),
    "attention_sink": M.attention_sink(4, 10),
    "chunked": M.chunked(16),
    "dilated": M.dilated(12, 3),
}
SCORE_MODS = {"none": None, "alibi": M.alibi(4), "softcap": M.softcap(1.5)}


def head_mask(b, h, q_idx, kv_idx):
    """Reads b and h (the QUERY head): head h looks back h + 2 b + 3 keys, causally."""
    return (kv_idx <= q_idx) & (q_idx - kv_idx <= h + 2 * b + 3)


def first_rows_only(b, h, q_idx, kv_idx):
    """Queries 40.. see nothing: whole rows (and whole Q blocks) empty."""
    return (q_idx < 40) & (kv_idx <= q_idx + 5)


def flex(q, k, v, mask_mod, score_mod=None, block=16):
    """flex_attention in float64 with create_block_mask of the same mask_mod (GQA by enable_gqa)."""
    B, H, n_q, _ = q.shape
    bm = None if mask_mod is None else create_block_mask(mask_mod, B, H, n_q, k.shape[2], device="cpu",
                                                         BLOCK_SIZE=block)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return flex_attention(q.double(), k.double(), v.double(), score_mod=score_mod, block_mask=bm,
                              enable_gqa=q.shape[1] != k.shape[1])


def dense_visible(mask_mod, B, H, n_q, n_k) -> torch.Tensor:
    """(B', H', N_q, N_k) bool of the mask_mod, True = visible."""
    b, h = index_grid(B, H)
    return evaluate(mask_mod, b, h, torch.arange(n_q)[:, None], torch.arange(n_k)[None, :])


def check_forward(q, k, v, mask_mod, score_mod, block_q, block_k, loop_order) -> torch.Tensor:
    ref = flex(q, k, v, mask_mod, score_mod)
    plain = naive_attention(q, k, v, mask_mod=mask_mod, score_mod=score_mod)
    out = flash_attention_forward(q, k, v, block_q=block_q, block_k=block_k, loop_order=loop_order,
                                  mask_mod=mask_mod, score_mod=score_mod)
    err, plain_err = max_err(out, ref), max_err(plain, ref)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert err <= 1e-5 and err <= 2 * plain_err + FLOOR[q.dtype], (err, plain_err)
    return out


# ---------------------------------------------------------------------------------------------------------------------
# forward


# fast suite: every preset in both loop orders without a score_mod; each score_mod on three presets, in FA2's order
@pytest.mark.parametrize(("preset", "score", "loop_order"), grid(
    lambda preset, score, loop_order: score != "none" and (
        loop_order == "kv_outer" or preset not in ("causal", "sliding_window", "document")),
    preset=PRESETS, score=SCORE_MODS, loop_order=LOOP_ORDERS))
def test_every_preset_and_score_mod_matches_flex_attention(preset, score, loop_order):
    q, k, v = make_qkv(2, 4, N, N, 24, seed=len(preset), h_kv=2)  # grouped-query heads: h is the query head
    check_forward(q, k, v, PRESETS[preset], SCORE_MODS[score], 16, 24, loop_order)


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
@pytest.mark.parametrize("preset", PRESETS, ids=str)
def test_every_preset_matches_sdpa_with_the_dense_boolean_mask(preset, loop_order):
    q, k, v = make_qkv(1, 4, N, N, 16, seed=3)
    vis = dense_visible(PRESETS[preset], 1, 4, N, N)  # every preset leaves each row at least its diagonal
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=vis)
    out = flash_attention_forward(q, k, v, block_q=32, block_k=16, loop_order=loop_order, mask_mod=PRESETS[preset])
    assert max_err(out, ref) <= 1e-5


# fast suite: FA2's loop order, and FA1's with the mask that reads b and h
@pytest.mark.parametrize(("mask", "shape", "loop_order"), grid(
    lambda mask, shape, loop_order: loop_order == "kv_outer" and mask != "head_mask",
    mask=["head_mask", "sliding_window", "prefix_lm", "attention_sink"],
    shape=[(61, 130, (4, 4)), (130, 61, (6, 2)), (1, 45, (2, 1))], loop_order=LOOP_ORDERS))
def test_uneven_lengths_and_masks_that_read_b_and_h(mask, shape, loop_order):
    n_q, n_k, heads = shape
    mask_mod = head_mask if mask == "head_mask" else PRESETS[mask]
    q, k, v = make_qkv(2, heads[0], n_q, n_k, 16, seed=n_q, h_kv=heads[1])
    ref = flex(q, k, v, mask_mod)
    out = flash_attention_forward(q, k, v, block_q=16, block_k=32, loop_order=loop_order, mask_mod=mask_mod)
    seen = dense_visible(mask_mod, 2, heads[0], n_q, n_k).any(-1).expand(2, heads[0], n_q)  # rows that see a key
    assert (out[~seen] == 0).all()
    plain = naive_attention(q, k, v, mask_mod=mask_mod)
    assert max_err(out, ref) <= min(1e-5, 2 * max_err(plain, ref) + FLOOR[q.dtype])


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
def test_rows_that_see_nothing_output_zeros_and_lse_minus_inf(loop_order):
    q, k, v = make_qkv(1, 2, N, N, 8, seed=5)
    out, lse = flash_attention_forward(q, k, v, block_size=16, loop_order=loop_order, mask_mod=first_rows_only,
                                       score_mod=M.softcap(3.0), return_lse=True)
    assert torch.equal(out[:, :, 40:], torch.zeros_like(out[:, :, 40:])) and bool(torch.isneginf(lse[:, :, 40:]).all())
    assert max_err(out, flex(q, k, v, first_rows_only, M.softcap(3.0))) <= 1e-5
    ref_lse = torch.logsumexp((3.0 * torch.tanh(q.double() @ k.double().transpose(-2, -1) / 8**0.5 / 3.0))
                              .masked_fill(~dense_visible(first_rows_only, 1, 2, N, N), float("-inf")), -1)
    torch.testing.assert_close(lse.double(), ref_lse, rtol=1e-5, atol=1e-5)
    assert torch.equal(naive_attention(q, k, v, mask_mod=first_rows_only)[:, :, 40:], torch.zeros(1, 2, N - 40, 8))


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
def test_mask_mod_combines_with_causal_and_window_by_intersection(loop_order):
    q, k, v = make_qkv(1, 2, N, N, 8, seed=6)
    out = flash_attention_forward(q, k, v, 16, causal=True, window=(20, None), loop_order=loop_order,
                                  mask_mod=M.document([30, 40, 27]))
    both = and_masks(M.document([30, 40, 27]), M.causal_mask, M.sliding_window(20, None))
    assert max_err(out, flex(q, k, v, both)) <= 1e-5


# ---------------------------------------------------------------------------------------------------------------------
# what the schedule promises: skipped tiles never loaded, full tiles unmasked, events as the schedule says


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
def test_skipped_tiles_are_never_loaded_and_only_partial_tiles_are_masked(loop_order, monkeypatch):
    mask_mod = and_masks(M.document([30, 40, 27]), M.causal_mask)
    sched = tile_schedule(N, N, 16, 16, mask_mod=mask_mod, loop_order=loop_order)
    masked = []
    real = TileMasks.hidden
    monkeypatch.setattr(TileMasks, "hidden", lambda self, t: masked.append((t.q_block, t.k_block)) or real(self, t))
    q, k, v = make_qkv(1, 2, N, N, 8, dtype=torch.float64, seed=7)
    # poison: any key a computed tile does not cover, never reached by a loaded tile
    covered = torch.zeros(N, dtype=torch.bool)
    for t in sched.computed():
        covered[t.k_start:t.k_end] = True
    events = []
    out = flash_attention_forward(q, k, v, 16, loop_order=loop_order, mask_mod=mask_mod, on_tile=events.append)
    assert [e.step for e in events] == [t.step for t in sched.computed()]
    assert sorted(masked) == sorted((t.q_block, t.k_block) for t in sched.computed() if t.status == "partial")
    counts = sched.counts()
    assert counts["skipped"] > 0 and counts["full"] > 0 and counts["partial"] > 0
    torch.testing.assert_close(out, naive_attention(q, k, v, mask_mod=mask_mod))
    # a tile of document 1 x document 3 is skipped: poisoning its keys for the queries of another document block
    k_bad = k.clone()
    k_bad[:, :, 80:96] = float("nan")  # key block 5: only seen by Q blocks 5 and 6 (document 3)
    out_bad = flash_attention_forward(q, k_bad, v, 16, loop_order=loop_order, mask_mod=mask_mod)
    assert torch.isfinite(out_bad[:, :, :70]).all()  # documents 1 and 2 never load key block 5
    torch.testing.assert_close(out_bad[:, :, :70], out[:, :, :70])


# ---------------------------------------------------------------------------------------------------------------------
# merged steps: with a mask_mod and without on_tile, runs of consecutive computed tiles are one wider tile


STEP_CASES = {  # name -> (B, H, H_kv, N_q, N_k, Br, Bc, call kwargs)
    "document_causal": (1, 4, 4, N, N, 16, 8, {"mask_mod": PRESETS["document_causal"]}),
    "causal_lazy_schedule": (2, 2, 2, N, N, 8, 16, {"causal": True}),
    "window_gqa_nq_ne_nk": (2, 6, 2, 61, 130, 16, 8, {"window": (20, 5)}),
    "head_mask_gqa": (2, 4, 2, 130, 61, 8, 16, {"mask_mod": head_mask}),
    "empty_rows_softcap": (1, 2, 2, N, N, 16, 16, {"mask_mod": first_rows_only, "score_mod": M.softcap(3.0)}),
    "prefix_alibi": (1, 4, 1, N, N, 16, 8, {"mask_mod": PRESETS["prefix_lm"], "score_mod": M.alibi(4)}),
}


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
@pytest.mark.parametrize("case", STEP_CASES, ids=str)
def test_merged_steps_equal_the_tile_by_tile_path_and_sdpa(case, loop_order):
    """Ragged last tiles, N_q != N_k, GQA, per-head masks, rows that see nothing, score_mods: the merged path (no
    on_tile) and the tile-by-tile path (on_tile) agree, and both match the float64 oracle within 1e-5."""
    B, H, H_kv, n_q, n_k, bq, bk, kw = STEP_CASES[case]
    q, k, v = make_qkv(B, H, n_q, n_k, 16, seed=n_q + H, h_kv=H_kv)
    call = dict(block_q=bq, block_k=bk, loop_order=loop_order, return_lse=True, **kw)
    events = []
    out, lse = flash_attention_forward(q, k, v, **call)
    out_t, lse_t = flash_attention_forward(q, k, v, on_tile=events.append, **call)
    assert len(events) == len(list(tile_schedule(n_q, n_k, bq, bk, loop_order=loop_order, batch=B, heads=H,
                                                 **{o: kw[o] for o in ("causal", "window", "mask_mod") if o in kw})
                                   .computed()))  # with on_tile: one event per computed tile
    empty = lse.isneginf()  # rows that see nothing: lse -inf on both paths
    assert torch.equal(empty, lse_t.isneginf()) and max_err(lse[~empty], lse_t[~empty]) <= 1e-5
    assert max_err(out, out_t) <= 1e-5
    ref = reference(q, k, v, **kw)
    assert max_err(out, ref) <= 1e-5 and max_err(out_t, ref) <= 1e-5
    if "mask_mod" in kw and "score_mod" not in kw:
        vis = dense_visible(kw["mask_mod"], B, H, n_q, n_k)
        sdpa = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=vis,
                                              enable_gqa=H_kv != H)
        seen = vis.any(-1).expand(B, H, n_q)  # SDPA gives NaN for rows that see nothing; the kernels give 0
        assert max_err(out[seen], sdpa[seen]) <= 1e-5 and (out[~seen] == 0).all()


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
def test_merged_steps_keep_memory_linear_in_n(loop_order):
    """MAX_STEP_WIDTH bounds a merged step's scores whatever N is (the FlashAttention point: no block grows with N).
    Two documents of N / 2 give runs of N / 512 full 256-wide tiles; with the schedule prebuilt (the mask_mod's
    classification is not measured), doubling N from 2048 to 4096 may add a few (N d) fp32 tensors of peak memory,
    never a score block that grows with N (uncapped steps added 1.1 MB here, 17 N d elements)."""
    d, block = 8, 256
    peaks = {}
    for n in (2048, 4096):
        q, k, v = make_qkv(1, 1, n, n, d, seed=n)
        sched = tile_schedule(n, n, block, block, loop_order=loop_order, mask_mod=M.document([n // 2, n // 2]))
        out = flash_attention_forward(q, k, v, block_size=block, loop_order=loop_order, schedule=sched)  # caches
        peaks[n] = measure_memory(flash_attention_forward, q, k, v, block_size=block, loop_order=loop_order,
                                  schedule=sched)
        half = slice(0, n // 2)
        ref = F.scaled_dot_product_attention(q[:, :, half].double(), k[:, :, half].double(), v[:, :, half].double())
        assert max_err(out[:, :, half], ref) <= 1e-5  # the first document attends to itself only
    assert peaks[4096] - peaks[2048] <= 4 * (4096 - 2048) * d * 4, peaks  # bytes: four more N d fp32 tensors


def test_partial_tiles_of_a_step_add_their_cached_bias():
    """TileMasks.bias is hidden as 0 / -inf, cached in the schedule next to hidden; a prebuilt schedule fills both
    caches on its first call and a second call reuses them."""
    mm = and_masks(M.document([30, 40, 27]), head_mask)
    sched = tile_schedule(N, N, 16, 16, loop_order="q_outer", mask_mod=mm, batch=1, heads=2)
    q, k, v = make_qkv(1, 2, N, N, 8, seed=2)
    out = flash_attention_forward(q, k, v, block_size=16, loop_order="q_outer", schedule=sched)
    partial = sched.counts()["partial"]
    assert len(sched.bias_cache) == len(sched.hidden_cache) == partial > 0
    masks = TileMasks(sched, "cpu")
    for t in sched.computed():
        if t.status == "partial":
            hidden, bias = masks.hidden(t), masks.bias(t)
            assert bias.dtype == torch.float32 and bias.shape == hidden.shape == (2, t.rows, t.cols)
            assert torch.equal(bias, torch.zeros(hidden.shape).masked_fill(hidden, float("-inf")))
    cached = dict(sched.bias_cache)
    again = flash_attention_forward(q, k, v, block_size=16, loop_order="q_outer", schedule=sched)
    assert torch.equal(again, out) and all(sched.bias_cache[key] is b for key, b in cached.items())
    assert max_err(out, naive_attention(q, k, v, mask_mod=mm)) <= 1e-5


# ---------------------------------------------------------------------------------------------------------------------
# backward


def grads(attn, q, k, v, dO, **kwargs):
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    return torch.autograd.grad(attn(q, k, v, **kwargs), (q, k, v), dO)


def check_grads(q, k, v, mask_mod, score_mod, **kw) -> None:
    dO = torch.randn(q.shape, generator=torch.Generator().manual_seed(1), dtype=q.dtype)
    mods = dict(mask_mod=mask_mod, score_mod=score_mod)
    ref = reference_grads(q, k, v, dO, **mods)  # the float64 formula under autograd
    base = grads(naive_attention, q, k, v, dO, **mods)
    got = grads(flash_attention, q, k, v, dO, **mods, **kw)
    for name, g, b, r in zip(("dq", "dk", "dv"), got, base, ref, strict=True):
        assert g.shape == b.shape and torch.isfinite(g).all(), name
        err, err_base = max_err(g, r), max_err(b, r)
        assert err <= 2 * err_base + ABS_FLOOR[torch.float32], f"{name}: {err:.3g} > 2 x naive {err_base:.3g}"


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
@pytest.mark.parametrize("score", SCORE_MODS, ids=str)
@pytest.mark.parametrize("preset", ["document_causal", "prefix_lm", "dilated", "attention_sink"], ids=str)
def test_grads_within_twice_naive_error(preset, score, loop_order):
    q, k, v = make_qkv(2, 4, N, N, 16, seed=11, h_kv=2)
    check_grads(q, k, v, PRESETS[preset], SCORE_MODS[score], block_q=16, block_k=24, loop_order=loop_order)


def test_grads_with_uneven_lengths_empty_rows_and_head_masks():
    q, k, v = make_qkv(2, 4, 130, 61, 16, seed=12, h_kv=1)
    check_grads(q, k, v, head_mask, M.alibi(4), block_q=32, block_k=16)
    q, k, v = make_qkv(1, 2, N, N, 16, seed=13)
    check_grads(q, k, v, first_rows_only, M.softcap(2.0), block_size=16)


def test_naive_grads_match_sdpa_dense_mask_in_float64():
    # naive is the gradient oracle (flex_attention has no CPU backward): check it against SDPA's autograd
    q, k, v = make_qkv(1, 2, N, N, 8, dtype=torch.float64, seed=14)
    dO = torch.randn(q.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    mask_mod = and_masks(M.document([30, 40, 27]), M.causal_mask)
    vis = dense_visible(mask_mod, 1, 2, N, N)
    expected = grads(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=vis), q, k, v, dO)
    for g, r in zip(grads(naive_attention, q, k, v, dO, mask_mod=mask_mod), expected, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("mask_mod", "score_mod"), [(M.document([3, 4]), M.softcap(0.8)), (head_mask, M.alibi(4)),
                                                     (M.chunked(3), None)])
def test_gradcheck_float64(mask_mod, score_mod):
    q, k, v = (x.requires_grad_() for x in make_qkv(1, 4, 7, 7, 3, dtype=torch.float64, seed=1, h_kv=2))
    attn = functools.partial(flash_attention, block_q=3, block_k=2, mask_mod=mask_mod, score_mod=score_mod)
    assert torch.autograd.gradcheck(attn, (q, k, v), eps=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------------------------------------------------
# random compositions


def _preset(draw, n: int):
    kind = draw(st.sampled_from(["causal", "window", "prefix", "document", "sink", "chunked", "dilated"]))
    if kind == "causal":
        return M.causal_mask
    if kind == "window":
        return M.sliding_window(draw(st.integers(0, 12)), draw(st.one_of(st.none(), st.integers(0, 6))))
    if kind == "prefix":
        return M.prefix_lm(draw(st.integers(0, n)))
    if kind == "document":
        cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=3))) if n > 1 else []
        return M.document([b - a for a, b in zip([0, *cuts], [*cuts, n], strict=True)])
    if kind == "sink":
        return M.attention_sink(draw(st.integers(0, 4)), draw(st.integers(0, 8)))
    if kind == "chunked":
        return M.chunked(draw(st.integers(1, 12)))
    return M.dilated(draw(st.integers(0, 12)), draw(st.integers(1, 4)))


@st.composite
def compositions(draw, n: int):
    mask = _preset(draw, n)
    for _ in range(draw(st.integers(0, 2))):
        mask = draw(st.sampled_from([and_masks, or_masks]))(mask, _preset(draw, n))
    return mask


COMPOSITION_CASES = dict(data=st.data(), n=st.integers(1, 40), block_q=st.integers(1, 20), block_k=st.integers(1, 20),
                         score=st.sampled_from(list(SCORE_MODS)), loop_order=st.sampled_from(LOOP_ORDERS))


@settings(max_examples=4, deadline=None)
@given(**COMPOSITION_CASES)
def test_random_compositions_match_flex_attention_and_train(data, n, block_q, block_k, score, loop_order):
    check_composition(data.draw(compositions(n)), n, block_q, block_k, score, loop_order)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(**COMPOSITION_CASES)
def test_many_random_compositions_match_flex_attention_and_train(data, n, block_q, block_k, score, loop_order):
    check_composition(data.draw(compositions(n)), n, block_q, block_k, score, loop_order)


def check_composition(mask_mod, n, block_q, block_k, score, loop_order):
    q, k, v = make_qkv(1, 4, n, n, 8, seed=n, h_kv=2)
    out = check_forward(q, k, v, mask_mod, SCORE_MODS[score], block_q, block_k, loop_order)
    assert not torch.isnan(out).any()
    check_grads(q, k, v, mask_mod, SCORE_MODS[score], block_q=block_q, block_k=block_k, loop_order=loop_order)


# ---------------------------------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"mask_mod": 3}, TypeError, r"mask_mod must be a function mask_mod\(b, h, q_idx, kv_idx\)"),
    ({"mask_mod": lambda b, h, q, kv: (q - kv).float()}, TypeError, r"must return a bool tensor.*float32"),
    ({"mask_mod": M.softcap(2.0)}, TypeError, r"takes 5 arguments.*score_mod="),
    ({"mask_mod": M.document([3, 4])}, ValueError, r"document lengths sum to 7 but the attention is 8 queries"),
    ({"score_mod": "tanh"}, TypeError, r"score_mod must be a function score_mod\(score, b, h, q_idx, kv_idx\)"),
    ({"score_mod": M.causal_mask}, TypeError, r"takes 4 arguments.*mask_mod="),
    ({"score_mod": lambda s, b, h, q, kv: s > 0}, TypeError, r"must return a floating tensor.*torch.bool"),
    ({"score_mod": lambda s, b, h, q, kv: s.sum(-1)}, ValueError, r"returned shape .* does not broadcast"),
    ({"score_mod": lambda s, b, h, q, kv: s + q.item()}, ValueError, r"raised RuntimeError.*elementwise"),
])
@pytest.mark.parametrize("fn", [naive_attention, flash_attention_forward, flash_attention])
def test_bad_mods_get_errors_that_say_how_to_fix_them(fn, kwargs, error, match):
    q, k, v = make_qkv(1, 2, 8, 8, 4)
    with pytest.raises(error, match=match):
        fn(q, k, v, **kwargs)


@pytest.mark.parametrize("loop_order", LOOP_ORDERS)
def test_prebuilt_schedule_gives_the_same_output(loop_order):
    """A schedule built once (with a per-head mask_mod and causal) gives the output of the call that builds its own,
    on its first use (masks cached then) and on its second (masks read from the cache)."""
    q, k, v = make_qkv(2, 3, N, N, 8, torch.float32, seed=5)
    mm = and_masks(M.document([30, 40, 27]), lambda b, h, q_idx, kv_idx: (kv_idx + b + h) % 5 != 0)
    kw = dict(block_size=16, causal=True, loop_order=loop_order)
    want = flash_attention_forward(q, k, v, mask_mod=mm, **kw)
    sched = tile_schedule(N, N, 16, 16, causal=True, loop_order=loop_order, mask_mod=mm, batch=2, heads=3)
    assert sched.hidden_cache == {}
    first = flash_attention_forward(q, k, v, schedule=sched, **kw)
    assert len(sched.hidden_cache) == sched.counts()["partial"] > 0
    second = flash_attention_forward(q, k, v, mask_mod=mm, schedule=sched, **kw)
    assert torch.equal(first, want) and torch.equal(second, want)


@pytest.mark.parametrize("change, message", [
    (dict(n=96), r"n_q=96 \(the call has 97\)"),
    (dict(block=32), r"block_q=32 \(the call has 16\)"),
    (dict(causal=False), r"causal=False \(the call has True\)"),
    (dict(window=(4, 0)), r"window=\(4, 0\) \(the call has None\)"),
    (dict(loop_order="q_outer"), r"loop_order='q_outer' \(the call has 'kv_outer'\)"),
    (dict(heads=2), r"heads=2 \(the call has 3\)"),
    (dict(mask_mod=M.document([30, 40, 27])), r"mask_mod=\w+ \(the call has \w+\)"),
])
def test_mismatched_schedule_is_refused(change, message):
    """Every property the kernel reads from the schedule must equal the call's, or the call raises and says which."""
    mm = M.document([30, 40, 27])
    q, k, v = make_qkv(1, 3, N, N, 8, torch.float32, seed=6)
    call = dict(n=N, block=16, causal=True, window=None, loop_order="kv_outer", heads=3, mask_mod=mm)
    c = call | change
    if "n" in change:
        c["mask_mod"] = M.document([30, 40, 26])
    sched = tile_schedule(c["n"], c["n"], c["block"], c["block"], causal=c["causal"], window=c["window"],
                          loop_order=c["loop_order"], mask_mod=c["mask_mod"], batch=1, heads=c["heads"])
    with pytest.raises(ValueError, match=rf"schedule does not match this call: .*{message}"):
        flash_attention_forward(q, k, v, block_size=16, causal=True, loop_order="kv_outer", mask_mod=mm,
                                schedule=sched)


def test_schedule_must_be_a_tile_schedule():
    q, k, v = make_qkv(1, 1, 8, 8, 4, torch.float32, seed=7)
    with pytest.raises(TypeError, match="schedule must be a TileSchedule"):
        flash_attention_forward(q, k, v, block_size=4, schedule="causal")
