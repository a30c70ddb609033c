"""The backward's IO model: the HBM traffic and FLOPs of the attention backward, standard and tiled, tile by tile.

Standard attention keeps P from the forward and its backward writes and re-reads N x N matrices (dP, dS) on top;
FlashAttention's backward keeps only O and the logsumexp L, recomputes each tile's P_ij on chip, and never moves an
N x N matrix. This module counts both, per (batch, head), as steps that flashviz.model.iomodel sums (io_cost) and
runs through (io_trace): the tiled one walks the same `tile_schedule` as the kernel, so skipped tiles move nothing.

References:
    Dao et al., FlashAttention (2022), Appendix B.1-B.2 and Algorithm 3 (standard attention backward): dV = P^T dO,
        dP = dO V^T, dS = P * (dP - D) with D_i = sum_l P_il dP_il, dQ = dS K, dK = dS^T Q, each phase through HBM.
    Dao, FlashAttention-2 (2023), Algorithm 2 (tiled backward, outer loop over K/V blocks j): K_j, V_j loaded once
        per column, dK_j, dV_j accumulated on chip and written once; per tile Q_i, dO_i, L_i, D_i loaded and dQ_i
        read, updated and written back (an atomic add on a GPU, where the column blocks run in parallel); D =
        rowsum(dO * O) computed first. Line 9 also lists O_i among each tile's loads; with D precomputed no tile uses
        it, and flash-attn's kernel (and core/backward.py) never loads it, so it is not counted.

Accounting rules, per (batch, query head) in elements; K_j, V_j reads and dK_j, dV_j writes per (batch, K/V head):
    standard   Algorithm 3's five phases: dV = P^T dO reads P, dO, writes dV; dP = dO V^T reads dO, V, writes dP;
               dS reads P, dP, writes dS; dQ = dS K reads dS, K, writes dQ; dK = dS^T Q reads dS, Q, writes dK.
               Reads 5 N_q N_k + 3 N_q d + 2 N_k d, writes 2 N_q N_k + N_q d + 2 N_k d; a mask saves nothing.
    atomic     start: the pre-pass D = rowsum(dO * O) reads dO, O (2 N_q d) and writes D (N_q), and dQ = 0 is
               written (N_q d). Each K/V block with >= 1 computed tile reads K_j, V_j once (2 cols_j d); every K/V
               block writes dK_j, dV_j once (2 cols_j d, zeros for keys no query sees: they are outputs). Each
               computed tile reads Q_i, dO_i, L_i, D_i (2 rows_i d + 2 rows_i) and dQ_i (rows_i d) and writes dQ_i
               back (rows_i d).
    deterministic  no atomic adds: pass 1 (outer loop over j) is the atomic schedule without dQ (no dQ_i read or
               write, no dQ = 0); pass 2 (outer loop over Q blocks i) reads Q_i, dO_i, L_i, D_i once per Q block with
               >= 1 computed tile, K_j, V_j per computed tile, recomputes S_ij, P_ij, dP_ij, dS_ij and writes dQ_i
               once (every row: an output). The same dQ, bit for bit on every run.
FLOPs (matmuls only, 2 per multiply-accumulate): standard 4 matmuls over every score, 8 N_q N_k d = 2 x its forward;
atomic 5 per computed tile (S = Q_i K_j^T recomputed, dV_j, dP_ij, dQ_i, dK_j): 10 rows_i cols_j d = 2.5 x the tiled
forward; deterministic 4 in pass 1 (S, dV, dP, dK) and 3 in pass 2 (S, dP, dQ): 7 per tile, 1.4 x the atomic one.
Element counts do not depend on the dtype; a GPU kernel keeps dQ's accumulator in fp32, which this model, counting
elements, leaves to dtype_bytes.

Legend: N_q, N_k lengths; d head dimension; Br = block_q, Bc = block_k; Tr, Tc blocks; rows_i, cols_j the sizes of
Q block i and K/V block j (the last ones may be ragged); B batch, H query heads, H_kv K/V heads.
"""

from __future__ import annotations

from collections.abc import Iterator

from flashviz.core.tiling import TileSchedule
from flashviz.core.validate import Window
from flashviz.model.flops import MATMULS_BACKWARD, MATMULS_BACKWARD_STORED_P, matmul_flops
from flashviz.model.iosteps import Step, row_bands, used_key_columns
from flashviz.vocab import DQ_ATOMIC, DQ_DETERMINISTIC, DQ_MODES

