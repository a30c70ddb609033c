"""Concurrent load on one dashboard server: N students open the Benchmark view and press "Run benchmark" together.

Each session is a separate headless Chromium context (its own Streamlit session, like a separate student) that opens
the Benchmark view with a small sweep in the URL, waits until the page is idle, and clicks the run button; all the
clicks land within about a second. Each session asks for a different head dimension d, so no answer can come from
another session's cache: every click is one real timing run. The script then waits until every session shows its
results (the memory chart) or an error, and prints

    sessions served    sessions that showed results with no exception box and no error message
    p50 / p95          seconds from the click to the results, over the served sessions
    timing runs        start/end intervals of the dashboard's timing lock and how many of them overlapped
    peak RSS           of the server's process tree (VmRSS of the server and its children, sampled every 0.1 s)

Timing-run evidence comes from the dashboard: with FLASHVIZ_TIMING_LOG=<file> in its environment, the process-wide
timing lock (flashviz.kit.lock.holding) appends one JSON line when a run takes the lock and one just before it lets
go: {"event": "start" | "end", "run": "<id>", "t": <time.time() seconds>, "pid": <int>, "thread": <int>}.

Run:  python benchmarks/load.py                      (starts `streamlit run app.py` on a free 127.0.0.1 port)
      python benchmarks/load.py --sessions 30 --ns 256,512
      python benchmarks/load.py --sessions 8 --same     (identical requests: the cache runs the sweep once)
      python benchmarks/load.py --url http://127.0.0.1:8501 --server-pid 1234 --timing-log /tmp/timing.jsonl
Only loopback servers are accepted: this is a load generator, not something to point at other people's machines.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMING_LOG_ENV = "FLASHVIZ_TIMING_LOG"  # the dashboard's hook: where its timing lock logs start/end lines
CHROMIUM = "/usr/bin/chromium"  # Debian's Chromium (playwright's own browser download is not used)
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
RUN_BUTTON = ".st-key-bench_run button:visible"  # the Benchmark view's run button (st.button key="bench_run")
RESULT = ".st-key-bench_memory .js-plotly-plot .main-svg"  # the first results chart, drawn by plotly
SWEEP_DONE = "text=Benchmark sweep: done"  # the st.status label run_with_progress sets when the sweep finished
EXCEPTION = "[data-testid='stException']"  # Streamlit's exception box
ERROR_ALERT = "[data-testid='stAlert']:has-text('could not run')"  # the view's own error message for a failed sweep
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
CONNECTED = "[data-testid='stApp'][data-test-connection-state='CONNECTED']"
PAGE_END = "#fv-page-end"  # the element the dashboard's last statement draws (flashviz.app.sidebar.page_end_ui)
SETTINGS = "[data-testid='stSidebar'] [data-testid='stSelectbox']"  # the sidebar's widgets: earlier releases drew
# them last, so their presence meant the full page was drawn (those releases drew no PAGE_END)
SERVER_START_S = 120  # seconds to wait for /_stcore/health (the first start imports torch)
POLL_S = 0.05  # seconds between polls of the pending sessions
RSS_EVERY_S = 0.1  # seconds between RSS samples
KIB = 1024  # bytes per KiB (/proc reports VmRSS in kB = KiB)
MIB = 1 << 20  # bytes per MiB


@dataclass
class Session:
    index: int
    url: str
    clicked: float | None = None  # time.monotonic() of the click
    swept: float | None = None  # when the page showed "Benchmark sweep: done" (the server finished the sweep)
    done: float | None = None  # when the results chart appeared (plotly drew it in the browser)
    error: str | None = None

    @property
    def seconds(self) -> float | None:
        return None if self.clicked is None or self.done is None else self.done - self.clicked


@dataclass
class Report:
    sessions: int
    served: int
    seconds: list[float]  # click -> results chart drawn, served sessions only
    p50_s: float | None
    p95_s: float | None
    sweep_p50_s: float | None  # click -> "sweep done" status: the server's share, without plotly's drawing
    sweep_p95_s: float | None
    errors: list[str]
    timing_runs: int | None  # None: no timing log to read
    overlaps: list[list[float]] = field(default_factory=list)  # [start_a, end_a, start_b, end_b] of overlapping runs
    unfinished_runs: int = 0  # start lines without an end line
    rss_start_mib: float | None = None
    rss_peak_mib: float | None = None


# ----------------------------------------------------------------------------------------------------------------------
# the server and its memory


def chromium_path() -> str | None:
    """Debian's Chromium: CHROMIUM, else whichever `chromium` is on the PATH; None where there is none."""
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen | None, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode} before it was healthy")
        time.sleep(0.3)
    raise RuntimeError(f"{url}/_stcore/health did not answer 'ok' within {timeout_s:.0f} s")


