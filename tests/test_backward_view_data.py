"""The Backward view's data and figures: views/backward/data.py, views/backward/data.py,
views/backward/tilemap.py and views/backward/figures.py, checked by value.

Oracles written here: a float64 softmax for the recomputed row sums; the tile schedule's kv_outer and q_outer orders
for what the map plays; hand formulas for the bytes kept for the backward, the five matmuls' shapes and the second
pass's extra work; the IO model's cumulative trace (io_trace) for the counters; the SVG parsed back with xml.etree
for every tile's fate, every frame's tile and every counter.

Legend: N sequence length, d head dimension, Br = block_q, Bc = block_k, H heads.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest
import torch

from flashviz.core.tiling import tile_schedule
from flashviz.figures.tilemap import frame_indices
from flashviz.model.iomodel import io_cost, io_trace
from flashviz.units import format_bytes
from flashviz.views.backward.data import (
    RecomputePrice,
    backward_schedule,
    backward_trace,
    dq_comparison,
    recompute_price,
    saved_for_backward,
    tile_ops,
)
from flashviz.views.backward.figures import recompute_price_figure, tile_ops_html
from flashviz.views.backward.tilemap import backward_map_html

SVG = "{http://www.w3.org/2000/svg}"
FATES = {"f": "full", "p": "partial", "s": "skipped"}
COLUMN, TILE, STREAM, RMW = ("on chip for the whole column", "on chip, this tile only", "streamed from HBM every tile",
                             "read and written back in HBM every tile")


def _float64_p(n, d, heads, heads_kv, seed, causal, window):
    """Batch 0, head 0's P = softmax(q k^T / sqrt(d)) in float64 from the same seeded inputs as backward_trace."""
    gen = torch.Generator().manual_seed(seed)
    q, _ = (torch.randn(1, heads, n, d, generator=gen) for _ in range(2))
    k, _ = (torch.randn(1, heads_kv, n, d, generator=gen) for _ in range(2))
    s = q[0, 0].double() @ k[0, 0].double().T / math.sqrt(d)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    vis = torch.ones(n, n, dtype=torch.bool)
    if causal:
        vis &= j <= i
    left, right = window or (None, None)
    if left is not None:
        vis &= j >= i - left
    if right is not None:
        vis &= j <= i + right
    return torch.nan_to_num(torch.softmax(s.masked_fill(~vis, float("-inf")), -1)), vis.any(-1)


# ---------------------------------------------------------------------------------------------------------------------
# the trace of the real kernel


@pytest.mark.parametrize("n,d,bq,bk,heads,heads_kv,causal,window", [
    (32, 16, 8, 8, 1, 1, True, None),
    (97, 59, 16, 32, 2, 2, False, (20, 5)),
    (57, 8, 8, 16, 4, 2, True, None),
])
def test_backward_trace_records_the_kernels_tiles_with_the_models_counters(n, d, bq, bk, heads, heads_kv, causal,
                                                                           window):
    tr = backward_trace(n, d, bq, bk, causal=causal, window=window, heads=heads, heads_kv=heads_kv, seed=3)
    sched = tile_schedule(n, n, bq, bk, causal=causal, window=window, loop_order="kv_outer")
    assert [(t.step, t.q_block, t.k_block, t.status) for t in tr.tiles] == [
        (t.step, t.q_block, t.k_block, t.status) for t in sched.computed()]
    P, sees = _float64_p(n, d, heads, heads_kv, 3, causal, window)
    for t in tr.tiles:
        want = P[t.q_start:t.q_end, t.k_start:t.k_end].sum(-1).tolist()
        assert t.row_sums == pytest.approx(want, abs=2e-6)
    assert torch.allclose(torch.tensor(tr.row_sum_total, dtype=torch.float64), sees.double(), atol=4e-6)
    assert tr.rows_seeing_keys == int(sees.sum()) and tr.max_row_sum_error < 4e-6
    # the counters: io_trace's cumulative bytes after each of these steps (its start row is step -1)
    model = io_trace("q_outer", n, n, d, bq, bk, causal=causal, window=window, heads=heads, heads_kv=heads_kv,
                     backward=True).set_index("step")["hbm_bytes"]
    assert [t.hbm_bytes for t in tr.tiles] == [int(model[t.step]) for t in tr.tiles]
    assert tr.tiled_hbm_bytes == int(model.iloc[-1])
    # standard attention's backward (FA1 Algorithm 3): reads 5 N^2 + 3 N d and K, V (2 N d); writes 2 N^2 + N d
    # and dK, dV (2 N d); K, V, dK, dV once per K/V head
    assert tr.standard_hbm_bytes == 4 * (heads * (7 * n * n + 4 * n * d) + heads_kv * 4 * n * d)
    # the running row sums: after a row's last tile they reach its total
    last = {}
    for t in tr.tiles:
        for r, s in zip(range(t.q_start, t.q_end), t.row_sums_so_far, strict=True):
            last[r] = s
    assert all(last[r] == pytest.approx(tr.row_sum_total[r]) for r in last)


