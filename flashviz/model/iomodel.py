"""The IO model: how many elements each attention algorithm moves between HBM and on-chip memory (SRAM).

FlashAttention's argument is about memory traffic, not FLOPs: standard attention writes and re-reads the N x N
matrices S and P, the tiled algorithms never do. This module counts that traffic, tile by tile, with the tile rules
of `tile_schedule` (which tiles a mask skips), so the model, the kernels and the animation cannot disagree.

References:
    Dao et al., FlashAttention (2022): Algorithm 0 (standard attention), Algorithm 1 (tiled, "kv_outer"), Theorem 2
        (Theta(N d + N^2) HBM accesses for standard attention against Theta(N^2 d^2 / M) for FlashAttention, with
        tile sizes Bc = ceil(M / 4d), Br = min(Bc, d) from on-chip memory M).
    Dao, FlashAttention-2 (2023), Algorithm 1 ("q_outer": Q_i loaded once per row of tiles, O and L written once).
    The backward (`backward=True`): FA1 Algorithm 3 (standard) and FA2 Algorithm 2 (tiled), counted in
        flashviz.model.iomodel_backward, atomic or deterministic dQ.

The accounting rules, per (batch, query head), are written out in flashviz.model.iosteps (the forward) and
flashviz.model.iomodel_backward (the backward).

Tile sizes from on-chip memory M (`block_sizes`, used by `hbm_vs_memory`): `fa1_block_sizes` is FA1's rule,
`fa2_block_sizes` the same rule with the two blocks swapped (derived there).

What each curve does as M grows (with Tc = ceil(N / Bc) for kv_outer and Tr = ceil(N / Br) for q_outer, both
    about 4 d N / M, and exact for N divisible by the block):
    naive     flat at 4 N d + 4 N^2 per (B, H): it has no tiles, and a mask changes nothing (it computes every
              score and writes S and P whole).
    kv_outer  falls like 1 / M: 2 N d + N d + 2 N + Tc (3 N d + 4 N) (K, V once; Q, O, l, m once per pass), until
              M >= 4 d N, where one K/V block holds every key (Tc = 1); from there it is flat at 6 N d + 6 N.
    q_outer   falls like 1 / M: N d + 2 N d Tr + N d + N (Q once; K, V once per pass), flat from M >= 4 d N at
              4 N d + N. With each algorithm's own rule, q_outer moves less than kv_outer at every M (2 N d per pass
              against 3 N d + 4 N), about 2/3 of it once both are flat.
    causal    both tiled curves start at about half their unmasked value (a pass only visits the blocks on or
              below the diagonal: (T + 1) / 2 passes' worth instead of T) and fall the same way; the saving shrinks
              as the blocks grow, and from M >= 4 d N, where one block holds every key, nothing can be skipped and
              both meet their unmasked values. A sliding window does the same from a lower start. Naive does not
              move.
    rises     with causal, q_outer can rise by a few percent from one M to the next when Bc does not divide Br:
              row block i then loads K/V up to the next multiple of Bc past the diagonal (masked inside the tile,
              but loaded), and that waste comes and goes as Br grows. When Bc divides Br (M and d powers of two, as
              on the dashboard's grid at d = 64) it does not rise. FA1's rule applied to q_outer, Br = min(Bc, d),
              made it rise for good: Br stays at d while Bc grows, so every row block loads ever more masked keys.
    crossover the tiled curves fall below naive once their passes cost less than writing and reading S and P:
              at N = 4096, d = 64 (fp32 or not: counts are in elements) from M = 2^13 (q_outer) and M = 2^14
              (kv_outer) without a mask; from M = 2^12 and 2^13 with causal.

Legend: N_q, N_k sequence lengths; d head dimension; Br = block_q, Bc = block_k; Tr = ceil(N_q / Br),
Tc = ceil(N_k / Bc); M on-chip memory in elements; B batch; H query heads, H_kv key/value heads.
"""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flashviz._lazy import lazy_import
from flashviz.core.validate import (
    Window,
    validate_block,
    validate_causal,
    validate_length,
    validate_positive,
    validate_window,
)
from flashviz.model.iomodel_backward import (
    backward_band_totals,
    standard_backward_steps,
    tiled_backward_steps,
    validate_dq_mode,
)
from flashviz.model.iosteps import (
    TRACE_COLUMNS,
    Step,
    TraceStep,
    band_totals,
    cumulative,
    naive_steps,
    schedule_of,
    tiled_steps,
)
from flashviz.vocab import ALGORITHM_ALIASES, ALGORITHMS, DQ_ATOMIC, KV_OUTER, NAIVE, Q_OUTER

