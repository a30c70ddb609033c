"""The Training view's slide for the lesson (flashviz.app.slides): what each implementation keeps for the backward
pass, as the step's check computed it (flashviz.views.train.claims.training_recompute). The view's own charts are
the shared sweep figures (flashviz/figures/plots.py). Plotly only: no torch, no streamlit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from flashviz.figures.slide import slide_bars
from flashviz.figures.style import impl_color
from flashviz.units import format_bytes
from flashviz.vocab import FLASH2, NAIVE

if TYPE_CHECKING:  # the settings' fields only
    import plotly.graph_objects as go

    from flashviz.views.train.settings import TrainSettings


def train_picture(s: TrainSettings, v: Mapping[str, Any]) -> go.Figure:
    """What each keeps for the backward pass at the largest N: P against the logsumexp L (log scale)."""
    kept = [v["p_bytes"], v["lse_bytes"]]
    return slide_bars(["naive: P", "FlashAttention: L"], kept, [format_bytes(b) for b in kept],
                      [impl_color(NAIVE), impl_color(FLASH2)], title=f"Kept for the backward pass at N = {v['n']:,}",
                      subtitle=f"besides O, which both keep; B = {v['batch']}, H = {v['heads']}, {v['dtype']}",
                      y_title="bytes (log)", log=True)
