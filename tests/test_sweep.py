"""sweep.py: tidy rows, the memory and time guards, progress, training mode, block-size sweeps and input validation."""

import math

import pandas as pd
import pytest
import torch

from flashviz.measure.guards import (
    GIB,
    available_memory_bytes,
    default_memory_budget,
    input_bytes,
    input_bytes_needed,
    naive_bytes_needed,
)
from flashviz.measure.impls import RunConfig, resolve_dtype
from flashviz.measure.sweep import COLUMNS, MAX_N, cut_short, run_block_sweep, run_sweep
from flashviz.model.iomodel import io_cost
from flashviz.vocab import IMPLS

FP32 = 4  # bytes per element
TOL = 1e-5  # fp32 kernels against SDPA in float64


@pytest.fixture(scope="module")
def sweep():
    return run_sweep([64, 96, 256], d=16, block_size=32, impls=IMPLS, batch=1, heads=2, repeats=2, threads=1)


def test_one_tidy_row_per_impl_and_n_with_exactly_the_columns(sweep):
    assert tuple(sweep.columns) == COLUMNS
    assert len(sweep) == 3 * len(IMPLS)
    assert set(zip(sweep["impl"], sweep["N"], strict=True)) == {(i, n) for i in IMPLS for n in (64, 96, 256)}
    assert (sweep["status"] == "ok").all()
    assert (sweep["threads"] == 1).all() and (sweep["device"] == "cpu").all() and (sweep["dtype"] == "float32").all()
    assert (sweep["heads"] == 2).all() and (sweep["d"] == 16).all()
    assert sweep.attrs["mode"] == "forward"


def test_measurements_are_filled_in_and_consistent(sweep):
    assert (sweep["time_s"] > 0).all() and (sweep["time_iqr_s"] >= 0).all()
    assert (sweep["peak_bytes"] > 0).all()
    assert (sweep["max_abs_err"] < TOL).all()
    assert sweep["gflops"].to_numpy() == pytest.approx((sweep["flops"] / sweep["time_s"] / 1e9).to_numpy())
    tiled = sweep["impl"].isin(["flash", "flash2"])
    assert (sweep.loc[tiled, "block_q"] == 32).all() and sweep.loc[~tiled, "block_q"].isna().all()
    assert sweep.loc[sweep["impl"] == "sdpa", "hbm_bytes"].isna().all()
    row = sweep[(sweep["impl"] == "flash2") & (sweep["N"] == 96)].iloc[0]
    assert row["hbm_bytes"] == io_cost("q_outer", 96, 96, 16, 32, 32, heads=2).bytes
    assert row["flops"] == 4 * 96 * 96 * 16 * 2


def test_time_columns_are_seconds(monkeypatch):
    """Every implementation made to sleep SLEEP_S first: time_s must be at least that (a time in thousands of
    seconds fails), and the repeats of all rows together no more than the sweep's own wall time (milliseconds
    fail). GFLOP/s follow from the seconds."""
    import time

    import flashviz.measure.impls as impls_module

    SLEEP_S = 0.02  # seconds
    real = impls_module.call_fn

    def sleeping(impl, cfg):
        fn = real(impl, cfg)

        def run(*inputs):
            time.sleep(SLEEP_S)
            return fn(*inputs)
        return run

    monkeypatch.setattr(impls_module, "call_fn", sleeping)
    t0 = time.perf_counter()
    df = run_sweep([16, 32], d=8, block_size=16, impls=("naive", "flash", "sdpa"), repeats=2, warmup=0)
    elapsed = time.perf_counter() - t0
    assert (df["status"] == "ok").all()
    assert (df["time_s"] >= SLEEP_S).all(), df["time_s"]
    assert 2 * df["time_s"].sum() <= elapsed  # each median is at most the larger of its 2 samples
    assert df["gflops"].to_numpy() == pytest.approx((df["flops"] / df["time_s"] / 1e9).to_numpy())
    blocks = run_block_sweep(32, [8, 16], d=8, repeats=1, warmup=0)
    assert (blocks["time_s"] >= SLEEP_S).all()


