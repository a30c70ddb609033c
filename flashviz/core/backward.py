"""Tiled FlashAttention backward by recomputation, and `flash_attention`, the differentiable entry point.

The backward generalises fa2_backward in flashviz/core/algorithms.py (read that first: Algorithm 2, plain) with masks,
grouped-query heads, score_mod and on_tile.

References:
    FlashAttention-2 (Dao, 2023), Algorithm 2: the backward pass. The forward saves only O and the logsumexp
        L_i = m_i + log l_i, never P. The backward recomputes each tile's probabilities P_ij = exp(S_ij - L_i) from
        Q_i, K_j and L_i, so no N x N matrix ever exists. With D_i = rowsum(dO_i * O_i):
            dV_j += P_ij^T dO_i        dP_ij = dO_i V_j^T        dS_ij = P_ij * (dP_ij - D_i)
            dQ_i += scale dS_ij K_j    dK_j += scale dS_ij^T Q_i
        The outer loop runs over K/V blocks j ("kv_outer"), so dK_j and dV_j stay on chip for a whole column of tiles
        and are written once; dQ_i is accumulated in HBM (atomic adds on a GPU).
        Line 9 of the algorithm also lists O_i among each tile's loads; with D precomputed (line 4) no tile needs it,
        and neither this kernel nor flash-attn's reads it.
    FlashAttention (Dao et al., 2022), Appendix B.2: the same gradient derivation, in FA1's notation.

Legend: B batch, H query heads, H_kv key/value heads, G = H / H_kv, N_q / N_k query / key lengths, d head
dimension, Br = block_q, Bc = block_k.
As in flash.py, batch and K/V heads are merged into one axis BH_kv = B * H_kv inside the kernel and the G query heads
of a group are folded into the rows (flash.group_rows), so every tile operation is one batched matmul over all
groups. With grouped-query attention, dK_j += scale dS_ij^T Q_i contracts over the Br G rows of the tile: the sum
over the G query heads that share K/V head h_kv happens inside the matmul. Only tiles that tile_schedule marks as
computed are ever loaded; partial tiles are masked. The largest temporary is one (BH_kv, Br G, Bc) tile: memory
stays O(N d).

on_tile: with a callback, the kernel reports a BackwardTileEvent after every computed tile, in its visiting order
(the computed tiles of tile_schedule(..., loop_order="kv_outer")): the tile, the recomputed P_ij's row sums and the
norms of the dK_j, dV_j accumulators and of dQ_i, for batch 0 and head 0. The event only reads the kernel's state, so
the gradients are bit for bit those of a call without it; without one the only per-tile cost is a test of None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from flashviz.core.flash import build_schedule, group_rows, tiled_forward, ungroup_rows
from flashviz.core.softmax import LOG2_E, NEG_INF
from flashviz.core.tilemask import TileMasks, mask_tile
from flashviz.core.tilemods import TileScoreMod
from flashviz.core.tiling import Tile, TileSchedule
from flashviz.core.validate import AttentionConfig, Window, tiled_config
from flashviz.masks import MaskMod, ScoreMod
from flashviz.vocab import KV_OUTER, PARTIAL, Q_OUTER

DOUBLE_BACKWARD_MESSAGE = (
    "flash_attention supports first-order gradients only: its backward is the hand-written tiled kernel of "
    "FlashAttention-2 Algorithm 2, which is not itself differentiable, so create_graph=True (double backward, "
    "gradgradcheck, Hessian-vector products, gradient penalties) cannot go through it. "
    "Fix: call backward without create_graph, or use naive_attention where you need higher-order gradients."
)


@dataclass(frozen=True)
class BackwardTileEvent:
    """What the backward reports after computing one tile (FA2 Algorithm 2, lines 10-16), for teaching: the
    recomputed probabilities and the gradients as they accumulate. Tensors and norms are batch 0's, head 0's."""

    step: int  # the tile's position in tile_schedule(..., loop_order="kv_outer"): k_block Tr + q_block
    q_block: int  # i: query block index (the inner loop)
    k_block: int  # j: key/value block index (the outer loop)
    status: str  # "full" or "partial" (skipped tiles are never computed, so never reported)
    q_start: int  # first query row of the tile
    q_end: int  # one past the last query row
    k_start: int  # first key column of the tile
    k_end: int  # one past the last key column
    row_sums: torch.Tensor  # (q_end - q_start,) sum over the tile's keys of the recomputed P_ij = exp(S_ij - L_i),
    #                         query head 0, in the accumulator dtype on CPU. Over all k blocks a row's sums add up to
    #                         1 (0 for a row that sees no key): L_i is the whole row's logsumexp. (0,) when B H = 0
    dv_norm: float  # Frobenius norm of the on-chip accumulator dV_j after this tile (K/V head 0: its group's heads)
    dk_norm: float  # Frobenius norm of the on-chip accumulator dK_j after this tile (K/V head 0)
    dq_norm: float  # Frobenius norm of dQ_i in HBM after this tile's (atomic) add, query head 0


BackwardTileCallback = Callable[[BackwardTileEvent], None]


def _emit(on_tile: BackwardTileCallback, t: Tile, step: int, P_ij: torch.Tensor, dK_j: torch.Tensor,
          dV_j: torch.Tensor, dQ_i: torch.Tensor, G: int) -> None:
    """Report a computed tile for batch 0, head 0, reading (never writing) the kernel's state.

    P_ij: (BH_kv, Br G, Bc) and dQ_i: (BH_kv, Br G, d) in group_rows' layout (query head 0 is every G-th row of group
    0); dK_j, dV_j: (BH_kv, Bc, d).
    """
    if P_ij.shape[0] == 0:  # B * H = 0: there is no batch 0, head 0 to report
        row_sums, norms = P_ij.new_empty(0).cpu(), (0.0, 0.0, 0.0)
    else:
        row_sums = P_ij[0, ::G].sum(dim=-1).cpu()  # (Br,) a new tensor: the tile's P_ij stays untouched
        norms = tuple(float(torch.linalg.vector_norm(x)) for x in (dV_j[0], dK_j[0], dQ_i[0, ::G]))
    on_tile(BackwardTileEvent(step, t.q_block, t.k_block, t.status, t.q_start, t.q_end, t.k_start, t.k_end,
                              row_sums, *norms))


def _row_statistics(O: torch.Tensor, dO: torch.Tensor, L: torch.Tensor, Br: int,
                    load) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-row constants of Algorithm 2: D = rowsum(dO * O) and L in log2 units, both (BH, N_q, 1).

    O, dO: (BH, N_q, d) in the input dtype; L: (BH, N_q) natural-log logsumexp in the accumulator dtype.
    """
    BH, n_q, _ = O.shape
    # -- D_i = rowsum(dO_i * O_i), block by block: no (BH, N_q, d) temporary (read 2 N_q d, write N_q)
    D = torch.empty(BH, n_q, 1, dtype=L.dtype, device=O.device)  # (BH, N_q, 1)
    for dO_i, O_i, D_i in zip(dO.split(Br, dim=1), O.split(Br, dim=1), D.split(Br, dim=1), strict=True):
        torch.sum(load(dO_i) * load(O_i), dim=-1, keepdim=True, out=D_i)  # (BH, Br, d) -> (BH, Br, 1)
    # -- -L_i in log2 units; rows that see no key (L_i = -inf) get -inf so that P_ij = exp2(-inf) = 0, never NaN
    neg_L2 = (L * -LOG2_E).unsqueeze(-1)  # (BH, N_q, 1)
    neg_L2.masked_fill_(torch.isposinf(neg_L2), NEG_INF)
    return D, neg_L2


