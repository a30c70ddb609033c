"""The "Numerics" view: why correct kernels give different outputs, and the precision ideas after FlashAttention-2
(FA3's FP8 with incoherent processing, FA4's lazy rescale), on the numerics lab's seeded inputs.

Widgets -> LabSettings (validated, its caps from flashviz.limits) -> cached data.run_lab -> the figures of
flashviz.views.numerics.figures and the sentences of flashviz.views.numerics.sentences, each a function of the numbers
it quotes, so every claim is true at the settings shown. Small settings run as soon as the view opens (a progress bar
while they do); settings estimated to take longer wait for a button, run under the timing lock with a progress bar and
Cancel, and settings over the lab's cap are refused with a message that says how to fix them. docs/numerics.md explains
each experiment. """

from __future__ import annotations

from dataclasses import astuple

import streamlit as st

from flashviz.kit.drawing import ran_with_ui, show_figure
from flashviz.kit.runs import remembered, run_and_remember, run_button_ui, timed_run
from flashviz.kit.widgets import draw
from flashviz.views.numerics import figures as figs
from flashviz.views.numerics import sentences as text
from flashviz.views.numerics.data import LabResult, LabSettings, LabWork, lab_problem, lab_run, lab_settings, lab_work
from flashviz.views.numerics.settings import NumericsSettings

NAME = "numerics"  # the view's result name in this session (flashviz.kit.runs.remember)
TITLE = "Numerics lab"  # what the progress box calls the run
CACHE_ENTRIES = 32  # lab results kept (a few hundred kB each at the largest settings)
SELECTS = ("input_dtype", "p_dtype", "numerics_block", "tau", "n_q", "n_k")  # the first row of controls
SELECT_WIDTHS = (1.25, 1.45, 1.15, 1.15, 0.85, 0.85)  # "FP8 e4m3" and "P~ FP8 e4m3" unclipped at 1280 px
TOGGLES = ("hadamard", "outliers", "numerics_causal")  # the second row
RAN_WITH = (*SELECTS, *TOGGLES)
INTRO = (f"Correct kernels round in their own order, so they disagree in the last bits; every run here uses one "
         f"seeded input ({LabSettings.heads} heads, d = {LabSettings.d}) and float64 as the truth.")


cached_lab = timed_run(lab_run)  # run_lab on LabSettings(*args), cached on args, in the timing worker


def numerics_ui(s: NumericsSettings) -> None:
    """Draw the view for settings s."""
    st.markdown(INTRO)
    for name, col in zip(SELECTS, st.columns(SELECT_WIDTHS), strict=True):
        draw(name, col)
    for name, col in zip(TOGGLES, st.columns(len(TOGGLES)), strict=True):
        draw(name, col)
    try:
        ls = lab_settings(s)
    except (ValueError, TypeError) as e:
        st.error(f"The lab cannot run these settings: {e}", icon="🛑")
        return
    work = lab_work(ls)
    problem = lab_problem(ls, work)
    if problem:
        st.error(problem, icon="🛑")
        return
    result = _result(ls, work)
    if result is None:
        return
    ran_with_ui(s, RAN_WITH)
    for section in (_errors_ui, _orders_ui, _rescale_ui, _fp8_ui, _causal_ui, _two_errors_ui):
        section(result)


def _result(ls: LabSettings, work: LabWork) -> LabResult | None:
    """The lab's result for ls: at once when it is small (a progress bar while it runs), else behind a button."""
    args = (astuple(ls),)  # cached_lab's positional arguments: the settings as a plain (hashable) tuple
    kept = remembered(NAME, args)
    if kept is not None:
        return kept
    if not work.runs_at_once:
        return run_button_ui(NAME, cached_lab, args, label="Run the numerics lab", title=TITLE,
                             help="Runs every experiment at these settings (results are cached: the same settings "
                                  "come back at once).",
                             idle=f"These settings run {work.calls} kernel calls and {work.tiles:,} tiles: about "
                                  f"{work.seconds:.0f} s on an idle laptop CPU. Press **Run the numerics lab**.")
    return run_and_remember(NAME, TITLE, cached_lab, args)


def _errors_ui(r: LabResult) -> None:
    st.markdown("#### 1. Every kernel errs: by how much?")
    show_figure(figs.kernel_errors_figure(r.errors), key="numerics_errors")  # the chart first: it fits 720 px
    st.markdown(text.kernel_errors_sentence(r.errors))


def _orders_ui(r: LabResult) -> None:
    st.markdown("#### 2. Two correct kernels, two answers")
    st.markdown(text.flash_sdpa_sentence(r.vs_sdpa, r.errors))
    st.markdown(text.tile_spread_sentence(r.spread, r.errors))
    spread = figs.tile_spread_figure(r.spread)
    if spread is not None:  # every tile size gave the same output: the sentence says so, and no chart of equal bars
        show_figure(spread, key="numerics_spread")


def _rescale_ui(r: LabResult) -> None:
    st.markdown("#### 3. FA4: rescale only when the max jumps")
    st.markdown(text.rescale_sentence(r.rescale))
    show_figure(figs.rescale_figure(r.rescale), key="numerics_rescale")


def _fp8_ui(r: LabResult) -> None:
    st.markdown("#### 4. FA3: FP8 and the Hadamard rotation")
    t = r.fp8
    left, right = st.columns([2, 3])
    left.markdown(text.fp8_sentence(t))
    right.markdown(text.fp8_table_markdown(t))
    show_figure(figs.fp8_figure(t), key="numerics_fp8")


def _two_errors_ui(r: LabResult) -> None:
    st.markdown("#### 6. flash-attn's test, kernel by kernel")
    st.markdown(text.two_errors_sentence(r.two))
    show_figure(figs.two_errors_figure(r.two), key="numerics_two_errors")


def _causal_ui(r: LabResult) -> None:
    st.markdown("#### 5. Causal masks when N_q ≠ N_k")
    st.markdown(text.causal_sentence(r.causal))
    show_figure(figs.causal_alignment_figure(r.causal), key="numerics_causal_chart")
