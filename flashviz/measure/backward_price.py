"""The price of recomputation, measured: forward + backward time and exact peak memory of the tiled kernel (FA2
forward saving O and L, Algorithm 2's backward recomputing P) against naive attention and SDPA under autograd.

One call of `run_sweep(..., mode="training")` measures the three side by side: the timed calls interleaved call by
call (flashviz.measure.timing.time_calls), the peak from the allocator's own events (measure_memory), a row the
memory guard refuses marked "not run: <why>". This module only turns its row per implementation into plain data
for the Backward view's figure (figures/backward.py). Compare the implementations as ratios: absolute times depend
on the machine and on what else runs on it.

References: Dao, FlashAttention-2 (2023), Algorithm 2 and Section 4 (the backward's 2.5x FLOPs);
Dao et al., FlashAttention (2022), Section 3.1 (recomputation instead of storing P).
Legend: B batch, H heads, N sequence length, d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from flashviz.core.validate import Window
from flashviz.measure.guards import TIME_BUDGET_STATUS
from flashviz.measure.sweep import run_sweep
from flashviz.vocab import FLASH2, NAIVE, OK, SDPA, TRAINING

PRICE_IMPLS = (FLASH2, NAIVE, SDPA)  # the tiled kernel (FA2 forward + Algorithm 2), then the two references
PRICE_LABELS = {FLASH2: "tiled (recomputes P)", NAIVE: "naive autograd (stores P)", SDPA: "SDPA autograd"}


@dataclass(frozen=True)
class RecomputePrice:
    """Measured forward + backward of each implementation at one setting (one entry per impl, in impls' order)."""

    impls: tuple[str, ...]  # "flash2" (the tiled kernel), "naive", "sdpa"
    labels: tuple[str, ...]  # their names for people
    time_s: tuple[float, ...]  # median seconds of one forward + backward (NaN: not run)
    time_iqr_s: tuple[float, ...]  # interquartile range of the timed calls, seconds
    peak_bytes: tuple[float, ...]  # exact peak bytes above the start, outputs and gradients included (NaN: not run)
    status: tuple[str, ...]  # "ok" or "not run: <why>"
    n: int  # N
    d: int  # head dimension
    batch: int  # B
    heads: int  # H
    block_q: int  # Br of the tiled kernel
    block_k: int  # Bc
    causal: bool  # top-left causal mask
    window: Window  # sliding window or None
    dtype: str  # input dtype name
    device: str  # where it ran
    threads: int  # torch intra-op threads
    repeats: int  # timed calls per implementation

    @property
    def cut_short(self) -> bool:
        """Whether the time budget stopped some implementation (its status says so): measure again to get it."""
        return any(status.startswith(TIME_BUDGET_STATUS) for status in self.status)

    def ratio(self, field: str, impl: str, against: str = FLASH2) -> float:
        """field ("time_s" or "peak_bytes") of impl divided by against's: e.g. how many times more memory naive
        needs than the tiled kernel. NaN when either did not run."""
        values = dict(zip(self.impls, getattr(self, field), strict=True))
        a, b = values[impl], values[against]
        return a / b if b and not (math.isnan(a) or math.isnan(b)) else math.nan


def recompute_price(n: int, d: int, *, batch: int = 1, heads: int = 1, block_q: int = 64, block_k: int = 64,
                    causal: bool = False, window: Window = None, dtype: str = "float32", device: str = "cpu",
                    repeats: int = 5, warmup: int = 1, threads: int | None = None, seed: int = 0,
                    memory_budget_bytes: int | None = None, progress: Callable | None = None,
                    time_budget_s: float | None = None) -> RecomputePrice:
    """Time and peak memory of forward + backward for the tiled kernel, naive autograd and SDPA autograd.

    Args:
        n, d: N and the head dimension.  batch, heads: B and H.  block_q, block_k: the tiled kernel's Br, Bc.
        causal, window: the mask.  dtype: the inputs' dtype name.  device: "cpu" or "cuda".
        repeats, warmup: timed and untimed calls per implementation.  threads: torch intra-op threads (None: keep).
        seed: of the random inputs.  memory_budget_bytes: as run_sweep's (naive's N x N matrices are checked first).
        progress, time_budget_s: as run_sweep's: progress(done, total, label) between timed calls (raise from it to
            cancel); implementations left when the budget runs out are "not run".
    Returns:
        RecomputePrice; use .ratio("time_s", "naive") or .ratio("peak_bytes", "sdpa") to compare.

    Example:
        >>> p = recompute_price(256, 16, block_q=64, block_k=64, causal=True, repeats=1, threads=1)
        >>> p.impls, p.status, p.ratio("peak_bytes", "naive") > 1  # naive keeps P, dP and dS (N x N each)
        (('flash2', 'naive', 'sdpa'), ('ok', 'ok', 'ok'), True)
    """
    df = run_sweep([n], d=d, block_q=block_q, block_k=block_k, causal=causal, window=window, impls=PRICE_IMPLS,
                   batch=batch, heads=heads, dtype=dtype, repeats=repeats, warmup=warmup, threads=threads,
                   device=device, mode=TRAINING, memory_budget_bytes=memory_budget_bytes, seed=seed,
                   progress=progress, time_budget_s=time_budget_s)
    rows = df.set_index("impl").loc[list(PRICE_IMPLS)]
    ran = rows["status"] == OK
    return RecomputePrice(
        impls=PRICE_IMPLS, labels=tuple(PRICE_LABELS[i] for i in PRICE_IMPLS),
        time_s=tuple(float(t) if ok else math.nan for t, ok in zip(rows["time_s"], ran, strict=True)),
        time_iqr_s=tuple(float(t) if ok else math.nan for t, ok in zip(rows["time_iqr_s"], ran, strict=True)),
        peak_bytes=tuple(float(b) if ok else math.nan for b, ok in zip(rows["peak_bytes"], ran, strict=True)),
        status=tuple(str(s) for s in rows["status"]), n=n, d=d, batch=batch, heads=heads, block_q=block_q,
        block_k=block_k, causal=causal, window=window, dtype=str(dtype).removeprefix("torch."),
        device=str(rows["device"].iloc[0]), threads=int(rows["threads"].iloc[0]), repeats=repeats)