if TYPE_CHECKING:
    import pandas as pd

    from flashviz.masks import MaskMod
else:
    pd = lazy_import("pandas")  # the DataFrames only: io_cost and io_trace_steps (the tile map's counters) need none

SRAM_OPERAND_BLOCKS = 4  # FA1 Algorithm 1 line 1: Bc = ceil(M / 4d), room for K_j, V_j, Q_i, O_i in M elements


@dataclass(frozen=True)
class IOCost:
    """Modelled HBM traffic and work of one attention call (all batches and heads), forward or backward."""

    algorithm: str  # "naive", "kv_outer" or "q_outer"
    reads: int  # elements read from HBM
    writes: int  # elements written to HBM
    flops: int  # floating-point operations of the matmuls (two forward; softmax not counted)
    dtype_bytes: int  # bytes per element (4 for fp32, 2 for fp16/bf16)
    kv_reads: int = 0  # elements of K and V read (part of reads): what grouped-query attention saves
    kv_writes: int = 0  # elements of dK and dV written (part of writes; backward only), per K/V head
    backward: bool = False  # True: the backward pass (FA1 Algorithm 3 for naive, FA2 Algorithm 2 for the tiled)
    dq_mode: str | None = None  # the tiled backward's dQ: "atomic" or "deterministic"; None otherwise

    @property
    def accesses(self) -> int:
        """Elements moved either way (reads + writes): the quantity of FA1's Theorem 2."""
        return self.reads + self.writes

    @property
    def bytes(self) -> int:
        """Bytes moved: (reads + writes) * dtype_bytes."""
        return self.accesses * self.dtype_bytes

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte moved (the roofline's x axis)."""
        return self.flops / self.bytes if self.bytes else 0.0


def resolve_algorithm(algorithm: object) -> str:
    """Canonical algorithm name: "naive", "kv_outer" or "q_outer" (aliases: flash -> kv_outer, flash2 -> q_outer)."""
    if isinstance(algorithm, str):
        name = ALGORITHM_ALIASES.get(algorithm, algorithm)
        if name in ALGORITHMS:
            return name
    raise ValueError(f"algorithm must be one of {ALGORITHMS} or an alias {sorted(ALGORITHM_ALIASES)}, "
                     f"got {algorithm!r}. 'kv_outer' is FlashAttention-1's loop order, 'q_outer' FlashAttention-2's.")


def validate_heads(heads: object, heads_kv: object) -> tuple[int, int]:
    """(H, H_kv) with H_kv dividing H; heads_kv None means H_kv = H (multi-head attention).

    Example:
        >>> validate_heads(32, 8), validate_heads(4, None)
        ((32, 8), (4, 4))
    """
    heads = validate_positive("heads", heads)
    if heads_kv is None:
        return heads, heads
    heads_kv = validate_positive("heads_kv", heads_kv, "Use heads_kv = heads for MHA, 1 for MQA.")
    if heads % heads_kv:
        divisors = [h for h in range(1, heads + 1) if heads % h == 0]
        raise ValueError(f"heads_kv must divide heads (each K/V head serves heads / heads_kv query heads), got "
                         f"heads={heads}, heads_kv={heads_kv}. Divisors of {heads}: {divisors}.")
    return heads, heads_kv


# The validated arguments of io_cost, io_trace_steps and io_trace (dq_mode None for naive and for the forward).
_Call = namedtuple("_Call", "algorithm n_q n_k d block_q block_k causal window batch heads heads_kv dtype_bytes "
                            "backward dq_mode")


def _validated(algorithm, n_q, n_k, d, block_q, block_k, causal, window, batch, heads, dtype_bytes, heads_kv,
               backward, dq_mode) -> _Call:
    algorithm = resolve_algorithm(algorithm)
    n_q, n_k = validate_length("n_q", n_q), validate_length("n_k", n_k)
    d, batch = validate_positive("d", d), validate_positive("batch", batch)
    dtype_bytes = validate_positive("dtype_bytes", dtype_bytes, "Use 4 for fp32, 2 for fp16/bf16, 8 for fp64.")
    heads, heads_kv = validate_heads(heads, heads_kv)
    block_q, block_k = validate_block("block_q", block_q), validate_block("block_k", block_k)
    if not isinstance(backward, bool):
        raise TypeError(f"backward must be True (the backward pass) or False (the forward), got {backward!r}.")
    dq_mode = validate_dq_mode(dq_mode)
    return _Call(algorithm, n_q, n_k, d, block_q, block_k, validate_causal(causal), validate_window(window), batch,
                 heads, heads_kv, dtype_bytes, backward, dq_mode if backward and algorithm != NAIVE else None)


def _steps(c: _Call, mask_mod: MaskMod | None) -> tuple[Iterator[Step], int]:
    """The call's steps per (batch, head) and the index of the first (-1 for a tiled algorithm's start step)."""
    if c.algorithm == NAIVE:
        return (standard_backward_steps if c.backward else naive_steps)(c.n_q, c.n_k, c.d), 0
    order = KV_OUTER if c.backward else c.algorithm  # Algorithm 2 visits K/V columns whatever the forward's order
    schedule = schedule_of(order, c.n_q, c.n_k, c.block_q, c.block_k, c.causal, c.window, mask_mod, c.batch,
                           c.heads)
    return (tiled_backward_steps(schedule, c.d, c.dq_mode) if c.backward else tiled_steps(schedule, c.d)), -1


def io_cost(algorithm: str, n_q: int, n_k: int, d: int, block_q: int, block_k: int, *, causal: bool = False,
            window: Window = None, batch: int = 1, heads: int = 1, dtype_bytes: int = 4,
            heads_kv: int | None = None, backward: bool = False, dq_mode: str = DQ_ATOMIC,
            mask_mod: MaskMod | None = None) -> IOCost:
    """Modelled HBM reads, writes and FLOPs of one attention forward, or of its backward.

    Args:
        algorithm: "naive" (FA1 Algorithm 0; its backward Algorithm 3), "kv_outer" (FA1 Algorithm 1) or "q_outer"
            (FA2); aliases "flash" and "flash2" name the two tiled ones. Both tiled forwards share one backward,
            FA2 Algorithm 2.
        n_q, n_k: query and key lengths.  d: head dimension.
        block_q, block_k: Br and Bc (ignored by "naive", still validated).
        causal, window: the mask (top-left causal; (left, right) sliding window); skipped tiles move nothing.
        batch, heads: B and H (query heads).  heads_kv: H_kv key/value heads (None: H; GQA: a divisor of H; MQA: 1);
            K/V traffic (and dK/dV's) counts B H_kv times, everything else B H times.
        dtype_bytes: bytes per element, for .bytes.
        backward: count the backward pass instead (flashviz.model.iomodel_backward has its rules).
        dq_mode: the tiled backward's dQ: "atomic" (Algorithm 2) or "deterministic" (a second pass over Q blocks).
        mask_mod: a FlexAttention mask_mod (with causal and window), classified over batch and heads: the tiles it
            skips move nothing (counted tile by tile). Naive computes every score whatever the mask.
    Returns:
        IOCost with .reads, .writes (elements), .bytes, .flops, .accesses, .intensity.

    Example:
        >>> c = io_cost("naive", 1024, 1024, 64, 128, 128)
        >>> c.reads == 3 * 1024 * 64 + 2 * 1024**2, c.writes == 2 * 1024**2 + 1024 * 64
        (True, True)
        >>> io_cost("flash2", 1024, 1024, 64, 128, 128).writes  # N d + N: O and L once
        66560
        >>> io_cost("flash2", 1024, 1024, 64, 1024, 64, heads=8, heads_kv=2).reads  # Q: 8 N d, K and V: 2 x 2 N d
        786432
        >>> fwd, bwd = (io_cost("flash2", 1024, 1024, 64, 128, 128, backward=b) for b in (False, True))
        >>> bwd.flops / fwd.flops, io_cost("naive", 1024, 1024, 64, 128, 128, backward=True).flops / c.flops
        (2.5, 2.0)
    """
    c = _validated(algorithm, n_q, n_k, d, block_q, block_k, causal, window, batch, heads, dtype_bytes, heads_kv,
                   backward, dq_mode)
    if c.algorithm == NAIVE or mask_mod is not None:
        reads_q, reads_kv, writes, writes_kv, flops = (sum(col) for col in _columns(_steps(c, mask_mod)[0]))
    elif c.backward:
        reads_q, reads_kv, writes, writes_kv, flops = backward_band_totals(
            c.n_q, c.n_k, c.d, c.block_q, c.block_k, c.causal, c.window, c.dq_mode)
    else:
        (reads_q, reads_kv, writes, flops), writes_kv = band_totals(
            c.algorithm, c.n_q, c.n_k, c.d, c.block_q, c.block_k, c.causal, c.window), 0
    bh, bh_kv = c.batch * c.heads, c.batch * c.heads_kv
    return IOCost(c.algorithm, reads_q * bh + reads_kv * bh_kv, writes * bh + writes_kv * bh_kv, flops * bh,
                  c.dtype_bytes, reads_kv * bh_kv, writes_kv * bh_kv, c.backward, c.dq_mode)


def _columns(steps: Iterator[Step]) -> list[tuple[int, ...]]:
    """The per-step counts (reads_q, reads_kv, writes, writes_kv, flops) as five columns."""
    return list(zip(*(s[3:] for s in steps), strict=True)) or [(0,)] * 5


def io_trace_steps(algorithm: str, n_q: int, n_k: int, d: int, block_q: int, block_k: int, *,
                   causal: bool = False, window: Window = None, batch: int = 1, heads: int = 1, dtype_bytes: int = 4,
                   heads_kv: int | None = None, backward: bool = False, dq_mode: str = DQ_ATOMIC,
                   mask_mod: MaskMod | None = None) -> Iterator[TraceStep]:
    """Cumulative HBM traffic and FLOPs after each step of the algorithm, one TraceStep at a time: the rows of
    `io_trace`, as plain tuples (no pandas), in one pass over the schedule.

    For the tiled algorithms a step is a tile of `tile_schedule` in visiting order (skipped tiles included: they add
    nothing), preceded by a start row (step -1) holding kv_outer's initial write of O, l, m. For "naive" the steps
    are its three phases S = QK^T, P = softmax(S), O = PV. The last step equals `io_cost(...)`. The arguments are
    validated at the call, before the first step.
    backward=True: the tiled backward's start row is the pre-pass (D = rowsum(dO * O); dQ = 0 when atomic), then
    every tile in Algorithm 2's order (outer loop over K/V blocks), then, for dq_mode="deterministic", every tile
    again in the second pass's order (outer loop over Q blocks); naive's steps are Algorithm 3's five phases.

    Args:
        same as `io_cost`.
    Returns:
        An iterator of TraceStep(step, q_block, k_block, status, reads, writes, flops, hbm_bytes); counts are
        cumulative, in elements (hbm_bytes in bytes), for all B H.

    Example:
        >>> steps = list(io_trace_steps("q_outer", 4, 4, 2, 2, 2, causal=True))
        >>> [(s.status, s.hbm_bytes) for s in steps]  # the skipped tile ends row 0: only O_0 and L_0 are written
        [('start', 0), ('partial', 48), ('skipped', 72), ('full', 120), ('partial', 176)]
        >>> [(s.q_block, s.k_block) for s in io_trace_steps("q_outer", 4, 4, 2, 2, 2, backward=True)][1:]
        [(0, 0), (1, 0), (0, 1), (1, 1)]
    """
    c = _validated(algorithm, n_q, n_k, d, block_q, block_k, causal, window, batch, heads, dtype_bytes, heads_kv,
                   backward, dq_mode)
    steps, first_step = _steps(c, mask_mod)
    return cumulative(steps, first_step, c.batch * c.heads, c.batch * c.heads_kv, c.dtype_bytes)


def io_trace(algorithm: str, n_q: int, n_k: int, d: int, block_q: int, block_k: int, *, causal: bool = False,
             window: Window = None, batch: int = 1, heads: int = 1, dtype_bytes: int = 4,
             heads_kv: int | None = None, backward: bool = False, dq_mode: str = DQ_ATOMIC,
             mask_mod: MaskMod | None = None) -> pd.DataFrame:
    """Cumulative HBM traffic and FLOPs after each step of the algorithm, one row per step of `io_trace_steps`
    (which says what a step is, forward and backward); the last row equals `io_cost(...)`.

    Args:
        same as `io_cost`.
    Returns:
        DataFrame with columns step, q_block, k_block, status ("start", a tile status, or the naive phase),
        reads, writes, flops, hbm_bytes; counts are cumulative, in elements (hbm_bytes in bytes), for all B H.

    Example:
        >>> tr = io_trace("q_outer", 4, 4, 2, 2, 2, causal=True)
        >>> list(tr["status"]), int(tr["reads"].iloc[-1]) == io_cost("q_outer", 4, 4, 2, 2, 2, causal=True).reads
        (['start', 'partial', 'skipped', 'full', 'partial'], True)
    """
    steps = io_trace_steps(algorithm, n_q, n_k, d, block_q, block_k, causal=causal, window=window, batch=batch,
                           heads=heads, dtype_bytes=dtype_bytes, heads_kv=heads_kv, backward=backward,
                           dq_mode=dq_mode, mask_mod=mask_mod)
    return pd.DataFrame(list(steps), columns=list(TRACE_COLUMNS))


# ----------------------------------------------------------------------------------------------------------------------
# tile sizes from on-chip memory M


def _validate_m_d(M: object, d: object) -> tuple[int, int]:
    M = validate_positive("M", M, "M is on-chip memory in elements, e.g. 100 KiB of fp32 = 25600.")
    return M, validate_positive("d", d)


def fa1_block_sizes(M: int, d: int) -> tuple[int, int]:
    """FA1 Algorithm 1, line 1: tile sizes from on-chip memory of M elements.

    Bc = ceil(M / 4d), Br = min(Bc, d). K_j and V_j take 2 Bc d ~ M / 2; Q_i and O_i take 2 Br d <= M / 2; the
    score tile S_ij takes Br Bc <= d Bc ~ M / 4 (the cap Br <= d is what keeps it small). The block that stays on
    chip across kv_outer's inner loop (K_j, V_j) gets the large size: kv_outer's traffic falls with Tc = N / Bc only.

    Args:
        M: on-chip memory (SRAM) in elements, >= 1.  d: head dimension.
    Returns:
        (Br, Bc) = (block_q, block_k).

    Example:
        >>> fa1_block_sizes(100 * 1024 // 4, 64)  # 100 KiB of fp32 SRAM, d = 64
        (64, 100)
    """
    M, d = _validate_m_d(M, d)
    Bc = math.ceil(M / (SRAM_OPERAND_BLOCKS * d))
    return min(Bc, d), Bc


def fa2_block_sizes(M: int, d: int) -> tuple[int, int]:
    """FA1's tile rule with the roles of the two blocks swapped, for FA2's loop order: Br = ceil(M / 4d),
    Bc = min(Br, d).

    Derivation: q_outer keeps Q_i and the O_i accumulator on chip across its inner loop over K/V blocks, and its
    HBM traffic, N d + 2 N d Tr + N d + N, falls with Tr = N / Br only (Bc does not enter it). So, in the same budget
    of M elements as FA1, the outer block takes the large size: Q_i and O_i take 2 Br d ~ M / 2, K_j and V_j take
    2 Bc d <= M / 2, and S_ij takes Br Bc <= Br d ~ M / 4, exactly FA1's occupancy. (Square tiles
    Br = Bc = M / 4d would hold the same operands but a score tile of (M / 4d)^2 elements, more than M once
    M > 4 d^2.)

    Args:
        M: on-chip memory (SRAM) in elements, >= 1.  d: head dimension.
    Returns:
        (Br, Bc) = (block_q, block_k).

    Example:
        >>> fa2_block_sizes(100 * 1024 // 4, 64)  # 100 KiB of fp32 SRAM, d = 64
        (100, 64)
    """
    Bc, Br = fa1_block_sizes(M, d)  # the same two sizes, swapped
    return Br, Bc


def block_sizes(algorithm: str, M: int, d: int) -> tuple[int, int]:
    """(Br, Bc) of a tiled algorithm from on-chip memory M: fa1_block_sizes for "kv_outer", fa2_block_sizes for
    "q_outer"; naive has no tiles and gets FA1's (unused: its traffic does not depend on them).

    Example:
        >>> block_sizes("kv_outer", 2**16, 64), block_sizes("flash2", 2**16, 64)
        ((64, 256), (256, 64))
    """
    return fa2_block_sizes(M, d) if resolve_algorithm(algorithm) == Q_OUTER else fa1_block_sizes(M, d)


def hbm_vs_memory(ms: Iterable[int], n: int, d: int, *, algorithms: Iterable[str] = (NAIVE, KV_OUTER),
                  causal: bool = False, window: Window = None, batch: int = 1, heads: int = 1,
                  dtype_bytes: int = 4, heads_kv: int | None = None) -> pd.DataFrame:
    """HBM accesses against on-chip memory M, each algorithm with its own tile rule (`block_sizes`): Theorem 2.

    What each curve does as M grows, with and without a mask, is worked out in this module's docstring.

    Args:
        ms: on-chip memory sizes in elements (each >= 1).
        n: sequence length (N_q = N_k = N).  d: head dimension.
        algorithms: which algorithms to tabulate (aliases accepted).
        causal, window, batch, heads, dtype_bytes, heads_kv: as for `io_cost`.
    Returns:
        Tidy DataFrame, one row per (algorithm, M): algorithm, M, block_q, block_k (NaN for naive: no tiles),
        reads, writes, accesses, hbm_bytes, flops, bound (Theorem 2's order term: N d + N^2 for naive,
        N^2 d^2 / M for the tiled ones, times B H, in elements).

    Example:
        >>> df = hbm_vs_memory([4096, 16384], 1024, 64, algorithms=("kv_outer", "q_outer"))
        >>> bool(df.groupby("algorithm")["accesses"].apply(lambda a: a.is_monotonic_decreasing).all())
        True
    """
    ms = list(ms)
    if not ms:
        raise ValueError("ms must list at least one on-chip memory size M in elements, e.g. [2**12, 2**14, 2**16].")
    ms = [validate_block("M", m) for m in ms]
    names = [resolve_algorithm(a) for a in algorithms]
    n, d = validate_block("n", n), validate_block("d", d)
    bh = batch * heads
    records = []
    for name in names:
        for M in ms:
            block_q, block_k = block_sizes(name, M, d)
            c = io_cost(name, n, n, d, block_q, block_k, causal=causal, window=window, batch=batch, heads=heads,
                        dtype_bytes=dtype_bytes, heads_kv=heads_kv)
            bound = (n * d + n * n) if name == NAIVE else (n * n * d * d / M)  # Theta terms of Theorem 2
            tiled = name != NAIVE
            records.append({"algorithm": name, "M": M, "block_q": block_q if tiled else None,
                            "block_k": block_k if tiled else None, "reads": c.reads, "writes": c.writes,
                            "accesses": c.accesses, "hbm_bytes": c.bytes, "flops": c.flops, "bound": bound * bh})
    return pd.DataFrame.from_records(records)
