"""Timing that knows it was disturbed: every timed call records its wall and CPU time; a call during which the process
lost its cores is set aside and repeated within the budget; the threads come from the cores other work leaves free;
and a run reports its load, threads and calls set aside (flashviz.measure.load)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from dataclasses import replace

import pandas as pd
import pytest
import torch

from flashviz.measure.load import (
    DISTURBED_SHARE,
    JUDGED_FROM_S,
    Load,
    LoadMeter,
    RunReport,
    ThreadChoice,
    choose_threads,
    disturbed,
    tallying,
    wait_clock,
)
from flashviz.measure.timing import thread_cap, threads_asked, threads_set_to, time_calls, timing_of, wait_within
from flashviz.measure.verdict import BUSY, FEWER_THREADS, as_estimate, compare, row_estimate, sentence
from flashviz.measure.worker import InlineWorker


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_a_call_that_spent_a_quarter_of_its_time_off_the_cpu_is_set_aside():
    walls = [0.010, 0.010, 0.010, 0.010]
    cpus = [0.0099, 0.0098, 0.0099 * 0.7, 0.0099 * 0.8]  # the third was on the CPU 69% of its time, the fourth 79%
    assert disturbed(walls, cpus, threads=1) == [False, False, True, False]
    assert 0.69 < DISTURBED_SHARE < 0.79


def test_on_one_thread_every_call_off_the_cpu_is_set_aside_even_when_all_are():
    assert disturbed([0.01] * 5, [0.004] * 5, threads=1) == [True] * 5


def test_on_two_threads_the_kernels_own_typical_share_is_the_measure():
    walls = [0.01] * 6
    cpus = [0.019, 0.0185, 0.019, 0.0188, 0.010, 0.019]  # a two-thread kernel that lost one core in its fifth call
    assert disturbed(walls, cpus, threads=2) == [False, False, False, False, True, False]


def test_a_call_whose_threads_waited_for_a_core_is_set_aside_though_its_cpu_share_looks_whole():
    """Two threads: one spins at the barrier (CPU time) while its peer waits for a core (no CPU time, but a wait)."""
    walls = [0.010, 0.010, 0.030, 0.010, 0.030]
    cpus = [0.019, 0.019, 0.057, 0.019, 0.057]  # the third and fifth look as busy as the others
    waits = [0.0, 0.0005, 0.020, 0.001, 0.0076]  # but the third waited 2/3 of its wall time, the fifth a quarter
    assert disturbed(walls, cpus, threads=2) == [False] * 5  # the CPU time alone sees nothing
    assert disturbed(walls, cpus, threads=2, waits=waits) == [False, False, True, False, True]
    assert disturbed(walls, cpus, threads=2, waits=[0.0, 0.0, 0.0074, 0.0, 0.0]) == [False] * 5  # under a quarter


def test_a_timing_with_a_wait_clock_sets_aside_the_calls_that_waited():
    now, cpu, waited, calls = [0.0], [0.0], [0.0], [0]

    def call() -> None:  # 1 s each, all of it on the CPU; the second also waited 0.5 s (a peer thread's wait)
        calls[0] += 1
        now[0] += 1.0
        cpu[0] += 1.0
        waited[0] += 0.5 if calls[0] == 2 else 0.0

    t = time_calls({"k": call}, warmup=0, repeats=3, threads=2, clock=lambda: now[0], cpu_clock=lambda: cpu[0],
                   wait_clock=lambda: waited[0])["k"]
    assert t.aside == (False, True, False, False) and t.waits == (0.0, 0.5, 0.0, 0.0) and t.repeats == 3
    no_waits = time_calls({"k": call}, warmup=0, repeats=3, threads=2, clock=lambda: now[0],
                          cpu_clock=lambda: cpu[0])["k"]
    assert no_waits.waits == () and no_waits.set_aside == 0  # injected clocks and no wait clock: nothing to see


def test_on_one_thread_a_wait_for_a_core_is_taken_off_the_calls_time_not_set_aside():
    now, cpu, waited, calls = [0.0], [0.0], [0.0], [0]

    def call() -> None:  # 1 s each on the CPU; the second waited 2 s for a core first, the third slept 1 s
        calls[0] += 1
        gone = {2: 2.0, 3: 1.0}.get(calls[0], 0.0)
        now[0] += 1.0 + gone
        cpu[0] += 1.0
        waited[0] += gone if calls[0] == 2 else 0.0

    t = time_calls({"k": call}, warmup=0, repeats=3, threads=1, clock=lambda: now[0], cpu_clock=lambda: cpu[0],
                   wait_clock=lambda: waited[0])["k"]
    assert t.calls == (1.0, 3.0, 2.0, 1.0) and t.waits == (0.0, 2.0, 0.0, 0.0)
    assert t.samples == (1.0, 1.0, 1.0) and t.aside == (False, False, True, False)  # the sleep is no wait
    assert t.waited == 1 and t.set_aside == 1 and t.median == 1.0
    with tallying() as tally:
        time_calls({"k": call}, warmup=0, repeats=1, threads=1, clock=lambda: now[0], cpu_clock=lambda: cpu[0],
                   wait_clock=lambda: waited[0] + 0.75 * now[0])  # a wait clock that runs at 3/4 of the wall
    assert tally.waited == 1 and tally.set_aside == 0
    # with two threads the same wait sets the call aside: a peer's wait holds up the others by an uncounted amount
    two = timing_of([1.0, 3.0, 1.0], 2, "cpu", cpu=[2.0, 2.0, 2.0], waits=[0.0, 2.0, 0.0])
    assert two.aside == (False, True, False) and two.samples == (1.0, 1.0) and two.waited == 0


def test_a_wait_read_after_the_call_counts_only_as_far_as_the_call_reached():
    assert wait_within(0.0, 0.002, 0.0021) == 0.0
    assert wait_within(0.001, 0.002, 0.002) == 0.001  # the whole span was the call
    assert abs(wait_within(0.005, 0.001, 0.0051) - 0.0009) < 1e-12  # 4.1 ms of the span outside: 0.9 ms is left
    assert wait_within(0.010, 0.002, 0.002) == 0.002  # two threads' waits: at most the call's wall time
    timed = timing_of([0.01] * 3, 2, "cpu", cpu=[0.02] * 3, waits=[0.0, 0.005, 0.0])
    assert timed.aside == (False, True, False) and timed.waits == (0.0, 0.005, 0.0)


def test_calls_too_short_to_judge_are_never_set_aside():
    short = JUDGED_FROM_S / 10
    assert disturbed([short, short], [0.0, 0.0], threads=1) == [False, False]


def test_a_timing_sets_aside_its_disturbed_calls_and_runs_more_in_their_place():
    now, cpu, calls = [0.0], [0.0], [0]

    def call() -> None:  # every call takes 1 s; the second and third lose 0.5 s of it off the CPU
        calls[0] += 1
        now[0] += 1.0
        cpu[0] += 0.5 if calls[0] in (2, 3) else 1.0

    t = time_calls({"k": call}, warmup=0, repeats=4, threads=1, clock=lambda: now[0], cpu_clock=lambda: cpu[0])["k"]
    assert t.set_aside == 2 and t.repeats == 4 and len(t.calls) == 6  # two more calls in place of the two set aside
    assert t.aside == (False, True, True, False, False, False) and t.cpu_share == 1.0


def test_a_machine_too_busy_for_clean_calls_leaves_the_median_unsettled():
    t = timing_of([1.0] * 8, 1, "cpu", cpu=[0.3] * 6 + [1.0] * 2)
    assert t.too_busy and not t.converged and t.set_aside == 6 and t.repeats == 2
    clean = timing_of([1.0] * 8, 1, "cpu", cpu=[1.0] * 8)
    assert clean.converged and not clean.too_busy


def test_a_median_the_run_left_unsettled_names_no_winner_however_narrow_its_interval():
    fast = dict(time_s=1e-3, time_lo_s=0.99e-3, time_hi_s=1.01e-3, repeats=20, status="ok")
    slow = row_estimate(dict(time_s=2e-3, time_lo_s=1.98e-3, time_hi_s=2.02e-3, repeats=20, status="ok"))
    clean = compare(slow, row_estimate({**fast, "set_aside": 20}), ("naive", "FA2"))  # as many set aside as kept
    assert clean.faster == "FA2"
    busy = compare(slow, row_estimate({**fast, "set_aside": 21}), ("naive", "FA2"))  # more: the run was too busy
    assert busy.faster is None and busy.settle == BUSY and busy.b.busy and not busy.a.busy
    assert "too busy for clean timings" in sentence(busy) and "±" not in sentence(busy)
    # a Timing the machine left too busy says so in a comparison too
    crowded = timing_of([1e-3] * 8, 1, "cpu", cpu=[0.3e-3] * 6 + [1e-3] * 2)
    v = compare(timing_of([2e-3] * 8, 1, "cpu"), crowded)
    assert v.settle == BUSY and v.faster is None and as_estimate(crowded).busy


def test_real_clocks_see_a_call_that_waited_off_the_cpu():
    """Half of each odd call is spent asleep, as a descheduled call's is: the process's own clocks set it aside."""
    count = [0]

    def call() -> None:
        count[0] += 1
        spin(0.004)
        if count[0] % 2:
            time.sleep(0.004)

    t = time_calls({"k": call}, warmup=0, repeats=6, threads=1)["k"]
    slept = t.aside[0::2]  # calls 1, 3, 5, ...: on the CPU half their time at most, however quiet the machine
    assert len(t.calls) >= 6 and all(slept) and t.set_aside >= len(slept)
    if not t.too_busy:  # the calls that did not sleep, unless the machine took their cores too
        assert t.median < 0.0075


WAITS_BESIDE_A_BUSY_CORE = """
import json, os, subprocess, sys
core = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {core})  # before torch starts its threads: they all share this one core
import torch
from flashviz.measure.timing import time_calls
busy = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                        preexec_fn=lambda: os.sched_setaffinity(0, {core}))
try:
    a = torch.randn(384, 384)
    out = {}
    for threads in (2, 1):
        t = time_calls({"mm": lambda: [torch.mm(a, a) for _ in range(8)]}, warmup=2, repeats=6, threads=threads)["mm"]
        out[threads] = {"calls": t.calls, "cpu": t.cpu, "waits": t.waits, "aside": t.aside, "samples": t.samples,
                        "waited": t.waited}
