"""Plain-data recordings of the tiled backward for the Backward view: what each tile computes, where its operands
live, and what the backward costs next to standard attention's.

    backward_schedule   the tiles in the backward's visiting order with the IO model's cumulative HBM traffic after
                        each step, for atomic dQ (FA2 Algorithm 2) or deterministic dQ (a second pass over Q blocks);
                        integer arithmetic, no torch: the tile map draws from it.
    backward_trace      the real kernel (core/backward.py) on small random inputs, tile by tile through its on_tile
                        events: block indices, ranges, the seven operations of the tile (views/backward/data.py),
                        the recomputed P_ij's row sums, the norms of dV_j, dK_j and dQ_i.
    saved_for_backward  why O and L are enough: the bytes the tiled forward keeps against standard attention's P, and
                        how far the recomputed rows of P are from summing to 1 (saved_bytes: the bytes alone).
    dq_comparison       atomic against deterministic dQ: the second pass's extra FLOPs and bytes, with standard
                        attention's backward for scale.
Every result is a frozen dataclass of ints, floats, strings and tuples, so figures and caches can take it.

References: Dao, FlashAttention-2 (2023), Algorithm 2; Dao et al., FlashAttention (2022), Algorithm 3 and Appendix B.
Legend: N sequence length (N_q = N_k), d head dimension, Br = block_q, Bc = block_k, Tr x Tc tiles, H query heads,
H_kv K/V heads.

    tile_ops            the operations of one tile (FA2 Algorithm 2, lines 10-16) with their shapes and where each
                        operand lives; per pass of deterministic dQ. Torch-free.
    recompute_price     the price of recomputation, measured: forward + backward time and exact peak memory of the
                        tiled kernel, naive autograd and SDPA autograd (run_sweep in training mode).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from flashviz._lazy import lazy_import
from flashviz.core.tiling import tile_schedule
from flashviz.core.validate import Window
from flashviz.measure.verdict import Verdict, compare, row_estimate
from flashviz.model.iomodel import io_cost, io_trace_steps
from flashviz.model.iomodel_backward import MATMULS_PER_TILE
from flashviz.model.iosteps import row_bands
from flashviz.vocab import (
    DQ_ATOMIC,
    DQ_DETERMINISTIC,
    DTYPE_BYTES,
    DTYPES,
    NAIVE,
    Q_OUTER,
    SKIPPED,
)

if TYPE_CHECKING:
    import torch

    from flashviz.core.backward import BackwardTileEvent
    from flashviz.masks import MaskMod
else:
    torch = lazy_import("torch")  # backward_trace only: the schedule, the ops and the comparisons are arithmetic


from collections.abc import Callable

from flashviz.limits import LIVE_TIME_BUDGET_S
from flashviz.measure.guards import TIME_BUDGET_STATUS
from flashviz.measure.sweep import run_sweep
from flashviz.model.flops import matmul_flops
from flashviz.model.iomodel_backward import validate_dq_mode
from flashviz.vocab import (
    FLASH2,
    HBM_READ_WRITE,
    HBM_STREAMED,
    OK,
    ON_CHIP_COLUMN,
    ON_CHIP_ROW,
    ON_CHIP_TILE,
    SDPA,
    TRAINING,
)


@dataclass(frozen=True)
class BackwardSchedule:
    """The backward's tiles in visiting order with the IO model's cumulative traffic: what the tile map plays."""

    dq_mode: str  # "atomic" (one pass, Algorithm 2) or "deterministic" (pass 2 over Q blocks builds dQ)
    n: int  # sequence length N (N_q = N_k)
    d: int  # head dimension
    block_q: int  # Br
    block_k: int  # Bc
    causal: bool  # top-left causal mask
    window: Window  # (left, right) sliding window, or None
    heads: int  # H query heads the counters cover (batch 1)
    heads_kv: int  # H_kv K/V heads
    dtype_bytes: int  # bytes per element of the counters
    n_q_blocks: int  # Tr, rows of the grid
    n_k_blocks: int  # Tc, columns of the grid
    passes: tuple[int, ...]  # per step: 1 (outer loop over K/V blocks j) or 2 (outer loop over Q blocks i)
    q_block: tuple[int, ...]  # per step: tile row i
    k_block: tuple[int, ...]  # per step: tile column j
    status: tuple[str, ...]  # per step: "full", "partial" or "skipped"
    hbm_bytes: tuple[int, ...]  # per step: cumulative modelled HBM bytes after it, the pre-pass included
    flops: tuple[int, ...]  # per step: cumulative modelled FLOPs after it
    start_hbm_bytes: int  # the pre-pass D = rowsum(dO * O) (and dQ = 0 when atomic), in bytes
    standard_hbm_bytes: int  # standard attention's backward (FA1 Algorithm 3), in bytes
    standard_flops: int  # standard attention's backward FLOPs

    @property
    def steps(self) -> int:
        return len(self.status)

    def computed_steps(self) -> list[int]:
        """Steps whose tile is loaded and computed, in visiting order (a tile twice with a second pass)."""
        return [s for s, st in enumerate(self.status) if st != SKIPPED]

    def tile_shape(self, step: int) -> tuple[int, int]:
        """(rows, cols) of the tile at a step: Br x Bc, less at a ragged last block row or column.

        Example:
            >>> backward_schedule(10, 2, 4, 4).tile_shape(8)  # i = 2, j = 2: the corner tile, 2 x 2
            (2, 2)
        """
        i, j = self.q_block[step], self.k_block[step]
        return min(self.block_q, self.n - i * self.block_q), min(self.block_k, self.n - j * self.block_k)


def backward_schedule(n: int, d: int, block_q: int, block_k: int, *, causal: bool = False, window: Window = None,
                      dq_mode: str = DQ_ATOMIC, heads: int = 1, heads_kv: int | None = None, dtype_bytes: int = 4,
                      mask_mod: MaskMod | None = None) -> BackwardSchedule:
    """The backward's visiting order with the IO model's counters (flashviz.model.iomodel_backward), no torch.

    Args:
        n: N (N_q = N_k).  d: head dimension.  block_q, block_k: Br, Bc.
        causal, window, mask_mod: the mask; skipped tiles stay in the order (they add nothing).
        dq_mode: "atomic" or "deterministic" (the second pass follows the first: 2 Tr Tc steps).
        heads, heads_kv: H and H_kv for the counters (batch 1).  dtype_bytes: bytes per element.
    Returns:
        BackwardSchedule, one entry per step (the pre-pass is start_hbm_bytes, not a step).

    Example:
        >>> s = backward_schedule(4, 2, 2, 2, causal=True, dq_mode="deterministic")
        >>> s.passes, s.status[:4], s.hbm_bytes[-1] == io_cost("q_outer", 4, 4, 2, 2, 2, causal=True,
        ...                                                   backward=True, dq_mode="deterministic").bytes
        ((1, 1, 1, 1, 2, 2, 2, 2), ('partial', 'full', 'skipped', 'partial'), True)
    """
    kw = {"causal": causal, "window": window, "heads": heads, "heads_kv": heads_kv, "dtype_bytes": dtype_bytes}
    start, *steps = io_trace_steps(Q_OUTER, n, n, d, block_q, block_k, backward=True, dq_mode=dq_mode,
                                   mask_mod=mask_mod, **kw)
    standard = io_cost(NAIVE, n, n, d, block_q, block_k, backward=True, **kw)
    tr, tc = -(-n // block_q), -(-n // block_k)
    return BackwardSchedule(
        dq_mode=dq_mode, n=n, d=d, block_q=block_q, block_k=block_k, causal=causal, window=window, heads=heads,
        heads_kv=heads if heads_kv is None else heads_kv, dtype_bytes=dtype_bytes, n_q_blocks=tr, n_k_blocks=tc,
        passes=tuple(1 if k < tr * tc else 2 for k in range(len(steps))),
        q_block=tuple(s.q_block for s in steps), k_block=tuple(s.k_block for s in steps),
        status=tuple(s.status for s in steps), hbm_bytes=tuple(s.hbm_bytes for s in steps),
        flops=tuple(s.flops for s in steps), start_hbm_bytes=start.hbm_bytes, standard_hbm_bytes=standard.bytes,
        standard_flops=standard.flops)


@dataclass(frozen=True)
class BackwardTileRecord:
    """One computed tile of the real backward (batch 0, head 0), with the model's traffic so far."""

    step: int  # the tile's position in the kv_outer schedule (k_block Tr + q_block)
    q_block: int  # i
    k_block: int  # j
    status: str  # "full" or "partial"
    q_start: int  # first query row
    q_end: int  # one past the last query row
    k_start: int  # first key
    k_end: int  # one past the last key
    ops: tuple[TileOp, ...]  # the seven operations with this tile's shapes and operand places
    hbm_bytes: int  # modelled HBM bytes after this tile, the pre-pass included (atomic dQ, all heads)
    row_sums: tuple[float, ...]  # per row of the tile: sum over the tile's keys of the recomputed P_ij
    row_sums_so_far: tuple[float, ...]  # per row: the same summed over this and the row's earlier tiles (-> 1)
    dv_norm: float  # ||dV_j|| on chip after this tile (K/V head 0)
    dk_norm: float  # ||dK_j|| on chip after this tile (K/V head 0)
    dq_norm: float  # ||dQ_i|| in HBM after this tile's add (query head 0)


