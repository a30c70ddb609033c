"""The "How it works" view: the animated tile map, the row inspector and the update equations.

Widgets -> cached traces (flashviz.measure.trace: the tile schedule, the IO model's counters, the real kernel's on_tile
events) -> figures (flashviz.figures.tilemap: SVG + CSS, drawn without plotly or torch; flashviz.views.how.figures).
Nothing is computed here. The map comes first and needs no torch, so a fresh server draws it before PyTorch has loaded;
the row inspector, which runs the real kernel, comes last. """

from __future__ import annotations

import math
import sys

import streamlit as st

from flashviz.figures.tilemap import frame_indices, tile_map_html
from flashviz.kit.drawing import show_figure, show_map
from flashviz.kit.lock import threads_lock
from flashviz.kit.sizes import grid_error
from flashviz.kit.widgets import draw, frame_ui
from flashviz.measure.trace import RowPick, RowTrace, ScheduleTrace, pick_row, row_trace, schedule_trace
from flashviz.model.iomodel import io_cost
from flashviz.units import format_bytes, format_flops
from flashviz.views.how.sentences import fa1_start_md, x_standard_md
from flashviz.views.how.settings import HowSettings
from flashviz.vocab import DTYPE_BYTES, KV_OUTER, LOOP_ORDER_LABELS, LOOP_ORDER_SHORT, NAIVE, Q_OUTER

ROW_TRACE_FLOPS_MAX = 1e10  # the row inspector runs the real kernel; ~1-2 s of one CPU core at most
INTRO = ("FlashAttention never builds the N × N score matrix S = QKᵀ. It cuts S into tiles of Br query rows × Bc key "
         "columns and computes one tile at a time in fast on-chip memory (SRAM), keeping a running max **m** and a "
         "running sum **l** per query row so the softmax comes out exact. Every tile shows its fate from the start "
         "(pale until the loop reaches it): **full**, **partial** (masked inside) or **skipped** (never loaded). "
         "Press **▶ Play** (the same button pauses), or choose the tile the map opens at with the slider under it. "
         "Over the grid, the IO model counts the **HBM traffic so far** and, on the third line, **standard "
         "attention**'s for "
         "the same part of S: it computes every score (skipped tiles too) and writes S and P to HBM and reads them "
         "back.")


cached_schedule = st.cache_data(schedule_trace, show_spinner=False, max_entries=64)
cached_row = st.cache_data(row_trace, show_spinner=False, max_entries=64)
cached_pick = st.cache_data(pick_row, show_spinner=False, max_entries=64)  # up to 512 rows: ms to a quarter second


@st.cache_data(show_spinner=False, max_entries=32)
def cached_map(n: int, br: int, bc: int, causal: bool, window: tuple[int, int] | None, loop_orders: tuple[str, ...],
               d: int, dtype_bytes: int, row: int | None, start: int) -> str:
    """The tile map's HTML (flashviz.figures.tilemap), built once per configuration; row None: no row marker."""
    traces = [cached_schedule(n, br, bc, causal=causal, window=window, loop_order=order, d=d, dtype_bytes=dtype_bytes)
              for order in loop_orders]
    return tile_map_html(traces, row=row, start_frame=start)


def kernel_loaded() -> bool:
    """Whether torch is fully imported: False before any session has needed it, and while one is importing it."""
    spec = getattr(sys.modules.get("torch"), "__spec__", None)
    return spec is not None and not getattr(spec, "_initializing", False)


def inspected_row(s: HowSettings) -> tuple[int, RowPick | None]:
    """The row the inspector follows and the tile map marks: the most-rescaling row (with the pick) while
    "Show the row with the most rescales" is on, else the user's row r (and None)."""
    if not s.auto_row:
        return s.row, None
    pick = cached_pick(s.n, s.d, s.br, s.bc, causal=s.causal, window=s.window, dtype=s.dtype, near=s.row)
    return pick.row, pick


