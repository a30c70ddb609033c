"""Presenter mode: the dashboard plays a lesson (flashviz.lesson.steps) step by step, for a class watching a projector.

`?lesson=intro` opens its first step, `?lesson=intro&step=k` step k. While presenting, the sidebar starts collapsed
(the view gets the width) and the row of views is hidden (the steps pick the view), the step's claim stands in a
callout above the view with the step's number and title, and Previous / Next move through the steps. Opening a step
loads its settings into every widget, as a classroom preset does (every setting at the step's link, the rest at their
defaults; the machine's device and threads kept), and opens its view; the class may change anything afterwards, and
"This step's settings" brings the step back. The URL keeps `lesson` and `step` next to the settings
(flashviz.app.sidebar.sync_url), so a copied link reopens the same step; a hostile `lesson` or `step` is repaired with
the dashboard's usual notice (flashviz.app.query.parse_lesson). "Leave the lesson" drops both from the URL and keeps
the settings on screen.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from flashviz.app.query import parse_lesson
from flashviz.app.registry import LABELS
from flashviz.app.state import Env, Settings
from flashviz.app.widgets import read_state, write_state
from flashviz.lesson.steps import LESSON_KEY, LESSONS, STEP_KEY, Lesson, step_settings

PRESENTING_KEY = "_fv_presenting"  # session state: (lesson slug, step k) while presenting, else None
PREV_KEY, NEXT_KEY, RESET_KEY, LEAVE_KEY = "lesson_prev", "lesson_next", "lesson_reset", "lesson_leave"  # buttons
STEP_KEEPS = ("device", "threads")  # what opening a step leaves alone: what this machine has
NEXT_SHORTCUT, PREV_SHORTCUT = "PageDown", "PageUp"  # what a presenter's clicker sends


def lesson_counts() -> dict[str, int]:
    """Every lesson's slug and number of steps, for the link parser."""
    return {slug: len(lesson.steps) for slug, lesson in LESSONS.items()}


def open_from_url(params: dict[str, list[str]]) -> tuple[dict[str, object], list[str]]:
    """A session's first run: start presenting the lesson and step the link asks for (repaired), and return the
    parameters for the URL parser: the step's settings under the link's own (a copied link reproduces what was on
    screen), without `lesson` and `step`; and the notices about what was repaired."""
    slug, k, notices = parse_lesson(params, lesson_counts())
    rest = {key: value for key, value in params.items() if key not in (LESSON_KEY, STEP_KEY)}
    st.session_state[PRESENTING_KEY] = None if slug is None else (slug, k)
    if slug is None:
        return rest, notices
    return {**LESSONS[slug].steps[k - 1].query, **rest}, notices


def presenting() -> tuple[Lesson, int] | None:
    """The lesson and step k being presented, or None."""
    at = st.session_state.get(PRESENTING_KEY)
    return None if at is None else (LESSONS[at[0]], at[1])


def lesson_query() -> dict[str, str]:
    """The URL's presenter keys while presenting (`lesson`, `step`), else none."""
    at = presenting()
    return {} if at is None else {LESSON_KEY: at[0].slug, STEP_KEY: str(at[1])}


def _open_step(env: Env, slug: str, k: int) -> None:
    """Button callback: load step k's settings into the widgets (its view included) and present it."""
    kept = read_state(env)
    write_state(replace(step_settings(LESSONS[slug].steps[k - 1], env), **{key: getattr(kept, key)
                                                                          for key in STEP_KEEPS}))
    st.session_state[PRESENTING_KEY] = (slug, k)


def _leave() -> None:
    """Button callback: stop presenting; the settings on screen stay."""
    st.session_state[PRESENTING_KEY] = None


def sidebar_state() -> str:
    """The sidebar's initial state for the page config: "collapsed" while presenting (on a session's first run: when
    the link asks for a lesson), else "expanded"."""
    if PRESENTING_KEY in st.session_state:
        return "expanded" if presenting() is None else "collapsed"
    slug, _, _ = parse_lesson({key: st.query_params.get_all(key) for key in st.query_params}, lesson_counts())
    return "expanded" if slug is None else "collapsed"


def presenter_ui(env: Env, settings: Settings) -> None:
    """While presenting, above the view: the step's claim as a callout with its number and title, then Previous /
    Next and what to do there."""
    at = presenting()
    if at is None:
        return
    lesson, k = at
    step, n = lesson.steps[k - 1], len(lesson.steps)
    st.info(f"**Step {k} of {n} · {step.title}.** {step.text}")  # one block: the view starts higher at 720 px
    row = st.container(horizontal=True, vertical_alignment="center", wrap=False)  # no tooltips: they would cover it
    go = {"on_click": _open_step, "width": "content"}
    row.button("◀ Previous", key=PREV_KEY, disabled=k == 1, shortcut=PREV_SHORTCUT, args=(env, lesson.slug, k - 1),
               **go)
    row.button("Next ▶", key=NEXT_KEY, type="primary", disabled=k == n, shortcut=NEXT_SHORTCUT,
               args=(env, lesson.slug, k + 1), **go)
    row.button("↺ This step's settings", key=RESET_KEY, args=(env, lesson.slug, k), **go)
    row.button("✕ Leave the lesson", key=LEAVE_KEY, on_click=_leave)
    where = ("" if settings.view == step.view else  # a link with its own `view` opened another one
             f" This step is on **{LABELS[step.view]}**: ↺ This step's settings opens it.")
    row.caption(f"**Try:** {step.action}{where}")
