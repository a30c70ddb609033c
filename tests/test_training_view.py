"""The Training view's recomputation table: every row fits in the figure, under its title and subtitle."""

from __future__ import annotations

import pytest

from flashviz.app.state import Settings
from flashviz.figures.report import TABLE_HEADER_PX, TABLE_ROW_PX
from flashviz.model.training import recompute_table
from flashviz.views.train.page import recompute_figure


@pytest.mark.parametrize("ns", [[2048], [256, 512, 1024, 2048], [64, 128, 256, 512, 1024, 2048, 4096]])
def test_the_recompute_table_is_tall_enough_for_every_row(ns):
    fig = recompute_figure(recompute_table(ns, 64))
    (table,) = fig.data
    assert list(table.cells.values[0]) == [str(n) for n in ns]  # the N = 2048 row lesson step 8 quotes is there
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b  # what the table may fill
    assert plot_px >= table.header.height + table.cells.height * len(ns)
    assert table.header.height == TABLE_HEADER_PX and table.cells.height == TABLE_ROW_PX


def test_the_default_table_holds_the_benchmarks_sizes():
    s = Settings()
    fig = recompute_figure(recompute_table(s.ns, s.d, batch=s.batch, heads=s.heads, block_q=s.bench_block,
                                           block_k=s.bench_block, causal=s.causal, window=s.window, dtype=s.dtype))
    (table,) = fig.data
    rows = len(table.cells.values[0])
    assert rows == len(s.ns)
    assert fig.layout.height - fig.layout.margin.t - fig.layout.margin.b >= TABLE_HEADER_PX + TABLE_ROW_PX * rows
