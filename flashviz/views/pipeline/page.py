"""The "GPU pipeline" view: why FlashAttention is fast on a GPU, inside the chip. One tile's cycles on each unit of
an SM (tensor cores, the exponential unit, the FP32 units, shared memory) for each GPU and dtype; FA2, FA3 and FA4 as
pipelines of one CTA's operations over those units (a list scheduler, animated over the first tiles); the papers'
figures beside the model's; FA4's exp2 polynomial and lazy rescale, measured here; wave quantisation.

Widgets -> cached flashviz.views.pipeline.data (flashviz.model.pipeline's arithmetic; the polynomial and the rescale
rate measured with torch) -> flashviz.views.pipeline.figures and .sentences. Nothing is computed here.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from flashviz.kit.drawing import show_figure
from flashviz.kit.widgets import draw
from flashviz.views.pipeline import data
from flashviz.views.pipeline import figures as figs
from flashviz.views.pipeline import sentences as text
from flashviz.views.pipeline.settings import PipelineSettings

CONTROLS = ("pipe_gpu", "pipe_dtype", "pipe_d", "pipe_n", "pipe_causal")
WIDTHS = (0.9, 1.0, 1.15, 1.3, 1.15)  # "Causal" unclipped at 1280 px
INTRO = ("Since FlashAttention-2 the limit sits inside the chip: per tile the tensor cores do 4·Br·Bc·d FLOPs while "
         "one unit computes the Br·Bc exponentials at 16 per clock. One table of unit rates (sources in "
         "`flashviz/model/roofline.py`), three schedules.")

cached_bars = st.cache_data(data.tile_bars, show_spinner=False, max_entries=16)
cached_predictions = st.cache_data(data.predictions, show_spinner="Scheduling one CTA's operations…", max_entries=32)
cached_skip = st.cache_data(data.skip_rate, show_spinner="Measuring the lazy rescale…", max_entries=2)
cached_checks = st.cache_data(data.paper_checks, show_spinner="Simulating the papers' settings…", max_entries=4)
cached_poly = st.cache_data(data.poly_errors, show_spinner="Measuring the polynomial…", max_entries=2)
cached_waves = st.cache_data(data.waves, show_spinner=False, max_entries=16)
cached_units = st.cache_data(data.unit_table, show_spinner=False, max_entries=1)


def pipeline_ui(s: PipelineSettings) -> None:
    """Draw the view for settings s: the controls, then one tab per question."""
    st.markdown(INTRO)
    for name, col in zip(CONTROLS, st.columns(WIDTHS, vertical_alignment="bottom"), strict=True):
        draw(name, col)
    skip = cached_skip()
    tabs = st.tabs(["Pipelines", "One tile", "Model vs papers", "exp2 on the FMA units", "Waves", "Units"])
    with tabs[0]:
        _pipelines_ui(s, skip)
    with tabs[1]:
        bars = cached_bars(s.pipe_d)
        show_figure(figs.tile_bars_figure(bars, head_dim=s.pipe_d), key="pipe_bars")
        st.markdown(text.tile_md(bars, head_dim=s.pipe_d))
    with tabs[2]:
        st.markdown(text.papers_md(cached_checks(skip.rate)))
    with tabs[3]:
        st.markdown(text.poly_md(cached_poly()))
    with tabs[4]:
        w = cached_waves(s.pipe_gpu, s.pipe_d)
        show_figure(figs.waves_figure(w, gpu=s.pipe_gpu.upper()), key="pipe_waves")
        st.markdown(text.waves_md(w, gpu=s.pipe_gpu.upper()))
    with tabs[5]:
        st.dataframe(cached_units(), hide_index=True)


def _pipelines_ui(s: PipelineSettings, skip: data.SkipRate) -> None:
    """The three schedules' Gantt and what it says; an error instead where no schedule runs at these settings."""
    preds = cached_predictions(s.pipe_gpu, s.pipe_dtype, s.pipe_d, s.pipe_n, s.pipe_causal, skip.rate)
    runs = {k: p for k, p in preds.items() if not isinstance(p, str)}
    if not runs:
        st.error(f"No schedule runs here: {next(iter(preds.values()))} Choose bf16 or fp16, or another GPU.",
                 icon="🛑")
        return
    window = data.gantt_window(preds)
    rows = pd.concat([data.gantt_rows(p, window) for p in runs.values()], ignore_index=True)
    title = f"One CTA on the {s.pipe_gpu.upper()}, three schedules: ▶ Play races them"
    show_figure(figs.gantt_figure(rows, {k: p.tflops for k, p in runs.items()}, window=window, title=title),
                key="pipe_gantt")
    st.markdown(text.pipeline_md(preds, gpu=s.pipe_gpu.upper(), dtype=s.pipe_dtype, head_dim=s.pipe_d, n=s.pipe_n,
                                 causal=s.pipe_causal))
    if "FA4" in runs:
        st.markdown(text.extras_md(runs["FA4"], skip))
