"""Shared plumbing of the Streamlit views: the machine's limits, the process-wide timing lock, running heavy cached
work with a progress bar, and drawing figures the same way everywhere.

Heavy work (sweeps, timings) runs in a worker thread so the script thread can keep a progress bar moving; the
worker calls a `st.cache_data` function, so a second student asking for the same configuration gets it at once.
The worker has no Streamlit context, which keeps the cached function free of st calls (nothing to replay).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st

from flashviz.ui.first_page import COMPACT_HEADER_CSS
from flashviz.ui.state import Env

Progress = Callable[..., None]  # progress(done, total, label, partial=None): partial = results so far

PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def skip_repl_check() -> None:
    """Spare the server Streamlit's check, at a process's first element, for whether it runs in a Python REPL (to
    print a warning that it should be run with `streamlit run`). The check calls inspect.stack(), which looks up the
    module of every frame among all loaded modules: 33-69 ms on a fresh dashboard server on a 2-core machine, and
    about 0.2-0.4 s while that machine was busy, before the first element (the tile map) can be sent. The app never
    runs in a REPL. Setting the flag Streamlit sets once it has checked (streamlit/delta_generator.py, Streamlit
    1.67: the pinned version; tests/test_first_paint.py fails if a new version checks anyway) skips it."""
    import streamlit.delta_generator

    streamlit.delta_generator._use_warning_has_been_displayed = True


@st.cache_resource(show_spinner=False)
def machine_env() -> Env:
    """Threads torch may use here and the devices available (CUDA listed only when torch sees one)."""
    devices = ("cpu", "cuda") if cuda_available() else ("cpu",)
    return Env(max_threads=cpu_cores(), devices=devices)


def cpu_cores() -> int:
    """The CPU cores this process may run on (a container's --cpuset-cpus, not the host's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def torch_build_has_gpu(version_py: Path | None = None) -> bool | None:
    """Whether the installed torch was built for a GPU (CUDA or ROCm), read from torch/version.py without importing
    torch (2 to 3 s); None when that cannot be told (torch missing, or a version.py without both fields).

    A CPU-only build, such as the `+cpu` wheels, sets `cuda = None` and `hip = None` there; a CUDA build sets cuda
    to its version string, a ROCm build hip (torch.cuda then drives the AMD GPU).

    Args:
        version_py: the version.py to read; None: the installed torch's, found with importlib.util.find_spec.
    """
    if version_py is None:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            return None
        version_py = Path(spec.submodule_search_locations[0]) / "version.py"
    fields = _constants(version_py)
    if "cuda" not in fields or "hip" not in fields:
        return None
    return fields["cuda"] is not None or fields["hip"] is not None


def _constants(path: Path) -> dict[str, object]:
    """The top-level `name = constant` and `name: type = constant` assignments of a Python file ({} if unreadable)."""
    try:
        body = ast.parse(path.read_text(encoding="utf-8")).body
    except (OSError, SyntaxError, ValueError):
        return {}
    out = {}
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign):
            target = node.target
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant):
            out[target.id] = node.value.value
    return out


def cuda_available() -> bool:
    """torch.cuda.is_available(), without importing torch where the installed build has no GPU support."""
    if torch_build_has_gpu() is False:
        return False
    import torch  # a GPU build (or one we cannot tell): ask torch, as it knows whether a device is there

    return torch.cuda.is_available()


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


class Cancelled(Exception):
    """Raised inside a worker, at its next progress report, after the user pressed Cancel."""


@dataclass
class Job:
    """One heavy run of this session in its worker thread. It outlives the script run that started it: a widget
    change reruns the script while the worker goes on, so the next run finds it here and can follow or cancel it."""

    name: str  # the tab's result name (see remember)
    title: str  # what the status box calls it
    args: tuple  # the arguments it runs with: its result is kept for exactly these
    thread: threading.Thread | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    events: queue.Queue = field(default_factory=queue.Queue)  # (done, total, label, partial result or None)
    box: dict[str, Any] = field(default_factory=dict)  # "value" or "error", once the worker is done
    start: float = field(default_factory=time.perf_counter)
    last: tuple[int, int, str] = (0, 0, "starting ...")  # latest progress report

    def progress(self, done: int, total: int, what: str, partial: Any = None) -> None:
        """The worker's progress callback; raises Cancelled once Cancel was pressed."""
        if self.cancel.is_set():
            raise Cancelled(f"{self.title} cancelled")
        self.events.put((done, total, what, partial))

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


JOB_KEY = "_fv_job"  # session state: this session's Job while its worker runs
JOB_NOTE_KEY = "_fv_job_note"  # session state: what became of the last job (shown once)
CANCEL_KEY = "_fv_cancel"  # the Cancel button
CANCEL_WAIT_S = 5.0  # how long Cancel waits for the worker to reach its next progress report


