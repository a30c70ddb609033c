"""Figures: tidy DataFrames in, plotly Figures out. No torch, no streamlit: only pandas and plotly.

The sweep figures: the largest error against a dtype's bar, memory vs N, time vs N, achieved GFLOP/s and modelled HBM
traffic; and what the FlashAttention paper argues with: HBM accesses against on-chip memory M (FA1 Theorem 2, with
real GPUs' SRAM per SM marked) and the block-size trade-off. Every figure shares the look of
flashviz.figures.style (template, colours, dashes and markers, unit-labelled log axes); the summary table and the
HTML report live in flashviz.figures.report, the roofline in flashviz.views.roof.figures.

Inputs are the DataFrames of flashviz.measure.sweep (columns impl, N, ..., time_s, time_iqr_s, peak_bytes, gflops,
hbm_bytes, status) and flashviz.model.iomodel.hbm_vs_memory; a CSV read back with pandas works too. Rows whose status is
not "ok" are drawn as grey-edged crosses along the bottom of the plot, with the reason in their hover text; an empty
or DataFrame where no row ran gives a labelled, empty figure with a note, never an exception.

References: Dao et al., FlashAttention (2022), Figure 2 (speed and memory vs N) and Theorem 2 (HBM accesses vs M).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz.figures.palette import AXIS_TITLE_FONT_PX, BASE_FONT_PX
from flashviz.figures.style import (
    BLOCK_FIG_HEIGHT_PX,
    LOWER_ARM_MAX,
    MIB,
    MS_PER_S,
    add_not_run,
    add_note,
    axis_extent,
    flashviz_template,
    impl_color,
    impl_line,
    impl_marker,
    impls_in,
    iqr_bars,
    log_axis,
    measured_axis,
    ok_rows,
    reference_line,
    set_subtitle,
    style_figure,
)
from flashviz.vocab import FLASH, IMPL_LABELS, LOOP_ORDER_SHORT, NAIVE, NUMERICS_KERNEL_LABELS, OK, SDPA

# ----------------------------------------------------------------------------------------------------------------------
# curves against N


def _sweep_lines(df: pd.DataFrame | None, *, x: str, y: str, scale: float, title: str, x_title: str, y_title: str,
                 hover_value: str, unit: str, log_y: bool = True, error: str | None = None,
                 interval: tuple[str, str] | None = None) -> go.Figure:
    """One line per implementation of y * scale against x (log x); rows not run as crosses at the bottom. Error bars:
    the `interval` columns (low, high) where every drawn row has them, else +/- half the `error` column."""
    fig = go.Figure()
    style_figure(fig, title=title, x_title=x_title, y_title=y_title, log_x=True, log_y=log_y)
    if df is None or len(df) == 0 or x not in df or y not in df:
        add_note(fig, "No data yet: run a sweep.")
        return fig
    df = df.sort_values(x)
    values = pd.to_numeric(df[y], errors="coerce") * scale
    drawn = ok_rows(df) & values.notna() & (values > 0 if log_y else True)
    floor = float(values[drawn].min()) / 2 if drawn.any() else 1.0  # where rows that did not run sit on a log axis
    if not log_y:
        floor = 0.0
    for impl in impls_in(df):
        mine = df["impl"].astype(str).eq(impl)
        rows, vals = df[mine & drawn], values[mine & drawn]
        if len(rows):
            err = None
            if interval is not None and has_interval(rows, interval):
                lo, hi = (pd.to_numeric(rows[c], errors="coerce") * scale for c in interval)
                err = iqr_bars(vals, (hi - vals).clip(lower=0).tolist())
                err["arrayminus"] = [min(float(m), LOWER_ARM_MAX * float(v))
                                     for v, m in zip(vals, (vals - lo).clip(lower=0), strict=True)]
            elif error is not None and error in rows:
                half = pd.to_numeric(rows[error], errors="coerce").fillna(0.0) * scale / 2
                err = iqr_bars(vals, half)
            fig.add_trace(go.Scatter(
                x=rows[x], y=vals, mode="lines+markers", name=IMPL_LABELS.get(impl, impl), legendgroup=impl,
                line=impl_line(impl), marker=impl_marker(impl), error_y=err,
                customdata=None if err is None else (
                    [2 * h for h in err["array"]] if not (interval and has_interval(rows, interval)) else
                    [[float(a) * scale, float(b) * scale] for a, b in zip(rows[interval[0]], rows[interval[1]],
                                                                           strict=True)]),
                hovertemplate=f"<b>{impl}</b><br>{x}=%{{x}}<br>{hover_value}<extra></extra>"))
        add_not_run(fig, df[mine & ~drawn], impl, x, floor)
    fig.update_xaxes(**measured_axis(pd.to_numeric(df[x], errors="coerce").dropna().tolist()))
    if log_y:
        fig.update_yaxes(**log_axis(axis_extent(fig, "y", "y"), unit))
    if not drawn.any():
        add_note(fig, "No row ran: hover the crosses for the reasons.", y=0.9)
    elif (~drawn).any():
        add_note(fig, "× = not run (hover for why)", y=1.04)
    return fig


def memory_figure(df: pd.DataFrame | None) -> go.Figure:
    """Peak memory (MiB) against N, log-log: naive grows like N^2, the tiled kernels like N.

    Args:
        df: run_sweep output (columns impl, N, peak_bytes, status).
    Returns:
        plotly Figure, one trace per implementation (+ one per implementation with rows not run); y in MiB, ticks
        at powers of two labelled KiB / MiB / GiB.

    Example:
        >>> memory_figure(pd.DataFrame()).layout.title.text
        'Peak memory vs sequence length'
    """
    return _sweep_lines(df, x="N", y="peak_bytes", scale=1 / MIB, title="Peak memory vs sequence length",
                        x_title="sequence length N (tokens)", y_title="peak memory allocated (bytes)",
                        hover_value="peak=%{y:.3g} MiB", unit="mib")


MIN_INTERVAL_CALLS = 6  # timed calls the 95% interval of a median needs (flashviz.measure.stats.min_repeats)


def has_interval(df: pd.DataFrame, interval: tuple[str, str] = ("time_lo_s", "time_hi_s")) -> bool:
    """Whether every row of df carries a finite (low, high) interval in those columns."""
    return all(c in df for c in interval) and len(df) > 0 and bool(
        pd.to_numeric(df[interval[0]], errors="coerce").notna().all()
        and pd.to_numeric(df[interval[1]], errors="coerce").notna().all())


def time_bars(df: pd.DataFrame | None) -> str:
    """What the time chart's error bars show for these rows: the medians' 95% intervals where the sweep measured them
    (its ok rows all carry time_lo_s and time_hi_s from at least 6 timed calls, the fewest with a 95% interval), else
    the interquartile range (fewer repeats, or an older CSV)."""
    if df is None or not len(df) or "repeats" not in df:
        return "interquartile range"
    ok = df[ok_rows(df)]
    calls = pd.to_numeric(ok["repeats"], errors="coerce")
    if len(ok) and has_interval(ok) and bool((calls >= MIN_INTERVAL_CALLS).all()):
        return "95% interval of the median"
    return "interquartile range"


def time_figure(df: pd.DataFrame | None) -> go.Figure:
    """Median time (ms) against N, log-log, error bars spanning each median's 95% interval (time_lo_s to time_hi_s)
    where the sweep measured it, else the interquartile range (median +/- IQR/2).

    Args:
        df: run_sweep output (columns impl, N, time_s, time_lo_s, time_hi_s, time_iqr_s, status).
    Returns:
        plotly Figure; y in ms, ticks labelled µs / ms / s; the title says which bars.

    Example:
        >>> time_figure(pd.DataFrame()).layout.yaxis.title.text
        'median time per call (ms)'
    """
    bars = time_bars(df)
    interval = bars.startswith("95%")
    return _sweep_lines(df, x="N", y="time_s", scale=MS_PER_S, error="time_iqr_s",
                        interval=("time_lo_s", "time_hi_s") if interval else None,
                        title=f"Time vs sequence length (bars: {bars})",
                        x_title="sequence length N (tokens)", y_title="median time per call (ms)",
                        hover_value=("median=%{y:.3g} ms, 95% interval %{customdata[0]:.3g}-%{customdata[1]:.3g} ms"
                                     if interval else "median=%{y:.3g} ms, IQR=%{customdata:.2g} ms"), unit="ms")


def gflops_figure(df: pd.DataFrame | None) -> go.Figure:
    """Achieved GFLOP/s (counted FLOPs / median time) against N, log x.

    Example:
        >>> gflops_figure(pd.DataFrame()).layout.yaxis.title.text
        'achieved throughput (GFLOP/s)'
    """
    return _sweep_lines(df, x="N", y="gflops", scale=1.0, title="Achieved throughput vs sequence length",
                        x_title="sequence length N (tokens)", y_title="achieved throughput (GFLOP/s)",
                        hover_value="%{y:.3g} GFLOP/s", unit="si", log_y=False)


def hbm_figure(df: pd.DataFrame | None, note: str = "") -> go.Figure:
    """Modelled HBM traffic (MiB) against N, log-log (sdpa has no model and is left out), its subtitle naming the tile
    size the model counted and each tiled kernel's traffic against naive's at the largest N (traffic_said), then
    `note`.

    Example:
        >>> hbm_figure(pd.DataFrame()).layout.xaxis.type
        'log'
    """
    if df is not None and "impl" in df:  # a model needs no run: rows that did not run still have their modelled traffic
        df = df[~df["impl"].astype(str).eq(SDPA)].assign(status=OK)
    fig = _sweep_lines(df, x="N", y="hbm_bytes", scale=1 / MIB, title="Modelled HBM traffic vs sequence length",
                       x_title="sequence length N (tokens)", y_title="HBM traffic (bytes, IO model)",
                       hover_value="traffic=%{y:.3g} MiB", unit="mib")
    said = traffic_said(df)
    if said or note:
        set_subtitle(fig, " ".join(t for t in (said, note) if t))
    return fig


def traffic_ratios(df: pd.DataFrame | None) -> tuple[tuple[int, int] | None, int | None, dict[str, float]]:
    """The tile size the IO model counted (Br, Bc; None unless one), the largest N with naive's traffic, and each
    tiled kernel's traffic there over naive's.

    Example:
        >>> rows = pd.DataFrame({"impl": ["naive", "flash", "naive", "flash"], "N": [512, 512, 1024, 1024],
        ...                      "block_q": [64] * 4, "block_k": [64] * 4, "hbm_bytes": [4.0, 3.0, 16.0, 4.0]})
        >>> traffic_ratios(rows)
        ((64, 64), 1024, {'flash': 0.25})
    """
    if df is None or len(df) == 0 or not {"impl", "N", "hbm_bytes"} <= set(df):
        return None, None, {}
    impl = df["impl"].astype(str)
    tiled = df[impl.isin([i for i in impls_in(df) if i not in (NAIVE, SDPA)])]
    pairs = {(int(q), int(k)) for q, k in zip(tiled.get("block_q", []), tiled.get("block_k", []), strict=True)
             if pd.notna(q) and pd.notna(k)}
    tiles = next(iter(pairs)) if len(pairs) == 1 else None
    naive = df[impl.eq(NAIVE)].dropna(subset=["hbm_bytes"]).set_index("N")["hbm_bytes"]
    if naive.empty:
        return tiles, None, {}
    n = int(naive.index.max())
    at_n = tiled[tiled["N"].eq(n)].dropna(subset=["hbm_bytes"])
    return tiles, n, {str(r.impl): float(r.hbm_bytes) / float(naive[n]) for r in at_n.itertuples()}


def traffic_said(df: pd.DataFrame | None) -> str:
    """The traffic chart's subtitle: the tiles the model counted and the tiled kernels' traffic against naive's.

    Example:
        >>> rows = pd.DataFrame({"impl": ["naive", "flash", "flash2"], "N": [1024] * 3, "block_q": [256] * 3,
        ...                      "block_k": [256] * 3, "hbm_bytes": [100.0, 22.0, 15.0]})
        >>> traffic_said(rows)
        "At Br × Bc = 256 × 256 tiles. At N = 1024: FA1 0.22×, FA2 0.15× naive's bytes."
    """
    tiles, n, ratios = traffic_ratios(df)
    parts = [f"At Br × Bc = {tiles[0]} × {tiles[1]} tiles."] if tiles else []
    if ratios:
        each = ", ".join(f"{NUMERICS_KERNEL_LABELS.get(i, i)} {r:.2f}×" for i, r in ratios.items())
        parts.append(f"At N = {n}: {each} naive's bytes.")
    return " ".join(parts)


# ----------------------------------------------------------------------------------------------------------------------
# the IO model: Theorem 2 and the block-size trade-off


SRAM_COLOR = "#444444"  # the SRAM marks on the M axis: neutral, not an algorithm's colour


def hbm_vs_memory_figure(df: pd.DataFrame | None, *, n: int | None = None, d: int | None = None,
                         sram_marks: pd.DataFrame | None = None, explanation: str | None = None,
                         curve_notes: Mapping[str, str] | None = None, ghost: pd.DataFrame | None = None,
                         ghost_name: str = "without the mask") -> go.Figure:
    """HBM accesses against on-chip memory M, log-log (FA1 Theorem 2), from iomodel.hbm_vs_memory, with real GPUs'
    SRAM per SM marked on the M axis.

    Lines: the model's counts, one style per algorithm; dotted: Theorem 2's order terms (N d + N^2 for standard
    attention, N^2 d^2 / M for FlashAttention: the same term for both loop orders, so it is drawn once).

    Args:
        df: hbm_vs_memory output (columns algorithm, M, block_q, block_k, accesses, bound).
        n, d: only for the title.
        sram_marks: typical on-chip SRAM sizes to mark (columns device, M in elements of the run's dtype, label),
            e.g. flashviz.model.roofline.sram_marks(dtype); each is a labelled vertical line, and the axis reaches it.
        explanation: text under the title saying what the curves do (wrapped to the figure's width, or lines
            joined by "<br>" as given).
        curve_notes: per algorithm, a sentence added to its curve's hover (e.g. its tile rule).
        ghost: the same curves at other settings (hbm_vs_memory without the mask), drawn pale and dashed behind
            the curves, so a change (causal: half) is seen against what it changes.  ghost_name: what they are.
    Returns:
        plotly Figure.

    Example:
        >>> hbm_vs_memory_figure(pd.DataFrame()).layout.xaxis.title.text
        'on-chip memory M (elements)'
        >>> from flashviz.model.iomodel import hbm_vs_memory
        >>> df = hbm_vs_memory([1024, 2048], 256, 64, algorithms=["q_outer"], causal=True)
        >>> ghost = hbm_vs_memory([1024, 2048], 256, 64, algorithms=["q_outer"])
        >>> [t.name for t in hbm_vs_memory_figure(df, ghost=ghost).data][:2]
        ['pale: without the mask', 'FlashAttention-2 (q_outer)']
    """
    shape = f" (N={n}, d={d})" if n is not None and d is not None else ""
    fig = go.Figure()
    style_figure(fig, title=f"HBM accesses vs on-chip memory M{shape}",
                 x_title="on-chip memory M (elements)", y_title="HBM accesses (elements)", log_x=True, log_y=True)
    if explanation:
        set_subtitle(fig, explanation)
    if df is None or len(df) == 0 or not {"algorithm", "M", "accesses"} <= set(df.columns):
        add_note(fig, "No data: give at least one M.")
        return fig
    bounds_drawn: set[str] = set()
    _add_ghosts(fig, ghost, df, ghost_name)
    for algorithm in impls_in(df.rename(columns={"algorithm": "impl"})):
        rows = df[df["algorithm"].astype(str).eq(algorithm)].sort_values("M")
        note = (curve_notes or {}).get(algorithm)
        _add_io_curve(fig, rows, algorithm, note, bounds_drawn)
    marks = [] if sram_marks is None else list(zip(sram_marks["device"].astype(str), sram_marks["M"].astype(float),
                                                  sram_marks["label"].astype(str), strict=True))
    fig.update_xaxes(**log_axis([*axis_extent(fig, "x", "x"), *(m for _, m, _ in marks)], "si"))
    y_axis = log_axis(axis_extent(fig, "y", "y"), "si")
    fig.update_yaxes(**y_axis)
    _add_sram_marks(fig, marks, y_axis["range"])
    _legend_under(fig, IO_FIG_HEIGHT_PX, IO_BOTTOM_PX, IO_LEGEND_GAP_PX)
    return fig


def _legend_under(fig: go.Figure, height: int, bottom: int, gap: int) -> None:
    """The figure `height` px tall, its legend `gap` px under the plot, in a bottom margin of `bottom` px."""
    plot_px = height - (fig.layout.margin.t or fig.layout.template.layout.margin.t) - bottom
    fig.update_layout(height=height, margin_b=bottom, legend={
        "orientation": "h", "x": 0, "xanchor": "left", "y": -gap / plot_px, "yanchor": "top"})


def _add_io_curve(fig: go.Figure, rows: pd.DataFrame, algorithm: str, note: str | None, bounds_drawn: set) -> None:
    """One algorithm's modelled accesses against M, and Theorem 2's order term once per kind (naive / flash)."""
    blocks = list(zip(rows.get("block_q", [None] * len(rows)), rows.get("block_k", [None] * len(rows)), strict=True))
    extra = f"<br>{note}" if note else ""
    fig.add_trace(go.Scatter(
        x=rows["M"], y=rows["accesses"], mode="lines+markers", name=IMPL_LABELS.get(algorithm, algorithm),
        legendgroup=algorithm, line=impl_line(algorithm), marker=impl_marker(algorithm), customdata=blocks,
        hovertemplate=(f"<b>{algorithm}</b><br>M=%{{x:,}} elements<br>Br=%{{customdata[0]}}, "
                       f"Bc=%{{customdata[1]}}<br>accesses=%{{y:.3s}}{extra}<extra></extra>")))
    kind = NAIVE if algorithm == NAIVE else FLASH
    if "bound" in rows and kind not in bounds_drawn:
        bounds_drawn.add(kind)
        term = "N d + N²" if kind == NAIVE else "N² d² / M"
        fig.add_trace(go.Scatter(
            x=rows["M"], y=rows["bound"], mode="lines",  # the order term, constants dropped
            name=f"Theorem 2: {term}", line={"color": impl_color(algorithm), "width": 2, "dash": "dot"},
            hovertemplate=f"<b>{term}</b> (order term)<br>M=%{{x:,}}<br>%{{y:.3s}}<extra></extra>"))


def _same_curve(a: pd.DataFrame, b: pd.DataFrame, algorithm: str) -> bool:
    """Whether one algorithm's accesses are the same in both tables at every M."""
    pick = [x[x["algorithm"].astype(str).eq(algorithm)].set_index("M")["accesses"].astype(float) for x in (a, b)]
    return pick[0].sort_index().equals(pick[1].sort_index())


IO_FIG_HEIGHT_PX = 680  # the plot keeps the full width; the legend (up to 5 rows at 1280 px) goes under it
IO_BOTTOM_PX = 210  # tick labels, the x title and the legend
IO_LEGEND_GAP_PX = 85  # from the plot's bottom edge to the legend: under the tick labels and the x title
GHOST_OPACITY = 0.35  # the curves at the other settings, behind the curves
SRAM_LABEL_STEP = 0.09  # each further SRAM mark's name sits this fraction of the y axis lower: close marks stay apart


def _add_ghosts(fig: go.Figure, ghost: pd.DataFrame | None, df: pd.DataFrame, name: str) -> None:
    """The other settings' curves, pale, for each algorithm they differ on (a mask changes nothing for naive)."""
    if ghost is None or not len(ghost):
        return
    for algorithm in impls_in(ghost.rename(columns={"algorithm": "impl"})):
        if not _same_curve(ghost, df, algorithm):
            _add_ghost(fig, ghost[ghost["algorithm"].astype(str).eq(algorithm)].sort_values("M"), algorithm, name)


def _add_ghost(fig: go.Figure, rows: pd.DataFrame, algorithm: str, name: str) -> None:
    """One algorithm's curve at the other settings, pale and dashed, no markers."""
    label = f"{LOOP_ORDER_SHORT.get(algorithm, algorithm)} {name}"
    first = not any(t.legendgroup == "ghost" for t in fig.data)
    fig.add_trace(go.Scatter(
        x=rows["M"], y=rows["accesses"], mode="lines", name=f"pale: {name}" if first else label, legendgroup="ghost",
        showlegend=first,
        opacity=GHOST_OPACITY, line={**impl_line(algorithm), "dash": "dash"},
        hovertemplate=f"<b>{label}</b><br>M=%{{x:,}} elements<br>accesses=%{{y:.3s}}<extra></extra>"))


def _add_sram_marks(fig: go.Figure, marks: list, y_range: list[float]) -> None:
    """A vertical dotted line per device at its SM's SRAM (M in elements), named near the top (each further name a
    step lower, left of its line for the first, right for the others, so two close marks stay legible), the label
    in the hover."""
    lo, hi = 10 ** y_range[0], 10 ** y_range[1]
    for k, (name, m, label) in enumerate(marks):
        short = name.split(" (")[0]  # "A100 (SXM 80GB)" -> "A100"
        at = 10 ** (y_range[1] - k * SRAM_LABEL_STEP * (y_range[1] - y_range[0]))
        fig.add_trace(go.Scatter(
            x=[m, m, m], y=[lo, at, hi], mode="lines+text", name=f"{short} SRAM per SM", legendgroup="sram",
            showlegend=False,  # named on the line
            line={"color": SRAM_COLOR, "width": 2, "dash": "dot"}, cliponaxis=False,
            text=["", short, ""], textposition="bottom left" if k == 0 else "bottom right",
            textfont={"size": BASE_FONT_PX, "color": SRAM_COLOR},
            hovertemplate=f"<b>{label}</b><br>M = {m:,.0f} elements<extra></extra>"))


def block_sweep_figure(df: pd.DataFrame | None, *, reference: pd.DataFrame | None = None) -> go.Figure:
    """Time and modelled HBM traffic against the tile size Br x Bc, side by side, from sweep.run_block_sweep.

    Args:
        df: run_block_sweep output (columns impl, block_q, block_k, time_s, time_iqr_s, hbm_bytes, status).
        reference: optional run_sweep rows at the same N (naive, sdpa): drawn as horizontal dotted lines across
            both panels (time; and HBM traffic where the IO model has one), labelled and with hover.
    Returns:
        plotly Figure with two panels (tile elements Br x Bc on log x axes ticked "16x16", "32x32", ...).

    Example:
        >>> len(block_sweep_figure(pd.DataFrame()).layout.annotations) >= 2
        True
    """
    fig = make_subplots(rows=1, cols=2, subplot_titles=("measured time", "modelled HBM traffic"),
                        horizontal_spacing=BLOCK_PANEL_GAP)
    fig.update_layout(template=flashviz_template(), title={"text": "Tile size trade-off"}, height=BLOCK_FIG_HEIGHT_PX,
                      margin={"b": BLOCK_BOTTOM_PX},  # the legend goes under the panels: both keep the full width
                      legend={"orientation": "h", "x": 0, "xanchor": "left", "yanchor": "top",
                              "y": -BLOCK_LEGEND_GAP_PX / (BLOCK_FIG_HEIGHT_PX - 80 - BLOCK_BOTTOM_PX)})
    fig.update_annotations(font={"size": AXIS_TITLE_FONT_PX})  # the two panel titles
    fig.update_xaxes(title_text="tile size (Br × Bc)", type="log", tickangle=0)
    fig.update_yaxes(title_text="time per call", type="log", row=1, col=1)
    fig.update_yaxes(title_text="HBM traffic", type="log", row=1, col=2)
    if df is None or len(df) == 0 or not {"impl", "block_q", "block_k"} <= set(df.columns):
        add_note(fig, "No data yet: run a block-size sweep.")
        return fig
    df = df.assign(tile=pd.to_numeric(df["block_q"]) * pd.to_numeric(df["block_k"])).sort_values("tile")
    ok = ok_rows(df)
    for impl in impls_in(df):
        rows = df[df["impl"].astype(str).eq(impl) & ok]
        if not len(rows):
            continue
        labels = [_tile_label(q, k) for q, k in zip(rows["block_q"], rows["block_k"], strict=True)]
        common = {"mode": "lines+markers", "legendgroup": impl, "line": impl_line(impl), "marker": impl_marker(impl),
                  "text": labels}
        iqr = pd.to_numeric(rows.get("time_iqr_s", pd.Series(0.0, index=rows.index)), errors="coerce").fillna(0)
        fig.add_trace(go.Scatter(
            x=rows["tile"], y=rows["time_s"] * MS_PER_S, name=IMPL_LABELS.get(impl, impl),
            error_y=iqr_bars(rows["time_s"] * MS_PER_S, iqr * MS_PER_S / 2),
            customdata=(iqr * MS_PER_S).tolist(),
            hovertemplate=(f"<b>{impl}</b> Br x Bc=%{{text}}<br>median=%{{y:.3g}} ms, IQR=%{{customdata:.2g}} ms"
                           "<extra></extra>"), **common), row=1, col=1)
        fig.add_trace(go.Scatter(
            x=rows["tile"], y=rows["hbm_bytes"] / MIB, name=f"{impl}: HBM model", showlegend=False,
            hovertemplate=f"<b>{impl}</b> Br x Bc=%{{text}}<br>traffic=%{{y:.3g}} MiB<extra></extra>", **common),
            row=1, col=2)
    tiles = df[ok].drop_duplicates("tile")
    x_axis = measured_axis(tiles["tile"].tolist(), labels=[_tile_label(q, k) for q, k in
                                                           zip(tiles["block_q"], tiles["block_k"], strict=True)])
    fig.update_xaxes(**x_axis)
    if reference is not None and len(reference) and "range" in x_axis:
        _add_reference_lines(fig, reference, x_axis["range"])
    if ok.any():
        fig.update_yaxes(**log_axis(axis_extent(fig, "y", "y"), "ms"), row=1, col=1)
        fig.update_yaxes(**log_axis(axis_extent(fig, "y", "y2"), "mib"), row=1, col=2)
    else:
        add_note(fig, "No row ran.", y=0.9)
    return fig


BLOCK_PANEL_GAP = 0.16  # between the two panels: room for the right panel's tick labels and title
BLOCK_BOTTOM_PX = 190  # the tick labels, the x titles and the legend under the panels
BLOCK_LEGEND_GAP_PX = 80  # from the plots' bottom edge to the legend: under the tick labels and the x titles


def _tile_label(q: float, k: float) -> str:
    """A tile's tick label: "64²" for a square 64 x 64 tile, else "64×32".

    Example:
        >>> _tile_label(64, 64), _tile_label(64.0, 32)  # a square tile: its side, squared
        ('64²', '64×32')
    """
    return f"{int(q)}²" if int(q) == int(k) else f"{int(q)}×{int(k)}"


def _add_reference_lines(fig: go.Figure, reference: pd.DataFrame, x_range: list[float]) -> None:
    """The untiled runs at the same N (naive, sdpa) as horizontal lines across both block-sweep panels: time, and
    HBM traffic where the IO model has one; one legend entry per implementation."""
    for _, r in reference[ok_rows(reference)].iterrows():
        impl, n = str(r["impl"]), r.get("N", "?")
        t_ms = float(pd.to_numeric(r.get("time_s", math.nan), errors="coerce")) * MS_PER_S
        traffic = float(pd.to_numeric(r.get("hbm_bytes", math.nan), errors="coerce")) / MIB
        shown = False
        for col, value, what in ((1, t_ms, f"median {t_ms:.3g} ms"), (2, traffic, f"traffic {traffic:.3g} MiB")):
            if math.isfinite(value) and value > 0:
                reference_line(fig, value, x_range=x_range, name=f"{impl} at N={n} (untiled reference)",
                               color=impl_color(impl), legend=not shown, row=1, col=col,
                               hover=f"<b>{impl}</b> at N={n}, untiled<br>{what}")
                shown = True
