"""The "Triton kernel" view: FA2's schedule as a Triton kernel (tutorial 06's shape), run by Triton's interpreter here.
The kernel's source with the line that runs marked, stepped by Play through one program's loads, dots and stores;
the launch grid and the K blocks each program loaded, from the kernel's own record, beside the torch kernel's tile
map (`tile_schedule`); tutorial 06's knobs and the shared memory they need per GPU. Without triton installed the view
says how to install it.

Widgets -> the cached record (flashviz.views.triton.data) -> the figures and sentences of this folder.
"""

from __future__ import annotations

import time

import streamlit as st

from flashviz.figures.tilegrid import tile_map_figure
from flashviz.kit.drawing import show_figure, show_map
from flashviz.kit.widgets import draw
from flashviz.triton import available, interpreted
from flashviz.views.triton import data
from flashviz.views.triton import figures as figs
from flashviz.views.triton import sentences as text
from flashviz.views.triton.settings import TritonSettings

PROBLEM = ("tr_n", "tr_d", "tr_causal", "tr_program")  # the first row of controls
KNOBS = ("tr_bm", "tr_bn", "tr_warps", "tr_stages")  # tutorial 06's knobs, the second row
STEP, PLAYING = "triton_step", "triton_playing"  # session keys: the followed step (1-based), Play on
FULL_RUN = "triton_full_run"  # session key: the page runs whole (not only the loop's fragment)
PLAY_EVERY_S = 0.8  # seconds per step while Play runs

cached_record = st.cache_data(data.kernel_record, show_spinner="Running the kernel under Triton's interpreter…",
                              max_entries=32)
cached_lines = st.cache_data(data.source_lines, show_spinner=False)


def _play() -> None:
    """Play pressed: start (again from the first step when at the end), or pause."""
    st.session_state[PLAYING] = not st.session_state.get(PLAYING, False)


@st.fragment
def _loop(record: data.KernelRecord) -> None:
    """The source with the running line, Play and the step slider, and the record beside it. While Play is on, the
    fragment waits PLAY_EVERY_S and reruns itself (only itself), one step on each time; any widget stops it."""
    steps = record.steps
    step = min(max(int(st.session_state.get(STEP, 1)), 1), len(steps))
    if st.session_state.get(PLAYING, False):
        step = 1 if step >= len(steps) else step + 1
        st.session_state[PLAYING] = step < len(steps)
    st.session_state[STEP] = step
    left, right = st.columns((1.25, 1))
    with left:
        play, slider = st.columns((1.5, 4))
        play.button("❚❚ Pause" if st.session_state.get(PLAYING) else "▶ Play", key="triton_play", on_click=_play,
                    help=text.PLAY_HELP)
        slider.slider("Step of the program's loop", 1, len(steps), key=STEP, label_visibility="collapsed")
        now = steps[st.session_state[STEP] - 1]
        lines = cached_lines()
        first, last = figs.window(*data.forward_span(lines), now.line)
        note = text.step_note(st.session_state[STEP], len(steps), now.kind, now.tensor, now.block, now.stage,
                              now.nbytes)
        show_map(figs.source_html(lines, first, last, now.line, note))
    with right:
        current = (record.setup.program, now.block) if now.tensor in ("K", "V") else None
        show_figure(figs.record_figure(record.loaded, len(record.status[0]), record.setup.program, current),
                    key="triton_record")
        fig = tile_map_figure(record.status, n=record.setup.n, block_q=record.setup.block_m,
                              block_k=record.setup.block_n, counts=record.counts)
        fig.update_layout(title={"text": "Torch kernel's tiles"})
        show_figure(fig, key="triton_schedule")
    full_run = st.session_state.pop(FULL_RUN, False)  # set by triton_ui: this is the whole page's run
    if st.session_state.get(PLAYING, False):
        if full_run:  # only a fragment's own rerun may rerun the fragment: Play goes on from the next press
            st.session_state[PLAYING] = False
        else:
            time.sleep(PLAY_EVERY_S)
            st.rerun(scope="fragment")


def triton_ui(s: TritonSettings) -> None:
    """Draw the view for settings s."""
    st.markdown(text.INTRO)
    if not available():
        st.info(text.INSTALL, icon="📦")
        return
    if not interpreted():
        st.info(text.COMPILED, icon="🖥️")
        return
    for row in (PROBLEM, KNOBS):
        for name, col in zip(row, st.columns(len(row)), strict=True):
            draw(name, col)
    setup = data.setup_of(s)
    problem = data.setup_problem(setup)
    if problem:
        st.error(problem, icon="🛑")
        return
    record = cached_record(setup)
    st.markdown(text.record_sentence(record.grid, [len(r) for r in record.loaded], record.tiles,
                                     record.schedule_tiles, record.mismatched_programs, record.stage2, record.partial))
    st.session_state[FULL_RUN] = True
    _loop(record)
    st.markdown(text.bytes_sentence(record.bytes_loaded, record.model_bytes_loaded, record.bytes_stored,
                                    record.model_bytes_stored, record.dots, record.error, record.seconds))
    rows = data.smem_budget(setup.block_m, setup.block_n, setup.num_stages, setup.d)
    left, right = st.columns((1, 1.25))
    with left:
        show_figure(figs.smem_figure([r.gpu for r in rows], rows[0].need, [r.limit for r in rows]), key="triton_smem")
    right.markdown(text.smem_sentence(setup.block_m, setup.block_n, setup.num_stages, setup.num_warps, setup.d,
                                      rows[0].need, {r.gpu: r.fits for r in rows}))
