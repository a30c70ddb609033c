"""The Decoding view: its figures' structure, the animation's numbers against flash_decode's own events, and the
dashboard under AppTest (defaults, a paged GQA link, hostile links, every claim checked at the settings shown, the
timing run)."""

from __future__ import annotations

import base64
import math
import re
import threading
import time

import numpy as np
import pandas as pd
import pytest

from flashviz.app.query import parse_query
from flashviz.app.state import Settings
from flashviz.core.decode import num_splits_heuristic
from flashviz.measure.progress import Cancelled
from flashviz.measure.verdict import compare, estimate_of, row_estimate
from flashviz.model.decode import decode_cost
from flashviz.model.decode_batch import decode_roofline_rows
from flashviz.model.roofline import GPUS, bound
from flashviz.units import format_bytes
from flashviz.views.decode.animation import decode_animation, running_stats, split_blocks, split_color
from flashviz.views.decode.data import SPARE_PAGES, DecodeSetup, DecodeTrace, seq_lens
from flashviz.views.decode.figures import bandwidth_figure, block_table_figure, decode_roofline_figure
from flashviz.views.decode.page import animation_data, decode_timing
from flashviz.views.decode.sentences import (
    CLOSE,
    FASTER,
    FOLLOWS,
    NOT_FOLLOWS,
    SLOWER,
    bytes_time_md,
    bytes_vs_time,
    measured_md,
    split_verdicts,
    splits_md,
)
from flashviz.vocab import DTYPE_BYTES
from tests._apptest import assert_clean, charts
from tests._numbers import counted, equated, numbers, says, shows, stated

SMALL = {"view": "decode", "declen": "1024", "d": "16"}  # one AppTest run in a second or two
MIN_FONT_PX = 16  # readable on a projector


def array(z) -> np.ndarray:
    """A plotly typed array ({"dtype", "bdata"}) or a list -> numpy array."""
    if isinstance(z, dict):
        return np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"]))
    return np.asarray(z)


def text_of(at) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption])


def open_view(make_app, **query: str):
    at = make_app(**{**SMALL, **query})
    assert_clean(at)
    return at


# ----------------------------------------------------------------------------------------------------------------------
# the animation's data: built from flash_decode's events, consistent with them


@pytest.mark.parametrize("lens, page, splits", [((1000, 333), 0, 3), ((700,), 64, 4), ((512, 512, 100), 16, 1)])
def test_running_m_and_l_fold_to_the_split_events_and_the_weights_merge(lens, page, splits):
    trace, table, num_pages, err = animation_data(lens, page, splits)
    assert len(trace.splits) == DecodeSetup(lens, 1, 1, 16, page, splits, "float32", 1).used_splits(splits)
    for blocks, m_s, l_s in zip(split_blocks(trace), trace.split_m, trace.split_l, strict=True):
        ms, ls = running_stats([trace.block_m[i] for i in blocks], [trace.block_l[i] for i in blocks])
        assert ms[-1] == pytest.approx(m_s, rel=1e-5, abs=1e-5) and ls[-1] == pytest.approx(l_s, rel=1e-4)
    assert sum(trace.weights) == pytest.approx(1.0, abs=1e-5)
    for w, lse_s in zip(trace.weights, trace.split_lse, strict=True):
        assert w == pytest.approx(math.exp(lse_s - trace.lse), rel=1e-5)
    assert trace.lse == pytest.approx(math.log(sum(math.exp(x) for x in trace.split_lse)), rel=1e-6)
    if page:
        assert num_pages == sum(math.ceil(n / page) for n in lens) + SPARE_PAGES and err < 1e-5
        used = [p for row, n in zip(table, lens, strict=True) for p in row[: math.ceil(n / page)]]
        assert len(set(used)) == len(used)  # no page shared
    else:
        assert table is None and num_pages == 0


def test_running_stats_is_the_online_softmax():
    ms, ls = running_stats([1.0, 3.0, 2.0], [2.0, 1.0, 4.0])
    assert ms == [1.0, 3.0, 3.0]
    assert ls[-1] == pytest.approx(2 * math.exp(-2) + 1 + 4 * math.exp(-1))


# ----------------------------------------------------------------------------------------------------------------------
# figure structure


def small_trace() -> DecodeTrace:
    trace, *_ = animation_data((1000, 400), 0, 3)
    return trace


