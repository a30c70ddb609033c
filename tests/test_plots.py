"""plots.py: expected traces, titles, units and fonts; log axes with few labelled ticks and sane ranges; rows not run
drawn; empty input survives; no torch inside."""

import ast
import math
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest
from plotly.offline import get_plotlyjs

from flashviz.figures import palette, plots, report, style
from flashviz.measure.sweep import COLUMNS
from flashviz.measure.verdict import compare, row_estimate
from flashviz.model.iomodel import hbm_vs_memory
from flashviz.views.correct import figures as correctness
from flashviz.views.roof import figures as roofline

PLOTS_SOURCE = Path(plots.__file__)
PURE_PLOT_MODULES = ("flashviz.figures.plots", "flashviz.figures.style", "flashviz.figures.report",
                     "flashviz.figures.slide", "flashviz.figures.tilegrid", "flashviz.views.correct.figures",
                     "flashviz.views.roof.figures")
PURE_PACKAGES = {*PURE_PLOT_MODULES, "flashviz.figures", "flashviz.figures.palette", "flashviz._lazy",
                 "flashviz.vocab",  # what importing them may load of flashviz; and the verdict rule (pure Python)
                 "flashviz.measure", "flashviz.measure.verdict", "flashviz.measure.stats", "flashviz.limits"}
MIB = 1 << 20


def fake_sweep(skip_naive_at=(4096,)):
    """A run_sweep-shaped DataFrame with made-up numbers (no torch run needed)."""
    rows = []
    for n in (256, 1024, 4096):
        for impl, t, mem in (("naive", 1e-9 * n * n, 8 * n * n), ("flash", 2e-9 * n * n, 4096 * n),
                             ("flash2", 1.5e-9 * n * n, 4096 * n), ("sdpa", 0.2e-9 * n * n, 1024 * n)):
            skipped = impl == "naive" and n in skip_naive_at
            rows.append({
                "impl": impl, "N": n, "d": 64, "block_q": 128, "block_k": 128, "causal": False, "window": None,
                "batch": 1, "heads": 1, "dtype": "float32", "device": "cpu", "threads": 2,
                "time_s": math.nan if skipped else t, "time_iqr_s": math.nan if skipped else t / 10,
                "peak_bytes": math.nan if skipped else mem, "flops": 4 * n * n * 64,
                "gflops": math.nan if skipped else 4 * n * n * 64 / t / 1e9,
                "hbm_bytes": math.nan if impl == "sdpa" else 10.0 * n * n,
                "max_abs_err": math.nan if skipped else 1e-7,
                "status": "not run: naive S and P would need 134217728 bytes" if skipped else "ok"})
    return pd.DataFrame(rows, columns=list(COLUMNS))


SWEEP_FIGURES = [plots.memory_figure, plots.time_figure, plots.gflops_figure, plots.hbm_figure]


def _assert_readable(fig: go.Figure):
    layout = fig.layout
    assert layout.title.text
    assert layout.template.layout.font.size >= 16
    assert layout.template.layout.legend.font.size >= 16


@pytest.mark.parametrize("make", SWEEP_FIGURES)
def test_sweep_figures_have_titles_units_log_axes_and_one_colour_per_impl(make):
    fig = make(fake_sweep())
    _assert_readable(fig)
    assert "(" in fig.layout.xaxis.title.text and "(" in fig.layout.yaxis.title.text  # units in parentheses
    assert fig.layout.xaxis.type == "log"
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    for trace in lines:
        impl = trace.legendgroup
        assert trace.line.color == palette.IMPL_COLORS[impl]  # the same colour in every figure
        assert trace.hovertemplate and "%{y" in trace.hovertemplate  # hover carries the number


def test_memory_and_time_figures_carry_every_impl_and_the_rows_that_did_not_run():
    for make in (plots.memory_figure, plots.time_figure):
        fig = make(fake_sweep())
        groups = [t.legendgroup for t in fig.data if t.mode == "lines+markers"]
        assert groups == ["naive", "flash", "flash2", "sdpa"]
        skipped = [t for t in fig.data if t.name == "naive: not run"]
        assert len(skipped) == 1 and list(skipped[0].x) == [4096]
        assert "134217728 bytes" in skipped[0].text[0]
        assert fig.layout.yaxis.type == "log"


def test_time_figure_has_iqr_error_bars_in_milliseconds():
    fig = plots.time_figure(fake_sweep())
    flash = next(t for t in fig.data if t.legendgroup == "flash" and t.mode == "lines+markers")
    df = fake_sweep()
    expected = (df[df.impl == "flash"]["time_iqr_s"] * 1e3 / 2).tolist()
    assert list(flash.error_y.array) == pytest.approx(expected)
    assert list(flash.y) == pytest.approx((df[df.impl == "flash"]["time_s"] * 1e3).tolist())
    assert "ms" in fig.layout.yaxis.title.text


