"""The Ring view (?view=ring): its map and work chart against ring_schedule, a real run in W processes drawn from the
run's own events, its claims and sentences against the numbers they quote, bad input and a rank that fails.

Oracles: flashviz.ring.ring_schedule (the model, tested against real runs in tests/test_ring_processes.py), and,
independently of the ring, the logsumexp of one query row's scores in float64 computed here from the view's seeded
inputs, against all keys and against each K/V shard's keys (the positions each rank holds, from `positions`).

Legend: N positions, W ranks, T tiles per side of one rank's step, L_t a step's partial logsumexp, L the merged one.
"""

from __future__ import annotations

import math
import re
import statistics

import pytest
import torch

from flashviz.app.machine import cpu_cores
from flashviz.app.state import Settings
from flashviz.measure.verdict import compare
from flashviz.ring import FORWARD, LAYOUTS, RingStepEvent, positions, ring_schedule
from flashviz.views.ring import claims, data
from flashviz.views.ring import sentences as text
from flashviz.views.ring.data import (
    FP32_TOLERANCE,
    LayoutWork,
    PrecisionPoint,
    RingSetup,
    contiguous_causal_bounds,
    layout_work,
    score_map,
    setup_of,
)
from flashviz.vocab import SKIPPED
from tests._apptest import assert_clean, chart, decode
from tests._numbers import equated, says, shows, stated

VIEW = {"view": "ring"}
SMALL = {"rgn": "64", "rgw": "2", "rgblock": "16", "rgheads": "1"}  # a run of a few seconds, process start included
NUM = r"(\d+(?:\.\d+)?(?:e-?\d+)?)"


def sentence(at, start: str) -> str:
    (found,) = [m.value for m in at.markdown if m.value.startswith(start)]
    return found


def trace(spec: dict, name: str, index: int = 0) -> dict:
    return [t for t in spec["data"] if t.get("name") == name][index]


def values(seq) -> list[float]:
    return [float(x) for x in decode(seq).ravel()]


# ----------------------------------------------------------------------------------------------------------------------
# the model, drawn at the view's defaults


