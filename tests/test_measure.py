"""memory.py, timing.py and flops.py: exact peak memory (two independent methods), timing statistics, FLOP counts.

Timing units are checked on a function whose duration is known from below: time.sleep(SLEEP_S) takes at least
SLEEP_S seconds, so every reported sample must be >= SLEEP_S (a result in thousands of seconds would fail). From
above, no fixed bound (machines are noisy): the samples are measured inside the call, so together they cannot exceed
the wall time of the whole call measured around it (a result in milliseconds would).
"""

import time

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from flashviz.core.flash import flash_attention_forward
from flashviz.core.reference import naive_attention
from flashviz.measure.memory import measure_memory, measure_memory_dispatch, peak_memory_and_result
from flashviz.measure.timing import Timing, benchmark, threads_set_to, time_call, time_calls
from flashviz.model.flops import attention_flops, impl_flops, visible_pairs

MIB = 1 << 20  # bytes
FP32 = 4  # bytes per fp32 element


def _qkv(b, h, n, d, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, h, n, d, generator=gen) for _ in range(3))


# ---------------------------------------------------------------------------------------------------------------------
# known allocations


def test_a_4_mib_tensor_reads_4_mib_every_time():
    readings = {measure_memory(torch.empty, 4 * MIB // FP32) for _ in range(3)}
    assert readings == {4 * MIB}


def test_three_tensors_held_together_read_their_sum():
    sizes = (1 * MIB, 2 * MIB, 3 * MIB)

    def hold_three():
        return [torch.empty(s // FP32) for s in sizes]

    assert measure_memory(hold_three) == sum(sizes)
    assert measure_memory_dispatch(hold_three) == sum(sizes)


def test_a_freed_tensor_does_not_count_towards_the_peak():
    def one_at_a_time():
        a = torch.empty(2 * MIB // FP32)
        del a
        return torch.empty(MIB // FP32)

    assert measure_memory(one_at_a_time) == 2 * MIB  # peak while a lived; b reused no extra


def test_args_and_kwargs_reach_the_function_and_the_result_comes_back():
    peak, out = peak_memory_and_result(torch.zeros, 256, dtype=torch.float64)
    assert peak == 256 * 8 and out.dtype == torch.float64 and out.shape == (256,)


def test_tensors_that_existed_before_the_call_are_not_counted():
    x = torch.randn(MIB // FP32)
    assert measure_memory(lambda t: t.zero_(), x) == 0  # in place: nothing new
    assert 0 < measure_memory(lambda t: t.mul_(2), x) <= 64  # only the 0-dim tensor that wraps the Python 2
    assert measure_memory(lambda t: t.view(-1, 2), x) == 0  # a view shares the storage


def test_stderr_still_works_after_measuring(capfd):
    measure_memory(torch.empty, 16)
    import sys

    print("still here", file=sys.stderr)
    assert "still here" in capfd.readouterr().err


def test_non_callable_is_a_type_error_that_says_what_to_pass():
    with pytest.raises(TypeError, match="callable"):
        measure_memory(42)
    with pytest.raises(TypeError, match="callable"):
        measure_memory_dispatch("naive")


# ---------------------------------------------------------------------------------------------------------------------
# attention


def test_naive_at_2048_holds_s_and_p_together():
    B, H, N, d = 1, 1, 2048, 64
    q, k, v = _qkv(B, H, N, d)
    peak = measure_memory(naive_attention, q, k, v)
    assert peak >= 2 * B * H * N * N * FP32  # S and P alive at once
    # Pure PyTorch code: every allocation crosses the dispatcher, so the second method agrees to the byte.
    assert peak == measure_memory_dispatch(naive_attention, q, k, v)
    # and both equal the analytic count: S (matmul, then * scale), P, O
    assert peak == 2 * FP32 * B * H * N * N + FP32 * B * H * N * d


def test_naive_with_a_mask_agrees_with_the_dispatch_tracker_up_to_scalars():
    q, k, v = _qkv(1, 2, 256, 32)
    profiler = measure_memory(naive_attention, q, k, v, causal=True)
    tracker = measure_memory_dispatch(naive_attention, q, k, v, causal=True)
    # The profiler also sees 0-dim scalar temporaries that a kernel allocates and frees internally (8 bytes each).
    assert 0 <= profiler - tracker <= 64


def test_sdpa_reading_includes_its_kernel_scratch():
    B, H, N, d = 1, 2, 1024, 64
    q, k, v = _qkv(B, H, N, d)
    with threads_set_to(1):
        profiler = measure_memory(F.scaled_dot_product_attention, q, k, v)
        tracker = measure_memory_dispatch(F.scaled_dot_product_attention, q, k, v)
    out_and_lse = FP32 * B * H * N * d + FP32 * B * H * N  # O (B, H, N, d) and its logsumexp (B, H, N)
    # The dispatch tracker sees only the tensors the fused op returns: O and the logsumexp. SDPA's CPU flash kernel
    # also allocates per-thread scratch (the Br x Bc score block, row max/sum, an fp32 accumulator) with at::empty
    # inside the C++ kernel and frees it before returning; those allocations never cross the dispatcher, but the
    # allocator reports them to the profiler. The difference is exactly that scratch.
    assert tracker == out_and_lse
    assert profiler > tracker
    scratch = profiler - tracker
    assert scratch > 0 and scratch < 2 * H * N * N * FP32  # real scratch, far smaller than an N x N matrix


def test_flash_reads_a_small_fraction_of_naive():
    q, k, v = _qkv(1, 1, 2048, 64)
    naive = measure_memory(naive_attention, q, k, v)
    for loop_order in ("kv_outer", "q_outer"):
        flash = measure_memory(flash_attention_forward, q, k, v, 256, loop_order=loop_order)  # 64 tiles
        assert flash < naive / 20


# ---------------------------------------------------------------------------------------------------------------------
# time


SLEEP_S = 0.02  # seconds: a duration time.sleep guarantees from below


def sleep_for(seconds: float = SLEEP_S) -> None:
    time.sleep(seconds)


def test_time_call_reports_seconds():
    t0 = time.perf_counter()
    t = time_call(sleep_for, warmup=1, repeats=3, threads=1)
    elapsed = time.perf_counter() - t0  # seconds, around the whole call (warm-up included)
    assert all(s >= SLEEP_S for s in t.samples) and t.median >= SLEEP_S, t.samples
    assert sum(t.samples) <= elapsed, (t.samples, elapsed)


def test_time_calls_reports_seconds_for_each_function():
    t0 = time.perf_counter()
    timings = time_calls({"short": sleep_for, "long": lambda: sleep_for(2 * SLEEP_S)}, warmup=1, repeats=2)
    elapsed = time.perf_counter() - t0
    assert all(s >= SLEEP_S for s in timings["short"].samples)
    assert all(s >= 2 * SLEEP_S for s in timings["long"].samples)  # each name keeps its own samples
    assert sum(sum(t.samples) for t in timings.values()) <= elapsed


def test_benchmark_reports_seconds():
    t0 = time.perf_counter()
    seconds = benchmark(sleep_for, warmup=0, repeats=3)
    assert SLEEP_S <= seconds <= time.perf_counter() - t0


def test_time_call_reports_samples_iqr_and_the_threads_it_used():
    before = torch.get_num_threads()
    t = time_call(torch.mm, torch.randn(32, 32), torch.randn(32, 32), warmup=1, repeats=7, threads=1)
    assert isinstance(t, Timing)
    assert len(t.samples) == 7 and all(s > 0 for s in t.samples)
    assert min(t.samples) <= t.median <= max(t.samples)
    assert 0 <= t.iqr <= max(t.samples) - min(t.samples)
    assert t.threads == 1 and t.device == "cpu"
    assert torch.get_num_threads() == before  # restored


def test_time_calls_interleaves_the_functions_call_by_call():
    order = []
    fns = {"a": lambda x: order.append("a"), "b": lambda x: order.append("b")}
    timings = time_calls(fns, 0, warmup=1, repeats=3, threads=1)
    assert order == ["a", "b"] + ["a", "b"] * 3  # warm-ups, then one call of each per repeat
    assert list(timings) == ["a", "b"]
    assert all(len(t.samples) == 3 and t.threads == 1 for t in timings.values())
    with pytest.raises(TypeError, match="callables"):
        time_calls({"a": 1})


def test_time_call_with_one_repeat_has_zero_iqr():
    t = time_call(lambda: None, repeats=1, warmup=0)
    assert t.iqr == 0.0 and len(t.samples) == 1


def test_benchmark_returns_median_seconds_and_passes_kwargs():
    calls = []

    def fn(x, *, scale):
        calls.append(scale)
        return x * scale

    seconds = benchmark(fn, torch.ones(4), warmup=2, repeats=3, scale=2.0)
    assert isinstance(seconds, float) and seconds > 0  # the unit: test_benchmark_reports_seconds
    assert calls == [2.0] * 5


@pytest.mark.parametrize("kwargs", [{"repeats": 0}, {"warmup": -1}, {"threads": 0}, {"repeats": 1.5}])
def test_bad_timing_arguments_are_value_errors(kwargs):
    with pytest.raises(ValueError, match="must be"):
        time_call(lambda: None, **kwargs)


# ---------------------------------------------------------------------------------------------------------------------
# FLOPs


def test_dense_flops_are_4_n_squared_d_per_head():
    assert attention_flops(1024, 512, 64, batch=2, heads=3) == 4 * 1024 * 512 * 64 * 2 * 3
    # training: the forward's 2 matmuls + the backward's 5 (S recomputed, dV, dP, dQ, dK) = 3.5 x the forward
    assert attention_flops(128, 128, 16, training=True) == 4 * 128 * 128 * 16 * 7 // 2


def test_tiled_flops_count_computed_tiles_only():
    n, b, d = 1024, 128, 64
    T = n // b
    computed = T * (T + 1) // 2  # causal: the diagonal and below
    assert attention_flops(n, n, d, block_q=b, block_k=b, causal=True) == 4 * computed * b * b * d
    assert attention_flops(n, n, d, block_q=b, block_k=b) == attention_flops(n, n, d)  # no mask: every tile


def test_flops_need_both_block_sizes_or_neither():
    with pytest.raises(ValueError, match="both block_q and block_k"):
        attention_flops(64, 64, 8, block_q=16)


@settings(max_examples=60, deadline=None)
@given(n_q=st.integers(0, 40), n_k=st.integers(0, 40), causal=st.booleans(),
       left=st.none() | st.integers(0, 45), right=st.none() | st.integers(0, 45))
def test_visible_pairs_matches_a_dense_mask(n_q, n_k, causal, left, right):
    window = None if left is None and right is None else (left, right)
    i = torch.arange(n_q)[:, None]
    j = torch.arange(n_k)[None, :]
    mask = torch.ones(n_q, n_k, dtype=torch.bool)
    if causal:
        mask &= j <= i
    if left is not None:
        mask &= j >= i - left
    if right is not None:
        mask &= j <= i + right
    assert visible_pairs(n_q, n_k, causal=causal, window=window) == int(mask.sum())


@pytest.mark.parametrize("causal", [False, True])
def test_the_tiled_count_is_4_d_per_element_of_the_computed_tiles(causal):
    # Written out here: a 100 x 100 grid of 32-wide tiles (ragged last row and column of 4); causal computes the
    # 10 tiles on and below the diagonal, of sizes rows_i x cols_j, and skips the 6 above it.
    sizes = [32, 32, 32, 4]
    computed = [(i, j) for i in range(4) for j in range(4) if not causal or j <= i]
    pairs = sum(sizes[i] * sizes[j] for i, j in computed)
    assert len(computed) == (10 if causal else 16)
    assert attention_flops(100, 100, 16, heads=2, block_q=32, block_k=32, causal=causal) == 4 * pairs * 16 * 2
    assert attention_flops(100, 100, 16, heads=2) == 4 * 100 * 100 * 16 * 2  # naive: every score, masked or not
    # the tiled count is what the kernel computes: the tiles its on_tile events report
    q, k, v = _qkv(1, 2, 100, 16)
    events = []
    flash_attention_forward(q, k, v, 32, causal=causal, on_tile=events.append)
    assert sorted((e.q_block, e.k_block) for e in events) == computed


def test_sdpa_is_invisible_to_the_flop_counter_on_cpu_so_it_is_charged_the_visible_pairs():
    # Why flashviz counts FLOPs analytically: torch's counter has no formula for CPU SDPA and reports 0.
    from torch.utils.flop_counter import FlopCounterMode

    q, k, v = _qkv(1, 1, 64, 16)
    with FlopCounterMode(display=False) as counter:
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert counter.get_total_flops() == 0
    assert impl_flops("sdpa", 64, 16, causal=True) == 4 * visible_pairs(64, 64, causal=True) * 16 == 4 * 2080 * 16


def test_concurrent_measurements_from_threads_are_serialised_and_exact():
    """The profiler is process-wide: two at once used to crash the process (SIGSEGV); the lock makes them queue."""
    import threading

    x = torch.randn(256, 256)
    expected = 256 * 256 * 4  # one fp32 (256, 256) result, bytes
    readings: list[int] = []

    def work():
        for _ in range(10):
            readings.append(measure_memory(torch.mm, x, x))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert readings == [expected] * 30


# ---------------------------------------------------------------------------------------------------------------------
# the probe's spread and the run's context


def test_the_roof_probe_reports_the_spread_of_its_calls():
    from flashviz.measure import roof_probe

    roof = roof_probe.machine_roof(1)
    first = roof_probe.roof_spread(1)
    assert first.threads == 1 and first.flops.calls >= roof_probe.PROBE_REPEATS
    for spread in (first.flops, first.bandwidth):
        assert spread.lowest <= spread.q1 <= spread.median <= spread.q3 <= spread.best and spread.rel_iqr >= 0
    roof_probe.measure_again(1)
    again = roof_probe.roof_spread(1)
    assert again.flops.calls == first.flops.calls + roof_probe.PROBE_REPEATS  # every call of every probe is kept
    # the roof is the best call of all; the spread lies below it
    assert again.flops.best == roof_probe.machine_roof(1).peak("float32") >= roof.peak("float32")
    assert again.bandwidth.best == roof_probe.machine_roof(1).bandwidth
    check = roof_probe.with_spread(roof_probe.bounded(roof, {}, lambda: roof), 1)
    assert check.spread == again and check.roof == roof


def test_spread_of_known_rates():
    from flashviz.measure.roof_probe import spread_of

    s = spread_of([28e9, 12.7e9, 25e9, 27e9, 26e9])  # bytes/s: one call of five slowed by a busy machine
    assert (s.best, s.median, s.lowest, s.q1, s.q3, s.calls) == (28e9, 26e9, 12.7e9, 25e9, 27e9, 5)
    assert s.rel_iqr == pytest.approx(2e9 / 26e9)
    single = spread_of([3.0])  # one call: no spread
    assert (single.best, single.q1, single.median, single.q3, single.lowest, single.calls) == (3.0,) * 5 + (1,)
    with pytest.raises(ValueError, match="at least one"):
        spread_of([])


@pytest.mark.parametrize("text,model", [
    ("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6130\n",
     "Intel(R) Xeon(R) Gold 6130"),
    ("processor\t: 0\nBogoMIPS\t: 108.00\n\nHardware\t: BCM2835\n", "BCM2835"),
    ("model name\t:\nHardware\t: X\n", "X"),  # an empty field is skipped
])
def test_the_cpu_model_is_read_from_cpuinfo(tmp_path, text, model):
    from flashviz.measure.context import cpu_model

    path = tmp_path / "cpuinfo"
    path.write_text(text)
    assert cpu_model(path) == model


def test_without_cpuinfo_the_cpu_model_falls_back_to_platform(tmp_path):
    import platform

    from flashviz.measure.context import cpu_model, run_context

    assert cpu_model(tmp_path / "absent") == (platform.processor() or platform.machine() or "unknown")
    ctx = run_context(3)
    assert ctx["threads"] == 3 and ctx["torch_version"] == torch.__version__ and ctx["gpu"] == ""
    assert run_context()["threads"] == torch.get_num_threads()
