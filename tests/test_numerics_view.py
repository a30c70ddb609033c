"""The Numerics view (?view=numerics) under AppTest: every number a sentence quotes, read back from the page, equals
the numerics lab's value at the settings shown, every chart draws the lab's numbers, and bad settings are repaired
or refused with a message.

Oracles: the lab's functions (flashviz.views.numerics.data) called here on the same LabSettings
(they are checked against SDPA, float64 formulas and explicit masks in tests/test_numerics_view_data.py), and,
independently of them, torch.finfo's eps, PyTorch SDPA against float64 SDPA on inputs rebuilt here, and which keys
each query sees under the two causal alignments, computed here from N_q and N_k.

Legend: N_q / N_k query / key lengths, 2 heads of d = 64 (the view's fixed shape), tau in log2 units.
"""

from __future__ import annotations

import re
from dataclasses import astuple

import pytest
import torch
import torch.nn.functional as F

from flashviz.app.query import parse_query
from flashviz.core.decode import flash_decode
from flashviz.core.flash import flash_attention_forward
from flashviz.numerics import make_inputs
from flashviz.views.numerics import data as numerics_runs
from flashviz.views.numerics.data import (
    LabSettings,
    causal_alignment,
    flash_vs_sdpa,
    fp8_table,
    kernel_errors,
    lab_inputs,
    lazy_rescale,
    tile_spread,
    two_errors,
)
from flashviz.vocab import PRECISION_DTYPES
from tests._apptest import assert_clean, charts, decode

VIEW = {"view": "numerics"}
REL = 0.051  # a quoted number has 2 significant digits (3 from 1 to 1e4): it is within 5.1 % of the value
CASES = {  # name -> the link's settings (besides view=numerics)
    "defaults": {},
    "fp32": {"nmdtype": "float32"},
    "fp16": {"nmdtype": "float16"},
    "e4m3": {"nmdtype": "e4m3"},
    "e5m2": {"nmdtype": "e5m2", "nmhad": "0"},
    "p_bf16": {"nmdtype": "float32", "nmpdtype": "bfloat16"},
    "tau_0": {"nmtau": "0"},
    "plain_inputs": {"nmout": "0"},
    "square": {"nmnq": "256", "nmnk": "256"},
    "causal_odd": {"nmcausal": "1", "nmnq": "97", "nmnk": "300", "nmblock": "32"},
    "more_queries": {"nmnq": "300", "nmnk": "100", "nmblock": "32"},
}


def lab_of(query: dict[str, str]) -> LabSettings:
    """The LabSettings a link stands for, from the URL parser and the view's own settings, written out here."""
    s, notices = parse_query({**VIEW, **query})
    assert notices == []
    return LabSettings(n_q=s.n_q, n_k=s.n_k, precision=s.input_dtype, block=s.numerics_block, tau=float(s.tau),
                       p_precision=None if s.p_dtype == "none" else s.p_dtype, hadamard=s.hadamard,
                       outliers=s.outliers, causal=s.numerics_causal)


def close(text: str, value: float) -> bool:
    return abs(float(text) - value) <= REL * abs(value) + 1e-300


def sentence(at, start: str) -> str:
    (found,) = [m.value for m in at.markdown if m.value.startswith(start)]
    return found


NUM = r"(\d+(?:\.\d+)?(?:e-?\d+)?)"  # a number as the sentences write it: 148, 2.5, 5.1e-2, 3.4e38


def quoted_errors(at) -> dict[str, str]:
    """Kernel label -> the max |error| the first sentence quotes for it."""
    items = match(r"against float64: (.+?)\. flash-attn", sentence(at, "In "))[1].split(", ")
    return dict(item.rsplit(" ", 1) for item in items)


def match(pattern: str, text: str) -> re.Match:
    """re.search of pattern, each NUM in it a number group."""
    m = re.search(pattern.replace("NUM", NUM), text)
    assert m, (pattern, text)
    return m


