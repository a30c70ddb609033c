"""Figures of a decode step's surroundings: the paged KV cache's block table (coloured by split and owner), decoding
on the roofline next to prefill, and the measured read rate of the cache against this machine's bandwidth. The
animation of the step itself is flashviz.figures.decode.

No torch, no streamlit: the builders take plain numbers (lists, DataFrames).

Legend: S splits, g = H_q / H_kv query heads per K/V head; a page holds page_size consecutive keys of one sequence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz.figures.decode import split_color
from flashviz.figures.palette import BASE_FONT_PX, MARKER_PX, REFERENCE_COLOR
from flashviz.figures.style import FIG_HEIGHT_PX, GB, add_note, flashviz_template, log_axis, set_subtitle, style_figure
from flashviz.model.decode_batch import PREFILL  # torch-free: the points' kinds

TABLE_COLS_MAX = 64  # logical pages drawn per sequence; more are summarised in the subtitle
POOL_WIDTH = 32  # physical pages per row of the pool drawing
TEXT_CELLS_MAX = 32  # page numbers written inside the cells up to this many columns (beyond, hover only)
VARIANT_SYMBOLS = {"MHA": "circle", "MQA": "square"}  # GQA variants get a diamond
PREFILL_SYMBOL = "star"
ROOF_DASHES = ("solid", "dash", "dot", "dashdot", "longdash")
FLASH_COLOR, OTHER_COLOR = "#0072B2", "#999999"  # the measured bars: flash_decode runs, the others
FLASH_PREFIX = "flash"  # labels of flash_decode's bars start with it


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
        prefill = rows["kind"].iloc[0] == PREFILL
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
        x=names, y=rate, marker={"color": [FLASH_COLOR if str(x).startswith(FLASH_PREFIX) else OTHER_COLOR
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
