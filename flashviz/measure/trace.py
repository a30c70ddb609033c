"""Record what the tiled kernel does, as plain data for the "How it works" animation.

Two recordings, both plain Python (tuples of ints, floats and strings) so the figure builders (figures/tilemap.py,
views/how/figures.py) need neither torch nor the kernel:

    schedule_trace  the tile schedule in visiting order (tiling.tile_schedule: the one source of tile truth),
                    optionally with the IO model's cumulative HBM traffic and FLOPs after every step;
    row_trace       the online-softmax state (m_i, l_i) of ONE query row after every tile that touches it, taken
                    from the real kernel (flash.flash_attention_forward's on_tile hook), next to the exact values,
                    with each tile's rescale spelled out: m before and after, the factor e^(m_old - m_new), and l
                    before the rescale, after it, and after adding the tile's row sum;
    pick_row        the query row whose running max grows on the most tiles (the most rescales to watch).

References: FlashAttention (Dao et al., 2022) Algorithm 1 ("kv_outer") and FlashAttention-2 (Dao, 2023)
Algorithm 1 ("q_outer"). Legend: N sequence length, d head dimension, Br = block_q, Bc = block_k,
Tr = ceil(N / Br) query blocks, Tc = ceil(N / Bc) key blocks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flashviz._lazy import lazy_import
from flashviz.core.tiling import Tile, tile_schedule, visible_mask
from flashviz.core.validate import Window
from flashviz.model.iomodel import io_cost, io_trace_steps
from flashviz.vocab import DTYPES, KV_OUTER, NAIVE, SKIPPED

if TYPE_CHECKING:
    import torch

    from flashviz.core.flash import TileEvent
    from flashviz.masks import MaskMod
else:
    torch = lazy_import("torch")  # the row tools only: schedule_trace is integer arithmetic on tiles


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
    start_bytes: float | None = None  # HBM bytes before the first tile (IO model's start row: FA1's write of O, l, m)
    flops: tuple[float, ...] | None = None  # per schedule step: cumulative FLOPs (IO model), per head
    naive_bytes: tuple[float, ...] | None = None  # per schedule step: standard attention's HBM bytes for the same
    # part of S (its IO-model total, per head, times the share of S's N^2 elements in the tiles so far, skipped ones
    # included: it computes every score), its counterpart of hbm_bytes

    @property
    def steps(self) -> int:
        return len(self.status)

    def computed_steps(self) -> list[int]:
        """Schedule steps whose tile is loaded and computed (full or partial), in visiting order."""
        return [s for s, st in enumerate(self.status) if st != SKIPPED]


def schedule_trace(n: int, block_q: int, block_k: int, *, causal: bool = False, window: Window = None,
                   loop_order: str = KV_OUTER, d: int | None = None, dtype_bytes: int = 4,
                   mask_mod: MaskMod | None = None) -> ScheduleTrace:
    """The tile schedule of an N x N attention matrix as plain tuples, in visiting order.

    Args:
        n: sequence length N.  block_q, block_k: Br, Bc.
        causal, window: the mask: causal is top-left aligned (query i sees keys j <= i); window = (left, right)
            lets query i see keys i - left <= j <= i + right (None on a side: unbounded).
        loop_order: "kv_outer" (FA1) or "q_outer" (FA2).
        d: head dimension; when given, the IO model (iomodel.io_trace_steps) adds the cumulative HBM bytes and FLOPs
            after every step, for one (batch, head). None leaves the counters out.
        dtype_bytes: bytes per element for the HBM byte counter (4 for fp32, 2 for fp16/bf16, 8 for fp64).
        mask_mod: a FlexAttention mask_mod(b, h, q_idx, kv_idx), intersected with causal and window (tile_schedule
            classifies it at element level). The IO model counts causal and window only, so d must be None then.
    Returns:
        ScheduleTrace with one entry per tile (skipped tiles included: the animation shows them being passed over).

    Example:
        >>> schedule_trace(4, 2, 2, causal=True).status
        ('partial', 'full', 'skipped', 'partial')
        >>> from flashviz.masks import document
        >>> schedule_trace(4, 2, 2, mask_mod=document([2, 2])).status
        ('full', 'skipped', 'skipped', 'full')
    """
    if mask_mod is not None and d is not None:
        raise ValueError("schedule_trace: the IO model's counters cover causal and window only, not a mask_mod. "
                         "Pass d=None with mask_mod (the trace then has no HBM or FLOP counters).")
    sched = tile_schedule(n, n, block_q, block_k, causal=causal, window=window, loop_order=loop_order,
                          mask_mod=mask_mod)
    tiles = list(sched)
    hbm = flops = naive = start = None
    if d is not None:
        start_row, *io = io_trace_steps(sched.loop_order, n, n, d, block_q, block_k, causal=causal, window=window,
                                        dtype_bytes=dtype_bytes)  # the start row, then one per schedule step
        start = float(start_row.hbm_bytes)
        assert len(io) == len(tiles), "io_trace_steps and tile_schedule disagree on the number of steps"
        hbm = tuple(float(s.hbm_bytes) for s in io)
        flops = tuple(float(s.flops) for s in io)
        naive = naive_so_far(sched, io_cost(NAIVE, n, n, d, block_q, block_k, dtype_bytes=dtype_bytes).bytes)
    return ScheduleTrace(
        loop_order=sched.loop_order, n=n, block_q=sched.block_q, block_k=sched.block_k, causal=sched.causal,
        window=sched.window,
        n_q_blocks=sched.n_q_blocks, n_k_blocks=sched.n_k_blocks,
        q_block=tuple(t.q_block for t in tiles), k_block=tuple(t.k_block for t in tiles),
        status=tuple(t.status for t in tiles), hbm_bytes=hbm, start_bytes=start, flops=flops, naive_bytes=naive,
    )


def naive_so_far(schedule: Sequence[Tile], total: float) -> tuple[float, ...]:
    """Standard attention's traffic after each step of a tile schedule: its total times the share of the N_q x N_k
    scores in the tiles visited so far (skipped ones too: standard attention computes every score, then masks).

    Example:
        >>> from flashviz.core.tiling import tile_schedule
        >>> naive_so_far(tile_schedule(4, 4, 2, 2, causal=True), 100.0)  # four equal tiles: a quarter each
        (25.0, 50.0, 75.0, 100.0)
    """
    sizes = [t.rows * t.cols for t in schedule]
    done, out = 0, []
    for size in sizes:
        done += size
        out.append(total * done / sum(sizes))
    return tuple(out)


@dataclass(frozen=True)
class RowTrace:
    """The online-softmax state of one query row, tile by tile (from the real kernel), with each rescale spelled out.

    Per computed tile t of the row (all tuples have one entry per tile, in visiting order), the kernel does
        m_new = max(m_old, rowmax(S_rj)),   l_rescaled = e^(m_old - m_new) l_old,   l_new = l_rescaled + rowsum_j
    where rowsum_j = sum over the tile's visible keys of e^(s_rj - m_new). m_new and l_new are the kernel's own
    numbers (its on_tile events); m_old and l_old are the previous tile's (-inf and 0 before the first tile); the
    factor and l_rescaled follow from them, and the tile's row sum is l_new - l_rescaled.
    """

    loop_order: str  # "kv_outer" or "q_outer"
    row: int  # the query row r
    q_block: int  # the tile row i that holds r
    step: tuple[int, ...]  # schedule steps that updated row r (skipped tiles count: a tile's place in the schedule)
    k_block: tuple[int, ...]  # the key block j of each of those steps
    m: tuple[float, ...]  # running max m_r after each step (scaled-score units; -inf while nothing visible)
    l: tuple[float, ...]  # running sum l_r = sum_j e^(s_rj - m_r) after each step (after adding the tile)
    m_before: tuple[float, ...]  # m_r before each step: the previous step's m, -inf before the first
    factor: tuple[float, ...]  # e^(m_before - m): < 1 where m grew, 1 where it did not, 0 on the first visible tile
    l_before: tuple[float, ...]  # l_r before each step (before the rescale): the previous step's l, 0 at first
    l_rescaled: tuple[float, ...]  # factor * l_before: the old sum, re-expressed relative to the new max
    m_exact: float  # max_j s_rj over every visible key (the oracle), -inf if the row sees nothing
    l_exact: float  # sum_j e^(s_rj - m_exact), 0 if the row sees nothing
    lse_kernel: float  # the kernel's saved logsumexp L_r = m_r + log l_r
    tile: tuple[int, ...] = ()  # per step: its number among the computed tiles, 1 = first (the tile map's "tile k/n")

    @property
    def grew(self) -> tuple[bool, ...]:
        """Per step: True where the running max rose above an earlier finite value (a rescale of l and O)."""
        return tuple(math.isfinite(a) and b > a for a, b in zip(self.m_before, self.m, strict=True))

    @property
    def rescales(self) -> int:
        """How many tiles raised the running max (the first visible tile sets it and does not count)."""
        return sum(self.grew)

    @property
    def tile_sum(self) -> tuple[float, ...]:
        """Per step: the tile's own row sum, sum over its visible keys of e^(s_rj - m_new) = l - l_rescaled."""
        return tuple(b - a for a, b in zip(self.l_rescaled, self.l, strict=True))