def test_animation_colours_blocks_by_split_and_ends_with_the_merge_weights():
    trace = small_trace()
    fig = decode_animation(trace)
    per_split = split_blocks(trace)
    cache = fig.data[0]
    for s, blocks in enumerate(per_split):
        assert all(cache.marker.color[i] == split_color(s) for i in blocks)
    names = [f.name for f in fig.frames]
    assert names[0] == "0" and names[-1] == "merge" and len(names) == max(len(b) for b in per_split) + 2
    merge = fig.frames[-1].data
    assert list(merge[-1].y) == pytest.approx(trace.weights)
    assert list(fig.frames[0].data[-1].y) == [0.0] * len(trace.splits)  # weights appear only at the merge
    assert all(o == 1.0 for o in merge[0].marker.opacity)  # every block read by the end
    for s in range(len(trace.splits)):  # lanes: m then l per split, ending at the events' values
        assert merge[1 + 2 * s].y[-1] == pytest.approx(trace.split_m[s], rel=1e-5)
        assert merge[2 + 2 * s].y[-1] == pytest.approx(trace.split_l[s], rel=1e-4)
    step1 = fig.frames[1].data
    assert all(len(step1[1 + 2 * s].x) == 1 for s in range(len(trace.splits)))  # splits advance side by side
    assert len(fig.layout.sliders[0].steps) == len(names)
    assert fig.layout.xaxis4.title.text and "tokens" in fig.layout.xaxis4.title.text
    assert all(fig.layout[f"yaxis{i}"].range is not None for i in (1, 2, 3, 4))  # fixed across frames


def test_the_slider_reads_as_a_sentence_at_every_frame_the_merge_included():
    trace = small_trace()
    fig = decode_animation(trace)
    slider = fig.layout.sliders[0]
    most = max(len(b) for b in split_blocks(trace))
    shown = [(slider.currentvalue.prefix or "") + step.label for step in slider.steps]  # what the slider writes
    for frame, text in zip(fig.frames[:-1], shown[:-1], strict=True):
        read = len(frame.data[1].x)  # split 0's m lane: one point per block it has read at this frame
        assert text == f"each split has read {read} of its {most} blocks"
    assert shown[-1].startswith("merge") and "read merge" not in shown[-1]


def readable(fig) -> None:
    assert fig.layout.title.text
    t = fig.layout.template.layout
    assert min(t.font.size, t.xaxis.tickfont.size, t.legend.font.size, t.hoverlabel.font.size) >= MIN_FONT_PX
    assert all(tr.hovertemplate and "%{" in tr.hovertemplate for tr in fig.data)


def test_every_figure_has_titles_large_fonts_and_hover_numbers():
    trace = small_trace()
    roofs = pd.DataFrame([{"device": d.name, "peak_flops": d.peak("float16"), "bandwidth": d.bandwidth} for d in GPUS])
    setup = DecodeSetup((1000, 400), 8, 2, 64, 0, 3, "float16", 2)
    df = pd.DataFrame({"label": ["flash_decode S=1", "SDPA (enable_gqa)"], "time_s": [0.002, 0.004],
                       "q1_s": [0.0019, 0.0039], "q3_s": [0.0021, 0.0042], "kv_bytes": [2e7, 2e7]})
    figs = [decode_animation(trace), block_table_figure([[3, 1], [0, 2]], [5, 2], 4, 6, [(0, 4), (4, 8)]),
            decode_roofline_figure(decode_roofline_rows(setup.lens, 64, 8, 2, "float16"), roofs, dtype="float16"),
            bandwidth_figure(df, 5e9)]
    for fig in figs:
        readable(fig)
    roof = figs[2]
    assert roof.layout.xaxis.type == "log" and "FLOP/byte" in roof.layout.xaxis.title.text
    assert "FLOP/s" in roof.layout.yaxis.title.text
    assert sum(t.name.endswith("roof") for t in roof.data) == len(GPUS)
    assert {t.name for t in roof.data} >= {"MHA", "GQA (g = 4)", "MQA", "prefill (FA2)"}
    bars = figs[3]
    assert list(bars.data[0].y) == pytest.approx([10.0, 5.0])  # GB/s = bytes / time
    assert bars.layout.shapes[0].y0 == pytest.approx(5.0) and "GB/s" in bars.layout.yaxis.title.text


def test_block_table_writes_physical_pages_and_colours_by_split_and_owner():
    fig = block_table_figure([[3, 1, 5], [0, 2, 0]], [9, 5], 4, 7, [(0, 8), (8, 12)])
    table, pool = fig.data
    assert [list(r) for r in table.text] == [["3", "1", "5"], ["0", "2", ""]]
    assert [list(r) for r in table.z] == [[0, 0, 1], [0, 0, None]]  # page 2 starts at key 8: split 1
    assert list(pool.z[0]) == [1, 0, 1, 0, None, 0, None]  # owner sequence of each physical page; 4 and 6 free
    assert "physical page 5" in table.customdata[0][2] and table.texttemplate == "%{text}"
    assert list(pool.text[0])[:2] == ["1·0", "0·1"] and pool.text[0][4] == "free"  # physical 0: seq 1, page 0
    # a long sequence wraps into rows of 16 pages, every page numbered, coloured by the split that reads it
    pages = list(range(40))
    wide = block_table_figure([pages], [40 * 16], 16, 42, [(0, 320), (320, 640)])
    table = wide.data[0]
    assert [len([c for c in row if c]) for row in table.text] == [16, 16, 8]
    assert [int(c) for row in table.text for c in row if c] == pages
    assert {v for row in table.z for v in row if v is not None} == {0, 1} and next(iter(table.y)) == "seq 0: 0–15"


