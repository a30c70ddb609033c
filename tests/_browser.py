"""What the browser tests share: where their screenshots go and how they wait for a script run to be drawn.

The `browser` fixture itself (Debian's Chromium under playwright) is in tests/conftest.py.
"""

from __future__ import annotations

from pathlib import Path

from load import IDLE  # benchmarks/ is on pytest's pythonpath (pyproject.toml)

SHOTS = Path(__file__).resolve().parent.parent / "artifacts" / "screenshots"  # what the tests saw, to look at
LOAD_MS = 180_000  # the first load imports torch in the server: slow on a busy 2-core machine


def settle(page, timeout_ms: int = LOAD_MS) -> None:
    """Wait until the script run has finished and the browser has drawn it."""
    page.wait_for_timeout(300)
    page.wait_for_selector(IDLE, timeout=timeout_ms)
    page.wait_for_timeout(1200)
