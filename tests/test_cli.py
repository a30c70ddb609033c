"""cli.py: bench writes a CSV and an offline HTML report; check exits 0 or 1; bad arguments exit 2, no traceback."""

import shutil
import subprocess
import sys

import pandas as pd
import pytest

from flashviz.cli import ProgressBar, main
from flashviz.sweep import COLUMNS

SMALL_BENCH = ["bench", "--n", "32", "64", "--d", "8", "--block-size", "16", "--repeats", "1", "--warmup", "0",
               "--threads", "1"]


def test_bench_writes_csv_and_html_and_prints_the_summary(tmp_path, capsys):
    csv, report = tmp_path / "out" / "results.csv", tmp_path / "report.html"
    rc = main([*SMALL_BENCH, "--impls", "naive", "flash", "flash2", "sdpa", "--out", str(csv), "--html", str(report)])
    out, err = capsys.readouterr()
    assert rc == 0
    df = pd.read_csv(csv)
    assert tuple(df.columns) == COLUMNS
    assert len(df) == 2 * 4 and (df["status"] == "ok").all()
    assert "speedup (x)" in out and "memory saving (x)" in out
    assert "8/8" in err and "done" in err  # the progress bar went to stderr
    page = report.read_text()
    assert "plotly" in page.lower() and "Plotly.newPlot" in page and "<table" in page
    assert 'src="http' not in page  # offline: plotly.js inline


def test_bench_with_mask_heads_and_training(tmp_path, capsys):
    pytest.importorskip("flashviz.backward")
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
    assert df.loc[("naive", 512), "status"].startswith("skipped:")  # S and P: 2 MiB
    assert "skipped" in out


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
    assert main(["check", "--n", "33", "--d", "16", "--tol", "0"]) == 1  # no fp32 kernel is exact
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


def test_python_dash_m_in_a_subprocess(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "flashviz", "check", "--n", "17", "--d", "8"],
                        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "passed" in ok.stdout and "USDT" not in ok.stderr
    bad = subprocess.run([sys.executable, "-m", "flashviz", "bench", "--n", "0", "--out", "x.csv"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert bad.returncode == 2 and "usage:" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.skipif(shutil.which("flashviz") is None, reason="console script not on PATH")
def test_the_console_script_is_installed(tmp_path):
    res = subprocess.run(["flashviz", "bench", "--n", "-5", "--out", "x.csv"], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