def test_the_accumulator_norms_of_the_trace_grow_inside_a_column():
    tr = backward_trace(32, 16, 8, 8, seed=1)  # no mask: every column has 4 tiles
    column = [t for t in tr.tiles if t.k_block == 0]
    assert len(column) == 4 and len({t.dv_norm for t in column}) == 4
    assert all(t.dq_norm > 0 for t in tr.tiles)


def test_tile_ops_are_algorithm_2s_seven_steps_with_their_shapes_and_places():
    ops = tile_ops(16, 8, 64)
    want = [  # (result, its place, inputs and places, (m, n, k) of a matmul or None)
        ("S_ij", TILE, [("Q_i", STREAM), ("K_j", COLUMN)], (16, 8, 64)),
        ("P_ij", TILE, [("S_ij", TILE), ("L_i", STREAM)], None),
        ("dV_j", COLUMN, [("P_ij", TILE), ("dO_i", STREAM)], (8, 64, 16)),
        ("dP_ij", TILE, [("dO_i", STREAM), ("V_j", COLUMN)], (16, 8, 64)),
        ("dS_ij", TILE, [("P_ij", TILE), ("dP_ij", TILE), ("D_i", STREAM)], None),
        ("dQ_i", RMW, [("dS_ij", TILE), ("K_j", COLUMN), ("dQ_i", RMW)], (16, 64, 8)),
        ("dK_j", COLUMN, [("dS_ij", TILE), ("Q_i", STREAM)], (8, 64, 16)),
    ]
    assert [op.line for op in ops] == list(range(10, 17))
    for op, (result, place, inputs, mnk) in zip(ops, want, strict=True):
        assert (op.result, op.result_place, list(op.operands)) == (result, place, inputs)
        if mnk is None:
            assert op.kind == "elementwise" and op.flops == 0
        else:
            m, n, k = mnk
            assert op.kind == "matmul" and op.flops == 2 * m * n * k
            assert re.fullmatch(rf"\({m} × {k}\) · \({k} × {n}\) → \({m} × {n}\)", op.shape)
    assert sum(op.flops for op in ops) == 2.5 * 4 * 16 * 8 * 64  # 2.5 x the forward's 4 Br Bc d


@pytest.mark.parametrize("dtype,lse_bytes", [("float32", 4), ("float16", 4), ("float64", 8)])
def test_saved_for_backward_is_o_and_l_against_naives_p(dtype, lse_bytes):
    tr = backward_trace(64, 16, 16, 16, causal=True, heads=2, dtype=dtype)
    s = saved_for_backward(tr)
    elem = {"float32": 4, "float16": 2, "float64": 8}[dtype]
    assert (s.o_bytes, s.lse_bytes, s.p_bytes) == (2 * 64 * 16 * elem, 2 * 64 * lse_bytes, 2 * 64 * 64 * elem)
    assert s.tiled_bytes == s.o_bytes + s.lse_bytes and s.p_over_tiled == s.p_bytes / s.tiled_bytes
    assert s.rows_checked == 64 and s.max_row_sum_error < {"float16": 2e-3}.get(dtype, 4e-6)


