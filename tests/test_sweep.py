"""sweep.py: tidy rows, the memory guard, progress, training mode, block-size sweeps and input validation."""

import math

import pandas as pd
import pytest
import torch

from flashviz.iomodel import io_cost
from flashviz.sweep import (
    COLUMNS,
    IMPLS,
    MAX_N,
    RunConfig,
    available_memory_bytes,
    default_memory_budget,
    naive_bytes_needed,
    run_block_sweep,
    run_sweep,
)

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
    assert status.startswith("skipped:") and str(need) in status and str(budget) in status
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
    import flashviz.sweep as sweep_module

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 1 bytes.")

    monkeypatch.setattr(sweep_module, "naive_attention", out_of_memory)
    df = run_sweep([32], d=8, block_size=16, impls=("naive", "flash"), repeats=1)
    status = df.set_index("impl")["status"]
    assert status["naive"].startswith("skipped: failed with RuntimeError: DefaultCPUAllocator")
    assert status["flash"] == "ok"