finally:
    busy.kill()
    busy.wait()
print(json.dumps(out))
"""


@pytest.mark.skipif(wait_clock() is None, reason="the scheduler's statistics are not readable on this system")
def test_real_waits_show_threads_that_shared_their_core_with_a_busy_process():
    """Torch's threads and a busy process on one core: the scheduler counts the waits. At 2 threads the calls that
    waited are set aside; at 1 the wait is taken off each call's time, and the call is kept."""
    out = subprocess.run([sys.executable, "-c", WAITS_BESIDE_A_BUSY_CORE], capture_output=True, text=True,
                         timeout=120, check=True)
    runs = json.loads(out.stdout.strip().splitlines()[-1])
    for t in runs.values():
        waited = [q > (1 - DISTURBED_SHARE) * w for q, w in zip(t["waits"], t["calls"], strict=True)]
        assert sum(waited) >= len(waited) / 2  # the busy process held the core for half of it, or thereabouts
        assert all(q <= w for q, w in zip(t["waits"], t["calls"], strict=True))
    two, one = runs["2"], runs["1"]
    assert all(a for a, q, w in zip(two["aside"], two["waits"], two["calls"], strict=True)
               if q > (1 - DISTURBED_SHARE) * w)  # two threads: a call that waited is set aside
    kept = [w - q for w, q, a in zip(one["calls"], one["waits"], one["aside"], strict=True) if not a]
    assert one["samples"] == kept and one["waited"] >= len(one["calls"]) / 2  # one: its wait is taken off
    assert len(kept) >= len(one["calls"]) - 1  # and the call is kept: it lost no time but the wait


