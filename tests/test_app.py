"""The dashboard under streamlit.testing (AppTest): every view and control, URL state, hostile links, the lock.

Heavy tabs run with tiny sweeps (N <= 128, d = 16, one repeat) so the whole file stays well under a minute or two.
"""

from __future__ import annotations

import json
import random
import re
import string
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashviz.core.tiling import tile_schedule
from flashviz.limits import LIST_MAX
from flashviz.ui import jobs
from flashviz.ui.common import timing_lock
from flashviz.ui.query import parse_query
from flashviz.ui.state import (
    BLOCK_MAX,
    D_MAX,
    N_MAX,
    ORDERS,
    PRESETS,
    VIEWS,
    Env,
    Settings,
    apply_preset,
    default_settings,
)
from flashviz.vocab import DTYPES, IMPLS
from tests._apptest import RUN_BUTTON, TINY, assert_clean, charts, run_heavy, tile_map

# ----------------------------------------------------------------------------------------------------------------------
# the default view


def test_default_page_shows_the_tile_map_row_inspector_and_equations(make_app):
    at = make_app()
    assert_clean(at)
    assert not at.warning  # a clean link gets no notices
    m = tile_map(at)
    (panel,) = m.panels
    assert len(panel.tiles) == 16 * 16 and max(panel.tiles) == (15, 15)  # N = 1024, Br = Bc = 64
    assert m.frames == len(panel.frames) == 120  # 256 computed tiles, subsampled
    for word in ("in SRAM", "full: computed, no mask", "skipped: never loaded", "in progress"):
        assert word in m.legend
    assert m.controls == ["▶ Play❚❚ Pause", "⟲ Restart"]
    assert "HBM traffic so far" in panel.frames[0]["counter"][1]
    assert panel.row_marker is not None  # the row the inspector follows
    (row,) = [s for title, s in charts(at).items() if title.startswith("Row inspector")]
    assert {"FA1: m after each tile", "FA1: l after each tile", "exact value over the whole row"} <= {
        t.get("name") for t in row["data"]}
    assert len(at.get("latex")) >= 5
    assert len(at.metric) == 2
    assert at.query_params == default_settings(Env(max_threads=int(at.query_params["threads"]))).to_query()


def test_animation_frames_change_with_causal_and_window(make_app):
    def frames(**q):
        m = tile_map(make_app(n="256", br="32", bc="32", **q))
        (panel,) = m.panels
        return m.frames, {ij: (t["fate"], t["done"] or t["reveal"] <= m.frames) for ij, t in panel.tiles.items()}

    n_full, last_full = frames()
    n_causal, last_causal = frames(causal="1")
    n_window, last_window = frames(causal="1", window="40,0")
    computed = [tile_schedule(256, 256, 32, 32, causal=c, window=w).counts() for c, w in
                ((False, None), (True, None), (True, (40, 0)))]
    assert (n_full, n_causal, n_window) == tuple(c["full"] + c["partial"] for c in computed) == (64, 36, 21)
    assert last_full != last_causal and last_causal != last_window
    assert all(reached for _, reached in last_causal.values())  # by the end of the run every tile is reached
    assert sum(fate == "skipped" for fate, _ in last_causal.values()) == 28  # above the diagonal


def test_both_loop_orders_side_by_side_run_in_lockstep(make_app):
    at = make_app(order="both", n="256", br="64", bc="64", causal="1")
    assert_clean(at)
    m = tile_map(at)
    assert [p.loop_order for p in m.panels] == ["kv_outer", "q_outer"]
    assert sorted(m.panels[0].frames) == sorted(m.panels[1].frames) == list(range(m.frames))  # frame k in both
    assert m.panels[0].frames[1]["counter"][0].startswith("FA1 tile 2/10: i=1, j=0")  # FA1 down a column,
    assert m.panels[1].frames[1]["counter"][0].startswith("FA2 tile 2/10: i=1, j=0")  # FA2 along a row (causal)
    assert m.panels[1].frames[2]["counter"][0].startswith("FA2 tile 3/10: i=1, j=1")
    (row,) = [s for title, s in charts(at).items() if title.startswith("Row inspector")]
    assert {"FA1: m after each tile", "FA2: m after each tile"} <= {t.get("name") for t in row["data"]}
    assert len(at.metric) == 3


