"""FLOPs of attention, counted analytically: the one place the project counts them (the IO model, the sweep, the
guards, the roofline and the training model all call these functions).

Forward attention costs 4 N_q N_k d per (batch, head): 2 N_q N_k d for S = Q K^T and 2 N_q N_k d for P V
(FlashAttention-1, Section 3.2; softmax and masking are not counted). A tiled kernel does that work only on the
tiles it computes. torch 2.13's FlopCounterMode counts 0 for CPU SDPA (its CPU flash kernel has no registered FLOP
formula unless one passes a custom mapping), so we count analytically instead.

References:
    Dao et al., FlashAttention (2022), Section 3.2 and Appendix B (FLOP counts); Dao, FlashAttention-2 (2023), Section 4
    (backward = 2.5 x forward FLOPs: five matmuls against the forward's two, one of them the recomputation of S).

Legend: B batch, H heads, N_q / N_k query / key lengths, d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flashviz._lazy import lazy_import
from flashviz.core.tiling import tile_schedule
from flashviz.core.validate import Window, validate_block, validate_causal, validate_length, validate_window
from flashviz.vocab import IMPLS, NAIVE, SDPA, TILED_IMPLS

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")  # visible_pairs only: the IO model counts FLOPs without torch

FLOPS_PER_MAC = 2  # one multiply-accumulate = one multiply + one add
MATMULS_FORWARD = 2  # S = Q K^T and O = P V
FLOPS_PER_SCORE = MATMULS_FORWARD * FLOPS_PER_MAC  # 4 FLOPs per (query, key) pair per head-dim element
MATMULS_BACKWARD = 5  # recompute S = Q K^T, then dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q
MATMULS_BACKWARD_STORED_P = MATMULS_BACKWARD - 1  # standard attention keeps P from the forward: no recomputation
BACKWARD_FLOP_FACTOR = MATMULS_BACKWARD / MATMULS_FORWARD  # 2.5, as FA2 Section 4 states
TRAINING_FLOP_FACTOR = 1.0 + BACKWARD_FLOP_FACTOR  # forward + backward = 3.5 x forward


# ----------------------------------------------------------------------------------------------------------------------
# FLOPs


def matmul_flops(m: int, n: int, k: int) -> int:
    """FLOPs of an (m x k) by (k x n) matrix product: 2 m n k (one multiply and one add per multiply-accumulate).

    Example:
        >>> matmul_flops(1024, 1024, 64)  # S = Q K^T at N = 1024, d = 64
        134217728
    """
    return FLOPS_PER_MAC * m * n * k


def score_flops(pairs: int, d: int) -> int:
    """Forward FLOPs of `pairs` (query, key) scores at head dimension d: 4 pairs d (Q K^T and P V, 2 per MAC).

    Example:
        >>> score_flops(16 * 16, 64)  # one 16 x 16 tile
        65536
    """
    return MATMULS_FORWARD * matmul_flops(pairs, 1, d)  # S_ij = Q_i K_j^T and O_i += P_ij V_j


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
    forward = score_flops(pairs, d) * batch * heads  # 4 pairs d per (batch, head)
    return round(forward * TRAINING_FLOP_FACTOR) if training else forward


def impl_flops(impl: str, n: int, d: int, *, batch: int = 1, heads: int = 1, block_q: int = 64, block_k: int = 64,
               causal: bool = False, window: Window = None, training: bool = False) -> int:
    """FLOPs one implementation of a sweep spends on an (N x N) attention call, by what it computes.

    naive computes every score, masked or not; a tiled kernel ("flash", "flash2") computes its schedule's tiles;
    "sdpa" is a black box whose tiling we do not know, so it is charged the visible pairs, the least any exact
    kernel must compute.

    Example:
        >>> impl_flops("naive", 256, 64, causal=True) == 4 * 256 * 256 * 64
        True
        >>> impl_flops("sdpa", 4, 1, causal=True)  # 10 visible pairs x 4
        40
    """
    if impl == NAIVE:
        return attention_flops(n, n, d, batch=batch, heads=heads, training=training)
    if impl == SDPA:
        forward = score_flops(visible_pairs(n, n, causal=causal, window=window), d) * batch * heads
        return round(forward * TRAINING_FLOP_FACTOR) if training else forward
    if impl in TILED_IMPLS:
        return attention_flops(n, n, d, batch=batch, heads=heads, block_q=block_q, block_k=block_k, causal=causal,
                               window=window, training=training)
    raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}.")


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

