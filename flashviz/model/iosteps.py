"""The IO model's steps: the traffic of one step (a tile, or a phase of standard attention) per (batch, head), and
the running sums over all batches and heads that io_trace tabulates. flashviz.model.iomodel builds its public
functions (io_cost, io_trace_steps, io_trace) on these.

References: Dao et al., FlashAttention (2022), Algorithms 0 and 1; Dao, FlashAttention-2 (2023), Algorithm 1.

Accounting rules, per (batch, query head), in elements (multiply by dtype_bytes for bytes):
    naive     reads N_q d + 2 N_k d + 2 N_q N_k, writes 2 N_q N_k + N_q d, flops 4 N_q N_k d (masking saves nothing).
    kv_outer  writes the initial O, l, m (N_q d + 2 N_q); each K/V block with >= 1 computed tile reads K_j, V_j once
              (2 cols_j d); each computed tile reads Q_i, O_i, l_i, m_i (2 rows_i d + 2 rows_i) and writes O_i, l_i,
              m_i (rows_i d + 2 rows_i).
    q_outer   each Q block with >= 1 computed tile reads Q_i once (rows_i d); each computed tile reads K_j, V_j
              (2 cols_j d); O and L are written once (N_q d + N_q), rows that see no key included (zeros, -inf).
    tiled flops: 4 rows_i cols_j d summed over computed tiles (flashviz.model.flops.score_flops).
Grouped-query attention (heads_kv < heads): the H / H_kv query heads of a group share one K/V head, and a kernel
that processes the group together loads each K_j, V_j once for all of them, so K/V reads count B H_kv times and
everything else (Q, O, l, m, L, S, P) B H times.

Legend: N_q, N_k sequence lengths; d head dimension; Br = block_q, Bc = block_k; B batch; H query heads, H_kv
key/value heads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from flashviz.core.tiling import TileSchedule, tile_schedule
from flashviz.core.validate import Window
from flashviz.model.flops import matmul_flops, score_flops
from flashviz.vocab import KV_OUTER

if TYPE_CHECKING:  # a mask_mod is made of torch ops; the IO model itself never imports torch
    from flashviz.masks import MaskMod

# One step's traffic per (batch, head): (q_block, k_block, label, reads of Q/O/l/m/S/P (and dO, L, D, dQ in the
# backward), reads of K/V, writes per query head, writes of dK/dV per K/V head, flops); -1 for "no tile".
Step = tuple[int, int, str, int, int, int, int, int]


class TraceStep(NamedTuple):
    """One row of io_trace: the cumulative traffic after one step, for all B H (counts in elements)."""

    step: int  # -1: the start row of a tiled algorithm; then 0, 1, ... (tiles in visiting order, or naive phases)
    q_block: int  # tile row i, -1 for no tile
    k_block: int  # tile column j, -1 for no tile
    status: str  # "start", a tile status ("full", "partial", "skipped") or the naive phase
    reads: int  # elements read from HBM so far
    writes: int  # elements written to HBM so far
    flops: int  # FLOPs so far
    hbm_bytes: int  # (reads + writes) * dtype_bytes so far


TRACE_COLUMNS = TraceStep._fields  # io_trace's columns


def naive_steps(n_q: int, n_k: int, d: int) -> Iterator[Step]:
    """Algorithm 0 as three phases."""
    yield -1, -1, "S = QK^T", n_q * d, n_k * d, n_q * n_k, 0, matmul_flops(n_q, n_k, d)  # read Q, K; write S
    yield -1, -1, "P = softmax(S)", n_q * n_k, 0, n_q * n_k, 0, 0  # read S; write P
    yield -1, -1, "O = PV", n_q * n_k, n_k * d, n_q * d, 0, matmul_flops(n_q, d, n_k)  # read P, V; write O


def tiled_steps(schedule: TileSchedule, d: int) -> Iterator[Step]:
    """A start row (-1, -1, "start", ...), then one row per tile of the schedule, in visiting order.

    The start row holds kv_outer's initial write of O, l, m (nothing for q_outer). K_j/V_j (kv_outer) or Q_i
    (q_outer) are charged to the first computed tile of their column/row; q_outer's O_i, L_i are charged to the
    last tile of row i (computed or not).
    """
    kv_outer = schedule.loop_order == KV_OUTER
    yield -1, -1, "start", 0, 0, (schedule.n_q * d + 2 * schedule.n_q) if kv_outer else 0, 0, 0  # write O, l, m
    loaded: set[int] = set()  # outer blocks whose operand is already on chip
    last_k = schedule.n_k_blocks - 1
    for t in schedule:
        rows, cols = t.rows, t.cols
        reads_q = reads_kv = writes = flops = 0
        if t.computed:
            outer = t.k_block if kv_outer else t.q_block
            first = outer not in loaded
            loaded.add(outer)
            flops = score_flops(rows * cols, d)
            if kv_outer:
                reads_kv = 2 * cols * d if first else 0  # K_j, V_j once
                reads_q = 2 * rows * d + 2 * rows  # Q_i, O_i, l_i, m_i
                writes = rows * d + 2 * rows  # O_i, l_i, m_i
            else:
                reads_q = rows * d if first else 0  # Q_i once
                reads_kv = 2 * cols * d  # K_j, V_j
        if not kv_outer and t.k_block == last_k:
            writes += rows * d + rows  # epilogue of row i: O_i and L_i
        yield t.q_block, t.k_block, t.status, reads_q, reads_kv, writes, 0, flops


class RowBand(NamedTuple):
    """The computed tiles of one Q block row under a causal / window mask: K blocks c0 .. c1 (none: tiles = 0)."""

    rows: int  # query rows of the block (the last one may be ragged)
    c0: int  # first computed K block
    c1: int  # last computed K block
    keys: int  # keys the row's computed tiles load together (0 when none is computed)
    tiles: int  # computed tiles of the row: c1 - c0 + 1, or 0


def row_bands(n_q: int, n_k: int, block_q: int, block_k: int, causal: bool, window: Window) -> Iterator[RowBand]:
    """One RowBand per Q block row, in O(1) each, without listing the tiles.

    Query row r sees keys [r - left, r + right] (right <= 0 under causal), clipped to [0, N_k). Both ends grow with
    r, so the keys the rows [a, b) of block row i see together form one interval [lo_i, hi_i] (empty once every
    row is past N_k + left), and the computed tiles of block row i are the K blocks lo_i // Bc .. hi_i // Bc: the
    same tiles `tile_schedule` computes.
    """
    left, right = window if window is not None else (None, None)
    if causal:
        right = 0 if right is None else min(right, 0)
    for a in range(0, n_q, block_q):
        b = min(a + block_q, n_q)  # rows [a, b) of block row i
        lo = 0 if left is None else max(0, a - left)
        hi = n_k - 1 if right is None else min(n_k - 1, b - 1 + right)
        if lo > hi:
            yield RowBand(b - a, 0, -1, 0, 0)
            continue
        c0, c1 = lo // block_k, hi // block_k  # first and last computed K block
        yield RowBand(b - a, c0, c1, min(n_k, (c1 + 1) * block_k) - c0 * block_k, c1 - c0 + 1)


def used_key_columns(bands: Iterable[RowBand], n_k: int, block_k: int) -> int:
    """Keys in the K blocks that have at least one computed tile (each block counted once): what a kv_outer loop
    loads once per column."""
    Tc = -(-n_k // block_k)
    kv_used = [0] * (Tc + 1)  # difference array: computed tiles per K block
    for band in bands:
        if band.tiles:
            kv_used[band.c0] += 1
            kv_used[band.c1 + 1] -= 1
    keys = running = 0
    for j in range(Tc):
        running += kv_used[j]
        keys += min(block_k, n_k - j * block_k) if running > 0 else 0
    return keys


def band_totals(algorithm: str, n_q: int, n_k: int, d: int, block_q: int, block_k: int, causal: bool,
                window: Window) -> tuple[int, int, int, int]:
    """(reads of Q/O/l/m, reads of K/V, writes, flops) per (batch, head) in O(Tr + Tc), without listing the tiles:
    the rules of `tiled_steps` summed over `row_bands`."""
    bands = list(row_bands(n_q, n_k, block_q, block_k, causal, window))
    pairs = sum(band.rows * band.keys for band in bands)
    if algorithm == KV_OUTER:
        reads_q = sum(band.tiles * (2 * band.rows * d + 2 * band.rows) for band in bands)  # Q_i, O_i, l_i, m_i
        writes = sum(band.tiles * (band.rows * d + 2 * band.rows) for band in bands)  # O_i, l_i, m_i per tile
        writes += n_q * d + 2 * n_q  # the initial O, l, m
        reads_kv = 2 * d * used_key_columns(bands, n_k, block_k)  # K_j, V_j once for every K block used
    else:
        reads_q = sum(band.rows * d for band in bands if band.tiles)  # Q_i once
        reads_kv = sum(2 * band.keys * d for band in bands)  # K_j, V_j per computed tile
        writes = n_q * d + n_q  # O and L, once
    return reads_q, reads_kv, writes, score_flops(pairs, d)


def schedule_of(loop_order: str, n_q: int, n_k: int, block_q: int, block_k: int, causal: bool, window: Window,
                mask_mod: MaskMod | None = None, batch: int = 1, heads: int = 1) -> TileSchedule:
    """The tile schedule of a loop order for the mask (a mask_mod is classified over batch and heads)."""
    return tile_schedule(n_q, n_k, block_q, block_k, causal=causal, window=window, loop_order=loop_order,
                         mask_mod=mask_mod, batch=batch, heads=heads)


def cumulative(steps: Iterable[Step], first_step: int, bh: int, bh_kv: int, dtype_bytes: int) -> Iterator[TraceStep]:
    """Running sums of per-(batch, head) steps over all B H: K/V reads and dK/dV writes count B H_kv times, the rest
    B H times."""
    reads = writes = flops = 0
    for step, (i, j, status, r_q, r_kv, w, w_kv, f) in enumerate(steps, start=first_step):
        reads, writes, flops = reads + r_q * bh + r_kv * bh_kv, writes + w * bh + w_kv * bh_kv, flops + f * bh
        yield TraceStep(step, i, j, status, reads, writes, flops, (reads + writes) * dtype_bytes)
