"""The "Backward" view: the tiled backward pass (FlashAttention-2, Algorithm 2) tile by tile, on the real kernel.

Widgets -> cached plain data (flashviz.views.backward.data: the backward's schedule with the IO model's counters, the
real kernel's tiles through on_tile, the bytes kept for the backward, atomic against deterministic dQ;
flashviz.views.backward.claims: two runs of the kernel compared bit for bit; flashviz.views.backward.data: the measured
price, on a button) -> figures (views/backward/tilemap.py: SVG + CSS, no torch; views/backward/figures.py; every
sentence from views/backward/sentences.py). Nothing is computed here. The map comes first and needs no torch; the
kernel's runs follow it.

Two problem sizes, said on the page: the map's own small one (its N, d, tile size: every tile can be narrated) and
the sidebar's N, d, Br, Bc, B, H for the traffic at scale and the measured price. The causal switch is the view's own.

Legend: N sequence length, d head dimension, Br = block_q, Bc = block_k, B batch, H heads.
"""

from __future__ import annotations

from types import SimpleNamespace

import streamlit as st

from flashviz.figures.tilemap import frame_indices
from flashviz.kit.drawing import ran_with_ui, show_figure, show_map
from flashviz.kit.runs import timed_run
from flashviz.kit.sizes import grid_error
from flashviz.kit.widgets import draw, frame_ui
from flashviz.views.backward.data import (
    BackwardSchedule,
    DqComparison,
    backward_schedule,
    backward_trace,
    dq_comparison,
    price_run,
    saved_bytes,
    saved_for_backward,
    tile_ops,
)
from flashviz.views.backward.sentences import (
    determinism_text,
    dq_table,
    dq_text,
    row_sum_table,
    row_sum_text,
    saved_text,
    scale_text,
    traffic_text,
)
from flashviz.views.backward.settings import BackwardSettings
from flashviz.views.backward.tilemap import backward_map_html, map_header_html
from flashviz.views.how.settings import BOTH
from flashviz.vocab import DQ_ATOMIC, DQ_DETERMINISTIC, DQ_MODE_LABELS, DTYPE_BYTES

KERNEL_FLOPS_MAX = 1e10  # the trace and the two dQ runs run the real kernel live: a few seconds of one CPU core
KERNEL_RUNS = 3  # the kernel's backward FLOPs those take, counted in backward passes (forward, 2 backward, the sums)
PRICE_IMPLS = 3  # implementations recompute_price times: tiled, naive, SDPA
MAP_TITLE = "The backward pass, tile by tile (Algorithm 2)"
KERNEL_RAN_WITH = ("map_n", "map_d", "map_block", "map_causal", "window",
                   "dtype")  # the kernel's runs on the map's problem
PRICE_RAN_WITH = ("n", "d", "br", "bc", "map_causal", "window", "dtype", "batch", "heads", "device", "threads", "reps")
INTRO = ("The backward pass needs P = softmax(S) for every gradient, but FlashAttention's forward saved only the "
         "output O and one number per query row, the logsumexp L. So the backward walks the tiles again, column by "
         "column (Algorithm 2): it keeps K_j, V_j and the gradients dK_j, dV_j on chip for a whole column, streams "
         "Q_i, dO_i, L_i and D_i = rowsum(dO_i ∘ O_i) for each tile, **recomputes** S_ij and P_ij = exp(S_ij − L_i) on "
         "chip, and adds the tile's share into dQ_i, which lives in HBM. Press **▶ Play**, or choose with the slider "
         "the tile the map opens at: the table beside it lists that tile's operations.")


cached_schedule = st.cache_data(backward_schedule, show_spinner=False, max_entries=64)
cached_comparison = st.cache_data(dq_comparison, show_spinner=False, max_entries=64)
cached_trace = st.cache_data(backward_trace, show_spinner=False, max_entries=32)


@st.cache_data(show_spinner=False, max_entries=32)
def cached_map(n: int, d: int, block: int, causal: bool, window: tuple[int, int] | None, modes: tuple[str, ...],
               dtype_bytes: int, start: int) -> str:
    """The backward map's HTML (views/backward/tilemap.py), built once per configuration."""
    schedules = [cached_schedule(n, d, block, block, causal=causal, window=window, dq_mode=m, dtype_bytes=dtype_bytes)
                 for m in modes]
    return backward_map_html(schedules, start_frame=start, uid="fv-bw-map", header=False)


@st.cache_data(show_spinner=False, max_entries=32)
def cached_dq_runs(n: int, d: int, block: int, causal: bool, window: tuple[int, int] | None, dtype: str):
    from flashviz.views.backward.claims import dq_runs  # the kernel's runs (torch): after the map

    return dq_runs(n, d, block, block, causal=causal, window=window, dtype=dtype)


cached_price = timed_run(price_run)  # forward + backward of naive and FA2, in the timing worker


