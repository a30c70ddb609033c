"""The Roofline view's measurement layer (flashviz.views.roof.data) and its wrapper: a timing without naive
claims no speedup, a cancelled timing raises and leaves nothing cached, and the tile counts quoted are the
schedule's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flashviz.app.state import Settings
from flashviz.measure import roof_probe
from flashviz.measure.progress import Cancelled
from flashviz.model.roofline import Device
from flashviz.views.roof import data as roofline_runs
from flashviz.views.roof import page as roofline
from flashviz.views.roof import sentences as roofline_text
from tests._numbers import counted, numbers, shows, stated, value


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
    text = roofline_text.timed_md(timed, points, s.dtype, s.gpu_dtype, s.threads)
    assert "no speedup" in text and "×" not in text  # the verdict: no ratio is stated
    for short, rate in (("FA1", 1.0), ("FA2", 2.0)):  # GFLOP/s: 4 MFLOP in 4 ms and in 2 ms
        assert shows(stated(text, rf"{short} "), rate)
        assert shows(stated(text, rf"{short} ", 1), 100 * rate * 1e9 / points.set_index(["device", "algorithm"]).at[
            (roofline_runs.CPU_NAME, timed["algorithm"].iloc[0 if short == "FA1" else 1]), "attainable_flops"])
    assert roofline_text.gap_md(timed, points, cpu, s.dtype, 16, 32, 32, 256, 1) == ""  # no naive: no gap to tell


def test_a_cancelled_timing_raises_and_is_not_cached_and_progress_spans_the_run():
    args = (64, 8, 32, 32, False, None, 1, 1, "float32", "float16", (), 1)
    roofline.measure.clear()

    def cancel(done: int, total: int, label: str) -> None:
        if "timing" in label:
            raise Cancelled("cancelled by the test")

    with pytest.raises(Cancelled):
        roofline.measure(*args, _progress=cancel)
    seen: list = []
    df, check = roofline.measure(*args, _progress=lambda *a: seen.append(a))
    assert seen and set(df["status"]) == {"ok"}  # measured anew after the cancel
    assert [s[0] for s in seen] == sorted(s[0] for s in seen) and seen[-1][:2] == (3, 3)  # 3 kernels on the CPU
    again: list = []
    df2, check2 = roofline.measure(*args, _progress=lambda *a: again.append(a))
    assert df2.equals(df) and check2 == check and not again  # cached now


def test_the_computed_tiles_quoted_are_the_schedules():
    assert roofline_runs.computed_tiles(128, 32, 32, False, None) == 16
    assert roofline_runs.computed_tiles(100, 32, 32, True, None) == 10  # 4 x 4 tiles, ragged: lower triangle
    assert roofline_runs.computed_tiles(256, 32, 32, False, (32, 0)) == 15  # a band: 8 diagonal + 7 below


# ----------------------------------------------------------------------------------------------------------------------
# this machine's roof bounds what is measured on it


FAKE = Device("cpu", {"float32": 1e10}, 1e9, None, "a fake CPU: 10 GFLOP/s, 1 GB/s: ridge 10 FLOP/byte", measured=True)


def test_a_roof_nothing_beats_is_kept_as_measured_and_not_measured_again():
    check = roof_probe.bounded(FAKE, {"naive": (20.0, 9e9), "flash": (5.0, 4e9)}, lambda: pytest.fail("measured"))
    assert check.roof is FAKE and check.beaten_by == () and not check.measured_again
    text = roofline_text.roof_md(check, pd.DataFrame(), 2)
    assert shows(counted(text, "threads?"), 2)
    assert [value(n) for n in numbers(text.split(" thread")[1])] == [10, 1]  # GFLOP/s and GB/s: the probe's
    assert "beat" not in text and "raised" not in text


def test_a_kernel_above_the_roof_makes_it_measured_again_and_the_best_of_both_is_kept():
    better = Device("cpu", {"float32": 3e10}, 2e9, None, "measured again", measured=True)
    check = roof_probe.bounded(FAKE, {"naive": (20.0, 2e10), "flash": (5.0, 4e9)}, lambda: better)
    assert check.beaten_by == ("naive",) and check.measured_again  # 20 GFLOP/s over the 10 GFLOP/s roof
    assert check.raised_flops is None and check.raised_bandwidth is None  # the second probe is above naive
    assert (check.roof.peak("float32"), check.roof.bandwidth) == (3e10, 2e9)
    timed = pd.DataFrame({"algorithm": ["naive"], "attainable_flops": [2e10], "intensity": [20.0]})
    text = roofline_text.roof_md(check, timed, 2)
    beat = text.split("beat it")[1]  # the verdict, then what beat the roof and the roof it keeps
    assert [value(n) for n in numbers(beat)] == [20, 20, 30, 2]  # naive's GFLOP/s at I, then the best of both roofs
    assert "raised" not in text


def test_a_kernel_that_still_beats_the_measured_roof_raises_it_to_what_it_reached():
    # naive at 40 GFLOP/s (I = 20) and FA2 moving 5 GB/s of modelled bytes (2.5 GFLOP/s at I = 0.5): both above
    check = roof_probe.bounded(FAKE, {"naive": (20.0, 4e10), "q_outer": (0.5, 2.5e9)}, lambda: FAKE)
    assert check.raised_flops == 4e10 and check.raised_bandwidth == 5e9
    for intensity, reached in ((20.0, 4e10), (0.5, 2.5e9)):  # every point on or under the raised roof
        assert reached <= min(check.roof.peak("float32"), intensity * check.roof.bandwidth)
    timed = pd.DataFrame({"algorithm": ["naive", "q_outer"], "attainable_flops": [4e10, 2.5e9],
                          "intensity": [20.0, 0.5]})
    text = roofline_text.roof_md(check, timed, 1)
    assert shows(stated(text, "compute roof is raised"), check.raised_flops / 1e9) and check.raised_flops == 4e10
    assert shows(stated(text, "memory roof is raised"), check.raised_bandwidth / 1e9) and check.raised_bandwidth == 5e9
    assert shows(counted(text, "threads?"), 1)


def test_the_probe_is_measured_once_per_thread_count_and_measuring_again_keeps_the_best():
    first = roof_probe.machine_roof(1)
    assert first is roof_probe.machine_roof(1) and first.measured and first.sram_per_sm is None
    assert first.peak("float32") > 1e8 and first.bandwidth > 1e7  # at least 0.1 GFLOP/s and 10 MB/s
    again = roof_probe.measure_again(1)
    assert again.peak("float32") >= first.peak("float32") and again.bandwidth >= first.bandwidth
    assert roof_probe.machine_roof(1) is again  # the best so far is the roof from now on
    assert "1 thread" in roofline_runs.cpu_device(1).source


def test_the_gap_sentence_tells_the_per_tile_overhead_and_the_benchmarks_tiles():
    s = Settings(n=128, d=16, br=32, bc=32, heads=1)
    points = roofline.points_of(s, FAKE.__class__(roofline_runs.CPU_NAME, {"float32": 1e10}, 1e9, None, "fake",
                                                  measured=True))
    df = pd.DataFrame({"impl": ["naive", "flash", "flash2"], "status": "ok", "flops": [4e6, 4e6, 4e6],
                       "hbm_bytes": [1e6, 5e5, 4e5], "time_s": [0.001, 0.004, 0.002],
                       "device_name": roofline_runs.CPU_TIMED, "repeats": 20})
    df["time_lo_s"], df["time_hi_s"] = df["time_s"] * 0.99, df["time_s"] * 1.01  # intervals that separate
    timed = roofline_runs.timed_points(df)
    text = roofline_text.gap_md(timed, points, FAKE, "float32", 16, 32, 32, 64, 4)
    # FA1: 4 ms over 16 tiles = 0.25 ms per tile; 4 MFLOP / 16 tiles at 10 GFLOP/s = 0.025 ms: 90% overhead
    per_tile, need = 4e-3 / 16, 4e6 / 16 / 1e10
    took = text.split("FA1 took")[1]
    assert [shows(n, v) for n, v in zip(numbers(took), (per_tile * 1e3, need * 1e3, 100 * (1 - need / per_tile)),
                                        strict=False)] == [True] * 3
    model = points[points["device"].eq(roofline_runs.CPU_NAME)].set_index("algorithm")["speedup_vs_naive"]
    for short, alg, time_s in (("FA1", "kv_outer", 0.004), ("FA2", "q_outer", 0.002)):
        assert shows(stated(text, f"{short} measured"), 0.001 / time_s)  # naive's time over the kernel's, separated
        assert shows(stated(text, f"{short} measured", 1), 0.99e-3 / (1.01 * time_s))  # with its 95% interval
        assert shows(stated(text, f"{short} measured", 3), model[alg])  # predicted on this CPU's roof
    close = roofline_text.gap_md(roofline_runs.timed_points(df.assign(repeats=3)), points, FAKE, "float32", 16, 32,
                                 32, 64, 4)  # three calls: no 95% interval, no ratio stands alone
    assert "FA1 measured too close to call (" in close and "FA2 measured too close to call (" in close
    assert "measured no interval" in roofline_text.gap_md(roofline_runs.timed_points(df.drop(columns="repeats")),
                                                          points, FAKE, "float32", 16, 32, 32, 64, 4)
    bench = text.split("Benchmark view")[1]
    assert [value(n) for n in numbers(bench)[:4]] == [64, 64, 4, 4] and "fewer" in bench  # 16 tiles here, 4 there
    same = roofline_text.gap_md(timed, points, FAKE, "float32", 16, 32, 32, 32, 16)
    assert "Benchmark" not in same


def test_a_measured_roof_carries_its_probe_spread_on_the_chart_and_in_words():
    """The CPU roof is the best probe call; the middle half of the calls is shaded under it and said in words."""
    from flashviz.measure.roof_probe import RoofCheck, RoofSpread, Spread
    from flashviz.model.roofline import roof_lines
    from flashviz.views.roof.data import CPU_NAME, with_band
    from flashviz.views.roof.figures import roofline_figure
    from flashviz.views.roof.sentences import spread_md

    cpu = Device(CPU_NAME, {"float32": 60e9}, 28e9, None, "fake CPU", measured=True)
    spread = RoofSpread(Spread(60e9, 50e9, 45e9, 55e9, 30e9, 7), Spread(28e9, 20e9, 12.7e9, 25e9, 10e9, 7), 2)
    check = RoofCheck(cpu, 60e9, 28e9, (), False, None, None, spread)
    rates = with_band(roof_lines([cpu], dtype="float32"), check)
    points = pd.DataFrame({"device": [CPU_NAME], "algorithm": ["naive"], "flops": [1e9], "hbm_bytes": [1e8],
                           "intensity": [10.0], "attainable_flops": [28e10], "time_s": [1e-3]})
    fig = roofline_figure(points, rates)
    (band,) = [t for t in fig.data if t.name == "middle half of the probe's calls"]
    assert max(band.y) == pytest.approx(55e9) and min(band.y) == pytest.approx(25e9 * min(band.x))  # q3 roof
    low = fig.data[list(fig.data).index(band) - 1]
    assert max(low.y) == pytest.approx(45e9) and band.fill == "tonexty"  # filled down to the q1 roof
    words = spread_md(check)
    assert "45-55 GFLOP/s" in words and "12.7-25 GB/s" in words and "7 calls" in words
    assert spread_md(RoofCheck(cpu, 60e9, 28e9, (), False, None, None)) == ""  # no spread measured: nothing said
