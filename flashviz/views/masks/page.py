"""The "Masks" view: build a FlexAttention mask from presets, see it at element level and as tiles, read the BlockMask
a FlexAttention user would get, and check it against torch's own create_block_mask, live.

The browser sends only preset names and numbers (the view's settings, in the URL like every other); the mask_mod is
built here from flashviz.masks. Widgets -> cached data (flashviz.views.masks.data) -> figures
(flashviz.views.masks.figures).
Every number on the page is computed from the data drawn next to it.

Legend: N sequence length, Br = block_q, Bc = block_k, Tr x Tc tiles.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace

import streamlit as st

from flashviz.figures.tilegrid import tile_map_figure
from flashviz.figures.tilemap import tile_map_html
from flashviz.kit.drawing import show_figure, show_map
from flashviz.kit.lock import threads_lock
from flashviz.kit.runs import remembered, run_button_ui, timed_run
from flashviz.kit.sizes import grid_error
from flashviz.kit.widgets import draw
from flashviz.measure.timing import threads_set_to
from flashviz.views.masks import data as masks_data
from flashviz.views.masks.data import (
    BUILD_REPEATS,
    MASK_RUN_LABELS,
    NO_COMBINE,
    NO_SCORE,
    RUN_CALLS,
    RUN_REPEATS,
    RUN_WARMUP,
    SWEEP_REPEATS,
    SWEEP_WARMUP,
    MaskData,
    MaskSpec,
    mask_data,
    mask_traces,
    run_problem,
    score_curves,
    spec_matches_torch,
    sweep_calls,
    sweep_problem,
)
from flashviz.views.masks.figures import (
    block_mask_table_figure,
    element_mask_figure,
    masked_run_figure,
    score_mod_figure,
    sparsity_time_figure,
)
from flashviz.views.masks.presets import PICKERS, PRESETS, mask_settings, params_of
from flashviz.views.masks.sentences import run_md, same_kernel_md, sweep_md
from flashviz.views.masks.settings import MasksSettings
from flashviz.vocab import FULL, PARTIAL, SKIPPED

TILE_GRID_MAX = 256  # tiles per side the tile map draws (65,536 tiles)
CHECK_N_MAX = 4096  # create_block_mask builds the whole N x N mask: about 150 MB of temporaries at 4096, 0.5 GB at 8192
CACHE_ENTRIES = 32  # masks kept per cached function
RUN_ENTRIES = 16  # timing runs kept per cached function


def mask_spec(s: MasksSettings) -> MaskSpec:
    """The mask the view's settings describe (names and numbers only): each setting of the presets' table (presets.py)
    fills its
    MaskSpec field."""
    return MaskSpec(**{p.key: getattr(s, name) for name, p in mask_settings().items()})


# the mask at N (its element map, tiles and BlockMask rows); whether our BlockMask is create_block_mask's (called
# with score="none": a score_mod changes no block); the score_mod's curves
cached_mask_data = st.cache_data(mask_data, show_spinner=False, max_entries=CACHE_ENTRIES)
cached_matches_torch = st.cache_data(spec_matches_torch, show_spinner=False, max_entries=CACHE_ENTRIES)
cached_score_curves = st.cache_data(score_curves, show_spinner=False, max_entries=CACHE_ENTRIES)


CONTROLS_PER_ROW = 5  # widgets side by side: a 140 px select or number input each at 1280 px


@contextlib.contextmanager
def one_thread_if_idle() -> Iterator[None]:
    """Evaluate masks on one thread while no other work of the server holds the thread count: on a busy machine the
    many small ops of a mask evaluation ran 4x faster on one thread than on two (N = 16384: about 3 s against 12 s).
    The thread count is process-wide, so it is changed only while holding threads_lock (as the row inspector does)."""
    lock = threads_lock()
    have_lock = lock.acquire(blocking=False)
    try:
        with threads_set_to(1 if have_lock else None):
            yield
    finally:
        if have_lock:
            lock.release()


def _controls_ui(s: MasksSettings) -> None:
    """The preset pickers and the score mod, then the numbers they need (and the softcap's cap): on one row where
    they fit, so the maps start higher on a 720 px screen, else the numbers on the next."""
    spec = mask_spec(s)
    pickers = {p.key: p.name for p in PICKERS.values()}
    choices = [pickers["preset"], pickers["combine"]] + ([pickers["preset2"]] if spec.combine != NO_COMBINE else [])
    choices.append(pickers["score"])
    numbers = [p.name for p in params_of(spec.presets, spec.score)]
    rows = [choices + numbers] if len(choices) + len(numbers) <= CONTROLS_PER_ROW else [choices, numbers]
    for row in rows:
        for start in range(0, len(row), CONTROLS_PER_ROW):
            for name, col in zip(row[start:start + CONTROLS_PER_ROW], st.columns(CONTROLS_PER_ROW), strict=False):
                draw(name, col)


def masks_ui(s: MasksSettings) -> None:
    """Draw the view for settings s."""
    st.markdown("A FlexAttention **mask_mod** says which keys each query sees; the tiled kernel turns it into "
                "**full**, **partial** and **skipped** tiles, and FlexAttention into a **BlockMask**. N, Br and Bc "
                "come from the sidebar.")
    _controls_ui(s)
    if s.causal or s.window is not None:
        st.markdown("The sidebar's causal mask and sliding window do not apply in this view: its mask is built from "
                    "the presets above only.")
    error = grid_error(s, TILE_GRID_MAX, "this view")
    if error:
        st.error(error)
        return
    spec = mask_spec(s)
    try:
        with st.spinner(f"Evaluating the {s.n} × {s.n} mask ..."), one_thread_if_idle():
            data = cached_mask_data(spec, s.n, s.br, s.bc, s.heads)
    except (ValueError, TypeError) as e:  # the presets' own validation says what to change
        st.error(f"This mask cannot be built: {e}")
        return
    left, right = st.columns(2)
    with left:
        show_figure(element_mask_figure(data.elements.fraction, n=s.n, cell=data.elements.cell,
                                        visible_fraction=data.elements.visible_fraction, tile_q=s.br, tile_k=s.bc),
                    key="mask_elements")
    with right:
        show_figure(tile_map_figure(data.grid.status, n=s.n, block_q=s.br, block_k=s.bc, counts=data.grid.counts),
                    key="mask_tiles")
    _summary_ui(s, data)
    _block_mask_ui(s, spec, data)
    _score_mod_ui(s, spec)
    _run_ui(s, spec)
    _sweep_ui(s, spec)


def _summary_ui(s: MasksSettings, data: MaskData) -> None:
    """The sparsity in words, every number from the data drawn below."""
    g, e = data.grid, data.elements
    masked_work = 1 - e.visible / g.computed_elements if g.computed_elements else 0.0
    docs = (f" Documents at N = {s.n}: {', '.join(str(x) for x in data.doc_lengths)} tokens."
            if data.doc_lengths else "")
    st.markdown(
        f"**{g.computed} of {g.tiles} tiles computed ({g.computed / g.tiles:.1%})**: {g.counts[FULL]} full, "
        f"{g.counts[PARTIAL]} partial, {g.counts[SKIPPED]} skipped. **{e.visible_fraction:.1%} of the "
        f"{s.n}² (query, key) pairs are visible**; {masked_work:.1%} of the pairs inside computed tiles are masked "
        f"(computed, then thrown away). Dense attention with a boolean mask computes all {s.n}² pairs.{docs}"
    )
    if e.cell > 1:
        st.caption(f"The element mask is drawn at {e.fraction.shape[0]} × {e.fraction.shape[1]} pixels: each pixel "
                   f"shows {e.cell} × {e.cell} elements, shaded by the fraction visible (exact counts).")


def _block_mask_ui(s: MasksSettings, spec: MaskSpec, data: MaskData) -> None:
    st.subheader("The BlockMask FlexAttention sees")
    _check_ui(s, spec)
    tr = len(data.grid.status)
    show_figure(block_mask_table_figure(data.rows, n_q_blocks=tr), key="mask_block_table")
    if data.grid.ragged_full:
        st.markdown(f"N = {s.n} is not a multiple of the tile size, so the last row or column of tiles is ragged: "
                    f"{_tiles_are(data.grid.ragged_full)} full on the tile map (every in-bounds pair visible) but "
                    "partial in the BlockMask, because create_block_mask pads the mask past N with masked pairs.")
    st.markdown("The same mask in Python (FlexAttention's signatures: the function works in both libraries):")
    st.code(data.sample, language="python", wrap_lines=True)


def _tiles_are(k: int) -> str:
    """'1 ragged tile is' / '3 ragged tiles are'."""
    return f"{k} ragged tile is" if k == 1 else f"{k} ragged tiles are"


def _check_ui(s: MasksSettings, spec: MaskSpec) -> None:
    """The live check against torch's create_block_mask (skipped above CHECK_N_MAX, and saying so)."""
    if s.n > CHECK_N_MAX:
        st.markdown(f"Equal to create_block_mask: **not checked live** at N = {s.n}: create_block_mask builds the "
                    f"whole N × N mask, so this view runs it only up to N = {CHECK_N_MAX}.")
        return
    with st.spinner("Building the same mask with torch's create_block_mask ..."), one_thread_if_idle():
        same = cached_matches_torch(replace(spec, score=NO_SCORE), s.n, s.br, s.bc)  # a score_mod changes no block
    if same:
        st.success(f"**Equal to create_block_mask: yes.** torch's create_block_mask(mask_mod, 1, 1, {s.n}, {s.n}, "
                   f"BLOCK_SIZE=({s.br}, {s.bc})) lists the same partial and full blocks as this BlockMask, for "
                   "every query block.")
    else:
        st.error(f"Equal to create_block_mask: **no**: torch's create_block_mask lists different blocks for this mask "
                 f"at N = {s.n}, Br = {s.br}, Bc = {s.bc}.")


def _score_mod_ui(s: MasksSettings, spec: MaskSpec) -> None:
    if spec.score == NO_SCORE:
        return
    st.subheader("The score mod")
    curves = cached_score_curves(spec, s.n, s.heads)
    show_figure(score_mod_figure(curves, kind=spec.score, heads=s.heads, cap=spec.cap, n=s.n), key="mask_score_chart")
    st.markdown("A score_mod changes scores before the softmax; it never changes which pairs are visible, so the "
                "element mask, the tile map and the BlockMask above are the same with or without it.")


# ----------------------------------------------------------------------------------------------------------------------
# the run button: the mask at work


masked_runs = timed_run(masks_data.masked_runs)  # the masked tiled kernel, dense SDPA and the unmasked kernel


def _run_ui(s: MasksSettings, spec: MaskSpec) -> None:
    st.subheader("The mask at work")
    st.markdown(f"Times the tiled kernel (FlashAttention-2 loop order) with this mask, dense SDPA with the {s.n} × "
                f"{s.n} boolean mask (it cannot skip a tile) and the tiled kernel with no mask, interleaved call by "
                f"call: {RUN_REPEATS} repeats after a call that measures its peak memory and {RUN_WARMUP} warm-up "
                f"call, at the sidebar's N, d, H, Br, Bc and dtype on the CPU ({s.threads} thread(s)). Each mask is "
                f"built once beforehand; the builds are timed apart ({BUILD_REPEATS} each).")
    problem = run_problem(s.n, s.d, s.heads, s.dtype)
    if problem:
        st.warning(f"This run is refused: {problem}", icon="🛑")
        return
    args = (spec, s.n, s.d, s.heads, s.br, s.bc, s.dtype, s.threads)
    runs = run_button_ui("masks", masked_runs, args, label="Run the mask", title="Mask timing",
                         help="Times the three runs on these settings (cached per setting).",
                         idle=f"Press **Run the mask** to time the three runs "
                              f"({len(MASK_RUN_LABELS) * RUN_CALLS} calls).")
    if runs is None:
        return
    if spec.score != NO_SCORE:
        st.markdown(f"SDPA has no score-mod hook: its row runs the mask only, without {spec.score}. The masked tiled "
                    "row applies the score mod too; the unmasked row applies neither.")
    show_figure(masked_run_figure(runs), key="mask_run")
    st.markdown(run_md(runs))
    with st.expander("All measurements"):
        st.dataframe(runs, hide_index=True)


# ----------------------------------------------------------------------------------------------------------------------
# the sweep button: time against sparsity, one point per preset


sparsity_runs = timed_run(masks_data.sparsity_runs)  # every preset alone and no mask (the last row)


def _sweep_ui(s: MasksSettings, spec: MaskSpec) -> None:
    st.subheader("Time against sparsity, every preset")
    st.markdown(f"Times the tiled kernel with each of the {len(PRESETS)} presets alone (at this view's window, "
                f"prefix, documents, sinks, chunk and dilation; no score mod) and with no mask, interleaved call by "
                f"call, {SWEEP_REPEATS} repeats after {SWEEP_WARMUP} untimed call each, each on its schedule built "
                f"once beforehand, at the sidebar's N, d, H, Br, Bc and dtype on the CPU ({s.threads} thread(s)).")
    problem = sweep_problem(s.n, s.d, s.heads, s.dtype)
    if problem:
        st.warning(f"This sweep is refused: {problem}", icon="🛑")
        return
    args = (spec, s.n, s.d, s.heads, s.br, s.bc, s.dtype, s.threads)
    rows = run_button_ui("mask_sweep", sparsity_runs, args, label="Time every preset", title="Preset timing",
                         help="Times every preset and the unmasked kernel on these settings (cached per setting).",
                         idle=f"Press **Time every preset** to time the {len(PRESETS)} presets and the unmasked "
                              f"kernel ({sweep_calls()} calls).")
    if rows is None:
        return
    show_figure(sparsity_time_figure(rows[:-1], unmasked_s=float(rows[-1]["time_s"])), key="mask_sweep")
    st.markdown(sweep_md(rows))
    if same := same_kernel_md(remembered("masks", args), rows):
        st.markdown(same)
    with st.expander("All preset timings"):
        st.dataframe(rows, hide_index=True)


# ----------------------------------------------------------------------------------------------------------------------
# the How it works view, with this view's mask


@st.cache_data(show_spinner=False, max_entries=RUN_ENTRIES)
def cached_mask_map(spec: MaskSpec, n: int, br: int, bc: int, loop_orders: tuple[str, ...],
                    heads: int) -> tuple[str, int, int, str]:
    """The animated tile map of the mask (one panel per loop order, flashviz.figures.tilemap's HTML), its computed
    tiles, all tiles and the first line of the code that builds the mask."""
    traces, code = mask_traces(spec, n, br, bc, loop_orders, heads)
    computed = len(traces[0].computed_steps())
    html = tile_map_html(traces, title="Tile map of S = QKᵀ: the Masks view's mask",
                         subtitle=(f"N = {n} · Br = {br}, Bc = {bc} · {traces[0].steps} tiles, {computed} computed · "
                                   "mask from the Masks view"))
    return html, computed, traces[0].steps, code


def how_it_works_mask_ui(s: MasksSettings) -> None:
    """The How it works tile map for the Masks view's mask, and what the view cannot show for it."""
    spec = mask_spec(s)
    try:
        with one_thread_if_idle():
            html, computed, tiles, code = cached_mask_map(spec, s.n, s.br, s.bc, s.loop_orders, s.heads)
    except (ValueError, TypeError) as e:
        st.error(f"The Masks view's mask cannot be drawn here: {e}")
        return
    show_map(html)
    st.markdown(f"**Mask from the Masks view**: `{code}`: {computed} of {tiles} tiles computed. The sidebar's causal "
                "mask and window do not apply while it is on. The HBM counters and the row inspector model the causal "
                "mask and window only, so they are left out; switch off *The Masks view's mask* under the map to "
                "see them.")
