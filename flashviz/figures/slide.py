"""A lesson slide's picture: its size and finish, shared by every view's slide picture (the `*_picture` functions of
flashviz/views/<view>/figures.py, which flashviz.app.slides maps to the lesson's steps).

A slide holds one small plotly figure, SLIDE_FIGURE_PX tall, beside the step's claim and numbers in a 1280 x 720
window: `finish_slide` gives a figure that size, the shared template, a title and a subtitle wrapped to the picture's
width; `slide_bars` draws a few labelled bars; `slide_tile_map` draws the tile map (flashviz.figures.tilegrid) at a
slide's size. Plotly only: no torch, no streamlit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from flashviz.figures.palette import BASE_FONT_PX
from flashviz.figures.style import SUBTITLE_LINE_PX, flashviz_template, subtitle_lines
from flashviz.figures.tilegrid import tile_map_figure
from flashviz.vocab import FLASH, FLASH2, NAIVE, SKIPPED

SLIDE_FIGURE_PX = 470  # a slide's picture: under the page's header and the step's bar, inside a 720 px window
MARGIN = {"l": 70, "r": 20, "t": 98, "b": 56}  # a slide's picture: room for the title, the subtitle with a gap under
# it (the top tick label sits there) and the axis titles
SUBTITLE_CHARS = 56  # characters of a subtitle line that fit a slide's picture (7/12 of a 1280 px page)
SHORT = {NAIVE: "naive", FLASH: "FA1", FLASH2: "FA2"}  # the charts' names of the implementations


def finish_slide(fig: go.Figure, title: str, subtitle: str, *, legend: bool = True) -> go.Figure:
    """The slide's size and type: one picture, SLIDE_FIGURE_PX tall, its legend inside the plot's top left, the
    subtitle wrapped to the slide's picture (SUBTITLE_CHARS a line)."""
    lines = subtitle_lines(subtitle, SUBTITLE_CHARS) if subtitle else ""
    fig.update_layout(template=flashviz_template(), title={"text": title}, height=SLIDE_FIGURE_PX,
                      showlegend=legend, legend={"orientation": "v", "x": 0.01, "y": 0.99, "xanchor": "left",
                                                 "yanchor": "top"},
                      title_subtitle_text=lines, title_subtitle_font_size=BASE_FONT_PX,
                      margin={**MARGIN, "t": MARGIN["t"] + SUBTITLE_LINE_PX * lines.count("<br>")})
    fig.update_xaxes(tickangle=0)  # category labels wrap with <br> instead of turning
    return fig


def slide_bars(names: Sequence[str], values: Sequence[float], texts: Sequence[str], colors: Sequence[str], *,
               title: str, subtitle: str, y_title: str, log: bool = False) -> go.Figure:
    """One bar per name, its text above it (hover: the same text), on a slide."""
    fig = go.Figure(go.Bar(x=names, y=values, text=texts, textposition="outside", marker={"color": colors},
                           cliponaxis=False, hovertemplate="%{x}: %{text}<extra></extra>"))
    fig.update_yaxes(title_text=y_title, type="log" if log else "linear", rangemode="tozero")
    return finish_slide(fig, title, subtitle, legend=False)


def slide_tile_map(status: Sequence[Sequence[str]], counts: Mapping[str, int], *, n: int, block_q: int, block_k: int,
                   title: str) -> go.Figure:
    """The tile map (one heatmap, each tile in the colour of its fate: no tile in progress over it) on a slide.

    Args:
        status: [q_block][k_block] statuses, Tr x Tc.  counts: tiles of each status.
        n: sequence length N.  block_q, block_k: Br, Bc.  title: the picture's title.
    """
    fig = tile_map_figure(status, n=n, block_q=block_q, block_k=block_k, counts=counts)
    computed = sum(counts.values()) - counts.get(SKIPPED, 0)
    finish_slide(fig, title, f"N = {n}, Br = {block_q}, Bc = {block_k}: {computed} of {sum(counts.values())} tiles "
                             "computed")
    fig.update_layout(legend={"x": 1.02, "y": 1.0, "xanchor": "left"}, margin={**MARGIN, "r": 150})
    tr, tc = len(status), len(status[0]) if status else 1
    fig.update_xaxes(dtick=max(1, round(tc / 8)))  # whole blocks only
    fig.update_yaxes(dtick=max(1, round(tr / 8)))
    return fig
