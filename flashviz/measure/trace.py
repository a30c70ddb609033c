"""Record what the tiled kernel does, as plain data for the "How it works" animation.

Two recordings, both plain Python (tuples of ints, floats and strings) so the figure builders in tileplots.py need
neither torch nor the kernel:

    schedule_trace  the tile schedule in visiting order (tiling.tile_schedule: the one source of tile truth),
                    optionally with the IO model's cumulative HBM traffic and FLOPs after every step;
    row_trace       the online-softmax state (m_i, l_i) of ONE query row after every tile that touches it, taken
                    from the real kernel (flash.flash_attention_forward's on_tile hook), next to the exact values.

References: FlashAttention (Dao et al., 2022) Algorithm 1 ("kv_outer") and FlashAttention-2 (Dao, 2023)
Algorithm 1 ("q_outer"). Legend: N sequence length, d head dimension, Br = block_q, Bc = block_k,
Tr = ceil(N / Br) query blocks, Tc = ceil(N / Bc) key blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from flashviz.core.flash import TileEvent, flash_attention_forward
from flashviz.core.tiling import tile_schedule, visible_mask
from flashviz.core.validate import Window
from flashviz.model.iomodel import io_trace
from flashviz.vocab import DTYPES


@dataclass(frozen=True)
class ScheduleTrace:
    """One loop order's tile schedule as plain data: what the animation plays, frame by frame."""

    loop_order: str  # "kv_outer" (FA1) or "q_outer" (FA2)
    n: int  # sequence length N (N_q = N_k)
    block_q: int  # Br
    block_k: int  # Bc
    causal: bool  # top-left causal mask
    window: Window  # (left, right) sliding window, or None
    n_q_blocks: int  # Tr, rows of the tile grid
    n_k_blocks: int  # Tc, columns of the tile grid
    q_block: tuple[int, ...]  # per schedule step: tile row i
    k_block: tuple[int, ...]  # per schedule step: tile column j
    status: tuple[str, ...]  # per schedule step: "full", "partial" or "skipped"
    hbm_bytes: tuple[float, ...] | None = None  # per schedule step: cumulative HBM bytes (IO model), per head
    flops: tuple[float, ...] | None = None  # per schedule step: cumulative FLOPs (IO model), per head

    @property
    def steps(self) -> int:
        return len(self.status)

    def computed_steps(self) -> list[int]:
        """Schedule steps whose tile is loaded and computed (full or partial), in visiting order."""
        return [s for s, st in enumerate(self.status) if st != "skipped"]


def schedule_trace(n: int, block_q: int, block_k: int, *, causal: bool = False, window: Window = None,
                   loop_order: str = "kv_outer", d: int | None = None, dtype_bytes: int = 4) -> ScheduleTrace:
    """The tile schedule of an N x N attention matrix as plain tuples, in visiting order.

    Args:
        n: sequence length N.  block_q, block_k: Br, Bc.  causal, window: the mask (DESIGN.md conventions).
        loop_order: "kv_outer" (FA1) or "q_outer" (FA2).
        d: head dimension; when given, the IO model (iomodel.io_trace) adds the cumulative HBM bytes and FLOPs
            after every step, for one (batch, head). None leaves the counters out.
        dtype_bytes: bytes per element for the HBM byte counter (4 for fp32, 2 for fp16/bf16, 8 for fp64).
    Returns:
        ScheduleTrace with one entry per tile (skipped tiles included: the animation shows them being passed over).

    Example:
        >>> schedule_trace(4, 2, 2, causal=True).status
        ('partial', 'full', 'skipped', 'partial')
    """
    sched = tile_schedule(n, n, block_q, block_k, causal=causal, window=window, loop_order=loop_order)
    tiles = list(sched)
    hbm = flops = None
    if d is not None:
        io = io_trace(sched.loop_order, n, n, d, block_q, block_k, causal=causal, window=window,
                      dtype_bytes=dtype_bytes)
        io = io[io["step"] >= 0]  # drop the start row; one row per schedule step remains, in order
        assert len(io) == len(tiles), "io_trace and tile_schedule disagree on the number of steps"
        hbm = tuple(float(x) for x in io["hbm_bytes"])
        flops = tuple(float(x) for x in io["flops"])
    return ScheduleTrace(
        loop_order=sched.loop_order, n=n, block_q=sched.block_q, block_k=sched.block_k, causal=sched.causal,
        window=sched.window,
        n_q_blocks=sched.n_q_blocks, n_k_blocks=sched.n_k_blocks,
        q_block=tuple(t.q_block for t in tiles), k_block=tuple(t.k_block for t in tiles),
        status=tuple(t.status for t in tiles), hbm_bytes=hbm, flops=flops,
    )