def stop(proc: subprocess.Popen, grace_s: float = 15) -> None:
    """End a server process: SIGTERM, then SIGKILL if it has not exited within grace_s seconds."""
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(grace_s)


@contextlib.contextmanager
def own_server(timing_log: Path, log: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """`streamlit run app.py` on a free loopback port with the timing log switched on; always stopped afterwards."""
    port = free_port()
    env = {**os.environ, TIMING_LOG_ENV: str(timing_log), "PYTHONUNBUFFERED": "1"}
    env.pop("FLASHVIZ_TIMING_WORKER", None)  # a served dashboard always times in its timing worker
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, proc, SERVER_START_S)
            yield url, proc
        finally:
            stop(proc)


def tree_pids(pid: int) -> list[int]:
    """pid and all its descendants, from /proc/<pid>/task/<tid>/children."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for children in Path(f"/proc/{p}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                todo += [int(c) for c in children.read_text().split()]
    return out


def tree_rss_bytes(pid: int) -> int:
    """Sum of VmRSS over the process tree rooted at pid (0 when it is gone)."""
    total = 0
    for p in tree_pids(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * KIB
    return total


class RssSampler:
    """Samples the RSS of a process tree in a background thread; .peak is the largest sample (bytes)."""

    def __init__(self, pid: int):
        self.pid, self.start, self.peak = pid, tree_rss_bytes(pid), 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss_bytes(self.pid))
            self._stop.wait(RSS_EVERY_S)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
        self.peak = max(self.peak, tree_rss_bytes(self.pid))


# ----------------------------------------------------------------------------------------------------------------------
# the timing log


def timing_runs(path: Path) -> tuple[list[tuple[float, float]], int]:
    """(start, end) of every finished timing run in the log, sorted by start; and the number of unfinished ones."""
    starts: dict[str, float] = {}
    runs = []
    if not path.exists():
        return [], 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        event = json.loads(line)
        if event["event"] == "start":
            starts[event["run"]] = float(event["t"])
        elif event["event"] == "end" and event["run"] in starts:
            runs.append((starts.pop(event["run"]), float(event["t"])))
    return sorted(runs), len(starts)


def overlapping(runs: list[tuple[float, float]]) -> list[list[float]]:
    """Pairs of runs whose intervals intersect (runs sorted by start): [start_a, end_a, start_b, end_b]."""
    out = []
    latest_end, latest = float("-inf"), None
    for start, end in runs:
        if start < latest_end:
            out.append([*latest, start, end])
        if end > latest_end:
            latest_end, latest = end, (start, end)
    return out


# ----------------------------------------------------------------------------------------------------------------------
# the sessions


def session_url(base: str, index: int, args: argparse.Namespace) -> str:
    """The Benchmark view with a small sweep; d differs per session (unless --same): no result comes from the cache."""
    d = args.d if args.same else args.d + index
    query = {"view": "bench", "ns": args.ns, "impls": args.impls, "reps": str(args.reps), "threads": str(args.threads),
             "d": str(d), "bblock": str(args.block), "batch": "1", "heads": "1"}
    return f"{base.rstrip('/')}/?{urllib.parse.urlencode(query)}"


def percentile(values: list[float], p: float) -> float | None:
    """Linear-interpolation percentile (p in 0..100) of values; None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * p / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def page_error(page) -> str | None:
    if page.locator(EXCEPTION).count():
        return "exception box: " + (page.locator(EXCEPTION).first.text_content() or "")[:300]
    if page.locator(ERROR_ALERT).count():
        return "error: " + (page.locator(ERROR_ALERT).first.text_content() or "")[:300]
    return None


def await_results(pending: list, timeout_s: float, server_exit: Callable[[], int | None]) -> None:
    """Poll every clicked session until its results show, its page shows an error, the server dies or time runs out."""
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        if (code := server_exit()) is not None:
            for s, _ in pending:
                s.error = f"the server exited with code {code} (negative: killed by that signal)"
            return
        still = []
        for s, page in pending:
            if s.swept is None and page.locator(SWEEP_DONE).count():
                s.swept = time.monotonic()
            if page.locator(RESULT).count():
                s.swept = s.swept or time.monotonic()
                s.done = time.monotonic()
            elif (err := page_error(page)) is not None:
                s.error = err
            else:
                still.append((s, page))
        pending = still
        time.sleep(POLL_S)
    for s, _ in pending:
        s.error = f"no results within {timeout_s:.0f} s"


