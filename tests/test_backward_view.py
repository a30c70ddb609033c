"""The Backward view (?view=backward) in AppTest, checked by value: the map parsed back against the tile schedule and
hand counts of Algorithm 2's traffic, every sentence's numbers against formulas written here or the kernel's own
events, the dQ switch, the frame the map opens at, the measured price, and hostile links.

Oracles written here: the traffic of Algorithm 2 per (batch, head), counted by hand from its reads and writes (the
pre-pass D = rowsum(dO * O) and dQ = 0; K_j, V_j read and dK_j, dV_j written once per column; Q_i, dO_i, L_i, D_i
read and dQ_i read and written per computed tile), standard attention's backward (FA1 Algorithm 3: 7 N^2 + 8 N d
elements), the second pass's extra work, the kernel run twice here through flash_attention_backward's on_tile events.

Legend: N sequence length, d head dimension, Br = Bc = the map's tile size, T computed tiles, Tr Q blocks.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
import torch

from flashviz.app.state import spec_of
from flashviz.core.backward import flash_attention_backward
from flashviz.core.flash import flash_attention_forward
from flashviz.core.tiling import tile_schedule
from flashviz.measure.verdict import MORE_REPEATS
from flashviz.model.iomodel import io_trace
from flashviz.units import format_bytes, format_flops
from flashviz.views.backward.claims import (
    LESSON,
    LESSON_SCALE,
    DqRuns,
    deterministic_extra_flops,
    dq_runs,
    max_row_sum_error,
    traffic_saving,
)
from flashviz.views.backward.data import RecomputePrice, dq_comparison, saved_bytes
from flashviz.views.backward.sentences import determinism_text, dq_text, price_text, saved_text, traffic_text
from tests._apptest import assert_clean, decode
from tests._numbers import counted, equated, numbers, says, shows, stated, states, value

SVG = "{http://www.w3.org/2000/svg}"
FATES = {"f": "full", "p": "partial", "s": "skipped"}
DEFAULTS = {"n": 32, "d": 16, "block": 8, "causal": True}  # the view's map: bwn, bwd, bwblock, bwcausal
ROW = "on chip for the whole row"


def open_view(make_app, **query):
    at = make_app(view="backward", **query)
    assert_clean(at)
    return at


def parse_map(at) -> dict:
    """The Backward view's tile map (views/backward/tilemap.py's markup), read back: per panel its tiles' fates, its
    frames' tile in progress, pass and counters."""
    (html,) = [m.value for m in at.markdown if "fv-backward" in m.value and "<svg" in m.value]
    root = ET.fromstring(html.replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" '))
    panels = []
    for svg in root.iter(f"{SVG}svg"):
        cell = float(svg.get("data-cell"))
        tiles = {(int(r.get("data-i")), int(r.get("data-j"))): FATES[r.get("class").split()[1]]
                 for r in svg.iter(f"{SVG}rect") if r.get("class", "").split()[:1] == ["t"]}
        frames = []
        for g in svg.iter(f"{SVG}g"):
            if g.get("data-frame") is None:
                continue
            cur = [r for r in g.iter(f"{SVG}rect") if r.get("class") == "cur"]
            frames.append({"pass": int(g.get("data-pass")), "hbm": int(g.get("data-hbm-bytes")),
                           "lines": ["".join(t.itertext()) for t in g.iter(f"{SVG}text")
                                     if t.get("class") == "counter"],
                           "current": None if not cur else (round(float(cur[0].get("y")) / cell),
                                                            round(float(cur[0].get("x")) / cell))})
        panels.append({"mode": svg.get("data-dq-mode"), "tiles": tiles, "frames": frames})
    return {"panels": panels, "start": int(root.get("data-start")), "frames": int(root.get("data-frames"))}


def ops_table(at) -> dict:
    """The table of the tile the map opens at: its caption and, per operation row, its kind and operand places."""
    (html,) = [m.value for m in at.markdown if 'class="fv-tile-ops"' in m.value]
    root = ET.fromstring(html)
    rows = [tr for tr in root.iter("tr") if tr.get("data-kind")]
    caption = "".join(root.findall("p")[1].itertext())
    return {"caption": caption, "kinds": [tr.get("data-kind") for tr in rows],
            "places": [{"".join(s.itertext()): s.get("data-place") for s in tr.iter("span")} for tr in rows]}


def page_text(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def tiled_bytes(n: int, d: int, block: int, causal: bool, window=None, nbytes: int = 4) -> int:
    """Algorithm 2's HBM traffic, one head, atomic dQ, counted by hand from its reads and writes."""
    sched = tile_schedule(n, n, block, block, causal=causal, window=window, loop_order="kv_outer")
    tiles = list(sched.computed())
    columns = {t.k_block for t in tiles}
    pre = 2 * n * d + n + n * d  # read dO, O; write D; dQ = 0
    kv = sum(4 * min(block, n - j * block) * d for j in columns)  # K_j, V_j read and dK_j, dV_j written once
    per_tile = sum(4 * (t.q_end - t.q_start) * d + 2 * (t.q_end - t.q_start) for t in tiles)  # Q, dO, L, D; dQ r+w
    return nbytes * (pre + kv + per_tile)


def standard_bytes(n: int, d: int, nbytes: int = 4) -> int:
    """FA1 Algorithm 3: P read twice, dP once, dS twice, dP and dS written (7 N^2); Q, K, V, dO read, dQ, dK, dV
    written (8 N d)."""
    return nbytes * (7 * n * n + 8 * n * d)


def number(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    assert m, (pattern, text[:2000])
    return m.group(1)


# ---------------------------------------------------------------------------------------------------------------------
# the map


@pytest.mark.parametrize("query,mask", [
    ({}, {"causal": True}),
    ({"bwcausal": "0"}, {"causal": False}),
    ({"window": "8,0", "bwcausal": "0"}, {"causal": False, "window": (8, 0)}),
    ({"bwn": "97", "bwblock": "16", "bwd": "59"}, {"causal": True}),  # ragged last row and column of tiles
    ({"dtype": "float16"}, {"causal": True}),
])
def test_the_map_shows_every_tiles_fate_plays_algorithm_2_and_counts_its_traffic(make_app, query, mask):
    at = open_view(make_app, **query)
    n, d, block = int(query.get("bwn", 32)), int(query.get("bwd", 16)), int(query.get("bwblock", 8))
    nbytes = 2 if query.get("dtype") == "float16" else 4
    (panel,) = parse_map(at)["panels"]
    sched = tile_schedule(n, n, block, block, loop_order="kv_outer", **mask)
    assert panel["mode"] == "atomic" and panel["tiles"] == {(t.q_block, t.k_block): t.status for t in sched}
    order = [(t.q_block, t.k_block) for t in sched.computed()]
    frames = panel["frames"]  # every computed tile is a frame here (fewer than 120)
    assert [f["current"] for f in frames] == order and all(f["pass"] == 1 for f in frames)
    assert frames[-1]["hbm"] == tiled_bytes(n, d, block, window=mask.get("window"), causal=mask["causal"],
                                            nbytes=nbytes)
    model = io_trace("q_outer", n, n, d, block, block, backward=True, dtype_bytes=nbytes, **mask)
    assert [f["hbm"] for f in frames] == model[model["step"] >= 0].query("status != 'skipped'")["hbm_bytes"].tolist()
    assert frames[0]["lines"] == ["atomic dQ", f"tile 1/{len(order)}: i={order[0][0]}, j={order[0][1]}",
                                  f"HBM so far: {format_bytes(frames[0]['hbm'])}",
                                  f"standard backward: {format_bytes(standard_bytes(n, d, nbytes))}"]


def test_the_dq_switch_plays_the_second_pass_and_changes_the_numbers(make_app):
    at = open_view(make_app)
    at.radio(key="dq_schedule").set_value("deterministic").run()
    assert_clean(at)
    (panel,) = parse_map(at)["panels"]
    kv = [(t.q_block, t.k_block) for t in tile_schedule(32, 32, 8, 8, causal=True, loop_order="kv_outer").computed()]
    qo = [(t.q_block, t.k_block) for t in tile_schedule(32, 32, 8, 8, causal=True, loop_order="q_outer").computed()]
    assert panel["mode"] == "deterministic"
    assert [f["current"] for f in panel["frames"]] == kv + qo  # pass 1 in Algorithm 2's order, then row by row
    assert [f["pass"] for f in panel["frames"]] == [1] * len(kv) + [2] * len(qo)
    # the second pass reads Q_i, dO_i, L_i, D_i once per Q row (4 rows) and K_j, V_j on every tile (2 Bc d), and it
    # drops dQ_i's read and write on every tile (2 Br d); dQ_i is written once, as dQ = 0 was before
    extra = 4 * (2 * 8 * 16 + 2 * 8) + len(kv) * 2 * 8 * 16 - len(kv) * 2 * 8 * 16
    assert panel["frames"][-1]["hbm"] == tiled_bytes(32, 16, 8, True) + 4 * extra
    at.radio(key="dq_schedule").set_value("both").run()
    assert_clean(at)
    got = parse_map(at)
    assert [p["mode"] for p in got["panels"]] == ["atomic", "deterministic"]
    assert got["frames"] == len(kv) + len(qo)  # lockstep: the deterministic panel is the longer one


def test_the_map_opens_at_the_chosen_frame_and_the_table_lists_that_tiles_steps(make_app):
    at = open_view(make_app, bwframe="5")
    kv = [(t.q_block, t.k_block, t.status) for t in
          tile_schedule(32, 32, 8, 8, causal=True, loop_order="kv_outer").computed()]
    assert parse_map(at)["start"] == 5
    table = ops_table(at)
    i, j, status = kv[5]
    assert f"i = {i}, j = {j} (8 × 8, {status})" in table["caption"] and "computed tile 6 of 10" in table["caption"]
    assert table["kinds"] == ["matmul", "elementwise", "matmul", "matmul", "elementwise", "matmul", "matmul"]
    at.select_slider(key="map_frame").set_value(8).run()
    assert parse_map(at)["start"] == 8 and f"i = {kv[8][0]}, j = {kv[8][1]}" in ops_table(at)["caption"]
    at.radio(key="dq_schedule").set_value("deterministic").run()
    at.select_slider(key="map_frame").set_value(12).run()  # computed tile 13 of 20: the second pass's third tile
    table = ops_table(at)
    assert "pass 2 of deterministic dQ" in table["caption"] and table["kinds"].count("matmul") == 3
    assert table["places"][0]["Q_i"] == ROW and table["places"][-1]["dQ_i"] == ROW  # on chip for the row


# ---------------------------------------------------------------------------------------------------------------------
# what the page says, at its settings


def test_the_sentences_state_the_hand_counted_traffic_bytes_and_flops(make_app):
    text = page_text(open_view(make_app))
    tiled, std = tiled_bytes(32, 16, 8, True), standard_bytes(32, 16)
    assert tiled < std
    assert (f"moves **{format_bytes(tiled)}** over HBM, standard attention's backward **{format_bytes(std)}**: "
            f"{std / tiled:.2f}× less") in text
    # kept for the backward at the map's N: O (N d fp32) and L (N fp32) against P (N^2 fp32)
    o, lse, p = 32 * 16 * 4, 32 * 4, 32 * 32 * 4
    assert (f"keeps O ({format_bytes(o)}) and L ({format_bytes(lse)}) for the backward: {format_bytes(o + lse)}, "
            f"against {format_bytes(p)}") in text
    assert f"{p / (o + lse):.2f}× less, {format_bytes(p - o - lse)} saved" in text
    # the sidebar's sizes: N = 1024, d = 64, B H = 4 heads, 64-wide tiles
    o, p = 4 * 1024 * 64 * 4, 4 * 1024 * 1024 * 4
    assert f"against {format_bytes(p)} for standard attention's P ({4 * 1024 * 1024:,} probabilities)" in text
    # the deterministic pass: 2 more matmuls of 2 Br Bc d FLOPs per computed tile; up to 4 tiles in one Q row
    rows = [sum(1 for t in tile_schedule(32, 32, 8, 8, causal=True).computed() if t.q_block == i) for i in range(4)]
    extra, atomic = 10 * 2 * 2 * 8 * 8 * 16, 10 * 5 * 2 * 8 * 8 * 16
    assert f"up to {max(rows)} of them add into the same dQ_i" in text
    assert f"7 matmuls per tile instead of 5, {format_flops(extra)} more (+{100 * extra / atomic:.0f}% FLOPs)" in text


def test_where_the_tiled_backward_moves_more_the_page_says_so_with_the_tiles_numbers(make_app):
    text = page_text(open_view(make_app, bwcausal="0"))  # 16 tiles of 8 x 8 at d = 16: each costs more than its block
    tiled, std = tiled_bytes(32, 16, 8, False), standard_bytes(32, 16)
    assert tiled > std and "less. It never writes" not in text
    assert f"moves MORE over HBM than standard attention's: {format_bytes(tiled)} against {format_bytes(std)}" in text
    assert f"4·Br·d + 2·Br = {4 * 8 * 16 + 2 * 8:,} elements, more than the 7·Br·Bc = {7 * 8 * 8:,}" in text


def test_the_recomputed_rows_sum_to_one_within_the_stated_error_and_dq_is_bitwise_equal_here(make_app):
    text = page_text(open_view(make_app))
    stated = float(number(r"sum to 1 within ([\d.e+-]+) over that row's tiles", text))
    # the kernel itself, run here on the view's inputs (seed 0): each row's recomputed P summed over its tiles
    gen = torch.Generator().manual_seed(0)
    q, dO, k, v = (torch.randn(1, 1, 32, 16, generator=gen) for _ in range(4))
    O, L = flash_attention_forward(q, k, v, block_size=8, causal=True, loop_order="q_outer", return_lse=True)
    events = []
    dq1 = flash_attention_backward(dO, q, k, v, O, L, 8, causal=True, on_tile=events.append)[0]
    total = torch.zeros(32, dtype=torch.float64)
    for e in events:
        total[e.q_start:e.q_end] += e.row_sums.double()
    assert f"{(total - 1).abs().max().item():.1e}" == f"{stated:.1e}" and stated < 1e-5
    dq2 = flash_attention_backward(dO, q, k, v, O, L, 8, causal=True)[0]
    assert torch.equal(dq1.view(torch.int32), dq2.view(torch.int32))  # bit for bit, as the page says
    same = int((dq1.view(torch.int32) == dq2.view(torch.int32)).sum())
    assert "**bitwise-equal dQ**" in text and says(number(r"bitwise-equal dQ\*\* \(([^)]*)\)", text), same, dq1.numel())
    changed, top = number(r"changes ([\d,]+) of the 512 entries", text), number(r"by up to ([\d.e+-]+)", text)
    assert 0 < int(changed.replace(",", "")) <= 512
    assert 0 < float(top) <= 4 * 4 * 2.0**-23 * dq1.abs().max().item()  # a few ulps of dQ: the last bits only


def test_the_run_button_shows_recompute_prices_measured_numbers(make_app, monkeypatch):
    from flashviz.views.backward import data as backward_price
    from flashviz.views.backward.page import cached_price

    measured: list[RecomputePrice] = []  # what the real recompute_price returned (a spy: it still measures)
    real = backward_price.recompute_price
    monkeypatch.setattr(backward_price, "recompute_price", lambda *a, **k: measured.append(real(*a, **k)) or
                        measured[-1])
    cached_price.clear()  # an earlier test's run of the same settings would answer from the cache
    at = open_view(make_app, n="128", d="16", br="32", bc="32", heads="2", reps="1")
    at.button(key="backward_price_run").click().run()
    assert_clean(at)
    (price,) = measured
    assert (price.n, price.d, price.heads, price.block_q, price.causal, price.repeats) == (128, 16, 2, 32, True, 1)
    (chart,) = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    memory = [decode(t["y"])[0] for t in chart["data"] if t.get("xaxis") == "x2"]
    times = [decode(t["y"])[0] for t in chart["data"] if t.get("xaxis", "x") == "x"]
    assert memory == pytest.approx([b / 2**20 for b in price.peak_bytes])
    assert times == pytest.approx([t * 1e3 for t in price.time_s])
    tiled, naive, _ = price.peak_bytes
    assert naive >= 2 * 2 * 128 * 128 * 4  # P and at least one more N x N matrix per head, fp32
    assert tiled < 2 * 128 * 128 * 4  # the tiled kernel never holds one N x N matrix per head
    (caption,) = [c.value for c in at.caption if c.value.startswith(("Naive autograd peaked", "Here naive"))]
    assert f"peaked at {format_bytes(naive)}, {naive / tiled:.1f}× the tiled kernel's {format_bytes(tiled)}" in caption
    v = price.time_verdict()  # the run's own medians and intervals, by the verdict rule
    assert (v.a.median, v.b.median) == (price.time_s[1], price.time_s[0]) and v.a.repeats == price.repeats == 1
    assert not v.separated and ("too close to call here" in caption or "not settled here" in caption)
    assert "faster than" not in caption  # one timed call each: no 95% interval, no faster side
    assert "Why slower here?" not in caption
    assert any(c.value.startswith("**Ran with** N = 128, d = 16, Br = 32, Bc = 32, causal, no window, float32, B = 1, "
                                  "H = 2") for c in at.caption)


# ---------------------------------------------------------------------------------------------------------------------
# bad settings


def test_hostile_values_of_the_views_own_settings_are_repaired_with_a_notice_and_the_page_says_what_to_change(
        make_app):
    at = make_app(view="backward", bwn="100000", bwblock="0", dq="atomik", bwframe="-3", bwcausal="maybe")
    assert not at.exception
    (warning,) = [w.value for w in at.warning]
    for note in ("`bwn=100000` is outside 1..16384; clamped to 16384.", "`bwblock=0` is outside 1..1024; clamped to 1.",
                 "`bwframe=-3` is outside 0..119; clamped to 0."):
        assert note in warning
    assert "`dq=atomik`" in warning and "`bwcausal=maybe`" in warning
    (error,) = [e.value for e in at.error]  # 16384 x 16384 tiles: the map refuses, and says how to fix it
    assert error.startswith("N = 16384 with Br = 1, Bc = 1 makes a 16384 × 16384 grid of tiles")
    assert "Raise the block size to at least 256" in error
    assert at.select_slider(key="map_block").value == 1  # the controls stay, to fix it from the page


def test_a_map_too_costly_for_the_live_kernel_still_draws_and_says_so(make_app):
    at = open_view(make_app, bwn="2048", bwd="256", bwblock="64", bwcausal="0")  # 32 x 32 tiles: a cheap map
    assert len(parse_map(at)["panels"][0]["tiles"]) == 32 * 32
    (info,) = [i.value for i in at.info if "run the real kernel" in i.value]
    flops = 3 * 5 * 2 * (32 * 32) * 64 * 64 * 256  # three backward passes' worth of 5 matmuls per tile, no mask
    assert f"about {flops / 1e9:.0f} GFLOP" in info and "bitwise-equal" not in page_text(at)


# ---------------------------------------------------------------------------------------------------------------------
# the sentence builders at the settings where the general claim fails, and the lesson's checks


def test_each_sentence_says_the_opposite_where_the_general_claim_fails():
    more = traffic_text(dq_comparison(8, 64, 8, 8), "x")  # N = 8, d = 64: one tile that moves more than P, dP, dS
    tiled, std = tiled_bytes(8, 64, 8, False), standard_bytes(8, 64)
    head, why = more.split(".**", 1)
    assert tiled > std and "MORE" in head and "less" not in head  # the verdict the bytes give
    assert equated(head) == ["8", "64", "8"]  # N, d, Br = Bc
    assert format_bytes(tiled) in head and format_bytes(std) in head and shows(counted(head, "×"), tiled / std)
    per_tile, per_block = 4 * 8 * 64 + 2 * 8, 7 * 8 * 8  # elements a tile streams; standard's for its scores
    assert [value(x) for x in equated(why)[:2]] == [per_tile, per_block] and per_tile > per_block
    assert shows(equated(why)[2], (4 * 64 + 2) / 7)  # the Bc from which a tile costs less than its block
    kept = saved_text(saved_bytes(8, 64))  # O (8 x 64) outweighs P (8 x 8)
    o, lse, p = 8 * 64 * 4, 8 * 4, 8 * 8 * 4
    assert o + lse > p and "MORE than P" in kept and "less" not in kept
    assert [format_bytes(b) in kept for b in (o, lse, o + lse, p)] == [True] * 4 and states(kept, 8 * 8)
    single = dq_text(dq_comparison(32, 16, 32, 32))  # one tile per dQ_i: nothing to race
    assert "single tile" in single and "atomic adds" not in single.split(". ")[0]
    assert len(list(tile_schedule(32, 32, 32, 32, loop_order="kv_outer").computed())) == 1  # the one tile
    two = DqRuns(32, 16, 16, 16, False, None, "float32", 0, 512, 0, 2, 0, 0.0, 1.0)
    said = determinism_text(two)
    assert "bitwise-equal" in said and says(number(r"bitwise-equal dQ\*\* \(([^)]*)\)", said), 512, 512)
    assert shows(counted(said, "contributions"), two.max_contributors)
    differ = DqRuns(32, 16, 8, 8, True, None, "float32", 0, 512, 3, 4, 0, 0.0, 1.0)
    said = determinism_text(differ)
    assert "bitwise" not in said and says(said.split(". ")[0], differ.run_differing, differ.values)
    price = RecomputePrice(("flash2", "naive", "sdpa"), ("a", "b", "c"), (0.1, float("nan"), 0.05), (0, 0, 0),
                           (2e6, float("nan"), 1e6), ("ok", "not run: memory", "ok"), 64, 16, 1, 1, 16, 16, True,
                           None, "float32", "cpu", 1, 1)
    said = price_text(price)
    assert "did not run" in said and numbers(said) == [] and "×" not in said  # no naive peak, time: no ratio stated
    small = RecomputePrice(("flash2", "naive", "sdpa"), ("a", "b", "c"), (0.1, 0.05, 0.05), (0, 0, 0),
                           (2e6, 1e6, 1e6), ("ok",) * 3, 64, 16, 1, 1, 16, 16, True, None, "float32", "cpu", 1, 1)
    said = price_text(small)
    assert "not above" in said and small.peak_bytes[1] <= small.peak_bytes[0]  # naive's peak against the tiled one's
    assert [format_bytes(b) in said.split(": ")[0] for b in (1e6, 2e6)] == [True, True]
    assert shows(equated(said)[0], 64) and format_bytes(64 * 64 * 4) in said  # N, and one N x N fp32 matrix
    assert "faster than" not in said and "took" not in said  # no intervals recorded: no verdict, no bare ratio


@pytest.mark.parametrize(("half", "timed", "faster"), [(0.01, 30, "naive autograd"), (0.3, 30, None),
                                                       (0.01, 3, None)])
def test_the_price_names_a_faster_side_and_asks_why_slower_only_where_the_verdict_separates(half, timed, faster):
    tiled, naive = 0.2, 0.1  # seconds: the tiled kernel takes twice naive autograd's median
    price = RecomputePrice(("flash2", "naive", "sdpa"), ("a", "b", "c"), (tiled, naive, 0.05), (0, 0, 0),
                           (2e6, 8e6, 1e6), ("ok",) * 3, 256, 16, 1, 1, 16, 16, True, None, "float32", "cpu", 1, timed,
                           time_lo_s=(tiled * (1 - half), naive * (1 - half), 0.05),
                           time_hi_s=(tiled * (1 + half), naive * (1 + half), 0.05), timed=(timed,) * 3)
    v = price.time_verdict()
    assert v.faster == faster and v.ratio == pytest.approx(naive / tiled)
    said = price_text(price)
    if faster:  # naive autograd is faster: its factor and interval, the tiled one's over naive's
        assert shows(stated(said, "Naive autograd is"), tiled / naive)
        low, high = (tiled * (1 - half)) / (naive * (1 + half)), (tiled * (1 + half)) / (naive * (1 - half))
        assert [value(x) for x in numbers(said.split("Naive autograd is")[1])[1:3]] == pytest.approx([low, high],
                                                                                                     abs=0.006)
    else:  # what would settle it names the control that sets this view's repeats, on the view that draws it
        assert "faster than" not in said and ("too close to call" in said or "not settled" in said)
        assert (f"Benchmark view's **{spec_of('reps').label}**" in said) == (v.settle == MORE_REPEATS)


def test_the_lesson_checks_return_the_numbers_their_claims_state():
    n, d, b = LESSON_SCALE["n"], LESSON_SCALE["d"], LESSON_SCALE["block"]
    assert traffic_saving(**LESSON_SCALE) == pytest.approx(standard_bytes(n, d) / tiled_bytes(n, d, b, True))
    assert traffic_saving(**LESSON) == pytest.approx(standard_bytes(32, 16) / tiled_bytes(32, 16, 8, True))
    assert traffic_saving(**{**LESSON, "causal": False}) < 1  # the claim fails there, and the view says so
    assert deterministic_extra_flops(**LESSON) == pytest.approx(2 / 5)  # S_ij and dP_ij once more: 7 matmuls, not 5
    assert 0 < max_row_sum_error(**LESSON) < 1e-6


@pytest.mark.parametrize("n,block,causal,window", [(32, 8, True, None), (57, 8, False, (9, 3)), (32, 32, False, None)])
def test_dq_runs_compares_two_kernel_runs_bit_for_bit_and_counts_the_reordered_sums_changes(n, block, causal, window):
    r = dq_runs(n, 16, block, block, causal=causal, window=window)
    sched = tile_schedule(n, n, block, block, causal=causal, window=window)
    per_row = [sum(1 for t in sched.computed() if t.q_block == i) for i in range(sched.n_q_blocks)]
    assert r.bitwise_equal and r.run_differing == 0 and r.values == n * 16
    assert r.max_contributors == max(per_row)
    if r.max_contributors < 3:  # a + b = b + a exactly: reversing two terms changes nothing
        assert r.reordered_differing == 0 and r.reordered_max_abs == 0
    else:
        assert 0 < r.reordered_differing <= n * 16
        assert r.reordered_max_abs <= 4 * r.max_contributors * 2.0**-23 * r.dq_max_abs  # the last bits only