def test_a_grid_beyond_the_cap_is_refused_with_a_fix(make_app):
    at = make_app(n="16384", br="16", bc="16")
    assert not at.exception
    assert "Raise the block size to at least 256" in at.error[0].value
    assert not [m for m in at.markdown if 'class="fv-tilemap"' in m.value]


def test_row_inspector_skips_runs_too_big_for_live(make_app):
    at = make_app(n="16384", br="256", bc="256", d="128")
    assert_clean(at)
    assert tile_map(at)
    assert any("too slow to run live" in i.value for i in at.info)


# ----------------------------------------------------------------------------------------------------------------------
# every view


@pytest.mark.parametrize("view", list(VIEWS))
def test_every_view_renders_without_exception(make_app, view):
    at = make_app(**TINY, view=view)
    assert_clean(at)
    assert [t.label for t in at.tabs] == list(VIEWS.values())
    if view in RUN_BUTTON:
        assert at.button(key=RUN_BUTTON[view]) is not None
        assert any("Press" in i.value for i in at.info)


def test_benchmark_runs_a_sweep_and_draws_every_figure(make_app):
    at = run_heavy(make_app, "bench")
    figs = charts(at)
    expected = {"Peak memory vs sequence length", "Time vs sequence length (bars: interquartile range)",
                "Achieved throughput vs sequence length", "Modelled HBM traffic vs sequence length"}
    assert expected <= set(figs)
    names = {t["name"] for t in figs["Peak memory vs sequence length"]["data"]}
    assert names == {"naive (standard attention)", "flash (FA1 loop order)", "flash2 (FA2 loop order)",
                     "PyTorch SDPA"}
    time_traces = figs["Time vs sequence length (bars: interquartile range)"]["data"]
    assert all(t["error_y"]["visible"] for t in time_traces)
    assert figs["Peak memory vs sequence length"]["layout"]["xaxis"]["type"] == "log"
    for flash in ("flash", "flash2"):  # the summaries: plotly tables, every row of them
        (table,) = figs[f"Summary: {flash} vs naive"]["data"]
        assert table["type"] == "table" and table["cells"]["values"][0] == ["32", "64"]
    assert at.get("download_button")
    at.run()  # a rerun keeps the results on the page without measuring again
    assert expected <= set(charts(at))


def test_benchmark_results_are_cached_across_sessions(make_app, monkeypatch):
    calls = []
    real = jobs.run_sweep
    monkeypatch.setattr(jobs, "run_sweep", lambda *a, **k: calls.append(1) or real(*a, **k))
    unique = {"ns": "48", "impls": "flash2", "d": "24"}  # a configuration no other test uses
    run_heavy(make_app, "bench", **unique)
    assert len(calls) == 1
    other_student = run_heavy(make_app, "bench", **unique)
    assert len(calls) == 1  # served from st.cache_data
    assert "Peak memory vs sequence length" in charts(other_student)


def test_memory_guard_refusals_show_the_memory_they_would_need(make_app, monkeypatch):
    import flashviz.measure.sweep

    monkeypatch.setattr(flashviz.measure.sweep, "default_memory_budget", lambda device="cpu": 1024)  # 1 KiB
    at = run_heavy(make_app, "bench", ns="40", impls="naive,flash2")
    (warning,) = [w.value for w in at.warning]
    assert "naive" in warning and "would need" in warning and "bytes" in warning
    names = {t["name"] for t in charts(at)["Peak memory vs sequence length"]["data"]}
    assert "naive: not run" in names


def test_a_run_waits_visibly_while_another_session_holds_the_lock(make_app):
    at = make_app(**{**TINY, "ns": "56", "impls": "flash2", "d": "8"}, view="bench")  # a cache miss: needs the lock
    assert_clean(at)
    lock = timing_lock()
    assert lock.acquire(timeout=60)
    timer = threading.Timer(2.0, lock.release)  # started once the page is drawn, so the click finds the lock held
    timer.start()
    try:
        at.button(key="bench_run").click().run()
    finally:
        timer.join()
    assert_clean(at)
    texts = [i.value for i in at.info]
    assert any(t.startswith("Waited") and "another run" in t for t in texts), texts


