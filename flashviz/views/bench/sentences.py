"""What the Benchmark view says, pure functions of its measured rows and settings: which kernel is faster at each N
(only where the medians' 95% intervals separate: flashviz.measure.verdict; otherwise "too close to call here" and
what would settle it), the causal ratios, and why a tiled kernel can be slower than standard attention
here. The Block size and Training views say the same."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from flashviz.measure import verdict
from flashviz.measure.stats import TARGET_REL_CI, min_repeats
from flashviz.measure.verdict import Estimate, Verdict, cell, compare, sentence
from flashviz.units import format_bytes
from flashviz.vocab import NAIVE, NUMERICS_KERNEL_LABELS, OK, TILED_IMPLS

if TYPE_CHECKING:
    from flashviz.views.bench.settings import BenchSettings


def slower_why(n: int, block: int, heads: int, batch: int, traffic: str) -> str:
    """Why a tiled kernel can be slower than naive on a CPU, from the run's own settings; `traffic` says where the view
    shows the modelled HBM traffic ("the modelled traffic chart below", ...) or is empty where it shows none.

    Example:
        >>> text = slower_why(1024, 256, 4, 1, "")
        >>> "4 × 4 = 16 tiles" in text and "4 heads" in text and text.endswith("the IO model view.")
        True
    """
    t = -(-n // block)  # tiles per side, ceil(N / Bc)
    scores = 4 * n * n * heads * batch  # bytes of naive's fp32 S (and again of P) per call
    return (f"At N = {n} with {block}-wide tiles the tiled kernel runs {t} × {t} = {plural(t * t, 'tile')} per call, "
            "each a few "
            f"matmuls of at most {block} × {block} plus elementwise passes for the online softmax, all as separate "
            f"PyTorch calls over B × H = {batch} × {heads} = {batch * heads} heads; naive runs two large matmuls "
            f"over the whole {n} × {n} score matrix ({format_bytes(scores)} for S across {batch * heads} heads), "
            "which this CPU's BLAS runs at a higher rate. And on a CPU the \"SRAM\" is the cache while naive's scores "
            "still fit in RAM, so there is no slow HBM round trip to save. On a GPU the gap FlashAttention closes is "
            "HBM traffic: see " + (f"{traffic} and " if traffic else "") + "the IO model view.")


def tiles_note(bench_block: int, br: int, bc: int) -> str:
    """Why the traffic chart's tiles are not the sidebar's, where they differ ("" where they are the same).

    Example:
        >>> tiles_note(256, 64, 64)[:58]
        'This view times its own tile size, 256 × 256; How it works'
        >>> tiles_note(64, 64, 64)
        ''
    """
    if bench_block == br == bc:
        return ""
    text = (f"This view times its own tile size, {bench_block} × {bench_block}; How it works, the IO model view and "
            f"the roofline model count the sidebar's Br × Bc = {br} × {bc}, so their ratios differ from these.")
    if bench_block > max(br, bc):
        text += " On a CPU each tile costs a Python loop iteration, so the timed tiles are wider."
    return text


def short(impl: str) -> str:
    """The short name charts and sentences use for an implementation: naive, FA1, FA2, SDPA."""
    return NUMERICS_KERNEL_LABELS.get(impl, impl)


def row_estimate(row: pd.Series) -> Estimate | None:
    """A sweep row's median time with its interval (None where the row did not run or carries no interval)."""
    return verdict.row_estimate(row)


def speed_verdicts(df: pd.DataFrame, base: str = NAIVE) -> list[tuple[int, str, Verdict]]:
    """For each N and each tiled implementation timed there next to `base`: the verdict base against it (a winner only
    where the two medians' 95% intervals separate: flashviz.measure.verdict).

    Example:
        >>> rows = [dict(impl="naive", N=512, time_s=2e-3, time_lo_s=1.98e-3, time_hi_s=2.02e-3, repeats=20,
        ...              status="ok"),
        ...         dict(impl="flash2", N=512, time_s=1e-3, time_lo_s=0.99e-3, time_hi_s=1.01e-3, repeats=20,
        ...              status="ok")]
        >>> [(n, impl, v.faster) for n, impl, v in speed_verdicts(pd.DataFrame(rows))]
        [(512, 'flash2', 'FA2')]
    """
    out = []
    for n, rows in df.groupby("N", sort=True):
        by = {str(r["impl"]): row_estimate(r) for _, r in rows.iterrows()}
        if by.get(base) is None:
            continue
        for impl in TILED_IMPLS:
            if by.get(impl) is not None:
                out.append((int(n), impl, compare(by[base], by[impl], (short(base), short(impl)))))
    return out


def block_verdicts(tiled: pd.DataFrame, reference: pd.DataFrame) -> list[tuple[int, Verdict]]:
    """The Block size view's verdicts: naive at its N against each tiled (implementation, block size) row, keyed by
    the block size (a winner only where the 95% intervals separate)."""
    naive = [e for _, r in reference.iterrows() if r["impl"] == NAIVE and (e := row_estimate(r)) is not None]
    if not naive:
        return []
    out = []
    for _, r in tiled.iterrows():
        if (e := row_estimate(r)) is not None:
            out.append((int(r["block_q"]), compare(naive[0], e, (short(NAIVE), short(str(r["impl"]))))))
    return out