def _probabilities(Q_i: torch.Tensor, K_jT: torch.Tensor, neg_L2_i: torch.Tensor, t: Tile, masks: TileMasks,
                   score: TileScoreMod | None, scale: float, G: int) -> tuple[torch.Tensor, Callable | None]:
    """Recompute P_ij = exp(S_ij - L_i) for one tile (BH_kv, Br G, Bc), with the score_mod's vjp when there is one.

    S_ij = scale Q_i K_j^T is held as S_ij - L_i in log2 units. Without a score_mod, baddbmm applies the scale and
    subtracts L_i inside the matmul, one pass over the tile instead of three (bmm, mul_, sub_: 12% slower per tile).
    With one, the natural scores go through the score_mod (recording its graph for the vjp) before the log2 factor.
    """
    vjp = None
    if score is None:
        S_ij = torch.baddbmm(neg_L2_i, Q_i, K_jT, alpha=scale * LOG2_E)  # (BH_kv, Br G, d) x (BH_kv, d, Bc)
    else:
        S_nat = torch.bmm(Q_i, K_jT).mul_(scale)  # (BH_kv, Br G, Bc) natural scores
        S_ij, vjp = score.differentiable(S_nat, t)  # score_mod(S_nat) log2(e)
        S_ij.add_(neg_L2_i)  # - L_i log2(e)
    if t.status == PARTIAL:
        mask_tile(S_ij, masks.hidden(t), G)
    return S_ij.exp2_(), vjp  # P_ij in S_ij's storage; masked entries -> 0


