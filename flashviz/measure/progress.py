"""Progress reports of long measurements, and how a caller stops one: the callback raises.

A measurement that takes seconds (a timing run, a sweep) calls `progress(done, total, label)` between its calls:
`done` of `total` steps are finished and `label` says what comes next. The caller draws a progress bar from it and
cancels the run by raising from the callback (the dashboard raises `Cancelled` once its Cancel button was pressed):
the exception leaves the measurement at its next report, so nothing half-measured is returned or cached.

Torch-free: the dashboard imports `Cancelled` from here without importing the kernels.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[int, int, str], None]  # progress(done, total, label): done of total steps finished, label next


class Cancelled(Exception):
    """Raised by a progress callback to stop the measurement that calls it (e.g. after the user pressed Cancel)."""


def stage(progress: Progress | None, start: int, total: int, prefix: str = "") -> Progress | None:
    """The progress callback of one stage of a run: the stage's own (done, n, label) reported as (start + done,
    total, prefix + label), so that several stages move one progress bar from 0 to total.

    Args:
        progress: the run's callback, or None (then None: nothing to report).
        start: steps of the run finished before this stage.  total: steps of the whole run.
        prefix: put before the stage's labels, e.g. "timing: ".
    Returns:
        A callback with progress's signature, or None.

    Example:
        >>> seen = []
        >>> report = stage(lambda *a: seen.append(a), 3, 10, "timing: ")
        >>> report(2, 5, "repeat 1 of 1: masked")
        >>> seen
        [(5, 10, 'timing: repeat 1 of 1: masked')]
    """
    if progress is None:
        return None

    def report(done: int, n: int, label: str) -> None:
        progress(start + done, total, prefix + label)

    return report
