"""What the IO model view says, pure functions of the model's numbers (hbm_vs_memory rows): where each curve falls
like 1/M and where it is flat, where a tiled kernel drops below standard attention, FA2 against FA1, and what a mask
changes. Torch-free."""

from __future__ import annotations

import pandas as pd

from flashviz.vocab import ALGORITHMS, KV_OUTER, LOOP_ORDER_SHORT, LOOP_ORDERS, NAIVE, Q_OUTER


def flat_from(curve: pd.Series) -> int | None:
    """The smallest M from which the curve no longer changes (at least two points), or None."""
    ms = list(curve.index)
    k = len(ms) - 1
    while k > 0 and _same(curve.iloc[k - 1], curve.iloc[-1]):
        k -= 1
    return int(ms[k]) if k < len(ms) - 1 else None


def rises(curve: pd.Series) -> list[tuple[int, int, float]]:
    """(M before, M after, factor) for every doubling of M where the curve goes up."""
    ms, v = list(curve.index), curve.to_numpy()
    return [(int(ms[i]), int(ms[i + 1]), v[i + 1] / v[i]) for i in range(len(ms) - 1)
            if v[i + 1] > v[i] and not _same(v[i], v[i + 1])]


def curve_story(df: pd.DataFrame, n: int, d: int, unmasked: pd.DataFrame | None = None) -> list[str]:
    """What each curve of hbm_vs_memory does as M grows, one markdown sentence each, read off the numbers.

    Args:
        df: hbm_vs_memory output for naive, kv_outer and q_outer at the page's settings.
        n, d: N and the head dimension (for the 4dN flattening point).
        unmasked: the same without the mask, when the page's settings have one (the mask's effect is told).
    Returns:
        Sentences: one per algorithm, then FA2 against FA1, then any rise explained.

    Example:
        >>> from flashviz.model.iomodel import hbm_vs_memory
        >>> df = hbm_vs_memory([2**e for e in range(10, 23)], 1024, 64, algorithms=ALGORITHMS)
        >>> fa1 = curve_story(df, 1024, 64)[1]
        >>> "flat from M = 262,144 (the first M ≥ 4dN" in fa1, "Below standard attention from M = 16,384" in fa1
        (True, True)
    """
    naive, fa1, fa2 = (series(df, a) for a in ALGORITHMS)
    lines = []
    flat = naive.min() == naive.max()
    text = (f"**{NAMES[NAIVE]}** is flat at {count(naive.iloc[0])}: it writes S and P (N² each) and reads them "
            "back whatever M is" if flat else f"**{NAMES[NAIVE]}** goes from {count(naive.iloc[0])} to "
                                              f"{count(naive.iloc[-1])}")
    if unmasked is not None:
        same = all(_same(a, b) for a, b in zip(naive, series(unmasked, NAIVE), strict=True))
        text += ("; the mask changes nothing: it computes every score and masks afterwards" if same
                 else "; the mask lowers it")
    lines.append(text + ".")
    for algorithm, curve in ((KV_OUTER, fa1), (Q_OUTER, fa2)):
        text = f"**{NAMES[algorithm]}** {_flash_sentence(curve, naive, n, d)}."
        if unmasked is not None:
            text += f" {_mask_sentence(curve, series(unmasked, algorithm))}."
        lines.append(text)
    below = pd.Series([a < b or _same(a, b) for a, b in zip(fa2, fa1, strict=True)], index=fa2.index)
    lines.append("**FA2 is below FA1 at every M shown**: a pass of FA2 moves 2Nd elements (K and V once per Q "
                 "block), one of FA1 3Nd + 4N (Q, and O, l, m read and written back per K/V block)." if below.all() else
                 "FA2 is above FA1 at M = " + ", ".join(f"{int(m):,}" for m in fa2.index[~below]) + ".")
    for algorithm, curve in ((KV_OUTER, fa1), (Q_OUTER, fa2)):
        for lo, hi, factor in rises(curve):
            lines.append(f"**{NAMES[algorithm]} rises** from M = {lo:,} to {hi:,} (× {factor:.2f}): with a mask, "
                         "each block of rows loads K and V up to the next multiple of Bc past its last visible key, "
                         "and when Bc does not divide Br that overshoot can grow as the blocks grow.")
    return lines


NAMES = {NAIVE: "Standard attention", **{o: f"{LOOP_ORDER_SHORT[o]} ({o})" for o in LOOP_ORDERS}}


def count(x: float) -> str:
    """An access count in words a slide can carry.

    Example:
        >>> count(68_157_440), count(1_597_440), count(950)
        ('68.2M', '1.6M', '950')
    """
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


def series(df: pd.DataFrame, algorithm: str) -> pd.Series:
    """One curve: accesses indexed by M, in increasing M."""
    rows = df[df["algorithm"].astype(str).eq(algorithm)]
    return rows.set_index("M")["accesses"].astype(float).sort_index()


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= SAME * max(abs(a), abs(b), 1.0)


def _flash_sentence(curve: pd.Series, naive: pd.Series, n: int, d: int) -> str:
    """How one flash curve falls and where it flattens and crosses naive."""
    first, second = curve.iloc[0], curve.iloc[1] if len(curve) > 1 else curve.iloc[0]
    ratio = second / first if first else 1.0
    start = f"{count(first)} at M = {int(curve.index[0]):,}"
    if HALVES[0] <= ratio <= HALVES[1]:
        text = f"falls like 1/M while its blocks are small (× {ratio:.2f} at the first doubling of M) from {start}"
    elif ratio < 1:
        text = f"falls from {start} (× {ratio:.2f} at the first doubling of M)"
    else:
        text = f"starts at {start}"
    flat = flat_from(curve)
    if flat is not None:
        first_grid_4dn = next((int(m) for m in curve.index if m >= 4 * d * n), None)
        why = (f" (the first M ≥ 4dN = {4 * d * n:,}: one block holds every key, a single pass)"
               if flat == first_grid_4dn else "")
        text += f"; flat from M = {flat:,}{why} at {count(curve.loc[flat])}"
    else:
        text += f"; still falling at the largest M shown ({count(curve.iloc[-1])})"
    below = [int(m) for m in curve.index if curve.loc[m] < naive.loc[m]]
    if below and all(curve.loc[m] < naive.loc[m] for m in curve.index if m >= below[0]):
        text += (f". Below standard attention from M = {below[0]:,}" if below[0] != curve.index[0]
                 else ". Below standard attention at every M shown")
    elif not below:
        text += ". Above standard attention at every M shown"
    return text


def _mask_sentence(curve: pd.Series, unmasked: pd.Series) -> str:
    """How a masked flash curve compares with the same curve without the mask."""
    start = curve.iloc[0] / unmasked.iloc[0]
    meet = next((int(m) for m in curve.index if _same(curve.loc[m], unmasked.loc[m])), None)
    text = f"With the mask it starts at {start:.2f} × the unmasked value"
    if meet is not None and all(_same(curve.loc[m], unmasked.loc[m]) for m in curve.index if m >= meet):
        text += (f" and meets it from M = {meet:,}: once one block holds every key, the single pass cannot skip "
                 "anything, so the mask's saving shrinks to 0 as the blocks grow")
    else:
        text += f" and stays below it (× {curve.iloc[-1] / unmasked.iloc[-1]:.2f} at the largest M)"
    return text


HALVES = (0.45, 0.55)  # a doubling of M that multiplies the accesses by a factor in this range "halves" them


SAME = 1e-9  # relative difference below which two access counts are the same number
