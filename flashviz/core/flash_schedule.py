"""Which tiles a tiled forward computes, and in how many steps: a prebuilt schedule checked against the call, and
the mask_mod path's steps (runs of adjacent tiles computed as one wider tile).

References:
    FlashAttention (Dao et al., 2022), Algorithm 1 and FlashAttention-2 (Dao, 2023), Algorithm 1: one tile S_ij per
        iteration of the inner loop. FlexAttention (Dong et al., 2024): a BlockMask built once and reused across
        calls, as a TileSchedule is here.

Legend: N_q / N_k query / key lengths, Br = block_q, Bc = block_k, G query heads per K/V head.

Steps: the classic path (causal and window, no mask_mod) computes one tile per loop iteration, as the paper's loops
do and as the dashboard's Benchmark and Block size views explain. With a mask_mod (the FlexAttention path) and no
on_tile callback, consecutive computed tiles of one Q-block row (q_outer) or K/V-block column (kv_outer) are
computed as one wider tile, a Step (TileSchedule.runs): a programmable mask is classified once and typically leaves
long runs of full tiles (documents, prefixes), and on a CPU the per-iteration overhead of many small tiles would
otherwise dominate. The K/V (or Q) slices of adjacent blocks are one contiguous view (no copy), full tiles still
apply no mask and partial ones add their cached mask to their own block of the step, so a step of n tiles does the
work of its n tiles with one launch of each op instead of n (the row max is updated once per step instead of once
per tile: the same result up to rounding). A step spans at most flash.MAX_STEP_WIDTH key columns (q_outer) or query
rows (kv_outer), so its scores never grow with N. With on_tile every step is a single tile, so that each tile
reports the running m_i, l_i it leaves behind.
"""

from __future__ import annotations

from dataclasses import dataclass

from flashviz.core.tiling import Tile, TileSchedule
from flashviz.core.validate import AttentionConfig
from flashviz.vocab import KV_OUTER, PARTIAL


@dataclass(frozen=True)
class Step:
    """A run of consecutive computed tiles (TileSchedule.runs), computed as one tile of S: rows [q_start, q_end) x
    columns [k_start, k_end). q_outer runs share the rows and abut in columns; kv_outer runs the other way round."""

    tiles: tuple[Tile, ...]  # the run's tiles, in visiting order (one tile on the classic path and with on_tile)
    q_start: int  # first query row of the step
    q_end: int  # one past its last query row
    k_start: int  # first key column of the step
    k_end: int  # one past its last key column
    partial: bool  # some tile has masked elements

    @classmethod
    def of(cls, run: tuple[Tile, ...]) -> Step:
        """The step that covers a run of adjacent tiles.

        Example:
            >>> from flashviz.core.tiling import tile_schedule
            >>> run = tile_schedule(6, 6, 2, 2, causal=True, loop_order="q_outer").runs(2)[1]
            >>> st = Step.of(run)
            >>> (st.q_start, st.q_end, st.k_start, st.k_end, st.partial)
            (2, 4, 0, 4, True)
        """
        first, last = run[0], run[-1]
        return cls(run, first.q_start, last.q_end, first.k_start, last.k_end, any(t.status == PARTIAL for t in run))


def schedule_steps(schedule: TileSchedule, merge: bool, max_width: int) -> list[Step]:
    """The schedule's computed tiles as steps, in visiting order.

    Args:
        schedule: the call's TileSchedule.
        merge: whether adjacent tiles may be merged (a mask_mod and no on_tile); otherwise every tile is one step.
        max_width: the widest step, in key columns (q_outer) or query rows (kv_outer); never less than one tile.
    Returns:
        A list of Step.

    Example:
        >>> from flashviz.core.tiling import tile_schedule
        >>> s = tile_schedule(6, 6, 2, 2, causal=True, loop_order="q_outer")
        >>> [(st.q_start, st.k_start, st.k_end) for st in schedule_steps(s, merge=True, max_width=4)]
        [(0, 0, 2), (2, 0, 4), (4, 0, 4), (4, 4, 6)]
    """
    block = schedule.block_q if schedule.loop_order == KV_OUTER else schedule.block_k
    max_tiles = max(1, max_width // block) if merge else 1
    return [Step.of(run) for run in schedule.runs(max_tiles)]


def check_schedule(schedule: object, config: AttentionConfig, loop_order: str) -> TileSchedule:
    """Return a prebuilt schedule if it is the one flash.build_schedule(config, loop_order) would make, else raise.

    Compared: N_q, N_k, Br, Bc, causal, window, loop order, the mask_mod (the same function object) and, with a
    mask_mod, the batch and heads it was classified over.

    Args:
        schedule: what the caller passed as schedule=.
        config: the call's validated AttentionConfig.
        loop_order: the call's loop order.
    Returns:
        The schedule, checked.

    Example:
        >>> import torch
        >>> from flashviz.core.tiling import tile_schedule
        >>> from flashviz.core.validate import tiled_config
        >>> cfg = tiled_config(*(torch.zeros(1, 1, 8, 4),) * 3, block_size=4, loop_order="q_outer")
        >>> check_schedule(tile_schedule(8, 8, 4, 4, loop_order="q_outer"), cfg, "q_outer").n_q_blocks
        2
    """
    if not isinstance(schedule, TileSchedule):
        raise TypeError(f"schedule must be a TileSchedule from tile_schedule(...), or None, got "
                        f"{type(schedule).__name__}.")
    c, s = config, schedule
    want = {"n_q": c.n_q, "n_k": c.n_k, "block_q": c.block_q, "block_k": c.block_k, "causal": c.causal,
            "window": c.window, "loop_order": loop_order}
    if c.mask_mod is not None:
        want |= {"batch": max(c.B, 1), "heads": max(c.H, 1)}
    got = {name: getattr(s, name) for name in want}
    wrong = [f"{n}={got[n]!r} (the call has {want[n]!r})" for n in want if got[n] != want[n]]
    if s.mask_mod is not c.mask_mod:
        wrong.append(f"mask_mod={getattr(s.mask_mod, '__name__', s.mask_mod)} (the call has "
                     f"{getattr(c.mask_mod, '__name__', c.mask_mod)})")
    if wrong:
        raise ValueError(f"schedule does not match this call: {', '.join(wrong)}. Build it with tile_schedule(N_q, "
                         "N_k, block_q, block_k, causal=, window=, loop_order=, mask_mod=, batch=B, heads=H) from the "
                         "same values the call gets, or pass schedule=None to build it inside the call.")
    return s
