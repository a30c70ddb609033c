"""Resource guards: the container-aware memory reading, the caps that the dashboard and the command line
share (flashviz.limits), the dashboard's input-memory cap and its per-run time budget."""

from __future__ import annotations

import pandas as pd
import pytest

import flashviz.measure.sweep as sweep_module
from flashviz import limits
from flashviz.app.query import parse_query
from flashviz.cli import main
from flashviz.kit import jobs
from flashviz.measure import guards
from flashviz.measure import jobs as measure_jobs
from flashviz.measure.guards import TIME_BUDGET_STATUS, available_memory_bytes, cgroup_free_bytes
from flashviz.measure.sweep import COLUMNS

GIB = 1 << 30
MIB = 1 << 20


# ----------------------------------------------------------------------------------------------------------------------
# available memory: /proc/meminfo and the container's cgroup, whichever is smaller


@pytest.fixture
def fake_system(tmp_path, monkeypatch):
    """Point the guards' /proc/meminfo and cgroup v1/v2 paths at files under tmp_path; returns a writer."""
    v2, v1 = tmp_path / "cgroup", tmp_path / "cgroup" / "memory"
    v1.mkdir(parents=True)
    monkeypatch.setattr(guards, "MEMINFO", str(tmp_path / "meminfo"))
    monkeypatch.setattr(guards, "CGROUP_V2_DIR", str(v2))
    monkeypatch.setattr(guards, "CGROUP_V1_DIR", str(v1))

    def write(meminfo_kib: int | None = 64 * GIB // 1024, v2_files: dict | None = None, v1_files: dict | None = None):
        if meminfo_kib is not None:
            (tmp_path / "meminfo").write_text(f"MemTotal:  {2 * meminfo_kib} kB\nMemAvailable:  {meminfo_kib} kB\n")
        for base, files in ((v2, v2_files or {}), (v1, v1_files or {})):
            for name, text in files.items():
                (base / name).write_text(text)

    return write


def test_without_a_cgroup_limit_meminfo_decides(fake_system):
    fake_system(v2_files={"memory.max": "max\n", "memory.current": "123\n"},
                v1_files={"memory.limit_in_bytes": "9223372036854771712\n", "memory.usage_in_bytes": "5\n"})
    assert cgroup_free_bytes() is None
    assert available_memory_bytes() == 64 * GIB


def test_a_cgroup_v2_limit_below_the_host_memory_wins(fake_system):
    fake_system(v2_files={"memory.max": f"{4 * GIB}\n", "memory.current": f"{3 * GIB}\n",
                          "memory.stat": f"anon 1\ninactive_file {256 * MIB}\nactive_file 7\n"})
    assert cgroup_free_bytes() == GIB + 256 * MIB  # limit - usage + reclaimable page cache
    assert available_memory_bytes() == GIB + 256 * MIB


def test_a_cgroup_v1_limit_counts_too_and_the_smallest_figure_wins(fake_system):
    fake_system(v1_files={"memory.limit_in_bytes": f"{2 * GIB}\n", "memory.usage_in_bytes": f"{GIB}\n",
                          "memory.stat": f"total_inactive_file {MIB}\n"})
    assert available_memory_bytes() == GIB + MIB
    fake_system(v2_files={"memory.max": f"{GIB}\n", "memory.current": f"{GIB // 2}\n"})
    assert available_memory_bytes() == GIB // 2  # v2 (0.5 GiB free) < v1 (1 GiB) < meminfo (64 GiB)
    fake_system(meminfo_kib=100 * MIB // 1024)
    assert available_memory_bytes() == 100 * MIB  # the host is the tighter bound now


def test_a_cgroup_over_its_limit_has_nothing_free_and_garbage_is_ignored(fake_system):
    fake_system(v2_files={"memory.max": f"{GIB}\n", "memory.current": f"{2 * GIB}\n"})
    assert available_memory_bytes() == 0
    fake_system(v2_files={"memory.max": "lots\n"})
    assert cgroup_free_bytes() is None


def test_no_meminfo_falls_back_to_sysconf_and_still_honours_the_cgroup(fake_system):
    fake_system(meminfo_kib=None, v2_files={"memory.max": f"{MIB}\n", "memory.current": "0\n"})
    assert available_memory_bytes() == MIB
    assert sweep_module.default_memory_budget() == MIB // 2


# ----------------------------------------------------------------------------------------------------------------------
# shared caps


@pytest.mark.parametrize("key,option,cap", [("heads", "--heads", limits.HEADS_MAX),
                                            ("batch", "--batch", limits.BATCH_MAX),
                                            ("reps", "--repeats", limits.REPEATS_MAX)])
def test_the_dashboard_and_the_command_line_enforce_the_same_caps(key, option, cap, capsys):
    at_cap, _ = parse_query({key: str(cap)})
    over, notices = parse_query({key: str(cap + 1)})
    assert getattr(at_cap, key) == cap and getattr(over, key) == cap and notices  # a link is clamped, with a notice
    assert main(["bench", "--n", "64", option, str(cap), "--out", "x.csv", "--help"]) == 0  # the cap itself parses
    assert main(["bench", "--n", "64", option, str(cap + 1), "--out", "x.csv"]) == 2  # one more is refused
    assert f"between 1 and {cap}" in capsys.readouterr().err


def test_both_cap_the_length_of_a_sweep_list_and_the_tiles_per_call(capsys):
    too_many = [str(64 * (i + 1)) for i in range(limits.LIST_MAX + 1)]
    settings, _ = parse_query({"ns": ",".join(too_many)})
    assert len(settings.ns) == limits.LIST_MAX
    assert main(["bench", "--n", *too_many, "--out", "x.csv"]) == 2
    assert f"at most {limits.LIST_MAX}" in capsys.readouterr().err
    assert limits.tiles_per_call(1000, 64, 128) == 16 * 8  # ceil(1000 / 64) x ceil(1000 / 128)
    assert limits.tile_problem([64, 16384], 64, 64) is None  # 256 x 256 = TILES_MAX exactly
    assert "at least 65" in limits.tile_problem([16385], 64, 64)


# ----------------------------------------------------------------------------------------------------------------------
# the dashboard: input-memory cap in work_guard, the time budget of every run


def guard(**overrides) -> str | None:
    args = {"ns": (128,), "d": 64, "br": 64, "bc": 64, "batch": 1, "heads": 1, "reps": 5, "n_impls": 4}
    args.update(overrides)
    return jobs.work_guard(args.pop("ns"), **args)


def test_work_guard_caps_the_memory_of_the_inputs():
    problem = guard(d=512, batch=64, heads=64, reps=1, n_impls=1, dtype="float64")  # a hostile link: 12 GiB of inputs
    assert problem is not None
    assert "12.0 GiB" in problem and "268,435,456 elements each" in problem  # what it needs, and why
    assert "The live cap is 1.0 GiB" in problem  # the cap
    assert "Lower batch, heads, d or the largest N" in problem  # how to fix it
    assert guard(d=512, batch=64, heads=64, reps=1, n_impls=1) is not None  # float32 (the default) counts more
    assert guard() is None and guard(ns=(8192,), d=512, reps=1, n_impls=1) is None  # big but sane


def test_work_guard_keeps_its_tile_and_flop_caps():
    assert "tiles per call" in guard(ns=(16384,), br=8, bc=8)
    assert "TFLOP" in guard(ns=(16384,), batch=64, heads=64)


def fake_frame(status: str) -> pd.DataFrame:
    row = dict.fromkeys(COLUMNS, 0)
    row.update(impl="flash", N=8, status=status)
    return pd.DataFrame([row], columns=list(COLUMNS))


def test_live_runs_carry_a_time_budget_and_a_cut_short_result_is_not_cached(monkeypatch):
    calls = []

    def fake_run_sweep(ns, **kwargs):
        calls.append(kwargs["time_budget_s"])
        return fake_frame(f"{TIME_BUDGET_STATUS} of 120 s used up before this row ran" if ns == [8] else "ok")

    monkeypatch.setattr(measure_jobs, "run_sweep", fake_run_sweep)
    jobs.sweep.clear()  # counted from an empty cache, whatever ran before
    args = ((8,), 7, 4, 4, False, None, ("flash",), 1, 1, "float32", "cpu", 1, 1)
    for _ in range(2):
        assert jobs.sweep(*args)["status"].iloc[0].startswith(TIME_BUDGET_STATUS)
    assert calls == [limits.LIVE_TIME_BUDGET_S] * 2  # cut short: measured again on the second request
    complete = ((9,), *args[1:])
    for _ in range(2):
        assert jobs.sweep(*complete)["status"].iloc[0] == "ok"
    assert len(calls) == 3  # a complete result is cached: the second request reuses it


def test_the_block_sweep_and_its_reference_share_one_time_budget(monkeypatch):
    budgets = []
    def fake(*a, **k):
        budgets.append(k["time_budget_s"])
        return fake_frame("ok")

    monkeypatch.setattr(measure_jobs, "run_block_sweep", fake)
    monkeypatch.setattr(measure_jobs, "run_sweep", fake)
    jobs.block_sweep(8, (4,), 7, False, None, 1, 1, "float32", "cpu", 1, 1, time_budget_s=30.0)
    assert budgets[0] == 30.0 and 0 <= budgets[1] <= 30.0  # what the tiled sweep left over


def test_a_link_asking_for_12_gib_of_inputs_is_refused_with_the_input_memory_message(make_app):
    at = make_app(view="bench", ns="128", d="512", batch="64", heads="64", reps="1", impls="flash2", dtype="float64")
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert "tensors need" in error and "live cap is 1.0 GiB" in error
    assert "bench_run" not in {b.key for b in at.button}  # nothing to run


def test_rows_the_time_budget_stopped_are_listed_on_the_page(make_app, monkeypatch):
    ticks = iter(range(10 ** 6))
    monkeypatch.setattr(sweep_module, "_now", lambda: 1000.0 * next(ticks))  # every look: +1000 s, over 120 s
    jobs.sweep.clear()  # measured now, not served from an earlier test's cache
    at = make_app(view="bench", ns="24", impls="flash2", d="5", reps="1")
    at.button(key="bench_run").click().run()
    assert not at.exception
    (warning,) = [w.value for w in at.warning]
    block = parse_query(dict(at.query_params))[0].bench_block  # the Benchmark's own tile size
    assert f"**FA2 at {block} × {block} tiles, N = 24, d = 5**: not run, the run's time budget was used up" in warning
    assert "**Sequence lengths N**" in warning and "raise" not in warning  # a control of this view, not the library's
