"""The price of recomputation: FlashAttention's backward recomputes S and P instead of storing P.

Standard attention keeps P (B H N_q N_k elements) from the forward for the backward, which then runs four matmuls:
dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q (dS = P * (dP - D) is elementwise). The tiled backward keeps only
O and the logsumexp L (B H N_q fp32 values) and recomputes S_ij = Q_i K_j^T (then P_ij = exp(S_ij - L_i)) tile by
tile: one extra matmul, five in all, 2.5 x the forward's FLOPs (FA2, Section 4). That is 25% more backward work, or
about 17% more for a whole training step (forward + backward: 14 against 12 FLOPs per score per head-dim element),
to save an N x N matrix per head: the trade FlashAttention makes, because the matmul is cheap and HBM is not.

All counts come from flashviz.model.flops; the memory is what each method stores between forward and backward beyond
what both store (q, k, v, O).

Legend: N_q, N_k sequence lengths, d head dimension, B batch, H heads, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

import pandas as pd

from flashviz.core.validate import Window
from flashviz.model.flops import (
    MATMULS_BACKWARD,
    MATMULS_BACKWARD_STORED_P,
    MATMULS_FORWARD,
    attention_flops,
)
from flashviz.vocab import DTYPE_BYTES

LSE_BYTES = DTYPE_BYTES["float32"]  # the logsumexp L is kept in fp32 whatever the input dtype


@dataclass(frozen=True)
class RecomputeCost:
    """FLOPs and stored bytes of the backward, with P stored (standard) and with S, P recomputed (FlashAttention)."""

    forward_flops: int  # the forward's two matmuls over the computed scores
    backward_flops_stored_p: int  # backward keeping P: four matmuls over the same scores
    backward_flops: int  # backward recomputing S, P: five matmuls (2.5 x forward)
    extra_flops: int  # backward_flops - backward_flops_stored_p: the recomputation of S = Q K^T
    stored_p_bytes: int  # P kept from the forward by standard attention: B H N_q N_k x dtype bytes
    stored_lse_bytes: int  # L kept by FlashAttention instead: B H N_q x 4 bytes

    @property
    def memory_saved_bytes(self) -> int:
        """Bytes the backward no longer keeps: P minus L."""
        return self.stored_p_bytes - self.stored_lse_bytes

    @property
    def extra_backward_fraction(self) -> float:
        """Extra FLOPs relative to the backward that keeps P (0.25: five matmuls against four)."""
        return self.extra_flops / self.backward_flops_stored_p if self.backward_flops_stored_p else 0.0

    @property
    def extra_training_fraction(self) -> float:
        """Extra FLOPs relative to a whole training step (forward + backward) that keeps P (1/6, about 17%)."""
        base = self.forward_flops + self.backward_flops_stored_p
        return self.extra_flops / base if base else 0.0


def recompute_cost(n_q: int, n_k: int, d: int, *, batch: int = 1, heads: int = 1, block_q: int | None = None,
                   block_k: int | None = None, causal: bool = False, window: Window = None,
                   dtype: str = "float32") -> RecomputeCost:
    """The backward's extra FLOPs by recomputation, next to the memory it saves.

    Args:
        n_q, n_k: query and key lengths.  d: head dimension.  batch, heads: B and H.
        block_q, block_k: Br, Bc. Give both to count only the tiles a masked tiled kernel computes (as
            attention_flops does); neither counts every score. Both methods are charged the same scores, so the
            difference is the recomputation alone.
        causal, window: the mask (used with block sizes).
        dtype: the inputs' dtype name: the stored P has it.
    Returns:
        RecomputeCost (FLOPs; bytes), with memory_saved_bytes, extra_backward_fraction, extra_training_fraction.

    Example:
        >>> c = recompute_cost(4096, 4096, 64, heads=8)
        >>> c.extra_flops == 2 * 4096 * 4096 * 64 * 8, c.extra_backward_fraction, round(c.extra_training_fraction, 4)
        (True, 0.25, 0.1667)
        >>> c.memory_saved_bytes == 8 * 4096 * 4096 * 4 - 8 * 4096 * 4  # P (fp32) minus L
        True
    """
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {tuple(DTYPE_BYTES)}, got {dtype!r}.")
    forward = attention_flops(n_q, n_k, d, batch=batch, heads=heads, block_q=block_q, block_k=block_k,
                              causal=causal, window=window)
    per_matmul = forward // MATMULS_FORWARD  # FLOPs of one (scores x d) matmul over the computed scores
    stored, recomputed = MATMULS_BACKWARD_STORED_P * per_matmul, MATMULS_BACKWARD * per_matmul
    return RecomputeCost(forward, stored, recomputed, recomputed - stored,
                         batch * heads * n_q * n_k * DTYPE_BYTES[dtype], batch * heads * n_q * LSE_BYTES)


def recompute_table(ns: Iterable[int], d: int, *, batch: int = 1, heads: int = 1, block_q: int | None = None,
                    block_k: int | None = None, causal: bool = False, window: Window = None,
                    dtype: str = "float32") -> pd.DataFrame:
    """recompute_cost at each N (N_q = N_k = N), as a tidy table for the Training view.

    Returns:
        DataFrame, one row per N: N, forward_flops, backward_flops_stored_p, backward_flops, extra_flops,
        stored_p_bytes, stored_lse_bytes, memory_saved_bytes, extra_backward_fraction, extra_training_fraction.

    Example:
        >>> recompute_table([256, 512], 64)["memory_saved_bytes"].tolist()  # fp32 P minus L, per N
        [261120, 1046528]
    """
    rows = []
    for n in ns:
        c = recompute_cost(n, n, d, batch=batch, heads=heads, block_q=block_q, block_k=block_k, causal=causal,
                           window=window, dtype=dtype)
        rows.append({"N": n, **asdict(c), "memory_saved_bytes": c.memory_saved_bytes,
                     "extra_backward_fraction": c.extra_backward_fraction,
                     "extra_training_fraction": c.extra_training_fraction})
    return pd.DataFrame(rows)
