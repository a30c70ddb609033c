"""The IO model view's claim: `io_passes`, FA1's HBM accesses against the on-chip memory M (Theorem 2: each doubling
of M about halves them until one pass over K and V remains), from the same io_cost the chart draws.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from flashviz.model.iomodel import hbm_vs_memory
from flashviz.views.claim import Result
from flashviz.vocab import (
    ALGORITHMS,
    DTYPE_BYTES,
    KV_OUTER,
    NAIVE,
    Q_OUTER,
)

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.views.io.settings import IOSettings


M_EXPONENTS = range(10, 23)  # the IO model view's on-chip memories: M = 2^10 .. 2^22 elements


HALVES = (0.45, 0.55)  # a doubling of M "halves" the accesses when it multiplies them by a factor in this range


def io_passes(s: IOSettings) -> Result:
    """The IO model's curves: standard attention against M, FA1's and FA2's fall with M and their flat part.

    Args:
        s: the step's settings (N, d, mask, dtype, B, H are read).
    Returns:
        Result: naive (millions of accesses), flat (the first M >= 4dN), fa1, fa2 (millions there), fa1_ratio,
        fa2_ratio (at the first doubling of M), and for the slide's picture curves (hbm_vs_memory's DataFrame at
        M_EXPONENTS); holds when standard attention is flat, both flash curves halve at the first doubling, never
        rise and are flat from 4dN on, and FA2 is never above FA1.

    Example:
        >>> from flashviz.lesson.steps import INTRO
        >>> r = io_passes(INTRO.step("io_passes").view_settings())
        >>> r.holds, r.values["flat"], round(r.values["naive"], 1)
        (True, 1048576, 68.2)
    """
    ms = tuple(2**e for e in M_EXPONENTS)
    df = hbm_vs_memory(ms, s.n, s.d, algorithms=ALGORITHMS, causal=s.causal, window=s.window, batch=s.batch,
                       heads=s.heads, dtype_bytes=DTYPE_BYTES[s.dtype])
    curves = {a: df[df["algorithm"].astype(str).eq(a)].set_index("M")["accesses"].astype(float).sort_index()
              for a in ALGORITHMS}
    flat = next(m for m in ms if m >= 4 * s.d * s.n)
    values = {"naive": float(curves[NAIVE].iloc[0]) / 1e6, "flat": flat,
              "fa1": float(curves[KV_OUTER].loc[flat]) / 1e6, "fa2": float(curves[Q_OUTER].loc[flat]) / 1e6,
              "curves": df}
    failures = {"standard attention moves with M": curves[NAIVE].nunique() != 1,
                "FA2 is above FA1 somewhere": bool((curves[Q_OUTER] > curves[KV_OUTER]).any())}
    for a, key in ((KV_OUTER, "fa1"), (Q_OUTER, "fa2")):
        c = curves[a]
        values[f"{key}_ratio"] = float(c.iloc[1] / c.iloc[0])
        failures[f"{key} does not halve at the first doubling"] = not HALVES[0] <= c.iloc[1] / c.iloc[0] <= HALVES[1]
        failures[f"{key} rises somewhere"] = any(b > a_ for a_, b in itertools.pairwise(c))
        failures[f"{key} is not flat from 4dN"] = c.loc[ms[ms.index(flat) - 1]] <= c.loc[flat] or \
            c.loc[flat:].nunique() != 1
    return Result.of(values, failures)

