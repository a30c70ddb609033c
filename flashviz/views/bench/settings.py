"""The Benchmark's own settings: the lengths, implementations, tile size and repeats it times (Block size and Training
read them too)."""

from __future__ import annotations

from flashviz.app.sizes import (
    BLOCK_MAX,
    BLOCK_MIN,
    BLOCK_OPTIONS,
    N_MAX,
    N_MIN,
)
from flashviz.app.spec import INT, INTS, STRS, VIEW, Spec, setting
from flashviz.limits import LIST_MAX, REPEATS_MAX
from flashviz.vocab import (
    FLASH,
    FLASH2,
    IMPLS,
    KV_OUTER,
    LOOP_ORDER_LABELS,
    NAIVE,
    Q_OUTER,
    SDPA,
)

# -- Benchmark and Training
BENCH_N_OPTIONS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
IMPL_HELP = {
    NAIVE: "standard attention: materialises S and P (N² each)",
    FLASH: f"tiled, {LOOP_ORDER_LABELS[KV_OUTER]}",
    FLASH2: f"tiled, {LOOP_ORDER_LABELS[Q_OUTER]}",
    SDPA: "PyTorch's fused scaled_dot_product_attention",
}

OWN = dict(  # this view's own settings: name (its URL key) -> setting(default, Spec)
        ns=setting((512, 1024, 2048), Spec(  # with H = 4: about 10 s on 2 CPU cores
            INTS, "multiselect", "Sequence lengths N", lo=N_MIN, hi=N_MAX, options=BENCH_N_OPTIONS, place=VIEW,
            short="N", help=f"Up to {LIST_MAX} lengths; each one is measured for every implementation. Naive rows "
                            "that would not fit in memory are refused and listed with the memory they would need.")),
        impls=setting(IMPLS, Spec(
            STRS, "multiselect", "Implementations", options=IMPLS, place=VIEW, short="implementations",
            help="Which attention implementations to time: "
                 + "; ".join(f"**{i}**: {what}" for i, what in IMPL_HELP.items()) + ".")),
        bblock=setting(256, Spec(
            INT, "select_slider", "Tile size Br = Bc", lo=BLOCK_MIN, hi=BLOCK_MAX, options=BLOCK_OPTIONS,
            place=VIEW, short="tile size",
            help="Tile size of the tiled kernels in the Benchmark and Training views (the sidebar's Br and Bc drive "
                 "the tile map). On a CPU each tile is one Python loop iteration, so small tiles pay that overhead "
                 "many times over.")),
        reps=setting(3, Spec(
            INT, "slider", "Repeats", lo=1, hi=REPEATS_MAX, place=VIEW, short="repeats",
            help="Timed calls per point (after one warm-up call); the median is plotted, the interquartile range "
                 "as error bars.")),
)
