"""The flashviz dashboard page, served by app.py (`streamlit run app.py`). Wiring only: sidebar settings -> one tab
module per view.

The settings live in the URL (flashviz.ui.sidebar), so a copied link reproduces the view. Only the open tab runs
(st.tabs with on_change="rerun") and only its module is imported, and heavy work waits for a button, so the first
page renders at once.
"""

import importlib

import streamlit as st

from flashviz.ui import sidebar
from flashviz.ui.common import machine_env, running_job_ui, skip_repl_check
from flashviz.ui.state import VIEWS

# slug -> (module, function) of each tab. A tab's module is imported when the tab is first open, so the first page
# does not wait for what only the other tabs need (torch takes 2 to 3 s to import, pandas most of a second).
VIEW_UI = {
    "how": ("flashviz.ui.how_it_works", "how_it_works_ui"),
    "bench": ("flashviz.ui.benchmark", "benchmark_ui"),
    "block": ("flashviz.ui.block_size", "block_size_ui"),
    "io": ("flashviz.ui.io_model", "io_model_ui"),
    "correct": ("flashviz.ui.correctness", "correctness_ui"),
    "train": ("flashviz.ui.training", "training_ui"),
    "roof": ("flashviz.ui.roofline", "roofline_ui"),
    "decode": ("flashviz.ui.decoding", "decoding_ui"),
    "masks": ("flashviz.ui.masks", "masks_ui"),
}

# The icon is set at the end: an emoji icon makes Streamlit load its emoji catalogue (tens of ms) on a fresh server.
st.set_page_config(page_title="flashviz: FlashAttention, tile by tile", layout="wide", initial_sidebar_state="expanded")
skip_repl_check()  # before the first element

env = machine_env()
first_run = sidebar.init_from_url(env)
settings = sidebar.current_settings(env)
sidebar.sync_url(settings)

st.title("FlashAttention, tile by tile")
sidebar.header_ui()
sidebar.notices_ui()
running_job_ui()
if first_run and settings.view == "how":  # a new tab's first page: the tile map alone (it stops the run)
    importlib.import_module(VIEW_UI["how"][0]).first_page_ui(settings)
tabs = st.tabs(list(VIEWS.values()), key=sidebar.VIEW_KEY, on_change="rerun")
for tab, slug in zip(tabs, VIEWS, strict=True):
    if tab.open:
        module, function = VIEW_UI[slug]
        with tab:
            getattr(importlib.import_module(module), function)(settings)
# The sidebar's widgets last: the browser draws a batch of elements only once the code of every element in it has
# loaded, so the open tab (the tile map first) is not held back by the widgets' code on a first visit.
sidebar.settings_ui(env)
st.set_page_config(page_icon="⚡")  # set_page_config calls add up: this one only adds the icon
