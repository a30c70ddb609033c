"""Tiled FlashAttention forward with online softmax, in both loop orders.

References:
    FlashAttention (Dao et al., 2022), Algorithm 1: the outer loop runs over K/V blocks j, the inner loop over Q blocks
        i; O_i, l_i, m_i live in HBM and are rescaled and written back after every tile ("kv_outer").
    FlashAttention-2 (Dao, 2023), Algorithm 1: the outer loop runs over Q blocks i; the unnormalised accumulator stays
        on chip, the division by l_i happens once at the end, and only the logsumexp L_i = m_i + log l_i is saved
        ("q_outer").

Legend: B batch, H heads, N_q / N_k query / key lengths, d head dimension, Br = block_q, Bc = block_k.
Inside the kernels the batch and head axes are merged into one axis BH = B * H, so every tile operation is one
batched matmul over all heads. As in the FlashAttention-2 and Triton kernels, the softmax runs in base 2: Q is
pre-scaled by scale * log2(e), so S_ij and m_i are in log2 units and P~_ij = exp2(S_ij - m_i), which is the same
number as exp(scale * q.k - m) but cheaper to compute. Reported m and L are converted back to natural log.
"Load" means slicing a tile out of the (HBM) input; only tiles that tile_schedule marks as computed are ever loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter

import torch

from flashviz.core.tiling import Tile, TileMasks, TileSchedule, tile_schedule
from flashviz.core.validate import (
    Window,
    validate_block,
    validate_causal,
    validate_loop_order,
    validate_qkv,
    validate_scale,
    validate_window,
)
from flashviz.vocab import PARTIAL

NEG_INF = float("-inf")
LOG2_E = 1.4426950408889634  # 1/ln(2): e^x = 2^(x log2 e), and exp2 is ~3x cheaper than exp on CPU
LN_2 = 0.6931471805599453  # ln(2): converts base-2 maxima and logsumexps back to natural log


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


TileCallback = Callable[[TileEvent], None]


def _accumulator_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32  # fp32 accumulators for fp16/bf16/fp32


def _emit(on_tile: TileCallback | None, tile: Tile, m_i: torch.Tensor, l_i: torch.Tensor) -> None:
    """Report a computed tile; m_i arrives in log2 units and leaves in natural-log units."""
    if on_tile is not None:
        if m_i.shape[0] == 0:  # B * H = 0: there is no batch 0, head 0 to report
            m_i, l_i = m_i.new_empty(1, 0), l_i.new_empty(1, 0)
        on_tile(TileEvent(tile.step, tile.q_block, tile.k_block, tile.status, tile.q_start, tile.q_end,
                          tile.k_start, tile.k_end, m_i[0].detach().cpu() * LN_2, l_i[0].detach().cpu().clone()))


def _load_kt(k: torch.Tensor, tile: Tile, acc: torch.dtype) -> torch.Tensor:
    """K_j^T as a (BH, d, Bc) view: the matmul reads the transposed operand in place (BLAS's "T" flag), which is
    faster than copying it into a contiguous tile first."""
    return k[:, tile.k_start:tile.k_end].to(acc).transpose(1, 2)  # read Bc d


def _kv_outer(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, schedule: TileSchedule, scale: float,
              acc: torch.dtype, on_tile: TileCallback | None) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashAttention-1, Algorithm 1. q: (BH, N_q, d); k, v: (BH, N_k, d). Returns O (BH, N_q, d) and L (BH, N_q)."""
    BH, n_q, d = q.shape
    # -- initialise O, l, m in HBM (write N_q d + 2 N_q)
    masks = TileMasks(schedule, q.device)  # element masks of partial tiles
    O = torch.zeros(BH, n_q, d, dtype=acc, device=q.device)  # (BH, N_q, d)
    l = torch.zeros(BH, n_q, dtype=acc, device=q.device)  # (BH, N_q) running sums
    m = torch.full((BH, n_q), NEG_INF, dtype=acc, device=q.device)  # (BH, N_q) running maxima

    for _, column in groupby(schedule, key=attrgetter("k_block")):  # outer loop: K/V block j
        tiles = [t for t in column if t.computed]
        if not tiles:
            continue  # the whole column is masked: K_j, V_j are never loaded
        K_jT = _load_kt(k, tiles[0], acc)  # (BH, d, Bc); read Bc d
        V_j = v[:, tiles[0].k_start:tiles[0].k_end].to(acc)  # (BH, Bc, d); read Bc d
        for t in tiles:  # inner loop: Q block i
            rows = slice(t.q_start, t.q_end)
            Q_i = q[:, rows].to(acc) * (scale * LOG2_E)  # (BH, Br, d), pre-scaled: S_ij in log2 units; read Br d
            O_i, l_i, m_i = O[:, rows], l[:, rows], m[:, rows]  # views; read Br d + 2 Br
            S_ij = torch.bmm(Q_i, K_jT)  # (BH, Br, d) x (BH, d, Bc) -> (BH, Br, Bc), on chip
            if t.status == PARTIAL:
                S_ij.masked_fill_(masks.hidden(t), NEG_INF)
            # -- m~_ij = rowmax(S_ij); P~_ij = exp2(S_ij - m~_ij); l~_ij = rowsum(P~_ij)
            m_tilde = S_ij.amax(dim=-1)  # (BH, Br)
            m_tilde_safe = m_tilde.masked_fill(m_tilde == NEG_INF, 0.0) if t.status == PARTIAL else m_tilde
            P_tilde = torch.exp2(S_ij.sub_(m_tilde_safe.unsqueeze(-1)), out=S_ij)  # (BH, Br, Bc), in place
            l_tilde = P_tilde.sum(dim=-1)  # (BH, Br)
            # -- m_new = max(m_i, m~); l_new = 2^(m_i - m_new) l_i + 2^(m~ - m_new) l~
            m_new = torch.maximum(m_i, m_tilde)  # (BH, Br)
            m_new_safe = m_new.masked_fill(m_new == NEG_INF, 0.0) if t.status == PARTIAL else m_new
            alpha = torch.exp2(m_i - m_new_safe)  # (BH, Br) 2^(m_i - m_new): rescales the old state
            beta = torch.exp2(m_tilde - m_new_safe)  # (BH, Br) 2^(m~ - m_new): rescales this tile
            l_new = alpha * l_i + beta * l_tilde  # (BH, Br)
            l_div = l_new.masked_fill(l_new == 0, 1.0) if t.status == PARTIAL else l_new  # rows seeing nothing yet
            # -- O_i <- diag(l_new)^-1 (diag(l_i) 2^(m_i - m_new) O_i + 2^(m~ - m_new) P~_ij V_j), written back to HBM
            PV = torch.bmm(P_tilde, V_j)  # (BH, Br, Bc) x (BH, Bc, d) -> (BH, Br, d)
            O_i.mul_((l_i * alpha / l_div).unsqueeze(-1)).add_(PV.mul_((beta / l_div).unsqueeze(-1)))  # write Br d
            l_i.copy_(l_new)  # write Br
            m_i.copy_(m_new)  # write Br
            _emit(on_tile, t, m_i, l_i)
    L = (m + torch.log2(l)) * LN_2  # (BH, N_q) logsumexp in natural log; rows that saw nothing: -inf
    return O, L


def _q_outer(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, schedule: TileSchedule, scale: float,
             acc: torch.dtype, on_tile: TileCallback | None) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashAttention-2, Algorithm 1. q: (BH, N_q, d); k, v: (BH, N_k, d). Returns O (BH, N_q, d) and L (BH, N_q)."""
    BH, n_q, d = q.shape
    masks = TileMasks(schedule, q.device)  # element masks of partial tiles
    O = torch.zeros(BH, n_q, d, dtype=acc, device=q.device)  # (BH, N_q, d); rows that see nothing stay 0
    L = torch.full((BH, n_q), NEG_INF, dtype=acc, device=q.device)  # (BH, N_q) logsumexp

    for _, row in groupby(schedule, key=attrgetter("q_block")):  # outer loop: Q block i
        tiles = [t for t in row if t.computed]
        if not tiles:
            continue  # every key is masked for these rows: Q_i is never loaded, O_i stays 0, L_i stays -inf
        rows = slice(tiles[0].q_start, tiles[0].q_end)
        Q_i = q[:, rows].to(acc) * (scale * LOG2_E)  # (BH, Br, d), pre-scaled: S_ij in log2 units; read Br d once
        acc_i = torch.zeros_like(Q_i)  # (BH, Br, d) unnormalised accumulator, on chip until the end of the row
        m_i = torch.full(acc_i.shape[:2], NEG_INF, dtype=acc, device=q.device)  # (BH, Br)
        l_i = torch.zeros(acc_i.shape[:2], dtype=acc, device=q.device)  # (BH, Br)
        for t in tiles:  # inner loop: K/V block j
            K_jT = _load_kt(k, t, acc)  # (BH, d, Bc); read Bc d
            V_j = v[:, t.k_start:t.k_end].to(acc)  # (BH, Bc, d); read Bc d
            S_ij = torch.bmm(Q_i, K_jT)  # (BH, Br, d) x (BH, d, Bc) -> (BH, Br, Bc)
            if t.status == PARTIAL:
                S_ij.masked_fill_(masks.hidden(t), NEG_INF)
            # -- update m_i and l_i: m_new = max(m_i, rowmax(S_ij)); l_i = e^(m_i - m_new) l_i + rowsum(P~_ij)
            m_new = torch.maximum(m_i, S_ij.amax(dim=-1))  # (BH, Br)
            m_safe = m_new.masked_fill(m_new == NEG_INF, 0.0) if t.status == PARTIAL else m_new
            P_ij = torch.exp2(S_ij.sub_(m_safe.unsqueeze(-1)), out=S_ij)  # (BH, Br, Bc) P~_ij = 2^(S_ij - m_new)
            alpha = torch.exp2(m_i - m_safe)  # (BH, Br) 2^(m_old - m_new)
            l_i = alpha * l_i + P_ij.sum(dim=-1)  # (BH, Br)
            # -- acc_i <- diag(2^(m_old - m_new)) acc_i + P~_ij V_j  (no division yet)
            acc_i.mul_(alpha.unsqueeze(-1)).baddbmm_(P_ij, V_j)  # (BH, Br, Bc) x (BH, Bc, d) -> (BH, Br, d)
            m_i = m_new
            _emit(on_tile, t, m_i, l_i)
        # -- epilogue: O_i = diag(l_i)^-1 acc_i; L_i = m_i + log l_i (write Br d + Br)
        torch.div(acc_i, l_i.masked_fill(l_i == 0, 1.0).unsqueeze(-1), out=O[:, rows])
        L[:, rows] = (m_i + torch.log2(l_i)) * LN_2  # natural-log logsumexp
    return O, L


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
    loop_order: str = "kv_outer",
    return_lse: bool = False,
    on_tile: TileCallback | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Tiled attention with online softmax; never materialises the N_q x N_k matrix.

    Args:
        q: (B, H, N_q, d) queries.  k: (B, H, N_k, d) keys.  v: (B, H, N_k, d) values. Same dtype and device.
        block_size: tile size used for both Br and Bc unless block_q / block_k are given.
        block_q: Br, query rows per tile.  block_k: Bc, key columns per tile.
        causal: top-left causal mask (query i sees keys j <= i), as SDPA's is_causal.
        window: (left, right) sliding window: query i sees keys i-left..i+right; None on a side = unbounded.
        scale: softmax scale, default 1/sqrt(d).
        loop_order: "kv_outer" (FlashAttention-1 Algorithm 1) or "q_outer" (FlashAttention-2).
        return_lse: also return the logsumexp L = m + log l, shape (B, H, N_q), natural log, -inf for empty rows.
        on_tile: called once per computed tile, in schedule order, with a TileEvent (q_block, k_block, status and
            the running m and l of the tile's rows for batch 0, head 0).
    Returns:
        O of shape (B, H, N_q, d) in q's dtype (fp32 accumulation for half types), or (O, lse) with return_lse.

    Example:
        >>> q = k = v = torch.randn(1, 2, 100, 16)
        >>> out = flash_attention_forward(q, k, v, block_size=32, causal=True, loop_order="q_outer")
        >>> torch.allclose(out, naive_attention(q, k, v, causal=True), atol=1e-5)
        True
    """
    validate_qkv(q, k, v)
    block_q = validate_block("block_q", block_size if block_q is None else block_q)
    block_k = validate_block("block_k", block_size if block_k is None else block_k)
    causal = validate_causal(causal)
    window = validate_window(window)
    scale = validate_scale(scale, q.shape[-1], _accumulator_dtype(q.dtype))  # scores are computed in acc dtype
    loop_order = validate_loop_order(loop_order)
    if on_tile is not None and not callable(on_tile):
        raise TypeError(f"on_tile must be a callable taking a TileEvent, or None, got {type(on_tile).__name__}.")

    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    schedule = tile_schedule(n_q, n_k, block_q, block_k, causal=causal, window=window, loop_order=loop_order)
    kernel = _kv_outer if loop_order == "kv_outer" else _q_outer
    O, L = kernel(q.reshape(B * H, n_q, d), k.reshape(B * H, n_k, d), v.reshape(B * H, n_k, d), schedule, scale,
                  _accumulator_dtype(q.dtype), on_tile)
    out = O.view(B, H, n_q, d).to(q.dtype)
    if return_lse:
        return out, L.view(B, H, n_q)
    return out
