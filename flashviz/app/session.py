"""The shell's settings in the widgets' session state: every setting's state keys, writing all of them (a link, a
preset, a lesson step) before the widgets are drawn, reading them back as `Settings`, and the sidebar's widgets (the
shared settings the open view reads). A view draws its own widgets with flashviz.kit.widgets.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from flashviz.app.state import Env, Settings, setting_fields, spec_of
from flashviz.kit.spec import SIDEBAR, WINDOW
from flashviz.kit.widgets import WIN_LEFT, WIN_ON, WIN_RIGHT, WINDOW_OFF_REACH, draw

ROW_WANTED_KEY, ROW_SHOWN_KEY = "_fv_row_wanted", "_fv_row_shown"  # the row asked for; the row last shown


def state_keys(name: str) -> tuple[str, ...]:
    """The session-state keys of one setting's widgets."""
    return (WIN_ON, WIN_LEFT, WIN_RIGHT) if spec_of(name).kind == WINDOW else (name,)


WIDGET_KEYS = tuple(key for f in setting_fields() for key in state_keys(f.name))


def write_state(s: Settings) -> None:
    """Put settings into the widgets' session state (before the widgets are drawn)."""
    ss = st.session_state
    for f in setting_fields():
        spec, value = spec_of(f), getattr(s, f.name)
        if spec.kind == WINDOW:
            ss[WIN_ON] = value is not None
            ss[WIN_LEFT], ss[WIN_RIGHT] = value if value is not None else WINDOW_OFF_REACH
        elif spec.widget == "views":
            ss[f.name] = spec.labels[value]
        else:
            ss[f.name] = list(value) if isinstance(value, tuple) else value


def read_state(env: Env) -> Settings:
    """Settings from the widgets' session state (missing keys: defaults; an emptied multiselect stays empty)."""
    ss = st.session_state
    base = Settings(threads=env.max_threads)
    values: dict[str, Any] = {}
    for f in setting_fields():
        spec, default = spec_of(f), getattr(base, f.name)
        if spec.kind == WINDOW:
            values[f.name] = (int(ss.get(WIN_LEFT, 0)), int(ss.get(WIN_RIGHT, 0))) if ss.get(WIN_ON) else None
        elif spec.widget == "views":
            values[f.name] = {label: slug for slug, label in spec.labels.items()}.get(ss.get(f.name), default)
        elif isinstance(default, tuple):
            values[f.name] = tuple(ss[f.name]) if f.name in ss else default
        else:
            values[f.name] = ss.get(f.name, default)
    if values["link"]:
        values["bc"] = values["br"]
    values["row"] = _kept_row(values["row"], values["n"])
    return Settings(**values)


def _kept_row(row: int, n: int) -> int:
    """The inspected row inside 0..N-1, remembering the row the user asked for: clamped while N is small, given
    back when N grows again."""
    ss = st.session_state
    if row != ss.get(ROW_SHOWN_KEY):  # set by the user, a link or a preset since the last run
        ss[ROW_WANTED_KEY] = row
    shown = min(ss.get(ROW_WANTED_KEY, row), n - 1)
    if "row" in ss:
        ss["row"] = shown
    ss[ROW_SHOWN_KEY] = shown
    return shown


def sidebar_widgets(env: Env, names: tuple[str, ...]) -> None:
    """Draw the sidebar settings among `names` in declaration order (Br and Bc as one widget, with the link); two
    half-width settings in a row share it."""
    drawn = [f.name for f in setting_fields()
             if spec_of(f).place == SIDEBAR and spec_of(f).widget and f.name in names]
    k = 0
    while k < len(drawn):
        pair = drawn[k:k + 2]
        if len(pair) == 2 and all(spec_of(name).half for name in pair):
            for name, col in zip(pair, st.sidebar.columns(2), strict=True):
                draw(name, col, env)
            k += 2
        else:
            draw(drawn[k], st.sidebar, env)
            k += 1
