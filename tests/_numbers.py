"""Reading the numbers a displayed sentence states, so that a test checks the value behind a sentence and not its
wording: `stated(text, label)` is the number written right after `label` (a regex naming the quantity), and
`shows(written, value)` says whether that written number is `value` rounded to the digits written.

Example:
    >>> stated("FA1 took 0.25 ms per computed tile", r"FA1 took")
    '0.25'
    >>> shows("0.25", 0.004 / 16 * 1e3), shows("0.25", 0.26)
    (True, False)
    >>> counted("the best of 5 calls, at 2 threads", "threads?")
    '2'
    >>> says("took 18 ms, 0.90× that", 0.018e3, 18 / 20), says("took 18 ms", 19)
    (True, False)
    >>> equated("2W/(W+1) = 1.60 and (2W−1)/W = 1.75")
    ['1.60', '1.75']
    >>> numbers("4,000,000 elements, 1.9e-4 at W = 1 (1.26×), 90%")
    ['4,000,000', '1.9e-4', '1', '1.26', '90']
"""

from __future__ import annotations

import re

NUM = r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?(?![\d])"  # 148, 2.5, 4,000,000, 5.1e-2, 3.4e38


def numbers(text: str) -> list[str]:
    """Every number written in text, as written, in order."""
    return [m.group(0) for m in re.finditer(NUM, text)]


def value(written: str) -> float:
    return float(written.replace(",", ""))


def shows(written: str, want: float, rel: float = 0.0) -> bool:
    """Whether `written` is `want` rounded to the digits written (half a unit of its last digit either side), or
    within `rel` of it where the sentence rounds to significant digits that the written text does not show."""
    mantissa, _, exponent = written.replace(",", "").partition("e")
    decimals = len(mantissa.partition(".")[2])
    half = 0.5 * 10.0 ** (-decimals + (int(exponent) if exponent else 0))
    return abs(value(written) - want) <= half * (1 + 1e-9) + rel * abs(want) + 1e-300


def stated(text: str, label: str, k: int = 0) -> str:
    """The k-th number written after the first match of the regex `label` in text (the label's own digits aside)."""
    m = re.search(label, text)
    assert m, (label, text)
    found = numbers(text[m.end():])
    assert len(found) > k, (label, text)
    return found[k]


def counted(text: str, unit: str) -> str:
    """The number written right before the first match of the regex `unit` in text: counted(t, "threads?")."""
    m = re.search(rf"({NUM})\s*(?:{unit})", text)
    assert m, (unit, text)
    return m.group(1)


def equated(text: str) -> list[str]:
    """The numbers written right after an equals sign, in order: the values of the formulas a sentence spells out."""
    return [m.group(1) for m in re.finditer(rf"=\s*({NUM})", text)]


def says(text: str, *want: float, rel: float = 0.0) -> bool:
    """Whether the numbers written in text are `want`, in order, each rounded as written (None: any number)."""
    found = numbers(text)
    return len(found) == len(want) and all(w is None or shows(f, w, rel) for f, w in zip(found, want, strict=True))


def states(text: str, want: float, rel: float = 0.0) -> bool:
    """Whether some number written in text is `want` (as `shows` reads it)."""
    return any(shows(w, want, rel) for w in numbers(text))
