"""The sidebar: classroom presets, the shared settings the open view reads, and the URL kept in sync.

On a session's first run the URL's query parameters are parsed (query.parse_query: clamped, never raising) into the
widgets' session state (a lesson link, `?lesson=intro&step=k`, first puts that step's settings under the link's own:
flashviz.app.presenter); after that the widgets are the truth and the URL follows them, so a copied link reproduces
the view. A view's own settings are drawn by the view (flashviz.app.registry says whose they are); the sidebar draws
only the shared settings the open view reads, and the settings of closed views keep their values until they come back.
"""

from __future__ import annotations

import streamlit as st

from flashviz.app.presenter import lesson_query, open_from_url
from flashviz.app.query import parse_query
from flashviz.app.registry import View, uses_text
from flashviz.app.session import WIDGET_KEYS, read_state, sidebar_widgets, write_state
from flashviz.app.state import PRESETS, Env, Settings, apply_preset

INIT_KEY = "_fv_initialised"  # session flag: the URL has been read
NOTICES_KEY = "_fv_notices"  # notices about clamped URL values, shown until dismissed
PRESET_KEY = "preset"  # the preset selectbox
STORY_KEY = "_fv_preset_story"  # the last loaded preset's story, shown under the selectbox
VIEW_KEY = "view"  # the views' state key (holds the view label)
DISMISS_KEY = "_fv_dismiss"  # the notices' Dismiss button
NOTICES_SHOWN = 10  # notices listed; more are counted
TITLE = "FlashAttention, tile by tile"  # the dashboard's name, over its settings
PAGE_END_ID = "fv-page-end"  # the page's last element: a browser (or a test) knows the run is complete


def init_from_url(env: Env) -> None:
    """First run of a session: read the URL into the widgets; later runs keep widget state alive across views."""
    ss = st.session_state
    if not ss.get(INIT_KEY):
        params = {key: st.query_params.get_all(key) for key in st.query_params}
        params, lesson_notices = open_from_url(params)  # ?lesson=...&step=k: that step's settings under the link's
        settings, notices = parse_query(params, env)
        write_state(settings)
        ss[NOTICES_KEY] = lesson_notices + notices
        ss[INIT_KEY] = True
        return
    # Widgets that were not drawn last run (closed views, settings the open view does not read) would lose their
    # state: re-assigning a key turns it into plain session state that survives until the widget comes back.
    for key in WIDGET_KEYS:
        if key in ss:
            ss[key] = ss[key]


def current_settings(env: Env) -> Settings:
    """The chosen settings, from the widgets' session state (the URL's, on a first run): readable before any widget
    is drawn, so the page can draw its open view first."""
    return read_state(env)


def sync_url(s: Settings) -> None:
    """Write the settings into the URL, after the lesson and step while presenting (only if they changed, so a rerun
    does not touch browser history)."""
    wanted = {**lesson_query(), **s.to_query()}
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def _apply_preset(env: Env) -> None:
    """Selectbox callback: load the chosen preset into the widgets, then reset the selectbox."""
    name = st.session_state.get(PRESET_KEY)
    if name in PRESETS:
        write_state(apply_preset(read_state(env), name))
        st.session_state[STORY_KEY] = f"**{name}**: {PRESETS[name].story}"
    st.session_state[PRESET_KEY] = None


def settings_ui(env: Env, view: View) -> None:
    """The sidebar: a preset picker, then the shared settings the open view reads."""
    sb = st.sidebar
    sb.title(TITLE)  # the page's one h1 (the line above the views is plain text, to leave them room)
    sb.header("Settings")
    sb.selectbox(
        "Classroom preset", list(PRESETS), index=None, key=PRESET_KEY, on_change=_apply_preset, args=(env,),
        placeholder="Load a preset ...",
        help="Loads a ready-made scenario into every control, in every view; you can change anything afterwards.",
    )
    story = st.session_state.get(STORY_KEY)
    if story:
        sb.caption(story)
    sb.caption(f"The settings **{view.label}** reads; its own are in the view.")
    sidebar_widgets(env, view.sidebar)


def uses_ui(view: View) -> None:
    """The view's first line: which shared settings it reads (the sidebar shows just those)."""
    st.caption(uses_text(view))


def page_end_ui() -> None:
    """The page's last element, under the sidebar's settings: a reminder that the link holds the view. Its id tells a
    browser that the run has drawn the whole page."""
    st.sidebar.markdown(f'<p id="{PAGE_END_ID}">Every setting is in this page\'s link: copy it to share the view.'
                        "</p>", unsafe_allow_html=True)


def notices_ui() -> None:
    """Show what the link asked for that could not be used as given (until dismissed)."""
    notices = st.session_state.get(NOTICES_KEY) or []
    if not notices:
        return
    lines = "\n".join(f"- {n}" for n in notices[:NOTICES_SHOWN])
    more = f"\n- ... and {len(notices) - NOTICES_SHOWN} more" if len(notices) > NOTICES_SHOWN else ""
    st.warning(f"**Some settings in this link were adjusted:**\n{lines}{more}", icon="⚠️")
    if st.button("Dismiss", key=DISMISS_KEY):
        st.session_state[NOTICES_KEY] = []
        st.rerun()


__all__ = ["current_settings", "init_from_url", "notices_ui", "page_end_ui", "settings_ui", "sync_url", "uses_ui"]
