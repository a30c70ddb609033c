"""The numerics lab's sentences: each one a pure function of an experiment's numbers (no torch, no plotly), so the
view can say what a figure shows and a test can check every number it quotes.

The numbers come from flashviz.measure.numerics_lab and numerics_ideas (frozen dataclasses of floats, ints and
tuples); their types are imported for type checking only. Numbers are quoted with fmt_num: three significant digits
from 1 to 1e4, else two in e-notation ("5.1e-2").
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from flashviz.vocab import PRECISION_LABELS

if TYPE_CHECKING:
    from flashviz.measure.numerics_ideas import CausalAlignment, Fp8Table, LazyRescale
    from flashviz.measure.numerics_lab import FlashVsSdpa, KernelErrors, TileSpread


def fmt_num(x: float) -> str:
    """A number as the sentences quote it.

    Example:
        >>> fmt_num(0.051234), fmt_num(148.197), fmt_num(3.4e38), fmt_num(0.0), fmt_num(0.00996), fmt_num(float("nan"))
        ('5.1e-2', '148', '3.4e38', '0', '1e-2', 'n/a')
    """
    if math.isnan(x):
        return "n/a"
    if x == 0:
        return "0"
    if 1 <= abs(x) < 1e4:
        return f"{x:.3g}"
    e = math.floor(math.log10(abs(x)))
    m = round(x / 10 ** e, 1)
    if abs(m) >= 10:  # 9.96e-3 rounds to 10.0e-3
        m, e = m / 10, e + 1
    return f"{m:g}e{e}"


def _label(precision: str) -> str:
    return PRECISION_LABELS.get(precision, precision)


def _names(labels: list[str]) -> str:
    return labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} and {labels[-1]}"


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
    verdict = (f"{_names(failing)} {'fails' if len(failing) == 1 else 'fail'} it." if failing
               else "every kernel passes.")
    text = (f"In {_label(r.precision)} (eps = {fmt_num(r.eps)}), max |error| against float64: {errors}. flash-attn's "
            f"rule, at most 2 x the plain run's ({r.rows[0].label}) {fmt_num(r.plain_max_abs)} + "
            f"{fmt_num(r.fwd_atol)} = {fmt_num(bound)}: {verdict}")
    return " ".join([text, *(f"({note}.)" for note in r.notes)])


def flash_sdpa_sentence(r: FlashVsSdpa) -> str:
    """FA2 against SDPA in one dtype: their difference beside each one's error against float64.

    Example:
        >>> from textwrap import fill
        >>> from types import SimpleNamespace as NS
        >>> r = NS(precision="bfloat16", eps=2 ** -7, max_diff=2 ** -7, flash_error=0.0078, sdpa_error=0.0079,
        ...        differing=0.25)
        >>> print(fill(flash_sdpa_sentence(r), 102))
        FA2 and SDPA differ by up to 7.8e-3 in bf16 (1 eps; 25% of the outputs differ at all), yet each is
        within 7.8e-3 (FA2) and 7.9e-3 (SDPA) of float64: neither is wrong, they round in different orders.
    """
    return (f"FA2 and SDPA differ by up to {fmt_num(r.max_diff)} in {_label(r.precision)} "
            f"({r.max_diff / r.eps:.2g} eps; {r.differing:.0%} of the outputs differ at all), yet each is within "
            f"{fmt_num(r.flash_error)} (FA2) and {fmt_num(r.sdpa_error)} (SDPA) of float64: neither is wrong, they "
            "round in different orders.")


def tile_spread_sentence(r: TileSpread) -> str:
    """How much the tile size changes FA2's output, against its error.

    Example:
        >>> from textwrap import fill
        >>> from types import SimpleNamespace as NS
        >>> r = NS(precision="bfloat16", blocks=(16, 128), errors=(0.0078, 0.0079), max_spread=0.00098, eps=2 ** -7)
        >>> print(fill(tile_spread_sentence(r), 102))
        Tiles of 16 to 128 change FA2's bf16 output by up to 9.8e-4 (0.13 eps), while every tile size stays
        within 7.9e-3 of float64: the sums are taken in another order, not more wrongly.
    """
    return (f"Tiles of {min(r.blocks)} to {max(r.blocks)} change FA2's {_label(r.precision)} output by up to "
            f"{fmt_num(r.max_spread)} ({r.max_spread / r.eps:.2g} eps), while every tile size stays within "
            f"{fmt_num(max(r.errors))} of float64: the sums are taken in another order, not more wrongly.")


def rescale_sentence(r: LazyRescale) -> str:
    """FA4's lazy rescale: how many rescales it saves, what it costs the output, how large the intermediates get.

    Example:
        >>> from textwrap import fill
        >>> from types import SimpleNamespace as NS
        >>> r = NS(classic=NS(total=98), lazy=NS(tau=8.0, total=3, max_p=148.2, max_l=168.6), max_out_diff=2.4e-4,
        ...        max_acc=680.0, acc_dtype="float32", acc_max=3.4e38, p_dtype="bfloat16", p_max=3.39e38)
        >>> print(fill(rescale_sentence(r), 102))
        With tau = 8, FA2 rescales 3 times instead of 98 (33x fewer; batch 0, head 0) and its output moves by
        at most 2.4e-4. The stale max lets P~ reach 148 (at most 2^8 = 256) and l 169 (the accumulator at most
        680), far below float32's 3.4e38; P~ is rounded to bfloat16, whose largest value is 3.4e38.
    """
    lazy, tau = r.lazy, f"{r.lazy.tau:g}"
    if lazy.total == 0:
        saved = f"never rescales ({r.classic.total} times with tau = 0; batch 0, head 0)"
    else:
        ratio = r.classic.total / lazy.total
        saved = (f"rescales {lazy.total} times instead of {r.classic.total} ({ratio:.2g}x fewer; batch 0, head 0)")
    text = (f"With tau = {tau}, FA2 {saved} and its output moves by at most {fmt_num(r.max_out_diff)}. The stale max "
            f"lets P~ reach {fmt_num(lazy.max_p)} (at most 2^{tau} = {fmt_num(2 ** lazy.tau)}) and l "
            f"{fmt_num(lazy.max_l)} (the accumulator at most {fmt_num(r.max_acc)}), far below {r.acc_dtype}'s "
            f"{fmt_num(r.acc_max)}")
    if r.p_dtype != r.acc_dtype:
        text += f"; P~ is rounded to {r.p_dtype}, whose largest value is {fmt_num(r.p_max)}"
    return text + "."


def fp8_sentence(r: Fp8Table) -> str:
    """FA3's incoherent processing: the FP8 RMSE with and without Hadamard, on outlier and on plain inputs.

    Example:
        >>> from textwrap import fill
        >>> from types import SimpleNamespace as NS
        >>> cells = {(o, h): NS(rmse=e, rmse_per_seed=(e,)) for (o, h), e in {(False, False): 5.3e-3,
        ...          (False, True): 5.3e-3, (True, False): 6.5e-2, (True, True): 3.3e-2}.items()}
        >>> print(fill(fp8_sentence(NS(fmt="e4m3", seeds=(0,), note="", cell=lambda o, h: cells[(o, h)])), 102))
        On inputs with outlier features, the Hadamard rotation lowers FA3's FP8 (e4m3) RMSE from 6.5e-2 to
        3.3e-2 (2x lower, on each of 1 seeds); on plain inputs it changes little: 5.3e-3 to 5.3e-3.
    """
    off, on = r.cell(True, False), r.cell(True, True)
    plain_off, plain_on = r.cell(False, False), r.cell(False, True)
    every = all(b < a for a, b in zip(off.rmse_per_seed, on.rmse_per_seed, strict=True))
    where = f"on each of {len(r.seeds)} seeds" if every else f"on average over {len(r.seeds)} seeds, not on each"
    verb = "lowers" if on.rmse < off.rmse else "does not lower"
    text = (f"On inputs with outlier features, the Hadamard rotation {verb} FA3's FP8 ({r.fmt}) RMSE from "
            f"{fmt_num(off.rmse)} to {fmt_num(on.rmse)} ({off.rmse / on.rmse:.2g}x lower, {where}); on plain inputs it "
            f"changes little: {fmt_num(plain_off.rmse)} to {fmt_num(plain_on.rmse)}.")
    return f"{text} ({r.note}.)" if r.note else text


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
        return (f"{head}, top-left (SDPA's is_causal) and bottom-right (flash-attn, flash_decode) are the same mask: "
                f"the outputs differ by {fmt_num(r.max_diff)}. Choose N_q != N_k to see them apart.")
    if r.offset > 0:
        text = (f"{head}, top-left (SDPA's is_causal) lets query i see keys 0..i and bottom-right (flash-attn, "
                f"flash_decode) keys 0..i+{r.offset}: every query sees {r.offset} keys more, and the outputs differ "
                f"by up to {fmt_num(r.max_diff)}.")
        return f"{text} flash_decode(causal=True) matches bottom-right to {fmt_num(r.decode_diff)}."
    blind = min(-r.offset, r.n_q)
    return (f"{head}, top-left (SDPA's is_causal) lets query i see keys 0..i and bottom-right (flash-attn) keys "
            f"0..i-{-r.offset}: the first {blind} queries see no key at all (output 0), the others up to "
            f"{max(r.keys_differ)} keys fewer, and the outputs differ by up to {fmt_num(r.max_diff)}.")