def test_timing_runs_log_start_and_end_when_asked(make_app, monkeypatch, tmp_path):
    log = tmp_path / "timing.jsonl"
    monkeypatch.setenv("FLASHVIZ_TIMING_LOG", str(log))
    run_heavy(make_app, "bench", ns="44", impls="sdpa", d="8")  # a cache miss: one timing run
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in events] == ["start", "end"] and events[0]["run"] == events[1]["run"]
    assert events[0]["t"] <= events[1]["t"] and {"pid", "thread"} <= set(events[0])


def test_row_is_clamped_when_n_shrinks(make_app):
    at = make_app(n="1024", row="900", autorow="0")
    at.select_slider(key="n").set_value(256).run()
    assert_clean(at)
    assert at.query_params["row"] == "255" and at.number_input(key="row").value == 255


def test_block_size_tab_draws_time_and_traffic_against_tile_size(make_app):
    at = run_heavy(make_app, "block")
    fig = charts(at)["Tile size trade-off"]
    names = {t["name"] for t in fig["data"]}
    assert {"flash (FA1 loop order)", "flash2 (FA2 loop order)"} <= names
    assert {"naive at N=128 (untiled reference)", "sdpa at N=128 (untiled reference)"} <= names  # reference lines
    for axis in ("yaxis", "yaxis2"):
        lo, hi = fig["layout"][axis]["range"]
        assert -6 < lo < hi < 6  # log10 of ms / MiB: the reference lines no longer stretch the axis to 1e84


def test_io_model_tab_draws_theorem_2_without_a_button(make_app):
    at = make_app(view="io", n="512", d="32", causal="1")
    assert_clean(at)
    (fig,) = [s for t, s in charts(at).items() if t.startswith("HBM accesses vs on-chip memory")]
    names = {t["name"] for t in fig["data"]}
    assert {"naive (standard attention)", "FlashAttention-1 (kv_outer)", "FlashAttention-2 (q_outer)"} <= names
    assert fig["layout"]["xaxis"]["type"] == "log" and fig["layout"]["yaxis"]["type"] == "log"
    assert at.get("latex")


def test_correctness_tab_passes_the_1e5_bar(make_app):
    at = run_heavy(make_app, "correct")
    assert "pass" in at.success[0].value
    assert len(at.dataframe) == 1
    fig = charts(at)["Largest error vs float64 SDPA"]
    assert {"d = 16", "1e-5 bar (pass below)"} <= {t.get("name") for t in fig["data"]}
    assert fig["layout"]["yaxis"]["type"] == "log"


def test_training_tab_times_forward_and_backward(make_app):
    at = run_heavy(make_app, "train", impls="naive,flash2")
    figs = charts(at)
    assert {"Forward + backward: peak memory vs N", "Forward + backward: time vs N (bars: interquartile range)"} \
        <= set(figs)
    (table,) = figs["Training summary: flash2 vs naive"]["data"]  # the Benchmark's plotly table, same font
    bench = charts(run_heavy(make_app, "bench"))["Summary: flash vs naive"]["data"][0]
    assert table["type"] == "table" and table["cells"]["font"]["size"] == bench["cells"]["font"]["size"]


def test_empty_choices_and_oversized_sweeps_are_refused_with_a_message(make_app):
    at = make_app(**TINY, view="bench")
    at.multiselect(key="ns").set_value([]).run()
    assert not at.exception and "at least one sequence length" in at.error[0].value
    at = make_app(view="bench", ns="16384", batch="64", heads="64", impls="naive")
    assert not at.exception and "TFLOP" in at.error[0].value


# ----------------------------------------------------------------------------------------------------------------------
# every sidebar control


