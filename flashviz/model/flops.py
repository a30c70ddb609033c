"""FLOPs of attention, counted analytically.

Forward attention costs 4 N_q N_k d per (batch, head): 2 N_q N_k d for S = Q K^T and 2 N_q N_k d for P V
(FlashAttention-1, Section 3.2; softmax and masking are not counted). A tiled kernel does that work only on the
tiles it computes. torch 2.13's FlopCounterMode counts 0 for CPU SDPA (its CPU flash kernel has no registered FLOP
formula unless one passes a custom mapping), so we count analytically instead.

References:
    Dao et al., FlashAttention (2022), Section 3.2 and Appendix B (FLOP counts); Dao, FlashAttention-2 (2023), Section 4
    (backward = 2.5 x forward FLOPs).

Legend: B batch, H heads, N_q / N_k query / key lengths, d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

import torch

from flashviz.core.tiling import tile_schedule
from flashviz.core.validate import Window, validate_block, validate_causal, validate_length, validate_window

FLOPS_PER_MAC = 2  # one multiply-accumulate = one multiply + one add
MATMULS_FORWARD = 2  # S = Q K^T and O = P V
BACKWARD_FLOP_FACTOR = 2.5  # FA2 paper, Section 4: the backward pass has 2.5x the FLOPs of the forward
TRAINING_FLOP_FACTOR = 1.0 + BACKWARD_FLOP_FACTOR  # forward + backward = 3.5 x forward


# ----------------------------------------------------------------------------------------------------------------------
# FLOPs


def attention_flops(n_q: int, n_k: int, d: int, *, batch: int = 1, heads: int = 1, block_q: int | None = None,
                    block_k: int | None = None, causal: bool = False, window: Window = None,
                    training: bool = False) -> int:
    """FLOPs of attention: 4 N_q N_k d per (batch, head) for the dense forward; a tiled kernel only on its tiles.

    Args:
        n_q, n_k: query and key lengths.  d: head dimension.  batch, heads: B and H.
        block_q, block_k: Br and Bc. Give both to count only the tiles that tile_schedule computes (a masked tiled
            kernel); give neither to count the dense matrix (naive attention computes every score, masked or not).
        causal, window: the mask (only used with block sizes).
        training: forward + backward, counted as 3.5 x forward (FA2 convention: backward = 2.5 x forward).
    Returns:
        int FLOPs (training counts are rounded to the nearest int).

    Example:
        >>> attention_flops(1024, 1024, 64)  # 4 N^2 d
        268435456
        >>> attention_flops(1024, 1024, 64, block_q=128, block_k=128, causal=True)  # 36 of 64 tiles computed
        150994944
    """
    n_q, n_k = validate_length("n_q", n_q), validate_length("n_k", n_k)
    d, batch, heads = validate_block("d", d), validate_block("batch", batch), validate_block("heads", heads)
    causal, window = validate_causal(causal), validate_window(window)
    if (block_q is None) != (block_k is None):
        raise ValueError(f"give both block_q and block_k (tiled count) or neither (dense count), got "
                         f"block_q={block_q!r}, block_k={block_k!r}.")
    if block_q is None:
        pairs = n_q * n_k  # (query, key) scores computed
    else:
        schedule = tile_schedule(n_q, n_k, block_q, block_k, causal=causal, window=window)
        pairs = sum(t.rows * t.cols for t in schedule.computed())
    forward = MATMULS_FORWARD * FLOPS_PER_MAC * pairs * d * batch * heads  # 4 pairs d per (batch, head)
    return round(forward * TRAINING_FLOP_FACTOR) if training else forward


def visible_pairs(n_q: int, n_k: int, *, causal: bool = False, window: Window = None) -> int:
    """Number of (query, key) pairs the mask lets through: the least work any exact kernel must do.

    Closed form per query row i: keys in [max(0, i - left), min(n_k - 1, i + right)] (right = 0 when causal).

    Example:
        >>> visible_pairs(4, 4, causal=True)
        10
    """
    n_q, n_k = validate_length("n_q", n_q), validate_length("n_k", n_k)
    causal, window = validate_causal(causal), validate_window(window)
    left, right = window if window is not None else (None, None)
    if causal:
        right = 0 if right is None else min(right, 0)
    if left is None and right is None:
        return n_q * n_k
    i = torch.arange(n_q, dtype=torch.int64)  # (N_q,) query positions
    lo = torch.zeros_like(i) if left is None else (i - left).clamp(min=0)  # first visible key of each row
    hi = torch.full_like(i, n_k - 1) if right is None else (i + right).clamp(max=n_k - 1)  # last visible key
    return int((hi - lo + 1).clamp(min=0).sum())

