"""roofline.py, decode.py, training.py: the GPU model against hand-computed values. This machine's measured roof:
tests/test_roofline_runs.py."""

import math

import pytest

from flashviz.model.decode import attention_variants, decode_cost, decode_points
from flashviz.model.iomodel import io_cost
from flashviz.model.roofline import (
    A100,
    B200,
    GPUS,
    H100,
    H200,
    ROOFLINE_COLUMNS,
    Device,
    attainable_flops,
    bound,
    predict_time,
    roof_lines,
    roofline_points,
    sram_marks,
)
from flashviz.model.training import recompute_cost, recompute_table

# Hand count at N = 1024, d = 64, B = H = 1, fp16 (2 bytes per element), Br = Bc = 128 (Tr = 8):
#   naive    reads 3 N d + 2 N^2 = 2,293,760; writes 2 N^2 + N d = 2,162,688 -> 4,456,448 elements = 8,912,896 bytes
#   q_outer  reads N d + 2 N d Tr = 1,114,112; writes N d + N = 66,560 -> 1,180,672 elements = 2,361,344 bytes
#   both     flops 4 N^2 d = 268,435,456
NAIVE_BYTES, FA2_BYTES, FLOPS = 8_912_896, 2_361_344, 268_435_456
NAIVE_HBM, FA2_HBM = 2_359_296 * 2, 263_168 * 2  # with S and P (naive), K and V (FA2) re-read from L2


def test_the_published_figures_and_their_ridge_points():
    assert (A100.peak("float16"), A100.bandwidth, A100.sram_per_sm) == (312e12, 2039e9, 164 * 1024)
    assert (H100.peak("bfloat16"), H100.bandwidth, H100.sram_per_sm) == (989.4e12, 3.35e12, 228 * 1024)
    assert (H200.peak("float16"), H200.bandwidth) == (989.4e12, 4.8e12)  # H100's compute, faster HBM
    assert (B200.peak("bfloat16"), B200.bandwidth, B200.l2_bytes) == (2250e12, 8e12, 126e6)
    assert B200.ridge() == pytest.approx(281.25)  # 2.25e15 / 8e12: twice the tensor peak, 2.4x the HBM of H100
    assert A100.ridge() == pytest.approx(153.02, abs=0.01)  # 312e12 / 2039e9 FLOP/byte
    assert H100.ridge() == pytest.approx(295.34, abs=0.01)
    assert all(g.source and not g.measured for g in GPUS)
    with pytest.raises(ValueError, match="no peak for dtype 'int8'"):
        A100.peak("int8")


def test_predict_time_is_the_larger_of_compute_and_memory_time():
    assert predict_time(FLOPS, NAIVE_BYTES, A100) == pytest.approx(8_912_896 / 2039e9)  # memory: 4.371 us
    assert predict_time(FLOPS, 0, A100) == pytest.approx(268_435_456 / 312e12)  # compute only: 0.860 us
    assert predict_time(FLOPS, FA2_BYTES, H100) == pytest.approx(2_361_344 / 3.35e12)  # still memory: 0.705 us
    assert attainable_flops(1.0, A100) == 2039e9 and attainable_flops(1e9, A100) == 312e12
    assert bound(153.0, A100) == "memory" and bound(153.1, A100) == "compute"


