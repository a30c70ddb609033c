"""What the Masks view's timings say, in words: pure functions of the measured rows (flashviz.views.masks.data), so
every number a sentence quotes is one the chart next to it draws. No torch, no streamlit.

The claim the view makes: a tiled kernel never loads a skipped tile, so its time follows the tiles it computes. The
yardstick is the unmasked kernel's time, from the same interleaved run, scaled by the fraction of tiles computed ("in
proportion"), its 95% interval scaled with it; a time is compared with it by the verdict rule every view uses
(flashviz.measure.verdict.compare: `proportion`), so a word stands only where the intervals say it. Where a measured
time is off that yardstick, the sentence says by how much and why, from the same rows: the cost per computed tile
and per kernel step (on a CPU each step is one Python loop iteration with a fixed overhead, whatever its width), the
partial tiles' element masks, and the spread of the repeats (a busy machine).

Legend: t time (s), c computed tiles, T tiles in all, s kernel steps (loop iterations), p partial tiles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from flashviz.measure.stats import min_repeats
from flashviz.measure.verdict import (
    BUSY,
    FEWER_THREADS,
    MORE_REPEATS,
    Verdict,
    cell,
    compare,
    estimate_of,
    fewer_threads,
    row_estimate,
    threads_capped,
)
from flashviz.units import format_bytes
from flashviz.vocab import DENSE, MASKED, UNMASKED

PROPORTION_TOLERANCE = 0.25  # a time within 25 % of the proportional one is "in proportion": timing noise on a CPU
LESS, IN_PROPORTION, MORE = "less than in proportion", "in proportion", "more than in proportion"
CLOSE = "too close to call"  # the intervals neither separate from the proportional time nor fit within the band
Row = Mapping[str, object]


def ms(seconds: float) -> str:
    """A time in milliseconds, three significant figures.

    Example:
        >>> ms(0.01834), ms(0.4)
        ('18.3 ms', '400 ms')
    """
    return f"{seconds * 1e3:.3g} ms"


def proportional_s(unmasked_s: float, computed: int, tiles: int) -> float:
    """The time in proportion to the tiles computed: the unmasked kernel's time x computed / tiles.

    Example:
        >>> proportional_s(0.4, 64, 256)
        0.1
    """
    return unmasked_s * computed / tiles if tiles else 0.0


def ratio_word(ratio: float) -> str:
    """How a ratio of a measured time to its proportional one reads, ignoring how sure it is (see proportion_word).

    Example:
        >>> ratio_word(0.5), ratio_word(1.1), ratio_word(3.0)
        ('less than in proportion', 'in proportion', 'more than in proportion')
    """
    if ratio < 1 - PROPORTION_TOLERANCE:
        return LESS
    return IN_PROPORTION if ratio <= 1 + PROPORTION_TOLERANCE else MORE


def proportion(row: Row, unmasked: Row) -> Verdict | None:
    """compare() of a masked row's time with the unmasked row's (of the same interleaved run) scaled by the fraction
    of tiles the mask computes, its interval scaled with it; None where either row has no interval."""
    a, u = row_estimate(row), row_estimate(unmasked)
    if a is None or u is None:
        return None
    f = _i(row, "tiles_computed") / max(_i(row, "tiles"), 1)
    if f <= 0:
        return None
    scaled = estimate_of(u.median * f, u.low * f, u.high * f, u.repeats)
    return compare(a, scaled, ("its time", "its time in proportion"))


def proportion_word(v: Verdict | None) -> str:
    """The word a proportion verdict supports: LESS or MORE only where the intervals separate and the ratio is past
    the PROPORTION_TOLERANCE band; IN_PROPORTION where the ratio's whole interval lies within the band and both medians
    converged; CLOSE otherwise (no interval, or one too wide to say).

    Example:
        >>> row = lambda t, h, c=16: {"time_s": t, "time_lo_s": t - h, "time_hi_s": t + h, "repeats": 20,
        ...                           "tiles_computed": c, "tiles": 16}
        >>> [proportion_word(proportion(row(t, h, 8), row(0.1, 0.001))) for t, h in ((0.1, 0.001), (0.05, 0.001),
        ...                                                                          (0.05, 0.03))]
        ['more than in proportion', 'in proportion', 'too close to call']
    """
    if v is None:
        return CLOSE
    if v.separated and v.ratio > 1 + PROPORTION_TOLERANCE:
        return MORE
    if v.separated and v.ratio < 1 - PROPORTION_TOLERANCE:
        return LESS
    known = v.a.converged and v.b.converged and min(v.a.level, v.b.level) >= v.confidence
    if known and v.ratio_low >= 1 - PROPORTION_TOLERANCE and v.ratio_high <= 1 + PROPORTION_TOLERANCE:
        return IN_PROPORTION
    return CLOSE


def proportion_md(v: Verdict | None) -> str:
    """A proportion verdict in words: the ratio (with its interval) and the word it supports; where it supports none,
    the verdict's own sentence (what would settle it)."""
    if v is None:
        return "no interval was recorded, so no word on its proportion"
    word = proportion_word(v)
    if word == CLOSE:
        return f"{cell(v)} that: {settle_words(v)}"
    if word == IN_PROPORTION:  # not separated from it, and its whole interval inside the band
        return f"**{v.ratio:.2f}x** that ({v.ratio_low:.2f}-{v.ratio_high:.2f}x), {word}"
    return f"**{cell(v)}** that, {word}"


