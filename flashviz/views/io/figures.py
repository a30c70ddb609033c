"""The IO model view's slide for the lesson (flashviz.app.slides): HBM accesses against the on-chip memory M, the
curves the step's check read (flashviz.views.io.claims.io_passes). The view's own chart is the shared
`hbm_vs_memory_figure` (flashviz/figures/plots.py), drawn here at a slide's size. Plotly only: no torch, no streamlit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from flashviz.figures.plots import hbm_vs_memory_figure
from flashviz.figures.slide import SLIDE_FIGURE_PX

if TYPE_CHECKING:  # the settings' fields only
    import plotly.graph_objects as go

    from flashviz.views.io.settings import IOSettings


def io_picture(s: IOSettings, v: Mapping[str, Any]) -> go.Figure:
    """The IO model's HBM accesses against M: the flash curves halving per doubling, flat from 4dN."""
    fig = hbm_vs_memory_figure(v["curves"], n=s.n, d=s.d)
    fig.update_layout(height=SLIDE_FIGURE_PX, margin={"l": 80, "r": 20, "t": 70, "b": 60},
                      title={"text": f"HBM accesses vs on-chip memory M, N = {s.n:,}"},
                      legend={"orientation": "v", "x": 0.01, "y": 0.01, "xanchor": "left", "yanchor": "bottom",
                              "font": {"size": 13}})
    return fig
