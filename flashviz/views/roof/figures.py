"""Why FlashAttention is fast on a GPU, with numbers: the roofline chart and the predicted speedup next to a measured
one. No torch, no streamlit: only pandas and plotly.

The roofline model (Williams, Waterman and Patterson, "Roofline", CACM 2009): a kernel that does F FLOPs and moves
B bytes between HBM and the chip has arithmetic intensity I = F / B (FLOP/byte) and can reach at most
min(peak FLOP/s, I x bandwidth). Left of a device's ridge point (peak / bandwidth) the bandwidth bounds it, right of
it the compute. Naive attention moves the N x N matrices S and P through HBM, so its intensity is low; the tiled
kernels keep S and P on chip, so theirs is high and their predicted time max(F / peak, B / bandwidth) is shorter.

Inputs are the tidy DataFrames of flashviz.model.roofline: roofline_points (one row per device and algorithm:
device, algorithm, flops, hbm_bytes, intensity, attainable_flops, time_s, measured; "bytes" and "predicted_s" are
accepted for hbm_bytes and time_s) and the device rates (peak_flops, bandwidth per device: roof_lines' columns, or
on the points themselves). The lesson's slide of this view (`roof_picture`, flashviz.app.slides) draws the H100's
roofs and points its check returned (flashviz.views.roof.claims.roofline_gpu).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flashviz.figures.palette import AXIS_TITLE_FONT_PX, BASE_FONT_PX, MARKER_PX, REFERENCE_COLOR
from flashviz.figures.slide import finish_slide
from flashviz.figures.style import (
    LOG_TICKS_MAX,
    add_note,
    impl_color,
    impl_marker,
    log_axis,
    set_subtitle,
    style_figure,
)
from flashviz.vocab import ALGORITHMS, FLASH, FLASH2, KV_OUTER, LOOP_ORDER_SHORT, NAIVE, Q_OUTER

if TYPE_CHECKING:  # the settings' fields only
    from typing import Any

    from flashviz.views.roof.settings import RoofSettings

ROOF_DASHES = ("solid", "dash", "dot", "dashdot", "longdash")  # one per device, in order of appearance
RIDGE_RANK = 1001  # legend order: the roofs (plotly's default rank 1000), then the ridge entry, then the points
POINT_RANK = 1002
ROOF_COLOR = "#333333"  # roofs are neutral: colour belongs to the algorithms
L2_ROOF_COLOR = "#8C8C8C"  # the L2 roofs: lighter, thinner, the same dash as their device's HBM roof
RIDGE_SYMBOL = "diamond-open"
MEASURED_SYMBOL = "star"
ROOF_HEADROOM = 2.5  # the y axis reaches this factor above the highest peak: room for a ridge's label
ROOF_PAD = 8  # the roofs extend this factor beyond the points and ridges on the intensity axis
SHORT = {NAIVE: "naive", **LOOP_ORDER_SHORT}  # naive, FA1, FA2
ALIASES = {"bytes": "hbm_bytes", "predicted_s": "time_s"}  # the column names a caller may also use
PANEL_GAP = 0.08  # between the GPUs' panel and this machine's (paper units)
PANEL_WIDTHS = (0.56, 0.44)  # the GPUs' panel and this machine's (fractions of the plotting width)
PANEL_TICKS_MAX = 5  # labelled intensity ticks on one of the two panels (7 of them collide at 1280 px)
PANEL_TITLE_PX = 44  # the panels' titles, between the figure's subtitle and the plots
PANEL_TITLE_SHIFT_PX = 12  # the panels' titles sit this far above the plots: clear of the top tick labels
SPEEDUP_FIG_HEIGHT_PX = 560
SPEEDUP_LEGEND_GAP_PX = 80  # below the bars: the device names and the axis title come first


def _tidy(points: pd.DataFrame) -> pd.DataFrame:
    """points with the aliases renamed and a boolean "measured" column."""
    df = points.rename(columns={a: b for a, b in ALIASES.items() if a in points and b not in points})
    measured = df["measured"].fillna(False).astype(bool) if "measured" in df else False
    return df.assign(measured=measured)


BAND_FILL = "rgba(0, 0, 0, 0.12)"  # the measured roof's spread: light grey under the roof


def _rates(points: pd.DataFrame, roofs: pd.DataFrame | None) -> pd.DataFrame:
    """One row per device: peak_flops (FLOP/s), bandwidth (bytes/s), ridge (FLOP/byte), in order of appearance."""
    source = roofs if roofs is not None else points
    missing = {"device", "peak_flops", "bandwidth"} - set(source.columns)
    if missing:
        raise ValueError(f"roofline_figure needs each device's peak_flops and bandwidth; missing {sorted(missing)}. "
                         "Pass roofs=roof_lines(...) or add the columns to the points.")
    rates = source.drop_duplicates("device")[["device", "peak_flops", "bandwidth"]].reset_index(drop=True)
    l2 = (source.drop_duplicates("device").set_index("device")["l2_bandwidth"] if "l2_bandwidth" in source
          else pd.Series(dtype=float))
    rates = rates.assign(ridge=rates["peak_flops"] / rates["bandwidth"],
                         l2_bandwidth=rates["device"].map(l2).astype(float))
    first = source.drop_duplicates("device").set_index("device")
    for c in BAND_COLUMNS:  # a measured roof's spread over its probe calls, where the roofs carry it
        rates[c] = rates["device"].map(first[c]).astype(float) if c in first else float("nan")
    return rates


BAND_COLUMNS = ("peak_q1", "peak_q3", "bandwidth_q1", "bandwidth_q3")  # a measured roof's probe calls: quartiles


def _band(r: pd.Series, x_lo: float, x_hi: float) -> list[go.Scatter]:
    """The middle half of a measured roof's probe calls, shaded under its roof: the roof at the calls' first and third
    quartiles (compute and bandwidth each), filled between."""
    edges = []
    for peak, bw in ((r["peak_q1"], r["bandwidth_q1"]), (r["peak_q3"], r["bandwidth_q3"])):
        xs = sorted({x_lo, x_hi, *([peak / bw] if x_lo < peak / bw < x_hi else [])})
        edges.append((xs, [min(peak, bw * x) for x in xs]))
    (x1, y1), (x3, y3) = edges
    low = go.Scatter(x=x1, y=y1, mode="lines", line={"width": 0}, hoverinfo="skip", showlegend=False,
                     legendgroup=f"band {r['device']}")
    high = go.Scatter(x=x3, y=y3, mode="lines", line={"width": 0}, fill="tonexty", fillcolor=BAND_FILL,
                      name="middle half of the probe's calls", legendgroup=f"band {r['device']}",
                      hovertemplate=(f"<b>{r['device']}: the probe's calls</b><br>middle half: "
                                     f"{r['peak_q1'] / 1e9:.3g}-{r['peak_q3'] / 1e9:.3g} GFLOP/s, "
                                     f"{r['bandwidth_q1'] / 1e9:.3g}-{r['bandwidth_q3'] / 1e9:.3g} GB/s"
                                     "<extra></extra>"))
    return [low, high]


def roofline_figure(points: pd.DataFrame | None, roofs: pd.DataFrame | None = None, *, title: str | None = None,
                    dtype: str | None = None, here: Collection[str] = (), titles: tuple[str, str] | None = None,
                    subtitle: str | None = None) -> go.Figure:
    """Roofline chart: arithmetic intensity (FLOP/byte, log x) against attainable FLOP/s (log y), one roof per device
    (its legend entry names its ridge point in FLOP/byte, a diamond marks it) and a point per (device, algorithm) on
    it: naive, FA1 (kv_outer), FA2 (q_outer).

    Points with measured=True are drawn as stars: measured rather than predicted (e.g. the kernels timed here: FLOPs
    / measured time). The devices named in `here` (this machine, its timed points) get a panel of their own, right of
    the GPUs': their roofs are orders of magnitude lower, and each panel's axes then span only its own points.

    Args:
        points: roofline_points output (device, algorithm, flops, hbm_bytes, intensity, attainable_flops, time_s,
            optional measured).
        roofs: the device rates (device, peak_flops, bandwidth), e.g. roof_lines(...); None: taken from points.
        title: figure title; a default one says what the chart shows.  dtype: named in the subtitle (the peak
            depends on it, e.g. "float16" on tensor cores).
        here: device names drawn in the second panel.  titles: the two panels' titles.
        subtitle: a line under the title (default: the peaks' dtype, if given).
    Returns:
        plotly Figure.

    Example:
        >>> pts = pd.DataFrame({"device": ["A100"] * 2, "algorithm": ["naive", "q_outer"], "flops": [1e9, 1e9],
        ...                     "hbm_bytes": [1e8, 1e7], "intensity": [10.0, 100.0], "peak_flops": [312e12] * 2,
        ...                     "bandwidth": [2.039e12] * 2, "attainable_flops": [2.039e13, 2.039e14],
        ...                     "time_s": [4.9e-5, 4.9e-6]})
        >>> [t.name for t in roofline_figure(pts).data][:2]  # 312 T / 2.039 T
        ['A100 roof · ridge 153 FLOP/byte', 'ridge point']
    """
    df = _tidy(points) if points is not None and len(points) else None
    split = df is not None and bool(set(df["device"]) & set(here))
    fig = (make_subplots(rows=1, cols=2, column_widths=list(PANEL_WIDTHS), horizontal_spacing=PANEL_GAP,
                         subplot_titles=titles or ("GPUs: published peaks", "this machine: measured"))
           if split else go.Figure())
    style_figure(fig, title=title or "Roofline: why the tiled kernels are faster on a GPU",
                 x_title="arithmetic intensity (FLOP/byte)", y_title="attainable FLOP/s",
                 log_x=True, log_y=True)
    if subtitle or dtype:
        set_subtitle(fig, subtitle or f"{dtype} peaks · predicted = max(FLOPs / peak, bytes / bandwidth), a model")
    if df is None or not {"device", "algorithm", "intensity"} <= set(df.columns):
        add_note(fig, "No data: choose at least one device.")
        return fig
    rates = _rates(df, roofs)
    panels = [(1, ~df["device"].isin(here), ~rates["device"].isin(here))]
    if split:
        panels.append((2, df["device"].isin(here), rates["device"].isin(here)))
    shown: set[str] = set()
    for col, on, roofs_on in panels:
        _panel(fig, df[on], rates[roofs_on].reset_index(drop=True), col if split else None, shown)
    if split:
        fig.update_xaxes(title_text="intensity (FLOP/byte)", tickangle=0)
        fig.update_yaxes(title_text="", row=1, col=2)  # the left panel's title says it for both
        fig.update_annotations(font={"size": AXIS_TITLE_FONT_PX}, yshift=PANEL_TITLE_SHIFT_PX)
        fig.update_layout(margin_t=(fig.layout.margin.t or fig.layout.template.layout.margin.t) + PANEL_TITLE_PX)
    return fig


def _panel(fig: go.Figure, df: pd.DataFrame, rates: pd.DataFrame, col: int | None, shown: set[str]) -> None:
    """One panel: its roofs and ridges, its points, axes spanning them (col None: the only panel)."""
    where = {"row": 1, "col": col} if col else {}
    xs = [*df["intensity"].astype(float), *rates["ridge"]]
    x_lo, x_hi = min(x for x in xs if x > 0) / ROOF_PAD, max(xs) * ROOF_PAD
    for k, r in rates.iterrows():
        if all(math.isfinite(float(r[c])) for c in BAND_COLUMNS):
            for trace in _band(r, x_lo, x_hi):
                fig.add_trace(trace, **where)
        for trace in _roof(r, x_lo, x_hi, ROOF_DASHES[k % len(ROOF_DASHES)], first="ridge" not in shown):
            fig.add_trace(trace, **where)
        shown.add("ridge")
        if math.isfinite(float(r["l2_bandwidth"])):
            fig.add_trace(_l2_roof(r, x_lo, ROOF_DASHES[k % len(ROOF_DASHES)], first="L2 roof" not in shown), **where)
            shown.add("L2 roof")
    if "l2_intensity" in df:
        for algorithm in [a for a in ALGORITHMS if a in set(df["algorithm"])]:
            trace = _l2_points(df[df["algorithm"].eq(algorithm) & ~df["measured"]
                                  & df["device"].isin(rates.loc[rates["l2_bandwidth"].notna(), "device"])],
                               algorithm)
            if trace is not None:
                trace.showlegend = "L2 point" not in shown
                shown.add("L2 point")
                fig.add_trace(trace, **where)
    for algorithm in [a for a in ALGORITHMS if a in set(df["algorithm"])]:
        for measured in (False, True):
            trace = _points(df[df["algorithm"].eq(algorithm) & df["measured"].eq(measured)], algorithm, measured)
            if trace is not None:
                trace.showlegend = trace.name not in shown
                shown.add(trace.name)
                fig.add_trace(trace, **where)
    if "l2_intensity" in df:
        x_lo = min(x_lo, *(df.loc[~df["measured"], "l2_intensity"].astype(float).dropna() / ROOF_PAD), x_lo)
    fig.update_xaxes(**log_axis([x_lo, x_hi], "si", LOG_TICKS_MAX if col is None else PANEL_TICKS_MAX), **where)
    fig.update_yaxes(**log_axis([*(rates["bandwidth"] * x_lo), *(rates["peak_flops"] * ROOF_HEADROOM),
                                 *df["attainable_flops"].astype(float)], "si"), **where)


def ridge_label(device: str, ridge: float) -> str:
    """A roof's legend entry: its short name and its ridge point with the unit.

    Example:
        >>> ridge_label("H100 (SXM)", 295.3), ridge_label("this CPU, measured", 7.46)
        ('H100 roof · ridge 295 FLOP/byte', 'this CPU roof · ridge 7.46 FLOP/byte')
    """
    return f"{device.split(' (')[0].split(',')[0]} roof · ridge {ridge:.3g} FLOP/byte"


def _roof(r: pd.Series, x_lo: float, x_hi: float, dash: str, first: bool) -> list[go.Scatter]:
    """A device's roof, min(peak, I x bandwidth), as three points (it is two straight lines in log-log), and its ridge
    point (one legend entry for all ridges: `first`)."""
    peak, bw, ridge = float(r["peak_flops"]), float(r["bandwidth"]), float(r["ridge"])
    xs = [x_lo, ridge, x_hi] if x_lo < ridge < x_hi else [x_lo, x_hi]
    roof = go.Scatter(
        x=xs, y=[min(peak, bw * x) for x in xs], mode="lines", name=ridge_label(str(r["device"]), ridge),
        legendgroup=f"roof {r['device']}", line={"color": ROOF_COLOR, "width": 2.5, "dash": dash}, cliponaxis=False,
        hovertemplate=(f"<b>{r['device']}</b><br>peak {peak / 1e12:.4g} TFLOP/s, memory {bw / 1e9:.4g} GB/s<br>"
                       "I=%{x:.3g} FLOP/byte: at most %{y:.3s}FLOP/s<extra></extra>"))
    mark = go.Scatter(
        x=[ridge], y=[peak], mode="markers", name="ridge point", legendgroup="ridge", showlegend=first,
        legendrank=RIDGE_RANK, marker={"symbol": RIDGE_SYMBOL, "size": 16, "color": ROOF_COLOR,
                                       "line": {"width": 2.5, "color": ROOF_COLOR}},
        hovertemplate=(f"<b>{r['device']} ridge point</b><br>{ridge:.3g} FLOP/byte = peak / bandwidth<br>"
                       "left: bandwidth-bound; right: compute-bound<extra></extra>"))
    return [roof, mark]


def _l2_roof(r: pd.Series, x_lo: float, dash: str, first: bool) -> go.Scatter:
    """A device's L2 roof, min(peak, I_L2 x L2 bandwidth), thin and grey in its device's dash: the ceiling of the
    dotted points (FLOP per L2 byte); it meets the compute roof at the L2 ridge. One legend entry for all (`first`);
    the hover names the device and its bandwidth."""
    peak, bw = float(r["peak_flops"]), float(r["l2_bandwidth"])
    ridge = peak / bw
    xs = [x_lo, ridge] if x_lo < ridge else [x_lo]
    return go.Scatter(
        x=xs, y=[min(peak, bw * x) for x in xs], mode="lines", name="L2 roofs (thin)", showlegend=first,
        legendgroup="l2 roof", line={"color": L2_ROOF_COLOR, "width": 1.5, "dash": dash},
        cliponaxis=False, legendrank=RIDGE_RANK,
        hovertemplate=(f"<b>{r['device']} L2</b><br>{bw / 1e12:.3g} TB/s, ridge {ridge:.3g} FLOP per L2 byte<br>"
                       "I_L2=%{x:.3g}: at most %{y:.3s}FLOP/s<extra></extra>"))


def _l2_points(rows: pd.DataFrame, algorithm: str) -> go.Scatter | None:
    """One algorithm's hollow points at its L2 intensity (FLOP per byte through L2), at the same FLOP/s as its HBM
    point: the one of the two that touches its roof names the level that bounds it."""
    if not len(rows):
        return None
    own = impl_marker(algorithm)
    marker = {**own, "symbol": f"{own['symbol'].removesuffix('-open')}-open-dot",  # hollow with a dot: never the
              "line": {"width": 2.5, "color": impl_color(algorithm)}}  # HBM point's own marker, filled or open
    return go.Scatter(
        x=rows["l2_intensity"], y=rows["attainable_flops"], mode="markers", name="per L2 byte (dotted)",
        legendgroup=f"{algorithm} L2", legendrank=POINT_RANK + 1, marker=marker,
        customdata=list(zip(rows["device"].astype(str), rows["l2_bytes"], rows["bound"].astype(str), strict=True)),
        hovertemplate=(f"<b>{SHORT.get(algorithm, algorithm)}</b> on %{{customdata[0]}}: %{{customdata[1]:.3s}}B "
                       "through L2<br>intensity %{x:.3g} FLOP per L2 byte<br>bound: %{customdata[2]}"
                       "<extra></extra>"))


def _points(rows: pd.DataFrame, algorithm: str, measured: bool) -> go.Scatter | None:
    """One algorithm's points on every device's roof of a panel (predicted), or its measured points (stars)."""
    if not len(rows):
        return None
    name = f"{SHORT.get(algorithm, algorithm)}" + (" (measured)" if measured else "")
    marker = impl_marker(algorithm)
    if measured:  # a filled star, whatever the algorithm's own marker
        marker = {**marker, "symbol": MEASURED_SYMBOL, "size": MARKER_PX + 8, "line": {"width": 1.5, "color": "#000"}}
    time_col = rows["time_s"] if "time_s" in rows else pd.Series(math.nan, index=rows.index)
    bytes_col = rows["hbm_bytes"] if "hbm_bytes" in rows else pd.Series(math.nan, index=rows.index)
    bound_col = rows["bound"].astype(str) if "bound" in rows else pd.Series("", index=rows.index)
    custom = list(zip(rows["device"].astype(str), rows.get("flops", math.nan), bytes_col, time_col * 1e3, bound_col,
                      strict=True))
    return go.Scatter(
        x=rows["intensity"], y=rows["attainable_flops"], mode="markers", name=name, legendgroup=algorithm,
        legendrank=POINT_RANK, marker=marker, customdata=custom,
        hovertemplate=(f"<b>{name}</b> on %{{customdata[0]}}<br>%{{customdata[1]:.3s}}FLOP, %{{customdata[2]:.3s}}B "
                       "of HBM traffic<br>intensity %{x:.3g} FLOP/byte<br>%{y:.3s}FLOP/s attainable, "
                       "time %{customdata[3]:.3g} ms<extra></extra>"))


def speedup_table(points: pd.DataFrame | None, measured: Mapping[str, float] | None = None, *,
                  measured_device: str = "this CPU (measured)") -> pd.DataFrame:
    """Speedup of each tiled kernel over naive: predicted per device from the roofline points (naive's predicted time
    / the kernel's), and optionally the speedup measured on this machine.

    Args:
        points: roofline_points output (device, algorithm, time_s; or speedup_vs_naive).
        measured: algorithm ("kv_outer", "q_outer") -> measured speedup over naive (naive time / its time), e.g. from
            the Benchmark's summary table at one N; None or empty: no measured rows.
        measured_device: the name the measured rows get.
    Returns:
        Tidy DataFrame, one row per (device, algorithm): device, algorithm, speedup (x), kind ("model" or
        "measured"); devices in the order of the points, the measured rows last.

    Example:
        >>> pts = pd.DataFrame({"device": ["A100"] * 2, "algorithm": ["naive", "q_outer"], "time_s": [2.0, 1.0]})
        >>> speedup_table(pts, {"q_outer": 0.5})[["device", "speedup", "kind"]].values.tolist()
        [['A100', 2.0, 'model'], ['this CPU (measured)', 0.5, 'measured']]
    """
    rows = []
    if points is not None and len(points) and {"device", "algorithm"} <= set(points.columns):
        df = _tidy(points)
        for device, mine in df.groupby("device", sort=False):  # every points row is a model prediction
            by_alg = mine.drop_duplicates("algorithm").set_index("algorithm")
            for algorithm in (KV_OUTER, Q_OUTER):
                if algorithm not in by_alg.index:
                    continue
                if "time_s" in by_alg and NAIVE in by_alg.index:
                    speedup = float(by_alg.at[NAIVE, "time_s"]) / float(by_alg.at[algorithm, "time_s"])
                else:
                    speedup = float(by_alg.get("speedup_vs_naive", pd.Series(math.nan, index=by_alg.index))[algorithm])
                rows.append({"device": str(device), "algorithm": algorithm, "speedup": speedup, "kind": "model"})
    for algorithm, speedup in (measured or {}).items():
        rows.append({"device": measured_device, "algorithm": algorithm, "speedup": float(speedup), "kind": "measured"})
    return pd.DataFrame(rows, columns=["device", "algorithm", "speedup", "kind"])


def speedup_figure(table: pd.DataFrame, *, title: str | None = None, caption: str | None = None) -> go.Figure:
    """Bars of speedup_table: the predicted speedup of FA1 and FA2 over naive on each GPU (a model, solid bars) next
    to the measured speedup on this machine (hatched bars), with a line at 1 (= naive).

    Args:
        table: speedup_table output.  title: figure title.
        caption: a line under the title (e.g. why the measured CPU speedup is lower).
    Returns:
        plotly Figure with one bar trace per (algorithm, kind).

    Example:
        >>> t = speedup_table(pd.DataFrame({"device": ["A100"] * 2, "algorithm": ["naive", "kv_outer"],
        ...                                 "time_s": [2.0, 1.0]}), {"kv_outer": 0.4})
        >>> [b.name for b in speedup_figure(t).data if b.type == "bar"]
        ['FA1: predicted (model)', 'FA1: measured']
    """
    fig = go.Figure()
    style_figure(fig, title=title or "Speedup over naive: GPUs predicted (model), here measured",
                 x_title="device", y_title="speedup over naive (×)", log_y=False)
    fig.update_layout(height=SPEEDUP_FIG_HEIGHT_PX, barmode="group", bargap=0.3,
                      legend={"orientation": "h", "x": 0, "yanchor": "top"}, margin={"b": 150, "t": 90})
    if caption:
        set_subtitle(fig, caption)
    plot_h = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    fig.update_layout(legend_y=-SPEEDUP_LEGEND_GAP_PX / plot_h)
    if table is None or len(table) == 0:
        add_note(fig, "No data: choose at least one device.")
        return fig
    devices = list(dict.fromkeys(table["device"]))
    for algorithm in (KV_OUTER, Q_OUTER):
        for kind, label, pattern in (("model", "predicted (model)", ""), ("measured", "measured", "/")):
            rows = table[table["algorithm"].eq(algorithm) & table["kind"].eq(kind)]
            if not len(rows):
                continue
            fig.add_trace(go.Bar(
                x=rows["device"], y=rows["speedup"], name=f"{SHORT[algorithm]}: {label}", offsetgroup=algorithm,
                legendgroup=algorithm, marker={"color": impl_color(algorithm), "pattern": {"shape": pattern}},
                text=[f"{v:.2g}×" for v in rows["speedup"]], textposition="outside",
                textfont={"size": BASE_FONT_PX}, cliponaxis=False,
                hovertemplate=f"<b>{SHORT[algorithm]}</b> on %{{x}}: %{{y:.3g}}× naive ({label})<extra></extra>"))
    top = max(1.0, float(table["speedup"].max()))
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=devices)
    fig.update_yaxes(range=[0, top * 1.25])
    fig.add_hline(y=1.0, line={"color": REFERENCE_COLOR, "width": 2, "dash": "dash"}, annotation_text="1× = naive",
                  annotation_position="top left", annotation_font={"size": BASE_FONT_PX, "color": REFERENCE_COLOR})
    return fig


def roof_picture(s: RoofSettings, v: Mapping[str, Any]) -> go.Figure:
    """The lesson's slide: the H100's roofline (the model's published peaks) with naive, FA1 and FA2 at their FLOPs
    per byte, from the check's points (v["points"]) and the device's peaks (v["device"])."""
    gpu, points = v["device"], v["points"]
    peak, ridge = gpu.peak_flops[s.gpu_dtype] / 1e12, gpu.ridge(s.gpu_dtype)
    xs = [1.0, ridge, 1e4]
    fig = go.Figure(go.Scatter(x=xs, y=[min(peak, gpu.bandwidth * x / 1e12) for x in xs], mode="lines",
                               name=f"{v['gpu']} roof", line={"color": "#444", "width": 3},
                               hovertemplate="%{x:.0f} FLOP/byte: at most %{y:.0f} TFLOP/s<extra></extra>"))
    fig.add_vline(x=ridge, line={"dash": "dot", "color": "#888"})
    l2_bw = gpu.l2_bandwidth
    fig.add_trace(go.Scatter(x=xs, y=[min(peak, l2_bw * x / 1e12) for x in xs], mode="lines", name="L2 roof",
                             line={"color": "#999", "width": 1.5},
                             hovertemplate="%{x:.0f} FLOP per L2 byte: at most %{y:.0f} TFLOP/s<extra></extra>"))
    for algorithm, name in ((NAIVE, "naive"), (KV_OUTER, "FA1"), (Q_OUTER, "FA2")):
        row = points[points["algorithm"].eq(algorithm)].iloc[0]
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
    return finish_slide(fig, f"Roofline of the {v['gpu']}, {s.gpu_dtype}",
                        f"HBM ridge {ridge:.0f} FLOP/byte (dotted); thin: the L2 roof").update_layout(
        legend={"x": 1, "xanchor": "right", "y": 0, "yanchor": "bottom"})  # the empty corner under the roofs