def test_dq_comparison_matches_a_hand_count_of_the_second_pass():
    n, d, b = 256, 32, 64  # causal: 4 x 5 / 2 = 10 tiles of 64 x 64, full blocks
    c = dq_comparison(n, d, b, b, causal=True, heads=2)
    pairs = 10 * b * b  # (query, key) pairs of the computed tiles, per head
    assert c.tiles == 10 and (c.atomic_matmuls_per_tile, c.deterministic_matmuls_per_tile) == (5, 7)
    assert c.atomic_flops == 2 * 5 * 2 * pairs * d and c.extra_flops == 2 * 2 * 2 * pairs * d  # S and dP again
    # pass 2 adds: Q_i, dO_i, L_i, D_i once per row (4 rows x (2 b d + 2 b)) and K_j, V_j per tile (10 x 2 b d);
    # it drops dQ = 0 (N d) and dQ's per-tile read and write (10 x 2 b d); dQ is written once, as dQ = 0 was
    extra = 4 * (2 * b * d + 2 * b) + 10 * 2 * b * d - 10 * 2 * b * d
    assert c.extra_bytes == 2 * 4 * extra
    assert c.standard_bytes == io_cost("naive", n, n, d, b, b, heads=2, backward=True).bytes


# ---------------------------------------------------------------------------------------------------------------------
# the measured price of recomputation (memory only: times are never asserted)


def test_recompute_price_measures_the_three_and_naive_keeps_n_squared_matrices():
    n = 512
    p = recompute_price(n, 16, causal=True, repeats=1, warmup=0, threads=1)
    assert p.impls == ("flash2", "naive", "sdpa") and p.status == ("ok", "ok", "ok")
    tiled, naive, _ = p.peak_bytes
    assert naive >= 2 * n * n * 4  # P and at least one more N x N matrix, fp32
    assert tiled < n * n * 4  # the tiled step never holds one N x N matrix
    assert p.ratio("peak_bytes", "naive") == naive / tiled and all(t > 0 for t in p.time_s)
    fig = recompute_price_figure(p)
    memory_bars = [t for t in fig.data if t.xaxis == "x2"]
    assert [b.y[0] for b in memory_bars] == pytest.approx([v / 2**20 for v in p.peak_bytes])


def test_a_naive_row_the_memory_guard_refuses_is_not_run_and_drawn_as_such():
    p = recompute_price(512, 16, causal=True, repeats=1, warmup=0, threads=1, memory_budget_bytes=1_500_000)
    assert p.status[0] == "ok" and p.status[1].startswith("not run") and math.isnan(p.peak_bytes[1])
    assert math.isnan(p.ratio("time_s", "naive"))
    fig = recompute_price_figure(p)
    assert any("not run" in (a.text or "") for a in fig.layout.annotations)
    assert any("not run" in t.x[0] for t in fig.data if t.name.startswith("naive"))


def _price(**over) -> RecomputePrice:
    base = dict(impls=("flash2", "naive", "sdpa"), labels=("tiled (recomputes P)", "naive autograd (stores P)",
                                                           "SDPA autograd"), time_s=(0.4, 0.3, 0.07),
                time_iqr_s=(0.01, 0.01, 0.0), peak_bytes=(4.4e6, 7.4e7, 7.4e6), status=("ok",) * 3, n=1024, d=64,
                batch=1, heads=4, block_q=64, block_k=64, causal=True, window=None, dtype="float32", device="cpu",
                threads=2, repeats=5)
    return RecomputePrice(**{**base, **over})


def test_the_price_figure_has_titles_units_and_projector_sized_fonts():
    fig = recompute_price_figure(_price())
    assert fig.layout.title.text and fig.layout.yaxis.title.text == "time (ms)"
    assert fig.layout.yaxis2.title.text == "peak memory (MiB)"
    time_bars = [t for t in fig.data if t.xaxis == "x"]
    assert [b.y[0] for b in time_bars] == pytest.approx([400, 300, 70])
    assert [t.name for t in fig.data if t.showlegend is not False] == list(_price().labels)
    assert "17×" in next(t for t in fig.data if t.xaxis == "x2" and t.name.startswith("naive")).x[0]
    layout = fig.layout
    sizes = [layout.template.layout.font.size, layout.legend.font.size, layout.template.layout.xaxis.tickfont.size,
             layout.title.subtitle.font.size, *[a.font.size for a in layout.annotations]]
    assert min(sizes) >= 14 and layout.height <= 720


