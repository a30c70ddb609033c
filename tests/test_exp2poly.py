"""FA4's exp2 by Cody-Waite range reduction and a minimax polynomial (flashviz.core.exp2poly), against float64's exp2.

Oracles: torch.exp2 in float64; the equioscillation theorem (the minimax error is reached with alternating signs at
n + 1 points under p(0) = 1, so a dense independent grid finds the same largest error as the exchange's levelled one);
bf16's and fp16's unit roundoffs from torch.finfo; FA4's write-ups' figure for their degree-3 coefficients, about
8.8e-5 (ours are minimax under p(0) = 1, so they may differ a little: within 10%).
"""

from __future__ import annotations

import itertools

import pytest
import torch

from flashviz.core.exp2poly import DEGREES, exp2_poly, minimax_coefficients, poly_error

FA4_DEGREE3 = 8.8e-5  # the degree-3 error quoted for FA4's polynomial


def dense_error(degree: int) -> torch.Tensor:
    """The relative error of the polynomial on 100,001 points of [0, 1], in float64 (no FP32 rounding)."""
    f = torch.linspace(0.0, 1.0, 100_001, dtype=torch.float64)
    c = torch.tensor(minimax_coefficients(degree), dtype=torch.float64)
    p = (f[:, None] ** torch.arange(degree + 1, dtype=torch.float64)) @ c
    return p / torch.exp2(f) - 1.0


@pytest.mark.parametrize("degree", DEGREES)
def test_the_polynomial_is_minimax_it_equioscillates(degree):
    err = dense_error(degree)
    peak = err.abs().max()
    assert minimax_coefficients(degree)[0] == 1.0 and err[0] == 0.0  # p(0) = 1: a row's max gets P = 1 exactly
    # n + 1 alternating extrema of (nearly) the same size: count the sign runs whose extremum reaches 99% of the peak
    sign = torch.sign(err[1:])
    edges = [0, *(torch.nonzero(sign[1:] != sign[:-1]).flatten() + 1).tolist(), len(sign)]
    runs = [err[1:][a:b].abs().max() for a, b in itertools.pairwise(edges)]
    assert sum(r >= 0.99 * peak for r in runs) == degree + 1


def test_the_error_falls_with_the_degree_and_degree_3_is_fa4s():
    errors = [poly_error(d).fp32 for d in DEGREES]
    assert all(a > 10 * b for a, b in itertools.pairwise(errors))  # each degree buys a factor over 10
    assert errors[2] == pytest.approx(FA4_DEGREE3, rel=0.10)
    assert errors[2] == pytest.approx(float(dense_error(3).abs().max()), rel=0.02)  # FP32 evaluation adds little


def test_after_rounding_p_to_bf16_degree_3_costs_nothing_more_than_bf16_itself():
    bf16_u = torch.finfo(torch.bfloat16).eps / 2  # unit roundoff 2^-8
    fp16_u = torch.finfo(torch.float16).eps / 2  # 2^-11
    e3 = poly_error(3)
    assert e3.bf16_exact <= bf16_u and e3.bf16_exact > 0.9 * bf16_u  # rounding exp2 itself reaches bf16's roundoff
    assert e3.fp32 < bf16_u / 40  # the polynomial's error is 45x under it
    assert e3.bfloat16 <= e3.bf16_exact * 1.03  # after rounding, degree 3 is as good as the exact exp2
    assert e3.bf16_changed < 0.02  # it changes fewer than 2% of the bf16 values, each by one unit in the last place
    # fp16 keeps 3 more bits: degree 3's 8.6e-5 is a sixth of its roundoff and shows a little (up to 1.2x, 8% of values)
    assert e3.fp16_exact <= fp16_u * 1.01 and e3.fp16_exact < e3.float16 <= e3.fp16_exact * 1.2
    assert 0.02 < e3.fp16_changed < 0.15 and poly_error(4).float16 <= e3.fp16_exact * 1.01  # degree 4 hides in fp16
    e2 = poly_error(2)
    assert e2.bfloat16 > 1.3 * e2.bf16_exact and e2.bf16_changed > 0.1  # degree 2 shows through bf16's rounding


def test_exp2_poly_is_exact_at_integers_and_zero_far_below():
    x = torch.tensor([0.0, -1.0, -7.0, -30.0, -126.0, -127.5, -1000.0])
    y = exp2_poly(x)
    assert y[:5].tolist() == [1.0, 0.5, 2.0**-7, 2.0**-30, 2.0**-126]
    assert y[5:].tolist() == [0.0, 0.0]  # below FP32's normal range: 0, as P underflows anyway
    assert y.dtype == torch.float32


def test_degree_is_checked():
    with pytest.raises(ValueError, match="degree must be an int from 1 to 8"):
        minimax_coefficients(0)