def test_error_bars_never_reach_below_zero_on_the_log_time_axis():
    df = fake_sweep().assign(time_iqr_s=lambda d: d.time_s * 5)  # a noisy machine: IQR far above the median
    fig = plots.time_figure(df)
    for t in (t for t in fig.data if t.mode == "lines+markers"):
        assert list(t.error_y.array) == pytest.approx([2.5 * y for y in t.y])  # the upper arm is the truth
        assert all(y - m > 0 for y, m in zip(t.y, t.error_y.arrayminus, strict=True))
        assert list(t.customdata) == pytest.approx([5 * y for y in t.y])  # hover: the real IQR
    assert fig.layout.yaxis.range[0] > math.log10(min(df.time_s.dropna()) * 1e3) - 1.5


def test_memory_figure_is_in_mib():
    fig = plots.memory_figure(fake_sweep())
    sdpa = next(t for t in fig.data if t.legendgroup == "sdpa" and t.mode == "lines+markers")
    assert list(sdpa.y) == pytest.approx([1024 * n / MIB for n in (256, 1024, 4096)])


def test_hbm_figure_leaves_out_sdpa_and_keeps_the_model_of_skipped_rows():
    fig = plots.hbm_figure(fake_sweep())
    assert {t.legendgroup for t in fig.data} == {"naive", "flash", "flash2"}
    naive = next(t for t in fig.data if t.legendgroup == "naive")
    assert list(naive.x) == [256, 1024, 4096]


@pytest.mark.parametrize("make", [*SWEEP_FIGURES, plots.block_sweep_figure, correctness.correctness_figure])
@pytest.mark.parametrize("data", [None, pd.DataFrame(), pd.DataFrame(columns=list(COLUMNS))])
def test_empty_input_gives_an_empty_labelled_figure(make, data):
    fig = make(data)
    assert isinstance(fig, go.Figure) and fig.layout.title.text
    assert any("No data" in a.text for a in fig.layout.annotations)


@pytest.mark.parametrize("make", SWEEP_FIGURES)
def test_all_skipped_rows_do_not_crash(make):
    df = fake_sweep(skip_naive_at=(256, 1024, 4096))
    df = df[df.impl == "naive"]
    if make is plots.hbm_figure:  # the model needs no run: all three points stay
        assert len(make(df).data) == 1
        return
    fig = make(df)
    assert [t.name for t in fig.data] == ["naive: not run"]
    assert any("No row ran" in a.text for a in fig.layout.annotations)


def test_summary_table_speedup_and_memory_saving():
    table = report.summary_table(fake_sweep())
    assert list(table.columns) == ["N", "naive time (ms)", "flash time (ms)", "speedup (x)", "naive peak (MiB)",
                                   "flash peak (MiB)", "memory saving (x)"]
    assert list(table["N"]) == [256, 1024, 4096]
    row = table.set_index("N").loc[1024]
    assert row["speedup (x)"] == report.NO_INTERVAL  # rows without an interval: no bare point ratio
    assert row["memory saving (x)"] == pytest.approx(8 * 1024 / 4096)
    assert math.isnan(table.set_index("N").loc[4096, "speedup (x)"])  # naive did not run there
    other = report.summary_table(fake_sweep(), flash_impl="flash2")
    assert "flash2 time (ms)" in other.columns


def with_intervals(df: pd.DataFrame, half: dict[str, float], repeats: int = 30) -> pd.DataFrame:
    """The sweep with each implementation's interval +- half[impl] of its median, from `repeats` calls."""
    df = df.copy()
    for impl, h in half.items():
        mine = df["impl"] == impl
        df.loc[mine, "time_lo_s"], df.loc[mine, "time_hi_s"] = df["time_s"] * (1 - h), df["time_s"] * (1 + h)
        df.loc[mine, "repeats"] = repeats
    return df


@pytest.mark.parametrize(("half", "separated"), [(0.01, True), (0.04, True), (0.3, False)])
def test_summary_table_speedup_is_the_verdict_rules(half, separated):
    df = with_intervals(fake_sweep(), {"naive": half, "flash": half})
    table = report.summary_table(df).set_index("N")
    naive = df[(df["impl"] == "naive") & (df["N"] == 1024)].iloc[0]
    flash = df[(df["impl"] == "flash") & (df["N"] == 1024)].iloc[0]
    v = compare(row_estimate(naive), row_estimate(flash))
    assert v.separated == separated
    text = table.loc[1024, "speedup (x)"]
    shown = [float(x) for x in re.findall(r"\d+\.\d+", text)]
    if separated:  # the ratio, then its interval: naive 1e-9 N^2 s against flash 2e-9 N^2 s
        assert shown == pytest.approx([0.5, 0.5 * (1 - half) / (1 + half), 0.5 * (1 + half) / (1 - half)], abs=0.006)
    else:
        assert text.startswith("too close to call") and shown == pytest.approx([v.ratio_low, v.ratio_high], abs=0.006)
    fig = report.summary_table_figure(report.summary_table(df))
    column = list(fig.data[0].cells.values[3])
    assert report.plain(column[1]).startswith("too close") != separated  # the figure shows the same verdict


def test_summary_table_figure_shows_skipped_cells():
    fig = report.summary_table_figure(report.summary_table(fake_sweep()))
    assert fig.data[0].type == "table"
    cells = fig.data[0].cells.values
    assert "not run" in [report.plain(c) for c in cells[1]]  # naive time at N=4096
    assert fig.layout.title.text
    assert fig.data[0].cells.font.size >= 18 and fig.data[0].header.font.size >= 18
    empty = report.summary_table_figure(report.summary_table(pd.DataFrame()))
    assert empty.data[0].type == "table"


