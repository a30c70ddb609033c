"""cli.py: bench writes a CSV and an offline HTML report, or without --out only prints its tables; check exits 0 or 1;
bad arguments and requests over the resource caps exit 2, no traceback; the time budget cuts a run short but keeps its
results. ring: what cannot run (nccl without CUDA, a --world that is not torchrun's, sizes the Ring view refuses) is
one line on stderr and exit 2; a long run says its estimate, from the model's tiles and a measured time per tile."""

import shutil
import subprocess
import sys

import pandas as pd
import pytest
import torch

from flashviz.cli import ProgressBar, main
from flashviz.limits import BENCH_TIME_BUDGET_S
from flashviz.measure.context import CONTEXT_COLUMNS
from flashviz.measure.sweep import COLUMNS
from flashviz.measure.worker import InlineWorker

REPORT_COLUMNS = ("timestamp", "flashviz_version", "threads_allowed", "threads_free", "other_busy_cores",
                  "load_average", "timed_calls", "calls_set_aside", "calls_waited", "thread_policy")


@pytest.fixture
def inline(monkeypatch):
    """bench's sweep in this process (InlineWorker), so that a test can replace what the sweep calls."""
    import flashviz.cli

    monkeypatch.setattr(flashviz.cli, "make_worker", InlineWorker)


SMALL_BENCH = ["bench", "--n", "32", "64", "--d", "8", "--block-size", "16", "--repeats", "1", "--warmup", "0",
               "--threads", "1"]


def test_bench_writes_csv_and_html_and_prints_the_summary(tmp_path, capsys):
    csv, report = tmp_path / "out" / "results.csv", tmp_path / "report.html"
    rc = main([*SMALL_BENCH, "--impls", "naive", "flash", "flash2", "sdpa", "--out", str(csv), "--html", str(report)])
    out, err = capsys.readouterr()
    assert rc == 0
    df = pd.read_csv(csv)
    # each row says where, when and under what load it was measured, and how many calls were set aside
    assert tuple(df.columns) == (*COLUMNS, *CONTEXT_COLUMNS, *REPORT_COLUMNS)
    assert df["torch_version"].unique().tolist() == [torch.__version__] and (df["repeats"] >= 1).all()
    assert df["timed_calls"].nunique() == 1 and df["timed_calls"].iloc[0] == (df["repeats"] + df["set_aside"]).sum()
    assert "Timed in the timing worker with" in out  # the run's report, before the measurements
    assert len(df) == 2 * 4 and (df["status"] == "ok").all()
    assert "speedup (x)" in out and "memory saving (x)" in out
    assert "8/8" in err and "done" in err  # the progress bar went to stderr
    page = report.read_text()
    assert "plotly" in page.lower() and "Plotly.newPlot" in page and "<table" in page
    assert 'src="http' not in page  # offline: plotly.js inline


def test_bench_without_out_prints_its_tables_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([*SMALL_BENCH, "--impls", "naive", "flash"]) == 0
    out, _ = capsys.readouterr()
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["naive"], ["flash"])]
    want = [(impl, n, "ok") for impl in ("flash", "naive") for n in (32, 64)]
    assert sorted((r[0], int(r[1]), r[-1]) for r in rows) == want
    summary = out.split("Summary: flash vs naive")[1]
    assert "speedup (x)" in summary and "memory saving (x)" in summary and "wrote" not in out
    assert list(tmp_path.iterdir()) == []


def test_bench_defaults_are_the_dashboards_benchmark_defaults():
    from flashviz.app.state import Settings
    from flashviz.cli import _build_parser
    from flashviz.measure.timing import AUTO

    args = _build_parser().parse_args(["bench", "--out", "x.csv"])
    s = Settings()  # the Benchmark view's defaults
    assert (tuple(args.n), args.block_size, tuple(args.impls), args.heads, args.d) == (
        s.ns, s.bench_block, s.impls, s.heads, s.d)
    assert (args.repeats == AUTO) == s.sure  # repeat until sure, as the view


