"""The GPU pipeline view (?view=pipeline) under AppTest: every number on the page, read back, equals the model's or
the measurement's value at the settings shown; every chart draws those values; a paper's figure more than 25% from
the model's is flagged with its reason; settings no schedule can run say so.

Oracles: flashviz.model.pipeline (tile_cycles, simulate) called here on the settings parsed from the link
(tests/test_pipeline_model.py holds the model to the papers), flashviz.core.exp2poly.poly_error, the Numerics view's
lazy_rescale counted here, and the papers' figures themselves (FA3 Figure 5, FA4).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from flashviz.app.query import parse_query
from flashviz.core.exp2poly import poly_error
from flashviz.model.pipeline import SCHEDULES, simulate, tile_cycles
from flashviz.views.numerics.data import NOT_COMPUTED, LabSettings, lazy_rescale
from flashviz.views.pipeline import data
from tests._apptest import assert_clean, charts, decode

VIEW = {"view": "pipeline"}
GANTT, BARS, WAVES = "One CTA on the", "One 128 × 128 tile", "Wave quantisation"
PAPERS = {  # figure -> the paper's value, as the papers print them
    "FA2 on H100, bf16, TFLOP/s": 370, "FA3 on H100, bf16, TFLOP/s": 648, "FA3 on H100, fp8, TFLOP/s": 1200,
    "FA4 on B200, bf16, TFLOP/s": 1613,
    "B200 forward tile, mma cycles": 1024, "B200 forward tile, exp cycles": 1024,
    "B200 forward tile, smem cycles": 768, "B200 backward tile, mma cycles": 2560,
    "B200 backward tile, exp cycles": 1024, "B200 backward tile, smem cycles": 3328,
    "H100 tile, exp / mma cycles": 0.5,
}


def number(text: str) -> float:
    return float(text.replace(",", "").replace("%", "").replace("+", "").replace("⚠", "").strip())


def page_text(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def measured_rate() -> float:
    """FA4's lazy rescale rate at tau = 8, counted here from the Numerics lab's run (the oracle of data.skip_rate)."""
    r = lazy_rescale(LabSettings(n_q=1024, n_k=1024, d=128, heads=1, block=128, tau=8.0, outliers=True))
    cells = [c for row in r.lazy.cells for c in row if c != NOT_COMPUTED]
    assert len(cells) == 1024 * 8  # every (row, tile) computed: no mask
    return sum(cells) / len(cells)


@pytest.fixture(scope="module")
def rate() -> float:
    return measured_rate()


def open_view(make_app, **query):
    at = make_app(**VIEW, **query)
    s, notices = parse_query({**VIEW, **query})
    assert notices == []
    return at, s


def test_defaults_draw_the_models_gantt_and_say_its_numbers(make_app, rate):
    at, s = open_view(make_app)
    assert_clean(at)
    assert (s.pipe_gpu, s.pipe_dtype, s.pipe_d, s.pipe_n, s.pipe_causal) == ("b200", "bfloat16", 128, 16384, False)
    preds = {k: simulate(k, "B200", seq_len=16384, rescale_rate=rate if k == "FA4" else None) for k in SCHEDULES}
    fig = charts(at)["One CTA on the B200, three schedules: ▶ Play races them"]
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert titles == [f"{k}: {p.tflops:,.0f} TFLOP/s predicted" for k, p in preds.items()]
    window = fig["layout"]["xaxis"]["range"][1]
    fa2 = preds["FA2"].ops
    assert window == pytest.approx(fa2[fa2["tile"].between(0, data.GANTT_TILES - 1)]["end"].max())
    # every bar is an op of the model's schedule: its unit, its start and its length
    for k, axis in zip(SCHEDULES, ("x", "x2", "x3"), strict=True):
        ops = preds[k].ops
        ops = ops[(ops["start"] < window) & ~ops["op"].isin(["O / l", "store O"])]
        bars = [t for t in fig["data"] if t.get("xaxis", "x") == axis]
        drawn = sorted((t["name"], u, round(float(b), 3), round(float(w), 3)) for t in bars
                       for u, b, w in zip(t["y"], decode(t["base"]), decode(t["x"]), strict=True))
        model = sorted((r.op, r.unit, round(r.start, 3), round(r.end - r.start, 3)) for r in ops.itertuples())
        assert drawn == model, k
    assert len(fig["frames"]) == 12  # the animation: every op grows up to the same clock in each frame
    for k, frame in enumerate(fig["frames"]):  # frame k: every op up to (k + 1) / 12 of the window
        cut = window * (k + 1) / 12
        for grown, t in zip(frame["data"], fig["data"], strict=True):
            base, width = decode(t["base"]), decode(t["x"])
            assert decode(grown["x"]) == pytest.approx(np.clip(np.minimum(base + width, cut) - base, 0, None))
    # the sentence quotes each schedule's TFLOP/s and share of the peak
    said = re.findall(r"\*\*(FA\d)\*\* ([\d,]+) TFLOP/s \((\d+)% of the tensor peak; its busiest unit, (\w+), "
                      r"works (\d+)%", page_text(at))
    assert [k for k, *_ in said] == list(SCHEDULES)
    for k, tflops, share, unit, busy in said:
        p = preds[k]
        assert number(tflops) == round(p.tflops) and number(share) == round(100 * p.utilisation)
        assert unit == max(p.busy, key=p.busy.get) and number(busy) == round(100 * p.busy[unit])
    assert preds["FA2"].tflops < preds["FA3"].tflops < preds["FA4"].tflops
    # FA4's tricks: the share by polynomial and the measured rescale rate
    m = re.search(r"FA4 computes (\d+)% of its exponentials .* rescales O for ([\d.]+)% of the rows at each tile",
                  page_text(at))
    assert number(m[1]) == round(100 * preds["FA4"].poly_share) and number(m[2]) == round(100 * rate, 2)


def test_the_papers_table_sets_each_figure_beside_the_models_and_flags_the_far_ones(make_app, rate):
    at, _ = open_view(make_app)
    (md,) = [m.value for m in at.markdown if m.value.startswith("| figure | paper | model |")]
    rows = {}
    for line in md.splitlines()[2:]:
        if not line.startswith("| "):
            break
        figure, paper, model, off, _ = [c.strip() for c in line.strip("|").split("|")]
        rows[figure] = (number(paper), number(model), number(off), "⚠" in off)
    assert set(rows) == set(PAPERS)
    for figure, value in PAPERS.items():
        paper, model, off, flagged = rows[figure]
        assert paper == value, figure
        if "tile" in figure:  # counts: exact
            if "/" in figure:  # FA3's ratio at d = 128
                expected = tile_cycles("H100")["exp"] / tile_cycles("H100")["mma"]
            else:
                g, phase, _, unit, _ = figure.split()  # "B200 forward tile, mma cycles"
                expected = tile_cycles(g, phase=phase)[unit]
            assert model == expected and off == 0 and not flagged
        else:
            schedule, _, g, short, _ = figure.replace(",", "").split()  # "FA3 on H100, bf16, TFLOP/s"
            dtype = {"bf16": "bfloat16", "fp8": "float8_e4m3fn"}[short]
            p = simulate(schedule, g, seq_len=16384, dtype=dtype, rescale_rate=rate if schedule == "FA4" else None)
            assert model == round(p.tflops) and off == round(100 * (p.tflops / value - 1))
            assert flagged == (abs(p.tflops / value - 1) > 0.25)
            if flagged:  # the reason is on the page, under the table, with the loads' share it quotes
                assert f"- **{figure}**: the model is {off:+.0f}% from the paper: " in md
                if schedule == "FA3":
                    assert f"FA3's loads already take {p.busy['load']:.0%} of the CTA's time" in md
    assert sum(flag for *_, flag in rows.values()) == md.count("\n- **")


def test_the_tile_bars_are_tile_cycles_and_the_sentence_quotes_their_shares(make_app):
    at, _ = open_view(make_app, piped="64")
    assert_clean(at)
    fig = charts(at)["One 128 × 128 tile, d = 64, forward: cycles per unit"]
    units = {"tensor cores (MMA)": "mma", "exp2 unit (MUFU)": "exp", "FP32 units (FMA)": "fma",
             "shared memory": "smem"}
    groups = ["A100<br>bf16", "H100<br>bf16", "H100<br>fp8", "H200<br>bf16", "H200<br>fp8", "B200<br>bf16",
              "B200<br>fp8"]
    for t in fig["data"]:
        assert list(t["x"]) == groups
        for group, y in zip(t["x"], decode(t["y"]), strict=True):
            g, dtype = group.split("<br>")
            c = tile_cycles(g, head_dim=64, dtype={"bf16": "bfloat16", "fp8": "float8_e4m3fn"}[dtype])
            assert y == pytest.approx(c[units[t["name"]]])
    said = re.search(r"share of the MMA’s cycles: (.*?)\. In FP8 .*?: (.*?), which", page_text(at))
    for part, dtype, gpus in ((said[1], "bfloat16", 4), (said[2], "float8_e4m3fn", 3)):
        assert len(re.findall(r"(\d+)% on an? (\w+)", part)) == gpus
        for share, g in re.findall(r"(\d+)% on an? (\w+)", part):
            c = tile_cycles(g, head_dim=64, dtype=dtype)
            assert number(share) == round(100 * c["exp"] / c["mma"])
    assert "400% on a B200" in said[2]  # d = 64 in FP8: 4 x 128^2 x 64 / 16,384 = 256 MMA cycles, 1,024 of exp


def test_the_polynomial_table_is_the_measured_error(make_app):
    at, _ = open_view(make_app)
    (md,) = [m.value for m in at.markdown if m.value.startswith("| degree | FP32 error |")]
    for line in md.splitlines()[2:7]:
        degree, fp32, bf16, fp16, *_ = [c.strip() for c in line.strip("|").split("|")]
        e = poly_error(int(degree))
        assert (float(fp32), float(bf16), float(fp16)) == tuple(float(f"{x:.1e}") for x in (e.fp32, e.bfloat16,
                                                                                          e.float16))
    e3 = poly_error(3)
    assert e3.fp32 < e3.bf16_exact / 40  # the sentence's claim: degree 3 hides under bf16's rounding
    assert "hides under bf16's rounding from degree 3 on, under fp16's from degree 4 on" in md


def test_waves_at_small_n_and_a_decode_step(make_app):
    at, _ = open_view(make_app, pipegpu="h100")
    assert_clean(at)
    fig = charts(at)["Wave quantisation on the H100: CTAs over SMs (batch 1)"]
    prefill = next(t for t in fig["data"] if t["name"] == "prefill")
    for n, eff in zip(decode(prefill["x"]), decode(prefill["y"]), strict=True):
        ctas = 16 * -(-int(n) // 128)  # 16 heads of d = 128, one CTA per 128 queries
        waves = -(-ctas // 132)
        assert eff == pytest.approx(ctas / (waves * 132))
    m = re.search(r"At N = 512 and batch 1 a prefill launches (\d+) CTAs on the H100’s (\d+) SMs \((\d+)% .*? one "
                  r"decode step launches (\d+) \((\d+)%\), so Flash-Decoding splits the keys: (\d+) CTAs \((\d+)%\)",
                  page_text(at))
    assert [int(x) for x in m.groups()] == [64, 132, 48, 16, 12, 64, 48]


def test_fp8_runs_fa3_and_fa4_on_hopper_and_nothing_on_an_a100(make_app):
    at, _ = open_view(make_app, pipegpu="h100", pipedtype="float8_e4m3fn", pipen="2048", pipecausal="1")
    assert_clean(at)
    text = page_text(at)
    assert "**FA2** does not run here (FA2 has no FP8 path" in text
    fa3 = simulate("FA3", "H100", seq_len=2048, dtype="float8_e4m3fn", causal=True)
    assert f"**FA3** {fa3.tflops:,.0f} TFLOP/s" in text
    at, _ = open_view(make_app, pipegpu="a100", pipedtype="float8_e4m3fn")
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert error.startswith("No schedule runs here: A100 (SXM 80GB) has no tensor-core rate for dtype 'float8_e4m3fn'")
    assert "Choose bf16 or fp16, or another GPU." in error
    assert BARS in "".join(charts(at))  # the other tabs still draw
