"""flashviz dashboard: `streamlit run app.py`. Wiring only: sidebar settings -> one tab module per view.

The settings live in the URL (flashviz.ui.sidebar), so a copied link reproduces the view. Only the open tab runs
(st.tabs with on_change="rerun"), and heavy work waits for a button, so the first page renders at once.
"""

import streamlit as st

from flashviz.ui import benchmark, block_size, correctness, how_it_works, io_model, roofline, sidebar, training
from flashviz.ui.common import machine_env, running_job_ui
from flashviz.ui.state import VIEWS

st.set_page_config(page_title="flashviz: FlashAttention, tile by tile", page_icon="⚡", layout="wide",
                   initial_sidebar_state="expanded")

env = machine_env()
sidebar.init_from_url(env)
settings = sidebar.settings_ui(env)
sidebar.sync_url(settings)

st.title("FlashAttention, tile by tile")
sidebar.notices_ui()
running_job_ui()
VIEW_UI = {
    "how": how_it_works.how_it_works_ui,
    "bench": benchmark.benchmark_ui,
    "block": block_size.block_size_ui,
    "io": io_model.io_model_ui,
    "correct": correctness.correctness_ui,
    "train": training.training_ui,
    "roof": roofline.roofline_ui,
}
tabs = st.tabs(list(VIEWS.values()), key=sidebar.VIEW_KEY, on_change="rerun")
for tab, slug in zip(tabs, VIEWS, strict=True):
    if tab.open:
        with tab:
            VIEW_UI[slug](settings)