def test_tile_ops_html_parses_into_the_seven_rows_with_their_places():
    html = tile_ops_html(tile_ops(8, 8, 64), caption="tile i=1, j=0")
    root = ET.fromstring(html)
    rows = [tr for tr in root.iter("tr") if tr.get("data-kind")]
    assert [tr.get("data-kind") for tr in rows] == ["matmul", "elementwise", "matmul", "matmul", "elementwise",
                                                   "matmul", "matmul"]
    dq_row = rows[5]
    places = [(("".join(s.itertext())), s.get("data-place")) for s in dq_row.iter("span")]
    assert places == [("dS_ij", TILE), ("K_j", COLUMN), ("dQ_i", RMW), ("dQ_i", RMW)]
    assert sum(int(tr.get("data-flops")) for tr in rows) == 5 * 2 * 8 * 8 * 64
    assert all(int(px) >= 14 for px in re.findall(r"font-size:(\d+)px", html))


# ---------------------------------------------------------------------------------------------------------------------
# the backward's tile map, parsed back


def parse_map(html: str) -> dict:
    root = ET.fromstring(html.replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" '))
    panels = []
    for svg in root.iter(f"{SVG}svg"):
        tiles = {(int(r.get("data-i")), int(r.get("data-j"))): FATES[r.get("class").split()[1]]
                 for r in svg.iter(f"{SVG}rect") if r.get("class", "").split()[:1] == ["t"]}
        marks = {(int(r.get("data-i")), int(r.get("data-j"))) for r in svg.iter(f"{SVG}rect")
                 if r.get("class", "").split()[:1] == ["t2"]}
        cell = float(svg.get("data-cell"))
        frames = []
        for g in svg.iter(f"{SVG}g"):
            if g.get("data-frame") is None:
                continue
            cur = [r for r in g.iter(f"{SVG}rect") if r.get("class") == "cur"]
            band = [r.get("data-kind") for r in g.iter(f"{SVG}rect") if r.get("class") == "band"]
            dq = [int(m.get("data-i")) for m in g.iter(f"{SVG}g") if m.get("class") == "dq"]
            frames.append({"k": int(g.get("data-frame")), "step": int(g.get("data-step")),
                           "pass": int(g.get("data-pass")), "hbm": int(g.get("data-hbm-bytes")),
                           "lines": ["".join(t.itertext()) for t in g.iter(f"{SVG}text") if t.get("class") ==
                                     "counter"],
                           "current": None if not cur else (round(float(cur[0].get("y")) / cell),
                                                            round(float(cur[0].get("x")) / cell)),
                           "band": band[0] if band else None, "dq": dq})
        panels.append({"mode": svg.get("data-dq-mode"), "tiles": tiles, "marks": marks, "frames": frames})
    radios = [i for i in root.iter("input") if i.get("type") == "radio"]
    sizes = [int(s) for s in re.findall(r"font-size[:=]\"?(\d+)", html)]
    return {"panels": panels, "radios": radios, "frames": int(root.get("data-frames")), "font_sizes": sizes,
            "text": "".join(root.itertext())}


@pytest.mark.parametrize("n,bq,bk,mask", [(32, 8, 8, {"causal": True}), (50, 8, 16, {"window": (12, 0)}),
                                          (97, 16, 16, {"causal": True, "window": (40, None)})])
def test_the_map_shows_every_tiles_fate_and_plays_the_backwards_order(n, bq, bk, mask):
    pair = [backward_schedule(n, 16, bq, bk, dq_mode=m, **mask) for m in ("atomic", "deterministic")]
    got = parse_map(backward_map_html(pair))
    kv = tile_schedule(n, n, bq, bk, loop_order="kv_outer", **mask)
    qo = tile_schedule(n, n, bq, bk, loop_order="q_outer", **mask)
    fates = {(t.q_block, t.k_block): t.status for t in kv}
    computed_kv = [(t.q_block, t.k_block) for t in kv.computed()]
    computed_q = [(t.q_block, t.k_block) for t in qo.computed()]
    atomic, det = got["panels"]
    assert (atomic["mode"], det["mode"]) == ("atomic", "deterministic")
    for panel in got["panels"]:
        assert panel["tiles"] == fates  # every tile once, with its fate
    assert atomic["marks"] == set() and det["marks"] == set(computed_kv)  # the second pass revisits every tile
    longest = len(computed_kv) + len(computed_q)
    frames_at = frame_indices(longest)
    assert got["frames"] == len(frames_at) == len(det["frames"]) == len(atomic["frames"])
    order_det = computed_kv + computed_q
    assert [f["current"] for f in det["frames"]] == [order_det[f] for f in frames_at]
    assert [f["pass"] for f in det["frames"]] == [1 if f < len(computed_kv) else 2 for f in frames_at]
    assert [f["band"] for f in det["frames"]] == ["column" if f < len(computed_kv) else "row" for f in frames_at]
    # the atomic panel plays Algorithm 2's order, then holds "done" while the second pass runs
    assert [f["current"] for f in atomic["frames"]] == [computed_kv[f] if f < len(computed_kv) else None
                                                         for f in frames_at]
    assert all(f["dq"] == [f["current"][0]] for f in atomic["frames"] if f["current"])  # dQ_i every tile
    last_of_row = {i: max(j for ii, j in computed_q if ii == i) for i, _ in computed_q}
    for f in det["frames"]:
        if f["pass"] == 2:  # dQ_i goes to HBM once, after the row's last tile
            i, j = f["current"]
            assert f["dq"] == ([i] if j == last_of_row[i] else [])
        elif f["pass"] == 1:
            assert f["dq"] == []
    assert len(got["radios"]) == 3 and min(got["font_sizes"]) >= 14


@pytest.mark.parametrize("dq_mode", ["atomic", "deterministic"])
def test_the_maps_counters_are_the_io_models_numbers(dq_mode):
    s = backward_schedule(32, 16, 8, 8, causal=True, dq_mode=dq_mode, heads=2, dtype_bytes=2)
    got = parse_map(backward_map_html([s]))
    (panel,) = got["panels"]
    model = io_trace("q_outer", 32, 32, 16, 8, 8, causal=True, heads=2, dtype_bytes=2, backward=True,
                     dq_mode=dq_mode)
    by_step = dict(zip(model["step"], model["hbm_bytes"], strict=True))
    standard = io_cost("naive", 32, 32, 16, 8, 8, heads=2, dtype_bytes=2, backward=True).bytes
    for f in panel["frames"]:
        assert f["hbm"] == by_step[f["step"]]
        assert f["lines"][2] == f"HBM so far: {format_bytes(by_step[f['step']])}"
        assert f["lines"][3] == f"standard backward: {format_bytes(standard)}"
    assert got["radios"] == []  # one schedule: nothing to switch


def test_a_still_map_has_one_frame_no_controls_and_a_fully_masked_grid_says_so():
    s = backward_schedule(32, 16, 8, 8, causal=True)
    still = backward_map_html([s], still=True, start_frame=3)
    assert "<input" not in still and len(parse_map(still)["panels"][0]["frames"]) == 1
    empty = backward_schedule(16, 8, 8, 8, mask_mod=lambda b, h, q, kv: q < 0)
    got = parse_map(backward_map_html([empty]))
    assert set(got["panels"][0]["tiles"].values()) == {"skipped"} and "every tile is masked" in got["text"]


def test_bad_map_arguments_say_what_to_pass():
    a = backward_schedule(32, 16, 8, 8, causal=True)
    b = backward_schedule(32, 16, 8, 8)
    with pytest.raises(ValueError, match="one or two schedules"):
        backward_map_html([])
    with pytest.raises(ValueError, match="share N, Br, Bc and the mask"):
        backward_map_html([a, b])
    with pytest.raises(ValueError, match=r"start_frame must be in 0\.\.9"):
        backward_map_html([a], start_frame=10)
    with pytest.raises(ValueError, match="dq_mode must be one of"):
        backward_schedule(32, 16, 8, 8, dq_mode="atomik")
