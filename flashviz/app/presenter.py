"""Presenter mode: the dashboard plays a lesson (flashviz.lesson.steps) step by step, for a class watching a projector.

`?lesson=intro` opens its first step, `?lesson=intro&step=k` step k. Each step opens as a slide (flashviz.app.slides):
the step's number, title and claim, the numbers the claim states (metrics, computed by the step's check at the
settings on screen: a check that measures runs as the slide opens, with a spinner that counts the seconds) and the one
picture that proves them, together in a 1280 x 720 window with no scrolling. "Explore this view" leaves the slide for
the step's full view at the step's settings (the claim stays above it), and "Back to the slide" returns. While
presenting, the sidebar starts collapsed and the row of views is hidden (the steps pick the view); Previous / Next
(PageUp / PageDown, a clicker's keys, and the arrow keys: Left / Up back, Right / Down on) move through the steps,
and a step always opens as its slide. It opens at the top unless the page was scrolled by the mouse wheel: Streamlit
keeps a page's scroll across reruns, and only its own padding under a slide can scroll (at most about 160 px); the
public API has no call that scrolls the page, so that offset stays.

Opening a step loads its settings into every widget, as a classroom preset does (every setting at the step's link,
the rest at their defaults; the machine's device and threads kept), and opens its view; the class may change
anything afterwards (the slide then shows the check's numbers at those settings, and says when they are not the
claim's), and "This step's settings" brings the step back. The URL keeps `lesson` and `step` next to the settings
(flashviz.app.sidebar.sync_url), so a copied link reopens the same step; a hostile `lesson` or `step` is repaired with
the dashboard's usual notice (flashviz.app.query.parse_lesson). "Leave the lesson" drops both from the URL and keeps
the settings on screen.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import streamlit as st

from flashviz.app.query import parse_lesson
from flashviz.app.registry import LABELS
from flashviz.app.session import read_state, write_state
from flashviz.app.state import Env, Settings
from flashviz.kit.drawing import show_figure
from flashviz.lesson.steps import LESSON_KEY, LESSONS, STEP_KEY, Lesson, Step, step_settings
from flashviz.views.claim import Result

if TYPE_CHECKING:
    import plotly.graph_objects as go

PRESENTING_KEY = "_fv_presenting"  # session state: (lesson slug, step k) while presenting, else None
EXPLORING_KEY = "_fv_exploring"  # session state: True while the step's full view is open instead of its slide
PREV_KEY, NEXT_KEY, RESET_KEY, LEAVE_KEY = "lesson_prev", "lesson_next", "lesson_reset", "lesson_leave"  # buttons
EXPLORE_KEY, SLIDE_KEY = "lesson_explore", "lesson_slide"  # Explore this view / Back to the slide
SLIDE_COLUMNS = (5, 7)  # the slide's claim and numbers | its picture
STEP_KEEPS = ("device", "threads")  # what opening a step leaves alone: what this machine has
NEXT_SHORTCUT, PREV_SHORTCUT = "PageDown", "PageUp"  # what a presenter's clicker sends
# the arrow keys move steps too: a Streamlit button takes one shortcut, so each arrow is a small button of its own,
# whose face is its key (an empty label shows only the shortcut); a focused slider or box keeps its arrows
NEXT_ARROWS = {"lesson_next_right": "Right", "lesson_next_down": "Down"}  # button key -> shortcut
PREV_ARROWS = {"lesson_prev_left": "Left", "lesson_prev_up": "Up"}
MEASURES = {  # the checks that measure on this machine, and what a slide says while they run
    "memory_growth": "Measuring the peak memory of naive attention, FA1 and FA2 at each N (exact, the allocator's "
                     "events) ...",
}


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
    st.session_state[EXPLORING_KEY] = False  # a link opens its step as the slide
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
    st.session_state[EXPLORING_KEY] = False  # a step opens as its slide


def _leave() -> None:
    """Button callback: stop presenting; the settings on screen stay."""
    st.session_state[PRESENTING_KEY] = None
    st.session_state[EXPLORING_KEY] = False


def _explore(on: bool) -> None:
    """Button callback: open the step's full view (on) or go back to its slide."""
    st.session_state[EXPLORING_KEY] = on


def exploring() -> bool:
    """Whether the step's full view is open (Explore this view) rather than its slide."""
    return presenting() is not None and bool(st.session_state.get(EXPLORING_KEY))


def on_slide() -> bool:
    """Whether the page shows a step's slide (presenting, not exploring): then the page draws no view."""
    return presenting() is not None and not exploring()


def sidebar_state() -> str:
    """The sidebar's initial state for the page config: "collapsed" while presenting (on a session's first run: when
    the link asks for a lesson), else "expanded"."""
    if PRESENTING_KEY in st.session_state:
        return "expanded" if presenting() is None else "collapsed"
    slug, _, _ = parse_lesson({key: st.query_params.get_all(key) for key in st.query_params}, lesson_counts())
    return "expanded" if slug is None else "collapsed"


