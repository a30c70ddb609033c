"""The dashboard under streamlit.testing (AppTest): every view and control, the sidebar scoped to the open view, URL
state, hostile links, the timing lock. What the views' numbers say is checked in tests/test_view_runs.py.

Heavy views run with tiny sweeps (N <= 128, d = 16, one repeat) so the whole file stays well under a minute or two.
Every test that counts cache misses clears the cache it counts first, so no test depends on which ran before it.
"""

from __future__ import annotations

import json
import os
import random
import string
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashviz.app.machine import cpu_cores
from flashviz.app.query import parse_query
from flashviz.app.registry import LABELS, SLUGS, VIEWS, view_of
from flashviz.app.state import PRESETS, Env, Settings, apply_preset, default_settings, settings_of
from flashviz.core.tiling import tile_schedule
from flashviz.kit import jobs, runs
from flashviz.kit.sizes import BLOCK_MAX, D_MAX, N_MAX
from flashviz.limits import LIST_MAX
from flashviz.measure import jobs as measure_jobs
from flashviz.views.how.settings import ORDERS
from flashviz.vocab import DTYPES, IMPLS, KV_OUTER, Q_OUTER, SKIPPED
from tests._apptest import RUN_BUTTON, TINY, assert_clean, charts, run_heavy, tile_map
from tests._numbers import says

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
    assert any("flashviz/core/algorithms.py" in m.value for m in at.markdown)  # where to read the plain code
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
    assert sum(fate == SKIPPED for fate, _ in last_causal.values()) == 28  # above the diagonal


def test_both_loop_orders_side_by_side_run_in_lockstep(make_app):
    at = make_app(order="both", n="256", br="64", bc="64", causal="1")
    assert_clean(at)
    m = tile_map(at)
    assert [p.loop_order for p in m.panels] == [KV_OUTER, Q_OUTER]
    assert sorted(m.panels[0].frames) == sorted(m.panels[1].frames) == list(range(m.frames))  # frame k in both
    # each counter names the k-th computed tile of its loop order's schedule, of all computed: FA1 goes down a
    # column, FA2 along a row (causal: 10 of the 4 x 4 tiles)
    for panel, short in zip(m.panels, ("FA1", "FA2"), strict=True):
        order = [(t.q_block, t.k_block) for t in tile_schedule(256, 256, 64, 64, causal=True,
                                                                 loop_order=panel.loop_order) if t.computed]
        assert len(order) == 10
        for k in (1, 2):
            counter = panel.frames[k]["counter"][0]
            assert counter.startswith(f"{short} tile ") and says(counter, k + 1, len(order), *order[k]), counter
    (row,) = [s for title, s in charts(at).items() if title.startswith("Row inspector")]
    assert {"FA1: m after each tile", "FA2: m after each tile"} <= {t.get("name") for t in row["data"]}
    assert len(at.metric) == 3


def test_a_grid_beyond_the_cap_is_refused_with_a_fix(make_app):
    at = make_app(n="16384", br="16", bc="16")
    assert not at.exception
    assert "Raise the block size to at least 256" in at.error[0].value
    assert not [m for m in at.markdown if 'class="fv-tilemap"' in m.value]


def test_row_inspector_skips_runs_too_big_for_live_and_the_map_still_shows_every_tile(make_app):
    at = make_app(n="16384", br="256", bc="256", d="128")
    assert_clean(at)
    (panel,) = tile_map(at).panels
    fate = tile_schedule(16384, 16384, 256, 256).status_grid()
    assert len(panel.tiles) == 64 * 64 and all(t["fate"] == fate[i][j] for (i, j), t in panel.tiles.items())
    assert any("too slow to run live" in i.value for i in at.info)
    assert not [s for title, s in charts(at).items() if title.startswith("Row inspector")]


# ----------------------------------------------------------------------------------------------------------------------
# every view, and the sidebar scoped to it