def test_modelled_hbm_bytes_use_the_dtype_size():
    for dtype, nbytes in (("float64", 8), ("float16", 2), ("bfloat16", 2)):
        df = run_sweep([48], d=8, block_size=16, impls=("naive", "flash", "flash2"), repeats=1, dtype=dtype,
                       causal=True).set_index("impl")
        for impl, algorithm in (("naive", "naive"), ("flash", "kv_outer"), ("flash2", "q_outer")):
            cost = io_cost(algorithm, 48, 48, 8, 16, 16, causal=True)
            assert df.loc[impl, "hbm_bytes"] == cost.accesses * nbytes, (dtype, impl)


def test_naive_memory_grows_like_n_squared_and_flash_does_not(sweep):
    peak = sweep.set_index(["impl", "N"])["peak_bytes"]
    assert peak["naive", 256] >= 2 * 2 * 256 * 256 * FP32  # S and P of both heads
    assert peak["naive", 256] / peak["naive", 64] > 10  # x16 in N^2
    assert peak["flash", 256] < peak["naive", 256] / 4


def test_the_memory_guard_skips_naive_and_says_how_many_bytes_it_needs():
    budget = 100_000  # bytes: too small for naive's S and P at N=128
    df = run_sweep([16, 128], d=8, block_size=16, impls=("naive", "flash", "sdpa"), repeats=1,
                   memory_budget_bytes=budget)
    naive = df[df["impl"] == "naive"].set_index("N")
    assert naive.loc[16, "status"] == "ok"
    status = naive.loc[128, "status"]
    need = 2 * 128 * 128 * FP32
    assert status.startswith("not run:") and str(need) in status and str(budget) in status
    assert math.isnan(naive.loc[128, "time_s"]) and math.isnan(naive.loc[128, "peak_bytes"])
    assert not math.isnan(naive.loc[128, "hbm_bytes"])  # the model needs no run
    assert (df[df["impl"] != "naive"]["status"] == "ok").all()  # the process lived and the others ran
    assert df.attrs["memory_budget_bytes"] == budget


def test_naive_bytes_needed_and_the_default_budget():
    cfg = RunConfig(1024, 64, 128, 128, False, None, 2, 8, torch.float32, torch.device("cpu"), "forward")
    assert naive_bytes_needed(cfg) == 2 * 2 * 8 * 1024 * 1024 * FP32
    training = RunConfig(1024, 64, 128, 128, True, None, 1, 1, torch.float16, torch.device("cpu"), "training")
    assert naive_bytes_needed(training) > 4 * 1024 * 1024 * 2  # + the causal mask temporaries
    assert available_memory_bytes() > 0
    assert 0 < default_memory_budget() <= available_memory_bytes()


def test_progress_is_called_before_each_row_and_once_at_the_end():
    calls = []
    run_sweep([32, 48], d=8, block_size=16, impls=("flash", "sdpa"), repeats=1,
              progress=lambda done, total, label: calls.append((done, total, label)))
    done = [c[0] for c in calls]
    assert done == sorted(done) and done[0] == 0 and done[-1] == 4  # non-decreasing, ends at total
    assert all(c[1] == 4 for c in calls)
    labels = [c[2] for c in calls]
    assert labels[:3] == ["memory of flash at N=32", "memory of sdpa at N=32", "timing flash, sdpa at N=32"]
    assert calls[3][0] == 2 and labels[-1] == "done"


def test_masks_and_other_dtypes_run():
    df = run_sweep([70], d=8, block_size=16, impls=IMPLS, causal=True, window=(20, None), repeats=1,
                   dtype="float64")
    assert (df["status"] == "ok").all()
    assert (df["max_abs_err"] < 1e-10).all()
    assert (df["window"] == "20,inf").all() and df["causal"].all()
    # naive computes every score; the tiled kernels and the sdpa count only what the mask lets through
    flops = df.set_index("impl")["flops"]
    assert flops["naive"] > flops["flash"] >= flops["sdpa"]


