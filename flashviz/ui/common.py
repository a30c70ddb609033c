"""Shared plumbing of the Streamlit views: the machine's limits, the process-wide timing lock, running heavy cached
work with a progress bar, and drawing figures the same way everywhere.

Heavy work (sweeps, timings) runs in a worker thread so the script thread can keep a progress bar moving; the
worker calls a `st.cache_data` function, so a second student asking for the same configuration gets it at once.
The worker has no Streamlit context, which keeps the cached function free of st calls (nothing to replay).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import streamlit as st
import torch

from flashviz.ui.state import Env

Progress = Callable[[int, int, str], None]  # progress(done, total, label)

PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


@st.cache_resource(show_spinner=False)
def machine_env() -> Env:
    """Threads torch may use here and the devices available (CUDA listed only when torch sees one)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    devices = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
    return Env(max_threads=max(1, cores), devices=devices)


@st.cache_resource(show_spinner=False)
def timing_lock() -> threading.Lock:
    """One lock per server process: timing runs from different sessions never overlap (they would skew each other)."""
    return threading.Lock()


TIMING_LOG_ENV = "FLASHVIZ_TIMING_LOG"  # a file: every timing run logs its start and end there (load tests read it)


def _log_timing(event: str, run: str) -> None:
    """Append {"event", "run", "t", "pid", "thread"} to $FLASHVIZ_TIMING_LOG, if set (one JSON object a line)."""
    path = os.environ.get(TIMING_LOG_ENV)
    if not path:
        return
    line = json.dumps({"event": event, "run": run, "t": time.time(), "pid": os.getpid(),
                       "thread": threading.get_ident()})
    with open(path, "a") as f:
        f.write(line + "\n")


@contextlib.contextmanager
def holding(lock: threading.Lock, progress: Progress | None) -> Iterator[None]:
    """Hold `lock`; if another run has it, report ("waiting") through progress first, then wait.

    With $FLASHVIZ_TIMING_LOG set, the run logs "start" once it holds the lock and "end" just before it lets go,
    so a load test can check that timing runs never overlap."""
    if not lock.acquire(blocking=False):
        if progress is not None:
            progress(0, 0, "waiting")
        lock.acquire()
    run = uuid.uuid4().hex
    try:
        _log_timing("start", run)
        yield
    finally:
        _log_timing("end", run)
        lock.release()


def run_with_progress(label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call fn(*args, _progress=callback, **kwargs) in a worker thread inside st.status, with a progress bar.

    fn is a st.cache_data function whose `_progress` argument (unhashed) receives (done, total, label) and
    (0, 0, "waiting") while another session's timing run holds the lock. Returns fn's result; re-raises its error.
    """
    events: queue.Queue = queue.Queue()
    box: dict[str, Any] = {}

    def progress(done: int, total: int, what: str) -> None:
        events.put((done, total, what))

    def work() -> None:
        try:
            box["value"] = fn(*args, _progress=progress, **kwargs)
        except BaseException as exc:  # handed to the script thread, which re-raises it
            box["error"] = exc

    worker = threading.Thread(target=work, name="flashviz-job", daemon=True)
    start = time.perf_counter()
    with st.status(label, expanded=True) as status:
        note = st.empty()
        bar = st.progress(0.0, text="starting ...")
        waited = None
        worker.start()
        while worker.is_alive() or not events.empty():
            try:
                done, total, what = events.get(timeout=0.1)
            except queue.Empty:
                continue
            if what == "waiting":
                waited = time.perf_counter()
                note.info("Waiting for another run to finish: timing runs from all users take turns, "
                          "so they do not slow each other down.")
                continue
            if waited is not None:
                note.info(f"Waited {time.perf_counter() - waited:.1f} s for another run to finish.")
                waited = None
            bar.progress(min(1.0, done / total) if total else 0.0, text=f"{done}/{total} · {what}")
        worker.join()
        elapsed = time.perf_counter() - start
        if "error" in box:
            status.update(label=f"{label}: failed after {elapsed:.1f} s", state="error", expanded=True)
            raise box["error"]
        bar.progress(1.0, text=f"done in {elapsed:.1f} s")
        status.update(label=f"{label}: done in {elapsed:.1f} s", state="complete", expanded=False)
    return box["value"]


def show_figure(fig: Any, key: str) -> None:
    """Draw a plotly figure at full width with the dashboard's toolbar settings."""
    st.plotly_chart(fig, key=key, config=PLOTLY_CONFIG, theme=None)


def remember(name: str, args: tuple, result: Any) -> None:
    """Keep a tab's latest result in this session, tagged with the arguments that produced it."""
    st.session_state[f"_fv_result_{name}"] = (args, result)


def remembered(name: str, args: tuple) -> Any:
    """The tab's latest result if it was produced by exactly these arguments, else None."""
    saved = st.session_state.get(f"_fv_result_{name}")
    return saved[1] if saved is not None and saved[0] == args else None


def run_button_ui(name: str, fn: Callable[..., Any], args: tuple, *, label: str, help: str, title: str,
                  idle: str) -> Any:
    """A tab's run button: on press, run fn(*args) under the timing lock with a progress bar and keep the result
    in this session. Returns the result for exactly these args, or None after saying what to press (or what
    went wrong)."""
    if st.button(f"▶ {label}", type="primary", key=f"{name}_run", help=help):
        try:
            remember(name, args, run_with_progress(title, fn, *args, _lock=timing_lock()))
        except (ValueError, TypeError, RuntimeError) as e:
            st.error(f"{title} could not run: {e}")
            return None
    result = remembered(name, args)
    if result is None:
        st.info(idle)
    return result


def not_run_ui(df: Any) -> None:
    """List the rows a sweep refused or could not run (memory guard: with the bytes they would need)."""
    if "status" not in df:
        return
    bad = df[df["status"].astype(str) != "ok"]
    if len(bad) == 0:
        return
    lines = "\n".join(f"- **{r['impl']}** at N = {r['N']}" + (f", d = {r['d']}" if "d" in r else "")
                      + f": {str(r['status']).removeprefix('not run: ')}" for _, r in bad.iterrows())
    st.warning(f"**{len(bad)} configuration(s) did not run** (crosses on the plots):\n{lines}", icon="🛑")


def summary_ui(table: Any, title: str) -> None:
    """A summary table (figures.report.summary_table) as a static table in the page font; NaN reads 'not run'."""
    st.markdown(f"**{title}**: speedup = naive time / tiled time; memory saving = naive peak / tiled peak.")
    st.table(table.style.format("{:,.3g}", na_rep="not run").format("{:d}", subset=["N"]).hide(axis="index"))