@pytest.fixture(scope="module", params=list(CASES))
def page(request):
    """(the AppTest after its first run, the lab's results at the same settings), once per case."""
    from tests._apptest import open_app

    query = CASES[request.param]
    s = lab_of(query)
    at = open_app(**VIEW, **query)
    lab = {"errors": kernel_errors(s), "sdpa": flash_vs_sdpa(s), "spread": tile_spread(s), "rescale": lazy_rescale(s),
           "fp8": fp8_table(s), "causal": causal_alignment(s), "two": two_errors(s)}
    return at, s, lab


def test_the_view_renders_says_what_it_ran_with_and_reads_no_sidebar_setting(page):
    at, s, _ = page
    assert_clean(at)
    assert not at.warning
    assert "Uses no setting of the sidebar." in [c.value for c in at.caption]
    assert not at.sidebar.get("slider") and not at.sidebar.get("number_input") and not at.sidebar.get("toggle")
    (ran,) = [c.value for c in at.caption if c.value.startswith("**Ran with**")]
    assert f"N_q = {s.n_q}" in ran and f"N_k = {s.n_k}" in ran and f"tile = {s.block}" in ran
    assert f"tau = {s.tau:g}" in ran and ("not causal" in ran) == (not s.causal)


def test_the_kernel_error_sentence_quotes_the_labs_errors_and_verdict(page):
    at, s, lab = page
    r = lab["errors"]
    text = sentence(at, "In ")
    m = match(r"\(eps = NUM\), max \|error\| against float64: (.+?)\. flash-attn's rule, at most 2 x the plain "
              r"run's \(naive\) NUM \+ NUM = NUM: (.+?)\.", text)
    assert close(m[1], torch.finfo(getattr(torch, {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}.get(
        s.precision, s.precision))).eps)
    quoted = dict(item.rsplit(" ", 1) for item in m[2].split(", "))
    assert list(quoted) == [row.label for row in r.rows]
    for row in r.rows:
        assert close(quoted[row.label], row.stats.max_abs), row.label
    assert close(m[3], r.plain_max_abs) and close(m[4], r.fwd_atol) and close(m[5], 2 * r.plain_max_abs + r.fwd_atol)
    failing = [row.label for row in r.rows if not row.passes]
    assert (m[6] == "every kernel passes") == (not failing) and all(label in m[6] for label in failing)
    assert ("FA3 FP8" in quoted) == s.is_fp8


def test_the_flash_vs_sdpa_sentence_quotes_their_difference_and_says_wrong_only_when_a_rule_fails(page):
    at, s, lab = page
    r, errors = lab["sdpa"], lab["errors"]
    text = sentence(at, "FA2 and SDPA")
    m = match(r"within NUM \(FA2\) and NUM \(SDPA\) of float64", text)
    assert close(m[1], r.flash_error) and close(m[2], r.sdpa_error)
    if r.max_diff == 0:
        assert "bit for bit" in text
    else:
        d = match(r"differ by up to NUM .*?\((?:NUM eps|computed in fp32); (\d+)% of the outputs", text)
        assert close(d[1], r.max_diff) and abs(int(d[3]) - 100 * r.differing) <= 0.5
        assert (d[2] is None) == s.is_fp8 and (d[2] is None or close(d[2], r.max_diff / r.eps))
    passes = {row.kernel: row.passes for row in errors.rows}
    assert ("neither is wrong" in text) == (passes["flash2"] and passes["sdpa"])
    assert ("fails flash-attn's rule" in text) == (passes["flash2"] != passes["sdpa"])


def test_the_tile_sentence_quotes_the_spread_over_tile_sizes(page):
    at, _, lab = page
    r = lab["spread"]
    text = sentence(at, "Tiles of")
    m = match(r"Tiles of (\d+) to (\d+)", text)
    assert (int(m[1]), int(m[2])) == (min(r.blocks), max(r.blocks))
    if r.max_spread == 0:
        assert "bit for bit the same" in text and close(match(r"within NUM of float64", text)[1], max(r.errors))
        return
    m = match(r"by up to NUM(?: \(NUM eps\))?, while every tile size stays within NUM of float64 \(errors "
              r"NUM to NUM\)", text)
    assert close(m[1], r.max_spread) and close(m[3], max(r.errors))
    assert close(m[4], min(r.errors)) and close(m[5], max(r.errors))