@pytest.mark.parametrize("causal", [False, True])
def test_training_mode_measures_forward_and_backward(causal):
    df = run_sweep([64, 100], d=16, block_size=32, impls=IMPLS, repeats=1, mode="training", causal=causal)
    assert df.attrs["mode"] == "training"
    ran = df[df["status"] == "ok"]
    assert set(ran["impl"]) == set(IMPLS)  # flash (FA1 forward order) and flash2 (FA2) both train
    assert (ran["max_abs_err"] < TOL).all()  # O and dQ, dK, dV against SDPA's autograd in float64
    assert ran["hbm_bytes"].isna().all()  # the IO model covers the forward pass only
    # forward + backward: naive keeps P for the backward, flash keeps O and L only
    peak = ran.set_index(["impl", "N"])["peak_bytes"]
    assert peak["flash2", 100] < peak["naive", 100]
    forward = run_sweep([100], d=16, block_size=32, impls=("flash2",), repeats=1, causal=causal)
    assert df.set_index(["impl", "N"]).loc[("flash2", 100), "flops"] == pytest.approx(
        3.5 * forward["flops"].iloc[0], rel=1e-9)


def test_block_sweep_rows_follow_the_block_sizes():
    df = run_block_sweep(96, [16, 32, (16, 48)], d=8, repeats=1)
    assert tuple(df.columns) == COLUMNS
    assert list(df["block_q"]) == [16, 16, 32, 32, 16, 16]
    assert list(df["block_k"]) == [16, 16, 32, 32, 48, 48]
    assert (df["status"] == "ok").all()
    hbm = df[df["impl"] == "flash"].set_index("block_k")["hbm_bytes"]
    assert hbm[32] < hbm[16]  # bigger K/V tiles: fewer passes over O
    with pytest.raises(ValueError, match="drawn from"):
        run_block_sweep(96, [16], impls=("naive",))
    with pytest.raises(ValueError, match="at least one"):
        run_block_sweep(96, [])


@pytest.mark.parametrize("kwargs,error,match", [
    ({"ns": [0]}, ValueError, "between 1 and"),
    ({"ns": [10 ** 9]}, ValueError, str(MAX_N)),
    ({"ns": []}, ValueError, "at least one"),
    ({"ns": 256}, TypeError, "list of sequence lengths"),
    ({"ns": [2.5]}, TypeError, "int"),
    ({"impls": ["foo"]}, ValueError, "unknown"),
    ({"impls": "flash"}, TypeError, "list"),
    ({"mode": "inference"}, ValueError, "training"),
    ({"dtype": "int32"}, TypeError, "float32"),
    ({"block_size": 0}, ValueError, ">= 1"),
    ({"repeats": 0}, ValueError, "repeats"),
    ({"d": 0}, ValueError, "d must be"),
    ({"progress": 5}, TypeError, "callable"),
    ({"device": "tpu"}, ValueError, "device"),
    ({"memory_budget_bytes": -1}, ValueError, "memory_budget_bytes"),
])
def test_bad_input_is_rejected_with_a_clear_message(kwargs, error, match):
    args = {"ns": [32], "d": 8, "block_size": 16, "repeats": 1}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        run_sweep(args.pop("ns"), **args)


def test_the_csv_round_trip_keeps_the_columns(tmp_path, sweep):
    path = tmp_path / "r.csv"
    sweep.to_csv(path, index=False)
    back = pd.read_csv(path)
    assert tuple(back.columns) == COLUMNS and len(back) == len(sweep)


def test_a_row_that_fails_at_run_time_is_reported_and_the_sweep_goes_on(monkeypatch):
    import flashviz.measure.impls as impls_module

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 1 bytes.")

    monkeypatch.setattr(impls_module, "naive_attention", out_of_memory)
    df = run_sweep([32], d=8, block_size=16, impls=("naive", "flash"), repeats=1)
    status = df.set_index("impl")["status"]
    assert status["naive"].startswith("failed with RuntimeError: DefaultCPUAllocator")
    assert status["flash"] == "ok"


