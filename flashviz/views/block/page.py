"""The "Block size" view: measured time and modelled HBM traffic of the tiled kernels against the tile size at a
fixed N, with naive attention and SDPA as reference lines (the counterpart of FA1's Figure 2, right).

Widgets -> jobs.block_sweep (cached run_block_sweep under the timing lock) -> flashviz.figures.plots.block_sweep_figure.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from flashviz.figures.plots import block_sweep_figure
from flashviz.kit import jobs
from flashviz.kit.drawing import csv_download_ui, not_run_ui, ran_with_ui, show_figure
from flashviz.kit.runs import run_button_ui
from flashviz.kit.widgets import draw
from flashviz.limits import LIVE_TIME_BUDGET_S
from flashviz.views.bench.sentences import block_verdicts, repeats_said, short, slower_by, slower_why, tiles_md
from flashviz.views.block.settings import BlockSettings
from flashviz.vocab import NAIVE

RAN_WITH = ("n", "d", "causal", "window", "dtype", "batch", "heads", "device", "threads", "reps", "sure")


def intro_md(n: int) -> str:
    """What the view asks, shown until a run answers it."""
    return (f"At a fixed **N = {n}** (sidebar), how does the tile size Br = Bc change the run time and the modelled "
            "HBM traffic? Bigger tiles mean fewer trips to HBM (K and V are re-read once per Q block in FA2, O once "
            "per K/V block in FA1) until a tile no longer fits in on-chip memory. On a CPU, small tiles also pay "
            "Python's per-tile overhead. Dotted lines: naive attention and SDPA at the same N, for reference.")


def block_size_ui(s: BlockSettings) -> None:
    """Draw the view for settings s."""
    c1, c2, c3 = st.columns([2.6, 1, 1.5], vertical_alignment="center")
    draw("blocks", c1)
    draw("reps", c2)
    draw("sure", c3)
    if not s.blocks:
        st.error("Choose at least one block size.")
        return
    big = [b for b in s.blocks if b >= s.n]
    if big:
        st.markdown(f"Block sizes {', '.join(map(str, big))} are at least N = {s.n}: one tile covers the whole "
                    "sequence, so they all run the same single tile and their points come out flat. Raise N in the "
                    "sidebar to see the trade-off.")
    smallest = min(s.blocks)
    problem = jobs.work_guard((s.n,), d=s.d, br=smallest, bc=smallest, batch=s.batch, heads=s.heads, reps=s.reps,
                              n_impls=2 * len(s.blocks) + 2, dtype=s.dtype)
    if problem:
        st.error(problem)
        return
    args = (s.n, s.blocks, s.d, s.causal, s.window, s.batch, s.heads, s.dtype, s.device, s.threads, s.reps, s.sure)
    result = run_button_ui("block", jobs.block_sweep, args, label="Run block-size sweep", title="Block-size sweep",
                           help=f"Times both loop orders at N = {s.n} for every block size ({repeats_said(s)} each).",
                           idle=f"{intro_md(s.n)} Press **Run block-size sweep** to measure these settings.",
                           estimate=jobs.block_estimate(s), budget_s=LIVE_TIME_BUDGET_S)
    if result is None:
        return
    tiled, reference = result
    ran_with_ui(s, RAN_WITH)
    not_run_ui(pd.concat([tiled, reference], ignore_index=True), BlockSettings, here=("reps", "sure"))
    show_figure(block_sweep_figure(tiled, reference=reference), key="block_figure")
    _slower_caption_ui(s, tiled, reference)
    rows = pd.concat([tiled, reference], ignore_index=True)
    rows.attrs = tiled.attrs  # the run's context
    csv_download_ui(rows, "flashviz-block-size.csv", "block_csv", "Every row of the block-size sweep, one per "
                    "(implementation, block size), and the naive and SDPA reference rows, with the run's context.",
                    report=jobs.block_sweep.report_of(args))
    with st.expander("All measurements"):
        st.dataframe(tiled, hide_index=True)


def _slower_caption_ui(s: BlockSettings, tiled: pd.DataFrame, reference: pd.DataFrame) -> None:
    """Say why, only where a tiled point is slower than naive at the same N beyond the noise (block_verdicts)."""
    verdicts = block_verdicts(tiled, reference)
    slow = [(b, v) for b, v in verdicts if v.faster == short(NAIVE)]
    if verdicts:
        st.markdown(f"**Naive against each tile size at N = {s.n}**\n\n" + tiles_md(verdicts))
    if not slow:
        return
    cases = ", ".join(f"{v.slower} at {b} ({slower_by(v)})" for b, v in slow)
    st.markdown(f"**Why are some tiled points above the naive line?** Slower than naive beyond the noise: {cases}. "
                f"{slower_why(s.n, min(b for b, _ in slow), s.heads, s.batch, 'the modelled traffic panel above')}")
