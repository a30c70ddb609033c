"""The numerics lab's plain data (flashviz.views.numerics.data): every number against an oracle
computed in this file.

Oracles: PyTorch SDPA in float64 (is_causal; an explicit bottom-right boolean mask) and in the inputs' dtype; the
scores S = scale log2(e) q k^T in float64 walked tile by tile with FA4's threshold rule written here; flash-attn's
bound 2 x plain + 2 max|(r + 0.3 - 0.3) - r| written out. The inputs are rebuilt here from the same seed.

Legend: H heads (batch 1), N_q / N_k lengths, d head dimension, Bc = block, tau in log2 units.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from flashviz.numerics import fp8_attention, make_inputs
from flashviz.views.numerics.data import (
    NOT_COMPUTED,
    LabSettings,
    causal_alignment,
    flash_vs_sdpa,
    fp8_table,
    kernel_errors,
    lazy_rescale,
    tile_spread,
)

SMALL = LabSettings(n_q=96, n_k=160, d=32, heads=2, block=32)  # the lab's defaults, smaller
LOG2_E = 1 / math.log(2)
DT = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def inputs(s: LabSettings, dtype=None, **changes):
    """The lab's inputs for s, rebuilt: seeded float64 normals (with outliers) cast to dtype."""
    s = replace(s, **changes)
    q, k, v = make_inputs(1, s.heads, s.n_q, s.n_k, s.d, dtype=torch.float64, outliers=s.outliers, seed=s.seed)
    dtype = DT.get(s.precision, torch.float32) if dtype is None else dtype
    return q.to(dtype), k.to(dtype), v.to(dtype)


def sdpa(q, k, v, causal=False, **kw):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)


def max_err(a, b):
    return (a.double() - b.double()).abs().max().item()


