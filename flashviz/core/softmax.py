"""The online softmax in base 2: one tile's step, written once for every kernel that has one, and its constants.

References:
    FlashAttention (Dao et al., 2022), Algorithm 1 lines 9-11, and FlashAttention-2 (Dao, 2023), Algorithm 1 line 8:
        a row's softmax is built tile by tile from a running max m_i and a running sum l_i relative to it; every
        time the max moves, what was accumulated against the old one is rescaled by alpha = e^(m_old - m_new).
    Milakov and Gimelshein, "Online normalizer calculation for softmax" (2018): the same recurrence.
    FlashAttention-2's and Triton's kernels: the softmax runs in base 2. Q is pre-scaled by scale * log2(e), so
        scores S_ij and maxima m_i are in log2 units and P~_ij = 2^(S_ij - m_i), the same number as
        e^(scale q.k - m) but cheaper (exp2 is a native instruction on GPUs, ~3x cheaper than exp on CPU).

Who runs this step: both loop orders of the tiled forward (flashviz.core.flash), FlashAttention-4's conditional
rescale (flashviz.core.softmax_variants, which moves the max differently and says so), FlashAttention-3's FP8 forward
(flashviz.core.fp8) and Flash-Decoding's split partials (flashviz.core.decode, flashviz.core.decode_layouts).

Legend: BH rows of independent (batch, head) pairs, Br rows, Bc columns of a tile; any leading axes broadcast.
"""

from __future__ import annotations

import torch

NEG_INF = float("-inf")  # the score of a hidden key, and the running max of a row that has seen no key yet
LOG2_E = 1.4426950408889634  # 1/ln(2): e^x = 2^(x log2 e); natural-unit scores times this are log2 units
LN_2 = 0.6931471805599453  # ln(2): converts base-2 maxima and logsumexps back to natural log


def online_softmax_step(S_ij: torch.Tensor, m_i: torch.Tensor, l_i: torch.Tensor,
                        partial: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One tile of the online softmax, in base 2: fold the scores S_ij into the running row max m_i and sum l_i.

    FA1 Algorithm 1 lines 9-11 and FA2 Algorithm 1 line 8, written once for both loop orders:
        m_new = max(m_i, rowmax(S_ij));  P~_ij = 2^(S_ij - m_new);  alpha = 2^(m_i - m_new);
        l_new = alpha l_i + rowsum(P~_ij).
    FA1 writes the tile's part as 2^(m~_ij - m_new) rowsum(2^(S_ij - m~_ij)) with m~_ij = rowmax(S_ij); that is the
    same number, computed here in one exponential instead of two. The caller rescales its output accumulator by
    alpha and adds P~_ij V_j.

    Args:
        S_ij: (..., Br, Bc) scores in log2 units, -inf where masked; overwritten by P~_ij (no second tile buffer).
            Rows are independent: with grouped heads they are the Br G rows of flash.group_rows' layout.
        m_i: (..., Br) running row max (log2 units), -inf for rows that have seen no visible key yet.
        l_i: (..., Br) running row sum relative to m_i, 0 for those rows.
        partial: whether a whole row of S_ij may be -inf (masked elements, or a score_mod); only then is the
            -inf guard paid for.
    Returns:
        P~_ij (..., Br, Bc) in S_ij's storage, m_new (..., Br), l_new (..., Br), alpha (..., Br) = 2^(m_i - m_new),
        the factor that rescales state accumulated against the old max (0 for a row's first visible key).

    Example:
        >>> S = torch.tensor([[[1.0, 3.0]]])  # one row, one tile: the max moves from 2 to 3
        >>> P, m, l, alpha = online_softmax_step(S, torch.tensor([[2.0]]), torch.tensor([[1.0]]), partial=False)
        >>> P.tolist(), m.item(), l.item(), alpha.item()  # l = 2^-1 * 1 + (2^-2 + 2^0)
        ([[[0.25, 1.0]]], 3.0, 1.75, 0.5)
    """
    m_new = torch.maximum(m_i, S_ij.amax(dim=-1))  # (..., Br)
    P_ij, l_new, alpha = softmax_step_to(S_ij, m_i, l_i, m_new, partial)
    return P_ij, m_new, l_new, alpha


def softmax_step_to(S_ij: torch.Tensor, m_i: torch.Tensor, l_i: torch.Tensor, m_new: torch.Tensor,
                    partial: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The online-softmax step against a new row max the caller chose: online_softmax_step's rule (m_new = max(m_i,
    rowmax(S_ij))) or FlashAttention-4's (softmax_variants.conditional_softmax_step). Arguments as there, m_new
    (..., Br) in log2 units; returns P~_ij (..., Br, Bc) in S_ij's storage, l_new (..., Br) and alpha (..., Br).

    Example:
        >>> P, l, alpha = softmax_step_to(torch.tensor([[1.0, 3.0]]), torch.tensor([2.0]), torch.tensor([1.0]),
        ...                               torch.tensor([2.0]), partial=False)  # a stale max: 2, not 3
        >>> P.tolist(), l.item(), alpha.item()  # P~ may exceed 1 against a stale max: 2^(3 - 2) = 2
        ([[0.5, 2.0]], 3.5, 1.0)
    """
    # -inf guard: a row that has seen no visible key has m_new = -inf, and S_ij - m_new would be -inf - (-inf) = NaN.
    # Subtracting 0 instead gives P~ = 2^-inf = 0 and alpha = 0, so the row's l and O stay 0.
    m_safe = m_new.masked_fill(m_new == NEG_INF, 0.0) if partial else m_new  # (..., Br)
    P_ij = torch.exp2(S_ij.sub_(m_safe.unsqueeze(-1)), out=S_ij)  # (..., Br, Bc) P~_ij = 2^(S_ij - m_new), in place
    alpha = torch.exp2(m_i - m_safe)  # (..., Br) 2^(m_i - m_new)
    l_new = alpha * l_i + P_ij.sum(dim=-1)  # (..., Br)
    return P_ij, l_new, alpha


def finite(x: torch.Tensor) -> torch.Tensor:
    """-inf -> 0, so that 2^(x - max) or e^(x - max) stays 0 (not NaN) for rows that see no key.

    Example:
        >>> finite(torch.tensor([NEG_INF, 1.5])).tolist()
        [0.0, 1.5]
    """
    return torch.where(x == NEG_INF, torch.zeros((), dtype=x.dtype, device=x.device), x)

