"""What the Backward view says, one sentence builder per claim: each a pure function of the numbers it states, so
every claim on the page is true at the settings it is shown with, and says the opposite where the general claim fails
(the tiled backward moving more bytes than standard attention's at a tiny N, a dQ_i with a single contribution).

Inputs are flashviz.measure's plain data: BackwardSchedule, BackwardTrace, SavedForBackward, DqComparison
(views/backward/data.py), DqRuns (views/backward/claims.py), RecomputePrice (views/backward/data.py).
Torch-free and streamlit-free.

References: Dao, FlashAttention-2 (2023), Algorithm 2; Dao et al., FlashAttention (2022), Algorithm 3 (standard
attention's backward: P read, dP and dS written and read, 7 N^2 elements).
Legend: N sequence length, d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from flashviz.measure.verdict import MORE_REPEATS, sentence
from flashviz.units import format_bytes, format_flops
from flashviz.vocab import DTYPE_BYTES, NAIVE

if TYPE_CHECKING:  # plain dataclasses, for type hints only
    from flashviz.views.backward.claims import DqRuns
    from flashviz.views.backward.data import BackwardTrace, DqComparison, RecomputePrice, SavedForBackward

STANDARD_PER_SCORE = 7  # elements standard attention's backward moves per score: reads P twice, dP once, dS twice;
#                         writes dP and dS (FA1 Algorithm 3, model/iomodel_backward.py standard_backward_steps)


def _times(a: float, b: float) -> float:
    return a / b if b else math.inf


def _sizes(c: DqComparison) -> str:
    heads = f", {c.heads} heads" if c.heads > 1 else ""
    tiles = f"Br = Bc = {c.block_q}" if c.block_q == c.block_k else f"Br = {c.block_q}, Bc = {c.block_k}"
    return f"N = {c.n}, d = {c.d}, {tiles}{heads}"


def traffic_text(c: DqComparison, where: str = "") -> str:
    """The tiled backward's HBM traffic (atomic dQ) against standard attention's at c's settings; where the tiled
    one moves more, why, tile by tile. `where` names whose sizes these are (e.g. "the map's problem").

    Example:
        >>> from flashviz.views.backward.data import dq_comparison
        >>> traffic_text(dq_comparison(32, 16, 8, 8, causal=True)).split(". ")[0].split(" over HBM, ")[1]
        "standard attention's backward **44.0 KiB**: 1.27× less"
        >>> "MORE" in traffic_text(dq_comparison(32, 16, 8, 8))  # no mask: 16 tiles cost more than the 32 x 32 P
        True
    """
    tiled, std = c.atomic_bytes, c.standard_bytes
    at = f"{_sizes(c)} ({where})" if where else _sizes(c)
    if tiled < std:
        return (f"At {at} the tiled backward moves **{format_bytes(tiled)}** over HBM, standard attention's "
                f"backward **{format_bytes(std)}**: {_times(std, tiled):.2f}× less. It never writes P, dP or dS "
                "(N × N each) to HBM and never reads them back.")
    per_tile = 4 * c.block_q * c.d + 2 * c.block_q  # Q_i, dO_i, L_i, D_i in; dQ_i in and out (elements)
    per_block = STANDARD_PER_SCORE * c.block_q * c.block_k
    cheaper = "more" if per_tile > per_block else "no more"
    return (f"**At {at} the tiled backward moves MORE over HBM than standard attention's: "
            f"{format_bytes(tiled)} against {format_bytes(std)} ({_times(tiled, std):.2f}×).** The saving is not "
            f"there at these sizes: every computed tile streams Q_i, dO_i, L_i, D_i in and dQ_i in and out, "
            f"4·Br·d + 2·Br = {per_tile:,} elements, {cheaper} than the {STANDARD_PER_SCORE}·Br·Bc = {per_block:,} "
            f"elements standard attention moves for the same block of scores (it reads and writes P, dP and dS). A "
            f"full tile costs less than its block once Bc > (4d + 2) / {STANDARD_PER_SCORE} = "
            f"{(4 * c.d + 2) / STANDARD_PER_SCORE:.1f} keys.")


def scale_text(c: DqComparison, where: str) -> str:
    """The same comparison at larger sizes (`where` says whose: e.g. "the sidebar's sizes").

    Example:
        >>> from flashviz.views.backward.data import dq_comparison
        >>> scale_text(dq_comparison(4096, 64, 128, 128, causal=True), "a GPU's sizes")
        "At N = 4096, d = 64, Br = Bc = 128 (a GPU's sizes): tiled 73.5 MiB against standard 456.0 MiB, 6.20× less."
    """
    tiled, std = c.atomic_bytes, c.standard_bytes
    verdict = (f"{_times(std, tiled):.2f}× less" if tiled < std
               else f"{_times(tiled, std):.2f}× MORE for the tiled backward")
    return (f"At {_sizes(c)} ({where}): tiled {format_bytes(tiled)} against standard {format_bytes(std)}, "
            f"{verdict}.")


def saved_text(s: SavedForBackward, where: str = "") -> str:
    """What the forward keeps for the backward at s's N: O and L against standard attention's P (`where`: whose
    sizes these are).

    Example:
        >>> from flashviz.views.backward.data import saved_bytes
        >>> saved_text(saved_bytes(32, 16)).split(": ")[1:]
        ["2.1 KiB, against 4.0 KiB for standard attention's P (1,024 probabilities)", '1.88× less, 1.9 KiB saved.']
    """
    heads = f" with {s.heads} heads" if s.heads > 1 else ""
    verdict = (f"{s.p_over_tiled:.2f}× less, {format_bytes(s.p_bytes - s.tiled_bytes)} saved"
               if s.p_bytes > s.tiled_bytes else
               f"MORE than P here: at N = {s.n} P's N × N entries take no more room than O's N × d and L's N")
    at = f"N = {s.n}{heads} ({where})" if where else f"N = {s.n}{heads}"
    return (f"At {at} the tiled forward keeps O ({format_bytes(s.o_bytes)}) and L "
            f"({format_bytes(s.lse_bytes)}) for the backward: {format_bytes(s.tiled_bytes)}, against "
            f"{format_bytes(s.p_bytes)} for standard attention's P ({s.heads * s.n * s.n:,} probabilities): "
            f"{verdict}.")


def row_sum_text(t: BackwardTrace) -> str:
    """What the real kernel's recomputed P shows: each row's probabilities, summed over its tiles, make 1.

    Example:
        >>> from flashviz.views.backward.data import backward_trace
        >>> row_sum_text(backward_trace(32, 16, 8, 8, causal=True)).split(", the ")[1][:52]
        'recomputed probabilities of each of the 32 query row'
    """
    blind = t.n - t.rows_seeing_keys
    blind_text = (f" ({blind} row{'s' if blind != 1 else ''} see{'' if blind != 1 else 's'} no key: "
                  "P = 0 there, L = −inf)") if blind else ""
    return (f"The backward recomputes every tile P_ij = exp(S_ij − L_i) from Q_i, K_j and the saved L_i alone. In "
            f"the real kernel's run ({t.dtype}), the recomputed probabilities of each of the {t.rows_seeing_keys} "
            f"query rows that see a key sum to 1 within {t.max_row_sum_error:.1e} over that row's tiles{blind_text}: "
            "L_i is the log of the whole row's softmax denominator, so exp(S_ij − L_i) is already normalised and the "
            "backward never needs the row's other tiles, nor P from HBM.")


def dq_text(c: DqComparison) -> str:
    """Why GPU kernels add dQ atomically, and what the deterministic second pass costs at c's settings.

    Example:
        >>> from flashviz.views.backward.data import dq_comparison
        >>> dq_text(dq_comparison(32, 16, 8, 8, causal=True)).split(". ")[0].split(", ")[1]
        'and here up to 4 of them add into the same dQ_i at the same time'
    """
    if c.max_row_tiles <= 1:
        race = ("On a GPU each K/V column j of Algorithm 2 runs in its own thread block; here every dQ_i gets a "
                "single tile, so no two blocks add into the same dQ_i and the order cannot vary.")
    else:
        race = (f"On a GPU each K/V column j of Algorithm 2 runs in its own thread block, and here up to "
                f"{c.max_row_tiles} of them add into the same dQ_i at the same time. So kernels use atomic adds, "
                "whose order varies from run to run: floating-point addition is not associative, so dQ differs in "
                "its last bits between runs.")
    extra_b = c.extra_bytes
    bytes_text = (f"{format_bytes(extra_b)} more HBM traffic (+{100 * extra_b / c.atomic_bytes:.0f}%)" if extra_b > 0
                  else f"{format_bytes(-extra_b)} less HBM traffic ({100 * extra_b / c.atomic_bytes:.0f}%)"
                  if extra_b < 0 else "the same HBM traffic")
    return (f"{race} The deterministic alternative is a second pass over the Q blocks that recomputes S_ij, P_ij, "
            f"dP_ij and dS_ij to build each dQ_i on chip and write it once: {c.deterministic_matmuls_per_tile} "
            f"matmuls per tile instead of {c.atomic_matmuls_per_tile}, {format_flops(c.extra_flops)} more "
            f"(+{100 * c.extra_flops / c.atomic_flops:.0f}% FLOPs) and {bytes_text} at {_sizes(c)}.")


def determinism_text(r: DqRuns) -> str:
    """What the two runs and the reordered sum showed on this machine.

    Example:
        >>> from flashviz.views.backward.claims import dq_runs
        >>> determinism_text(dq_runs(32, 16, 8, 8, causal=True)).split(": ")[1].split(". ")[0]
        'two runs of the backward on the same inputs gave **bitwise-equal dQ** (512 of 512 entries identical)'
    """
    if r.bitwise_equal:
        runs = (f"This kernel runs the columns j one after another in a Python loop, so every dQ_i receives its "
                f"additions in the same order in every run: two runs of the backward on the same inputs gave "
                f"**bitwise-equal dQ** ({r.values:,} of {r.values:,} entries identical).")
    else:
        runs = (f"Two runs of the backward on the same inputs gave dQ that differ in {r.run_differing:,} of "
                f"{r.values:,} entries.")
    if r.reordered_differing:
        order = (f" Adding the same contributions dS_ij K_j to each dQ_i in reverse order, as racing atomic adds may, "
                 f"changes {r.reordered_differing:,} of the {r.values:,} entries, by up to "
                 f"{r.reordered_max_abs:.1e} (the largest |dQ| entry is {r.dq_max_abs:.2f}).")
    elif r.max_contributors < 3:
        order = (f" Here each dQ_i gets at most {r.max_contributors} contribution"
                 f"{'s' if r.max_contributors != 1 else ''}, and their order cannot matter (a + b = b + a exactly): "
                 "it takes three or more, so a larger N or smaller tiles, for the order to show.")
    else:
        order = " Adding each dQ_i's contributions in reverse order happens to change no entry at these settings."
    return runs + order


def price_text(p: RecomputePrice) -> str:
    """The measured price in words: peak memory of the tiled kernel against naive autograd as a ratio (exact counts),
    and their times by the verdict rule (p.time_verdict: a faster side only where the intervals separate).

    Example:
        >>> from flashviz.views.backward.data import RecomputePrice
        >>> p = RecomputePrice(("flash2", "naive", "sdpa"), ("tiled", "naive", "SDPA"), (0.4, 0.2, 0.07),
        ...                    (0.01, 0.01, 0.0), (4.4e6, 7.4e7, 7.4e6), ("ok",) * 3, 1024, 64, 1, 4, 64, 64, True,
        ...                    None, "float32", "cpu", 2, 5)
        >>> price_text(p).split(": ")[0]
        "Naive autograd peaked at 70.6 MiB, 16.8× the tiled kernel's 4.2 MiB"
        >>> price_text(p).split(". ")[-1]
        'The times carry no interval here, so they name no faster side.'
        >>> from dataclasses import replace
        >>> q = replace(p, time_lo_s=(0.39, 0.19, 0.06), time_hi_s=(0.41, 0.21, 0.08), timed=(5, 5, 5))
        >>> price_text(q).split("in the backward. ")[1][:62]
        'Naive autograd and the tiled kernel are not settled here, thou'
    """
    mem, time = p.ratio("peak_bytes", NAIVE), p.ratio("time_s", NAIVE)
    tiled_peak, naive_peak = p.peak_bytes[0], p.peak_bytes[1]
    square = format_bytes(p.n * p.n * DTYPE_BYTES[p.dtype])
    if math.isnan(mem):
        memory = "Naive autograd did not run, so there is no memory ratio."
    elif mem > 1:
        memory = (f"Naive autograd peaked at {format_bytes(naive_peak)}, {mem:.1f}× the tiled kernel's "
                  f"{format_bytes(tiled_peak)}: it keeps P from the forward and builds dP and dS (N × N each, "
                  f"{square} per head here) in the backward.")
    else:
        memory = (f"Here naive autograd's peak ({format_bytes(naive_peak)}) is not above the tiled kernel's "
                  f"({format_bytes(tiled_peak)}): at N = {p.n} an N × N matrix is only {square} per head.")
    v = p.time_verdict()
    if v is not None:
        said = sentence(v)
        speed = " " + said[0].upper() + said[1:]
        if v.settle == MORE_REPEATS:  # the repeats this view reads are set on the Benchmark view
            speed += " This view times the Benchmark view's **Repeats**."
    elif not math.isnan(time):
        speed = " The times carry no interval here, so they name no faster side."
    else:
        speed = ""
    return memory + speed


def row_sum_table(t: BackwardTrace, rows: tuple[int, ...] | None = None) -> str:
    """A markdown table of a few query rows: the recomputed P_ij's row sum on each of the row's tiles, and their
    total (1 for a row that sees a key). rows None: the first, the middle and the last row.

    Example:
        >>> from flashviz.views.backward.data import backward_trace
        >>> print(row_sum_table(backward_trace(16, 8, 8, 8, causal=True), rows=(15,)).splitlines()[-1])
        | 15 | 1 | 0.3810 + 0.6190 | 1.000000 |
    """
    rows = rows if rows is not None else tuple(sorted({0, t.n // 2, t.n - 1}))
    lines = ["| query row | Q block i | recomputed rowsum(P_ij), tile by tile (j = 0, 1, ...) | sum over its tiles |",
             "|---|---|---|---|"]
    for r in rows:  # the trace's tiles come column by column: j ascending for each row
        sums = [tile.row_sums[r - tile.q_start] for tile in t.tiles if tile.q_start <= r < tile.q_end]
        parts = " + ".join(f"{x:.4f}" for x in sums) or "no tile (sees no key)"
        lines.append(f"| {r} | {r // t.block_q} | {parts} | {t.row_sum_total[r]:.6f} |")
    return "\n".join(lines)


def dq_table(comparisons: list[tuple[str, DqComparison]]) -> str:
    """A markdown table, one column per (label, comparison): matmuls per tile, FLOPs and HBM traffic of atomic dQ,
    deterministic dQ and standard attention's backward.

    Example:
        >>> from flashviz.views.backward.data import dq_comparison
        >>> print(dq_table([("map", dq_comparison(32, 16, 8, 8, causal=True))]).splitlines()[4])
        | HBM traffic: atomic → deterministic | 34.8 KiB → 39.0 KiB (+12%) |
    """
    def change(a: float, b: float, fmt) -> str:
        return f"{fmt(a)} → {fmt(b)} ({100 * (b - a) / a:+.0f}%)" if a else f"{fmt(a)} → {fmt(b)}"

    rows = {
        "matmuls per tile: atomic → deterministic": [
            f"{c.atomic_matmuls_per_tile} → {c.deterministic_matmuls_per_tile}" for _, c in comparisons],
        "FLOPs: atomic → deterministic": [change(c.atomic_flops, c.deterministic_flops, format_flops)
                                          for _, c in comparisons],
        "HBM traffic: atomic → deterministic": [change(c.atomic_bytes, c.deterministic_bytes, format_bytes)
                                                for _, c in comparisons],
        "standard attention's backward: FLOPs, HBM traffic": [
            f"{format_flops(c.standard_flops)}, {format_bytes(c.standard_bytes)}" for _, c in comparisons],
    }
    head = "| | " + " | ".join(f"{label}: {_sizes(c)}" for label, c in comparisons) + " |"
    lines = [head, "|---" * (len(comparisons) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows.items()]
    return "\n".join(lines)


def slower_text(p: RecomputePrice, c: DqComparison) -> str:
    """Why the tiled kernel measured slower than naive autograd on this machine (for a price whose time ratio is below
    1), with c the IO model at the same sizes: what the kernel's tile loop costs here, and what it saves on a GPU.

    Example:
        >>> from flashviz.views.backward.data import dq_comparison
        >>> from flashviz.views.backward.data import RecomputePrice
        >>> p = RecomputePrice(("flash2", "naive", "sdpa"), ("tiled", "naive", "SDPA"), (0.4, 0.2, 0.07),
        ...                    (0.01, 0.01, 0.0), (4.4e6, 7.4e7, 7.4e6), ("ok",) * 3, 1024, 64, 1, 4, 64, 64, True,
        ...                    None, "float32", "cpu", 2, 5)
        >>> slower_text(p, dq_comparison(1024, 64, 64, 64, causal=True, heads=4)).split(": ")[1].split(" (")[0]
        'its forward and its backward each run 136 tiles as Python loop iterations of a few small matmuls'
    """
    saving = (f": the tiled backward moves {_times(c.standard_bytes, c.atomic_bytes):.2f}× less than standard "
              "attention's at these sizes (above)" if c.atomic_bytes < c.standard_bytes else
              ", but at these sizes the tiled backward moves MORE than standard attention's "
              f"({_times(c.atomic_bytes, c.standard_bytes):.2f}×, above)")
    return (f"**Why slower here?** This kernel is plain PyTorch: its forward and its backward each run {c.tiles:,} "
            "tiles as Python loop iterations of a few small matmuls (the heads batched in each), where naive attention "
            "runs a handful of large ones; and on a CPU the \"SRAM\" is the cache while naive's N × N matrices "
            f"({format_bytes(p.n * p.n * DTYPE_BYTES[p.dtype])} per head each) still fit in RAM, so they cost no "
            f"slow round trip. On a GPU the gap FlashAttention closes is HBM traffic{saving}.")