def _row_traces(s: HowSettings, row: int) -> list[RowTrace]:
    """Run the kernel for the inspected row; one thread is fastest for these small tiles, but the thread count is
    process-wide, so it is only changed while no other work of the server holds threads_lock."""
    lock = threads_lock()
    have_lock = lock.acquire(blocking=False)
    try:
        return [cached_row(s.n, s.d, s.br, s.bc, row=row, causal=s.causal, window=s.window, loop_order=order,
                           dtype=s.dtype, threads=1 if have_lock else None) for order in s.loop_orders]
    finally:
        if have_lock:
            lock.release()


def start_frame(frame: int, n_computed: int) -> int:
    """The map frame the page opens at: the page's frame setting, where a map with n_computed computed tiles has it,
    else its last frame.

    Example:
        >>> start_frame(40, 256), start_frame(40, 10)
        (40, 9)
    """
    return min(frame, max(len(frame_indices(n_computed)) - 1, 0))


def how_it_works_ui(s: HowSettings) -> None:
    """Draw the view for settings s: the tile map first (it must fit a 1280 x 720 window), then what it means."""
    error = grid_error(s)
    if error:
        st.error(error)
        return
    if s.use_mask:  # the Masks view's mask: no IO counters or row inspector for it (they model causal and window)
        from flashviz.views.masks.page import (
            how_it_works_mask_ui,  # the Masks view's module loads torch: only when asked
        )

        how_it_works_mask_ui(s)
        _controls_ui([], 0)
        st.markdown(INTRO)
        _concepts_ui()
        return
    slot = st.empty()  # the map: drawn at once, redrawn with the row marker once a fresh server has the kernel
    try:
        traces, frames_at, start = _schedules(s)
        row, pick = inspected_row(s) if not s.auto_row or kernel_loaded() else (None, None)
        show_map(_map(s, row, start), slot)
    except (ValueError, TypeError) as e:  # the core's validation speaks for itself
        slot.error(f"These settings cannot be drawn: {e}")
        return
    _controls_ui(frames_at, len(traces[0].computed_steps()))
    _totals_ui(s, traces)
    st.markdown(INTRO)
    if row is None:  # the automatic row is the kernel's pick: a fresh server loads the kernel now
        try:
            with st.spinner("Loading PyTorch for the row inspector, which runs the real kernel (once per server "
                            "start) ..."):
                row, pick = inspected_row(s)
        except (ValueError, TypeError) as e:
            st.error(f"The row inspector cannot run at these settings: {e}")
            return
        show_map(_map(s, row, start), slot)
    _row_inspector_ui(s, len(traces[0].computed_steps()), row, pick)
    _concepts_ui()


def _map(s: HowSettings, row: int | None, start: int) -> str:
    return cached_map(s.n, s.br, s.bc, s.causal, s.window, s.loop_orders, s.d, DTYPE_BYTES[s.dtype], row, start)


def _schedules(s: HowSettings) -> tuple[list[ScheduleTrace], list[int], int]:
    """The tile schedule of each loop order shown, the map's frames (frame_indices) and the frame it opens at: the
    page's frame, where the map has it."""
    traces = [cached_schedule(s.n, s.br, s.bc, causal=s.causal, window=s.window, loop_order=order, d=s.d,
                              dtype_bytes=DTYPE_BYTES[s.dtype]) for order in s.loop_orders]
    n_computed = len(traces[0].computed_steps())
    return traces, frame_indices(n_computed), start_frame(s.frame, n_computed)


def _controls_ui(frames_at: list[int], n_computed: int) -> None:
    """Under the map: the frame it opens at, the loop order, and the Masks view's mask instead of the sidebar's."""
    c1, c2, c3 = st.columns([3.5, 3, 3.5])
    with c1:
        frame_ui("frame", frames_at, n_computed)
    draw("order", c2)
    draw("use_mask", c3)


