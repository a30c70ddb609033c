"""Resource caps that the dashboard and the command line share: how big one request may be and how long it may run.

Pure (imports neither torch nor streamlit), so that the URL parser in flashviz.app.state can take its caps from here
too. flashviz.measure.sweep enforces the per-row guards (memory budget, time budget); flashviz.kit.jobs and flashviz.cli
refuse a request up front with these caps, each with a message that says how to fix it.

Legend: N sequence length (N_q = N_k), Br = block_q, Bc = block_k, Tr = ceil(N / Br), Tc = ceil(N / Bc).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

LIST_MAX = 8  # entries in a sweep list (N values, d values, block sizes): caps sweep sizes
REPEATS_MAX = 20  # timed calls per row (and untimed warm-up calls per row on the command line)
BATCH_MAX = 64  # batch size B
HEADS_MAX = 64  # heads H
TILES_MAX = 1 << 16  # tiles per tiled-kernel call (Tr x Tc): the Python tile loop costs ~20-50 us per tile
WORK_FLOP_MAX = 1.5e12  # FLOPs one dashboard request may cost: about a minute or two on a 2-core laptop
BENCH_FLOP_MAX = 1e14  # FLOPs one `flashviz bench` run may cost: about 1.5 h at 20 GFLOP/s
LIVE_INPUT_BYTES_MAX = 1 << 30  # bytes (1 GiB) of q, k, v, dO, outputs and fp64 reference copies of a dashboard run
LIVE_TIME_BUDGET_S = 120.0  # seconds a dashboard run may hold the timing lock before its remaining rows are not run
BENCH_TIME_BUDGET_S = 600.0  # seconds: the default --time-budget of `flashviz bench`


def calls_per_row(repeats: int, warmup: int) -> int:
    """Calls of one implementation per sweep row: the warm-up and timed calls, one memory measurement, one reference
    (what the work caps and the time estimate count).

    Example:
        >>> calls_per_row(3, 1)
        6
    """
    return repeats + warmup + 2


def tiles_per_call(n: int, block_q: int, block_k: int) -> int:
    """Tiles of one (N x N) tiled-kernel call: Tr x Tc = ceil(N / Br) x ceil(N / Bc)."""
    return -(-n // block_q) * -(-n // block_k)


def tile_problem(ns: Iterable[int], block_q: int, block_k: int) -> str | None:
    """Why these tiles are too many for the Python tile loop (a sentence that says how to fix it), or None.

    Example:
        >>> tile_problem([1024], 64, 64) is None
        True
        >>> tile_problem([131072], 1, 1).split(";")[0]
        'At N = 131072, tiles of Br = 1 x Bc = 1 give 17,179,869,184 tiles per call'
    """
    worst = max(ns)
    tiles = tiles_per_call(worst, block_q, block_k)
    if tiles <= TILES_MAX:
        return None
    need = math.ceil(worst / math.isqrt(TILES_MAX))  # square tiles of this size give at most TILES_MAX
    return (f"At N = {worst}, tiles of Br = {block_q} x Bc = {block_k} give {tiles:,} tiles per call; the Python "
            f"tile loop allows {TILES_MAX:,}. Raise the block size to at least {need} or lower N.")

# -- the numerics lab (flashviz.views.numerics.data): every experiment keeps float64 references of (H, N_q, N_k)
#    scores, so H N_q N_k 8 bytes <= 8 x 1024 x 1024 x 8 = 64 MiB
NUMERICS_N_MAX = 1024  # N_q and N_k
NUMERICS_HEADS_MAX = 8  # heads H (batch 1)
NUMERICS_D_MAX = 256  # head dimension d
NUMERICS_SEEDS_MAX = 16  # seeds the FP8 table may average over

# -- timing until the median is known (flashviz.measure.timing.Adaptive, repeats="auto")
AUTO_BUDGET_S = 10.0  # seconds one adaptive timing (warm-up included) may run before it stops unconverged
AUTO_MAX_REPEATS = 400  # rounds of one call per implementation at most; the progress bar's total counts this many