def rescale_factor(m_old: float, m_new: float) -> float:
    """e^(m_old - m_new), the factor that re-expresses a sum taken relative to m_old relative to m_new; 1 when m did
    not move (also when both are -inf: the row has seen nothing yet), 0 when the first visible key arrives.

    Example:
        >>> rescale_factor(1.0, 1.0), rescale_factor(float("-inf"), 2.0), round(rescale_factor(0.0, math.log(2)), 6)
        (1.0, 0.0, 0.5)
    """
    if m_old == m_new:
        return 1.0
    return math.exp(m_old - m_new)


def _random_qkv(n: int, d: int, dtype: str, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The row tools' random Q, K, V, each (1, 1, N, d) in `dtype`: one seed, the same numbers in every tool."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {tuple(DTYPES)}, got {dtype!r}.")
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, n, d, generator=gen).to(getattr(torch, dtype)) for _ in range(3))  # (1, 1, N, d)
    return q, k, v


def _scores(q: torch.Tensor, k: torch.Tensor, rows: torch.Tensor, *, causal: bool, window: Window) -> torch.Tensor:
    """Masked scaled scores s_r = q_r K^T / sqrt(d) of the given query rows, in float64: (R, N), -inf where hidden."""
    n, d = k.shape[-2:]
    s = (q[0, 0, rows].double() / math.sqrt(d)) @ k[0, 0].double().T  # (R, d) x (d, N) -> (R, N)
    mask = visible_mask(rows, torch.arange(n), causal=causal, window=window)  # (R, N) or None
    return s if mask is None else s.masked_fill(~mask, float("-inf"))


