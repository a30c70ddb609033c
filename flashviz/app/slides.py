"""A lesson step as a slide: its claim, the numbers it states and the one picture that proves them, together in a
1280 x 720 window (flashviz.app.presenter draws the slide; "Explore this view" opens the step's full view).

Every slide runs its step's check (flashviz.lesson.steps.Step.run_check: the claim function of the step's view, which
computes the numbers through the same layers the view draws with) at the settings on screen, shows the numbers it
returned as metrics, and draws its picture from the same library functions: the model's counts, the tile schedule,
the traces of the real kernels, the peaks it measured. Nothing on a slide is typed in: a slide whose check finds other
numbers than the claim states says so.

The pictures are small plotly figures (SLIDE_FIGURE_PX tall) built here from the views' figure functions where those
draw the proof (the Masks view's tile map, the row inspector, the IO model's curves) and from the data otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz.figures.palette import BASE_FONT_PX
from flashviz.figures.style import MIB, SUBTITLE_LINE_PX, flashviz_template, impl_color, subtitle_lines
from flashviz.units import format_bytes
from flashviz.vocab import FLASH, FLASH2, KV_OUTER, NAIVE, Q_OUTER

if TYPE_CHECKING:
    from flashviz.app.state import Settings

SLIDE_FIGURE_PX = 470  # a slide's picture: under the page's header and the step's bar, inside a 720 px window
MARGIN = {"l": 70, "r": 20, "t": 86, "b": 56}  # a slide's picture: room for the title, subtitle and axis titles
SUBTITLE_CHARS = 56  # characters of a subtitle line that fit a slide's picture (7/12 of a 1280 px page)
SHORT = {NAIVE: "naive", FLASH: "FA1", FLASH2: "FA2"}  # the charts' names of the implementations
Picture = Callable[["Settings", Mapping[str, Any]], go.Figure]  # settings and the check's values -> the picture
MEASURES = {  # the checks that measure on this machine, and what a slide says while they run
    "memory_growth": "Measuring the peak memory of naive attention, FA1 and FA2 at each N (exact, the allocator's "
                     "events) ...",
}


def _finish(fig: go.Figure, title: str, subtitle: str, *, legend: bool = True) -> go.Figure:
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


def scores_picture(s: Settings, v: Mapping[str, Any]) -> go.Figure:
    """S and P = softmax(S) side by side, query rows downwards: the largest score of a row gets its largest weight."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.16,
                        subplot_titles=("S = QKᵀ/√d: scores", "P = softmax(S): weights"))
    keys = list(range(v["n"]))
    fig.add_trace(go.Heatmap(z=v["S"], x=keys, y=keys, colorscale="RdBu_r", zmid=0, name="S",
                             colorbar={"x": 0.42, "len": 0.9, "thickness": 14},
                             hovertemplate="query i = %{y}, key j = %{x}<br>S_ij = %{z:.3f}<extra></extra>"), 1, 1)
    fig.add_trace(go.Heatmap(z=v["P"], x=keys, y=keys, colorscale="Blues", zmin=0, name="P",
                             colorbar={"x": 1.0, "len": 0.9, "thickness": 14},
                             hovertemplate="query i = %{y}, key j = %{x}<br>P_ij = %{z:.3f}<extra></extra>"), 1, 2)
    for col in (1, 2):
        fig.update_xaxes(title_text="key j", row=1, col=col, constrain="domain")
        fig.update_yaxes(title_text="query i" if col == 1 else None, autorange="reversed", row=1, col=col,
                         scaleanchor=f"x{'' if col == 1 else col}", constrain="domain")
    _finish(fig, f"Standard attention at N = {v['n']}, d = {v['d']}: {v['scores']} scores", "", legend=False)
    return fig.update_layout(margin={**MARGIN, "t": 110})  # the panels' titles under the figure's


def memory_picture(s: Settings, v: Mapping[str, Any]) -> go.Figure:
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
    fig.update_yaxes(title_text="peak memory (MiB)", type="log")
    return _finish(fig, "Peak memory vs sequence length, measured here",
                   f"per doubling of N: naive {v['naive_growth']:.1f}×, FA1 {v['fa1_growth']:.1f}×, "
                   f"FA2 {v['fa2_growth']:.1f}×")