# ----------------------------------------------------------------------------------------------------------------------
# the view, with every claim checked at the settings shown


def expected_claims(setup: DecodeSetup) -> dict[str, object]:
    costs = [decode_cost(n, setup.d, heads=setup.heads_q, heads_kv=setup.heads_kv, dtype=setup.dtype)
             for n in setup.lens]
    kv = 2 * setup.heads_kv * setup.d * DTYPE_BYTES[setup.dtype] * sum(setup.lens)
    assert kv == sum(c.kv_bytes for c in costs)
    hbm = sum(c.hbm_bytes for c in costs)
    intensity = sum(c.flops for c in costs) / hbm
    bounds = {bound(intensity, d, setup.dtype) for d in GPUS}
    return {"kv": kv, "intensity": intensity, "bounds": bounds, "other": hbm - kv}


def check_story(at, setup: DecodeSetup) -> str:
    text = text_of(at)
    want = expected_claims(setup)
    assert f"**{format_bytes(want['kv'])} per step**" in text
    assert f"{format_bytes(want['kv'] / len(setup.lens))} per generated token" in text
    assert f"all but {want['other']:,} of them the cache" in text
    n_blocks = math.ceil(max(setup.lens) / (setup.page or 256))
    assert f"holds **{max(setup.lens)} keys in {n_blocks} KV block(s)** of {setup.page or 256} keys" in text
    assert f"**Arithmetic intensity {want['intensity']:.3g} FLOP/byte**" in text
    step = next(p for p in text.split("\n") if p.startswith("This step is"))
    for kind in ("memory", "compute"):
        assert (f"**{kind}-bound**" in step.split(" Prefill")[0]) == (kind in want["bounds"]), step
    return text


def test_defaults_draw_the_step_the_story_and_a_run_button(make_app):
    at = make_app(view="decode")
    assert_clean(at)
    s = Settings()
    setup = DecodeSetup(seq_lens(s.cache_len, s.batch_lens), s.q_heads, s.kv_heads, s.d, 0, 4, s.dtype, 2)
    text = check_story(at, setup)
    assert {"One decode step, split along the KV cache (Flash-Decoding)",
            "Decoding on the roofline, next to prefill"} <= set(charts(at))
    assert shows(stated(text, "cut into"), setup.splits) and "**memory-bound**" in text  # bound: check_story
    assert shows(counted(text, "× fewer K/V bytes"), setup.heads_q / setup.heads_kv)  # H_q = 8 over H_kv = 2
    assert at.query_params["view"] == "decode" and at.query_params["dechkv"] == "2"
    kv = 2 * 2 * 64 * 4 * sum(setup.lens)  # K and V x H_kv x d x fp32 bytes x keys
    (idle,) = [i.value for i in at.info if i.value.startswith("Press **Run decode timing**")]
    assert idle == (f"Press **Run decode timing** to time 6 implementations × 3 repeat(s) on {format_bytes(kv)} "
                    f"of K/V cache (and flash_decode on MHA's {format_bytes(4 * kv)}, to set bytes against time).")
    # flash_decode at S = 1, 2 and the chosen 4, at 4 on MHA's K/V, SDPA and naive
    assert "Decode step: K/V cache read rate, measured" not in charts(at)  # nothing timed before the press


def test_a_paged_gqa_link_draws_the_block_table_and_equal_results(make_app):
    at = open_view(make_app, decpage="64", dechq="32", dechkv="8", declens="ragged", decsplits="3")
    setup = DecodeSetup(seq_lens(1024, "ragged"), 32, 8, 16, 64, 3, "float32", 2)
    text = check_story(at, setup)
    spec = charts(at)["Paged cache, 64 keys per page: block table → pages"]
    table = spec["data"][0]["text"]
    assert [sum(c != "" for c in row) for row in table] == [math.ceil(n / 64) for n in setup.lens]
    pages = sum(math.ceil(n / 64) for n in setup.lens)
    assert f"use {pages} of the pool's {pages + SPARE_PAGES} pages" in text
    err = float(text.split("by at most ")[1].split(".\n")[0].rstrip("."))
    assert err < 1e-5
    assert shows(counted(text, "× fewer K/V bytes"), 32 / 8) and shows(stated(text, "cut into"), setup.splits)
    assert not at.warning


