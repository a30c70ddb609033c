"""The "Ring" view: ring attention (context parallelism) seen rank by rank. The model first, with no process: the N x N
scores split into the ranks' rows and coloured by ring step, animated step by step, and each rank's work per layout
with its imbalance. Then, on Run, the same ring in W real processes on this machine (gloo), under the timing lock:
its timeline per rank, the bytes sent per step against the model, the merge of one row across the steps, its error
against one process in float64, and fp32 against bf16 partials as the world grows.

Widgets -> cached calls (the model; the run under the timing lock) -> the figures of flashviz.views.ring.figures and
the sentences of flashviz.views.ring.sentences, each a function of the numbers it quotes.
"""

from __future__ import annotations

import streamlit as st

from flashviz.kit.drawing import ran_with_ui, show_figure
from flashviz.kit.runs import run_button_ui, timed_run
from flashviz.kit.widgets import draw
from flashviz.measure.load import cores as cpu_cores
from flashviz.views.ring import data
from flashviz.views.ring import figures as figs
from flashviz.views.ring import sentences as text
from flashviz.views.ring.data import FP32_TOLERANCE, RingResult
from flashviz.views.ring.settings import RingSettings
from flashviz.vocab import DTYPE_BYTES

NAME = "ring"  # the view's result name in this session (flashviz.kit.runs.remember)
TITLE = "Ring run"  # what the progress box calls the run
CACHE_ENTRIES = 16
SLIDERS = ("ring_n", "world", "ring_block", "ring_heads", "ring_causal")  # the first row of controls
CHOICES = ("layout", "partials")  # the second row
RAN_WITH = (*SLIDERS, *CHOICES)


cached_map = st.cache_data(data.score_map, show_spinner=False, max_entries=64)  # the model's tiles, rank by step
cached_work = st.cache_data(data.layout_work, show_spinner=False, max_entries=64)  # each layout's work per rank
cached_long = st.cache_data(data.long_context, show_spinner=False, max_entries=8)  # a long context, per device


ring_run = timed_run(data.ring_run)  # the W processes, every ring the view draws, run from the timing worker


def ring_ui(s: RingSettings) -> None:
    """Draw the view for settings s."""
    st.markdown(text.intro(cached_long(s.world), data.LONG_MODEL))  # why, and what a rank and a shard are, first
    for name, col in zip(SLIDERS, st.columns(len(SLIDERS)), strict=True):
        draw(name, col)
    row = st.columns((1, 1, 1.2))
    for name, col in zip(CHOICES, row[:-1], strict=True):
        draw(name, col)
    setup = data.setup_of(s)
    problem = data.setup_problem(setup)
    if problem:
        st.error(text.problem_text(problem), icon="🛑")
        return
    others, sweep, processes = data.run_plan(setup)
    with row[-1]:  # the Run button beside the last control: the map starts within the first screen
        result = run_button_ui(NAME, ring_run, (setup,), label=text.run_label(processes), title=TITLE,
                               help=text.RUN_HELP, idle=text.run_idle(processes, len(others), len(sweep)))
    if result is not None:
        verdict = text.verdict_sentence(result.processes, result.rings, result.seconds, result.events,
                                        result.errors, setup.dtype, FP32_TOLERANCE, result.mismatches)
        (st.success if result.exact else st.warning)(verdict)
    grid = cached_map(setup)
    show_figure(figs.score_map_figure(grid), key="ring_map")
    st.markdown(text.map_sentence(grid))
    works, bad = cached_work(setup)
    show_figure(figs.work_figure(works, result.layouts if result else ()), key="ring_work")
    st.markdown(text.imbalance_sentence(works, bad, setup.world, setup.causal,
                                        data.contiguous_causal_bounds(setup.world)))
    if result is None:
        return
    st.markdown(text.work_match_sentence(works, result.layouts, result.layout_mismatches))
    _measured_ui(result, s)


def _measured_ui(r: RingResult, s: RingSettings) -> None:
    st.subheader("Measured in the run")
    ran_with_ui(s, RAN_WITH)
    show_figure(figs.timeline_figure(r.events), key="ring_timeline")
    st.markdown(text.timeline_sentence(r.events, cpu_cores()))
    if r.setup.world > 1:
        show_figure(figs.bytes_figure(r.events, r.model_bytes), key="ring_bytes")
    st.markdown(text.bytes_sentence(r.events, r.model_bytes, r.setup.heads, r.setup.n // r.setup.world, r.setup.d,
                                    DTYPE_BYTES[r.setup.dtype]))
    show_figure(figs.merge_figure(r.merge), key="ring_merge")
    st.markdown(text.merge_sentence(r.merge))
    show_figure(figs.precision_figure(r.precision, FP32_TOLERANCE), key="ring_precision")
    st.markdown(text.precision_sentence(r.precision, FP32_TOLERANCE))
