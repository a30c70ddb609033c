"""The "Block size" tab: measured time and modelled HBM traffic of the tiled kernels against the tile size at a
fixed N, with naive attention and SDPA as reference lines (the counterpart of FA1's Figure 2, right).

Widgets -> jobs.block_sweep (cached run_block_sweep under the timing lock) -> flashviz.figures.plots.block_sweep_figure.
"""

from __future__ import annotations

import streamlit as st

from flashviz.figures.plots import block_sweep_figure
from flashviz.ui import jobs
from flashviz.ui.common import not_run_ui, run_button_ui, show_figure
from flashviz.ui.state import Settings
from flashviz.ui.widgets import draw


def block_size_ui(s: Settings) -> None:
    """Draw the tab for settings s."""
    st.markdown(
        f"At a fixed **N = {s.n}** (sidebar), how does the tile size Br = Bc change the run time and the modelled "
        "HBM traffic? Bigger tiles mean fewer trips to HBM (K and V are re-read once per Q block in FA2, O once per "
        "K/V block in FA1) until a tile no longer fits in on-chip memory. On a CPU, small tiles also pay Python's "
        "per-tile overhead. Dotted lines: naive attention and SDPA at the same N, for reference."
    )
    draw("blocks", st)
    if not s.blocks:
        st.error("Choose at least one block size.")
        return
    big = [b for b in s.blocks if b >= s.n]
    if big:
        st.caption(f"Block sizes {', '.join(map(str, big))} are at least N = {s.n}: one tile covers the whole "
                   "sequence, so they all run the same single tile and their points come out flat. Raise N in the "
                   "sidebar to see the trade-off.")
    smallest = min(s.blocks)
    problem = jobs.work_guard((s.n,), d=s.d, br=smallest, bc=smallest, batch=s.batch, heads=s.heads, reps=s.reps,
                              n_impls=2 * len(s.blocks) + 2, dtype=s.dtype)
    if problem:
        st.error(problem)
        return
    args = (s.n, s.blocks, s.d, s.causal, s.window, s.batch, s.heads, s.dtype, s.device, s.threads, s.reps)
    result = run_button_ui("block", jobs.block_sweep, args, label="Run block-size sweep", title="Block-size sweep",
                           help=f"Times flash and flash2 at N = {s.n} for every block size ({s.reps} repeats each).",
                           idle="Press **Run block-size sweep** to measure these settings.")
    if result is None:
        return
    tiled, reference = result
    not_run_ui(tiled)
    not_run_ui(reference)
    show_figure(block_sweep_figure(tiled, reference=reference), key="block_figure")
    with st.expander("All measurements"):
        st.dataframe(tiled, hide_index=True)
