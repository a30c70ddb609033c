"""The server's side of timing: the one timing worker per server process, the lock on the server's own thread count,
and the timing log.

Every timed run executes in the timing worker (flashviz.measure.worker), started once per server and fed one run at a
time: its queue is what makes runs from different sessions take turns, and a run that has to wait says so through
its progress callback. The server process itself times nothing. Untimed work in the server (the row inspector, mask
evaluation) sets torch's process-wide thread count only while it holds `threads_lock`.

With $FLASHVIZ_TIMING_LOG set, every timed run logs its start and end there (the load test reads it to check that no
two runs overlapped).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable

import streamlit as st

from flashviz.measure.worker import InlineWorker, TimingWorker

Progress = Callable[..., None]  # progress(done, total, label, partial=None): partial = results so far
WORKER_ENV = "FLASHVIZ_TIMING_WORKER"  # "inline": timed runs in the server's own process (only for tests that
#                                        replace a function a run calls; such timings are not the kernels' times)
_worker: TimingWorker | None = None
_worker_guard = threading.Lock()


def timing_worker() -> TimingWorker | InlineWorker:
    """The server's timing worker: one per server process, kept outside Streamlit's caches so that clearing them
    never starts a second one. Its process starts with the first run and is restarted after a death or a forced
    cancel."""
    global _worker
    if os.environ.get(WORKER_ENV) == "inline":
        return InlineWorker()
    with _worker_guard:
        if _worker is None:
            _worker = TimingWorker()
        return _worker


@st.cache_resource(show_spinner=False)
def threads_lock() -> threading.Lock:
    """One lock per server process on torch's thread count, which is process-wide: untimed work that sets it (the
    row inspector, mask evaluation) does so only while holding this lock."""
    return threading.Lock()


TIMING_LOG_ENV = "FLASHVIZ_TIMING_LOG"  # a file: every timing run logs its start and end there (load tests read it)


def log_timing(event: str, run: str) -> None:
    """Append {"event", "run", "t", "pid", "thread"} to $FLASHVIZ_TIMING_LOG, if set (one JSON object a line)."""
    path = os.environ.get(TIMING_LOG_ENV)
    if not path:
        return
    line = json.dumps({"event": event, "run": run, "t": time.time(), "pid": os.getpid(),
                       "thread": threading.get_ident()})
    with open(path, "a") as f:
        f.write(line + "\n")