def test_the_rescale_sentence_quotes_both_counts_the_output_change_and_the_largest_values(page):
    at, s, lab = page
    r = lab["rescale"]
    text = sentence(at, "With tau")
    assert float(match(r"With tau = NUM,", text)[1]) == (s.tau or 8.0)  # tau = 0 is compared with FA4's 8
    if r.lazy.total == 0:
        assert int(match(r"never rescales \((\d+) times with tau = 0", text)[1]) == r.classic.total
    else:
        m = match(r"rescales (once|\d+ times) instead of (\d+) \(NUMx fewer", text)
        assert m[1] == ("once" if r.lazy.total == 1 else f"{r.lazy.total} times") and int(m[2]) == r.classic.total
        assert close(m[3], r.classic.total / r.lazy.total)
    if r.max_out_diff == 0:
        assert "bit for bit the same" in text
    else:
        m = match(r"moves by at most NUM \(NUM eps of (\w+)\)", text)
        assert close(m[1], r.max_out_diff) and close(m[2], r.max_out_diff / r.out_eps) and m[3] == r.out_dtype
    m = match(r"P~ reach NUM \(at most 2\^NUM = NUM\) and l NUM \(the accumulator at most NUM\), "
              r"(far below|below|above) (\w+)'s NUM", text)
    assert close(m[1], r.lazy.max_p) and r.lazy.max_p <= 2 ** r.lazy.tau and close(m[3], 2 ** r.lazy.tau)
    assert close(m[4], r.lazy.max_l) and close(m[5], r.max_acc) and m[7] == "float32" and close(m[8], 3.4028e38)
    assert m[6] == "far below" and r.max_acc < 1e-6 * 3.4e38


def test_the_fp8_sentence_and_table_quote_the_2_by_2_rmse(page):
    at, _, lab = page
    t = lab["fp8"]
    off, on = t.cell(True, False).rmse, t.cell(True, True).rmse
    text = sentence(at, "On inputs with outlier features")
    m = match(r"lowers FA3's FP8 \((\w+)\) RMSE from NUM to NUM \(NUMx lower", text)
    assert m[1] == t.fmt and close(m[2], off) and close(m[3], on) and close(m[4], off / on) and on < off
    plain_off, plain_on = t.cell(False, False).rmse, t.cell(False, True).rmse
    m = match(r"on plain inputs it (changes little|lowers it too|raises it): NUM to NUM", text)
    assert close(m[2], plain_off) and close(m[3], plain_on)
    assert (m[1] == "changes little") == (abs(plain_on - plain_off) <= 0.1 * plain_off)
    table = sentence(at, "| RMSE, FP8")
    rows = {line.split("|")[1].strip(): [float(x) for x in line.split("|")[2:4]] for line in table.splitlines()[2:]}
    for kind, outliers in (("plain inputs", False), ("outlier features", True)):
        assert all(close(str(v), t.cell(outliers, h).rmse) for v, h in zip(rows[kind], (False, True), strict=True))


def test_the_causal_sentence_counts_the_keys_from_n_q_and_n_k(page):
    at, s, lab = page
    r = lab["causal"]
    text = sentence(at, "With N_q")
    m = match(r"With N_q = (\d+) queries and N_k = (\d+) keys", text)
    assert (int(m[1]), int(m[2])) == (s.n_q, s.n_k)
    offset = s.n_k - s.n_q
    if offset == 0:
        assert "are the same mask: the outputs are identical" in text and r.max_diff == 0
    elif offset > 0:
        m = match(r"keys 0..i\+(\d+): every query sees (\d+) keys more, and the outputs differ by up to NUM\. "
                  r"flash_decode\(causal=True\) matches bottom-right to NUM\.", text)
        assert int(m[1]) == int(m[2]) == offset and close(m[3], r.max_diff) and close(m[4], r.decode_diff)
    else:
        blind = s.n_q - s.n_k  # queries 0 .. -offset-1 see no key bottom-right
        fewer = max(min(i, s.n_k - 1) + 1 - (i + offset + 1) for i in range(blind, s.n_q))
        m = match(r"the first (\d+) queries see no key at all \(output 0\), the others up to (\d+) keys fewer, and "
                  r"the outputs differ by up to NUM\.", text)
        assert (int(m[1]), int(m[2])) == (blind, fewer) and close(m[3], r.max_diff)


