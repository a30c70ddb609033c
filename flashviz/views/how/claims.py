"""The How it works view's claims, each a function of the settings that returns the numbers its sentence states
(a `Result`), computed through the same library functions the view draws with: the lesson's steps on this view
are checked by them.

    tiles_fate      how many tiles are full, partial and skipped, and that each is visited once in the loop order
    online_softmax  the row inspector's final logsumexp L against the exact one, and that the weights sum to 1
    causal_halves   the share of tiles a causal mask computes: (Tr + 1) / (2 Tr) of them, just over half
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from flashviz.core.tiling import tile_schedule
from flashviz.measure.trace import pick_row, row_trace, schedule_trace
from flashviz.units import format_bytes
from flashviz.views.claim import Result
from flashviz.vocab import (
    DTYPE_BYTES,
    FULL,
    LOOP_ORDER_SHORT,
    PARTIAL,
    SKIPPED,
)

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.views.how.settings import HowSettings


LSE_TOL = 1e-5  # |L_kernel - L_exact| allowed in float32 (scores of order 1, a few ulps of a sum of exps)


CAUSAL_SHARE = (0.5, 0.55)  # tiles a causal mask computes: (Tr + 1) / (2 Tr) of them, just over half


def tiles_fate(s: HowSettings) -> Result:
    """The tile map's fates before Play: the tile schedule's counts (every tile classified, none computed yet).

    Args:
        s: the view's settings (HowSettings: N, Br, Bc, the causal mask and window are read).
    Returns:
        Result: tiles, computed, full, partial, skipped, and for the slide's picture status (the fate of each tile,
        [q_block][k_block]) and counts (tiles of each fate); holds when some tile is skipped and every partial tile is
        on the diagonal.

    Example:
        >>> from flashviz.lesson.steps import INTRO
        >>> tiles_fate(INTRO.step("tiles_fate").view_settings()).values["computed"]
        10
    """
    sched = tile_schedule(s.n, s.n, s.br, s.bc, causal=s.causal, window=s.window)
    c, grid = sched.counts(), sched.status_grid()
    values = {"tiles": sum(c.values()), "computed": c[FULL] + c[PARTIAL], "full": c[FULL], "partial": c[PARTIAL],
              "skipped": c[SKIPPED], "status": grid, "counts": c}
    off_diagonal = [(i, j) for i, row in enumerate(grid) for j, fate in enumerate(row) if fate == PARTIAL and i != j]
    return Result.of(values, {"no tile is skipped": not c[SKIPPED], "a partial tile is off the diagonal": bool(
        off_diagonal)})


def online_softmax(s: HowSettings) -> Result:
    """The row inspector's row (picked as the page picks it) through the real kernel, in every loop order shown: the
    rescales, l shrinking where m grew, and the kernel's logsumexp against the exact one.

    Args:
        s: the step's settings (N, d, Br, Bc, mask, dtype, loop order, row and automatic row are read).
    Returns:
        Result: row, rescales, tiles (of the row), lse (the kernel's L), exact (m + log l over the whole row), and for
        the slide's picture traces (the row's RowTrace in each loop order) and n_tiles (the schedule's computed
        tiles); holds when the row rescales, every factor is below 1 exactly where m grew, l shrinks there, and L is
        exact.

    Example:
        >>> from flashviz.lesson.steps import INTRO
        >>> r = online_softmax(INTRO.step("online_softmax").view_settings())
        >>> r.holds, r.values["row"], r.values["rescales"]
        (True, 15, 3)
    """
    pick = pick_row(s.n, s.d, s.br, s.bc, causal=s.causal, window=s.window, dtype=s.dtype, near=s.row) \
        if s.auto_row else None
    row = pick.row if pick else s.row
    traces = [row_trace(s.n, s.d, s.br, s.bc, row=row, causal=s.causal, window=s.window, loop_order=order,
                        dtype=s.dtype) for order in s.loop_orders]
    first = traces[0]
    values = {"row": row, "rescales": first.rescales, "tiles": len(first.step), "lse": first.lse_kernel,
              "exact": first.m_exact + math.log(first.l_exact), "traces": tuple(traces),
              "n_tiles": sum(1 for t in tile_schedule(s.n, s.n, s.br, s.bc, causal=s.causal, window=s.window)
                             if t.status != SKIPPED)}
    failures = {"the row never rescales": first.rescales < 1}
    for tr in traces:
        later = list(zip(tr.factor, tr.grew, tr.l_rescaled, tr.l_before, strict=True))[1:]  # the first tile sets m
        failures[f"{tr.loop_order}: a factor below 1 where m did not grow, or not below 1 where it did"] = any(
            (f < 1) != g for f, g, _, _ in later)
        failures[f"{tr.loop_order}: l did not shrink where m grew"] = any(a >= b for _, g, a, b in later if g)
        failures[f"{tr.loop_order}: L differs from the exact logsumexp"] = not abs(
            tr.lse_kernel - (tr.m_exact + math.log(tr.l_exact))) <= LSE_TOL
        failures[f"{tr.loop_order}: a different number of rescales"] = tr.rescales != first.rescales
    return Result.of(values, failures)


def causal_halves(s: HowSettings) -> Result:
    """Tiles computed and the first loop order's HBM traffic per head (the How it works counters) with the page's
    causal mask and without any mask.

    Args:
        s: the step's settings (N, d, Br, Bc, mask, dtype, loop order are read).
    Returns:
        Result: computed, tiles, share, skipped, order (FA1 / FA2), traffic, unmasked (formatted bytes), ratio, and
        for the slide's picture status and counts (as tiles_fate's); holds when the mask is causal alone, about half
        the tiles are computed, only tiles above the diagonal are skipped and the traffic falls.

    Example:
        >>> from flashviz.lesson.steps import INTRO
        >>> r = causal_halves(INTRO.step("causal_halves").view_settings())
        >>> r.holds, r.values["computed"], r.values["traffic"]
        (True, 136, '7.3 MiB')
    """
    order = s.loop_orders[0]
    masked = schedule_trace(s.n, s.br, s.bc, causal=s.causal, window=s.window, loop_order=order, d=s.d,
                            dtype_bytes=DTYPE_BYTES[s.dtype])
    plain = schedule_trace(s.n, s.br, s.bc, loop_order=order, d=s.d, dtype_bytes=DTYPE_BYTES[s.dtype])
    computed, tiles = len(masked.computed_steps()), masked.steps
    sched = tile_schedule(s.n, s.n, s.br, s.bc, causal=s.causal, window=s.window)
    skipped_below = [t for t in sched if t.status == SKIPPED and t.k_block <= t.q_block]
    traffic, unmasked = masked.hbm_bytes[-1], plain.hbm_bytes[-1]
    values = {"computed": computed, "tiles": tiles, "share": computed / tiles, "skipped": tiles - computed,
              "order": LOOP_ORDER_SHORT[order], "traffic": format_bytes(traffic), "unmasked": format_bytes(unmasked),
              "ratio": traffic / unmasked, "status": sched.status_grid(), "counts": sched.counts()}
    return Result.of(values, {"the mask is not causal alone": not s.causal or s.window is not None,
                            "a skipped tile is on or below the diagonal": bool(skipped_below),
                            "not about half the tiles": not CAUSAL_SHARE[0] <= computed / tiles <= CAUSAL_SHARE[1],
                            "the traffic does not fall": traffic >= unmasked})

