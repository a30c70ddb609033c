"""The Block size view's own settings: the square tiles it times."""

from __future__ import annotations

from flashviz.app.sizes import (
    BLOCK_MAX,
    BLOCK_MIN,
    BLOCK_OPTIONS,
)
from flashviz.app.spec import INTS, VIEW, Spec, setting
from flashviz.limits import LIST_MAX

OWN = dict(  # this view's own settings: name -> setting(default, Spec, key=its short URL key)
        blocks=setting((16, 32, 64, 128, 256), Spec(
            INTS, "multiselect", "Block sizes Br = Bc", lo=BLOCK_MIN, hi=BLOCK_MAX, options=BLOCK_OPTIONS,
            place=VIEW, short="block sizes",
            help=f"Square tiles to try, up to {LIST_MAX}; each is timed for both loop orders (FA1 and FA2).")),
)
