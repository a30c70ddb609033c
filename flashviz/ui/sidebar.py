"""The sidebar: every setting as a widget with help text, classroom presets, and the URL kept in sync.

On a session's first run the URL's query parameters are parsed (query.parse_query: clamped, never raising) into the
widgets' session state; after that the widgets are the truth and the URL follows them, so a copied link reproduces
the view. `settings_ui()` returns the chosen Settings (the demo-self-driving `*_ui()` pattern).
"""

from __future__ import annotations

import streamlit as st

from flashviz.ui.query import parse_query
from flashviz.ui.state import PRESETS, Env, Settings, apply_preset
from flashviz.ui.widgets import WIDGET_KEYS, read_state, sidebar_widgets, write_state

INIT_KEY = "_fv_initialised"  # session flag: the URL has been read
NOTICES_KEY = "_fv_notices"  # notices about clamped URL values, shown until dismissed
PRESET_KEY = "preset"  # the preset selectbox
STORY_KEY = "_fv_preset_story"  # the last loaded preset's story, shown under the selectbox
VIEW_KEY = "view"  # the tabs' state key (holds the tab label)
HEADER = "Settings"  # the sidebar's header


def init_from_url(env: Env) -> bool:
    """First run of a session: read the URL into the widgets; later runs keep widget state alive across tabs.
    Returns whether this was the first run (a new browser tab's first page)."""
    ss = st.session_state
    first = not ss.get(INIT_KEY)
    if first:
        params = {key: st.query_params.get_all(key) for key in st.query_params}
        settings, notices = parse_query(params, env)
        write_state(settings)
        ss[NOTICES_KEY] = notices
        ss[INIT_KEY] = True
    else:
        # Widgets that were not drawn last run (closed tabs, hidden inputs) would lose their state: re-assigning a
        # key turns it into plain session state that survives until the widget comes back.
        for key in WIDGET_KEYS:
            if key in ss:
                ss[key] = ss[key]
    return first


def sync_url(s: Settings) -> None:
    """Write the settings into the URL (only if they changed, so a rerun does not touch browser history)."""
    wanted = s.to_query()
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def _apply_preset(env: Env) -> None:
    """Selectbox callback: load the chosen preset into the widgets, then reset the selectbox."""
    name = st.session_state.get(PRESET_KEY)
    if name in PRESETS:
        write_state(apply_preset(read_state(env), name))
        st.session_state[STORY_KEY] = f"**{name}**: {PRESETS[name].story}"
    st.session_state[PRESET_KEY] = None


def current_settings(env: Env) -> Settings:
    """The chosen settings, from the widgets' session state (the URL's, on a first run): readable before the sidebar
    is drawn, so the page can draw its open tab first."""
    return read_state(env)


def header_ui() -> None:
    """The sidebar's header, drawn near the top of every run: the sidebar is in place from a new tab's first page
    (the tile map alone) on, and its header stays fresh while a run loads the kernel before the widgets come."""
    st.sidebar.header(HEADER)


def settings_ui(env: Env) -> None:
    """Draw the sidebar's widgets under its header (they hold the settings current_settings reads)."""
    sb = st.sidebar
    sb.selectbox(
        "Classroom preset", list(PRESETS), index=None, key=PRESET_KEY, on_change=_apply_preset, args=(env,),
        placeholder="Load a preset ...",
        help="Loads a ready-made scenario into every control below; you can change anything afterwards.",
    )
    story = st.session_state.get(STORY_KEY)
    if story:
        sb.caption(story)
    sidebar_widgets(env)


def notices_ui() -> None:
    """Show what the link asked for that could not be used as given (until dismissed)."""
    notices = st.session_state.get(NOTICES_KEY) or []
    if not notices:
        return
    shown_max = 10
    lines = "\n".join(f"- {n}" for n in notices[:shown_max])
    more = f"\n- ... and {len(notices) - shown_max} more" if len(notices) > shown_max else ""
    st.warning(f"**Some settings in this link were adjusted:**\n{lines}{more}", icon="⚠️")
    if st.button("Dismiss", key="_fv_dismiss"):
        st.session_state[NOTICES_KEY] = []
        st.rerun()


__all__ = ["current_settings", "header_ui", "init_from_url", "notices_ui", "settings_ui", "sync_url"]
