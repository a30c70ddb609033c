"""The C allocator's thresholds are pinned while a timing runs and handed back after it (flashviz.measure.allocator)."""

from __future__ import annotations

import pytest
import torch

from flashviz.measure import allocator
from flashviz.measure.allocator import (
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    MMAP_THRESHOLD,
    TRIM_AFTER,
    TRIM_THRESHOLD,
    steady_allocator,
)
from flashviz.measure.context import run_context
from flashviz.measure.timing import time_calls


class FakeLibc:
    """Records the mallopt and malloc_trim calls a block makes."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("malloc_trim", pad))
        return 1


@pytest.fixture
def libc(monkeypatch: pytest.MonkeyPatch) -> FakeLibc:
    fake = FakeLibc()
    monkeypatch.setattr(allocator, "LIBC", fake)
    return fake


PIN = [("mallopt", M_MMAP_THRESHOLD, MMAP_THRESHOLD), ("mallopt", M_TRIM_THRESHOLD, TRIM_THRESHOLD)]
RESTORE = [("mallopt", M_TRIM_THRESHOLD, TRIM_AFTER), ("malloc_trim", 0)]


def test_a_block_pins_both_thresholds_and_restores_trim_after(libc: FakeLibc) -> None:
    with steady_allocator() as pinned:
        assert pinned and libc.calls == PIN  # pinned before the first timed call
    assert libc.calls == PIN + RESTORE
    assert MMAP_THRESHOLD == 32 << 20 and TRIM_AFTER == 2 * MMAP_THRESHOLD < TRIM_THRESHOLD


def test_nested_blocks_pin_once_and_restore_once_even_when_the_inner_one_raises(libc: FakeLibc) -> None:
    with steady_allocator():
        with pytest.raises(RuntimeError), steady_allocator():
            raise RuntimeError("a timed call failed")
        assert libc.calls == PIN  # the outer timing still runs pinned
    assert libc.calls == PIN + RESTORE


def test_every_timing_runs_inside_a_pinned_block(libc: FakeLibc) -> None:
    seen = []
    time_calls({"probe": lambda: seen.append(list(libc.calls))}, warmup=1, repeats=2)
    assert seen and all(calls == PIN for calls in seen)
    assert libc.calls == PIN + RESTORE


def test_without_glibc_nothing_is_changed_and_the_context_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator, "LIBC", None)
    with steady_allocator() as pinned:
        assert pinned is False
    assert run_context(1)["allocator"].startswith("system malloc")


@pytest.mark.skipif(allocator.LIBC is None, reason="needs glibc")
def test_the_context_names_the_real_glibc_and_its_thresholds() -> None:
    text = run_context(1)["allocator"]
    assert text.startswith("glibc 2.") and f"{MMAP_THRESHOLD >> 20} MiB" in text
    with steady_allocator():  # the real mallopt accepts both values
        torch.zeros(1 << 20).sum()