# ----------------------------------------------------------------------------------------------------------------------
# resource guards: inputs over the memory budget, failed allocations, the time budget, odd dtypes


def test_inputs_over_the_budget_are_not_run_before_anything_is_allocated(monkeypatch):
    import flashviz.measure.impls as impls_module

    def no_allocation(*args, **kwargs):
        raise AssertionError("the input guard must skip the row before allocating q, k, v, dO")

    monkeypatch.setattr(impls_module, "make_inputs", no_allocation)
    df = run_sweep([1024], d=64, batch=100_000, heads=64, impls=("naive", "flash", "sdpa"), repeats=1,
                   memory_budget_bytes=GIB)
    status = df.set_index("impl")["status"]
    assert status["naive"].startswith("not run: naive S and P would need")  # the bigger problem is named first
    for impl in ("flash", "sdpa"):
        assert status[impl].startswith("not run: inputs need ") and ", budget 1.0 GiB" in status[impl]
        assert str(input_bytes(1024, 64, batch=100_000, heads=64)) in status[impl]
    assert df["time_s"].isna().all() and df["peak_bytes"].isna().all()


def test_input_bytes_counts_inputs_outputs_and_the_float64_reference():
    elements = 2 * 3 * 100 * 16  # B H N d
    assert input_bytes(100, 16, batch=2, heads=3) == elements * (5 * FP32 + 5 * 8)  # q k v dO O, + fp64 copies
    assert input_bytes(100, 16, batch=2, heads=3, mode="training") == elements * (8 * FP32 + 8 * 8)  # + dQ dK dV
    assert input_bytes(100, 16, batch=2, heads=3, dtype="float64") == elements * (5 * 8 + 1 * 8)  # shared inputs
    cfg = RunConfig(100, 16, 32, 32, False, None, 2, 3, torch.float16, torch.device("cpu"), "forward")
    assert input_bytes_needed(cfg) == elements * (5 * 2 + 5 * 8)


def test_a_failed_input_allocation_skips_the_configuration_and_the_sweep_goes_on(monkeypatch):
    import flashviz.measure.impls as impls_module

    real = impls_module.make_inputs

    def allocate(cfg, seed):
        if cfg.n == 48:
            raise RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 8 GiB.")
        return real(cfg, seed)

    monkeypatch.setattr(impls_module, "make_inputs", allocate)
    df = run_sweep([32, 48, 64], d=8, block_size=16, impls=("flash", "sdpa"), repeats=1)
    status = df.set_index(["impl", "N"])["status"]
    assert status["flash", 48].startswith("failed with RuntimeError: DefaultCPUAllocator")
    assert status["sdpa", 48] == status["flash", 48]
    assert (df[df["N"] != 48]["status"] == "ok").all()


def test_a_failed_reference_leaves_the_error_unknown_but_the_row_measured(monkeypatch):
    import flashviz.measure.impls as impls_module

    def out_of_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(impls_module, "reference", out_of_memory)
    df = run_sweep([32], d=8, block_size=16, impls=("flash",), repeats=1)
    assert (df["status"] == "ok").all() and df["max_abs_err"].isna().all() and (df["time_s"] > 0).all()