def test_roofline_points_match_the_hand_count():
    df = roofline_points(1024, 64, block_q=128, block_k=128, dtype="float16").set_index(["device", "algorithm"])
    assert tuple(df.reset_index().columns) == ROOFLINE_COLUMNS
    naive, fa2 = df.loc[(A100.name, "naive")], df.loc[(A100.name, "q_outer")]
    # everything the IO model counts passes through L2
    assert (naive["l2_bytes"], fa2["l2_bytes"], naive["flops"]) == (NAIVE_BYTES, FA2_BYTES, FLOPS)
    assert naive["l2_intensity"] == pytest.approx(30.118, abs=1e-3)  # 268,435,456 / 8,912,896
    # S and P (2 x 1024^2 x 2 bytes = 4 MiB) fit in L2: naive's HBM traffic is Q, K, V read, S, P and O written,
    # 3 N d + 2 N^2 + N d = 2,359,296 elements; FA2's is one pass, Q, K, V read and O, L written: 263,168 elements
    assert (naive["hbm_bytes"], fa2["hbm_bytes"]) == (NAIVE_HBM, FA2_HBM) and naive["l2_hit"] and fa2["l2_hit"]
    assert naive["intensity"] == pytest.approx(FLOPS / NAIVE_HBM)
    for gpu in GPUS:  # each level's time; the largest is the prediction and names the regime
        for alg, hbm, l2 in (("naive", NAIVE_HBM, NAIVE_BYTES), ("q_outer", FA2_HBM, FA2_BYTES)):
            row = df.loc[(gpu.name, alg)]
            levels = {"compute": FLOPS / gpu.peak("float16"), "memory": hbm / gpu.bandwidth,
                      "L2": l2 / gpu.l2_bandwidth}
            assert (row["compute_s"], row["hbm_s"], row["l2_s"]) == pytest.approx(tuple(levels.values()))
            assert row["time_s"] == pytest.approx(max(levels.values()))
            assert row["bound"] == max(levels, key=levels.get)
            assert row["attainable_flops"] == pytest.approx(FLOPS / row["time_s"])
    # naive: HBM on A100 (2.31 us), H100 (1.41 us) and B200 (0.59 us > L2's 0.52 us), L2 on H200 (its 0.98 us of
    # HBM under L2's 1.24 us); FA2: compute on A100 (0.86 us > L2's 0.33 us), L2 on the Hoppers (0.33 us > 0.27 us
    # of compute) and on B200 (0.138 us of L2 at 17.2 TB/s > 0.119 us of compute at 2.25 PFLOP/s)
    assert [df.loc[(g.name, "naive"), "bound"] for g in GPUS] == ["memory", "memory", "L2", "memory"]
    assert [df.loc[(g.name, "q_outer"), "bound"] for g in GPUS] == ["compute", "L2", "L2", "L2"]
    speedups = [df.loc[(g.name, "q_outer"), "speedup_vs_naive"] for g in GPUS]
    assert speedups == pytest.approx([(NAIVE_HBM / 2039e9) / (FLOPS / 312e12),
                                      (NAIVE_HBM / 3.35e12) / (FA2_BYTES / H100.l2_bandwidth),
                                      NAIVE_BYTES / FA2_BYTES,  # H200: both L2-bound, the ratio of L2 bytes
                                      (NAIVE_HBM / 8e12) / (FA2_BYTES / B200.l2_bandwidth)])
    assert len(set(round(x, 6) for x in speedups)) == 3  # the GPUs differ, by the regime that bounds them
    for gpu in GPUS:
        assert df.loc[(gpu.name, "naive"), "speedup_vs_naive"] == 1.0
        assert df.loc[(gpu.name, "kv_outer"), "speedup_vs_naive"] <= df.loc[(gpu.name, "q_outer"), "speedup_vs_naive"]


def test_a_compute_bound_kernel_gains_only_what_its_flops_allow():
    # causal at N = 4096, d = 64, 8 heads: naive computes every score, the tiled kernels about half of them
    df = roofline_points(4096, 64, block_q=128, block_k=128, heads=8, causal=True, devices=[A100])
    rows = df.set_index("algorithm")
    cost = io_cost("q_outer", 4096, 4096, 64, 128, 128, heads=8, causal=True, dtype_bytes=2)
    once = io_cost("q_outer", 4096, 4096, 64, 4096, 4096, heads=8, causal=True, dtype_bytes=2)  # one pass
    assert rows.loc["q_outer", "flops"] == cost.flops < rows.loc["naive", "flops"]
    # K and V, 2 x 8 x 4096 x 64 x 2 bytes = 8 MiB, stay in the 40 MiB L2: only one pass reaches HBM
    assert rows.loc["q_outer", "hbm_bytes"] == once.bytes and rows.loc["q_outer", "l2_bytes"] == cost.bytes
    assert rows.loc["q_outer", "time_s"] == pytest.approx(max(cost.flops / 312e12, once.bytes / 2039e9,
                                                              cost.bytes / A100.l2_bandwidth))
    assert rows.loc["q_outer", "bound"] == "compute"
    # S and P of 8 heads, 2 x 8 x 4096^2 x 2 bytes = 512 MiB, do not fit: naive reads them back from HBM
    assert not rows.loc["naive", "l2_hit"] and rows.loc["naive", "hbm_bytes"] == rows.loc["naive", "l2_bytes"]


def test_the_l2_level_of_each_gpu_and_its_sources():
    assert (A100.l2_bytes, H100.l2_bytes, H200.l2_bytes) == (40 * 2**20, 50 * 2**20, 50 * 2**20)
    assert A100.l2_bandwidth == pytest.approx(5120 * 1.41e9)  # published bytes per clock x boost clock
    assert H100.l2_bandwidth == H200.l2_bandwidth == pytest.approx(5.5e12 * 132 / 114 * 1980 / 1755)  # measured
    assert all("L2" in g.source for g in GPUS)
    assert A100.l2_ridge() == pytest.approx(312e12 / A100.l2_bandwidth)


@pytest.mark.parametrize("d", [128, 256])
def test_large_head_dimensions_reach_the_compute_roof_where_the_peak_is_lowest(d):
    df = roofline_points(4096, d, block_q=128, block_k=128, heads=8).set_index(["device", "algorithm"])
    assert df.loc[(A100.name, "q_outer"), "bound"] == "compute"  # A100: 312 TFLOP/s against 7.2 TB/s of L2
    for gpu in GPUS:
        row = df.loc[(gpu.name, "q_outer")]
        assert row["time_s"] >= row["flops"] / gpu.peak("float16")  # never faster than its FLOPs allow
        assert row["bound"] != "memory"  # K and V stay in L2: HBM never bounds FA2 here


