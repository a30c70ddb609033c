"""The "IO model" tab: HBM accesses against on-chip memory M for standard attention and both flash loop orders,
with the formulas of FA1's Theorem 2. A model, not a measurement: it runs at once, no button.

Widgets -> cached iomodel.hbm_vs_memory -> flashviz.figures.plots.hbm_vs_memory_figure.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from flashviz.figures.plots import hbm_vs_memory_figure
from flashviz.limits import TILES_MAX, tiles_per_call  # masked schedules are counted tile by tile
from flashviz.model.iomodel import fa1_block_sizes, hbm_vs_memory
from flashviz.ui.common import show_figure
from flashviz.ui.state import Settings
from flashviz.vocab import DTYPE_BYTES

M_EXPONENTS = range(10, 23)  # on-chip memory M = 2^10 .. 2^22 elements (4 KiB .. 16 MiB of fp32)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_hbm_vs_memory(ms: tuple[int, ...], n: int, d: int, causal: bool, window: tuple[int, int] | None,
                         batch: int, heads: int, dtype_bytes: int) -> pd.DataFrame:
    return hbm_vs_memory(ms, n, d, algorithms=("naive", "kv_outer", "q_outer"), causal=causal, window=window,
                         batch=batch, heads=heads, dtype_bytes=dtype_bytes)


def io_model_ui(s: Settings) -> None:
    """Draw the tab for settings s."""
    st.markdown(
        "GPUs compute much faster than they move data, so attention's speed is set by its traffic to and from HBM "
        "(the big, slow memory). This model counts that traffic, tile by tile, from the same schedule the kernels "
        "run. FlashAttention-1 picks its tiles from the on-chip memory M (SRAM): Bc = ⌈M / 4d⌉, Br = min(Bc, d). "
        "More SRAM means bigger tiles and fewer passes over K and V."
    )
    st.latex(r"\text{standard attention: } \Theta(N d + N^2) \qquad "
             r"\text{FlashAttention: } \Theta\!\left(\frac{N^2 d^2}{M}\right) \text{ HBM accesses, } d \le M \le N d")
    st.markdown("Standard attention writes S and P (N² each) and reads them back, whatever M is. FlashAttention-1 "
                "(kv_outer) streams Q and O once per K/V block: N/Bc passes of about N·d each, and Bc = ⌈M / 4d⌉ "
                "grows with M, so its traffic falls as N²d²/M until one block holds every key. FlashAttention-2 "
                "(q_outer) streams K and V once per Q block: N/Br passes; under FA1's rule Br = min(Bc, d) stops "
                "growing at d, so its curve flattens at about 2N² here (FA2 itself picks larger Br on a GPU).")
    masked = s.causal or s.window is not None
    ms = tuple(2**e for e in M_EXPONENTS if not masked or tiles_per_call(s.n, *fa1_block_sizes(2**e, s.d)) <= TILES_MAX)
    if not ms:
        st.error(f"N = {s.n} with a mask needs too many tiles at every M to count live; lower N.")
        return
    df = cached_hbm_vs_memory(ms, s.n, s.d, s.causal, s.window, s.batch, s.heads, DTYPE_BYTES[s.dtype])
    show_figure(hbm_vs_memory_figure(df, n=s.n, d=s.d), key="io_hbm_vs_m")
    st.caption(f"B = {s.batch}, H = {s.heads}, {'causal' if s.causal else 'no causal mask'}"
               f"{'' if s.window is None else f', window {s.window}'}; M from {ms[0]:,} to {ms[-1]:,} elements. "
               "Dashed: the order terms of Theorem 2 (constants dropped), so compare slopes, not heights.")
    with st.expander("The numbers"):
        st.dataframe(df, hide_index=True)
