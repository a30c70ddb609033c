"""flashviz's dashboard: `streamlit run app.py`. This is the page; flashviz.app.registry lists its views.

The settings live in the URL (flashviz.app.sidebar), so a copied link reproduces the view. The fourteen views are
picked in a group of buttons (st.segmented_control): at 1280 x 720 with the sidebar open it shows all fourteen in two
rows (7 + 7). Streamlit's own navigation does not fit there: with twelve views st.navigation(position="top") showed 9
and put Masks, Numerics and Ring behind a "3 more" menu (all 12 only with the sidebar closed or from about 1440 px), and
position="sidebar" takes 480 of the sidebar's 720 px above the settings; st.tabs would hide the last views behind a
scroll arrow. Only the picked view runs and only its module is imported, and heavy work waits for a button. How it
works, the first view, draws its tile map (SVG + CSS) before anything imports torch.
"""

import streamlit as st

from flashviz.app import sidebar
from flashviz.app.machine import machine_env
from flashviz.app.presenter import on_slide, presenter_ui, presenting, sidebar_state, slide_ui
from flashviz.app.registry import VIEWS, view_of
from flashviz.app.state import settings_of
from flashviz.kit.runs import running_job_ui

st.set_page_config(page_title="flashviz: FlashAttention, tile by tile", page_icon="⚡", layout="wide",
                   initial_sidebar_state=sidebar_state())  # collapsed while presenting a lesson
st.markdown("**⚡ flashviz** · FlashAttention, tile by tile")  # the page's title: one small line, the same everywhere

env = machine_env()
sidebar.init_from_url(env)
settings = sidebar.current_settings(env)
sidebar.sync_url(settings)

sidebar.notices_ui()
presenter_ui(env, settings)  # ?lesson=... after Explore this view: the step's claim above its view, Previous / Next
running_job_ui()
view = view_of(settings.view)
if on_slide():  # ?lesson=...: the step as a slide (its claim, numbers and picture), no view under it
    slide_ui(env, settings)
    sidebar.settings_ui(env, view)
    sidebar.page_end_ui()
    st.stop()
if presenting() is None:  # while presenting a lesson, its steps pick the view (Leave the lesson brings this back)
    st.segmented_control("View", [view.label for view in VIEWS], required=True, key=sidebar.VIEW_KEY, wrap=True,
                         label_visibility="collapsed", help="The view to open; the link in the address bar keeps it")
sidebar.uses_ui(view)
view.function()(settings_of(view, settings))
# The sidebar last: the open view's first element (How it works: the tile map) goes out before any widget.
sidebar.settings_ui(env, view)
sidebar.page_end_ui()
