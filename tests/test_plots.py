"""plots.py: expected traces, titles, units and fonts; skipped rows drawn; empty input survives; no torch inside."""

import ast
import math
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest

from flashviz import plots
from flashviz.iomodel import hbm_vs_memory
from flashviz.sweep import COLUMNS

PLOTS_SOURCE = Path(plots.__file__)
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
                "status": "skipped: naive S and P would need 134217728 bytes" if skipped else "ok"})
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
        assert trace.line.color == plots.IMPL_COLORS[impl]  # the same colour in every figure
        assert trace.hovertemplate and "%{y" in trace.hovertemplate  # hover carries the number


def test_memory_and_time_figures_carry_every_impl_and_the_skipped_rows():
    for make in (plots.memory_figure, plots.time_figure):
        fig = make(fake_sweep())
        groups = [t.legendgroup for t in fig.data if t.mode == "lines+markers"]
        assert groups == ["naive", "flash", "flash2", "sdpa"]
        skipped = [t for t in fig.data if t.name == "naive: skipped"]
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


def test_memory_figure_is_in_mib():
    fig = plots.memory_figure(fake_sweep())
    sdpa = next(t for t in fig.data if t.legendgroup == "sdpa" and t.mode == "lines+markers")
    assert list(sdpa.y) == pytest.approx([1024 * n / MIB for n in (256, 1024, 4096)])


def test_hbm_figure_leaves_out_sdpa_and_keeps_the_model_of_skipped_rows():
    fig = plots.hbm_figure(fake_sweep())
    assert {t.legendgroup for t in fig.data} == {"naive", "flash", "flash2"}
    naive = next(t for t in fig.data if t.legendgroup == "naive")
    assert list(naive.x) == [256, 1024, 4096]


@pytest.mark.parametrize("make", [*SWEEP_FIGURES, plots.block_sweep_figure])
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
    assert [t.name for t in fig.data] == ["naive: skipped"]
    assert any("skipped" in a.text for a in fig.layout.annotations)


def test_summary_table_speedup_and_memory_saving():
    table = plots.summary_table(fake_sweep())
    assert list(table.columns) == ["N", "naive time (ms)", "flash time (ms)", "speedup (x)", "naive peak (MiB)",
                                   "flash peak (MiB)", "memory saving (x)"]
    assert list(table["N"]) == [256, 1024, 4096]
    row = table.set_index("N").loc[1024]
    assert row["speedup (x)"] == pytest.approx(0.5)  # naive 1e-9 N^2 s, flash 2e-9 N^2 s
    assert row["memory saving (x)"] == pytest.approx(8 * 1024 / 4096)
    assert math.isnan(table.set_index("N").loc[4096, "speedup (x)"])  # naive skipped there
    other = plots.summary_table(fake_sweep(), flash_impl="flash2")
    assert "flash2 time (ms)" in other.columns


def test_summary_table_figure_shows_skipped_cells():
    fig = plots.summary_table_figure(plots.summary_table(fake_sweep()))
    assert fig.data[0].type == "table"
    cells = fig.data[0].cells.values
    assert "skipped" in cells[1]  # naive time at N=4096
    assert fig.layout.title.text
    empty = plots.summary_table_figure(plots.summary_table(pd.DataFrame()))
    assert empty.data[0].type == "table"


def test_hbm_vs_memory_figure_draws_theorem_2():
    df = hbm_vs_memory([2 ** k for k in range(10, 17)], 1024, 64)
    fig = plots.hbm_vs_memory_figure(df, n=1024, d=64)
    _assert_readable(fig)
    assert "Theorem 2" in fig.layout.title.text and "N=1024" in fig.layout.title.text
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "M" in fig.layout.xaxis.title.text and "elements" in fig.layout.xaxis.title.text
    names = [t.name for t in fig.data]
    assert len(names) == 4  # model and order term for naive and kv_outer
    flash = next(t for t in fig.data if t.legendgroup == "kv_outer" and t.mode == "lines+markers")
    assert list(flash.y) == sorted(flash.y, reverse=True)
    assert isinstance(plots.hbm_vs_memory_figure(pd.DataFrame()), go.Figure)


def test_block_sweep_figure_has_two_panels_and_reference_lines():
    rows = []
    for b in (16, 32, 64, 128):
        for impl in ("flash", "flash2"):
            rows.append({"impl": impl, "N": 1024, "block_q": b, "block_k": b, "time_s": 1e-3 * 64 / b,
                         "time_iqr_s": 1e-5, "hbm_bytes": 1e8 / b, "status": "ok"})
    df = pd.DataFrame(rows)
    reference = fake_sweep(skip_naive_at=())
    fig = plots.block_sweep_figure(df, reference=reference[reference.N == 1024])
    _assert_readable(fig)
    assert len(fig.data) == 4  # time and traffic for each impl
    assert {t.xaxis for t in fig.data} == {"x", "x2"}
    assert any(s.type == "line" for s in fig.layout.shapes)  # naive / sdpa reference lines


def test_report_html_is_standalone_and_contains_the_figures_and_table():
    table = fake_sweep()
    page = plots.report_html([plots.memory_figure(table), plots.time_figure(table)], title="t <1>",
                             intro="hello", table=table)
    assert page.startswith("<!DOCTYPE html>") and "t &lt;1&gt;" in page
    assert "plotly" in page.lower()
    assert 'src="http' not in page and "src='http" not in page  # plotly.js is inline: the page opens offline
    assert len(page) > 1_000_000  # the whole plotly.js bundle (~4.5 MB) is in the page
    assert page.count("Plotly.newPlot") == 2
    assert "<table" in page


def test_plots_imports_neither_torch_nor_streamlit():
    tree = ast.parse(PLOTS_SOURCE.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"torch", "streamlit", "flashviz"}
