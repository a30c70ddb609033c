"""Figures of the Masks view: the element-level mask, the BlockMask a FlexAttention user sees, what a score_mod does to
a score, the timed runs, and the lesson's slide of the mask's tiles. Plotly only: inputs are plain lists, numpy arrays
and dicts (from flashviz.views.masks.data); nothing here imports torch or streamlit.

The element map is drawn at the same size as the tile map beside it (flashviz.figures.tilegrid, which the slides draw
too), query rows downwards (row i = query i), so the band a mask leaves visible lines up with the tiles it makes full
or partial.

Legend: N sequence length, Br = block_q, Bc = block_k, Tr x Tc tiles, H heads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz.figures.palette import AXIS_TITLE_FONT_PX, LEGEND_FONT_PX, LINE_PX, TICK_FONT_PX
from flashviz.figures.report import TABLE_FONT_PX, TABLE_HEADER_PX, TABLE_ROW_PX, TABLE_SLACK_PX
from flashviz.figures.slide import slide_tile_map
from flashviz.figures.style import (
    MIB,
    MS_PER_S,
    flashviz_template,
    set_subtitle,
    style_figure,
)
from flashviz.figures.tilegrid import LEGEND_Y_PX, map_layout, map_plot_px, square_axes, swatches
from flashviz.vocab import DENSE, MASKED, UNMASKED

if TYPE_CHECKING:  # the settings' fields only
    from flashviz.views.masks.settings import MasksSettings

VISIBLE_COLOR = "#0072B2"  # a visible (query, key) pair: blue (Okabe-Ito)
MASKED_COLOR = "#FFFFFF"  # a masked pair: white
TILE_LINE_COLOR = "#AAAAAA"  # tile boundaries drawn over the element map
TILE_LINES_MAX = 16  # tiles per side up to which the element map shows the tile boundaries (denser hides the mask)
INDICES_SHOWN = 6  # index entries listed per BlockMask row before "..."
TABLE_COLUMNS = (1.2, 1.5, 3.2, 2.1, 3.2)  # relative column widths of the BlockMask table
TABLE_WIDTH_PX = 740  # the table's width on a 1280 px page (the main column)
TABLE_CHAR_PX = 10.5  # width of one character at TABLE_FONT_PX (20 px), generous for digits and commas
TABLE_LINE_PX = 24  # one more line of wrapped cell text
HEADS_DRAWN = 8  # ALiBi: heads drawn as lines (the slopes of the rest lie between)
HEAD_COLORS = ("#0072B2", "#009E73", "#D55E00", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")


def element_mask_figure(fraction: np.ndarray, *, n: int, cell: int, visible_fraction: float,
                        tile_q: int | None = None, tile_k: int | None = None) -> go.Figure:
    """The element-level mask: query i (rows, downwards) x key j (columns), blue where i may attend to j.

    Args:
        fraction: (cells, cells) fraction of visible elements per cell (0 or 1 when cell = 1).
        n: sequence length N.  cell: elements per cell side (1 = one pixel per element).
        visible_fraction: visible elements / N^2 (for the subtitle).
        tile_q, tile_k: Br and Bc; tile boundaries are drawn when the grid has at most TILE_LINES_MAX tiles per side.
    Returns:
        A Figure with one heatmap (hover: position and the fraction visible) and, for an exact map, legend swatches.

    Example:
        >>> fig = element_mask_figure(np.eye(4), n=4, cell=1, visible_fraction=0.25)
        >>> fig.data[0].type, fig.layout.yaxis.range
        ('heatmap', (3.5, -0.5))
    """
    cells = fraction.shape[0]
    centers = [k * cell + (cell - 1) / 2 for k in range(cells)]  # token position at each cell's centre
    exact = cell == 1
    where = ("query i = %{y}, key j = %{x}" if exact else
             f"queries and keys around i ≈ %{{y:.0f}}, j ≈ %{{x:.0f}} (a {cell} × {cell} cell)")
    fig = go.Figure(go.Heatmap(
        z=fraction, x=centers, y=centers, zmin=0.0, zmax=1.0, colorscale=[[0, MASKED_COLOR], [1, VISIBLE_COLOR]],
        showscale=not exact, name="mask",
        colorbar={"title": {"text": "visible", "side": "top", "font": {"size": LEGEND_FONT_PX}}, "tickformat": ".0%",
                  "orientation": "h", "len": 0.8, "x": 0.0, "xanchor": "left", "y": -LEGEND_Y_PX / map_plot_px(2),
                  "yanchor": "top", "thickness": 14, "ypad": 2, "tickfont": {"size": TICK_FONT_PX}},
        hovertemplate=f"{where}<br>visible: %{{z:.0%}}<extra></extra>"))
    edge = [-0.5, n - 0.5]
    square_axes(fig, "key position j", "query position i", edge, edge[::-1])
    if tile_q and tile_k and -(-n // tile_q) <= TILE_LINES_MAX and -(-n // tile_k) <= TILE_LINES_MAX:
        line = {"color": TILE_LINE_COLOR, "width": 1}
        for x in range(tile_k, n, tile_k):
            fig.add_shape(type="line", x0=x - 0.5, x1=x - 0.5, y0=-0.5, y1=n - 0.5, line=line, layer="above")
        for y in range(tile_q, n, tile_q):
            fig.add_shape(type="line", y0=y - 0.5, y1=y - 0.5, x0=-0.5, x1=n - 0.5, line=line, layer="above")
    if exact:
        swatches(fig, (("visible", VISIBLE_COLOR), ("masked", MASKED_COLOR)))
    resolution = "one pixel per element" if exact else f"{cell} × {cell} elements per pixel"
    map_layout(fig, "Element mask", (f"{visible_fraction:.1%} of the {n}² pairs visible", resolution))
    if not exact:
        fig.update_layout(showlegend=False)
    return fig


def _indices(values: Sequence[int]) -> str:
    shown = ", ".join(str(v) for v in values[:INDICES_SHOWN])
    more = len(values) - INDICES_SHOWN
    return f"[{shown}{f', ... {more} more' if more > 0 else ''}]"


def _extra_lines(text: str, column: float) -> int:
    """Lines beyond the first that `text` wraps to in a column of relative width `column` (an estimate that errs
    on the long side: a table cut short hides its last rows, a little white space hides nothing)."""
    chars = int(column / sum(TABLE_COLUMNS) * TABLE_WIDTH_PX / TABLE_CHAR_PX)
    return max(0, -(-len(text) // max(chars, 1)) - 1)


def block_mask_table_figure(rows: Sequence[Mapping[str, object]], *, n_q_blocks: int) -> go.Figure:
    """The BlockMask's tensors at (b, h) = (0, 0) for the first query blocks, as FlexAttention stores them.

    Args:
        rows: one dict per query block with q_block, kv_num_blocks, kv_indices (the valid prefix only),
            full_kv_num_blocks, full_kv_indices (as block_mask_rows gives them).
        n_q_blocks: Tr, how many query blocks the BlockMask has in all (the table shows the first len(rows)).
    Returns:
        A plotly table figure.

    Example:
        >>> block_mask_table_figure([{"q_block": 0, "kv_num_blocks": 1, "kv_indices": [0],
        ...     "full_kv_num_blocks": 0, "full_kv_indices": []}], n_q_blocks=2).data[0].cells.values[2]
        ['[0]']
    """
    header = ["query<br>block i", "kv_num_<br>blocks", "kv_indices<br>(the first kv_num)", "full_kv_num_<br>blocks",
              "full_kv_indices<br>(the first full_num)"]
    cells = [[str(r["q_block"]) for r in rows], [str(r["kv_num_blocks"]) for r in rows],
             [_indices(r["kv_indices"]) for r in rows], [str(r["full_kv_num_blocks"]) for r in rows],
             [_indices(r["full_kv_indices"]) for r in rows]]
    fig = go.Figure(go.Table(
        columnwidth=list(TABLE_COLUMNS),
        header={"values": header, "fill_color": "#DDE6F0", "font": {"size": TABLE_FONT_PX}, "align": "left",
                "height": TABLE_HEADER_PX},
        cells={"values": cells, "fill_color": [["white", "#F4F6F9"] * (len(rows) // 2 + 1)],
               "font": {"size": TABLE_FONT_PX}, "align": "left", "height": TABLE_ROW_PX}))
    wrapped = sum(max(_extra_lines(cells[c][r], TABLE_COLUMNS[c]) for c in (2, 4)) for r in range(len(rows)))
    subtitle = [f"[0, 0, i] for the first {len(rows)} of {n_q_blocks} query blocks i.",
                "kv_*: partial blocks (mask_mod applied inside); full_kv_*: full",
                "blocks (no mask work); blocks in neither list are skipped."]
    fig.update_layout(template=flashviz_template(), title={"text": "BlockMask tensors"})
    set_subtitle(fig, "<br>".join(subtitle))
    top = fig.layout.margin.t
    fig.update_layout(margin={"l": 10, "r": 10, "b": 10, "t": top},
                      height=top + TABLE_HEADER_PX + TABLE_ROW_PX * len(rows) + TABLE_LINE_PX * wrapped
                      + TABLE_SLACK_PX + 10)
    return fig


def score_mod_figure(curves: Mapping[str, Sequence[float]], *, kind: str, heads: int = 1, cap: float = 0.0,
                     n: int = 0) -> go.Figure:
    """What the score_mod does: softcap's curve against the identity, or ALiBi's bias against key offset per head.

    Args:
        curves: score_curves output: {"score", "capped"} for softcap, {"offset", "head 0", ...} for ALiBi.
        kind: "softcap" or "alibi".  heads: H (ALiBi).  cap: the cap (softcap).  n: N (ALiBi's offsets).
    Returns:
        A line figure with hover carrying the numbers.

    Example:
        >>> curves = {"score": [-1.0, 0.0, 1.0], "capped": [-0.5, 0.0, 0.5]}
        >>> score_mod_figure(curves, kind="softcap", cap=1).data[0].name
        'cap · tanh(score / cap)'
    """
    fig = go.Figure()
    if kind == "softcap":
        fig.add_trace(go.Scatter(x=curves["score"], y=curves["capped"], mode="lines", name="cap · tanh(score / cap)",
                                 line={"color": VISIBLE_COLOR, "width": LINE_PX},
                                 hovertemplate="score %{x:.3g} → %{y:.4g}<extra></extra>"))
        fig.add_trace(go.Scatter(x=curves["score"], y=curves["score"], mode="lines", name="no score mod",
                                 line={"color": "#777777", "width": 2, "dash": "dash"}, hoverinfo="skip"))
        style_figure(fig, title=f"softcap({cap:g}): scores squashed into (−{cap:g}, {cap:g})",
                     x_title="score before (scaled q·k)", y_title="score after")
        return fig
    for h in range(min(heads, HEADS_DRAWN)):
        fig.add_trace(go.Scatter(x=curves["offset"], y=curves[f"head {h}"], mode="lines", name=f"head {h}",
                                 line={"color": HEAD_COLORS[h % len(HEAD_COLORS)], "width": LINE_PX},
                                 hovertemplate=f"head {h}: key offset j − i = %{{x:.0f}}, bias %{{y:.4g}}"
                                               "<extra></extra>"))
    style_figure(fig, title=f"alibi({heads}): a linear penalty on distance, one slope per head",
                 x_title="key offset j − i (tokens)", y_title="bias added to the score")
    if heads > HEADS_DRAWN:
        set_subtitle(fig, f"The first {HEADS_DRAWN} of {heads} heads; the other slopes lie between.")
    fig.update_layout(legend={"font": {"size": LEGEND_FONT_PX}})
    fig.update_xaxes(range=[-(n - 1), 0] if n > 1 else None)
    return fig


RUN_COLORS = {MASKED: "#0072B2", DENSE: "#CC79A7", UNMASKED: "#777777"}  # the three runs, in every figure
RUN_TICKS = {MASKED: "tiled<br>mask", DENSE: "SDPA<br>dense", UNMASKED: "tiled<br>no mask"}  # the bars' ticks
PROPORTION_COLOR = "#111111"  # the mark at the time in proportion to the tiles computed
PROPORTION_MARK_PX = 56  # width of that mark: about a bar's width at 1280 px
RUN_FIG_HEIGHT_PX = 560
RUN_LEGEND_Y = -0.3  # the legend under the two-line category labels (paper units of the plot's height)
SWEEP_ROW_PX = 52  # one preset's bar in the sweep figure
SWEEP_MARK_PX = 30  # the proportional mark across a bar: about the bar's thickness
SWEEP_FRAME_PX = 250  # the sweep figure's title, axis and legend
SWEEP_LEGEND_GAP_PX = 70  # from the plot's bottom edge to the legend: under the tick labels and the x title


def _proportion_mark(x: Sequence, y: Sequence[float], symbol: str, size: int = PROPORTION_MARK_PX,
                     **kw) -> go.Scatter:
    """The "in proportion to the tiles computed" marks: a black line across each bar at the unmasked time x the
    fraction of tiles computed."""
    marker = {"symbol": symbol, "size": size, "color": PROPORTION_COLOR,
              "line": {"width": 4, "color": PROPORTION_COLOR}}
    return go.Scatter(x=x, y=y, mode="markers", marker=marker, **kw,
                      name="in proportion to tiles computed (the unmasked time × the fraction of tiles)")


def masked_run_figure(runs: Sequence[Mapping[str, object]]) -> go.Figure:
    """Time and peak memory of the runs side by side: the tiled kernel with the mask, dense SDPA with the boolean
    mask, the tiled kernel without a mask; on the masked bar, the time in proportion to the tiles it computes (the
    unmasked time x computed / tiles), so "before" and "after" are in one picture.

    Args:
        runs: one dict per run: "kind" ("masked", "dense" or "unmasked"), "label", "time_s", "iqr_s", "peak_bytes",
            "tiles_computed", "tiles".
    Returns:
        A Figure with two bar panels on category axes (time in ms with interquartile error bars, peak memory in MiB)
        and the proportional mark.

    Example:
        >>> runs = [{"kind": "masked", "label": "tiled, mask", "time_s": 0.01, "iqr_s": 0.001, "peak_bytes": 2**20,
        ...          "tiles_computed": 1, "tiles": 4},
        ...         {"kind": "unmasked", "label": "tiled, no mask", "time_s": 0.02, "iqr_s": 0.0, "peak_bytes": 2**20,
        ...          "tiles_computed": 4, "tiles": 4}]
        >>> [list(t.y) for t in masked_run_figure(runs).data]  # time, memory, the proportional mark (ms)
        [[10.0, 20.0], [1.0, 1.0], [5.0]]
    """
    fig = make_subplots(rows=1, cols=2, subplot_titles=("time (ms)", "peak memory (MiB)"), horizontal_spacing=0.14)
    labels = [str(r["label"]) for r in runs]
    colors = [RUN_COLORS.get(str(r["kind"]), "#555555") for r in runs]
    times = [float(r["time_s"]) * MS_PER_S for r in runs]
    iqrs = [float(r["iqr_s"]) * MS_PER_S for r in runs]
    fig.add_trace(go.Bar(x=labels, y=times, marker_color=colors, name="time", showlegend=False,
                         error_y={"type": "data", "array": [q / 2 for q in iqrs], "visible": True},
                         hovertemplate="%{x}: %{y:.3g} ms (median)<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=labels, y=[float(r["peak_bytes"]) / MIB for r in runs], marker_color=colors,
                         name="peak memory", showlegend=False,
                         hovertemplate="%{x}: %{y:.3g} MiB above the inputs<extra></extra>"), row=1, col=2)
    by = {str(r["kind"]): r for r in runs}
    if MASKED in by and UNMASKED in by:
        m = by[MASKED]
        expect = float(by[UNMASKED]["time_s"]) * MS_PER_S * int(m["tiles_computed"]) / int(m["tiles"])
        fig.add_trace(_proportion_mark([str(m["label"])], [expect], "line-ew", hovertemplate=(
            f"in proportion to its tiles: {int(m['tiles_computed'])} / {int(m['tiles'])} of the unmasked time = "
            "%{y:.3g} ms<extra></extra>")), row=1, col=1)
    style_figure(fig, title="The mask at work: time and peak memory", x_title="", y_title="time (ms)")
    ticks = [RUN_TICKS.get(str(r["kind"]), str(r["label"])) for r in runs]  # short, on two lines: they fit at 1280 px
    fig.update_xaxes(type="category", tickangle=0, tickvals=labels, ticktext=ticks)
    fig.update_yaxes(title_text="peak memory (MiB)", row=1, col=2)
    fig.update_yaxes(rangemode="tozero")
    fig.update_annotations(font={"size": AXIS_TITLE_FONT_PX})
    fig.update_layout(height=RUN_FIG_HEIGHT_PX, margin={"b": 150}, legend={
        "orientation": "h", "x": 0, "xanchor": "left", "y": RUN_LEGEND_Y, "yanchor": "top"})
    return fig


def sparsity_time_figure(points: Sequence[Mapping[str, object]], *, unmasked_s: float) -> go.Figure:
    """Tiled time of every mask, one horizontal bar each (labelled with the fraction of tiles it computes), the
    unmasked kernel's bar on top, and on each bar the time in proportion to its tiles (the unmasked time x the
    fraction): a bar that ends at its mark took exactly the proportional time.

    Args:
        points: one dict per mask: "label", "computed" (fraction of tiles computed, 0..1), "time_s", "iqr_s".
        unmasked_s: the unmasked kernel's time (s): every tile computed.
    Returns:
        A Figure: the bars (the unmasked one grey), the proportional marks.

    Example:
        >>> fig = sparsity_time_figure([{"label": "causal", "computed": 0.5, "time_s": 0.02, "iqr_s": 0.0}],
        ...                            unmasked_s=0.04)
        >>> list(fig.data[0].x), list(fig.data[1].x), list(fig.data[0].y)  # ms: measured, in proportion
        ([40.0, 20.0], [40.0, 20.0], ['no mask · 100%', 'causal · 50%'])
    """
    rows = [{"label": "no mask", "computed": 1.0, "time_s": unmasked_s, "iqr_s": 0.0, "unmasked": True},
            *sorted(points, key=lambda p: -float(p["computed"]))]
    names = [f"{r['label']} · {float(r['computed']):.0%}" for r in rows]
    fig = go.Figure(go.Bar(
        y=names, x=[float(r["time_s"]) * MS_PER_S for r in rows], orientation="h",
        name="measured time (grey: no mask)",
        marker_color=[RUN_COLORS[UNMASKED] if r.get("unmasked") else RUN_COLORS[MASKED] for r in rows],
        error_x={"type": "data", "array": [float(r["iqr_s"]) * MS_PER_S / 2 for r in rows], "visible": True},
        hovertemplate="%{y} of tiles computed: %{x:.3g} ms (median)<extra></extra>"))
    fig.add_trace(_proportion_mark([unmasked_s * MS_PER_S * float(r["computed"]) for r in rows], names, "line-ns",
                                   size=SWEEP_MARK_PX, hovertemplate="%{y}: in proportion %{x:.3g} ms<extra></extra>"))
    style_figure(fig, title="Time of every preset against its time in proportion to tiles",
                 x_title="time (ms)", y_title="")
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=names, autorange="reversed")
    fig.update_xaxes(rangemode="tozero")
    height, bottom = SWEEP_FRAME_PX + SWEEP_ROW_PX * len(rows), 150
    plot_px = height - bottom - fig.layout.template.layout.margin.t
    fig.update_layout(height=height, margin={"l": 260, "b": bottom}, bargap=0.35, legend={
        "orientation": "h", "x": 0, "xanchor": "left", "y": -SWEEP_LEGEND_GAP_PX / plot_px, "yanchor": "top"})
    return fig


def masks_picture(s: MasksSettings, v: Mapping[str, Any]) -> go.Figure:
    """The lesson's slide: the tile map of the step's mask, as its check found it (flashviz.views.masks.claims)."""
    return slide_tile_map(v["status"], v["counts"], n=s.n, block_q=s.br, block_k=s.bc,
                          title=f"Tiles of {v['docs']} documents AND causal")
