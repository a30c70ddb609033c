"""Every sentence the Ring view says, each a pure function of the numbers it quotes (the model's tiles, a run's
events, errors and merge), so that a claim and the chart next to it cannot disagree, and each says the opposite where
the numbers do. No torch, no streamlit: flashviz.views.ring.page draws them.

Legend: N positions, W ranks, r a rank, t a ring step, n = N / W, H heads, d head dimension, L_t a step's partial
logsumexp, L the merged one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from flashviz.figures.style import fmt_sci
from flashviz.measure.load import DISTURBED_SHARE
from flashviz.measure.stats import min_repeats
from flashviz.measure.verdict import MORE_REPEATS, Verdict, compare
from flashviz.units import and_list, format_bytes, format_flops
from flashviz.vocab import PARTIAL, SKIPPED

if TYPE_CHECKING:  # plain data; the data module itself imports torch
    from flashviz.views.ring.data import LayoutWork, LongContext, MapGrid, MergeRow, PrecisionPoint

FORWARD, BACKWARD = "forward", "backward"  # flashviz.ring's phase names (that module imports torch)
GRADS = {"dq": "dQ", "dk": "dK", "dv": "dV"}  # the run's gradient names, as the sentences write them
BALANCED = 0.05  # a layout whose busiest rank is within this fraction of the mean tiles is called balanced
WARMUP_FACTOR = 2.0  # step 0 "is slow" when its mean compute is this many times the later computed steps' mean


def intro(c: LongContext, model: str) -> str:
    """The view's first words: why anyone splits one sequence over devices, with a long context's numbers on one
    device and per rank (flashviz.views.ring.data.long_context), and what a rank and a shard are, before either word
    is used.

    Example:
        >>> from flashviz.views.ring.data import LONG_MODEL, long_context
        >>> intro(long_context(4), LONG_MODEL).split("; ")[1]
        'standard attention would write S and P of 2048.0 GiB a layer, and even FlashAttention computes 281 TFLOP a \
layer on one device. **Context parallelism** gives each device a process, a **rank**, holding a **shard** of N / W \
positions. At W = 4 a shard is 32,768 positions: 4.0 GiB of K/V and 70.4 TFLOP a layer per rank.'

    """
    return (f"**Why split one sequence over devices?** At N = {c.n:,} tokens a model of {model} keeps "
            f"{format_bytes(c.kv_bytes)} of K/V per sequence; standard attention would write S and P of "
            f"{format_bytes(c.scores_bytes)} a layer, and even FlashAttention computes {format_flops(c.flops)} a "
            "layer on one device. **Context parallelism** gives each device a process, a **rank**, holding a "
            f"**shard** of N / W positions. At W = {c.world} a shard is {'' if c.even else 'at most '}{c.shard:,} "
            f"positions: {format_bytes(c.kv_rank_bytes)} of K/V and {format_flops(c.flops_rank)} a layer per rank.")


RUN_HELP = ("Starts the processes on this machine (gloo, one thread each, each importing torch) and runs in them "
            "this ring forward and backward, the other layouts at this W (forward), and W = 1, 2, 4 in fp32 and bf16 "
            "for the precision chart. Results are cached per setting.")


def problem_text(problem: str) -> str:
    """The error shown in place of the view when the settings cannot be drawn or run (the fix is in `problem`)."""
    return f"The view cannot shard these settings. {problem}"


def run_label(processes: int) -> str:
    """The Run button's label (the page puts ▶ before it)."""
    return f"Run the ring in {processes} processes"


def run_idle(processes: int, others: int, sweep: int) -> str:
    """What the page says before a run: what pressing Run starts and computes (RUN_HELP says which rings).

    Example:
        >>> run_idle(4, 2, 6)
        '**Run**: 4 processes, 9 rings.'
    """
    return f"**Run**: {processes} processes, {1 + others + sweep} rings."  # one line in the button's column


def ranks_list(values: Iterable[object]) -> str:
    """'rank 0: a, rank 1: b, ...'"""
    return ", ".join(f"rank {r}: {v}" for r, v in enumerate(values))


def span(events: Sequence, phase: str) -> float:
    """Seconds from the first start of a phase's steps to the last end (start + compute + wait), over every rank."""
    steps = [e for e in events if e.phase == phase]
    return max(e.start_s + e.compute_s + e.comm_s for e in steps) - min(e.start_s for e in steps)


