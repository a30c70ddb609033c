"""Figures of a decode step's surroundings: the paged KV cache's block table (coloured by split and owner), decoding
on the roofline next to prefill, and the measured read rate of the cache against this machine's bandwidth; and the
lesson's slides of the two steps on this view (flashviz.app.slides): the merge's weights (`decode_picture`) and the
K/V bytes of MHA, GQA and MQA (`gqa_picture`). The animation of the step itself is flashviz.views.decode.animation.

No torch, no streamlit: the builders take plain numbers (lists, DataFrames).

Legend: S splits, g = H_q / H_kv query heads per K/V head; a page holds page_size consecutive keys of one sequence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz.figures.palette import BASE_FONT_PX, MARKER_PX, REFERENCE_COLOR
from flashviz.figures.slide import slide_bars
from flashviz.figures.style import (
    FIG_HEIGHT_PX,
    GB,
    MIB,
    add_note,
    flashviz_template,
    impl_color,
    log_axis,
    set_subtitle,
    style_figure,
)
from flashviz.model.decode_batch import PREFILL  # torch-free: the points' kinds
from flashviz.units import format_bytes
from flashviz.views.decode.animation import split_color
from flashviz.vocab import FLASH2

if TYPE_CHECKING:  # the settings' fields only
    from flashviz.views.decode.settings import DecodeSettings

TABLE_PAGES_MAX = 64  # logical pages drawn per sequence; more are summarised in the subtitle
POOL_PAGES_MAX = 128  # physical pages drawn (8 rows); the subtitle says when there are more
PAGES_PER_ROW = 16  # pages per row of the block table and of the pool: wide enough cells for their numbers
CELL_FONT_PX = 16  # page numbers inside the cells
TABLE_ROW_PX = 34  # one row of cells
TABLE_FRAME_PX = 220  # the title, the two panel titles and the margins
TABLE_LEFT_PX = 150  # the rows' names: "seq 0: 48–63", "pages 128–143"
OWNER_COLORS = ("#C7C7C7", "#F4C28A", "#9ECAE9", "#B5DDA4")  # pool pages by owning sequence: light, so text reads
VARIANT_SYMBOLS = {"MHA": "circle", "MQA": "square"}  # GQA variants get a diamond
PREFILL_SYMBOL = "star"
ROOF_DASHES = ("solid", "dash", "dot", "dashdot", "longdash")
FLASH_COLOR, OTHER_COLOR = "#0072B2", "#999999"  # the measured bars: flash_decode runs, the others
FLASH_PREFIX = "flash"  # labels of flash_decode's bars start with it


def _split_of(key: int, splits: Sequence[tuple[int, int]]) -> int | None:
    return next((s for s, (a, b) in enumerate(splits) if a <= key < b), None)


def _rows_of(n: int, width: int) -> list[range]:
    """Indices 0..n-1 cut into rows of `width`."""
    return [range(a, min(a + width, n)) for a in range(0, n, width)]


def block_table_figure(table: Sequence[Sequence[int]], seqlens: Sequence[int], page_size: int, num_pages: int,
                       splits: Sequence[tuple[int, int]]) -> go.Figure:
    """The paged KV cache: the block table (sequence b's logical page j -> physical page, written in the cell, the
    cell coloured by the split that reads it; PAGES_PER_ROW logical pages a row, a sequence taking as many rows as
    it needs) above the physical page pool (each page written "b·j" for its owner's logical page, coloured by the
    owner). At most TABLE_PAGES_MAX logical pages of a sequence and POOL_PAGES_MAX physical pages are drawn; the
    subtitle says so.

    Args:
        table: (B, max_pages) physical page of each logical page.  seqlens: keys per sequence.
        page_size: keys per page.  num_pages: pages in the pool.  splits: (start, stop) key range of each split.
    Returns:
        plotly Figure with two heatmaps.

    Example:
        >>> fig = block_table_figure([[2, 0], [1, 3]], [5, 3], 4, 5, [(0, 4), (4, 8)])
        >>> fig.data[0].text[0], fig.data[0].z[0], fig.data[1].z[0]
        (['2', '0'], [0, 1], [0, 1, 0, None, None])
    """
    z, text, hover, names = _table_cells(table, seqlens, page_size, splits)
    pool_rows, pool, pool_text, pool_hover = _pool_cells(table, seqlens, page_size, num_pages)
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.16, row_heights=[len(z), max(len(pool), 1)],
                        subplot_titles=("block table: cell = physical page, colour = the split that reads it",
                                        "physical page pool: cell = sequence·logical page, colour = sequence"))
    fig.update_layout(template=flashviz_template(), height=TABLE_FRAME_PX + TABLE_ROW_PX * (len(z) + len(pool)),
                      title={"text": f"Paged cache, {page_size} keys per page: block table → pages"},
                      margin={"l": TABLE_LEFT_PX, "b": 30})
    n_splits = max(1, len(splits))
    fig.add_trace(go.Heatmap(z=z, text=text, texttemplate="%{text}", customdata=hover, y=names,
                             hovertemplate="%{customdata}<extra></extra>", zmin=-0.5, zmax=n_splits - 0.5,
                             colorscale=_discrete([split_color(s) for s in range(n_splits)]), showscale=False,
                             xgap=2, ygap=2, textfont={"size": CELL_FONT_PX, "color": "#000000"}), row=1, col=1)
    n_seq = max(1, len(table))
    fig.add_trace(go.Heatmap(z=pool, text=pool_text, texttemplate="%{text}", customdata=pool_hover,
                             y=[f"pages {r.start}–{r.stop - 1}" for r in pool_rows],
                             hovertemplate="%{customdata}<extra></extra>", zmin=-0.5, zmax=n_seq - 0.5,
                             colorscale=_discrete(list(OWNER_COLORS[:n_seq]) or [OWNER_COLORS[0]]), showscale=False,
                             xgap=2, ygap=2, textfont={"size": CELL_FONT_PX - 2, "color": "#000000"}), row=2, col=1)
    fig.update_yaxes(autorange="reversed", type="category", row=1, col=1)
    fig.update_yaxes(autorange="reversed", type="category", row=2, col=1)
    fig.update_xaxes(showticklabels=False, showgrid=False, ticks="")
    fig.update_annotations(font_size=BASE_FONT_PX)
    drawn = [math.ceil(n / page_size) for n in seqlens]
    cut = ([f"the first {TABLE_PAGES_MAX} of {max(drawn)} logical pages of a sequence"]
           if max(drawn, default=0) > TABLE_PAGES_MAX else [])
    cut += [f"the first {POOL_PAGES_MAX} of the pool's {num_pages} pages"] if num_pages > POOL_PAGES_MAX else []
    if cut:
        set_subtitle(fig, f"shown: {' and '.join(cut)}")
    return fig


def _table_cells(table: Sequence[Sequence[int]], seqlens: Sequence[int], page_size: int,
                 splits: Sequence[tuple[int, int]]) -> tuple[list, list, list, list]:
    """The block table's cells, PAGES_PER_ROW logical pages a row: split (colour), physical page (text), hover, and
    each row's name ("seq b: first–last page")."""
    pages = [min(math.ceil(n / page_size), TABLE_PAGES_MAX) for n in seqlens]
    width = min(max(pages, default=1), PAGES_PER_ROW)
    z, text, hover, names = [], [], [], []
    for b, row in enumerate(table):
        for cells in _rows_of(pages[b], width) or [range(0)]:
            pad = width - len(cells)
            z.append([_split_of(j * page_size, splits) for j in cells] + [None] * pad)
            text.append([str(row[j]) for j in cells] + [""] * pad)
            hover.append([f"sequence {b}, logical page {j} (keys {j * page_size}–"
                          f"{min((j + 1) * page_size, seqlens[b]) - 1}) → physical page {row[j]}, read by split "
                          f"{_split_of(j * page_size, splits)}" for j in cells] + [""] * pad)
            names.append(f"seq {b}: {cells.start}–{max(cells.start, cells.stop - 1)}")
    return z, text, hover, names


