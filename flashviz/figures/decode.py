"""Figures of one decode step (Flash-Decoding): the splits computed side by side and merged by their logsumexps, the
paged cache's block table, decoding on the roofline next to prefill, and the measured cache read rate.

No torch, no streamlit: the builders take plain numbers (DecodeTrace, lists, DataFrames). The dashboard turns
flash_decode's on_split events into a DecodeTrace.

Legend: N_b keys of sequence b, S splits, L_s a split's logsumexp, L = log sum_s exp(L_s) the merged one, m and l the
running row max and row sum of exp(S_ij - m) (natural log), g = H_q / H_kv query heads per K/V head.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz.figures.palette import BASE_FONT_PX, LINE_PX, MARKER_PX, REFERENCE_COLOR
from flashviz.figures.style import (
    FIG_HEIGHT_PX,
    GB,
    add_note,
    flashviz_template,
    log_axis,
    set_subtitle,
    style_figure,
    subtitle_lines,
)

SPLIT_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")  # Okabe-Ito
PENDING_OPACITY = 0.25  # a KV block not read yet
MAX_STEPS = 40  # animation frames before the merge: larger splits advance several blocks per frame
ANIMATION_HEIGHT_PX = 820  # four stacked panels with the slider underneath
ANIMATION_TOP_PX = 166  # the title and two lines of subtitle (the frames' step text wraps to two)
ANIMATION_BOTTOM_PX = 190  # tick labels, the axis title, then the slider and the buttons
SLIDER_TOP_PX = 95  # below the plot: under the axis title
SLIDER_X = 0.38  # the slider starts right of the Play / Pause buttons
TABLE_COLS_MAX = 64  # logical pages drawn per sequence; more are summarised in the subtitle
POOL_WIDTH = 32  # physical pages per row of the pool drawing
TEXT_CELLS_MAX = 32  # page numbers written inside the cells up to this many columns (beyond, hover only)
VARIANT_SYMBOLS = {"MHA": "circle", "MQA": "square"}  # GQA variants get a diamond
PREFILL_SYMBOL = "star"
ROOF_DASHES = ("solid", "dash", "dot", "dashdot", "longdash")
LANE_MEANING = {"m": "m: the largest scaled score S = q·k/√d read so far", "l": "l: Σ exp(S − m) over the keys read"}


@dataclass(frozen=True)
class DecodeTrace:
    """One decode step for sequence 0, query head 0, query row 0: what the animation draws (plain numbers)."""

    seq_len: int  # keys of sequence 0 (the longest)
    block_k: int  # keys per KV block (the page size when paged)
    splits: tuple[tuple[int, int], ...]  # (start, stop) key range of each split, from the on_split events
    block_m: tuple[float, ...]  # m of each KV block on its own: max of its scaled scores
    block_l: tuple[float, ...]  # l of each KV block on its own: sum of exp(S_ij - block m)
    split_m: tuple[float, ...]  # m_s of each split (event)
    split_l: tuple[float, ...]  # l_s of each split (event)
    split_lse: tuple[float, ...]  # L_s = m_s + log l_s (event)
    weights: tuple[float, ...]  # exp(L_s - L): each split's share of the output (merge event)
    lse: float  # L, the merged logsumexp (merge event)


def split_color(s: int) -> str:
    """The colour of split s (cycling through the palette)."""
    return SPLIT_COLORS[s % len(SPLIT_COLORS)]


def split_blocks(trace: DecodeTrace) -> list[range]:
    """The KV blocks of each split (block i holds keys i*block_k .. (i+1)*block_k - 1 of sequence 0)."""
    n_blocks = math.ceil(trace.seq_len / trace.block_k)
    return [range(min(a // trace.block_k, n_blocks), min(math.ceil(b / trace.block_k), n_blocks))
            for a, b in trace.splits]


def running_stats(block_m: Sequence[float], block_l: Sequence[float]) -> tuple[list[float], list[float]]:
    """Online softmax over blocks: the running m and l after each block (m = max, l rescaled by exp(m_old - m_new)).

    Example:
        >>> running_stats([0.0, 1.0], [2.0, 1.0])  # after block 2: m = 1, l = 2 e^-1 + 1
        ([0.0, 1.0], [2.0, 1.7357588823428847])
    """
    ms, ls, m, l = [], [], -math.inf, 0.0
    for mb, lb in zip(block_m, block_l, strict=True):
        m_new = max(m, mb)
        if m_new > -math.inf:
            l = l * math.exp(m - m_new) + lb * math.exp(mb - m_new)
        m = m_new
        ms.append(m)
        ls.append(l)
    return ms, ls


def _frame_steps(most: int, max_steps: int = MAX_STEPS) -> list[int]:
    """Blocks read per split at each frame: 0, then up to `max_steps` evenly spaced counts ending at `most`."""
    if most <= max_steps:
        return list(range(most + 1))
    return [0, *sorted({math.ceil(k * most / max_steps) for k in range(1, max_steps + 1)})]


def _lane(trace: DecodeTrace, blocks: range, done: int) -> tuple[list[float], list[float], list[float]]:
    """x (key position at the end of each block read), running m and running l of one split after `done` blocks."""
    take = list(blocks)[:done]
    ms, ls = running_stats([trace.block_m[i] for i in take], [trace.block_l[i] for i in take])
    xs = [min((i + 1) * trace.block_k, trace.seq_len) for i in take]
    return xs, ms, ls


def _frame_data(trace: DecodeTrace, per_split: list[range], done: int | None) -> list:
    """The animated traces at one frame: cache strip, then each split's m lane, l lane, then the merge bars.
    done=None is the merge frame (every block read, weights shown)."""
    n_blocks = math.ceil(trace.seq_len / trace.block_k)
    opacity = [PENDING_OPACITY] * n_blocks
    data: list = []
    for blocks in per_split:
        for i in list(blocks)[: len(blocks) if done is None else done]:
            opacity[i] = 1.0
    data.append(go.Bar(marker={"opacity": opacity}))
    for blocks in per_split:
        xs, ms, ls = _lane(trace, blocks, len(blocks) if done is None else done)
        data += [go.Scatter(x=xs, y=ms), go.Scatter(x=xs, y=ls)]
    shown = trace.weights if done is None else [0.0] * len(trace.weights)
    data.append(go.Bar(y=list(shown), text=[f"{w:.3f}" if done is None else "" for w in trace.weights]))
    return data


def _frame_title(trace: DecodeTrace, done: int | None, most: int) -> str:
    if done is None:
        return (f"merge: L = log Σ exp(L_s) = {trace.lse:.4g}; split s contributes exp(L_s − L) of the output")
    if done == 0:
        return f"{len(trace.splits)} split(s) of the cache, each to be read independently of the others"
    if len(trace.splits) == 1:
        return f"step {done} of {most}: the one split has read {done} block(s), one after the other"
    return f"step {done} of {most}: every split has read {done} block(s) of its own, in parallel"


def decode_animation(trace: DecodeTrace, *, title: str | None = None) -> go.Figure:
    """Animation of one Flash-Decoding step: the cache's KV blocks coloured by split, the splits read side by side
    (each with its running m and l), then the merge with each split's weight exp(L_s − L).

    Args:
        trace: the step (DecodeTrace).  title: figure title.
    Returns:
        plotly Figure with four stacked panels sharing the key-position axis, frames "0".."K" (blocks read per split)
        and "merge", a slider and Play / Pause buttons.

    Example:
        >>> t = DecodeTrace(4, 1, ((0, 2), (2, 4)), (0.0, 1.0, 0.5, 0.2), (1.0, 1.0, 1.0, 1.0), (1.0, 0.5),
        ...                 (1.37, 1.74), (1.31, 1.05), (0.56, 0.44), 1.89)
        >>> [f.name for f in decode_animation(t).frames]
        ['0', '1', '2', 'merge']
    """
    per_split = split_blocks(trace)
    most = max((len(b) for b in per_split), default=0)
    steps = _frame_steps(most)
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.05, row_heights=[0.12, 0.3, 0.3, 0.28])
    fig.update_layout(template=flashviz_template(), height=ANIMATION_HEIGHT_PX, barmode="overlay",
                      title={"text": title or "One decode step, split along the KV cache (Flash-Decoding)"})
    fig.update_layout(title_subtitle_text=subtitle_lines(_frame_title(trace, 0, most)),
                      title_subtitle_font_size=BASE_FONT_PX, margin={"t": ANIMATION_TOP_PX, "b": ANIMATION_BOTTOM_PX},
                      showlegend=False)
    _label_splits(fig, trace)
    _add_cache_strip(fig, trace, per_split)
    _add_lanes(fig, trace)
    _add_ghosts(fig, trace, per_split)
    _fix_axes(fig, trace, per_split)
    frames = [(str(k), done) for k, done in enumerate(steps)] + [("merge", None)]
    animated = list(range(2 * len(trace.splits) + 2))  # cache strip, m and l lanes, merge bars; not the ghosts
    fig.frames = [go.Frame(name=name, data=_frame_data(trace, per_split, done), traces=animated,
                           layout={"title": {"subtitle": {"text": subtitle_lines(_frame_title(trace, done, most))}}})
                  for name, done in frames]
    fig.update_layout(**_controls([name for name, _ in frames], [_step_label(d, most) for _, d in frames]))
    return fig


def _add_cache_strip(fig: go.Figure, trace: DecodeTrace, per_split: list[range]) -> None:
    """Row 1: one bar per KV block of sequence 0, coloured by its split, pale until read."""
    n_blocks = math.ceil(trace.seq_len / trace.block_k)
    owner = {i: s for s, blocks in enumerate(per_split) for i in blocks}
    starts = [i * trace.block_k for i in range(n_blocks)]
    widths = [min(trace.block_k, trace.seq_len - a) for a in starts]
    fig.add_trace(go.Bar(
        x=[a + w / 2 for a, w in zip(starts, widths, strict=True)], y=[1] * n_blocks, width=widths,
        marker={"color": [split_color(owner.get(i, 0)) for i in range(n_blocks)],
                "opacity": [PENDING_OPACITY] * n_blocks,
                "line": {"width": 1 if n_blocks <= 128 else 0, "color": "white"}},
        customdata=[(i, a, a + w - 1, owner.get(i, -1), trace.block_m[i], trace.block_l[i])
                    for i, (a, w) in enumerate(zip(starts, widths, strict=True))],
        hovertemplate=("KV block %{customdata[0]}: keys %{customdata[1]}–%{customdata[2]}, split %{customdata[3]}"
                       "<br>block m = %{customdata[4]:.4g}, block l = %{customdata[5]:.4g}<extra></extra>"),
        showlegend=False), row=1, col=1)


def _add_lanes(fig: go.Figure, trace: DecodeTrace) -> None:
    """Rows 2-3: each split's running m and l (filled in by the frames); row 4: the merge weights (0 until the
    merge frame)."""
    for s, (a, b) in enumerate(trace.splits):
        for row, name, final in ((2, "m", trace.split_m[s]), (3, "l", trace.split_l[s])):
            fig.add_trace(go.Scatter(
                x=[], y=[], mode="lines+markers", line={"color": split_color(s), "width": LINE_PX, "shape": "hv"},
                marker={"size": MARKER_PX - 3, "color": split_color(s)}, name=f"split {s}: keys {a}–{b - 1}",
                legendgroup=f"split {s}", showlegend=False,
                hovertemplate=(f"split {s} after key %{{x}}: running {name} = %{{y:.4g}}<br>"
                               f"final {name}_{s} = {final:.4g}<br>{LANE_MEANING[name]}<extra></extra>")),
                row=row, col=1)
    mids = [(a + b) / 2 for a, b in trace.splits]
    fig.add_trace(go.Bar(
        x=mids, y=[0.0] * len(mids), width=[b - a for a, b in trace.splits], text=[""] * len(mids),
        textposition="outside", textfont={"size": BASE_FONT_PX}, cliponaxis=False,
        marker={"color": [split_color(s) for s in range(len(mids))]}, showlegend=False,
        customdata=[(s, lse) for s, lse in enumerate(trace.split_lse)],
        hovertemplate=("split %{customdata[0]}: L_s = %{customdata[1]:.4g}<br>weight exp(L_s − L) = %{y:.4g}"
                       f"<br>L = {trace.lse:.4g}<extra></extra>")), row=4, col=1)


def _add_ghosts(fig: go.Figure, trace: DecodeTrace, per_split: list[range]) -> None:
    """Each split's whole m and l lane, pale and static: the picture before Play, and where each lane is heading."""
    for s, blocks in enumerate(per_split):
        xs, ms, ls = _lane(trace, blocks, len(blocks))
        a, b = trace.splits[s]
        for row, ys in ((2, ms), (3, ls)):
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines", line={"color": split_color(s), "width": LINE_PX, "shape": "hv"},
                opacity=PENDING_OPACITY + 0.1, name=f"split {s}: keys {a}–{b - 1}", legendgroup=f"split {s}",
                showlegend=False, hovertemplate=(f"split {s}, after key %{{x}}: running value %{{y:.4g}} (once "
                                                    "read)<extra></extra>")), row=row, col=1)


