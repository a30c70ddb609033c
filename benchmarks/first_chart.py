"""First chart, measured: seconds from a cold `streamlit run app.py` to the first chart drawn in a real browser.

A teacher starts the dashboard and opens it; what they wait for is the first chart. This script measures exactly that
in Debian's headless Chromium (driven by playwright), with the browser already running, as a teacher's would be:

    cold   a fresh server process on a free 127.0.0.1 port per repeat: from just before the process is spawned, until
           /_stcore/health answers (health), the first chart is drawn (chart: the default page's tile map, an SVG the
           server writes, figures/tilemap.py; in an earlier release, a copy of it the server put in the HTML page
           itself), the page's websocket is connected (connected), the map Streamlit draws is there (page map), its
           Play control is drawn (play: the map is interactive, Play is CSS and needs no torch), the page is idle
           (idle: Streamlit's app element says the script run has finished, and the page's last element, #fv-page-end,
           is drawn; for releases without it, the sidebar's widgets, which they drew last) and plotly has drawn its
           first chart (plotly: the row inspector; plotly.js alone takes seconds to load on a small machine, which is
           why the tile map does not use it). The page is opened as soon as health answers. Each moment is stamped in
           the browser (a MutationObserver; an element counts once it has a size and is visible), so their order does
           not matter.
    warm   further page loads on the last cold server, each in a new browser context (a new Streamlit session and an
           empty browser cache, so no widget state is reused, but the server's imports and caches are): from
           page.goto to the same moments.
    reference (--reference)  the same cold start (and warm loads) of a one-line Streamlit page (one small SVG in
           st.markdown, the dashboard's .streamlit/config.toml): what Streamlit itself costs on this machine, the floor
           under the dashboard's figures. With it, the report gives every launcher's medians as multiples of the
           reference's: chart and play of its first element, idle of its idle.

Before measuring, flashviz/ (and each --checkout's) is compiled to bytecode (python -m compileall), as on any
machine that has run the dashboard once and in the image, which compiles it at build time; --no-compile leaves that
out (with PYTHONDONTWRITEBYTECODE=1 and no __pycache__ left, every start then compiles the package from source).

It prints every repeat and the medians. The server can be started with another launcher to compare start commands
side by side, e.g. scripts/serve.py (the image's start command):

    PYTHONPATH=$PWD python benchmarks/first_chart.py                        # 3 cold starts, 3 warm loads
    PYTHONPATH=$PWD python benchmarks/first_chart.py --cold 5 --warm 5 --reference
    PYTHONPATH=$PWD python benchmarks/first_chart.py --launcher scripts/serve.py --launcher ''   # interleaved A/B
    git worktree add /tmp/before <commit>                                   # an earlier version, side by side:
    PYTHONPATH=$PWD python benchmarks/first_chart.py --checkout /tmp/before --reference
    PYTHONPATH=$PWD python benchmarks/first_chart.py --importtime 25        # + the server's 25 slowest imports

Times depend on the machine and its load: compare launchers measured in one run (they are interleaved repeat by
repeat), not figures from different runs. --importtime runs the cold server under `python -X importtime` (which
itself slows imports a little) and prints the slowest cumulative imports of the first cold start.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from load import CHROMIUM, CHROMIUM_ARGS, CONNECTED, IDLE, PAGE_END, SETTINGS, free_port, stop

ROOT = Path(__file__).resolve().parents[1]
CHART = ".fv-tilemap svg.fv-grid"  # the tile map's first panel (figures/tilemap.py): the page's first chart
PAGE_MAP = "#root " + CHART  # the map Streamlit draws (the early copy is outside the app's root element)
PLOTLY = ".js-plotly-plot .main-svg"  # plotly's SVG exists only once plotly.js has drawn the figure
PLAY = "#root .fv-tilemap label.fv-playlabel"  # the map's Play control (CSS only: it needs no torch), once visible
# A page is idle once its script run has finished: Streamlit's app element says so (its script-state attribute), and
# the page's last element is there (a run that stops early, such as a first page drawn alone, is not the page). For
# checkouts whose page draws no PAGE_END, the sidebar's widgets (drawn last there) stand for it.
IDLE_END = f"{PAGE_END}, {SETTINGS}"
REFERENCE = "reference"  # the launcher name of --reference's one-line page
CHECKOUT = "checkout:"  # launcher names "checkout:DIR": `streamlit run DIR/app.py` in DIR (another checkout)
REFERENCE_APP = """import streamlit as st