def test_summary_table_figure_is_tall_enough_for_every_row():
    heights = []
    for k in range(1, 9):
        ns = [128 * 2 ** i for i in range(k)]
        table = report.summary_table(pd.DataFrame({"impl": "naive", "N": ns, "time_s": 1e-3, "peak_bytes": 1e6,
                                                  "status": "ok"}))
        fig = report.summary_table_figure(table)
        header, cells = fig.data[0].header, fig.data[0].cells
        assert len({v.count("<br>") for v in header.values}) == 1  # every header the same number of lines
        margin = fig.layout.margin
        room = fig.layout.height - margin.t - margin.b
        assert room >= header.height + k * cells.height  # the header and every row fit: no scrolling, no cut
        heights.append(fig.layout.height)
    assert heights == sorted(heights) and heights[-1] - heights[0] == 7 * report.TABLE_ROW_PX


def test_hbm_vs_memory_figure_draws_theorem_2():
    df = hbm_vs_memory([2 ** k for k in range(10, 17)], 1024, 64)
    fig = plots.hbm_vs_memory_figure(df, n=1024, d=64)
    _assert_readable(fig)
    assert "on-chip memory M" in fig.layout.title.text and "N=1024" in fig.layout.title.text
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "M" in fig.layout.xaxis.title.text and "elements" in fig.layout.xaxis.title.text
    names = [t.name for t in fig.data]
    assert len(names) == 4  # model and order term for naive and kv_outer
    assert "N² d² / M" in names[3]
    flash = next(t for t in fig.data if t.legendgroup == "kv_outer" and t.mode == "lines+markers")
    assert list(flash.y) == sorted(flash.y, reverse=True)
    assert isinstance(plots.hbm_vs_memory_figure(pd.DataFrame()), go.Figure)


def fake_block_sweep():
    rows = []
    for b in (16, 32, 64, 128):
        for impl in ("flash", "flash2"):
            rows.append({"impl": impl, "N": 1024, "block_q": b, "block_k": b, "time_s": 1e-3 * 64 / b,
                         "time_iqr_s": 1e-5, "hbm_bytes": 1e8 / b, "status": "ok"})
    return pd.DataFrame(rows)


def test_block_sweep_figure_has_two_panels_and_reference_lines():
    reference = fake_sweep(skip_naive_at=())
    reference = reference[(reference.N == 1024) & reference.impl.isin(["naive", "sdpa"])]  # as jobs.block_sweep
    fig = plots.block_sweep_figure(fake_block_sweep(), reference=reference)
    _assert_readable(fig)
    tiled = [t for t in fig.data if t.mode == "lines+markers"]
    assert len(tiled) == 4  # time and traffic for each impl
    assert {t.xaxis for t in tiled} == {"x", "x2"}
    refs = {(t.name, t.yaxis): t.y for t in fig.data if t.mode == "lines"}
    naive_ms = 1e-9 * 1024 * 1024 * 1e3
    assert refs[("naive at N=1024 (untiled reference)", "y")] == pytest.approx((naive_ms, naive_ms))
    assert refs[("naive at N=1024 (untiled reference)", "y2")] == pytest.approx((10.0 * 1024**2 / MIB,) * 2)
    assert ("sdpa at N=1024 (untiled reference)", "y") in refs
    assert ("sdpa at N=1024 (untiled reference)", "y2") not in refs  # no IO model for SDPA
    assert sum(t.showlegend is not False for t in fig.data if t.mode == "lines") == 2  # one legend entry each
    assert list(fig.layout.xaxis.ticktext) == ["16²", "32²", "64²", "128²"]  # square tiles: short labels that fit


def test_block_sweep_reference_lines_keep_the_y_axes_sane():
    """Regression: add_hline put its label at 10^value on the log axes and stretched them to 1e84."""
    reference = fake_sweep(skip_naive_at=())
    fig = plots.block_sweep_figure(fake_block_sweep(), reference=reference[reference.N == 1024])
    assert not [a for a in fig.layout.annotations if a.yref not in (None, "paper", "y domain", "y2 domain")]
    for axis, ref in ((fig.layout.yaxis, "y"), (fig.layout.yaxis2, "y2")):
        values = [v for t in fig.data if t.yaxis == ref for v in t.y]
        lo, hi = axis.range
        assert lo <= math.log10(min(values)) and math.log10(max(values)) <= hi  # everything drawn is on screen
        assert hi - lo < math.log10(max(values) / min(values)) + 1.5  # and the axis is not stretched beyond it


@pytest.mark.parametrize("make", [*SWEEP_FIGURES, plots.block_sweep_figure, plots.hbm_vs_memory_figure,
                                  correctness.correctness_figure])