def _tile_map(status: list[list[str]], counts: Mapping[str, int], s: Settings, title: str) -> go.Figure:
    """The Masks view's tile map (one heatmap, each tile in the colour of its fate: no tile in progress over it)."""
    from flashviz.views.masks.figures import tile_map_figure  # plotly and numpy: when a slide draws it

    fig = tile_map_figure(status, n=s.n, block_q=s.br, block_k=s.bc, counts=counts)
    computed = sum(counts.values()) - counts.get("skipped", 0)
    _finish(fig, title, f"N = {s.n}, Br = {s.br}, Bc = {s.bc}: {computed} of {sum(counts.values())} tiles computed")
    fig.update_layout(legend={"x": 1.02, "y": 1.0, "xanchor": "left"}, margin={**MARGIN, "r": 150})
    tr, tc = len(status), len(status[0]) if status else 1
    fig.update_xaxes(dtick=max(1, round(tc / 8)))  # whole blocks only
    fig.update_yaxes(dtick=max(1, round(tr / 8)))
    return fig


def tiles_picture(s: Settings, v: Mapping[str, Any]) -> go.Figure:
    """The tile schedule's fates: every tile in its final colour, the counts in the legend."""
    from flashviz.core.tiling import tile_schedule

    sched = tile_schedule(s.n, s.n, s.br, s.bc, causal=s.causal, window=s.window)
    mask = "causal" if s.causal else "no mask"
    return _tile_map(sched.status_grid(), sched.counts(), s, f"Tiles of S, {mask}")


def row_picture(s: Settings, v: Mapping[str, Any]) -> go.Figure:
    """The row inspector's figure of the check's row: m, the rescale factor and l, tile by tile, per loop order."""
    from flashviz.core.tiling import tile_schedule
    from flashviz.measure.trace import row_trace
    from flashviz.views.how.figures import row_figure

    rows = [row_trace(s.n, s.d, s.br, s.bc, row=v["row"], causal=s.causal, window=s.window, loop_order=order,
                      dtype=s.dtype) for order in s.loop_orders]
    n_tiles = sum(1 for t in tile_schedule(s.n, s.n, s.br, s.bc, causal=s.causal, window=s.window)
                  if t.status != "skipped")
    fig = row_figure(rows, n_tiles=n_tiles)
    fig.update_layout(height=SLIDE_FIGURE_PX, margin={"l": 70, "r": 20, "t": 30, "b": 40}, title=None,
                      legend={"font": {"size": 13}})
    fig.update_annotations(font_size=14)  # the panels' titles
    return fig


def io_picture(s: Settings, v: Mapping[str, Any]) -> go.Figure:
    """The IO model's HBM accesses against M: the flash curves halving per doubling, flat from 4dN."""
    from flashviz.figures.plots import hbm_vs_memory_figure
    from flashviz.model.iomodel import hbm_vs_memory
    from flashviz.views.io.claims import M_EXPONENTS
    from flashviz.vocab import ALGORITHMS, DTYPE_BYTES

    df = hbm_vs_memory(tuple(2**e for e in M_EXPONENTS), s.n, s.d, algorithms=ALGORITHMS, causal=s.causal,
                       window=s.window, batch=s.batch, heads=s.heads, dtype_bytes=DTYPE_BYTES[s.dtype])
    fig = hbm_vs_memory_figure(df, n=s.n, d=s.d)
    fig.update_layout(height=SLIDE_FIGURE_PX, margin={"l": 80, "r": 20, "t": 70, "b": 60},
                      title={"text": f"HBM accesses vs on-chip memory M, N = {s.n:,}"},
                      legend={"orientation": "v", "x": 0.01, "y": 0.01, "xanchor": "left", "yanchor": "bottom",
                              "font": {"size": 13}})
    return fig