def test_every_sidebar_control_reruns_cleanly_and_lands_in_the_url(make_app):
    at = make_app(n="256", br="32", bc="32")
    steps = [
        (lambda: at.select_slider(key="n").set_value(512), {"n": "512"}),
        (lambda: at.select_slider(key="d").set_value(32), {"d": "32"}),
        (lambda: at.select_slider(key="br").set_value(64), {"br": "64", "bc": "64"}),
        (lambda: at.checkbox(key="link").uncheck(), {"link": "0"}),
        (lambda: at.select_slider(key="bc").set_value(128), {"br": "64", "bc": "128"}),
        (lambda: at.toggle(key="causal").set_value(True), {"causal": "1"}),
        (lambda: at.toggle(key="win_on").set_value(True), {"window": "256,0"}),
        (lambda: at.number_input(key="win_left").set_value(64), {"window": "64,0"}),
        (lambda: at.number_input(key="win_right").set_value(8), {"window": "64,8"}),
        (lambda: at.radio(key="order").set_value("both"), {"order": "both"}),
        (lambda: at.selectbox(key="dtype").set_value("float64"), {"dtype": "float64"}),
        (lambda: at.number_input(key="batch").set_value(2), {"batch": "2"}),
        (lambda: at.number_input(key="heads").set_value(3), {"heads": "3"}),
        (lambda: at.selectbox(key="device").set_value("cpu"), {"device": "cpu"}),
        (lambda: at.select_slider(key="threads").set_value(1), {"threads": "1"}),
        (lambda: at.toggle(key="autorow").set_value(False), {"autorow": "0"}),
        (lambda: at.number_input(key="row").set_value(300), {"row": "300"}),
    ]
    for change, expected in steps:
        change().run()
        assert_clean(at)
        for key, value in expected.items():
            assert at.query_params[key] == value, (key, at.query_params)
    m = tile_map(at)
    assert "window (64, 8)" in m.subtitle and len(m.panels) == 2


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_classroom_preset_loads_its_settings(make_app, name):
    at = make_app()
    at.selectbox(key="preset").set_value(name).run()
    assert_clean(at)
    expected = apply_preset(default_settings(Env(max_threads=int(at.query_params["threads"]))), name).to_query()
    for key in ("n", "d", "br", "bc", "causal", "window", "row"):
        assert at.query_params[key] == expected[key], key
    assert at.selectbox(key="preset").value is None  # ready for the next preset
    assert tile_map(at)


def test_switching_tabs_keeps_tab_widgets_and_the_view_in_the_url(make_app):
    at = make_app(**TINY, view="bench")
    at.slider(key="reps").set_value(3).run()
    at.session_state["view"] = VIEWS["io"]
    at.run()
    assert_clean(at)
    assert at.query_params["view"] == "io" and at.query_params["reps"] == "3"
    at.session_state["view"] = VIEWS["bench"]
    at.run()
    assert at.slider(key="reps").value == 3


# ----------------------------------------------------------------------------------------------------------------------
# shareable state


def test_query_parameters_round_trip(make_app):
    wanted = Settings(n=1000, d=59, br=32, bc=128, link=False, causal=True, window=(100, 5), order="fa2",
                      dtype="float64", batch=2, heads=3, device="cpu", threads=1, row=997, view="io",
                      ns=(128, 1000), impls=("flash", "sdpa"), reps=2, blocks=(8, 64), cds=(59,), cns=(97,))
    at = make_app(**wanted.to_query())
    assert_clean(at)
    assert not at.warning
    assert at.query_params == wanted.to_query()
    assert at.select_slider(key="n").value == 1000 and at.select_slider(key="bc").value == 128
    assert at.number_input(key="win_left").value == 100 and at.radio(key="order").value == "fa2"


HOSTILE = [
    {"n": "-5"},
    {"n": "99999999999999999999999"},
    {"n": "１２３"},  # fullwidth digits: int() would take them, the parser does not
    {"n": ["64", "128"]},  # a repeated key
    {"d": "1e9", "br": "NaN", "causal": "maybe"},
    {"device": "cuda"},
    {"view": "<script>alert(1)</script>", "order": "fa3"},
    {"window": "abc", "threads": "0"},
    {"ns": ",".join(["99999"] * 20), "impls": "evil`code`"},
    {"row": "123456789", "`]([x](javascript:alert(1))": "1"},
]