def test_every_log_axis_has_few_round_labelled_ticks(make):
    data = {plots.block_sweep_figure: fake_block_sweep(),
            plots.hbm_vs_memory_figure: hbm_vs_memory([2 ** k for k in range(10, 23)], 1024, 64),
            correctness.correctness_figure: fake_correctness()}.get(make, fake_sweep())
    fig = make(data)
    axes = [a for name, a in fig.layout.to_plotly_json().items() if name.startswith(("xaxis", "yaxis"))]
    logs = [a for a in axes if a.get("type") == "log"]
    assert logs
    for axis in logs:
        vals, text = axis["tickvals"], axis["ticktext"]
        assert axis["tickmode"] == "array" and 1 <= len(vals) <= style.MAX_LABELLED_TICKS
        assert len(text) == len(vals) and all(text)
        assert axis["range"][0] < math.log10(min(vals)) + 1e-9 and math.log10(max(vals)) < axis["range"][1] + 1e-9


def test_log_ticks_are_decades_or_1_2_5_or_powers_of_two_with_units():
    assert style.log_axis([1e-8, 1e-5], "sci")["ticktext"] == ["1e-8", "1e-7", "1e-6", "1e-5"]
    assert style.log_axis([1e3, 4e6], "si")["ticktext"] == ["1k", "10k", "100k", "1M"]
    assert style.log_axis([0.01, 100], "ms")["ticktext"] == ["10 µs", "100 µs", "1 ms", "10 ms", "100 ms"]
    assert style.log_axis([2, 400], "ms")["ticktext"] == ["1 ms", "10 ms", "100 ms"]  # widened to 3 decades
    assert style.log_axis([0.3, 40], "ms")["ticktext"][:3] == ["500 µs", "1 ms", "2 ms"]  # 1-2-5
    assert style.log_axis([0.25, 512], "mib")["ticktext"] == ["256 KiB", "1 MiB", "4 MiB", "16 MiB", "64 MiB",
                                                              "256 MiB"]
    for lo, hi in ((1e-9, 1e-2), (0.5, 0.6), (3, 3), (1e2, 1e9)):
        for unit in style.UNIT_FORMATS:
            ticks = style.log_axis([lo, hi], unit)["tickvals"]
            assert 2 <= len(ticks) <= style.LOG_TICKS_MAX
            if unit == "mib":
                assert all(math.log2(t * MIB) == round(math.log2(t * MIB)) for t in ticks)
            else:
                assert all(round(t / 10 ** math.floor(math.log10(t) + 1e-9), 6) in (1, 2, 5) for t in ticks)
    assert style.log_axis([0, math.nan, -1]) == {"type": "log"}
    assert style.fmt_ms(1500) == "1.5 s" and style.fmt_mib(2048) == "2 GiB" and style.fmt_sci(2.5e-7) == "2.5e-7"


def test_measured_axis_labels_each_n_and_thins_colliding_ones():
    assert style.measured_axis([256, 512, 1024])["ticktext"] == ["256", "512", "1024"]
    crowded = style.measured_axis([32, 33, 64, 97, 128])
    assert "32" in crowded["ticktext"] and "33" not in crowded["ticktext"]  # 32 and 33 would overlap
    assert len(style.measured_axis(list(range(100, 2000, 100)))["tickvals"]) <= style.LOG_TICKS_MAX


def test_flash_and_flash2_stay_distinguishable_when_their_lines_coincide():
    df = fake_sweep()
    fig = plots.memory_figure(df)  # flash and flash2 have identical peak memory here
    flash, flash2 = (next(t for t in fig.data if t.legendgroup == i and t.mode == "lines+markers")
                     for i in ("flash", "flash2"))
    assert list(flash.y) == list(flash2.y)
    assert flash.line.dash != flash2.line.dash and flash.marker.symbol != flash2.marker.symbol
    assert flash.line.color == palette.IMPL_COLORS["flash"] and flash2.line.color == palette.IMPL_COLORS["flash2"]
    assert flash.marker.symbol.endswith("-open") and flash.marker.size > flash2.marker.size  # a ring around it
    io = plots.hbm_vs_memory_figure(hbm_vs_memory([2 ** k for k in range(10, 17)], 1024, 64,
                                                  algorithms=("kv_outer", "q_outer")))
    kv, q = (next(t for t in io.data if t.legendgroup == a and t.mode == "lines+markers")
             for a in ("kv_outer", "q_outer"))
    assert (kv.line.dash, kv.marker.symbol) == (flash.line.dash, flash.marker.symbol)
    assert (q.line.dash, q.marker.symbol) == (flash2.line.dash, flash2.marker.symbol)


def test_figures_set_their_height_explicitly():
    """plotly.js ignores a height given only in the template; a projector needs the taller figure."""
    for fig in (plots.memory_figure(fake_sweep()), correctness.correctness_figure(fake_correctness()),
                plots.hbm_vs_memory_figure(None), plots.block_sweep_figure(fake_block_sweep())):
        assert fig.layout.height >= style.FIG_HEIGHT_PX


# ----------------------------------------------------------------------------------------------------------------------
# correctness


def fake_correctness(zero_at=(), skip=()):
    """The Correctness view's rows: every impl at each (d, N), made-up errors."""
    rows = []
    for d in (16, 64):
        for n in (64, 97, 1000):
            for k, impl in enumerate(("naive", "flash", "flash2", "sdpa")):
                err = 0.0 if (impl, d, n) in zero_at else (1 + k) * 1e-7 * (1 + d / 64)
                status = "not run: too big" if (impl, d, n) in skip else "ok"
                rows.append({"impl": impl, "N": n, "d": d, "max_abs_err": math.nan if status != "ok" else err,
                             "status": status})
    return pd.DataFrame(rows)


