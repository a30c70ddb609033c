"""The Benchmark view's slide for the lesson (flashviz.app.slides): peak memory against N as the step's check measured
it (flashviz.views.bench.claims.memory_growth). The view's own charts are the shared sweep figures
(flashviz/figures/plots.py). Plotly only: no torch, no streamlit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go

from flashviz.figures.slide import SHORT, finish_slide
from flashviz.figures.style import MIB, impl_color
from flashviz.units import format_bytes
from flashviz.vocab import FLASH, NAIVE

if TYPE_CHECKING:  # the settings' fields only
    from flashviz.views.bench.settings import BenchSettings


def memory_picture(s: BenchSettings, v: Mapping[str, Any]) -> go.Figure:
    """Peak memory against N, log-log, as the check measured it: naive's slope N², the tiled kernels' N."""
    fig = go.Figure()
    for impl, peaks in v["peaks"].items():
        ns = sorted(peaks)
        fig.add_trace(go.Scatter(x=ns, y=[peaks[n] / MIB for n in ns], mode="lines+markers+text",
                                 name=SHORT.get(impl, impl), line={"color": impl_color(impl), "width": 3},
                                 text=["" if n != ns[-1] or impl == FLASH else format_bytes(peaks[n]) for n in ns],
                                 textposition="middle left" if impl == NAIVE else "top left",
                                 textfont={"color": impl_color(impl)},
                                 hovertemplate="N = %{x}<br>%{y:.2f} MiB<extra></extra>"))
    fig.update_xaxes(title_text="sequence length N", type="log", tickvals=sorted(v["peaks"][NAIVE]))
    fig.update_yaxes(title_text="peak memory (MiB)", type="log", dtick=1)  # decades: no crowded minor labels
    return finish_slide(fig, "Peak memory vs sequence length, measured here",
                        f"per doubling of N: naive {v['naive_growth']:.1f}×, FA1 {v['fa1_growth']:.1f}×, "
                        f"FA2 {v['fa2_growth']:.1f}×")
