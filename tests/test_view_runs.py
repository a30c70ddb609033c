"""What the views show, checked for its values: the charts' numbers against the DataFrames they draw and against the
IO model (io_cost), the metrics against io_cost, the captions only where they are true, and the settings each result
says it ran with. Heavy views run with tiny sweeps (tests/_apptest.TINY)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from flashviz.app.query import parse_query
from flashviz.app.registry import view_of
from flashviz.app.state import PRESETS, Settings, apply_preset, settings_of
from flashviz.core.tiling import tile_schedule
from flashviz.figures.report import plain
from flashviz.kit import jobs
from flashviz.measure import jobs as measure_jobs
from flashviz.measure.verdict import compare, estimate_of
from flashviz.model.iomodel import hbm_vs_memory, io_cost
from flashviz.units import MIB, format_bytes
from flashviz.views.how.sentences import fa1_start_md, x_standard_md
from flashviz.vocab import (
    DTYPE_BYTES,
    FLASH,
    FLASH2,
    FULL,
    IMPL_LABELS,
    IMPL_LOOP_ORDER,
    IMPLS,
    LOOP_ORDER_SHORT,
    NAIVE,
    OK,
    PARTIAL,
    SDPA,
)
from tests._apptest import TINY, assert_clean, chart, charts, decode, run_heavy, tile_map
from tests._numbers import counted, numbers, says, shows, stated, value

MS_PER_S = 1e3


def measurements(at) -> pd.DataFrame:
    """The sweep's rows, as the view lists them under "All measurements"."""
    return next(d.value for d in at.dataframe if "time_s" in d.value.columns)


def curve(spec: dict, name: str) -> dict[int, float]:
    """x -> y of the trace called name in a plotly figure spec."""
    (trace,) = [t for t in spec["data"] if t.get("name") == name]
    return dict(zip(decode(trace["x"]).astype(int).tolist(), decode(trace["y"]).astype(float), strict=True))


# ----------------------------------------------------------------------------------------------------------------------
# How it works: the metrics are the IO model's


@pytest.mark.parametrize("query", [{}, {"n": "1000", "br": "64", "bc": "32", "causal": "1", "dtype": "float16"},
                                   {"n": "4096", "br": "128", "bc": "128", "window": "512,512", "order": "both"}])
def test_how_it_works_traffic_metrics_are_io_costs_numbers(make_app, query):
    at = make_app(**query)
    assert_clean(at)
    q = {"n": 1024, "br": 64, "bc": 64, "causal": False, "window": None, "dtype": "float32", "order": "fa1",
         **{k: v for k, v in query.items()}}
    n, br, bc = int(q["n"]), int(q["br"]), int(q["bc"])
    causal = q["causal"] in (True, "1")
    window = tuple(int(x) for x in q["window"].split(",")) if q["window"] else None
    orders = {"fa1": ["kv_outer"], "both": ["kv_outer", "q_outer"]}[q["order"]]
    cost = {a: io_cost(a, n, n, 64, br, bc, causal=causal, window=window, dtype_bytes=DTYPE_BYTES[q["dtype"]])
            for a in ["naive", *orders]}
    metrics = [m.value for m in at.metric]
    assert metrics == [format_bytes(cost[a].bytes) for a in ["naive", *orders]]
    ratios = [float(m.group(1)) for c in at.caption if (m := re.match(r"([\d.]+) x standard", c.value))]
    assert ratios == pytest.approx([cost[a].bytes / cost["naive"].bytes for a in orders], abs=0.005)


def preset_query(name: str | None) -> dict[str, str]:
    """The link of a classroom preset (None: the defaults), on the How it works view."""
    return {} if name is None else {**apply_preset(Settings(), name).to_query(), "view": "how"}


def frame_of_tile(panel) -> dict[tuple[int, int], int]:
    """(i, j) -> k, from the map's counters: the frame whose counter reads "tile k/n: i=.., j=..", for every frame."""
    out = {}
    for frame in panel.frames.values():
        m = re.match(r"FA[12] tile (\d+)/\d+: i=(\d+), j=(\d+)", frame["counter"][0])
        out[(int(m[2]), int(m[3]))] = int(m[1])
    return out


