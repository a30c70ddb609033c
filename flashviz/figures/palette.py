"""The dashboard's palette and type sizes: one colour, dash and marker per implementation and loop order, the tile
fates' colours, and font sizes large enough for a projector (>= 16 px). Plain constants: no plotly, pandas or torch,
so the tile map (figures/tilemap.py) can be drawn before any of them is imported. Okabe-Ito colours, colour-blind safe.
"""

from __future__ import annotations

from flashviz.vocab import FLASH, FLASH2, FULL, KV_OUTER, NAIVE, PARTIAL, Q_OUTER, SDPA, SKIPPED

IMPL_COLORS = {  # fixed colour per implementation, shared by every figure (Okabe-Ito, colour-blind safe)
    NAIVE: "#D55E00",  # vermillion
    FLASH: "#0072B2",  # blue
    FLASH2: "#009E73",  # bluish green
    SDPA: "#CC79A7",  # reddish purple
    KV_OUTER: "#0072B2",  # the loop orders flash and flash2 run: the same colours
    Q_OUTER: "#009E73",
}
IMPL_DASHES = {  # line style per implementation: flash and flash2 often coincide, the dashes keep both visible
    NAIVE: "solid", FLASH: "solid", FLASH2: "dash", SDPA: "dashdot", KV_OUTER: "solid", Q_OUTER: "dash",
}
IMPL_SYMBOLS = {  # marker per implementation: flash's large open square rings flash2's diamond where they coincide
    NAIVE: "circle", FLASH: "square-open", FLASH2: "diamond", SDPA: "triangle-up",
    KV_OUTER: "square-open", Q_OUTER: "diamond",
}
LOOP_ORDER_COLORS = {KV_OUTER: IMPL_COLORS[KV_OUTER], Q_OUTER: IMPL_COLORS[Q_OUTER]}  # FA1 / FA2, as flash / flash2
TILE_COLORS = {  # tile fates on the tile map: full colour once visited (Okabe-Ito, none an implementation's colour)
    FULL: "#56B4E9",  # sky blue: computed, no mask
    PARTIAL: "#E69F00",  # orange: computed, masked inside the tile
    SKIPPED: "#6E6E6E",  # dark grey: never loaded
}
TILE_AHEAD_COLORS = {  # the same fates, pale, before the schedule reaches the tile: the whole picture before Play
    FULL: "#D4ECFA",
    PARTIAL: "#F9E2B3",
    SKIPPED: "#D0D0D0",
}
CURRENT_TILE_COLOR = "#C51B7D"  # magenta: the tile being computed now
SRAM_OUTLINE_COLOR = "#000000"  # the Q_i row and K_j, V_j column held on chip
ROW_MARKER_COLOR = "#5E3C99"  # dark purple: the row inspector's query row
FALLBACK_COLOR = "#555555"  # implementations not in the map
REFERENCE_COLOR = "#B00020"  # a pass/fail bar (dark red)
SKIPPED_SYMBOL = "x"  # marker of a row that did not run
D_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "star", "hexagon", "cross", "pentagon")  # one per d
BASE_FONT_PX = 18  # readable from the back of a lecture hall
TITLE_FONT_PX = 24
AXIS_TITLE_FONT_PX = 20
LEGEND_FONT_PX = 18
TICK_FONT_PX = 18
LINE_PX = 3
MARKER_PX = 11
OPEN_MARKER_PX = 16  # open markers are drawn larger, around the filled ones
# -- the backward's tile map (views/backward/tilemap.py)
ON_CHIP_BAND_COLOR = "#0072B2"  # blue tint: the K/V column (pass 1) or Q row (second pass) held on chip
DQ_MARKER_COLOR = "#D55E00"  # vermillion: dQ_i read and written back in HBM (the atomic add)
SECOND_PASS_COLOR = "#5E3C99"  # dark purple: a tile visited again by the deterministic second pass
