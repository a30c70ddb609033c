"""How it works' own settings: the loop order the map plays, the Masks view's mask on the map, the row the inspector
follows, the frame the map opens at."""

from __future__ import annotations

from flashviz.figures.tilemap import MAX_FRAMES
from flashviz.kit.settings import view_settings
from flashviz.kit.sizes import (
    N_MAX,
)
from flashviz.kit.spec import BOOL, CHOICE, INT, VIEW, Spec, setting
from flashviz.views.masks.settings import MasksSettings
from flashviz.vocab import (
    KV_OUTER,
    LOOP_ORDER_LABELS,
    LOOP_ORDERS,
    Q_OUTER,
)

# -- How it works
LOOP_ORDER = {"fa1": KV_OUTER, "fa2": Q_OUTER}  # URL name -> tile_schedule loop_order
BOTH = "both"  # the URL name of both loop orders side by side
ORDERS = {**{name: LOOP_ORDER_LABELS[order] for name, order in LOOP_ORDER.items()}, BOTH: "FA1 and FA2 side by side"}


@view_settings("How it works",
               reads=("n", "d", "br", "bc", "causal", "window", "dtype"), also_reads=("heads",),
               borrows=((MasksSettings, tuple(MasksSettings.OWN)),))
class HowSettings:
    """The How it works view's settings: the shared ones it reads, the ones it borrows and its own."""

    order: str = setting("fa1", Spec(
        CHOICE, "radio", "Loop order", options=tuple(ORDERS), labels=ORDERS, place=VIEW, short="loop order",
        help="FA1 (Algorithm 1) loops over K/V blocks outside and Q blocks inside, rewriting O, l, m in HBM "
             "after every tile. FA2 loops over Q blocks outside and keeps O_i on chip until its row is done."))
    use_mask: bool = setting(False, Spec(
        BOOL, "toggle", "The Masks view's mask", place=VIEW, short="the Masks view's mask",
        help="Animate the tile map of the mask built in the Masks view (presets, AND / OR) instead of the "
             "sidebar's causal mask and window."), key="usemask")
    row: int = setting(512, Spec(
        INT, "number_input", "Query row r", lo=0, hi=N_MAX - 1, place=VIEW, short="row",
        help="Which row of S to follow. Its m and l change only on the tiles of its Q block; the dotted "
             "line on the tile map marks it."))
    auto_row: bool = setting(True, Spec(
        BOOL, "toggle", "Show the row with the most rescales", place=VIEW, short="automatic row",
        help="Picks the query row whose running max m grows on the most tiles (so the rescale of l is "
             "visible), among up to 512 rows; ties go to the row nearest r. Turn it off to choose the row "
             "yourself."), key="autorow")
    frame: int = setting(0, Spec(  # drawn by the How it works view: its options are the map's frames
        INT, "", "Tile map opens at computed tile", lo=0, hi=MAX_FRAMES - 1, place=VIEW, short="start frame",
        help="The tile the map shows first. It is kept when you change a setting, as long as the new map still "
             "has that frame (else the map opens at its last tile), so the class keeps its place. Play and the "
             "map's own slider move from there but do not change this setting."))

    @property
    def loop_orders(self) -> tuple[str, ...]:
        """The tile_schedule loop orders the map shows."""
        return LOOP_ORDERS if self.order == BOTH else (LOOP_ORDER[self.order],)