def test_flash_attns_two_errors_on_screen_are_each_kernels_own_recomputed_here(page):
    """Section 6's sentence and chart quote, per kernel, max|kernel - SDPA's formula in the wider dtype| and
    max|SDPA in the dtype - the same|: recomputed here from the lab's inputs with torch alone for FA1, FA2 and
    flash_decode, and the verdict follows from the quoted pair."""
    at, s, lab = page
    x = lab_inputs(s)
    wide = torch.float32 if x.q.dtype in (torch.bfloat16, torch.float16) else torch.float64
    up = [t.to(wide) for t in (x.q, x.k, x.v)]
    ref = {c: F.scaled_dot_product_attention(*up, is_causal=c) for c in (False, True)}
    low = {c: F.scaled_dot_product_attention(x.q, x.k, x.v, is_causal=c) for c in (False, True)}
    p_dtype = None if s.p_precision is None else getattr(torch, PRECISION_DTYPES[s.p_precision])
    outs = {name: (flash_attention_forward(x.q, x.k, x.v, s.block, causal=s.causal, loop_order=order,
                                           rescale_threshold=s.tau, p_dtype=p_dtype), s.causal)
            for name, order in (("FA1", "kv_outer"), ("FA2", "q_outer"))}
    outs["decode"] = (flash_decode(x.q, x.k, x.v), False)
    text = sentence(at, "flash-attn's test, kernel by kernel")
    pairs = re.findall(r"(FA1|FA2|decode|backward d[QKV]) " + NUM + " vs " + NUM + r" \(", text)
    quoted = {name: (error, theirs) for name, error, theirs in pairs}
    assert set(quoted) == {"FA1", "FA2", "decode", "backward dQ", "backward dK", "backward dV"}
    for name, (out, causal) in outs.items():
        err = (out.double() - ref[causal].double()).abs().max().item()
        theirs = (low[causal].double() - ref[causal].double()).abs().max().item()
        assert close(quoted[name][0], err) and close(quoted[name][1], theirs), name
    failing = [n for n, (k, r) in quoted.items() if float(k) > 2 * float(r) * (1 + REL)]
    assert bool(failing) == ("outside 2x" in text)
    (chart,) = [f for title, f in charts(at).items() if title.startswith("flash-attn's test per kernel")]
    kernel, reference = chart["data"][:2]
    assert list(decode(kernel["x"])) == list(quoted)
    assert decode(kernel["y"]).tolist() == pytest.approx([row.error for row in lab["two"].rows])
    assert decode(reference["y"]).tolist() == pytest.approx([row.sdpa_error for row in lab["two"].rows])