def _columns(schedule: TileSchedule):
    """The computed tiles of each K/V block column j, in any schedule's loop order (the forward's is reused)."""
    for j in range(schedule.n_k_blocks):
        yield [t for t in (schedule.tile(i, j, step=0) for i in range(schedule.n_q_blocks)) if t.computed]


def _backward_kv_outer(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, O: torch.Tensor, dO: torch.Tensor,
                       L: torch.Tensor, schedule: TileSchedule, c: AttentionConfig, score: TileScoreMod | None,
                       on_tile: BackwardTileCallback | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FlashAttention-2, Algorithm 2, outer loop over K/V blocks.

    q, O, dO: (BH_kv, N_q G, d) in group_rows' layout; k, v: (BH_kv, N_k, d), in the input dtype; L: (BH_kv, N_q G)
    in `acc`. Returns dQ (BH_kv, N_q G, d), dK, dV (BH_kv, N_k, d) (summed over each group) in `acc`. on_tile gets a
    BackwardTileEvent after every computed tile.

    As in the forward (flash.py), the exponent is taken in base 2: S_ij and L_i are carried in log2 units
    (times log2(e)), so P_ij = exp2(S_ij log2(e) - L_i log2(e)) = exp(S_ij - L_i), and exp2 is ~3x cheaper than exp.
    """
    BH, n_rows, d = q.shape  # BH = BH_kv, n_rows = N_q G
    acc, G, scale = c.acc, c.group, c.scale
    masks = TileMasks(schedule, q.device)  # element masks of partial tiles
    load = (lambda x: x) if q.dtype == acc else (lambda x: x.to(acc))  # a tile "load": fp16/bf16 -> fp32

    # Row blocks i as views, sliced once rather than once per tile (torch.split makes all Tr views in one call).
    # A block past N is one block of N rows (and split() needs int64); each block holds its Br queries in G heads.
    Br = min(schedule.block_q, max(schedule.n_q, 1)) * G
    D, neg_L2 = _row_statistics(O, dO, L, Br, load)  # (BH_kv, N_q G, 1) each
    dQ = torch.zeros(BH, n_rows, d, dtype=acc, device=q.device)  # (BH_kv, N_q G, d) in HBM, accumulated per tile
    Q_blocks, dO_blocks, dQ_blocks = q.split(Br, dim=1), dO.split(Br, dim=1), dQ.split(Br, dim=1)  # (BH_kv, Br G, d)
    D_blocks, neg_L2_blocks = D.split(Br, dim=1), neg_L2.split(Br, dim=1)  # (BH_kv, Br G, 1) views

    dK = torch.zeros(BH, k.shape[1], d, dtype=acc, device=q.device)  # (BH_kv, N_k, d)
    dV = torch.zeros_like(dK)  # (BH_kv, N_k, d)
    for tiles in _columns(schedule):  # outer loop: K/V block j
        if not tiles:
            continue  # no query sees these keys: K_j, V_j are never loaded, dK_j = dV_j = 0
        cols = slice(tiles[0].k_start, tiles[0].k_end)
        K_j, V_j = load(k[:, cols]), load(v[:, cols])  # (BH_kv, Bc, d) each; read 2 Bc d, once per group
        K_jT, V_jT = K_j.transpose(1, 2), V_j.transpose(1, 2)  # (BH_kv, d, Bc) views
        dK_j, dV_j = dK[:, cols], dV[:, cols]  # (BH_kv, Bc, d) accumulators, on chip for the whole column
        for t in tiles:  # inner loop: Q block i
            i = t.q_block
            Q_i, dO_i = load(Q_blocks[i]), load(dO_blocks[i])  # (BH_kv, Br G, d) each; read 2 Br d (+ L_i, D_i)
            # -- S_ij = scale Q_i K_j^T (score_mod, mask) and P_ij = exp(S_ij - L_i); masked entries -> 0
            P_ij, vjp = _probabilities(Q_i, K_jT, neg_L2_blocks[i], t, masks, score, scale, G)  # (BH_kv, Br G, Bc)
            # -- dV_j += P_ij^T dO_i, summed over the Br rows of all G heads of the group
            dV_j.baddbmm_(P_ij.transpose(1, 2), dO_i)  # (BH_kv, Bc, Br G) x (BH_kv, Br G, d) -> (BH_kv, Bc, d)
            # -- dP_ij = dO_i V_j^T
            dP_ij = torch.bmm(dO_i, V_jT)  # (BH_kv, Br G, d) x (BH_kv, d, Bc) -> (BH_kv, Br G, Bc)
            # -- dS_ij = P_ij * (dP_ij - D_i), in dP_ij's storage
            dS_ij = dP_ij.sub_(D_blocks[i]).mul_(P_ij)  # (BH_kv, Br G, Bc)
            if vjp is not None:  # through the score_mod: dS_ij is with respect to the modified score
                dS_ij = vjp(dS_ij)  # (BH_kv, Br G, Bc) with respect to scale q.k
            # -- dQ_i += scale dS_ij K_j (write Br d); dK_j += scale dS_ij^T Q_i, summed over the group
            dQ_blocks[i].baddbmm_(dS_ij, K_j, alpha=scale)  # (BH_kv, Br G, Bc) x (BH_kv, Bc, d) -> (BH_kv, Br G, d)
            dK_j.baddbmm_(dS_ij.transpose(1, 2), Q_i, alpha=scale)  # (BH_kv, Bc, Br G) x (BH_kv, Br G, d)
            if on_tile is not None:  # step: the tile's place in the kv_outer schedule, whatever order `schedule` has
                _emit(on_tile, t, t.k_block * schedule.n_q_blocks + i, P_ij, dK_j, dV_j, dQ_blocks[i], G)
        # dK_j, dV_j were views into dK, dV: the column's single write of 2 Bc d happened in place
    return dQ, dK, dV


def tiled_backward(dO: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, O: torch.Tensor,
                   L: torch.Tensor, config: AttentionConfig, schedule: TileSchedule | None = None,
                   on_tile: BackwardTileCallback | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The tiled backward for an already validated config (see tiled_config); no argument is checked again.

    Args:
        dO, q, O: (B, H, N_q, d).  k, v: (B, H_kv, N_k, d).  L: (B, H, N_q) logsumexp.  config: from tiled_config.
        schedule: the forward's tile schedule (any loop order), reused rather than classified again; None builds it.
        on_tile: as in flash_attention_backward.
    Returns:
        (dq, dk, dv), shaped and typed like q, k, v.

    Example:
        >>> q = k = v = torch.randn(1, 2, 10, 4)
        >>> cfg = tiled_config(q, k, v, block_size=4, loop_order="q_outer")
        >>> O, L = tiled_forward(q, k, v, cfg)
        >>> [g.shape[2] for g in tiled_backward(torch.ones_like(O), q, k, v, O, L, cfg)]
        [10, 10, 10]
    """
    c = config
    BH_kv = c.B * c.H_kv  # batch and K/V heads merged: one batched matmul per tile over all groups
    # Algorithm 2 visits K/V block columns whatever order the forward ran in; the statuses are the same
    schedule = build_schedule(c, KV_OUTER, q.device) if schedule is None else schedule
    score = None if c.score_mod is None else TileScoreMod(c.score_mod, c.B, c.H, c.H_kv, q.device)
    dQ, dK, dV = _backward_kv_outer(group_rows(q, c.H_kv), k.reshape(BH_kv, c.n_k, c.d),
                                    v.reshape(BH_kv, c.n_k, c.d), group_rows(O, c.H_kv),
                                    group_rows(dO.contiguous(), c.H_kv), group_rows(L, c.H_kv).to(c.acc), schedule,
                                    c, score, on_tile)
    return (ungroup_rows(dQ, c.B, c.H, c.H_kv).to(q.dtype), dK.view(c.B, c.H_kv, c.n_k, c.d).to(k.dtype),
            dV.view(c.B, c.H_kv, c.n_k, c.d).to(v.dtype))


def _validate_saved(q: torch.Tensor, O: torch.Tensor, dO: torch.Tensor, L: torch.Tensor) -> None:
    """Check that O, dO have q's shape and L is (B, H, N_q), with a message that says how to get them."""
    for name, t in (("O", O), ("dO", dO)):
        if not isinstance(t, torch.Tensor) or t.shape != q.shape or t.device != q.device:
            got = f"shape {tuple(t.shape)} on {t.device}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(
                f"{name} must be a tensor of q's shape {tuple(q.shape)} on {q.device}, got {got}. "
                "O is the forward output and dO the gradient of the loss with respect to it."
            )
    if not isinstance(L, torch.Tensor) or L.shape != q.shape[:3]:
        got = f"shape {tuple(L.shape)}" if isinstance(L, torch.Tensor) else type(L).__name__
        raise ValueError(
            f"L must be the logsumexp of shape (B, H, N_q) = {tuple(q.shape[:3])}, got {got}. "
            "Get it from flash_attention_forward(..., return_lse=True)."
        )