def map_sentence(grid: MapGrid) -> str:
    """What the map shows at these settings: the ring's rotation, the tiles computed, partial and skipped, and the
    steps each rank runs.

    Example:
        >>> from flashviz.views.ring.data import RingSetup, score_map
        >>> "out of W = 2: rank 0: 1, rank 1: 2;" in map_sentence(score_map(RingSetup(256, 2, "contiguous", True, 64,
        ...                                                                           "float32", 2)))
        True
    """
    W, T = grid.world, grid.tiles
    counts = grid.counts()
    total = sum(counts.values())
    computed = total - counts.get(SKIPPED, 0)
    text = (f"**The map.** Row block r is rank r's N / W = {grid.n // W} queries, column block k the K/V shard of "
            f"rank k; each block is {T} × {T} tiles of {grid.block}. At step t rank r holds rank (r − t) mod W's "
            f"shard: step 0 is the diagonal (every rank's own), each later step one block further left, wrapping "
            f"round. Of the {total} tiles, **{computed} are computed** ({counts.get(PARTIAL, 0)} of them partial, "
            f"marked p) and {counts.get(SKIPPED, 0)} skipped.")
    runs = [len(grid.steps_run(r)) for r in range(W)]
    if min(runs) == W:
        return text + f" Every rank runs all {W} steps."
    return text + (f" Under causal, the steps each rank runs out of W = {W}: {ranks_list(runs)}; it skips the others "
                   "whole, their keys all coming after its queries.")


def imbalance_sentence(works: Sequence[LayoutWork], bad: Mapping[str, str], world: int, causal: bool,
                       bounds: tuple[float, float]) -> str:
    """max / mean tiles per layout at these settings, and where the plain ring's lies against 2W/(W+1) and
    (2W-1)/W.

    Args:
        works: the model's work per valid layout.  bad: layouts that cannot shard N, with why.  world: W.
        causal: the mask.  bounds: (2W/(W+1), (2W-1)/W), flashviz.views.ring.data.contiguous_causal_bounds.
    """
    by = {w.layout: w for w in works}
    listed = ", ".join(f"{w.layout} **{w.imbalance:.2f}**" for w in works)
    text = (f"**Imbalance**, the busiest rank's tiles over the mean (the ring moves at the busiest rank's pace, so "
            f"1 is best): {listed}.")
    if world == 1:
        text += " One rank: nothing to balance."
    elif not causal:
        same = all(abs(w.imbalance - 1) < 1e-12 for w in works)
        text += (" Without a causal mask every rank computes every tile of every step: "
                 + ("every layout is balanced." if same else "yet some layout is not balanced here."))
    else:
        lo, hi = bounds
        if "contiguous" in by:
            x = by["contiguous"].imbalance
            where = "between" if lo - 1e-9 <= x <= hi + 1e-9 else "outside"
            text += (f" Contiguous under causal: rank r computes r whole steps and its own diagonal, so its "
                     f"{x:.2f} lies {where} 2W/(W+1) = {lo:.2f} (one tile per step) and (2W−1)/W = {hi:.2f} "
                     "(small tiles).")
        if "zigzag" in by:
            z = by["zigzag"].imbalance
            text += (f" Zigzag's busiest rank is {(z - 1) * 100:.1f}% above the mean: "
                     + ("balanced, each rank pairing an early chunk with a late one." if z <= 1 + BALANCED else
                        f"not within {BALANCED:.0%} at these tiles."))
        if "striped" in by and "zigzag" in by:
            s, z = sum(by["striped"].tiles), sum(by["zigzag"].tiles)
            if s > z:
                text += (f" Striped computes {s} tiles in all against zigzag's {z}: its shards interleave, so more "
                         "of its tiles straddle the diagonal.")
    for layout, why in bad.items():
        text += f" {layout.capitalize()} cannot run here: {why.split('. ')[0]}."
    return text


