"""What a view's claim function returns: the numbers a sentence states, computed at some settings, and whether the
sentence holds there. Each view's `claims.py` returns these; the lesson (flashviz.lesson) confirms a step's claim
through the claim function of the view the step opens. Torch-free."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Result:
    """What a step's check found at the step's settings."""

    values: Mapping[str, Any]  # the numbers the claim states, by its template's field names (and any others found)
    holds: bool  # whether the claim is true at these numbers
    why: str = ""  # what is not true, when it does not hold

    @classmethod
    def of(cls, values: Mapping[str, Any], failures: Mapping[str, bool]) -> Result:
        """A Result whose claim holds when none of the named failures happened (`why` names those that did).

        Example:
            >>> r = Result.of({"tiles": 16}, {"no tile is skipped": True, "a tile is off the grid": False})
            >>> r.holds, r.why
            (False, 'no tile is skipped')
        """
        why = "; ".join(name for name, failed in failures.items() if failed)
        return cls(values, not why, why)
