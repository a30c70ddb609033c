"""The Numerics view's claim: `numerics_rounding`, why two correct kernels differ in bf16 (within flash-attn's 2x
rule), what FA4's lazy rescale saves and what FA3's Hadamard rotation gains in FP8, computed by the view's lab.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flashviz.views.claim import Result
from flashviz.views.numerics.data import (
    flash_sdpa_gap_in_eps,
    hadamard_gain,
    lab_settings,
    lazy_rescale,
    rescales_saved,
)

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.views.numerics.settings import NumericsSettings


def numerics_rounding(s: NumericsSettings) -> Result:
    """The Numerics view's story at the step's settings: FA2 and SDPA differ by one rounding step and both pass
    flash-attn's rule; FA4's tau keeps few of the rescales; Hadamard lowers FP8's error on outlier inputs.

    Args:
        s: the step's settings (the view's input dtype, P's dtype, tile size, tau, Hadamard, outliers, N_q, N_k).
    Returns:
        Result: gap (max |FA2 - SDPA| in eps, NaN when one of them fails the rule), classic and lazy (rescales with
        tau = 0 and the step's tau), saved (their ratio), gain (FP8 RMSE without Hadamard / with it, NaN unless lower
        on every seed); holds when the gap is one eps, tau saves at least 10x and Hadamard gains at least 1.5x.

    Example:
        >>> from flashviz.lesson.steps import INTRO
        >>> r = numerics_rounding(next(st for st in INTRO.steps if st.view == "numerics").view_settings())
        >>> r.holds, r.values["classic"], r.values["lazy"]
        (True, 98, 3)
    """
    lab = lab_settings(s)
    rescales = lazy_rescale(lab)
    values = {"gap": flash_sdpa_gap_in_eps(lab), "classic": rescales.classic.total, "lazy": rescales.lazy.total,
              "saved": rescales_saved(lab), "gain": hadamard_gain(lab), "tau": lab.tau}
    return Result.of(values, {
        "FA2 and SDPA are not one rounding step apart with both passing": values["gap"] != 1.0,
        "tau keeps more than a tenth of the rescales": not values["saved"] >= 10,
        "Hadamard does not lower FP8's error on outlier inputs on every seed": not values["gain"] >= 1.5})

