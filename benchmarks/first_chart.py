"""First chart, measured: seconds from a cold `streamlit run app.py` to the first chart drawn in a real browser.

A teacher starts the dashboard and opens it; what they wait for is the first chart. This script measures exactly that
in Debian's headless Chromium (driven by playwright), with the browser already running, as a teacher's would be:

    cold   a fresh server process on a free 127.0.0.1 port per repeat: from just before the process is spawned, until
           /_stcore/health answers (health), the first chart is drawn (chart: the default page's tile map, an SVG the
           server writes, figures/tilemap.py; the copy the server puts in the HTML page itself, flashviz/ui/
           first_page.py, or where a version has none, the dashboard's own), the page's websocket is connected
           (connected), the dashboard's own map is drawn (page map: Streamlit's first script run) and plotly has
           drawn its first chart (plotly: the row inspector below it; plotly.js alone takes seconds to load on a
           small machine, which is why the tile map does not use it). The page is opened as soon as health answers.
           Each moment is stamped in the browser (a MutationObserver; an element counts once it has a size), so
           their order does not matter.
    warm   further page loads on the last cold server, each in a new browser context (a new Streamlit session and an
           empty browser cache, so no widget state is reused, but the server's imports and caches are): from
           page.goto to the first chart, the page's map and the first plotly chart.
    reference (--reference)  the same cold start of a one-line Streamlit page (one small SVG in st.markdown, the
           dashboard's .streamlit/config.toml): what Streamlit itself costs on this machine, the floor under the
           dashboard's figures.

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

from load import CHROMIUM, CHROMIUM_ARGS, CONNECTED, free_port, stop

ROOT = Path(__file__).resolve().parents[1]
CHART = ".fv-tilemap svg.fv-grid"  # the tile map's first panel (figures/tilemap.py): the page's first chart
PAGE_MAP = "#root " + CHART  # the map Streamlit draws (the early copy is outside the app's root element)
PLOTLY = ".js-plotly-plot .main-svg"  # plotly's SVG exists only once plotly.js has drawn the figure
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
# selector first matches an element with a size: window.fvAt[name].
STAMPS = """(selectors) => {
  const at = window.fvAt = {};
  const look = () => {
    for (const [name, sel] of Object.entries(selectors)) {
      if (name in at) continue;
      const el = document.querySelector(sel);
      if (el && el.getBoundingClientRect().width > 0) at[name] = Date.now();
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


def first_chart(browser, url: str, t0: float, reference: bool = False) -> dict[str, float]:
    """Open url in a new context; seconds from t0 (time.time()) to "connected", "chart", "page_map" and "plotly" (the
    reference page: "connected" and "chart" only)."""
    selectors = ({"connected": CONNECTED, "chart": REFERENCE_CHART} if reference else
                 {"connected": CONNECTED, "chart": CHART, "page_map": PAGE_MAP, "plotly": PLOTLY})
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
                                  at.get("plotly", nan)))
                more = "" if name == REFERENCE else (f", the page's own map {at['page_map']:.2f} s, "
                                                     f"first plotly chart {at['plotly']:.2f} s")
                print(f"cold {rep + 1}/{args.cold} {name or 'streamlit run'}: health {health_s:.2f} s, "
                      f"first chart {at['chart']:.2f} s, connected {at['connected']:.2f} s{more}", flush=True)
                if rep == args.cold - 1 and name != REFERENCE:
                    for _ in range(args.warm):
                        warms[name].append(first_chart(browser, url, time.time()))
            if importtime:
                print(f"  slowest top-level imports of that start ({name or 'streamlit run'}, under -X importtime):")
                for seconds, module in slowest_imports(log, args.importtime):
                    print(f"    {seconds:6.2f} s  {module.strip()}")
    return colds, warms


def report(colds: list[Cold], warms: dict[str, list[dict[str, float]]]) -> None:
    print("\nmedians (seconds); chart = the first tile map drawn, page map = the one Streamlit draws (the same where "
          "the page has no early copy), plotly = the first plotly chart (the row inspector); reference = a one-SVG "
          "Streamlit page")
    print(f"{'launcher':>32}  {'health':>7}  {'cold chart':>10}  {'connected':>9}  {'page map':>8}  "
          f"{'cold plotly':>11}  {'warm chart':>10}  {'warm page map':>13}  {'warm plotly':>11}")
    med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
    for name, warm in warms.items():
        mine = [c for c in colds if c.launcher == name]
        print(f"{name or 'streamlit run app.py':>32}  {med([c.health_s for c in mine]):7.2f}  "
              f"{med([c.chart_s for c in mine]):10.2f}  {med([c.connected_s for c in mine]):9.2f}  "
              f"{med([c.page_map_s for c in mine]):8.2f}  {med([c.plotly_s for c in mine]):11.2f}  "
              f"{med([w['chart'] for w in warm]):10.2f}  {med([w['page_map'] for w in warm]):13.2f}  "
              f"{med([w['plotly'] for w in warm]):11.2f}")
    for name in warms:
        mine = [c for c in colds if c.launcher == name]
        charts = sorted(c.chart_s for c in mine)
        after = med([c.chart_s - c.health_s for c in mine])  # the page's share, without the server's start
        print(f"{name or 'streamlit run app.py':>32}  cold chart over {len(charts)} starts: "
              f"{charts[0]:.2f}-{charts[-1]:.2f} s; {after:.2f} s after health answered (median)")


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