@pytest.mark.parametrize("precision", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("causal", [False, True])
def test_kernel_errors_against_sdpa_and_flash_attn_rule(precision, causal):
    s = replace(SMALL, precision=precision, causal=causal)
    r = kernel_errors(s)
    q, k, v = inputs(s)
    ref = sdpa(q.double(), k.double(), v.double(), causal)
    rows = {row.kernel: row for row in r.rows}
    assert list(rows) == ["naive", "flash", "flash2", "sdpa"]
    assert rows["sdpa"].stats.max_abs == pytest.approx(max_err(sdpa(q, k, v, causal), ref), rel=1e-9)  # SDPA
    r16 = ref.to(q.dtype)
    atol = 2 * ((r16 + 0.3 - 0.3).double() - r16.double()).abs().max().item()
    assert r.fwd_atol == pytest.approx(atol, rel=1e-9)
    for row in r.rows:
        assert row.bound == pytest.approx(2 * rows["naive"].stats.max_abs + atol, rel=1e-9)
        assert row.passes == (row.stats.max_abs <= row.bound)
        assert len(row.stats.row_max_abs) == s.n_q and max(row.stats.row_max_abs) == row.stats.max_abs
    assert all(row.passes for row in r.rows)  # fp32 P: every kernel meets flash-attn's rule
    assert r.eps == torch.finfo(q.dtype).eps


def test_p_in_bf16_fails_flash_attn_rule_against_fp32_plain():
    r = kernel_errors(replace(SMALL, precision="float32", p_precision="bfloat16"))
    passes = {row.kernel: row.passes for row in r.rows}
    assert passes == {"naive": True, "flash": False, "flash2": False, "sdpa": True}


def test_fp8_inputs_add_the_fp8_kernel_and_its_error_is_fp8_attention_s():
    s = replace(SMALL, precision="e4m3")
    r = kernel_errors(s)
    q, k, v = inputs(s, torch.float32)
    ref = sdpa(q.double(), k.double(), v.double())
    fp8 = next(row for row in r.rows if row.kernel == "fp8")
    out = fp8_attention(q, k, v, block_size=s.block, hadamard=True, seed=s.seed)
    assert fp8.stats.rmse == pytest.approx((out.double() - ref).pow(2).mean().sqrt().item(), rel=1e-12)
    naive = next(row for row in r.rows if row.kernel == "naive")
    assert naive.stats.max_abs > 20 * max_err(sdpa(q, k, v), ref)  # the others ran on FP8-rounded inputs
    assert r.out_dtype == "float32" and r.eps == 0.125


def test_hadamard_with_d_not_a_power_of_two_is_a_note_not_an_error():
    r = kernel_errors(replace(SMALL, precision="e4m3", d=24))
    assert any("power of two" in n for n in r.notes)


def test_flash_vs_sdpa_differ_by_rounding_while_each_is_close_to_float64():
    s = SMALL
    r = flash_vs_sdpa(s)
    q, k, v = inputs(s)
    ref, mine = sdpa(q.double(), k.double(), v.double()), sdpa(q, k, v)
    assert r.sdpa_error == pytest.approx(max_err(mine, ref), rel=1e-9)
    assert 0 < r.max_diff <= r.flash_error + r.sdpa_error  # they differ, by no more than their two errors
    assert r.max_diff <= 2 * r.eps and 0 < r.differing < 1


def test_tile_spread_pairwise_differences():
    r = tile_spread(replace(SMALL, precision="float32"))
    assert r.blocks == (16, 32, 64, 128)
    n = len(r.blocks)
    assert all(r.pairwise[a][a] == 0 and r.pairwise[a][b] == r.pairwise[b][a] for a in range(n) for b in range(n))
    assert r.max_spread < 1e-5 and max(r.errors) < 1e-5  # fp32: every tile size, the same answer to rounding
    bf = tile_spread(SMALL, (16, 64, 999))
    assert bf.blocks == (16, 64)  # tile sizes beyond max(N_q, N_k) are left out
    assert bf.max_spread <= 2 * max(bf.errors)


def walk(S, block, tau, n_q):
    """Per row: a list over K/V tiles of (rescaled, largest P~ of the tile); tiles with no visible key -> None."""
    cells, max_p = [], 1.0
    for i in range(n_q):
        m, row = -math.inf, []
        for j0 in range(0, S.shape[1], block):
            tile = S[i, j0:j0 + block]
            if not torch.isfinite(tile).any():
                row.append(None)
                continue
            m_tile = tile.max().item()
            moved = m_tile - m > tau
            row.append(moved and math.isfinite(m))
            m = m_tile if moved else m
            max_p = max(max_p, 2.0 ** (m_tile - m))
        cells.append(row)
    return cells, max_p


@pytest.mark.parametrize("causal", [False, True])
def test_lazy_rescale_counts_and_largest_p_against_an_independent_walk(causal):
    s = replace(SMALL, precision="float32", causal=causal)
    r = lazy_rescale(s)
    q, k, _ = inputs(s)
    S = (q[0, 0].double() @ k[0, 0].double().T) / math.sqrt(s.d) * LOG2_E  # (N_q, N_k) log2 units
    if causal:
        S = S.masked_fill(torch.ones(s.n_q, s.n_k, dtype=torch.bool).triu(1), -math.inf)
    for run in (r.classic, r.lazy):
        want, max_p = walk(S, s.block, run.tau, s.n_q)
        for i in range(s.n_q):
            i0 = i - i % s.block  # the Q block of row i: a tile is computed when any of its rows sees a key
            for j in range(len(want[i])):
                computed = any(want[r_][j] is not None for r_ in range(i0, min(i0 + s.block, s.n_q)))
                assert run.cells[i][j] == (int(bool(want[i][j])) if computed else NOT_COMPUTED), (run.tau, i, j)
        assert run.total == sum(bool(w) for row in want for w in row)
        assert run.max_p == pytest.approx(max_p, rel=1e-4)
    assert r.lazy.tau == 8.0 and r.classic.max_p == 1.0 and r.lazy.max_p <= 2.0 ** 8
    assert 0 < r.lazy.total < r.classic.total / 2  # FA4's rule: several times fewer rescales
    assert r.max_out_diff <= 1e-5  # fp32 outputs: the same to rounding
    assert r.acc_max == torch.finfo(torch.float32).max and r.max_acc < 1e4 * r.lazy.max_l


def test_lazy_rescale_in_bf16_moves_the_output_by_at_most_its_rounding():
    r = lazy_rescale(SMALL)
    assert r.max_out_diff <= 2 ** -8  # the fp32 results agree; rounding them to bf16 can differ by one step
    assert r.p_dtype == "float32" and r.acc_dtype == "float32"
    assert lazy_rescale(replace(SMALL, p_precision="e4m3")).p_max == 448.0


def test_fp8_table_cells_against_fp8_attention_and_sdpa():
    s = replace(SMALL, n_q=128, n_k=128, d=64)
    t = fp8_table(s, n_seeds=3)
    assert t.seeds == (0, 1, 2) and t.fmt == "e4m3" and t.note == ""
    errs = []
    for seed in t.seeds:
        q, k, v = inputs(s, torch.float32, seed=seed, outliers=True)
        out = fp8_attention(q, k, v, block_size=s.block, hadamard=True, seed=seed)
        errs.append((out.double() - sdpa(q.double(), k.double(), v.double())).pow(2).mean().sqrt().item())
    assert t.cell(True, True).rmse_per_seed == pytest.approx(tuple(errs), rel=1e-12)
    on, off = t.cell(True, True), t.cell(True, False)
    assert all(b * 1.5 < a for a, b in zip(off.rmse_per_seed, on.rmse_per_seed, strict=True))
    assert t.cell(False, True).rmse == pytest.approx(t.cell(False, False).rmse, rel=0.1)
    odd = fp8_table(replace(s, d=48), n_seeds=1)
    assert "power of two" in odd.note and odd.cell(True, True).rmse == odd.cell(True, False).rmse


@pytest.mark.parametrize(("n_q", "n_k"), [(96, 160), (160, 96), (128, 128)])
def test_causal_alignment_against_sdpa_top_left_and_an_explicit_bottom_right_mask(n_q, n_k):
    s = replace(SMALL, n_q=n_q, n_k=n_k, precision="float32")
    r = causal_alignment(s)
    q, k, v = inputs(s)
    i, j = torch.arange(n_q)[:, None], torch.arange(n_k)[None, :]
    top = sdpa(q.double(), k.double(), v.double(), causal=True)  # top-left
    seen = j <= i + (n_k - n_q)
    bottom = sdpa(q.double(), k.double(), v.double(), attn_mask=seen).nan_to_num(0.0)  # rows with no key: 0
    diff = (top - bottom).abs().amax(dim=(0, 1, 3))
    torch.testing.assert_close(torch.tensor(r.row_diff, dtype=torch.float64), diff, rtol=0, atol=1e-5)
    assert r.top_left_last == tuple(min(x, n_k - 1) for x in range(n_q))
    assert r.bottom_right_last == tuple(int(row.nonzero().max()) if row.any() else -1 for row in seen)
    assert r.keys_differ == tuple((j <= i).sum(1).sub(seen.sum(1)).abs().tolist())
    if n_q == n_k:
        assert r.max_diff == 0.0
    if n_q <= n_k:
        assert r.decode_diff < 1e-5  # flash_decode(causal=True) is bottom-right
    else:
        assert math.isnan(r.decode_diff)


@pytest.mark.parametrize(("change", "words"), [
    ({"n_q": 0}, "n_q must be an int from 1"),
    ({"n_k": 5000}, "n_k must be an int from 1 to 1024"),
    ({"precision": "fp8"}, "precision must be one of"),
    ({"p_precision": "int8"}, "p_precision must be one of"),
    ({"tau": -1.0}, "tau must be a finite number >= 0"),
    ({"tau": float("nan")}, "tau must be a finite number >= 0"),
    ({"block": 1, "n_k": 1024}, "tile loop allows"),
    ({"seed": -1}, "seed must be an int >= 0"),
])
def test_bad_settings_raise_errors_that_teach(change, words):
    with pytest.raises(ValueError, match=words):
        replace(SMALL, **change)


def test_fp8_table_seed_count_is_checked():
    with pytest.raises(ValueError, match="n_seeds must be an int from 1 to"):
        fp8_table(SMALL, n_seeds=0)