def test_correctness_figure_draws_each_impl_and_d_under_the_bar():
    fig = correctness.correctness_figure(fake_correctness(), tol=1e-5)
    _assert_readable(fig)
    assert fig.layout.yaxis.type == "log" and fig.layout.xaxis.type == "log"
    assert "(" in fig.layout.xaxis.title.text and "error" in fig.layout.yaxis.title.text
    lines = [t for t in fig.data if t.mode == "lines+markers" and t.showlegend is False]
    assert sorted(t.name for t in lines) == sorted(f"{i}, d={d}" for i in ("naive", "flash", "flash2", "sdpa")
                                                   for d in (16, 64))
    flash64 = next(t for t in lines if t.name == "flash, d=64")
    assert list(flash64.x) == [64, 97, 1000] and list(flash64.y) == pytest.approx([4e-7] * 3)
    assert "%{customdata[0]}" in flash64.hovertemplate and flash64.customdata[0][0] == "4.00e-07"
    assert flash64.line.color == palette.IMPL_COLORS["flash"]
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert "FA1 (flash)" in legend and len(legend) == len(set(legend))  # each implementation once
    # one panel per head dimension, each with its implementations' lines: 4 lines a panel, not 16 in one
    assert [a.text for a in fig.layout.annotations][:2] == ["d = 16", "d = 64"]
    assert {t.xaxis for t in lines if t.name.endswith("d=16")} == {"x"} and {
        t.xaxis for t in lines if t.name.endswith("d=64")} == {"x2"}
    assert fig.layout.yaxis2.matches == "y" or fig.layout.yaxis2.range == fig.layout.yaxis.range  # one y range


def test_correctness_figure_draws_the_tolerance_line_labelled_1e5_bar():
    fig = correctness.correctness_figure(fake_correctness(), tol=1e-5)
    (bar,) = [t for t in fig.data if t.mode == "lines+text"]
    assert list(bar.y) == [1e-5, 1e-5] and "1e-5 bar" in bar.text and bar.name.startswith("1e-5 bar")
    lo, hi = fig.layout.yaxis.range
    assert lo < -5 < hi and "1e-5" in fig.layout.yaxis.ticktext
    assert math.log10(bar.x[0]) <= fig.layout.xaxis.range[0] + 1e-9  # spans the whole plot
    assert math.log10(bar.x[1]) >= fig.layout.xaxis.range[1] - 1e-9
    other = correctness.correctness_figure(fake_correctness(), tol=1e-3)
    assert any("1e-3 bar" in (t.text or ()) for t in other.data)


def test_correctness_figure_clips_zero_errors_to_a_floor_and_says_so():
    fig = correctness.correctness_figure(fake_correctness(zero_at={("sdpa", 16, 97)}))
    sdpa16 = next(t for t in fig.data if t.name == "sdpa, d=16")
    smallest = 1e-7 * (1 + 16 / 64)  # naive at d=16
    assert sdpa16.y[1] == pytest.approx(smallest / 10) and all(y > 0 for y in sdpa16.y)
    assert sdpa16.customdata[1][0].startswith("0 (exact; drawn at")
    assert fig.layout.yaxis.range[0] <= math.log10(smallest / 10)
    assert any("exactly 0" in a.text for a in fig.layout.annotations)
    everything_exact = fake_correctness().assign(max_abs_err=0.0)
    fig = correctness.correctness_figure(everything_exact, tol=1e-5)
    assert all(y == pytest.approx(1e-8) for t in fig.data if t.mode == "lines+markers" and t.showlegend is False
               for y in t.y)  # tol / 1000 when nothing is non-zero


def test_correctness_figure_survives_empty_and_skipped_input():
    for data in (None, pd.DataFrame(), pd.DataFrame(columns=list(COLUMNS))):
        fig = correctness.correctness_figure(data)
        assert fig.layout.title.text and any("No data" in a.text for a in fig.layout.annotations)
    fig = correctness.correctness_figure(fake_correctness(skip={("naive", 64, 1000)}))
    (crosses,) = [t for t in fig.data if t.name == "naive: not run"]
    assert list(crosses.x) == [1000] and "too big" in crosses.text[0]
    df = fake_correctness(skip={(i, d, n) for i in ("naive", "flash", "flash2", "sdpa") for d in (16, 64)
                                for n in (64, 97, 1000)})
    fig = correctness.correctness_figure(df)
    assert any("No row ran" in a.text for a in fig.layout.annotations)


def test_report_html_is_standalone_and_contains_the_figures_and_table():
    table = fake_sweep()
    page = report.report_html([plots.memory_figure(table), plots.time_figure(table)], title="t <1>",
                             intro="hello", table=table)
    assert page.startswith("<!DOCTYPE html>") and "t &lt;1&gt;" in page
    assert "plotly" in page.lower()
    assert 'src="http' not in page and "src='http" not in page  # plotly.js is inline: the page opens offline
    assert get_plotlyjs() in page  # the whole plotly.js bundle is in the page: it opens offline
    assert page.count("Plotly.newPlot") == 2
    assert "<table" in page