def _label_splits(fig: go.Figure, trace: DecodeTrace) -> None:
    """'split s' written on the cache strip over each split's keys (up to 8 splits; beyond, the hover says it)."""
    if len(trace.splits) > len(SPLIT_COLORS):
        return
    for s, (a, b) in enumerate(trace.splits):
        fig.add_annotation(x=(a + b) / 2, y=0.5, xref="x", yref="y", text=f"<b>split {s}</b>", showarrow=False,
                           font={"size": BASE_FONT_PX, "color": "#111111"})


def _step_label(done: int | None, most: int) -> str:
    return "merge" if done is None else f"{done}/{most} blocks"


def _fix_axes(fig: go.Figure, trace: DecodeTrace, per_split: list[range]) -> None:
    """Fixed ranges for every frame: the whole cache on x, every running value on y."""
    lanes = [_lane(trace, blocks, len(blocks)) for blocks in per_split]
    ms = [m for _, lane_m, _ in lanes for m in lane_m if m > -math.inf] or [0.0]
    ls = [v for _, _, lane_l in lanes for v in lane_l] or [1.0]
    pad = 0.1 * (max(ms) - min(ms)) + 0.1
    fig.update_xaxes(range=[0, trace.seq_len], showgrid=False)
    fig.update_xaxes(title_text="key position in sequence 0's cache (tokens)", row=4, col=1)
    fig.update_yaxes(range=[0, 1], showticklabels=False, title_text="cache", row=1, col=1)
    fig.update_yaxes(range=[min(ms) - pad, max(ms) + pad], title_text="running m", row=2, col=1)
    fig.update_yaxes(range=[0, max(ls) * 1.1], title_text="running l", row=3, col=1)
    fig.update_yaxes(range=[0, 1.25], title_text="weight", row=4, col=1)


