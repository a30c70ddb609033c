"""The GPU pipeline view's claim: `exp_bottleneck`, the lesson's "On a GPU the exponential is the bottleneck": one
tile's MMA and exp cycles on an H100 and a B200, FA4's share of exp2 by polynomial and its error."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flashviz.core.exp2poly import poly_error
from flashviz.model.pipeline import POLY_DEGREE, poly_share, tile_cycles
from flashviz.views.claim import Result
from flashviz.views.pipeline.data import skip_rate

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.views.pipeline.settings import PipelineSettings


def exp_bottleneck(s: PipelineSettings) -> Result:
    """Per 128 x 128 tile at the view's d and dtype: the MMA and exp cycles on an H100 and a B200, the exp's share of
    the MMA on each; FA4's share of exp2 on the FMA units (at the lazy rescale rate measured here) and the degree-3
    polynomial's error against bf16's rounding.

    Args:
        s: the step's settings (the view's head dimension and dtype are read).
    Returns:
        Result: h100_mma, h100_exp, h100_share, b200_mma, b200_exp, b200_share, poly (FA4's share by polynomial),
        poly_err (degree 3, FP32, against float64), bf16 (exp2 rounded to bf16: the error P has anyway); holds when
        the exponential's share grew from the H100 to the B200, reaches the MMA's cycles on the B200 and the
        polynomial's error is below bf16's.

    Example:
        >>> from flashviz.lesson.steps import INTRO
        >>> r = exp_bottleneck(INTRO.step("exp_bottleneck").view_settings())
        >>> r.holds, r.values["h100_share"], r.values["b200_share"], int(r.values["b200_exp"])
        (True, 0.5, 1.0, 1024)
    """
    h100 = tile_cycles("H100", head_dim=s.pipe_d, dtype=s.pipe_dtype)
    b200 = tile_cycles("B200", head_dim=s.pipe_d, dtype=s.pipe_dtype)
    err = poly_error(POLY_DEGREE)
    values = {"h100_mma": h100["mma"], "h100_exp": h100["exp"], "h100_share": h100["exp"] / h100["mma"],
              "b200_mma": b200["mma"], "b200_exp": b200["exp"], "b200_share": b200["exp"] / b200["mma"],
              "poly": poly_share("B200", head_dim=s.pipe_d, rescale_rate=skip_rate().rate), "poly_err": err.fp32,
              "bf16": err.bf16_exact, "d": s.pipe_d}
    return Result.of(values, {
        "the exponential's share did not grow from the H100 to the B200":
            not values["b200_share"] > values["h100_share"],
        "the exponential is under the MMA's cycles on the B200": values["b200_share"] < 1.0,
        "the polynomial's error is not below bf16's rounding": not values["poly_err"] < values["bf16"]})
