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

from flashviz.core.tiling import visible_mask
from flashviz.core.validate import Window, naive_config


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                    window: Window = None, scale: float | None = None) -> torch.Tensor:
    """Attention that materialises the full score and probability matrices.

    Args:
        q: (B, H, N_q, d) queries.  k: (B, H_kv, N_k, d) keys.  v: (B, H_kv, N_k, d) values. H_kv = H is multi-head
            attention; a divisor of H is grouped-query attention (query head h reads K/V head h // (H / H_kv)).
        causal: top-left causal mask (query i sees keys j <= i), as SDPA's is_causal.
        window: (left, right) sliding window (query i sees keys i-left..i+right; None = unbounded side).
        scale: softmax scale, default 1/sqrt(d).
    Returns:
        (B, H, N_q, d) output in q's dtype; rows that see no key are zeros. Computed in q's dtype, as plain
        PyTorch code would (this is the "plain PyTorch run" whose error bounds the tiled kernels' error).

    Example:
        >>> q = k = v = torch.randn(1, 2, 16, 8)
        >>> naive_attention(q, k, v, causal=True).shape
        torch.Size([1, 2, 16, 8])
    """
    c = naive_config(q, k, v, causal=causal, window=window, scale=scale)  # S is computed in q's dtype

    G = c.group  # query heads per K/V head
    q_g = q.reshape(c.B, c.H_kv, G * c.n_q, c.d)  # (B, H_kv, G N_q, d): the group's heads stacked along the rows
    # (B, H_kv, G N_q, d) x (B, H_kv, d, N_k) -> (B, H_kv, G N_q, N_k); read N_q d + N_k d, write N_q N_k (per head)
    S = torch.matmul(q_g, k.transpose(-2, -1)).mul_(c.scale)  # scaled in place: S and P are the only N x N tensors
    S = S.view(c.B, c.H, c.n_q, c.n_k)  # (B, H, N_q, N_k)
    mask = visible_mask(torch.arange(c.n_q, device=q.device), torch.arange(c.n_k, device=q.device),
                        causal=c.causal, window=c.window)  # (N_q, N_k) bool or None
    if mask is not None:
        S.masked_fill_(~mask, float("-inf"))
    P = torch.softmax(S, dim=-1)  # (B, H, N_q, N_k); read N^2, write N^2
    if mask is not None:
        # rows with every key masked: softmax gives NaN, the convention is zeros. In place unless autograd saved P
        # for softmax's backward (an in-place edit would make backward raise).
        P = P.nan_to_num(nan=0.0) if P.requires_grad else P.nan_to_num_(nan=0.0)
    P_g = P.reshape(c.B, c.H_kv, G * c.n_q, c.n_k)  # (B, H_kv, G N_q, N_k), a view
    # (B, H_kv, G N_q, N_k) x (B, H_kv, N_k, d) -> (B, H_kv, G N_q, d); read N^2 + Nd, write Nd (per head)
    return torch.matmul(P_g, v).view(c.B, c.H, c.n_q, c.d)  # (B, H, N_q, d)
