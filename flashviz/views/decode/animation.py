"""The animation of one decode step (Flash-Decoding): the splits of the KV cache computed side by side, each with
its running m and l, then merged by their logsumexps. The block table, the roofline and the measured read rate are
in flashviz.views.decode.figures.

No torch, no streamlit: the builder takes a DecodeTrace of plain numbers (flashviz.views.decode.data.decode_trace
turns flash_decode's on_split events into one; it is read here for type checking only).

Legend: N_b keys of sequence b, S splits, L_s a split's logsumexp, L = log sum_s exp(L_s) the merged one, m and l the
running row max and row sum of exp(S_ij - m) (natural log), g = H_q / H_kv query heads per K/V head.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz.figures.palette import BASE_FONT_PX, LINE_PX, MARKER_PX
from flashviz.figures.style import flashviz_template, subtitle_lines

if TYPE_CHECKING:  # plain data; the measure module itself imports torch
    from flashviz.views.decode.data import DecodeTrace

SPLIT_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")  # Okabe-Ito
PENDING_OPACITY = 0.25  # a KV block not read yet
MAX_STEPS = 40  # animation frames before the merge: larger splits advance several blocks per frame
ANIMATION_HEIGHT_PX = 820  # four stacked panels with the slider underneath
ANIMATION_TOP_PX = 166  # the title and two lines of subtitle (the frames' step text wraps to two)
ANIMATION_BOTTOM_PX = 190  # tick labels, the axis title, then the slider and the buttons
SLIDER_TOP_PX = 95  # below the plot: under the axis title
SLIDER_X = 0.38  # the slider starts right of the Play / Pause buttons
LANE_MEANING = {"m": "m: the largest scaled score S = q·k/√d read so far", "l": "l: Σ exp(S − m) over the keys read"}


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
        >>> from flashviz.views.decode.data import DecodeTrace
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
    """The slider's words for a frame, whole: how many of its own blocks each split has read, or the merge.

    Example:
        >>> _step_label(3, 16), _step_label(None, 16)
        ('each split has read 3 of its 16 blocks', 'merge: every block read, the splits combined')
    """
    return ("merge: every block read, the splits combined" if done is None else
            f"each split has read {done} of its {most} blocks")


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
                     "currentvalue": {"prefix": "",
                                      "font": {"size": BASE_FONT_PX, "color": "#111111"}},
                     "font": {"size": 2, "color": "rgba(0,0,0,0)"}, "ticklen": 0, "minorticklen": 0,
                     "steps": [{"method": "animate", "label": label, "args": [[name], {
                         "mode": "immediate", "frame": {"duration": 0, "redraw": True},
                         "transition": {"duration": 0}}]} for name, label in zip(names, labels, strict=True)]}],
    }
