"""The numerics lab's figures: the plain data of flashviz.views.numerics.data in, go.Figure out.
No torch, no streamlit (the result types are imported for type checking only).

Error bars per kernel (log axis, the dtype's eps and flash-attn's bound marked), the error of every query row, FA2's
output over tile sizes, rescales per K/V tile with tau = 0 and FA4's tau, FA3's FP8 RMSE 2 x 2 (plain / outlier
inputs x Hadamard off / on), and the keys each query sees under top-left and bottom-right causal masks. Every figure
fits 1280 x 720 (FIG_HEIGHT_PX high) with the shared template's projector-sized fonts (>= 18 px). The lesson's slide
of this view (`numerics_picture`, flashviz.app.slides) draws the rescales its check counted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz.figures.palette import IMPL_COLORS, REFERENCE_COLOR, TILE_COLORS
from flashviz.figures.slide import slide_bars
from flashviz.figures.style import (
    impl_color,
    impl_line,
    log_axis,
    set_subtitle,
    style_figure,
)
from flashviz.views.numerics.sentences import fmt_num
from flashviz.vocab import FLASH, FLASH2, FP8, FP8_FORMATS, PRECISION_LABELS, SDPA, SKIPPED

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from flashviz.views.numerics.data import (
        CausalAlignment,
        Fp8Table,
        KernelErrors,
        LazyRescale,
        TileSpread,
        TwoErrors,
    )
    from flashviz.views.numerics.settings import NumericsSettings

FP8_COLOR = "#000000"  # the FP8 kernel: black, the one Okabe-Ito colour no other implementation or tile fate has
EPS_COLOR = "#666666"  # the dtype's machine epsilon line
TAU_COLORS = ("#D55E00", "#0072B2")  # tau = 0 (the classic update, as naive's colour) and FA4's tau (as FA1's)
HADAMARD_COLORS = {False: "#D55E00", True: "#009E73"}  # off: vermillion; on: bluish green
ALIGN_COLORS = {"both": "#555555", "top": IMPL_COLORS[SDPA], "bottom": IMPL_COLORS[FLASH], "none": "#FFFFFF"}
MAP_CELLS_MAX = 256  # rows and columns of the causal map at most (every k-th query and key beyond)


LEGEND_BELOW = {"orientation": "h", "x": 0, "xanchor": "left", "y": -0.22, "yanchor": "top"}  # under the x title
LEGEND_LOW_Y = -0.3  # paper y of a legend under an x title and its tick labels on a short plot
MARGIN_LOW_PX = 170  # bottom margin that holds that legend (up to three rows of 18 px entries)
BAR_PANEL_PER_KERNEL = 0.09  # fraction of the two-panel error figure's width per kernel bar (5 bars: 45 %)
ERRORS_HEIGHT_PX = 620  # the two-panel error figure: the plot, two subtitle lines, three legend rows
SPREAD_HEIGHT_PX = 480  # the tile sizes' difference map: four tile sizes, a subtitle line


def _categorical(fig: go.Figure) -> None:
    """An x axis of named categories (kernels, tile sizes, input kinds) and the legend under the plot."""
    fig.update_xaxes(type="category")
    fig.update_layout(legend={**LEGEND_BELOW, "y": LEGEND_LOW_Y}, margin_b=MARGIN_LOW_PX)


def _color(kernel: str) -> str:
    return FP8_COLOR if kernel == FP8 else impl_color(kernel)


def _hline(fig: go.Figure, y: float, name: str, color: str, dash: str = "dash") -> None:
    """A horizontal line at data value y across the plot (a shape: data coordinates also on a log axis) and a
    legend entry naming it."""
    fig.add_shape(type="line", xref="paper", x0=0, x1=1, yref="y", y0=y, y1=y,
                  line={"color": color, "width": 2.5, "dash": dash})
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=name, line={"color": color, "width": 2.5,
                                                                                  "dash": dash}))


def _positive(values: Sequence[float]) -> list[float]:
    return [v for v in values if v > 0 and math.isfinite(v)]


def _floored(values: Sequence[float]) -> tuple[list[float], float]:
    """Values for a log axis: zeros drawn at a floor (a tenth of the smallest positive value, or 1e-12)."""
    pos = _positive(values)
    floor = min(pos) / 10 if pos else 1e-12
    return [v if v > 0 else floor for v in values], floor


def kernel_errors_figure(r: KernelErrors) -> go.Figure:
    """Both error views side by side on one log axis: max |error| per kernel (bars, left) and per query row (lines,
    right), with the precision's eps and flash-attn's bound across both panels.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> row = NS(kernel="flash2", label="FA2", passes=True,
        ...          stats=NS(max_abs=7.8e-3, rmse=9e-4, rel_rmse=3e-3, row_max_abs=(7.8e-3, 0.0)))
        >>> fig = kernel_errors_figure(NS(precision="bfloat16", eps=2 ** -7, plain_max_abs=5e-2, fwd_atol=1.6e-2,
        ...                               rows=(row,), notes=()))
        >>> fig.data[0].y[0], list(fig.data[1].x), fig.layout.yaxis.type
        (0.0078, [0, 1], 'log')
    """
    label = PRECISION_LABELS.get(r.precision, r.precision)
    left = BAR_PANEL_PER_KERNEL * len(r.rows)  # the bars' panel: wide enough for every label unrotated
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[left, 1 - left], horizontal_spacing=0.04)
    style_figure(fig, title=f"Max |error| against float64 ({label} inputs)", x_title="", y_title="")
    errs = [row.stats.max_abs for row in r.rows]
    shown, _ = _floored(errs)
    bound = 2 * r.plain_max_abs + r.fwd_atol
    fig.add_trace(go.Bar(
        x=[row.label for row in r.rows], y=shown, name="max |error|", showlegend=False,
        marker={"color": [_color(row.kernel) for row in r.rows]},
        text=[f"{fmt_num(e)}{'' if row.passes else ' FAIL'}" for e, row in zip(errs, r.rows, strict=True)],
        textposition="outside", textfont={"size": 18}, cliponaxis=False,
        customdata=[[fmt_num(row.stats.rmse), fmt_num(row.stats.rel_rmse), "passes" if row.passes else "FAILS"]
                    for row in r.rows],
        hovertemplate=("<b>%{x}</b><br>max |error| %{text}<br>RMSE %{customdata[0]}, relative %{customdata[1]}<br>"
                       "flash-attn's rule: %{customdata[2]}<extra></extra>")), row=1, col=1)
    values = [*shown, r.eps, bound]
    for row in r.rows:
        ys, _ = _floored(row.stats.row_max_abs)
        values += ys
        fig.add_trace(go.Scatter(x=list(range(len(ys))), y=ys, mode="lines", name=row.label,
                                 line={**impl_line(row.kernel, width=2), "color": _color(row.kernel)},
                                 hovertemplate=f"<b>{row.label}</b> row %{{x}}: %{{y:.2e}}<extra></extra>"),
                      row=1, col=2)
    for y, name, color, dash in ((r.eps, f"eps of {label} = {fmt_num(r.eps)}", EPS_COLOR, "dot"),
                                 (bound, f"flash-attn's bound = {fmt_num(bound)}", REFERENCE_COLOR, "dash")):
        _hline(fig, y, name, color, dash)
    fig.update_yaxes(**log_axis([*values, bound * 3], "sci"))
    fig.update_yaxes(title_text="max |O - O_ref|", row=1, col=1)
    labels = [row.label for row in r.rows]
    fig.update_xaxes(type="category", title_text="per kernel", tickangle=0, tickmode="array", tickvals=labels,
                     ticktext=[name.replace(" ", "<br>") for name in labels], row=1, col=1)  # "FA3<br>FP8"
    fig.update_xaxes(title_text="per query row i (max over heads, d)", row=1, col=2)
    fig.update_layout(legend={**LEGEND_BELOW, "y": LEGEND_LOW_Y}, margin_b=MARGIN_LOW_PX, height=ERRORS_HEIGHT_PX)
    set_subtitle(fig, "Bars under the red line pass flash-attn's test rule: at most twice plain PyTorch's (naive's) "
                      f"error in the same dtype, plus its rounding floor. {' '.join(r.notes)}".strip())
    return fig


TWO_ERRORS_HEIGHT_PX = 480  # the two-error bars: six kernels, a legend row, a subtitle line


def two_errors_figure(r: TwoErrors) -> go.Figure:
    """flash-attn's two errors per kernel on one log axis: the kernel's against the wider reference, and the
    reference's own in the kernel's dtype (the bar it may reach twice).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> row = NS(path="FA2", error=7.8e-3, sdpa_error=7.7e-3, ratio=1.01, passes=True)
        >>> fig = two_errors_figure(NS(precision="bfloat16", dtype="bfloat16", wide="float32", rows=(row,)))
        >>> [t.name for t in fig.data], fig.data[0].y[0], fig.data[1].y[0]
        (['kernel − reference in fp32', 'reference in bf16 − reference in fp32'], 0.0078, 0.0077)
    """
    low = PRECISION_LABELS.get(r.dtype, r.dtype)
    wide = PRECISION_LABELS.get(r.wide, r.wide)
    fig = go.Figure()
    style_figure(fig, title=f"flash-attn's test per kernel ({low})", x_title="", y_title="max |error|")
    names = [row.path for row in r.rows]
    kernel, reference = [row.error for row in r.rows], [row.sdpa_error for row in r.rows]
    shown_k, _ = _floored(kernel)
    shown_r, _ = _floored(reference)
    fig.add_trace(go.Bar(x=names, y=shown_k, name=f"kernel − reference in {wide}", marker_color=impl_color(FLASH2),
                         text=[f"{_ratio(row.ratio)}x{'' if row.passes else ' FAIL'}" for row in r.rows],
                         textposition="outside", textfont={"size": 18}, cliponaxis=False,
                         hovertemplate="<b>%{x}</b>: %{y:.2e}<extra></extra>"))
    fig.add_trace(go.Bar(x=names, y=shown_r, name=f"reference in {low} − reference in {wide}",
                         marker_color=impl_color(SDPA), hovertemplate="<b>%{x}</b>: %{y:.2e}<extra></extra>"))
    fig.update_yaxes(**log_axis([*shown_k, *shown_r, max([*shown_k, *shown_r]) * 4], "sci"))
    fig.update_xaxes(type="category", tickangle=0, tickmode="array", tickvals=names,  # "backward dQ" on two lines:
                     ticktext=[n.replace(" ", "<br>") for n in names])  # six labels side by side fit 1280 px
    fig.update_layout(barmode="group", legend=LEGEND_BELOW, height=TWO_ERRORS_HEIGHT_PX)
    set_subtitle(fig, "a kernel passes when its bar is at most twice the reference's (labels: the ratio)")
    return fig


def _ratio(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.2g}"


def tile_spread_figure(r: TileSpread) -> go.Figure | None:
    """What differs between tile sizes: the largest difference between FA2's outputs with tiles a and b, for every
    pair (a heatmap, the zero diagonal included), not each one's error against float64, which is about equal for every
    tile size (the sentence states it). None when every tile size gives the same output: then nothing differs, and the
    sentence says so in words.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> fig = tile_spread_figure(NS(precision="bfloat16", blocks=(16, 32), errors=(7.8e-3, 7.8e-3),
        ...                             max_spread=9.8e-4, eps=2 ** -7, pairwise=((0, 9.8e-4), (9.8e-4, 0))))
        >>> list(fig.data[0].x), fig.data[0].z[0][1]
        (['16', '32'], 0.00098)
        >>> tile_spread_figure(NS(precision="float32", blocks=(16, 32), errors=(1e-7, 1e-7), max_spread=0.0,
        ...                       eps=2 ** -23, pairwise=((0, 0), (0, 0)))) is None
        True
    """
    if r.max_spread == 0:
        return None
    fig = go.Figure()
    label = PRECISION_LABELS.get(r.precision, r.precision)
    sizes = [str(b) for b in r.blocks]
    style_figure(fig, title=f"FA2 over tile sizes ({label}): how far apart the outputs are",
                 x_title="tile size a (Br = Bc)", y_title="tile size b (Br = Bc)", log_y=False)
    z = [list(row) for row in r.pairwise]
    fig.add_trace(go.Heatmap(
        x=sizes, y=sizes, z=z, zmin=0, zmax=r.max_spread, colorscale="Blues", xgap=3, ygap=3,
        text=[[fmt_num(v) if v else "0" for v in row] for row in z], texttemplate="%{text}",
        textfont={"size": 18}, colorbar={"title": {"text": "max |O_a − O_b|"}, "thickness": 18},
        hovertemplate="tiles %{x} vs %{y}: max |O_a − O_b| = %{text}<extra></extra>"))
    fig.update_xaxes(type="category", showgrid=False)
    fig.update_yaxes(type="category", showgrid=False, autorange="reversed")
    ulps = "" if r.precision in FP8_FORMATS else f" = {r.max_spread / r.eps:.2g} eps"
    set_subtitle(fig, f"largest difference {fmt_num(r.max_spread)}{ulps}; each output is within "
                      f"{fmt_num(max(r.errors))} of float64")
    fig.update_layout(height=SPREAD_HEIGHT_PX)
    return fig


def rescale_figure(r: LazyRescale) -> go.Figure:
    """Rows rescaled at each K/V tile with tau = 0 and with FA4's tau (grouped bars; batch 0, head 0).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> fig = rescale_figure(NS(block=64, classic=NS(tau=0.0, per_tile=(0, 37), total=37),
        ...                         lazy=NS(tau=8.0, per_tile=(0, 2), total=2)))
        >>> [list(t.y) for t in fig.data]
        [[0, 37], [0, 2]]
    """
    fig = go.Figure()
    style_figure(fig, title="Online-softmax rescales per K/V tile (batch 0, head 0)",
                 x_title=f"K/V tile j (keys j x {r.block} ..)", y_title="rows rescaled (count)")
    for run, color in zip((r.classic, r.lazy), TAU_COLORS, strict=True):
        name = f"tau = {run.tau:g}{' (classic)' if run.tau == 0 else ' (FA4)'}: {run.total} in all"
        fig.add_trace(go.Bar(x=list(range(len(run.per_tile))), y=list(run.per_tile), name=name,
                             marker={"color": color},
                             hovertemplate=f"tau = {run.tau:g}, tile %{{x}}: %{{y}} rows rescaled<extra></extra>"))
    fig.update_layout(barmode="group", legend={**LEGEND_BELOW, "y": LEGEND_LOW_Y}, margin_b=MARGIN_LOW_PX)
    fig.update_xaxes(tickmode="linear", dtick=max(1, len(r.classic.per_tile) // 16))
    set_subtitle(fig, "A rescale multiplies a row's l and accumulator by 2^(m_old - m_new); the first tile of a "
                      "row sets its max and is not counted.")
    return fig


def fp8_figure(r: Fp8Table) -> go.Figure:
    """FA3's FP8 RMSE, plain and outlier inputs x Hadamard off / on (grouped bars, log axis, min-max over seeds).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> cells = {(o, h): NS(rmse=e, rmse_per_seed=(e,)) for (o, h), e in {(False, False): 5.3e-3,
        ...          (False, True): 5.3e-3, (True, False): 6.5e-2, (True, True): 3.3e-2}.items()}
        >>> fig = fp8_figure(NS(fmt="e4m3", block=64, seeds=(0,), note="", cell=lambda o, h: cells[(o, h)]))
        >>> [list(t.y) for t in fig.data]
        [[0.0053, 0.065], [0.0053, 0.033]]
    """
    fig = go.Figure()
    style_figure(fig, title=f"FA3's FP8 ({r.fmt}): RMSE with and without Hadamard", x_title="inputs",
                 y_title="RMSE against float64", log_y=True)
    kinds = ["plain", "with outlier features"]
    values = []
    for hadamard in (False, True):
        cells = [r.cell(o, hadamard) for o in (False, True)]
        ys = [c.rmse for c in cells]
        values += [min(c.rmse_per_seed) for c in cells] + [max(c.rmse_per_seed) for c in cells]
        fig.add_trace(go.Bar(
            x=kinds, y=ys, name=f"Hadamard {'on' if hadamard else 'off'}", marker={"color": HADAMARD_COLORS[hadamard]},
            error_y={"type": "data", "symmetric": False, "array": [max(c.rmse_per_seed) - c.rmse for c in cells],
                     "arrayminus": [c.rmse - min(c.rmse_per_seed) for c in cells], "thickness": 2},
            text=[fmt_num(y) for y in ys], textposition="inside", textfont={"size": 18, "color": "white"},
            hovertemplate=f"Hadamard {'on' if hadamard else 'off'}, %{{x}} inputs: RMSE %{{text}}<extra></extra>"))
    fig.update_layout(barmode="group")
    fig.update_yaxes(**log_axis(values, "sci"))
    _categorical(fig)
    set_subtitle(fig, f"Mean over {len(r.seeds)} seeds (bars: min to max); Q, K, V in blocks of {r.block} rows. "
                      f"{r.note}".strip())
    return fig


def _alignment_grid(r: CausalAlignment) -> tuple[list[int], list[int], list[list[int]]]:
    """Sampled query rows, key columns and the cell codes 0 none, 1 top-left only, 2 bottom-right only, 3 both."""
    rows = list(range(0, r.n_q, -(-r.n_q // MAP_CELLS_MAX)))
    cols = list(range(0, r.n_k, -(-r.n_k // MAP_CELLS_MAX)))
    z = [[(j <= r.top_left_last[i]) + 2 * (j <= r.bottom_right_last[i]) for j in cols] for i in rows]
    return rows, cols, z


def causal_alignment_figure(r: CausalAlignment) -> go.Figure:
    """Which keys each query sees: top-left (SDPA's is_causal) only, bottom-right (flash-attn) only, or both (the
    map, left), and how far the two outputs are apart on each query row (right, on the same query axis).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> fig = causal_alignment_figure(NS(n_q=2, n_k=4, offset=2, top_left_last=(0, 1), bottom_right_last=(2, 3),
        ...                                  max_diff=1.0, row_diff=(1.0, 0.5)))
        >>> [list(row) for row in fig.data[0].z], list(fig.data[-1].x)
        ([[3, 2, 2, 0], [3, 3, 2, 2]], [1.0, 0.5])
    """
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.7, 0.3], horizontal_spacing=0.05)
    style_figure(fig, title=f"Keys each query sees (N_q = {r.n_q}, N_k = {r.n_k})", x_title="key j",
                 y_title="query i")
    rows, cols, z = _alignment_grid(r)
    scale = [[0.0, ALIGN_COLORS["none"]], [0.25, ALIGN_COLORS["none"]], [0.25, ALIGN_COLORS["top"]],
             [0.5, ALIGN_COLORS["top"]], [0.5, ALIGN_COLORS["bottom"]], [0.75, ALIGN_COLORS["bottom"]],
             [0.75, ALIGN_COLORS["both"]], [1.0, ALIGN_COLORS["both"]]]
    names = ["hidden in both", "top-left only", "bottom-right only", "both"]
    fig.add_trace(go.Heatmap(x=cols, y=rows, z=z, zmin=-0.5, zmax=3.5, colorscale=scale, showscale=False,
                             customdata=[[names[c] for c in line] for line in z],
                             hovertemplate="query %{y}, key %{x}: %{customdata}<extra></extra>"), row=1, col=1)
    for key, name in (("top", "top-left only (SDPA is_causal)"), ("bottom", "bottom-right only (flash-attn)"),
                      ("both", "seen by both")):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name,
                                 marker={"symbol": "square", "size": 16, "color": ALIGN_COLORS[key],
                                         "line": {"width": 1, "color": TILE_COLORS[SKIPPED]}}), row=1, col=1)
    fig.add_trace(go.Scatter(x=list(r.row_diff), y=list(range(len(r.row_diff))), mode="lines", showlegend=False,
                             name="output difference", line={"color": REFERENCE_COLOR, "width": 2},
                             hovertemplate="query %{y}: outputs differ by %{x:.3g}<extra></extra>"), row=1, col=2)
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="max |O_TL - O_BR|", rangemode="tozero", nticks=4, row=1, col=2)
    fig.update_yaxes(title_text="", row=1, col=2)
    fig.update_layout(plot_bgcolor="white", legend={**LEGEND_BELOW, "y": LEGEND_LOW_Y}, margin_b=MARGIN_LOW_PX)
    set_subtitle(fig, f"Bottom-right's diagonal is {abs(r.offset)} keys {'right' if r.offset >= 0 else 'left'} of "
                      f"top-left's; right: how far the two outputs are apart on each query (up to "
                      f"{fmt_num(r.max_diff)}).")
    return fig


def numerics_picture(s: NumericsSettings, v: Mapping[str, Any]) -> go.Figure:
    """The lesson's slide: rescales of the running output, the classic rule (every rise of m) against FA4's lazy one
    (tau), with the check's other two numbers in the subtitle."""
    return slide_bars(["classic: every rise of m", f"lazy: only past tau = {v['tau']:.0f}"], [v["classic"], v["lazy"]],
                      [str(v["classic"]), str(v["lazy"])], [impl_color(FLASH), impl_color(FLASH2)],
                      title="Rescales of the running output O, same output", y_title="rescales",
                      subtitle=f"FA2 vs SDPA in bf16: {v['gap']:.0f} rounding step; Hadamard: FP8 error "
                               f"{v['gain']:.1f}× lower")
