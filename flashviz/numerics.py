"""Numerics of attention kernels: the error measures against a float64 reference, inputs with the outlier features
of real language models, and, for the numerics lab's callers, FlashAttention-3's FP8 forward (the kernel lives in
flashviz.core.fp8; its names are importable from here as well: fp8_attention, quantize_blocks, hadamard_matrix,
random_rotation, fp8_dtype, P_OFFSET_LOG2).

References:
    FlashAttention-3 (Shah et al., 2024), Section 4.3 "Numerical error validation": the error as an RMSE against a
        float64 reference, on inputs N(0, 1) plus rare N(0, 10^2) outliers. The paper's FP8 RMSE on inputs with
        outliers: 2.4e-2 without incoherent processing, 9.1e-3 with it.

Legend: B batch, H query heads, H_kv K/V heads (dividing H), N_q / N_k query / key lengths, d head dimension.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

import torch

from flashviz.core.fp8 import (  # the FP8 kernel's public names, importable from here as before
    P_OFFSET_LOG2,
    fp8_attention,
    fp8_dtype,
    hadamard_matrix,
    quantize_blocks,
    random_rotation,
)

__all__ = ["OUTLIER_CHANNELS", "OUTLIER_KINDS", "OUTLIER_SCALE", "P_OFFSET_LOG2", "ErrorStats", "error_stats",
           "fp8_attention", "fp8_dtype", "hadamard_matrix", "make_inputs", "quantize_blocks", "random_rotation"]

OUTLIER_CHANNELS = 4  # features of q and k scaled up in make_inputs(outliers=True), as a few LLM channels are
OUTLIER_SCALE = 4.0  # those features of q AND of k are 4x the rest, so their products q_c k_c are 16x: the logits'
#                      std is ~4 at d = 64, as in trained models. 20x on both (products 400x) makes the logits' std
#                      ~100 and every softmax row one-hot, where FP8 fails with or without Hadamard.


@dataclass(frozen=True)
class ErrorStats:
    """How far an output is from a float64 reference, as plain numbers."""

    max_abs: float  # max |out - ref| over every element
    rmse: float  # sqrt(mean((out - ref)^2)), FA3's measure
    rel_rmse: float  # rmse / sqrt(mean(ref^2)): the error relative to the output's size (0 / 0 -> 0)
    row_max_abs: tuple[float, ...]  # per query row i: max |out - ref| over batch, heads and d (length N_q)


def error_stats(out: torch.Tensor, ref: torch.Tensor) -> ErrorStats:
    """The error of out against ref (both (B, H, N_q, d)), computed in float64.

    Example:
        >>> ref = torch.zeros(1, 1, 2, 2, dtype=torch.float64)
        >>> e = error_stats(torch.tensor([[[[0.0, 3.0], [4.0, 0.0]]]]), ref)
        >>> e.max_abs, e.rmse, e.row_max_abs
        (4.0, 2.5, (3.0, 4.0))
    """
    if out.shape != ref.shape:
        raise ValueError(f"out and ref must have one shape, got {tuple(out.shape)} and {tuple(ref.shape)}.")
    diff = (out.double() - ref.double()).abs()  # (B, H, N_q, d)
    if diff.numel() == 0:
        return ErrorStats(0.0, 0.0, 0.0, (0.0,) * out.shape[2])
    rmse = diff.pow(2).mean().sqrt().item()
    size = ref.double().pow(2).mean().sqrt().item()
    rows = diff.amax(dim=(0, 1, 3)) if diff.shape[0] * diff.shape[1] * diff.shape[3] else torch.zeros(out.shape[2])
    return ErrorStats(diff.max().item(), rmse, rmse / size if size > 0 else 0.0, tuple(rows.tolist()))


OUTLIER_KINDS = ("channels", "sparse")  # a few features x20 in q and k; FA3's 0.1% of entries + N(0, 10^2)


def make_inputs(b: int, h: int, n_q: int, n_k: int, d: int, *, dtype: torch.dtype = torch.float32,
                outliers: bool | str = False, seed: int = 0, h_kv: int | None = None,
                outlier_scale: float = OUTLIER_SCALE) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded standard-normal q (b, h, n_q, d) and k, v (b, h_kv, n_k, d), made in float64, then cast to dtype.

    Args:
        b, h, n_q, n_k, d: the shapes.  h_kv: K/V heads (default h).
        dtype: the returned dtype (float8 dtypes too: torch's own rounding).
        outliers: False; True or "channels": OUTLIER_CHANNELS features of q and k (the same ones, as in LLMs)
            times outlier_scale; "sparse": FA3's Section 4.3 inputs, N(0, 1) + N(0, 10^2) Bernoulli(0.001) in q, k, v.
        seed: the generator's seed (and the outlier channels').
        outlier_scale: the factor of the outlier channels (> 0).
    Returns:
        q, k, v.

    Example:
        >>> q, k, v = make_inputs(1, 1, 512, 512, 64, outliers=True)
        >>> (q.abs().amax(dim=(0, 1, 2)) > 6).sum().item()  # 4 of 64 features are 4x larger (|x| up to ~4 x 4)
        4
    """
    kind = "channels" if outliers is True else outliers
    if kind not in (False, *OUTLIER_KINDS):
        raise ValueError(f"outliers must be False, True (= 'channels') or one of {OUTLIER_KINDS}, got {outliers!r}.")
    if isinstance(outlier_scale, bool) or not isinstance(outlier_scale, Real) or not 0 < outlier_scale < math.inf:
        raise ValueError(f"outlier_scale must be a finite number > 0, got {outlier_scale!r}.")
    g = torch.Generator().manual_seed(seed)
    h_kv = h if h_kv is None else h_kv
    q = torch.randn(b, h, n_q, d, generator=g, dtype=torch.float64)
    k, v = (torch.randn(b, h_kv, n_k, d, generator=g, dtype=torch.float64) for _ in range(2))
    if kind == "channels":
        ch = torch.randperm(d, generator=g)[:OUTLIER_CHANNELS]  # the outlier features, shared by q and k
        q[..., ch] *= outlier_scale
        k[..., ch] *= outlier_scale
    elif kind == "sparse":
        q, k, v = (x + 10.0 * torch.randn(x.shape, generator=g, dtype=torch.float64)
                   * (torch.rand(x.shape, generator=g, dtype=torch.float64) < 1e-3) for x in (q, k, v))
    return tuple(x.to(dtype) for x in (q, k, v))
