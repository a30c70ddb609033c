"""Dashboard settings, each declared once: a field of the frozen `Settings` dataclass carrying its `Spec` (URL key,
default, bounds or options, widget kind, label and help text).

Everything else is derived from these declarations: the URL form (`Settings.to_query`), the hostile-URL parser
(flashviz.ui.query.parse_query), the session-state keys and the widgets (flashviz.ui.widgets). Adding a setting is one
`setting(...)` line here. Pure: imports neither streamlit nor torch.

Legend: N sequence length (N_q = N_k), d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields, replace
from typing import Any

from flashviz.figures.tilemap import MAX_FRAMES  # plain Python: no plotly, pandas or torch
from flashviz.limits import BATCH_MAX, HEADS_MAX, LIST_MAX, REPEATS_MAX  # shared with the CLI
from flashviz.vocab import DTYPES, IMPLS, KV_OUTER, Q_OUTER

N_MIN, N_MAX = 1, 16384  # sequence length N; 16384^2 fp32 scores = 1 GiB, the most a laptop survives naively
D_MIN, D_MAX = 1, 512  # head dimension d
BLOCK_MIN, BLOCK_MAX = 1, 1024  # tile sizes Br, Bc (rows / columns of S per tile)

N_OPTIONS = (16, 32, 64, 97, 128, 256, 257, 512, 1000, 1024, 1025, 2048, 4096, 8192, 16384)  # powers of 2 + odd
D_OPTIONS = (8, 16, 32, 59, 64, 111, 128, 256)
BLOCK_OPTIONS = (4, 8, 16, 32, 64, 128, 256, 512)
BENCH_N_OPTIONS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
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
ORDERS = {"fa1": "FA1 (kv_outer)", "fa2": "FA2 (q_outer)", "both": "FA1 and FA2 side by side"}  # URL name -> label
LOOP_ORDER = {"fa1": KV_OUTER, "fa2": Q_OUTER}  # URL name -> tile_schedule loop_order
VIEWS = {  # URL slug -> tab label
    "how": "How it works",
    "bench": "Benchmark",
    "block": "Block size",
    "io": "IO model",
    "correct": "Correctness",
    "train": "Training",
    "roof": "Roofline",
    "decode": "Decoding",
    "masks": "Masks",
}
MASK_PRESETS = {  # URL name -> label: the mask_mod presets of flashviz.masks the Masks view offers
    "causal": "causal",
    "sliding_window": "sliding window",
    "prefix_lm": "prefix LM",
    "document": "document",
    "attention_sink": "attention sink",
    "chunked": "chunked",
    "dilated": "dilated",
}
MASK_COMBINE = {"none": "no", "and": "AND", "or": "OR"}
DOC_PATTERNS = {  # URL name -> label; flashviz.measure.maskview scales each pattern's ratios to N
    "mixed": "4 mixed",
    "equal2": "2 equal",
    "equal4": "4 equal",
    "equal8": "8 equal",
    "growing": "4 growing",
}
SCORE_MODS = {"none": "none", "alibi": "ALiBi", "softcap": "softcap"}
DILATION_MAX = 1024  # dilated(window, dilation): a stride beyond this leaves only the diagonal at any N shown
CAP_MAX = 1000  # softcap(cap): scores of fp32 attention are far below this; larger caps change nothing
IMPL_HELP = {
    "naive": "standard attention: materialises S and P (N² each)",
    "flash": "tiled, FA1 loop order (kv_outer)",
    "flash2": "tiled, FA2 loop order (q_outer)",
    "sdpa": "PyTorch's fused scaled_dot_product_attention",
}

# How a value is parsed from and written to the URL.
INT, BOOL, CHOICE, INTS, STRS, WINDOW = "int", "bool", "choice", "ints", "strs", "window"
# Where a widget is drawn: the sidebar, a tab (the tab's module asks for it by name), or the app (the tabs).
SIDEBAR, TAB, APP = "sidebar", "tab", "app"


@dataclass(frozen=True)
class Spec:
    """Everything the dashboard needs to know about one setting, besides its name and default."""

    kind: str  # URL form: INT, BOOL, CHOICE, INTS (comma list), STRS (comma list) or WINDOW ("left,right" / "none")
    widget: str  # streamlit widget: "select_slider", "slider", "number_input", "checkbox", "toggle", "radio",
    #              "selectbox", "multiselect"; "window" (on/left/right), "blocks" (link + Br + Bc), "tabs", "" (drawn
    #              by another setting's widget or by its tab's own code)
    label: str = ""  # widget label
    help: str = ""  # widget help text (markdown)
    place: str = SIDEBAR  # SIDEBAR, TAB or APP
    lo: int = 0  # INT / INTS: smallest allowed value
    hi: int = 0  # INT / INTS: largest allowed value
    options: tuple[Any, ...] = ()  # CHOICE / STRS: the allowed values; sliders and multiselects: the values offered
    labels: Mapping[str, str] | None = None  # display text of each option (radio, selectbox, tabs)
    step: int = 1  # number_input step
    half: bool = False  # drawn in half the sidebar's width, next to the following half-width setting
    env: str = ""  # "threads": hi is the machine's thread count; "devices": options are the machine's devices
    disabled: bool = False  # number_input: shown greyed out (a page sets it while another setting decides the value)


def setting(default: Any, spec: Spec) -> Any:
    """A Settings field: its default and its Spec (read back with `spec_of`)."""
    return field(default=default, metadata={"spec": spec})


@dataclass(frozen=True)
class Env:
    """What this machine offers; clamps that depend on it."""

    max_threads: int = 2  # CPU threads torch may use here
    devices: tuple[str, ...] = ("cpu",)  # "cuda" appears when torch.cuda.is_available()


@dataclass(frozen=True)
class Settings:
    """Every setting of the dashboard, one declaration each. Hashable, so it can key caches."""

    n: int = setting(1024, Spec(
        INT, "select_slider", "Sequence length N", lo=N_MIN, hi=N_MAX, options=N_OPTIONS,
        help="Tokens per sequence (N_q = N_k = N). Powers of two plus odd sizes (97, 257, 1000, 1025) whose last "
             "tile is ragged. Naive attention's memory grows with N²; FlashAttention's with N."))
    d: int = setting(64, Spec(
        INT, "select_slider", "Head dimension d", lo=D_MIN, hi=D_MAX, options=D_OPTIONS,
        help="Features per head (the width of Q, K, V). GPT-2 uses 64; odd values (59, 111) test ragged code paths."))
    br: int = setting(64, Spec(
        INT, "blocks", "Block rows Br (queries per tile)", lo=BLOCK_MIN, hi=BLOCK_MAX, options=BLOCK_OPTIONS,
        help="Query rows per tile: the height of one tile of S."))
    bc: int = setting(64, Spec(
        INT, "", "Block columns Bc (keys per tile)", lo=BLOCK_MIN, hi=BLOCK_MAX, options=BLOCK_OPTIONS,
        help="Key columns per tile: the width of one tile of S."))
    link: bool = setting(True, Spec(
        BOOL, "", "Link Br and Bc",
        help="Use one block size for query rows (Br) and key columns (Bc), as most kernels do."))
    causal: bool = setting(False, Spec(
        BOOL, "toggle", "Causal mask",
        help="Query i sees keys j ≤ i (decoder models, as SDPA's is_causal). Tiles above the diagonal are "
             "skipped: never loaded, never computed."))
    window: tuple[int, int] | None = setting(None, Spec(
        WINDOW, "window", "Sliding window", lo=0, hi=N_MAX, step=64,
        help="Each query sees only nearby keys: i − left ≤ j ≤ i + right (flash-attn's window_size). Combined "
             "with the causal mask by intersection."))  # (left, right) reach; None = no window
    usemask: bool = setting(False, Spec(
        BOOL, "toggle", "Mask from the Masks tab",
        help="How it works: animate the tile map of the mask built in the Masks tab (presets, AND / OR) instead of "
             "the causal mask and window above."))
    order: str = setting("fa1", Spec(
        CHOICE, "radio", "Loop order", options=tuple(ORDERS), labels=ORDERS,
        help="FA1 (Algorithm 1) loops over K/V blocks outside and Q blocks inside, rewriting O, l, m in HBM "
             "after every tile. FA2 loops over Q blocks outside and keeps O_i on chip until its row is done."))
    dtype: str = setting("float32", Spec(
        CHOICE, "selectbox", "dtype", options=DTYPES,
        help="Element type of Q, K, V. Accumulators stay fp32 (fp64 for float64). Half types halve the "
             "bytes moved; on a CPU they are slower, not faster."))
    batch: int = setting(1, Spec(
        INT, "number_input", "batch B", lo=1, hi=BATCH_MAX, half=True,
        help="Sequences processed together. Memory and time scale linearly with B."))
    heads: int = setting(4, Spec(
        INT, "number_input", "heads H", lo=1, hi=HEADS_MAX, half=True,
        help="Attention heads per layer. Memory and time scale linearly with H."))
    device: str = setting("cpu", Spec(
        CHOICE, "selectbox", "device", options=("cpu", "cuda"), env="devices",
        help="Where the benchmarks run. CUDA is listed only when PyTorch sees a GPU. The tile animation "
             "always runs its small trace on the CPU."))
    threads: int = setting(2, Spec(
        INT, "select_slider", "CPU threads", lo=1, hi=2, env="threads",
        help="Intra-op threads for timing runs (set explicitly and reported with every result)."))
    row: int = setting(512, Spec(
        INT, "number_input", "Query row r", lo=0, hi=N_MAX - 1, place=TAB,
        help="Which row of S to follow. Its m and l change only on the tiles of its Q block; the dotted "
             "line on the tile map marks it."))
    autorow: bool = setting(True, Spec(
        BOOL, "toggle", "Show the row with the most rescales", place=TAB,
        help="Picks the query row whose running max m grows on the most tiles (so the rescale of l is visible), "
             "among up to 512 rows; ties go to the row nearest r. Turn it off to choose the row yourself."))
    frame: int = setting(0, Spec(  # drawn by the How it works tab: its options are the map's frames
        INT, "", "Tile map opens at computed tile", lo=0, hi=MAX_FRAMES - 1, place=TAB,
        help="The tile the map shows first. It is kept when you change a setting, as long as the new map still has "
             "that frame (else the map opens at its last tile), so the class keeps its place. Play and the map's own "
             "slider move from there but do not change this setting."))
    view: str = setting("how", Spec(CHOICE, "tabs", options=tuple(VIEWS), labels=VIEWS, place=APP))
    ns: tuple[int, ...] = setting((512, 1024, 2048), Spec(  # with H = 4: about 10 s on 2 CPU cores
        INTS, "multiselect", "Sequence lengths N", lo=N_MIN, hi=N_MAX, options=BENCH_N_OPTIONS, place=TAB,
        help=f"Up to {LIST_MAX} lengths; each one is measured for every implementation. Naive rows that would "
             "not fit in memory are refused and listed with the memory they would need."))
    impls: tuple[str, ...] = setting(IMPLS, Spec(
        STRS, "multiselect", "Implementations", options=IMPLS, place=TAB,
        help="Which attention implementations to time: "
             + "; ".join(f"**{i}**: {what}" for i, what in IMPL_HELP.items()) + "."))
    bblock: int = setting(256, Spec(
        INT, "select_slider", "Tile size Br = Bc", lo=BLOCK_MIN, hi=BLOCK_MAX, options=BLOCK_OPTIONS, place=TAB,
        help="Tile size of flash and flash2 in the Benchmark and Training tabs (the sidebar's Br and Bc drive the "
             "tile map). On a CPU each tile is one Python loop iteration, so small tiles pay that overhead many "
             "times over."))
    reps: int = setting(3, Spec(
        INT, "slider", "Repeats", lo=1, hi=REPEATS_MAX, place=TAB,
        help="Timed calls per point (after one warm-up call); the median is plotted, the interquartile range "
             "as error bars."))
    blocks: tuple[int, ...] = setting((16, 32, 64, 128, 256), Spec(
        INTS, "multiselect", "Block sizes Br = Bc", lo=BLOCK_MIN, hi=BLOCK_MAX, options=BLOCK_OPTIONS, place=TAB,
        help=f"Square tiles to try, up to {LIST_MAX}; each is timed for flash (FA1) and flash2 (FA2)."))
    cds: tuple[int, ...] = setting((16, 32, 64, 128), Spec(
        INTS, "multiselect", "Head dimensions d", lo=D_MIN, hi=D_MAX, options=D_OPTIONS, place=TAB,
        help="Odd values (59, 111) exercise code paths that powers of two hide."))
    gpu_dtype: str = setting("float16", Spec(
        CHOICE, "selectbox", "GPU dtype", options=("float16", "bfloat16", "float32"), place=TAB,
        labels={"float16": "float16 (tensor cores)", "bfloat16": "bfloat16 (tensor cores)",
                "float32": "float32 (CUDA cores)"},
        help="Element type the GPU roofs and points assume. FlashAttention runs fp16/bf16 on tensor cores (A100: 312 "
             "TFLOP/s dense); fp32 runs on CUDA cores (19.5 TFLOP/s), so naive attention is already compute-bound "
             "there and the predicted speedup is about 1x. This CPU uses the sidebar's dtype."))
    cns: tuple[int, ...] = setting((64, 97, 256, 1000), Spec(
        INTS, "multiselect", "Sequence lengths N", lo=N_MIN, hi=N_MAX, options=N_OPTIONS, place=TAB,
        help="Odd lengths (97, 257, 1000) make the last row and column of tiles ragged."))
    declen: int = setting(16384, Spec(
        INT, "select_slider", "Cache length N (keys)", lo=1, hi=DEC_LEN_MAX, options=DEC_LEN_OPTIONS, place=TAB,
        help="Keys already in the longest sequence's KV cache. Every decode step reads all of them."))
    dechq: int = setting(8, Spec(
        INT, "select_slider", "Query heads H_q", lo=1, hi=HEADS_MAX, options=DEC_HEADS_OPTIONS, place=TAB,
        help="Query heads per layer. Each one does 4·N·d FLOPs per decode step."))
    dechkv: int = setting(2, Spec(
        INT, "selectbox", "K/V heads H_kv", lo=1, hi=HEADS_MAX, place=TAB,
        help="K/V heads in the cache; only divisors of H_q are offered. H_kv = H_q is multi-head attention (MHA), "
             "1 is multi-query (MQA), anything between is grouped-query (GQA): g = H_q / H_kv query heads share "
             "each K/V head, so the cache and its reads shrink g-fold."))
    decsplits: str = setting("4", Spec(
        CHOICE, "selectbox", "Splits S", options=tuple(DEC_SPLITS), labels=DEC_SPLITS, place=TAB,
        help="Chunks the cache is cut into, each computed independently and merged by logsumexp. Auto: flash-attn's "
             "rule on this machine's threads (split only while they are not all busy)."))
    decpage: int = setting(0, Spec(
        INT, "select_slider", "Page size (keys)", lo=0, hi=DEC_PAGE_MAX, options=DEC_PAGE_OPTIONS, place=TAB,
        help="0: one contiguous cache per sequence. Otherwise the cache lives in fixed-size pages anywhere in a "
             "shared pool, found through a block table (vLLM's PagedAttention)."))
    declens: str = setting("pair", Spec(
        CHOICE, "selectbox", "Batch", options=tuple(DEC_LENS), labels=DEC_LENS, place=TAB,
        help="Sequences decoded together and their cache lengths. The splits cut every sequence at the same key "
             "positions; a short sequence simply has nothing in the later splits."))
    mask: str = setting("document", Spec(
        CHOICE, "selectbox", "Mask", options=tuple(MASK_PRESETS), labels=MASK_PRESETS, place=TAB,
        help="A FlexAttention mask_mod preset from flashviz.masks (causal_mask, sliding_window, prefix_lm, document, "
             "attention_sink, chunked, dilated): which keys j each query i sees."))
    mcomb: str = setting("and", Spec(
        CHOICE, "selectbox", "Combine", options=tuple(MASK_COMBINE), labels=MASK_COMBINE, place=TAB,
        help="Combine with a second mask: AND keeps a key only where both masks see it (torch's and_masks); OR "
             "where either does (or_masks)."))
    mask2: str = setting("causal", Spec(
        CHOICE, "selectbox", "Second mask", options=tuple(MASK_PRESETS), labels=MASK_PRESETS, place=TAB,
        help="Combined with the first mask. Two presets of the same kind share their parameters."))
    mdocs: str = setting("mixed", Spec(
        CHOICE, "selectbox", "Documents", options=tuple(DOC_PATTERNS), labels=DOC_PATTERNS, place=TAB,
        help="How N tokens are packed into documents, in relative lengths: 4 mixed = 1000 : 1500 : 600 : 996 (the "
             "lengths at N = 4096), 4 growing = 1 : 2 : 4 : 8. Scaled to N, so they always sum to N."))
    mprefix: int = setting(256, Spec(
        INT, "number_input", "Prefix", lo=0, hi=N_MAX, step=64, place=TAB,
        help="prefix_lm: keys j < prefix are seen by every query (bidirectional prefix); the rest is causal."))
    msinks: int = setting(4, Spec(
        INT, "number_input", "Sinks", lo=0, hi=N_MAX, place=TAB,
        help="attention_sink: the first keys every query keeps (StreamingLLM's attention sinks)."))
    mwin: int = setting(128, Spec(
        INT, "number_input", "Window", lo=0, hi=N_MAX, step=64, place=TAB,
        help="sliding_window: keys i − w ≤ j a query sees; attention_sink: its causal window; dilated: the "
             "largest distance |i − j|."))
    mright: int = setting(0, Spec(
        INT, "number_input", "Reach ahead", lo=0, hi=N_MAX, step=64, place=TAB,
        help="sliding_window only: keys j ≤ i + right a query sees (0: causal sliding window)."))
    mchunk: int = setting(256, Spec(
        INT, "number_input", "Chunk", lo=1, hi=N_MAX, step=64, place=TAB,
        help="chunked: query i sees keys j ≤ i of its own chunk (j // chunk = i // chunk)."))
    mdil: int = setting(4, Spec(
        INT, "number_input", "Dilation", lo=1, hi=DILATION_MAX, place=TAB,
        help="dilated: a query sees every dilation-th key within the window (i − j divisible by dilation)."))
    mscore: str = setting("none", Spec(
        CHOICE, "selectbox", "Score mod", options=tuple(SCORE_MODS), labels=SCORE_MODS, place=TAB,
        help="A score_mod changes the scores before the softmax; it never changes which tiles are computed. "
             "ALiBi adds m_h (j − i) per head (H from the sidebar); softcap squashes scores into (−cap, cap)."))
    mcap: int = setting(30, Spec(
        INT, "number_input", "Cap", lo=1, hi=CAP_MAX, place=TAB,
        help="softcap: cap · tanh(score / cap). Gemma 2 caps attention logits at 50."))

    @property
    def loop_orders(self) -> tuple[str, ...]:
        """The tile_schedule loop orders this view shows."""
        return ("kv_outer", "q_outer") if self.order == "both" else (LOOP_ORDER[self.order],)

    def to_query(self) -> dict[str, str]:
        """The URL form: every setting as a short string (parse_query(to_query()) gives the settings back)."""
        return {f.name: to_text(spec_of(f), getattr(self, f.name)) for f in setting_fields()}


def setting_fields() -> tuple[Field, ...]:
    """The fields of Settings that are settings (they carry a Spec), in declaration order."""
    return tuple(f for f in fields(Settings) if "spec" in f.metadata)


def spec_of(f: Field | str) -> Spec:
    """The Spec of a setting, by field or by name."""
    if isinstance(f, str):
        (f,) = [g for g in fields(Settings) if g.name == f]
    return f.metadata["spec"]


def for_machine(spec: Spec, env: Env) -> Spec:
    """The Spec with the bounds or options that depend on this machine filled in."""
    if spec.env == "threads":
        return replace(spec, hi=max(1, env.max_threads), options=tuple(range(1, max(1, env.max_threads) + 1)))
    if spec.env == "devices":
        return replace(spec, options=tuple(env.devices) or ("cpu",))
    return spec


def to_text(spec: Spec, value: Any) -> str:
    """A setting's value as its URL string."""
    if spec.kind == BOOL:
        return "1" if value else "0"
    if spec.kind == WINDOW:
        return "none" if value is None else f"{value[0]},{value[1]}"
    if spec.kind in (INTS, STRS):
        return ",".join(str(x) for x in value)
    return str(value)