def test_every_chart_draws_the_labs_numbers(page):
    at, s, lab = page
    figs = charts(at)
    assert len(figs) == 5 + (lab["spread"].max_spread > 0)  # the tile sizes' map only where they differ
    e = lab["errors"]
    (errors,) = [f for title, f in figs.items() if title.startswith("Max |error| against float64")]
    bars, *lines = [t for t in errors["data"] if t.get("x") != [None]]
    assert list(decode(bars["x"])) == [row.label for row in e.rows]
    assert decode(bars["y"]).tolist() == pytest.approx([row.stats.max_abs for row in e.rows])
    for line, row in zip(lines, e.rows, strict=True):
        got = decode(line["y"]).tolist()
        assert line["name"] == row.label and len(got) == s.n_q
        assert all(g == pytest.approx(w) for g, w in zip(got, row.stats.row_max_abs, strict=True) if w > 0)
    assert sorted(sh["y0"] for sh in errors["layout"]["shapes"]) == pytest.approx(
        sorted([e.eps, 2 * e.plain_max_abs + e.fwd_atol]))
    sp = lab["spread"]
    spreads = [f for title, f in figs.items() if title.startswith("FA2 over tile sizes")]
    assert len(spreads) == (sp.max_spread > 0)  # every tile size the same: said in words, not drawn
    for spread in spreads:  # the largest difference between the outputs of each pair of tile sizes
        assert list(decode(spread["data"][0]["x"])) == [str(b) for b in sp.blocks]
        z = spread["data"][0]["z"]
        drawn = [v for row in z for v in (decode(row).tolist() if isinstance(row, dict) else row)]
        assert drawn == pytest.approx([v for row in sp.pairwise for v in row])
    (rescale,) = [f for title, f in figs.items() if title.startswith("Online-softmax rescales")]
    rs = lab["rescale"]
    assert [decode(t["y"]).tolist() for t in rescale["data"]] == [list(rs.classic.per_tile), list(rs.lazy.per_tile)]
    (fp8,) = [f for title, f in figs.items() if title.startswith("FA3's FP8")]
    for trace, hadamard in zip(fp8["data"], (False, True), strict=True):
        assert decode(trace["y"]).tolist() == pytest.approx([lab["fp8"].cell(o, hadamard).rmse for o in (False, True)])
    (causal,) = [f for title, f in figs.items() if title.startswith("Keys each query sees")]
    heat = causal["data"][0]
    codes = decode(heat["z"]).tolist()
    for i, line in zip(decode(heat["y"]).tolist(), codes, strict=True):
        for j, code in zip(decode(heat["x"]).tolist(), line, strict=True):
            assert code == (j <= i) + 2 * (j <= i + s.n_k - s.n_q), (i, j)  # top-left 1, bottom-right 2
    assert decode(causal["data"][-1]["x"]).tolist() == pytest.approx(list(lab["causal"].row_diff))


def test_the_sdpa_error_quoted_at_the_defaults_is_pytorchs_own_against_float64(make_app):
    bf16 = [x.to(torch.bfloat16) for x in make_inputs(1, 2, 128, 256, 64, dtype=torch.float64, outliers=True, seed=0)]
    ref = F.scaled_dot_product_attention(*(x.double() for x in bf16))  # float64 attention of the bf16 inputs
    mine = F.scaled_dot_product_attention(*bf16)
    error = (mine.double() - ref).abs().max().item()
    at = make_app(**VIEW)
    text = sentence(at, "FA2 and SDPA")
    assert close(match(r"and NUM \(SDPA\) of float64", text)[1], error)
    assert close(match(r"SDPA NUM\. flash-attn", sentence(at, "In bf16"))[1], error)


def test_a_hostile_link_is_repaired_with_a_notice_and_the_view_still_draws(make_app):
    query = {"nmblock": "abc", "nmtau": "-3", "nmdtype": "int8", "nmnq": "99999", "nmhad": "maybe",
             "nmpdtype": "`fp64`", "nmnk": "0"}
    at = make_app(**VIEW, **query)
    assert_clean(at)
    (warning,) = [w.value for w in at.warning]
    assert warning.startswith("**Some settings in this link were adjusted:**")
    for key in query:
        assert f"`{key}=" in warning, key
    assert at.number_input(key="n_q").value == 1024 and at.number_input(key="n_k").value == 1
    assert at.selectbox(key="input_dtype").value == "bfloat16" and at.selectbox(key="p_dtype").value == "none"
    assert at.select_slider(key="tau").value == 0 and at.toggle(key="hadamard").value is True
    repaired = lab_of({k: v for k, v in dict(at.query_params).items() if k != "view"})  # the link as repaired
    assert len(charts(at)) == 5 + (tile_spread(repaired).max_spread > 0)


@pytest.mark.parametrize(("query", "words"), [
    ({"nmnq": "1024", "nmnk": "1024", "nmblock": "4"}, "Raise the tile size to at least 8"),
    ({"nmnq": "1024", "nmnk": "1024", "nmblock": "2"}, "the Python tile loop allows"),
])
def test_a_setting_over_a_cap_is_refused_with_a_message_that_says_how_to_fix_it(make_app, query, words):
    at = make_app(**VIEW, **query)
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert words in error and not charts(at)