def verdict_sentence(processes: int, rings: int, seconds: float, events: Sequence, errors: Mapping[str, float],
                     dtype: str, tolerance: float, mismatches: Sequence[str]) -> str:
    """The run in one paragraph: processes, time, the error against one process, and whether the events equal the
    model.

    Example:
        >>> "**4e-7** (within the fp32 bar of 1e-5); gradients dQ 5e-7." in verdict_sentence(
        ...     4, 9, 7.5, (), {"out": 4e-7, "dq": 5e-7}, "float32", 1e-5, ())
        True
    """
    out = errors["out"]
    spans = [f"{span(events, phase) * 1e3:.3g} ms {phase}" for phase in (FORWARD, BACKWARD)
             if any(e.phase == phase for e in events)]
    text = (f"**{processes} processes** ran {rings} rings in {seconds:.1f} s, the processes' start included"
            + (f" (this ring's steps: {' + '.join(spans)})" if spans else "")
            + f". Largest error of the output against one process in float64: **{fmt_sci(out)}**")
    if dtype == "float32":
        text += f" ({'within' if out <= tolerance else 'above'} the fp32 bar of {fmt_sci(tolerance)})"
    grads = ", ".join(f"{GRADS[name]} {fmt_sci(errors[name])}" for name in GRADS if name in errors)
    if grads:
        text += f"; gradients {grads}"
    text += ". "
    if not mismatches:
        text += "Every step's K/V owner, tiles, FLOPs and bytes sent equal the model's."
    else:
        text += (f"{len(mismatches)} event field(s) differ from the model, e.g. {mismatches[0]}.")
    return text


def work_match_sentence(model: Sequence[LayoutWork], run: Sequence[LayoutWork], mismatches: Sequence[str]) -> str:
    """Whether the run's own events counted the tiles and FLOPs the model predicts, layout by layout."""
    same = [w.layout for w in run if any(m.layout == w.layout and m.tiles == w.tiles and m.flops == w.flops
                                         for m in model)]
    if not mismatches and len(same) == len(run):
        return (f"**Counted by the run.** The diamonds are what each rank's kernel reported in the run: tiles and "
                f"FLOPs equal to the model's on every rank of the {len(run)} layout(s) it ran "
                f"({', '.join(same)}).")
    return (f"**Counted by the run.** The run's events differ from the model in {len(mismatches)} place(s)"
            + (f", e.g. {mismatches[0]}" if mismatches else "") + ".")


def rank_verdict(samples: Sequence[Sequence[float]]) -> tuple[int, int, Verdict | None]:
    """The rank whose median step took longest, the one whose median took shortest, and the verdict of the first's
    step times against the second's (compare: a difference only where their 95% intervals separate); None where the
    shorter median is 0 (no ratio to take) or there is only one rank."""
    medians = [statistics.median(x) for x in samples]
    most, least = medians.index(max(medians)), medians.index(min(medians))
    if most == least or medians[least] <= 0:
        return most, least, None
    return most, least, compare(list(samples[most]), list(samples[least]), (f"rank {most}", f"rank {least}"))


def ranks_apart(v: Verdict, what: str) -> str:
    """A rank verdict in words: the ranks named only where it separates, else how far apart their medians look and
    why no rank is named (from the verdict's own numbers).

    Example:
        >>> v = compare([1.0, 1.2, 0.9, 1.1], [0.5, 0.6, 0.4, 0.5], ("rank 3", "rank 0"))
        >>> ranks_apart(v, "computed")[:75]
        "no rank's steps computed measurably longer than another's: rank 3's median "
    """
    a, b = v.names
    if v.separated:
        return (f"{a}'s steps {what} longest and {b}'s shortest: {b} is {v.speedup[0]:.2f}x faster per step "
                f"({v.speedup[1]:.2f}-{v.speedup[2]:.2f}x; {v.confidence:.0%} intervals of {v.a.repeats} and "
                f"{v.b.repeats} steps)")
    text = (f"no rank's steps {what} measurably longer than another's: {a}'s median step took {v.ratio:.2f}x "
            f"{b}'s ({v.ratio_low:.2f}-{v.ratio_high:.2f}x), too close to call here")
    fewest = min_repeats(v.confidence)
    if v.settle == MORE_REPEATS and min(v.a.repeats, v.b.repeats) < fewest:
        return text + (f": {min(v.a.repeats, v.b.repeats)} steps per rank, and fewer than {fewest} give no "
                       f"{v.confidence:.0%} interval of a median")
    if v.settle == MORE_REPEATS:
        return text + f": the steps' times spread too widely (intervals up to ±{v.widest:.0%} of the median)"
    return text + f": the {v.difference:.0%} difference is within the {v.noise:.0%} the intervals reach"