@dataclass(frozen=True)
class BackwardTrace:
    """The real backward on random inputs, tile by tile, with the settings it ran at."""

    n: int  # N
    d: int  # head dimension
    block_q: int  # Br
    block_k: int  # Bc
    causal: bool  # top-left causal mask
    window: Window  # sliding window or None
    heads: int  # H (batch 1)
    heads_kv: int  # H_kv
    dtype: str  # input dtype name
    seed: int  # seed of the random q, k, v, dO
    n_q_blocks: int  # Tr
    n_k_blocks: int  # Tc
    tiles: tuple[BackwardTileRecord, ...]  # computed tiles in the backward's visiting order
    row_sum_total: tuple[float, ...]  # per query row: the recomputed P's row sum over all its tiles (1, or 0)
    rows_seeing_keys: int  # query rows that see at least one key (their total must be 1)
    max_row_sum_error: float  # max |row_sum_total - 1| over those rows
    tiled_hbm_bytes: int  # modelled HBM bytes of the whole tiled backward (atomic dQ)
    standard_hbm_bytes: int  # modelled HBM bytes of standard attention's backward (FA1 Algorithm 3)


def random_inputs(n: int, d: int, heads: int, heads_kv: int, dtype: str, seed: int):
    """q, dO (1, H, N, d) and k, v (1, H_kv, N, d), standard normal from one seed, in `dtype`: the inputs every
    recording of the Backward view runs on (CPU)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}.")
    gen = torch.Generator().manual_seed(seed)
    q, dO = (torch.randn(1, heads, n, d, generator=gen) for _ in range(2))
    k, v = (torch.randn(1, heads_kv, n, d, generator=gen) for _ in range(2))
    return tuple(t.to(getattr(torch, dtype)) for t in (q, k, v, dO))


def _records(events: list[BackwardTileEvent], n: int, d: int, hbm_after: dict[int, int]):
    """The events as BackwardTileRecords, and every query row's row sum over all its tiles."""
    total = [0.0] * n
    out = []
    for e in events:
        sums = tuple(float(x) for x in e.row_sums)
        for r, s in enumerate(sums):
            total[e.q_start + r] += s
        out.append(BackwardTileRecord(
            e.step, e.q_block, e.k_block, e.status, e.q_start, e.q_end, e.k_start, e.k_end,
            tile_ops(e.q_end - e.q_start, e.k_end - e.k_start, d), hbm_after[e.step], sums,
            tuple(total[e.q_start:e.q_end]), e.dv_norm, e.dk_norm, e.dq_norm))
    return tuple(out), tuple(total)