def _pool_cells(table: Sequence[Sequence[int]], seqlens: Sequence[int], page_size: int, num_pages: int
                ) -> tuple[list[range], list, list, list]:
    """The pool's rows of PAGES_PER_ROW physical pages (the first POOL_PAGES_MAX): owner sequence (colour), "b·j"
    (text), hover."""
    owner: dict[int, tuple[int, int]] = {int(table[b][j]): (b, j) for b in range(len(table))
                                         for j in range(math.ceil(seqlens[b] / page_size))}
    rows = _rows_of(min(num_pages, POOL_PAGES_MAX), PAGES_PER_ROW)
    z = [[owner[p][0] if p in owner else None for p in r] for r in rows]
    text = [[f"{owner[p][0]}·{owner[p][1]}" if p in owner else "free" for p in r] for r in rows]
    hover = [[f"physical page {p}: sequence {owner[p][0]}'s logical page {owner[p][1]}" if p in owner else
              f"physical page {p}: free" for p in r] for r in rows]
    return rows, z, text, hover


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


# ----------------------------------------------------------------------------------------------------------------------
# the lesson's slides: settings and the step's check's values -> the one picture


def decode_picture(s: DecodeSettings, v: Mapping[str, Any]) -> go.Figure:
    """The merge's weights exp(L_s - L), one bar per split, each with its logsumexp L_s: they sum to 1."""
    names = [f"split {k + 1}<br>{a:,}–{b - 1:,}" for k, (a, b) in enumerate(v["split_keys"])]  # and its keys
    return slide_bars(names, list(v["split_weights"]), [f"{w:.3f}<br>L_s = {x:.3f}" for w, x in
                                                        zip(v["split_weights"], v["split_lse"], strict=True)],
                      [impl_color(FLASH2)] * len(names), title="The merge: split s weighs exp(L_s − L)",
                      subtitle=f"L = log Σ exp(L_s) = {v['lse']:.4g}; the weights sum to {v['weights']:.3f}",
                      y_title="weight of the split")


def gqa_picture(s: DecodeSettings, v: Mapping[str, Any]) -> go.Figure:
    """K/V bytes one decode step reads, MHA against this GQA and MQA, for the same FLOPs."""
    kv = [b / MIB for b in v["kv_bytes"]]
    colors = [impl_color(FLASH2) if this else "#BBBBBB" for this in v["this_variant"]]
    return slide_bars(list(v["variants"]), kv, [format_bytes(b * MIB) for b in kv], colors,
                      title="K/V bytes read per decode step", y_title="MiB",
                      subtitle=f"{v['hq']} query heads; the same {v['flops']:,} FLOPs in each")