def test_mqa_with_many_heads_is_compute_bound_on_fp32_gpus_and_says_so(make_app):
    at = open_view(make_app, dechq="64", dechkv="1", declens="one")
    text = check_story(at, DecodeSetup((1024,), 64, 1, 16, 0, 4, "float32", 2))
    assert "**compute-bound**" in text  # check_story ties it to the intensity
    assert shows(counted(text, "× fewer K/V bytes"), 64 / 1)  # H_q over H_kv


def test_mha_fp16_is_about_one_flop_per_byte(make_app):
    at = open_view(make_app, dechq="8", dechkv="8", dtype="float16", declens="one", d="64")
    setup = DecodeSetup((1024,), 8, 8, 64, 0, 4, "float16", 2)
    text = check_story(at, setup)
    assert expected_claims(setup)["intensity"] == pytest.approx(1.0, rel=0.05)
    assert "**This is MHA.**" in text and shows(counted(text, "× fewer K/V bytes"), 8)  # MQA reads 1 of H_q = 8 heads


def test_auto_splits_states_the_heuristic_it_used(make_app):
    at = open_view(make_app, decsplits="auto", declens="one", dechq="4", dechkv="1", threads="2")
    n_blocks = math.ceil(1024 / 256)
    want = num_splits_heuristic(1, 2, n_blocks)  # one work tile on two threads: the rule splits
    text = text_of(at)
    assert want > 1 and says(text.split("**Auto** chose")[1].split("\n")[0], want, 1, 2)  # S; tiles on threads
    idle = text.split("leave threads idle")
    assert shows(numbers(idle[0])[-1], 1) and shows(equated(idle[1])[0], want) and "splits" in idle[1]
    at = open_view(make_app, decsplits="auto", declens="four", threads="2")  # 4 x 2 tiles fill 2 threads
    assert num_splits_heuristic(4 * 2, 2, n_blocks) == 1
    said = text_of(at)
    assert says(said.split("**Auto** chose")[1].split("\n")[0], 1, 4 * 2, 2)  # S = 1: 8 tiles on 2 threads
    assert "does not split" in said and shows(equated(said.split("does not split")[1])[0], 1)


@pytest.mark.parametrize("query", [{}, {"decsplits": "auto"}, {"declens": "ragged", "decpage": "64", "declen": "4096"}])
def test_the_page_says_why_one_splits_and_what_the_merge_weights_mean(make_app, query):
    at = make_app(view="decode", **query)
    assert_clean(at)
    s, _ = parse_query(dict(at.query_params))
    setup = DecodeSetup(seq_lens(s.cache_len, s.batch_lens), s.q_heads, s.kv_heads, s.d, s.page_size,
                        None if s.splits == "auto" else int(s.splits), s.dtype, s.threads)
    tiles = len(setup.lens) * setup.heads_kv * math.ceil(setup.group / 64)  # B H_kv ceil(g / 64)
    text = text_of(at)
    assert f"A decode step has only {tiles} work tile(s)" in text
    gpu = num_splits_heuristic(tiles, 2 * 132, setup.n_blocks)  # an H100: 132 SMs, 2 work tiles per SM
    assert f"an H100 has 132 SMs, 264 units, so without splits {264 - tiles} of them would idle" in text
    assert f"flash-attn's rule picks S = {gpu} there" in text
    here = num_splits_heuristic(tiles, s.threads, setup.n_blocks)
    assert f"(S = {here})" in text or f"the rule splits: S = {here}" in text
    # the merge: the weights the sentence quotes are the bars of the animation's last frame
    fig = charts(at)["One decode step, split along the KV cache (Flash-Decoding)"]
    bars = array(fig["frames"][-1]["data"][-1]["y"])
    (merge,) = [m.value for m in at.markdown if m.value.startswith("**The merge.**")]
    if len(bars) == 1:
        assert "One split" in merge and bars[0] == 1 and says(merge, bars[0])  # its weight: 1
    else:
        assert ", ".join(f"split {k} {w:.2f}" for k, w in enumerate(bars)) in merge
        top = int(np.argmax(bars))  # the split that holds the keys the query matches carries the most
        assert f"split {top}, which holds them, has the largest L_s and gets {bars[top]:.0%}" in merge
        assert bars[top] > 1 / len(bars)
    assert "each split has read k of its" in text


