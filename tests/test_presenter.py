"""Presenter mode (flashviz.app.presenter) in AppTest: `?lesson=intro` opens the lesson's first step as a slide (its
claim, its numbers, its picture; no view under it) and asks for the sidebar collapsed; Next / Previous move, load each
step's settings and open its view; Explore this view opens the step's full view under its claim and Back to the slide
returns; the URL keeps the step, so a link reopens it; the class may change settings meanwhile (the slide then says
its numbers are not the claim's); a hostile `lesson` or `step` is repaired with the dashboard's notice; Leave drops the
lesson from the URL and keeps the settings on screen. That each slide's numbers are its check's is in
tests/test_lesson.py; that a slide fits 1280 x 720, in tests/test_browser_lesson.py."""

from __future__ import annotations

import pytest
import streamlit

from flashviz.app.presenter import (
    EXPLORE_KEY,
    EXPLORING_KEY,
    LEAVE_KEY,
    NEXT_ARROWS,
    NEXT_KEY,
    NEXT_SHORTCUT,
    PRESENTING_KEY,
    PREV_ARROWS,
    PREV_KEY,
    PREV_SHORTCUT,
    RESET_KEY,
    SLIDE_KEY,
)
from flashviz.app.registry import LABELS
from flashviz.lesson.steps import INTRO, step_settings
from tests._apptest import assert_clean, tiles_computed
from tests._numbers import shows, stated

STEPS = INTRO.steps
NOTICE = "**Some settings in this link were adjusted:**"


def callouts(at) -> list[str]:
    """The presenter's callouts on the page (the step's claim, with its number and title)."""
    return [box.value for box in at.info if box.value.startswith("**Step ")]


def assert_presents(at, k: int, *, slide: bool = True, changed: frozenset[str] = frozenset()) -> None:
    """The page presents step k: its claim, the URL's step, its view and its settings in the widgets; as its slide
    (the step's numbers as metrics and one picture, no view), or its full view."""
    step = STEPS[k - 1]
    assert_clean(at)
    (callout,) = callouts(at)
    assert shows(stated(callout, r"\*\*Step"), k) and shows(stated(callout, r"\*\*Step \d+ of"), len(STEPS))
    assert callout.startswith("**Step ") and f" · {step.title}.** " in callout and callout.endswith(step.text)
    assert (at.query_params["lesson"], at.query_params["step"]) == (INTRO.slug, str(k))
    assert at.session_state["view"] == LABELS[step.view]  # the open view
    want = step_settings(step).to_query()
    assert {key: at.query_params[key] for key in step.settings} == dict(step.settings)
    kept = {"threads", *changed} | ({"row"} if not slide else set())  # the view's automatic row writes its pick
    assert {key: at.query_params[key] for key in want if key not in kept} == \
        {key: value for key, value in want.items() if key not in kept}  # every other setting at its default
    assert bool(at.session_state[EXPLORING_KEY]) is not slide
    if slide:
        assert [(m.label, m.value) for m in at.metric] == step.figures(step.stated)
        assert len(at.get("plotly_chart")) == 1 and not at.button(key=EXPLORE_KEY).disabled


def notices(at) -> str:
    (box,) = [w.value for w in at.warning if w.value.startswith(NOTICE)]
    return box


@pytest.fixture
def page_configs(monkeypatch) -> list[dict]:
    """Every st.set_page_config call the page makes, by keyword."""
    calls, real = [], streamlit.set_page_config

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(streamlit, "set_page_config", spy)
    return calls


def test_a_lesson_link_opens_step_1_with_its_claim_and_asks_for_the_sidebar_collapsed(make_app, page_configs):
    at = make_app(lesson="intro")
    assert_presents(at, 1)
    assert [c.get("initial_sidebar_state") for c in page_configs] == ["collapsed"]
    assert at.button(key=PREV_KEY).disabled and not at.button(key=NEXT_KEY).disabled
    assert not any(w.value.startswith(NOTICE) for w in at.warning)