class FakeClock:
    """sweep._now replaced: time stands still until a test moves it."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_the_time_budget_skips_the_remaining_rows_and_returns_what_it_has(monkeypatch):
    import flashviz.measure.sweep as sweep_module

    clock = FakeClock()
    monkeypatch.setattr(sweep_module, "_now", clock)

    def progress(done, total, label):
        if label == "memory of flash at N=48":
            clock.t = 31.0  # flash's memory measurement at N=48 runs past the 30 s budget

    df = run_sweep([32, 48, 64], d=8, block_size=16, impls=("flash", "sdpa"), repeats=1, time_budget_s=30,
                   progress=progress)
    status = df.set_index(["impl", "N"])["status"]
    assert status["flash", 32] == status["sdpa", 32] == "ok"
    assert status["sdpa", 48] == status["flash", 64] == status["sdpa", 64] == (
        "not run: time budget of 30 s used up before this row ran; lower N, the repeats or the number of "
        "implementations, or raise the time budget")
    assert status["flash", 48].startswith("not run: time budget of 30 s used up while timing (0 of 1 repeats done)")
    assert df[df["N"] > 32]["time_s"].isna().all()
    assert cut_short(df) and df.attrs["time_budget_s"] == 30


def test_the_time_budget_is_checked_between_timed_repeats(monkeypatch):
    import flashviz.measure.sweep as sweep_module

    clock = FakeClock()
    monkeypatch.setattr(sweep_module, "_now", clock)
    real = sweep_module.time_calls

    def slow_time_calls(*args, stop, **kwargs):
        def slow_round() -> bool:  # checked before every interleaved repeat, each of which takes 4 s of the 10 s
            used_up = stop()
            clock.t += 4.0
            return used_up

        return real(*args, stop=slow_round, **kwargs)

    monkeypatch.setattr(sweep_module, "time_calls", slow_time_calls)
    df = run_sweep([32], d=8, block_size=16, impls=("flash", "sdpa"), repeats=5, time_budget_s=10)
    assert (df["status"].str.startswith("not run: time budget of 10 s used up while timing (3 of 5 repeats")).all()
    clock.t = 0.0
    df = run_sweep([32], d=8, block_size=16, impls=("flash", "sdpa"), repeats=2, time_budget_s=10)
    assert (df["status"] == "ok").all() and not cut_short(df)


def test_a_zero_time_budget_runs_nothing_and_no_budget_runs_everything():
    df = run_sweep([32, 64], d=8, block_size=16, impls=("flash",), repeats=1, time_budget_s=0)
    assert df["status"].str.startswith("not run: time budget of 0 s used up").all()
    blocks = run_block_sweep(64, [16, 32], d=8, repeats=1, time_budget_s=0)
    assert cut_short(blocks) and len(blocks) == 4
    assert not cut_short(run_block_sweep(64, [16], d=8, repeats=1, time_budget_s=None))


@pytest.mark.parametrize("budget,error", [(-1, ValueError), (math.nan, ValueError), ("10", TypeError),
                                          (True, TypeError)])
def test_a_bad_time_budget_is_rejected(budget, error):
    with pytest.raises(error, match="time_budget_s must be None"):
        run_sweep([32], d=8, block_size=16, repeats=1, time_budget_s=budget)
    assert (run_sweep([32], d=8, block_size=16, repeats=1, time_budget_s=10 ** 400)["status"] == "ok").all()


@pytest.mark.parametrize("dtype,shown", [
    ("Tensor", "got 'Tensor'"),
    (torch.Tensor, "got the class torch.Tensor"),
    (torch.ones(2), "got an object of type Tensor"),
    (torch.int32, "got torch.int32"),
    (None, "got None"),
])
def test_an_odd_dtype_gets_a_message_that_names_the_allowed_dtypes(dtype, shown):
    with pytest.raises(TypeError) as info:
        resolve_dtype(dtype)
    message = str(info.value)
    assert shown in message and "<class" not in message
    assert all(f"'{name}'" in message for name in ("float16", "bfloat16", "float32", "float64"))
    assert resolve_dtype(" torch.float16 ") == torch.float16


# ----------------------------------------------------------------------------------------------------------------------
# the interval of each median, repeats="auto", the run's context


def test_every_row_carries_the_interval_of_its_median_and_its_repeats(sweep):
    from flashviz.measure.stats import median_ci

    assert (sweep["time_lo_s"] <= sweep["time_s"]).all() and (sweep["time_s"] <= sweep["time_hi_s"]).all()
    # two clean calls each (up to two more run in place of calls set aside as disturbed: flashviz.measure.load)
    assert ((sweep["repeats"] == 2) | (sweep["set_aside"] > 2)).all() and sweep["set_aside"].between(0, 4).all()
    assert str(sweep["repeats"].dtype) == "Int64" and str(sweep["set_aside"].dtype) == "Int64"
    assert str(sweep["converged"].dtype) == "boolean"
    assert not sweep["converged"].any()  # two calls give no 95% interval of a median: never converged
    assert median_ci([1.0, 2.0]) == (1.0, 2.0, 0.5)  # two calls: [min, max], which covers the median half the time
    assert sweep.attrs["repeats"] == 2 and sweep.attrs["adaptive"] is None


def test_a_row_not_run_has_no_interval_and_no_repeats():
    df = run_sweep([32], d=8, block_size=16, impls=("flash",), repeats=1, time_budget_s=0)
    assert df["time_lo_s"].isna().all() and df["time_hi_s"].isna().all()
    assert df["repeats"].isna().all() and df["converged"].isna().all()


def test_repeats_auto_times_until_converged_or_its_budget_is_spent(monkeypatch):
    """The timing loop is given an Adaptive whose budget is cut to what the sweep's own budget leaves; each row
    reports how many calls it took and whether its median converged, its interval from exactly those calls."""
    import flashviz.measure.sweep as sweep_module
    from flashviz.measure.stats import median_ci
    from flashviz.measure.timing import Adaptive

    clock = FakeClock()
    monkeypatch.setattr(sweep_module, "_now", clock)
    real, given, kept = sweep_module.time_calls, [], {}

    def recording(fns, *args, **kwargs):
        given.append(kwargs["repeats"])
        out = real(fns, *args, **kwargs)
        kept.update(out)
        return out

    monkeypatch.setattr(sweep_module, "time_calls", recording)
    df = run_sweep([32], d=8, block_size=16, impls=("flash", "sdpa"), repeats=Adaptive(budget_s=30.0, max_repeats=9),
                   time_budget_s=12.0, threads=1)
    assert given == [Adaptive(budget_s=12.0, max_repeats=9)]  # the sweep had 12 s left of its budget
    assert (df["status"] == "ok").all()
    for row in df.itertuples():
        t = kept[row.impl]
        assert 6 <= row.repeats == t.repeats <= 9 and row.converged == t.converged
        assert (row.time_lo_s, row.time_hi_s) == median_ci(t.samples)[:2] and row.time_s == t.median
    assert df.attrs["repeats"] == "auto" and df.attrs["adaptive"]["max_repeats"] == 9
    given.clear()
    auto = run_sweep([32], d=8, block_size=16, impls=("flash",), repeats="auto", threads=1)
    assert given == [Adaptive()] and auto["repeats"].iloc[0] >= 6  # no sweep budget: the Adaptive's own
    given.clear()

    def late_start(done, total, label):
        if label.startswith("timing"):
            clock.t += 100.0  # the memory measurement ran past the sweep's 50 s budget

    late = run_sweep([32], d=8, block_size=16, impls=("flash",), repeats="auto", time_budget_s=50.0,
                     progress=late_start)
    assert late["status"].iloc[0].startswith("not run: time budget of 50 s used up before timing") and given == []


@pytest.mark.parametrize("repeats,error", [("fast", TypeError), (0, ValueError), (2.5, TypeError)])
def test_bad_repeats_name_the_choices(repeats, error):
    with pytest.raises(error, match="repeats"):
        run_sweep([32], d=8, block_size=16, repeats=repeats)


def test_the_sweep_keeps_its_run_context_for_the_csv(tmp_path, sweep):
    from flashviz.measure.context import CONTEXT_COLUMNS, with_context

    ctx = sweep.attrs["context"]
    assert ctx["threads"] == 1 and ctx["torch_version"] == torch.__version__ and ctx["cpu_model"]
    path = tmp_path / "r.csv"
    with_context(sweep).to_csv(path, index=False)
    back = pd.read_csv(path)
    assert tuple(back.columns) == COLUMNS + CONTEXT_COLUMNS  # threads is a column already
    assert (back["torch_version"] == torch.__version__).all() and back["cpu_model"].nunique() == 1
