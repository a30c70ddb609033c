"""A link's number that is only far too large is told so: `n=99999999999999999999` is a whole number past every
bound, clamped like any other out-of-range value, not "not a whole number" (flashviz.app.query). The wording of the
links recorded earlier (tests/data/links_today.json, tests/test_links.py) is kept: numbers of up to 12 digits say
"outside lo..hi", and a run of more digits than a 64-bit integer has is still no number."""

from __future__ import annotations

import pytest

from flashviz.app.query import parse_query
from flashviz.app.state import Settings
from flashviz.kit.sizes import N_MAX

DEFAULT = Settings()


@pytest.mark.parametrize("raw, n, size", [("99999999999999999999", N_MAX, "too large"),
                                          ("+1000000000000", N_MAX, "too large"),
                                          ("-99999999999999999999", 1, "too small")])
def test_a_huge_n_is_clamped_and_called_too_large(raw, n, size):
    settings, notices = parse_query({"n": raw})
    assert settings.n == n
    assert notices == [f"`n={raw.lstrip('+')}` is {size} (allowed 1..{N_MAX}); clamped to {n}."]
    assert "whole number" not in notices[0]


def test_huge_entries_of_lists_and_windows_are_clamped_too():
    settings, notices = parse_query({"ns": "64,99999999999999999999", "window": "99999999999999999999,0"})
    assert settings.ns == (64, N_MAX) and settings.window == (N_MAX, 0)
    assert len(notices) == 2 and all("is too large" in note and "clamped" in note for note in notices)


def test_the_recorded_wordings_stay():
    _, small = parse_query({"n": "100000"})
    assert small == [f"`n=100000` is outside 1..{N_MAX}; clamped to {N_MAX}."]
    settings, longer = parse_query({"n": "9" * 23})  # more digits than any 64-bit integer: no number
    assert settings.n == DEFAULT.n
    assert longer == [f"`n={'9' * 23}` is not a whole number; kept the default {DEFAULT.n}."]
