"""A configuration that did not run is named with its tile size, says why, and names only controls that exist on the
view where it is shown (by their labels, read from the registry and the settings' declarations)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from flashviz.app.registry import VIEWS, view_of
from flashviz.app.state import spec_of
from flashviz.kit import jobs
from flashviz.kit.drawing import FIXES, MEMORY, TIME_BUDGET, advice, cause_of, not_run_lines
from flashviz.measure import jobs as measure_jobs
from flashviz.measure.guards import TIME_BUDGET_STATUS, TimeBudget, guard
from flashviz.measure.impls import RunConfig
from flashviz.vocab import FLASH2, NAIVE, NOT_RUN, OK
from tests._apptest import RUN_BUTTON, TINY, assert_clean

NOT_RUN_VIEWS = {"bench": (), "block": ("reps", "sure"), "train": ("ns",), "correct": (), "roof": ()}  # + drawn


def named(text: str) -> list[str]:
    """The control labels an advice names (each in bold)."""
    return re.findall(r"\*\*(.+?)\*\*", text)


def labels_of(view, here=()) -> set[str]:
    """The labels of the controls a view shows: the sidebar's it reads, its own, and others' it draws or reads."""
    return {spec_of(name).label for name in (*view.sidebar, *view.own, *view.borrows, *here)}


def test_the_library_statuses_are_the_causes_the_views_advise_on():
    assert f"{NOT_RUN}: {TIME_BUDGET}" == TIME_BUDGET_STATUS
    assert cause_of(TimeBudget(0.0).status()) == TIME_BUDGET
    big = RunConfig(n=4096, d=64, block_q=64, block_k=64, causal=False, window=None, batch=1, heads=4,
                    dtype="float32", device="cpu", mode="forward")
    for impl in (NAIVE, FLASH2):  # naive's scores, and the inputs every kernel needs
        status = guard(impl, big, budget=1 << 20)
        assert status is not None and cause_of(status) == MEMORY, status
    assert cause_of(f"{NOT_RUN}: RuntimeError: boom") is None


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: v.slug)
@pytest.mark.parametrize("cause", sorted(FIXES))
def test_every_advice_names_controls_the_view_has(view, cause):
    here = NOT_RUN_VIEWS.get(view.slug, ())
    text = advice(view.settings, cause, here)
    assert set(named(text)) <= labels_of(view, here), (view.slug, text)
    if view.slug in NOT_RUN_VIEWS:  # every view that lists rows not run says what would let them run
        assert named(text), (view.slug, cause)
    for label in named(text):  # a borrowed control not drawn here says which view draws it
        (name,) = [n for n in dict.fromkeys((*view.sidebar, *view.own, *view.borrows, *here))
                   if spec_of(n).label == label]
        if name in view.borrows and name not in here:
            assert "on the Benchmark view" in text.split(f"**{label}**")[1].split(",")[0]


def rows(block: int, status: str) -> pd.DataFrame:
    return pd.DataFrame([dict(impl=FLASH2, N=512, d=64, block_q=block, block_k=block, status=status),
                         dict(impl=NAIVE, N=512, d=64, block_q=block, block_k=block, status=OK)])


def test_a_row_not_run_is_named_with_its_tile_size_and_its_cause():
    (line,) = not_run_lines(rows(64, TimeBudget(120.0).status()), view_of("block").settings, ("reps", "sure"))
    assert line.startswith("**FA2 at 64 × 64 tiles, N = 512, d = 64**: not run, the run's time budget was used up")
    assert "raise the time budget" not in line  # the library's advice names no control of the view
    assert named(line)[1:] == ["Block sizes Br = Bc", "Repeats", "Repeat until sure"]


def widget_labels(at) -> set[str]:
    """Every widget label on the page as drawn (main area and sidebar)."""
    kinds = ("multiselect", "slider", "select_slider", "toggle", "checkbox", "number_input", "selectbox", "radio")
    return {w.label for kind in kinds for w in getattr(at, kind)}


def test_block_size_names_each_tile_size_not_run_and_a_control_drawn_on_the_page(make_app, monkeypatch):
    real_blocks, real_sweep = measure_jobs.run_block_sweep, measure_jobs.run_sweep

    def blocks(*a, **k):  # the largest tile size stopped by the time budget, as the sweep stops it
        df = real_blocks(*a, **k)
        df.loc[df["block_q"] == df["block_q"].max(), "status"] = TimeBudget(5.0).status()
        return df

    monkeypatch.setattr(measure_jobs, "run_block_sweep", blocks)
    monkeypatch.setattr(measure_jobs, "run_sweep", lambda *a, **k: real_sweep(*a, **{**k, "time_budget_s": 0.0}))
    jobs.block_sweep.clear()
    at = make_app(**TINY, view="block")
    at.button(key=RUN_BUTTON["block"]).click().run()
    assert_clean(at)
    (warning,) = [w.value for w in at.warning if "did not run" in w.value]
    lines = [x for x in warning.split("\n") if x.startswith("- ")]
    largest = max(int(b) for b in TINY["blocks"].split(","))
    assert {x.split("**")[1] for x in lines} == {f"FA1 at {largest} × {largest} tiles, N = 128, d = 16",
                                                 f"FA2 at {largest} × {largest} tiles, N = 128, d = 16",
                                                 "naive at N = 128, d = 16", "SDPA at N = 128, d = 16"}
    drawn = widget_labels(at)
    for line in lines:
        controls = named(line)[1:]
        assert controls and set(controls) <= drawn, (line, drawn)
    jobs.block_sweep.clear()
