"""flashviz: see, measure and teach FlashAttention.

Public API (names and meanings fixed by DESIGN.md):
    naive_attention, flash_attention_forward, flash_attention, tile_schedule, io_cost,
    measure_memory, benchmark, run_sweep
"""

from flashviz.backward import flash_attention, flash_attention_backward
from flashviz.flash import TileEvent, flash_attention_forward
from flashviz.iomodel import IOCost, fa1_block_sizes, hbm_vs_memory, io_cost, io_trace
from flashviz.measure import Timing, attention_flops, benchmark, measure_memory, time_call, time_calls
from flashviz.reference import naive_attention
from flashviz.sweep import run_block_sweep, run_sweep
from flashviz.tiling import FULL, PARTIAL, SKIPPED, Tile, TileSchedule, tile_schedule

__all__ = [
    "FULL",
    "PARTIAL",
    "SKIPPED",
    "IOCost",
    "Tile",
    "TileEvent",
    "TileSchedule",
    "Timing",
    "attention_flops",
    "benchmark",
    "fa1_block_sizes",
    "flash_attention",
    "flash_attention_backward",
    "flash_attention_forward",
    "hbm_vs_memory",
    "io_cost",
    "io_trace",
    "measure_memory",
    "naive_attention",
    "run_block_sweep",
    "run_sweep",
    "tile_schedule",
    "time_call",
    "time_calls",
]