def _controls(names: list[str], labels: list[str]) -> dict:
    """Play / Pause and a frame slider under the panels: the slider's label above its rail, the buttons level with
    the rail, left of it."""
    plot_h = ANIMATION_HEIGHT_PX - ANIMATION_TOP_PX - ANIMATION_BOTTOM_PX
    frame_ms = int(min(900, max(300, 12000 / max(1, len(names)))))  # 12 s a run; >= 300 ms to read each step
    play = {"frame": {"duration": frame_ms, "redraw": True}, "fromcurrent": True, "transition": {"duration": 0},
            "mode": "immediate"}
    pause = {"frame": {"duration": 0, "redraw": False}, "transition": {"duration": 0}, "mode": "immediate"}
    return {
        "updatemenus": [{"type": "buttons", "direction": "left", "x": 0, "y": -(SLIDER_TOP_PX + 22) / plot_h,
                         "xanchor": "left",
                         "yanchor": "top", "showactive": False, "font": {"size": BASE_FONT_PX},
                         "buttons": [{"label": "▶ Play", "method": "animate", "args": [None, play]},
                                     {"label": "❚❚ Pause", "method": "animate", "args": [[None], pause]}]}],
        "sliders": [{"active": 0, "x": SLIDER_X, "len": 1 - SLIDER_X, "y": -SLIDER_TOP_PX / plot_h, "yanchor": "top",
                     "currentvalue": {"prefix": "shown: ", "font": {"size": BASE_FONT_PX, "color": "#111111"}},
                     "font": {"size": 2, "color": "rgba(0,0,0,0)"}, "ticklen": 0, "minorticklen": 0,
                     "steps": [{"method": "animate", "label": label, "args": [[name], {
                         "mode": "immediate", "frame": {"duration": 0, "redraw": True},
                         "transition": {"duration": 0}}]} for name, label in zip(names, labels, strict=True)]}],
    }


