"""The Backward view's own settings: the small problem its map plays and the real kernel runs, the causal switch, the dQ
schedule, the frame the map opens at."""

from __future__ import annotations

from flashviz.figures.tilemap import MAX_FRAMES
from flashviz.kit.settings import view_settings
from flashviz.kit.sizes import (
    BLOCK_MAX,
    BLOCK_MIN,
    BLOCK_OPTIONS,
    D_MAX,
    D_MIN,
    D_OPTIONS,
    N_MAX,
    N_MIN,
)
from flashviz.kit.spec import BOOL, CHOICE, INT, VIEW, Spec, setting
from flashviz.views.bench.settings import BenchSettings
from flashviz.views.how.settings import BOTH
from flashviz.vocab import (
    DQ_ATOMIC,
    DQ_DETERMINISTIC,
)

# -- Backward: the map's own small problem (every tile can be narrated) and which dQ schedule it plays
BW_N_OPTIONS = (8, 16, 24, 32, 48, 64, 97, 128, 256, 512)  # the map's N: 4 x 4 tiles at the default Br = Bc = 8
BW_DQ = {DQ_ATOMIC: "atomic dQ (Algorithm 2)", DQ_DETERMINISTIC: "deterministic dQ (second pass)",
         BOTH: "both side by side"}  # URL name -> label


@view_settings("Backward",
               reads=("n", "d", "br", "bc", "window", "dtype", "batch", "heads", "device", "threads"),
               borrows=((BenchSettings, ("reps",)),))
class BackwardSettings:
    """The Backward view's settings: the shared ones it reads, the ones it borrows and its own."""

    map_n: int = setting(32, Spec(
        INT, "select_slider", "Map: N", lo=N_MIN, hi=N_MAX, options=BW_N_OPTIONS, place=VIEW,
        short="map N", help="Sequence length of the small problem the tile map plays and the real kernel runs "
                            "(one head, batch 1): few enough tiles to narrate each one. The traffic at scale and "
                            "the measured price use the sidebar's N, d, Br and Bc."), key="bwn")
    map_d: int = setting(16, Spec(
        INT, "select_slider", "Map: d", lo=D_MIN, hi=D_MAX, options=D_OPTIONS, place=VIEW,
        short="map d", help="Head dimension of the map's problem. Every tile streams Q_i and dO_i (Br × d each) "
                            "and reads and writes dQ_i, so a large d with small tiles makes the tiled backward "
                            "move more bytes than standard attention's; the page says so when it does."),
        key="bwd")
    map_block: int = setting(8, Spec(
        INT, "select_slider", "Map: tile Br = Bc", lo=BLOCK_MIN, hi=BLOCK_MAX, options=BLOCK_OPTIONS,
        place=VIEW, short="map tile", help="Query rows and keys per tile of the map's problem."), key="bwblock")
    map_causal: bool = setting(True, Spec(
        BOOL, "toggle", "Causal mask", place=VIEW, short="causal",
        help="Query i sees keys j ≤ i: the tiles above the diagonal are skipped in the backward as in the "
             "forward. This view's own switch (the sidebar's is off by default): it applies to the map, the "
             "traffic at scale and the measured price."), key="bwcausal")
    dq_schedule: str = setting(DQ_ATOMIC, Spec(
        CHOICE, "radio", "dQ schedule on the map", options=tuple(BW_DQ), labels=BW_DQ, place=VIEW,
        short="dQ schedule",
        help="Atomic: Algorithm 2 adds each tile's dS_ij K_j into dQ_i in HBM (an atomic add on a GPU). "
             "Deterministic: a second pass over the Q blocks recomputes S, P, dP, dS and builds dQ_i on chip, "
             "written once. Both: the two side by side in lockstep, with a switch on the map."), key="dq")
    map_frame: int = setting(0, Spec(  # drawn by the Backward view: its options are the map's frames
        INT, "", "Tile map opens at computed tile", lo=0, hi=MAX_FRAMES - 1, place=VIEW, short="start frame",
        help="The tile the map shows first, and whose operations the table beside it lists. Play and Restart "
             "move the map from there but do not change this setting."), key="bwframe")
