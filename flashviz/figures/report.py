"""Results as tables and pages: the summary table (flash against naive at each N, speedup and memory saving),
its plotly table figure, and one standalone HTML report. No torch, no streamlit: only pandas and plotly.

Inputs are the DataFrames of run_sweep (a CSV read back with pandas works too); rows whose status is not "ok"
show as "not run". The report embeds plotly.js inline so that it opens offline.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from flashviz.figures.palette import BASE_FONT_PX
from flashviz.figures.style import MIB, MS_PER_S, add_note, flashviz_template, ok_rows
from flashviz.measure.verdict import cell, compare, row_estimate
from flashviz.vocab import FLASH, NAIVE, NOT_RUN, OK

TABLE_TITLE_PX = 100  # title, subtitle and top margin of a table figure
TABLE_BOTTOM_PX = 8
TABLE_HEADER_PX = 64  # two lines of header text, with padding
TABLE_ROW_PX = 40  # one line of cell text at TABLE_FONT_PX, with padding
TABLE_LINE_PX = 26  # each further line of text in a header or a row at TABLE_FONT_PX
TABLE_FONT_PX = 20
BOLD_WIDTH = 1.2  # a bold header character's width in regular ones (a column is as wide as its longest line)
PAD_CHARS = 2  # a column's padding, in characters
NBSP = "\u00a0"  # a space plotly does not wrap a table cell's line at
TABLE_SLACK_PX = 12  # below the last row: its bottom border and rounding, so plotly never adds a scroll bar


# ----------------------------------------------------------------------------------------------------------------------
# the summary table


NO_INTERVAL = "no interval"  # a speedup cell where a row carries no interval: no ratio is shown without one
CLOSE, CLOSE_SHORT = "too close to call", "too close"  # verdict.cell's words, and the table figure's shorter ones


def speedup_cell(df: pd.DataFrame, n: int, flash: str, baseline: str) -> str | float:
    """The speedup at N = n as a verdict cell (flashviz.measure.verdict.cell: baseline time / flash time with its 95%
    interval where the intervals separate, else "too close to call" and the interval); NO_INTERVAL where either row
    has none; NaN where either did not run."""
    rows = {impl: df[(df["N"] == n) & df["impl"].astype(str).eq(impl)] for impl in (baseline, flash)}
    if any(len(r) == 0 or str(r["status"].iloc[0]) != OK for r in rows.values()):
        return math.nan
    a, b = (row_estimate(rows[impl].iloc[0]) for impl in (baseline, flash))
    if a is None or b is None:
        return NO_INTERVAL
    return cell(compare(a, b, (baseline, flash)))


def summary_table(df: pd.DataFrame | None, *, flash_impl: str = FLASH, baseline: str = NAIVE) -> pd.DataFrame:
    """The summary table: at each N, time and peak memory of naive and flash, the speedup and the memory saving.

    Args:
        df: run_sweep output.  flash_impl: the tiled implementation to compare ("flash" or "flash2").
        baseline: the implementation it is compared against.
    Returns:
        DataFrame indexed 0.., columns N, "<baseline> time (ms)", "<flash> time (ms)", "speedup (x)",
        "<baseline> peak (MiB)", "<flash> peak (MiB)", "memory saving (x)"; NaN where a row did not run.
        speedup = baseline time / flash time, as a verdict (speedup_cell: a ratio only where the two medians' 95%
        intervals separate, never a bare point ratio); memory saving = baseline peak / flash peak (exact counts).

    Example:
        >>> list(summary_table(pd.DataFrame()).columns)[:3]
        ['N', 'naive time (ms)', 'flash time (ms)']
    """
    b, f = baseline, flash_impl
    columns = ["N", f"{b} time (ms)", f"{f} time (ms)", "speedup (x)", f"{b} peak (MiB)", f"{f} peak (MiB)",
               "memory saving (x)"]
    if df is None or len(df) == 0 or not {"impl", "N"} <= set(df.columns):
        return pd.DataFrame(columns=columns)
    ok = df[ok_rows(df)]

    def pick(impl: str, col: str, scale: float) -> pd.Series:
        rows = ok[ok["impl"].astype(str).eq(impl)]
        return (pd.to_numeric(rows[col], errors="coerce") * scale).groupby(rows["N"]).first()

    ns = sorted(df["N"].unique())
    table = pd.DataFrame({"N": ns})
    tb, tf = pick(b, "time_s", MS_PER_S), pick(f, "time_s", MS_PER_S)
    mb, mf = pick(b, "peak_bytes", 1 / MIB), pick(f, "peak_bytes", 1 / MIB)
    table[columns[1]] = table["N"].map(tb)
    table[columns[2]] = table["N"].map(tf)
    table[columns[3]] = pd.Series([speedup_cell(df, n, f, b) for n in ns], dtype=object)
    table[columns[4]] = table["N"].map(mb)
    table[columns[5]] = table["N"].map(mf)
    table[columns[6]] = table[columns[4]] / table[columns[5]]
    return table.astype({c: "float64" for c in columns[1:] if c != columns[3]})


def _fmt(value: object) -> str:
    """A cell's text: a verdict cell on two lines (the ratio or "too close", then the interval), so that no column
    needs to be wide enough for both, and no-break spaces, so that plotly never wraps a line into a third (a row
    taller than its height pushes the last rows out of the figure)."""
    if isinstance(value, float) and math.isnan(value):
        return NOT_RUN.replace(" ", NBSP)
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return html.escape(str(value).replace(CLOSE, CLOSE_SHORT)).replace(" (", "<br>(").replace(" ", NBSP)


def plain(text: str) -> str:
    """A table cell's or header's words as one line of plain text (its tags, line breaks and no-break spaces gone).

    Example:
        >>> plain("<b>speedup</b><br>(x)<br> "), plain(_fmt("too close to call (0.79-0.97x)"))
        ('speedup (x)', 'too close (0.79-0.97x)')
    """
    return " ".join(" ".join(_lines(text)).replace(NBSP, " ").split())


def _lines(text: str) -> list[str]:
    """A cell's or header's lines as plain text: split at <br>, tags gone, entities read."""
    return [html.unescape(re.sub(r"<[^>]+>", "", line)) for line in text.split("<br>")]


def _header(column: str, lines: int) -> str:
    """'naive time (ms)' -> '<b>naive</b><br>time<br>(ms)': a word per line, padded to `lines`, so that every header
    takes the same known height and no column need be wider than its longest word."""
    head, *rest = str(column).split(" ")
    return "<br>".join([f"<b>{html.escape(head)}</b>", *map(html.escape, rest), *[" "] * (lines - 1 - len(rest))])


def _longest_line(text: str) -> int:
    """Characters in the longest line of a cell or header's text (its tags and <br> aside)."""
    return max(map(len, _lines(text)))