def _buttons(env: Env, lesson: Lesson, k: int, *, slide: bool) -> Any:
    """One row: Previous / Next (PageUp / PageDown wherever the page is scrolled, and the arrow keys: Left / Up and
    Right / Down), Explore this view or Back to the slide, This step's settings (on the full view), Leave."""
    n = len(lesson.steps)
    row = st.container(horizontal=True, vertical_alignment="center", wrap=False)  # no tooltips: they would cover it
    go_ = {"on_click": _open_step, "width": "content"}
    back = {"disabled": k == 1, "args": (env, lesson.slug, k - 1)}  # to step k - 1
    on = {"disabled": k == n, "args": (env, lesson.slug, k + 1)}  # to step k + 1
    for key, arrow in PREV_ARROWS.items():
        row.button("", key=key, type="tertiary", shortcut=arrow, **back, **go_)
    row.button("◀ Previous", key=PREV_KEY, shortcut=PREV_SHORTCUT, **back, **go_)
    row.button("Next ▶", key=NEXT_KEY, type="primary", shortcut=NEXT_SHORTCUT, **on, **go_)
    for key, arrow in NEXT_ARROWS.items():
        row.button("", key=key, type="tertiary", shortcut=arrow, **on, **go_)
    if slide:
        row.button("Explore this view", key=EXPLORE_KEY, on_click=_explore, args=(True,), icon=":material/zoom_in:")
    else:
        row.button("Back to the slide", key=SLIDE_KEY, on_click=_explore, args=(False,), icon=":material/slideshow:")
        row.button("↺ This step's settings", key=RESET_KEY, args=(env, lesson.slug, k), **go_)
    row.button("✕ Leave the lesson", key=LEAVE_KEY, on_click=_leave)
    return row


@st.cache_data(show_spinner=False, max_entries=64)
def slide_of(slug: str, k: int, s: Settings) -> tuple[Result, go.Figure]:
    """Step k's check at settings s and its picture (cached: a class moving back and forth gets it at once)."""
    from flashviz.app.slides import picture  # plotly figures and the checks' modules: when a slide is drawn

    step = LESSONS[slug].steps[k - 1]
    result = step.check_at(s)
    return result, picture(step.check, step.settings_of(s), result.values)


def _claim(step: Step, result: Result) -> str:
    """The claim as the class reads it, or, where the settings on screen give other numbers, what the check says
    there (and what is not true there)."""
    if step.confirmed(result):
        return step.text
    said = step.said_by(result) if result.values.keys() >= step.stated.keys() else step.text
    why = result.why or "other numbers than the step's"
    return f"{said}\n\n*At the settings on screen: {why}. ↺ This step's settings brings the step back.*"


def slide_ui(env: Env, settings: Settings) -> None:
    """The step's slide: the buttons, then its claim with its numbers beside the one picture that proves them."""
    at = presenting()
    if at is None:
        return
    lesson, k = at
    step, n = lesson.steps[k - 1], len(lesson.steps)
    row = _buttons(env, lesson, k, slide=True)
    s = replace(settings, view=step.view)
    try:
        with st.spinner(MEASURES.get(step.check, "Computing this step's numbers ..."), show_time=True):
            result, fig = slide_of(lesson.slug, k, s)
    except (ValueError, TypeError) as e:  # settings the class changed may be refused by the check's layers
        st.error(f"This step cannot be computed at the settings on screen: {e} ↺ This step's settings brings it back.")
        row.button("↺ This step's settings", key=RESET_KEY, args=(env, lesson.slug, k), on_click=_open_step)
        return
    if not step.confirmed(result):
        row.button("↺ This step's settings", key=RESET_KEY, args=(env, lesson.slug, k), on_click=_open_step)
    left, right = st.columns(SLIDE_COLUMNS, gap="medium")
    left.info(f"**Step {k} of {n} · {step.title}.** {_claim(step, result)}")
    figures = step.figures(result.values)
    for i in range(0, len(figures), 2):  # two a row, in reading order
        for col, (label, value) in zip(left.columns(2), figures[i:i + 2], strict=False):
            col.metric(label, value)
    with right:
        show_figure(fig, key=f"slide_{step.check}")
        st.caption(f"**Try:** {step.action}")


def presenter_ui(env: Env, settings: Settings) -> None:
    """While exploring a step's full view, above the view: the step's claim as a callout with its number and title,
    then Previous / Next, Back to the slide, and under them what to do there."""
    at = presenting()
    if at is None or not exploring():
        return
    lesson, k = at
    step, n = lesson.steps[k - 1], len(lesson.steps)
    st.info(f"**Step {k} of {n} · {step.title}.** {step.text}")  # one block: the view starts higher at 720 px
    _buttons(env, lesson, k, slide=False)
    where = ("" if settings.view == step.view else  # a link with its own `view` opened another one
             f" This step is on **{LABELS[step.view]}**: ↺ This step's settings opens it.")
    st.caption(f"**Try:** {step.action}{where}")  # under the row: beside it, the arrow keys' buttons squeeze it
