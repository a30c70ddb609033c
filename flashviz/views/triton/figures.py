"""The Triton view's pictures, from plain data: the kernel's source with the running line marked (`source_html`,
our own markup), the launch grid coloured by the STAGE each program loaded each K block in (`record_figure`, from the
kernel's record), the SMEM budget per GPU (`smem_figure`) and the lesson's slide (`triton_picture`). No torch."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go

from flashviz.figures.palette import BASE_FONT_PX, CURRENT_TILE_COLOR, REFERENCE_COLOR, TILE_COLORS
from flashviz.figures.slide import slide_bars
from flashviz.figures.style import style_figure
from flashviz.units import format_bytes
from flashviz.vocab import FULL, PARTIAL, SKIPPED

if TYPE_CHECKING:
    from flashviz.views.triton.settings import TritonSettings

STAGE_COLORS = {0: TILE_COLORS[SKIPPED], 1: TILE_COLORS[FULL], 2: TILE_COLORS[PARTIAL], 3: TILE_COLORS[FULL]}
STAGE_WORDS = {0: "not loaded", 1: "STAGE 1: off the band, no mask", 2: "STAGE 2: on the band, causal mask",
               3: "STAGE 3: not causal, no mask"}
MAP_HEIGHT_PX = 420
LINE_BG = "#FFF3B0"  # the running line's background (pale yellow)
CODE_STYLE = "font-family:monospace;font-size:12px;line-height:1.3;white-space:pre;"
SOURCE_LINES = 22  # lines of the kernel shown around the running one


def source_html(lines: Sequence[str], first: int, last: int, current: int, note: str) -> str:
    """The kernel's lines first..last (1-based) as a code block, line `current` marked, `note` under it.

    Example:
        >>> out = source_html(["a = 1", "b = a < 2"], 1, 2, 2, "now")
        >>> "b = a &lt; 2" in out and out.count("fv-run") == 1
        True
    """
    rows = []
    for number in range(first, last + 1):
        text = html.escape(lines[number - 1]) or " "
        style = CODE_STYLE + (f"background:{LINE_BG};font-weight:bold;" if number == current else "")
        mark = ' class="fv-run"' if number == current else ""
        rows.append(f'<div{mark} style="{style}"><span style="color:#888">{number:4d}  </span>{text}</div>')
    return (f'<div class="fv-source" style="border:1px solid #ddd;padding:4px;overflow-x:auto">{"".join(rows)}</div>'
            f'<p style="margin-top:.4em">{html.escape(note)}</p>')


def window(first: int, last: int, current: int, size: int = SOURCE_LINES) -> tuple[int, int]:
    """The lines first..last cut to `size` lines around `current` (the running line stays in sight).

    Example:
        >>> window(1, 100, 50, 10), window(1, 100, 2, 10), window(1, 8, 5, 10)
        ((45, 54), (1, 10), (1, 8))
    """
    lo = max(first, min(current - size // 2, last - size + 1))
    return lo, min(last, lo + size - 1)


def record_figure(loaded: Sequence[Sequence[tuple[int, int]]], n_k_blocks: int, followed: int,
                  current: tuple[int, int] | None = None) -> go.Figure:
    """The launch grid: one row per program (pid_m), one column per K block, each cell coloured by the STAGE the
    program loaded it in (grey: not loaded), with its place in the program's loop as text.

    Args:
        loaded: per program, (k_block, stage) in load order (the kernel's record, head 0).
        n_k_blocks: Tc.  followed: the program the source follows (outlined).
        current: (pid_m, k_block) of the tile the source's line works on, or None.
    Returns:
        A heatmap Figure.

    Example:
        >>> fig = record_figure([[(0, 2)], [(0, 1), (1, 2)]], 2, 1)
        >>> [list(r) for r in fig.data[0].z], [list(r) for r in fig.data[0].text]
        ([[2, 0], [1, 2]], [['1', ''], ['1', '2']])
    """
    z = [[0] * n_k_blocks for _ in loaded]
    text = [[""] * n_k_blocks for _ in loaded]
    for i, row in enumerate(loaded):
        for order, (j, stage) in enumerate(row):
            z[i][j], text[i][j] = stage, str(order + 1)
    stages = sorted(STAGE_COLORS)
    scale = []
    for k, s in enumerate(stages):
        scale += [[k / len(stages), STAGE_COLORS[s]], [(k + 1) / len(stages), STAGE_COLORS[s]]]
    words = [[STAGE_WORDS[s] for s in row] for row in z]
    fig = go.Figure(go.Heatmap(
        z=z, text=text, customdata=words, texttemplate="%{text}", textfont={"size": BASE_FONT_PX - 4},
        zmin=-0.5, zmax=len(stages) - 0.5, colorscale=scale, showscale=False, xgap=1, ygap=1, name="record",
        hovertemplate="program pid_m = %{y}, K block %{x}<br>%{customdata}<br>loaded %{text}.<extra></extra>"))
    for s in sorted({stage for row in loaded for _, stage in row}):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=STAGE_WORDS[s].split(":")[0],
                                 marker={"size": 14, "symbol": "square", "color": STAGE_COLORS[s]}))
    fig.add_shape(type="rect", x0=-0.5, x1=n_k_blocks - 0.5, y0=followed - 0.5, y1=followed + 0.5,
                  line={"color": "black", "width": 3})
    if current is not None:
        i, j = current
        fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5,
                      line={"color": CURRENT_TILE_COLOR, "width": 4})
    style_figure(fig, title="Kernel's record", x_title="K block (BLOCK_N keys)",
                 y_title="program pid_m (Q block)")
    fig.update_yaxes(autorange="reversed", dtick=1)
    fig.update_xaxes(dtick=1 if n_k_blocks <= 16 else None)
    fig.update_layout(height=MAP_HEIGHT_PX, legend={"orientation": "h", "y": -0.32, "x": 0},
                      margin={"b": 120})
    return fig


def smem_figure(gpus: Sequence[str], need: int, limits: Sequence[int]) -> go.Figure:
    """The forward's shared memory per program against each GPU's limit.

    Example:
        >>> list(smem_figure(["A100"], 100, [200]).data[0].y)
        [100]
    """
    colors = [TILE_COLORS[FULL] if need <= lim else REFERENCE_COLOR for lim in limits]
    fig = go.Figure(go.Bar(x=list(gpus), y=[need] * len(gpus), name="needed", marker={"color": colors},
                           text=[format_bytes(need)] * len(gpus), textposition="inside", insidetextanchor="start",
                           hovertemplate="%{x}: needs %{text}<extra></extra>"))
    fig.add_trace(go.Scatter(x=list(gpus), y=list(limits), mode="markers", name="limit per program",
                             marker={"symbol": "line-ew", "size": 60, "line": {"width": 4, "color": "black"}},
                             text=[format_bytes(x) for x in limits],
                             hovertemplate="%{x}: at most %{text}<extra></extra>"))
    style_figure(fig, title="SMEM per program", x_title="GPU (fp16)", y_title="bytes")
    fig.update_xaxes(type="category")  # style_figure sets a linear axis
    fig.update_yaxes(rangemode="tozero", range=[0, max(need, *limits) * 1.15])
    fig.update_layout(height=MAP_HEIGHT_PX, legend={"orientation": "h", "y": -0.3, "x": 0}, margin={"b": 120})
    return fig


def triton_picture(s: TritonSettings, v: Mapping[str, Any]) -> go.Figure:
    """The lesson's slide: K blocks each program of the Triton kernel loaded, its record against the schedule's."""
    blocks = v["k_blocks"]
    names = [f"pid_m {i}" for i in range(len(blocks))]
    texts = [f"{b} (schedule {w})" for b, w in zip(blocks, v["schedule_k_blocks"], strict=True)]
    return slide_bars(names, blocks, texts, [TILE_COLORS[FULL]] * len(blocks),
                      title="K blocks each Triton program loaded",
                      subtitle=f"read from Triton's interpreter; {v['tiles']} tiles, as tile_schedule's "
                               f"{v['schedule_tiles']}", y_title="K blocks loaded")