def split_rows(times_ms, spread_ms, repeats=20):
    """Timed flash_decode rows at S = 1, 2, 4 and SDPA: medians with 95% intervals median -/+ spread (ms), and
    quartiles as wide."""
    labels = ["flash_decode S=1", "flash_decode S=2", "flash_decode S=4", "SDPA (enable_gqa)"]
    t, w = np.array(times_ms) / 1e3, np.array(spread_ms) / 1e3
    return pd.DataFrame({"label": labels, "time_s": t, "q1_s": t - w, "q3_s": t + w, "time_lo_s": t - w,
                         "time_hi_s": t + w, "repeats": repeats})


def assert_split_timings_said(text, df):
    """Each split count's median and 95% interval (ms), and its time against S = 1's by the verdict rule (the ratio
    and its interval where it separates, else "too close to call" and the interval), as the sentence states them."""
    by_s = {int(str(r.label).split("S=")[1]): r for r in df.itertuples() if str(r.label).startswith("flash_decode")}
    timed = text.split("**", 2)[2].split(". Here")[0]  # "... S = 1: 10 ms (95% interval 9.8–10.2); S = 2: ..."
    parts = re.split(r"S = (\d+): ", timed)[1:]
    said = dict(zip((int(x) for x in parts[::2]), parts[1::2], strict=True))
    assert set(said) == set(by_s)
    for s, r in by_s.items():
        ms = (r.time_s * 1e3, r.time_lo_s * 1e3, r.time_hi_s * 1e3)
        if s == 1:
            assert says(said[s].replace("95% interval", ""), *ms), said[s]
            continue
        v = compare(estimate_of(r.time_s, r.time_lo_s, r.time_hi_s, r.repeats),
                    estimate_of(by_s[1].time_s, by_s[1].time_lo_s, by_s[1].time_hi_s, by_s[1].repeats))
        ratio = (v.ratio,) if v.separated else ()
        assert says(said[s].replace("95% interval", "").replace("S = 1", ""), *ms, *ratio, v.ratio_low,
                    v.ratio_high), said[s]
        assert said[s].split("S = 1's ")[1].startswith("too close to call") != v.separated


def assert_tiles_against_units_said(text, tiles, units):
    """The work tiles of S = 1 against the threads, and the idle ones, as the sentence states them."""
    assert shows(counted(text, r"work tile"), tiles) and shows(counted(text, r"threads"), units)
    assert ("none is idle" in text) == (tiles >= units)
    if tiles < units:
        assert shows(stated(text, r"leaving"), units - tiles)


def test_the_split_timings_are_told_against_s_equals_one_in_both_directions():
    setup = DecodeSetup((1024, 341), 8, 2, 64, 0, 4, "float32", 2)  # 4 work tiles
    assert setup.work_tiles() == 4
    df = split_rows([10, 12, 13, 5], [0.2] * 4)
    assert split_verdicts(df) == {2: SLOWER, 4: SLOWER}
    slower = splits_md(df, setup, 2, "cpu")
    assert "every split count was slower" in slower
    assert_split_timings_said(slower, df)
    assert_tiles_against_units_said(slower, setup.work_tiles(), 2)
    faster = split_rows([10, 6, 4, 5], [0.2] * 4)
    assert split_verdicts(faster) == {2: FASTER, 4: FASTER}
    assert_split_timings_said(splits_md(faster, setup, 16, "cpu"), faster)
    assert_tiles_against_units_said(splits_md(faster, setup, 16, "cpu"), setup.work_tiles(), 16)
    assert splits_md(df[df["label"] != "flash_decode S=1"], setup, 2, "cpu") == ""


@pytest.mark.parametrize("spread_ms, repeats, wanted", [
    (0.2, 20, {2: CLOSE, 4: FASTER}),  # S = 4 took 0.53x S = 1's time and the intervals separate; S = 2's overlap
    (3.0, 20, {2: CLOSE, 4: CLOSE}),  # the same medians in noise: nothing separates
    (0.2, 3, {2: CLOSE, 4: CLOSE}),  # three repeats: no 95% interval of a median
])
def test_a_split_count_is_called_faster_only_where_the_measurements_separate(spread_ms, repeats, wanted):
    df = split_rows([10, 10.1, 5.3, 4], [spread_ms] * 4, repeats)  # H_kv = 1's case: S = 4 at 0.53x S = 1
    found = split_verdicts(df)
    assert found == wanted
    by_s = {int(r.label.split("S=")[1]): r for r in df.iloc[:3].itertuples()}
    for s, v in found.items():  # the verdict is compare()'s, nothing else
        separated = compare(estimate_of(by_s[s].time_s, by_s[s].time_lo_s, by_s[s].time_hi_s, repeats),
                            estimate_of(by_s[1].time_s, by_s[1].time_lo_s, by_s[1].time_hi_s, repeats)).separated
        assert (v == FASTER) == separated
    text = splits_md(df, DecodeSetup((1024,), 1, 1, 64, 0, 4, "float32", 2), 2, "cpu")
    assert "at least as fast" not in text
    assert_split_timings_said(text, df)
    named = {kind: [int(x) for x in re.findall(r"\d+", m[1])] if (m := re.search(rf"S = ([\d, ]+) {words}", text))
             else [] for kind, words in ((FASTER, r"(?:was|were) faster than S = 1"),
                                         (CLOSE, r"against S = 1 is too close to call"))}
    if "every split count was faster" in text:
        named[FASTER] = sorted(found)
    assert named == {kind: [s for s, v in found.items() if v == kind] for kind in (FASTER, CLOSE)}
    if CLOSE in found.values():
        assert shows(counted(text, "repeat"), repeats)