def test_the_thread_count_follows_the_free_cores():
    n = choose_threads(1, 0.0).cores
    assert choose_threads(n, 0.0).threads == n
    assert choose_threads(n, float(n)).threads == 1  # every core busy: one thread, never zero
    if n >= 2:
        assert choose_threads(2, n - 0.7).threads == 1 and choose_threads(2, n - 2.0).threads == 2
    assert choose_threads(3, math.nan).threads == 3  # unknown here: as allowed
    with pytest.raises(ValueError, match="asked must be an int >= 1"):
        choose_threads(0, 0.0)


def test_a_thread_cap_bounds_every_timing_inside_it():
    before = torch.get_num_threads()
    with thread_cap(1), threads_set_to(4) as n:
        assert n == 1 == torch.get_num_threads()
    assert torch.get_num_threads() == before


def test_a_timing_under_a_thread_cap_records_the_threads_it_was_asked_for():
    with thread_cap(1):
        (capped,) = time_calls({"mm": torch.mm}, torch.ones(8, 8), torch.ones(8, 8), warmup=0, repeats=2,
                               threads=2).values()
        with threads_set_to(2):  # an outer block asked for 2: a timing inside that keeps the count asks for 2 too
            assert threads_asked() == 2
            (inner,) = time_calls({"mm": torch.mm}, torch.ones(8, 8), torch.ones(8, 8), warmup=0,
                                  repeats=2).values()
        (one,) = time_calls({"mm": torch.mm}, torch.ones(8, 8), torch.ones(8, 8), warmup=0, repeats=2,
                            threads=1).values()
    assert (capped.threads, capped.threads_asked, capped.capped) == (1, 2, True)
    assert (inner.threads, inner.threads_asked, inner.capped) == (1, 2, True)
    assert (one.threads, one.threads_asked, one.capped) == (1, 1, False)
    assert capped.row()["threads_asked"] == 2 and row_estimate({**capped.row(), "status": "ok"}).capped
    with thread_cap(1):  # a kernel timed on another device (a GPU's) is not ranked by the CPU's threads
        (elsewhere,) = time_calls({"k": lambda: None}, warmup=0, repeats=2, threads=2, sync_device="meta").values()
    assert (elsewhere.threads, elsewhere.threads_asked, elsewhere.capped) == (1, 1, False)