def test_a_plain_link_presents_nothing_and_keeps_the_sidebar_expanded(make_app, page_configs):
    at = make_app(view="io")
    assert_clean(at)
    assert callouts(at) == [] and "lesson" not in at.query_params and "step" not in at.query_params
    assert [c.get("initial_sidebar_state") for c in page_configs] == ["expanded"]


def test_next_and_previous_move_load_each_steps_settings_and_open_its_view(make_app):
    at = make_app(lesson="intro")
    for k in range(2, len(STEPS) + 1):
        at.button(key=NEXT_KEY).click().run()
        assert_presents(at, k)
    assert at.button(key=NEXT_KEY).disabled
    at.button(key=PREV_KEY).click().run()
    assert_presents(at, len(STEPS) - 1)


def test_the_arrow_keys_move_steps_as_pageup_and_pagedown_do(make_app):
    """Right / Down are Next's keys and Left / Up Previous's, next to PageDown / PageUp: one button per key (a Streamlit
    button takes one shortcut), each doing what Next or Previous does, and disabled where it is."""
    at = make_app(lesson="intro")
    shortcuts = {key: at.button(key=key).proto.shortcut for key in (NEXT_KEY, PREV_KEY, *NEXT_ARROWS, *PREV_ARROWS)}
    assert shortcuts == {NEXT_KEY: NEXT_SHORTCUT.lower(), PREV_KEY: PREV_SHORTCUT.lower(), "lesson_next_right": "right",
                         "lesson_next_down": "down", "lesson_prev_left": "left", "lesson_prev_up": "up"}
    assert all(at.button(key=key).disabled for key in (PREV_KEY, *PREV_ARROWS))  # step 1: nothing before it
    k = 1
    for key in NEXT_ARROWS:  # Right, then Down
        at.button(key=key).click().run()
        k += 1
        assert_presents(at, k)
    for key in PREV_ARROWS:  # Left, then Up
        at.button(key=key).click().run()
        k -= 1
        assert_presents(at, k)
    last = make_app(lesson="intro", step=str(len(STEPS)))
    assert all(last.button(key=key).disabled for key in (NEXT_KEY, *NEXT_ARROWS))
    last.button(key="lesson_prev_up").click().run()
    assert_presents(last, len(STEPS) - 1)


def test_a_step_link_opens_that_step(make_app):
    assert_presents(make_app(lesson="intro", step="5"), 5)


def test_the_class_may_change_settings_and_next_loads_the_next_steps(make_app):
    at = make_app(lesson="intro", step="5")  # IO model at N = 4096
    at.select_slider(key="n").set_value(1024).run()
    assert_clean(at)
    assert at.query_params["n"] == "1024" and at.query_params["step"] == "5" and len(callouts(at)) == 1
    reopened = make_app(**dict(at.query_params))  # the URL now: the same step, with the class's change
    assert reopened.session_state[PRESENTING_KEY] == (INTRO.slug, 5) and reopened.session_state["n"] == 1024
    at.button(key=RESET_KEY).click().run()  # This step's settings: back to the step
    assert_presents(at, 5)
    at.select_slider(key="n").set_value(1024).run()
    at.button(key=NEXT_KEY).click().run()
    assert_presents(at, 6)  # Roofline at N = 4096, Br = Bc = 128


def test_a_step_keeps_the_machines_threads(make_app):
    at = make_app(lesson="intro", step="7", threads="1")  # a link's own settings win over the step's
    assert at.session_state["threads"] == 1
    at.button(key=NEXT_KEY).click().run()
    assert_clean(at)
    assert at.session_state["threads"] == 1 and at.query_params["threads"] == "1"


