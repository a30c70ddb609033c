"""The numerics lab's sentences and figures: every sentence quotes its own numbers, every figure draws them.

Oracles: the experiments' numbers themselves (flashviz.views.numerics.data on small settings),
formatted here with fmt_num, and the cell codes of the causal map recomputed from N_q and N_k here. The figure and
sentence modules import no torch (checked in a fresh interpreter).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from flashviz.views.numerics import figures as fig
from flashviz.views.numerics import sentences as text
from flashviz.views.numerics.data import (
    LabSettings,
    causal_alignment,
    flash_vs_sdpa,
    fp8_table,
    kernel_errors,
    lazy_rescale,
    tile_spread,
)
from flashviz.views.numerics.sentences import fmt_num
from tests._numbers import says, shows, stated

ROOT = Path(__file__).resolve().parent.parent
SMALL = LabSettings(n_q=64, n_k=128, d=32, heads=1, block=32)
MIN_FONT_PX = 14


@pytest.fixture(scope="module")
def results():
    return {
        "errors": kernel_errors(SMALL),
        "errors_fp32_p_bf16": kernel_errors(replace(SMALL, precision="float32", p_precision="bfloat16")),
        "errors_fp8": kernel_errors(replace(SMALL, precision="e4m3")),
        "sdpa": flash_vs_sdpa(SMALL),
        "spread": tile_spread(SMALL),
        "rescale": lazy_rescale(SMALL),
        "fp8": fp8_table(replace(SMALL, n_q=128), n_seeds=2),
        "causal": causal_alignment(SMALL),
        "causal_wide": causal_alignment(replace(SMALL, n_q=128, n_k=64)),
        "causal_same": causal_alignment(replace(SMALL, n_q=64, n_k=64)),
    }


@given(st.floats(min_value=1e-30, max_value=1e30))
def test_fmt_num_reads_back_within_its_rounding(x):
    got = float(fmt_num(x))
    assert abs(got - x) <= 0.05 * x + 1e-300  # 2 significant digits (3 between 1 and 1e4)


def test_kernel_errors_sentence_quotes_every_error_and_the_verdict(results):
    for key in ("errors", "errors_fp32_p_bf16", "errors_fp8"):
        r = results[key]
        s = text.kernel_errors_sentence(r)
        for row in r.rows:
            assert f"{row.label} {fmt_num(row.stats.max_abs)}" in s
        assert fmt_num(2 * r.plain_max_abs + r.fwd_atol) in s and fmt_num(r.eps) in s
        failing = [row.label for row in r.rows if not row.passes]
        assert ("every kernel passes" in s) == (not failing)
        assert all(label in s.split(":")[-1] for label in failing)
    r = results["errors_fp32_p_bf16"]  # P in bf16: the two flash kernels pass the bound no longer
    bound = 2 * r.plain_max_abs + r.fwd_atol
    failing = [row.label for row in r.rows if row.stats.max_abs > bound]
    assert failing == [row.label for row in r.rows if not row.passes] == ["FA1", "FA2"]
    verdict = text.kernel_errors_sentence(r).split(f"= {fmt_num(bound)}: ")[1]
    assert [label for label in (row.label for row in r.rows) if label in verdict] == failing and "pass" not in verdict


def test_flash_sdpa_sentence(results):
    r = results["sdpa"]
    s = text.flash_sdpa_sentence(r)
    for value in (r.max_diff, r.flash_error, r.sdpa_error):
        assert fmt_num(value) in s
    assert f"{r.max_diff / r.eps:.2g} eps" in s and f"{r.differing:.0%}" in s


def test_tile_spread_sentence(results):
    for r in (results["spread"], tile_spread(replace(SMALL, precision="float32"))):
        s = text.tile_spread_sentence(r)
        assert f"Tiles of {min(r.blocks)} to {max(r.blocks)}" in s and fmt_num(max(r.errors)) in s
        if r.max_spread == 0:  # bf16 rounding can hide the fp32 differences entirely
            assert "bit for bit the same" in s
        else:
            assert f"by up to {fmt_num(r.max_spread)}" in s


def test_rescale_sentence(results):
    r = results["rescale"]
    s = text.rescale_sentence(r)
    assert f"tau = {r.lazy.tau:g}" in s and str(r.classic.total) in s
    if r.lazy.total:
        assert f"{r.lazy.total} times instead of {r.classic.total}" in s
        assert f"{r.classic.total / r.lazy.total:.2g}x fewer" in s
    for value in (r.max_out_diff, r.lazy.max_p, r.lazy.max_l, r.max_acc, r.acc_max):
        assert fmt_num(value) in s
    never = replace(r, lazy=replace(r.lazy, total=0))
    said = text.rescale_sentence(never).split(" and its output")[0]
    assert "never" in said and "instead of" not in said  # no lazy rescale: no ratio of rescales to state
    assert says(said, r.lazy.tau, r.classic.total, 0, 0, 0)  # tau; the classic run's rescales at tau = 0; b 0, h 0
    fp8_p = lazy_rescale(replace(SMALL, p_precision="e4m3"))
    assert fp8_p.p_dtype == str(torch.float8_e4m3fn).removeprefix("torch.")
    rounded = text.rescale_sentence(fp8_p).split("; P~ is rounded to")[1]
    assert rounded.split(",")[0].strip() == fp8_p.p_dtype and fp8_p.p_max == torch.finfo(torch.float8_e4m3fn).max
    assert shows(stated(rounded, "largest value"), torch.finfo(torch.float8_e4m3fn).max)  # 448
    assert ("exceeds" in rounded) == (fp8_p.lazy.max_p > fp8_p.p_max)


def test_fp8_sentence(results):
    r = results["fp8"]
    s = text.fp8_sentence(r)
    off, on = r.cell(True, False).rmse, r.cell(True, True).rmse
    assert f"from {fmt_num(off)} to {fmt_num(on)} ({off / on:.2g}x lower" in s
    every = all(b < a for a, b in zip(r.cell(True, False).rmse_per_seed, r.cell(True, True).rmse_per_seed,
                                      strict=True))
    assert ("on each of 2 seeds" in s) == every
    assert fmt_num(r.cell(False, False).rmse) in s


def test_causal_sentences(results):
    r = results["causal"]
    s = text.causal_sentence(r)
    assert f"N_q = {r.n_q}" in s and f"keys 0..i+{r.offset}" in s and fmt_num(r.max_diff) in s
    assert fmt_num(r.decode_diff) in s
    w = results["causal_wide"]
    s = text.causal_sentence(w)
    fewer = max(w.keys_differ[-w.offset:])  # over the queries that see a key at all
    assert f"the first {-w.offset} queries see no key" in s and f"the others up to {fewer} keys fewer" in s
    same = results["causal_same"]
    s = text.causal_sentence(same)
    assert same.offset == 0 and "the same mask" in s  # N_q = N_k: both alignments let query i see keys 0..i
    assert same.max_diff == 0 and "identical" in s  # the same mask gives the same output
    assert says(s.split("Choose")[0], same.n_q, same.n_k)  # N_q, N_k: nothing more to state


def fonts(figure) -> list[float]:
    """Every font size the layout sets (template and layout): title, axes, ticks, legend, base, annotations."""
    lay = figure.layout
    tpl = lay.template.layout
    sizes = [lay.font.size or tpl.font.size, tpl.title.font.size, tpl.legend.font.size, tpl.xaxis.tickfont.size,
             tpl.xaxis.title.font.size, lay.title.subtitle.font.size or tpl.font.size]
    sizes += [a.font.size for a in lay.annotations if a.font.size]
    sizes += [t.textfont.size for t in figure.data if getattr(t, "textfont", None) and t.textfont.size]
    return [s for s in sizes if s is not None]


def check_readable(figure) -> None:
    assert figure.layout.title.text and figure.layout.xaxis.title.text and figure.layout.yaxis.title.text
    assert min(fonts(figure)) >= MIN_FONT_PX
    assert figure.layout.height <= 720  # fits a 1280 x 720 projector


def test_kernel_errors_figure_draws_each_error_every_row_eps_and_the_bound(results):
    for name in ("errors_fp8", "errors"):
        r = results[name]
        f = fig.kernel_errors_figure(r)
        check_readable(f)
        bars, lines = f.data[0], f.data[1:1 + len(r.rows)]  # then the eps and bound lines' legend entries
        assert list(bars.x) == [row.label for row in r.rows]
        assert list(bars.y) == [row.stats.max_abs for row in r.rows]
        assert [line.name for line in lines] == [row.label for row in r.rows]
        for line, row in zip(lines, r.rows, strict=True):  # each row's error, exact rows on the floor
            assert len(line.y) == len(row.stats.row_max_abs) == SMALL.n_q
            assert all(y == e for y, e in zip(line.y, row.stats.row_max_abs, strict=True) if e > 0)
        assert sorted(s.y0 for s in f.layout.shapes) == sorted([r.eps, 2 * r.plain_max_abs + r.fwd_atol])
        assert f.layout.yaxis.type == "log" and f.layout.xaxis.type == "category"
        lo, hi = f.layout.yaxis.range
        assert all(lo <= math.log10(v) <= hi for v in [*bars.y, r.eps])  # everything inside the axis


def test_tile_spread_figure_draws_what_differs_between_tile_sizes(results):
    r = tile_spread(replace(SMALL, precision="float16"))
    assert r.max_spread > 0  # fp16 at these sizes: the tile size changes the output
    f = fig.tile_spread_figure(r)
    check_readable(f)
    (heat,) = f.data
    assert list(heat.x) == list(heat.y) == [str(b) for b in r.blocks]
    assert [list(row) for row in heat.z] == [list(row) for row in r.pairwise]  # every pair's max |O_a - O_b|
    assert max(max(row) for row in heat.z) == r.max_spread and all(heat.z[i][i] == 0 for i in range(len(r.blocks)))
    subtitle = f.layout.title.subtitle.text
    assert fmt_num(r.max_spread) in subtitle and fmt_num(max(r.errors)) in subtitle


def test_tile_sizes_that_give_one_output_are_said_in_words_not_drawn(results):
    r = results["spread"]  # bf16 at these sizes: every tile size rounds to the same output
    assert r.max_spread == 0 and len(set(r.errors)) == 1
    assert fig.tile_spread_figure(r) is None  # four equal bars would show nothing
    said = text.tile_spread_sentence(r)
    assert "bit for bit the same" in said  # the verdict of a spread of 0
    assert says(said, min(r.blocks), max(r.blocks), None)  # the tile sizes, then the error against float64:
    assert shows(stated(said, "within"), max(r.errors), rel=0.051)  # 2 significant digits


def test_rescale_figure_draws_both_runs_per_tile(results):
    r = results["rescale"]
    f = fig.rescale_figure(r)
    check_readable(f)
    assert [list(t.y) for t in f.data] == [list(r.classic.per_tile), list(r.lazy.per_tile)]
    assert [sum(t.y) for t in f.data] == [r.classic.total, r.lazy.total]
    assert str(r.classic.total) in f.data[0].name and str(r.lazy.total) in f.data[1].name


def test_fp8_figure_draws_the_2_by_2_table(results):
    r = results["fp8"]
    f = fig.fp8_figure(r)
    check_readable(f)
    for trace, hadamard in zip(f.data, (False, True), strict=True):
        cells = [r.cell(o, hadamard) for o in (False, True)]
        assert list(trace.y) == [c.rmse for c in cells]
        assert list(trace.error_y.array) == [max(c.rmse_per_seed) - c.rmse for c in cells]
    assert f.layout.yaxis.type == "log"


@pytest.mark.parametrize("key", ["causal", "causal_wide"])
def test_causal_figure_codes_each_key_from_n_q_and_n_k(results, key):
    r = results[key]
    f = fig.causal_alignment_figure(r)
    check_readable(f)
    heat = f.data[0]
    for i, row in zip(heat.y, heat.z, strict=True):
        for j, code in zip(heat.x, row, strict=True):
            top, bottom = j <= i, j <= i + r.n_k - r.n_q
            assert code == int(top) + 2 * int(bottom), (i, j)


def test_big_causal_map_is_sampled_to_at_most_256_cells_a_side():
    r = causal_alignment(LabSettings(n_q=1000, n_k=600, d=8, heads=1, block=128, precision="float32"))
    heat = fig.causal_alignment_figure(r).data[0]
    assert len(heat.y) <= 256 and len(heat.x) <= 256 and heat.y[-1] >= 1000 - 4


def test_figure_and_text_modules_import_no_torch():
    code = (f"import sys, json\nsys.path.insert(0, {str(ROOT)!r})\n"
            "import flashviz.views.numerics.figures, flashviz.views.numerics.sentences\n"
            "print(json.dumps([m for m in ('torch', 'streamlit') if m in sys.modules]))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == []


def test_sentences_quote_no_unformatted_float(results):
    """Every number in a sentence is fmt_num's (or a ratio / count): no 0.007809264280469463 slips through."""
    for s in (text.kernel_errors_sentence(results["errors"]), text.flash_sdpa_sentence(results["sdpa"]),
              text.tile_spread_sentence(results["spread"]), text.rescale_sentence(results["rescale"]),
              text.fp8_sentence(results["fp8"]), text.causal_sentence(results["causal"])):
        assert not re.search(r"\d\.\d{4,}", s), s
