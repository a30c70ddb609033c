"""The tile map of S as a plotly heatmap: which Br x Bc tiles a mask makes full, partial or skipped, each tile in the
colour of its fate. The Masks view draws it beside its element map, and the lesson's slides (flashviz.figures.slide)
draw it for the How it works and Masks steps; the pieces both maps share (square axes, legend swatches, the layout
with the legend under the x title) are here too. Plotly and numpy only: inputs are plain lists and dicts; nothing here
imports torch or streamlit.

The animated tile map of How it works is flashviz/figures/tilemap.py (SVG, no plotly).

Legend: N sequence length, Br = block_q, Bc = block_k, Tr x Tc tiles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from flashviz.figures.palette import LEGEND_FONT_PX, TICK_FONT_PX, TILE_COLORS
from flashviz.figures.style import SUBTITLE_LINE_PX, TITLE_BLOCK_PX, flashviz_template, set_subtitle
from flashviz.vocab import FULL, PARTIAL, SKIPPED, TILE_STATUS_LABELS, TILE_STATUSES

MAP_HEIGHT_PX = 560  # element map and tile map: the same height, side by side
MAP_MARGIN = {"l": 80, "r": 20, "b": 150}  # room for the y title, and for the x title plus the legend underneath
LEGEND_Y_PX = 70  # the legend (or colour bar) starts this far below the plot area: under the x title
TILE_GAPS_MAX = 32  # tiles per side up to which the tile map leaves a gap between tiles
STATUS_CODE = {s: k for k, s in enumerate(TILE_STATUSES)}  # full 0, partial 1, skipped 2
SHORT_LABELS = {FULL: "full", PARTIAL: "partial", SKIPPED: "skipped"}  # legend of a half-width map, after a count


def square_axes(fig: go.Figure, x_title: str, y_title: str, x_range: list[float], y_range: list[float]) -> None:
    """A map's axes: fixed ranges, no grid, one unit as long on both axes (query rows downwards when y_range
    runs high to low)."""
    fig.update_xaxes(title_text=x_title, range=x_range, autorange=False, showgrid=False, zeroline=False,
                     tickfont={"size": TICK_FONT_PX}, constrain="domain")
    fig.update_yaxes(title_text=y_title, range=y_range, autorange=False, showgrid=False, zeroline=False,
                     tickfont={"size": TICK_FONT_PX}, scaleanchor="x", constrain="domain")


def swatches(fig: go.Figure, entries: Sequence[tuple[str, str]]) -> None:
    """Legend entries for a heatmap's colours (a heatmap has none of its own)."""
    for name, color in entries:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name, hoverinfo="skip", marker={
            "symbol": "square", "size": 20, "color": color, "line": {"color": "#333333", "width": 1}}))


def map_layout(fig: go.Figure, title: str, subtitle: Sequence[str]) -> None:
    """Title, one subtitle line per entry (short: the figure is half the page wide), the legend under the x title."""
    fig.update_layout(template=flashviz_template(), title={"text": title}, height=MAP_HEIGHT_PX,
                      margin=MAP_MARGIN, showlegend=True,
                      legend={"orientation": "h", "x": 0.0, "y": -LEGEND_Y_PX / map_plot_px(len(subtitle)),
                              "xanchor": "left", "yanchor": "top", "font": {"size": LEGEND_FONT_PX},
                              "itemsizing": "constant"})
    set_subtitle(fig, "<br>".join(subtitle))


def map_plot_px(subtitle_lines: int) -> float:
    """Height of the plot area (px), to place things below it in paper units."""
    return MAP_HEIGHT_PX - MAP_MARGIN["b"] - TITLE_BLOCK_PX - SUBTITLE_LINE_PX * subtitle_lines


def tile_map_figure(status: Sequence[Sequence[str]], *, n: int, block_q: int, block_k: int,
                    counts: Mapping[str, int]) -> go.Figure:
    """The tile map: which Br x Bc tiles of S the mask makes full, partial or skipped.

    Args:
        status: [q_block][k_block] statuses ("full", "partial", "skipped"), Tr x Tc.
        n: sequence length N.  block_q, block_k: Br, Bc.  counts: tiles of each status.
    Returns:
        A Figure with one heatmap (hover: the block indices, their rows and keys, the status) and legend swatches.

    Example:
        >>> fig = tile_map_figure([["partial", "skipped"], ["full", "partial"]], n=4, block_q=2, block_k=2,
        ...                       counts={"full": 1, "partial": 2, "skipped": 1})
        >>> fig.data[0].z.tolist()
        [[1, 2], [0, 1]]
    """
    tr, tc = len(status), len(status[0]) if status else 0
    z = np.array([[STATUS_CODE[s] for s in row] for row in status], dtype=np.int8).reshape(tr, tc)
    words = [[TILE_STATUS_LABELS[s] for s in row] for row in status]
    scale = []
    for s, k in STATUS_CODE.items():
        scale += [[k / len(STATUS_CODE), TILE_COLORS[s]], [(k + 1) / len(STATUS_CODE), TILE_COLORS[s]]]
    fig = go.Figure(go.Heatmap(
        z=z, text=words, zmin=-0.5, zmax=len(STATUS_CODE) - 0.5, colorscale=scale, showscale=False, name="tiles",
        xgap=1 if tc <= TILE_GAPS_MAX else 0, ygap=1 if tr <= TILE_GAPS_MAX else 0,
        hovertemplate=(f"Q block i = %{{y}} (queries from %{{y}} × {block_q})<br>"
                       f"K/V block j = %{{x}} (keys from %{{x}} × {block_k})<br>%{{text}}<extra></extra>")))
    square_axes(fig, f"K/V block j (Bc = {block_k})", f"Q block i (Br = {block_q})",
                [-0.5, tc - 0.5], [tr - 0.5, -0.5])
    fig.update_layout(plot_bgcolor="#5a5a5a")  # shows between tiles (xgap / ygap) as grid lines
    if block_q != block_k:
        fig.update_yaxes(scaleanchor=None)  # blocks of unequal size: the grid is not square in tokens either
    swatches(fig, [(f"{counts.get(s, 0)} {SHORT_LABELS[s]}", TILE_COLORS[s]) for s in TILE_STATUSES])
    total = tr * tc
    computed = total - counts.get(SKIPPED, 0)
    map_layout(fig, "Tile map", (f"{computed} of {total} tiles computed ({computed / total:.1%})",
                                 f"{tr} × {tc} tiles of {block_q} × {block_k}"))
    return fig
