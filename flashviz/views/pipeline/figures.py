"""The GPU pipeline view's figures: one tile's cycles per unit per GPU, the three schedules' Gantt (animated over a
few tiles), wave quantisation, and the lesson's slide. Plain data in (flashviz.views.pipeline.data), figures out; no
torch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz.figures.slide import finish_slide
from flashviz.figures.style import flashviz_template

if TYPE_CHECKING:
    from flashviz.views.pipeline.settings import PipelineSettings

UNIT_COLORS = {"mma": "#0072B2", "exp": "#D55E00", "fma": "#E69F00", "smem": "#009E73", "load": "#999999"}
UNIT_LABELS = {"mma": "tensor cores (MMA)", "exp": "exp2 unit (MUFU)", "fma": "FP32 units (FMA)",
               "smem": "shared memory", "load": "loads (TMA / L2)"}
OP_COLORS = {  # one colour per op of the Gantt; the units' own colours for the ops that define them
    "QKᵀ": "#0072B2", "PV": "#56B4E9", "exp": "#D55E00", "exp (poly)": "#CC79A7", "max": "#E69F00",
    "sum": "#F0C75E", "rescale O": "#009E73", "mask": "#8C564B", "load Q": "#BBBBBB", "load K,V": "#999999",
    "O / l": "#666666", "store O": "#444444",
}
GANTT_UNITS = ("load", "mma", "exp", "fma")  # top to bottom in each schedule's panel
FRAMES = 12  # animation frames of the Gantt
GANTT_HEIGHT_PX = 470  # three panels in a 720 px window with the controls above
BARS_HEIGHT_PX = 430
DTYPE_SHORT = {"bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8"}


def tile_bars_figure(bars: pd.DataFrame, *, head_dim: int, phase: str = "forward") -> go.Figure:
    """Grouped bars: one group per (GPU, dtype), one bar per unit, the cycles one 128 x 128 tile needs there.

    Args:
        bars: flashviz.views.pipeline.data.tile_bars' rows (GPU, dtype, unit, cycles, share).
        head_dim: d, for the title.  phase: "forward" or "backward", for the title.

    Returns:
        the grouped bar figure.
    Example:
        >>> from flashviz.views.pipeline.data import tile_bars
        >>> fig = tile_bars_figure(tile_bars(128), head_dim=128)
        >>> [t.name for t in fig.data]
        ['tensor cores (MMA)', 'exp2 unit (MUFU)', 'FP32 units (FMA)', 'shared memory']
    """
    groups = [f"{g}<br>{DTYPE_SHORT[t]}" for g, t in dict.fromkeys(zip(bars["GPU"], bars["dtype"], strict=True))]
    fig = go.Figure()
    for unit in dict.fromkeys(bars["unit"]):
        rows = bars[bars["unit"].eq(unit)]
        fig.add_trace(go.Bar(
            x=[f"{g}<br>{DTYPE_SHORT[t]}" for g, t in zip(rows["GPU"], rows["dtype"], strict=True)],
            y=rows["cycles"], name=UNIT_LABELS[unit], marker={"color": UNIT_COLORS[unit]},
            customdata=rows["share"],
            hovertemplate=f"{UNIT_LABELS[unit]}: %{{y:,.0f}} cycles (%{{customdata:.0%}} of the MMA's)<extra></extra>"))
    fig.update_layout(template=flashviz_template(), barmode="group", height=BARS_HEIGHT_PX,
                      title={"text": f"One 128 × 128 tile, d = {head_dim}, {phase}: cycles per unit"},
                      legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"}, margin={"t": 110})
    fig.update_xaxes(categoryorder="array", categoryarray=groups, tickangle=0)
    fig.update_yaxes(title_text="cycles per tile", rangemode="tozero")
    return fig


def gantt_figure(rows: pd.DataFrame, tflops: Mapping[str, float], *, window: float, title: str) -> go.Figure:
    """The schedules' Gantt, one panel per schedule (units top to bottom), animated: Play grows every op up to the
    same clock, so the schedules race over the same cycles.

    Args:
        rows: data.gantt_rows of each schedule, concatenated (schedule, op, unit, tile, lane, start, end).
        tflops: schedule -> predicted TFLOP/s (the panel's title).
        window: the cycles shown (the x axis' fixed range).  title: the figure's title.

    Returns:
        the animated figure (FRAMES frames, fixed x range).
    Example:
        >>> from flashviz.model.pipeline import simulate
        >>> from flashviz.views.pipeline.data import gantt_rows
        >>> p = simulate("FA2", "H100", seq_len=1024)
        >>> fig = gantt_figure(gantt_rows(p, 8000), {"FA2": p.tflops}, window=8000, title="t")
        >>> len(fig.frames), fig.layout.xaxis.range
        (12, (0, 8000))
    """
    schedules = list(dict.fromkeys(rows["schedule"]))
    fig = make_subplots(rows=len(schedules), cols=1, shared_xaxes=True, vertical_spacing=0.09,
                        subplot_titles=[f"{s}: {tflops[s]:,.0f} TFLOP/s predicted" for s in schedules])
    keys: list[tuple[str, str]] = []
    for i, schedule in enumerate(schedules, start=1):
        mine = rows[rows["schedule"].eq(schedule)]
        for op in dict.fromkeys(mine["op"]):
            r = mine[mine["op"].eq(op)]
            keys.append((schedule, op))
            fig.add_trace(go.Bar(
                y=r["unit"], x=r["end"] - r["start"], base=r["start"], orientation="h", name=op, legendgroup=op,
                showlegend=op not in [k[1] for k in keys[:-1]], marker={"color": OP_COLORS.get(op, "#555555"),
                                                                        "line": {"width": 0.5, "color": "white"}},
                customdata=list(zip(r["tile"], r["lane"], r["start"], r["end"], strict=True)),
                hovertemplate=f"{schedule} · {op} · tile %{{customdata[0]}} · %{{customdata[1]}}<br>"
                              "cycles %{customdata[2]:,.0f} to %{customdata[3]:,.0f}<extra></extra>"), row=i, col=1)
        fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(GANTT_UNITS)), row=i, col=1)
    fig.frames = [go.Frame(name=str(k), data=[
        go.Bar(x=(rows[rows["schedule"].eq(s) & rows["op"].eq(op)]["end"].clip(upper=cut)
                  - rows[rows["schedule"].eq(s) & rows["op"].eq(op)]["start"]).clip(lower=0))
        for s, op in keys]) for k, cut in enumerate(window * (j + 1) / FRAMES for j in range(FRAMES))]
    fig.update_xaxes(range=(0, window))
    fig.update_xaxes(title_text="cycles of one CTA (the first tiles)", row=len(schedules), col=1)
    fig.update_layout(
        template=flashviz_template(), barmode="overlay", height=GANTT_HEIGHT_PX, title={"text": title},
        legend={"orientation": "v", "x": 1.01, "y": 1, "font": {"size": 14}}, margin={"t": 80, "r": 130, "b": 60},
        updatemenus=[{"type": "buttons", "x": 1.01, "y": 0, "xanchor": "left", "yanchor": "bottom",
                      "showactive": False, "buttons": [
            {"label": "▶ Play", "method": "animate",
             "args": [None, {"frame": {"duration": 350, "redraw": True}, "fromcurrent": False}]}]}])
    return fig


def waves_figure(w: pd.DataFrame, *, gpu: str) -> go.Figure:
    """The share of the SMs' time a launch uses, against N: prefill, one decode step, and a decode step with its keys
    split (Flash-Decoding).

    Args:
        w: data.waves' rows.  gpu: the GPU's name, for the title.
    Returns:
        the figure.
    Example:
        >>> from flashviz.views.pipeline.data import waves
        >>> [t.name for t in waves_figure(waves("H100", 128), gpu="H100").data]
        ['prefill', 'decode', 'decode, keys split']
    """
    fig = go.Figure()
    colors = {"prefill": "#0072B2", "decode": "#D55E00", "decode, keys split": "#009E73"}
    for kind in dict.fromkeys(w["kind"]):
        r = w[w["kind"].eq(kind)]
        fig.add_trace(go.Scatter(x=r["N"], y=r["efficiency"], mode="lines+markers", name=kind,
                                 line={"color": colors.get(kind, "#555555"), "width": 3},
                                 customdata=list(zip(r["programs"], r["sms"], strict=True)),
                                 hovertemplate="N = %{x}: %{customdata[0]} CTAs on %{customdata[1]} SMs, "
                                               "%{y:.0%} of their time<extra></extra>"))
    fig.update_layout(template=flashviz_template(), height=BARS_HEIGHT_PX,
                      title={"text": f"Wave quantisation on the {gpu}: CTAs over SMs (batch 1)"},
                      legend={"orientation": "h", "x": 0, "y": -0.25})
    ns = sorted(set(w["N"]))
    fig.update_xaxes(title_text="sequence length N (log)", type="log", tickvals=ns,
                     ticktext=[f"{n // 1024}k" if n >= 1024 else str(n) for n in ns])
    fig.update_yaxes(title_text="share of the SMs' time used", range=(0, 1.05), tickformat=".0%")
    return fig


def pipeline_picture(s: PipelineSettings, v: Mapping[str, Any]) -> go.Figure:
    """The lesson's slide: per 128 x 128 tile at the step's d and dtype, MMA and exp cycles on the H100 and the B200.

    Args:
        s: the step's settings (its dtype names the picture).  v: exp_bottleneck's values (h100_mma, h100_exp,
            b200_mma, b200_exp, their shares, d).
    Returns:
        the slide's figure.

    Example:
        >>> from flashviz.views.pipeline.settings import PipelineSettings
        >>> v = {"h100_mma": 2048, "h100_exp": 1024, "b200_mma": 1024, "b200_exp": 1024, "h100_share": 0.5,
        ...      "b200_share": 1.0, "d": 128}
        >>> [list(t.y) for t in pipeline_picture(PipelineSettings(), v).data]
        [[2048, 1024], [1024, 1024]]
    """
    gpus: Sequence[str] = ("H100", "B200")
    fig = go.Figure()
    for unit in ("mma", "exp"):
        ys = [v[f"{g.lower()}_{unit}"] for g in gpus]
        fig.add_trace(go.Bar(x=list(gpus), y=ys, name=UNIT_LABELS[unit], marker={"color": UNIT_COLORS[unit]},
                             text=[f"{y:,.0f}" for y in ys], textposition="outside", cliponaxis=False,
                             hovertemplate=f"{UNIT_LABELS[unit]}: %{{y:,.0f}} cycles<extra></extra>"))
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="cycles per tile", rangemode="tozero")
    return finish_slide(fig, f"One 128 × 128 tile, d = {v['d']}, {DTYPE_SHORT[s.pipe_dtype]}",
                        f"exp is {v['h100_share']:.0%} of the MMA on an H100, {v['b200_share']:.0%} on a B200"
                        ).update_layout(legend={"x": 0.99, "xanchor": "right"})  # over the B200's lower bars
