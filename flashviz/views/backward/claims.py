"""The Backward view's claims, each a function that returns the number the claim states, so the page, its lesson step
and a test can all call the same check.

    dq_runs                 the real backward run twice on the same inputs (CPU): are the two dQ bitwise equal? And
                            each dQ_i's per-column contributions dS_ij K_j added in Algorithm 2's order and in reverse
                            (as atomic adds from racing thread blocks may): how many entries of dQ change?
    traffic_saving          standard attention's backward HBM bytes over the tiled backward's (atomic dQ)
    max_row_sum_error       how far the recomputed rows of P = exp(S - L) are from summing to 1 (the real kernel)
    deterministic_extra_flops   the FLOPs the deterministic second pass adds, as a fraction of the atomic backward's

LESSON holds the settings the lesson's step uses; every function takes them as keyword arguments.

References: Dao, FlashAttention-2 (2023), Algorithm 2 (dQ_i += dS_ij K_j, atomic adds across K/V blocks) and
Section 3.1; Dao et al., FlashAttention (2022), Section 3.1 (recomputation from O and the logsumexp L).
Legend: N sequence length (N_q = N_k), d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flashviz._lazy import lazy_import
from flashviz.core.tiling import tile_schedule, visible_mask
from flashviz.core.validate import Window
from flashviz.views.backward.data import backward_trace, dq_comparison, random_inputs
from flashviz.vocab import DTYPE_BYTES, KV_OUTER, Q_OUTER

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")  # dq_runs and max_row_sum_error only: the other claims are arithmetic

import math

from flashviz.views.claim import Result

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.views.backward.settings import BackwardSettings


LESSON = {"n": 32, "d": 16, "block": 8, "causal": True}  # the lesson step's map: 4 x 4 tiles, 10 computed


LESSON_SCALE = {"n": 4096, "d": 64, "block": 128, "causal": True}  # a GPU's sizes, for the traffic claim


@dataclass(frozen=True)
class DqRuns:
    """Two runs of the real backward and one reordered sum of dQ's contributions, on the same random inputs."""

    n: int  # N
    d: int  # head dimension
    block_q: int  # Br
    block_k: int  # Bc
    causal: bool  # top-left causal mask
    window: Window  # sliding window or None
    dtype: str  # the inputs' dtype name
    seed: int  # of the random q, k, v, dO
    values: int  # entries of dQ compared (N d: one head)
    run_differing: int  # entries whose bits differ between the two runs of the kernel (0: bitwise equal)
    max_contributors: int  # most K/V blocks adding into one dQ_i: on a GPU, thread blocks racing to add
    reordered_differing: int  # entries that change when each dQ_i's contributions are summed in reverse order
    reordered_max_abs: float  # the largest such change
    dq_max_abs: float  # the largest |dQ| entry, for scale

    @property
    def bitwise_equal(self) -> bool:
        """The two runs gave the same dQ, bit for bit."""
        return self.run_differing == 0


def _differing(a: torch.Tensor, b: torch.Tensor) -> int:
    """Entries of a and b (same shape and dtype) whose bytes differ: a bitwise comparison (NaN and -0.0 included)."""
    size = a.element_size()
    return int((a.contiguous().view(torch.uint8).reshape(-1, size) !=
                b.contiguous().view(torch.uint8).reshape(-1, size)).any(-1).sum())