def gqa_rows(bytes_ratio, time_ratio, spread, repeats=20, small_bytes=2**22):
    """flash_decode at S = 2 on this GQA's K/V and on MHA's: 95% intervals (and quartiles) median x (1 -/+ spread)."""
    t = np.array([1e-3, 1e-3 * time_ratio])
    kv = np.array([small_bytes, small_bytes * bytes_ratio])
    return pd.DataFrame({"label": ["flash_decode S=2", "MHA K/V: flash_decode S=2"], "time_s": t,
                         "q1_s": t * (1 - spread), "q3_s": t * (1 + spread), "time_lo_s": t * (1 - spread),
                         "time_hi_s": t * (1 + spread), "kv_bytes": kv,
                         "GB_per_s": kv / t / 1e9, "repeats": repeats})


@pytest.mark.parametrize("time_ratio, spread, repeats, wanted", [
    (1.8, 0.02, 20, NOT_FOLLOWS),  # what was measured here: 4x fewer bytes gave 1.8x
    (3.9, 0.02, 20, FOLLOWS),
    (2.8, 0.5, 20, CLOSE),  # its interval reaches into the band around 4x
    (4.0, 0.3, 20, CLOSE),  # the ratio on the bytes', but the medians not known to +-5%: no verdict
    (3.9, 0.02, 3, CLOSE),  # three repeats: no 95% interval
])
def test_time_follows_bytes_only_where_the_measured_ratios_show_it(time_ratio, spread, repeats, wanted):
    setup = DecodeSetup((4096,), 8, 2, 64, 0, 2, "float32", 2)
    df = gqa_rows(4.0, time_ratio, spread, repeats)
    r = bytes_vs_time(df, 20e9, setup, 2)
    assert r.bytes_ratio == 4.0 and r.time_ratio == pytest.approx(time_ratio)
    assert r.lo == pytest.approx(time_ratio * (1 - spread) / (1 + spread))
    assert r.follows == wanted
    rates = df["GB_per_s"] * 1e9 / 20e9  # the share of the probe's bandwidth each run reached
    assert r.shares == pytest.approx((rates[1], rates[0]))
    text = bytes_time_md(df, 20e9, setup, 2)
    assert ("Time follows bytes here" in text) == (wanted == FOLLOWS)
    # the ratios and shares it states, from the rows themselves: MHA's K/V against this GQA's, and the probe's 20 GB/s
    assert shows(counted(text, r"× the bytes"), df["kv_bytes"][1] / df["kv_bytes"][0])
    assert shows(counted(text, r"× the time"), df["time_s"][1] / df["time_s"][0])
    lo, hi = df["time_lo_s"][1] / df["time_hi_s"][0], df["time_hi_s"][1] / df["time_lo_s"][0]
    assert shows(stated(text, r"95% interval,", 0), lo) and shows(stated(text, r"95% interval,", 1), hi)
    assert shows(stated(text, r"read the cache at", 0), 100 * min(rates))
    assert shows(stated(text, r"read the cache at", 1), 100 * max(rates)) and shows(counted(text, r"GB/s this"), 20)
    assert bytes_vs_time(df.iloc[:1], 20e9, setup, 2) is None  # no reference run: nothing to say
    assert bytes_vs_time(df, None, setup, 2).shares is None


def test_asking_for_more_splits_than_blocks_says_how_many_were_used(make_app):
    at = open_view(make_app, declen="256", decsplits="8")
    asked = text_of(at).split("You asked for")[1].split("\n")[0]
    assert says(asked, 8, math.ceil(256 / 256), 1)  # asked S; one 256-key block; so at most one split


