"""The GPU pipeline model (flashviz.model.pipeline) against the papers' figures it was not fitted to, and its list
scheduler's invariants.

Oracles: the FA4 paper's per-tile cycles of a 128 x 128 x 128 BF16 tile on a B200 (forward 1,024 MMA, 1,024 exp,
768 shared memory; backward 2,560, 1,024, 3,328) and FA3's "exponential is 50% of the matmul" at d = 128 on an H100,
both exact: they are counts over the unit rates. The throughputs (FA3 paper Figure 5: FA2 370 and FA3 648 TFLOP/s on
an H100 at d = 128, N = 16k; FA3's FP8 "close to 1.2 PFLOP/s"; FA4's 1,613 TFLOP/s on a B200) with the tolerances
stated in TOLERANCES: the model is an upper bound of what the units allow (it leaves out register pressure, barriers,
issue and the clock's drop), so it may stand above a paper, never far below; where it stands more than 25% above,
the view flags it (tests/test_pipeline_view.py). The datasheets' dense peaks against SMs x clock x per-SM rate.

Legend: Br = Bc = 128, d head dimension, N sequence length; cycles of the SM clock.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flashviz.model.pipeline import (
    SCHEDULES,
    UNITS,
    Op,
    cta_ops,
    list_schedule,
    poly_share,
    shape,
    simulate,
    tile_cycles,
    wave_efficiency,
)
from flashviz.model.roofline import A100, B200, GPUS, H100, H200

RATE = 0.0061  # a lazy rescale rate of the size the Numerics lab measures (tests/test_pipeline_view.py measures it)

# (schedule, GPU, dtype, paper TFLOP/s, lowest and highest model / paper allowed): below 1 the model would be wrong
# (an upper bound below a measured kernel); the highs are the gaps the view flags and explains (> 1.25)
TOLERANCES = (
    ("FA2", "H100", "bfloat16", 370.0, 0.95, 1.25),
    ("FA3", "H100", "bfloat16", 648.0, 1.0, 1.40),
    ("FA3", "H100", "float8_e4m3fn", 1200.0, 0.95, 1.25),
    ("FA4", "B200", "bfloat16", 1613.0, 1.0, 1.40),
)


def test_each_gpus_datasheet_peak_is_its_sms_times_clock_times_rate():
    for g in GPUS:
        u = g.units
        for dtype, rate in u.tensor_flops_per_clk.items():  # within 0.3%: B200's 1.86 GHz gives 2,255 against 2,250
            assert u.sms * u.clock_hz * rate == pytest.approx(g.peak(dtype), rel=3e-3), (g.name, dtype)
    # FA3: "989 TFLOP/s of FP16 matmul but only 3.9 TFLOP/s of exponentials" on an H100 SXM5
    u = H100.units
    assert u.sms * u.clock_hz * u.exp2_per_clk / 1e12 == pytest.approx(3.9, abs=0.05)
    # FA4: from H100 to B200 the tensor cores doubled, the MUFU and shared memory's bytes per clock did not
    assert B200.units.tensor_flops_per_clk["bfloat16"] == 2 * H100.units.tensor_flops_per_clk["bfloat16"]
    assert (B200.units.exp2_per_clk, B200.units.smem_bytes_per_clk) == (H100.units.exp2_per_clk, 128)
    assert H200.units == H100.units and A100.units.tmem_bytes == 0 and B200.units.tmem_bytes == 256 * 1024
    assert "float8_e4m3fn" not in A100.units.tensor_flops_per_clk  # FP8 arrived with Hopper


@pytest.mark.parametrize(("phase", "mma", "exp", "smem"), [("forward", 1024, 1024, 768),
                                                          ("backward", 2560, 1024, 3328)])
def test_the_b200_tile_is_fa4s_tile(phase, mma, exp, smem):
    c = tile_cycles(B200, block_m=128, block_n=128, head_dim=128, dtype="bfloat16", phase=phase)
    assert (c["mma"], c["exp"], c["smem"]) == (mma, exp, smem)
    assert c["fma"] < c["exp"] and c["hbm"] < c["mma"]  # the softmax's bookkeeping and HBM are not the bottleneck


def test_fa3s_exponential_is_half_the_matmul_at_d_128_and_grows_as_d_shrinks():
    shares = {d: tile_cycles("H100", head_dim=d)["exp"] / tile_cycles("H100", head_dim=d)["mma"]
              for d in (64, 128, 256)}
    assert shares == {64: 1.0, 128: 0.5, 256: 0.25}  # 4 Br Bc d FLOPs at 4,096/clk against Br Bc exp2 at 16/clk
    fp8 = tile_cycles("H100", dtype="float8_e4m3fn")
    assert fp8["exp"] / fp8["mma"] == 1.0  # FP8 doubles the MMA's rate: the exponential now equals it


def test_tile_cycles_scale_with_the_operation_counts():
    base = tile_cycles("H100")
    wide = tile_cycles("H100", block_n=256)  # twice the scores: twice the MMA, exp and softmax work
    assert wide["mma"] == 2 * base["mma"] and wide["exp"] == 2 * base["exp"]
    assert wide["smem"] == pytest.approx(base["smem"] * (128 + 2 * 256) / (128 + 2 * 128))  # Q once, K and V twice
    assert tile_cycles("H100", seq_len=16384)["hbm"] == pytest.approx(base["hbm"] / 2)  # shared by 4x the tiles
    with pytest.raises(ValueError, match="no tensor-core rate for dtype 'float8_e4m3fn'"):
        tile_cycles("A100", dtype="float8_e4m3fn")
    with pytest.raises(ValueError, match="phase must be one of"):
        tile_cycles("H100", phase="sideways")
    with pytest.raises(ValueError, match="device must be one of"):
        tile_cycles("V100")


@pytest.mark.parametrize(("schedule", "g", "dtype", "paper", "low", "high"), TOLERANCES)
def test_predicted_throughput_stands_within_its_stated_tolerance_of_the_paper(schedule, g, dtype, paper, low, high):
    p = simulate(schedule, g, seq_len=16384, head_dim=128, dtype=dtype, rescale_rate=RATE)
    assert low <= p.tflops / paper <= high, f"{schedule} on {g}: model {p.tflops:.0f} against {paper:.0f}"
    assert p.utilisation == pytest.approx(p.tflops * 1e12 / next(x for x in GPUS if x.name.startswith(g)).peak(dtype))


@pytest.mark.parametrize("g", ["A100", "H100", "B200"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
def test_fa3_and_fa4_are_never_slower_than_fa2_on_the_same_units(g, causal, d):
    t = {s: simulate(s, g, seq_len=2048, head_dim=d, causal=causal, rescale_rate=RATE).tflops for s in SCHEDULES}
    assert t["FA2"] <= t["FA3"] and t["FA2"] <= t["FA4"], t


def assert_a_valid_schedule(ops: list[Op], placed: list[tuple[float, float]]) -> None:
    """No unit runs two ops at once, every op starts after its dependencies end and lasts its cycles."""
    for op, (start, end) in zip(ops, placed, strict=True):
        assert end - start == pytest.approx(op.cycles) and start >= 0
        for j in op.deps:
            assert start >= placed[j][1] - 1e-9, (op, ops[j])
    for unit in UNITS:
        spans = sorted(span for op, span in zip(ops, placed, strict=True) if op.unit == unit)
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end - 1e-9, f"{unit} runs two ops at once"


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("g", ["A100", "H100", "B200"])
def test_every_schedule_keeps_one_op_per_unit_and_its_dependencies(schedule, g):
    for k_tiles, masked in ((1, 0), (5, 2), (9, 0)):
        ops = cta_ops(schedule, g, k_tiles=k_tiles, masked_tiles=masked, rescale_rate=RATE)
        assert_a_valid_schedule(ops, list_schedule(ops))
        lay = shape(schedule, 128)
        assert sum(o.name == "QKᵀ" for o in ops) == sum(o.name == "PV" for o in ops) == k_tiles * lay.q_tiles
        assert sum(o.name == "mask" for o in ops) == masked * lay.q_tiles


def test_the_gantt_of_a_prediction_is_its_longest_ctas_schedule():
    p = simulate("FA4", "B200", seq_len=2048, causal=True, rescale_rate=RATE)
    rows = p.ops
    assert list(rows.columns) == ["op", "unit", "tile", "lane", "start", "end"]
    assert rows["end"].max() == pytest.approx(p.cta_cycles)
    k_tiles = 2048 // 128  # the longest causal CTA (the last 256 rows) visits every K/V tile
    assert rows[rows["op"].eq("QKᵀ")].shape[0] == 2 * k_tiles
    assert set(rows["lane"]) == {"producer", "MMA", "WG1", "WG2", "correction"}
    assert (p.programs, p.sms, p.waves) == (8 * 16 * 2048 // 256, 148, math.ceil(8 * 16 * 8 / 148))
    assert sum(p.busy.values()) > 1  # units overlap: together busy more than the CTA's whole time


def test_fa4s_polynomial_share_balances_the_mufu_against_the_fma_units():
    f = poly_share("B200", rescale_rate=RATE)
    u = B200.units
    scores = 128 * 128
    mufu = (1 - f) * scores / u.exp2_per_clk
    fma = (3.5 * scores + RATE * 128 * 128 + f * scores * 6) / u.fma_per_clk
    assert mufu == pytest.approx(fma) and 0 < f < 0.5
    assert poly_share("A100") == 0.0  # A100's 64 FMA/clk: the softmax's own FP32 work already outlasts the MUFU


@given(st.lists(st.tuples(st.sampled_from(UNITS), st.integers(1, 50), st.lists(st.integers(0, 30), max_size=3)),
                min_size=1, max_size=30))
def test_the_list_scheduler_keeps_its_invariants_on_any_dependency_graph(spec):
    ops = [Op(f"op{i}", unit, 0, "x", float(cycles), tuple(sorted({d for d in deps if d < i})))
           for i, (unit, cycles, deps) in enumerate(spec)]
    placed = list_schedule(ops)
    assert_a_valid_schedule(ops, placed)
    longest_chain = [0.0] * len(ops)  # no schedule beats the critical path, and the list scheduler never idles
    for i, op in enumerate(ops):  # every unit for all of it: it is at most the sum of every op's cycles
        longest_chain[i] = op.cycles + max((longest_chain[j] for j in op.deps), default=0.0)
    span = max(e for _, e in placed)
    assert max(longest_chain) - 1e-9 <= span <= sum(o.cycles for o in ops) + 1e-9


def test_a_dependency_on_a_later_op_is_refused():
    with pytest.raises(ValueError, match="does not come before it"):
        list_schedule([Op("a", "mma", 0, "x", 1.0, (1,)), Op("b", "mma", 0, "x", 1.0, ())])


def test_wave_quantisation():
    assert wave_efficiency(132, 132) == 1.0 and wave_efficiency(264, 132) == 1.0
    assert wave_efficiency(133, 132) == pytest.approx(133 / 264)  # one CTA more: a second, nearly empty wave
    assert wave_efficiency(16, 148) == pytest.approx(16 / 148)  # one decode step of 16 heads on a B200
    with pytest.raises(ValueError):
        wave_efficiency(0, 132)