def settle_words(v: Verdict) -> str:
    """Why a verdict of this view names nothing, and what would settle it with what the view offers (its repeats are
    fixed: a quieter machine, the threads that ran, or a larger N in the sidebar), from the verdict's own numbers.

    Example:
        >>> settle_words(compare([1.0, 1.3, 0.8, 1.1, 0.9, 1.2], [1.0, 1.01, 0.99, 1.0, 1.02, 0.98]))[:40]
        'too close to call here: the intervals re'
    """
    if v.settle == BUSY:
        return ("too close to call here: the machine was too busy for clean timings (more calls were set aside than "
                "kept); run again on a quieter machine")
    if v.settle == FEWER_THREADS:
        return (f"too close to call here: {fewer_threads(v)}; run again when the cores are free, or set **CPU "
                f"threads** to {threads_capped(v)[0]} in the sidebar")
    if v.settle == MORE_REPEATS:
        fewest = min_repeats(v.confidence)
        if min(v.a.repeats, v.b.repeats) < fewest:
            return (f"too close to call here: {min(v.a.repeats, v.b.repeats)} timed calls give no "
                    f"{v.confidence:.0%} interval of a median (at least {fewest})")
        return (f"too close to call here: the intervals reach ±{v.widest:.0%} of the median (target "
                f"±{v.target_rel_ci:.0%}), the machine was busy while it timed; run again on a quieter machine")
    return (f"too close to call here: the {v.difference:.0%} difference is within the {v.noise:.0%} the intervals "
            "reach; a larger N (sidebar) gives each call more work")


def same_kernel_md(run: Sequence[Row] | None, sweep: Sequence[Row] | None) -> str:
    """Where the page holds both runs: the unmasked kernel's time in each, compared by the verdict rule. Each
    comparison on the page uses the unmasked time of its own interleaved run; this says how far the two runs' agree.

    Example:
        >>> u = lambda t: {"kind": "unmasked", "time_s": t, "time_lo_s": t * .98, "time_hi_s": t * 1.02, "repeats": 20}
        >>> same_kernel_md([u(0.181)], [u(0.0645)])[:72]
        'The unmasked kernel ran in both timings on this page: 181 ms in the mask'
    """
    if not run or not sweep:
        return ""
    mine = next((r for r in run if str(r.get("kind")) == UNMASKED), None)
    theirs = sweep[-1]
    if mine is None:
        return ""
    a, b = row_estimate(mine), row_estimate(theirs)
    text = (f"The unmasked kernel ran in both timings on this page: {ms(_f(mine, 'time_s'))} in the mask's run, "
            f"{ms(_f(theirs, 'time_s'))} in the presets' sweep. Each comparison above uses the unmasked time of its "
            "own run, timed call by call beside what it is compared with.")
    if a is None or b is None:
        return text
    v = compare(a, b, ("the mask's run", "the sweep"))
    if v.separated:
        return text + (f" The same kernel on the same inputs took {cell(v)} the time in the mask's run: the "
                       "machine's load changed between the two runs, so compare times within one run only.")
    return text + f" The two are {cell(v)} apart, {settle_words(v)}."


def _f(row: Row, name: str) -> float:
    return float(row[name])  # type: ignore[arg-type]


def _i(row: Row, name: str) -> int:
    return int(row[name])  # type: ignore[call-overload]


def per_tile_md(row: Row, unmasked: Row) -> str:
    """The cost per computed tile and per kernel step, this mask against none.

    Example:
        >>> m = {"time_s": 0.02, "tiles_computed": 10, "steps": 4, "tiles_partial": 4}
        >>> u = {"time_s": 0.08, "tiles_computed": 16, "steps": 4, "tiles_partial": 0}
        >>> print(per_tile_md(m, u).replace("; ", ";\\n"))
        Per computed tile: 2 ms with the mask, 5 ms without;
        per kernel step: 5 ms (4 steps of 2.5 tiles on average) against 20 ms (4 steps of 4 tiles)
    """
    t, t0 = _f(row, "time_s"), _f(unmasked, "time_s")
    c, c0, s, s0 = _i(row, "tiles_computed"), _i(unmasked, "tiles_computed"), _i(row, "steps"), _i(unmasked, "steps")
    return (f"Per computed tile: {ms(t / max(c, 1))} with the mask, {ms(t0 / max(c0, 1))} without; per kernel step: "
            f"{ms(t / max(s, 1))} ({s} steps of {c / max(s, 1):.2g} tiles on average) against {ms(t0 / max(s0, 1))} "
            f"({s0} steps of {c0 / max(s0, 1):.2g} tiles)")