def backward_trace(n: int, d: int, block_q: int, block_k: int, *, causal: bool = False, window: Window = None,
                   heads: int = 1, heads_kv: int | None = None, dtype: str = "float32", seed: int = 0,
                   mask_mod: MaskMod | None = None) -> BackwardTrace:
    """Run the real tiled forward and backward (B = 1, CPU) on random inputs and record every backward tile.

    Args:
        n, d: N and the head dimension.  block_q, block_k: Br, Bc.
        causal, window, mask_mod: the mask, as flash_attention_backward.
        heads, heads_kv: H query heads and H_kv K/V heads (GQA when H_kv < H; the records show head 0).
        dtype: the inputs' dtype name (accumulators are fp32, fp64 for float64).  seed: for q, k, v and dO.
    Returns:
        BackwardTrace; its tiles carry the model's cumulative bytes after each tile (atomic dQ, all heads).

    Example:
        >>> tr = backward_trace(16, 8, 4, 4, causal=True)
        >>> len(tr.tiles), tr.max_row_sum_error < 1e-5, tr.tiles[0].row_sums_so_far[0]  # row 0 sees key 0 only
        (10, True, 1.0)
    """
    from flashviz.core.backward import flash_attention_backward  # the kernels (torch): only this function runs them
    from flashviz.core.flash import flash_attention_forward

    heads_kv = heads if heads_kv is None else heads_kv
    q, k, v, dO = random_inputs(n, d, heads, heads_kv, dtype, seed)
    mask = {"causal": causal, "window": window, "mask_mod": mask_mod}
    O, L = flash_attention_forward(q, k, v, block_q=block_q, block_k=block_k, loop_order=Q_OUTER, return_lse=True,
                                   **mask)
    events: list[BackwardTileEvent] = []
    flash_attention_backward(dO, q, k, v, O, L, block_q=block_q, block_k=block_k, on_tile=events.append, **mask)
    kw = {"heads": heads, "heads_kv": heads_kv, "dtype_bytes": DTYPE_BYTES[dtype], "backward": True, **mask}
    hbm_after = {s.step: s.hbm_bytes for s in io_trace_steps(Q_OUTER, n, n, d, block_q, block_k, **kw)}
    tiles, total = _records(events, n, d, hbm_after)
    sees = [math.isfinite(float(x)) for x in L[0, 0]]  # L_i = -inf: row i sees no key
    errors = [abs(t - 1.0) for t, s in zip(total, sees, strict=True) if s]
    kw.pop("mask_mod")
    return BackwardTrace(
        n=n, d=d, block_q=block_q, block_k=block_k, causal=causal, window=window, heads=heads, heads_kv=heads_kv,
        dtype=dtype, seed=seed, n_q_blocks=-(-n // block_q), n_k_blocks=-(-n // block_k), tiles=tiles,
        row_sum_total=total, rows_seeing_keys=len(errors), max_row_sum_error=max(errors, default=0.0),
        tiled_hbm_bytes=io_cost(Q_OUTER, n, n, d, block_q, block_k, mask_mod=mask_mod, **kw).bytes,
        standard_hbm_bytes=io_cost(NAIVE, n, n, d, block_q, block_k, **kw).bytes)


@dataclass(frozen=True)
class SavedForBackward:
    """Why O and L are enough: what each method keeps from the forward for the backward (beyond q, k, v)."""

    n: int  # N
    heads: int  # H (batch 1)
    dtype: str  # the inputs' dtype name
    o_bytes: int  # O: H N d elements in the input dtype
    lse_bytes: int  # L: H N logsumexps in the accumulator dtype (fp32; fp64 for float64)
    p_bytes: int  # standard attention's P: H N^2 elements in the input dtype
    max_row_sum_error: float  # max |sum_j rowsum(P_ij) - 1| over the recomputed rows (the backward's tiles)
    rows_checked: int  # rows that see at least one key

    @property
    def tiled_bytes(self) -> int:
        """What the tiled forward saves for the backward: O and L."""
        return self.o_bytes + self.lse_bytes

    @property
    def p_over_tiled(self) -> float:
        """How many times more standard attention keeps (P) than the tiled forward (O and L)."""
        return self.p_bytes / self.tiled_bytes if self.tiled_bytes else math.inf


def saved_bytes(n: int, d: int, *, heads: int = 1, dtype: str = "float32") -> SavedForBackward:
    """The bytes each method keeps for the backward at N (heads: every (batch, head) pair), without running anything:
    O and L against standard attention's P. No row was checked (rows_checked 0, error NaN).

    Example:
        >>> s = saved_bytes(4096, 64, heads=4)
        >>> s.o_bytes, s.lse_bytes, s.p_bytes, round(s.p_over_tiled, 1)
        (4194304, 65536, 268435456, 63.0)
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}.")
    elem = DTYPE_BYTES[dtype]
    lse = DTYPE_BYTES["float64" if dtype == "float64" else "float32"]  # L is kept in the accumulator dtype
    return SavedForBackward(n, heads, dtype, heads * n * d * elem, heads * n * lse, heads * n * n * elem, math.nan, 0)


def saved_for_backward(trace: BackwardTrace) -> SavedForBackward:
    """The bytes kept for the backward at the trace's N, against standard attention's P, and the row-sum check.

    Example:
        >>> s = saved_for_backward(backward_trace(32, 8, 8, 8, causal=True))
        >>> s.o_bytes, s.lse_bytes, s.p_bytes, s.max_row_sum_error < 1e-5
        (1024, 128, 4096, True)
    """
    kept = saved_bytes(trace.n, trace.d, heads=trace.heads, dtype=trace.dtype)
    return replace(kept, max_row_sum_error=trace.max_row_sum_error, rows_checked=trace.rows_seeing_keys)


@dataclass(frozen=True)
class DqComparison:
    """Atomic dQ (FA2 Algorithm 2) against deterministic dQ (a second pass), modelled, with standard's backward."""

    tiles: int  # computed tiles of one pass
    atomic_matmuls_per_tile: int  # 5
    deterministic_matmuls_per_tile: int  # 7: 4 in pass 1, 3 in pass 2
    atomic_flops: int  # FLOPs of the atomic backward, all heads
    deterministic_flops: int  # FLOPs of the deterministic one
    atomic_bytes: int  # HBM bytes of the atomic backward
    deterministic_bytes: int  # HBM bytes of the deterministic one
    standard_flops: int  # standard attention's backward (FA1 Algorithm 3)
    standard_bytes: int  # its HBM bytes
    max_row_tiles: int  # most computed tiles in one Q block row: the K/V columns that add into one dQ_i
    n: int  # N (N_q = N_k)
    d: int  # head dimension
    block_q: int  # Br
    block_k: int  # Bc
    heads: int  # (batch, head) pairs the totals cover: B H

    @property
    def extra_flops(self) -> int:
        """FLOPs the second pass adds (S_ij and dP_ij recomputed once more per tile)."""
        return self.deterministic_flops - self.atomic_flops

    @property
    def extra_bytes(self) -> int:
        """HBM bytes the deterministic schedule adds (negative where dQ's per-tile round trips cost more)."""
        return self.deterministic_bytes - self.atomic_bytes


def dq_comparison(n: int, d: int, block_q: int, block_k: int, *, causal: bool = False, window: Window = None,
                  batch: int = 1, heads: int = 1, heads_kv: int | None = None, dtype_bytes: int = 4,
                  mask_mod: MaskMod | None = None) -> DqComparison:
    """The deterministic second pass's price in FLOPs and bytes, next to the atomic schedule and standard attention.

    Example:
        >>> c = dq_comparison(1024, 64, 64, 64, causal=True)
        >>> c.deterministic_flops / c.atomic_flops, c.tiles, c.max_row_tiles
        (1.4, 136, 16)
    """
    kw = {"causal": causal, "window": window, "batch": batch, "heads": heads, "heads_kv": heads_kv,
          "dtype_bytes": dtype_bytes, "backward": True}
    atomic, det = (io_cost(Q_OUTER, n, n, d, block_q, block_k, dq_mode=m, mask_mod=mask_mod, **kw)
                   for m in (DQ_ATOMIC, DQ_DETERMINISTIC))
    standard = io_cost(NAIVE, n, n, d, block_q, block_k, **kw)
    if mask_mod is None:  # O(Tr): the computed K blocks of each Q block row form one band
        per_row = [band.tiles for band in row_bands(n, n, block_q, block_k, causal, window)]
    else:
        sched = tile_schedule(n, n, block_q, block_k, causal=causal, window=window, mask_mod=mask_mod, batch=batch,
                              heads=heads)
        per_row = [0] * sched.n_q_blocks
        for t in sched.computed():
            per_row[t.q_block] += 1
    return DqComparison(sum(per_row), MATMULS_PER_TILE[DQ_ATOMIC], MATMULS_PER_TILE[DQ_DETERMINISTIC], atomic.flops,
                        det.flops, atomic.bytes, det.bytes, standard.flops, standard.bytes, max(per_row, default=0),
                        n, d, block_q, block_k, batch * heads)


MATMUL, ELEMENTWISE = "matmul", "elementwise"  # TileOp.kind


@dataclass(frozen=True)
class TileOp:
    """One operation of a backward tile (FA2 Algorithm 2, lines 10-16), for one query head."""

    line: int  # the line of Algorithm 2
    text: str  # the operation, e.g. "S_ij = Q_i K_jᵀ"
    kind: str  # "matmul" or "elementwise"
    result: str  # what it produces, e.g. "S_ij"
    result_place: str  # where the result lives (flashviz.vocab: ON_CHIP_COLUMN, ON_CHIP_TILE, HBM_READ_WRITE)
    operands: tuple[tuple[str, str], ...]  # (operand, where it lives) for each input
    shape: str  # "(Br × d) · (d × Bc) → (Br × Bc)" with this tile's numbers; elementwise: "(Br × Bc)"
    flops: int  # 2 m n k for a matmul; 0 for elementwise work (not counted, as in the forward)


def tile_ops(rows: int, cols: int, d: int, *, dq_mode: str = DQ_ATOMIC, pass_no: int = 1) -> tuple[TileOp, ...]:
    """The operations of one backward tile (rows = Br, cols = Bc of this tile), in Algorithm 2's order: all seven
    with atomic dQ; with deterministic dQ, pass 1 runs them without line 15 (four matmuls) and pass 2 (outer loop
    over Q blocks) recomputes S_ij, P_ij, dP_ij, dS_ij and runs line 15 with Q_i, dO_i, L_i, D_i and dQ_i on chip
    for the row and K_j, V_j streamed (three matmuls).

    Example:
        >>> ops = tile_ops(16, 8, 64)
        >>> [op.result for op in ops], sum(op.kind == "matmul" for op in ops)
        (['S_ij', 'P_ij', 'dV_j', 'dP_ij', 'dS_ij', 'dQ_i', 'dK_j'], 5)
        >>> ops[0].shape, ops[0].flops == 2 * 16 * 8 * 64
        ('(16 × 64) · (64 × 8) → (16 × 8)', True)
        >>> [op.line for op in tile_ops(16, 8, 64, dq_mode="deterministic", pass_no=2)]
        [10, 11, 13, 14, 15]
    """
    if pass_no not in (1, 2) or (validate_dq_mode(dq_mode) == DQ_ATOMIC and pass_no == 2):
        raise ValueError(f"pass_no must be 1, or 2 with dq_mode='deterministic' (its second pass), got {pass_no!r} "
                         f"with dq_mode={dq_mode!r}.")

    def mm(m: int, k: int, n: int) -> tuple[str, int]:
        return f"({m} × {k}) · ({k} × {n}) → ({m} × {n})", matmul_flops(m, n, k)

    second, tile = pass_no == 2, ON_CHIP_TILE
    q_side, kv_side = (ON_CHIP_ROW, HBM_STREAMED) if second else (HBM_STREAMED, ON_CHIP_COLUMN)  # Q_i..D_i; K_j, V_j
    dq_place = ON_CHIP_ROW if second else HBM_READ_WRITE  # pass 1 of deterministic dQ drops the op
    dq_text = "dQ_i += dS_ij K_j " + ("(atomic add)" if dq_mode == DQ_ATOMIC else "(on chip; written once per row)")
    s_shape, s_flops = mm(rows, d, cols)
    ops = (
        TileOp(10, "S_ij = Q_i K_jᵀ (recomputed)", MATMUL, "S_ij", tile, (("Q_i", q_side), ("K_j", kv_side)),
               s_shape, s_flops),
        TileOp(11, "P_ij = exp(S_ij − L_i)", ELEMENTWISE, "P_ij", tile, (("S_ij", tile), ("L_i", q_side)),
               f"({rows} × {cols})", 0),
        TileOp(12, "dV_j += P_ijᵀ dO_i", MATMUL, "dV_j", ON_CHIP_COLUMN, (("P_ij", tile), ("dO_i", q_side)),
               *mm(cols, rows, d)),
        TileOp(13, "dP_ij = dO_i V_jᵀ", MATMUL, "dP_ij", tile, (("dO_i", q_side), ("V_j", kv_side)),
               *mm(rows, d, cols)),
        TileOp(14, "dS_ij = P_ij ∘ (dP_ij − D_i)", ELEMENTWISE, "dS_ij", tile,
               (("P_ij", tile), ("dP_ij", tile), ("D_i", q_side)), f"({rows} × {cols})", 0),
        TileOp(15, dq_text, MATMUL, "dQ_i", dq_place,
               (("dS_ij", tile), ("K_j", kv_side), ("dQ_i", dq_place)), *mm(rows, cols, d)),
        TileOp(16, "dK_j += dS_ijᵀ Q_i", MATMUL, "dK_j", ON_CHIP_COLUMN, (("dS_ij", tile), ("Q_i", q_side)),
               *mm(cols, rows, d)),
    )
    if dq_mode == DQ_ATOMIC:
        return ops
    keep = (10, 11, 13, 14, 15) if second else (10, 11, 12, 13, 14, 16)
    return tuple(op for op in ops if op.line in keep)


PRICE_IMPLS = (FLASH2, NAIVE, SDPA)  # the tiled kernel (FA2 forward + Algorithm 2), then the two references


PRICE_LABELS = {FLASH2: "tiled (recomputes P)", NAIVE: "naive autograd (stores P)", SDPA: "SDPA autograd"}


@dataclass(frozen=True)
class RecomputePrice:
    """Measured forward + backward of each implementation at one setting (one entry per impl, in impls' order)."""

    impls: tuple[str, ...]  # "flash2" (the tiled kernel), "naive", "sdpa"
    labels: tuple[str, ...]  # their names for people
    time_s: tuple[float, ...]  # median seconds of one forward + backward (NaN: not run)
    time_iqr_s: tuple[float, ...]  # interquartile range of the timed calls, seconds
    peak_bytes: tuple[float, ...]  # exact peak bytes above the start, outputs and gradients included (NaN: not run)
    status: tuple[str, ...]  # "ok" or "not run: <why>"
    n: int  # N
    d: int  # head dimension
    batch: int  # B
    heads: int  # H
    block_q: int  # Br of the tiled kernel
    block_k: int  # Bc
    causal: bool  # top-left causal mask
    window: Window  # sliding window or None
    dtype: str  # input dtype name
    device: str  # where it ran
    threads: int  # torch intra-op threads
    repeats: int  # timed calls per implementation
    time_lo_s: tuple[float, ...] = ()  # low end of each median's 95% interval (NaN: not run; empty: not recorded)
    time_hi_s: tuple[float, ...] = ()  # high end
    timed: tuple[int, ...] = ()  # timed calls behind each median (0: not run)
    set_aside: tuple[int, ...] = ()  # timed calls set aside as disturbed, per implementation (empty: not recorded)
    threads_asked: int = 0  # the threads asked for (above threads: the timing worker capped them; 0: as threads)

    def time_verdict(self) -> Verdict | None:
        """Naive autograd's time against the tiled kernel's, by the verdict rule (flashviz.measure.verdict: a faster
        side only where the two medians' 95% intervals separate); None where either did not run or has no interval.
        Its ratio is naive / tiled: above 1, the tiled kernel is faster."""
        if not (self.time_lo_s and self.time_hi_s and self.timed):
            return None
        sides = []
        for impl in (NAIVE, self.impls[0]):
            i = self.impls.index(impl)
            sides.append(row_estimate({"status": self.status[i], "time_s": self.time_s[i],
                                       "time_lo_s": self.time_lo_s[i], "time_hi_s": self.time_hi_s[i],
                                       "repeats": self.timed[i], "threads": self.threads,
                                       "threads_asked": self.threads_asked,
                                       "set_aside": self.set_aside[i] if self.set_aside else None}))
        if any(e is None for e in sides):
            return None
        return compare(sides[0], sides[1], ("naive autograd", "the tiled kernel"))

    @property
    def cut_short(self) -> bool:
        """Whether the time budget stopped some implementation (its status says so): measure again to get it."""
        return any(status.startswith(TIME_BUDGET_STATUS) for status in self.status)

    def ratio(self, field: str, impl: str, against: str = FLASH2) -> float:
        """field ("time_s" or "peak_bytes") of impl divided by against's: e.g. how many times more memory naive
        needs than the tiled kernel. NaN when either did not run."""
        values = dict(zip(self.impls, getattr(self, field), strict=True))
        a, b = values[impl], values[against]
        return a / b if b and not (math.isnan(a) or math.isnan(b)) else math.nan


def price_run(n: int, d: int, batch: int, heads: int, br: int, bc: int, causal: bool, window: Window, dtype: str,
              device: str, threads: int, reps: int, *, progress: Callable | None = None):
    """recompute_price within the dashboard's time budget: the view's timed run."""
    return recompute_price(n, d, batch=batch, heads=heads, block_q=br, block_k=bc, causal=causal, window=window,
                           dtype=dtype, device=device, repeats=reps, threads=threads, progress=progress,
                           time_budget_s=LIVE_TIME_BUDGET_S)


def recompute_price(n: int, d: int, *, batch: int = 1, heads: int = 1, block_q: int = 64, block_k: int = 64,
                    causal: bool = False, window: Window = None, dtype: str = "float32", device: str = "cpu",
                    repeats: int = 5, warmup: int = 1, threads: int | None = None, seed: int = 0,
                    memory_budget_bytes: int | None = None, progress: Callable | None = None,
                    time_budget_s: float | None = None) -> RecomputePrice:
    """Time and peak memory of forward + backward for the tiled kernel, naive autograd and SDPA autograd.

    Args:
        n, d: N and the head dimension.  batch, heads: B and H.  block_q, block_k: the tiled kernel's Br, Bc.
        causal, window: the mask.  dtype: the inputs' dtype name.  device: "cpu" or "cuda".
        repeats, warmup: timed and untimed calls per implementation.  threads: torch intra-op threads (None: keep).
        seed: of the random inputs.  memory_budget_bytes: as run_sweep's (naive's N x N matrices are checked first).
        progress, time_budget_s: as run_sweep's: progress(done, total, label) between timed calls (raise from it to
            cancel); implementations left when the budget runs out are "not run".
    Returns:
        RecomputePrice; use .ratio("time_s", "naive") or .ratio("peak_bytes", "sdpa") to compare.

    Example:
        >>> p = recompute_price(256, 16, block_q=64, block_k=64, causal=True, repeats=1, threads=1)
        >>> p.impls, p.status, p.ratio("peak_bytes", "naive") > 1  # naive keeps P, dP and dS (N x N each)
        (('flash2', 'naive', 'sdpa'), ('ok', 'ok', 'ok'), True)
    """
    df = run_sweep([n], d=d, block_q=block_q, block_k=block_k, causal=causal, window=window, impls=PRICE_IMPLS,
                   batch=batch, heads=heads, dtype=dtype, repeats=repeats, warmup=warmup, threads=threads,
                   device=device, mode=TRAINING, memory_budget_bytes=memory_budget_bytes, seed=seed,
                   progress=progress, time_budget_s=time_budget_s)
    rows = df.set_index("impl").loc[list(PRICE_IMPLS)]
    ran = rows["status"] == OK
    return RecomputePrice(
        impls=PRICE_IMPLS, labels=tuple(PRICE_LABELS[i] for i in PRICE_IMPLS),
        time_s=tuple(float(t) if ok else math.nan for t, ok in zip(rows["time_s"], ran, strict=True)),
        time_iqr_s=tuple(float(t) if ok else math.nan for t, ok in zip(rows["time_iqr_s"], ran, strict=True)),
        peak_bytes=tuple(float(b) if ok else math.nan for b, ok in zip(rows["peak_bytes"], ran, strict=True)),
        status=tuple(str(s) for s in rows["status"]), n=n, d=d, batch=batch, heads=heads, block_q=block_q,
        block_k=block_k, causal=causal, window=window, dtype=str(dtype).removeprefix("torch."),
        device=str(rows["device"].iloc[0]), threads=int(rows["threads"].iloc[0]), repeats=repeats,
        time_lo_s=tuple(float(t) if ok else math.nan for t, ok in zip(rows["time_lo_s"], ran, strict=True)),
        time_hi_s=tuple(float(t) if ok else math.nan for t, ok in zip(rows["time_hi_s"], ran, strict=True)),
        timed=tuple(int(r) if ok else 0 for r, ok in zip(rows["repeats"], ran, strict=True)),
        set_aside=tuple(int(a) if ok else 0 for a, ok in zip(rows["set_aside"], ran, strict=True)),
        threads_asked=int(rows["threads_asked"].iloc[0]))