@dataclass(frozen=True)
class RowTrace:
    """The online-softmax state of one query row, after every tile that updated it (from the real kernel)."""

    loop_order: str  # "kv_outer" or "q_outer"
    row: int  # the query row r
    q_block: int  # the tile row i that holds r
    step: tuple[int, ...]  # schedule steps that updated row r
    k_block: tuple[int, ...]  # the key block j of each of those steps
    m: tuple[float, ...]  # running max m_r after each step (scaled-score units; -inf while nothing visible)
    l: tuple[float, ...]  # running sum l_r = sum_j e^(s_rj - m_r) after each step
    m_exact: float  # max_j s_rj over every visible key (the oracle), -inf if the row sees nothing
    l_exact: float  # sum_j e^(s_rj - m_exact), 0 if the row sees nothing
    lse_kernel: float  # the kernel's saved logsumexp L_r = m_r + log l_r


def row_trace(n: int, d: int, block_q: int, block_k: int, *, row: int, causal: bool = False, window: Window = None,
              loop_order: str = "kv_outer", dtype: str = "float32", seed: int = 0,
              threads: int | None = None) -> RowTrace:
    """Run the real tiled forward on random Q, K, V (B = H = 1, CPU) and record query row `row` tile by tile.

    Args:
        n, d: sequence length and head dimension.  block_q, block_k: Br, Bc.
        row: the query row r to follow, 0 <= r < n.
        causal, window, loop_order: as flash_attention_forward.
        dtype: "float32", "float64", "float16" or "bfloat16" for Q, K, V (accumulators stay fp32/fp64).
        seed: random seed for Q, K, V (same seed, same numbers: FA1 and FA2 traces are comparable).
        threads: torch CPU threads for this run (restored afterwards); None leaves the setting alone.
    Returns:
        RowTrace: m and l after every tile that touched row r, and the exact m, l from the full score row.

    Example:
        >>> tr = row_trace(16, 8, 4, 4, row=9, causal=True)
        >>> tr.k_block, abs(tr.m[-1] - tr.m_exact) < 1e-6
        ((0, 1, 2), True)
    """
    if not 0 <= row < n:
        raise ValueError(f"row must be a query row in 0..{n - 1}, got {row}. Pick a row inside the sequence.")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {tuple(DTYPES)}, got {dtype!r}.")
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, n, d, generator=gen).to(getattr(torch, dtype)) for _ in range(3))  # (1, 1, N, d) each
    events: list[TileEvent] = []

    def record(ev: TileEvent) -> None:
        if ev.q_start <= row < ev.q_end:
            events.append(ev)

    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        _, lse = flash_attention_forward(q, k, v, block_q=block_q, block_k=block_k, causal=causal, window=window,
                                         loop_order=loop_order, return_lse=True, on_tile=record)
    finally:
        if threads is not None:
            torch.set_num_threads(old_threads)
    # -- the oracle: the full score row s_r = q_r K^T / sqrt(d), masked; m = max s_r; l = sum e^(s_r - m)
    acc = torch.float64
    s_r = (q[0, 0, row].to(acc) / math.sqrt(d)) @ k[0, 0].to(acc).T  # (d,) x (d, N) -> (N,)
    mask = visible_mask(torch.tensor([row]), torch.arange(n), causal=causal, window=window)  # (1, N) or None
    if mask is not None:
        s_r = s_r.masked_fill(~mask[0], float("-inf"))
    m_exact = float(s_r.max())
    l_exact = float(torch.exp(s_r - m_exact).sum()) if math.isfinite(m_exact) else 0.0
    return RowTrace(
        loop_order=loop_order, row=row, q_block=row // block_q,
        step=tuple(ev.step for ev in events), k_block=tuple(ev.k_block for ev in events),
        m=tuple(float(ev.m[row - ev.q_start]) for ev in events),
        l=tuple(float(ev.l[row - ev.q_start]) for ev in events),
        m_exact=m_exact, l_exact=l_exact, lse_kernel=float(lse[0, 0, row]),
    )