def roof_picture(s: Settings, v: Mapping[str, Any]) -> go.Figure:
    """The H100's roofline (the model's published peaks) with naive, FA1 and FA2 at their FLOPs per byte."""
    from flashviz.model.roofline import GPUS, H100, roofline_points

    df = roofline_points(s.n, s.d, block_q=s.br, block_k=s.bc, causal=s.causal, window=s.window, batch=s.batch,
                         heads=s.heads, dtype=s.gpu_dtype, devices=GPUS)
    h100 = df[df["device"].eq(H100.name)]
    peak, ridge = H100.peak_flops[s.gpu_dtype] / 1e12, H100.ridge(s.gpu_dtype)
    xs = [1.0, ridge, 1e4]
    fig = go.Figure(go.Scatter(x=xs, y=[min(peak, H100.bandwidth * x / 1e12) for x in xs], mode="lines",
                               name=f"{v['gpu']} roof", line={"color": "#444", "width": 3},
                               hovertemplate="%{x:.0f} FLOP/byte: at most %{y:.0f} TFLOP/s<extra></extra>"))
    fig.add_vline(x=ridge, line={"dash": "dot", "color": "#888"})
    l2_bw = H100.l2_bandwidth
    fig.add_trace(go.Scatter(x=xs, y=[min(peak, l2_bw * x / 1e12) for x in xs], mode="lines", name="L2 roof",
                             line={"color": "#999", "width": 1.5},
                             hovertemplate="%{x:.0f} FLOP per L2 byte: at most %{y:.0f} TFLOP/s<extra></extra>"))
    for algorithm, name in ((NAIVE, "naive"), (KV_OUTER, "FA1"), (Q_OUTER, "FA2")):
        row = h100[h100["algorithm"].eq(algorithm)].iloc[0]
        impl = {NAIVE: NAIVE, KV_OUTER: FLASH, Q_OUTER: FLASH2}[algorithm]
        y = row["attainable_flops"] / 1e12
        bound = "HBM" if row["bound"] == "memory" else row["bound"]
        fig.add_trace(go.Scatter(x=[row["intensity"]], y=[y], mode="markers+text", name=f"{name}: {bound}-bound",
                                 text=[f"{row['speedup_vs_naive']:.2f}×"], textposition="middle right",
                                 marker={"size": 16, "color": impl_color(impl)},
                                 hovertemplate="%{x:.1f} FLOP per HBM byte: %{y:.0f} TFLOP/s<extra></extra>"))
        if row["bound"] == "L2":  # the roof that holds it: its FLOPs per L2 byte on the L2 roof
            fig.add_trace(go.Scatter(x=[row["l2_intensity"]], y=[y], mode="markers", showlegend=False,
                                     marker={"size": 14, "color": "white", "line": {"width": 2.5,
                                                                                     "color": impl_color(impl)}},
                                     hovertemplate=f"{name}: %{{x:.1f}} FLOP per L2 byte<extra></extra>"))
    fig.update_xaxes(title_text="FLOPs per byte (log; hollow: per L2 byte)", type="log", range=[0, 4])
    fig.update_yaxes(title_text="attainable TFLOP/s (log)", type="log")
    return _finish(fig, f"Roofline of the {v['gpu']}, {s.gpu_dtype}",
                   f"HBM ridge {ridge:.0f} FLOP/byte (dotted); thin: the L2 roof").update_layout(
        legend={"x": 1, "xanchor": "right", "y": 0, "yanchor": "bottom"})  # the empty corner under the roofs


def masks_picture(s: Settings, v: Mapping[str, Any]) -> go.Figure:
    """The Masks view's tile map of the step's mask."""
    from flashviz.views.masks.claims import mask_spec
    from flashviz.views.masks.data import mask_data

    grid = mask_data(mask_spec(s), s.n, s.br, s.bc, s.heads).grid
    return _tile_map(grid.status, grid.counts, s, f"Tiles of {v['docs']} documents AND causal")


def _bars(names: list[str], values: list[float], texts: list[str], colors: list[str], *, title: str, subtitle: str,
          y_title: str, log: bool = False) -> go.Figure:
    fig = go.Figure(go.Bar(x=names, y=values, text=texts, textposition="outside", marker={"color": colors},
                           cliponaxis=False, hovertemplate="%{x}: %{text}<extra></extra>"))
    fig.update_yaxes(title_text=y_title, type="log" if log else "linear", rangemode="tozero")
    return _finish(fig, title, subtitle, legend=False)


def train_picture(s: Settings, v: Mapping[str, Any]) -> go.Figure:
    """What each keeps for the backward pass at the largest N: P against the logsumexp L (log scale)."""
    from flashviz.model.training import recompute_table

    table = recompute_table(s.ns, s.d, batch=s.batch, heads=s.heads, block_q=s.bench_block, block_k=s.bench_block,
                            causal=s.causal, window=s.window, dtype=s.dtype)
    last = table.loc[table["N"].idxmax()]
    kept = [float(last["stored_p_bytes"]), float(last["stored_lse_bytes"])]
    return _bars(["naive: P", "FlashAttention: L"], kept, [format_bytes(b) for b in kept],
                 [impl_color(NAIVE), impl_color(FLASH2)], title=f"Kept for the backward pass at N = {v['n']:,}",
                 subtitle=f"besides O, which both keep; B = {v['batch']}, H = {v['heads']}, {v['dtype']}",
                 y_title="bytes (log)", log=True)