def shared_cores(world: int, cores: int | None) -> str:
    """Where W processes shared fewer cores than W (cores: this process's CPU affinity, os.sched_getaffinity): what
    that does to the step times. Empty where each process had a core of its own or the cores are not known.

    Example:
        >>> shared_cores(4, 2)[:39], shared_cores(2, 2)
        ('**4 processes shared 2 cores here.** A ', '')
    """
    if cores is None or cores >= world:
        return ""
    return (f"**{world} processes shared {cores} core{'s' if cores != 1 else ''} here.** A step's time is wall "
            "time: it includes the time its process waited for a core, so which rank looks slow says as much about "
            "the machine's scheduler as about the rank's work. ")


def cpu_clause(cpu: Sequence[Sequence[float]], wall: Sequence[Sequence[float]]) -> str:
    """Each rank's compute on the CPU (its process's CPU time over the same stretches as the wall times) and its share
    of the wall time; when a rank ran on the CPU for less than DISTURBED_SHARE of it, that it waited for a core.
    Empty where no CPU time was measured.

    Example:
        >>> cpu_clause([[0.004, 0.004], [0.001, 0.001]], [[0.004, 0.004], [0.004, 0.004]])
        "; on the CPU, its process's CPU time over the same steps: rank 0: 8 ms (100%), rank 1: 2 ms (25%): rank 1 \
ran on a core for less than 75% of its compute, waiting for one the rest of the time, so its compute time counts \
other processes' work too"
    """
    totals = [(sum(c), sum(w)) for c, w in zip(cpu, wall, strict=True)]
    if not any(c > 0 for c, _ in totals):
        return ""
    shares = [c / w if w > 0 else 1.0 for c, w in totals]
    text = ("; on the CPU, its process's CPU time over the same steps: "
            + ranks_list(f"{c * 1e3:.3g} ms ({min(share, 9.99):.0%})" for (c, _), share in zip(totals, shares,
                                                                                             strict=True)))
    waited = [r for r, share in enumerate(shares) if share < DISTURBED_SHARE]
    if waited:
        who, its = and_list([f"rank {r}" for r in waited]), "its" if len(waited) == 1 else "their"
        text += (f": {who} ran on a core for less than {DISTURBED_SHARE:.0%} of {its} compute, waiting for one the "
                 f"rest of the time, so {its} compute time counts other processes' work too")
    return text


def timeline_sentence(events: Sequence, cores: int | None = None) -> str:
    """Per phase: its span, each rank's compute in all, and which rank computed and waited longest, by the verdict
    rule over each rank's step times (a rank named only where compare() separates its steps from another's); first,
    whether the W processes shared fewer cores than W (`cores`, as shared_cores)."""
    parts = []
    for phase in (FORWARD, BACKWARD):
        steps = [e for e in events if e.phase == phase]
        if not steps:
            continue
        world = max(e.rank for e in steps) + 1
        took = span(events, phase)
        compute = [[e.compute_s for e in steps if e.rank == r] for r in range(world)]
        wait = [[e.comm_s for e in steps if e.rank == r] for r in range(world)]
        text = (f"**{phase.capitalize()}**: {took * 1e3:.3g} ms from the first step's start to the last step's end; "
                f"compute over each rank's steps: {ranks_list(f'{sum(c) * 1e3:.3g} ms' for c in compute)}")
        text += cpu_clause([[e.compute_cpu_s for e in steps if e.rank == r] for r in range(world)], compute)
        if world > 1:
            _, _, v = rank_verdict(compute)
            text += f"; {ranks_apart(v, 'computed')}" if v is not None else ""
            _, _, w = rank_verdict(wait)
            text += f"; waiting for transfers, {ranks_apart(w, 'waited')}" if w is not None else ""
        text += "."
        later = [e.compute_s for e in steps if e.step > 0 and e.tiles_computed > 0]
        first = [e.compute_s for e in steps if e.step == 0]
        if phase == FORWARD and later and first and (sum(first) / len(first) > WARMUP_FACTOR * sum(later) / len(later)):
            text += (f" Step 0 took {sum(first) / len(first) * 1e3:.3g} ms per rank against "
                     f"{sum(later) / len(later) * 1e3:.3g} ms for the later computed steps: the first kernel call "
                     "in each process pays its warm-up.")
        parts.append(text)
    world = max((e.rank for e in events), default=0) + 1
    return shared_cores(world, cores) + " ".join(parts)


