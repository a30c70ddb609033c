"""flashviz: see, measure and teach FlashAttention.

Public API (these names and their meanings are a stable contract):
    naive_attention, flash_attention_forward, flash_attention, flash_attention_backward, tile_schedule, io_cost,
    measure_memory, benchmark, run_sweep, flash_decode, to_block_mask
Masks and score mods in FlexAttention's signatures live in flashviz.masks.

The names are imported on first use (PEP 562), each from its own module: `from flashviz import tile_schedule` or
`import flashviz.vocab` does not import torch (2 to 3 s), which the kernels need and the tile schedule does not.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from flashviz.triton import prefer_interpreter as _prefer_interpreter

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from flashviz.core.backward import BackwardTileEvent, flash_attention, flash_attention_backward
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

# Triton can only run interpreted without CUDA, and triton reads TRITON_INTERPRET once, when it is first imported
# (torch's profiler may import it): set it now where torch is a CPU-only build (flashviz.triton explains; torch-free).
_prefer_interpreter(import_torch=False)

_MODULE_OF = {  # public name -> the module that defines it
    "BackwardTileEvent": "flashviz.core.backward",
    "flash_attention": "flashviz.core.backward",
    "flash_attention_backward": "flashviz.core.backward",
    "to_block_mask": "flashviz.core.blockmask",
    "flash_decode": "flashviz.core.decode",
    "TileEvent": "flashviz.core.flash",
    "flash_attention_forward": "flashviz.core.flash",
    "naive_attention": "flashviz.core.reference",
    "Tile": "flashviz.core.tiling",
    "TileSchedule": "flashviz.core.tiling",
    "tile_schedule": "flashviz.core.tiling",
    "measure_memory": "flashviz.measure.memory",
    "run_block_sweep": "flashviz.measure.sweep",
    "run_sweep": "flashviz.measure.sweep",
    "Timing": "flashviz.measure.timing",
    "benchmark": "flashviz.measure.timing",
    "time_call": "flashviz.measure.timing",
    "time_calls": "flashviz.measure.timing",
    "attention_flops": "flashviz.model.flops",
    "IOCost": "flashviz.model.iomodel",
    "fa1_block_sizes": "flashviz.model.iomodel",
    "hbm_vs_memory": "flashviz.model.iomodel",
    "io_cost": "flashviz.model.iomodel",
    "io_trace": "flashviz.model.iomodel",
    "FULL": "flashviz.vocab",
    "PARTIAL": "flashviz.vocab",
    "SKIPPED": "flashviz.vocab",
}

__all__ = [
    "FULL",
    "PARTIAL",
    "SKIPPED",
    "BackwardTileEvent",
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


def __getattr__(name: str) -> object:
    """Import a public name's module on first use and keep the name here (later lookups skip this function)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