MATMULS_STANDARD = MATMULS_BACKWARD_STORED_P  # 4: dV, dP, dQ, dK over every score (P kept from the forward)
MATMULS_ATOMIC = MATMULS_BACKWARD  # 5 per computed tile: S recomputed, then dV, dP, dQ, dK
MATMULS_KV_PASS = 4  # deterministic pass 1 per tile: S, dV_j += P^T dO_i, dP, dK_j += dS^T Q_i
MATMULS_DQ_PASS = 3  # deterministic pass 2 per tile: S and dP recomputed, dQ_i += dS K_j
MATMULS_PER_TILE = {DQ_ATOMIC: MATMULS_ATOMIC, DQ_DETERMINISTIC: MATMULS_KV_PASS + MATMULS_DQ_PASS}  # 5 and 7
START = "start"  # the label of the pre-pass step (D = rowsum(dO * O), dQ = 0)


def validate_dq_mode(dq_mode: object) -> str:
    """"atomic" or "deterministic".

    Example:
        >>> validate_dq_mode("deterministic")
        'deterministic'
    """
    if dq_mode not in DQ_MODES:
        raise ValueError(f"dq_mode must be one of {DQ_MODES}, got {dq_mode!r}: 'atomic' is FA2 Algorithm 2 (dQ_i "
                         "added into HBM after every tile), 'deterministic' a second pass over the Q blocks that "
                         "builds dQ_i on chip and writes it once.")
    return str(dq_mode)


def standard_backward_steps(n_q: int, n_k: int, d: int) -> Iterator[Step]:
    """FA1 Algorithm 3 (standard attention backward) as five phases, per (batch, head)."""
    pp, qd, kd = n_q * n_k, n_q * d, n_k * d  # one N_q x N_k matrix; one Q-sized and one K-sized operand
    yield -1, -1, "dV = P^T dO", pp + qd, 0, 0, kd, matmul_flops(n_k, d, n_q)  # read P, dO; write dV
    yield -1, -1, "dP = dO V^T", qd, kd, pp, 0, matmul_flops(n_q, n_k, d)  # read dO, V; write dP
    yield -1, -1, "dS = P * (dP - D)", 2 * pp, 0, pp, 0, 0  # read P, dP; write dS (D_i = rowsum(P * dP) on the way)
    yield -1, -1, "dQ = dS K", pp, kd, qd, 0, matmul_flops(n_q, d, n_k)  # read dS, K; write dQ
    yield -1, -1, "dK = dS^T Q", pp + qd, 0, 0, kd, matmul_flops(n_k, d, n_q)  # read dS, Q; write dK


def _start_step(schedule: TileSchedule, d: int, atomic: bool) -> Step:
    """The pre-pass (read dO, O; write D) and dQ = 0 (atomic only); outputs that no tile would write (no Q block, so
    no column ends on a tile; no K block, so no row does) are written here."""
    n_q, n_k = schedule.n_q, schedule.n_k
    writes = n_q + (n_q * d if atomic or schedule.n_k_blocks == 0 else 0)  # D; dQ = 0 or dQ with no K block
    writes_kv = 2 * n_k * d if schedule.n_q_blocks == 0 else 0  # dK, dV when no tile ends a column
    return -1, -1, START, 2 * n_q * d, 0, writes, writes_kv, 0


def _kv_pass(schedule: TileSchedule, d: int, atomic: bool) -> Iterator[Step]:
    """Pass 1, outer loop over K/V blocks j (the whole of Algorithm 2 when atomic): one step per tile."""
    matmuls = MATMULS_ATOMIC if atomic else MATMULS_KV_PASS
    Tr = schedule.n_q_blocks
    for j in range(schedule.n_k_blocks):
        loaded = False  # K_j, V_j on chip yet
        for i in range(Tr):
            t = schedule.tile(i, j, step=j * Tr + i)
            reads_q = reads_kv = writes = flops = 0
            if t.computed:
                reads_kv, loaded = (0 if loaded else 2 * t.cols * d), True  # K_j, V_j once per column
                reads_q = 2 * t.rows * d + 2 * t.rows + (t.rows * d if atomic else 0)  # Q_i, dO_i, L_i, D_i (dQ_i)
                writes = t.rows * d if atomic else 0  # dQ_i written back
                flops = matmuls * matmul_flops(t.rows, t.cols, d)
            writes_kv = 2 * t.cols * d if i == Tr - 1 else 0  # dK_j, dV_j once, after the column's last tile
            yield i, j, t.status, reads_q, reads_kv, writes, writes_kv, flops


