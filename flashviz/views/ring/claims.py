"""The Ring view's claims: `context_parallel`, why one long sequence is split over devices (a 128k-token context's
bytes and FLOPs on one device against each rank's share), `ring_balance`, how unevenly the plain ring shares causal
work and that zigzag shares it evenly (the model, no process), and `ring_exact`, that a real run in W processes equals
one process in float64 and its own events equal the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flashviz.units import format_bytes, format_flops
from flashviz.views.claim import Result
from flashviz.views.ring.data import (
    FP32_TOLERANCE,
    LONG_MODEL,
    contiguous_causal_bounds,
    layout_work,
    long_context,
    ring_run,
    setup_of,
)
from flashviz.views.ring.sentences import BALANCED

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.views.ring.settings import RingSettings


def context_parallel(s: RingSettings) -> Result:
    """A 128k-token sequence of a Llama-3-8B-shaped model on one device against each of the view's W ranks: its K/V,
    standard attention's S and P, and attention's FLOPs (flashviz.views.ring.data.long_context).

    Args:
        s: the settings (the view's W is read).
    Returns:
        Result: n, world, shard (N / W), kv, kv_rank, scores, flops, flops_rank as the claim writes them, the same
        in bytes and FLOPs (kv_bytes, kv_rank_bytes, scores_bytes, flops_count, flops_rank_count) and the model in
        words; holds when W > 1 and each rank holds its shard's share of the K/V and of the FLOPs (1/W where W
        divides N), and one layer's S and P outweigh the whole sequence's K/V (what standard attention could not
        keep).

    Example:
        >>> from flashviz.views.ring.settings import RingSettings
        >>> r = context_parallel(RingSettings())
        >>> r.holds, r.values["kv"], r.values["kv_rank"], r.values["flops_rank"]
        (True, '16.0 GiB', '4.0 GiB', '70.4 TFLOP')
    """
    c = long_context(s.world)
    values = {"n": c.n, "world": c.world, "shard": c.shard, "kv": format_bytes(c.kv_bytes),
              "kv_rank": format_bytes(c.kv_rank_bytes), "scores": format_bytes(c.scores_bytes),
              "flops": format_flops(c.flops), "flops_rank": format_flops(c.flops_rank), "kv_bytes": c.kv_bytes,
              "kv_rank_bytes": c.kv_rank_bytes, "scores_bytes": c.scores_bytes, "flops_count": c.flops,
              "flops_rank_count": c.flops_rank, "model": LONG_MODEL}
    return Result.of(values, {
        "W = 1 splits nothing": c.world < 2,
        "a rank does not hold its shard's share of the K/V": c.kv_rank_bytes * c.n != c.kv_bytes * c.shard,
        "a rank does not compute its shard's share of the FLOPs": c.flops_rank * c.n != c.flops * c.shard,
        "one layer's S and P do not outweigh the whole K/V": not c.scores_bytes > c.kv_bytes})


def ring_balance(s: RingSettings) -> Result:
    """max / mean tiles per layout at the view's settings (the model's count, as the imbalance sentence states it).

    Args:
        s: the settings (the view's N, W, tile, causal and heads are read).
    Returns:
        Result: contiguous, zigzag, striped (max / mean tiles, NaN for a layout that cannot shard N), lo and hi (the
        plain ring's bounds 2W/(W+1) and (2W-1)/W); holds when zigzag is within 5% of the mean and the plain ring
        lies between its bounds and above zigzag (a causal ring of W > 1).

    Example:
        >>> from flashviz.views.ring.settings import RingSettings
        >>> r = ring_balance(RingSettings())
        >>> r.holds, round(r.values["contiguous"], 3), r.values["zigzag"]
        (True, 1.667, 1.0)
    """
    setup = setup_of(s)
    works, _ = layout_work(setup)
    by = {w.layout: w.imbalance for w in works}
    lo, hi = contiguous_causal_bounds(setup.world)
    values = {layout: by.get(layout, float("nan")) for layout in ("contiguous", "zigzag", "striped")}
    values.update(lo=lo, hi=hi, world=setup.world)
    c, z = values["contiguous"], values["zigzag"]
    return Result.of(values, {
        "zigzag's busiest rank is not within 5% of the mean": not z <= 1 + BALANCED,
        "the plain ring does not lie between 2W/(W+1) and (2W-1)/W": not lo - 1e-9 <= c <= hi + 1e-9,
        "the plain ring is not less balanced than zigzag": not c > z})


def ring_exact(s: RingSettings) -> Result:
    """A real run at the view's settings (W processes, gloo): its error against one process in float64, its events
    against the model, and one row's merge weights.

    Args:
        s: the settings (the view's N, W, layout, tile, causal, dtype, heads).
    Returns:
        Result: error (max |O - O_ref|), mismatches (event fields that differ from the model, in every layout run),
        weight_sum (the merge weights of the last row), seconds (the run's wall time); holds when the error is at
        most 1e-5 (fp32 partials), no event differs and the weights sum to 1 within 1e-5.

    Example:
        >>> from flashviz.views.ring.settings import RingSettings
        >>> r = ring_exact(RingSettings(ring_n=32, world=2, ring_block=8))  # doctest: +SKIP
        >>> r.holds, r.values["mismatches"]  # doctest: +SKIP
        (True, 0)
    """
    r = ring_run(setup_of(s))
    values = {"error": r.errors["out"], "mismatches": len(r.mismatches) + len(r.layout_mismatches),
              "weight_sum": r.merge.weight_sum, "seconds": r.seconds, "processes": r.processes}
    return Result.of(values, {
        "the fp32 ring errs by more than 1e-5": r.setup.dtype == "float32" and not r.errors["out"] <= FP32_TOLERANCE,
        "the run's events differ from the model": values["mismatches"] > 0,
        "the merge weights do not sum to 1": not abs(r.merge.weight_sum - 1) <= 1e-5})