st.markdown('<svg class="fv-reference" width="240" height="120"><rect width="240" height="120" fill="#56B4E9"/></svg>',
            unsafe_allow_html=True)
"""
REFERENCE_CHART = "svg.fv-reference"
HEALTH_POLL_S = 0.02  # seconds between health polls: small next to the ~1 s the server needs to start
START_TIMEOUT_S = 120  # seconds a server may take to answer /_stcore/health on a busy machine
CHART_TIMEOUT_MS = 120_000  # ms the first chart may take (the first script run imports torch)
VIEWPORT = {"width": 1440, "height": 900}  # the classroom laptop the README's screenshots use


# Stamps, in the browser's clock (ms since the epoch, the same clock as time.time() on this machine), the moment each
# moment first happens: window.fvAt[name]. A moment is [selector, also]: some element matching the selector is drawn
# (it has a size and is visible), and, where `also` is a selector, an element matching that exists too.
STAMPS = """(moments) => {
  const at = window.fvAt = {};
  const drawn = (el) => el.getBoundingClientRect().width > 0 && getComputedStyle(el).visibility === "visible";
  const look = () => {
    for (const [name, [sel, also]] of Object.entries(moments)) {
      if (name in at) continue;
      if ([...document.querySelectorAll(sel)].some(drawn) && (!also || document.querySelector(also))) {
        at[name] = Date.now();
      }
    }
  };
  new MutationObserver(look).observe(document, {subtree: true, childList: true, attributes: true});
}"""


@dataclass
class Cold:
    launcher: str  # "" = `streamlit run app.py`; REFERENCE; CHECKOUT + a directory; else the launcher's path
    health_s: float
    connected_s: float
    chart_s: float
    page_map_s: float
    play_s: float
    idle_s: float
    plotly_s: float


def server_argv(launcher: str, port: int, importtime: bool, reference: Path) -> list[str]:
    """The command that starts the dashboard (or the reference page) on 127.0.0.1:port (same flags as the tests' and
    the load test's)."""
    flags = ["--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
             "--browser.gatherUsageStats", "false"]
    py = [sys.executable, *(["-X", "importtime"] if importtime else [])]
    if launcher == REFERENCE:
        return [*py, "-m", "streamlit", "run", str(reference), *flags]
    if launcher.startswith(CHECKOUT):
        return [*py, "-m", "streamlit", "run", str(Path(launcher[len(CHECKOUT):]) / "app.py"), *flags]
    if launcher:
        return [*py, str(ROOT / launcher), *flags]
    return [*py, "-m", "streamlit", "run", str(ROOT / "app.py"), *flags]


@contextlib.contextmanager
def server(launcher: str, log: Path, reference: Path, importtime: bool = False) -> Iterator[tuple[str, float, float]]:
    """Start a fresh server; yields (url, t0, health_s) with t0 = time.time() just before the spawn."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(log, "w") as out:
        t0, m0 = time.time(), time.monotonic()
        cwd = Path(launcher[len(CHECKOUT):]) if launcher.startswith(CHECKOUT) else ROOT  # its own config and code
        proc = subprocess.Popen(server_argv(launcher, port, importtime, reference), cwd=cwd, stdout=out,
                                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            health_s = wait_health(url, proc, m0)
            yield url, t0, health_s
        finally:
            stop(proc)


def wait_health(url: str, proc: subprocess.Popen, t0: float) -> float:
    while time.monotonic() - t0 < START_TIMEOUT_S:
        with contextlib.suppress(OSError):
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                return time.monotonic() - t0
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode} before /_stcore/health answered")
        time.sleep(HEALTH_POLL_S)
    raise RuntimeError(f"{url}/_stcore/health did not answer within {START_TIMEOUT_S} s")


def moments(reference: bool) -> dict[str, list[str | None]]:
    """What first_chart stamps: [selector, also] per moment (see STAMPS)."""
    if reference:
        return {"connected": [CONNECTED, None], "chart": [REFERENCE_CHART, None], "idle": [REFERENCE_CHART, IDLE]}
    return {"connected": [CONNECTED, None], "chart": [CHART, None], "page_map": [PAGE_MAP, None],
            "play": [PLAY, None], "idle": [IDLE_END, IDLE], "plotly": [PLOTLY, None]}


def first_chart(browser, url: str, t0: float, reference: bool = False) -> dict[str, float]:
    """Open url in a new context; seconds from t0 (time.time()) to "connected", "chart", "page_map", "play" (the map's
    Play control drawn), "idle" (the script run finished with the whole page drawn) and "plotly" (the reference page:
    "connected", "chart" and "idle" only)."""
    selectors = moments(reference)
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.add_init_script(f"({STAMPS})({json.dumps(selectors)})")
        page.goto(url, wait_until="commit")
        page.wait_for_function(f"window.fvAt && Object.keys(window.fvAt).length === {len(selectors)}",
                               timeout=CHART_TIMEOUT_MS)
        stamps = page.evaluate("window.fvAt")
        return {name: ms / 1000 - t0 for name, ms in stamps.items()}
    finally:
        context.close()


def slowest_imports(log: Path, top: int) -> list[tuple[float, str]]:
    """(cumulative seconds, module) of the `top` slowest top-level imports in a `-X importtime` log."""
    rows = []
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line[len("import time:"):].split("|")
        if not name.startswith("  "):  # top level: one space after the bar; each nesting level adds two
            rows.append((int(cumulative) / 1e6, name.rstrip()))
    return sorted(rows, reverse=True)[:top]


def measure(args: argparse.Namespace, browser, tmp: Path) -> tuple[list[Cold], dict[str, list[tuple[float, float]]]]:
    """Cold starts for every launcher (interleaved), then the warm loads on each launcher's last server."""
    colds: list[Cold] = []
    names = [*args.launcher, *(CHECKOUT + str(d) for d in args.checkout), *([REFERENCE] if args.reference else [])]
    warms: dict[str, list[dict[str, float]]] = {name: [] for name in names}  # first_chart's seconds
    reference = tmp / "reference_page.py"
    reference.write_text(REFERENCE_APP)
    for rep in range(args.cold):
        for name in names:  # interleaved, so drift in the machine's load hits every launcher alike
            log = tmp / f"server-{rep}-{len(colds)}.log"
            importtime = args.importtime > 0 and rep == 0
            with server(name, log, reference, importtime) as (url, t0, health_s):
                at = first_chart(browser, url, t0, name == REFERENCE)
                nan = float("nan")
                colds.append(Cold(name, health_s, at["connected"], at["chart"], at.get("page_map", nan),
                                  at.get("play", nan), at["idle"], at.get("plotly", nan)))
                more = "" if name == REFERENCE else (f", the page's own map {at['page_map']:.2f} s, Play "
                                                     f"{at['play']:.2f} s, first plotly chart {at['plotly']:.2f} s")
                print(f"cold {rep + 1}/{args.cold} {name or 'streamlit run'}: health {health_s:.2f} s, "
                      f"first chart {at['chart']:.2f} s, connected {at['connected']:.2f} s, idle {at['idle']:.2f} s"
                      f"{more}", flush=True)
                if rep == args.cold - 1:
                    for _ in range(args.warm):
                        warms[name].append(first_chart(browser, url, time.time(), name == REFERENCE))
            if importtime:
                print(f"  slowest top-level imports of that start ({name or 'streamlit run'}, under -X importtime):")
                for seconds, module in slowest_imports(log, args.importtime):
                    print(f"    {seconds:6.2f} s  {module.strip()}")
    return colds, warms


def report(colds: list[Cold], warms: dict[str, list[dict[str, float]]]) -> None:
    med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
    print("\nmedians (seconds); chart = the first tile map drawn, page map = the one Streamlit draws (the same where "
          "the page has no early copy), play = the map's Play control drawn, idle = the script run finished with the "
          "whole page drawn, plotly = the first plotly chart (the row inspector); reference = a one-SVG Streamlit "
          "page (its chart: that SVG)")
    print(f"{'launcher':>32}  {'health':>6}  {'chart':>6}  {'connected':>9}  {'page map':>8}  {'play':>6}  "
          f"{'idle':>6}  {'plotly':>6}  {'warm chart':>10}  {'warm play':>9}  {'warm idle':>9}  {'warm plotly':>11}")
    for name, warm in warms.items():
        mine = [c for c in colds if c.launcher == name]
        w = lambda key, warm=warm: med([x[key] for x in warm if key in x])  # noqa: E731
        print(f"{name or 'streamlit run app.py':>32}  {med([c.health_s for c in mine]):6.2f}  "
              f"{med([c.chart_s for c in mine]):6.2f}  {med([c.connected_s for c in mine]):9.2f}  "
              f"{med([c.page_map_s for c in mine]):8.2f}  {med([c.play_s for c in mine]):6.2f}  "
              f"{med([c.idle_s for c in mine]):6.2f}  {med([c.plotly_s for c in mine]):6.2f}  {w('chart'):10.2f}  "
              f"{w('play'):9.2f}  {w('idle'):9.2f}  {w('plotly'):11.2f}")
    for name in warms:
        mine = [c for c in colds if c.launcher == name]
        charts = sorted(c.chart_s for c in mine)
        after = med([c.chart_s - c.health_s for c in mine])  # the page's share, without the server's start
        print(f"{name or 'streamlit run app.py':>32}  cold chart over {len(charts)} starts: "
              f"{charts[0]:.2f}-{charts[-1]:.2f} s; {after:.2f} s after health answered (median)")
    if REFERENCE in warms:
        ratios(colds, warms)


def ratios(colds: list[Cold], warms: dict[str, list[dict[str, float]]]) -> None:
    """Each launcher's medians as multiples of the one-line page's: its chart and Play against the reference's first
    element, its idle against the reference's idle; cold from the spawn, warm from the page load."""
    med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
    ref = [c for c in colds if c.launcher == REFERENCE]
    ref_chart, ref_idle = med([c.chart_s for c in ref]), med([c.idle_s for c in ref])
    warm_chart = med([x["chart"] for x in warms[REFERENCE]])
    warm_idle = med([x["idle"] for x in warms[REFERENCE]])
    print("\nas multiples of the one-line page (chart and play: of its first element; idle: of its idle)")
    print(f"{'launcher':>32}  {'cold chart':>10}  {'cold play':>9}  {'cold idle':>9}  {'warm chart':>10}  "
          f"{'warm play':>9}  {'warm idle':>9}")
    for name, warm in warms.items():
        if name == REFERENCE:
            continue
        mine = [c for c in colds if c.launcher == name]
        w = lambda key, warm=warm: med([x[key] for x in warm if key in x])  # noqa: E731
        print(f"{name or 'streamlit run app.py':>32}  {med([c.chart_s for c in mine]) / ref_chart:9.2f}x  "
              f"{med([c.play_s for c in mine]) / ref_chart:8.2f}x  {med([c.idle_s for c in mine]) / ref_idle:8.2f}x  "
              f"{w('chart') / warm_chart:9.2f}x  {w('play') / warm_chart:8.2f}x  {w('idle') / warm_idle:8.2f}x")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cold", type=int, default=3, help="cold server starts per launcher (default 3)")
    p.add_argument("--warm", type=int, default=3, help="warm page loads on the last cold server (default 3)")
    p.add_argument("--launcher", action="append", default=None,
                   help="a Python script that starts the server with streamlit's flags, relative to the repository; "
                        "'' is `streamlit run app.py` (the default); repeat to compare")
    p.add_argument("--checkout", action="append", default=[], type=lambda d: Path(d).resolve(), metavar="DIR",
                   help="also start DIR/app.py, another checkout of this repository (e.g. a git worktree of an "
                        "earlier commit), interleaved; repeat to compare several")
    p.add_argument("--reference", action="store_true",
                   help="also start a one-line Streamlit page cold, interleaved: Streamlit's own floor here")
    p.add_argument("--no-compile", action="store_true",
                   help="do not compile flashviz/ to bytecode first (see above)")
    p.add_argument("--importtime", type=int, default=0, metavar="K",
                   help="run the first cold start under -X importtime and print its K slowest imports")
    args = p.parse_args(argv)
    args.launcher = args.launcher or [""]
    if args.cold < 1 or args.warm < 0:
        p.error(f"--cold must be >= 1 and --warm >= 0, got --cold {args.cold} --warm {args.warm}")
    for name in args.launcher:
        if name and not (ROOT / name).is_file():
            p.error(f"--launcher {name!r} is not a file under {ROOT}; pass '' for `streamlit run app.py`")
    for d in args.checkout:
        if not (d / "app.py").is_file() or not (d / "flashviz").is_dir():
            p.error(f"--checkout {d}: no app.py and flashviz/ there; pass a checkout of this repository")
    if not args.no_compile:
        for d in [ROOT, *args.checkout]:
            subprocess.run([sys.executable, "-m", "compileall", "-q", "flashviz"], cwd=d, check=True)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="first-chart-") as tmp:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            colds, warms = measure(args, browser, Path(tmp))
        finally:
            browser.close()
    report(colds, warms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
