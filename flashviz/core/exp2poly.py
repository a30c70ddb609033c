"""exp2 without the exponential unit: FlashAttention-4's Cody-Waite range reduction and minimax polynomial, measured.

A B200 computes 16 exp2 per clock per SM on its multi-function unit (MUFU) but 128 FP32 FMAs: FA4 (Zadouri et al.,
2026, Section 3.1) computes a share of the softmax's exponentials on the FMA units instead. Write x = j + f with
j = floor(x) and f = x - j in [0, 1) (Cody and Waite's range reduction: exact in floating point, since j is an integer
and f is computed by one subtraction); then 2^x = 2^j 2^f, where 2^j only adds j to the exponent's bits and 2^f is a
polynomial p(f) of low degree, evaluated by Horner's rule in FP32. The polynomial is the minimax one: the degree-n
polynomial with the smallest largest relative error |p(f) / 2^f - 1| on [0, 1] among those with p(0) = 1, found by
Remez's exchange algorithm.

Its error matters only next to what P becomes: P is rounded to bf16 (or fp16) before P V. Degree 3's error is 8.6e-5
here (FA4's write-ups quote about 8.8e-5 for their coefficients), far below bf16's unit roundoff 2^-8 = 3.9e-3, so after
rounding to bf16 it changes P in about 1% of cases, by one unit in the last place; degrees 1 and 2 do worse.
`poly_error` measures both, against float64's exp2, on the scores' range of a softmax (x <= 0).

References:
    Cody and Waite, "Software Manual for the Elementary Functions", 1980 (range reduction).
    Remez, 1934; Trefethen, "Approximation Theory and Approximation Practice", 2013, Chapter 10 (the exchange).
    Zadouri, Hoehnerbach, Shah, Liu, Thakkar, Dao, "FlashAttention-4", 2026, Section 3.1 (exp2 by a degree-3
        polynomial on the FMA units for part of each tile).

Shapes: x (...,) any shape of float32 scores in log2 units (S x scale - m <= 0 in the online softmax).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

import torch

DEGREES = (1, 2, 3, 4, 5)  # the degrees the view and tests measure
ROUNDINGS = ("float32", "bfloat16", "float16")  # what P is rounded to before P V ("float32": not rounded)
X_MIN = -126.0  # below 2^-126 FP32's normal range ends: exp2 of a softmax score that low is ~0 in any P dtype


@cache
def minimax_coefficients(degree: int, iterations: int = 40) -> tuple[float, ...]:
    """The degree-n polynomial 1 + c1 f + ... + cn f^n with the least largest relative error to 2^f on [0, 1]:
    minimax under p(0) = 1, so that a row's max (x = 0) gets P = 1 exactly, as the MUFU gives it (Remez's exchange on
    an 8,193-point grid, in float64).

    Args:
        degree: n, 1 to 8.  iterations: exchanges at most (it converges in a handful).
    Returns:
        (1.0, c1, ..., cn).

    Example:
        >>> c = minimax_coefficients(3)
        >>> len(c), c[0], round(sum(c), 4)  # p(0) = 1; p(1) within the error of 2
        (4, 1.0, 1.9998)
    """
    if isinstance(degree, bool) or not isinstance(degree, int) or not 1 <= degree <= 8:
        raise ValueError(f"degree must be an int from 1 to 8, got {degree!r}.")
    grid = torch.linspace(0.0, 1.0, 8193, dtype=torch.float64)[1:]  # f in (0, 1]; p(0) = 1 is exact
    powers = torch.arange(1, degree + 1, dtype=torch.float64)
    k = torch.arange(degree + 1, dtype=torch.float64)
    ref = 0.5 - 0.5 * torch.cos(torch.pi * (k + 1) / (degree + 1))  # n + 1 points of (0, 1]
    coeffs = torch.zeros(degree, dtype=torch.float64)
    for _ in range(iterations):
        # 1 + sum c_k x_i^k - 2^x_i = (-1)^i E 2^x_i at the n + 1 reference points: n + 1 equations in c and E
        a = torch.cat([ref[:, None] ** powers, (-((-1.0) ** k) * torch.exp2(ref))[:, None]], dim=1)
        coeffs = torch.linalg.solve(a, torch.exp2(ref) - 1.0)[:-1]
        err = (1.0 + (grid[:, None] ** powers) @ coeffs) / torch.exp2(grid) - 1.0  # relative error on the grid
        sign = torch.sign(err)  # the new reference: the extremum of each run of one sign (n + 1 runs)
        runs = torch.cat([torch.tensor([0]), torch.nonzero(sign[1:] != sign[:-1]).flatten() + 1,
                          torch.tensor([len(grid)])])
        peaks = [int(s + torch.argmax(err[s:e].abs())) for s, e in itertools.pairwise(runs)]
        if len(peaks) != degree + 1 or torch.equal(grid[peaks], ref):
            break
        ref = grid[peaks]
    return (1.0, *(float(c) for c in coeffs))


def exp2_poly(x: torch.Tensor, degree: int = 3) -> torch.Tensor:
    """2^x by Cody-Waite range reduction and the minimax polynomial of a degree, in FP32, as FA4's FMA units do it.

    Args:
        x: (...,) scores in log2 units, any float dtype (computed in float32); values below X_MIN give 0.
        degree: the polynomial's degree (1 to 8).
    Returns:
        (...,) float32: 2^floor(x) p(x - floor(x)).

    Example:
        >>> y = exp2_poly(torch.tensor([0.0, -1.0, -2.5, -200.0]))
        >>> [round(v, 4) for v in y.tolist()]
        [1.0, 0.5, 0.1768, 0.0]
    """
    x = x.float()
    j = torch.floor(x)  # the exponent: an integer, exact
    f = x - j  # in [0, 1): exact (Sterbenz: x and j are close)
    p = torch.zeros_like(f)
    for c in reversed(minimax_coefficients(degree)):  # Horner: one FMA per degree
        p = p * f + c
    out = torch.ldexp(p, j.clamp(min=X_MIN).to(torch.int32))  # 2^j: adds j to p's exponent bits
    return torch.where(x < X_MIN, torch.zeros_like(out), out)


@dataclass(frozen=True)
class PolyError:
    """The largest relative error of exp2_poly against float64's exp2 at one degree, unrounded and rounded."""

    degree: int  # n
    fp32: float  # max |poly - exp2| / exp2 in FP32, before any rounding of P
    bfloat16: float  # the same after rounding both poly's value and nothing else to bf16 (against float64)
    float16: float  # the same after rounding to fp16
    bf16_exact: float  # exp2 itself rounded to bf16: the error bf16 has anyway
    fp16_exact: float  # exp2 itself rounded to fp16
    bf16_changed: float  # share of inputs where rounding poly's value to bf16 differs from rounding exp2's
    fp16_changed: float  # the same in fp16