def test_settings_round_trip_through_the_link(make_app):
    wanted = Settings(cache_len=1000, q_heads=12, kv_heads=3, splits="3", page_size=16, batch_lens="four",
                      view="decode", d=16)
    at = make_app(**wanted.to_query())
    assert_clean(at)
    assert not at.warning
    assert at.query_params == wanted.to_query()
    assert at.selectbox(key="kv_heads").options == ["1 (MQA)", "2 (GQA, g = 6)", "3 (GQA, g = 4)", "4 (GQA, g = 3)",
                                                  "6 (GQA, g = 2)", "12 (MHA)"]


@pytest.mark.parametrize("query, fixed", [
    ({"dechq": "8", "dechkv": "3"}, {"dechkv": "2"}),
    ({"dechq": "12", "dechkv": "64"}, {"dechkv": "12"}),
    ({"declen": "-5", "decsplits": "999"}, {"declen": "1", "decsplits": "4"}),
    ({"decpage": "99999", "declens": "<b>x</b>"}, {"decpage": "4096", "declens": "pair"}),
])
def test_hostile_decoding_links_are_repaired_with_a_notice(make_app, query, fixed):
    at = open_view(make_app, **query)
    assert at.warning, "a repaired value must be announced"
    for key, value in fixed.items():
        assert at.query_params[key] == value, (key, at.query_params)
    if "kv_heads" in fixed:
        assert f"using H_kv = {fixed['kv_heads']}" in at.warning[0].value
        at.run()  # the repaired value sticks
        assert_clean(at)
        assert at.query_params["dechkv"] == fixed["kv_heads"] and not at.warning


def test_changing_h_q_repairs_h_kv_and_offers_only_divisors(make_app):
    at = open_view(make_app, dechq="8", dechkv="8")
    at.select_slider(key="q_heads").set_value(12).run()
    assert_clean(at)
    assert at.query_params["dechkv"] == "6" and "using H_kv = 6" in at.warning[0].value
    assert len(at.selectbox(key="kv_heads").options) == 6


def test_a_cache_too_large_to_time_live_is_refused_with_a_fix(make_app):
    at = make_app(view="decode", declen="65536", dechq="64", dechkv="64", declens="four", d="128")
    need = 2 * 4 * 65 * 65536 * 128 * 4  # K and V of 4 sequences, 64 heads and MQA's 1, fp32; nothing repeated
    assert any(f"needs {format_bytes(need)} of K/V tensors (the cache, the MQA cache it is compared with); the "
               "live cap" in e.value
               and "Lower the cache length" in e.value for e in at.error)


def test_the_timing_run_measures_every_implementation_and_says_what_it_saw(make_app):
    at = open_view(make_app, dechq="4", dechkv="1", declens="pair", reps="2", decpage="64")
    at.button(key="decode_run").click().run()
    assert_clean(at)
    fig = charts(at)["Decode step: K/V cache read rate, measured"]
    df = at.dataframe[-1].value
    assert list(df["label"]) == ["flash_decode S=1", "flash_decode S=2", "flash_decode S=4",
                                 "MHA K/V: flash_decode S=4", "SDPA (enable_gqa)", "naive (K/V repeated)"]
    kv = 2 * 1 * 16 * 4 * sum(seq_lens(1024, "pair"))  # the chosen S = 4 is timed once; MQA against MHA's 4 heads
    assert list(df["kv_bytes"]) == [kv] * 3 + [4 * kv] + [kv] * 2 and (df["repeats"] == 2).all()
    kv_text = f"on {format_bytes(kv)} of K/V cache"
    assert any("to time 6 implementations × 2 repeat(s)" in i.value and kv_text in i.value for i in open_view(
        make_app, dechq="4", dechkv="1", declens="pair", reps="2", decpage="64").info)
    r = bytes_vs_time(df, None, DecodeSetup(seq_lens(1024, "pair"), 4, 1, 16, 64, 4, "float32", 2), 2)
    assert r.bytes_ratio == 4.0 and r.follows == CLOSE  # two repeats: no verdict
    assert list(array(fig["data"][0]["y"])) == pytest.approx(list(df["kv_bytes"] / df["time_s"] / 1e9))
    best = df[df["label"].str.startswith("flash")].sort_values("time_s").iloc[0]
    assert f"Fastest flash_decode here: **{best['label']}**" in text_of(at)
    sdpa = df[df["label"].str.startswith("SDPA")].iloc[0]
    v = compare(row_estimate(best), row_estimate(sdpa))  # two repeats each: no 95% interval, no faster side
    said = text_of(at).split("GB/s). ")[1]
    assert not v.separated and "too close to call here" in said.split(".")[0] + said
    assert shows(stated(said, "takes"), v.ratio) and "faster than" not in said.split("\n")[0]


