"""A setting's widget, derived from its Spec (flashviz.kit.spec), drawn wherever it belongs: the sidebar, or the view
that owns it (or borrows it). The shell keeps the settings in the widgets' session state (flashviz.app.session).

Every widget's key is its setting's name, except the sliding window, which is three widgets (on, left, right), and
the views, whose state holds the view label.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from flashviz.kit.settings import Env, for_machine, spec_of
from flashviz.kit.spec import INTS, Spec
from flashviz.limits import LIST_MAX

WIN_ON, WIN_LEFT, WIN_RIGHT = "win_on", "win_left", "win_right"  # the window's three widgets
WINDOW_OFF_REACH = (256, 0)  # (left, right) the reach inputs show while the window is off
WINDOW_REACH_HELP = ("How many earlier keys a query sees (i − left ≤ j).",
                     "How many later keys a query sees (j ≤ i + right); irrelevant with a causal mask.")
LINKED_BLOCK_LABEL = "Block size Br = Bc"
LINKED_BLOCK_HELP = "Rows and columns of S per tile. One tile's Q, K, V blocks must fit in on-chip memory (SRAM)."


def _with(options: tuple[int, ...], value: Any) -> list[int]:
    """Slider options plus the current value (a link may carry an odd size that the list lacks)."""
    return sorted({*options, int(value)})


def draw(name: str, where: Any, env: Env | None = None, **override: Any) -> None:
    """Draw the widget of setting `name` in `where` (st.sidebar, a column, st); `override` replaces Spec fields
    that depend on the page (e.g. the row's upper bound)."""
    spec = for_machine(spec_of(name), env or Env())
    if override:
        spec = Spec(**{**spec.__dict__, **override})
    DRAW[spec.widget](name, spec, where)


def _select_slider(name: str, spec: Spec, where: Any) -> None:
    where.select_slider(spec.label, options=_with(spec.options, st.session_state[name]), key=name, help=spec.help)


def _slider(name: str, spec: Spec, where: Any) -> None:
    where.slider(spec.label, spec.lo, spec.hi, key=name, help=spec.help)


def _number_input(name: str, spec: Spec, where: Any) -> None:
    where.number_input(spec.label, min_value=spec.lo, max_value=spec.hi, step=spec.increment, key=name, help=spec.help,
                       disabled=spec.disabled)


def _multiselect(name: str, spec: Spec, where: Any) -> None:
    options = sorted({*spec.options, *st.session_state.get(name, [])}) if spec.kind == INTS else list(spec.options)
    format_func = spec.labels.get if spec.labels else str  # the values stay the URL's; the chips show the labels
    where.multiselect(spec.label, options, format_func=format_func, key=name, max_selections=LIST_MAX, help=spec.help)


def _choice(name: str, spec: Spec, where: Any) -> None:
    widget = where.radio if spec.widget == "radio" else where.selectbox
    format_func = spec.labels.get if spec.labels else str
    widget(spec.label, list(spec.options), format_func=format_func, key=name, help=spec.help)


def _toggle(name: str, spec: Spec, where: Any) -> None:
    (where.toggle if spec.widget == "toggle" else where.checkbox)(spec.label, key=name, help=spec.help)


def _window(name: str, spec: Spec, where: Any) -> None:
    where.toggle(spec.label, key=WIN_ON, help=spec.help)
    if st.session_state[WIN_ON]:
        for col, key, label, help_text in zip(where.columns(2), (WIN_LEFT, WIN_RIGHT), ("left reach", "right reach"),
                                              WINDOW_REACH_HELP, strict=True):
            col.number_input(label, min_value=spec.lo, max_value=spec.hi, step=spec.increment, key=key, help=help_text)


def _blocks(name: str, spec: Spec, where: Any) -> None:
    """Br, with the link checkbox and Bc: one slider while they are linked, two otherwise."""
    ss = st.session_state
    _toggle("link", spec_of("link"), where)
    if ss["link"]:
        where.select_slider(LINKED_BLOCK_LABEL, options=_with(spec.options, ss["br"]), key="br",
                            help=LINKED_BLOCK_HELP)
        ss["bc"] = ss["br"]  # plain state while the Bc slider is hidden; it reappears with this value
    else:
        _select_slider("br", spec, where)
        _select_slider("bc", spec_of("bc"), where)


DRAW: dict[str, Callable[[str, Spec, Any], None]] = {
    "select_slider": _select_slider, "slider": _slider, "number_input": _number_input, "multiselect": _multiselect,
    "radio": _choice, "selectbox": _choice, "toggle": _toggle, "checkbox": _toggle, "window": _window,
    "blocks": _blocks,
}


def frame_ui(name: str, frames_at: list[int], n_computed: int) -> None:
    """A tile map's own frame control (setting `name`): the map animates in the browser (Play, Pause, Restart), and
    this is the frame it opens at, kept across setting changes while the new map has it, else its last frame (the
    map's frame k shows computed tile frames_at[k] + 1). Nothing when the map has a single frame."""
    if len(frames_at) < 2:
        return
    ss = st.session_state
    ss[name] = min(int(ss.get(name, 0)), len(frames_at) - 1)  # this map has no later frame
    spec = spec_of(name)
    st.select_slider(spec.label, options=list(range(len(frames_at))), key=name, help=spec.help,
                     format_func=lambda k: f"{frames_at[k] + 1} of {n_computed}")