# What each view reads from the sidebar, written out by hand: the sidebar shows exactly these widgets (Br and Bc are
# one widget with its link; the window, its on/off toggle) next to the preset picker, and the view's first line names
# them.
SIDEBAR_KEYS = {
    "how": {"n", "d", "link", "br", "causal", "win_on", "dtype"},
    "bench": {"d", "causal", "win_on", "dtype", "batch", "heads", "device", "threads"},
    "block": {"n", "d", "causal", "win_on", "dtype", "batch", "heads", "device", "threads"},
    "io": {"n", "d", "causal", "win_on", "dtype", "batch", "heads"},
    "correct": {"link", "br", "causal", "win_on", "dtype", "device", "threads"},
    "train": {"d", "causal", "win_on", "dtype", "batch", "heads", "device", "threads"},
    "roof": {"n", "d", "link", "br", "causal", "win_on", "dtype", "batch", "heads", "threads"},
    "decode": {"d", "dtype", "device", "threads"},
    "masks": {"n", "d", "link", "br", "dtype", "heads", "threads"},
    "ring": set(),
}
USES = {
    "how": "Uses from the sidebar: N, d, Br, Bc, causal, window, dtype; from the Masks view: its settings.",
    "bench": "Uses from the sidebar: d, causal, window, dtype, B, H, device, threads.",
    "train": "Uses from the sidebar: d, causal, window, dtype, B, H, device, threads; from the Benchmark view: N, "
             "implementations, tile size, repeats, repeat until sure.",
    "correct": "Uses from the sidebar: Br, Bc, causal, window, dtype, device, threads.",
    "decode": "Uses from the sidebar: d, dtype, device, threads; from the Benchmark view: repeats.",
    "ring": "Uses no setting of the sidebar.",
}


def drawn_for(view) -> set[str]:
    """The widgets a view's settings ask the sidebar for, with Br and Bc linked (a view not listed above)."""
    keys = {"win_on" if name == "window" else name for name in view.sidebar} - {"bc"}
    return keys | ({"link"} if "br" in keys else set())


def sidebar_keys(at) -> set[str]:
    keys = set()
    for kind in ("select_slider", "slider", "number_input", "toggle", "checkbox", "selectbox", "radio",
                 "multiselect"):
        keys |= {w.key for w in at.sidebar.get(kind)}
    return keys - {"preset"}


@pytest.mark.parametrize("view", SLUGS)
def test_every_view_renders_with_the_sidebar_settings_it_reads_and_says_which(make_app, view):
    at = make_app(**TINY, view=view)
    assert_clean(at)
    assert at.segmented_control(key="view").options == [LABELS[slug] for slug in SLUGS]
    assert sidebar_keys(at) == SIDEBAR_KEYS.get(view, drawn_for(view_of(view)))
    first_line = at.caption[0].value
    reads = view_of(view).sidebar  # a view that reads none of the shared settings says so
    assert first_line.startswith("Uses from the sidebar: " if reads else "Uses no setting of the sidebar")
    if view in USES:
        assert first_line == USES[view]
    if view in RUN_BUTTON:  # heavy work waits for its button, and the page says what to press
        (button,) = [b for b in at.button if b.key == RUN_BUTTON[view]]
        assert button.label.startswith("▶ Run") and button.proto.type == "primary"
        assert any("Press **Run" in i.value for i in at.info)
    assert any(f"**{LABELS[view]}**" in c.value for c in at.sidebar.caption)  # whose settings the sidebar shows


def test_a_setting_the_open_view_does_not_read_keeps_its_value_while_hidden(make_app):
    at = make_app(n="256", br="32", bc="32", causal="1")
    at.session_state["view"] = LABELS["bench"]  # the Benchmark view: N and the block sizes leave the sidebar
    at.run()
    assert_clean(at)
    assert "n" not in sidebar_keys(at) and at.query_params["n"] == "256" and at.query_params["br"] == "32"
    at.toggle(key="causal").set_value(False).run()  # a setting both views read
    at.session_state["view"] = LABELS["how"]
    at.run()
    assert_clean(at)
    assert at.select_slider(key="n").value == 256 and at.query_params["causal"] == "0"
    assert "no mask" in tile_map(at).subtitle and "N = 256" in tile_map(at).subtitle


