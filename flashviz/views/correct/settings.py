"""The Correctness view's own settings: the head dimensions and sequence lengths of its error matrix."""

from __future__ import annotations

from flashviz.kit.settings import view_settings
from flashviz.kit.sizes import (
    D_MAX,
    D_MIN,
    D_OPTIONS,
    N_MAX,
    N_MIN,
    N_OPTIONS,
)
from flashviz.kit.spec import INTS, VIEW, Spec, setting


@view_settings("Correctness", reads=("br", "bc", "causal", "window", "dtype", "device", "threads"))
class CorrectSettings:
    """The Correctness view's settings: the shared ones it reads and its own."""

    correct_ds: tuple[int, ...] = setting((16, 32, 64, 128), Spec(
        INTS, "multiselect", "Head dimensions d", lo=D_MIN, hi=D_MAX, options=D_OPTIONS, place=VIEW, short="d",
        help="Odd values (59, 111) exercise code paths that powers of two hide."), key="cds")
    correct_ns: tuple[int, ...] = setting((64, 97, 256, 1000), Spec(
        INTS, "multiselect", "Sequence lengths N", lo=N_MIN, hi=N_MAX, options=N_OPTIONS, place=VIEW, short="N",
        help="Odd lengths (97, 257, 1000) make the last row and column of tiles ragged."), key="cns")
