"""Standard attention, the oracle: materialise S = Q K^T * scale and P = softmax(S), then O = P V.

This is FlashAttention-1's Algorithm 0 ("standard attention implementation"). It keeps the full N_q x N_k matrices
S and P alive at once: that is its point, and the memory measurements must see them.

Legend: B batch, H query heads, H_kv key/value heads, G = H / H_kv, N_q / N_k query / key lengths, d head dimension.
With grouped-query attention (H_kv < H) the G query heads of a group are stacked along the rows, q viewed as
(B, H_kv, G N_q, d), so one matmul against the group's K (B, H_kv, d, N_k) serves them all: K and V are never copied
per query head (SDPA's enable_gqa=True math path copies them with repeat_interleave; the numbers are the same).
"""

from __future__ import annotations

import torch

from flashviz.core.maskeval import evaluate, index_grid
from flashviz.core.softmax import NEG_INF
from flashviz.core.tilemods import checked_call
from flashviz.core.tiling import visible_mask
from flashviz.core.validate import AttentionConfig, Window, naive_config
from flashviz.masks import MaskMod, ScoreMod

SCORE_CALL = "score (B, H, N_q, N_k), b (B,1,1,1), h (1,H,1,1), q_idx (N_q,1), kv_idx (1,N_k)"


def _dense_mask(c: AttentionConfig, device: torch.device) -> torch.Tensor | None:
    """(N_q, N_k) or (B', H', N_q, N_k) bool, True = visible: causal AND window AND mask_mod; None = all visible."""
    q_idx, k_idx = torch.arange(c.n_q, device=device), torch.arange(c.n_k, device=device)
    mask = visible_mask(q_idx, k_idx, causal=c.causal, window=c.window)  # (N_q, N_k) or None
    if c.mask_mod is None:
        return mask
    b, h = index_grid(c.B, c.H, device)
    vis = evaluate(c.mask_mod, b, h, q_idx[:, None], k_idx[None, :])  # (B', H', N_q, N_k)
    return vis if mask is None else vis & mask


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                    window: Window = None, scale: float | None = None, mask_mod: MaskMod | None = None,
                    score_mod: ScoreMod | None = None) -> torch.Tensor:
    """Attention that materialises the full score and probability matrices.

    Args:
        q: (B, H, N_q, d) queries.  k: (B, H_kv, N_k, d) keys.  v: (B, H_kv, N_k, d) values. H_kv = H is multi-head
            attention; a divisor of H is grouped-query attention (query head h reads K/V head h // (H / H_kv)).
        causal: top-left causal mask (query i sees keys j <= i), as SDPA's is_causal.
        window: (left, right) sliding window (query i sees keys i-left..i+right; None = unbounded side).
        scale: softmax scale, default 1/sqrt(d).
        mask_mod: FlexAttention mask_mod(b, h, q_idx, kv_idx) -> bool (True = visible), intersected with causal and
            window; called once on index tensors b (B,1,1,1), h (1,H,1,1), q_idx (N_q,1), kv_idx (1,N_k).
        score_mod: FlexAttention score_mod(score, b, h, q_idx, kv_idx) -> score on the scaled scores (natural
            units) before the mask; called once with score (B, H, N_q, N_k) and the same index tensors.
    Returns:
        (B, H, N_q, d) output in q's dtype; rows that see no key are zeros. Computed in q's dtype, as plain
        PyTorch code would (this is the "plain PyTorch run" whose error bounds the tiled kernels' error).

    Example:
        >>> q = k = v = torch.randn(1, 2, 16, 8)
        >>> naive_attention(q, k, v, causal=True).shape
        torch.Size([1, 2, 16, 8])
    """
    c = naive_config(q, k, v, causal=causal, window=window, scale=scale, mask_mod=mask_mod,
                     score_mod=score_mod)  # S is computed in q's dtype

    G = c.group  # query heads per K/V head
    q_g = q.reshape(c.B, c.H_kv, G * c.n_q, c.d)  # (B, H_kv, G N_q, d): the group's heads stacked along the rows
    # (B, H_kv, G N_q, d) x (B, H_kv, d, N_k) -> (B, H_kv, G N_q, N_k); read N_q d + N_k d, write N_q N_k (per head)
    S = torch.matmul(q_g, k.transpose(-2, -1)).mul_(c.scale)  # scaled in place: S and P are the only N x N tensors
    S = S.view(c.B, c.H, c.n_q, c.n_k)  # (B, H, N_q, N_k)
    if c.score_mod is not None:
        b, h = index_grid(c.B, c.H, q.device)
        q_idx, k_idx = torch.arange(c.n_q, device=q.device)[:, None], torch.arange(c.n_k, device=q.device)[None, :]
        S = checked_call(c.score_mod, S, b, h, q_idx, k_idx, SCORE_CALL).to(S.dtype).contiguous()  # (B, H, N_q, N_k)
    mask = _dense_mask(c, q.device)  # (N_q, N_k) or (B', H', N_q, N_k) bool, or None
    if mask is not None:
        S.masked_fill_(~mask, NEG_INF)
    P = torch.softmax(S, dim=-1)  # (B, H, N_q, N_k); read N^2, write N^2
    if mask is not None:
        # rows with every key masked: softmax gives NaN, the convention is zeros. In place unless autograd saved P
        # for softmax's backward (an in-place edit would make backward raise).
        P = P.nan_to_num(nan=0.0) if P.requires_grad else P.nan_to_num_(nan=0.0)
    P_g = P.reshape(c.B, c.H_kv, G * c.n_q, c.n_k)  # (B, H_kv, G N_q, N_k), a view
    # (B, H_kv, G N_q, N_k) x (B, H_kv, N_k, d) -> (B, H_kv, G N_q, d); read N^2 + Nd, write Nd (per head)
    return torch.matmul(P_g, v).view(c.B, c.H, c.n_q, c.d)  # (B, H, N_q, d)
