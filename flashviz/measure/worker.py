"""Timing in a process of its own: one worker process runs every timed job, one at a time, and streams its progress.

Why a process. The tiled kernels make thousands of small torch calls, and each call gives the interpreter lock back.
Any other Python thread in the same process (a Streamlit script thread drawing a chart, another session's page) takes
it, and the kernel waits at every call to get it back: measured, FA1 and FA2 at N = 512, H = 4 took 3-12 ms alone and
34-51 ms beside one thread that builds plotly figures. In a process that does nothing else the kernel has the lock to
itself, as pyperf's worker processes have.

How it works.
- `TimingWorker` starts `python -m flashviz.measure.worker` (no Streamlit, no dashboard module: only the job's own
  module is imported there) in a process group of its own, so that stopping it also stops the processes a job
  started (the ring's ranks).
- A job is a module-level function named "module:qualname", called as fn(*args, progress=callback, **kwargs). Its
  arguments and result cross the pipe pickled.
- Jobs wait their turn in a first-come queue: `run` blocks until the jobs before it have ended, reporting
  progress(0, 0, "waiting") meanwhile. The queue is what keeps two timings from overlapping.
- The job's progress reports (done, total, label[, partial result]) come back as they happen, at most every
  PROGRESS_EVERY_S apart unless they carry a partial result or end the job.
- Cancel: the server sends SIGUSR1; the job's next progress call raises `Cancelled`. If the job has not ended
  CANCEL_GRACE_S later (a long kernel call with no report in between), the worker is killed and restarted.
- A worker that dies (killed, out of memory) makes its job raise `WorkerDied` with the exit status; the next job
  starts a fresh worker.

`InlineWorker` runs the same jobs in the calling process: for tests that replace a function the job calls.

Torch-free at import (the server imports this module; the worker imports torch when a job needs it).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import itertools
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection, wait
from typing import Any

from flashviz.measure.progress import Cancelled

CANCEL_GRACE_S = 1.0  # seconds a cancelled job has to reach its next progress report before the worker is killed
PROGRESS_EVERY_S = 0.1  # seconds between two progress messages that carry no partial result
START_TIMEOUT_S = 60.0  # seconds a fresh worker has to say it is ready
POLL_S = 0.05  # seconds between two looks at the pipe, the cancel flag and the worker's life
SNAPSHOT_S = 0.25  # seconds between two notes of the machine's load while the worker waits for a job
HISTORY = 64  # notes kept (16 s of waiting): enough for load.BEFORE_RUN_S
PRELOAD = ("torch",)  # imported by a fresh worker before its first job, so the first Run does not wait for torch
Progress = Callable[..., None]  # progress(done, total, label, partial=None)


class WorkerDied(RuntimeError):
    """The timing worker process ended while it ran a job (killed, out of memory, crashed); the next job starts a
    fresh one, and the message says so."""

    def __str__(self) -> str:
        return f"{super().__str__()} A fresh timing worker starts with the next run."


def target_of(fn: Callable[..., Any]) -> str:
    """The name a job is sent by: "module:qualname" of a module-level function.

    Example:
        >>> from flashviz.measure.progress import stage
        >>> target_of(stage)
        'flashviz.measure.progress:stage'
    """
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or not name or "<" in name or module == "__main__":
        raise ValueError(f"a timing job must be a module-level function of an importable module, got {fn!r}.")
    return f"{module}:{name}"


def resolve(target: str) -> Callable[..., Any]:
    """The function a "module:qualname" target names (imported now).

    Example:
        >>> resolve("flashviz.measure.progress:stage").__name__
        'stage'
    """
    module, sep, name = target.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"a job target is 'module:function', got {target!r}.")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{target} is not callable.")
    return obj


def describe_exit(code: int | None) -> str:
    """An exit status in words.

    Example:
        >>> describe_exit(-9)
        'killed by SIGKILL (the out-of-memory killer sends it, as does a forced stop)'
        >>> describe_exit(1)
        'exit code 1'
    """
    if code is None:
        return "still running"
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        why = " (the out-of-memory killer sends it, as does a forced stop)" if -code == signal.SIGKILL else ""
        return f"killed by {name}{why}"
    return f"exit code {code}"


def run_job(fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any], progress: Progress,
            other_busy: float | None = None) -> tuple[Any, Any]:
    """fn(*args, progress=progress, **kwargs) as a timed run: at most the threads the cores other work leaves free
    (`other_busy`: the cores it kept busy before the run, as the worker measured them while waiting; None: measured
    now), its load measured and its timings tallied. Returns (fn's result, flashviz.measure.load.RunReport)."""
    from datetime import UTC, datetime

    from flashviz.measure.load import LoadMeter, RunReport, choose_threads, cores, tallying
    from flashviz.measure.timing import thread_cap

    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    choice = choose_threads(cores(), other_busy)
    with LoadMeter() as meter, tallying() as tally, thread_cap(choice.threads):
        value = fn(*args, progress=progress, **kwargs)
    return value, RunReport(choice, meter.load, tally.calls, tally.set_aside, tally.too_busy, stamp, version(),
                            tally.capped, tally.threads, tally.threads_asked, tally.waited)


def version() -> str:
    """flashviz's installed version ("unknown" when it runs from a checkout that was never installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("flashviz")
    except PackageNotFoundError:
        return "unknown"


def _portable(exc: BaseException) -> BaseException:
    """exc itself if it survives pickling, else a RuntimeError that names it."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # any failure to pickle: send its words instead
        return RuntimeError(f"{type(exc).__name__}: {exc}")


# ----------------------------------------------------------------------------------------------------------------------
# the worker process


_cancel_requested = False  # set by SIGUSR1 in the worker: the job under way stops at its next progress report


def _on_cancel(signum: int, frame: Any) -> None:
    global _cancel_requested
    _cancel_requested = True


def _reporter(conn: Connection, job_id: int) -> Progress:
    """The progress callback of one job in the worker: raises Cancelled once the server asked to cancel, else sends
    the report (at most every PROGRESS_EVERY_S unless it carries a partial result or ends the job)."""
    last = [0.0]

    def progress(done: int, total: int, label: str, partial: Any = None) -> None:
        if _cancel_requested:
            raise Cancelled("cancelled")
        now = time.monotonic()
        if partial is None and (not total or done < total) and now - last[0] < PROGRESS_EVERY_S:
            return
        last[0] = now
        conn.send(("progress", job_id, (done, total, label, partial)))

    return progress


def serve(conn: Connection, preload: Iterable[str] = PRELOAD) -> None:
    """The worker's loop: say "ready", then run each job received, one at a time, until the pipe closes.

    Each job is (job_id, target, args, kwargs); every answer is (kind, job_id, payload) with kind "progress"
    (payload: (done, total, label, partial)), "done" (the result), "error" (the exception) or "cancelled".
    """
    global _cancel_requested
    signal.signal(signal.SIGUSR1, _on_cancel)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the server's terminal is the server's to handle
    conn.send(("ready", None, os.getpid()))
    for module in preload:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    from flashviz.measure.load import other_busy_before, snapshot

    history: deque = deque(maxlen=HISTORY)  # the machine's load while waiting for a job (load.Snapshot)
    while True:
        try:
            history.append(snapshot())
            while not conn.poll(SNAPSHOT_S):  # waiting: note the load, to choose the next run's threads from
                history.append(snapshot())
            job_id, target, args, kwargs = conn.recv()
        except (EOFError, OSError):
            return  # the server is gone
        _cancel_requested = False
        progress = _reporter(conn, job_id)
        before = other_busy_before(history, snapshot())

        try:
            answer = ("done", job_id, run_job(resolve(target), args, kwargs, progress, before))
        except Cancelled:
            answer = ("cancelled", job_id, None)
        except BaseException as exc:  # every failure goes back to the job's caller
            answer = ("error", job_id, _portable(exc))
        try:
            conn.send(answer)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:  # a result that cannot cross the pipe
            conn.send(("error", job_id, RuntimeError(f"{target} returned a result that cannot be sent back: {exc}")))
        except (BrokenPipeError, OSError):
            return


# ----------------------------------------------------------------------------------------------------------------------
# the server's side


class TimingWorker:
    """A timing worker process and the queue of jobs waiting for it (see the module).

    Example:
        >>> w = TimingWorker(preload=())
        >>> w.alive()  # started by the first job
        False
        >>> load = w.run("flashviz.measure.load:load_now", (0.01,))  # in the worker: its Load, pickled back
        >>> load.cores >= 1, w.alive(), w.pid() != os.getpid()
        (True, True, True)
        >>> w.close()
    """

    def __init__(self, *, preload: Iterable[str] = PRELOAD, env: dict[str, str] | None = None) -> None:
        self.preload = tuple(preload)
        self.env = env
        self.restarts = 0  # workers started after the first (after a death or a forced cancel)
        self.last_death: str | None = None  # how the last worker that died ended, in words
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._started = 0  # workers started so far
        self._tickets = itertools.count()
        self._queue: list[int] = []  # tickets of the jobs waiting or running, first is running
        self._turn = threading.Condition()
        atexit.register(self.close)

    # -- the process

    def alive(self) -> bool:
        """Whether a worker process is up now."""
        return self._proc is not None and self._proc.poll() is None

    def pid(self) -> int | None:
        """The worker's process id, or None before it started."""
        return self._proc.pid if self.alive() else None

    def start(self) -> None:
        """Start the worker if none is up (a fresh interpreter: `python -m flashviz.measure.worker`)."""
        if self.alive():
            return
        self._drop()
        here, there = socket.socketpair()
        env = dict(os.environ if self.env is None else self.env)
        paths = [p for p in sys.path if p and os.path.isdir(p)]  # the same flashviz the server imported
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*paths, *env.get("PYTHONPATH", "").split(os.pathsep)]))
        cmd = [sys.executable, "-m", "flashviz.measure.worker", str(there.fileno()), ",".join(self.preload)]
        try:
            self._proc = subprocess.Popen(cmd, pass_fds=(there.fileno(),), env=env, start_new_session=True,
                                          stdin=subprocess.DEVNULL)
        finally:
            there.close()
        self._conn = Connection(here.detach())
        if self._started:
            self.restarts += 1
        self._started += 1
        if not wait([self._conn], timeout=START_TIMEOUT_S):
            self._kill()
            raise WorkerDied(f"the timing worker did not start within {START_TIMEOUT_S:.0f} s.")
        try:
            kind, _, _ = self._conn.recv()
        except (EOFError, OSError) as exc:
            code = self._reap()
            raise WorkerDied(f"the timing worker ended at its start ({describe_exit(code)}).") from exc
        assert kind == "ready", kind

    def _reap(self) -> int | None:
        """Wait briefly for the dead worker's exit status; forget it."""
        code = None
        if self._proc is not None:
            try:
                code = self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill()
                code = self._proc.returncode
        self.last_death = describe_exit(code)
        self._drop()
        return code

    def _kill(self) -> None:
        """Stop the worker and every process of its group (a job's own children too), at once."""
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
        self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
        self._conn = None
        if self._proc is not None and self._proc.poll() is not None:
            self._proc = None

    def close(self) -> None:
        """Stop the worker (and its job's processes); a later job starts a new one."""
        if self._proc is not None and self._proc.poll() is None:
            self._kill()
        self._drop()
        self._proc = None

    # -- the queue

    def waiting(self) -> int:
        """Jobs queued or running now."""
        with self._turn:
            return len(self._queue)

    def run(self, target: str | Callable[..., Any], args: tuple = (), kwargs: dict[str, Any] | None = None, *,
            progress: Progress | None = None, cancel: threading.Event | None = None) -> Any:
        """run_reported's result alone."""
        return self.run_reported(target, args, kwargs, progress=progress, cancel=cancel)[0]

    def run_reported(self, target: str | Callable[..., Any], args: tuple = (), kwargs: dict[str, Any] | None = None,
                     *, progress: Progress | None = None, cancel: threading.Event | None = None) -> tuple[Any, Any]:
        """Run target(*args, progress=..., **kwargs) in the worker once the jobs before it have ended.

        Args:
            target: "module:qualname" of a module-level function, or the function itself.
            args, kwargs: its arguments (pickled to the worker).
            progress: called here with the job's reports, (done, total, label, partial) as the job gave them, and
                (0, 0, "waiting") once while other jobs are ahead. Raising `Cancelled` from it cancels the job.
            cancel: an Event; once set, the job stops at its next report, or the worker is killed CANCEL_GRACE_S
                later (and restarted for the next job).
        Returns:
            (the job's result, the RunReport of its run: threads, load, calls set aside; flashviz.measure.load).
        Raises:
            Cancelled when cancelled; WorkerDied when the worker ended under the job; the job's own exception.
        """
        name = target if isinstance(target, str) else target_of(target)
        ticket = next(self._tickets)
        with self._turn:
            self._queue.append(ticket)
            said = False
            try:
                while self._queue[0] != ticket:
                    if cancel is not None and cancel.is_set():
                        raise Cancelled("cancelled while waiting for the timing worker")
                    if progress is not None and not said:
                        said = True
                        progress(0, 0, "waiting")
                    self._turn.wait(POLL_S * 4)
            except BaseException:
                self._queue.remove(ticket)
                self._turn.notify_all()
                raise
        try:
            return self._run_now(ticket, name, args, kwargs or {}, progress, cancel)
        finally:
            with self._turn:
                self._queue.remove(ticket)
                self._turn.notify_all()

    def _run_now(self, job_id: int, target: str, args: tuple, kwargs: dict[str, Any], progress: Progress | None,
                 cancel: threading.Event | None) -> Any:
        self.start()
        conn, proc = self._conn, self._proc
        assert conn is not None and proc is not None
        try:
            conn.send((job_id, target, args, kwargs))
        except (BrokenPipeError, OSError) as exc:
            raise WorkerDied(f"the timing worker ended before its job started ({describe_exit(self._reap())}).") \
                from exc
        cancelled_at: float | None = None
        while True:
            if cancelled_at is None and cancel is not None and cancel.is_set():
                cancelled_at = self._ask_cancel(proc)
            if cancelled_at is not None and time.monotonic() - cancelled_at > CANCEL_GRACE_S:
                self._kill()  # the job did not reach a progress report in time: stop it the hard way
                raise Cancelled(f"cancelled; the timing worker was stopped after {CANCEL_GRACE_S:.0f} s without a "
                                "progress report and will be restarted")
            if not conn.poll(POLL_S):
                if proc.poll() is not None and not conn.poll():
                    raise WorkerDied(f"the timing worker stopped during {target.rpartition(':')[2]} "
                                     f"({describe_exit(self._reap())}).")
                continue
            try:
                kind, jid, payload = conn.recv()
            except (EOFError, OSError) as exc:
                raise WorkerDied(f"the timing worker stopped during {target.rpartition(':')[2]} "
                                 f"({describe_exit(self._reap())}).") from exc
            if jid != job_id:
                continue  # a late answer of a job that was given up on
            if kind == "progress":
                if progress is not None and cancelled_at is None:
                    try:
                        progress(*payload)
                    except Cancelled:
                        cancelled_at = self._ask_cancel(proc)
                continue
            if kind == "done":
                return payload
            if kind == "cancelled":
                raise Cancelled("cancelled")
            raise payload

    @staticmethod
    def _ask_cancel(proc: subprocess.Popen) -> float:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGUSR1)
        return time.monotonic()


