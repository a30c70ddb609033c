"""Jobs for the timing worker's tests: module-level functions the worker imports by name (tests/ is on its path)."""

from __future__ import annotations

import os
import subprocess
import sys
import time


def steps(n: int, seconds: float, progress=None) -> list[int]:
    """Report n steps, `seconds` apart, the last with a partial result; return the worker's pid and n."""
    for i in range(n):
        progress(i, n, f"step {i}", [i] if i == n - 1 else None)
        time.sleep(seconds)
    return [os.getpid(), n]


def silent(seconds: float, progress=None) -> str:
    """Sleep without a single progress report (a long kernel call): only a forced stop ends it early."""
    time.sleep(seconds)
    return "slept"


def with_child(pid_file: str, progress=None) -> None:
    """Start a child process (as the ring's ranks are), write its pid, then wait without reporting."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(pid_file, "w") as f:
        f.write(str(child.pid))
    time.sleep(600)


def die(code: int, progress=None) -> None:
    """End the worker process at once, as the out-of-memory killer would."""
    os._exit(code)


def fail(message: str, progress=None) -> None:
    raise ValueError(message)


def modules(progress=None) -> list[str]:
    """The modules the worker has imported."""
    return sorted(sys.modules)