def backward_picture(s: Settings, v: Mapping[str, Any]) -> go.Figure:
    """The backward's HBM traffic at a GPU's sizes: standard attention's, the tiled one's (atomic dQ), and with the
    deterministic second pass."""
    from flashviz.views.backward.data import dq_comparison
    from flashviz.vocab import DTYPE_BYTES

    c = dq_comparison(s.n, s.d, s.br, s.br, causal=s.map_causal, window=s.window, heads=1,
                      dtype_bytes=DTYPE_BYTES["float32"])
    moved = [c.standard_bytes / MIB, c.atomic_bytes / MIB, c.deterministic_bytes / MIB]
    return _bars(["standard<br>attention", "tiled,<br>atomic dQ", "tiled,<br>deterministic dQ"], moved,
                 [format_bytes(b * MIB) for b in moved], [impl_color(NAIVE), impl_color(FLASH2), impl_color(FLASH)],
                 title=f"Backward HBM traffic per head, N = {v['n']:,}", y_title="MiB",
                 subtitle=f"d = {v['d']}, {v['block']}-wide tiles, causal: {v['saving']:.1f}× less")


def decode_picture(s: Settings, v: Mapping[str, Any]) -> go.Figure:
    """The merge's weights exp(L_s - L), one bar per split, each with its logsumexp L_s: they sum to 1."""
    from flashviz.views.decode.claims import decode_setup
    from flashviz.views.decode.data import decode_trace, units_here

    setup = decode_setup(s)
    trace, *_ = decode_trace(setup.lens, setup.page, setup.chosen_splits(units_here(s.device, s.threads)))
    names = [f"split {k + 1}<br>keys {a:,}–{b - 1:,}" for k, (a, b) in enumerate(trace.splits)]  # its keys
    return _bars(names, list(trace.weights), [f"{w:.3f}<br>L_s = {x:.3f}" for w, x in
                                              zip(trace.weights, trace.split_lse, strict=True)],
                 [impl_color(FLASH2)] * len(names), title="The merge: split s weighs exp(L_s − L)",
                 subtitle=f"L = log Σ exp(L_s) = {v['lse']:.4g}; the weights sum to {v['weights']:.3f}",
                 y_title="weight of the split")


def gqa_picture(s: Settings, v: Mapping[str, Any]) -> go.Figure:
    """K/V bytes one decode step reads, MHA against this GQA and MQA, for the same FLOPs."""
    from flashviz.model.decode_batch import variant_costs
    from flashviz.views.decode.claims import decode_setup

    setup = decode_setup(s)
    costs = variant_costs(setup.lens, setup.d, setup.heads_q, setup.heads_kv, setup.dtype)
    kv = [float(b) / MIB for b in costs["kv_bytes"]]
    colors = [impl_color(FLASH2) if this else "#BBBBBB" for this in costs["this"]]
    return _bars([str(name) for name in costs["variant"]], kv, [format_bytes(b * MIB) for b in kv], colors,
                 title="K/V bytes read per decode step", y_title="MiB",
                 subtitle=f"{v['hq']} query heads; the same {v['flops']:,} FLOPs in each")


def numerics_picture(s: Settings, v: Mapping[str, Any]) -> go.Figure:
    """Rescales of the running output: the classic rule (every rise of m) against FA4's lazy one (tau)."""
    return _bars(["classic: every rise of m", f"lazy: only past tau = {v['tau']:.0f}"], [v["classic"], v["lazy"]],
                 [str(v["classic"]), str(v["lazy"])], [impl_color(FLASH), impl_color(FLASH2)],
                 title="Rescales of the running output O, same output", y_title="rescales",
                 subtitle=f"FA2 vs SDPA in bf16: {v['gap']:.0f} rounding step; Hadamard: FP8 error "
                          f"{v['gain']:.1f}× lower")


PICTURES: dict[str, Picture] = {  # a step's check -> the one picture that proves its numbers
    "scores_softmax": scores_picture,
    "memory_growth": memory_picture,
    "tiles_fate": tiles_picture,
    "online_softmax": row_picture,
    "io_passes": io_picture,
    "roofline_gpu": roof_picture,
    "causal_halves": tiles_picture,
    "masks_tiles": masks_picture,
    "training_recompute": train_picture,
    "backward_recompute": backward_picture,
    "decode_merge": decode_picture,
    "gqa_bytes": gqa_picture,
    "numerics_rounding": numerics_picture,
}


def picture(check: str, s: Settings, values: Mapping[str, Any]) -> go.Figure:
    """The picture of the step checked by `check`, at settings s, with its check's values.

    Example:
        >>> from flashviz.lesson.steps import INTRO, step_settings
        >>> step = INTRO.step("causal_halves")
        >>> fig = picture(step.check, step_settings(step), step.stated)
        >>> fig.layout.height, [t.name for t in fig.data][1:]
        (470, ['120 full', '16 partial', '120 skipped'])
    """
    if check not in PICTURES:
        raise ValueError(f"No slide picture for the check {check!r}: add one to PICTURES (one of "
                         f"{', '.join(PICTURES)}).")
    return PICTURES[check](s, values)


__all__ = ["MEASURES", "PICTURES", "SLIDE_FIGURE_PX", "picture"]