def _contributions(q, k, v, dO, O, L, block_q: int, block_k: int, causal: bool, window: Window) -> list[list]:
    """Per Q block i, its tiles' contributions scale dS_ij K_j to dQ_i, in Algorithm 2's order (j ascending).

    q, k, v, dO, O: (N, d) of head 0 in the accumulator dtype; L: (N,) logsumexp. Written from the equations, not
    through the kernel: P_ij = exp(S_ij - L_i), dP_ij = dO_i V_j^T, dS_ij = P_ij * (dP_ij - D_i)."""
    n, d = q.shape
    scale = d ** -0.5
    D = (dO * O).sum(-1)  # (N,) D_i = rowsum(dO_i * O_i)
    idx = torch.arange(n)
    vis = visible_mask(idx, idx, causal=causal, window=window)  # (N, N) bool, or None: nothing masked
    parts: list[list] = [[] for _ in range(-(-n // block_q))]
    for t in tile_schedule(n, n, block_q, block_k, causal=causal, window=window, loop_order=KV_OUTER).computed():
        rows, cols = slice(t.q_start, t.q_end), slice(t.k_start, t.k_end)
        P = torch.exp(q[rows] @ k[cols].T * scale - L[rows, None])  # (Br, Bc)
        if vis is not None:
            P = P.masked_fill(~vis[rows, cols], 0.0)  # (Br, Bc); hidden keys (and rows that see none) add nothing
        dS = P * (dO[rows] @ v[cols].T - D[rows, None])  # (Br, Bc)
        parts[t.q_block].append(dS @ k[cols] * scale)  # (Br, d)
    return parts


def _summed(parts: list[list], order: int) -> torch.Tensor:
    """dQ with each row block's contributions added one at a time (as atomic adds would), in their order (1) or
    reversed (-1); row blocks that no tile reaches are left out (both orders alike)."""
    blocks = []
    for adds in parts:
        if adds:
            total = torch.zeros_like(adds[0])  # (Br, d)
            for c in adds[::order]:
                total = total + c
            blocks.append(total)
    return torch.cat(blocks) if blocks else torch.zeros(0)


def dq_runs(n: int, d: int, block_q: int, block_k: int, *, causal: bool = False, window: Window = None,
            dtype: str = "float32", seed: int = 0) -> DqRuns:
    """Run the tiled backward twice on the same inputs and compare dQ bit for bit; then add each dQ_i's per-column
    contributions in reverse order and count the entries that change.

    Args:
        n, d: N and the head dimension (one head, batch 1, CPU).  block_q, block_k: Br, Bc.
        causal, window: the mask.  dtype: the inputs' dtype name (sums in fp32; fp64 for float64).  seed: inputs.
    Returns:
        DqRuns: .bitwise_equal for the two runs; .reordered_differing for the reordered sum.

    Example:
        >>> r = dq_runs(32, 16, 8, 8, causal=True)
        >>> r.bitwise_equal, r.values, r.max_contributors, r.reordered_differing > 0
        (True, 512, 4, True)
    """
    from flashviz.core.backward import flash_attention_backward  # the kernels (torch): only here
    from flashviz.core.flash import flash_attention_forward

    q, k, v, dO = random_inputs(n, d, 1, 1, dtype, seed)
    tiles = {"block_q": block_q, "block_k": block_k, "causal": causal, "window": window}
    O, L = flash_attention_forward(q, k, v, loop_order=Q_OUTER, return_lse=True, **tiles)
    first, second = (flash_attention_backward(dO, q, k, v, O, L, **tiles)[0] for _ in range(2))
    acc = torch.float64 if dtype == "float64" else torch.float32
    parts = _contributions(*(x[0, 0].to(acc) for x in (q, k, v, dO, O, L)), block_q, block_k, causal, window)
    forward, backward = _summed(parts, 1), _summed(parts, -1)
    changed = _differing(forward, backward)
    return DqRuns(n, d, block_q, block_k, causal, window, dtype, seed, first.numel(), _differing(first, second),
                  max((len(p) for p in parts), default=0), changed,
                  float((forward - backward).abs().max()) if forward.numel() else 0.0,
                  float(first.abs().max()) if first.numel() else 0.0)


def traffic_saving(*, n: int, d: int, block: int, causal: bool, window: Window = None, heads: int = 1,
                   dtype: str = "float32") -> float:
    """How many times more HBM traffic standard attention's backward moves than the tiled backward (atomic dQ):
    above 1 the tiled backward moves less.

    Example:
        >>> round(traffic_saving(**LESSON_SCALE), 2), round(traffic_saving(**LESSON), 2)
        (6.2, 1.27)
    """
    c = dq_comparison(n, d, block, block, causal=causal, window=window, heads=heads, dtype_bytes=DTYPE_BYTES[dtype])
    return c.standard_bytes / c.atomic_bytes


def max_row_sum_error(*, n: int, d: int, block: int, causal: bool, window: Window = None,
                      dtype: str = "float32", seed: int = 0) -> float:
    """The largest |sum over a row's tiles of the recomputed P_ij's row sum - 1| in the real kernel's backward.

    Example:
        >>> max_row_sum_error(**LESSON) < 1e-6
        True
    """
    return backward_trace(n, d, block, block, causal=causal, window=window, dtype=dtype, seed=seed).max_row_sum_error


def deterministic_extra_flops(*, n: int, d: int, block: int, causal: bool, window: Window = None) -> float:
    """The FLOPs deterministic dQ's second pass adds, as a fraction of the atomic backward's (S_ij and dP_ij
    computed once more per tile: 7 matmuls instead of 5).

    Example:
        >>> deterministic_extra_flops(**LESSON)
        0.4
    """
    c = dq_comparison(n, d, block, block, causal=causal, window=window)
    return c.extra_flops / c.atomic_flops


ROW_SUM_TOL = 1e-6  # |sum of a recomputed row of P - 1| allowed in float32: "one part in a million"


DETERMINISTIC_EXTRA = 0.4  # the second pass's 2 extra matmuls per tile over the atomic backward's 5


def backward_recompute(s: BackwardSettings) -> Result:
    """The Backward view's story at the step's map: P recomputed from L sums to 1, the traffic saved at a GPU's
    sizes, and what deterministic dQ costs where atomic adds make the last bits vary.

    Args:
        s: the step's settings (the view's own N, d, tile size and causal mask for the map; the sidebar's N, d and
            square tile size for the traffic at scale).
    Returns:
        Result: row_err (largest |row sum - 1|), n, d, block and saving (standard / tiled backward HBM bytes at the
        sidebar's sizes, the view's causal mask), extra (fraction of FLOPs the second pass adds), reordered (dQ
        entries that change when the columns' adds come in another order), and for the slide's picture traffic (the
        DqComparison whose bytes give the saving, as traffic_saving compares them); holds when the rows sum to 1 within
        ROW_SUM_TOL, the tiled backward moves less, the second pass costs DETERMINISTIC_EXTRA, this CPU's dQ is
        bitwise the same twice and a reordered sum changes some last bits.

    Example:
        >>> from flashviz.lesson.steps import INTRO
        >>> r = backward_recompute(next(st for st in INTRO.steps if st.view == "backward").view_settings())
        >>> r.holds, round(r.values["saving"], 1)
        (True, 6.2)
    """
    at = {"n": s.map_n, "d": s.map_d, "block": s.map_block, "causal": s.map_causal}
    row_err = max_row_sum_error(**at)
    traffic = dq_comparison(s.n, s.d, s.br, s.br, causal=s.map_causal, window=s.window, heads=1,
                            dtype_bytes=DTYPE_BYTES["float32"])  # what traffic_saving compares, kept for the slide
    saving = traffic.standard_bytes / traffic.atomic_bytes
    extra = deterministic_extra_flops(**at)
    runs = dq_runs(s.map_n, s.map_d, s.map_block, s.map_block, causal=s.map_causal)
    values = {"n": s.n, "d": s.d, "block": s.br, "saving": saving, "extra": extra,
              "row_err": row_err, "reordered": runs.reordered_differing, "values": runs.values, "traffic": traffic}
    return Result.of(values, {
        "the tiles at scale are not square": s.br != s.bc,
        "a recomputed row of P does not sum to 1": not row_err < ROW_SUM_TOL,
        "the tiled backward moves no less than standard attention's": not saving > 1,
        "the deterministic pass does not cost two matmuls in five": not math.isclose(extra, DETERMINISTIC_EXTRA),
        "two runs of the CPU kernel gave different dQ": not runs.bitwise_equal,
        "adding dQ's contributions in another order changed nothing": runs.reordered_differing == 0})

