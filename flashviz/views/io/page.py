"""The "IO model" view: HBM accesses against on-chip memory M for standard attention and both flash loop orders,
with the formulas of FA1's Theorem 2 and real GPUs' SRAM per SM on the M axis. A model, not a measurement: it runs
at once, no button.

Widgets -> cached iomodel.hbm_vs_memory -> flashviz.figures.plots.hbm_vs_memory_figure. What the page says about
each curve is read off the same numbers (curve_story), so it is true at whatever settings are shown.
"""

from __future__ import annotations

import streamlit as st

from flashviz.figures.plots import hbm_vs_memory_figure
from flashviz.kit.drawing import show_figure
from flashviz.model.iomodel import hbm_vs_memory
from flashviz.model.roofline import sram_marks
from flashviz.views.io.sentences import curve_story
from flashviz.views.io.settings import IOSettings
from flashviz.vocab import ALGORITHMS, DTYPE_BYTES, KV_OUTER, Q_OUTER

M_EXPONENTS = range(10, 23)  # on-chip memory M = 2^10 .. 2^22 elements (4 KiB .. 16 MiB of fp32)
TILE_RULES = {KV_OUTER: "tile rule: Bc = ⌈M / 4d⌉, Br = min(Bc, d)",
              Q_OUTER: "tile rule: Br = ⌈M / 4d⌉, Bc = min(Br, d)"}


cached_hbm_vs_memory = st.cache_data(hbm_vs_memory, show_spinner=False, max_entries=64)


def io_model_ui(s: IOSettings) -> None:
    """Draw the view for settings s: the chart first, then what it shows and the formulas."""
    st.markdown("GPUs compute much faster than they move data, so attention's speed is set by its **traffic to and "
                "from HBM**. This model counts it, tile by tile, against the on-chip memory **M** (SRAM) that sets "
                "the tile sizes: more SRAM, bigger tiles, fewer passes over HBM.")
    ms = tuple(2**e for e in M_EXPONENTS)
    shared = {"algorithms": ALGORITHMS, "batch": s.batch, "heads": s.heads, "dtype_bytes": DTYPE_BYTES[s.dtype]}
    df = cached_hbm_vs_memory(ms, s.n, s.d, causal=s.causal, window=s.window, **shared)
    masked = s.causal or s.window is not None
    unmasked = cached_hbm_vs_memory(ms, s.n, s.d, **shared) if masked else None  # the same without the mask
    show_figure(hbm_vs_memory_figure(
        df, n=s.n, d=s.d, sram_marks=sram_marks(s.dtype), curve_notes=TILE_RULES, ghost=unmasked,
        explanation=f"{_mask_text(s)}" + ("; pale dashed: the same without the mask" if masked else "")
                    + f"; dotted verticals: shared memory per SM of real GPUs, in {s.dtype} elements"),
        key="io_hbm_vs_m")
    st.markdown(f"**What the curves do here** ({_mask_text(s)}, B = {s.batch}, H = {s.heads}):\n"
                + "\n".join(f"- {line}" for line in curve_story(df, s.n, s.d, unmasked)))
    st.markdown("Each loop order picks its tiles from M: FA1 (Algorithm 1) Bc = ⌈M / 4d⌉, Br = min(Bc, d); FA2 "
                "gives the large size to its outer block, Br = ⌈M / 4d⌉, Bc = min(Br, d), with the same SRAM budget. "
                "FA1's Theorem 2 bounds the accesses (the dotted lines: the order terms with the constants dropped, "
                "so compare slopes, not heights):")
    st.latex(r"\begin{aligned}\text{standard attention: }& \Theta(N d + N^2) \\ \text{FlashAttention: }& "
             r"\Theta\!\left(\frac{N^2 d^2}{M}\right),\quad d \le M \le N d \end{aligned}")
    st.markdown(f"M runs from {ms[0]:,} to {ms[-1]:,} elements. Hover a curve for its tile sizes at each M.")
    with st.expander("The numbers"):
        st.dataframe(df, hide_index=True)


def _mask_text(s: IOSettings) -> str:
    mask = "causal" if s.causal else "no causal mask"
    return mask + ("" if s.window is None else f", window {s.window}")
