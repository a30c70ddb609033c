"""The Training view's claim: `training_recompute`, what each implementation keeps for the backward pass and the
FLOPs recomputation adds (the tiled backward recomputes P from O and L: 2.5x the forward's matmuls).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flashviz.model.training import recompute_table
from flashviz.units import format_bytes
from flashviz.views.claim import Result
from flashviz.vocab import (
    DTYPE_BYTES,
)

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.views.train.settings import TrainSettings


def training_recompute(s: TrainSettings) -> Result:
    """The Training view's price of recomputation at its largest N: P kept against L, and the extra FLOPs.

    Args:
        s: the step's settings (the Benchmark's N and tile size, the sidebar's d, mask, dtype, B, H).
    Returns:
        Result: batch, heads, n, dtype, p and lse (formatted bytes kept), extra (fraction of backward FLOPs added),
        gflop (added), and for the slide's picture p_bytes and lse_bytes (the bytes kept); holds when P is B H N²
        elements, L is B H N fp32 values and the extra is a quarter.

    Example:
        >>> from flashviz.lesson.steps import INTRO
        >>> training_recompute(INTRO.step("training_recompute").view_settings()).values["p"]
        '64.0 MiB'
    """
    table = recompute_table(s.ns, s.d, batch=s.batch, heads=s.heads, block_q=s.bench_block, block_k=s.bench_block,
                            causal=s.causal, window=s.window, dtype=s.dtype)
    last = table.loc[table["N"].idxmax()]
    n = int(last["N"])
    values = {"batch": s.batch, "heads": s.heads, "n": n, "dtype": s.dtype, "p": format_bytes(last["stored_p_bytes"]),
              "lse": format_bytes(last["stored_lse_bytes"]), "extra": float(last["extra_backward_fraction"]),
              "gflop": float(last["extra_flops"]) / 1e9, "p_bytes": float(last["stored_p_bytes"]),
              "lse_bytes": float(last["stored_lse_bytes"])}
    return Result.of(values, {
        "P is not B H N^2 elements": int(last["stored_p_bytes"]) != s.batch * s.heads * n * n * DTYPE_BYTES[s.dtype],
        "L is not B H N fp32 values": int(last["stored_lse_bytes"]) != s.batch * s.heads * n * 4,
        "recomputing is not one matmul in four": float(last["extra_backward_fraction"]) != 0.25})