def test_settings_estimated_long_wait_for_the_button_then_show_the_labs_numbers(make_app, monkeypatch):
    monkeypatch.setattr(numerics_runs, "AUTO_S", 0.0)  # every run counts as long: behind the button
    query = {"nmnq": "64", "nmnk": "96", "nmblock": "16"}
    at = make_app(**VIEW, **query)
    assert_clean(at)
    assert not charts(at) and any("Press **Run the numerics lab**" in i.value for i in at.info)
    at.button(key="numerics_run").click().run()
    assert_clean(at)
    r = kernel_errors(lab_of(query))
    assert all(close(quoted_errors(at)[row.label], row.stats.max_abs) for row in r.rows)
    drawn = 5 + (tile_spread(lab_of(query)).max_spread > 0)  # the tile sizes' map only where they differ
    assert len(charts(at)) == drawn
    at.run()  # a rerun keeps the result for these settings without a button press
    assert len(charts(at)) == drawn


def test_a_widget_change_reruns_the_lab_at_the_new_settings(make_app):
    at = make_app(**VIEW)
    at.toggle(key="numerics_causal").set_value(True).run()
    at.selectbox(key="input_dtype").set_value("float16").run()
    assert_clean(at)
    (ran,) = [c.value for c in at.caption if c.value.startswith("**Ran with**")]
    assert "fp16" in ran and "not causal" not in ran and "causal" in ran
    r = kernel_errors(lab_of({"nmcausal": "1", "nmdtype": "float16"}))
    assert sentence(at, "In fp16") and all(close(quoted_errors(at)[row.label], row.stats.max_abs) for row in r.rows)
    assert at.query_params["nmcausal"] == "1" and at.query_params["nmdtype"] == "float16"  # the link follows


def test_a_cancelled_lab_run_stops_at_its_next_report_and_is_not_cached():
    from flashviz.measure.progress import Cancelled
    from flashviz.views.numerics.page import cached_lab

    args = astuple(LabSettings(n_q=40, n_k=72, block=16))
    cached_lab.clear()
    labels: list[str] = []

    def cancel(done: int, total: int, label: str, *_: object) -> None:
        labels.append(label)
        if label == numerics_runs.STEPS[2]:  # the tile sizes come next: stop before them
            raise Cancelled("cancelled by the test")

    with pytest.raises(Cancelled):
        cached_lab(args, _progress=cancel)
    assert labels == list(numerics_runs.STEPS[:3])
    seen: list[tuple] = []
    result = cached_lab(args, _progress=lambda *a: seen.append(a))
    assert [a[2] for a in seen][:3] == list(numerics_runs.STEPS[:3]) and seen[-1][:2] == (seen[-1][1],) * 2
    assert result.errors == kernel_errors(LabSettings(n_q=40, n_k=72, block=16))  # measured anew, then cached
    again: list[tuple] = []
    assert cached_lab(args, _progress=lambda *a: again.append(a)) == result and not again


def test_the_lessons_claims_are_the_numbers_the_view_shows_when_it_opens(make_app):
    from flashviz.app.state import Settings
    from flashviz.views.numerics.data import VIEW_DEFAULTS, flash_sdpa_gap_in_eps, hadamard_gain, rescales_saved
    from flashviz.views.numerics.page import lab_settings

    assert lab_settings(Settings()) == VIEW_DEFAULTS  # the view opens at the settings the claims are made at
    at = make_app(**VIEW)
    gap = flash_sdpa_gap_in_eps()
    assert gap == 1.0 and close(match(r"\(NUM eps;", sentence(at, "FA2 and SDPA"))[1], gap)  # one bf16 step
    saved = rescales_saved()
    assert saved > 10 and close(match(r"\(NUMx fewer", sentence(at, "With tau"))[1], saved)  # 98 -> 3
    gain = hadamard_gain()
    assert gain > 1.5 and close(match(r"\(NUMx lower", sentence(at, "On inputs with outlier"))[1], gain)