def _tiles(x: float) -> str:
    """'1 tile', '2.5 tiles'."""
    return f"{x:.2g} tile" + ("" if f"{x:.2g}" == "1" else "s")


def why_not_md(row: Row, unmasked: Row) -> str:
    """Why a masked time is more than in proportion to its tiles, from the numbers: its time following its kernel
    steps rather than its tiles (a step's fixed overhead, whatever its width), the spread of the repeats, and the
    partial tiles' element masks.

    Example:
        >>> m = {"time_s": 0.05, "iqr_s": 0.001, "tiles_computed": 10, "tiles": 16, "steps": 8, "tiles_partial": 4}
        >>> u = {"time_s": 0.04, "iqr_s": 0.001, "tiles_computed": 16, "tiles": 16, "steps": 4, "tiles_partial": 0}
        >>> why = why_not_md(m, u)  # 50 ms against 25 ms in proportion: far outside the spread of the repeats
        >>> "spread" in why, "packs 1.2 tiles per step against 4 tiles" in why, why.endswith("element mask.")
        (False, True, True)
    """
    t, t0, n_tiles = _f(row, "time_s"), _f(unmasked, "time_s"), max(_i(row, "tiles"), 1)
    c, c0, s, s0 = _i(row, "tiles_computed"), _i(unmasked, "tiles_computed"), _i(row, "steps"), _i(unmasked, "steps")
    excess = t - proportional_s(t0, c, n_tiles)
    spread = _f(row, "iqr_s") + _f(unmasked, "iqr_s") * c / n_tiles
    reasons = []
    if s and s0 and c / s < c0 / s0:
        got, by_steps, by_tiles = t / t0, s / s0, c / n_tiles
        follows = (f" Here its time follows its steps, not its tiles: {s} steps against {s0} is {by_steps:.2f}× the "
                   f"unmasked kernel's, and it took {got:.2f}× its time (its tiles alone: {by_tiles:.2f}×)."
                   if abs(got - by_steps) < abs(got - by_tiles) else "")
        reasons.append(f"On this CPU a kernel step is one Python loop iteration whose fixed cost does not shrink with "
                       f"its width, and the mask's schedule packs {_tiles(c / s)} per step against {_tiles(c0 / s0)} "
                       f"without it, so each of its tiles carries more of that cost.{follows}")
    if excess <= spread:
        reasons.append(f"The excess, {ms(excess)}, is within the spread of the repeats (interquartile ranges "
                       f"{ms(_f(row, 'iqr_s'))} with the mask, {ms(_f(unmasked, 'iqr_s'))} without): the CPU was busy "
                       "with other work while it timed; run again.")
    if _i(row, "tiles_partial"):
        reasons.append(f"{_i(row, 'tiles_partial')} of its {c} tiles are partial: each also adds its element mask.")
    if not reasons:
        reasons.append("It packs as many tiles per step as the unmasked kernel and the spread of the repeats does not "
                       "cover the difference: the machine's load changed between the runs; run again.")
    return " ".join(reasons)


def run_md(runs: Sequence[Row]) -> str:
    """The mask at work in words: the masked kernel's time against the unmasked kernel's scaled to the tiles it
    computes, why where it is not in proportion, dense SDPA, peak memory and the builds (masked_run_figure's numbers).

    Args:
        runs: data.masked_runs rows (kind, time_s, iqr_s, peak_bytes, build_s, tiles_computed, tiles,
            tiles_partial, steps).
    Returns:
        Markdown: two or three paragraphs.
    """
    r = {str(row["kind"]): row for row in runs}
    m, u, d = r[MASKED], r[UNMASKED], r[DENSE]
    c, n_tiles = _i(m, "tiles_computed"), _i(m, "tiles")
    t, t0, expect = _f(m, "time_s"), _f(u, "time_s"), proportional_s(_f(u, "time_s"), c, _i(m, "tiles"))
    v = proportion(m, u)
    text = (f"With this mask the tiled kernel computed **{c} of {n_tiles} tiles ({c / n_tiles:.1%})** and took "
            f"**{ms(t)}**; without a mask it computed all {_i(u, 'tiles_computed')} in **{ms(t0)}**, timed call by "
            f"call beside it. In proportion to the tiles computed it would take **{ms(expect)}** ({c / n_tiles:.1%} "
            f"of {ms(t0)}, the mark on its bar): it took {proportion_md(v)}. {per_tile_md(m, u)}.")
    if proportion_word(v) == MORE:
        text += f"\n\n**Why more than in proportion here.** {why_not_md(m, u)}"
    return text + (f"\n\nDense SDPA with the boolean mask computes every pair: {ms(_f(d, 'time_s'))}. Peak memory "
                   f"above the inputs: {_bytes(m)} masked tiled, {_bytes(d)} dense SDPA, {_bytes(u)} unmasked tiled. "
                   f"Each mask was built once before the timing and reused by every timed call, as FlexAttention "
                   f"builds a BlockMask once: the tile schedule with its partial tiles' element masks in "
                   f"**{ms(_f(m, 'build_s'))}** (the unmasked schedule in {ms(_f(u, 'build_s'))}), the dense boolean "
                   f"mask in {ms(_f(d, 'build_s'))}; the builds are not in the times above.")