def drive(sessions: list[Session], args: argparse.Namespace, shots: Path | None,
          server_exit: Callable[[], int | None] = lambda: None) -> None:
    """Open every session, click every run button together, wait for every result (or the server's death)."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    if executable is None:
        raise RuntimeError("Debian's chromium is not installed: apt-get install -y chromium")
    load_ms = int(args.timeout * 1000)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            pages = []
            for s in sessions:  # every student opens the page
                context = browser.new_context(viewport={"width": 1400, "height": 1600})
                page = context.new_page()
                page.goto(s.url, wait_until="commit", timeout=load_ms)
                pages.append(page)
            for s, page in zip(sessions, pages, strict=True):  # ... and waits until it has rendered
                try:
                    page.wait_for_selector(CONNECTED, timeout=load_ms)
                    page.wait_for_selector(RUN_BUTTON, timeout=load_ms)
                    page.wait_for_selector(IDLE, timeout=load_ms)
                except PlaywrightError as e:
                    s.error = f"page did not render the run button: {str(e).splitlines()[0]}"
            for s, page in zip(sessions, pages, strict=True):  # everyone presses "Run benchmark" at once
                if s.error is None:
                    page.locator(RUN_BUTTON).click(timeout=load_ms)
                    s.clicked = time.monotonic()
            await_results([(s, page) for s, page in zip(sessions, pages, strict=True) if s.error is None],
                          args.timeout, server_exit)
            for s, page in zip(sessions, pages, strict=True):  # results must not come with an error elsewhere
                if s.error is None and (err := page_error(page)) is not None:
                    s.error, s.done = err, None
            if shots is not None and pages:
                shots.mkdir(parents=True, exist_ok=True)
                pages[0].wait_for_selector(IDLE, timeout=load_ms)
                pages[0].screenshot(path=str(shots / "load-session-0.png"), full_page=True)
        finally:
            browser.close()


def run(args: argparse.Namespace) -> Report:
    sessions_of = lambda base: [Session(i, session_url(base, i, args)) for i in range(args.sessions)]  # noqa: E731
    shots = Path(args.screenshots) if args.screenshots else None
    with tempfile.TemporaryDirectory(prefix="flashviz-load-") as tmp:
        if args.url:
            host = urllib.parse.urlparse(args.url).hostname
            if host not in ("127.0.0.1", "localhost", "::1"):
                raise SystemExit(f"--url must point at this machine (127.0.0.1 or localhost), got host {host!r}")
            wait_healthy(args.url.rstrip("/"), None, 30)
            log_path = Path(args.timing_log) if args.timing_log else None
            start = log_path.stat().st_size if log_path and log_path.exists() else 0
            sessions = sessions_of(args.url)
            with (RssSampler(args.server_pid) if args.server_pid else contextlib.nullcontext()) as rss:
                drive(sessions, args, shots)
            if log_path is not None:  # only the lines this run appended
                fresh = Path(tmp) / "timing.jsonl"
                with open(log_path, "rb") as f:
                    f.seek(start)
                    fresh.write_bytes(f.read())
                log_path = fresh
        else:
            log_path = Path(args.timing_log) if args.timing_log else Path(tmp) / "timing.jsonl"
            log_path.unlink(missing_ok=True)
            server_log = Path(tmp) / "server.log"
            try:
                with own_server(log_path, server_log) as (url, proc), RssSampler(proc.pid) as rss:
                    sessions = sessions_of(url)
                    drive(sessions, args, shots, proc.poll)
            except Exception:
                if server_log.exists():
                    print(f"--- server log (last lines) ---\n{server_log.read_text()[-3000:]}", file=sys.stderr)
                raise
        runs, unfinished = timing_runs(log_path) if log_path is not None else ([], 0)
        seconds = [s.seconds for s in sessions if s.error is None and s.seconds is not None]
        swept = [s.swept - s.clicked for s in sessions if s.error is None and s.swept and s.clicked]
        return Report(
            sessions=len(sessions), served=len(seconds), seconds=[round(x, 3) for x in seconds],
            p50_s=percentile(seconds, 50), p95_s=percentile(seconds, 95),
            sweep_p50_s=percentile(swept, 50), sweep_p95_s=percentile(swept, 95),
            errors=[f"session {s.index}: {s.error}" for s in sessions if s.error],
            timing_runs=len(runs) if log_path is not None else None, overlaps=overlapping(runs),
            unfinished_runs=unfinished,
            rss_start_mib=None if rss is None else round(rss.start / MIB, 1),
            rss_peak_mib=None if rss is None else round(rss.peak / MIB, 1),
        )


def print_report(r: Report, args: argparse.Namespace) -> None:
    fmt = lambda x: "-" if x is None else f"{x:.2f} s"  # noqa: E731
    ds = str(args.d) if args.same else f"{args.d}..{args.d + args.sessions - 1}"
    print(f"flashviz load: {r.sessions} sessions, each a Benchmark sweep of N = {args.ns}, impls {args.impls}, "
          f"d = {ds}, block {args.block}, {args.reps} repeat(s), {args.threads} thread(s)")
    print(f"sessions served:      {r.served}/{r.sessions}")
    print(f"time to results:      p50 {fmt(r.p50_s)}, p95 {fmt(r.p95_s)}"
          + (f" (min {min(r.seconds):.2f} s, max {max(r.seconds):.2f} s)" if r.seconds else ""))
    print(f"  of which the sweep: p50 {fmt(r.sweep_p50_s)}, p95 {fmt(r.sweep_p95_s)} (click -> 'sweep done' "
          "label; the rest is the browser drawing 4 plotly charts)")
    if r.timing_runs is None:
        print("timing runs:          not checked (no timing log; start the server with "
              f"{TIMING_LOG_ENV}=<file> and pass --timing-log <file>)")
    else:
        print(f"timing runs:          {r.timing_runs} logged, {len(r.overlaps)} overlapping, "
              f"{r.unfinished_runs} unfinished")
    if r.rss_peak_mib is not None:
        print(f"server RSS:           {r.rss_start_mib:.0f} MiB before, peak {r.rss_peak_mib:.0f} MiB")
    else:
        print("server RSS:           not measured (pass --server-pid with --url)")
    if r.seconds:
        print(f"per-session seconds:  {', '.join(f'{x:.2f}' for x in r.seconds)}")
        print(f"mean:                 {statistics.fmean(r.seconds):.2f} s")
    for e in r.errors:
        print(f"ERROR {e}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=int, default=8, help="concurrent browser sessions (default 8)")
    p.add_argument("--url", default=None, help="use this running server (127.0.0.1 only) instead of starting one")
    p.add_argument("--server-pid", type=int, default=None, help="with --url: the server's pid, for its RSS")
    p.add_argument("--timing-log", default=None, help=f"with --url: the file the server's {TIMING_LOG_ENV} names; "
                                                       "without: where the started server writes it (default: temp)")
    p.add_argument("--ns", default="128,256", help="sequence lengths of each session's sweep (default 128,256)")
    p.add_argument("--impls", default="naive,flash2,sdpa", help="implementations (default naive,flash2,sdpa)")
    p.add_argument("--d", type=int, default=32, help="head dimension of session 0; session i uses d + i (against a "
                   "server that already ran these, pick new ones: cached answers start no timing run)")
    p.add_argument("--block", type=int, default=64, help="the Benchmark view's tile size Br = Bc (default 64)")
    p.add_argument("--reps", type=int, default=2, help="timed repeats per point (default 2)")
    p.add_argument("--threads", type=int, default=1, help="torch threads of each timing run (default 1)")
    p.add_argument("--same", action="store_true",
                   help="every session asks for the same sweep (d not varied): shows what the result cache saves")
    p.add_argument("--timeout", type=float, default=300, help="seconds each phase may take (default 300)")
    p.add_argument("--screenshots", default=None, help="folder for a screenshot of session 0's results")
    p.add_argument("--json", default=None, help="also write the figures as JSON to this file")
    args = p.parse_args(argv)
    if not 1 <= args.sessions <= 64:
        p.error("--sessions must be between 1 and 64 (each one is a Chromium context)")
    report = run(args)
    print_report(report, args)
    if args.json:
        Path(args.json).write_text(json.dumps(asdict(report), indent=2))
    ok = report.served == report.sessions and not report.overlaps and not report.unfinished_runs
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