def table_height(rows: int, header_px: int = TABLE_HEADER_PX, row_px: int = TABLE_ROW_PX) -> int:
    """Height (px) of a summary_table_figure with `rows` rows of row_px each under a header of header_px: title,
    header, rows."""
    return TABLE_TITLE_PX + header_px + row_px * max(rows, 1) + TABLE_SLACK_PX + TABLE_BOTTOM_PX


def summary_table_figure(table: pd.DataFrame, *, title: str = "Summary: flash vs naive") -> go.Figure:
    """A plotly table of `summary_table` (NaN shown as 'not run'), tall enough for every row (no scrolling), in a
    font readable from the back of the room; the subtitle defines speedup and memory saving. Headers take a word per
    line and verdict cells two lines, and each column is as wide as its longest line: nothing wraps or is cut at the
    width a 1280 x 720 projector gives the figure, so the heights are known.

    Example:
        >>> summary_table_figure(summary_table(None)).data[0].type
        'table'
    """
    header_lines = max([2, *(len(str(c).split(" ")) for c in table.columns)])
    heads = [_header(c, header_lines) for c in table.columns]
    cells = [[_fmt(v) for v in table[c].tolist()] for c in table.columns]
    row_lines = max([1, *(text.count("<br>") + 1 for column in cells for text in column)])
    header_px = TABLE_HEADER_PX + (header_lines - 2) * TABLE_LINE_PX
    row_px = TABLE_ROW_PX + (row_lines - 1) * TABLE_LINE_PX
    widths = [max([BOLD_WIDTH * _longest_line(head), *map(_longest_line, column)]) + PAD_CHARS
              for head, column in zip(heads, cells, strict=True)]
    fig = go.Figure(go.Table(
        columnwidth=widths, header={"values": heads, "fill_color": "#DDE6F0",
                                    "font": {"size": TABLE_FONT_PX}, "align": "right", "height": header_px},
        cells={"values": cells,
               "fill_color": [["white", "#F4F6F9"] * (len(table) // 2 + 1)],  # zebra rows: easier to follow
               "font": {"size": TABLE_FONT_PX}, "align": "right", "height": row_px}))
    names = [str(c).split(" ")[0] for c in table.columns[1:3]]  # "naive time (ms)", "flash time (ms)"
    b, f = names if len(names) == 2 else (NAIVE, FLASH)
    subtitle = f"speedup = {b} time / {f} time;  memory saving = {b} peak / {f} peak"
    fig.update_layout(template=flashviz_template(),
                      title={"text": title, "subtitle": {"text": subtitle, "font": {"size": BASE_FONT_PX}}},
                      margin={"t": TABLE_TITLE_PX, "b": TABLE_BOTTOM_PX, "l": 20, "r": 20},
                      height=table_height(len(table), header_px, row_px))
    if len(table) == 0:
        add_note(fig, "No data yet: run a sweep.", y=0.3)
    return fig


# ----------------------------------------------------------------------------------------------------------------------
# a standalone report


def report_html(figures: Sequence[go.Figure], *, title: str = "flashviz report", intro: str = "",
                table: pd.DataFrame | None = None) -> str:
    """One standalone HTML page: plotly.js embedded inline (opens offline), the figures, and an HTML table.

    Args:
        figures: plotly Figures, in page order.  title: page title.  intro: a paragraph of plain text.
        table: an optional DataFrame appended as an HTML table (e.g. the full sweep).
    Returns:
        The HTML document as a string.

    Example:
        >>> "plotly" in report_html([summary_table_figure(summary_table(None))])
        True
    """
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             "<style>body{font-family:Arial,Helvetica,sans-serif;font-size:18px;margin:2em;max-width:1200px}"
             "table{border-collapse:collapse;font-size:15px}td,th{border:1px solid #ccc;padding:4px 8px;"
             "text-align:right}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    if intro:
        parts.append(f"<p>{html.escape(intro)}</p>")
    for i, fig in enumerate(figures):
        parts.append(fig.to_html(full_html=False, include_plotlyjs=(i == 0)))  # True: the whole plotly.js inline
    if table is not None:
        parts.append("<h2>All measurements</h2>")
        parts.append(table.to_html(index=False, na_rep="", float_format=lambda x: f"{x:.4g}"))
    parts.append("</body></html>")
    return "\n".join(parts)
