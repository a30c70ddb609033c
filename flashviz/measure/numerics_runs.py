"""The Numerics view's run: every experiment of the numerics lab on one LabSettings, with progress, and what that
run costs before it starts (so the dashboard can run small settings at once, put large ones behind a button and
refuse what would take too long).

The experiments are numerics_lab's (kernel_errors, flash_vs_sdpa, tile_spread) and numerics_ideas' (lazy_rescale,
fp8_table, causal_alignment); docs/numerics.md explains each. The cost is counted, not timed: kernel calls (each
with its seeded inputs and float64 reference), tiles of the tiled kernels' Python loop, and FLOPs, weighed by
per-unit costs measured once on a 2-core laptop CPU.

Legend: H heads (batch 1), N_q / N_k query / key lengths, d head dimension, Br = Bc = block, T(b) = ceil(N_q / b)
x ceil(N_k / b) tiles of one tiled call.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from flashviz.measure.numerics_ideas import (
    FP8_SEEDS,
    CausalAlignment,
    Fp8Table,
    LazyRescale,
    causal_alignment,
    fp8_table,
    lazy_rescale,
)
from flashviz.measure.numerics_lab import (
    TILE_SIZES,
    FlashVsSdpa,
    KernelErrors,
    LabSettings,
    TileSpread,
    flash_vs_sdpa,
    kernel_errors,
    tile_spread,
)
from flashviz.measure.progress import Progress, stage

# Per-unit costs of the lab on a 2-core laptop CPU with the machine otherwise idle (CPU time of run_lab over N_q, N_k
# from 128 to 1024 and tiles from 8 to 256, one thread; rounded up about twofold): a kernel call with its inputs and
# float64 reference, one tile of a tiled kernel's Python loop, one FLOP. A busy machine takes several times longer.
CALL_S = 2e-3  # seconds per kernel call (seeded inputs, float64 reference, the small ops around the kernel)
TILE_S = 1e-4  # seconds per tile of a tiled kernel's loop (a dozen small ops, the on_tile events)
FLOP_S = 1e-10  # seconds per FLOP (float64 references and low-precision casts run far below fp32 matmul peak)
AUTO_S = 3.0  # seconds: a run estimated at most this long starts when the page opens (with a progress bar)
LAB_S_MAX = 30.0  # seconds: a run estimated longer is refused (several minutes on a busy shared server)
FP8_RUNS = 4  # cells of the FP8 table: plain / outliers x Hadamard off / on, each over FP8_SEEDS seeds


@dataclass(frozen=True)
class LabWork:
    """What one run_lab call costs, counted before it starts."""

    calls: int  # kernel calls, each on seeded inputs with a float64 reference
    tiles: int  # tiles of the tiled kernels' loops (FA1, FA2, the FP8 kernel's K/V blocks, flash_decode's blocks)
    flops: float  # 4 H N_q N_k d per attention call
    seconds: float  # the estimate: calls x CALL_S + tiles x TILE_S + flops x FLOP_S

    @property
    def runs_at_once(self) -> bool:
        """Small enough to run when the page opens."""
        return self.seconds <= AUTO_S


def _tiles(s: LabSettings, block: int) -> int:
    return -(-s.n_q // block) * -(-s.n_k // block)  # T(block), an upper bound under a causal mask


def lab_work(s: LabSettings, n_seeds: int = FP8_SEEDS) -> LabWork:
    """Kernel calls, tiles and FLOPs of run_lab(s), and the seconds they take on a 2-core laptop (an estimate).

    Example:
        >>> w = lab_work(LabSettings())
        >>> w.calls, w.tiles, w.runs_at_once
        (61, 318, True)
    """
    t, kv_blocks = _tiles(s, s.block), -(-s.n_k // s.block)
    spread = [b for b in TILE_SIZES if b <= max(s.n_q, s.n_k)] or [min(TILE_SIZES)]
    fp8_calls = FP8_RUNS * n_seeds
    # (calls, tiles) per experiment; every experiment also builds its inputs and float64 reference (one call)
    parts = {
        "kernel errors": (5 + s.is_fp8, 2 * t + s.is_fp8 * kv_blocks),  # naive, FA1, FA2, SDPA (+ FP8)
        "flash vs SDPA": (3, t),
        "tile spread": (1 + len(spread), sum(_tiles(s, b) for b in spread)),
        "lazy rescale": (3, 2 * t),
        "FP8 table": (2 * fp8_calls, fp8_calls * kv_blocks),  # inputs + reference, then the kernel, per run
        "causal alignment": (5, 3 * t + kv_blocks),  # 2 masked FA2, flash_decode, a masked FA2 in fp32
    }
    calls = sum(c for c, _ in parts.values())
    tiles = sum(n for _, n in parts.values())
    flops = 4.0 * s.heads * s.n_q * s.n_k * s.d * calls
    return LabWork(calls, tiles, flops, calls * CALL_S + tiles * TILE_S + flops * FLOP_S)


def lab_problem(s: LabSettings, work: LabWork | None = None) -> str | None:
    """Why run_lab(s) is too big to run live (a sentence that says how to fix it), or None.

    Example:
        >>> lab_problem(LabSettings()) is None
        True
        >>> print(lab_problem(LabSettings(n_q=1024, n_k=1024, block=4)).split(". ")[-1])
        Raise the tile size to at least 8, or lower N_q or N_k.
    """
    work = work or lab_work(s)
    if work.seconds <= LAB_S_MAX:
        return None
    fits = next((b for b in (2 ** e for e in range(1, 11)) if b > s.block
                 and lab_work(replace(s, block=b)).seconds <= LAB_S_MAX), None)
    fix = f"Raise the tile size to at least {fits}, or lower N_q or N_k." if fits else "Lower N_q or N_k."
    return (f"At N_q = {s.n_q}, N_k = {s.n_k} with {s.block} x {s.block} tiles the lab would run {work.tiles:,} tiles "
            f"and {work.calls} kernel calls: about {work.seconds:.0f} s on an idle laptop CPU, over the live cap of "
            f"{LAB_S_MAX:.0f} s. {fix}")


@dataclass(frozen=True)
class LabResult:
    """Every experiment of the numerics lab on one LabSettings (the Numerics view draws each)."""

    settings: LabSettings  # what it ran with
    errors: KernelErrors  # every kernel against float64, flash-attn's rule
    vs_sdpa: FlashVsSdpa  # FA2 against SDPA in the same dtype
    spread: TileSpread  # FA2 over tile sizes
    rescale: LazyRescale  # FA4's conditional rescale against tau = 0
    fp8: Fp8Table  # FA3's FP8 RMSE, plain / outliers x Hadamard off / on
    causal: CausalAlignment  # top-left against bottom-right causal masks


STEPS = ("kernel errors", "FA2 vs SDPA", "tile sizes", "lazy rescale", "FP8 table", "causal alignment")


def run_lab(s: LabSettings, *, n_seeds: int = FP8_SEEDS, progress: Progress | None = None) -> LabResult:
    """Every experiment on s, in STEPS' order; progress(done, total, label) before each (and after each FP8 run).

    Args:
        s: the settings.  n_seeds: seeds of the FP8 table.
        progress: flashviz.measure.progress's callback; raise from it to stop the run (nothing is returned).
    Returns:
        LabResult.

    Example:
        >>> r = run_lab(LabSettings(n_q=16, n_k=32, d=8, heads=1, block=8), n_seeds=1)
        >>> [row.label for row in r.errors.rows], r.causal.offset
        (['naive', 'FA1', 'FA2', 'SDPA'], 16)
    """
    fp8_runs = FP8_RUNS * n_seeds
    total = len(STEPS) - 1 + fp8_runs
    runs = (lambda: kernel_errors(s), lambda: flash_vs_sdpa(s), lambda: tile_spread(s), lambda: lazy_rescale(s),
            lambda: fp8_table(s, n_seeds, progress=stage(progress, 4, total)), lambda: causal_alignment(s))
    results = []
    for i, (label, run) in enumerate(zip(STEPS, runs, strict=True)):
        if progress is not None:
            progress(i if i <= 4 else 4 + fp8_runs, total, label)
        results.append(run())
    if progress is not None:
        progress(total, total, "done")
    return LabResult(s, *results)