def test_a_device_without_l2_keeps_the_two_level_model():
    cpu = Device("cpu", {"float16": 1e12}, 1e10, None, "a fake CPU")
    (row,) = roofline_points(1024, 64, block_q=128, block_k=128, devices=[cpu], algorithms=["naive"]).itertuples()
    assert row.hbm_bytes == row.l2_bytes == NAIVE_BYTES and row.l2_hit is None and math.isnan(row.l2_s)
    assert row.time_s == predict_time(FLOPS, NAIVE_BYTES, cpu) and row.bound == bound(row.intensity, cpu)


def test_roof_lines_include_the_ridge_and_sram_marks_give_elements():
    roofs = roof_lines([A100, H100])
    a100 = roofs[roofs["device"] == A100.name]
    assert a100["attainable_flops"].max() == 312e12 and (a100["intensity"] == a100["ridge"]).any()
    marks = sram_marks("float32").set_index("device")["M"]
    assert marks[A100.name] == 164 * 1024 // 4 and marks[H100.name] == 228 * 1024 // 4  # 41,984 and 58,368
    assert sram_marks("float16").set_index("device")["M"][H100.name] == 228 * 1024 // 2


# ----------------------------------------------------------------------------------------------------------------------
# decoding


def test_decode_reads_the_whole_cache_at_about_one_flop_per_byte_and_gqa_multiplies_it():
    # N = 1000, d = 4, fp16. MHA, H = 2: flops 4 H N d = 32,000; elements: K/V 2 H N d = 16,000, Q H d = 8,
    # O and L H (d + 1) = 10 -> 16,018 elements = 32,036 bytes.
    mha = decode_cost(1000, 4, heads=2)
    assert (mha.flops, mha.kv_bytes, mha.hbm_bytes) == (32_000, 32_000, 32_036)
    assert mha.intensity == pytest.approx(32_000 / 32_036)
    # GQA, H = 8, H_kv = 2 (g = 4): flops 128,000; K/V 16,000 elements, Q 32, O and L 40 -> 32,144 bytes
    gqa = decode_cost(1000, 4, heads=8, heads_kv=2)
    assert (gqa.flops, gqa.kv_bytes, gqa.hbm_bytes) == (128_000, 32_000, 32_144)
    assert gqa.intensity == pytest.approx(3.982, abs=1e-3)
    assert decode_cost(32768, 128, heads=32, dtype="float32").intensity == pytest.approx(0.5, abs=1e-3)


def test_decode_points_are_memory_bound_and_list_mha_gqa_mqa():
    assert attention_variants(32, 8) == {"MHA": 32, "GQA (g = 4)": 8, "MQA": 1}
    assert attention_variants(8) == {"MHA": 8, "MQA": 1}
    df = decode_points(32768, 128, heads=32, heads_kv=8)  # 256 MiB of fp16 K/V for MHA
    assert set(df["bound"]) == {"memory"}
    h100 = df[df["device"] == H100.name].set_index("variant")
    assert h100.loc["MHA", "kv_bytes"] == 2 * 32 * 32768 * 128 * 2
    assert h100.loc["MHA", "kv_bytes"] / h100.loc["GQA (g = 4)", "kv_bytes"] == 4
    assert h100.loc["MHA", "time_s"] == pytest.approx(h100.loc["MHA", "hbm_bytes"] / 3.35e12)
    assert h100["intensity"].is_monotonic_increasing  # MHA < GQA < MQA
    with pytest.raises(ValueError, match="must divide heads"):
        decode_points(1024, 64, heads=32, heads_kv=5)


# ----------------------------------------------------------------------------------------------------------------------
# training: the price of recomputation


def test_recomputation_costs_one_matmul_and_saves_p():
    c = recompute_cost(1024, 1024, 64, batch=2, heads=4, dtype="float16")
    one_matmul = 2 * 1024 * 1024 * 64 * 2 * 4  # S = Q K^T for every (b, h)
    assert (c.forward_flops, c.backward_flops_stored_p, c.backward_flops) == (
        2 * one_matmul, 4 * one_matmul, 5 * one_matmul)
    assert c.extra_flops == one_matmul and c.extra_backward_fraction == 0.25
    assert c.extra_training_fraction == pytest.approx(1 / 6)
    assert c.stored_p_bytes == 2 * 4 * 1024 * 1024 * 2 and c.stored_lse_bytes == 2 * 4 * 1024 * 4
    assert c.memory_saved_bytes == c.stored_p_bytes - c.stored_lse_bytes


def test_a_causal_tiled_kernel_recomputes_only_its_computed_tiles():
    dense = recompute_cost(1024, 1024, 64)
    causal = recompute_cost(1024, 1024, 64, block_q=128, block_k=128, causal=True)
    assert causal.extra_flops == dense.extra_flops * 36 // 64  # 36 of 64 tiles computed
    assert causal.stored_p_bytes == dense.stored_p_bytes  # standard attention keeps all of P, masked or not
    table = recompute_table([256, 512, 1024], 64, heads=2)
    assert table["memory_saved_bytes"].is_monotonic_increasing and (table["extra_backward_fraction"] == 0.25).all()
    with pytest.raises(ValueError, match="dtype must be one of"):
        recompute_cost(8, 8, 8, dtype="int8")