def tiles_md(verdicts: list[tuple[int, Verdict]]) -> str:
    """The Block size view's verdicts, one bullet per (tile size, kernel): the verdict's own sentence (a winner with
    its interval only where the intervals separate, else too close to call and what would settle it)."""
    return "\n".join(f"- **{b} × {b} tiles**: {sentence(v)}" for b, v in verdicts)


def slower_by(v: Verdict) -> str:
    """How much slower the slower side is, with the interval of that factor (for a separated verdict).

    Example:
        >>> slower_by(compare([2.0, 2.02, 1.98, 2.01, 1.99, 2.0], [1.0, 1.01, 0.99, 1.02, 0.98, 1.0]))
        '2.00x slower, 1.94-2.06x'
    """
    speedup, low, high = v.speedup
    return f"{speedup:.2f}x slower, {low:.2f}-{high:.2f}x"


def verdicts_md(df: pd.DataFrame) -> str:
    """Each N's verdict, naive against each tiled kernel, as markdown bullets (empty where nothing can be compared)."""
    return "\n".join(f"- **N = {n}**: {sentence(v)}" for n, _, v in speed_verdicts(df))


def slower_cases(df: pd.DataFrame) -> list[tuple[int, str, Verdict]]:
    """The (N, tiled implementation, verdict) where the tiled kernel is slower than naive beyond the noise."""
    return [(n, impl, v) for n, impl, v in speed_verdicts(df) if v.faster == short(NAIVE)]


def plural(n: int, word: str) -> str:
    """A count with its noun, singular for one.

    Example:
        >>> plural(1, "measurement"), plural(3, "repeat")
        ('1 measurement', '3 repeats')
    """
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def repeats_said(s: BenchSettings) -> str:
    """How many timed calls each measurement takes, as the Run buttons announce it.

    Example:
        >>> from flashviz.views.bench.settings import BenchSettings
        >>> repeats_said(BenchSettings(reps=3, sure=False)), repeats_said(BenchSettings(reps=3, sure=True))
        ('3 repeats', 'at least 6 repeats, until its median is known to ±5%')
    """
    if not s.sure:
        return plural(s.reps, "repeat")
    return f"at least {plural(max(s.reps, min_repeats()), 'repeat')}, until its median is known to ±{TARGET_REL_CI:.0%}"


def causal_verdicts(df: pd.DataFrame) -> list[tuple[str, Verdict]]:
    """Per implementation timed both ways: the verdict of its causal time against its unmasked one (a: causal, b: no
    mask; a winner only where the two medians' 95% intervals separate)."""
    out = []
    for impl, rows in df.groupby("impl", sort=True):  # the table's order
        by = {bool(r["causal"]): row_estimate(r) for _, r in rows.iterrows()}
        if by.get(True) is not None and by.get(False) is not None:
            name = short(str(impl))
            out.append((str(impl), compare(by[True], by[False], (f"{name} causal", f"{name} without the mask"))))
    return out


def causal_ratios(df: pd.DataFrame) -> pd.DataFrame:
    """Per implementation: time without and with the causal mask, and causal / no mask as a verdict cell (the ratio
    with its interval where the intervals separate, else "too close to call": flashviz.measure.verdict.cell)."""
    ok = df[df["status"].astype(str) == OK]
    table = ok.pivot_table(index="impl", columns="causal", values="time_s", aggfunc="first")
    table = table.reindex(columns=[False, True]).dropna()
    cells = {impl: cell(v) for impl, v in causal_verdicts(df)}
    return pd.DataFrame({"implementation": table.index, "no mask (ms)": table[False].values * 1e3,
                         "causal (ms)": table[True].values * 1e3,
                         "causal / no mask": [cells.get(impl, "no interval") for impl in table.index]})


def causal_md(df: pd.DataFrame, computed: int, total: int) -> str:
    """Each implementation's causal verdict as markdown bullets, and what the tiles skipped predict for the tiled
    kernels (computed of total tiles): a verdict only where the intervals separate.

    Example:
        >>> rows = [dict(impl="flash", causal=c, time_s=t, time_lo_s=t * 0.99, time_hi_s=t * 1.01, repeats=20,
        ...              status="ok") for c, t in ((False, 2e-3), (True, 1.2e-3))]
        >>> text = causal_md(pd.DataFrame(rows), 36, 64)
        >>> text[:36], text[-32:]
        ('- FA1 causal is 1.67x faster than FA', 'ld take 0.56x its unmasked time.')
    """
    lines = []
    for impl, v in causal_verdicts(df):
        text = f"- {sentence(v)}"
        if impl in TILED_IMPLS and total:
            text += (f" In proportion to the tiles it computes ({computed} of {total}) it would take "
                     f"{computed / total:.2f}x its unmasked time.")
        lines.append(text)
    return "\n".join(lines)