def modes_of(s: BackwardSettings) -> tuple[str, ...]:
    """The dQ schedules the map plays: one, or both side by side."""
    return (DQ_ATOMIC, DQ_DETERMINISTIC) if s.dq_schedule == BOTH else (s.dq_schedule,)


def backward_ui(s: BackwardSettings) -> None:
    """Draw the view for settings s: the map and the tile's operations first (they fit a 1280 x 720 window)."""
    grid = SimpleNamespace(n=s.map_n, br=s.map_block, bc=s.map_block)
    error = grid_error(grid, view="the backward's tile map")
    if error:
        st.error(error)
        _controls_ui(s, [], 0)
        return
    nbytes = DTYPE_BYTES[s.dtype]
    schedules = [cached_schedule(s.map_n, s.map_d, s.map_block, s.map_block, causal=s.map_causal, window=s.window,
                                 dq_mode=m, dtype_bytes=nbytes) for m in modes_of(s)]
    longest = max(len(sc.computed_steps()) for sc in schedules)
    frames_at = frame_indices(longest) or [0]
    start = min(s.map_frame, len(frames_at) - 1)
    html = cached_map(s.map_n, s.map_d, s.map_block, s.map_causal, s.window, modes_of(s), nbytes, start)
    show_map(map_header_html(schedules[0], title=MAP_TITLE))  # over the map and the table beside it
    if len(schedules) == 1:
        map_col, ops_col = st.columns([10, 9], gap="medium")
    else:  # two panels need the page's width: the table goes under them
        map_col, ops_col = st.container(), st.container()
    show_map(html, map_col)
    with map_col:
        _controls_ui(s, frames_at, longest)
    with ops_col:
        _tile_ops_ui(schedules, frames_at[start] if longest else None)
    map_cost = cached_comparison(s.map_n, s.map_d, s.map_block, s.map_block, causal=s.map_causal, window=s.window,
                                 heads=1, dtype_bytes=nbytes)
    scale_cost = cached_comparison(s.n, s.d, s.br, s.bc, causal=s.map_causal, window=s.window, heads=s.batch * s.heads,
                                   dtype_bytes=nbytes)
    st.markdown(INTRO)
    st.markdown(traffic_text(map_cost, "the map's problem"))
    st.markdown(scale_text(scale_cost, "the sidebar's sizes"))
    kernel_ok = _kernel_fits(map_cost)
    _saved_ui(s, kernel_ok, scale_cost)
    _dq_ui(s, kernel_ok, map_cost, scale_cost)
    _price_ui(s, scale_cost)
    _equations_ui()


def _tile_ops_ui(schedules: list[BackwardSchedule], f: int | None) -> None:
    """The operations of the tile the map opens at (computed tile f of the first panel still running there)."""
    from flashviz.views.backward.figures import tile_ops_html  # plotly comes with this module: after the map

    if f is None:
        st.info("Every tile is masked at these settings: the backward computes nothing.")
        return
    sc = next(sc for sc in schedules if f < len(sc.computed_steps()))
    step = sc.computed_steps()[f]
    i, j, pass_no = sc.q_block[step], sc.k_block[step], sc.passes[step]
    rows, cols = sc.tile_shape(step)
    where = f"pass {pass_no} of {DQ_MODE_LABELS[sc.dq_mode]}" if sc.dq_mode == DQ_DETERMINISTIC \
        else DQ_MODE_LABELS[sc.dq_mode]
    caption = (f"The tile the map opens at: i = {i}, j = {j} ({rows} × {cols}, {sc.status[step]}), {where}; "
               f"computed tile {f + 1} of {len(sc.computed_steps())}.")
    show_map(tile_ops_html(tile_ops(rows, cols, sc.d, dq_mode=sc.dq_mode, pass_no=pass_no), caption=caption,
                           uid="fv-bw-ops", compact=len(schedules) == 1))


def _controls_ui(s: BackwardSettings, frames_at: list[int], n_computed: int) -> None:
    """Under the map: the frame it opens at, the dQ schedule, and the map's own problem size and mask."""
    frame_ui("map_frame", frames_at, n_computed)
    draw("dq_schedule", st)
    for pair in (("map_n", "map_d"), ("map_block", "map_causal")):
        for name, col in zip(pair, st.columns(2), strict=True):
            draw(name, col)
    st.caption("The map and the kernel's runs below use this small problem (one head, batch 1), so every tile can be "
               "narrated; the traffic at scale and the measured price use the sidebar's N, d, Br, Bc, B and H.")


def _kernel_fits(c: DqComparison) -> bool:
    """Whether the map's problem is small enough to run the real kernel live; if not, say so."""
    flops = KERNEL_RUNS * c.atomic_flops
    if flops <= KERNEL_FLOPS_MAX:
        return True
    st.info(f"The checks below run the real kernel, about {flops / 1e9:.0f} GFLOP at the map's settings: too slow to "
            f"run live (at most {KERNEL_FLOPS_MAX / 1e9:.0f} GFLOP). Lower the map's N or d, or raise its tile size.")
    return False


