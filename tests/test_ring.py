"""flashviz.ring without starting a process: the layouts, shard / unshard, the model of the ring (which tiles each rank
computes at each step, the bytes it sends) against a brute-force oracle, the logsumexp merge, and ring_attention on a
process group of one rank against float64 attention. The W-process runs are in tests/test_ring_processes.py."""

from __future__ import annotations

import math

import pytest
import torch
import torch.distributed as dist
from _oracle import make_qkv, max_err, reference, reference_grads
from hypothesis import given
from hypothesis import strategies as st

from flashviz import naive_attention
from flashviz.core.decode import merge_partials
from flashviz.ring import (
    BACKWARD,
    FORWARD,
    LAYOUTS,
    check_layout,
    owner_rank,
    positions,
    ring_attention,
    ring_schedule,
    ring_step,
    shard,
    shard_bytes,
    step_statuses,
    unshard,
)
from flashviz.vocab import FULL, PARTIAL, SKIPPED

# absolute floor of the gradients' 2x rule, as tests/test_backward.py's for fp32: the tiled backward recomputes P from
# L, whose rounding a plain autograd run (which keeps P) never sees
GRAD_FLOOR = 5e-6

# ----------------------------------------------------------------------------------------------------------------------
# layouts, shard and unshard


@given(world=st.integers(1, 4), layout=st.sampled_from(LAYOUTS), per_unit=st.integers(1, 4),
       b=st.integers(1, 2), h=st.integers(1, 3), d=st.integers(1, 3))