@pytest.mark.real_worker
def test_the_timing_run_waits_its_turn_in_the_worker_and_reports_progress():
    """Another session's run has the timing worker: the run reports "waiting", then runs in the worker only after
    that run ended, and reports every call."""
    from flashviz.measure.worker import TimingWorker

    worker, seen, other_done = TimingWorker(preload=()), [], threading.Event()

    def other() -> None:  # another session's run: 2 s in the worker
        worker.run("_jobs:steps", (20, 0.1))
        other_done.set()

    def progress(done: int, total: int, label: str, *_: object) -> None:
        seen.append((done, total, label, other_done.is_set()))

    try:
        threading.Thread(target=other, daemon=True).start()
        while worker.waiting() == 0:
            time.sleep(0.01)
        setup = DecodeSetup((300, 100), 2, 1, 8, 0, 2, "float32", 1)
        decode_timing.clear()  # measured now, not taken from the cache
        df, bandwidth, _ = decode_timing(setup, "cpu", 2, _progress=progress, _worker=worker)
    finally:
        worker.close()
    assert seen[0][2] == "waiting" and not seen[0][3]  # said while the other run had the worker
    seen = seen[1:]
    assert seen and all(after for *_, after in seen)  # every report of the run came after the other run ended
    done = [d for d, *_ in seen]  # the worker sends a report at most every 0.1 s, and always the first and last
    assert done == sorted(done) and seen[-1][:2] == (15, 15)  # 5 runs x (1 + 2) calls
    assert seen[0][2].startswith("warm-up 1 of 1: flash_decode")
    assert bandwidth > 0 and set(df["label"]) >= {"flash_decode S=2", "SDPA (enable_gqa)"}


def test_the_measured_sentence_compares_with_the_bandwidth_only_when_there_is_one():
    df = pd.DataFrame({"label": ["flash_decode S=1", "flash_decode S=2", "SDPA (enable_gqa)"],
                       "time_s": [0.004, 0.002, 0.003], "kv_bytes": [2e7] * 3, "repeats": 20})
    df["GB_per_s"] = df["kv_bytes"] / df["time_s"] / 1e9
    df["time_lo_s"], df["time_hi_s"] = df["time_s"] * 0.99, df["time_s"] * 1.01
    text = measured_md(df, 5e9, "m")
    best = df.loc[df[df["label"].str.startswith("flash_decode")]["time_s"].idxmin()]
    assert f"**{best['label']}**," in text  # the fastest flash_decode, named, with its time and rate
    assert shows(stated(text, rf"\*\*{best['label']}\*\*,"), best["time_s"] * 1e3) and "ms per step" in text
    assert shows(stated(text, r"reading the cache at"), best["kv_bytes"] / best["time_s"] / 1e9)
    assert shows(counted(text, "% of the"), 100 * best["kv_bytes"] / best["time_s"] / 5e9)
    assert shows(stated(text, "% of the"), 5)  # the bandwidth measured here, GB/s
    sdpa = df.iloc[2]  # separated by the verdict rule: the factor and its interval, SDPA over the fastest
    assert shows(stated(text, rf"{best['label']} is"), sdpa["time_s"] / best["time_s"])
    assert shows(stated(text, r"faster than SDPA \("), sdpa["time_lo_s"] / best["time_hi_s"])
    noisy = df.assign(time_lo_s=df["time_s"] * 0.6, time_hi_s=df["time_s"] * 1.5)
    said = measured_md(noisy, 5e9, "m")
    assert "faster than SDPA" not in said and shows(stated(said, "takes"), best["time_s"] / sdpa["time_s"])
    assert "flash_decode S=2, SDPA (enable_gqa) read faster" in text  # 10 and 6.67 GB/s against the probe's 5
    slow = measured_md(df, 50e9, "m")
    assert shows(counted(slow, "% of the"), 100 * best["kv_bytes"] / best["time_s"] / 50e9)
    assert shows(stated(slow, "% of the"), 50) and "read faster" not in slow
    assert "% of the" not in measured_md(df, None, "m")


def test_a_cancelled_decode_timing_raises_and_is_not_cached():
    setup = DecodeSetup((300, 100), 2, 1, 8, 0, 2, "float32", 1)
    decode_timing.clear()

    def cancel(done: int, total: int, label: str, *_: object) -> None:
        if label.startswith("repeat"):
            raise Cancelled("cancelled by the test")

    with pytest.raises(Cancelled):
        decode_timing(setup, "cpu", 2, _progress=cancel)
    seen: list = []
    df, _, _ = decode_timing(setup, "cpu", 2, _progress=lambda *a: seen.append(a))
    assert seen and (df["repeats"] == 2).all()  # measured anew: the cancelled run left nothing in the cache
    again: list = []
    assert decode_timing(setup, "cpu", 2, _progress=lambda *a: again.append(a))[0].equals(df) and not again
