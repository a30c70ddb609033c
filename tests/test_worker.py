"""The timing worker: one process of its own runs every timed job, one at a time; progress comes back; Cancel stops a
job within about a second; a worker that dies is restarted and the job says why; nothing of the server (Streamlit, the
dashboard's pages) runs in it; every timed run of the dashboard can be imported there."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from flashviz.measure.progress import Cancelled
from flashviz.measure.worker import CANCEL_GRACE_S, InlineWorker, TimingWorker, WorkerDied, describe_exit

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def worker():
    w = TimingWorker(preload=())
    yield w
    w.close()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (ended, not yet reaped by its parent) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_a_job_runs_in_another_process_and_its_progress_and_partial_result_come_back(worker):
    seen = []
    (pid, n), report = worker.run_reported("_jobs:steps", (3, 0.0), progress=lambda *a: seen.append(a))
    assert pid != os.getpid() and pid == worker.pid() and n == 3
    assert seen[-1] == (2, 3, "step 2", [2])  # the partial result always comes through
    assert report.calls == 0 and report.set_aside == 0 and report.choice.threads >= 1


def test_errors_come_back_with_their_type_and_message(worker):
    with pytest.raises(ValueError, match="bad block size"):
        worker.run("_jobs:fail", ("bad block size",))
    assert worker.run("_jobs:steps", (1, 0.0))[1] == 1  # the worker goes on


def test_nothing_of_the_server_is_imported_in_the_worker(worker):
    loaded = worker.run("_jobs:modules")
    assert not [m for m in loaded if m == "streamlit" or m.startswith(("streamlit.", "flashviz.app", "flashviz.views"))]


def test_jobs_take_turns_in_arrival_order_and_the_later_one_says_it_waits(worker):
    spans, waits = {}, []

    def go(name: str) -> None:
        t0 = time.monotonic()
        worker.run("_jobs:steps", (3, 0.1), progress=lambda d, t, label, p=None: waits.append(name)
                   if label == "waiting" else None)
        spans[name] = (t0, time.monotonic())

    first = threading.Thread(target=go, args=("first",))
    first.start()
    while worker.waiting() == 0:
        time.sleep(0.01)
    second = threading.Thread(target=go, args=("second",))
    second.start()
    first.join(60)
    second.join(60)
    assert waits == ["second"]
    assert spans["second"][1] > spans["first"][1] + 0.25  # it ran after the first ended (3 steps of 0.1 s)


def test_cancel_stops_a_reporting_job_at_its_next_report(worker):
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    t0 = time.monotonic()
    with pytest.raises(Cancelled):
        worker.run("_jobs:steps", (100, 0.05), cancel=cancel)
    assert time.monotonic() - t0 < 0.3 + CANCEL_GRACE_S + 1.0
    assert worker.run("_jobs:steps", (1, 0.0))[1] == 1


def test_cancel_of_a_job_that_never_reports_stops_the_worker_and_its_children_then_a_fresh_one_starts(tmp_path):
    w = TimingWorker(preload=())
    try:
        w.run("_jobs:steps", (1, 0.0))
        old, restarts = w.pid(), w.restarts
        pid_file = tmp_path / "child.pid"
        cancel = threading.Event()

        def press_cancel() -> None:
            while not pid_file.exists() or not pid_file.read_text():
                time.sleep(0.02)
            cancel.set()

        threading.Thread(target=press_cancel, daemon=True).start()
        with pytest.raises(Cancelled):
            w.run("_jobs:with_child", (str(pid_file),), cancel=cancel)
        child = int(pid_file.read_text())
        deadline = time.monotonic() + 10
        while (alive(old) or alive(child)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(old) and not alive(child)  # no process left behind
        assert w.run("_jobs:steps", (1, 0.0))[1] == 1 and w.pid() != old and w.restarts == restarts + 1
    finally:
        w.close()


def test_a_worker_that_dies_fails_its_job_with_the_reason_and_is_restarted():
    w = TimingWorker(preload=())
    try:
        with pytest.raises(WorkerDied, match="exit code 3"):
            w.run("_jobs:die", (3,))
        assert w.last_death == "exit code 3"
        assert w.run("_jobs:steps", (1, 0.0))[1] == 1
    finally:
        w.close()


def test_close_leaves_no_process():
    w = TimingWorker(preload=())
    w.run("_jobs:steps", (1, 0.0))
    pid = w.pid()
    w.close()
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid) and not w.alive()


def test_a_run_takes_its_threads_from_the_load_before_it_not_from_the_moment_it_arrives(worker):
    """The worker notes the machine's load while it waits: another process that kept a core busy over the seconds
    before a run counts (the run's report says so), a burst in the last fraction of a second does not decide alone."""
    worker.run("_jobs:steps", (1, 0.0))  # started, and waiting
    spinner = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 3\nwhile time.time() < end: "
                                                      "pass"])
    try:
        time.sleep(2.5)  # the spinner kept a core busy over the whole window the worker looks at
        _, report = worker.run_reported("_jobs:steps", (1, 0.0))
    finally:
        spinner.wait(10)
    assert report.choice.other_busy >= 0.6


def test_exit_statuses_in_words():
    assert describe_exit(-9).startswith("killed by SIGKILL") and describe_exit(0) == "exit code 0"


def test_the_inline_worker_runs_the_same_job_here_and_honours_cancel():
    (pid, _), report = InlineWorker().run_reported("_jobs:steps", (2, 0.0))
    assert pid == os.getpid() and report.calls == 0
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        InlineWorker().run("_jobs:steps", (2, 0.0), cancel=cancel)




def test_every_timed_run_of_the_dashboard_imports_in_the_worker_without_streamlit():
    from flashviz.app.registry import VIEWS
    from flashviz.kit import jobs
    from flashviz.kit.runs import TimedRun

    pages = [importlib.import_module(f"flashviz.views.{v.slug}.page") for v in VIEWS]
    names = {obj.name for mod in [*pages, jobs] for obj in vars(mod).values() if isinstance(obj, TimedRun)}
    assert len(names) >= 10  # the sweeps, causal pair, block size, correctness and every view's runs
    code = ("import importlib, sys\n"
            f"for t in {sorted(names)!r}:\n"
            "    m, _, f = t.partition(':')\n"
            "    getattr(importlib.import_module(m), f)\n"
            "bad = [m for m in sys.modules if m == 'streamlit' or m.startswith('streamlit.') or m.endswith('.page')]\n"
            "print(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