def _totals_ui(s: HowSettings, traces: list[ScheduleTrace]) -> None:
    """HBM traffic per head of standard attention and of each loop order shown, from the IO model."""
    naive = io_cost(NAIVE, s.n, s.n, s.d, s.br, s.bc, causal=s.causal, window=s.window,
                    dtype_bytes=DTYPE_BYTES[s.dtype])
    cols = st.columns(1 + len(traces))
    cols[0].metric("Standard attention: HBM traffic per head", format_bytes(naive.bytes),
                   help="FA1 Algorithm 0: writes S and P (N² each) to HBM and reads them back. IO model.")
    cols[0].caption(f"{format_flops(naive.flops)} of matmuls; every one of the {s.n}² scores.")
    for col, tr in zip(cols[1:], traces, strict=True):
        total = tr.hbm_bytes[-1] if tr.hbm_bytes else 0.0
        col.metric(f"{LOOP_ORDER_SHORT[tr.loop_order]}: HBM traffic per head", format_bytes(total),
                   help="IO model, after the last tile of the animation (the counter above the grid).")
        ratio = f"{total / naive.bytes:.2f}" if naive.bytes else "-"
        col.caption(f"{ratio} x standard; {format_flops(tr.flops[-1] if tr.flops else 0)} of matmuls; "
                    f"{len(tr.computed_steps())} of {tr.steps} tiles computed.")
    for tr in traces:
        tiled = io_cost(tr.loop_order, s.n, s.n, s.d, s.br, s.bc, causal=s.causal, window=s.window,
                        dtype_bytes=DTYPE_BYTES[s.dtype])
        st.markdown(x_standard_md(tr.loop_order, tiled.accesses, naive.accesses, s.n, s.d, s.br, s.bc))
    for tr in traces:  # FA1's counter opens above standard attention's: say why, under the map
        computed = tr.computed_steps()
        if tr.loop_order == KV_OUTER and computed and tr.hbm_bytes is not None:
            said = fa1_start_md(s.n, s.d, DTYPE_BYTES[s.dtype], tr.start_bytes, tr.hbm_bytes[computed[0]],
                                tr.naive_bytes[computed[0]])
            if said:
                st.markdown(said)


def _row_inspector_ui(s: HowSettings, n_tiles: int, row: int, pick: RowPick | None) -> None:
    st.subheader("Row inspector: the online softmax of one query row")
    c1, c2 = st.columns([3, 2])
    draw("auto_row", c1)
    if pick is not None:  # the input shows the row on screen; turning the toggle off starts from it
        st.session_state["row"] = row
    draw("row", c2, hi=s.n - 1, disabled=pick is not None)
    flops = io_cost(KV_OUTER, s.n, s.n, s.d, s.br, s.bc, causal=s.causal, window=s.window).flops
    if flops > ROW_TRACE_FLOPS_MAX:
        st.info(f"The row inspector runs the real kernel, {flops / 1e9:.0f} GFLOP at these settings: too slow to "
                f"run live. Lower N or d (at most {ROW_TRACE_FLOPS_MAX / 1e9:.0f} GFLOP).")
        return
    try:
        rows = _row_traces(s, row)
    except (ValueError, TypeError) as e:
        st.error(f"The row inspector cannot run at these settings: {e}")
        return
    from flashviz.views.how.figures import row_figure  # plotly's figure builders: after the map and the metrics

    note = f"Picked automatically: {pick.reason}" if pick is not None else None
    show_figure(row_figure(rows, n_tiles=n_tiles, note=note), key="row_inspector")
    st.markdown(_row_caption(s, rows[0], pick))


def _row_caption(s: HowSettings, r: RowTrace, pick: RowPick | None) -> str:
    """What the inspector shows for row r, true for this row: why it was chosen, its rescales, and L."""
    tiles = len(r.step)
    if pick is not None:
        why = (f"Row {r.row} was picked automatically: {pick.reason.split(': ', 1)[1]}, so the rescale is there to "
               "see. Turn off the toggle to choose any row. ")
    else:
        why = f"Row {r.row}, chosen by hand. "
    if r.rescales:
        grew = (f"m grew on {r.rescales} of its {tiles} tiles (shaded): there the sum so far, l, was multiplied by "
                "e^(m_old − m_new) < 1 before the tile's own terms were added. ")
    else:
        grew = (f"m never grew after this row's first tile ({tiles} tiles), so every factor is 1 and l only adds; "
                "turn on the toggle to see a rescale. ")
    return (f"{why}{grew}After the last tile the kernel's logsumexp is L = m + log l = {r.lse_kernel:.6f}; the "
            f"exact value over the whole row is {_lse(r):.6f}. Random Q, K, V (seed 0), batch 0, head 0, {s.dtype}.")


