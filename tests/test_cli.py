"""cli.py: bench writes a CSV and an offline HTML report; check exits 0 or 1; bad arguments and requests over the
resource caps exit 2, no traceback; the time budget cuts a run short but keeps its results."""

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
                  "load_average", "timed_calls", "calls_set_aside", "thread_policy")


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
    ["bench", "--n", "128"],  # --out missing
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
    assert main([*RING, "--layout", "zigzag"]) == 0
    out = capsys.readouterr().out
    errors, balance, steps = _ring_figures(out)
    assert "W=1 (torchrun, gloo)" in out
    assert max(errors) <= 1e-5 and steps == 2 and balance == [("1.000", "1.000")] * 2


def test_ring_without_torchrun_starts_world_processes(capsys):
    assert main([*RING, "--world", "2", "--layout", "contiguous"]) == 0
    out = capsys.readouterr().out
    errors, balance, steps = _ring_figures(out)
    assert "W=2 (processes started here, gloo)" in out
    assert max(errors) <= 1e-5 and steps == 2 * 2 * 2
    # contiguous causal, 3 x 3 tiles per step: rank 0 computes 6 tiles, rank 1 6 + 9, so 15 / 10.5 = 1.429
    assert balance == [("1.429", "1.429")] * 2
