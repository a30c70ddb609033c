"""The numerics lab's sentences: each one a pure function of an experiment's numbers (no torch, no plotly), so the
view can say what a figure shows and a test can check every number it quotes.

The numbers come from flashviz.views.numerics.data (frozen dataclasses of floats, ints and
tuples); their types are imported for type checking only. Numbers are quoted with fmt_num: three significant digits
from 1 to 1e4, else two in e-notation ("5.1e-2").
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from flashviz.units import and_list
from flashviz.vocab import FLASH2, FP8, FP8_FORMATS, PRECISION_LABELS, SDPA

SIMILAR = 1.5  # tile sizes whose errors lie within this factor of each other err "not more wrongly" than another
LITTLE = 0.1  # a relative change of the FP8 RMSE below this "changes little"
FAR_BELOW = 1e-6  # a value under this fraction of a dtype's largest number is "far below" it
MATCHES = 1e-4  # flash_decode "matches" bottom-right when it differs by less (both in fp32, so only rounding)

if TYPE_CHECKING:
    from flashviz.views.numerics.data import (
        CausalAlignment,
        FlashVsSdpa,
        Fp8Table,
        KernelErrors,
        LazyRescale,
        TileSpread,
        TwoErrors,
    )


def fmt_num(x: float) -> str:
    """A number as the sentences quote it.

    Example:
        >>> fmt_num(0.051234), fmt_num(148.197), fmt_num(3.4e38), fmt_num(0.0), fmt_num(0.00996), fmt_num(float("nan"))
        ('5.1e-2', '148', '3.4e38', '0', '1e-2', 'n/a')
        >>> fmt_num(1409.7), fmt_num(2.5)
        ('1410', '2.5')
    """
    if math.isnan(x):
        return "n/a"
    if x == 0:
        return "0"
    if 1 <= abs(x) < 1e4:
        return f"{float(f'{x:.3g}'):g}"  # 1409.7 -> '1410', not '1.41e+03'
    e = math.floor(math.log10(abs(x)))
    m = round(x / 10 ** e, 1)
    if abs(m) >= 10:  # 9.96e-3 rounds to 10.0e-3
        m, e = m / 10, e + 1
    return f"{m:g}e{e}"


def _label(precision: str) -> str:
    return PRECISION_LABELS.get(precision, precision)


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _seeds(n: int) -> str:
    return "the one seed" if n == 1 else f"each of {n} seeds"


def _outputs(precision: str) -> str:
    """Where an output lives: in the dtype, or in fp32 on FP8-rounded inputs (the lab runs FP8 inputs in fp32)."""
    if precision in FP8_FORMATS:
        return f"on {_label(precision)} inputs (computed in fp32)"
    return f"in {_label(precision)}"


def _eps(x: float) -> str:
    """A number of machine epsilons: two significant digits ("0.12", "72", "5.7e4")."""
    return f"{float(f'{x:.2g}'):g}" if 1e-3 <= x < 1e4 else fmt_num(x)


def kernel_errors_sentence(r: KernelErrors) -> str:
    """Every kernel's max |error| against float64 and flash-attn's verdict (<= 2 x plain + fwd_atol).

    Example:
        >>> from textwrap import fill
        >>> from types import SimpleNamespace as NS
        >>> rows = [NS(label="naive", stats=NS(max_abs=0.05), passes=True), NS(label="FA2", stats=NS(max_abs=0.2),
        ...         passes=False)]
        >>> r = NS(precision="bfloat16", eps=2 ** -7, plain_max_abs=0.05, fwd_atol=0.0156, rows=rows, notes=())
        >>> print(fill(kernel_errors_sentence(r), 102))
        In bf16 (eps = 7.8e-3), max |error| against float64: naive 5e-2, FA2 2e-1. flash-attn's rule, at most
        2 x the plain run's (naive) 5e-2 + 1.6e-2 = 1.2e-1: FA2 fails it.
    """
    errors = ", ".join(f"{row.label} {fmt_num(row.stats.max_abs)}" for row in r.rows)
    bound = 2 * r.plain_max_abs + r.fwd_atol
    failing = [row.label for row in r.rows if not row.passes]
    verdict = (f"{and_list(failing)} {'fails' if len(failing) == 1 else 'fail'} it." if failing
               else "every kernel passes.")
    text = (f"In {_label(r.precision)} (eps = {fmt_num(r.eps)}), max |error| against float64: {errors}. flash-attn's "
            f"rule, at most 2 x the plain run's ({r.rows[0].label}) {fmt_num(r.plain_max_abs)} + "
            f"{fmt_num(r.fwd_atol)} = {fmt_num(bound)}: {verdict}")
    if r.precision in FP8_FORMATS:
        others = and_list([row.label for row in r.rows if row.kernel != FP8])
        text += (f" {others} run in fp32 on Q, K, V rounded to {_label(r.precision)} with one scale per head; the "
                 "FP8 kernel quantises per block itself.")
    return " ".join([text, *(f"({note}.)" for note in r.notes)])


def two_errors_sentence(r: TwoErrors) -> str:
    """flash-attn's comparison per kernel: its error against the reference in the wider dtype, beside the reference's
    own error in the kernel's dtype, their ratio, and which kernels stay within 2x.

    Example:
        >>> from textwrap import fill
        >>> from types import SimpleNamespace as NS
        >>> rows = [NS(path="FA2", error=7.8e-3, sdpa_error=7.8e-3, ratio=1.0, passes=True),
        ...         NS(path="decode", error=1.5e-2, sdpa_error=2e-3, ratio=7.5, passes=False)]
        >>> print(fill(two_errors_sentence(NS(precision="bfloat16", dtype="bfloat16", wide="float32", rows=rows)), 100))
        flash-attn's test, kernel by kernel: (kernel in bf16 − SDPA's formula in fp32) against (SDPA in bf16
        − SDPA's formula in fp32): FA2 7.8e-3 vs 7.8e-3 (1x), decode 1.5e-2 vs 2e-3 (7.5x). decode is
        outside 2x: it rounds more than the reference does.
    """
    low, wide = _label(r.dtype), _label(r.wide)
    pairs = ", ".join(f"{row.path} {fmt_num(row.error)} vs {fmt_num(row.sdpa_error)} ({_eps(row.ratio)}x)"
                      for row in r.rows)
    failing = [row.path for row in r.rows if not row.passes]
    verdict = (f"{and_list(failing)} {'is' if len(failing) == 1 else 'are'} outside 2x: "
               f"{'it rounds' if len(failing) == 1 else 'they round'} more than the reference does." if failing
               else "Every kernel is within 2x of the reference's own error.")
    text = (f"flash-attn's test, kernel by kernel: (kernel in {low} − SDPA's formula in {wide}) against (SDPA in "
            f"{low} − SDPA's formula in {wide}): {pairs}. {verdict}")
    if r.dtype not in ("bfloat16", "float16"):
        text += (f" flash-attn applies this rule to 16-bit inputs; in {low} both errors are a few units of its "
                 "last bit, and a ratio says little.")
    return text


def flash_sdpa_sentence(r: FlashVsSdpa, errors: KernelErrors | None = None) -> str:
    """FA2 against SDPA in one dtype: their difference beside each one's error against float64, and, given the
    same inputs' KernelErrors, flash-attn's verdict on both (only then does the sentence say whether either is wrong).

    Example:
        >>> from textwrap import fill
        >>> from types import SimpleNamespace as NS
        >>> r = NS(precision="bfloat16", eps=2 ** -7, max_diff=2 ** -7, flash_error=0.0078, sdpa_error=0.0079,
        ...        differing=0.25)
        >>> rows = [NS(kernel=k, label=k.upper(), passes=True) for k in ("flash2", "sdpa")]
        >>> print(fill(flash_sdpa_sentence(r, NS(rows=rows, plain_max_abs=0.05, fwd_atol=0.0156)), 102))
        FA2 and SDPA differ by up to 7.8e-3 in bf16 (1 eps; 25% of the outputs differ at all), yet each is
        within 7.8e-3 (FA2) and 7.9e-3 (SDPA) of float64 and passes flash-attn's rule (at most 1.2e-1):
        neither is wrong, they round in different orders.
    """
    if r.max_diff == 0:
        head = f"FA2 and SDPA give the same output {_outputs(r.precision)}, bit for bit, here; each is"
    else:
        fp8 = r.precision in FP8_FORMATS
        where = f"on {_label(r.precision)} inputs" if fp8 else f"in {_label(r.precision)}"
        detail = "computed in fp32" if fp8 else f"{_eps(r.max_diff / r.eps)} eps"
        head = (f"FA2 and SDPA differ by up to {fmt_num(r.max_diff)} {where} ({detail}; {r.differing:.0%} of the "
                "outputs differ at all), yet each is")
    within = f"{head} within {fmt_num(r.flash_error)} (FA2) and {fmt_num(r.sdpa_error)} (SDPA) of float64"
    if errors is None:
        return f"{within}: they round in different orders."
    bound = fmt_num(2 * errors.plain_max_abs + errors.fwd_atol)
    passes = {row.kernel: row.passes for row in errors.rows}
    failing = [label for kernel, label in ((FLASH2, "FA2"), (SDPA, "SDPA")) if not passes[kernel]]
    if not failing:
        return (f"{within} and passes flash-attn's rule (at most {bound}): neither is wrong, they round in different "
                "orders.")
    return (f"{within}. But {and_list(failing)} {'fails' if len(failing) == 1 else 'fail'} flash-attn's rule (at most "
            f"{bound}): {'it errs' if len(failing) == 1 else 'they err'} more than plain PyTorch in this dtype, so the "
            "difference is more than the order of rounding.")


def tile_spread_sentence(r: TileSpread, errors: KernelErrors | None = None) -> str:
    """How much the tile size changes FA2's output, against its error (and, given the same inputs' KernelErrors,
    against flash-attn's bound).

    Example:
        >>> from textwrap import fill
        >>> from types import SimpleNamespace as NS
        >>> r = NS(precision="bfloat16", blocks=(16, 128), errors=(0.0078, 0.0079), max_spread=0.00098, eps=2 ** -7)
        >>> print(fill(tile_spread_sentence(r), 102))
        Tiles of 16 to 128 change FA2's output in bf16 by up to 9.8e-4 (0.13 eps), while every tile size stays
        within 7.9e-3 of float64 (errors 7.8e-3 to 7.9e-3): the sums are taken in another order, not more
        wrongly.
    """
    lo, hi = min(r.errors), max(r.errors)
    sizes = f"Tiles of {min(r.blocks)} to {max(r.blocks)}" if len(r.blocks) > 1 else f"Only tiles of {r.blocks[0]}"
    if r.max_spread == 0:
        return (f"{sizes} give FA2's output {_outputs(r.precision)} bit for bit the same here, within "
                f"{fmt_num(hi)} of float64.")
    ulps = "" if r.precision in FP8_FORMATS else f" ({_eps(r.max_spread / r.eps)} eps)"
    text = (f"{sizes} change FA2's output {_outputs(r.precision)} by up to {fmt_num(r.max_spread)}{ulps}, while every "
            f"tile size stays within {fmt_num(hi)} of float64 (errors {fmt_num(lo)} to {fmt_num(hi)})")
    bound = math.inf if errors is None else 2 * errors.plain_max_abs + errors.fwd_atol
    over = [b for b, e in zip(r.blocks, r.errors, strict=True) if e > bound]
    if over:
        which = ("every tile size errs" if len(over) == len(r.blocks)
                 else f"tiles of {and_list([str(b) for b in over])} err")
        text += f": {which} beyond flash-attn's bound of {fmt_num(bound)}, whatever the order of the sums."
    elif hi <= SIMILAR * lo:
        text += ": the sums are taken in another order, not more wrongly."
    else:
        worst, best = (r.blocks[r.errors.index(e)] for e in (hi, lo))
        text += (f": the error itself depends on the tile size, {fmt_num(hi / lo)}x larger with tiles of {worst} "
                 f"than of {best}.")
    if r.max_spread > hi:
        text += " Two outputs can differ by more than either one's error: they err in different directions."
    return text


def rescale_sentence(r: LazyRescale) -> str:
    """FA4's lazy rescale: how many rescales it saves, what it costs the output, how large the intermediates get.

    Example:
        >>> from textwrap import fill
        >>> from types import SimpleNamespace as NS
        >>> r = NS(classic=NS(total=98), lazy=NS(tau=8.0, total=3, max_p=148.2, max_l=168.6), max_out_diff=2.4e-4,
        ...        max_acc=680.0, acc_dtype="float32", acc_max=3.4e38, p_dtype="float32", p_max=3.4e38,
        ...        out_dtype="bfloat16", out_eps=2 ** -7)
        >>> print(fill(rescale_sentence(r), 102))
        With tau = 8, FA2 rescales 3 times instead of 98 (33x fewer; batch 0, head 0) and its output moves by
        at most 2.4e-4 (0.031 eps of bfloat16). The stale max lets P~ reach 148 (at most 2^8 = 256) and l 169
        (the accumulator at most 680), far below float32's 3.4e38.
    """
    lazy, tau = r.lazy, f"{r.lazy.tau:g}"
    if lazy.total == 0:
        saved = f"never rescales ({_times(r.classic.total)} with tau = 0; batch 0, head 0)"
    else:
        ratio = r.classic.total / lazy.total
        saved = f"rescales {_times(lazy.total)} instead of {r.classic.total} ({ratio:.2g}x fewer; batch 0, head 0)"
    moved = ("is bit for bit the same" if r.max_out_diff == 0 else
             f"moves by at most {fmt_num(r.max_out_diff)} ({_eps(r.max_out_diff / r.out_eps)} eps of {r.out_dtype})")
    big = max(lazy.max_l, r.max_acc)
    room = ("far below" if big <= FAR_BELOW * r.acc_max else "below" if big <= r.acc_max else "above")
    text = (f"With tau = {tau}, FA2 {saved} and its output {moved}. The stale max lets P~ reach {fmt_num(lazy.max_p)} "
            f"(at most 2^{tau} = {fmt_num(2 ** lazy.tau)}) and l {fmt_num(lazy.max_l)} (the accumulator at most "
            f"{fmt_num(r.max_acc)}), {room} {r.acc_dtype}'s {fmt_num(r.acc_max)}")
    if r.p_dtype != r.acc_dtype:
        text += f"; P~ is rounded to {r.p_dtype}, whose largest value is {fmt_num(r.p_max)}"
        if lazy.max_p > r.p_max:
            text += ": P~ exceeds it, so its rounding saturates there"
    return text + "."


def _change(before: float, after: float) -> str:
    """How the FP8 RMSE changes when Hadamard is turned on, in words and numbers."""
    if abs(after - before) <= LITTLE * before:
        return f"changes little: {fmt_num(before)} to {fmt_num(after)}"
    if after < before:
        return f"lowers it too: {fmt_num(before)} to {fmt_num(after)} ({before / after:.2g}x lower)"
    return f"raises it: {fmt_num(before)} to {fmt_num(after)} ({after / before:.2g}x higher)"


def fp8_sentence(r: Fp8Table) -> str:
    """FA3's incoherent processing: the FP8 RMSE with and without Hadamard, on outlier and on plain inputs.

    Example:
        >>> from textwrap import fill
        >>> from types import SimpleNamespace as NS
        >>> cells = {(o, h): NS(rmse=e, rmse_per_seed=(e,)) for (o, h), e in {(False, False): 5.3e-3,
        ...          (False, True): 5.3e-3, (True, False): 6.5e-2, (True, True): 3.3e-2}.items()}
        >>> print(fill(fp8_sentence(NS(fmt="e4m3", seeds=(0,), note="", cell=lambda o, h: cells[(o, h)])), 102))
        On inputs with outlier features, the Hadamard rotation lowers FA3's FP8 (e4m3) RMSE from 6.5e-2 to
        3.3e-2 (2x lower, on the one seed); on plain inputs it changes little: 5.3e-3 to 5.3e-3.
    """
    off, on = r.cell(True, False), r.cell(True, True)
    plain_off, plain_on = r.cell(False, False), r.cell(False, True)
    pairs = list(zip(off.rmse_per_seed, on.rmse_per_seed, strict=True))
    if on.rmse < off.rmse:
        every = all(b < a for a, b in pairs)
        where = f"on {_seeds(len(r.seeds))}" if every else f"on average over {len(r.seeds)} seeds, not on each"
        effect = (f"lowers FA3's FP8 ({r.fmt}) RMSE from {fmt_num(off.rmse)} to {fmt_num(on.rmse)} "
                  f"({off.rmse / on.rmse:.2g}x lower, {where})")
    else:
        effect = (f"does not lower FA3's FP8 ({r.fmt}) RMSE: {fmt_num(off.rmse)} without it, {fmt_num(on.rmse)} "
                  "with it")
    text = (f"On inputs with outlier features, the Hadamard rotation {effect}; on plain inputs it "
            f"{_change(plain_off.rmse, plain_on.rmse)}.")
    return f"{text} ({r.note}.)" if r.note else text


def fp8_table_markdown(r: Fp8Table) -> str:
    """FA3's FP8 RMSE as a 2 x 2 markdown table: plain / outlier inputs x Hadamard off / on.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> cells = {(False, False): 5.3e-3, (False, True): 5.3e-3, (True, False): 6.5e-2, (True, True): 3.3e-2}
        >>> print(fp8_table_markdown(NS(fmt="e4m3", seeds=(0, 1), cell=lambda o, h: NS(rmse=cells[(o, h)]))))
        | RMSE, FP8 e4m3, mean of 2 seeds | Hadamard off | Hadamard on |
        |---|---|---|
        | plain inputs | 5.3e-3 | 5.3e-3 |
        | outlier features | 6.5e-2 | 3.3e-2 |
    """
    rows = [f"| {kind} | {fmt_num(r.cell(o, False).rmse)} | {fmt_num(r.cell(o, True).rmse)} |"
            for o, kind in ((False, "plain inputs"), (True, "outlier features"))]
    return "\n".join([f"| RMSE, FP8 {r.fmt}, mean of {len(r.seeds)} seeds | Hadamard off | Hadamard on |",
                      "|---|---|---|", *rows])


def causal_sentence(r: CausalAlignment) -> str:
    """Top-left against bottom-right causal masks: which keys each query sees, and what it does to the output.

    Example:
        >>> from textwrap import fill
        >>> from types import SimpleNamespace as NS
        >>> print(fill(causal_sentence(NS(n_q=128, n_k=256, offset=128, max_diff=4.14, decode_diff=9.7e-6)), 102))
        With N_q = 128 queries and N_k = 256 keys, top-left (SDPA's is_causal) lets query i see keys 0..i and
        bottom-right (flash-attn, flash_decode) keys 0..i+128: every query sees 128 keys more, and the outputs
        differ by up to 4.14. flash_decode(causal=True) matches bottom-right to 9.7e-6.
    """
    head = f"With N_q = {r.n_q} queries and N_k = {r.n_k} keys"
    if r.offset == 0:
        same = "are identical" if r.max_diff == 0 else f"differ by {fmt_num(r.max_diff)}"
        return (f"{head}, top-left (SDPA's is_causal) and bottom-right (flash-attn, flash_decode) are the same mask: "
                f"the outputs {same}. Choose N_q != N_k to see them apart.")
    if r.offset > 0:
        text = (f"{head}, top-left (SDPA's is_causal) lets query i see keys 0..i and bottom-right (flash-attn, "
                f"flash_decode) keys 0..i+{r.offset}: every query sees {r.offset} keys more, and the outputs differ "
                f"by up to {fmt_num(r.max_diff)}.")
        verb = "matches bottom-right to" if r.decode_diff <= MATCHES else "differs from bottom-right by"
        return f"{text} flash_decode(causal=True) {verb} {fmt_num(r.decode_diff)}."
    blind = min(-r.offset, r.n_q)
    text = (f"{head}, top-left (SDPA's is_causal) lets query i see keys 0..min(i, {r.n_k - 1}) and bottom-right "
            f"(flash-attn) keys 0..i-{-r.offset}: ")
    if blind == r.n_q:
        text += "no query sees any key bottom-right (every output 0)"
    else:
        fewer = max(r.keys_differ[blind:])
        text += (f"the first {blind} queries see no key at all (output 0), the others up to {fewer} keys fewer")
    return f"{text}, and the outputs differ by up to {fmt_num(r.max_diff)}."
