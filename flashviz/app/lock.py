"""The process-wide timing lock: timing runs from different sessions take turns, so they never skew each other, and a
run that has to wait says so through its progress callback. With $FLASHVIZ_TIMING_LOG set, every run logs its start
and end there (the load test reads it to check that no two runs overlapped)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import streamlit as st

Progress = Callable[..., None]  # progress(done, total, label, partial=None): partial = results so far


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
