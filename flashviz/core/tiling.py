"""Mask predicates and the tile schedule: the one source of tile truth.

FlashAttention cuts S = Q K^T into tiles of Br query rows x Bc key columns and visits them in a loop order:
FlashAttention-1 (Dao et al. 2022, Algorithm 1) runs the outer loop over K/V blocks ("kv_outer"); FlashAttention-2
(Dao 2023, Algorithm 1) runs it over Q blocks ("q_outer"). A mask (causal, sliding window) makes some tiles

    full     every in-bounds element visible: computed with no mask work,
    partial  some elements visible: computed, with an element mask inside the tile,
    skipped  nothing visible: never loaded, never computed.

The kernels (flash.py, backward.py), the IO model (iomodel.py) and the animation all read `tile_schedule`.

Causal and window are classified in O(1) per tile from the tile's corners, so a schedule of any length costs no
memory. Any other mask comes as a FlexAttention mask_mod(b, h, q_idx, kv_idx) (masks.py): it is evaluated at element
level in bounded chunks (maskeval.py), intersected with causal and window, and its Tr x Tc statuses are kept.

Legend: N_q, N_k sequence lengths; Br = block_q, Bc = block_k; Tr = ceil(N_q / Br), Tc = ceil(N_k / Bc).
Mask conventions: causal is top-left aligned (query i sees keys j <= i, as SDPA's is_causal);
window=(left, right) lets query i see keys i - left <= j <= i + right (None: unbounded), intersected with causal.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from flashviz._lazy import lazy_import
from flashviz.core.maskeval import classify_blocks, validate_mask_mod
from flashviz.core.validate import (
    Window,
    validate_block,
    validate_causal,
    validate_length,
    validate_loop_order,
    validate_positive,
    validate_window,
)
from flashviz.vocab import FULL, KV_OUTER, PARTIAL, SKIPPED, TILE_STATUSES

if TYPE_CHECKING:
    import torch

    from flashviz.masks import MaskMod
else:
    torch = lazy_import("torch")  # element masks and mask_mod tiles only: a causal/window schedule needs no torch

INT64_MAX = 2**63 - 1  # largest position an index tensor holds: torch.iinfo(torch.int64).max


def visible_mask(
    q_idx: torch.Tensor, k_idx: torch.Tensor, *, causal: bool = False, window: Window = None
) -> torch.Tensor | None:
    """Element mask of which keys each query sees, or None when every pair is visible.

    Args:
        q_idx: (Nq,) integer query positions.  k_idx: (Nk,) integer key positions.
    Returns:
        (Nq, Nk) bool tensor, True where query q_idx[a] may attend to key k_idx[b]; None when nothing is masked.
    """
    left, right = window if window is not None else (None, None)
    # A reach past int64 sees every key anyway; clamped, it can be compared with the int64 index tensors.
    left, right = (None if w is None else min(w, INT64_MAX) for w in (left, right))
    diff = None  # (Nq, Nk) of j - i, built only if some predicate needs it
    mask = None
    if causal or left is not None or right is not None:
        diff = k_idx[None, :] - q_idx[:, None]  # (Nq, 1) vs (1, Nk) -> (Nq, Nk)
    if causal:
        mask = diff <= 0
    if right is not None:
        m = diff <= right
        mask = m if mask is None else mask & m
    if left is not None:
        m = diff >= -left
        mask = m if mask is None else mask & m
    return mask


def _reach(causal: bool, window: Window) -> tuple[float, float]:
    """(left, right) reach of a query row: query i sees keys in [i - left, i + right] (floats, inf = unbounded)."""
    left, right = window if window is not None else (None, None)
    lo = math.inf if left is None else left
    hi = math.inf if right is None else right
    if causal:
        hi = min(hi, 0)
    return lo, hi


def classify_tile(q_start: int, q_end: int, k_start: int, k_end: int, *, causal: bool = False,
                  window: Window = None) -> str:
    """Status of the tile rows [q_start, q_end) x cols [k_start, k_end) (ends exclusive, already clipped to N).

    Row i sees keys [i - left, i + right]; both ends grow with i, so the first row bounds the right edge and the
    last row bounds the left edge, and the tile's status follows from its four corners in O(1).
    """
    left, right = _reach(causal, window)
    last_q, last_k = q_end - 1, k_end - 1
    # skipped: no row's interval meets [k_start, last_k]; the rows that reach the tile are
    # i >= k_start - right (right edge reaches k_start) and i <= last_k + left (left edge reaches last_k).
    if last_q < k_start - right or q_start > last_k + left:
        return SKIPPED
    # full: the last row's left edge is at or before k_start and the first row's right edge at or after last_k.
    if last_q - left <= k_start and q_start + right >= last_k:
        return FULL
    return PARTIAL


@dataclass(frozen=True)
class Tile:
    """One (q_block, k_block) tile of S, as visited by a loop order."""

    step: int  # position in the visiting order, 0-based
    q_block: int  # i: index of the query block (row of tiles)
    k_block: int  # j: index of the key/value block (column of tiles)
    q_start: int  # first query row of the tile
    q_end: int  # one past the last query row (ragged last block: < q_start + Br)
    k_start: int  # first key column of the tile
    k_end: int  # one past the last key column
    status: str  # "full", "partial" or "skipped"

    @property
    def rows(self) -> int:
        return self.q_end - self.q_start

    @property
    def cols(self) -> int:
        return self.k_end - self.k_start

    @property
    def computed(self) -> bool:
        return self.status != SKIPPED


class TileSchedule(Sequence):
    """Every (q_block, k_block) tile exactly once, in the visiting order of `loop_order`.

    Without a mask_mod the schedule is lazy: tiles are made on demand in O(1) each, so a schedule of a long sequence
    costs no memory. With a mask_mod the Tr x Tc statuses are classified once, at construction.
    """

    def __init__(self, n_q: int, n_k: int, block_q: int, block_k: int, *, causal: bool = False,
                 window: Window = None, loop_order: str = KV_OUTER, mask_mod: MaskMod | None = None,
                 batch: int = 1, heads: int = 1, device: torch.device | str | None = None):
        self.n_q = validate_length("n_q", n_q)
        self.n_k = validate_length("n_k", n_k)
        self.block_q = validate_block("block_q", block_q)
        self.block_k = validate_block("block_k", block_k)
        self.causal = validate_causal(causal)
        self.window = validate_window(window)
        self.loop_order = validate_loop_order(loop_order)
        self.batch = validate_positive("batch", batch, "It is the range of b a mask_mod is classified over.")
        self.heads = validate_positive("heads", heads, "It is the range of h a mask_mod is classified over.")
        self.n_q_blocks = -(-self.n_q // self.block_q)  # Tr = ceil(N_q / Br)
        self.n_k_blocks = -(-self.n_k // self.block_k)  # Tc = ceil(N_k / Bc)
        self.mask_mod = None if mask_mod is None else validate_mask_mod(mask_mod)
        self.combined_mask_mod: MaskMod | None = None  # mask_mod AND causal AND window, what partial tiles apply
        self.mask_reads_bh = False  # True when the mask_mod's mask differs across b or h
        self.block_any: torch.Tensor | None = None  # (B', H', Tr, Tc) bool: some element visible, per (b, h)
        self.block_all: torch.Tensor | None = None  # (B', H', Tr, Tc) bool: every element visible, per (b, h)
        self._statuses: list[list[str]] | None = None  # [q_block][k_block], only with a mask_mod
        # (q_block, k_block, device) -> hidden mask of a partial mask_mod tile, filled by TileMasks on first use
        self.hidden_cache: dict[tuple[int, int, str], torch.Tensor] = {}
        self.bias_cache: dict[tuple[int, int, str], torch.Tensor] = {}  # the same tiles as fp32 0 / -inf (TileMasks)
        self._runs: dict[int, list[tuple[Tile, ...]]] = {}  # runs(max_tiles), memoised when statuses are stored
        if self.mask_mod is not None:
            self._classify_mask_mod(device)

    def _classify_mask_mod(self, device: torch.device | str | None) -> None:
        """Classify every tile of mask_mod AND causal AND window at element level (over every b and h)."""
        from torch.nn.attention.flex_attention import and_masks  # a mask_mod is made of torch ops: torch is here

        from flashviz.masks import causal_mask, check_mask_lengths, sliding_window

        check_mask_lengths(self.mask_mod, self.n_q, self.n_k)
        geometric = ([causal_mask] if self.causal else []) + ([sliding_window(*self.window)] if self.window else [])
        self.combined_mask_mod = and_masks(self.mask_mod, *geometric) if geometric else self.mask_mod
        if self.n_q == 0 or self.n_k == 0:
            self._statuses = [[] for _ in range(self.n_q_blocks)]
            return
        any_vis, all_vis = classify_blocks(self.combined_mask_mod, self.n_q, self.n_k, self.block_q, self.block_k,
                                           batch=self.batch, heads=self.heads, device=device)  # (B', H', Tr, Tc)
        self.block_any, self.block_all = any_vis, all_vis
        self.mask_reads_bh = any_vis.shape[0] * any_vis.shape[1] > 1
        # union over (b, h): skipped only if every (b, h) skips the tile, full only if every (b, h) sees all of it
        seen, full = any_vis.flatten(0, 1).any(0), all_vis.flatten(0, 1).all(0)  # (Tr, Tc) each
        codes = (seen.to(torch.uint8) + full.to(torch.uint8)).tolist()  # 0 skipped, 1 partial, 2 full
        names = (SKIPPED, PARTIAL, FULL)
        self._statuses = [[names[c] for c in row] for row in codes]

    def __len__(self) -> int:
        return self.n_q_blocks * self.n_k_blocks

    def tile(self, q_block: int, k_block: int, step: int | None = None) -> Tile:
        """The tile at grid position (q_block, k_block)."""
        q0, k0 = q_block * self.block_q, k_block * self.block_k
        q1, k1 = min(q0 + self.block_q, self.n_q), min(k0 + self.block_k, self.n_k)
        if step is None:
            step = self._step_of(q_block, k_block)
        return Tile(step, q_block, k_block, q0, q1, k0, k1, self._status(q_block, k_block))

    def _status(self, q_block: int, k_block: int) -> str:
        if self._statuses is not None:
            return self._statuses[q_block][k_block]
        q0, k0 = q_block * self.block_q, k_block * self.block_k
        q1, k1 = min(q0 + self.block_q, self.n_q), min(k0 + self.block_k, self.n_k)
        return classify_tile(q0, q1, k0, k1, causal=self.causal, window=self.window)

    def _step_of(self, q_block: int, k_block: int) -> int:
        if self.loop_order == KV_OUTER:
            return k_block * self.n_q_blocks + q_block
        return q_block * self.n_k_blocks + k_block

    def _grid_of(self, step: int) -> tuple[int, int]:
        if self.loop_order == KV_OUTER:
            k_block, q_block = divmod(step, self.n_q_blocks)
        else:
            q_block, k_block = divmod(step, self.n_k_blocks)
        return q_block, k_block

    @overload
    def __getitem__(self, index: int) -> Tile: ...
    @overload
    def __getitem__(self, index: slice) -> list[Tile]: ...

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"tile index {index} out of range for a schedule of {n} tiles")
        return self.tile(*self._grid_of(index), step=index)

    def __iter__(self) -> Iterator[Tile]:
        for step in range(len(self)):
            yield self.tile(*self._grid_of(step), step=step)

    def computed(self) -> Iterator[Tile]:
        """The tiles that are loaded and computed (full or partial), in visiting order."""
        return (t for t in self if t.computed)

    def runs(self, max_tiles: int) -> list[tuple[Tile, ...]]:
        """The computed tiles in visiting order, cut into runs of at most max_tiles consecutive tiles of one outer
        block: adjacent k_blocks of one Q-block row (q_outer) or adjacent q_blocks of one K/V column (kv_outer).

        A run covers one contiguous block of S, so a kernel can compute it as one wider tile. A skipped tile, the
        end of the outer block or max_tiles ends a run. Memoised for a mask_mod schedule (its statuses are stored
        anyway); recomputed for a lazy causal / window one, which keeps it free of O(Tr Tc) memory.

        Example:
            >>> s = tile_schedule(6, 6, 2, 2, causal=True, loop_order="q_outer")
            >>> [[(t.q_block, t.k_block) for t in run] for run in s.runs(2)]
            [[(0, 0)], [(1, 0), (1, 1)], [(2, 0), (2, 1)], [(2, 2)]]
        """
        if max_tiles < 1:
            raise ValueError(f"max_tiles must be a positive number of tiles per run (1: every tile alone), got "
                             f"{max_tiles}.")
        if max_tiles in self._runs:
            return self._runs[max_tiles]
        kv_outer = self.loop_order == KV_OUTER
        n_outer, n_inner = (self.n_k_blocks, self.n_q_blocks) if kv_outer else (self.n_q_blocks, self.n_k_blocks)
        runs: list[tuple[Tile, ...]] = []
        for a in range(n_outer):  # the outer block: a K/V column (kv_outer) or a Q row (q_outer)
            run: list[Tile] = []
            for b in range(n_inner):
                i, j = (b, a) if kv_outer else (a, b)
                computed = self._status(i, j) != SKIPPED  # a Tile is made only for computed tiles
                if run and (not computed or len(run) == max_tiles):
                    runs.append(tuple(run))
                    run = []
                if computed:
                    run.append(self.tile(i, j, step=a * n_inner + b))  # step: the visiting order's index
            if run:
                runs.append(tuple(run))
        if self._statuses is not None:
            self._runs[max_tiles] = runs
        return runs

    def status_grid(self) -> list[list[str]]:
        """Statuses as a Tr x Tc nested list, [q_block][k_block] (for plots: no torch needed downstream)."""
        return [[self.tile(i, j, step=0).status for j in range(self.n_k_blocks)] for i in range(self.n_q_blocks)]

    def counts(self) -> dict[str, int]:
        """Number of tiles of each status."""
        out = dict.fromkeys(TILE_STATUSES, 0)
        for row in self.status_grid():
            for s in row:
                out[s] += 1
        return out

    def __repr__(self) -> str:
        mask = "" if self.mask_mod is None else (
            f", mask_mod={getattr(self.mask_mod, '__name__', 'mask_mod')}, batch={self.batch}, heads={self.heads}")
        return (f"TileSchedule(n_q={self.n_q}, n_k={self.n_k}, block_q={self.block_q}, block_k={self.block_k}, "
                f"causal={self.causal}, window={self.window}, loop_order={self.loop_order!r}{mask}, tiles={len(self)})")


def tile_schedule(n_q: int, n_k: int, block_q: int, block_k: int, *, causal: bool = False, window: Window = None,
                  loop_order: str = KV_OUTER, mask_mod: MaskMod | None = None, batch: int = 1,
                  heads: int = 1, device: torch.device | str | None = None) -> TileSchedule:
    """The tiles of an n_q x n_k attention matrix in the visiting order of `loop_order`.

    Args:
        n_q, n_k: query and key sequence lengths (N_q, N_k).
        block_q, block_k: tile sizes Br (query rows) and Bc (key columns); the last row/column of tiles may be ragged.
        causal: top-left causal mask (query i sees keys j <= i).
        window: (left, right) sliding window, None on a side = unbounded.
        loop_order: "kv_outer" (FA1: outer loop over K/V blocks) or "q_outer" (FA2: outer loop over Q blocks).
        mask_mod: FlexAttention mask_mod(b, h, q_idx, kv_idx) -> bool (True = visible), intersected with causal and
            window and classified at element level; None = causal/window only (lazy, O(1) per tile).
        batch, heads: the ranges of b and h a mask_mod is classified over: a tile is skipped only if every (b, h)
            skips it, full only if every (b, h) sees all of it.
        device: where the mask_mod is classified, like create_block_mask's: the device of the tensors it closes
            over (the kernels pass their inputs' device); None = the CPU. The statuses are kept on the CPU.
    Returns:
        A TileSchedule: a sequence of Tile (.q_block, .k_block, .status, ...), every pair once, in visiting order.

    Example:
        >>> [t.status for t in tile_schedule(4, 4, 2, 2, causal=True, loop_order="q_outer")]
        ['partial', 'skipped', 'full', 'partial']
        >>> from flashviz.masks import document
        >>> [t.status for t in tile_schedule(4, 4, 2, 2, mask_mod=document([2, 2]), loop_order="q_outer")]
        ['full', 'skipped', 'skipped', 'full']
    """
    return TileSchedule(n_q, n_k, block_q, block_k, causal=causal, window=window, loop_order=loop_order,
                        mask_mod=mask_mod, batch=batch, heads=heads, device=device)
