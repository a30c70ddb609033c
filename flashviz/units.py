"""Quantities written for people, one convention for the whole project: sizes of memory and traffic in binary units
(KiB, MiB, GiB: what allocators and RAM are counted in), FLOPs with decimal prefixes (GFLOP, as peaks are quoted), and
a list of names as a sentence says it ("A, B and C").

Torch-free and dependency-free, so the figure builders, the tile map and the dashboard format the same number the same
way. Rates (GB/s, GFLOP/s) are quoted by the code that measures them, in decimal units, as bandwidths are.
"""

from __future__ import annotations

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30  # bytes per KiB, MiB, GiB
_BYTE_UNITS = (("GiB", GIB), ("MiB", MIB), ("KiB", KIB))
_FLOP_UNITS = (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3))


def format_bytes(nbytes: float) -> str:
    """A size in bytes, in the largest binary unit it reaches, to one decimal.

    Args:
        nbytes: bytes (any sign; a float is fine).
    Returns:
        e.g. '4.0 MiB'; below 1 KiB, whole bytes.

    Example:
        >>> format_bytes(4194304), format_bytes(67108864), format_bytes(1536), format_bytes(999)
        ('4.0 MiB', '64.0 MiB', '1.5 KiB', '999 B')
    """
    for unit, size in _BYTE_UNITS:
        if abs(nbytes) >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes:.0f} B"


def format_flops(flops: float) -> str:
    """A count of floating-point operations with a decimal prefix, to three significant digits.

    Args:
        flops: operations (not a rate).
    Returns:
        e.g. '1.5 GFLOP'; below a thousand, the plain count.

    Example:
        >>> format_flops(1.5e9), format_flops(2.147e9), format_flops(12)
        ('1.5 GFLOP', '2.15 GFLOP', '12 FLOP')
    """
    for unit, scale in _FLOP_UNITS:
        if abs(flops) >= scale:
            return f"{flops / scale:.3g} {unit}"
    return f"{flops:.0f} FLOP"


def and_list(names: list[str]) -> str:
    """Names as a sentence lists them.

    Example:
        >>> and_list(["FA1"]), and_list(["FA1", "FA2"]), and_list(["A100", "H100", "H200"])
        ('FA1', 'FA1 and FA2', 'A100, H100 and H200')
    """
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
