"""Tiled FlashAttention forward with online softmax, in both loop orders.

It generalises flashviz/core/algorithms.py (read that first: the papers' two forwards, plain) with masks, grouped-query
heads, score_mod, the numerics options and on_tile.

References:
    FlashAttention (Dao et al., 2022), Algorithm 1: the outer loop runs over K/V blocks j, the inner loop over Q blocks
        i; O_i, l_i, m_i live in HBM and are rescaled and written back after every tile ("kv_outer").
    FlashAttention-2 (Dao, 2023), Algorithm 1: the outer loop runs over Q blocks i; the unnormalised accumulator stays
        on chip, the division by l_i happens once at the end, and only the logsumexp L_i = m_i + log l_i is saved
        ("q_outer").

Legend: B batch, H query heads, H_kv key/value heads, G = H / H_kv query heads per K/V head, N_q / N_k query / key
lengths, d head dimension, Br = block_q, Bc = block_k.
Grouped-query attention (GQA; MQA when H_kv = 1; plain multi-head when G = 1) shares each K/V head among G query
heads. Inside the kernels the batch and K/V-head axes are merged into one axis BH_kv = B * H_kv, and the G query
heads of a group are folded into the rows: q becomes (BH_kv, N_q G, d), row r * G + g holding query r of head g of
the group (`group_rows`). A Q block i is then the Br G consecutive rows of its Br queries in all G heads, and every
tile operation is one batched matmul over all groups, (BH_kv, Br G, d) x (BH_kv, d, Bc): K_j and V_j are read once
per tile for the whole group, never copied per query head. For G = 1 the fold is a free view.
As in the FlashAttention-2 and Triton kernels, the softmax runs in base 2: Q is pre-scaled by scale * log2(e), so
S_ij and m_i are in log2 units and P~_ij = exp2(S_ij - m_i), which is the same number as exp(scale * q.k - m) but
cheaper to compute (flashviz.core.softmax: the step and its constants). Reported m and L are converted back to natural
log.
"Load" means slicing a tile out of the (HBM) input; only tiles that tile_schedule marks as computed are ever loaded.

Steps: on the classic path (causal and window, no mask_mod) every computed tile is one loop iteration; with a
mask_mod and no on_tile, runs of adjacent tiles are computed as one wider step (flash_schedule.py explains why and
how wide). With on_tile every step is a single tile, so that each tile reports the running m_i, l_i it leaves.

FlexAttention's mask_mod and score_mod (torch.nn.attention.flex_attention's signatures) run on the same schedule:
tile_schedule classifies the mask_mod (with causal and window) over every batch and query head, so skipped tiles are
never loaded, full tiles apply no mask and partial tiles apply it element by element (TileMasks); a score_mod changes
every computed tile's natural-unit scores before the mask and the base-2 factor (tilemods.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter

import torch

from flashviz.core.flash_schedule import Step, check_schedule, schedule_steps
from flashviz.core.softmax import LN_2, LOG2_E, NEG_INF, online_softmax_step
from flashviz.core.softmax_variants import SoftmaxStep, make_softmax_step, rescaled_rows
from flashviz.core.tilemask import TileMasks, add_tile_bias, mask_tile
from flashviz.core.tilemods import TileScoreMod
from flashviz.core.tiling import Tile, TileSchedule, tile_schedule
from flashviz.core.validate import AttentionConfig, Window, tiled_config
from flashviz.masks import MaskMod, ScoreMod
from flashviz.vocab import KV_OUTER, PARTIAL

# Widest step (mask_mod path): consecutive tiles are merged only up to this many key columns (q_outer) or query
# positions (kv_outer), and never less than one tile. A step's scores S_ij (BH_kv, Br G, <= 512) are then bounded
# whatever N is, as a tile's are (the FlashAttention point: O(N) memory, no N x N block), at most 512 / d times its
# Q block. On 2 CPU cores (B=1, H=8, N=4096, d=64, 128 x 128 tiles) 512 and 1024 were equally fast, 256 ~5% slower,
# 2048 ~10% slower.
MAX_STEP_WIDTH = 512


@dataclass(frozen=True)
class TileEvent:
    """What the kernel reports after computing one tile (for teaching: the online softmax as it evolves)."""

    step: int  # position of the tile in the schedule (skipped tiles count, they are just not reported)
    q_block: int  # i: query block index
    k_block: int  # j: key/value block index
    status: str  # "full" or "partial" (skipped tiles are never computed, so never reported)
    q_start: int  # first query row of the tile
    q_end: int  # one past the last query row
    k_start: int  # first key column of the tile
    k_end: int  # one past the last key column
    m: torch.Tensor  # (q_end - q_start,) running row max m_i after this tile, batch 0 head 0, fp32/fp64 on CPU;
    #                  (0,) when B * H = 0
    l: torch.Tensor  # (q_end - q_start,) running row sum l_i (relative to m_i) after this tile, batch 0 head 0
    rescaled: torch.Tensor  # (q_end - q_start,) bool, batch 0 head 0: rows whose finite max moved at this tile (a
    #                         rescale of l_i and O_i); the first visible key sets the max and is not one


TileCallback = Callable[[TileEvent], None]


def group_rows(x: torch.Tensor, heads_kv: int) -> torch.Tensor:
    """Fold the query heads of each K/V group into the rows: (B, H, N, *rest) -> (B H_kv, N G, *rest).

    Row r * G + g of group b * H_kv + h_kv is row r of query head h_kv * G + g: the heads sharing K/V head h_kv (as
    SDPA's enable_gqa pairs them), interleaved so that a block of Br queries is Br G consecutive rows. A view when
    G = 1 and x is contiguous; one copy otherwise.
    """
    B, H, N = x.shape[:3]
    rest = x.shape[3:]
    G = H // heads_kv if heads_kv else 1
    x = x.reshape(B * heads_kv, G, N, *rest)  # (B H_kv, G, N, *rest)
    return x.transpose(1, 2).reshape(B * heads_kv, N * G, *rest)  # (B H_kv, N G, *rest)


def ungroup_rows(x: torch.Tensor, B: int, H: int, heads_kv: int) -> torch.Tensor:
    """The inverse of group_rows: (B H_kv, N G, *rest) -> (B, H, N, *rest). A view when G = 1."""
    G = H // heads_kv if heads_kv else 1
    N, rest = x.shape[1] // G, x.shape[2:]
    x = x.reshape(B, heads_kv, N, G, *rest).transpose(2, 3)  # (B, H_kv, G, N, *rest)
    return x.reshape(B, H, N, *rest)  # (B, H, N, *rest)


def _steps(schedule: TileSchedule, on_tile: TileCallback | None) -> list[Step]:
    """The schedule's computed tiles as steps: single tiles on the classic path (no mask_mod) and with on_tile (one
    event each); with a mask_mod, runs of adjacent tiles up to MAX_STEP_WIDTH wide along the inner loop."""
    return schedule_steps(schedule, on_tile is None and schedule.mask_mod is not None, MAX_STEP_WIDTH)


def _emit(on_tile: TileCallback | None, tile: Tile, m_old: torch.Tensor, m_i: torch.Tensor, l_i: torch.Tensor,
          G: int) -> None:
    """Report a computed tile for batch 0, head 0; m_i arrives in log2 units and leaves in natural-log units.

    m_old, m_i, l_i: (BH_kv, Br G) in group_rows' layout (the max before the tile, the max and sum after it), so
    head 0's rows are every G-th row of group 0.
    """
    if on_tile is not None:
        if m_i.shape[0] == 0:  # B * H = 0: there is no batch 0, head 0 to report
            m_old, m_i, l_i = m_old.new_empty(1, 0), m_i.new_empty(1, 0), l_i.new_empty(1, 0)
        m0, l0 = m_i[0, ::G], l_i[0, ::G]  # (Br,) batch 0, head 0
        on_tile(TileEvent(tile.step, tile.q_block, tile.k_block, tile.status, tile.q_start, tile.q_end,
                          tile.k_start, tile.k_end, m0.detach().cpu() * LN_2, l0.detach().cpu().clone(),
                          rescaled_rows(m_old[0, ::G], m0).cpu()))


def _load_kt(k: torch.Tensor, k_start: int, k_end: int, acc: torch.dtype) -> torch.Tensor:
    """K_j^T for keys [k_start, k_end) as a (BH, d, Bc) view: the matmul reads the transposed operand in place
    (BLAS's "T" flag), which is faster than copying it into a contiguous tile first."""
    return k[:, k_start:k_end].to(acc).transpose(1, 2)  # read Bc d


def _mod_and_mask(S_ij: torch.Tensor, step: Step, masks: TileMasks, score: TileScoreMod | None,
                  G: int) -> tuple[torch.Tensor, bool]:
    """The score_mod (every computed tile), then the mask (partial tiles only), as flex_attention orders them.

    S_ij: (BH_kv, rows G, cols) scores of a step, in log2 units, or natural units when there is a score_mod.
    Returns S_ij in log2 units and whether a row of it may be all -inf (a mask, or a score_mod that returns -inf),
    which the online softmax step must guard against.
    """
    if score is not None:
        S_ij = score.log2_scores(S_ij, step)  # (BH_kv, rows G, cols) score_mod(scale q.k) log2(e)
    for t in step.tiles:
        if t.status != PARTIAL:
            continue  # full tiles apply no mask; a partial one masks its own block of the step
        rows = slice((t.q_start - step.q_start) * G, (t.q_end - step.q_start) * G)
        S_t = S_ij[:, rows, t.k_start - step.k_start:t.k_end - step.k_start]  # (BH_kv, Br G, Bc) view of the step
        if score is None:
            add_tile_bias(S_t, masks.bias(t), G)  # finite inputs give finite q.k: + (-inf) hides it, as SDPA
        else:
            mask_tile(S_t, masks.hidden(t), G)  # a score_mod may return +-inf or NaN where hidden: overwrite it
    return S_ij, step.partial or score is not None


def build_schedule(config: AttentionConfig, loop_order: str, device: torch.device | str | None = None
                   ) -> TileSchedule:
    """The tile schedule of a validated call: causal, window and mask_mod, classified over its batch and heads on
    `device` (the inputs': a mask_mod's closed-over tensors live there)."""
    c = config
    return tile_schedule(c.n_q, c.n_k, c.block_q, c.block_k, causal=c.causal, window=c.window, loop_order=loop_order,
                         mask_mod=c.mask_mod, batch=max(c.B, 1), heads=max(c.H, 1), device=device)


def _kv_outer(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, schedule: TileSchedule, c: AttentionConfig,
              score: TileScoreMod | None, on_tile: TileCallback | None,
              softmax: SoftmaxStep) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashAttention-1, Algorithm 1. q: (BH_kv, N_q G, d) in group_rows' layout; k, v: (BH_kv, N_k, d).
    Returns O (BH_kv, N_q G, d) and L (BH_kv, N_q G), in the same layout."""
    BH, n_rows, d = q.shape  # BH = BH_kv, n_rows = N_q G
    acc, G = c.acc, c.group
    qk_scale = c.scale * LOG2_E if score is None else c.scale  # with a score_mod, S_ij starts in natural units
    # -- initialise O, l, m in HBM (write N_q d + 2 N_q per head)
    masks = TileMasks(schedule, q.device)  # element masks of partial tiles
    O = torch.zeros(BH, n_rows, d, dtype=acc, device=q.device)  # (BH_kv, N_q G, d)
    l = torch.zeros(BH, n_rows, dtype=acc, device=q.device)  # (BH_kv, N_q G) running sums
    m = torch.full((BH, n_rows), NEG_INF, dtype=acc, device=q.device)  # (BH_kv, N_q G) running maxima

    # steps: runs of consecutive Q blocks of one column (single tiles with on_tile); fully masked columns have none
    for _, column in groupby(_steps(schedule, on_tile), key=attrgetter("k_start")):  # outer loop: j
        column = list(column)
        cols = slice(column[0].k_start, column[0].k_end)
        K_jT = _load_kt(k, cols.start, cols.stop, acc)  # (BH_kv, d, Bc); read Bc d, once for the G heads of the group
        V_j = v[:, cols].to(acc)  # (BH_kv, Bc, d); read Bc d
        for st in column:  # inner loop: Q blocks i (one or several adjacent ones)
            rows = slice(st.q_start * G, st.q_end * G)  # the step's queries in all G heads of the group
            Q_i = q[:, rows].to(acc) * qk_scale  # (BH_kv, Br G, d), pre-scaled: S_ij in log2 units
            O_i, l_i, m_i = O[:, rows], l[:, rows], m[:, rows]  # views; read Br G d + 2 Br G
            S_ij = torch.bmm(Q_i, K_jT)  # (BH_kv, Br G, d) x (BH_kv, d, Bc) -> (BH_kv, Br G, Bc), on chip
            S_ij, masked = _mod_and_mask(S_ij, st, masks, score, G)
            # -- m_new, l_new and P~_ij = 2^(S_ij - m_new): the online softmax step
            P_ij, m_new, l_new, alpha = softmax(S_ij, m_i, l_i, masked)
            l_div = l_new.masked_fill(l_new == 0, 1.0) if masked else l_new  # rows seeing nothing yet
            # -- O_i <- diag(l_new)^-1 (diag(l_i) 2^(m_i - m_new) O_i + P~_ij V_j), written back to HBM (write Br d)
            O_i.mul_((l_i * alpha).unsqueeze(-1)).baddbmm_(P_ij, V_j).div_(l_div.unsqueeze(-1))  # (BH_kv, Br G, d)
            _emit(on_tile, st.tiles[0], m_i, m_new, l_new, G)  # with on_tile, every step is one tile
            l_i.copy_(l_new)  # write Br G
            m_i.copy_(m_new)  # write Br G
            del S_ij, P_ij  # free the step's scores before the next step allocates its own: one block at a time
    L = (m + torch.log2(l)) * LN_2  # (BH_kv, N_q G) logsumexp in natural log; rows that saw nothing: -inf
    return O, L


def _q_outer(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, schedule: TileSchedule, c: AttentionConfig,
             score: TileScoreMod | None, on_tile: TileCallback | None,
             softmax: SoftmaxStep) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashAttention-2, Algorithm 1. q: (BH_kv, N_q G, d) in group_rows' layout; k, v: (BH_kv, N_k, d).
    Returns O (BH_kv, N_q G, d) and L (BH_kv, N_q G), in the same layout."""
    BH, n_rows, d = q.shape  # BH = BH_kv, n_rows = N_q G
    acc, G = c.acc, c.group
    qk_scale = c.scale * LOG2_E if score is None else c.scale  # with a score_mod, S_ij starts in natural units
    masks = TileMasks(schedule, q.device)  # element masks of partial tiles
    O = torch.zeros(BH, n_rows, d, dtype=acc, device=q.device)  # (BH_kv, N_q G, d); rows that see nothing stay 0
    L = torch.full((BH, n_rows), NEG_INF, dtype=acc, device=q.device)  # (BH_kv, N_q G) logsumexp

    # steps: runs of consecutive K/V blocks of one row (single tiles with on_tile). A row block with no step sees
    # no key: Q_i is never loaded, O_i stays 0 and L_i stays -inf.
    for _, row in groupby(_steps(schedule, on_tile), key=attrgetter("q_start")):  # outer loop: i
        row = list(row)
        rows = slice(row[0].q_start * G, row[0].q_end * G)  # the block's Br queries in all G heads of the group
        Q_i = q[:, rows].to(acc) * qk_scale  # (BH_kv, Br G, d), pre-scaled: S_ij in log2 units; read once
        acc_i = None  # (BH_kv, Br G, d) unnormalised accumulator, on chip until the end of the row
        m_i = torch.full(Q_i.shape[:2], NEG_INF, dtype=acc, device=q.device)  # (BH_kv, Br G)
        l_i = torch.zeros(Q_i.shape[:2], dtype=acc, device=q.device)  # (BH_kv, Br G)
        for st in row:  # inner loop: K/V blocks j (one or several adjacent ones: Bc = their total width)
            K_jT = _load_kt(k, st.k_start, st.k_end, acc)  # (BH_kv, d, Bc); read Bc d, once for the G heads
            V_j = v[:, st.k_start:st.k_end].to(acc)  # (BH_kv, Bc, d); read Bc d
            S_ij = torch.bmm(Q_i, K_jT)  # (BH_kv, Br G, d) x (BH_kv, d, Bc) -> (BH_kv, Br G, Bc)
            S_ij, masked = _mod_and_mask(S_ij, st, masks, score, G)
            # -- m_i, l_i and P~_ij = 2^(S_ij - m_new): the online softmax step
            m_old = m_i  # (BH_kv, Br G) the max before this step (the step returns new tensors)
            P_ij, m_i, l_i, alpha = softmax(S_ij, m_i, l_i, masked)
            # -- acc_i <- diag(2^(m_old - m_new)) acc_i + P~_ij V_j  (no division yet); the first step has nothing
            # to rescale: acc_i = P~_ij V_j
            if acc_i is None:
                acc_i = torch.bmm(P_ij, V_j)  # (BH_kv, Br G, Bc) x (BH_kv, Bc, d) -> (BH_kv, Br G, d)
            else:
                acc_i.mul_(alpha.unsqueeze(-1)).baddbmm_(P_ij, V_j)  # (BH_kv, Br G, d)
            _emit(on_tile, st.tiles[0], m_old, m_i, l_i, G)  # with on_tile, every step is one tile
            del S_ij, P_ij  # free the step's scores before the next step allocates its own: one block at a time
        # -- epilogue: O_i = diag(l_i)^-1 acc_i; L_i = m_i + log l_i (write Br d + Br per head)
        # l_i >= 1 once a row has seen a key (its maximum adds 2^0); a row that saw none has l_i = 0, acc_i = 0
        torch.div(acc_i, l_i.clamp(min=1.0).unsqueeze(-1), out=O[:, rows])
        L[:, rows] = (m_i + torch.log2(l_i)) * LN_2  # natural-log logsumexp
    return O, L


def tiled_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: AttentionConfig,
                  on_tile: TileCallback | None = None, schedule: TileSchedule | None = None,
                  softmax: SoftmaxStep | None = None, out_dtype: torch.dtype | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """The tiled forward for an already validated config (see tiled_config); no argument is checked again.

    Args:
        q: (B, H, N_q, d) queries.  k, v: (B, H_kv, N_k, d), H_kv dividing H.  config: from tiled_config, with a
            loop_order.
        on_tile: as in flash_attention_forward.
        schedule: build_schedule(config, config.loop_order), if the caller already has it.
        softmax: softmax_variants.make_softmax_step(tau, p_dtype) for the numerics options; None runs
            online_softmax_step (the default path: no extra op per tile).
        out_dtype: O's dtype; None = q's. A caller that merges partials (the ring) keeps them in config.acc.
    Returns:
        O (B, H, N_q, d) in out_dtype and L (B, H, N_q), the natural-log logsumexp in config.acc.

    Example:
        >>> q = k = v = torch.randn(1, 2, 10, 4)
        >>> O, L = tiled_forward(q, k, v, tiled_config(q, k, v, block_size=4, loop_order="q_outer"))
        >>> O.shape, L.shape
        (torch.Size([1, 2, 10, 4]), torch.Size([1, 2, 10]))
    """
    c = config
    schedule = build_schedule(c, c.loop_order, q.device) if schedule is None else schedule
    score = None if c.score_mod is None else TileScoreMod(c.score_mod, c.B, c.H, c.H_kv, q.device)
    kernel = _kv_outer if c.loop_order == KV_OUTER else _q_outer
    BH_kv = c.B * c.H_kv  # batch and K/V heads merged: one batched matmul per tile over all groups
    O, L = kernel(group_rows(q, c.H_kv), k.reshape(BH_kv, c.n_k, c.d), v.reshape(BH_kv, c.n_k, c.d), schedule,
                  c, score, on_tile, online_softmax_step if softmax is None else softmax)  # (BH_kv, N_q G, d)
    return ungroup_rows(O, c.B, c.H, c.H_kv).to(out_dtype or q.dtype), ungroup_rows(L, c.B, c.H, c.H_kv)


def flash_attention_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_size: int = 64,
    *,
    block_q: int | None = None,
    block_k: int | None = None,
    causal: bool = False,
    window: Window = None,
    scale: float | None = None,
    loop_order: str = KV_OUTER,
    return_lse: bool = False,
    on_tile: TileCallback | None = None,
    mask_mod: MaskMod | None = None,
    score_mod: ScoreMod | None = None,
    schedule: TileSchedule | None = None,
    rescale_threshold: float = 0.0,
    p_dtype: torch.dtype | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Tiled attention with online softmax; never materialises the N_q x N_k matrix.

    Args:
        q: (B, H, N_q, d) queries.  k: (B, H_kv, N_k, d) keys.  v: (B, H_kv, N_k, d) values. Same dtype and device.
            H_kv = H is multi-head attention; a divisor of H is grouped-query attention (query head h reads K/V head
            h // (H / H_kv), as SDPA's enable_gqa=True), 1 multi-query. K/V are never copied per query head.
        block_size: tile size used for both Br and Bc unless block_q / block_k are given.
        block_q: Br, query rows per tile.  block_k: Bc, key columns per tile.
        causal: top-left causal mask (query i sees keys j <= i), as SDPA's is_causal.
        window: (left, right) sliding window: query i sees keys i-left..i+right; None on a side = unbounded.
        scale: softmax scale, default 1/sqrt(d).
        loop_order: "kv_outer" (FlashAttention-1 Algorithm 1) or "q_outer" (FlashAttention-2).
            The default here is "kv_outer"; flash_attention's (forward + backward) is "q_outer".
        return_lse: also return the logsumexp L = m + log l, shape (B, H, N_q), natural log, -inf for empty rows.
        on_tile: called once per computed tile, in schedule order, with a TileEvent (q_block, k_block, status, the
            running m and l of the tile's rows and which of them rescaled, for batch 0, head 0). With it the kernel
            computes tile by tile; without it and with a mask_mod, adjacent tiles are merged into wider steps
            (faster, the same output up to rounding); without a mask_mod every tile is one step either way.
        mask_mod: FlexAttention mask_mod(b, h, q_idx, kv_idx) -> bool (True = visible; h is the query head),
            intersected with causal and window (presets in flashviz.masks). Tiles it hides entirely are never
            loaded, tiles it shows entirely apply no mask, the rest apply it element by element.
        score_mod: FlexAttention score_mod(score, b, h, q_idx, kv_idx) -> score, applied to every computed score
            scale * q.k (natural units) before the mask and the softmax; see flashviz.core.tilemods for its call.
        schedule: a TileSchedule built once with tile_schedule(N_q, N_k, block_q, block_k, causal=, window=,
            loop_order=, mask_mod=, batch=B, heads=H) and reused across calls, as FlexAttention reuses a BlockMask:
            the call then neither classifies the mask_mod nor evaluates it again in partial tiles (their masks are
            cached in the schedule on first use). mask_mod=None takes the schedule's mask_mod; anything else that
            differs from the call raises ValueError. None builds the schedule inside the call.
        rescale_threshold: tau >= 0 in log2 units (FlashAttention-4's conditional rescale): a row's running max
            moves only when a tile's max exceeds it by more than tau, else the tile is exponentiated against the
            stale max (P~ <= 2^tau; l and the fp32 accumulator at most 2^tau times larger, far inside fp32's range).
            O and L stay exact to fp32 rounding, because the final division uses the same stale max; events'
            .rescaled say which rows moved. 0 is the classic update. See flashviz.core.softmax_variants.
        p_dtype: round P~ to this floating dtype (torch.bfloat16, torch.float16, torch.float8_e4m3fn / e5m2;
            saturating) before the P V matmul, as GPU kernels feed 16-bit or FP8 tensor cores; the row sum l uses the
            unrounded P~, as FlashAttention-2/3 do. None keeps the accumulator's dtype.
    Returns:
        O of shape (B, H, N_q, d) in q's dtype (fp32 accumulation for half types), or (O, lse) with return_lse.

    Example:
        >>> from flashviz.core.reference import naive_attention
        >>> q = k = v = torch.randn(1, 2, 100, 16)
        >>> out = flash_attention_forward(q, k, v, block_size=32, causal=True, loop_order="q_outer")
        >>> torch.allclose(out, naive_attention(q, k, v, causal=True), atol=1e-5)
        True
        >>> k1 = v1 = torch.randn(1, 1, 100, 16)  # multi-query: one K/V head for both query heads
        >>> flash_attention_forward(q, k1, v1, block_size=32).shape
        torch.Size([1, 2, 100, 16])
        >>> from flashviz.masks import document, softcap  # FlexAttention's mask_mod / score_mod signatures
        >>> out = flash_attention_forward(q, k, v, 32, mask_mod=document([40, 60]), score_mod=softcap(20.0))
        >>> ref = naive_attention(q, k, v, mask_mod=document([40, 60]), score_mod=softcap(20.0))
        >>> torch.allclose(out, ref, atol=1e-5)
        True
        >>> sched = tile_schedule(100, 100, 32, 32, mask_mod=document([40, 60]), batch=1, heads=2)  # built once
        >>> torch.allclose(flash_attention_forward(q, k, v, 32, schedule=sched, score_mod=softcap(20.0)), ref,
        ...                atol=1e-5)
        True
        >>> lazy = flash_attention_forward(q, k, v, 32, rescale_threshold=8.0)  # FA4's rule: the same output
        >>> torch.allclose(lazy, naive_attention(q, k, v), atol=1e-5)
        True
    """
    if mask_mod is None and isinstance(schedule, TileSchedule):
        mask_mod = schedule.mask_mod  # the schedule carries its mask_mod, as a BlockMask does
    config = tiled_config(q, k, v, block_size=block_size, block_q=block_q, block_k=block_k, causal=causal,
                          window=window, scale=scale, loop_order=loop_order, mask_mod=mask_mod, score_mod=score_mod)
    if on_tile is not None and not callable(on_tile):
        raise TypeError(f"on_tile must be a callable taking a TileEvent, or None, got {type(on_tile).__name__}.")
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        raise ValueError("flash_attention_forward is the forward kernel alone and has no backward, but q, k or v "
                         "requires grad. Use flash_attention(q, k, v, ...) for gradients, or call this under "
                         "torch.no_grad() (or on detached tensors) for inference.")
    if schedule is not None:
        schedule = check_schedule(schedule, config, config.loop_order)
    softmax = make_softmax_step(rescale_threshold, p_dtype)  # validated; None on the default path
    out, L = tiled_forward(q, k, v, config, on_tile, schedule, softmax)
    return (out, L) if return_lse else out