def test_switching_views_keeps_view_widgets_and_the_view_in_the_url(make_app):
    at = make_app(**TINY, view="bench")
    at.slider(key="reps").set_value(3).run()
    at.session_state["view"] = LABELS["io"]
    at.run()
    assert_clean(at)
    assert at.query_params["view"] == "io" and at.query_params["reps"] == "3"
    at.session_state["view"] = LABELS["bench"]
    at.run()
    assert at.slider(key="reps").value == 3


def test_training_draws_the_benchmarks_sweep_settings_and_they_are_the_same_settings(make_app):
    at = make_app(**TINY, view="train")
    assert_clean(at)
    at.slider(key="reps").set_value(2).run()
    at.session_state["view"] = LABELS["bench"]
    at.run()
    assert at.slider(key="reps").value == 2 and at.query_params["reps"] == "2"


# ----------------------------------------------------------------------------------------------------------------------
# runs, the cache and the lock


def test_benchmark_results_are_cached_across_sessions(make_app, monkeypatch):
    jobs.sweep.clear()  # counted from an empty cache, whatever ran before
    calls = []
    real = measure_jobs.run_sweep
    monkeypatch.setattr(measure_jobs, "run_sweep", lambda *a, **k: calls.append(1) or real(*a, **k))
    query = {"ns": "48", "impls": "flash2", "d": "24"}
    run_heavy(make_app, "bench", **query)
    assert len(calls) == 1
    other_student = run_heavy(make_app, "bench", **query)
    assert len(calls) == 1  # served from st.cache_data
    assert "Peak memory vs sequence length" in charts(other_student)


def test_memory_guard_refusals_show_the_memory_they_would_need(make_app, monkeypatch):
    import flashviz.measure.sweep

    jobs.sweep.clear()
    monkeypatch.setattr(flashviz.measure.sweep, "default_memory_budget", lambda device="cpu": 1024)  # 1 KiB
    at = run_heavy(make_app, "bench", ns="40", impls="naive,flash2")
    (warning,) = [w.value for w in at.warning]
    assert "naive" in warning and "would need" in warning and "bytes" in warning
    names = {t["name"] for t in charts(at)["Peak memory vs sequence length"]["data"]}
    assert "naive: not run" in names


@pytest.fixture
def server_worker():
    """The server's real timing worker for one test (flashviz.kit.lock.timing_worker), stopped afterwards."""
    import flashviz.kit.lock

    worker = flashviz.kit.lock.timing_worker()
    yield worker
    worker.close()


@pytest.mark.real_worker
def test_a_run_goes_to_the_timing_worker_and_says_what_it_saw(make_app, server_worker):
    jobs.sweep.clear()
    jobs.sweep.reports.clear()
    at = run_heavy(make_app, "bench", ns="48", impls="flash2,naive", d="8")
    assert server_worker.alive() and server_worker.pid() != os.getpid()  # measured in a process of its own
    (report,) = jobs.sweep.reports.values()  # the one run since the cache was cleared
    assert report.calls >= 2  # both kernels, timed at least once each
    assert report.sentence() in [c.value for c in at.caption]  # said under the result, with its numbers


@pytest.mark.real_worker
def test_a_run_waits_visibly_while_another_sessions_run_has_the_worker(make_app, server_worker):
    jobs.sweep.clear()  # a cache miss: the run needs the worker
    at = make_app(**{**TINY, "ns": "56", "impls": "flash2", "d": "8"}, view="bench")
    assert_clean(at)
    other = threading.Thread(target=server_worker.run, args=("_jobs:steps", (30, 0.1)), daemon=True)
    other.start()  # another session's run: 3 s in the worker
    while server_worker.waiting() == 0:
        time.sleep(0.01)
    at.button(key="bench_run").click().run()
    other.join(60)
    assert_clean(at)
    texts = [i.value for i in at.info]
    assert any(t.startswith("Waited") and "another run" in t for t in texts), texts