def row_trace(n: int, d: int, block_q: int, block_k: int, *, row: int, causal: bool = False, window: Window = None,
              loop_order: str = KV_OUTER, dtype: str = "float32", seed: int = 0,
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
        RowTrace: m and l before and after every tile that touched row r, the rescale factor of each, and the exact
        m, l from the full score row.

    Example:
        >>> tr = row_trace(16, 8, 4, 4, row=9, causal=True)
        >>> tr.k_block, abs(tr.m[-1] - tr.m_exact) < 1e-6, tr.factor[0]
        ((0, 1, 2), True, 0.0)
        >>> tr.step, tr.tile  # FA1 visits K/V block 0 (4 tiles), then 1 (3), then 2: skipped tiles in between
        ((2, 6, 10), (3, 6, 8))
    """
    from flashviz.core.flash import flash_attention_forward  # the real kernel (torch): only the row tools run it
    from flashviz.measure.timing import threads_set_to  # torch too

    if not 0 <= row < n:
        raise ValueError(f"row must be a query row in 0..{n - 1}, got {row}. Pick a row inside the sequence.")
    q, k, v = _random_qkv(n, d, dtype, seed)
    events: list[TileEvent] = []
    tiles, seen = [], [0]  # the computed-tile number of each recorded event; computed tiles so far

    def record(ev: TileEvent) -> None:  # on_tile reports every computed tile, in visiting order
        seen[0] += 1
        if ev.q_start <= row < ev.q_end:
            events.append(ev)
            tiles.append(seen[0])

    with threads_set_to(threads):
        _, lse = flash_attention_forward(q, k, v, block_q=block_q, block_k=block_k, causal=causal, window=window,
                                         loop_order=loop_order, return_lse=True, on_tile=record)
    # -- the oracle: the full score row s_r = q_r K^T / sqrt(d), masked; m = max s_r; l = sum e^(s_r - m)
    s_r = _scores(q, k, torch.tensor([row]), causal=causal, window=window)[0]  # (N,)
    m_exact = float(s_r.max())
    l_exact = float(torch.exp(s_r - m_exact).sum()) if math.isfinite(m_exact) else 0.0
    m = tuple(float(ev.m[row - ev.q_start]) for ev in events)
    l = tuple(float(ev.l[row - ev.q_start]) for ev in events)
    m_before, l_before = (float("-inf"), *m[:-1]), (0.0, *l[:-1])
    factor = tuple(rescale_factor(a, b) for a, b in zip(m_before, m, strict=True))
    return RowTrace(
        loop_order=loop_order, row=row, q_block=row // block_q,
        step=tuple(ev.step for ev in events), k_block=tuple(ev.k_block for ev in events), m=m, l=l,
        m_before=m_before[:len(m)], factor=factor, l_before=l_before[:len(l)],
        l_rescaled=tuple(f * b for f, b in zip(factor, l_before, strict=False)),
        m_exact=m_exact, l_exact=l_exact, lse_kernel=float(lse[0, 0, row]), tile=tuple(tiles),
    )


@dataclass(frozen=True)
class RowPick:
    """Which query row pick_row chose, and why."""

    row: int  # the chosen query row
    rescales: int  # tiles on which its running max grows (the first visible tile does not count)
    tiles: int  # computed tiles of that row's Q block (the row's m and l are updated on each)
    checked: int  # how many candidate rows were compared

    @property
    def reason(self) -> str:
        """One line for the page, e.g. 'row 15: the most rescales (3 of 4 tiles) among 16 rows'."""
        return f"row {self.row}: the most rescales ({self.rescales} of {self.tiles} tiles) among {self.checked} rows"


PICK_ROWS_MAX = 512  # candidate rows pick_row scores at most: 512 x N x d multiply-adds, milliseconds at N = 8192


def row_rescales(n: int, d: int, block_k: int, rows, *, causal: bool = False, window: Window = None,
                 dtype: str = "float32", seed: int = 0) -> list[int]:
    """Per query row: how many of its tiles raise its running max.

    Counted from the scores (float64) of the same random Q, K as row_trace: key blocks reach a row left to right in
    both loop orders, so the running max after block j is the max of the row's visible scores in blocks 0..j.

    Args:
        n, d, block_k: N, head dimension, Bc.  rows: the query rows to count (a sequence of ints).
        causal, window, dtype, seed: as row_trace.
    Returns:
        One count per row.

    Example:
        >>> row_rescales(16, 8, 4, [0, 15], causal=True)[0]
        0
    """
    q, k, _ = _random_qkv(n, d, dtype, seed)
    idx = torch.as_tensor(list(rows), dtype=torch.long)  # (R,)
    s = _scores(q, k, idx, causal=causal, window=window)  # (R, N)
    n_blocks = -(-n // block_k)
    pad = torch.full((len(idx), n_blocks * block_k - n), float("-inf"), dtype=s.dtype)
    block_max = torch.cat([s, pad], dim=1).view(len(idx), n_blocks, block_k).amax(dim=-1)  # (R, Tc)
    before = torch.cat([torch.full((len(idx), 1), float("-inf"), dtype=s.dtype),
                        block_max.cummax(dim=1).values[:, :-1]], dim=1)  # (R, Tc) running max before block j
    grew = (block_max > before) & (before > float("-inf"))  # (R, Tc)
    return grew.sum(dim=1).tolist()


def pick_row(n: int, d: int, block_q: int, block_k: int, *, causal: bool = False, window: Window = None,
             dtype: str = "float32", seed: int = 0, near: int | None = None) -> RowPick:
    """The query row with the most rescales (its running max grows on the most tiles), so the row inspector has
    something to show; ties go to the row nearest `near` (default N / 2).

    Every row is a candidate up to PICK_ROWS_MAX rows; beyond that, PICK_ROWS_MAX rows evenly spread over 0..N-1.

    Args:
        n, d, block_q, block_k, causal, window, dtype, seed: as row_trace (the same Q, K).
        near: the preferred row among equals (e.g. the row shown before).
    Returns:
        RowPick with the row, its rescale count and tile count, and a sentence saying why.

    Example:
        >>> pick = pick_row(16, 8, 4, 4, causal=True)
        >>> pick.rescales >= 1, row_trace(16, 8, 4, 4, row=pick.row, causal=True).rescales == pick.rescales
        (True, True)
    """
    if n < 1 or block_q < 1 or block_k < 1:
        raise ValueError(f"pick_row needs N >= 1 and block sizes >= 1, got N={n}, Br={block_q}, Bc={block_k}.")
    if n <= PICK_ROWS_MAX:
        rows = list(range(n))
    else:
        rows = sorted({round(i * (n - 1) / (PICK_ROWS_MAX - 1)) for i in range(PICK_ROWS_MAX)})
    rescales = row_rescales(n, d, block_k, rows, causal=causal, window=window, dtype=dtype, seed=seed)
    target = n // 2 if near is None else near
    best = max(range(len(rows)), key=lambda i: (rescales[i], -abs(rows[i] - target), -rows[i]))
    row = rows[best]
    sched = tile_schedule(n, n, block_q, block_k, causal=causal, window=window)
    tiles = sum(1 for t in sched.computed() if t.q_block == row // block_q)
    return RowPick(row=row, rescales=rescales[best], tiles=tiles, checked=len(rows))