def test_a_median_measured_with_fewer_threads_than_asked_names_no_winner():
    """The kernels' ranking depends on the threads (naive gains more from a second thread than a tiled loop): a
    winner at the threads that ran is no claim at the threads asked, however far apart the intervals."""
    fast = dict(time_s=1e-3, time_lo_s=0.99e-3, time_hi_s=1.01e-3, repeats=20, status="ok")
    slow = dict(time_s=2e-3, time_lo_s=1.98e-3, time_hi_s=2.02e-3, repeats=20, status="ok")
    at = {n: dict(threads=n, threads_asked=asked) for n, asked in ((1, 2), (2, 2))}
    capped = compare(row_estimate({**slow, **at[1]}), row_estimate({**fast, **at[1]}), ("naive", "FA2"))
    assert capped.disjoint and capped.faster is None and capped.settle == FEWER_THREADS and capped.a.capped
    said = sentence(capped)
    assert "measured with 1 thread of the 2 asked for" in said and "ask for 1 thread" in said and "faster" not in said
    assert compare(row_estimate({**slow, **at[2]}), row_estimate({**fast, **at[2]})).faster == "b"
    asked_one = dict(threads=1, threads_asked=1)  # asked for the threads that ran: a claim at those threads
    assert compare(row_estimate({**slow, **asked_one}), row_estimate({**fast, **asked_one})).faster == "b"
    assert compare(row_estimate(slow), row_estimate(fast)).faster == "b"  # a row that does not say: as it ran
    # a Timing says it too
    t = timing_of([1e-3] * 8, 1, "cpu", threads_asked=2)
    v = compare(timing_of([2e-3] * 8, 1, "cpu", threads_asked=2), t)
    assert v.settle == FEWER_THREADS and v.faster is None and as_estimate(t).capped


