"""The lesson's own claim, for its first step: what S = QKᵀ and the softmax are, before any tile (Vaswani et al.,
"Attention Is All You Need", 2017, eq. 1; FlashAttention, Dao et al. 2022, Algorithm 0: standard attention, which
writes S and P to HBM).

    scores_softmax  S = QKᵀ/√d is N × N; each row of P = softmax(S) sums to 1; O = PV is standard attention's output

Imported only when the step's check runs or its slide is drawn (it needs torch); flashviz.lesson.steps stays torch-free.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from flashviz.core.reference import naive_attention
from flashviz.views.claim import Result

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.app.state import Settings

ROW_SUM_TOL = 1e-6  # |sum_j P_ij - 1| allowed in float32 (N terms below 1, each a few ulps off)
OUTPUT_TOL = 1e-5  # largest |O - standard attention's output| allowed in float32
SEED = 0  # the inputs' seed: the row inspector's (flashviz.measure.trace), so both pictures are of the same Q, K, V


def scores_and_weights(n: int, d: int, *, causal: bool = False, seed: int = SEED
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """S = QKᵀ/√d, P = softmax(S) row by row and O = PV of seeded random Q, K, V (one batch, one head, float32).

    Args:
        n: sequence length N.  d: head dimension.  causal: query i sees keys j <= i (the rest of S is -inf, of P 0).
        seed: the generator's seed for Q, K, V in this order.
    Returns:
        (S, P, O): (N, N), (N, N), (N, d).

    Example:
        >>> S, P, O = scores_and_weights(16, 8)
        >>> tuple(S.shape), tuple(O.shape), round(float(P.sum(-1).max()), 5)
        ((16, 16), (16, 8), 1.0)
    """
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, n, d, generator=g) for _ in range(3))  # (1, 1, N, d) each
    s = (q[0, 0] @ k[0, 0].T) / math.sqrt(d)  # (N, N): S = Q Kᵀ / √d
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))  # (N, N): key j > query i hidden
    m = s.amax(-1, keepdim=True)  # (N, 1): each row's max
    e = torch.exp(s - m)  # (N, N)
    p = e / e.sum(-1, keepdim=True)  # (N, N): P = exp(S - m) / l
    return s, p, p @ v[0, 0]  # (N, d): O = P V


def scores_softmax(s: Settings) -> Result:
    """The first step's numbers: how many scores S holds, what each row of P sums to, and that O = PV is standard
    attention's output (flashviz.core.reference.naive_attention on the same inputs).

    Args:
        s: the step's settings (N, d and the causal mask are read).
    Returns:
        Result: n, d, scores (N²), rowsum (the row sum of P farthest from 1), error (largest |O - naive|), S and P (the
        matrices as lists of rows, for the slide's picture); holds when every row sums to 1 within ROW_SUM_TOL and O
        is standard attention's output within OUTPUT_TOL.

    Example:
        >>> from flashviz.lesson.steps import INTRO, step_settings
        >>> r = scores_softmax(step_settings(INTRO.step("scores_softmax")))
        >>> r.holds, r.values["scores"], f"{r.values['rowsum']:.3f}"
        (True, 256, '1.000')
    """
    S, P, O = scores_and_weights(s.n, s.d, causal=s.causal)
    g = torch.Generator().manual_seed(SEED)
    q, k, v = (torch.randn(1, 1, s.n, s.d, generator=g) for _ in range(3))  # (1, 1, N, d) each: the same inputs
    error = float((O - naive_attention(q, k, v, causal=s.causal)[0, 0]).abs().max())
    sums = P.double().sum(-1)  # (N,)
    worst = float(sums[(sums - 1).abs().argmax()])
    values = {"n": s.n, "d": s.d, "scores": s.n * s.n, "rowsum": worst, "error": error, "S": S.tolist(),
              "P": P.tolist()}
    return Result.of(values, {"a row of P does not sum to 1": not abs(worst - 1) <= ROW_SUM_TOL,
                              "O differs from standard attention's output": not error <= OUTPUT_TOL})