def test_explore_opens_the_steps_full_view_and_back_returns_to_its_slide(make_app):
    k = next(k for k, step in enumerate(STEPS, 1) if step.check == "causal_halves")
    at = make_app(lesson="intro", step=str(k))
    assert_presents(at, k)
    assert tiles_computed(at) == []  # the slide draws no view under it
    at.button(key=EXPLORE_KEY).click().run()
    assert_presents(at, k, slide=False)
    assert tiles_computed(at) == [STEPS[k - 1].stated["computed"]]  # How it works, under the step's claim
    assert {m.value for m in at.metric} >= {STEPS[k - 1].stated["traffic"]}
    at.button(key=SLIDE_KEY).click().run()
    assert_presents(at, k, changed=frozenset({"row"}))  # the row the full view picked stays
    at.button(key=EXPLORE_KEY).click().run()
    at.button(key=NEXT_KEY).click().run()  # from the full view, the next step opens as its slide
    assert_presents(at, k + 1)


def test_a_slide_at_changed_settings_says_its_numbers_are_not_the_claims(make_app):
    k = next(k for k, step in enumerate(STEPS, 1) if step.check == "causal_halves")
    at = make_app(lesson="intro", step=str(k))
    at.toggle(key="causal").set_value(False).run()  # the sidebar's toggle, as a student asks
    assert_clean(at)
    (callout,) = callouts(at)
    assert "At the settings on screen: the mask is not causal alone" in callout
    assert [m.value for m in at.metric][:2] == ["256 of 256", "0"]  # the check's numbers there, not the claim's
    at.button(key=RESET_KEY).click().run()
    assert_presents(at, k)


def test_the_steps_view_is_named_when_another_view_is_open(make_app):
    at = make_app(lesson="intro", step="3", view="io")  # a link's own view wins over the step's
    assert_clean(at)
    at.button(key=EXPLORE_KEY).click().run()  # the slide is the step's; its full view is the link's
    assert_clean(at)
    assert at.session_state["view"] == LABELS["io"]
    (caption,) = [c.value for c in at.caption if c.value.startswith("**Try:**")]
    assert f"This step is on **{LABELS['how']}**: ↺ This step's settings opens it." in caption
    assert len(callouts(at)) == 1
    at.button(key=RESET_KEY).click().run()  # and that button does open it
    assert_clean(at)
    assert at.session_state["view"] == LABELS["how"]


def test_leave_drops_the_lesson_from_the_url_and_keeps_the_settings(make_app, page_configs):
    at = make_app(lesson="intro", step="6")
    at.button(key=LEAVE_KEY).click().run()
    assert_clean(at)
    assert callouts(at) == [] and "lesson" not in at.query_params and "step" not in at.query_params
    assert at.query_params["view"] == "roof" and at.query_params["n"] == "4096" and at.query_params["br"] == "128"
    assert page_configs[-1]["initial_sidebar_state"] == "expanded"


@pytest.mark.parametrize(("query", "k", "notice"), [
    ({"step": "0"}, 1, f"`step=0` is outside 1..{len(STEPS)}; clamped to 1."),
    ({"step": "99"}, len(STEPS), f"`step=99` is outside 1..{len(STEPS)}; clamped to {len(STEPS)}."),
    ({"step": "x"}, 1, "`step=x` is not a whole number; kept the default 1."),
    ({"step": "-3"}, 1, f"`step=-3` is outside 1..{len(STEPS)}; clamped to 1."),
    ({"lesson": "nope", "step": "2"}, 2, "`lesson=nope` is not one of intro; kept intro."),
    ({"lesson": ["intro", "intro"], "step": "4"}, 4, "`lesson` appears 2 times in the link; using the last value."),
])
def test_a_hostile_lesson_or_step_is_repaired_with_a_notice(make_app, query, k, notice):
    at = make_app(**{"lesson": "intro", **query})
    assert_presents(at, k)
    assert f"- {notice}" in notices(at)


def test_a_step_without_a_lesson_is_ignored_with_a_notice(make_app):
    at = make_app(step="3", n="256")
    assert_clean(at)
    assert callouts(at) == [] and "step" not in at.query_params and at.query_params["n"] == "256"
    assert "- `step=3` needs a lesson (`lesson=intro`); ignored it." in notices(at)
