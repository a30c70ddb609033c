"""The lesson's checks of the Backward and Numerics views (flashviz.lesson): as in flashviz.lesson_checks, a step's
settings in, a `Result` out (the claim's numbers and whether it holds), computed by the same functions the views draw
with (flashviz.measure.backward_claims, flashviz.measure.numerics_ideas), deterministic: seeded inputs, no clock.

Legend: N sequence length, d head dimension, Br = Bc the tile size, L the logsumexp, tau FA4's rescale threshold
(log2 units), eps a dtype's machine epsilon.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from flashviz.lesson import Result
from flashviz.measure.backward_claims import (
    deterministic_extra_flops,
    dq_runs,
    max_row_sum_error,
    traffic_saving,
)
from flashviz.measure.numerics_ideas import flash_sdpa_gap_in_eps, hadamard_gain, lazy_rescale, rescales_saved
from flashviz.ui.numerics_settings import lab_settings

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.ui.state import Settings

ROW_SUM_TOL = 1e-6  # |sum of a recomputed row of P - 1| allowed in float32: "one part in a million"
DETERMINISTIC_EXTRA = 0.4  # the second pass's 2 extra matmuls per tile over the atomic backward's 5


def backward_recompute(s: Settings) -> Result:
    """The Backward view's story at the step's map: P recomputed from L sums to 1, the traffic saved at a GPU's
    sizes, and what deterministic dQ costs where atomic adds make the last bits vary.

    Args:
        s: the step's settings (the tab's own N, d, tile size and causal mask for the map; the sidebar's N, d and
            square tile size for the traffic at scale).
    Returns:
        Result: row_err (largest |row sum - 1|), n, d, block and saving (standard / tiled backward HBM bytes at the
        sidebar's sizes, the tab's causal mask), extra (fraction of FLOPs the second pass adds), reordered (dQ
        entries that change when the columns' adds come in another order); holds when the rows sum to 1 within
        ROW_SUM_TOL, the tiled backward moves less, the second pass costs DETERMINISTIC_EXTRA, this CPU's dQ is
        bitwise the same twice and a reordered sum changes some last bits.

    Example:
        >>> from flashviz.lesson import INTRO, step_settings
        >>> r = backward_recompute(step_settings(next(st for st in INTRO.steps if st.view == "backward")))
        >>> r.holds, round(r.values["saving"], 1)
        (True, 6.2)
    """
    at = {"n": s.bwn, "d": s.bwd, "block": s.bwblock, "causal": s.bwcausal}
    row_err = max_row_sum_error(**at)
    saving = traffic_saving(n=s.n, d=s.d, block=s.br, causal=s.bwcausal, window=s.window)
    extra = deterministic_extra_flops(**at)
    runs = dq_runs(s.bwn, s.bwd, s.bwblock, s.bwblock, causal=s.bwcausal)
    values = {"n": s.n, "d": s.d, "block": s.br, "saving": saving, "extra": extra,
              "row_err": row_err, "reordered": runs.reordered_differing, "values": runs.values}
    return Result.of(values, {
        "the tiles at scale are not square": s.br != s.bc,
        "a recomputed row of P does not sum to 1": not row_err < ROW_SUM_TOL,
        "the tiled backward moves no less than standard attention's": not saving > 1,
        "the deterministic pass does not cost two matmuls in five": not math.isclose(extra, DETERMINISTIC_EXTRA),
        "two runs of the CPU kernel gave different dQ": not runs.bitwise_equal,
        "adding dQ's contributions in another order changed nothing": runs.reordered_differing == 0})


def numerics_rounding(s: Settings) -> Result:
    """The Numerics view's story at the step's settings: FA2 and SDPA differ by one rounding step and both pass
    flash-attn's rule; FA4's tau keeps few of the rescales; Hadamard lowers FP8's error on outlier inputs.

    Args:
        s: the step's settings (the tab's input dtype, P's dtype, tile size, tau, Hadamard, outliers, N_q, N_k).
    Returns:
        Result: gap (max |FA2 - SDPA| in eps, NaN when one of them fails the rule), classic and lazy (rescales with
        tau = 0 and the step's tau), saved (their ratio), gain (FP8 RMSE without Hadamard / with it, NaN unless lower
        on every seed); holds when the gap is one eps, tau saves at least 10x and Hadamard gains at least 1.5x.

    Example:
        >>> from flashviz.lesson import INTRO, step_settings
        >>> r = numerics_rounding(step_settings(next(st for st in INTRO.steps if st.view == "numerics")))
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
