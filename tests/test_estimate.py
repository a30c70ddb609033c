"""The time a run will take, said before Run: this machine's speed measured in the timing worker times the run's work
(flashviz.measure.estimate). The tests check the arithmetic against counts made here and the number each page
states against the estimate of its own settings."""

from __future__ import annotations

import re

import pytest

from flashviz.app.query import parse_query
from flashviz.app.state import Env
from flashviz.core.tiling import tile_schedule
from flashviz.kit import jobs, runs
from flashviz.measure.estimate import Speed, call_seconds, estimate_sentence, machine_speed, sweep_seconds
from flashviz.model.flops import attention_flops
from tests._apptest import assert_clean

SPEED = Speed(flops_per_s=2e10, tile_s=4e-5, threads=1)


def test_a_call_costs_its_flops_at_the_matmul_rate_plus_its_computed_tiles_at_the_tile_cost():
    n, d, b = 1000, 64, 128  # ragged: 8 x 8 tiles of 128, the last 104 wide
    naive = call_seconds(SPEED, "naive", n, d)
    assert naive == pytest.approx(attention_flops(n, n, d) / 2e10)
    causal = call_seconds(SPEED, "flash2", n, d, block_q=b, block_k=b, causal=True)
    tiles = sum(1 for t in tile_schedule(n, n, b, b, causal=True) if t.computed)
    assert tiles == 36 and causal > tiles * 4e-5
    assert call_seconds(SPEED, "flash2", n, d, block_q=b, block_k=b, training=True) > \
        call_seconds(SPEED, "flash2", n, d, block_q=b, block_k=b)


def test_a_sweep_adds_every_call_of_every_row():
    one = sum(call_seconds(SPEED, impl, n, 32) for impl in ("naive", "flash") for n in (128, 256))
    assert sweep_seconds(SPEED, [128, 256], ["naive", "flash"], d=32, repeats=3, warmup=1) == \
        pytest.approx((3 + 1 + 2) * one)  # the timed and warm-up calls, a memory measurement and a reference


def test_the_probe_measures_this_machine():
    speed = machine_speed()
    assert speed.flops_per_s > 1e7 and speed.tile_s > 0 and speed.threads >= 1


def test_an_estimate_over_the_budget_says_what_will_happen():
    assert "more than the run's budget of 120 s" in estimate_sentence(121.0, SPEED, 120.0)
    assert estimate_sentence(0.4, SPEED, 120.0).startswith("Under a second here")


@pytest.mark.parametrize(("view", "estimate"), [
    ("bench", lambda s: jobs.sweep_estimate(s.ns, s.impls, d=s.d, block=s.bench_block, batch=s.batch,
                                            heads=s.heads, reps=s.reps, sure=s.sure)),
    ("block", jobs.block_estimate),
    ("correct", jobs.correctness_estimate),
])
def test_each_page_states_the_estimate_of_its_own_settings(make_app, view, estimate):
    runs._speeds.clear()
    at = make_app(view=view)
    assert_clean(at)
    (speed,) = runs._speeds.values()  # measured for this page, in the (here inline) timing worker
    settings, _ = parse_query({"view": view}, Env(max_threads=2))
    stated = [c.value for c in at.caption if "from this machine's speed" in c.value or "Measured just now" in c.value]
    assert stated, [c.value for c in at.caption]
    seconds = estimate(settings)(speed)
    if seconds < 1:
        assert stated[0].startswith("Under a second here")
    else:
        assert int(re.match(r"About (\d+) s here", stated[0]).group(1)) == round(seconds)