def test_bench_with_mask_heads_and_training(tmp_path, capsys):
    csv = tmp_path / "r.csv"
    rc = main([*SMALL_BENCH, "--window", "8", "none", "--heads", "2", "--batch", "2", "--training",
               "--impls", "flash2", "sdpa", "--out", str(csv)])
    capsys.readouterr()
    assert rc == 0
    df = pd.read_csv(csv)
    assert (df["window"] == "8,inf").all() and (df["heads"] == 2).all() and (df["batch"] == 2).all()
    assert (df["status"] == "ok").all()


def test_bench_memory_budget_skips_naive_but_still_reports(tmp_path, capsys):
    csv = tmp_path / "r.csv"
    rc = main(["bench", "--n", "32", "512", "--d", "8", "--repeats", "1", "--memory-budget-mib", "1",
               "--impls", "naive", "flash", "--out", str(csv)])
    out, _ = capsys.readouterr()
    assert rc == 0
    df = pd.read_csv(csv).set_index(["impl", "N"])
    assert df.loc[("naive", 512), "status"].startswith("not run:")  # S and P: 2 MiB
    assert "not run" in out


@pytest.mark.parametrize("argv", [
    ["bench", "--n", "0", "--out", "x.csv"],
    ["bench", "--n", str(10 ** 9), "--out", "x.csv"],
    ["bench", "--n", "128", "--block-size", "0", "--out", "x.csv"],
    ["bench", "--n", "128", "--impls", "flash3", "--out", "x.csv"],
    ["bench", "--n", "abc", "--out", "x.csv"],
    ["bench", "--n", "128", "--out"],  # --out without its file
    ["bench", "--n", "128", "--window", "-1", "0", "--out", "x.csv"],
    ["bench", "--n", "128", "--device", "tpu", "--out", "x.csv"],
    ["check", "--d", "0"],
    ["frobnicate"],
    [],
])
def test_bad_arguments_exit_2_with_usage_and_no_traceback(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    _, err = capsys.readouterr()
    assert "usage:" in err and "Traceback" not in err
    assert not (tmp_path / "x.csv").exists()


def test_check_passes_and_fails_on_the_bar(capsys):
    assert main(["check", "--n", "33", "--d", "16", "--block-size", "16"]) == 0
    out, _ = capsys.readouterr()
    assert "PASS" in out and "FAIL" not in out and "kv_outer" in out and "q_outer" in out
    assert main(["check", "--n", "33", "--d", "16", "--tol", "1e-30"]) == 1  # no fp32 kernel is that close
    out, _ = capsys.readouterr()
    assert "FAIL" in out


def test_progress_bar_draws_on_its_stream():
    import io

    stream = io.StringIO()
    bar = ProgressBar(stream, width=10)
    bar(0, 4, "naive N=256")
    bar(4, 4, "done")
    text = stream.getvalue()
    assert "[..........] 0/4 naive N=256" in text and "[##########] 4/4 done" in text and text.endswith("\n")


@pytest.mark.slow
def test_python_dash_m_in_a_subprocess(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "flashviz", "check", "--n", "17", "--d", "8"],
                        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "passed" in ok.stdout and "USDT" not in ok.stderr
    bad = subprocess.run([sys.executable, "-m", "flashviz", "bench", "--n", "0", "--out", "x.csv"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert bad.returncode == 2 and "usage:" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("flashviz") is None, reason="console script not on PATH")
def test_the_console_script_is_installed(tmp_path):
    res = subprocess.run(["flashviz", "bench", "--n", "-5", "--out", "x.csv"], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr


# ----------------------------------------------------------------------------------------------------------------------
# resource guards: caps shared with the dashboard (flashviz.limits), the time budget, the error bar


@pytest.mark.parametrize("argv,says", [
    (["bench", "--n", *map(str, range(1, 10)), "--out", "x.csv"], "at most 8 (sweep size cap)"),
    (["bench", "--n", "128", "--repeats", "21", "--out", "x.csv"], "repeats (or 'auto') must be between 1 and 20"),
    (["bench", "--n", "128", "--warmup", "21", "--out", "x.csv"], "warmup must be between 0 and 20"),
    (["bench", "--n", "1024", "--batch", "100000", "--heads", "64", "--impls", "flash", "--out", "x.csv"],
     "batch must be between 1 and 64"),
    (["bench", "--n", "128", "--heads", "65", "--out", "x.csv"], "heads must be between 1 and 64"),
    (["bench", "--n", "131072", "--block-size", "1", "--out", "x.csv"], "17,179,869,184 tiles per call"),
    (["bench", "--n", "4096", "--block-q", "1", "--block-k", "2", "--impls", "flash2", "--out", "x.csv"],
     "Raise --block-size (or --block-q / --block-k) to at least 16"),
    (["bench", "--n", "131072", "--block-size", "1024", "--batch", "64", "--heads", "64", "--impls", "flash",
      "--out", "x.csv"], "the cap is 1e+14 FLOPs"),
    (["bench", "--n", "128", "--time-budget", "0", "--out", "x.csv"], "--time-budget must be a finite number > 0"),
    (["bench", "--n", "128", "--time-budget", "nan", "--out", "x.csv"], "--time-budget must be a finite number"),
    (["bench", "--n", "128", "--time-budget", "soon", "--out", "x.csv"], "--time-budget must be a number"),
    (["check", "--tol", "nan"], "--tol must be a finite number > 0"),
    (["check", "--tol", "inf"], "--tol must be a finite number > 0"),
    (["check", "--tol=-1e-5"], "--tol must be a finite number > 0"),
    (["check", "--tol", "0"], "--tol must be a finite number > 0"),
    (["check", "--d", *map(str, range(1, 10))], "--d lists 9 values"),
])
def test_oversized_or_odd_requests_are_usage_errors_that_say_why(argv, says, capsys, tmp_path, monkeypatch, inline):
    import flashviz.cli
    import flashviz.measure.sweep

    def never(*args, **kwargs):
        raise AssertionError("a refused request must not start measuring")

    monkeypatch.setattr(flashviz.measure.sweep, "run_sweep", never)
    monkeypatch.setattr(flashviz.cli, "_check_error", never)
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    _, err = capsys.readouterr()
    assert "usage:" in err and says in err and "Traceback" not in err
    assert not (tmp_path / "x.csv").exists()


def test_tiles_are_only_capped_when_a_tiled_kernel_runs(tmp_path, capsys):
    csv = tmp_path / "r.csv"
    assert main(["bench", "--n", "300", "--d", "8", "--block-size", "1", "--impls", "sdpa", "--repeats", "1",
                 "--out", str(csv)]) == 0  # 90,000 tiles, but sdpa has none
    capsys.readouterr()
    assert (pd.read_csv(csv)["status"] == "ok").all()


def test_inputs_over_the_memory_budget_are_not_run_rows_not_a_traceback(tmp_path, capsys):
    csv = tmp_path / "r.csv"
    rc = main(["bench", "--n", "1024", "--batch", "64", "--heads", "64", "--impls", "flash", "sdpa", "--repeats",
               "1", "--memory-budget-mib", "100", "--out", str(csv)])
    out, err = capsys.readouterr()
    assert rc == 0 and "Traceback" not in err
    status = pd.read_csv(csv)["status"]
    assert status.str.startswith("not run: inputs need 15.0 GiB, budget 100.0 MiB").all()
    assert "inputs need 15.0 GiB" in out


def test_the_time_budget_cuts_the_run_short_and_still_writes_the_results(tmp_path, capsys, monkeypatch, inline):
    import flashviz.measure.sweep

    ticks = iter(range(10 ** 6))
    monkeypatch.setattr(flashviz.measure.sweep, "_now", lambda: float(next(ticks)))  # every look at the clock: +1 s
    csv = tmp_path / "r.csv"
    # the clock is read at the start (0 s), then at N=32 before the row (1), the memory (2) and the timing (3)
    rc = main([*SMALL_BENCH, "--impls", "flash", "--time-budget", "3.5", "--out", str(csv)])
    _, err = capsys.readouterr()
    assert rc == 0
    df = pd.read_csv(csv)
    assert df.set_index("N").loc[32, "status"] == "ok"
    assert df.set_index("N").loc[64, "status"].startswith("not run: time budget of 3.5 s used up before this row")
    assert "time budget of 3.5 s ran out; 1 row(s) were not measured. Raise --time-budget" in err


def test_the_time_budget_reaches_the_sweep(tmp_path, capsys, monkeypatch, inline):
    import flashviz.measure.sweep

    seen = {}
    real = flashviz.measure.sweep.run_sweep
    monkeypatch.setattr(flashviz.measure.sweep, "run_sweep", lambda *a, **k: seen.update(k) or real(*a, **k))
    assert main([*SMALL_BENCH, "--impls", "flash", "--out", str(tmp_path / "a.csv")]) == 0
    assert seen["time_budget_s"] == BENCH_TIME_BUDGET_S == 600
    assert main([*SMALL_BENCH, "--impls", "flash", "--time-budget", "none", "--out", str(tmp_path / "b.csv")]) == 0
    assert seen["time_budget_s"] is None
    capsys.readouterr()


# ----------------------------------------------------------------------------------------------------------------------
# ring

RING = ["ring", "--seq-len", "24", "--head-dim", "4", "--heads", "2", "--kv-heads", "1", "--causal", "--block-size",
        "4"]


def _ring_figures(out: str) -> tuple[list[float], list[tuple[str, str]], int]:
    """The printed errors against float64, the (measured, model) imbalance lines and the number of step lines."""
    import re

    errors = re.search(r"float64: out (\S+), lse (\S+), dq (\S+), dk (\S+), dv (\S+)", out).groups()
    balance = re.findall(r"busiest rank / mean: (\S+) \(model (\S+)\)", out)
    steps = len(re.findall(r"^\s*(?:forward|backward)\s+\d", out, re.M))
    return [float(e.rstrip(",")) for e in errors], balance, steps


@pytest.mark.parametrize(("args", "says"), [
    (["--world", "4", "--layout", "zigzag", "--seq-len", "30"], "--seq-len 30 is not divisible by 2W = 8"),
    (["--world", "4", "--seq-len", "30"], "Pad the sequence to N = 32"),
    (["--kv-heads", "3", "--heads", "4"], "--kv-heads 3 must divide --heads 4"),
    (["--world", "0"], "--world must be between 1 and"),
    (["--layout", "spiral"], "invalid choice: 'spiral'"),
])
def test_ring_refuses_bad_settings_with_usage_and_exit_2(args, says, capsys):
    assert main(["ring", *args]) == 2
    assert says in capsys.readouterr().err


def test_ring_under_torchrun_uses_its_rendezvous_and_rank_0_prints(monkeypatch, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": str(port)}.items():
        monkeypatch.setenv(name, value)  # what torchrun sets for each rank: a world of one here, no process started
    monkeypatch.setattr("flashviz.cli.RING_LONG_S", 0.0)  # every run is "long": rank 0 says its estimate first
    assert main([*RING, "--layout", "zigzag"]) == 0
    out, err = capsys.readouterr()
    errors, balance, steps = _ring_figures(out)
    assert "W=1 (torchrun, gloo)" in out
    # W = 1, 6 x 6 tiles, causal: 21 computed in each phase
    assert "busiest rank: 21 forward tiles at" in err and "21 backward tiles at" in err
    assert max(errors) <= 1e-5 and steps == 2 and balance == [("1.000", "1.000")] * 2


def test_ring_without_torchrun_starts_world_processes(capsys):
    assert main([*RING, "--world", "2", "--layout", "contiguous"]) == 0
    out = capsys.readouterr().out
    errors, balance, steps = _ring_figures(out)
    assert "W=2 (processes started here, gloo)" in out
    assert max(errors) <= 1e-5 and steps == 2 * 2 * 2
    # contiguous causal, 3 x 3 tiles per step: rank 0 computes 6 tiles, rank 1 6 + 9, so 15 / 10.5 = 1.429
    assert balance == [("1.429", "1.429")] * 2


def _one_line_refusal(argv: list[str], capsys) -> str:
    """main(argv) refuses with exit code 2 and one line on stderr (no usage block, no traceback); that line."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("flashviz ring: error: "), err
    return err


@pytest.fixture
def no_ring_run(monkeypatch):
    """A refused ring must start no process and probe nothing."""
    import flashviz.cli

    def never(*args, **kwargs):
        raise AssertionError("a refused ring must not start")

    for name in ("run_ring", "_say_estimate"):
        monkeypatch.setattr(flashviz.cli, name, never)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for a machine without CUDA")
def test_ring_nccl_without_cuda_is_a_one_line_error(capsys, no_ring_run):
    err = _one_line_refusal([*RING, "--backend", "nccl"], capsys)
    assert "--backend nccl needs CUDA" in err and "use --backend gloo" in err


def test_a_world_other_than_torchruns_is_a_one_line_error(monkeypatch, capsys, no_ring_run):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    err = _one_line_refusal([*RING, "--world", "3"], capsys)
    assert "--world 3 differs from torchrun's world size 2" in err and "--nproc-per-node 3" in err


@pytest.mark.parametrize(("n", "world", "block"), [(4096, 4, 8), (2048, 2, 4), (131072, 2, 64), (4096, 4, 31)])
def test_ring_refuses_the_sizes_the_ring_view_refuses_and_says_the_fix(n, world, block, capsys, no_ring_run):
    from flashviz.views.ring.data import MAP_TILES_MAX, RingSetup, setup_problem

    assert setup_problem(RingSetup(n, world, "contiguous", True, block, "float32", 2)) is not None  # the view's
    err = _one_line_refusal(["ring", "--seq-len", str(n), "--world", str(world), "--block-size", str(block)], capsys)
    need = -(-n // MAP_TILES_MAX)  # the smallest tile with at most MAP_TILES_MAX tiles per side
    assert f"= {-(-n // block)} tiles per side" in err and f"Raise --block-size to at least {need}" in err
    assert setup_problem(RingSetup(n, world, "contiguous", True, need, "float32", 2)) is None  # the fix works


def test_the_ring_estimate_is_the_busiest_ranks_tiles_at_the_measured_time_per_tile():
    from flashviz.cli import RingEstimate, _build_parser, _ring_estimate
    from flashviz.ring import BACKWARD, FORWARD, ring_schedule

    args = _build_parser().parse_args([*RING, "--world", "3", "--layout", "contiguous"])
    estimate = _ring_estimate(args, 3, torch.device("cpu"))
    model = ring_schedule(24, 3, "contiguous", 4, True, heads=2, heads_kv=1, head_dim=4, backward=True)
    busiest = 2 * 2 ** 2 + 2 * 3 // 2  # contiguous causal: the last rank, 2 full steps of 2 x 2 tiles and the diagonal
    assert estimate.tiles == {FORWARD: busiest, BACKWARD: busiest}
    assert estimate.tiles == {p: max(model.tiles_per_rank(p)) for p in (FORWARD, BACKWARD)}
    assert all(t > 0 for t in estimate.tile_s.values()) and estimate.reference_s > 0  # measured on this machine
    share = max(1.0, 3 / estimate.cores)
    kernels = share * busiest * (estimate.tile_s[FORWARD] + estimate.tile_s[BACKWARD])
    assert estimate.seconds == pytest.approx(kernels + estimate.reference_s)
    fixed = RingEstimate({FORWARD: 100, BACKWARD: 50}, {FORWARD: 0.01, BACKWARD: 0.04}, reference_s=2.0, world=4,
                         cores=2, probe="")
    assert fixed.seconds == pytest.approx(2 * (100 * 0.01 + 50 * 0.04) + 2.0)  # 4 processes on 2 cores: twice
    assert "about 8 s" in fixed.sentence() and "4 processes sharing 2 cores" in fixed.sentence()


def test_the_ring_refuses_a_float64_reference_that_would_not_fit(capsys, no_ring_run):
    from flashviz.measure.guards import default_memory_budget
    from flashviz.units import format_bytes

    argv = ["ring", "--seq-len", "131072", "--block-size", "1024", "--heads", "2"]
    err = _one_line_refusal(argv, capsys)
    # the oracle: S, P, dP and dS of B H N^2 float64 scores, and the causal mask's temporaries (none here)
    need = 4 * 2 * 131072 ** 2 * 8
    assert need > default_memory_budget() and f"needs {format_bytes(need)} for its N x N matrices" in err
    assert "Lower --seq-len" in err