@pytest.mark.real_worker
def test_a_worker_killed_under_a_run_fails_it_with_the_reason_and_the_next_run_works(make_app, server_worker):
    import signal

    jobs.sweep.clear()
    at = make_app(**{**TINY, "ns": "1024", "impls": "flash", "d": "8", "reps": "10"}, view="bench")
    assert_clean(at)

    def kill_when_running() -> None:  # the out-of-memory killer, once the run is in the worker
        while server_worker.waiting() == 0:
            time.sleep(0.01)
        time.sleep(0.5)
        os.kill(server_worker.pid(), signal.SIGKILL)

    killer = threading.Thread(target=kill_when_running, daemon=True)
    killer.start()
    at.button(key="bench_run").click().run()
    killer.join(60)
    (error,) = [e.value for e in at.error]
    assert "could not run: the timing worker stopped during sweep (killed by SIGKILL" in error
    assert "A fresh timing worker starts with the next run." in error
    at = run_heavy(make_app, "bench", ns="48", impls="flash2", d="8")
    assert "Peak memory vs sequence length" in charts(at) and server_worker.restarts >= 1


def test_timing_runs_log_start_and_end_when_asked(make_app, monkeypatch, tmp_path):
    jobs.sweep.clear()  # a cache miss: one timing run
    log = tmp_path / "timing.jsonl"
    monkeypatch.setenv("FLASHVIZ_TIMING_LOG", str(log))
    run_heavy(make_app, "bench", ns="44", impls="sdpa", d="8")
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in events] == ["start", "end"] and events[0]["run"] == events[1]["run"]
    assert events[0]["t"] <= events[1]["t"] and {"pid", "thread"} <= set(events[0])


def test_a_run_left_behind_by_a_setting_change_says_so_and_can_be_cancelled(make_app):
    job = runs.Job(name="bench", title="Benchmark sweep", args=())
    stop = threading.Event()

    def work():  # reports progress, as a sweep does between calls, until cancelled
        try:
            for i in range(10**9):
                job.progress(i, 10**9, "timing")
                stop.wait(0.01)
        except Exception as exc:
            job.box["error"] = exc

    job.thread = threading.Thread(target=work, daemon=True)
    job.thread.start()
    at = make_app()
    at.session_state[runs.JOB_KEY] = job
    at.run()
    assert any("still running" in w.value for w in at.warning)
    at.button(key="_fv_cancel").click().run()
    assert_clean(at)
    stop.set()
    job.thread.join(60)
    assert not job.thread.is_alive() and type(job.box["error"]).__name__ == "Cancelled"
    assert any(i.value.startswith("Cancelled **Benchmark sweep**") for i in at.info)
    at.run()
    assert not any("still running" in w.value for w in at.warning)


def test_empty_choices_and_oversized_sweeps_are_refused_with_a_message(make_app):
    at = make_app(**TINY, view="bench")
    at.multiselect(key="ns").set_value([]).run()
    assert not at.exception and "at least one sequence length" in at.error[0].value
    at = make_app(view="bench", ns="16384", batch="64", heads="64", impls="naive")
    assert not at.exception and "TFLOP" in at.error[0].value


# ----------------------------------------------------------------------------------------------------------------------
# every control


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
        (lambda: at.toggle(key="auto_row").set_value(False), {"autorow": "0"}),
        (lambda: at.number_input(key="row").set_value(300), {"row": "300"}),
    ]
    for change, expected in steps:
        change().run()
        assert_clean(at)
        for key, value in expected.items():
            assert at.query_params[key] == value, (key, at.query_params)
    m = tile_map(at)
    assert "window (64, 8)" in m.subtitle and len(m.panels) == 2
    at.session_state["view"] = LABELS["bench"]  # the machine's and the batch's settings: on a view that reads them
    at.run()
    for change, expected in [(lambda: at.number_input(key="batch").set_value(2), {"batch": "2"}),
                             (lambda: at.number_input(key="heads").set_value(3), {"heads": "3"}),
                             (lambda: at.selectbox(key="device").set_value("cpu"), {"device": "cpu"}),
                             (lambda: at.select_slider(key="threads").set_value(1), {"threads": "1"})]:
        change().run()
        assert_clean(at)
        assert all(at.query_params[key] == value for key, value in expected.items()), at.query_params