def _lse(r: RowTrace) -> float:
    return r.m_exact + math.log(r.l_exact) if r.l_exact > 0 else float("-inf")


def _concepts_ui() -> None:
    """One paragraph and its equations per concept, full width so the equations fit on a projector."""
    st.subheader("The ideas, one at a time")
    st.markdown("**1. Tiling.** S = QKᵀ has N² entries, far too many for SRAM. A tile needs only Br rows of Q "
                "and Bc rows of K and V, so FlashAttention loads those blocks, computes the Br × Bc tile on "
                "chip, uses it, and throws it away. S and P never reach HBM. (To read the whole algorithm as "
                "plain code, each step with the paper's line number: `flashviz/core/algorithms.py`.)")
    st.latex(r"S_{ij} = \tfrac{1}{\sqrt d}\, Q_i K_j^{\top} \in \mathbb{R}^{B_r \times B_c}")
    st.markdown("**2. Online softmax.** Softmax needs the row max and the row sum over *all* keys, but a tile "
                "sees only Bc of them. Keep a running max m and a running sum l (relative to m). When a new "
                "tile raises the max, everything summed so far is rescaled by e^(m_old − m_new): exact, in one "
                "pass. (flashviz's kernels, like FlashAttention-2's and Triton's, compute the same numbers in base "
                "2: exp2 with log₂e folded into the scale, because exp2 is cheaper than exp.)")
    st.latex(r"\tilde m_{ij} = \operatorname{rowmax}(S_{ij}),\quad \tilde P_{ij} = e^{S_{ij} - \tilde m_{ij}},"
             r"\quad \tilde \ell_{ij} = \operatorname{rowsum}(\tilde P_{ij})")
    st.latex(r"m_i^{\mathrm{new}} = \max(m_i, \tilde m_{ij}),\quad \ell_i^{\mathrm{new}} = e^{m_i - "
             r"m_i^{\mathrm{new}}} \ell_i + e^{\tilde m_{ij} - m_i^{\mathrm{new}}} \tilde \ell_{ij}")
    st.markdown("**3. Masks make tiles full, partial or skipped.** With a causal mask or a sliding window, a "
                "tile whose keys are all visible is *full* (no mask work), one that is cut by the mask is "
                "*partial* (masked inside the tile), and one that no query can see is *skipped*: never loaded, "
                "never computed. That is where causal attention saves half the work.")
    st.markdown(f"**4. The output update of {LOOP_ORDER_LABELS[KV_OUTER]}.** FlashAttention-1 loops over K/V "
                "blocks outside and Q blocks inside, so each tile must read O_i, l_i, m_i from HBM, rescale, and write "
                "them back.")
    st.latex(r"O_i \leftarrow \operatorname{diag}(\ell_i^{\mathrm{new}})^{-1}\Big(\operatorname{diag}(\ell_i)\,"
             r"e^{m_i - m_i^{\mathrm{new}}} O_i + e^{\tilde m_{ij} - m_i^{\mathrm{new}}}\, \tilde P_{ij} V_j\Big)")
    st.markdown(f"**5. {LOOP_ORDER_LABELS[Q_OUTER]} defers the division.** FlashAttention-2 swaps the loops: a Q "
                "block stays on chip for its whole row of tiles, O_i is accumulated unnormalised and divided by l once "
                "at the end, and only the logsumexp L_i is saved for the backward pass.")
    st.latex(r"\tilde O_i \leftarrow \operatorname{diag}(e^{m_i^{\mathrm{old}} - m_i})\, \tilde O_i + "
             r"\tilde P_{ij} V_j, \qquad O_i = \operatorname{diag}(\ell_i)^{-1} \tilde O_i, \quad "
             r"L_i = m_i + \log \ell_i")
    st.markdown("**6. Why it is faster: HBM traffic.** GPUs compute far faster than they move data. Standard "
                "attention writes S and P to HBM and reads them back; FlashAttention moves Q, K, V a few times "
                "instead. With SRAM of M elements (FA1, Theorem 2):")
    st.latex(r"\text{standard: } \Theta(N d + N^2) \qquad \text{FlashAttention: } \Theta\!\left("
             r"\frac{N^2 d^2}{M}\right) \text{ HBM accesses}")
