"""flashviz: see, measure and teach FlashAttention.

Public API (names and meanings fixed by DESIGN.md):
    naive_attention, flash_attention_forward, flash_attention, tile_schedule, io_cost,
    measure_memory, benchmark, run_sweep
"""

from flashviz.flash import TileEvent, flash_attention_forward
from flashviz.reference import naive_attention
from flashviz.tiling import FULL, PARTIAL, SKIPPED, Tile, TileSchedule, tile_schedule

__all__ = [
    "FULL",
    "PARTIAL",
    "SKIPPED",
    "Tile",
    "TileEvent",
    "TileSchedule",
    "flash_attention_forward",
    "naive_attention",
    "tile_schedule",
]
