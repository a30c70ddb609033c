"""Shared fixtures: the dashboard under streamlit.testing's AppTest, and a real `streamlit run` server.

The server fixture starts `streamlit run app.py` on a free port, waits for /_stcore/health and always stops the
process it started (terminate, then kill), whatever the test did.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# CI explores the same examples every run (a red CI is then always reproducible); local runs keep exploring anew.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
APP_TIMEOUT_S = 240  # one AppTest script run; generous because the CI machine may be shared and slow
SERVER_START_S = 120  # seconds to wait for /_stcore/health


@pytest.fixture
def make_app() -> Callable[..., object]:
    """make_app(**query) -> an AppTest of app.py with those query parameters, already run once."""
    from streamlit.testing.v1 import AppTest

    def make(**query: str | list[str]) -> AppTest:
        at = AppTest.from_file(str(APP), default_timeout=APP_TIMEOUT_S)
        at.query_params.update(query)
        return at.run()

    return make


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def streamlit_server() -> Iterator[str]:
    """Base URL of a dashboard served by `streamlit run` for this test session."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(APP), "--server.port", str(port), "--server.headless",
             "true", "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + SERVER_START_S
            while True:
                try:
                    if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                        break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail(f"streamlit did not start (exit code {proc.poll()}):\n{log.read()[-3000:]}")
                time.sleep(0.3)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