def poly_error(degree: int, *, n: int = 1 << 16, x_min: float = -14.0, seed: int = 0) -> PolyError:
    """Measure exp2_poly against float64 exp2 on n seeded scores uniform in [x_min, 0] (a softmax's range, down to
    where fp16's normal numbers end, 2^-14: below it fp16 keeps fewer bits and its own rounding error grows).

    Args:
        degree: the polynomial's degree.  n: inputs.  x_min: the lowest score.  seed: the generator's seed.
    Returns:
        PolyError.

    Example:
        >>> e = poly_error(3, n=4096)
        >>> e.fp32 < 1e-4 < e.bf16_exact, e.bfloat16 <= e.bf16_exact * 1.1
        (True, True)
    """
    g = torch.Generator().manual_seed(seed)
    x = x_min * torch.rand(n, generator=g, dtype=torch.float64)  # (n,) in [x_min, 0]
    x = x.float().double()  # the scores as FP32 holds them
    exact = torch.exp2(x)  # float64
    poly = exp2_poly(x.float(), degree)

    def rel(y: torch.Tensor) -> float:
        return float(((y.double() - exact).abs() / exact).max())

    return PolyError(degree, rel(poly), rel(poly.bfloat16()), rel(poly.half()), rel(exact.bfloat16()),
                     rel(exact.half()), float((poly.bfloat16() != exact.bfloat16()).double().mean()),
                     float((poly.half() != exact.half()).double().mean()))


def error_table(degrees: tuple[int, ...] = DEGREES, **kw) -> list[PolyError]:
    """poly_error at each degree (the view's table and the lesson's numbers).

    Args:
        degrees: the degrees.  **kw: poly_error's n, x_min, seed.
    Returns:
        one PolyError per degree, in order.
    Example:
        >>> [e.degree for e in error_table((1, 3), n=1024)]
        [1, 3]
    """
    return [poly_error(d, **kw) for d in degrees]
