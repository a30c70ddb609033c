"""The tile schedule is the one source of tile truth: check it against a brute-force dense mask."""

import itertools

import pytest
import torch
from torch.nn.attention.flex_attention import and_masks

from flashviz import FULL, PARTIAL, SKIPPED, flash_attention_forward, tile_schedule
from flashviz.core.tiling import visible_mask
from flashviz.masks import attention_sink, causal_mask, sliding_window

MASKS = [
    dict(causal=False, window=None),
    dict(causal=True, window=None),
    dict(causal=False, window=(5, 3)),
    dict(causal=True, window=(7, None)),
    dict(causal=False, window=(None, 0)),
    dict(causal=False, window=(0, 0)),
    dict(causal=True, window=(0, 9)),
    dict(causal=False, window=(40, None)),
]
SIZES = [(1, 1, 1, 1), (17, 17, 4, 4), (23, 11, 5, 3), (11, 30, 4, 7), (64, 64, 16, 16), (50, 50, 64, 8)]


def brute_force_status(n_q, n_k, block_q, block_k, q_block, k_block, causal, window):
    """Classify a tile by materialising its dense mask, element by element."""
    q0, k0 = q_block * block_q, k_block * block_k
    visible = []
    for i in range(q0, min(q0 + block_q, n_q)):
        for j in range(k0, min(k0 + block_k, n_k)):
            ok = (not causal or j <= i)
            if window is not None:
                left, right = window
                ok = ok and (left is None or j >= i - left) and (right is None or j <= i + right)
            visible.append(ok)
    if all(visible):
        return FULL
    return PARTIAL if any(visible) else SKIPPED


@pytest.mark.parametrize("mask", MASKS, ids=str)
@pytest.mark.parametrize("size", SIZES, ids=str)
@pytest.mark.parametrize("loop_order", ["kv_outer", "q_outer"])
def test_schedule_matches_brute_force(size, mask, loop_order):
    n_q, n_k, bq, bk = size
    sched = tile_schedule(n_q, n_k, bq, bk, loop_order=loop_order, **mask)
    tiles = list(sched)
    pairs = [(t.q_block, t.k_block) for t in tiles]
    assert len(pairs) == len(set(pairs)) == sched.n_q_blocks * sched.n_k_blocks  # every tile exactly once
    assert [t.step for t in tiles] == list(range(len(tiles)))
    for t in tiles:
        assert t.status == brute_force_status(n_q, n_k, bq, bk, t.q_block, t.k_block, **mask), t
        assert sched[t.step] == t
    # visiting order is the loop order
    if loop_order == "kv_outer":
        assert pairs == [(i, j) for j in range(sched.n_k_blocks) for i in range(sched.n_q_blocks)]
    else:
        assert pairs == [(i, j) for i in range(sched.n_q_blocks) for j in range(sched.n_k_blocks)]
    grid = sched.status_grid()
    assert all(grid[t.q_block][t.k_block] == t.status for t in tiles)
    assert sum(sched.counts().values()) == len(tiles)


def test_ragged_edges():
    sched = tile_schedule(10, 7, 4, 3)
    last = sched[-1]
    assert (last.q_start, last.q_end, last.k_start, last.k_end) == (8, 10, 6, 7)
    assert last.rows == 2 and last.cols == 1


def test_causal_skips_upper_triangle_of_tiles():
    sched = tile_schedule(256, 256, 64, 64, causal=True)
    counts = sched.counts()
    assert counts == {FULL: 6, PARTIAL: 4, SKIPPED: 6}


def test_schedule_is_lazy_for_long_sequences():
    sched = tile_schedule(10**9, 10**9, 1, 1, causal=True)
    assert len(sched) == 10**18
    assert sched[-1].status == FULL and sched.tile(0, 1).status == SKIPPED and sched[1].status == FULL


