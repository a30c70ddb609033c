"""The operations of one tile of the tiled backward (FlashAttention-2, Algorithm 2, lines 10-16) with their shapes,
FLOPs and where each operand lives, for the Backward view's table (figures/backward.py tile_ops_html) and the
records of backward_trace (measure/backward_trace.py). Atomic dQ runs all seven on every tile; deterministic dQ
splits them into two passes: the K/V pass without line 15, and a second pass over Q blocks that recomputes S_ij,
P_ij, dP_ij, dS_ij and builds dQ_i on chip. Pure arithmetic: no torch.

References: Dao, FlashAttention-2 (2023), Algorithm 2.
Legend: Br = block_q rows, Bc = block_k keys of the tile, d head dimension.
"""

from __future__ import annotations

from dataclasses import dataclass

from flashviz.model.flops import matmul_flops
from flashviz.model.iomodel_backward import validate_dq_mode
from flashviz.vocab import DQ_ATOMIC, HBM_READ_WRITE, HBM_STREAMED, ON_CHIP_COLUMN, ON_CHIP_ROW, ON_CHIP_TILE

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
