"""Heavy work of a view: a run followed from a thread of the server, with a progress bar, a Cancel button and the
result kept per session; every timed run executes in the server's timing worker process.

The script thread keeps a progress bar moving while a thread of the server calls a `st.cache_data` function, so a
second student asking for the same configuration gets it at once. That thread has no Streamlit context, which keeps
the cached function free of st calls (nothing to replay). A `timed_run` sends its work to the timing worker
(flashviz.kit.lock.timing_worker: a process of its own, where no other Python thread slows the kernels' many small
torch calls) and relays the worker's progress and partial results. A run outlives the script run that started it: a
widget change reruns the script while the run goes on, and the next run follows it (running_job_ui) or cancels it.
Cancel stops the worker's job at its next progress report, or stops and restarts the worker about a second later.
"""

from __future__ import annotations

import functools
import queue
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from flashviz.kit.lock import Progress, log_timing, timing_worker
from flashviz.measure.estimate import Speed, estimate_sentence
from flashviz.measure.load import RunReport
from flashviz.measure.progress import Cancelled  # raised by a Job's progress callback after Cancel was pressed
from flashviz.measure.worker import CANCEL_GRACE_S, InlineWorker, TimingWorker, target_of


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
CANCEL_WAIT_S = CANCEL_GRACE_S + 1.0  # how long Cancel waits for the run: the worker's grace, then its restart


def run_with_progress(name: str, label: str, fn: Callable[..., Any], *args: Any,
                      on_partial: Callable[[Any], None] | None = None, **kwargs: Any) -> Any:
    """Call fn(*args, _progress=callback, **kwargs) in a worker thread inside st.status, with a progress bar.

    fn is a st.cache_data function whose `_progress` argument (unhashed) receives (done, total, label[, partial])
    and (0, 0, "waiting") while other sessions' timed runs are ahead of it; a TimedRun also gets the job's cancel
    event (`_cancel`); `on_partial(partial)` draws results as they come. Returns fn's result; re-raises its error
    (Cancelled after the user pressed Cancel).
    """
    old: Job | None = st.session_state.get(JOB_KEY)
    if old is not None:  # a new run replaces this session's previous one
        old.cancel.set()
    job = Job(name=name, title=label, args=args)

    if isinstance(fn, TimedRun):
        kwargs = {**kwargs, "_cancel": job.cancel}

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
        report = fn.report_of(args) if isinstance(fn, TimedRun) else None
        if report is not None:  # the whole report inside the box, its gist on the box's one line
            report_ui(report, compact=False)
        done = f"{label}: done in {job.elapsed():.1f} s" + (f" · {report.short()}" if report is not None else "")
        status.update(label=done, state="complete", expanded=False)
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
            note.info("Waiting for another run to finish: timing runs from all users take turns in one timing "
                      "process, so they do not slow each other down.")
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
                  idle: str, on_partial: Callable[[Any], None] | None = None,
                  estimate: Callable[[Speed], float] | None = None, budget_s: float | None = None) -> Any:
    """A view's run button: on press, run fn(*args) in the timing worker with a progress bar and keep the result
    in this session (on_partial draws results as they come). Returns the result for exactly these args, or None
    after saying what to press (or what went wrong) and, with `estimate` (seconds of the run at a measured Speed),
    how long it will take here. Under a result it says what the run saw (report_ui)."""
    pressed = st.button(f"▶ {label}", type="primary", key=f"{name}_run", help=help)
    if pressed and run_and_remember(name, title, fn, args, on_partial=on_partial, _worker=timing_worker()) is None:
        return None  # cancelled or failed: the page says which
    result = remembered(name, args)
    if result is None:
        st.info(idle)
        if estimate is not None:
            estimate_ui(estimate, budget_s)
    elif isinstance(fn, TimedRun) and not pressed:  # just run: the run's box says it
        report_ui(fn.report_of(args))
    return result


SPEED_TTL_S = 300.0  # seconds a measured Speed stands for this machine before it is measured again
_speeds: dict[int, Speed] = {}  # the Speed measured in each SPEED_TTL_S stretch of time (the last few)


