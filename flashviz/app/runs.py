"""Heavy work of a view run in a worker thread, with a progress bar, a Cancel button and the result kept per session.

The script thread keeps a progress bar moving while the worker calls a `st.cache_data` function, so a second student
asking for the same configuration gets it at once. The worker has no Streamlit context, which keeps the cached function
free of st calls (nothing to replay). A run outlives the script run that started it: a widget change reruns the script
while the worker goes on, and the next run follows it (running_job_ui) or cancels it.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from flashviz.app.lock import Progress, holding, timing_lock
from flashviz.measure.progress import Cancelled  # raised by a Job's progress callback after Cancel was pressed


@dataclass
class Job:
    """One heavy run of this session in its worker thread. It outlives the script run that started it: a widget
    change reruns the script while the worker goes on, so the next run finds it here and can follow or cancel it."""

    name: str  # the view's result name (see remember)
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
    still = " (it is finishing the measurement under way)" if job.thread.is_alive() else ""
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
    st.button("Cancel the run", key=CANCEL_KEY, help="Stops the run at its next progress report (about a second).")


def not_cached_if(cut_short: Callable[[Any], bool]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Wrap a st.cache_data function so that a result `cut_short(result)` calls partial (a time budget stopped it)
    is handed back once but dropped from the cache: the next request for the same settings measures again instead
    of getting the partial result."""
    def wrap(cached: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(cached, updated=())
        def call(*args: Any, **kwargs: Any) -> Any:
            result = cached(*args, **kwargs)
            if cut_short(result):
                cached.clear(*args, **kwargs)
            return result

        call.clear = cached.clear  # type: ignore[attr-defined]
        return call

    return wrap


def remember(name: str, args: tuple, result: Any) -> None:
    """Keep a view's latest result in this session, tagged with the arguments that produced it."""
    st.session_state[f"_fv_result_{name}"] = (args, result)


def remembered(name: str, args: tuple) -> Any:
    """The view's latest result if it was produced by exactly these arguments, else None."""
    saved = st.session_state.get(f"_fv_result_{name}")
    return saved[1] if saved is not None and saved[0] == args else None


def run_and_remember(name: str, title: str, fn: Callable[..., Any], args: tuple, **kwargs: Any) -> Any:
    """run_with_progress(name, title, fn, *args, **kwargs), its result kept in this session for these args; None
    after saying on the page that it was cancelled or could not run."""
    try:
        result = run_with_progress(name, title, fn, *args, **kwargs)
    except Cancelled:
        st.info(f"{title} cancelled.")
        return None
    except (ValueError, TypeError, RuntimeError) as e:
        st.error(f"{title} could not run: {e}")
        return None
    remember(name, args, result)
    return result


def run_button_ui(name: str, fn: Callable[..., Any], args: tuple, *, label: str, help: str, title: str,
                  idle: str, on_partial: Callable[[Any], None] | None = None) -> Any:
    """A view's run button: on press, run fn(*args) under the timing lock with a progress bar and keep the result
    in this session (on_partial draws results as they come). Returns the result for exactly these args, or None
    after saying what to press (or what went wrong)."""
    pressed = st.button(f"▶ {label}", type="primary", key=f"{name}_run", help=help)
    if pressed and run_and_remember(name, title, fn, args, on_partial=on_partial, _lock=timing_lock()) is None:
        return None  # cancelled or failed: the page says which
    result = remembered(name, args)
    if result is None:
        st.info(idle)
    return result


# ----------------------------------------------------------------------------------------------------------------------
# timed_run: a measured run, cached, under the timing lock, with progress

TIMED_ENTRIES = 128  # results kept over every timed run together (each a small DataFrame or dataclass)
_TIMED: dict[str, Callable[..., Any]] = {}  # name -> the function a timed_run calls


@st.cache_data(show_spinner=False, max_entries=TIMED_ENTRIES)
def _timed_result(name: str, args: tuple, kwargs: tuple, _progress: Progress | None = None,
                  _lock: threading.Lock | None = None) -> Any:
    """The one cache behind every timed_run, keyed on the run's name and its hashable arguments; the run holds the
    timing lock (`_lock`) while it measures and reports through `_progress` (neither is part of the key)."""
    with holding(_lock or threading.Lock(), _progress):
        return _TIMED[name](*args, progress=_progress, **dict(kwargs))


class TimedRun:
    """A measured run made by `timed_run`: call it with the function's own arguments, plus `_progress` (a progress
    callback) and `_lock` (the timing lock; run_button_ui passes both)."""

    def __init__(self, fn: Callable[..., Any], keep: Callable[[Any], bool] | None) -> None:
        self.fn, self.keep = fn, keep
        self.name = f"{fn.__module__}.{fn.__qualname__}"
        _TIMED[self.name] = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, _progress: Progress | None = None, _lock: threading.Lock | None = None,
                 **kwargs: Any) -> Any:
        key = (self.name, args, tuple(sorted(kwargs.items())))
        result = _timed_result(*key, _progress=_progress, _lock=_lock)
        if self.keep is not None and not self.keep(result):
            _timed_result.clear(*key)  # handed back once, measured again on the next request
        return result

    @staticmethod
    def clear() -> None:
        """Forget every timed run's results (they share one cache)."""
        _timed_result.clear()


def timed_run(fn: Callable[..., Any] | None = None, *, keep: Callable[[Any], bool] | None = None) -> Any:
    """Decorator: `fn(*args, progress=None, **kwargs)` becomes a run that is cached on its hashable arguments (one
    result per distinct call, shared by every session), holds the process-wide timing lock while it measures (saying
    "waiting" through its progress first when another run holds it), passes its progress callback on (Cancel raises
    from it), and is not kept when `keep(result)` is False (a time budget cut it short).

    Example:
        >>> @timed_run
        ... def double(x, progress=None):
        ...     return 2 * x
        >>> double(21), double.name.endswith("double")
        (42, True)
    """
    if fn is None:
        return lambda f: TimedRun(f, keep)
    return TimedRun(fn, keep)