def test_row_is_clamped_when_n_shrinks_and_comes_back_when_n_grows(make_app):
    at = make_app(n="1024", row="900", autorow="0")
    at.select_slider(key="n").set_value(256).run()
    assert_clean(at)
    assert at.query_params["row"] == "255" and at.number_input(key="row").value == 255
    at.select_slider(key="n").set_value(1024).run()
    assert_clean(at)
    assert at.number_input(key="row").value == 900 and at.query_params["row"] == "900"


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_classroom_preset_loads_its_settings_and_its_map(make_app, name):
    at = make_app()
    at.selectbox(key="preset").set_value(name).run()
    assert_clean(at)
    s = apply_preset(default_settings(Env(max_threads=int(at.query_params["threads"]))), name)
    assert at.query_params == s.to_query()
    assert at.selectbox(key="preset").value is None  # ready for the next preset
    m = tile_map(at)
    fate = tile_schedule(s.n, s.n, s.br, s.bc, causal=s.causal, window=s.window).status_grid()
    how = settings_of(view_of("how"), s)
    assert f"N = {s.n} · Br = {s.br}, Bc = {s.bc}" in m.subtitle and len(m.panels) == len(how.loop_orders)
    assert all(t["fate"] == fate[i][j] for p in m.panels for (i, j), t in p.tiles.items())


def test_a_preset_sets_every_setting_whatever_came_before(make_app):
    at = make_app()
    at.selectbox(key="preset").set_value("Long-context causal").run()
    at.selectbox(key="preset").set_value("GPT-2 small layer").run()
    assert_clean(at)
    expected = apply_preset(default_settings(Env(max_threads=int(at.query_params["threads"]))), "GPT-2 small layer")
    assert at.query_params == expected.to_query()  # the long-context preset's N list is gone too


# ----------------------------------------------------------------------------------------------------------------------
# shareable state


def test_query_parameters_round_trip(make_app):
    wanted = Settings(n=1000, d=59, br=32, bc=128, link=False, causal=True, window=(100, 5), order="fa2",
                      dtype="float64", batch=2, heads=3, device="cpu", threads=1, row=997, view="io",
                      ns=(128, 1000), impls=("flash", "sdpa"), reps=2, blocks=(8,
                                                                               64), correct_ds=(59,), correct_ns=(97,))
    at = make_app(**wanted.to_query())
    assert_clean(at)
    assert not at.warning
    assert at.query_params == wanted.to_query()
    assert at.select_slider(key="n").value == 1000 and at.number_input(key="win_left").value == 100
    at.session_state["view"] = LABELS["how"]  # the How it works view draws Bc and the loop order from the link
    at.run()
    assert at.select_slider(key="bc").value == 128 and at.radio(key="order").value == "fa2"
    assert at.query_params == {**wanted.to_query(), "view": "how"}


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
    parsed, notices = parse_query(query, Env(max_threads=cpu_cores()))  # this machine, as the page sees it
    assert warning.startswith("**Some settings in this link were adjusted:**")
    shown = 10  # the box lists ten notices and counts the rest
    assert all(f"- {n}" in warning for n in notices[:shown])
    assert (f"... and {len(notices) - shown} more" in warning) == (len(notices) > shown)
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
    assert s.order in ORDERS and s.dtype in DTYPES and s.view in SLUGS and set(s.impls) <= set(IMPLS)
    assert s.window is None or all(0 <= w <= N_MAX for w in s.window)
    assert all(1 <= len(xs) <= LIST_MAX for xs in (s.ns, s.blocks, s.correct_ds, s.correct_ns))
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


def test_every_view_is_in_the_picker_and_its_link_opens_it(make_app):
    assert len(VIEWS) == len(set(SLUGS)) == len(set(LABELS.values()))
    at = make_app(view="decode")
    assert at.segmented_control(key="view").options == [v.label for v in VIEWS]
    assert at.session_state["view"] == LABELS["decode"] and at.query_params["view"] == "decode"