def bytes_sentence(events: Sequence, model_bytes: Mapping[tuple[str, int], int], heads: int, n_local: int, d: int,
                   dtype_bytes: int) -> str:
    """What each rank sends per step and in all, measured against the model."""
    world = max(e.rank for e in events) + 1
    if world == 1:
        return "**Bytes.** One rank: the ring sends nothing."
    shard = model_bytes[(FORWARD, 0)]
    fwd = sum(v for (p, _), v in model_bytes.items() if p == FORWARD)
    bwd = sum(v for (p, _), v in model_bytes.items() if p == BACKWARD)
    differ = [e for e in events if e.bytes_sent != model_bytes.get((e.phase, e.step))]
    text = (f"**Bytes.** At every forward step but the last each rank sends its K and V shards, 2·H·(N/W)·d = "
            f"2·{heads}·{n_local}·{d} elements of {dtype_bytes} bytes = **{format_bytes(shard)}**: "
            f"{format_bytes(fwd)} per rank over the forward ring")
    if bwd:
        text += (f", and {format_bytes(bwd)} over the backward, which sends K and V again and the dK, dV "
                 "accumulators (fp32) at every step")
    text += ". " + ("The bytes each rank sent equal the model's at every step." if not differ else
                    f"{len(differ)} (rank, step) sent other than the model says, e.g. rank {differ[0].rank} "
                    f"{differ[0].phase} step {differ[0].step}: {differ[0].bytes_sent} bytes.")
    return text


def merge_sentence(merge: MergeRow) -> str:
    """One row's merge in numbers: the steps' L_t, their weights, their sum and L recomputed from them.

    Example:
        >>> from flashviz.views.ring.data import MergeRow
        >>> merge_sentence(MergeRow(7, 1, 3, (0.0, 0.0), (1, 0), math.log(2), (0.5, 0.5)))[:60]
        '**The merge.** Row 7 (rank 1, its local row 3) got a partial'
    """
    used = [t for t, x in enumerate(merge.lse_steps) if x > -math.inf]
    weights = ", ".join(f"{merge.weights[t]:.3f}" for t in used)
    lses = ", ".join(f"{merge.lse_steps[t]:.4g}" for t in used)
    text = (f"**The merge.** Row {merge.position} (rank {merge.rank}, its local row {merge.local}) got a partial "
            f"output and logsumexp L_t from {len(used)} of the {len(merge.lse_steps)} steps: L_t = {lses}. Each "
            f"partial enters the output with weight exp(L_t − L): {weights}, which sum to "
            f"{merge.weight_sum:.6f}. log Σ exp(L_t) = {merge.lse_of_steps:.6g}, the run's L = {merge.lse:.6g}.")
    if len(used) < len(merge.lse_steps):
        text += f" The other {len(merge.lse_steps) - len(used)} step(s) showed it no key (L_t = −∞, weight 0)."
    return text


def precision_sentence(points: Sequence[PrecisionPoint], tolerance: float) -> str:
    """fp32 against bf16 partials as W grows: the largest errors against the bar, the mean error's growth."""
    parts = []
    for dtype, short in (("float32", "fp32"), ("bfloat16", "bf16")):
        mine = sorted((p for p in points if p.dtype == dtype), key=lambda p: p.world)
        if not mine:
            continue
        worlds = ", ".join(str(p.world) for p in mine)
        largest = ", ".join(fmt_sci(p.max_error) for p in mine)
        text = f"**{short} partials**: largest error {largest} at W = {worlds}"
        if dtype == "float32":
            text += f" ({'all within' if all(p.max_error <= tolerance for p in mine) else 'not all within'} " \
                    f"{fmt_sci(tolerance)})"
        a, b = mine[0], mine[-1]
        if len(mine) > 1 and a.mean_error > 0:
            ratio = b.mean_error / a.mean_error
            how = "grows" if ratio > 1.01 else "shrinks" if ratio < 0.99 else "stays"
            text += (f"; the mean error {how} from {fmt_sci(a.mean_error)} at W = {a.world} to "
                     f"{fmt_sci(b.mean_error)} at W = {b.world} ({ratio:.2f}×)")
        if dtype == "bfloat16":
            text += (f". Storing the exact output in bf16 alone errs by {fmt_sci(mine[0].rounding)} on average; each "
                     "ring step rounds its partial output to bf16 before the fp32 merge")
        parts.append(text + ".")
    return " ".join(parts)
