"""Everything the Masks tab draws for one mask described by a MaskSpec (preset names and numbers), as plain data:
the element map, the tile grid, the BlockMask's first rows, the check against torch's create_block_mask, and the
traces of the How it works tile map. Built from flashviz.measure.maskview's pieces; the dashboard caches each call.

Legend: N sequence length (N_q = N_k), Br = block_q, Bc = block_k, H heads.
"""

from __future__ import annotations

from dataclasses import dataclass

from flashviz.core.blockmask import to_block_mask
from flashviz.core.tiling import tile_schedule
from flashviz.measure.maskview import (
    ElementMap,
    MaskSpec,
    TileGrid,
    block_mask_rows,
    build_mask,
    element_map,
    matches_torch,
    tile_grid,
)
from flashviz.measure.trace import ScheduleTrace, schedule_trace

TABLE_ROWS = 8  # query blocks of the BlockMask listed


@dataclass(frozen=True)
class MaskData:
    """Everything the tab draws for one mask, as plain data."""

    code: str  # the Python that builds the mask_mod (and score_mod)
    sample: str  # a whole script: the imports, that code, our BlockMask and torch's create_block_mask of it
    doc_lengths: tuple[int, ...]  # document lengths at this N, if a document preset is used
    elements: ElementMap  # the element-level mask at a readable resolution
    grid: TileGrid  # the tile schedule's statuses and counts
    rows: list  # the BlockMask's first query-block rows (block_mask_rows)


def mask_data(spec: MaskSpec, n: int, block_q: int, block_k: int, heads: int, rows: int = TABLE_ROWS) -> MaskData:
    """Build the mask at N (ALiBi over H heads), evaluate it at element level, classify its tiles and export the
    BlockMask's first `rows` query blocks.

    Example:
        >>> data = mask_data(MaskSpec("causal"), 8, 4, 4, 1)
        >>> data.code, data.grid.counts, data.elements.visible, data.rows[1]["full_kv_indices"]
        ('mask_mod = causal_mask', {'full': 1, 'partial': 2, 'skipped': 1}, 36, [0])
    """
    built = build_mask(spec, n, heads)
    schedule = tile_schedule(n, n, block_q, block_k, mask_mod=built.mask_mod)
    return MaskData(built.code, code_sample(built.code, n, block_q, block_k, built.score_mod is not None),
                    built.doc_lengths, element_map(built.mask_mod, n), tile_grid(schedule),
                    block_mask_rows(to_block_mask(schedule), rows))


def code_sample(code: str, n: int, block_q: int, block_k: int, score: bool) -> str:
    """A script a user can paste: the imports, `code` (build_mask's), the schedule and its BlockMask, torch's own
    create_block_mask of the same mask_mod, and the flex_attention call (with score_mod=score_mod if `score`).

    Example:
        >>> print(code_sample("mask_mod = causal_mask", 8, 4, 4, False).splitlines()[-1])
        # out = flex_attention(q, k, v, block_mask=block_mask)
    """
    return ("from torch.nn.attention.flex_attention import (\n"
            "    and_masks, or_masks, create_block_mask, flex_attention)\n"
            "from flashviz.masks import *\n"
            "from flashviz.core.tiling import tile_schedule\n"
            "from flashviz.core.blockmask import to_block_mask\n\n"
            f"{code}\n"
            f"schedule = tile_schedule({n}, {n}, {block_q}, {block_k}, mask_mod=mask_mod)\n"
            "block_mask = to_block_mask(schedule)\n"
            f"same = create_block_mask(mask_mod, 1, 1, {n}, {n}, BLOCK_SIZE=({block_q}, {block_k}))\n"
            f"# out = flex_attention(q, k, v, block_mask=block_mask{', score_mod=score_mod' if score else ''})")


def spec_matches_torch(spec: MaskSpec, n: int, block_q: int, block_k: int) -> bool:
    """Whether our BlockMask of the spec's mask_mod equals create_block_mask's (a score_mod changes no block).

    Example:
        >>> spec_matches_torch(MaskSpec("chunked", chunk=24), 100, 32, 16)
        True
    """
    return matches_torch(build_mask(spec, n).mask_mod, n, block_q, block_k)


def mask_traces(spec: MaskSpec, n: int, block_q: int, block_k: int, loop_orders: tuple[str, ...],
                heads: int) -> tuple[list[ScheduleTrace], str]:
    """The tile schedule traces of the spec's mask (one per loop order) for the How it works tile map, and the first
    line of the code that builds the mask.

    Example:
        >>> traces, code = mask_traces(MaskSpec("causal"), 8, 4, 4, ("q_outer",), 1)
        >>> len(traces[0].computed_steps()), code
        (3, 'mask_mod = causal_mask')
    """
    built = build_mask(spec, n, heads)
    traces = [schedule_trace(n, block_q, block_k, loop_order=order, mask_mod=built.mask_mod) for order in loop_orders]
    return traces, built.code.splitlines()[0]
