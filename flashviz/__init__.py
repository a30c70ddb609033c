"""flashviz: see, measure and teach FlashAttention.

Public API (these names and their meanings are a stable contract):
    naive_attention, flash_attention_forward, flash_attention, tile_schedule, io_cost,
    measure_memory, benchmark, run_sweep, flash_decode, to_block_mask
Masks and score mods in FlexAttention's signatures live in flashviz.masks.
"""

from flashviz.core.backward import flash_attention, flash_attention_backward
from flashviz.core.blockmask import to_block_mask
from flashviz.core.decode import flash_decode
from flashviz.core.flash import TileEvent, flash_attention_forward
from flashviz.core.reference import naive_attention
from flashviz.core.tiling import Tile, TileSchedule, tile_schedule
from flashviz.measure.memory import measure_memory
from flashviz.measure.sweep import run_block_sweep, run_sweep
from flashviz.measure.timing import Timing, benchmark, time_call, time_calls
from flashviz.model.flops import attention_flops
from flashviz.model.iomodel import IOCost, fa1_block_sizes, hbm_vs_memory, io_cost, io_trace
from flashviz.vocab import FULL, PARTIAL, SKIPPED

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
    "flash_decode",
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
    "to_block_mask",
]