def _imported(source: Path) -> set[str]:
    """Every module a source file imports when it runs, by full name ("from flashviz import x" counts as flashviz.x);
    imports under `if TYPE_CHECKING:` are for annotations only and do not count."""
    tree = ast.parse(source.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = []
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = "flashviz" + (f".{node.module}" if node.module else "") if node.level else node.module
            out |= {f"{module}.{a.name}" for a in node.names} if module == "flashviz" else {module}
    return out


def test_plots_imports_neither_torch_nor_streamlit():
    """plots.py and the modules it draws with (PURE_PLOT_MODULES) pull in neither torch nor streamlit, and of
    flashviz only each other, the palette and the lazy-import helper. Checked twice: in their source, and by
    importing plots.py in a fresh interpreter where torch and streamlit cannot be imported and flashviz/__init__.py
    is bypassed."""
    package = PLOTS_SOURCE.parent.parent  # flashviz/
    for name in PURE_PLOT_MODULES:
        imported = _imported(package.parent / f"{name.replace('.', '/')}.py")
        assert not {m.split(".")[0] for m in imported} & {"torch", "streamlit"}, (name, imported)
        assert {m for m in imported if m.split(".")[0] == "flashviz"} <= PURE_PACKAGES, (name, imported)
    code = ("import sys, types\n"
            "sys.modules['torch'] = sys.modules['streamlit'] = None  # importing either now raises ImportError\n"
            "package = types.ModuleType('flashviz')\n"
            "package.__path__ = [sys.argv[1]]  # flashviz's modules, without running its __init__.py\n"
            "sys.modules['flashviz'] = package\n"
            "import flashviz.figures.plots\n"
            "print(sorted(m for m in sys.modules if m.startswith('flashviz.')))\n")
    run = subprocess.run([sys.executable, "-c", code, str(package)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert set(ast.literal_eval(run.stdout.strip())) <= PURE_PACKAGES, run.stdout


def sram_marks(dtype_bytes):
    """The model's sram_marks frame (device, M in elements, label), written out by hand: 164 KiB and 228 KiB."""
    return pd.DataFrame([{"device": "A100 (SXM 80GB)", "M": 164 * 1024 // dtype_bytes, "sram_bytes": 164 * 1024,
                          "label": "A100 (SXM 80GB): 164 KiB shared memory per SM"},
                         {"device": "H100 (SXM)", "M": 228 * 1024 // dtype_bytes, "sram_bytes": 228 * 1024,
                          "label": "H100 (SXM): 228 KiB shared memory per SM"}])


@pytest.mark.parametrize("dtype_bytes", [2, 4])
def test_hbm_vs_memory_figure_marks_gpu_sram_per_sm_on_the_m_axis(dtype_bytes):
    df = hbm_vs_memory([2 ** k for k in range(10, 14)], 1024, 64)  # M up to 8192: the marks lie beyond the data
    fig = plots.hbm_vs_memory_figure(df, n=1024, d=64, sram_marks=sram_marks(dtype_bytes))
    marks = {t.name: t for t in fig.data if t.legendgroup == "sram"}
    assert set(marks) == {"A100 SRAM per SM", "H100 SRAM per SM"}
    a100, h100 = marks["A100 SRAM per SM"], marks["H100 SRAM per SM"]
    assert set(a100.x) == {164 * 1024 / dtype_bytes} and set(h100.x) == {228 * 1024 / dtype_bytes}  # verticals
    assert "164 KiB" in a100.hovertemplate and "228 KiB" in h100.hovertemplate and "A100" in a100.text
    lo, hi = fig.layout.xaxis.range
    assert lo < math.log10(a100.x[0]) < math.log10(h100.x[0]) < hi  # the axis reaches the marks
    y_lo, y_hi = fig.layout.yaxis.range
    assert a100.y[0] == pytest.approx(10 ** y_lo) and a100.y[-1] == pytest.approx(10 ** y_hi)  # full height
    (a_name,), (h_name,) = ([(y, t) for y, t in zip(m.y, m.text, strict=True) if t] for m in (a100, h100))
    assert a_name[1] == "A100" and h_name[1] == "H100" and h_name[0] < a_name[0]  # names apart: H100's lower
    assert not [t for t in plots.hbm_vs_memory_figure(df).data if t.legendgroup == "sram"]  # marks only when given


def test_hbm_vs_memory_figure_carries_the_explanation_and_each_curves_note():
    df = hbm_vs_memory([2 ** k for k in range(10, 17)], 1024, 64, algorithms=("naive", "kv_outer", "q_outer"))
    text = "FA1 falls as M grows: bigger tiles, fewer passes over K, V.<br>naive does not use M: flat."
    fig = plots.hbm_vs_memory_figure(df, n=1024, d=64, explanation=text,
                                     curve_notes={"kv_outer": "tile rule: Bc = ceil(M / 4d), Br = min(Bc, d)"})
    assert fig.layout.title.subtitle.text == text and fig.layout.margin.t >= 80 + 2 * 26
    kv = next(t for t in fig.data if t.legendgroup == "kv_outer" and t.mode == "lines+markers")
    q = next(t for t in fig.data if t.legendgroup == "q_outer" and t.mode == "lines+markers")
    assert "tile rule: Bc = ceil(M / 4d)" in kv.hovertemplate and "tile rule" not in q.hovertemplate


@pytest.mark.parametrize(("dtype", "bar", "label"), [("float32", 1e-5, "1e-5 bar"), ("float64", 1e-5, "1e-5 bar"),
                                                      ("float16", 2 * 2 ** -10, "1.95e-3 bar"),
                                                      ("bfloat16", 2 * 2 ** -7, "1.56e-2 bar")])
def test_correctness_bar_fits_the_dtype_and_the_figure_says_why(dtype, bar, label):
    tol, why = correctness.tolerance_for(dtype)
    assert tol == pytest.approx(bar) and dtype in why
    df = fake_correctness().assign(dtype=dtype)
    fig = correctness.correctness_figure(df)  # the dtype comes from the rows
    (line,) = [t for t in fig.data if t.mode == "lines+text"]
    assert list(line.y) == pytest.approx([bar, bar]) and label in line.text
    assert fig.layout.title.subtitle.text.replace("<br>", " ") == why
    if dtype in ("float16", "bfloat16"):
        assert "eps" in why and f"{correctness.EPS_MULTIPLE} eps" in why
        bf16_err = 6.97e-3  # a bfloat16 run's error: over the fp32 bar, under bfloat16's
        assert (bf16_err <= tol) == (dtype == "bfloat16")
    with pytest.raises(ValueError, match="dtype must be one of"):
        correctness.tolerance_for("int8")


# ----------------------------------------------------------------------------------------------------------------------
# roofline

A100_PEAK, A100_BW = 312e12, 2.039e12  # dense fp16 FLOP/s, HBM bytes/s
H100_PEAK, H100_BW = 989.4e12, 3.35e12


def fake_roofline_points(measured_cpu=False):
    """roofline_points-shaped rows, worked by hand: naive 1 GFLOP over 100 MB, the tiled kernels over 10 and 5 MB."""
    rows = []
    devices = [("A100", A100_PEAK, A100_BW, False), ("H100", H100_PEAK, H100_BW, False)]
    if measured_cpu:
        devices.append(("this CPU", 10e9, 3e9, True))
    for device, peak, bw, measured in devices:
        for algorithm, flops, nbytes in (("naive", 1e9, 1e8), ("kv_outer", 1e9, 1e7), ("q_outer", 1e9, 5e6)):
            intensity = flops / nbytes
            rows.append({"device": device, "algorithm": algorithm, "flops": flops, "hbm_bytes": nbytes,
                         "intensity": intensity, "attainable_flops": min(peak, intensity * bw),
                         "time_s": max(flops / peak, nbytes / bw), "peak_flops": peak, "bandwidth": bw,
                         "measured": measured})
    return pd.DataFrame(rows)


def test_roofline_draws_one_roof_per_device_with_its_ridge_and_the_points_on_it():
    fig = roofline.roofline_figure(fake_roofline_points(), dtype="float16")
    _assert_readable(fig)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "FLOP/byte" in fig.layout.xaxis.title.text and "FLOP/s" in fig.layout.yaxis.title.text
    assert "float16" in fig.layout.title.subtitle.text and "model" in fig.layout.title.subtitle.text
    by_name = {t.name: t for t in fig.data if t.legendgroup != "ridge"}
    for device, peak, bw in (("A100", A100_PEAK, A100_BW), ("H100", H100_PEAK, H100_BW)):
        roof = by_name[f"{device} roof · ridge {peak / bw:.3g} FLOP/byte"]  # the ridge with its unit, in the legend
        assert list(roof.y) == pytest.approx([min(peak, bw * x) for x in roof.x])
        assert roof.x[1] == pytest.approx(peak / bw) and roof.y[1] == pytest.approx(peak)  # the bend is the ridge
        (ridge,) = [t for t in fig.data if t.legendgroup == "ridge" and f"<b>{device} ridge" in t.hovertemplate]
        assert ridge.x[0] == pytest.approx(peak / bw) and ridge.y[0] == pytest.approx(peak)
    ridges = [t for t in fig.data if t.legendgroup == "ridge"]
    roofs = [t.name for t in fig.data if t.name.endswith("FLOP/byte")]
    assert roofs == ["A100 roof · ridge 153 FLOP/byte", "H100 roof · ridge 295 FLOP/byte"]  # 312 / 2.039, 989.4 / 3.35
    assert [t.showlegend for t in ridges] == [True, False]  # one legend entry for the ridges
    naive, fa1, fa2 = by_name["naive"], by_name["FA1"], by_name["FA2"]
    assert list(naive.x) == [10.0, 10.0] and list(fa1.x) == [100.0, 100.0] and list(fa2.x) == [200.0, 200.0]
    assert list(naive.y) == pytest.approx([10 * A100_BW, 10 * H100_BW])  # bandwidth-bound on both
    assert list(fa2.y) == pytest.approx([A100_PEAK, 200 * H100_BW])  # A100: past its ridge, at the compute roof
    for trace, impl in ((naive, "naive"), (fa1, "flash"), (fa2, "flash2")):
        assert trace.marker.color == palette.IMPL_COLORS[impl]  # FA1 and FA2 in flash's and flash2's colours
    lo, hi = fig.layout.xaxis.range
    assert lo < 1 and hi > math.log10(H100_PEAK / H100_BW)  # every ridge and point on screen


def test_roofline_draws_measured_points_as_stars_and_takes_rates_from_roofs():
    points = fake_roofline_points(measured_cpu=True)
    roofs = points.drop_duplicates("device")[["device", "peak_flops", "bandwidth"]]
    fig = roofline.roofline_figure(points.drop(columns=["peak_flops", "bandwidth"]).rename(
        columns={"hbm_bytes": "bytes", "time_s": "predicted_s"}), roofs)
    stars = [t for t in fig.data if t.name.endswith("(measured)")]
    assert {t.name for t in stars} == {"naive (measured)", "FA1 (measured)", "FA2 (measured)"}
    assert all(t.marker.symbol == "star" and t.customdata[0][0] == "this CPU" for t in stars)
    assert "this CPU roof · ridge 3.33 FLOP/byte" in [t.name for t in fig.data]
    split = roofline.roofline_figure(points, here=("this CPU",), titles=("GPUs", "here"))
    on = {(t.name, t.xaxis) for t in split.data}
    assert ("this CPU roof · ridge 3.33 FLOP/byte", "x2") in on and ("A100 roof · ridge 153 FLOP/byte", "x") in on
    assert {t.xaxis for t in split.data if t.name == "naive (measured)"} == {"x2"}  # the CPU's stars on its panel
    assert [a.text for a in split.layout.annotations] == ["GPUs", "here"]
    names = [t.name for t in split.data if t.showlegend is not False]
    assert len(names) == len(set(names))  # one legend entry per name across both panels
    with pytest.raises(ValueError, match="peak_flops and bandwidth"):
        roofline.roofline_figure(points.drop(columns=["peak_flops"]))
    empty = roofline.roofline_figure(pd.DataFrame())
    assert any("No data" in a.text for a in empty.layout.annotations)


def test_speedup_table_is_naive_time_over_each_kernel_per_device_next_to_the_measured_one():
    table = roofline.speedup_table(fake_roofline_points(), {"kv_outer": 0.45, "q_outer": 0.6})
    rows = {(r.device, r.algorithm): (r.speedup, r.kind) for r in table.itertuples()}
    a100_naive = max(1e9 / A100_PEAK, 1e8 / A100_BW)
    assert rows[("A100", "kv_outer")] == (pytest.approx(a100_naive / max(1e9 / A100_PEAK, 1e7 / A100_BW)), "model")
    assert rows[("A100", "q_outer")][0] == pytest.approx(a100_naive / (1e9 / A100_PEAK))  # compute-bound: FLOPs cap it
    assert rows[("H100", "q_outer")][0] == pytest.approx(20.0)  # both bandwidth-bound: the ratio of bytes, 100 / 5
    assert rows[("this CPU (measured)", "q_outer")] == (0.6, "measured")
    assert list(table["device"]) == ["A100", "A100", "H100", "H100", "this CPU (measured)", "this CPU (measured)"]
    assert len(roofline.speedup_table(None)) == 0


def test_speedup_figure_labels_model_and_measured_bars_and_marks_one():
    table = roofline.speedup_table(fake_roofline_points(), {"kv_outer": 0.45})
    fig = roofline.speedup_figure(table, caption="On this CPU naive is compute-bound: its N² traffic is cheap here.")
    bars = [t for t in fig.data if t.type == "bar"]
    assert [b.name for b in bars] == ["FA1: predicted (model)", "FA1: measured", "FA2: predicted (model)"]
    measured = bars[1]
    assert measured.marker.pattern.shape == "/" and list(measured.x) == ["this CPU (measured)"]
    assert measured.text[0] == "0.45×" and bars[0].text[0] == "10×"
    assert bars[0].marker.color == palette.IMPL_COLORS["kv_outer"]
    assert "model" in fig.layout.title.text and "compute-bound" in fig.layout.title.subtitle.text
    (one,) = fig.layout.shapes
    assert one.y0 == one.y1 == 1.0 and "naive" in fig.layout.annotations[0].text
    assert fig.layout.yaxis.range[1] >= 20.0  # the tallest bar and its label fit


def test_time_figure_draws_each_medians_95_percent_interval_where_the_sweep_measured_it():
    df = fake_sweep().assign(time_lo_s=lambda d: d.time_s * 0.9, time_hi_s=lambda d: d.time_s * 1.2, repeats=12)
    fig = plots.time_figure(df)
    assert "95% interval of the median" in fig.layout.title.text
    for t in (t for t in fig.data if t.mode == "lines+markers"):
        assert list(t.error_y.array) == pytest.approx([0.2 * y for y in t.y])  # up to time_hi_s
        assert list(t.error_y.arrayminus) == pytest.approx([0.1 * y for y in t.y])  # down to time_lo_s
    few = df.assign(repeats=3)  # fewer than 6 calls give no 95% interval: the bars stay the IQR, and say so
    assert "interquartile range" in plots.time_figure(few).layout.title.text