def flash_attention_backward(
    dO: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    O: torch.Tensor,
    L: torch.Tensor,
    block_size: int = 64,
    *,
    block_q: int | None = None,
    block_k: int | None = None,
    causal: bool = False,
    window: Window = None,
    scale: float | None = None,
    mask_mod: MaskMod | None = None,
    score_mod: ScoreMod | None = None,
    on_tile: BackwardTileCallback | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of attention by tiled recomputation (FlashAttention-2, Algorithm 2); no N_q x N_k tensor is built.

    Args:
        dO: (B, H, N_q, d) gradient of the loss with respect to the output O.
        q: (B, H, N_q, d) queries.  k: (B, H_kv, N_k, d) keys.  v: (B, H_kv, N_k, d) values, H_kv dividing H.
        O: (B, H, N_q, d) forward output.  L: (B, H, N_q) logsumexp from the forward (-inf for rows that see no key).
        block_size, block_q, block_k, causal, window, scale, mask_mod, score_mod: as in flash_attention_forward;
            they must match the forward that produced O and L.
        on_tile: called once per computed tile, in the backward's visiting order (outer loop over K/V blocks j, inner
            over Q blocks i: the computed tiles of tile_schedule(..., loop_order="kv_outer")), with a
            BackwardTileEvent: the tile, its recomputed P_ij's row sums, and the norms of dV_j, dK_j (on chip for
            the column) and dQ_i (in HBM) after the tile, for batch 0 and head 0. The gradients are identical with
            and without it.
    Returns:
        (dq, dk, dv), shaped and typed like q, k, v (fp32 accumulation for fp16/bf16, fp64 stays fp64).

    Example:
        >>> from flashviz.core.flash import flash_attention_forward
        >>> q = k = v = torch.randn(1, 2, 100, 16)
        >>> O, L = flash_attention_forward(q, k, v, 32, causal=True, loop_order="q_outer", return_lse=True)
        >>> dq, dk, dv = flash_attention_backward(torch.ones_like(O), q, k, v, O, L, 32, causal=True)
        >>> dq.shape
        torch.Size([1, 2, 100, 16])
        >>> events = []
        >>> _ = flash_attention_backward(torch.ones_like(O), q, k, v, O, L, 32, causal=True, on_tile=events.append)
        >>> [(e.q_block, e.k_block) for e in events][:5]  # column j = 0 first: every Q block sees key block 0
        [(0, 0), (1, 0), (2, 0), (3, 0), (1, 1)]
    """
    config = tiled_config(q, k, v, block_size=block_size, block_q=block_q, block_k=block_k, causal=causal,
                          window=window, scale=scale, mask_mod=mask_mod, score_mod=score_mod)
    _validate_saved(q, O, dO, L)
    if on_tile is not None and not callable(on_tile):
        raise TypeError(f"on_tile must be a callable taking a BackwardTileEvent (e.g. events.append), or None, got "
                        f"{type(on_tile).__name__}. It is called once per computed tile of the backward.")
    return tiled_backward(dO, q, k, v, O, L, config, on_tile=on_tile)


class _FlashAttention(torch.autograd.Function):
    """Forward: the tiled forward in either loop order, saving q, k, v, O and L only. Backward: FA2 Algorithm 2."""

    @staticmethod
    def forward(ctx, q, k, v, config: AttentionConfig):
        schedule = build_schedule(config, config.loop_order, q.device)  # classified once, forward and backward
        O, L = tiled_forward(q, k, v, config, schedule=schedule)
        ctx.save_for_backward(q, k, v, O, L)  # O(N d): never P
        ctx.config, ctx.schedule = config, schedule
        return O

    @staticmethod
    def backward(ctx, dO):
        if torch.is_grad_enabled():  # the engine runs backward in grad mode only for create_graph=True
            raise RuntimeError(DOUBLE_BACKWARD_MESSAGE)
        q, k, v, O, L = ctx.saved_tensors
        dq, dk, dv = tiled_backward(dO, q, k, v, O, L, ctx.config, ctx.schedule)
        return dq, dk, dv, None


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    block_size: int = 64,
    block_q: int | None = None,
    block_k: int | None = None,
    causal: bool = False,
    window: Window = None,
    scale: float | None = None,
    loop_order: str = Q_OUTER,
    mask_mod: MaskMod | None = None,
    score_mod: ScoreMod | None = None,
) -> torch.Tensor:
    """Differentiable tiled attention: a tiled forward that saves only O and L, FA2 backward by recomputation.

    Neither the forward nor the backward ever holds an N_q x N_k tensor, so a training step needs O(N d) memory.
    Only first-order gradients are supported: backward with create_graph=True raises a RuntimeError.

    Args:
        q: (B, H, N_q, d) queries.  k: (B, H_kv, N_k, d) keys.  v: (B, H_kv, N_k, d) values. Same dtype and device.
            H_kv dividing H is grouped-query attention (as SDPA's enable_gqa=True; 1 = multi-query): K/V are never
            copied per query head, and dk, dv sum the gradients of the query heads that share them.
        block_size: tile size used for both Br and Bc unless block_q / block_k are given.
        block_q: Br, query rows per tile.  block_k: Bc, key columns per tile.
        causal: top-left causal mask (query i sees keys j <= i), as SDPA's is_causal.
        window: (left, right) sliding window: query i sees keys i-left..i+right; None on a side = unbounded.
        scale: softmax scale, default 1/sqrt(d).
        loop_order: the forward's loop order, "q_outer" (FlashAttention-2, default) or "kv_outer" (FlashAttention-1);
            both save the same O and L, and the backward is FlashAttention-2's Algorithm 2 either way.
            The default here is "q_outer"; flash_attention_forward's (the forward alone) is "kv_outer".
        mask_mod, score_mod: FlexAttention's, as in flash_attention_forward. The backward differentiates the
            score_mod by autograd on each tile's scores, so q, k and v get its gradient too.
    Returns:
        O of shape (B, H, N_q, d) in q's dtype; rows that see no key are zeros and get zero gradients.

    Example:
        >>> q, k, v = (torch.randn(1, 2, 100, 16, requires_grad=True) for _ in range(3))
        >>> flash_attention(q, k, v, block_size=32, causal=True).sum().backward()
        >>> q.grad.shape
        torch.Size([1, 2, 100, 16])
    """
    config = tiled_config(q, k, v, block_size=block_size, block_q=block_q, block_k=block_k, causal=causal,
                          window=window, scale=scale, loop_order=loop_order, mask_mod=mask_mod, score_mod=score_mod)
    return _FlashAttention.apply(q, k, v, config)