def test_a_sweep_the_worker_capped_names_no_winner_on_any_view(monkeypatch):
    """Under load the timing worker runs a sweep with fewer threads than the sidebar asks for: its rows say so, and
    every view's words say why nothing is named and which control would let it be."""
    import flashviz.measure.load as load
    from flashviz.measure.sweep import run_sweep
    from flashviz.views.bench.sentences import speed_verdicts
    from flashviz.views.decode.sentences import _settle
    from flashviz.views.masks.sentences import settle_words

    monkeypatch.setattr(load, "busy_now", lambda seconds=load.BUSY_SAMPLE_S: float(load.cores()))  # no core free
    for asked in (2, 1):
        df, report = InlineWorker().run_reported(run_sweep, ([32],), dict(d=8, block_size=16, repeats=2,
                                                                          impls=("naive", "flash2"), threads=asked))
        assert df["threads"].tolist() == [1, 1] and df["threads_asked"].tolist() == [asked, asked]
        if asked == 2:  # the run says it under the result too: two timings capped, and what would rank them
            assert (report.capped, report.threads, report.threads_asked) == (2, 1, 2)
            assert "1 thread of the 2 asked (no winner named)" in report.short()
            assert "2 measurement(s) ran with 1 thread of the 2 asked for" in report.capped_sentence()
        else:
            assert report.capped == 0 and report.capped_sentence() is None and "asked" not in report.short()
    fast = dict(impl="flash2", N=512, time_s=1e-3, time_lo_s=0.99e-3, time_hi_s=1.01e-3, repeats=20, status="ok")
    slow = dict(impl="naive", N=512, time_s=2e-3, time_lo_s=1.98e-3, time_hi_s=2.02e-3, repeats=20, status="ok")
    ran = dict(threads=1, threads_asked=2)
    ((_, _, v),) = speed_verdicts(pd.DataFrame([{**slow, **ran}, {**fast, **ran}]))
    assert v.faster is None and v.settle == FEWER_THREADS
    assert settle_words(v) == ("too close to call here: measured with 1 thread of the 2 asked for (other work kept "
                               "cores busy); run again when the cores are free, or set **CPU threads** to 1 in the "
                               "sidebar")
    assert _settle([v]).startswith("they were measured with 1 thread of the 2 asked for")


def test_a_sweeps_rows_and_its_run_report_count_the_waits_taken_off(monkeypatch):
    """On one thread, every call whose wait for a core was taken off is counted in its row, in the run's report and in
    the CSV's columns. The wait clock here runs at half the wall clock: each call waited about half its time."""
    import flashviz.measure.timing as timing
    from flashviz.measure.sweep import run_sweep

    class HalfTheWall:  # a wait clock (flashviz.measure.load.RunQueueWait) that runs at half the wall clock
        def __call__(self) -> float:
            return 0.5 * time.perf_counter()

        def close(self) -> None:
            pass

    monkeypatch.setattr(timing, "run_queue_clock", lambda threads=0: HalfTheWall())
    df, report = InlineWorker().run_reported(run_sweep, ([64],), dict(d=8, block_size=16, repeats=3,
                                                                      impls=("naive", "flash2"), threads=1))
    assert df["threads"].tolist() == [1, 1] and df["repeats"].tolist() == [3, 3]
    assert (df["waited"] >= df["repeats"]).all()  # every kept call waited (and any set aside, if the machine took it)
    n = int(df["waited"].sum())
    assert report.waited == n and f"{n} waits for a core taken off" in report.short()
    assert report.columns()["calls_waited"] == n and f"and {n} waited for a core" in report.sentence()


def test_the_backward_price_names_no_faster_side_from_a_capped_or_crowded_run():
    from flashviz.views.backward.data import recompute_price

    p = recompute_price(32, 8, block_q=16, block_k=16, repeats=2, threads=1)
    assert p.threads_asked == 1 and len(p.set_aside) == 3
    fixed = replace(p, time_s=(1e-3, 2e-3, 1e-3), time_lo_s=(0.99e-3, 1.98e-3, 0.99e-3),
                    time_hi_s=(1.01e-3, 2.02e-3, 1.01e-3), timed=(20, 20, 20), set_aside=(0, 0, 0))
    assert fixed.time_verdict().faster == "the tiled kernel"
    assert replace(fixed, threads_asked=2).time_verdict().settle == FEWER_THREADS
    assert replace(fixed, set_aside=(21, 0, 0)).time_verdict().settle == BUSY