# ----------------------------------------------------------------------------------------------------------------------
# paged cache


def _split_of(key: int, splits: Sequence[tuple[int, int]]) -> int | None:
    return next((s for s, (a, b) in enumerate(splits) if a <= key < b), None)


def block_table_figure(table: Sequence[Sequence[int]], seqlens: Sequence[int], page_size: int, num_pages: int,
                       splits: Sequence[tuple[int, int]]) -> go.Figure:
    """The paged KV cache: the block table (sequence b's logical page j -> physical page, written in the cell, the
    cell coloured by the split that reads it) above the physical page pool (each page coloured by its owner).

    Args:
        table: (B, max_pages) physical page of each logical page.  seqlens: keys per sequence.
        page_size: keys per page.  num_pages: pages in the pool.  splits: (start, stop) key range of each split.
    Returns:
        plotly Figure with two heatmaps.

    Example:
        >>> fig = block_table_figure([[2, 0], [1, 3]], [5, 3], 4, 5, [(0, 4), (4, 8)])
        >>> fig.data[0].text[0], fig.data[1].z[0]
        (['2', '0'], [0, 1, 0, None, None])
    """
    pages = [math.ceil(n / page_size) for n in seqlens]
    cols = min(max(pages, default=0), TABLE_COLS_MAX)
    z, text, hover = [], [], []
    for b, row in enumerate(table):
        z.append([_split_of(j * page_size, splits) if j < pages[b] else None for j in range(cols)])
        text.append([str(row[j]) if j < pages[b] else "" for j in range(cols)])
        hover.append([f"sequence {b}, logical page {j} (keys {j * page_size}–"
                      f"{min((j + 1) * page_size, seqlens[b]) - 1}) → physical page {row[j]}" if j < pages[b]
                      else f"sequence {b}: no page {j}" for j in range(cols)])
    owner: dict[int, tuple[int, int]] = {int(table[b][j]): (b, j) for b in range(len(table)) for j in range(pages[b])}
    width = min(POOL_WIDTH, max(1, num_pages))
    rows = math.ceil(num_pages / width)
    pool = [[owner[p][0] if (p := r * width + c) in owner else None for c in range(width)] for r in range(rows)]
    pool_text = [[f"{owner[p][0]}·{owner[p][1]}" if (p := r * width + c) in owner else "" for c in range(width)]
                 for r in range(rows)]
    pool_hover = [[(f"physical page {p}: sequence {owner[p][0]}'s logical page {owner[p][1]}" if p in owner else
                    f"physical page {p}: free") if (p := r * width + c) < num_pages else "" for c in range(width)]
                  for r in range(rows)]
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.3, row_heights=[0.5, 0.5],
                        subplot_titles=("block table: cell = physical page, colour = split",
                                        "physical page pool: cell = sequence·logical page, colour = sequence"))
    fig.update_layout(template=flashviz_template(), height=FIG_HEIGHT_PX + 140,
                      title={"text": f"Paged cache, {page_size} keys per page: block table → pages"})
    n_splits = max(1, len(splits))
    fig.add_trace(go.Heatmap(z=z, text=text, texttemplate="%{text}" if cols <= TEXT_CELLS_MAX else None,
                             customdata=hover, hovertemplate="%{customdata}<extra></extra>", zmin=-0.5,
                             zmax=n_splits - 0.5, colorscale=_discrete([split_color(s) for s in range(n_splits)]),
                             showscale=False, xgap=2, ygap=2, textfont={"size": BASE_FONT_PX - 2}), row=1, col=1)
    n_seq = max(1, len(table))
    fig.add_trace(go.Heatmap(z=pool, text=pool_text, texttemplate="%{text}" if width <= 16 else None,
                             customdata=pool_hover, hovertemplate="%{customdata}<extra></extra>", zmin=-0.5,
                             zmax=n_seq - 0.5, colorscale=_discrete(["#4D4D4D", "#999999", "#D9A441", "#7FB3D5"][:n_seq]
                                                                    or ["#4D4D4D"]),
                             showscale=False, xgap=2, ygap=2, textfont={"size": BASE_FONT_PX - 4}), row=2, col=1)
    fig.update_yaxes(autorange="reversed", title_text="sequence b", dtick=1, row=1, col=1)
    fig.update_xaxes(title_text=f"logical page j (keys j·{page_size} onward)", row=1, col=1)
    fig.update_yaxes(autorange="reversed", title_text=f"row (×{width})", dtick=1, row=2, col=1)
    fig.update_xaxes(title_text=f"physical page p = row × {width} + column", row=2, col=1)
    fig.update_annotations(font_size=BASE_FONT_PX)
    if max(pages, default=0) > cols:
        set_subtitle(fig, f"first {cols} of {max(pages)} logical pages shown")
    return fig


