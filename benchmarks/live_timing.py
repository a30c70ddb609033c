"""Do the dashboard's live timings measure the kernels? The Benchmark view's Run at its defaults, in Chromium, against
`python -m flashviz bench` at the same settings, on a quiet machine and under a reference load.

1. The CLI bench at the defaults on the quiet machine: the reference medians, ratios and winners.
2. Under the reference load (2 Chromium pages reloading other views of the same server, 1 busy Python process), for
   each of --reruns fresh servers: once the views the load opens have run their own timed jobs (the Roofline's CPU
   roof: a loading page would otherwise wait behind the Benchmark's run in the timing worker's queue, and the
   dashboard would run under a lighter load than the CLI beside it), the Benchmark view's Run at its defaults in
   Chromium, its rows read back from the page's CSV download, then, with the same server, pages and busy process
   still running (the Benchmark's page open on its results), the CLI bench: each dashboard run is compared with the
   CLI run beside it, under the same load.

It prints, per (implementation, N): the dashboard's median under load, the CLI's under load and quiet, the threads
each ran with, the calls set aside (and, per run, the waits for a core taken off their times), and the checks:
  - every dashboard median within 1.5x of the CLI's under the same load;
  - each kernel's time relative to naive at the same N within 1.5x of that ratio on the quiet machine;
  - no winner named under load is the loser on the quiet machine;
  - over the reruns under load, the named winners agree.
With --shots DIR it also saves 1280 x 720 screenshots of the Benchmark, Block size and Ring views after Run under load.
With --threads N the dashboard's CPU threads and the CLI's --threads are N throughout (default: each one's own
default, the machine's cores). Under the load the timing worker runs with the threads the busy cores leave free, and
a verdict measured with fewer threads than asked names no winner; asked for 1, it names what it measured at 1.

Run:  python benchmarks/live_timing.py                 (about 10 minutes on 2 cores)
      python benchmarks/live_timing.py --reruns 2 --shots artifacts/live
      python benchmarks/live_timing.py --checkout /tmp/before --views ''   (an earlier release, side by side)
      python benchmarks/live_timing.py --threads 1 --reruns 3 --views ''   (verdicts at the threads the load leaves)
The machine should be otherwise idle for step 1: the script makes its own load for step 2.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import load
import pandas as pd
from load import CHROMIUM_ARGS, CONNECTED, IDLE, PAGE_END, chromium_path, own_server

from flashviz.limits import LIVE_TIME_BUDGET_S
from flashviz.measure.verdict import SEPARATED
from flashviz.views.bench.sentences import speed_verdicts
from flashviz.vocab import NAIVE, OK

ROOT = Path(__file__).resolve().parents[1]  # the checkout measured (--checkout: another one)
LOAD_VIEWS = ("how", "io", "roof", "masks", "decode", "backward", "ring", "correct")  # what the load's pages open
TOLERANCE = 1.5  # the targets: within 1.5x
RUN_TIMEOUT_S = 900.0  # seconds one Run may take before the script gives up on it
RUNS = {  # view -> (its run button's key, the status label its run ends with)
    "bench": ("bench_run", "Benchmark sweep: done"),
    "block": ("block_run", "Block-size sweep: done"),
    "correct": ("correct_run", "Correctness check: done"),
    "train": ("train_run", "Training sweep: done"),
    "backward": ("backward_price_run", "Backward price: done"),
    "roof": ("roof_run", "Roofline timing: done"),
    "decode": ("decode_run", "Decode timing: done"),
    "masks": ("masks_run", "Mask timing: done"),
    "numerics": (None, "Numerics lab: done"),  # small labs run as the page opens: no button to press
    "ring": ("ring_run", "Ring run: done"),
}
SHOT_VIEWS = ("block", "ring")  # screenshots after Run (with the Benchmark's)
WARM_VIEWS = ("roof",)  # views of LOAD_VIEWS that run a timed job as they open (cached per server after the first)


THREADS: int | None = None  # --threads: the dashboard's CPU threads and the CLI's --threads (None: their defaults)


def cli_bench(out: Path) -> pd.DataFrame:
    """`python -m flashviz bench` at its defaults (the Benchmark view's); its CSV rows."""
    threads = [] if THREADS is None else ["--threads", str(THREADS)]
    subprocess.run([sys.executable, "-m", "flashviz", "bench", "--out", str(out), *threads], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    return pd.read_csv(out)


@contextlib.contextmanager
def busy_process() -> Iterator[None]:
    """One Python process that keeps a core busy."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        proc.kill()
        proc.wait(10)


def reload_views(url: str) -> None:
    """One student's page, in a process of its own (its own Chromium): open the other views of the server one after
    the other until killed."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
        i = 0
        while True:
            with contextlib.suppress(PlaywrightError):
                page.goto(f"{url}/?view={LOAD_VIEWS[i % len(LOAD_VIEWS)]}", wait_until="commit", timeout=60_000)
                page.wait_for_selector(IDLE, timeout=60_000)
            i += 1


@contextlib.contextmanager
def reloading_pages(url: str, pages: int = 2) -> Iterator[None]:
    """`pages` students reloading other views of the server, each a process of its own, stopped afterwards."""
    procs = [subprocess.Popen([sys.executable, __file__, "--reload", url], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True) for _ in range(pages)]
    try:
        time.sleep(5)  # the pages are up and loading
        yield
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def press_run(page, url: str, view: str, downloads: Path | None = None) -> pd.DataFrame | None:
    """Open a view, press its Run, wait for the run to end; the Benchmark's rows from its CSV download."""
    key, done = RUNS[view]
    threads = "" if THREADS is None else f"&threads={THREADS}"
    page.goto(f"{url}/?view={view}{threads}", wait_until="commit", timeout=120_000)
    page.wait_for_selector(CONNECTED, timeout=120_000)
    if key is None:  # it runs as it opens
        page.wait_for_selector(f"text={done}", timeout=RUN_TIMEOUT_S * 1000)
        return None
    page.wait_for_selector(PAGE_END, timeout=120_000)
    page.wait_for_selector(IDLE, timeout=120_000)
    if key is not None:
        page.locator(f".st-key-{key} button:visible").first.click(timeout=120_000)
    page.wait_for_selector(f"text={done}", timeout=RUN_TIMEOUT_S * 1000)
    page.wait_for_selector(IDLE, timeout=120_000)
    if downloads is None:
        return None
    with page.expect_download(timeout=60_000) as info:
        page.locator(".st-key-bench_csv button:visible").first.click()
    path = downloads / f"dashboard-{time.monotonic_ns()}.csv"
    info.value.save_as(path)
    return pd.read_csv(path)


def no_tooltip(page) -> None:
    """No tooltip of a button just pressed over the result: take the focus off it and the mouse away."""
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.mouse.move(0, 0)
    page.wait_for_timeout(500)


def warm_up(page, url: str) -> None:
    """Open the views the load's pages open that queue a timed job in the server's timing worker (the Roofline's CPU
    roof, probed once per server and then cached), so that no loading page waits behind the Benchmark's run while the
    CLI beside it has both pages loading: the dashboard and the CLI then run under the same load."""
    for view in WARM_VIEWS:
        page.goto(f"{url}/?view={view}", wait_until="commit", timeout=120_000)
        page.wait_for_selector(CONNECTED, timeout=120_000)
        page.wait_for_selector(PAGE_END, timeout=RUN_TIMEOUT_S * 1000)
        page.wait_for_selector(IDLE, timeout=RUN_TIMEOUT_S * 1000)


def dashboard_run_under_load(tmp: Path, shots: Path | None,
                             views: tuple[str, ...] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A fresh server; 2 pages reloading its other views and a busy process; the Benchmark's Run in a third page,
    then the CLI bench under the same load. The dashboard's rows and the CLI's."""
    from playwright.sync_api import sync_playwright

    with own_server(tmp / "timing.jsonl", tmp / "server.log") as (url, _), sync_playwright() as p, busy_process(), \
            reloading_pages(url):
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 720}, accept_downloads=True).new_page()
            warm_up(page, url)
            started = time.monotonic()
            df = press_run(page, url, "bench", tmp)
            df.attrs["seconds"] = time.monotonic() - started
            if shots is not None:
                shots.mkdir(parents=True, exist_ok=True)
                no_tooltip(page)
                page.screenshot(path=str(shots / "bench-under-load.png"))
            for view in views:
                t0 = time.monotonic()
                press_run(page, url, view)
                print(f"   {view}: its Run at the defaults took {time.monotonic() - t0:.0f} s under the load "
                      f"(budget {LIVE_TIME_BUDGET_S:.0f} s)", flush=True)
                if shots is not None and view in SHOT_VIEWS:
                    no_tooltip(page)
                    page.screenshot(path=str(shots / f"{view}-under-load.png"))
            cli = cli_bench(tmp / f"loaded-{time.monotonic_ns()}.csv")
        finally:
            browser.close()
    return df, cli


def said(df: pd.DataFrame) -> str:
    """What a run's CSV says of its load and the calls it set aside (a release before the timing worker: nothing)."""
    if "calls_set_aside" not in df.columns:
        return f"{int(df['threads'].iloc[0])} threads; this release does not record the load or set calls aside"
    row = df.iloc[0]
    waited = f", {int(row['calls_waited'])} waits for a core taken off" if "calls_waited" in df.columns else ""
    return (f"other work kept {row['other_busy_cores']:.1f} cores busy, {int(row['calls_set_aside'])} of "
            f"{int(row['timed_calls'])} calls set aside{waited}, {row['thread_policy']}")


def medians(df: pd.DataFrame) -> pd.Series:
    ok = df[df["status"].astype(str) == OK]
    return ok.set_index(["impl", "N"])["time_s"]


def winners(df: pd.DataFrame) -> dict[tuple[int, str], str | None]:
    """(N, kernel) -> the side the verdict against naive names, or None (too close to call)."""
    return {(n, impl): v.faster for n, impl, v in speed_verdicts(df)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reruns", type=int, default=5, help="fresh dashboard runs under load (default 5)")
    p.add_argument("--shots", type=Path, default=None, help="save 1280 x 720 screenshots here")
    p.add_argument("--views", default=",".join(v for v in RUNS if v != "bench"),
                   help="after the first rerun's Benchmark, press Run on these views' defaults under the same load "
                        "and print how long each took (default: every view with a Run; '' for none)")
    p.add_argument("--checkout", type=Path, default=None,
                   help="measure another checkout's dashboard and CLI (e.g. a git worktree of an earlier commit)")
    p.add_argument("--threads", type=int, default=None,
                   help="the dashboard's CPU threads and the CLI's --threads (default: each one's own)")
    p.add_argument("--reload", metavar="URL", default=None, help=argparse.SUPPRESS)  # one reloading page (internal)
    args = p.parse_args(argv)
    if args.reload:
        reload_views(args.reload)
        return 0
    global THREADS
    THREADS = args.threads
    if args.checkout is not None:  # its server and its CLI, with its own flashviz first on the path
        global ROOT
        ROOT = load.ROOT = args.checkout.resolve()
        os.environ["PYTHONPATH"] = str(ROOT)
    with tempfile.TemporaryDirectory(prefix="flashviz-live-") as name:
        tmp = Path(name)
        print("1. the CLI bench at the defaults, quiet machine ...", flush=True)
        quiet = cli_bench(tmp / "quiet.csv")
        print("2. the dashboard's Benchmark under load, fresh servers ...", flush=True)
        runs, clis = [], []
        for i in range(args.reruns):
            views = tuple(v for v in args.views.split(",") if v) if i == 0 else ()
            df, cli = dashboard_run_under_load(tmp, args.shots if i == 0 else None, views)
            print(f"   run {i + 1}: {df.attrs['seconds']:.0f} s from Run to its results; {said(df)}\n"
                  f"   the CLI beside it: {said(cli)}", flush=True)
            runs.append(df)
            clis.append(cli)
        print(f"   the quiet CLI: {said(quiet)}", flush=True)
    report(quiet, runs, clis)
    return 0


def _threads(rows: pd.DataFrame, impl: str, n: int) -> str:
    """The threads a row ran with, and those asked when fewer ran ("1/2"); "-" for a row not there."""
    if (impl, n) not in rows.index:
        return "-"
    row = rows.loc[(impl, n)]
    ran, asked = int(row["threads"]), int(row.get("threads_asked", row["threads"]))
    return f"{ran}/{asked}" if asked > ran else f"{ran}"


def report(quiet: pd.DataFrame, runs: list[pd.DataFrame], clis: list[pd.DataFrame]) -> None:
    """The table and the four checks; each dashboard run against the CLI run beside it (`clis`, in the same order)."""
    q = medians(quiet)
    rows, checks = [], {"dashboard within 1.5x of the CLI under load": True,
                        "ratio to naive within 1.5x of the quiet ratio": True,
                        "no winner under load is the quiet loser": True}
    quiet_winners = winners(quiet)
    for i, (df, cli) in enumerate(zip(runs, clis, strict=True)):
        d, c = medians(df), medians(cli)
        rows_of, cli_rows = df.set_index(["impl", "N"]), cli.set_index(["impl", "N"])
        for (impl, n), t in d.items():
            vs_cli = t / c.get((impl, n), math.nan)
            ratio = t / d.get((NAIVE, n), math.nan)
            quiet_ratio = q.get((impl, n), math.nan) / q.get((NAIVE, n), math.nan)
            off = max(ratio / quiet_ratio, quiet_ratio / ratio)
            rows.append({"run": i + 1, "impl": impl, "N": n, "dashboard ms": t * 1e3,
                         "CLI loaded ms": c.get((impl, n), math.nan) * 1e3, "CLI quiet ms": q.get((impl, n)) * 1e3,
                         "dash/CLI": vs_cli, "x naive (load)": ratio, "x naive (quiet)": quiet_ratio,
                         "ratio off": off, "threads": _threads(rows_of, impl, n),
                         "CLI threads": _threads(cli_rows, impl, n), "kept": rows_of.loc[(impl, n), "repeats"],
                         "set aside": rows_of.loc[(impl, n)].get("set_aside", math.nan),
                         "settled": bool(rows_of.loc[(impl, n), "converged"])})
            checks["dashboard within 1.5x of the CLI under load"] &= 1 / TOLERANCE <= vs_cli <= TOLERANCE
            if impl != NAIVE:
                checks["ratio to naive within 1.5x of the quiet ratio"] &= off <= TOLERANCE
        for key, w in winners(df).items():
            if w is not None and quiet_winners.get(key) not in (None, w):
                checks["no winner under load is the quiet loser"] = False
    named = [{k: w for k, w in winners(df).items() if w is not None} for df in runs]
    agree = all(a.get(k) in (None, w) for a in named for b in named for k, w in b.items())
    checks["the reruns' named winners agree"] = agree
    table = pd.DataFrame(rows)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    print("\nwinners named (N, kernel against naive):")
    print(f"  quiet CLI: {sorted((k, w) for k, w in quiet_winners.items() if w)}")
    for i, (w, df) in enumerate(zip(named, runs, strict=True)):
        settles = pd.Series([v.settle for _, _, v in speed_verdicts(df)]).value_counts()
        unsettled = ", ".join(f"{k}: {c}" for k, c in settles.items() if k != SEPARATED) or "none"
        print(f"  dashboard run {i + 1} under load: {sorted(w.items())}; not named, by what would settle it: "
              f"{unsettled}")
    for i, cli in enumerate(clis):
        print(f"  the CLI beside run {i + 1}: {sorted((k, w) for k, w in winners(cli).items() if w)}")
    print()
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")


if __name__ == "__main__":
    raise SystemExit(main())
