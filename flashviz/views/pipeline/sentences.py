"""The GPU pipeline view's sentences: each a pure function of the numbers it quotes (flashviz.views.pipeline.data's
plain data), no torch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from flashviz.views.pipeline.figures import DTYPE_SHORT

HIDDEN = 1.03  # a rounded error within 3% of the exact value's own rounding error: the polynomial does not show
PAPERS_HEADER = "| figure | paper | model | off | source |\n|---|---|---|---|---|"


def tile_md(bars: pd.DataFrame, *, head_dim: int) -> str:
    """What the per-tile bars say: the exponential's cycles as a share of the MMA's on each GPU, bf16 and fp8.

    Args:
        bars: data.tile_bars' rows.  head_dim: d.
    Returns:
        markdown.
    Example:
        >>> from flashviz.views.pipeline.data import tile_bars
        >>> tile_md(tile_bars(128), head_dim=128).split(". ")[0].split(": ")[1]
        '25% on an A100, 50% on an H100, 50% on an H200 and 100% on a B200'
    """
    b = bars.set_index(["GPU", "dtype", "unit"])["share"]
    gpus = list(dict.fromkeys(bars["GPU"]))

    def shares(dtype: str) -> list[str]:
        return [f"{b[(g, dtype, 'exp')]:.0%} on {'an' if g[0] in 'AH' else 'a'} {g}" for g in gpus
                if (g, dtype, "exp") in b.index]

    bf16 = shares("bfloat16")
    fp8 = shares("float8_e4m3fn")
    out = (f"Per 128 × 128 tile at d = {head_dim} in bf16, the exponential needs this share of the MMA’s cycles: "
           f"{', '.join(bf16[:-1])} and {bf16[-1]}. ")
    if fp8:
        out += (f"In FP8 the tensor cores run twice as fast and the exponential does not: {', '.join(fp8[:-1])} "
                f"and {fp8[-1]}, which is why FP8 on Hopper needed more overlap. ")
    return out + ("Where the share reaches 100%, a schedule that does not hide the exponential under the matmul "
                  "halves the tensor cores' work.")


def pipeline_md(preds: Mapping[str, object], *, gpu: str, dtype: str, head_dim: int, n: int, causal: bool) -> str:
    """The three schedules' predictions in one paragraph: TFLOP/s, share of the peak, the busiest unit.

    Args:
        preds: data.predictions' answer.  gpu, dtype, head_dim, n, causal: the settings, as the page shows them.
    Returns:
        markdown.
    Example:
        >>> from flashviz.views.pipeline.data import predictions
        >>> md = pipeline_md(predictions("H100", "bfloat16", 128, 1024, False, 0.01), gpu="H100",
        ...                  dtype="bfloat16", head_dim=128, n=1024, causal=False)
        >>> md.startswith("On an H100 at d = 128, N = 1,024, bf16, non-causal: **FA2**")
        True
    """
    parts = []
    for schedule, p in preds.items():
        if isinstance(p, str):
            parts.append(f"**{schedule}** does not run here ({p})")
            continue
        busiest = max(p.busy, key=p.busy.get)
        parts.append(f"**{schedule}** {p.tflops:,.0f} TFLOP/s ({p.utilisation:.0%} of the tensor peak; its busiest "
                     f"unit, {busiest}, works {p.busy[busiest]:.0%} of the CTA's time)")
    article = "an" if gpu[0] in "AH" else "a"
    mask = "causal" if causal else "non-causal"
    return (f"On {article} {gpu} at d = {head_dim}, N = {n:,}, {DTYPE_SHORT[dtype]}, {mask}: " + "; ".join(parts)
            + ". The same unit rates serve all three: only the schedule differs.")


def extras_md(p: object, skip: object) -> str:
    """FA4's two numerics tricks as the model runs them: the share of exp2 by polynomial, the lazy rescale's rate.

    Args:
        p: FA4's Prediction.  skip: data.SkipRate.
    Returns:
        markdown.
    Example:
        >>> from flashviz.model.pipeline import simulate
        >>> from flashviz.views.pipeline.data import SkipRate
        >>> s = SkipRate(8.0, 1024, 128, 128, 8192, 1801, 50, 50 / 8192, 1 - 50 / 8192)
        >>> extras_md(simulate("FA4", "B200", seq_len=1024, rescale_rate=s.rate), s).split(" of its")[0]
        'FA4 computes 32%'
    """
    return (f"FA4 computes {p.poly_share:.0%} of its exponentials by the cubic polynomial on the FP32 units (the share "
            f"that balances them against the MUFU); its correction warpgroup rescales O for {skip.rate:.2%} of the "
            f"rows at each tile: measured here with tau = {skip.tau:g} on seeded inputs with LLM-like outlier "
            f"channels ({skip.lazy:,} of {skip.cells:,} row updates, where the classic update's max grew "
            f"{skip.classic:,} times; N = {skip.n:,}, d = {skip.d}, tiles of {skip.block}).")


def papers_md(checks: pd.DataFrame) -> str:
    """The papers' figures beside the model's, one table row each, then why for each row flagged (> 25% off).

    Args:
        checks: data.paper_checks' rows.
    Returns:
        markdown: the table, then one bullet per flagged row.
    Example:
        >>> from flashviz.views.pipeline.data import paper_checks
        >>> md = papers_md(paper_checks(0.01))
        >>> md.splitlines()[6]
        '| B200 forward tile, mma cycles | 1,024 | 1,024 | +0% | FA4 paper and blog |'
    """
    lines = [PAPERS_HEADER]
    for r in checks.itertuples():
        fmt = "{:.2f}" if r.paper < 10 else "{:,.0f}"
        flag = " ⚠" if r.flagged else ""
        lines.append(f"| {r.figure} | {fmt.format(r.paper)} | {fmt.format(r.model)} | {r.off:+.0%}{flag} | "
                     f"{r.source} |")
    why = [f"- **{r.figure}**: the model is {r.off:+.0%} from the paper: {r.why}." for r in checks.itertuples()
           if r.flagged]
    return "\n".join(lines) + ("\n\n⚠ more than 25% off:\n\n" + "\n".join(why) if why else "")


def poly_md(errors: Sequence[object]) -> str:
    """The exp2 polynomial's error by degree, unrounded and after P's rounding, as a table.

    Args:
        errors: PolyError per degree (data.poly_errors).
    Returns:
        markdown: the table and what it says.
    Example:
        >>> from flashviz.core.exp2poly import error_table
        >>> poly_md(error_table((3,), n=1024)).splitlines()[2].startswith("| 3 | 8.")
        True
    """
    lines = ["| degree | FP32 error | after bf16 | after fp16 | bf16 values changed | fp16 values changed |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {e.degree} | {e.fp32:.1e} | {e.bfloat16:.1e} | {e.float16:.1e} | {e.bf16_changed:.1%} | "
              f"{e.fp16_changed:.1%} |" for e in errors]
    e0 = errors[0]

    def hidden(rounded: str, exact: str) -> str:  # the lowest degree whose error after rounding is the rounding's own
        degrees = [e.degree for e in errors if getattr(e, rounded) <= HIDDEN * getattr(e, exact)]
        return f"from degree {degrees[0]} on" if degrees else "at no degree shown"

    return ("\n".join(lines) + "\n\nLargest relative error against float64's exp2 on 65,536 scores in [−14, 0] "
            f"(fp16's normal range). Rounding exp2's exact value already costs up to {e0.bf16_exact:.1e} in bf16 and "
            f"{e0.fp16_exact:.1e} in fp16: the polynomial's own error hides under bf16's rounding "
            f"{hidden('bfloat16', 'bf16_exact')}, under fp16's {hidden('float16', 'fp16_exact')}.")


def waves_md(w: pd.DataFrame, *, gpu: str) -> str:
    """What the wave chart says at its smallest N, in numbers.

    Args:
        w: data.waves' rows.  gpu: the GPU's name.
    Returns:
        markdown.
    Example:
        >>> from flashviz.views.pipeline.data import waves
        >>> waves_md(waves("H100", 128), gpu="H100").split(";")[0]
        'At N = 512 and batch 1 a prefill launches 64 CTAs on the H100’s 132 SMs (48% of their time)'
    """
    n0 = int(w["N"].min())
    r = w[w["N"].eq(n0)].set_index("kind")
    return (f"At N = {n0:,} and batch 1 a prefill launches {r.at['prefill', 'programs']} CTAs on the {gpu}’s "
            f"{r.at['prefill', 'sms']} SMs ({r.at['prefill', 'efficiency']:.0%} of their time); one decode step "
            f"launches {r.at['decode', 'programs']} ({r.at['decode', 'efficiency']:.0%}), so Flash-Decoding splits "
            f"the keys: {r.at['decode, keys split', 'programs']} CTAs "
            f"({r.at['decode, keys split', 'efficiency']:.0%}). A launch takes ceil(CTAs / SMs) waves, the last one "
            f"part-empty: with few CTAs a fused kernel that cannot fill the "
            f"SMs loses to one that can, whatever its schedule.")