def _discrete(colors: Sequence[str]) -> list[list]:
    """A colorscale giving integer z = 0..len-1 one flat colour each."""
    n = len(colors)
    if n == 1:
        return [[0.0, colors[0]], [1.0, colors[0]]]
    return [[edge, c] for i, c in enumerate(colors) for edge in (i / n, (i + 1) / n)]


# ----------------------------------------------------------------------------------------------------------------------
# roofline and measurements


def decode_roofline_figure(points: pd.DataFrame, roofs: pd.DataFrame, *, dtype: str, prefill: str = "") -> go.Figure:
    """Decode steps (MHA, GQA, MQA) and prefill on each device's roofline.

    Args:
        points: one row per (device, label): device, label ("MHA", "GQA (g = 4)", "MQA", "prefill ..."), kind
            ("decode" or "prefill"), intensity (FLOP/byte), attainable_flops (FLOP/s), flops, hbm_bytes, time_s.
        roofs: one row per device: device, peak_flops (FLOP/s), bandwidth (bytes/s).
        dtype: named in the subtitle.  prefill: what the prefill points are, for the subtitle.
    Returns:
        plotly Figure, log-log.

    Example:
        >>> pts = pd.DataFrame({"device": ["A"], "label": ["MHA"], "kind": ["decode"], "intensity": [1.0],
        ...                     "attainable_flops": [2e12], "flops": [4e6], "hbm_bytes": [4e6], "time_s": [2e-6]})
        >>> [t.name for t in decode_roofline_figure(pts, pd.DataFrame({"device": ["A"], "peak_flops": [3e14],
        ...     "bandwidth": [2e12]}), dtype="float16").data]
        ['A roof', 'MHA']
    """
    fig = go.Figure()
    style_figure(fig, title="Decoding on the roofline, next to prefill", x_title="arithmetic intensity (FLOP/byte)",
                 y_title="attainable throughput (FLOP/s)", log_x=True, log_y=True)
    set_subtitle(fig, f"{dtype} peaks, a model · decode: one new token per sequence against its KV cache"
                 + (f" · {prefill}" if prefill else ""))
    if points is None or len(points) == 0:
        add_note(fig, "No data.")
        return fig
    rates = roofs.drop_duplicates("device").reset_index(drop=True)
    ridges = rates["peak_flops"] / rates["bandwidth"]
    xs = [*points["intensity"].astype(float), *ridges]
    x_lo, x_hi = min(xs) / 4, max(xs) * 4
    for k, r in rates.iterrows():
        peak, bw = float(r["peak_flops"]), float(r["bandwidth"])
        ridge = peak / bw
        rx = [x_lo, ridge, x_hi] if x_lo < ridge < x_hi else [x_lo, x_hi]
        fig.add_trace(go.Scatter(
            x=rx, y=[min(peak, bw * x) for x in rx], mode="lines", name=f"{str(r['device']).split(' (')[0]} roof",
            line={"color": "#333333", "width": 2.5, "dash": ROOF_DASHES[k % len(ROOF_DASHES)]},
            hovertemplate=(f"<b>{r['device']}</b><br>peak {peak / 1e12:.4g} TFLOP/s, {bw / GB:.4g} GB/s, ridge "
                           f"{ridge:.3g} FLOP/byte<br>at %{{x:.3g}} FLOP/byte: at most %{{y:.3s}}FLOP/s"
                           "<extra></extra>")))
    for label in dict.fromkeys(points["label"]):
        rows = points[points["label"] == label]
        prefill = rows["kind"].iloc[0] == "prefill"
        symbol = PREFILL_SYMBOL if prefill else VARIANT_SYMBOLS.get(label.split(" ")[0], "diamond")
        fig.add_trace(go.Scatter(
            x=rows["intensity"], y=rows["attainable_flops"], mode="markers", name=label,
            marker={"symbol": symbol, "size": MARKER_PX + (8 if prefill else 4), "line": {"width": 1, "color": "#000"}},
            customdata=list(zip(rows["device"], rows["flops"], rows["hbm_bytes"], rows["time_s"] * 1e6, strict=True)),
            hovertemplate=(f"<b>{label}</b> on %{{customdata[0]}}<br>%{{customdata[1]:.3s}}FLOP over "
                           "%{customdata[2]:.3s}B<br>%{x:.3g} FLOP/byte → %{y:.3s}FLOP/s<br>"
                           "predicted %{customdata[3]:.3g} µs<extra></extra>")))
    fig.update_xaxes(**log_axis([x_lo, x_hi], "si"))
    fig.update_yaxes(**log_axis([*(rates["bandwidth"] * x_lo), *(rates["peak_flops"] * 2)], "si"))
    fig.update_layout(height=FIG_HEIGHT_PX + 60)
    return fig