@pytest.mark.parametrize("max_tiles", [1, 2, 5, 10**6])
@pytest.mark.parametrize("mask", [*MASKS[:3], dict(mask_mod=attention_sink(3, 6))])  # sinks: runs with gaps
@pytest.mark.parametrize("loop_order", ["kv_outer", "q_outer"])
def test_runs_partition_the_computed_tiles_into_adjacent_blocks(max_tiles, mask, loop_order):
    """runs(): every computed tile once, in visiting order; a run is at most max_tiles adjacent tiles of one outer
    block (nothing skipped in between), and runs are maximal: two runs of one outer block that touch are full."""
    sched = tile_schedule(23, 31, 4, 5, loop_order=loop_order, **mask)
    runs = sched.runs(max_tiles)
    assert [t.step for run in runs for t in run] == [t.step for t in sched.computed()]
    outer, inner = ("k_block", "q_block") if loop_order == "kv_outer" else ("q_block", "k_block")
    for run in runs:
        assert 1 <= len(run) <= max_tiles and len({getattr(t, outer) for t in run}) == 1
        first = getattr(run[0], inner)
        assert [getattr(t, inner) for t in run] == list(range(first, first + len(run)))
    for a, b in itertools.pairwise(runs):
        if getattr(a[-1], outer) == getattr(b[0], outer) and getattr(b[0], inner) == getattr(a[-1], inner) + 1:
            assert len(a) == max_tiles  # adjacent in the same outer block: only the cap split them
    if "mask_mod" in mask and loop_order == "q_outer":  # a row sees the sinks, skips, then sees its window
        assert any(getattr(a[-1], outer) == getattr(b[0], outer) for a, b in itertools.pairwise(runs))
    assert (sched.runs(max_tiles) is runs) == ("mask_mod" in mask)  # memoised where statuses are stored
    with pytest.raises(ValueError, match="max_tiles must be a positive"):
        sched.runs(0)


def test_visible_mask_matches_sdpa_causal_convention():
    # top-left aligned, as scaled_dot_product_attention(is_causal=True) with N_q != N_k
    mask = visible_mask(torch.arange(3), torch.arange(5), causal=True)
    sdpa_mask = torch.ones(3, 5, dtype=torch.bool).tril(diagonal=0)
    assert torch.equal(mask, sdpa_mask)
    assert visible_mask(torch.arange(3), torch.arange(5)) is None


@pytest.mark.parametrize("mask", MASKS, ids=str)
@pytest.mark.parametrize("loop_order", ["kv_outer", "q_outer"])
def test_kernel_computes_exactly_the_non_skipped_tiles(mask, loop_order):
    n_q, n_k, bq, bk = 45, 38, 8, 6
    q = torch.randn(1, 2, n_q, 8)
    k = v = torch.randn(1, 2, n_k, 8)
    events = []
    flash_attention_forward(q, k, v, block_q=bq, block_k=bk, loop_order=loop_order, on_tile=events.append, **mask)
    sched = tile_schedule(n_q, n_k, bq, bk, loop_order=loop_order, **mask)
    expected = [(t.step, t.q_block, t.k_block, t.status) for t in sched.computed()]
    assert [(e.step, e.q_block, e.k_block, e.status) for e in events] == expected


@pytest.mark.parametrize("loop_order", ["kv_outer", "q_outer"])
def test_events_carry_the_running_softmax_state(loop_order):
    """The last event of each row block holds the final m and l: logsumexp = m + log l."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 1, 20, 4, dtype=torch.float64) for _ in range(3))
    events = []
    _, lse = flash_attention_forward(q, k, v, block_size=8, loop_order=loop_order, return_lse=True,
                                     on_tile=events.append)
    final = {}
    for e in events:
        final[e.q_block] = e
        assert e.m.shape == e.l.shape == (e.q_end - e.q_start,)
    scores = q[0, 0] @ k[0, 0].T / 2.0  # scale = 1/sqrt(4)
    for e in final.values():
        torch.testing.assert_close(e.m, scores[e.q_start:e.q_end].amax(-1))
        torch.testing.assert_close(e.m + e.l.log(), lse[0, 0, e.q_start:e.q_end])
    # the running max never decreases along a row
    for qb in final:
        ms = torch.stack([e.m for e in events if e.q_block == qb])
        assert bool((ms[1:] >= ms[:-1]).all())


def test_all_pairs_order_helper():
    sched = tile_schedule(6, 6, 2, 3, loop_order="q_outer")
    assert [(t.q_block, t.k_block) for t in sched] == list(itertools.product(range(3), range(2)))


@pytest.mark.parametrize("mask", MASKS, ids=str)
@pytest.mark.parametrize("size", SIZES, ids=str)
def test_mask_mod_classifier_agrees_with_the_exact_geometry(size, mask):
    """The element-level classifier of a mask_mod and the O(1) corner rule give the same statuses for causal/window."""
    parts = ([causal_mask] if mask["causal"] else []) + ([sliding_window(*mask["window"])] if mask["window"] else [])
    mask_mod = and_masks(*parts) if parts else (lambda b, h, q_idx, kv_idx: q_idx >= 0)
    geometric = tile_schedule(*size, **mask)
    assert [t.status for t in tile_schedule(*size, mask_mod=mask_mod)] == [t.status for t in geometric]