def _bytes(row: Row) -> str:
    return format_bytes(_i(row, "peak_bytes"))


def sweep_md(rows: Sequence[Row]) -> str:
    """The sweep in words: how many presets took at most their proportional time, each one that took more with its
    numbers, why (its steps: how many tiles a step packs against the unmasked kernel's), and the preset that computed
    the fewest tiles (the first in preset order on a tie).

    Args:
        rows: data.sparsity_runs rows, the unmasked kernel last (label, computed, tiles_computed, tiles,
            tiles_partial, steps, time_s, iqr_s, build_s).
    Returns:
        Markdown.
    """
    *presets, unmasked = rows
    t0, s0, c0 = _f(unmasked, "time_s"), _i(unmasked, "steps"), _i(unmasked, "tiles_computed")
    expect = {str(p["label"]): proportional_s(t0, _i(p, "tiles_computed"), _i(p, "tiles")) for p in presets}
    verdicts = {str(p["label"]): proportion(p, unmasked) for p in presets}
    word = {label: proportion_word(v) for label, v in verdicts.items()}
    held = [label for label, w in word.items() if w in (LESS, IN_PROPORTION)]
    over = [p for p in presets if word[str(p["label"])] == MORE]
    close = [label for label, w in word.items() if w == CLOSE]
    text = (f"**{len(held)} of {len(presets)} presets took at most {1 + PROPORTION_TOLERANCE:.2g}× their time in "
            f"proportion** by the verdict rule (their fraction of tiles × the unmasked kernel's {ms(t0)} in the same "
            "run, the marks on the bars)" + (f": {', '.join(held)}." if held else "."))
    if close:
        text += (f" Too close to call here: {', '.join(close)} (their intervals reach across the "
                 f"±{PROPORTION_TOLERANCE:.0%} band; more repeats or a quieter machine would settle it).")
    for p in over:
        label, s = str(p["label"]), _i(p, "steps")
        text += (f"\n- **{label}** ({_f(p, 'computed'):.0%} of tiles, {s} kernel steps of "
                 f"{_tiles(_i(p, 'tiles_computed') / max(s, 1))}): {ms(_f(p, 'time_s'))} against {ms(expect[label])} "
                 f"in proportion ({cell(verdicts[label])}), {ms(_f(p, 'time_s') / max(s, 1))} a step.")
    if over:
        packed = [p for p in over if _i(p, "tiles_computed") / max(_i(p, "steps"), 1) < c0 / max(s0, 1)]
        text += (f"\n\n**Why more than in proportion.** On this CPU a kernel step is one Python loop iteration with a "
                 f"fixed cost whatever its width: the unmasked kernel runs {s0} steps of {_tiles(c0 / max(s0, 1))}, "
                 f"{ms(t0 / max(s0, 1))} a step; " + (
                     f"{len(packed)} of these {len(over)} presets pack fewer tiles a step, so their time follows their "
                     "steps more than their tiles. " if packed else "these pack as many tiles a step. ")
                 + "Partial tiles add their element masks, and a busy machine widens the spread of the repeats "
                   "(the error bars).")
    best = min(presets, key=lambda p: _i(p, "tiles_computed"))
    t = _f(best, "time_s")
    a, b = row_estimate(best), row_estimate(unmasked)
    against = (f"{cell(compare(a, b))} the unmasked kernel's {ms(t0)}" if a is not None and b is not None
               else f"against the unmasked kernel's {ms(t0)}")
    return text + (f"\n\n**{best['label']}** computed the fewest tiles, {best['tiles_computed']} of {best['tiles']} "
                   f"({_f(best, 'computed'):.1%}), and took **{ms(t)}**, {against}: time proportional to tiles "
                   f"computed would be {_f(best, 'computed'):.2f}x. Its schedule took {ms(_f(best, 'build_s'))} to "
                   "build, once, before the timing.")