def bandwidth_figure(df: pd.DataFrame, bandwidth: float | None) -> go.Figure:
    """Measured read rate of the KV cache per implementation (K/V bytes / median time per decode step), against the
    machine's measured memory read bandwidth.

    Args:
        df: one row per implementation: label, time_s (median s), q1_s, q3_s (quartiles, s), kv_bytes.
        bandwidth: bytes/s measured on this machine by reading 64 MiB (a dashed line); None: no line.
    Returns:
        plotly Figure with one bar per implementation (error bars: the rate at the quartile times).

    Example:
        >>> df = pd.DataFrame({"label": ["SDPA"], "time_s": [0.01], "q1_s": [0.009], "q3_s": [0.011],
        ...                    "kv_bytes": [1e8]})
        >>> float(bandwidth_figure(df, 2e10).data[0].y[0])  # GB/s
        10.0
    """
    fig = go.Figure()
    style_figure(fig, title="Decode step: K/V cache read rate, measured", x_title="implementation",
                 y_title="K/V bytes read / time (GB/s)")
    if df is None or len(df) == 0:
        add_note(fig, "No measurements.")
        return fig
    rate = df["kv_bytes"] / df["time_s"] / GB
    hi, lo = df["kv_bytes"] / df["q1_s"] / GB, df["kv_bytes"] / df["q3_s"] / GB
    names = [f"{str(x).replace(' ', '<br>', 1)}<br>{t * 1e3:.3g} ms" for x, t in zip(df["label"], df["time_s"],
                                                                                     strict=True)]
    fig.add_trace(go.Bar(
        x=names, y=rate, marker={"color": ["#0072B2" if str(x).startswith("flash") else "#999999"
                                           for x in df["label"]]},
        error_y={"type": "data", "array": list(hi - rate), "arrayminus": list(rate - lo), "thickness": 2},
        customdata=list(zip(df["time_s"] * 1e3, df["kv_bytes"] / 2**20, strict=True)), name="measured",
        hovertemplate=("<b>%{x}</b><br>%{customdata[0]:.3g} ms per decode step<br>%{customdata[1]:.4g} MiB of K/V"
                       "<br>%{y:.3g} GB/s<extra></extra>")))
    top = float(max(hi.max(), (bandwidth or 0) / GB))
    if bandwidth:
        fig.add_hline(y=bandwidth / GB, line={"color": REFERENCE_COLOR, "width": 2.5, "dash": "dash"},
                      annotation_text=f"RAM read bandwidth here: {bandwidth / GB:.3g} GB/s",
                      annotation_position="top left",
                      annotation_font={"size": BASE_FONT_PX, "color": REFERENCE_COLOR})
    fig.update_yaxes(range=[0, top * 1.2])
    fig.update_xaxes(type="category", tickangle=0, title_text="implementation (median time per decode step)")
    fig.update_layout(showlegend=False, margin={"b": 170})
    return fig
