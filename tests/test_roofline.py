"""roofline.py, decode.py, training.py: the GPU model against hand-computed values. This machine's measured roof:
tests/test_roofline_runs.py."""

import pytest

from flashviz.model.decode import attention_variants, decode_cost, decode_points
from flashviz.model.iomodel import io_cost
from flashviz.model.roofline import (
    A100,
    GPUS,
    H100,
    H200,
    ROOFLINE_COLUMNS,
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


def test_the_published_figures_and_their_ridge_points():
    assert (A100.peak("float16"), A100.bandwidth, A100.sram_per_sm) == (312e12, 2039e9, 164 * 1024)
    assert (H100.peak("bfloat16"), H100.bandwidth, H100.sram_per_sm) == (989.4e12, 3.35e12, 228 * 1024)
    assert (H200.peak("float16"), H200.bandwidth) == (989.4e12, 4.8e12)  # H100's compute, faster HBM
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
    assert (naive["hbm_bytes"], fa2["hbm_bytes"], naive["flops"]) == (NAIVE_BYTES, FA2_BYTES, FLOPS)
    assert naive["intensity"] == pytest.approx(30.118, abs=1e-3)  # 268,435,456 / 8,912,896
    assert naive["time_s"] == pytest.approx(4.3712e-6, rel=1e-4) and naive["bound"] == "memory"
    assert naive["attainable_flops"] == pytest.approx(30.118 * 2039e9, rel=1e-4)
    # both memory-bound on every GPU here, so the predicted speedup is the ratio of bytes: 8,912,896 / 2,361,344
    for gpu in GPUS:
        assert df.loc[(gpu.name, "q_outer"), "speedup_vs_naive"] == pytest.approx(3.7745, abs=1e-4)
        assert df.loc[(gpu.name, "naive"), "speedup_vs_naive"] == 1.0
    assert df.loc[(A100.name, "kv_outer"), "speedup_vs_naive"] < df.loc[(A100.name, "q_outer"), "speedup_vs_naive"]


def test_a_compute_bound_kernel_gains_only_what_its_flops_allow():
    # causal at N = 4096, d = 64, 8 heads: naive computes every score, the tiled kernels about half of them
    df = roofline_points(4096, 64, block_q=128, block_k=128, heads=8, causal=True, devices=[A100])
    rows = df.set_index("algorithm")
    cost = io_cost("q_outer", 4096, 4096, 64, 128, 128, heads=8, causal=True, dtype_bytes=2)
    assert rows.loc["q_outer", "flops"] == cost.flops < rows.loc["naive", "flops"]
    assert rows.loc["q_outer", "time_s"] == pytest.approx(max(cost.flops / 312e12, cost.bytes / 2039e9))


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
