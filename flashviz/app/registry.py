"""The dashboard's tabs, each declared once: its link slug (`?view=<slug>`), its label, the function that draws it, the
sidebar's shared settings it reads, the settings of other tabs it reads, and its own settings.

A new tab is one `View` entry here plus its module. The page (app.py) draws the tabs in this order and runs only the
open one, importing its module then (torch takes 2 to 3 s to import, pandas most of a second); the sidebar shows the
shared settings the open tab reads; the URL parser, the widgets and `Settings` (flashviz.app.state) take every tab's
own settings from here. Pure: imports neither streamlit nor torch, so the URL parser can read it in milliseconds.

Legend: N sequence length, d head dimension, Br = block_q, Bc = block_k, B batch, H heads, H_q / H_kv query / K/V
heads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field
from typing import Any

from flashviz.app.sizes import (
    BLOCK_MAX,
    BLOCK_MIN,
    BLOCK_OPTIONS,
    D_MAX,
    D_MIN,
    D_OPTIONS,
    N_MAX,
    N_MIN,
    N_OPTIONS,
)
from flashviz.app.spec import BOOL, CHOICE, INT, INTS, STRS, TAB, Spec, setting
from flashviz.figures.tilemap import MAX_FRAMES  # plain Python: no plotly, pandas or torch
from flashviz.limits import HEADS_MAX, LIST_MAX, NUMERICS_N_MAX, REPEATS_MAX
from flashviz.views.masks.presets import MaskParam, mask_settings, preset_labels  # torch-free: the presets in one table
from flashviz.vocab import (
    DQ_ATOMIC,
    DQ_DETERMINISTIC,
    DTYPE_BYTES,
    DTYPES,
    FLASH,
    FLASH2,
    IMPLS,
    KV_OUTER,
    LOOP_ORDER_LABELS,
    NAIVE,
    PRECISION_LABELS,
    PRECISIONS,
    Q_OUTER,
    SDPA,
)

# -- How it works
LOOP_ORDER = {"fa1": KV_OUTER, "fa2": Q_OUTER}  # URL name -> tile_schedule loop_order
BOTH = "both"  # the URL name of both loop orders side by side
ORDERS = {**{name: LOOP_ORDER_LABELS[order] for name, order in LOOP_ORDER.items()}, BOTH: "FA1 and FA2 side by side"}
# -- Benchmark and Training
BENCH_N_OPTIONS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
IMPL_HELP = {
    NAIVE: "standard attention: materialises S and P (N² each)",
    FLASH: f"tiled, {LOOP_ORDER_LABELS[KV_OUTER]}",
    FLASH2: f"tiled, {LOOP_ORDER_LABELS[Q_OUTER]}",
    SDPA: "PyTorch's fused scaled_dot_product_attention",
}
# -- Backward: the map's own small problem (every tile can be narrated) and which dQ schedule it plays
BW_N_OPTIONS = (8, 16, 24, 32, 48, 64, 97, 128, 256, 512)  # the map's N: 4 x 4 tiles at the default Br = Bc = 8
BW_DQ = {DQ_ATOMIC: "atomic dQ (Algorithm 2)", DQ_DETERMINISTIC: "deterministic dQ (second pass)",
         BOTH: "both side by side"}  # URL name -> label
# -- Roofline: the GPU dtypes FlashAttention runs in (not float64), tensor-core types first
GPU_DTYPES = tuple(sorted((t for t in DTYPES if DTYPE_BYTES[t] <= 4), key=DTYPE_BYTES.get))
GPU_DTYPE_LABELS = {t: f"{t} ({'tensor' if DTYPE_BYTES[t] == 2 else 'CUDA'} cores)" for t in GPU_DTYPES}
# -- Decoding
DEC_LEN_MAX = 65536  # keys in a decoding view's cache: 64 Ki tokens, a long-context model's
DEC_LEN_OPTIONS = (256, 1000, 1024, 4096, 16384, 32768, 65536)
DEC_HEADS_OPTIONS = (1, 2, 4, 8, 12, 16, 32, 64)
DEC_PAGE_OPTIONS = (0, 16, 64, 256, 1024)  # keys per page; 0 = contiguous cache
DEC_PAGE_MAX = 4096
DEC_SPLITS = {"auto": "auto (heuristic)", **{str(s): str(s) for s in (1, 2, 3, 4, 8, 16, 32)}}  # URL -> label
DEC_LENS = {  # URL name -> label: the batch's cache lengths as fractions of the longest, N
    "one": "1 sequence: N",
    "pair": "2 sequences: N, N/3",
    "four": "4 sequences: N each",
    "ragged": "4 sequences: N, 0.7N, 0.4N, 0.1N",
}
# -- Numerics: bounded by flashviz.views.numerics.data.LabSettings' caps (flashviz.limits)
NO_P_ROUNDING = "none"  # the URL name of P~ not rounded (FA1/FA2 keep it in fp32)
P_PRECISIONS = (NO_P_ROUNDING, *(p for p in PRECISIONS if p != "float32"))  # what P~ may be rounded to
P_LABELS = {NO_P_ROUNDING: "P~ fp32", **{p: f"P~ {PRECISION_LABELS[p]}" for p in P_PRECISIONS[1:]}}
NUMERICS_BLOCKS = (4, 8, 16, 32, 64, 128, 256)  # tile sizes offered (a link may carry any from 1 to N max)
NUMERICS_TAUS = (0, 1, 2, 4, 8, 12, 16)  # tau offered, log2 units: 8 is FA4's; 16 lets P~ overflow fp16 and FP8
NUMERICS_TAU_MAX = 16  # 2^16 = 65536 > fp16's largest number 65504
# -- Masks: every setting comes from flashviz.views.masks.presets, the one table of the presets and their parameters
MASK_PRESETS = preset_labels()  # URL name -> label of each preset the Masks view offers


@dataclass(frozen=True, eq=False)
class View:
    """One tab of the dashboard."""

    slug: str  # its link: ?view=<slug>
    label: str  # the tab's label
    draws: str  # "module:function" that draws it, function(settings) -> None; the module is imported when it opens
    sidebar: tuple[str, ...]  # the shared settings (flashviz.app.state, drawn in the sidebar) it reads
    own: Mapping[str, Field] = field(default_factory=dict)  # its own settings: name -> setting(default, Spec(TAB))
    borrows: tuple[str, ...] = ()  # other tabs' own settings it reads (it may draw their widgets in its own tab)

    def function(self) -> Callable[[Any], None]:
        """The function that draws the tab, its module imported now."""
        module, name = self.draws.split(":")
        return getattr(importlib.import_module(module), name)




def mask_setting(p: MaskParam) -> Field:
    """A Masks-tab setting as flashviz.views.masks.presets declares it: default, bounds, step, label and help."""
    if p.options:
        return setting(p.default, Spec(CHOICE, p.widget, p.label, help=p.help, place=TAB, options=p.options,
                                       labels=p.labels))
    return setting(p.default, Spec(INT, p.widget, p.label, help=p.help, place=TAB, lo=p.lo, hi=p.hi,
                                   increment=p.step))


MASK_SETTINGS = tuple(mask_settings())  # the Masks tab's own settings (URL keys), declared in its entry below
VIEWS: tuple[View, ...] = (
    View("how", "How it works", "flashviz.views.how.page:how_it_works_ui",
         sidebar=("n", "d", "br", "bc", "causal", "window", "dtype"),
         borrows=MASK_SETTINGS,  # with usemask on: the map of the Masks tab's mask
         own=dict(
        order=setting("fa1", Spec(
            CHOICE, "radio", "Loop order", options=tuple(ORDERS), labels=ORDERS, place=TAB, short="loop order",
            help="FA1 (Algorithm 1) loops over K/V blocks outside and Q blocks inside, rewriting O, l, m in HBM "
                 "after every tile. FA2 loops over Q blocks outside and keeps O_i on chip until its row is done.")),
        usemask=setting(False, Spec(
            BOOL, "toggle", "Mask from the Masks tab", place=TAB, short="the Masks tab's mask",
            help="Animate the tile map of the mask built in the Masks tab (presets, AND / OR) instead of the "
                 "sidebar's causal mask and window.")),
        row=setting(512, Spec(
            INT, "number_input", "Query row r", lo=0, hi=N_MAX - 1, place=TAB, short="row",
            help="Which row of S to follow. Its m and l change only on the tiles of its Q block; the dotted "
                 "line on the tile map marks it.")),
        autorow=setting(True, Spec(
            BOOL, "toggle", "Show the row with the most rescales", place=TAB, short="automatic row",
            help="Picks the query row whose running max m grows on the most tiles (so the rescale of l is "
                 "visible), among up to 512 rows; ties go to the row nearest r. Turn it off to choose the row "
                 "yourself.")),
        frame=setting(0, Spec(  # drawn by the How it works tab: its options are the map's frames
            INT, "", "Tile map opens at computed tile", lo=0, hi=MAX_FRAMES - 1, place=TAB, short="start frame",
            help="The tile the map shows first. It is kept when you change a setting, as long as the new map still "
                 "has that frame (else the map opens at its last tile), so the class keeps its place. Play and the "
                 "map's own slider move from there but do not change this setting.")),
    )),
    View("bench", "Benchmark", "flashviz.views.bench.page:benchmark_ui",
         sidebar=("d", "causal", "window", "dtype", "batch", "heads", "device", "threads"), own=dict(
        ns=setting((512, 1024, 2048), Spec(  # with H = 4: about 10 s on 2 CPU cores
            INTS, "multiselect", "Sequence lengths N", lo=N_MIN, hi=N_MAX, options=BENCH_N_OPTIONS, place=TAB,
            short="N", help=f"Up to {LIST_MAX} lengths; each one is measured for every implementation. Naive rows "
                            "that would not fit in memory are refused and listed with the memory they would need.")),
        impls=setting(IMPLS, Spec(
            STRS, "multiselect", "Implementations", options=IMPLS, place=TAB, short="implementations",
            help="Which attention implementations to time: "
                 + "; ".join(f"**{i}**: {what}" for i, what in IMPL_HELP.items()) + ".")),
        bblock=setting(256, Spec(
            INT, "select_slider", "Tile size Br = Bc", lo=BLOCK_MIN, hi=BLOCK_MAX, options=BLOCK_OPTIONS,
            place=TAB, short="tile size",
            help="Tile size of the tiled kernels in the Benchmark and Training tabs (the sidebar's Br and Bc drive "
                 "the tile map). On a CPU each tile is one Python loop iteration, so small tiles pay that overhead "
                 "many times over.")),
        reps=setting(3, Spec(
            INT, "slider", "Repeats", lo=1, hi=REPEATS_MAX, place=TAB, short="repeats",
            help="Timed calls per point (after one warm-up call); the median is plotted, the interquartile range "
                 "as error bars.")),
    )),
    View("block", "Block size", "flashviz.views.block.page:block_size_ui",
         sidebar=("n", "d", "causal", "window", "dtype", "batch", "heads", "device", "threads"), borrows=("reps",),
         own=dict(
        blocks=setting((16, 32, 64, 128, 256), Spec(
            INTS, "multiselect", "Block sizes Br = Bc", lo=BLOCK_MIN, hi=BLOCK_MAX, options=BLOCK_OPTIONS,
            place=TAB, short="block sizes",
            help=f"Square tiles to try, up to {LIST_MAX}; each is timed for both loop orders (FA1 and FA2).")),
    )),
    View("io", "IO model", "flashviz.views.io.page:io_model_ui",
         sidebar=("n", "d", "causal", "window", "dtype", "batch", "heads")),
    View("correct", "Correctness", "flashviz.views.correct.page:correctness_ui",
         sidebar=("br", "bc", "causal", "window", "dtype", "device", "threads"), own=dict(
        cds=setting((16, 32, 64, 128), Spec(
            INTS, "multiselect", "Head dimensions d", lo=D_MIN, hi=D_MAX, options=D_OPTIONS, place=TAB, short="d",
            help="Odd values (59, 111) exercise code paths that powers of two hide.")),
        cns=setting((64, 97, 256, 1000), Spec(
            INTS, "multiselect", "Sequence lengths N", lo=N_MIN, hi=N_MAX, options=N_OPTIONS, place=TAB, short="N",
            help="Odd lengths (97, 257, 1000) make the last row and column of tiles ragged.")),
    )),
    View("train", "Training", "flashviz.views.train.page:training_ui",
         sidebar=("d", "causal", "window", "dtype", "batch", "heads", "device", "threads"),
         borrows=("ns", "impls", "bblock", "reps")),
    View("backward", "Backward", "flashviz.views.backward.page:backward_ui",
         sidebar=("n", "d", "br", "bc", "window", "dtype", "batch", "heads", "device", "threads"), borrows=("reps",),
         own=dict(
        bwn=setting(32, Spec(
            INT, "select_slider", "Map: N", lo=N_MIN, hi=N_MAX, options=BW_N_OPTIONS, place=TAB,
            short="map N", help="Sequence length of the small problem the tile map plays and the real kernel runs "
                                "(one head, batch 1): few enough tiles to narrate each one. The traffic at scale and "
                                "the measured price use the sidebar's N, d, Br and Bc.")),
        bwd=setting(16, Spec(
            INT, "select_slider", "Map: d", lo=D_MIN, hi=D_MAX, options=D_OPTIONS, place=TAB,
            short="map d", help="Head dimension of the map's problem. Every tile streams Q_i and dO_i (Br × d each) "
                                "and reads and writes dQ_i, so a large d with small tiles makes the tiled backward "
                                "move more bytes than standard attention's; the page says so when it does.")),
        bwblock=setting(8, Spec(
            INT, "select_slider", "Map: tile Br = Bc", lo=BLOCK_MIN, hi=BLOCK_MAX, options=BLOCK_OPTIONS,
            place=TAB, short="map tile", help="Query rows and keys per tile of the map's problem.")),
        bwcausal=setting(True, Spec(
            BOOL, "toggle", "Causal mask", place=TAB, short="causal",
            help="Query i sees keys j ≤ i: the tiles above the diagonal are skipped in the backward as in the "
                 "forward. This tab's own switch (the sidebar's is off by default): it applies to the map, the "
                 "traffic at scale and the measured price.")),
        dq=setting(DQ_ATOMIC, Spec(
            CHOICE, "radio", "dQ schedule on the map", options=tuple(BW_DQ), labels=BW_DQ, place=TAB,
            short="dQ schedule",
            help="Atomic: Algorithm 2 adds each tile's dS_ij K_j into dQ_i in HBM (an atomic add on a GPU). "
                 "Deterministic: a second pass over the Q blocks recomputes S, P, dP, dS and builds dQ_i on chip, "
                 "written once. Both: the two side by side in lockstep, with a switch on the map.")),
        bwframe=setting(0, Spec(  # drawn by the Backward tab: its options are the map's frames
            INT, "", "Tile map opens at computed tile", lo=0, hi=MAX_FRAMES - 1, place=TAB, short="start frame",
            help="The tile the map shows first, and whose operations the table beside it lists. Play and Restart "
                 "move the map from there but do not change this setting.")),
    )),
    View("roof", "Roofline", "flashviz.views.roof.page:roofline_ui",
         sidebar=("n", "d", "br", "bc", "causal", "window", "dtype", "batch", "heads", "threads"),
         borrows=("bblock",),  # the Benchmark's tile size: its speedups are told apart from this tab's
         own=dict(
        gpu_dtype=setting("float16", Spec(
            CHOICE, "selectbox", "GPU dtype", options=GPU_DTYPES, labels=GPU_DTYPE_LABELS, place=TAB,
            short="GPU dtype",
            help="Element type the GPU roofs and points assume. FlashAttention runs fp16/bf16 on tensor cores (A100: "
                 "312 TFLOP/s dense); fp32 runs on CUDA cores (19.5 TFLOP/s), so naive attention is already "
                 "compute-bound there and the predicted speedup is about 1x. This CPU uses the sidebar's dtype.")),
    )),
    View("decode", "Decoding", "flashviz.views.decode.page:decoding_ui",
         sidebar=("d", "dtype", "device", "threads"), borrows=("reps",), own=dict(
        declen=setting(16384, Spec(
            INT, "select_slider", "Cache length N (keys)", lo=1, hi=DEC_LEN_MAX, options=DEC_LEN_OPTIONS, place=TAB,
            short="cache length", help="Keys already in the longest sequence's KV cache. Every decode step reads all "
                                       "of them.")),
        dechq=setting(8, Spec(
            INT, "select_slider", "Query heads H_q", lo=1, hi=HEADS_MAX, options=DEC_HEADS_OPTIONS, place=TAB,
            short="H_q", help="Query heads per layer. Each one does 4·N·d FLOPs per decode step.")),
        dechkv=setting(2, Spec(
            INT, "selectbox", "K/V heads H_kv", lo=1, hi=HEADS_MAX, place=TAB, short="H_kv",
            help="K/V heads in the cache; only divisors of H_q are offered. H_kv = H_q is multi-head attention "
                 "(MHA), 1 is multi-query (MQA), anything between is grouped-query (GQA): g = H_q / H_kv query heads "
                 "share each K/V head, so the cache and its reads shrink g-fold.")),
        decsplits=setting("4", Spec(
            CHOICE, "selectbox", "Splits S", options=tuple(DEC_SPLITS), labels=DEC_SPLITS, place=TAB, short="splits",
            help="Chunks the cache is cut into, each computed independently and merged by logsumexp. Auto: "
                 "flash-attn's rule on this machine's threads (split only while they are not all busy).")),
        decpage=setting(0, Spec(
            INT, "select_slider", "Page size (keys)", lo=0, hi=DEC_PAGE_MAX, options=DEC_PAGE_OPTIONS, place=TAB,
            short="page size", help="0: one contiguous cache per sequence. Otherwise the cache lives in fixed-size "
                                    "pages anywhere in a shared pool, found through a block table (vLLM's "
                                    "PagedAttention).")),
        declens=setting("pair", Spec(
            CHOICE, "selectbox", "Batch", options=tuple(DEC_LENS), labels=DEC_LENS, place=TAB, short="batch",
            help="Sequences decoded together and their cache lengths. The splits cut every sequence at the same key "
                 "positions; a short sequence simply has nothing in the later splits.")),
    )),
    View("masks", "Masks", "flashviz.views.masks.page:masks_ui",
         sidebar=("n", "d", "br", "bc", "dtype", "heads", "threads"),
         own={name: mask_setting(param) for name, param in mask_settings().items()}),
    View("numerics", "Numerics", "flashviz.views.numerics.page:numerics_ui", sidebar=(), own=dict(
        nmdtype=setting("bfloat16", Spec(
            CHOICE, "selectbox", "Input dtype", options=PRECISIONS, labels=PRECISION_LABELS, place=TAB, short="inputs",
            help="What Q, K, V are stored in. bf16 keeps 8 significant bits (eps = 2⁻⁷), fp16 11, fp32 24. With an "
                 "FP8 format (e4m3: 4 bits, max 448; e5m2: 3 bits) FA3's FP8 kernel joins the comparison and the "
                 "other kernels run in fp32 on Q, K, V rounded to FP8 with one scale per head.")),
        nmpdtype=setting(NO_P_ROUNDING, Spec(
            CHOICE, "selectbox", "P's dtype", options=P_PRECISIONS, labels=P_LABELS, place=TAB, short="P",
            help="What FA1 and FA2 round the probabilities P~ to before P V, as a GPU kernel does to feed its 16-bit "
                 "or FP8 tensor cores (the row sum l is taken before the rounding). fp32: not rounded.")),
        nmblock=setting(64, Spec(
            INT, "select_slider", "Tile Br = Bc", lo=1, hi=NUMERICS_N_MAX, options=NUMERICS_BLOCKS, place=TAB,
            short="tile", help="Rows and keys per tile of FA1 and FA2, and the FP8 kernel's quantisation block. "
                               "Another tile size is another order of the sums.")),
        nmtau=setting(8, Spec(
            INT, "select_slider", "FA4's tau", lo=0, hi=NUMERICS_TAU_MAX, options=NUMERICS_TAUS, place=TAB,
            short="tau", help="FA1 and FA2 rescale a row's sum and output only when its running max grew by more "
                              "than tau (log2 units: 8 is a factor of 256), as FlashAttention-4 does; 0 is the classic "
                              "update. The rescale chart compares tau = 0 with this tau (with 8 when it is 0).")),
        nmnq=setting(128, Spec(
            INT, "number_input", "N_q", lo=1, hi=NUMERICS_N_MAX, increment=32, place=TAB, short="N_q",
            help="Query rows. With N_q ≠ N_k the two causal alignments differ.")),
        nmnk=setting(256, Spec(
            INT, "number_input", "N_k", lo=1, hi=NUMERICS_N_MAX, increment=32, place=TAB, short="N_k",
            help="Keys (and values). 2 heads of d = 64, batch 1.")),
        nmhad=setting(True, Spec(
            BOOL, "toggle", "Hadamard (FP8 kernel)", place=TAB, short="Hadamard",
            help="FA3's incoherent processing in the FP8 kernel of the error chart: Q and K times one random "
                 "orthogonal matrix, which leaves Q Kᵀ unchanged and spreads outlier channels. The FP8 table shows "
                 "both settings whatever this one is.")),
        nmout=setting(True, Spec(
            BOOL, "toggle", "Outlier features", place=TAB, short="outlier inputs",
            help="Inputs like a trained LLM's: 4 of the 64 channels of q and k 4x larger. The FP8 table shows both "
                 "kinds of input whatever this one is.")),
        nmcausal=setting(False, Spec(
            BOOL, "toggle", "Causal mask", place=TAB, short="causal",
            help="A top-left causal mask (SDPA's is_causal) in the error, tile, rescale and FP8 charts. The "
                 "causal alignment chart always compares both alignments.")),
    )),
)
SLUGS = tuple(v.slug for v in VIEWS)
LABELS = {v.slug: v.label for v in VIEWS}  # slug -> the tab's label


def view_of(slug: str) -> View:
    """The View of a slug (one of SLUGS)."""
    (found,) = [v for v in VIEWS if v.slug == slug]
    return found


def owner_of(name: str) -> View:
    """The View that declares an own setting (its widget is drawn in that tab)."""
    (found,) = [v for v in VIEWS if name in v.own]
    return found