@pytest.mark.parametrize("query", HOSTILE, ids=[",".join(q) for q in HOSTILE])
def test_hostile_links_are_clamped_with_a_visible_notice(make_app, query):
    at = make_app(**query)
    assert_clean(at)
    (warning,) = [w.value for w in at.warning]
    assert warning.startswith("**Some settings in this link were adjusted:**")
    parsed, _ = parse_query(query, Env(max_threads=int(at.query_params["threads"])))
    assert at.query_params == parsed.to_query()
    at.button(key="_fv_dismiss").click().run()
    assert not at.warning


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(
    st.sampled_from([*Settings().to_query(), "zz", ""]),
    st.one_of(st.text(max_size=30), st.lists(st.text(max_size=12), max_size=3),
              st.integers(-10**30, 10**30).map(str), st.sampled_from(["1", "0", "none", "64,0", "∞", "  7 "])),
    max_size=12,
))
def test_parse_query_never_raises_and_always_gives_valid_settings(params):
    s, notices = parse_query(params, Env(max_threads=4, devices=("cpu",)))
    assert 1 <= s.n <= N_MAX and 1 <= s.d <= D_MAX and 1 <= s.br <= BLOCK_MAX and 1 <= s.bc <= BLOCK_MAX
    assert 0 <= s.row < s.n and 1 <= s.threads <= 4 and s.device == "cpu"
    assert s.order in ORDERS and s.dtype in DTYPES and s.view in VIEWS and set(s.impls) <= set(IMPLS)
    assert s.window is None or all(0 <= w <= N_MAX for w in s.window)
    assert all(1 <= len(xs) <= LIST_MAX for xs in (s.ns, s.blocks, s.cds, s.cns))
    assert all(isinstance(n, str) for n in notices)
    again, more = parse_query(s.to_query(), Env(max_threads=4, devices=("cpu",)))
    assert again == s and more == []  # what the app writes back to the URL parses cleanly


def test_a_fuzz_of_random_query_strings_never_breaks_the_parser():
    rng = random.Random(5)
    keys = [*Settings().to_query(), "x"]
    alphabet = string.printable + "１２３é∞🙂\u202e\x00"
    for _ in range(300):
        params = {rng.choice(keys): [("".join(rng.choices(alphabet, k=rng.randint(0, 40))))
                                     for _ in range(rng.randint(1, 3))] for _ in range(rng.randint(1, 8))}
        s, notices = parse_query(params, Env(max_threads=2))
        assert 1 <= s.n <= N_MAX and 0 <= s.row < s.n
        for note in notices:
            inline = note.split("`")[1::2]  # the raw values are quoted as inline code: printable ASCII only
            assert all(all(" " <= c <= "~" for c in part) for part in inline)


def test_every_setting_is_declared_once_and_everything_else_is_derived():
    from flashviz.ui.state import setting_fields, spec_of
    from flashviz.ui.widgets import DRAW, WIDGET_KEYS

    names = [f.name for f in setting_fields()]
    assert list(Settings().to_query()) == names  # the URL carries exactly the declared settings
    for name in names:
        spec = spec_of(name)
        assert spec.widget in DRAW or spec.widget in ("", "tabs"), name  # every widget kind has a drawer
        assert spec.place == "app" or (spec.label and spec.help), name  # every widget has a label and help
    assert set(names) - {"window"} <= set(WIDGET_KEYS) and {"win_on", "win_left", "win_right"} <= set(WIDGET_KEYS)
    changed = Settings(n=97, row=90, window=(3, 1), impls=("sdpa",), view="io")
    assert parse_query(changed.to_query()) == (changed, [])


# ----------------------------------------------------------------------------------------------------------------------
# what the tabs teach, true at the settings where it is shown


def test_benchmark_draws_each_n_as_it_finishes():
    seen = []
    jobs.sweep((24, 40), 8, 8, 8, False, None, ("naive", "flash"), 1, 1, "float32", "cpu", 1, 1,
               _progress=lambda done, total, what, partial=None: seen.append(partial))
    partials = [p for p in seen if p is not None]
    assert [sorted(p["N"].unique()) for p in partials] == [[24], [24, 40]]


def test_benchmark_shows_results_so_far_and_the_idle_text_counts_right(make_app):
    at = make_app(view="bench", ns="128", impls="sdpa", reps="1", d="8")
    assert any("about 1 measurement, 1 repeat each" in i.value for i in at.info)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    assert "Time vs sequence length (so far)" in charts(at)


def _scaled_sweep(monkeypatch, naive_factor: float):
    """Make naive's measured time naive_factor times what it was, so the speedup's side of 1 is known."""
    real = jobs.run_sweep

    def fake(*a, **k):
        df = real(*a, **k)
        df.loc[df["impl"] == "naive", "time_s"] *= naive_factor
        return df

    monkeypatch.setattr(jobs, "run_sweep", fake)


