"""The IO model: how many elements each attention algorithm moves between HBM and on-chip memory (SRAM).

FlashAttention's argument is about memory traffic, not FLOPs: standard attention writes and re-reads the N x N
matrices S and P, the tiled algorithms never do. This module counts that traffic, tile by tile, from the same
`tile_schedule` the kernels run, so the model, the kernels and the animation cannot disagree about which tiles exist.

References:
    Dao et al., FlashAttention (2022): Algorithm 0 (standard attention), Algorithm 1 (tiled, "kv_outer"), Theorem 2
        (Theta(N d + N^2) HBM accesses for standard attention against Theta(N^2 d^2 / M) for FlashAttention, with
        tile sizes Bc = ceil(M / 4d), Br = min(Bc, d) from on-chip memory M).
    Dao, FlashAttention-2 (2023), Algorithm 1 ("q_outer": Q_i loaded once per row of tiles, O and L written once).

Accounting rules, per (batch, head), in elements (multiply by dtype_bytes for bytes):
    naive     reads N_q d + 2 N_k d + 2 N_q N_k, writes 2 N_q N_k + N_q d, flops 4 N_q N_k d (masking saves nothing).
    kv_outer  writes the initial O, l, m (N_q d + 2 N_q); each K/V block with >= 1 computed tile reads K_j, V_j once
              (2 cols_j d); each computed tile reads Q_i, O_i, l_i, m_i (2 rows_i d + 2 rows_i) and writes O_i, l_i,
              m_i (rows_i d + 2 rows_i).
    q_outer   each Q block with >= 1 computed tile reads Q_i once (rows_i d); each computed tile reads K_j, V_j
              (2 cols_j d); O and L are written once (N_q d + N_q), rows that see no key included (zeros, -inf).
    tiled flops: 4 rows_i cols_j d summed over computed tiles.

Legend: N_q, N_k sequence lengths; d head dimension; Br = block_q, Bc = block_k; Tr = ceil(N_q / Br),
Tc = ceil(N_k / Bc); M on-chip memory in elements.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pandas as pd

from flashviz.core.tiling import TileSchedule, classify_tile, tile_schedule
from flashviz.core.validate import (
    Window,
    validate_block,
    validate_causal,
    validate_length,
    validate_positive,
    validate_window,
)
from flashviz.vocab import ALGORITHM_ALIASES, ALGORITHMS, FULL

FLOPS_PER_SCORE = 4  # per (query, key) pair and head-dim element: 2 for Q K^T (multiply + add), 2 for P V
FA1_SRAM_SPLIT = 4  # FA1 Algorithm 1 line 1: Bc = ceil(M / 4d), room for K_j, V_j, Q_i, O_i in M elements
TRACE_COLUMNS = ("step", "q_block", "k_block", "status", "reads", "writes", "flops", "hbm_bytes")


@dataclass(frozen=True)
class IOCost:
    """Modelled HBM traffic and work of one attention call (all batches and heads)."""

    algorithm: str  # "naive", "kv_outer" or "q_outer"
    reads: int  # elements read from HBM
    writes: int  # elements written to HBM
    flops: int  # floating-point operations of the two matmuls (softmax not counted)
    dtype_bytes: int  # bytes per element (4 for fp32, 2 for fp16/bf16)

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


def _validate_dims(d: object, batch: object, heads: object, dtype_bytes: object) -> tuple[int, int, int, int]:
    return (validate_positive("d", d), validate_positive("batch", batch), validate_positive("heads", heads),
            validate_positive("dtype_bytes", dtype_bytes, "Use 4 for fp32, 2 for fp16/bf16, 8 for fp64."))


def _naive_steps(n_q: int, n_k: int, d: int) -> Iterator[tuple[int, int, str, int, int, int]]:
    """Algorithm 0 as three phases: (q_block, k_block, label, reads, writes, flops), -1 for 'no tile'."""
    yield -1, -1, "S = QK^T", n_q * d + n_k * d, n_q * n_k, 2 * n_q * n_k * d  # read Q, K; write S
    yield -1, -1, "P = softmax(S)", n_q * n_k, n_q * n_k, 0  # read S; write P
    yield -1, -1, "O = PV", n_q * n_k + n_k * d, n_q * d, 2 * n_q * n_k * d  # read P, V; write O


def _tiled_steps(schedule: TileSchedule, d: int) -> Iterator[tuple[int, int, str, int, int, int]]:
    """A start row (-1, -1, "start", ...), then one (q_block, k_block, status, reads, writes, flops) per tile of
    the schedule, in visiting order.

    The start row holds kv_outer's initial write of O, l, m (nothing for q_outer). K_j/V_j (kv_outer) or Q_i
    (q_outer) are charged to the first computed tile of their column/row; q_outer's O_i, L_i are charged to the
    last tile of row i (computed or not).
    """
    kv_outer = schedule.loop_order == "kv_outer"
    yield -1, -1, "start", 0, (schedule.n_q * d + 2 * schedule.n_q) if kv_outer else 0, 0  # write O, l, m
    loaded: set[int] = set()  # outer blocks whose operand is already on chip
    last_k = schedule.n_k_blocks - 1
    for t in schedule:
        rows, cols = t.rows, t.cols
        reads = writes = flops = 0
        if t.computed:
            outer = t.k_block if kv_outer else t.q_block
            first = outer not in loaded
            loaded.add(outer)
            flops = FLOPS_PER_SCORE * rows * cols * d
            if kv_outer:
                reads = (2 * cols * d if first else 0) + 2 * rows * d + 2 * rows  # K_j, V_j once; Q_i, O_i, l_i, m_i
                writes = rows * d + 2 * rows  # O_i, l_i, m_i
            else:
                reads = (rows * d if first else 0) + 2 * cols * d  # Q_i once; K_j, V_j
        if not kv_outer and t.k_block == last_k:
            writes += rows * d + rows  # epilogue of row i: O_i and L_i
        yield t.q_block, t.k_block, t.status, reads, writes, flops


def _tiled_totals_unmasked(schedule: TileSchedule, d: int) -> tuple[int, int, int]:
    """Closed-form totals when every tile is computed (no mask): the same rules, summed without a loop."""
    n_q, n_k, Tr, Tc = schedule.n_q, schedule.n_k, schedule.n_q_blocks, schedule.n_k_blocks
    flops = FLOPS_PER_SCORE * n_q * n_k * d
    if schedule.loop_order == "kv_outer":
        reads = 2 * n_k * d + Tc * (2 * n_q * d + 2 * n_q)
        writes = n_q * d + 2 * n_q + Tc * (n_q * d + 2 * n_q)
    else:
        reads = n_q * d + Tr * 2 * n_k * d
        writes = n_q * d + n_q
    return reads, writes, flops


def _schedule(algorithm: str, n_q: int, n_k: int, block_q: int, block_k: int, causal: bool,
              window: Window) -> TileSchedule:
    return tile_schedule(n_q, n_k, block_q, block_k, causal=causal, window=window, loop_order=algorithm)


def io_cost(algorithm: str, n_q: int, n_k: int, d: int, block_q: int, block_k: int, *, causal: bool = False,
            window: Window = None, batch: int = 1, heads: int = 1, dtype_bytes: int = 4) -> IOCost:
    """Modelled HBM reads, writes and FLOPs of one attention forward, derived from the tile schedule.

    Args:
        algorithm: "naive" (FA1 Algorithm 0), "kv_outer" (FA1 Algorithm 1) or "q_outer" (FA2); aliases "flash" and
            "flash2" name the two tiled ones.
        n_q, n_k: query and key lengths.  d: head dimension.
        block_q, block_k: Br and Bc (ignored by "naive", still validated).
        causal, window: the mask (DESIGN.md conventions); skipped tiles move nothing.
        batch, heads: B and H; every count is per (batch, head) times B H.
        dtype_bytes: bytes per element, for .bytes.
    Returns:
        IOCost with .reads, .writes (elements), .bytes, .flops, .accesses, .intensity.

    Example:
        >>> c = io_cost("naive", 1024, 1024, 64, 128, 128)
        >>> c.reads == 3 * 1024 * 64 + 2 * 1024**2, c.writes == 2 * 1024**2 + 1024 * 64
        (True, True)
        >>> io_cost("flash2", 1024, 1024, 64, 128, 128).writes  # N d + N: O and L once
        66560
    """
    algorithm = resolve_algorithm(algorithm)
    n_q, n_k = validate_length("n_q", n_q), validate_length("n_k", n_k)
    d, batch, heads, dtype_bytes = _validate_dims(d, batch, heads, dtype_bytes)
    block_q, block_k = validate_block("block_q", block_q), validate_block("block_k", block_k)
    causal, window = validate_causal(causal), validate_window(window)
    if algorithm == "naive":
        reads, writes, flops = _sum_steps(_naive_steps(n_q, n_k, d))
    else:
        schedule = _schedule(algorithm, n_q, n_k, block_q, block_k, causal, window)
        if n_q and n_k and classify_tile(0, n_q, 0, n_k, causal=causal, window=window) == FULL:
            reads, writes, flops = _tiled_totals_unmasked(schedule, d)  # every tile full: O(1), no loop
        else:
            reads, writes, flops = _sum_steps(_tiled_steps(schedule, d))
    bh = batch * heads
    return IOCost(algorithm, reads * bh, writes * bh, flops * bh, dtype_bytes)


def _sum_steps(steps: Iterable[tuple[int, int, str, int, int, int]]) -> tuple[int, int, int]:
    reads = writes = flops = 0
    for *_, r, w, f in steps:
        reads, writes, flops = reads + r, writes + w, flops + f
    return reads, writes, flops


def io_trace(algorithm: str, n_q: int, n_k: int, d: int, block_q: int, block_k: int, *, causal: bool = False,
             window: Window = None, batch: int = 1, heads: int = 1, dtype_bytes: int = 4) -> pd.DataFrame:
    """Cumulative HBM traffic and FLOPs after each step of the algorithm: one pass over the schedule.

    For the tiled algorithms a step is a tile of `tile_schedule` in visiting order (skipped tiles included: they add
    nothing), preceded by a start row (step -1) holding kv_outer's initial write of O, l, m. For "naive" the steps
    are its three phases S = QK^T, P = softmax(S), O = PV. The last row equals `io_cost(...)`.

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
    algorithm = resolve_algorithm(algorithm)
    n_q, n_k = validate_length("n_q", n_q), validate_length("n_k", n_k)
    d, batch, heads, dtype_bytes = _validate_dims(d, batch, heads, dtype_bytes)
    block_q, block_k = validate_block("block_q", block_q), validate_block("block_k", block_k)
    causal, window = validate_causal(causal), validate_window(window)
    bh = batch * heads
    if algorithm == "naive":
        steps, first_step = _naive_steps(n_q, n_k, d), 0
    else:
        steps, first_step = _tiled_steps(_schedule(algorithm, n_q, n_k, block_q, block_k, causal, window), d), -1
    rows: list[tuple] = []
    reads = writes = flops = 0
    for step, (i, j, status, r, w, f) in enumerate(steps, start=first_step):
        reads, writes, flops = reads + r, writes + w, flops + f
        rows.append((step, i, j, status, reads * bh, writes * bh, flops * bh, (reads + writes) * bh * dtype_bytes))
    return pd.DataFrame(rows, columns=list(TRACE_COLUMNS))


