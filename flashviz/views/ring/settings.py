"""The Ring view's own settings: the sequence length N, the world W, the layout, causal, the tile size, the dtype of the
inputs and partial outputs, and the heads. Torch-free: the URL parser reads them."""

from __future__ import annotations

from flashviz.kit.settings import view_settings
from flashviz.kit.spec import BOOL, CHOICE, INT, VIEW, Spec, setting

# -- Ring: one sequence sharded over W processes on this machine
RING_N_OPTIONS = (64, 128, 256, 512, 1024, 2048)
RING_N_MAX = 4096  # positions: a run at the cap is a few seconds of kernels on 2 cores (4 ranks)
RING_WORLDS = (1, 2, 3, 4)
RING_WORLD_MAX = 4  # processes a run starts: one per rank, each importing torch (1 to 3 s)
RING_BLOCK_OPTIONS = (8, 16, 32, 64, 128)
RING_BLOCK_MAX = 1024
RING_HEADS_OPTIONS = (1, 2, 4, 8)
RING_HEADS_MAX = 8
RING_LAYOUT_LABELS = {  # flashviz.ring.LAYOUTS, in words (the URL carries the names)
    "contiguous": "contiguous (plain ring)",
    "zigzag": "zigzag (chunks r and 2W-1-r)",
    "striped": "striped (position i on rank i mod W)",
}
RING_DTYPES = {"float32": "fp32 partials", "bfloat16": "bf16 partials"}  # URL name -> label


@view_settings("Ring")
class RingSettings:
    """The Ring view's settings: the shared ones it reads and its own."""

    ring_n: int = setting(256, Spec(
        INT, "select_slider", "N (positions)", lo=1, hi=RING_N_MAX, options=RING_N_OPTIONS, place=VIEW,
        short="N", help="Positions of the one sequence the ranks share. Each rank keeps N / W of them (its query, "
                        "key and value shards); N must divide into W shards (2W chunks for zigzag)."), key="rgn")
    world: int = setting(4, Spec(
        INT, "select_slider", "World W", lo=1, hi=RING_WORLD_MAX, options=RING_WORLDS, place=VIEW,
        short="W", help="Ranks in the ring, one process each on this machine (gloo). At step t rank r holds the "
                        "K/V shard of rank (r - t) mod W, while it passes its current shard on to rank r + 1."),
        key="rgw")
    layout: str = setting("contiguous", Spec(
        CHOICE, "selectbox", "Layout", options=tuple(RING_LAYOUT_LABELS), labels=RING_LAYOUT_LABELS, place=VIEW,
        short="layout", help="How the positions are dealt to the ranks. contiguous: rank r holds the r-th block "
                             "(the plain ring: under causal the last rank does most of the work). zigzag: 2W "
                             "chunks, rank r holds chunks r and 2W-1-r (Megatron's and torch's load-balanced "
                             "sharding). striped: position i on rank i mod W."), key="rglayout")
    ring_causal: bool = setting(True, Spec(
        BOOL, "toggle", "Causal", place=VIEW, short="causal",
        help="Top-left causal over the global positions: query i sees keys j <= i. A ring step whose keys all come "
             "after the rank's queries is skipped whole; inside a step the kernel skips the tiles no query sees."),
        key="rgcausal")
    ring_block: int = setting(32, Spec(
        INT, "select_slider", "Tile Br = Bc", lo=1, hi=RING_BLOCK_MAX, options=RING_BLOCK_OPTIONS, place=VIEW,
        short="tile", help="Rows and keys per tile of flashviz's tiled kernel on each rank: the unit of work the "
                           "map and the work chart count."), key="rgblock")
    partials: str = setting("float32", Spec(
        CHOICE, "selectbox", "Partials", options=tuple(RING_DTYPES), labels=RING_DTYPES, place=VIEW,
        short="partials", help="dtype of the inputs and of each step's partial output O_t. The merge of the "
                               "partials by their logsumexp runs in fp32 either way; the precision chart after a "
                               "run compares both as W grows."), key="rgdtype")
    ring_heads: int = setting(2, Spec(
        INT, "select_slider", "Heads H", lo=1, hi=RING_HEADS_MAX, options=RING_HEADS_OPTIONS, place=VIEW,
        short="H", help="Query and K/V heads (batch 1, d = 32). The tiles do not depend on H; the FLOPs and the "
                        "bytes each rank sends grow with it."), key="rgheads")