def test_defaults_draw_the_map_and_the_work_of_ring_schedule(make_app):
    at = make_app(**VIEW)
    assert_clean(at)
    s = Settings()
    W, N, block = s.world, s.ring_n, s.ring_block
    sched = ring_schedule(N, W, s.layout, block, s.ring_causal, heads=s.ring_heads, head_dim=data.RING_D)
    T = -(-(N // W) // block)
    spec = chart(at, "Scores by ring step")
    z = decode(spec["data"][0]["z"])
    assert z.shape == (W * T, W * T)
    for p in sched.of(FORWARD):  # tile (i, j) of rank r's step t sits at [r T + i][kv T + j], coloured by t
        for i, row in enumerate(p.statuses):
            for j, status in enumerate(row):
                assert z[p.rank * T + i][p.kv_rank * T + j] == (2 * W if status == SKIPPED else p.step)
    assert [f["name"] for f in spec["frames"]] == [f"step {t}" for t in range(W)]
    for t, frame in enumerate(spec["frames"]):  # a tile turns from pale (W + step) to its colour at its step
        fz = decode(frame["data"][0]["z"])
        assert ((fz == z) | ((fz == z + W) & (z > t))).all() and (fz[z <= t] == z[z <= t]).all()
    work = chart(at, "Each rank's work")
    for layout in LAYOUTS:
        model = ring_schedule(N, W, layout, block, s.ring_causal, heads=s.ring_heads, head_dim=data.RING_D)
        tiles, flops = (t for t in work["data"] if t.get("name") == layout)
        assert values(tiles["y"]) == list(model.tiles_per_rank())
        per_rank = [sum(p.flops for p in model.of() if p.rank == r) / 1e6 for r in range(W)]
        assert values(flops["y"]) == pytest.approx(per_rank)
    quoted = dict(re.findall(r"(contiguous|zigzag|striped) \*\*" + NUM + r"\*\*", sentence(at, "**Imbalance**")))
    for layout in LAYOUTS:
        model = ring_schedule(N, W, layout, block, s.ring_causal)
        assert float(quoted[layout]) == pytest.approx(model.imbalance(), abs=0.005)
    counts = [s for p in sched.of() for row in p.statuses for s in row]
    m = re.search(r"Of the (\d+) tiles, \*\*(\d+) are computed\*\* \((\d+) of them partial, marked p\) and (\d+) "
                  "skipped", sentence(at, "**The map.**"))
    assert tuple(map(int, m.groups())) == (len(counts), len(counts) - counts.count(SKIPPED), counts.count("partial"),
                                           counts.count(SKIPPED))
    assert any(i.value.startswith("**Run**: ") for i in at.info)


@pytest.mark.parametrize(("query", "fix"), [
    ({"rgn": "100", "rglayout": "zigzag"}, "Pad the sequence to N = 104"),
    ({"rgn": "90", "rgw": "4"}, "Pad the sequence to N = 92"),
    ({"rgn": "4096", "rgblock": "8"}, "Raise the tile size to at least 32"),
])
def test_settings_the_ring_cannot_shard_are_refused_with_the_fix(make_app, query, fix):
    at = make_app(**VIEW, **query)
    assert not at.exception
    assert len(at.error) == 1 and fix in at.error[0].value
    assert not at.get("plotly_chart")


def test_the_map_follows_the_layout_and_the_mask(make_app):
    at = make_app(**VIEW, rglayout="zigzag", rgcausal="0", rgw="3", rgn="96")
    assert_clean(at)
    z = decode(chart(at, "Scores by ring step")["data"][0]["z"])
    grid = score_map(RingSetup(96, 3, "zigzag", False, 32, "float32", 2))
    assert (z < 3).all() and z.shape == (len(grid.status), len(grid.status))  # no mask: nothing skipped
    said = sentence(at, "**The map.**")
    counts = {k: int(v) for k, v in zip(*torch.unique(torch.as_tensor(z), return_counts=True), strict=True)}
    assert says(said.split(". At step")[0], 96 // 3, 1, 1, 32)  # N / W queries, T x T tiles of Br
    tiles = said.split("Of the")[1]
    assert says(tiles.split("skipped")[0], z.size, z.size, 0, 0)  # every tile computed, none partial, none skipped
    assert says(tiles.split("skipped")[1], 3) and len(counts) == 3  # every rank runs all W = 3 steps: z holds 0, 1, 2
    works = layout_work(RingSetup(96, 3, "zigzag", False, 32, "float32", 2))[0]
    balance = sentence(at, "**Imbalance**")
    assert [stated(balance, rf"{w.layout} ") for w in works] == ["1.00"] * len(works) == [
        f"{w.imbalance:.2f}" for w in works]  # max / mean tiles: 1 for every layout
    assert "every layout is balanced" in balance  # the verdict the numbers give


# ----------------------------------------------------------------------------------------------------------------------
# a real run


def row_lse(setup: RingSetup, position: int, keys) -> float:
    """log sum exp of one query row's scaled scores over `keys` (global positions), head 0, in float64."""
    q, k, _, _ = data.inputs(setup)
    s = (k[0, 0, list(keys)].double() @ q[0, 0, position].double()) / math.sqrt(setup.d)  # (len(keys),)
    return float(torch.logsumexp(s, 0))


def test_a_real_run_draws_its_own_events_within_the_fp32_bar(make_app):
    at = make_app(**VIEW, **SMALL)
    assert_clean(at)
    at.button(key="ring_run").click().run()
    assert_clean(at)
    args, r = at.session_state["_fv_result_ring"]
    setup = setup_of(Settings(ring_n=64, world=2, ring_block=16, ring_heads=1))
    assert args == (setup,) and r.setup == setup
    verdict = at.success[0].value
    assert float(re.search(r"float64: \*\*" + NUM, verdict)[1]) == pytest.approx(r.errors["out"], rel=0.01)
    assert r.errors["out"] <= FP32_TOLERANCE and "within the fp32 bar" in verdict
    model = ring_schedule(64, 2, "contiguous", 16, True, heads=1, head_dim=data.RING_D, backward=True)
    assert r.mismatches == () and len(r.events) == len(model.steps) == 2 * 2 * 2
    # the timeline: every event's compute and wait, as measured
    timeline = chart(at, "Each rank's steps")
    for phase in ("forward", "backward"):
        steps = [e for e in r.events if e.phase == phase]
        t0 = min(e.start_s for e in steps)
        bars = trace(timeline, f"{phase} compute")
        assert values(bars["x"]) == pytest.approx([e.compute_s * 1e3 for e in steps])
        assert values(bars["base"]) == pytest.approx([(e.start_s - t0) * 1e3 for e in steps])
        waits = trace(timeline, "waiting for transfers", ("forward", "backward").index(phase))
        assert values(waits["x"]) == pytest.approx([e.comm_s * 1e3 for e in steps])
    (said,) = [m.value for m in at.markdown if "from the first step's start" in m.value]
    assert said.startswith("**2 processes shared") == (cpu_cores() < 2)  # W = 2 processes on this machine's cores
    assert ("computed longest" in said) == text.rank_verdict(
        [[e.compute_s for e in r.events if e.phase == FORWARD and e.rank == k] for k in range(2)])[2].separated
    # the bytes: each rank's bars are its events', the dashes the model's
    sent = chart(at, "Bytes sent per step")
    for rank in range(2):
        mine = sorted((e for e in r.events if e.rank == rank), key=lambda e: (e.phase != "forward", e.step))
        assert values(trace(sent, f"rank {rank}")["y"]) == [e.bytes_sent / 1024 for e in mine]
    plans = sorted((p for p in model.steps if p.rank == 0), key=lambda p: (p.phase != "forward", p.step))
    assert values(trace(sent, "model")["y"]) == [p.bytes_sent / 1024 for p in plans]
    # the merge of the last row, against its logsumexp over each shard's keys computed here in float64
    merge = chart(at, "The merge of row 63")
    owner = 1  # contiguous: the last position is rank 1's
    lse_t = [row_lse(setup, 63, positions(64, 2, (owner - t) % 2, "contiguous")) for t in range(2)]
    L = row_lse(setup, 63, range(64))
    assert values(merge["data"][0]["y"]) == pytest.approx(lse_t, abs=1e-5)
    assert values(merge["data"][1]["y"]) == pytest.approx([math.exp(x - L) for x in lse_t], abs=1e-5)
    assert sum(values(merge["data"][1]["y"])) == pytest.approx(1, abs=1e-5)
    # the work chart's diamonds: each layout's run, equal to the model
    work = chart(at, "Each rank's work")
    for layout in LAYOUTS:
        tiles = trace(work, f"{layout}, run")
        assert values(tiles["y"]) == list(ring_schedule(64, 2, layout, 16, True).tiles_per_rank())
    # the precision chart: fp32 within the bar at W = 1, 2, 4; bf16 above its own rounding of the output
    precision = chart(at, "Error against one process")
    assert values(trace(precision, "fp32 largest")["y"]) == [p.max_error for p in r.precision if p.dtype == "float32"]
    assert all(p.max_error <= FP32_TOLERANCE for p in r.precision if p.dtype == "float32")
    assert [p.world for p in r.precision] == [1, 2, 4, 1, 2, 4]
    assert all(p.mean_error >= 0.9 * p.rounding > 0 for p in r.precision if p.dtype == "bfloat16")


def test_a_rank_that_fails_is_named_on_the_page_and_the_view_keeps_running(make_app, monkeypatch):
    real = data.ring_run
    monkeypatch.setattr(data, "ring_run", lambda setup, progress=None: real(setup, progress=progress,
                                                                            fail_rank=(1, "raise")))
    at = make_app(**VIEW, **SMALL)
    at.button(key="ring_run").click().run()
    assert not at.exception
    (error,) = at.error
    assert "ring run failed on rank 1" in error.value and "failure injected" in error.value
    assert chart(at, "Scores by ring step") and not at.success  # the model is still drawn, no verdict


# ----------------------------------------------------------------------------------------------------------------------
# data, claims and sentences on values


@pytest.fixture(scope="module")
def small_run():
    return data.ring_run(RingSetup(32, 2, "zigzag", True, 8, "float32", 2))


def test_a_run_equals_the_model_and_one_process(small_run):
    r = small_run
    assert r.exact and r.mismatches == () and r.layout_mismatches == ()
    assert max(r.errors.values()) <= FP32_TOLERANCE
    assert r.model_bytes == {(p.phase, p.step): p.bytes_sent for p in r.model.steps if p.rank == 0}
    assert [w.tiles for w in r.layouts] == [ring_schedule(32, 2, x, 8, True).tiles_per_rank() for x in LAYOUTS]
    m = r.merge  # zigzag: position 31 is in rank 0's second chunk
    assert (m.position, m.rank, m.local) == (31, 0, 15)
    assert m.lse == pytest.approx(row_lse(r.setup, 31, range(32)), abs=1e-5)
    assert m.weight_sum == pytest.approx(1, abs=1e-5) and m.lse_of_steps == pytest.approx(m.lse, abs=1e-5)


def test_the_exactness_claim_reads_the_run(small_run, monkeypatch):
    monkeypatch.setattr(claims, "ring_run", lambda setup: small_run)
    res = claims.ring_exact(Settings(ring_n=32, world=2, layout="zigzag", ring_block=8))
    assert res.holds and res.values["error"] == small_run.errors["out"] and res.values["mismatches"] == 0


@pytest.mark.parametrize(("n", "world", "block", "causal"), [(256, 4, 32, True), (96, 3, 16, True), (64, 2, 8, True),
                                                             (128, 4, 32, False)])
def test_the_balance_claim_states_ring_schedules_imbalance(n, world, block, causal):
    res = claims.ring_balance(Settings(ring_n=n, world=world, ring_block=block, ring_causal=causal))
    for layout in LAYOUTS:
        assert res.values[layout] == ring_schedule(n, world, layout, block, causal).imbalance()
    assert (res.values["lo"], res.values["hi"]) == (2 * world / (world + 1), (2 * world - 1) / world)
    assert res.holds == causal  # without a mask every layout balances: the plain ring is not worse than zigzag


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("tiles", [1, 2, 8])
def test_the_plain_ring_lies_between_its_bounds(world, tiles):
    """rank r computes r T^2 + T (T + 1) / 2 tiles: the ratio runs from 2W/(W+1) (T = 1) towards (2W-1)/W."""
    n = 8 * world * tiles
    work = {w.layout: w for w in layout_work(RingSetup(n, world, "contiguous", True, 8, "float32", 1))[0]}
    T = tiles
    expected = [r * T * T + T * (T + 1) // 2 for r in range(world)]
    assert work["contiguous"].tiles == tuple(expected)
    lo, hi = contiguous_causal_bounds(world)
    assert lo - 1e-12 <= work["contiguous"].imbalance <= hi and (T > 1 or work["contiguous"].imbalance == lo)


def test_the_imbalance_sentence_says_the_opposite_where_the_numbers_do():
    bounds = contiguous_causal_bounds(4)
    good = [LayoutWork("contiguous", (3, 7, 11, 15), (1,) * 4, 15 / 9), LayoutWork("zigzag", (9,) * 4, (1,) * 4, 1.0)]
    lo, hi = bounds  # 2W/(W+1) = 1.6 and (2W-1)/W = 1.75 at W = 4
    said = text.imbalance_sentence(good, {}, 4, True, bounds)
    contiguous = said.split("Contiguous under causal")[1].split("Zigzag")[0]
    assert [shows(w, v) for w, v in zip(equated(contiguous), (lo, hi), strict=True)] == [True, True]
    assert shows(stated(contiguous, "its"), 15 / 9) and lo <= 15 / 9 <= hi and "lies between" in contiguous
    assert shows(stated(said, "Zigzag's"), 0) and "balanced, each rank" in said  # 0% above the mean: balanced
    bad = [LayoutWork("contiguous", (1, 1, 1, 5), (1,) * 4, 2.5), LayoutWork("zigzag", (8, 8, 8, 12), (1,) * 4, 1.2)]
    said = text.imbalance_sentence(bad, {"striped": "N = 6 is not divisible by W = 4. Pad"}, 4, True, bounds)
    assert shows(stated(said, "contiguous"), 2.5) and shows(stated(said, "zigzag"), 1.2)  # the listed imbalances
    assert shows(stated(said.split("Contiguous under causal")[1], "its"), 2.5) and "lies outside" in said  # > 1.75
    assert shows(stated(said, "Zigzag's"), 20) and shows(stated(said, "not within"), 5)  # 20% above: not within 5%
    assert "Striped cannot run here" in said


def test_the_precision_sentence_states_growth_from_the_numbers():
    pts = [PrecisionPoint("bfloat16", w, 5e-3, m, 1.9e-4) for w, m in ((1, 1.9e-4), (2, 2.2e-4), (4, 2.4e-4))]
    said = text.precision_sentence(pts, 1e-5)
    growth = said.split("the mean error")[1].split(". ")[0]
    assert says(growth, 1.9e-4, 1, 2.4e-4, 4, 2.4e-4 / 1.9e-4) and "grows" in growth  # from W = 1 to W = 4, the ratio
    assert says(said.split("largest error")[1].split(";")[0], 5e-3, 5e-3, 5e-3, 1, 2, 4)  # the largest, per W
    flat = [PrecisionPoint("float32", w, 4e-7 * (1 + (w == 4) * 99), 3e-8, 3e-9) for w in (1, 2, 4)]
    said = text.precision_sentence(flat, 1e-5)
    largest = said.split("largest error")[1].split(";")[0]
    assert says(largest, 4e-7, 4e-7, 4e-5, 1, 2, 4, 1e-5) and "not all within" in largest  # 4e-5 > the 1e-5 bar
    assert says(said.split("the mean error")[1], 3e-8, 1, 3e-8, 4, 1) and "stays" in said


# ----------------------------------------------------------------------------------------------------------------------
# why split one sequence: the intro's and the lesson step's numbers, against counts written here

L, H, H_KV, D, BF16 = 32, 32, 8, 128, 2  # Llama 3 8B's shape: layers, query heads, K/V heads, head size; bf16 bytes
N_LONG = 131072


def long_oracle(world: int) -> dict[str, int]:
    """The counts by hand: K and V of every layer, standard attention's S and P of one layer, 4 N^2 d H FLOPs."""
    shard = -(-N_LONG // world)
    return {"kv": 2 * L * H_KV * N_LONG * D * BF16, "kv_rank": 2 * L * H_KV * shard * D * BF16,
            "scores": 2 * H * N_LONG ** 2 * BF16, "flops": 4 * N_LONG ** 2 * D * H,
            "flops_rank": 4 * shard * N_LONG * D * H, "shard": shard}


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_the_long_context_counts_are_the_bytes_and_flops_counted_by_hand(world):
    c, want = data.long_context(world), long_oracle(world)
    assert (c.n, c.world, c.shard) == (N_LONG, world, want["shard"])
    assert (c.kv_bytes, c.kv_rank_bytes, c.scores_bytes) == (want["kv"], want["kv_rank"], want["scores"])
    assert (c.flops, c.flops_rank) == (want["flops"], want["flops_rank"])
    r = claims.context_parallel(Settings(world=world))
    assert r.holds == (world > 1)  # W = 1 splits nothing
    assert (r.values["kv_bytes"], r.values["scores_bytes"], r.values["flops_rank_count"]) == \
        (want["kv"], want["scores"], want["flops_rank"])


def test_the_intro_says_why_first_with_the_numbers_and_defines_rank_and_shard_before_using_them(make_app):
    at = make_app(**VIEW)
    assert_clean(at)
    texts = [m.value for m in at.main.markdown]
    start = next(i for i, t in enumerate(texts) if t.startswith("**Why split one sequence over devices?**"))
    assert not any(re.search(r"\brank|\bshard", t, re.IGNORECASE) for t in texts[:start])  # the view opens with it
    page, first = "\n".join(texts[start:]), texts[start]
    want, W = long_oracle(4), 4
    assert shows(stated(first, r"At N ="), N_LONG) and shows(stated(first, r"\) in bfloat16 keeps"), want["kv"] / 2**30)
    assert shows(stated(first, r"would write S and P of"), want["scores"] / 2**30)
    assert shows(stated(first, r"FlashAttention computes"), want["flops"] / 1e12, rel=5e-3)  # '281 TFLOP': 3 digits
    assert shows(stated(first, rf"At W = {W} a shard is"), want["shard"])
    assert shows(stated(first, r"positions:"), want["kv_rank"] / 2**30)
    assert shows(stated(first, r"of K/V and"), want["flops_rank"] / 1e12)
    for word in ("rank", "shard"):  # its first use on the page is its definition
        assert re.search(rf"\b{word}s?\b", page, re.IGNORECASE).start() == page.index(f"**{word}**") + 2, word


def test_the_slide_picture_draws_the_checks_bytes():
    from flashviz.units import GIB, format_bytes
    from flashviz.views.ring.figures import context_picture

    v = claims.context_parallel(Settings()).values
    (bars,) = context_picture(Settings(), v).data
    want = long_oracle(4)
    assert list(bars.y) == [want["kv"] / GIB, want["kv_rank"] / GIB, want["scores"] / GIB]
    assert list(bars.text) == [format_bytes(want[k]) for k in ("kv", "kv_rank", "scores")]


def steps_of(times: dict[int, list[float]], tiles: dict[int, int]) -> list[RingStepEvent]:
    """Forward step events with these compute times per rank (seconds, one per step) and tiles per step."""
    world = len(times)
    return [RingStepEvent(rank, step, (rank - step) % world, FORWARD, world, tiles[rank], 0, 0, 0, 0, 0,
                          100.0 + step, t, 1e-4 * (1 + rank), ()) for rank, ts in times.items()
            for step, t in enumerate(ts)]


def test_the_timeline_names_no_rank_from_four_steps_and_says_when_processes_shared_cores():
    # the trial's case: rank 3 did 5x rank 0's tiles yet computed shortest, 4 processes on 2 cores
    times = {0: [4e-3, 5e-3, 4.5e-3, 6e-3], 1: [3e-3] * 4, 2: [3.5e-3] * 4, 3: [2e-3, 2.5e-3, 1.8e-3, 2.2e-3]}
    said = text.timeline_sentence(steps_of(times, {0: 1, 1: 2, 2: 3, 3: 5}), cores=2)
    assert said.startswith("**4 processes shared 2 cores here.**")  # W processes on fewer cores than W
    assert "shortest" not in said and "longest" not in said  # four steps per rank: no 95% interval, no rank named
    assert "waiting for transfers, no rank" in said  # nor for the waits
    ratio = statistics.median(times[0]) / statistics.median(times[3])  # the slowest median over the fastest
    assert shows(stated(said, "rank 0's median step took"), ratio)
    assert shows(stated(said, "too close to call here: "), 4) and shows(stated(said, "fewer than"), 6)
    assert shows(stated(said, "rank 3: "), sum(times[3]) * 1e3, rel=5e-3)  # each rank's compute in all, as measured
    assert "processes shared" not in text.timeline_sentence(steps_of(times, {r: 1 for r in times}), cores=4)


def test_the_timeline_names_the_longest_and_shortest_rank_only_where_the_verdict_separates():
    slow, fast = [2.0e-3 * (1 + 0.001 * k) for k in range(8)], [1.0e-3 * (1 + 0.001 * k) for k in range(8)]
    said = text.timeline_sentence(steps_of({0: fast, 1: slow}, {0: 1, 1: 1}), cores=2)
    v = compare(slow, fast, ("rank 1", "rank 0"))
    assert v.separated and "rank 1's steps computed longest and rank 0's shortest" in said
    assert shows(stated(said, "rank 0 is"), v.speedup[0]) and shows(stated(said, "faster per step \\("), v.speedup[1])
    noisy = [1.0e-3 * (1 + 0.8 * (k % 2)) for k in range(8)]  # spread beyond the target: no rank named
    said = text.timeline_sentence(steps_of({0: noisy, 1: [x * 1.1 for x in noisy]}, {0: 1, 1: 1}), cores=2)
    assert "computed longest" not in said and "computed measurably longer than another's" in said


def test_the_timeline_states_each_ranks_cpu_time_next_to_its_wall_time_and_who_waited_for_a_core():
    from dataclasses import replace

    times = {0: [4e-3] * 4, 1: [4e-3] * 4}
    cpu = {0: 3.9e-3, 1: 1.0e-3}  # rank 1 ran on a core a quarter of its compute: 2 processes on 1 free core
    events = [replace(e, compute_cpu_s=cpu[e.rank]) for e in steps_of(times, {0: 1, 1: 1})]
    said = text.timeline_sentence(events, cores=2)
    assert shows(stated(said, "over the same steps: rank 0: "), 4 * cpu[0] * 1e3)
    assert shows(stated(said, r"rank 0: [\d.]+ ms \("), 100 * cpu[0] / 4e-3)
    assert shows(stated(said, r"rank 1: [\d.]+ ms \("), 100 * cpu[1] / 4e-3)
    assert "rank 1 ran on a core for less than 75% of its compute" in said and "rank 0 ran" not in said
    events = [replace(e, compute_cpu_s=0.0) for e in events]  # not measured: nothing said of the CPU
    assert "on the CPU" not in text.timeline_sentence(events, cores=2)