def test_the_threads_follow_the_load_over_the_seconds_before_a_run_not_a_burst_as_it_arrives():
    from flashviz.measure.load import Snapshot, other_busy_before

    def noted(cores_busy: list[float]) -> list[Snapshot]:  # a snapshot every 0.25 s, other work as given between
        marks, busy = [Snapshot(0.0, 100.0, 1.0)], 100.0
        for k, c in enumerate(cores_busy, 1):
            busy += 0.25 * c + 0.025  # the machine's busy seconds include ours (0.1 of a core), which never count
            marks.append(Snapshot(0.25 * k, busy, 1.0 + 0.025 * k))
        return marks

    def before(cores_busy: list[float]) -> float:
        *history, now = noted(cores_busy)
        return other_busy_before(history, now)

    page = [0.05] * 4 + [1.6, 1.2, 0.9, 0.4]  # the page that asked loads, then the click: bursts
    assert before(page) == pytest.approx(0.05) and choose_threads(2, before(page)).threads == 2
    loaded = [1.0 + x for x in page]  # the same beside a process that keeps a core busy
    assert before(loaded) == pytest.approx(1.05) and choose_threads(2, before(loaded)).threads == 1
    assert other_busy_before([], Snapshot(1.0, 1.0, 1.0)) is None  # nothing noted yet: measured as the run starts


def test_the_load_meter_sees_another_process_keep_a_core_busy():
    busy = "import time\nend = time.time() + 1.5\nwhile time.time() < end: pass"
    spinner = subprocess.Popen([sys.executable, "-c", busy])
    try:
        time.sleep(0.3)  # the spinner is up
        with LoadMeter() as m:
            time.sleep(0.6)
    finally:
        spinner.wait(10)
    assert m.load.known and m.load.other_busy >= 0.6 and m.load.seconds >= 0.6


def test_a_run_reports_its_threads_load_and_calls_set_aside():
    def job(progress=None):
        return time_calls({"sleepy": lambda: (spin(0.003), time.sleep(0.003))}, warmup=0, repeats=3, threads=1)

    timings, report = InlineWorker().run_reported(job)
    t = timings["sleepy"]
    assert report.calls == len(t.calls) and report.set_aside == t.set_aside >= 3
    assert report.too_busy == 1 and report.busy_sentence().startswith("The machine was too busy for clean timings")
    assert f"{report.set_aside} of {report.calls} timed calls were set aside" in report.sentence()
    assert report.columns()["calls_set_aside"] == report.set_aside and report.columns()["flashviz_version"]


def test_tallies_count_only_inside_their_block():
    time_calls({"a": lambda: None}, warmup=0, repeats=2)
    with tallying() as t:
        time_calls({"a": lambda: None, "b": lambda: None}, warmup=0, repeats=3)
    assert (t.calls, t.timings, t.set_aside) == (6, 2, 0)


def test_report_sentences_state_their_numbers():
    r = RunReport(ThreadChoice(2, 1, 2, 1.26), Load(12.0, 2, 1.14, 1.5, 2.25), 40, 0, 0, "2026-12-06T05:00:00", "0.1")
    text = r.sentence()
    assert "1 thread of the 2 allowed" in text and "1.3 of 2 cores" in text and "1.1 of 2 cores" in text
    assert "none of its 40 timed calls was disturbed" in text and r.busy_sentence() is None


def test_an_adaptive_timing_whose_every_call_is_disturbed_stops_at_its_limit_unsettled():
    from flashviz.measure.timing import Adaptive

    now, cpu = [0.0], [0.0]

    def call() -> None:  # on the CPU a third of its time, every time
        now[0] += 1.0
        cpu[0] += 0.3

    t = time_calls({"k": call}, warmup=0, repeats=Adaptive(max_repeats=9, budget_s=None), threads=1,
                   clock=lambda: now[0], cpu_clock=lambda: cpu[0])["k"]
    assert len(t.calls) == 9 and t.set_aside == 9 and t.too_busy and not t.converged
