"""time_calls / time_call report their progress between calls, in order, and stop when the callback raises.

The calls are counted by the timed functions themselves and the clock is a fake one advanced by them, so nothing here
depends on how long anything takes.
"""

from __future__ import annotations

import types

import pytest
import torch

from flashviz.measure import timing
from flashviz.measure.progress import Cancelled, stage
from flashviz.measure.timing import time_call, time_calls


def recording(log: list, name: str):
    def fn() -> None:
        log.append(("call", name))

    return fn


def test_progress_is_reported_before_every_call_and_once_at_the_end_in_interleaved_order():
    log: list = []
    fns = {"a": recording(log, "a"), "b": recording(log, "b")}
    time_calls(fns, warmup=1, repeats=3, threads=1, progress=lambda done, total, label: log.append(
        ("progress", done, total, label)))
    reports = [e for e in log if e[0] == "progress"]
    assert [r[1] for r in reports] == list(range(9)) and {r[2] for r in reports} == {8}  # 2 x (1 + 3) calls
    assert [r[3] for r in reports] == ["warm-up 1 of 1: a", "warm-up 1 of 1: b",
                                       "repeat 1 of 3: a", "repeat 1 of 3: b", "repeat 2 of 3: a", "repeat 2 of 3: b",
                                       "repeat 3 of 3: a", "repeat 3 of 3: b", "timed"]
    for i, event in enumerate(log):  # each report comes right before the call it names, with the calls done so far
        if event[0] == "progress":
            assert event[1] == sum(e[0] == "call" for e in log[:i])
            if event[3] != "timed":
                assert log[i + 1] == ("call", event[3].split(": ")[1])


def test_time_call_reports_through_the_same_loop():
    seen: list = []
    calls = []
    t = time_call(lambda x: calls.append(x), 7, warmup=2, repeats=4, progress=lambda *a: seen.append(a))
    assert calls == [7] * 6 and len(t.samples) == 4
    assert [s[0] for s in seen] == list(range(7)) and seen[-1] == (6, 6, "timed")
    assert seen[0][2] == "warm-up 1 of 2: <lambda>" and seen[2][2] == "repeat 1 of 4: <lambda>"


@pytest.mark.parametrize("stop_at", [0, 1, 3, 5])
def test_a_raising_callback_stops_the_timing_and_restores_the_thread_count(stop_at):
    calls: list = []
    before = torch.get_num_threads()

    def progress(done: int, total: int, label: str) -> None:
        if done == stop_at:
            raise Cancelled("stop")

    with pytest.raises(Cancelled, match="stop"):
        time_calls({"a": recording(calls, "a"), "b": recording(calls, "b")}, warmup=1, repeats=2, threads=1,
                   progress=progress)
    assert len(calls) == stop_at  # no call after the report that raised
    assert torch.get_num_threads() == before


def test_the_reports_are_outside_the_timed_intervals(monkeypatch):
    now = [0.0]  # a fake clock: each timed call takes 1 s of it, each progress report 1000 s
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))

    def call() -> None:
        now[0] += 1.0

    def report(*_: object) -> None:
        now[0] += 1000.0

    t = time_calls({"a": call, "b": call}, warmup=1, repeats=5, threads=1, progress=report)
    assert all(x.samples == (1.0,) * 5 and x.median == 1.0 and x.iqr == 0.0 for x in t.values())


def test_a_bad_progress_is_refused():
    with pytest.raises(TypeError, match="progress must be a callable"):
        time_calls({"a": lambda: None}, progress=42)


def test_stages_move_one_bar_from_zero_to_the_total():
    seen: list = []
    first = stage(lambda *a: seen.append(a), 0, 9, "a: ")  # 3 calls
    second = stage(lambda *a: seen.append(a), 3, 9, "b: ")  # 1 + 5 calls
    time_calls({"x": lambda: None}, warmup=0, repeats=3, progress=first)
    time_calls({"y": lambda: None}, warmup=1, repeats=5, progress=second)
    assert [s[0] for s in seen] == [0, 1, 2, 3, 3, 4, 5, 6, 7, 8, 9]  # one stage ends where the next starts
    assert {s[1] for s in seen} == {9} and seen[4] == (3, 9, "b: warm-up 1 of 1: y")
    assert stage(None, 0, 1) is None


def test_closures_over_a_gpu_name_the_device_to_synchronise(monkeypatch):
    """A closure carries no tensor argument to find the device by: sync_device says which one to wait for after
    every call (recorded here in place of torch.cuda.synchronize, so no GPU is needed)."""
    synced: list = []
    monkeypatch.setattr(timing, "_sync", lambda device: synced.append(str(device)))
    t = time_calls({"a": lambda: None, "b": lambda: None}, warmup=1, repeats=2, sync_device="cuda:0")
    assert synced == ["cuda:0"] * 5 and {x.device for x in t.values()} == {"cuda:0"}  # after warm-up + 4 calls
    synced.clear()
    time_call(lambda: None, warmup=0, repeats=3)
    assert synced == ["cpu"] * 4  # no tensor argument and no sync_device: the CPU (a no-op)
