"""Shared fixtures: the dashboard under streamlit.testing's AppTest, and a real `streamlit run` server.

The server fixture is benchmarks/load.py's own_server: `streamlit run app.py` on a free loopback port, waited for on
/_stcore/health and always stopped (terminate, then kill), whatever the test did.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# CI explores the same examples every run (a red CI is then always reproducible); local runs keep exploring anew.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"  # the page
APP_TIMEOUT_S = 240  # one AppTest script run; generous because the CI machine may be shared and slow


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