def fa1_block_sizes(M: int, d: int) -> tuple[int, int]:
    """FA1 Algorithm 1, line 1: tile sizes from on-chip memory of M elements.

    Bc = ceil(M / 4d) (K_j, V_j, Q_i and O_i must fit), Br = min(Bc, d).

    Args:
        M: on-chip memory (SRAM) in elements, >= 1.  d: head dimension.
    Returns:
        (Br, Bc) = (block_q, block_k).

    Example:
        >>> fa1_block_sizes(100 * 1024 // 4, 64)  # 100 KiB of fp32 SRAM, d = 64
        (64, 100)
    """
    M = validate_positive("M", M, "M is on-chip memory in elements, e.g. 100 KiB of fp32 = 25600.")
    d = validate_positive("d", d)
    Bc = math.ceil(M / (FA1_SRAM_SPLIT * d))
    return min(Bc, d), Bc


def hbm_vs_memory(ms: Iterable[int], n: int, d: int, *, algorithms: Iterable[str] = ("naive", "kv_outer"),
                  causal: bool = False, window: Window = None, batch: int = 1, heads: int = 1,
                  dtype_bytes: int = 4) -> pd.DataFrame:
    """HBM accesses against on-chip memory M, with FA1's tile-size rule: the data of Theorem 2.

    Standard attention does not depend on M; FlashAttention's traffic falls like N^2 d^2 / M until one tile holds
    every key (Bc >= N), where it flattens at the compulsory N d traffic.

    Args:
        ms: on-chip memory sizes in elements (each >= 1).
        n: sequence length (N_q = N_k = N).  d: head dimension.
        algorithms: which algorithms to tabulate (aliases accepted).
        causal, window, batch, heads, dtype_bytes: as for `io_cost`.
    Returns:
        Tidy DataFrame, one row per (algorithm, M): algorithm, M, block_q, block_k, reads, writes, accesses,
        hbm_bytes, flops, bound (Theorem 2's order term: N d + N^2 for naive, N^2 d^2 / M for the tiled ones,
        times B H, in elements).

    Example:
        >>> df = hbm_vs_memory([4096, 16384], 1024, 64)
        >>> df.loc[df.algorithm == "kv_outer", "accesses"].is_monotonic_decreasing
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
            block_q, block_k = fa1_block_sizes(M, d)
            c = io_cost(name, n, n, d, block_q, block_k, causal=causal, window=window, batch=batch, heads=heads,
                        dtype_bytes=dtype_bytes)
            bound = (n * d + n * n) if name == "naive" else (n * n * d * d / M)  # Theta terms of Theorem 2
            records.append({"algorithm": name, "M": M, "block_q": block_q, "block_k": block_k, "reads": c.reads,
                            "writes": c.writes, "accesses": c.accesses, "hbm_bytes": c.bytes, "flops": c.flops,
                            "bound": bound * bh})
    return pd.DataFrame.from_records(records)