def _dq_pass(schedule: TileSchedule, d: int) -> Iterator[Step]:
    """Deterministic pass 2, outer loop over Q blocks i: dQ_i on chip, written once; one step per tile."""
    Tc = schedule.n_k_blocks
    for i in range(schedule.n_q_blocks):
        loaded = False  # Q_i, dO_i, L_i, D_i on chip yet
        for j in range(Tc):
            t = schedule.tile(i, j, step=i * Tc + j)
            reads_q = reads_kv = flops = 0
            if t.computed:
                reads_q, loaded = (0 if loaded else 2 * t.rows * d + 2 * t.rows), True  # once per row
                reads_kv = 2 * t.cols * d  # K_j, V_j per tile
                flops = MATMULS_DQ_PASS * matmul_flops(t.rows, t.cols, d)
            writes = t.rows * d if j == Tc - 1 else 0  # dQ_i once, after the row's last tile
            yield i, j, t.status, reads_q, reads_kv, writes, 0, flops


def tiled_backward_steps(schedule: TileSchedule, d: int, dq_mode: str = DQ_ATOMIC) -> Iterator[Step]:
    """The tiled backward's steps per (batch, head): the start step, then every tile of the grid in Algorithm 2's
    order (outer loop over K/V blocks j, inner over Q blocks i; skipped tiles included, moving nothing), then for
    "deterministic" every tile again in pass 2's order (outer loop over Q blocks i). The schedule's own loop order
    does not matter: only its statuses are read.

    Example:
        >>> from flashviz.core.tiling import tile_schedule
        >>> steps = list(tiled_backward_steps(tile_schedule(4, 4, 2, 2, causal=True), d=2))
        >>> [(s[0], s[1], s[2]) for s in steps]  # (i, j, status): column 0 first; the start step has no tile
        [(-1, -1, 'start'), (0, 0, 'partial'), (1, 0, 'full'), (0, 1, 'skipped'), (1, 1, 'partial')]
    """
    atomic = validate_dq_mode(dq_mode) == DQ_ATOMIC
    yield _start_step(schedule, d, atomic)
    yield from _kv_pass(schedule, d, atomic)
    if not atomic:
        yield from _dq_pass(schedule, d)


def backward_band_totals(n_q: int, n_k: int, d: int, block_q: int, block_k: int, causal: bool, window: Window,
                         dq_mode: str = DQ_ATOMIC) -> tuple[int, int, int, int, int]:
    """(reads of Q/dO/O/L/D/dQ, reads of K/V, writes, writes of dK/dV, flops) of the tiled backward per (batch,
    head), in O(Tr + Tc) for causal and window masks: the rules of `tiled_backward_steps`, summed over row bands.

    Example:
        >>> backward_band_totals(4, 4, 2, 2, 2, True, None)  # 3 of 4 tiles computed, atomic dQ
        (64, 16, 24, 16, 240)
    """
    atomic = validate_dq_mode(dq_mode) == DQ_ATOMIC
    bands = list(row_bands(n_q, n_k, block_q, block_k, causal, window))
    pairs = sum(b.rows * b.keys for b in bands)  # (query, key) pairs of the computed tiles
    per_tile = sum(b.tiles * (2 * b.rows * d + 2 * b.rows) for b in bands)  # Q_i, dO_i, L_i, D_i per tile
    reads_kv = 2 * d * used_key_columns(bands, n_k, block_k)  # pass 1: K_j, V_j once per column used
    reads_q = 2 * n_q * d + per_tile  # the pre-pass (dO, O), then the tiles
    writes = n_q + n_q * d  # D; dQ = 0 (atomic) or dQ written once (deterministic)
    if atomic:
        dq_traffic = sum(b.tiles * b.rows * d for b in bands)  # dQ_i read, and written back, per tile
        reads_q, writes = reads_q + dq_traffic, writes + dq_traffic
        flops = MATMULS_ATOMIC * matmul_flops(pairs, 1, d)
    else:
        reads_q += sum(2 * b.rows * d + 2 * b.rows for b in bands if b.tiles)  # pass 2: once per Q block used
        reads_kv += sum(2 * b.keys * d for b in bands)  # pass 2: K_j, V_j per tile
        flops = (MATMULS_KV_PASS + MATMULS_DQ_PASS) * matmul_flops(pairs, 1, d)
    return reads_q, reads_kv, writes, 2 * n_k * d, flops