def machine_speed_now() -> Speed | None:
    """This machine's Speed (flashviz.measure.estimate), measured in the timing worker at most every SPEED_TTL_S;
    the last one measured while the worker is busy with a run (None if none was measured yet)."""
    bucket = int(time.time() // SPEED_TTL_S)
    if bucket in _speeds:
        return _speeds[bucket]
    worker = timing_worker()
    if isinstance(worker, TimingWorker) and worker.waiting():
        return _speeds[max(_speeds)] if _speeds else None
    _speeds[bucket] = worker.run("flashviz.measure.estimate:machine_speed")
    for old in sorted(_speeds)[:-4]:
        _speeds.pop(old)
    return _speeds[bucket]


def estimate_ui(estimate: Callable[[Speed], float], budget_s: float | None) -> None:
    """How long the run will take here, from this machine's speed measured just now."""
    try:
        speed = machine_speed_now()
    except (RuntimeError, OSError) as e:  # the worker could not start or died: say so, the Run button still works
        st.caption(f"No estimate of the run's time: {e}")
        return
    if speed is None:
        st.caption("No estimate of the run's time yet: the timing worker is busy with another run.")
        return
    st.caption(estimate_sentence(estimate(speed), speed, budget_s))


def report_ui(report: RunReport | None, *, compact: bool = True) -> None:
    """What a timed run saw (its threads, the load, the calls set aside), and plainly when the machine was too busy
    for clean calls or ran timings with fewer threads than asked: compact, one line whose tooltip holds the whole
    report (so the result still starts on the first screen), or in full."""
    if report is None:
        return
    busy, capped = report.busy_sentence(), report.capped_sentence()
    if not compact:
        if busy:
            st.warning(busy, icon=":material/speed:")
        if capped:
            st.info(capped, icon=":material/speed:")
        st.caption(report.sentence())
        return
    lead = ":orange[**Too busy for clean timings here.**] " if busy else ""
    st.caption(f"{lead}Timed in the timing worker: {report.short()}.",
               help=" ".join(s for s in (busy, capped, report.sentence()) if s))


# ----------------------------------------------------------------------------------------------------------------------
# timed_run: a measured run, cached, run in the timing worker, with progress

TIMED_ENTRIES = 128  # results kept over every timed run together (each a small DataFrame or dataclass)
Worker = TimingWorker | InlineWorker


@st.cache_data(show_spinner=False, max_entries=TIMED_ENTRIES)
def _timed_result(name: str, args: tuple, kwargs: tuple, _progress: Progress | None = None,
                  _worker: Worker | None = None, _cancel: threading.Event | None = None) -> Any:
    """The one cache behind every timed_run, keyed on the run's target and its hashable arguments: (the result, its
    RunReport). With `_worker`
    the run executes there, after the runs queued before it, and reports through `_progress`; `_cancel` stops it
    (none of the three is part of the key). Without a worker it runs in this thread (a library call, a test)."""
    worker = _worker if _worker is not None else InlineWorker()
    run = uuid.uuid4().hex
    started = False

    def report(done: int, total: int, label: str, partial: Any = None) -> None:
        nonlocal started
        if not started and label != "waiting":
            started = True
            log_timing("start", run)
        if _progress is not None:
            _progress(done, total, label) if partial is None else _progress(done, total, label, partial)

    try:
        return worker.run_reported(name, args, dict(kwargs), progress=report, cancel=_cancel)
    finally:
        if started:
            log_timing("end", run)


class TimedRun:
    """A measured run made by `timed_run`: call it with the function's own arguments, plus `_progress` (a progress
    callback), `_worker` (the timing worker; run_button_ui passes it) and `_cancel` (an Event that stops the run)."""

    def __init__(self, fn: Callable[..., Any], keep: Callable[[Any], bool] | None) -> None:
        module = sys.modules.get(fn.__module__)
        if module is None or any(value is st for value in vars(module).values()):
            raise ValueError(f"{fn.__module__}.{fn.__qualname__} cannot be a timed run: the timing worker imports "
                             "the module a run lives in, and that must not be a module that uses Streamlit (put "
                             "the function in the view's data.py or the library).")
        self.fn, self.keep = fn, keep
        self.name = target_of(fn)
        self.reports: dict[tuple, RunReport] = {}  # the RunReport of the latest result per arguments
        functools.update_wrapper(self, fn)

    def report_of(self, args: tuple, kwargs: dict[str, Any] | None = None) -> RunReport | None:
        """The RunReport of the result for these arguments (None before any run of them)."""
        return self.reports.get((args, tuple(sorted((kwargs or {}).items()))))

    def __call__(self, *args: Any, _progress: Progress | None = None, _worker: Worker | None = None,
                 _cancel: threading.Event | None = None, **kwargs: Any) -> Any:
        key = (self.name, args, tuple(sorted(kwargs.items())))
        result, report = _timed_result(*key, _progress=_progress, _worker=_worker, _cancel=_cancel)
        if len(self.reports) >= TIMED_ENTRIES:
            self.reports.pop(next(iter(self.reports)))
        self.reports[key[1:]] = report
        if self.keep is not None and not self.keep(result):
            _timed_result.clear(*key)  # handed back once, measured again on the next request
        return result

    @staticmethod
    def clear() -> None:
        """Forget every timed run's results (they share one cache)."""
        _timed_result.clear()


def timed_run(fn: Callable[..., Any] | None = None, *, keep: Callable[[Any], bool] | None = None) -> Any:
    """`fn(*args, progress=None, **kwargs)`, a module-level function of a module without Streamlit, becomes a run
    that is cached on its hashable arguments (one result per distinct call, shared by every session), executes in
    the timing worker after the runs queued before it (saying "waiting" through its progress first), passes its
    progress callback on (Cancel stops it), and is not kept when `keep(result)` is False (a time budget cut it short).
    Used as `run = timed_run(data.function)` or `timed_run(data.function, keep=...)`.

    Example:
        >>> from flashviz.measure.load import load_now
        >>> now = timed_run(load_now)
        >>> now(0.01).cores >= 1, now.name
        (True, 'flashviz.measure.load:load_now')
    """
    if fn is None:
        return lambda f: TimedRun(f, keep)
    return TimedRun(fn, keep)
