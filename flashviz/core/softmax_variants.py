"""The online-softmax step's two numerics options: FlashAttention-4's conditional rescale and P rounded to a
low-precision dtype before the P V matmul.

References:
    FlashAttention-4 (flash-attn's CuTe-DSL kernels for Blackwell, flash_attn/cute/softmax.py, SoftmaxSm100):
        the running row max moves only when a tile's max exceeds it by more than a threshold tau (8 in log2 units for
        16-bit inputs); otherwise the tile is exponentiated against the stale max and neither l_i nor the output
        accumulator is rescaled. The final normalisation divides by an l_i taken against the same stale max, so O
        and the logsumexp L = m_stale + log l are exact; only the rescales (one multiply of the Br x d accumulator per
        row and tile, on the critical path of a Blackwell kernel) become rare.
    FlashAttention-2 (Dao, 2023), Section 3.1 and its CUDA kernels (softmax.h), FlashAttention-3 (Shah et al., 2024):
        P~_ij = exp2(S_ij - m_i) is computed in fp32, its row sum is added to l_i in fp32, and only then is P~_ij
        converted to the 16-bit (or FP8) type the tensor cores multiply with V. So l_i sums the UNROUNDED P~, and the
        rounding of P enters the output only through P~ V.

Legend: BH rows of independent (batch, head) pairs (the grouped rows of flash.py), Br rows, Bc columns of a tile.
All scores and maxima are in log2 units (the kernels' base-2 softmax): S_ij = scale log2(e) q.k.

The rule, per row, with m_old the running max and m~ = rowmax(S_ij) the tile's max:
    m_new = m~ if m~ - m_old > tau else m_old        (tau = 0: m_new = max(m_old, m~), the classic update)
    P~_ij = 2^(S_ij - m_new) <= 2^tau,  alpha = 2^(m_old - m_new),  l_new = alpha l_old + rowsum(P~_ij).
The first tile that shows a row a key always moves its max (m_old = -inf, so m~ - m_old = +inf > tau): it SETS the
max and, having nothing accumulated to rescale, does not count as a rescale (as flash-attn's is_first tile and
this repo's row inspector count it). A rescale is a tile at which a row with a finite max moves it.

Bounds: with tau > 0 every P~ element is at most 2^tau (256 for tau = 8), so l_i and the unnormalised accumulator
grow at most 2^tau times larger than with tau = 0 (l_i <= 2^tau N_k, |acc_i| <= 2^tau N_k max|v|). The kernels keep
both in fp32 (max ~3.4e38, 2^128) or fp64, so a factor of 2^8 costs nothing in range or in relative precision
(floating point is scale-free), and P~ <= 256 fits fp16 (max 65504), bf16 and FP8 e4m3 (max 448). The final
division by l_i uses the same stale max as the accumulator, so O = acc / l and L = m_stale + log2 l (in natural
log after * ln 2) equal the tau = 0 values up to fp32 rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Real

import torch

from flashviz.core.softmax import NEG_INF, softmax_step_to

# the step's signature, shared with softmax.online_softmax_step: (S_ij, m_i, l_i, partial) -> (P~, m_new, l_new, alpha)
SoftmaxStep = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool],
                       tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]
FA4_THRESHOLD = 8.0  # log2 units: FlashAttention-4's rescale threshold for 16-bit inputs (a factor 2^8 = 256)


def validate_rescale_threshold(tau: object) -> float:
    """Return tau as a float >= 0 and finite, or raise.

    Example:
        >>> validate_rescale_threshold(8)
        8.0
    """
    if isinstance(tau, bool) or not isinstance(tau, Real):
        raise TypeError(f"rescale_threshold must be a real number >= 0 (log2 units), got {tau!r} "
                        f"({type(tau).__name__}). Use 0.0 for the classic update, 8.0 for FlashAttention-4's rule.")
    value = float(tau)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"rescale_threshold must be finite and >= 0 (log2 units: the running max moves only when a "
                         f"tile's max exceeds it by more than this), got {tau}. Use 0.0 for the classic update, "
                         f"8.0 for FlashAttention-4's rule (P~ <= 2^8 = 256).")
    return value


def validate_p_dtype(p_dtype: object) -> torch.dtype | None:
    """Return p_dtype if it is None or a floating torch.dtype (bf16, fp16, the float8 types, ...), or raise.

    Example:
        >>> validate_p_dtype(torch.bfloat16)
        torch.bfloat16
    """
    if p_dtype is None:
        return None
    if not isinstance(p_dtype, torch.dtype):
        raise TypeError(f"p_dtype must be a torch.dtype such as torch.bfloat16, or None (keep the accumulator's "
                        f"dtype), got {p_dtype!r} ({type(p_dtype).__name__}).")
    if not p_dtype.is_floating_point:
        raise TypeError(f"p_dtype must be a floating dtype (torch.bfloat16, torch.float16, torch.float8_e4m3fn, "
                        f"torch.float8_e5m2), got {p_dtype}: P~ holds probabilities in [0, 2^tau], which an integer "
                        f"or complex type cannot round to.")
    return p_dtype


def conditional_softmax_step(S_ij: torch.Tensor, m_i: torch.Tensor, l_i: torch.Tensor, partial: bool,
                             tau: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One tile of the online softmax with FlashAttention-4's conditional rescale (base 2, log2 units).

    Args:
        S_ij: (BH, Br, Bc) scores in log2 units, -inf where masked; overwritten by P~_ij.
        m_i: (BH, Br) running (possibly stale) row max, -inf for rows that have seen no visible key yet.
        l_i: (BH, Br) running row sum relative to m_i.
        partial: whether a whole row of S_ij may be -inf (masked elements, or a score_mod).
        tau: the threshold in log2 units, >= 0; 0 gives the classic update m_new = max(m_i, rowmax(S_ij)).
    Returns:
        P~_ij (BH, Br, Bc) in S_ij's storage, each <= 2^tau; m_new (BH, Br); l_new (BH, Br); alpha (BH, Br) =
        2^(m_i - m_new), exactly 1 for the rows whose max did not move.

    Example:
        >>> S = torch.tensor([[[3.0, 1.0]]])  # one row: the tile's max 3 is 3 above the running max 0
        >>> P, m, l, alpha = conditional_softmax_step(S, torch.zeros(1, 1), torch.ones(1, 1), False, tau=8.0)
        >>> m.item(), alpha.item(), P.tolist()  # stale max kept: P~ = 2^(S - 0) = 8 and 2, nothing rescaled
        (0.0, 1.0, [[[8.0, 2.0]]])
    """
    m_tile = S_ij.amax(dim=-1)  # (BH, Br) the tile's row max m~_ij
    # differs from online_softmax_step in the max alone (FA4): it moves only by more than tau; m_i = -inf moves
    # (+inf > tau); -inf - (-inf) = NaN compares False: stays
    m_new = torch.where(m_tile - m_i > tau, m_tile, m_i)  # (BH, Br)
    # P~_ij = 2^(S_ij - m_new) <= 2^tau; alpha is 1 where the max stayed, < 1 where it moved, 0 on the first key
    P_ij, l_new, alpha = softmax_step_to(S_ij, m_i, l_i, m_new, partial)  # (BH, Br, Bc), (BH, Br), (BH, Br)
    return P_ij, m_new, l_new, alpha


