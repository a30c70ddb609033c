"""Concurrent load, small: three browser sessions press "Run benchmark" on one server at the same time.

Runs benchmarks/load.py (which starts its own `streamlit run app.py` on a free 127.0.0.1 port with
FLASHVIZ_TIMING_LOG set, opens one headless Chromium context per session and clicks every run button within a
second) and checks that every session was served, none showed an exception box or an error, and that the
dashboard's timing lock never let two timing runs overlap: its log holds one finished start/end interval per
session, pairwise disjoint. Figures (p50/p95, peak RSS) are printed, never asserted: machines are noisy.

load.py waits for each page, click and result as it happens (a loaded machine is slower, not wrong); its per-phase
bound and this test's are generous, only there so that a hung server ends the test instead of the CI job.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
LOAD = ROOT / "benchmarks" / "load.py"
SESSIONS = 3
PHASE_S = 900  # load.py's bound on each phase (page loads, clicks, results): a hung server, not a slow one


@pytest.mark.timeout(4 * PHASE_S)
def test_three_sessions_are_served_and_timing_runs_never_overlap(tmp_path):
    pytest.importorskip("playwright.sync_api")
    if not Path("/usr/bin/chromium").exists() and not shutil.which("chromium"):
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    out = tmp_path / "load.json"
    timing_log = tmp_path / "timing.jsonl"
    cmd = [sys.executable, str(LOAD), "--sessions", str(SESSIONS), "--ns", "64,128", "--impls", "naive,flash2,sdpa",
           "--reps", "1", "--d", "16", "--block", "32", "--timeout", str(PHASE_S), "--json", str(out),
           "--timing-log", str(timing_log)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    print(proc.stdout)  # the figures, visible with pytest -s and in CI logs on failure
    assert out.exists(), f"load.py wrote no report (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr[-3000:]}"
    report = json.loads(out.read_text())

    assert report["errors"] == [], "\n".join(report["errors"])
    assert report["served"] == SESSIONS, proc.stdout
    assert timing_log.exists() and report["timing_runs"], (
        "the dashboard wrote no timing log: with FLASHVIZ_TIMING_LOG=<file> set, every timed run "
        "(flashviz.kit.runs._timed_result) must append a JSON line {\"event\": \"start\", \"run\": id, \"t\": "
        "time.time(), ...} when the timing worker starts it and {\"event\": \"end\", ...} when it ends (see "
        "benchmarks/load.py)")
    assert report["timing_runs"] >= SESSIONS, f"each session asked for a different sweep: {report}"
    assert report["unfinished_runs"] == 0, report
    assert report["overlaps"] == [], f"timing runs overlapped: {report['overlaps']}"
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
