"""The Triton view's claim: `triton_schedule`, that the Triton kernel, read from Triton's interpreter, loads exactly
the tiles `tile_schedule` computes and moves exactly the bytes `io_cost`'s FA2 model counts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flashviz.units import and_list, format_bytes
from flashviz.views.claim import Result
from flashviz.views.triton.data import kernel_record, setup_of
from flashviz.vocab import SKIPPED

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.views.triton.settings import TritonSettings

FORWARD_TOL = 1e-5  # fp32 against float64


def triton_schedule(s: TritonSettings) -> Result:
    """The kernel's record at the view's settings against the library.

    Args:
        s: the settings (the view's N, d, causal, BLOCK_M, BLOCK_N).
    Returns:
        Result: n, k_blocks and schedule_k_blocks (per program) and blocks (k_blocks in words), read (bytes loaded
        in words), programs, tiles, schedule_tiles, mismatched_programs,
        bytes_loaded, model_bytes_loaded, error, seconds; holds when every program loaded its schedule row, the
        bytes equal the model's and the error is at most 1e-5.

    Example:
        >>> import pytest
        >>> _ = pytest.importorskip("flashviz.triton.kernel")
        >>> from flashviz.views.triton.settings import TritonSettings
        >>> r = triton_schedule(TritonSettings())
        >>> r.holds, r.values["k_blocks"], r.values["tiles"]
        (True, [2, 4, 6, 8], 20)
    """
    r = kernel_record(setup_of(s))
    values = {"n": r.setup.n, "k_blocks": [len(row) for row in r.loaded],
              "blocks": and_list([str(len(row)) for row in r.loaded]), "read": format_bytes(r.bytes_loaded),
              "schedule_k_blocks": [sum(x != SKIPPED for x in row) for row in r.status],
              "programs": r.grid[0] * r.grid[1], "tiles": r.tiles, "schedule_tiles": r.schedule_tiles,
              "mismatched_programs": r.mismatched_programs, "bytes_loaded": r.bytes_loaded,
              "model_bytes_loaded": r.model_bytes_loaded, "error": r.error, "seconds": r.seconds}
    return Result.of(values, {
        "a program loaded other K blocks than the schedule's row": r.mismatched_programs > 0,
        "the kernel computed another number of tiles than the schedule": r.tiles != r.schedule_tiles,
        "the bytes loaded differ from io_cost's FA2 model": r.bytes_loaded != r.model_bytes_loaded,
        "the bytes stored differ from io_cost's FA2 model": r.bytes_stored != r.model_bytes_stored,
        "the fp32 kernel errs by more than 1e-5": not r.error <= FORWARD_TOL})