def test_unshard_inverts_shard_and_each_shard_holds_its_positions(world, layout, per_unit, b, h, d):
    n = per_unit * (2 * world if layout == "zigzag" else world)
    x = torch.randn(b, h, n, d)
    shards = [shard(x, world, r, layout) for r in range(world)]
    assert torch.equal(unshard(shards, layout), x)
    held = [p for r in range(world) for p in positions(n, world, r, layout)]
    assert sorted(held) == list(range(n))  # every position on exactly one rank
    for r, s in enumerate(shards):
        assert s.shape == (b, h, n // world, d)
        assert torch.equal(s, x[:, :, list(positions(n, world, r, layout))])
        assert all(owner_rank(p, n, world, layout) == r for p in positions(n, world, r, layout))
        assert list(positions(n, world, r, layout)) == sorted(positions(n, world, r, layout))  # increasing


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_the_layouts_deal_the_positions_as_their_definitions_say(world):
    n = 2 * world * 3  # chunks of 3
    c = n // (2 * world)
    for r in range(world):
        assert positions(n, world, r, "contiguous") == tuple(range(r * n // world, (r + 1) * n // world))
        assert positions(n, world, r, "striped") == tuple(i for i in range(n) if i % world == r)
        chunks = (r, 2 * world - 1 - r)  # zigzag: rank r holds chunks r and 2W-1-r
        assert positions(n, world, r, "zigzag") == tuple(p for ch in chunks for p in range(ch * c, (ch + 1) * c))


@pytest.mark.parametrize(("n", "world", "layout", "fix"), [
    (10, 4, "contiguous", "Pad the sequence to N = 12"),
    (12, 4, "zigzag", "2W = 8"),
    (12, 4, "zigzag", "Pad the sequence to N = 16"),
    (7, 2, "striped", "N = 8"),
])
def test_n_not_divisible_by_the_layouts_chunking_says_the_fix(n, world, layout, fix):
    with pytest.raises(ValueError, match="not divisible") as e:
        check_layout(n, world, layout)
    assert fix in str(e.value)
    with pytest.raises(ValueError, match="not divisible"):
        shard(torch.zeros(1, 1, n, 1), world, 0, layout)


@pytest.mark.parametrize("world", [0, -1, 1.0, True, "2"])
def test_a_world_that_is_not_a_positive_int_is_refused(world):
    with pytest.raises(ValueError, match="world must be an integer >= 1"):
        check_layout(8, world, "contiguous")


def test_an_unknown_layout_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="layout must be one of"):
        positions(8, 2, 0, "diagonal")


# ----------------------------------------------------------------------------------------------------------------------
# the model: tiles and bytes


def _oracle_statuses(n, world, layout, block, causal, rank, kv_rank):
    """Tile statuses from the dense element mask of global positions (key position <= query position)."""
    pq = torch.tensor(positions(n, world, rank, layout))
    pk = torch.tensor(positions(n, world, kv_rank, layout))
    vis = (pk[None, :] <= pq[:, None]) if causal else torch.ones(len(pq), len(pk), dtype=torch.bool)
    T = math.ceil(len(pq) / block)
    out = []
    for i in range(T):
        row = []
        for j in range(T):
            tile = vis[i * block:(i + 1) * block, j * block:(j + 1) * block]
            row.append(FULL if tile.all() else PARTIAL if tile.any() else SKIPPED)
        out.append(tuple(row))
    return tuple(out)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("block", [1, 3, 4, 7, 12, 50])
def test_the_schedules_tile_statuses_are_the_element_masks(layout, world, block):
    n = 48
    for rank in range(world):
        for kv_rank in range(world):
            for causal in (False, True):
                assert (step_statuses(n, world, layout, block, causal, rank, kv_rank)
                        == _oracle_statuses(n, world, layout, block, causal, rank, kv_rank))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_rank_r_holds_the_kv_of_rank_r_minus_t_at_step_t(layout, world):
    s = ring_schedule(24, world, layout, 4, causal=True, backward=True)
    for phase in (FORWARD, BACKWARD):
        steps = s.of(phase)
        assert [(p.rank, p.step) for p in steps] == [(r, t) for r in range(world) for t in range(world)]
        assert all(p.kv_rank == (p.rank - p.step) % world for p in steps)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_each_score_is_met_at_the_step_its_query_rank_holds_its_key_rank(layout, world):
    n = 4 * world
    steps = {(p.rank, p.kv_rank): p.step for p in ring_schedule(n, world, layout, 2).of()}
    for i in range(n):
        for j in range(n):
            assert ring_step(i, j, n, world, layout) == steps[owner_rank(i, n, world, layout),
                                                             owner_rank(j, n, world, layout)]


@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("tiles_per_side", [1, 2, 4, 8])
def test_contiguous_causal_rank_r_computes_r_full_steps_and_a_triangle(world, tiles_per_side):
    T = tiles_per_side
    n, block = world * T * 4, 4
    s = ring_schedule(n, world, "contiguous", block, causal=True)
    work = s.tiles_per_rank()
    assert work == tuple(T * (T + 1) // 2 + r * T * T for r in range(world))  # the diagonal, then r whole steps
    assert all(p.tiles_computed == 0 for p in s.of() if p.kv_rank > p.rank)  # the future: skipped whole
    if T == 1:  # one tile per step: rank r computes r + 1 steps, so the last is 2W / (W + 1) times the mean
        assert s.imbalance() == pytest.approx(2 * world / (world + 1))
    assert s.imbalance() == pytest.approx(max(work) / (sum(work) / world))


@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("block", [1, 2, 3, 4, 6])
def test_zigzag_and_striped_causal_keep_the_busiest_rank_within_5_percent_of_the_mean(world, block):
    n = 2 * world * 12  # chunks of 12
    for layout in ("zigzag", "striped"):
        assert ring_schedule(n, world, layout, block, causal=True).imbalance() <= 1.05, layout
    if world > 1:
        assert ring_schedule(n, world, "contiguous", block, causal=True).imbalance() > 1.05


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("world", [1, 2, 4])
def test_without_causal_every_step_computes_every_tile(layout, world):
    s = ring_schedule(16 * world, world, layout, 5, causal=False)
    T = math.ceil(16 / 5)
    assert all(p.tiles_computed == T * T and p.tiles_skipped == 0 and p.tiles_partial == 0 for p in s.steps)
    assert all(p.flops == 4 * 16 * 16 * 64 for p in s.steps)  # 4 B H d per score element, the whole n x n


@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_each_rank_sends_its_kv_shard_w_minus_1_times_and_the_dkv_w_times(world, dtype):
    B, H, H_kv, n, d = 2, 4, 2, 24 * world, 8
    s = ring_schedule(n, world, "zigzag", 4, causal=True, batch=B, heads=H, heads_kv=H_kv, head_dim=d, dtype=dtype,
                      backward=True)
    elem = {"float32": 4, "bfloat16": 2, "float64": 8}[dtype]
    kv = 2 * B * H_kv * (n // world) * d * elem
    assert shard_bytes(B, H_kv, n, world, d, dtype) == kv
    acc = 2 * B * H_kv * (n // world) * d * (8 if dtype == "float64" else 4)  # dK, dV in the accumulator dtype
    for r in range(world):
        assert sum(p.bytes_sent for p in s.of(FORWARD) if p.rank == r) == (world - 1) * kv
        assert sum(p.bytes_sent for p in s.of(BACKWARD) if p.rank == r) == (world - 1) * kv + (world > 1) * world * acc


# ----------------------------------------------------------------------------------------------------------------------
# the merge (shared with flash_decode)


@pytest.mark.parametrize("splits", [1, 2, 3, 5])
def test_merging_the_partials_of_disjoint_keys_is_attention_over_all_of_them(splits):
    q, k, v = make_qkv(1, 2, 6, 15, 4, dtype=torch.float64, seed=splits)
    S = q @ k.transpose(-1, -2) / 2.0  # (1, 2, 6, 15), scale 1/sqrt(4)
    S[..., 0, :] = -math.inf  # a row that sees no key at all
    parts = torch.tensor_split(torch.arange(15), splits)
    L_s = torch.stack([torch.logsumexp(S[..., p], -1) for p in parts], 2)  # (1, 2, S, 6)
    O_s = torch.stack([torch.nan_to_num(torch.softmax(S[..., p], -1)) @ v[:, :, p] for p in parts], 2)
    out, L = merge_partials(O_s.movedim(2, 0), L_s.movedim(2, 0))  # parts first: (S, 1, 2, 6, d), (S, 1, 2, 6)
    full = torch.nan_to_num(torch.softmax(S, -1)) @ v
    assert torch.allclose(out, full, atol=1e-12)
    assert torch.equal(L.isinf(), torch.logsumexp(S, -1).isinf())
    w = torch.exp(L_s.movedim(2, 0) - torch.nan_to_num(L, neginf=0.0))  # each part's share exp(L_s - L)
    assert torch.allclose(w.sum(0)[..., 1:], torch.ones(1, 2, 5, dtype=torch.float64))  # shares sum to 1 ...
    assert torch.equal(w.sum(0)[..., 0], torch.zeros(1, 2, dtype=torch.float64))  # ... and 0 for the empty row
    assert not out.isnan().any()


# ----------------------------------------------------------------------------------------------------------------------
# ring_attention in one process: a group of one rank


@pytest.fixture
def one_rank_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_ring_attention_without_a_process_group_says_how_to_get_one():
    q = torch.randn(1, 1, 4, 2)
    with pytest.raises(RuntimeError, match=r"init_process_group.*run_ring"):
        ring_attention(q, q, q)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("H", "H_kv"), [(2, 2), (4, 2), (3, 1)])
def test_one_rank_is_attention_forward_and_backward(one_rank_group, layout, causal, H, H_kv):
    q, k, v = make_qkv(2, H, 38, 38, 8, h_kv=H_kv, seed=H)  # ragged: 38 rows in tiles of 8
    dO = torch.randn(q.shape, generator=torch.Generator().manual_seed(7))
    events = []
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    out, lse = ring_attention(qg, kg, vg, causal=causal, layout=layout, block_size=8, return_lse=True,
                              on_step=events.append)
    assert max_err(out, reference(q, k, v, causal=causal)) <= 1e-5
    S = q.double() @ k.double().repeat_interleave(H // H_kv, 1).transpose(-1, -2) / math.sqrt(8)
    if causal:
        S = S.masked_fill(torch.ones(38, 38, dtype=torch.bool).triu(1), -math.inf)
    assert max_err(lse, torch.logsumexp(S, -1)) <= 1e-5
    got = torch.autograd.grad(out, (qg, kg, vg), dO)
    ref = reference_grads(q, k, v, dO, causal=causal)
    plain = torch.autograd.grad(naive_attention(qg, kg, vg, causal=causal), (qg, kg, vg), dO)
    for name, g, p, r in zip(("dq", "dk", "dv"), got, plain, ref, strict=True):
        assert max_err(g, r) <= 2 * max_err(p, r) + GRAD_FLOOR, name
    plan = ring_schedule(38, 1, layout, 8, causal, batch=2, heads=H, heads_kv=H_kv, head_dim=8, backward=True)
    fields = ("rank", "step", "kv_rank", "phase", "tiles_computed", "tiles_partial", "tiles_skipped", "flops",
              "bytes_sent")
    assert [tuple(getattr(e, f) for f in fields) for e in events] == [
        tuple(getattr(p, f) for f in fields) for p in plan.steps]
    assert events[0].lse == tuple(lse[0, 0].double().tolist())  # one step: its partial is the whole logsumexp


def test_ring_attention_refuses_shards_of_different_lengths(one_rank_group):
    q = torch.randn(1, 1, 8, 2)
    with pytest.raises(ValueError, match="same positions"):
        ring_attention(q, q[:, :, :4], q[:, :, :4])