class InlineWorker:
    """The same interface as TimingWorker, the job run in this process (tests that replace a function the job calls).

    Example:
        >>> InlineWorker().run("flashviz.measure.load:load_now", (0.01,)).cores >= 1
        True
    """

    def run(self, target: str | Callable[..., Any], args: tuple = (), kwargs: dict[str, Any] | None = None, *,
            progress: Progress | None = None, cancel: threading.Event | None = None) -> Any:
        """run_reported's result alone."""
        return self.run_reported(target, args, kwargs, progress=progress, cancel=cancel)[0]

    def run_reported(self, target: str | Callable[..., Any], args: tuple = (), kwargs: dict[str, Any] | None = None,
                     *, progress: Progress | None = None, cancel: threading.Event | None = None) -> tuple[Any, Any]:
        """As TimingWorker.run_reported, in this process."""
        fn = resolve(target) if isinstance(target, str) else target

        def report(done: int, total: int, label: str, partial: Any = None) -> None:
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled")
            if progress is not None:
                progress(done, total, label, partial)

        return run_job(fn, args, kwargs or {}, report)

    def close(self) -> None:
        """Nothing to stop."""


def main(argv: list[str]) -> None:
    """`python -m flashviz.measure.worker FD [PRELOAD,...]`: serve jobs on the socket with file descriptor FD."""
    fd = int(argv[0])
    preload = tuple(m for m in (argv[1] if len(argv) > 1 else "").split(",") if m)
    serve(Connection(fd), preload)


if __name__ == "__main__":
    main(sys.argv[1:])