@pytest.mark.parametrize("name", [None, *PRESETS])
def test_how_it_works_at_its_defaults_and_every_preset_tells_the_truth(make_app, name):
    at = make_app(**preset_query(name))
    assert_clean(at)
    s = Settings() if name is None else apply_preset(Settings(), name)
    b = DTYPE_BYTES[s.dtype]
    naive = io_cost("naive", s.n, s.n, s.d, s.br, s.bc, dtype_bytes=b)
    m = tile_map(at)
    for panel in m.panels:
        # standard attention's counter: its IO-model total times the share of S in the tiles visited so far,
        # counted here from the tile geometry (skipped tiles too: it computes every score)
        tiles = list(tile_schedule(s.n, s.n, s.br, s.bc, causal=s.causal, window=s.window, loop_order=panel.loop_order))
        done, share = 0, {}
        for t in tiles:
            done += min(s.br, s.n - t.q_block * s.br) * min(s.bc, s.n - t.k_block * s.bc)
            share[(t.q_block, t.k_block)] = done / s.n**2
        for frame in panel.frames.values():
            assert frame["counter"][2] == f"standard attention: {format_bytes(naive.bytes * share[frame['current']])}"
        last = max(panel.frames)
        if panel.frames[last]["current"] == (tiles[-1].q_block, tiles[-1].k_block):
            assert panel.frames[last]["counter"][2] == f"standard attention: {format_bytes(naive.bytes)}"
    # the row inspector's x axis counts computed tiles: each of its points sits at the map's "tile k" of that tile
    inspector = chart(at, "Row inspector")
    frames = frame_of_tile(m.panels[0])
    after = next(t for t in inspector["data"] if t.get("name", "").endswith(": rescale factor"))  # the first order
    row = int(re.search(r"query row (\d+)", inspector["layout"]["title"]["text"])[1])
    points = dict(zip(decode(after["x"]).astype(int).tolist(), after["text"], strict=True))
    for x, hover in points.items():
        j = int(re.search(r"key block j=(\d+)", hover)[1])
        if (row // s.br, j) in frames:
            assert frames[(row // s.br, j)] == x, (x, hover)
    # the "x standard" sentence quotes io_cost's ratio and says why when the tiled kernel moves more
    for order in settings_of(view_of("how"), s).loop_orders:
        ratio = io_cost(order, s.n, s.n, s.d, s.br, s.bc, causal=s.causal, window=s.window).accesses / naive.accesses
        (line,) = [x.value for x in at.markdown if x.value.startswith(f"**{LOOP_ORDER_SHORT[order]} moves ")]
        assert line.startswith(f"**{LOOP_ORDER_SHORT[order]} moves {ratio:.2f}× standard attention's bytes")
        assert ("here, more." in line) == (ratio > 1.1) and ("S and P never reach HBM" in line) == (ratio < 0.9)
    (why,) = [x.value for x in at.markdown if "m grew on" in x.value or "m never grew" in x.value]
    assert why.startswith(f"Row {row} was picked automatically")  # the key sentence is body text


def test_the_x_standard_sentence_explains_a_tiled_kernel_that_moves_more():
    # N = 1000, d = 111, 32 x 32 tiles: FA1 makes 32 passes of about 3 N d = 333,000 elements against 4 N^2 = 4,000,000
    n, d, br, bc = 1000, 111, 32, 32
    naive = io_cost("naive", n, n, d, br, bc).accesses
    fa1, fa2 = (io_cost(o, n, n, d, br, bc).accesses for o in ("kv_outer", "q_outer"))
    text = x_standard_md("kv_outer", fa1, naive, n, d, br, bc)
    assert shows(stated(text, r"FA1 moves"), fa1 / naive) and "here, more." in text.split("**")[1]  # 2.50 > 1
    assert shows(stated(text, r"4N² ="), 4 * n * n)  # standard attention's S and P, written and read back
    assert shows(counted(text, "passes"), math.ceil(n / bc))  # one per K/V block
    assert [value(stated(text, r"N / Bc =", k)) for k in (0, 1)] == [n, bc]
    assert shows(stated(text, r"3Nd ="), 3 * n * d)  # each pass re-reads Q, and O, l, m read and written back
    assert shows(stated(text, r"Bc > 3d/4 ="), 3 * d / 4) and shows(stated(text, r"here Bc ="), bc)
    assert bc < 3 * d / 4  # the rule the sentence states, and why FA1 moves more here
    fa2_text = x_standard_md("q_outer", fa2, naive, n, d, br, bc)
    assert shows(stated(fa2_text, r"Br > d/2 ="), d / 2) and shows(stated(fa2_text, r"here Br ="), br)
    assert shows(counted(fa2_text, "passes"), math.ceil(n / br)) and shows(stated(fa2_text, r"2Nd ="), 2 * n * d)
    wide = x_standard_md("kv_outer", io_cost("kv_outer", 1000, 1000, 111, 128, 128).accesses, naive, 1000, 111,
                         128, 128)  # Bc = 128 > 83.2: fewer bytes
    assert "S and P never reach HBM" in wide and "more" not in wide.split("**")[1]


# ----------------------------------------------------------------------------------------------------------------------
# IO model: the curves are the model's, the unmasked ones drawn pale behind a mask's


@pytest.mark.parametrize("name", [None, *PRESETS])
def test_io_model_at_its_defaults_and_every_preset_draws_the_unmasked_curves_behind_a_mask(make_app, name):
    query = {} if name is None else {**apply_preset(Settings(), name).to_query()}
    at = make_app(**{**query, "view": "io"})
    assert_clean(at)
    s = Settings() if name is None else apply_preset(Settings(), name)
    ms = [2**e for e in range(10, 23)]
    spec = chart(at, "HBM accesses vs on-chip memory M")
    kw = dict(algorithms=("naive", "kv_outer", "q_outer"), batch=s.batch, heads=s.heads,
              dtype_bytes=DTYPE_BYTES[s.dtype])
    masked = hbm_vs_memory(ms, s.n, s.d, causal=s.causal, window=s.window, **kw)
    plain = hbm_vs_memory(ms, s.n, s.d, **kw)
    for algorithm, label in (("kv_outer", "FlashAttention-1 (kv_outer)"), ("q_outer", "FlashAttention-2 (q_outer)")):
        want = masked[masked["algorithm"] == algorithm].set_index("M")["accesses"].astype(float).to_dict()
        assert curve(spec, label) == pytest.approx(want)
    ghosts = [t for t in spec["data"] if t.get("legendgroup") == "ghost"]
    text = "\n".join(m.value for m in at.markdown)
    # the unmasked FA1 and FA2 drawn pale behind a mask's, wherever the mask changes them: "half" is seen against
    # what it halves (where one block holds every key at every M, the curves coincide and no ghost is needed)
    differ = [a for a in ("kv_outer", "q_outer") if not np.allclose(
        masked[masked["algorithm"] == a]["accesses"].to_numpy(float), plain[plain["algorithm"] == a]["accesses"])]
    assert len(ghosts) == len(differ) and all(t.get("opacity", 1) < 0.5 for t in ghosts)
    for t, algorithm in zip(ghosts, differ, strict=True):
        want = plain[plain["algorithm"] == algorithm].set_index("M")["accesses"].astype(float).to_dict()
        got = dict(zip(decode(t["x"]).astype(int).tolist(), decode(t["y"]).astype(float), strict=True))
        assert got == pytest.approx(want)
        ratio = masked[masked["algorithm"] == algorithm]["accesses"].iloc[0] / want[ms[0]]
        assert f"With the mask it starts at {ratio:.2f} × the unmasked value" in text
    assert bool(differ) <= bool(s.causal or s.window is not None)  # no mask, no ghost
    assert {"A100", "H100"} <= {x for t in spec["data"] if t.get("legendgroup") == "sram" for x in t["text"] if x}


# ----------------------------------------------------------------------------------------------------------------------
# Benchmark: every chart draws the DataFrame's numbers


def test_benchmark_charts_draw_the_measured_numbers_and_say_what_they_ran_with(make_app):
    at = run_heavy(make_app, "bench", causal="1", br="64", bc="64")  # the sidebar's tiles unlike the timed 32
    df = measurements(at)
    ok = df[df["status"].astype(str) == OK]
    figs = charts(at)
    for title, column, scale in (("Peak memory vs sequence length", "peak_bytes", 1 / MIB),
                                 ("Time vs sequence length (bars: interquartile range)", "time_s", MS_PER_S),
                                 ("Achieved throughput vs sequence length", "gflops", 1.0)):
        for impl in IMPLS:
            rows = ok[ok["impl"] == impl]
            assert curve(figs[title], IMPL_LABELS[impl]) == pytest.approx(
                dict(zip(rows["N"].astype(int), rows[column].astype(float) * scale, strict=True))), (title, impl)
    for impl in (NAIVE, FLASH, FLASH2):  # the traffic chart is the IO model's, at the sweep's settings
        algorithm = IMPL_LOOP_ORDER.get(impl, impl)
        expected = {n: io_cost(algorithm, n, n, 16, 32, 32, causal=True, batch=1, heads=4).bytes / MIB
                    for n in (32, 64)}
        assert curve(figs["Modelled HBM traffic vs sequence length"], IMPL_LABELS[impl]) == pytest.approx(expected)
    # its subtitle names the tiles it counted, each kernel's bytes against naive's at the largest N, and the
    # sidebar's other tile size that How it works counts
    said = figs["Modelled HBM traffic vs sequence length"]["layout"]["title"]["subtitle"]["text"].replace("<br>", " ")
    tiles = re.findall(r"Br × Bc = (\d+) × (\d+)", said)
    assert tiles == [("32", "32"), ("64", "64")]  # the timed tiles (the sweep's rows), then the sidebar's
    assert {(int(q), int(k)) for q, k in zip(ok["block_q"].dropna(), ok["block_k"].dropna(), strict=True)} == {(32, 32)}
    naive64 = io_cost("naive", 64, 64, 16, 32, 32, causal=True, heads=4).bytes
    for impl, short in ((FLASH, "FA1"), (FLASH2, "FA2")):
        ratio = io_cost(IMPL_LOOP_ORDER[impl], 64, 64, 16, 32, 32, causal=True, heads=4).bytes / naive64
        assert re.search(rf"At N = 64:.*\b{short} {ratio:.2f}×", said), (short, ratio, said)
    for flash in (FLASH, FLASH2):  # the summaries: plotly tables, every row of them
        (table,) = figs[f"Summary: {flash} vs naive"]["data"]
        assert table["type"] == "table" and table["cells"]["values"][0] == ["32", "64"]
    (ran,) = [c.value for c in at.caption if c.value.startswith("**Ran with**")]
    assert ran.startswith("**Ran with** d = 16, causal, no window, float32, B = 1, H = 4, cpu")
    assert "N = 32, 64" in ran and "tile size = 32" in ran and "repeats = 1" in ran
    assert at.get("download_button")
    at.run()  # a rerun keeps the results on the page without measuring again
    assert "Peak memory vs sequence length" in charts(at)


def test_a_benchmark_without_the_mask_says_so(make_app):
    at = run_heavy(make_app, "bench", impls="sdpa")
    (ran,) = [c.value for c in at.caption if c.value.startswith("**Ran with**")]
    assert "not causal" in ran and "no window" in ran


def test_benchmark_draws_each_n_as_it_finishes():
    jobs.sweep.clear()
    seen = []
    jobs.sweep((24, 40), 8, 8, 8, False, None, (NAIVE, FLASH), 1, 1, "float32", "cpu", 1, 1,
               _progress=lambda done, total, what, partial=None: seen.append(partial))
    partials = [p for p in seen if p is not None]
    assert [sorted(p["N"].unique()) for p in partials] == [[24], [24, 40]]


def test_benchmark_shows_results_so_far_and_the_idle_text_counts_right(make_app):
    jobs.sweep.clear()
    at = make_app(view="bench", ns="128", impls="sdpa", reps="1", d="8")
    assert any("about 1 measurement, at least 6 repeats, until its median is known to ±5% each" in i.value
               for i in at.info)  # repeat until sure (the default): a 95% interval needs 6 calls
    assert any("about 1 measurement, 1 repeat each" in i.value
               for i in make_app(view="bench", ns="128", impls="sdpa", reps="1", d="8", sure="0").info)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    assert "Time vs sequence length (so far)" in charts(at)


def as_asked(df: pd.DataFrame) -> pd.DataFrame:
    """A test that chooses a run's times chooses its threads too: every row ran with the threads asked for, however
    busy the machine under the test was (a row measured with fewer names no winner: tests/test_disturbed.py)."""
    df["threads_asked"] = df["threads"]
    return df


def _scaled_sweep(monkeypatch, naive_factor: float):
    """Make naive's measured time naive_factor times what it was, so the speedup's side of 1 is known, and every
    median sure (30 calls within +-0.1%), so the verdict turns on the factor alone."""
    jobs.sweep.clear()
    jobs.block_sweep.clear()
    real = measure_jobs.run_sweep

    def sure(df: pd.DataFrame) -> pd.DataFrame:
        ok = df["status"] == OK
        df.loc[ok, "time_lo_s"], df.loc[ok, "time_hi_s"] = df["time_s"] * 0.999, df["time_s"] * 1.001
        df.loc[ok, "repeats"] = 30
        return as_asked(df)

    def fake(*a, **k):
        df = real(*a, **k)
        df.loc[df["impl"] == NAIVE, "time_s"] *= naive_factor
        return sure(df)

    real_blocks = measure_jobs.run_block_sweep
    monkeypatch.setattr(measure_jobs, "run_sweep", fake)
    monkeypatch.setattr(measure_jobs, "run_block_sweep", lambda *a, **k: sure(real_blocks(*a, **k)))


@pytest.mark.parametrize(("factor", "shown"), [(1e-6, True), (1e6, False)])
def test_the_slower_than_naive_caption_shows_only_when_true(make_app, monkeypatch, factor, shown):
    _scaled_sweep(monkeypatch, factor)
    at = run_heavy(make_app, "bench", ns="32", impls="naive,flash")
    captions = [c.value for c in at.markdown if "slower than naive" in c.value]  # body text, not a grey caption
    assert bool(captions) == shown
    if shown:
        s, _ = parse_query(dict(at.query_params))
        caption, (n,) = captions[0], s.ns
        assert "FA1 at N =" in caption and shows(stated(caption, r"FA1 at N ="), n)  # the kernel timed slower
        side = math.ceil(n / s.bench_block)  # tiles per side at the Benchmark's tile size: 1 here
        assert shows(counted(caption, "-wide tiles"), s.bench_block)
        assert says(caption.split("tiled kernel runs", 1)[1].split("per call")[0], side, side, side * side)
        assert [value(stated(caption, r"B × H =", k)) for k in range(3)] == [s.batch, s.heads, s.batch * s.heads]
        assert "see the modelled traffic chart below and the IO model view" in captions[0]  # the chart is below


def causal_times(monkeypatch, times: dict[tuple[str, bool], tuple[float, float, float, int]]) -> None:
    """Make the causal pair report these (median, low, high, repeats) per (implementation, causal)."""
    real = measure_jobs.run_sweep

    def run_sweep(ns, **kwargs):
        df = real(ns, **kwargs)
        for (impl, causal), (median, low, high, repeats) in times.items():
            if causal == kwargs["causal"]:
                mine = df["impl"] == impl
                df.loc[mine, ["time_s", "time_lo_s", "time_hi_s"]] = (median, low, high)
                df.loc[mine, "repeats"] = repeats
        return as_asked(df)

    monkeypatch.setattr(measure_jobs, "run_sweep", run_sweep)
    jobs.causal_pair.clear()


def test_benchmark_compares_causal_with_no_mask_through_the_verdict_rule(make_app, monkeypatch):
    times = {(FLASH2, False): (2.0e-3, 1.98e-3, 2.02e-3, 30), (FLASH2, True): (1.0e-3, 0.99e-3, 1.01e-3, 30),
             (NAIVE, False): (1.0e-3, 0.8e-3, 1.3e-3, 20), (NAIVE, True): (1.1e-3, 0.85e-3, 1.4e-3, 20)}
    causal_times(monkeypatch, times)
    at = run_heavy(make_app, "bench", ns="64", impls="naive,flash2")
    at.button(key="causal_run").click().run()
    assert_clean(at)
    (table,) = [df.value for df in at.dataframe if "causal / no mask" in df.value.columns]
    assert list(table["implementation"]) == [FLASH2, NAIVE]
    cells = dict(zip(table["implementation"], table["causal / no mask"], strict=True))
    fa2 = [value(x) for x in numbers(cells[FLASH2])]  # separated: the ratio and its interval
    assert fa2 == pytest.approx([0.5, 0.99 / 2.02, 1.01 / 1.98], abs=0.006)
    assert cells[NAIVE].startswith("too close to call")  # the intervals overlap: no ratio stands alone
    assert [value(x) for x in numbers(cells[NAIVE])] == pytest.approx([0.85 / 1.3, 1.4 / 0.8], abs=0.006)
    (text,) = [m.value for m in at.markdown if "without the mask" in m.value]
    fa2_line, naive_line = text.split("\n")
    assert "FA2 causal is 2.00x faster" in fa2_line  # the verdict the rule gives: separated
    computed, total = stated(fa2_line, r"tiles it computes \(", 0), stated(fa2_line, r"tiles it computes \(", 1)
    counts = tile_schedule(64, 64, 32, 32, causal=True).counts()
    assert value(computed) == counts[FULL] + counts[PARTIAL] and value(total) == sum(counts.values())
    assert shows(stated(fa2_line, "would take"), (counts[FULL] + counts[PARTIAL]) / sum(counts.values()), rel=0.01)
    assert "too close to call here" in naive_line and "faster than" not in naive_line
    jobs.causal_pair.clear()


# ----------------------------------------------------------------------------------------------------------------------
# Block size: time as measured, traffic as modelled


def test_block_size_view_draws_measured_time_and_io_costs_traffic_against_tile_size(make_app):
    jobs.block_sweep.clear()
    at = run_heavy(make_app, "block", causal="1")
    fig = charts(at)["Tile size trade-off"]
    tiled = next(d.value for d in at.dataframe if "block_q" in d.value.columns)
    for impl in (FLASH, FLASH2):
        rows = tiled[(tiled["impl"] == impl) & (tiled["status"].astype(str) == OK)]
        times = {t["name"]: t for t in fig["data"]}
        measured = dict(zip((rows["block_q"] * rows["block_k"]).astype(int), rows["time_s"] * MS_PER_S, strict=True))
        assert curve(fig, IMPL_LABELS[impl]) == pytest.approx(measured)
        traffic = {b * b: io_cost(IMPL_LOOP_ORDER[impl], 128, 128, 16, b, b, causal=True, batch=1, heads=4).bytes / MIB
                   for b in (16, 32)}
        assert curve(fig, f"{impl}: HBM model") == pytest.approx(traffic), impl
        assert times  # the figure has its traces by name
    names = {t["name"] for t in fig["data"]}
    assert {f"{NAIVE} at N=128 (untiled reference)", f"{SDPA} at N=128 (untiled reference)"} <= names
    (ran,) = [c.value for c in at.caption if c.value.startswith("**Ran with**")]
    assert "N = 128" in ran and "causal" in ran and "repeats = 1" in ran


def test_blocks_as_large_as_n_are_explained(make_app):
    at = make_app(view="block", n="16", blocks="8,16,32")
    assert_clean(at)
    assert any("16, 32 are at least N = 16" in c.value for c in at.markdown)


@pytest.mark.parametrize(("factor", "shown"), [(1e-6, True), (1e6, False)])
def test_the_block_view_explains_tiled_points_slower_than_naive_only_when_true(make_app, monkeypatch, factor, shown):
    _scaled_sweep(monkeypatch, factor)  # the naive reference line comes from run_sweep
    at = run_heavy(make_app, "block", n="64", blocks="16")
    lines = [m.value for m in at.markdown if "above the naive line" in m.value]
    assert bool(lines) == shown
    assert all("the modelled traffic panel above" in line for line in lines)  # the block figure's right panel


# ----------------------------------------------------------------------------------------------------------------------
# IO model


def test_io_model_view_draws_theorem_2_without_a_button(make_app):
    at = make_app(view="io", n="512", d="32", causal="1")
    assert_clean(at)
    fig = chart(at, "HBM accesses vs on-chip memory")
    names = {t["name"] for t in fig["data"]}
    assert {IMPL_LABELS[NAIVE], IMPL_LABELS["kv_outer"], IMPL_LABELS["q_outer"]} <= names
    naive = io_cost(NAIVE, 512, 512, 32, 64, 64, causal=True, heads=4)  # the model's count, whatever M is
    assert set(curve(fig, IMPL_LABELS[NAIVE]).values()) == {float(naive.accesses)}
    assert fig["layout"]["xaxis"]["type"] == "log" and fig["layout"]["yaxis"]["type"] == "log"
    assert at.get("latex")


# ----------------------------------------------------------------------------------------------------------------------
# Correctness: the bar, passed and failed


def test_correctness_view_passes_the_1e5_bar(make_app):
    jobs.correctness.clear()
    at = run_heavy(make_app, "correct")
    (box,) = [s.value for s in at.success]
    assert box.endswith("the float32 bar: pass.")
    table = at.dataframe[0].value
    worst = float(re.search(r"\*\*([0-9.e+-]+)\*\*", box).group(1))
    assert worst == pytest.approx(float(table.max().max()), rel=0.01) and worst <= 1e-5
    assert red_cells(at.dataframe[0]) == set()
    fig = chart(at, "Largest error vs float64 SDPA")
    assert "1e-5 bar (pass below)" in {t.get("name") for t in fig["data"]}
    assert next(a["text"] for a in fig["layout"]["annotations"]) == "d = 16"  # a panel per head dimension


def test_correctness_fails_in_red_when_an_implementation_is_over_the_bar(make_app, monkeypatch):
    jobs.correctness.clear()
    real = measure_jobs.run_sweep

    def broken(*a, **k):  # flash2's output off by 1e-3: a bug the check must catch
        df = real(*a, **k)
        df.loc[df["impl"] == FLASH2, "max_abs_err"] = 1e-3
        return df

    monkeypatch.setattr(measure_jobs, "run_sweep", broken)
    at = run_heavy_allowing_errors(make_app, "correct")
    assert not at.success
    (box,) = [e.value for e in at.error]
    assert "**1.00e-03** > 1e-5, the float32 bar: fail." in box
    table = at.dataframe[0].value
    over = {(r, c) for r in range(table.shape[0]) for c in range(table.shape[1]) if table.iat[r, c] > 1e-5}
    assert over == {(r, list(table.columns).index(FLASH2)) for r in range(table.shape[0])}
    assert red_cells(at.dataframe[0]) == over  # every cell over the bar, and only those, in red


def red_cells(element) -> set[tuple[int, int]]:
    """(row, column) of the table cells the page styles in red (the styler's CSS rules sent with the table)."""
    cells = set()
    for selectors, rule in re.findall(r"([^{}]+)\{([^}]*)\}", element.proto.arrow_data.styler.styles):
        if "#b00020" in rule:
            cells |= {(int(r), int(c)) for r, c in re.findall(r"_row(\d+)_col(\d+)", selectors)}
    return cells


def run_heavy_allowing_errors(make_app, view: str, **extra: str):
    from tests._apptest import RUN_BUTTON, TINY

    at = make_app(**{**TINY, **extra}, view=view)
    assert not at.exception
    at.button(key=RUN_BUTTON[view]).click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_correctness_says_which_settings_are_its_own(make_app):
    at = make_app(view="correct", n="512", d="32")
    assert any("the head dimensions d and lengths N are chosen below" in m.value for m in at.markdown)
    at = make_app(view="correct", dtype="float16")
    assert "float32" in at.warning[0].value


# ----------------------------------------------------------------------------------------------------------------------
# Training


def test_training_charts_draw_the_measured_numbers(make_app):
    jobs.sweep.clear()
    at = run_heavy(make_app, "train", impls="naive,flash2")
    figs = charts(at)
    df = measurements(at)
    ok = df[df["status"].astype(str) == OK]
    for title, column, scale in (("Forward + backward: peak memory vs N", "peak_bytes", 1 / MIB),
                                 ("Forward + backward: time vs N (bars: interquartile range)", "time_s", MS_PER_S)):
        for impl in (NAIVE, FLASH2):
            rows = ok[ok["impl"] == impl]
            assert curve(figs[title], IMPL_LABELS[impl]) == pytest.approx(
                dict(zip(rows["N"].astype(int), rows[column].astype(float) * scale, strict=True))), (title, impl)
    (table,) = figs["Training summary: flash2 vs naive"]["data"]  # the Benchmark's plotly table, same font
    assert table["type"] == "table" and table["cells"]["values"][0] == ["32", "64"]
    (ran,) = [c.value for c in at.caption if c.value.startswith("**Ran with**")]
    assert "N = 32, 64" in ran and "not causal" in ran


@pytest.mark.parametrize(("factor", "shown"), [(1e-6, True), (1e6, False)])
def test_trainings_slower_than_naive_sentence_points_only_at_what_exists(make_app, monkeypatch, factor, shown):
    _scaled_sweep(monkeypatch, factor)
    at = run_heavy(make_app, "train", ns="32", impls="naive,flash")
    lines = [m.value for m in at.markdown if "slower than naive in training" in m.value]
    assert bool(lines) == shown
    for line in lines:  # the Training view draws no traffic chart: nothing "below" to point at
        assert "traffic below" not in line and "chart below" not in line and line.endswith("see the IO model view.")


# ----------------------------------------------------------------------------------------------------------------------
# every run button at its view's defaults: the page draws and says what it measured (internal consistency, not speed)


def _drawn_against_measured(at, view: str) -> None:
    """The first result chart draws the measured rows' numbers, and what the page says quotes them."""
    if view == "correct":  # the verdict quotes the largest error of the table under it
        (box,) = [s.value for s in [*at.success, *at.error] if "Largest error" in s.value]
        worst = float(re.search(r"\*\*([0-9.e+-]+)\*\*", box).group(1))
        assert worst == pytest.approx(float(at.dataframe[0].value.max().max()), rel=0.01)
        assert ("pass" in box) == (worst <= 1e-5)
        return
    df = next(d.value for d in at.dataframe if {"impl", "status"} <= set(d.value.columns))
    ok = df[df["status"].astype(str) == OK]
    title, x, column, scale = {
        "bench": ("Peak memory vs sequence length", "N", "peak_bytes", 1 / MIB),
        "train": ("Forward + backward: peak memory vs N", "N", "peak_bytes", 1 / MIB),
        "block": ("Tile size trade-off", "tile", "time_s", MS_PER_S)}[view]
    fig = charts(at)[title]
    for impl in dict.fromkeys(ok["impl"]):
        rows = ok[ok["impl"] == impl]
        keys = (rows["block_q"] * rows["block_k"]) if x == "tile" else rows["N"]
        assert curve(fig, IMPL_LABELS[impl]) == pytest.approx(
            dict(zip(keys.astype(int), rows[column].astype(float) * scale, strict=True))), (view, impl)


@pytest.mark.slow
@pytest.mark.parametrize("view", ["bench", "block", "correct", "train"])
def test_a_run_at_the_views_defaults_draws_and_quotes_what_it_measured(make_app, view):
    at = make_app(view=view)  # nothing but the view: its defaults
    assert_clean(at)
    at.button(key=f"{view}_run").click().run()
    assert_clean(at)
    _drawn_against_measured(at, view)
    for line in (m.value for m in at.markdown if "slower than naive" in m.value or "above the naive line" in m.value):
        assert ("chart below" in line) == (view == "bench")  # "the modelled traffic chart below" only where it is


# ----------------------------------------------------------------------------------------------------------------------
# Benchmark: a verdict only where the medians' intervals separate


def with_times(monkeypatch, times: dict[str, tuple[float, float, float, int]]) -> None:
    """Make the Benchmark's sweep report these (median, low, high, repeats) per implementation: a timing source whose
    noise the test chooses, the rest of each row measured for real."""
    real = measure_jobs.run_sweep

    def run_sweep(ns, **kwargs):
        df = real(ns, **kwargs)
        for impl, (median, low, high, repeats) in times.items():
            mine = df["impl"] == impl
            df.loc[mine, ["time_s", "time_lo_s", "time_hi_s"]] = (median, low, high)
            df.loc[mine, "repeats"] = repeats
        return as_asked(df)

    monkeypatch.setattr(measure_jobs, "run_sweep", run_sweep)
    jobs.sweep.clear()


def verdict_text(at) -> str:
    return next((m.value for m in at.markdown if m.value.startswith("**Naive against the tiled kernels")), "")


def test_benchmark_names_no_winner_when_the_intervals_overlap(make_app, monkeypatch):
    overlapping = (1.0e-3, 0.8e-3, 1.3e-3, 20)  # the same true time, a noisy machine
    with_times(monkeypatch, {NAIVE: overlapping, FLASH: (1.1e-3, 0.85e-3, 1.4e-3, 20),
                             FLASH2: (0.9e-3, 0.7e-3, 1.25e-3, 20)})
    at = run_heavy(make_app, "bench")
    text = verdict_text(at)
    assert text.count("too close to call here") == 2 * 2  # FA1 and FA2 at both N
    assert "faster than" not in text
    assert not [m for m in at.markdown if "slower than naive" in m.value]  # no cause for a difference not seen
    jobs.sweep.clear()


def test_benchmark_states_a_verdict_and_its_cause_from_the_runs_own_settings(make_app, monkeypatch):
    with_times(monkeypatch, {NAIVE: (1.0e-3, 0.99e-3, 1.01e-3, 30), FLASH: (2.0e-3, 1.98e-3, 2.02e-3, 30),
                             FLASH2: (0.5e-3, 0.495e-3, 0.505e-3, 30)})
    at = run_heavy(make_app, "bench", heads="2")
    text = verdict_text(at)
    speeds = [float(x) for x in re.findall(r"FA2 is ([\d.]+)x faster than naive", text)]
    assert speeds == pytest.approx([2.0, 2.0], rel=1e-3)  # the medians' ratio, at each N
    assert len(re.findall(r"naive is ([\d.]+)x faster than FA1", text)) == 2
    (why,) = [m.value for m in at.markdown if "slower than naive" in m.value]
    n, block = 64, 32  # the largest N of the run and the Benchmark's tile size (tests/_apptest.TINY)
    t = -(-n // block)
    assert f"At N = {n} with {block}-wide tiles" in why and f"{t} × {t} = {t * t} tiles per call" in why
    assert "B × H = 1 × 2 = 2 heads" in why and "single head" not in why
    jobs.sweep.clear()


def test_a_runs_csv_carries_its_repeats_interval_and_context():
    """The rows the Benchmark and Block size views offer as CSV (app.drawing.csv_download_ui): the sweep's rows with
    its repeats and intervals, and the run's context as columns."""
    import torch

    from flashviz.measure.context import CONTEXT_COLUMNS, with_context

    jobs.sweep.clear()
    jobs.block_sweep.clear()
    bench = jobs.sweep((32,), 8, 16, 16, False, None, (NAIVE, FLASH2), 1, 1, "float32", "cpu", 1, 2)
    tiled, _ = jobs.block_sweep(32, (16,), 8, False, None, 1, 1, "float32", "cpu", 1, 2)
    for df in (bench, tiled):
        out = with_context(df, df.attrs["context"])
        assert {"repeats", "time_lo_s", "time_hi_s", *CONTEXT_COLUMNS} <= set(out.columns)
        assert out["torch_version"].unique().tolist() == [torch.__version__]
        assert out.loc[out["status"] == OK, "repeats"].tolist() == [2] * int((out["status"] == OK).sum())


def test_how_it_works_says_why_fa1s_counter_opens_above_standard_attentions_with_the_models_numbers(make_app):
    """At the defaults FA1's counter on its first tile is several times standard attention's: the page says it is
    FA1's initial write of O, l and m (Algorithm 1, line 2), with the IO model's numbers, and says nothing of it
    where only FA2 is shown or where FA1's first tile does not open above standard attention's."""
    from flashviz.measure.trace import schedule_trace
    from flashviz.model.iomodel import io_trace_steps

    s = Settings()
    at = make_app(view="how")
    assert_clean(at)
    nbytes = DTYPE_BYTES[s.dtype]
    tr = schedule_trace(s.n, s.br, s.bc, d=s.d, dtype_bytes=nbytes, loop_order="kv_outer")
    first = tr.computed_steps()[0]
    start = next(io_trace_steps("kv_outer", s.n, s.n, s.d, s.br, s.bc, dtype_bytes=nbytes))
    assert start.step == -1 and tr.start_bytes == start.hbm_bytes == (s.n * s.d + 2 * s.n) * nbytes
    assert tr.hbm_bytes[first] > 3 * tr.naive_bytes[first]  # the gap the sentence explains
    said = [m.value for m in at.markdown if "counter opens at" in m.value]
    assert len(said) == 1
    numbers = re.findall(r"\d[\d,.]* [KMG]?i?B\b", said[0])
    assert numbers == [format_bytes(tr.hbm_bytes[first]), format_bytes(tr.naive_bytes[first]),
                       format_bytes(start.hbm_bytes)]
    assert f"{s.n * s.d + 2 * s.n:,} elements" in said[0]
    fa2 = make_app(view="how", order="fa2")
    assert not [m.value for m in fa2.markdown if "counter opens at" in m.value]
    assert fa1_start_md(s.n, s.d, nbytes, start.hbm_bytes, 1000.0, 1000.0) == ""  # not above: nothing to explain


@pytest.mark.parametrize(("flash", "separated"), [((0.5e-3, 0.495e-3, 0.505e-3, 30), True),
                                                  ((1.1e-3, 0.85e-3, 1.4e-3, 20), False)])
def test_the_training_summary_states_a_speedup_only_where_the_verdict_separates(make_app, monkeypatch, flash,
                                                                                  separated):
    naive = (1.0e-3, 0.8e-3, 1.3e-3, 20) if not separated else (1.0e-3, 0.99e-3, 1.01e-3, 30)
    with_times(monkeypatch, {NAIVE: naive, FLASH: flash})
    at = run_heavy(make_app, "train", impls="naive,flash")
    table = chart(at, "Training summary: flash vs naive")["data"][0]
    header = [plain(h) for h in table["header"]["values"]]
    cells = [plain(c) for c in table["cells"]["values"][header.index("speedup (x)")]]
    assert len(cells) == len(TINY["ns"].split(","))
    for text in cells:  # naive / flash at each N, from the rows' own intervals
        shown = [value(x) for x in numbers(text)]
        if separated:
            assert shown == pytest.approx([naive[0] / flash[0], naive[1] / flash[2], naive[2] / flash[1]], abs=0.006)
        else:
            assert text.startswith("too close") and shown == pytest.approx([naive[1] / flash[2], naive[2] / flash[1]],
                                                                           abs=0.006)
    jobs.sweep.clear()


def test_block_size_states_each_tile_sizes_verdict_from_the_rows_intervals(make_app, monkeypatch):
    # naive at 1 ms +-1%; the tiled kernels at 16 x 16 tiles twice as slow (separated), at 32 x 32 as fast in noise
    real_blocks, real_sweep = measure_jobs.run_block_sweep, measure_jobs.run_sweep
    times = {16: (2.0e-3, 0.01), 32: (1.05e-3, 0.3)}

    def blocks(*a, **k):
        df = real_blocks(*a, **k)
        for b, (t, h) in times.items():
            mine = df["block_q"] == b
            df.loc[mine, ["time_s", "time_lo_s", "time_hi_s"]] = (t, t * (1 - h), t * (1 + h))
            df.loc[mine, "repeats"] = 20
        return as_asked(df)

    def sweep(*a, **k):
        df = real_sweep(*a, **k)
        df[["time_s", "time_lo_s", "time_hi_s"]] = (1e-3, 0.99e-3, 1.01e-3)
        df["repeats"] = 20
        return as_asked(df)

    monkeypatch.setattr(measure_jobs, "run_block_sweep", blocks)
    monkeypatch.setattr(measure_jobs, "run_sweep", sweep)
    jobs.block_sweep.clear()
    at = run_heavy(make_app, "block", n="64", blocks="16,32")
    (text,) = [m.value for m in at.markdown if m.value.startswith("**Naive against each tile size")]
    bullets = [line for line in text.split("\n") if line.startswith("- ")]
    assert len(bullets) == 4  # FA1 and FA2 at each tile size
    for line in bullets:
        b = int(stated(line, r"\*\*"))
        t, h = times[b]
        v = compare(estimate_of(1e-3, 0.99e-3, 1.01e-3, 20), estimate_of(t, t * (1 - h), t * (1 + h), 20))
        if v.separated:  # naive faster, by the tiled time over naive's, with its interval
            assert "naive is" in line and shows(stated(line, "naive is"), 1 / v.ratio)
        else:
            assert "too close to call here" in line and "faster than" not in line
        assert v.separated == (b == 16)
    jobs.block_sweep.clear()


def test_a_median_the_run_left_unsettled_makes_every_view_say_the_machine_was_too_busy():
    """A row with more calls set aside than kept (its run marked it unsettled) names no winner on any view, and the
    view says why: the machine, not the repeats or N."""
    from flashviz.measure.verdict import BUSY
    from flashviz.views.bench.sentences import speed_verdicts
    from flashviz.views.decode.sentences import _settle
    from flashviz.views.masks.sentences import settle_words

    fast = dict(impl="flash2", N=512, time_s=1e-3, time_lo_s=0.99e-3, time_hi_s=1.01e-3, repeats=20, status="ok")
    slow = dict(impl="naive", N=512, time_s=2e-3, time_lo_s=1.98e-3, time_hi_s=2.02e-3, repeats=20, status="ok")
    ((_, _, clean),) = speed_verdicts(pd.DataFrame([slow, {**fast, "set_aside": 3}]))
    ((_, _, busy),) = speed_verdicts(pd.DataFrame([slow, {**fast, "set_aside": 21}]))
    assert clean.faster == "FA2" and busy.faster is None and busy.settle == BUSY
    assert settle_words(busy).startswith("too close to call here: the machine was too busy")
    assert _settle([busy]).startswith("the machine was too busy")
