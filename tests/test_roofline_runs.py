"""The Roofline tab's measurement layer (flashviz.measure.roofline_runs) and its wrapper: a timing without naive
claims no speedup, a cancelled timing raises and leaves nothing cached, and the tile counts quoted are the
schedule's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flashviz.measure import roofline_runs
from flashviz.measure.progress import Cancelled
from flashviz.model.roofline import Device
from flashviz.ui import roofline
from flashviz.ui.state import Settings


def test_a_timing_without_naive_says_there_is_no_speedup_and_draws_no_bar():
    """Naive refused by the memory guard: the tiled kernels' stars stay, no speedup is claimed or drawn."""
    s = Settings(n=128, d=16, br=32, bc=32, heads=1)
    cpu = Device(roofline_runs.CPU_NAME, {"float32": 1e10}, 1e9, None, "fake CPU: 10 GFLOP/s, 1 GB/s", measured=True)
    df = pd.DataFrame({"impl": ["naive", "flash", "flash2"], "status": ["not run: S and P need 2 TiB", "ok", "ok"],
                       "flops": [4e6, 4e6, 4e6], "hbm_bytes": [1e6, 5e5, 4e5], "time_s": [np.nan, 0.004, 0.002],
                       "device_name": roofline_runs.CPU_TIMED})
    timed = roofline_runs.timed_points(df)
    assert timed["algorithm"].tolist() == ["kv_outer", "q_outer"] and timed["speedup_vs_naive"].isna().all()
    assert timed["attainable_flops"].tolist() == [1e9, 2e9]  # 4 MFLOP in 4 ms and in 2 ms
    points = roofline.points_of(s, cpu)  # the GPUs at float16, this CPU at float32
    text = roofline.timed_md(timed, points, s, tiles=16)
    assert "no speedup to show (naive or the tiled kernels did not run)" in text
    assert "FA1 1 GFLOP/s (" in text and "FA2 2 GFLOP/s (" in text and "fall short" not in text


def test_a_cancelled_timing_raises_and_is_not_cached_and_progress_spans_the_run():
    args = (64, 8, 32, 32, False, None, 1, 1, "float32", "float16", (), 1)
    roofline.measure.clear()

    def cancel(done: int, total: int, label: str) -> None:
        if "timing" in label:
            raise Cancelled("cancelled by the test")

    with pytest.raises(Cancelled):
        roofline.measure(*args, _progress=cancel)
    seen: list = []
    df = roofline.measure(*args, _progress=lambda *a: seen.append(a))
    assert seen and set(df["status"]) == {"ok"}  # measured anew after the cancel
    assert [s[0] for s in seen] == sorted(s[0] for s in seen) and seen[-1][:2] == (3, 3)  # 3 kernels on the CPU
    again: list = []
    assert roofline.measure(*args, _progress=lambda *a: again.append(a)).equals(df) and not again  # cached now


def test_the_computed_tiles_quoted_are_the_schedules():
    assert roofline_runs.computed_tiles(128, 32, 32, False, None) == 16
    assert roofline_runs.computed_tiles(100, 32, 32, True, None) == 10  # 4 x 4 tiles, ragged: lower triangle
    assert roofline_runs.computed_tiles(256, 32, 32, False, (32, 0)) == 15  # a band: 8 diagonal + 7 below