def run_with_progress(name: str, label: str, fn: Callable[..., Any], *args: Any,
                      on_partial: Callable[[Any], None] | None = None, **kwargs: Any) -> Any:
    """Call fn(*args, _progress=callback, **kwargs) in a worker thread inside st.status, with a progress bar.

    fn is a st.cache_data function whose `_progress` argument (unhashed) receives (done, total, label[, partial])
    and (0, 0, "waiting") while another session's timing run holds the lock; `on_partial(partial)` draws results
    as they come. Returns fn's result; re-raises its error (Cancelled after the user pressed Cancel).
    """
    old: Job | None = st.session_state.get(JOB_KEY)
    if old is not None:  # a new run replaces this session's previous one
        old.cancel.set()
    job = Job(name=name, title=label, args=args)

    def work() -> None:
        try:
            job.box["value"] = fn(*args, _progress=job.progress, **kwargs)
        except BaseException as exc:  # handed to the script thread, which re-raises it
            job.box["error"] = exc

    job.thread = threading.Thread(target=work, name="flashviz-job", daemon=True)
    st.session_state[JOB_KEY] = job
    with st.status(label, expanded=True) as status:
        job.thread.start()
        _follow(job, on_partial)
        st.session_state.pop(JOB_KEY, None)
        if "error" in job.box:
            status.update(label=f"{label}: failed after {job.elapsed():.1f} s", state="error", expanded=True)
            raise job.box["error"]
        status.update(label=f"{label}: done in {job.elapsed():.1f} s", state="complete", expanded=False)
    return job.box["value"]


def _follow(job: Job, on_partial: Callable[[Any], None] | None) -> None:
    """Move the progress bar with the worker's reports until it ends (inside the caller's st.status)."""
    note = st.empty()
    bar = st.progress(0.0, text="starting ...")
    waited = None
    while job.thread.is_alive() or not job.events.empty():
        try:
            done, total, what, partial = job.events.get(timeout=0.1)
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
        job.last = (done, total, what)
        bar.progress(min(1.0, done / total) if total else 0.0, text=f"{done}/{total} · {what}")
        if partial is not None and on_partial is not None:
            on_partial(partial)
    job.thread.join()
    bar.progress(1.0, text=f"done in {job.elapsed():.1f} s")


def running_job_ui() -> None:
    """A run this session started before its last setting change: say that it still runs, offer Cancel, and keep
    its result for the settings it ran with once it ends."""
    note = st.session_state.pop(JOB_NOTE_KEY, None)
    if note:
        st.info(note)
    if st.session_state.get(JOB_KEY) is not None:
        _running_job_fragment()


def _cancel(job: Job) -> None:
    """Stop the worker at its next progress report and forget the job."""
    job.cancel.set()
    job.thread.join(CANCEL_WAIT_S)
    st.session_state.pop(JOB_KEY, None)
    still = " (it is finishing its current step)" if job.thread.is_alive() else ""
    st.session_state[JOB_NOTE_KEY] = f"Cancelled **{job.title}** after {job.elapsed():.1f} s{still}."


@st.fragment(run_every=1.0)
def _running_job_fragment() -> None:
    job: Job | None = st.session_state.get(JOB_KEY)
    if job is None:
        return
    if st.session_state.get(CANCEL_KEY):
        _cancel(job)
        st.rerun()
    while not job.events.empty():  # only the latest report matters here
        done, total, what, _ = job.events.get_nowait()
        if what != "waiting":
            job.last = (done, total, what)
    if not job.thread.is_alive():
        st.session_state.pop(JOB_KEY, None)
        if "value" in job.box:
            remember(job.name, job.args, job.box["value"])
        st.rerun()  # the whole page: the result shows if the settings are those it ran with
    done, total, what = job.last
    st.warning(f"**{job.title}** is still running ({done}/{total} · {what}, {job.elapsed():.0f} s so far) with "
               "the settings you had when you pressed Run. Its result is kept for those settings; press Cancel "
               "to stop it and free the CPU.", icon="⏳")
    st.button("Cancel the run", key=CANCEL_KEY, help="Stops the run at its next step (about a second).")


def show_figure(fig: Any, key: str) -> None:
    """Draw a plotly figure at full width with the dashboard's toolbar settings."""
    st.plotly_chart(fig, key=key, config=PLOTLY_CONFIG, theme=None)


def show_map(html: str, where: Any = st) -> None:
    """Draw a tile map built by flashviz.figures.tilemap in `where` (the page, or a placeholder to redraw): our own
    markup (SVG and CSS, no script, nothing from the user unescaped), so it may bypass markdown's HTML filter."""
    where.markdown(COMPACT_HEADER_CSS + html, unsafe_allow_html=True)


def remember(name: str, args: tuple, result: Any) -> None:
    """Keep a tab's latest result in this session, tagged with the arguments that produced it."""
    st.session_state[f"_fv_result_{name}"] = (args, result)


def remembered(name: str, args: tuple) -> Any:
    """The tab's latest result if it was produced by exactly these arguments, else None."""
    saved = st.session_state.get(f"_fv_result_{name}")
    return saved[1] if saved is not None and saved[0] == args else None


def run_button_ui(name: str, fn: Callable[..., Any], args: tuple, *, label: str, help: str, title: str,
                  idle: str, on_partial: Callable[[Any], None] | None = None) -> Any:
    """A tab's run button: on press, run fn(*args) under the timing lock with a progress bar and keep the result
    in this session (on_partial draws results as they come). Returns the result for exactly these args, or None
    after saying what to press (or what went wrong)."""
    if st.button(f"▶ {label}", type="primary", key=f"{name}_run", help=help):
        try:
            remember(name, args, run_with_progress(name, title, fn, *args, on_partial=on_partial, _lock=timing_lock()))
        except Cancelled:
            st.info(f"{title} cancelled.")
            return None
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
