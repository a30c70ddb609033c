"""The Block size view's own settings: the square tiles it times."""

from __future__ import annotations

from flashviz.kit.settings import view_settings
from flashviz.kit.sizes import (
    BLOCK_MAX,
    BLOCK_MIN,
    BLOCK_OPTIONS,
)
from flashviz.kit.spec import INTS, VIEW, Spec, setting
from flashviz.limits import LIST_MAX
from flashviz.views.bench.settings import BenchSettings


@view_settings("Block size",
               reads=("n", "d", "causal", "window", "dtype", "batch", "heads", "device", "threads"),
               borrows=((BenchSettings, ("reps", "sure")),))
class BlockSettings:
    """The Block size view's settings: the shared ones it reads, the ones it borrows and its own."""

    blocks: tuple[int, ...] = setting((16, 32, 64, 128, 256), Spec(
        INTS, "multiselect", "Block sizes Br = Bc", lo=BLOCK_MIN, hi=BLOCK_MAX, options=BLOCK_OPTIONS,
        place=VIEW, short="block sizes",
        help=f"Square tiles to try, up to {LIST_MAX}; each is timed for both loop orders (FA1 and FA2)."))
