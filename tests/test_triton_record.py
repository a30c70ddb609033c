"""flashviz.triton.trace's record of what the kernel did, held against the library, which was written without it:
the K/V blocks each program loaded are `tile_schedule`'s computed tiles (FA2's q_outer order), the STAGE 2 ones are
its partial tiles, and the bytes the loads and stores moved are `io_cost`'s FA2 model at the same tiles.

Legend: B batch, H heads, N sequence length, d head dimension, Br = block_m, Bc = block_n.
"""

from __future__ import annotations

import pytest
import torch

from flashviz import io_cost, tile_schedule
from flashviz import triton as ft  # before triton: it sets TRITON_INTERPRET where there is no CUDA
from flashviz.vocab import PARTIAL
from tests._oracle import make_qkv, max_err, reference

pytest.importorskip("flashviz.triton.kernel")
pytest.importorskip("numpy")

CASES = [  # (B, H, N, d, causal, Br, Bc): a causal and a ragged case at the default tiles, then the edges
    (1, 1, 256, 64, True, 64, 32),
    (1, 1, 200, 32, False, 64, 32),
    (1, 2, 200, 32, True, 64, 32),
    (2, 1, 97, 16, True, 32, 32),
    (1, 1, 64, 16, False, 64, 16),
    (1, 1, 40, 16, True, 64, 32),  # one program whose Q block runs past N
]
IDS = [f"B{b}H{h}-N{n}-d{d}-{'causal' if c else 'full'}-{bm}x{bn}" for b, h, n, d, c, bm, bn in CASES]


@pytest.fixture(scope="module", params=CASES, ids=IDS)
def case(request):
    b, h, n, d, causal, bm, bn = request.param
    q, k, v = make_qkv(b, h, n, n, d, seed=n)
    return request.param, (q, k, v), ft.trace(q, k, v, causal=causal, block_m=bm, block_n=bn)


def test_the_grid_is_one_program_per_q_block_and_head(case):
    (b, h, n, _, _, bm, _), _, t = case
    tr = -(-n // bm)
    assert t.programs == tuple(ft_program(i, hz) for i in range(tr) for hz in range(b * h))
    assert t.grid == (tr, b * h)


def ft_program(q_block: int, head: int):
    from flashviz.triton.record import Program

    return Program(q_block, head)


def test_each_program_loads_the_schedules_tiles_in_its_order(case):
    (b, h, n, _, causal, bm, bn), _, t = case
    schedule = tile_schedule(n, n, bm, bn, causal=causal, loop_order="q_outer")
    for p in t.programs:
        want = [tile.k_block for tile in schedule if tile.q_block == p.q_block and tile.computed]
        got = t.tiles_of(p)
        assert [x.k_block for x in got] == want, p
        assert [x.order for x in got] == list(range(len(want)))
    assert len(t.tiles) == b * h * sum(tile.computed for tile in schedule)


def test_stage_2_tiles_are_the_partial_tiles(case):
    """One exception, by construction: when the last Q block holds a single row (N = 1 mod Br) its band ends in a
    1 x 1 tile, query N - 1 against key N - 1, which sees it (full in the schedule) though the kernel walks the band
    with its mask."""
    (_, _, n, _, causal, bm, bn), _, t = case
    schedule = tile_schedule(n, n, bm, bn, causal=causal, loop_order="q_outer")
    partial = {(tile.q_block, tile.k_block) for tile in schedule if tile.status == PARTIAL}
    corner = {(tile.q_block, tile.k_block) for tile in schedule
              if causal and tile.rows == tile.cols == 1 and tile.q_start == tile.k_start == n - 1}
    assert {(x.q_block, x.k_block) for x in t.tiles if x.stage == 2} == partial | corner
    assert len(corner) == (causal and n % bm == 1)
    assert {x.stage for x in t.tiles} <= ({1, 2} if causal else {3})


def test_bytes_loaded_and_stored_are_io_costs_fa2_model(case):
    (b, h, n, d, causal, bm, bn), _, t = case
    cost = io_cost("flash2", n, n, d, bm, bn, causal=causal, batch=b, heads=h, dtype_bytes=4)
    assert t.bytes_loaded == cost.reads * 4  # Q_i once per program, K_j and V_j once per tile: rows < N only
    assert t.bytes_stored == cost.writes * 4  # O_i and L_i once per program
    assert t.dots == 2 * len(t.tiles)  # S = Q K^T, then O += P V


def test_the_recorded_run_is_the_kernels_answer(case):
    (_, _, _, _, causal, bm, bn), (q, k, v), t = case
    assert torch.equal(t.out, ft.attention(q, k, v, causal=causal, block_m=bm, block_n=bn))
    assert max_err(t.out, reference(q, k, v, causal=causal)) <= 1e-5


def test_every_event_names_the_kernel_line_that_issued_it(case):
    _, _, t = case
    source = ft_source_lines()
    for e in t.events_of(t.programs[-1]):
        text = source[e.line - 1]
        assert ("tl.dot" in text) if e.kind == "dot" else (f"tl.{e.kind}" in text), (e, text)


def ft_source_lines() -> list[str]:
    from flashviz.triton.record import KERNEL_FILE

    with open(KERNEL_FILE) as f:
        return f.read().splitlines()


def test_the_causal_programs_visit_2_4_6_8_k_blocks():
    q, k, v = make_qkv(1, 1, 256, 256, 64, seed=1)
    t = ft.trace(q, k, v, causal=True)
    assert [len(t.tiles_of(p)) for p in t.programs] == [2, 4, 6, 8]
    assert [[x.stage for x in t.tiles_of(p)] for p in t.programs][1] == [1, 1, 2, 2]