def round_p(P_ij: torch.Tensor, p_dtype: torch.dtype) -> torch.Tensor:
    """P~_ij rounded to p_dtype (nearest, saturating at its largest finite value, as GPU conversions with satfinite
    do), returned in P_ij's dtype so the P V matmul runs on exactly the values a low-precision tensor core would see.

    Args:
        P_ij: (BH, Br, Bc) unnormalised probabilities, >= 0.
        p_dtype: the floating dtype to round to.
    Returns:
        (BH, Br, Bc) tensor in P_ij's dtype.

    Example:
        >>> round_p(torch.tensor([1 / 3, 1000.0]), torch.float8_e4m3fn).tolist()  # 3 mantissa bits; max 448
        [0.34375, 448.0]
    """
    top = torch.finfo(p_dtype).max
    return P_ij.clamp(max=top).to(p_dtype).to(P_ij.dtype)


def to_input_dtype(P_ij: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """P~_ij rounded to the inputs' dtype and back to its own: the values a bf16 / fp16 tensor core multiplies with
    V in a GPU kernel whose scores and row sums stay fp32 (Flash-Decoding's paths). The same tensor when the dtypes
    agree (fp32, fp64), so fp32 runs are unchanged bit for bit. P~ <= 1 here, so no saturation (unlike round_p).

    Example:
        >>> to_input_dtype(torch.tensor([1 / 3]), torch.bfloat16).item()  # 8 significant bits
        0.333984375
    """
    return P_ij if dtype == P_ij.dtype else P_ij.to(dtype).to(P_ij.dtype)


def make_softmax_step(tau: object, p_dtype: object) -> SoftmaxStep | None:
    """The kernels' softmax step for the options, validated here: None for the defaults (tau = 0, p_dtype None), so
    that the default path runs softmax.online_softmax_step with no extra op per tile; else the conditional step, with
    P~ rounded to p_dtype AFTER its row sum has been added to l (l sums the unrounded P~, as GPU kernels do).

    Args:
        tau: rescale threshold in log2 units, >= 0 (checked by validate_rescale_threshold).
        p_dtype: dtype P~ is rounded to before P V, or None (checked by validate_p_dtype).
    Returns:
        A SoftmaxStep, or None for the default step.

    Example:
        >>> make_softmax_step(0.0, None) is None
        True
        >>> step = make_softmax_step(0.0, torch.bfloat16)
        >>> P, m, l, _ = step(torch.tensor([[[0.0, -1.58]]]), torch.full((1, 1), NEG_INF), torch.zeros(1, 1), False)
        >>> P.tolist(), round(l.item(), 4)  # 2^-1.58 = 0.3345 rounds to bf16's 0.333984375; l keeps 1.3345
        ([[[1.0, 0.333984375]]], 1.3345)
    """
    tau, p_dtype = validate_rescale_threshold(tau), validate_p_dtype(p_dtype)
    if tau == 0.0 and p_dtype is None:
        return None

    def step(S_ij: torch.Tensor, m_i: torch.Tensor, l_i: torch.Tensor,
             partial: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        P_ij, m_new, l_new, alpha = conditional_softmax_step(S_ij, m_i, l_i, partial, tau)  # l_new: unrounded P~
        if p_dtype is not None:
            P_ij = round_p(P_ij, p_dtype)  # (BH, Br, Bc) what a bf16 / fp16 / FP8 tensor core multiplies with V
        return P_ij, m_new, l_new, alpha

    return step


def rescaled_rows(m_old: torch.Tensor, m_new: torch.Tensor) -> torch.Tensor:
    """Which rows rescaled at a tile: their max was finite before and moved (the first visible key sets the max and
    is not a rescale). m_old, m_new: (..., Br) running maxima before and after the tile; returns (..., Br) bool.

    Example:
        >>> rescaled_rows(torch.tensor([NEG_INF, 1.0, 1.0]), torch.tensor([2.0, 1.0, 3.0])).tolist()
        [False, False, True]
    """
    return (m_new > m_old) & (m_old > NEG_INF)
