"""Shared fixtures: the dashboard under streamlit.testing's AppTest, a real `streamlit run` server, Debian's Chromium
driven by playwright (`browser`), and fresh Streamlit caches for every test.

The server fixture is benchmarks/load.py's own_server: `streamlit run app.py` on a free loopback port, waited for on
/_stcore/health and always stopped (terminate, then kill), whatever the test did.

Hypothesis runs derandomised by default (the "ci" profile): every run, local or CI, draws the same examples, so a red
run is always reproducible by running it again. `FLASHVIZ_HYPOTHESIS=explore` draws new examples each run (and
prints the blob that reproduces a failure); use it to look for new edge cases, then pin what it finds with
@example or a plain test.

Markers (pyproject.toml): `browser` drives a real Chromium, `slow` is long (Docker, the load test, big-N sweeps of
the kernels, long hypothesis runs). `pytest -m "not browser and not slow"` is the fast part of the suite. Every test
of the dashboard is marked `dashboard` here, found by what its module imports (the kit, the views, the shell, the
lesson, Streamlit), so `pytest -m "not browser and not slow and not dashboard"` is the quick check before a commit:
the library's kernels, models and measurements.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile("explore" if os.environ.get("FLASHVIZ_HYPOTHESIS") == "explore" else "ci")

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"  # the page
APP_TIMEOUT_S = 240  # one AppTest script run; generous because the CI machine may be shared and slow
DASHBOARD_PACKAGES = ("app", "kit", "views", "lesson")  # flashviz's dashboard; the rest is the library
DASHBOARD_IMPORT = re.compile(rf"^\s*(from|import) (flashviz\.({'|'.join(DASHBOARD_PACKAGES)})\b"
                              r"|tests\._(apptest|browser)\b|streamlit\b)", re.MULTILINE)


@functools.cache
def is_dashboard(path: Path) -> bool:
    """Whether a test module (or a module whose docstrings run as tests) belongs to the dashboard: a module of the
    dashboard's packages, or a test that imports one of them, the app's test helpers or Streamlit."""
    parts = path.relative_to(ROOT).parts if path.is_relative_to(ROOT) else ()
    if parts[:1] == ("flashviz",):
        return len(parts) > 2 and parts[1] in DASHBOARD_PACKAGES
    return bool(DASHBOARD_IMPORT.search(path.read_text(encoding="utf-8")))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the dashboard's tests `dashboard` (the quick check leaves them out)."""
    for item in items:
        if is_dashboard(Path(str(item.path))):
            item.add_marker(pytest.mark.dashboard)


@pytest.fixture(autouse=True)
def fresh_streamlit_caches() -> None:
    """Clear Streamlit's st.cache_data and st.cache_resource before every test, so that no test passes or fails
    because of what an earlier test left in a cache (a test need not pick "a configuration no other test uses").
    Free for tests that never touch Streamlit: it clears only once streamlit has been imported."""
    st = sys.modules.get("streamlit")
    if st is not None:
        st.cache_data.clear()
        st.cache_resource.clear()


@pytest.fixture(autouse=True)
def inline_timed_runs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard's timed runs in the test's own process (flashviz.kit.lock.WORKER_ENV), so that a test can
    replace what a run calls and AppTest runs start no worker process; `@pytest.mark.real_worker` keeps the real
    timing worker (tests/test_worker.py and the browser tests' server use it)."""
    if request.node.get_closest_marker("real_worker") is None:
        monkeypatch.setenv("FLASHVIZ_TIMING_WORKER", "inline")


@pytest.fixture
def make_app() -> Callable[..., object]:
    """make_app(**query) -> an AppTest of the dashboard page (app.py) with those query parameters, after its first
    run (tests/_apptest.py has the helpers that read it)."""
    from tests._apptest import open_app

    return open_app


@pytest.fixture(scope="session")
def streamlit_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a dashboard served by `streamlit run` for this test session: the same server the load test and
    the README screenshots start (benchmarks/load.py's own_server), stopped afterwards whatever the tests did."""
    from load import own_server  # benchmarks/ is on pytest's pythonpath (pyproject.toml)

    tmp = tmp_path_factory.mktemp("streamlit")
    log = tmp / "server.log"
    try:
        with own_server(tmp / "timing.jsonl", log) as (url, _proc):
            yield url
    except RuntimeError as e:  # raised while starting: the server exited or never answered /_stcore/health
        pytest.fail(f"streamlit did not start: {e}\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Debian's Chromium under playwright (benchmarks/load.py's CHROMIUM and flags), one per test module; skips the
    module where playwright or chromium is missing. Screenshots go to artifacts/screenshots."""

    from load import CHROMIUM_ARGS, chromium_path  # benchmarks/ is on pytest's pythonpath (pyproject.toml)

    from tests._browser import SHOTS

    playwright_api = pytest.importorskip("playwright.sync_api")
    executable = chromium_path()
    if not executable:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield b
        b.close()