def default_settings(env: Env = Env()) -> Settings:
    """Defaults for this machine (threads = every core torch may use)."""
    return Settings(threads=max(1, env.max_threads))


def clamp_row(settings: Settings) -> Settings:
    """Keep the inspected row inside 0..N-1 after N changed."""
    return settings if settings.row < settings.n else replace(settings, row=settings.n - 1)


@dataclass(frozen=True)
class Preset:
    """A classroom scenario: a one-line story and the settings it changes."""

    story: str  # what to show the class with it
    changes: tuple[tuple[str, object], ...]  # (Settings field, value) pairs


PRESETS: dict[str, Preset] = {
    "GPT-2 small layer": Preset(
        "One attention layer of GPT-2 small: N = 1024 tokens, 12 heads of d = 64, causal.",
        (("n", 1024), ("d", 64), ("heads", 12), ("batch", 1), ("causal", True), ("window", None),
         ("br", 64), ("bc", 64), ("link", True), ("row", 881)),
    ),
    "Long-context causal": Preset(
        "N = 8192, causal: almost half of the 64 x 64 tiles are never loaded.",
        (("n", 8192), ("d", 64), ("heads", 1), ("causal", True), ("window", None), ("br", 128), ("bc", 128),
         ("link", True), ("row", 8143), ("ns", (1024, 2048, 4096, 8192))),
    ),
    "Sliding window": Preset(
        "Local attention: each query sees the 512 keys on either side; only a band of 268 of the 1024 tiles is "
        "computed. Turn on the causal mask to keep only the previous 512 (Mistral-style): 150 of the band's 268 "
        "tiles remain.",
        (("n", 4096), ("d", 128), ("causal", False), ("window", (512, 512)), ("br", 128), ("bc", 128),
         ("link", True), ("row", 1531)),
    ),
    "Tiny grid for the whiteboard": Preset(
        "N = 16 with 4 x 4 tiles, causal, FA1 and FA2 side by side: 10 computed, 6 skipped; few enough steps to "
        "narrate every one.",
        (("n", 16), ("d", 8), ("causal", True), ("window", None), ("br", 4), ("bc", 4), ("link", True),
         ("row", 15), ("order", "both")),
    ),
    "Ragged edges (odd N)": Preset(
        "N = 1000 with 64-wide tiles: the last row and column of tiles are only 40 wide.",
        (("n", 1000), ("d", 59), ("causal", False), ("window", None), ("br", 64), ("bc", 64), ("link", True),
         ("row", 229)),
    ),
}


PRESET_KEEPS = ("view", "device", "threads")  # what a preset leaves alone: where you are and what the machine has


def apply_preset(settings: Settings, name: str) -> Settings:
    """Settings of a preset: every setting at its default except PRESET_KEEPS, then the preset's changes, so no
    setting of an earlier preset survives (unknown names change nothing)."""
    preset = PRESETS.get(name)
    if preset is None:
        return settings
    kept = {key: getattr(settings, key) for key in PRESET_KEEPS}
    return clamp_row(replace(Settings(), **kept, **dict(preset.changes)))
