"""The Benchmark's own settings: the lengths, implementations, tile size and repeats it times (Block size and Training
read them too)."""

from __future__ import annotations

from flashviz.kit.settings import view_settings
from flashviz.kit.sizes import (
    BLOCK_MAX,
    BLOCK_MIN,
    BLOCK_OPTIONS,
    N_MAX,
    N_MIN,
)
from flashviz.kit.spec import BOOL, INT, INTS, STRS, VIEW, Spec, setting
from flashviz.limits import AUTO_BUDGET_S, LIST_MAX, REPEATS_MAX
from flashviz.measure.stats import TARGET_REL_CI, min_repeats
from flashviz.vocab import (
    FLASH,
    FLASH2,
    IMPL_LABELS,
    IMPLS,
    KV_OUTER,
    LOOP_ORDER_LABELS,
    NAIVE,
    Q_OUTER,
    SDPA,
)

# -- Benchmark and Training
MIN_REPEATS = min_repeats()  # timed calls a 95% interval of a median needs
BENCH_N_OPTIONS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
IMPL_CHIPS = {NAIVE: "naive", FLASH: IMPL_LABELS[FLASH], FLASH2: IMPL_LABELS[FLASH2], SDPA: "SDPA"}  # the charts'
#                                                     names, short enough for four chips in one row at 1280 px
IMPL_HELP = {
    NAIVE: "standard attention: materialises S and P (N² each)",
    FLASH: f"tiled, {LOOP_ORDER_LABELS[KV_OUTER]}",
    FLASH2: f"tiled, {LOOP_ORDER_LABELS[Q_OUTER]}",
    SDPA: "PyTorch's fused scaled_dot_product_attention",
}


@view_settings("Benchmark", reads=("d", "causal", "window", "dtype", "batch", "heads", "device", "threads"),
               also_reads=("br", "bc"))
class BenchSettings:
    """The Benchmark view's settings: the shared ones it reads and its own."""

    ns: tuple[int, ...] = setting((512, 1024, 2048), Spec(  # with H = 4: about 10 s on 2 CPU cores
        INTS, "multiselect", "Sequence lengths N", lo=N_MIN, hi=N_MAX, options=BENCH_N_OPTIONS, place=VIEW,
        short="N", help=f"Up to {LIST_MAX} lengths; each one is measured for every implementation. Naive rows "
                        "that would not fit in memory are refused and listed with the memory they would need."))
    impls: tuple[str, ...] = setting(IMPLS, Spec(
        STRS, "multiselect", "Implementations", options=IMPLS, place=VIEW, short="implementations",
        labels=IMPL_CHIPS,
        help="Which attention implementations to time: "
             + "; ".join(f"**{i}**: {what}" for i, what in IMPL_HELP.items()) + "."))
    bench_block: int = setting(256, Spec(
        INT, "select_slider", "Tile Br = Bc", lo=BLOCK_MIN, hi=BLOCK_MAX, options=BLOCK_OPTIONS,
        place=VIEW, short="tile size",
        help="Tile size of the tiled kernels in the Benchmark and Training views (the sidebar's Br and Bc drive "
             "the tile map). On a CPU each tile is one Python loop iteration, so small tiles pay that overhead "
             "many times over."), key="bblock")
    reps: int = setting(3, Spec(
        INT, "slider", "Repeats", lo=1, hi=REPEATS_MAX, place=VIEW, short="repeats",
        help="Timed calls per point (after one warm-up call) when *Repeat until sure* is off; with it on, at "
             f"least this many and at least {MIN_REPEATS} (a 95% interval of a median needs {MIN_REPEATS}). The "
             "median is plotted with its 95% interval as error bars."))
    sure: bool = setting(True, Spec(
        BOOL, "toggle", "Repeat until sure", place=VIEW, short="repeat until sure",
        help=f"Times each N, the implementations interleaved, until every median is known to ±{TARGET_REL_CI:.0%} "
             f"(its 95% interval) or {AUTO_BUDGET_S:.0f} s pass, as pyperf and torch.utils.benchmark's "
             "adaptive_autorange do. A kernel is called faster only where the intervals separate; otherwise the "
             "view says it is too close to call here, and what would settle it."))