@pytest.mark.parametrize(("factor", "d", "shown"), [(1e-6, "12", True), (1e6, "20", False)])
def test_the_slower_than_naive_caption_shows_only_when_true(make_app, monkeypatch, factor, d, shown):
    _scaled_sweep(monkeypatch, factor)
    at = run_heavy(make_app, "bench", ns="32", impls="naive,flash", d=d)
    captions = [c.value for c in at.caption if "slower than naive" in c.value]
    assert bool(captions) == shown
    if shown:
        assert "flash at N = 32" in captions[0] and "Python loop iteration" in captions[0]


def test_benchmark_compares_causal_with_no_mask(make_app):
    at = run_heavy(make_app, "bench", ns="64", impls="naive,flash2")
    at.button(key="causal_run").click().run()
    assert_clean(at)
    (table,) = [df.value for df in at.dataframe if "causal / no mask" in df.value.columns]
    assert list(table["implementation"]) == ["flash2", "naive"] and (table["causal / no mask"] > 0).all()


def test_the_inspected_row_comes_back_when_n_grows_again(make_app):
    at = make_app(n="1024", row="900", autorow="0")
    at.select_slider(key="n").set_value(256).run()
    assert at.number_input(key="row").value == 255
    at.select_slider(key="n").set_value(1024).run()
    assert_clean(at)
    assert at.number_input(key="row").value == 900 and at.query_params["row"] == "900"


def test_a_preset_sets_every_setting_whatever_came_before(make_app):
    at = make_app()
    at.selectbox(key="preset").set_value("Long-context causal").run()
    at.selectbox(key="preset").set_value("GPT-2 small layer").run()
    assert_clean(at)
    expected = apply_preset(default_settings(Env(max_threads=int(at.query_params["threads"]))), "GPT-2 small layer")
    assert at.query_params == expected.to_query()  # the long-context preset's N list is gone too


def test_sliding_window_preset_toggling_causal_changes_tiles_and_traffic(make_app):
    at = make_app()
    at.selectbox(key="preset").set_value("Sliding window").run()
    assert_clean(at)

    def tiles_and_hbm():
        (computed,) = [int(m.group(1)) for c in at.caption if (m := re.search(r"(\d+) of \d+ tiles computed", c.value))]
        return computed, at.metric[1].value

    before = tiles_and_hbm()
    at.toggle(key="causal").set_value(True).run()
    assert_clean(at)
    after = tiles_and_hbm()
    assert after[0] < before[0] and after[1] != before[1]


def test_blocks_as_large_as_n_are_explained(make_app):
    at = make_app(view="block", n="16", blocks="8,16,32")
    assert_clean(at)
    assert any("16, 32 are at least N = 16" in c.value for c in at.caption)


def test_correctness_says_it_uses_its_own_n_and_d(make_app):
    at = make_app(view="correct", n="512", d="32")
    assert any("not the sidebar's d = 32 and N = 512" in c.value for c in at.caption)
    at = make_app(view="correct", dtype="float16")
    assert "seed" not in at.warning[0].value and "float32" in at.warning[0].value


def test_a_run_left_behind_by_a_setting_change_says_so_and_can_be_cancelled(make_app):
    from flashviz.ui.common import JOB_KEY, Job

    job = Job(name="bench", title="Benchmark sweep", args=())

    def work():  # reports progress every 10 ms, as a sweep does between calls, until cancelled
        try:
            for i in range(6000):
                job.progress(i, 6000, "timing")
                threading.Event().wait(0.01)
        except Exception as exc:
            job.box["error"] = exc

    job.thread = threading.Thread(target=work, daemon=True)
    job.thread.start()
    at = make_app()
    at.session_state[JOB_KEY] = job
    at.run()
    assert any("still running" in w.value for w in at.warning)
    at.button(key="_fv_cancel").click().run()
    assert_clean(at)
    assert not job.thread.is_alive() and type(job.box["error"]).__name__ == "Cancelled"
    assert any(i.value.startswith("Cancelled **Benchmark sweep**") for i in at.info)
    at.run()
    assert not any("still running" in w.value for w in at.warning)


@pytest.mark.parametrize(("factor", "d", "shown"), [(1e-6, "13", True), (1e6, "21", False)])
def test_the_block_tab_explains_tiled_points_slower_than_naive_only_when_true(make_app, monkeypatch, factor, d, shown):
    _scaled_sweep(monkeypatch, factor)  # the naive reference line comes from run_sweep
    at = run_heavy(make_app, "block", n="64", blocks="16", d=d)
    assert any("above the naive line" in c.value for c in at.caption) == shown