def _saved_ui(s: BackwardSettings, kernel_ok: bool, scale_cost: DqComparison) -> None:
    """Why only O and L are saved: the bytes at both sizes, and the recomputed rows of P summing to 1."""
    st.subheader("Why only O and L are saved")
    st.latex(r"P_{ij} = e^{S_{ij} - L_i},\qquad L_i = m_i + \log \ell_i = \log \sum_{k} e^{S_{ik}}"
             r"\quad\Rightarrow\quad \sum_j \operatorname{rowsum}(P_{ij}) = 1")
    st.markdown(saved_text(saved_bytes(scale_cost.n, scale_cost.d, heads=scale_cost.heads, dtype=s.dtype),
                           "the sidebar's sizes") + " P grows with N², O and L only with N.")
    if not kernel_ok:
        return
    with st.spinner("Running the real kernel's forward and backward on the map's problem ..."):
        trace = cached_trace(s.map_n, s.map_d, s.map_block, s.map_block, causal=s.map_causal, window=s.window,
                             dtype=s.dtype)
    ran_with_ui(s, KERNEL_RAN_WITH)
    st.markdown(saved_text(saved_for_backward(trace), "the map's problem"))
    st.markdown(row_sum_text(trace))
    st.markdown(row_sum_table(trace))


def _dq_ui(s: BackwardSettings, kernel_ok: bool, map_cost: DqComparison, scale_cost: DqComparison) -> None:
    """dQ on a GPU: why atomic adds, what the deterministic pass costs, and this kernel's two runs compared."""
    st.subheader("dQ on a GPU: atomic adds, or a second pass")
    st.markdown(dq_text(map_cost))
    st.markdown(dq_table([("the map's problem", map_cost), ("the sidebar's sizes", scale_cost)]))
    st.caption("Switch the map between the two with **dQ schedule on the map** above (or show both side by side).")
    if kernel_ok:
        with st.spinner("Running the backward twice ..."):
            runs = cached_dq_runs(s.map_n, s.map_d, s.map_block, s.map_causal, s.window, s.dtype)
        ran_with_ui(s, KERNEL_RAN_WITH)
        st.markdown(determinism_text(runs))


def _price_ui(s: BackwardSettings, scale_cost: DqComparison) -> None:
    """The recomputation's price, measured on a button at the sidebar's sizes."""
    from flashviz.kit import jobs
    from flashviz.kit.runs import run_button_ui
    from flashviz.views.backward.figures import recompute_price_figure
    from flashviz.views.backward.sentences import price_text, slower_text

    st.subheader("The recomputation's price, measured")
    problem = jobs.work_guard((s.n,), d=s.d, br=s.br, bc=s.bc, batch=s.batch, heads=s.heads, reps=s.reps,
                              n_impls=PRICE_IMPLS, training=True, dtype=s.dtype)
    if problem:
        st.error(problem)
        return
    args = (s.n, s.d, s.batch, s.heads, s.br, s.bc, s.map_causal, s.window, s.dtype, s.device, s.threads, s.reps)
    price = run_button_ui("backward_price", cached_price, args, label="Run forward + backward", title="Backward price",
                          help="Times forward + backward (autograd) of the tiled kernel, naive attention and SDPA "
                               "at the sidebar's sizes, and measures each one's exact peak memory.",
                          idle=f"Press **Run forward + backward** to time the tiled kernel against naive autograd and "
                               f"SDPA at N = {s.n}, d = {s.d}, B = {s.batch}, H = {s.heads}.")
    if price is None:
        return
    ran_with_ui(s, PRICE_RAN_WITH)
    show_figure(recompute_price_figure(price), key="backward_price")
    v = price.time_verdict()  # "why slower" only where naive autograd is faster beyond the noise
    slower = v is not None and v.faster == "naive autograd"
    st.caption(price_text(price) + (" " + slower_text(price, scale_cost) if slower else ""))


def _equations_ui() -> None:
    """Algorithm 2's lines for one tile, three short lines so that each fits a 1280 px window."""
    st.subheader("Algorithm 2, lines 10-16: one tile")
    st.latex(r"S_{ij} = \tfrac{1}{\sqrt d}\, Q_i K_j^\top,\qquad P_{ij} = e^{S_{ij} - L_i},\qquad "
             r"D_i = \operatorname{rowsum}(dO_i \circ O_i)")
    st.latex(r"dV_j \mathrel{+}= P_{ij}^\top dO_i,\qquad dP_{ij} = dO_i V_j^\top,\qquad "
             r"dS_{ij} = P_{ij} \circ (dP_{ij} - D_i)")
    st.latex(r"dQ_i \mathrel{+}= \tfrac{1}{\sqrt d}\, dS_{ij} K_j,\qquad "
             r"dK_j \mathrel{+}= \tfrac{1}{\sqrt d}\, dS_{ij}^\top Q_i")
