"""The Roofline view under AppTest: every claim on screen is checked against the chart it describes (the same
DataFrames) and, at the defaults and at N = 4096 with 256-wide tiles, against hand-computed values.

Hand counts (elements, B = 1; io_cost's formulas, Tc = N / Bc and Tr = N / Br passes):
  naive    4 N d + 4 N^2                                   (Q, K, V read, O written; S and P written and read back)
  FA1      2 N d + N d + 2 N + Tc (3 N d + 4 N)            (K, V once; O, l, m written once; per pass Q, O, l, m
                                                            read and O, l, m written)
  FA2      N d + 2 N d Tr + N d + N                         (Q once; K, V once per pass; O and L written once)
"""

from __future__ import annotations

import base64
import re

import numpy as np
import pandas as pd
import pytest

from flashviz.app import machine
from flashviz.app.query import parse_query
from flashviz.app.state import PRESETS, Env, Settings, apply_preset
from flashviz.measure import sweep as sweep_module
from flashviz.measure.verdict import compare, row_estimate
from flashviz.model.iomodel import io_cost
from flashviz.model.roofline import A100, B200, GPUS, H100, H200
from flashviz.units import format_bytes
from flashviz.views.roof import data as roofline_runs
from flashviz.views.roof import page as roofline
from tests._apptest import charts
from tests._numbers import counted, shows, stated

CHART = "Roofline: why the tiled kernels are faster on a GPU"
SPEEDUP = "Speedup over naive: GPUs predicted (model), here measured"
SHORT = {"naive": "naive", "kv_outer": "FA1", "q_outer": "FA2"}
GPU_NAMES = [g.name for g in GPUS]
TINY = {"n": "128", "d": "16", "br": "32", "bc": "32", "heads": "1"}  # a timing run in well under a second


# ----------------------------------------------------------------------------------------------------------------------
# reading the page


def values(z) -> list:
    """A plotly typed array ({"dtype", "bdata"}) or a list -> list."""
    if isinstance(z, dict):
        return np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"])).tolist()
    return list(z)


def chart_points(at) -> pd.DataFrame:
    """The roofline chart's points: device, algorithm, intensity (x: FLOP per HBM byte), flops_s (y), bytes (HBM),
    time_ms, bound, star; and, from the hollow points of the same kernel, l2_intensity and l2_bytes (NaN without)."""
    rows, l2 = [], {}
    for t in charts(at)[CHART]["data"]:
        group = t.get("legendgroup", "")
        if group.endswith(" L2") and group.removesuffix(" L2") in SHORT:
            for x, custom in zip(values(t["x"]), t["customdata"], strict=True):
                l2[(custom[0], group.removesuffix(" L2"))] = (x, custom[1])
        if group not in SHORT:
            continue
        for x, y, custom in zip(values(t["x"]), values(t["y"]), t["customdata"], strict=True):
            rows.append({"device": custom[0], "algorithm": group, "intensity": x, "flops_s": y,
                         "flops": custom[1], "bytes": custom[2], "time_ms": custom[3], "bound": custom[4],
                         "star": t["marker"]["symbol"] == "star"})
    df = pd.DataFrame(rows)
    hollow = [l2.get((d, a), (np.nan, np.nan)) for d, a in zip(df["device"], df["algorithm"], strict=True)]
    return df.assign(l2_intensity=[h[0] for h in hollow], l2_bytes=[h[1] for h in hollow])


def regime_of(point, device) -> str:
    """The regime the model's own numbers give one chart point on a GPU: the longest of FLOPs / peak, HBM bytes /
    HBM bandwidth and L2 bytes / L2 bandwidth."""
    dtype = "float16" if point.get("dtype") is None else point["dtype"]
    levels = {"compute": point["flops"] / device.peak(dtype), "memory": point["bytes"] / device.bandwidth,
              "L2": point["l2_bytes"] / device.l2_bandwidth}
    return max(levels, key=levels.get)


def chart_ridges(at) -> dict[str, float]:
    """Each roof's ridge point (FLOP/byte) as the chart draws it, by device."""
    out = {}
    for t in charts(at)[CHART]["data"]:
        if t.get("legendgroup") == "ridge":
            device = re.match(r"<b>(.*) ridge point</b>", t["hovertemplate"]).group(1)
            out[device] = values(t["x"])[0]
    return out


def speedup_bars(at) -> dict[tuple[str, str, str], float]:
    """(device, FA1/FA2, "predicted (model)" / "measured") -> the bar's speedup."""
    out = {}
    for t in charts(at)[SPEEDUP]["data"]:
        if t["type"] == "bar":
            alg, kind = t["name"].split(": ")
            out.update({(x, alg, kind): y for x, y in zip(values(t["x"]), values(t["y"]), strict=True)})
    return out


def text(at) -> str:
    return "\n\n".join(m.value for m in at.markdown)


def bound_table(at) -> pd.DataFrame:
    """The markdown table: one row per (device, algorithm) with the claimed bound, intensity per HBM byte (and per L2
    byte), and the ridges."""
    (table,) = [m.value for m in at.markdown if m.value.startswith("| device |")]
    rows = []
    for line in table.split("\n\n")[0].splitlines()[2:]:
        device, dtype, ridge, *cells = [c.strip() for c in line.strip("|").split("|")]
        for alg, cell in zip(SHORT, cells, strict=True):
            bound, intensity, l2 = re.fullmatch(r"(HBM|memory|L2|compute)-bound \(I = ([0-9.e+]+)"
                                                r"(?:, L2 I = ([0-9.e+]+))?\)", cell).groups()
            ridges = ridge.split()[0:3:2] if "·" in ridge else [ridge.split()[0], "nan"]
            rows.append({"device": device, "dtype": dtype, "ridge": float(ridges[0]), "l2_ridge": float(ridges[1]),
                         "algorithm": alg, "bound": {"HBM": "memory"}.get(bound, bound), "intensity": float(intensity),
                         "l2_intensity": float(l2) if l2 else np.nan})
    return pd.DataFrame(rows)


def speedup_claims(at) -> dict[str, tuple[float, float, str]]:
    """The bullets of the predicted speedups: device -> (FA1, FA2, the sentence that says why)."""
    out = {}
    for device, fa1, fa2, why in re.findall(r"- \*\*(.+?)\*\*: FA1 ([0-9.]+)×, FA2 ([0-9.]+)×\. (.*)", text(at)):
        out[device] = (float(fa1), float(fa2), why)
    return out


def regimes_said(why: str) -> dict[str, str]:
    """The regime a why-sentence names for each kernel: {"naive": "HBM", "FA1": "L2", "FA2": "compute"}."""
    return {alg.lower() if alg == "Naive" else alg: regime
            for alg, regime in re.findall(r"\b(Naive|naive|FA1|FA2) (HBM|L2|compute)-bound", why)}


def l2_said(why: str, l2_bytes: float) -> bool:
    """Whether the L2 a why-sentence says naive's S and P fit (or do not fit) in is `l2_bytes`, as written."""
    written, unit = re.search(r"fit in the (\S+) (B|KiB|MiB|GiB) L2", why).groups()
    return shows(written, l2_bytes / {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit])


def open_view(make_app, **query):
    at = make_app(view="roof", **query)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


# ----------------------------------------------------------------------------------------------------------------------
# every claim against the chart


def assert_claims_match_the_chart(at) -> None:
    """Each sentence and table cell on screen says what the chart's own data say."""
    pts = chart_points(at)
    model = pts[~pts["star"]]
    ridges = chart_ridges(at)
    assert set(model["device"]) == {*GPU_NAMES, roofline_runs.CPU_NAME}
    assert_bound_table_matches(at, model, ridges)
    assert_traffic_matches(at, model)
    assert_gpu_speedups_match(at, model, ridges)
    assert_gpus_differ_where_their_regimes_do(at, model)
    assert_cpu_claims_match(at, model, ridges)


def assert_bound_table_matches(at, model: pd.DataFrame, ridges: dict[str, float]) -> None:
    """The table: ridge points and the regime that bounds each kernel (HBM, L2 or compute on a GPU, computed from
    the chart's bytes and the published rates; memory or compute on this CPU), per device and algorithm."""
    table = bound_table(at)
    s, _ = parse_query(dict(at.query_params))
    gpus = {g.name: g for g in GPUS}
    assert set(table["device"]) == set(ridges)
    for r in table.itertuples():
        (point,) = [p for _, p in model[model["device"].eq(r.device) & model["algorithm"].eq(r.algorithm)].iterrows()]
        assert r.ridge == pytest.approx(ridges[r.device], rel=5e-3)
        assert r.intensity == pytest.approx(point["intensity"], rel=5e-3)
        assert r.bound == point["bound"]  # the table says what the chart's hover says
        if r.device in gpus:
            assert r.l2_intensity == pytest.approx(point["l2_intensity"], rel=5e-3)
            assert r.bound == regime_of({**point, "dtype": s.gpu_dtype}, gpus[r.device])
        else:
            assert r.bound == ("compute" if point["intensity"] >= ridges[r.device] else "memory")


def assert_traffic_matches(at, model: pd.DataFrame) -> None:
    """The settings named, the FLOPs, the elements behind "why FA2 moves fewer bytes" (io_cost at these settings)
    and the bytes each algorithm moves, as the chart's hover carries them."""
    s, _ = parse_query(dict(at.query_params))
    mask = " + ".join((["causal"] if s.causal else []) + ([f"window ({s.window[0]}, {s.window[1]})"] if s.window
                                                           else [])) or "no mask"
    assert (f"At N = {s.n}, d = {s.d}, Br = {s.br}, Bc = {s.bc}, B = {s.batch}, H = {s.heads}, {mask}, "
            in text(at))
    flops = model[model["device"].eq(A100.name)].set_index("algorithm")["flops"]
    if flops.nunique() == 1:
        assert f"all three do {flops['naive'] / 1e9:.3g} GFLOP of matmuls" in text(at)
    else:
        assert (f"naive does {flops['naive'] / 1e9:.3g} GFLOP (every score, masked afterwards), FA1 "
                f"{flops['kv_outer'] / 1e9:.3g} and FA2 {flops['q_outer'] / 1e9:.3g} GFLOP" in text(at))
    c = {a: io_cost(a, s.n, s.n, s.d, s.br, s.bc, causal=s.causal, window=s.window, batch=s.batch, heads=s.heads)
         for a in SHORT}
    assert (f"({c['kv_outer'].reads - c['kv_outer'].kv_reads:,} elements read besides K and V, "
            f"{c['kv_outer'].writes:,} written)" in text(at))
    assert f"({c['q_outer'].reads - c['q_outer'].kv_reads:,} read besides K and V, {c['q_outer'].writes:,} written)" \
        in text(at)
    assert f"({c['q_outer'].kv_reads:,} elements of K and V against FA1's {c['kv_outer'].kv_reads:,})" in text(at)
    # the bytes each algorithm moves through L2, as the chart's hollow points carry them
    a100 = model[model["device"].eq(A100.name)].set_index("algorithm")
    moved = re.search(r"they move: naive (.+?), FA1 (.+?), FA2 (.+?) to and from the chip", text(at)).groups()
    assert list(moved) == [format_bytes(a100.at[a, "l2_bytes"]) for a in SHORT]
    fewer = "fewer" if a100.at["q_outer", "l2_bytes"] < a100.at["kv_outer", "l2_bytes"] else "more"
    assert f"Why FA2 moves {fewer} bytes than FA1 here." in text(at)


def assert_gpu_speedups_match(at, model: pd.DataFrame, ridges: dict[str, float]) -> None:
    """The predicted speedups: the ratio of the chart's times, the bars, and the roof that sets each."""
    claims = speedup_claims(at)
    assert set(claims) == set(GPU_NAMES)
    bars = speedup_bars(at)
    gpus = {g.name: g for g in GPUS}
    for device, (fa1, fa2, why) in claims.items():
        mine = model[model["device"].eq(device)].set_index("algorithm")
        bound = {a: mine.at[a, "bound"] for a in SHORT}
        for alg, claimed in (("kv_outer", fa1), ("q_outer", fa2)):
            predicted = mine.at["naive", "time_ms"] / mine.at[alg, "time_ms"]
            assert claimed == pytest.approx(predicted, abs=0.005)
            assert bars[(roofline.bar_label(device), SHORT[alg], "predicted (model)")] == pytest.approx(predicted)
            if bound["naive"] == bound[alg] == "memory":  # both HBM-bound: the ratio of HBM bytes
                assert predicted == pytest.approx(mine.at["naive", "bytes"] / mine.at[alg, "bytes"])
            if bound["naive"] == bound[alg] == "L2":  # both L2-bound: the ratio of L2 bytes
                assert predicted == pytest.approx(mine.at["naive", "l2_bytes"] / mine.at[alg, "l2_bytes"])
        words = {"memory": "HBM", "L2": "L2", "compute": "compute"}
        if bound["naive"] == "compute":  # the FLOPs set every time: each speedup is the ratio of FLOPs, 1 if equal
            assert "Naive is already compute-bound" in why
            for alg, claimed in (("kv_outer", fa1), ("q_outer", fa2)):
                assert claimed == pytest.approx(mine.at["naive", "flops"] / mine.at[alg, "flops"], abs=0.005)
        elif set(bound.values()) == {"memory"}:  # each speedup is the ratio of HBM bytes
            assert "All three are HBM-bound" in why and "ratio of HBM bytes" in why
            for alg, claimed in (("kv_outer", fa1), ("q_outer", fa2)):
                assert claimed == pytest.approx(mine.at["naive", "bytes"] / mine.at[alg, "bytes"], abs=0.005)
        else:
            assert regimes_said(why) == {SHORT[a]: words[b] for a, b in bound.items()}
            if "L2" in why.split(". ")[1]:  # the L2 named is this GPU's
                assert l2_said(why, gpus[device].l2_bytes)
            capped = {SHORT[a]: a for a in ("kv_outer", "q_outer") if bound[a] == "compute"}
            assert ("reach the compute roof" in why or "reaches the compute roof" in why) == bool(capped)
            for alg, a in capped.items():  # FLOPs cap the gain below the ratio of HBM bytes, which it states
                ratios = why.split("ratio of HBM bytes", 1)[1]
                assert shows(stated(ratios, alg), mine.at["naive", "bytes"] / mine.at[a, "bytes"])


def assert_gpus_differ_where_their_regimes_do(at, model: pd.DataFrame) -> None:
    """"Why the GPUs differ": per kernel, each GPU named under the regime the chart gives it, with its time, and "the
    same on every GPU" exactly where the chart's times are equal."""
    (block,) = [m.value for m in at.markdown if m.value.startswith("**Why the GPUs differ, or not.**")]
    gpus = model[model["device"].isin(GPU_NAMES)]
    words = {"memory": "HBM", "L2": "L2", "compute": "compute"}
    for alg, short in SHORT.items():
        (line,) = [x for x in block.splitlines() if x.startswith(f"- **{short}**,")]
        mine = gpus[gpus["algorithm"].eq(alg)]
        same = mine["time_ms"].max() <= mine["time_ms"].min() * (1 + 1e-9)
        assert ("the same on every GPU" in line) == same and ("the GPUs differ" in line) == (not same)
        for part in line.split(": ", 1)[1].split("; "):
            names, regime = re.match(r"(.+?) (HBM|L2|compute)-bound \(", part).groups()
            for name in re.split(r", | and ", names):
                (point,) = [p for _, p in mine.iterrows() if p["device"].split(" (")[0] == name]
                assert words[point["bound"]] == regime
                assert f"{point['time_ms'] * 1e3:.3g} µs" in part


def cpu_roof(at) -> tuple[float, float]:
    """This CPU's roof as the chart draws it: (peak FLOP/s, bandwidth bytes/s), read off its line."""
    (roof,) = [t for t in charts(at)[CHART]["data"] if t.get("legendgroup") == f"roof {roofline_runs.CPU_NAME}"]
    xs, ys = values(roof["x"]), values(roof["y"])
    return max(ys), ys[0] / xs[0]


def assert_cpu_claims_match(at, model: pd.DataFrame, ridges: dict[str, float]) -> None:
    """This CPU: its measured roof and what the model predicts on it."""
    bars = speedup_bars(at)
    peak, bandwidth = cpu_roof(at)
    mine = model[model["device"].eq(roofline_runs.CPU_NAME)].set_index("algorithm")
    m = re.search(r"\(measured: ([0-9.e+]+) GFLOP/s fp32 matmul, ([0-9.e+]+) GB/s read; ridge ([0-9.e+]+) FLOP/byte\): "
                  r"naive is (memory|compute)-bound at float32 \(I = ([0-9.]+)\), "
                  r"and the model predicts FA1 ([0-9.]+)×, FA2 ([0-9.]+)×", text(at))
    assert float(m[1]) == pytest.approx(peak / 1e9, rel=5e-3)
    assert float(m[2]) == pytest.approx(bandwidth / 1e9, rel=5e-3)
    m = [None, m[3], m[4], m[5], m[6], m[7]]
    assert float(m[1]) == pytest.approx(peak / bandwidth, rel=5e-3)
    assert ridges[roofline_runs.CPU_NAME] == pytest.approx(peak / bandwidth)
    assert m[2] == ("compute" if mine.at["naive", "intensity"] >= ridges[roofline_runs.CPU_NAME] else "memory")
    for alg, claimed in (("kv_outer", m[4]), ("q_outer", m[5])):
        predicted = mine.at["naive", "time_ms"] / mine.at[alg, "time_ms"]
        assert float(claimed) == pytest.approx(predicted, abs=0.005)
        assert bars[("CPU: model", SHORT[alg], "predicted (model)")] == pytest.approx(predicted)


@pytest.mark.parametrize("query", [{}, {"causal": "1"}, {"n": "4096", "br": "256", "bc": "256", "heads": "8"},
                                   {"gpu_dtype": "float32"}, {"window": "256,0", "br": "128", "bc": "64",
                                                              "link": "0"}],
                         ids=["defaults", "causal", "N4096-tiles256-H8", "gpu-fp32", "window-unlinked"])
def test_every_claim_on_screen_matches_the_chart(make_app, query):
    assert_claims_match_the_chart(open_view(make_app, **query))


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_claim_matches_the_chart_at_every_classroom_preset(make_app, name):
    query = {k: v for k, v in apply_preset(Settings(), name).to_query().items() if k != "view"}
    at = open_view(make_app, **query)
    assert_claims_match_the_chart(at)
    ridges = {t["name"] for t in charts(at)[CHART]["data"] if t.get("name", "").endswith("FLOP/byte")}
    assert {"A100 roof · ridge 153 FLOP/byte", "H100 roof · ridge 295 FLOP/byte"} <= ridges  # with their unit


# ----------------------------------------------------------------------------------------------------------------------
# hand-computed values


def test_defaults_show_the_hand_computed_bytes_ridges_and_speedups(make_app):
    at = open_view(make_app)  # N = 1024, d = 64, Br = Bc = 64, B = 1, H = 4, no mask; GPUs at float16
    page = text(at)
    # naive 4 x (4 N d + 4 N^2) = 17,825,792 elements x 2 bytes = 34.0 MiB; FA1 4 x 3,409,920 x 2 = 26.0 MiB;
    # FA2 4 x 2,229,248 x 2 = 17.0 MiB: all of it through L2
    assert "in float16 they move: naive 34.0 MiB, FA1 26.0 MiB, FA2 17.0 MiB to and from the chip" in page
    # FA1 per pass reads Q, O, l, m: 4 x 16 x (2 N d + 2 N); writes O, l, m 17 times: 4 x 17 x (N d + 2 N)
    assert "(8,519,680 elements read besides K and V, 4,595,712 written)" in page
    # FA2 reads Q once (4 N d), writes O and L once (4 (N d + N)), K and V once per Q block (4 x 2 N d x 16)
    assert "(262,144 read besides K and V, 266,240 written)" in page
    assert "(8,388,608 elements of K and V against FA1's 524,288)" in page
    table = bound_table(at).set_index(["device", "algorithm"])
    # ridges 312e12 / 2039e9, 989.4e12 / 3.35e12, 989.4e12 / 4.8e12, 2.25e15 / 8e12 FLOP/byte; L2: 312e12 / 7.22e12,
    # 989.4e12 / 7.18e12, 2.25e15 / 17.2e12
    assert [table.at[(g, "naive"), "ridge"] for g in GPU_NAMES] == [153, 295, 206, 281]
    assert [table.at[(g, "naive"), "l2_ridge"] for g in GPU_NAMES] == [43.2, 138, 138, 131]
    # per L2 byte 4 N^2 d / the IO model's bytes, as before: 30.1, 39.4, 60.2. Per HBM byte: every re-read set fits in
    # L2 (S and P 16 MiB; Q, O, l, m 1 MiB; K, V 1 MiB), so only the compulsory bytes reach HBM: naive 18 MiB
    # (4 x (4 N d + 2 N^2) x 2), FA1 4 x (5 N d + 4 N) x 2, FA2 4 x (4 N d + N) x 2 bytes
    assert [table.at[(A100.name, a), "l2_intensity"] for a in SHORT] == [30.1, 39.4, 60.2]
    assert [table.at[(A100.name, a), "intensity"] for a in SHORT] == [56.9, 336, 510]
    # A100: naive 18 MiB at 2.04 TB/s = 9.26 us (its 34 MiB of L2 traffic take 4.94 us); FA1's 26 MiB of L2 at 7.22
    # TB/s, 3.78 us, past its 3.44 us of FLOPs at 312 TFLOP/s; FA2 3.44 us of FLOPs past its 2.47 us of L2
    assert [table.at[(A100.name, a), "bound"] for a in SHORT] == ["memory", "L2", "compute"]
    assert [table.at[(H100.name, a), "bound"] for a in SHORT] == ["memory", "L2", "L2"]  # 989 TFLOP/s: L2 first
    assert [table.at[(H200.name, a), "bound"] for a in SHORT] == ["L2", "L2", "L2"]  # 4.8 TB/s of HBM: L2 first
    assert [table.at[(B200.name, a), "bound"] for a in SHORT] == ["memory", "L2", "L2"]  # 2.25 PFLOP/s: L2 first
    claims = speedup_claims(at)
    assert claims[A100.name][:2] == (2.45, 2.69)  # 9.26 / 3.78, 9.26 / 3.44
    assert claims[H100.name][:2] == (1.48, 2.27)  # 5.63 / 3.80, 5.63 / 2.48
    assert claims[H200.name][:2] == (1.31, 2.00)  # all L2-bound: the ratio of L2 bytes, 34 / 26 and 34 / 17
    assert claims[B200.name][:2] == (1.48, 2.27)  # naive 18 MiB at 8 TB/s over FA1's 26 and FA2's 17 MiB at 17.2
    assert len({c[:2] for c in claims.values()}) == 3  # the GPUs differ where their bounding regimes do


def test_long_sequences_with_wide_tiles_reach_the_compute_roof_on_every_gpu(make_app):
    at = open_view(make_app, n="4096", br="256", bc="256", heads="8")
    # naive 68,157,440 elements per head, all to HBM: S and P of 8 heads (512 MiB) do not fit in L2. 4 N^2 d =
    # 4,294,967,296 FLOPs per head; the tiled kernels' re-reads fit (K, V 8 MiB; Q, O, l, m 8.1 MiB), and their FLOPs
    # outlast their L2 traffic (I_L2 157 and 241 against L2 ridges 43.2 and 138): compute-bound, equal speedups
    claims = speedup_claims(at)
    assert claims[A100.name][:2] == (4.86, 4.86)  # naive's HBM time / the FLOPs' time: 153.0 / 31.51
    assert claims[H100.name][:2] == (9.37, 9.37)  # 295.3 / 31.51
    assert claims[H200.name][:2] == (6.54, 6.54)  # 206.1 / 31.51
    assert claims[B200.name][:2] == (8.93, 8.93)  # 136.3 / 15.27: naive's HBM time over the FLOPs' at 2.25 PF
    scores = 8 * 2 * 4096**2 * 2  # naive's S and P of 8 heads in float16: 512 MiB
    pts = chart_points(at)
    for gpu in GPUS:
        mine = pts[pts["device"].eq(gpu.name) & ~pts["star"]].set_index("algorithm")
        hbm = {SHORT[a]: mine.at[a, "bytes"] for a in SHORT}  # HBM bytes, as the chart's hover carries them
        assert hbm["naive"] == 8 * (4 * 4096 * 64 + 4 * 4096**2) * 2  # all of naive's elements reach HBM
        (fa1, fa2, why) = claims[gpu.name]
        assert regimes_said(why) == {"naive": "HBM", "FA1": "compute", "FA2": "compute"}
        assert "do not fit" in why and l2_said(why, gpu.l2_bytes) and gpu.l2_bytes < scores
        assert "FA1 and FA2 reach the compute roof" in why
        ratios = why.split("ratio of HBM bytes", 1)[1]  # the FLOPs cap the gain below the ratio of HBM bytes
        for alg, claimed in (("FA1", fa1), ("FA2", fa2)):
            assert shows(stated(ratios, alg), hbm["naive"] / hbm[alg])
            assert claimed < hbm["naive"] / hbm[alg]


def test_float32_on_cuda_cores_makes_naive_compute_bound_and_says_so(make_app):
    at = open_view(make_app, gpu_dtype="float32")
    claims = speedup_claims(at)
    # A100 fp32 ridge 19.5e12 / 2039e9 = 9.56 < naive's 28.4 FLOP per HBM byte (S and P re-read from L2): no gain
    for gpu in GPU_NAMES:  # H100's and H200's fp32 ridges, 20.0 and 13.9, are below it too
        assert claims[gpu][:2] == (1.00, 1.00)
        assert "choose float16 above" in claims[gpu][2]


# ----------------------------------------------------------------------------------------------------------------------
# timing here


def test_the_run_button_times_the_kernels_and_every_measured_claim_matches(make_app):
    at = open_view(make_app, **TINY)
    assert any("Press **Time naive, FA1 and FA2 here**" in i.value for i in at.info)
    assert not chart_points(at)["star"].any()
    at.button(key="roof_run").click().run()
    assert not at.exception and not at.error
    assert_measured_claims_match(at, tiles=16, bench_tiles=1)  # (128 / 32)^2 tiles; the Benchmark's 256: one


def assert_speed_said(said: str, naive: pd.Series, kernel: pd.Series) -> None:
    """A measured speed over naive as the page says it: the verdict of the two rows' intervals (compare), its ratio
    and interval where it separates, else "too close to call" and the interval, never a bare ratio."""
    v = compare(row_estimate(naive), row_estimate(kernel))
    assert v.ratio == pytest.approx(naive["time_s"] / kernel["time_s"])
    shown = [float(x) for x in re.findall(r"\d+\.\d+", said)]
    assert said.startswith("too close to call") != v.separated, said
    assert shown == pytest.approx([v.ratio, v.ratio_low, v.ratio_high] if v.separated else
                                  [v.ratio_low, v.ratio_high], abs=0.006), said


def assert_measured_claims_match(at, *, tiles: int, bench_tiles: int) -> None:
    """After a run: the speedups and rates quoted are the table's, the stars sit at them, every star is on or under
    this CPU's roof as drawn, and the gap to the model is told per computed tile."""
    df = at.dataframe[0].value.set_index("impl")
    assert set(df["status"]) == {"ok"} and set(df["device"]) == {"cpu"}
    speed = {a: df.at["naive", "time_s"] / df.at[i, "time_s"] for a, i in (("FA1", "flash"), ("FA2", "flash2"))}
    m = re.search(r"\*\*Measured on this CPU\*\* \(float32, (\d+) threads?, median of (\d+) calls with its 95% "
                  r"interval\): speed over naive \(its time / theirs, by the verdict rule\), FA1 (.+?), FA2 (.+?)\. "
                  r"Reached \(.*?\): naive ([0-9.e+]+) GFLOP/s \((\d+)%\), "
                  r"FA1 ([0-9.e+]+) GFLOP/s \((\d+)%\), FA2 ([0-9.e+]+) GFLOP/s \((\d+)%\)\.", text(at))
    assert m, text(at)
    assert int(m[2]) == roofline_runs.REPEATS
    assert_speed_said(m[3], df.loc["naive"], df.loc["flash"])
    assert_speed_said(m[4], df.loc["naive"], df.loc["flash2"])
    m = [None, m[1], None, None, *m.groups()[4:]]  # the rates and shares, at the indices below
    stars = chart_points(at).query("star").set_index("algorithm")
    assert set(stars["device"]) == {"this CPU (timed here)"}
    model = chart_points(at).query("not star and device == @roofline_runs.CPU_NAME").set_index("algorithm")
    peak, bandwidth = cpu_roof(at)
    for alg, impl, rate, share in (("naive", "naive", m[4], m[5]), ("kv_outer", "flash", m[6], m[7]),
                                   ("q_outer", "flash2", m[8], m[9])):
        reached = df.at[impl, "flops"] / df.at[impl, "time_s"]
        assert float(rate) == pytest.approx(reached / 1e9, rel=5e-3)
        assert int(share) == round(100 * reached / model.at[alg, "flops_s"])
        assert int(share) <= 100  # a roof bounds what is measured on it
        assert stars.at[alg, "flops_s"] == pytest.approx(reached)  # the star sits at the FLOP/s reached
        intensity = df.at[impl, "flops"] / df.at[impl, "hbm_bytes"]
        assert stars.at[alg, "intensity"] == pytest.approx(intensity)
        assert reached <= min(peak, intensity * bandwidth) * (1 + 1e-9)  # on or under the roof drawn
    (roof,) = [x for x in at.markdown if x.value.startswith("**This CPU's roof** is measured")]
    assert ("measured again" in roof.value) != ("Every kernel timed here is on or under it." in roof.value)
    bars = speedup_bars(at)
    for alg in ("FA1", "FA2"):
        assert bars[("CPU: timed", alg, "measured")] == pytest.approx(speed[alg])
    (gap,) = [x.value for x in at.markdown if x.value.startswith("**Predicted against measured.**")]
    for alg, impl in (("FA1", "flash"), ("FA2", "flash2")):
        per_tile = df.at[impl, "time_s"] / tiles
        assert f"{alg} took {per_tile * 1e3:.3g} ms per computed tile, where its FLOPs need " in gap
        said = gap.split(f"{alg} measured ")[1].split(" against ")[0]
        assert_speed_said(said, df.loc["naive"], df.loc[impl])
        predicted = model.at["naive", "time_ms"] / model.at[{"FA1": "kv_outer", "FA2": "q_outer"}[alg], "time_ms"]
        assert f" against {predicted:.2f}× predicted on this CPU's roof" in gap
    assert f"({tiles:,} computed tiles per call at Br × Bc" in gap
    assert (f"The Benchmark view times its own tile size, 256 × 256: {bench_tiles:,} computed tiles" in gap) == (
        bench_tiles != tiles)


def test_the_run_at_the_views_defaults_keeps_every_star_under_the_roof_and_tells_the_gap(make_app):
    at = open_view(make_app)  # N = 1024, d = 64, Br = Bc = 64, H = 4
    at.button(key="roof_run").click().run()
    assert not at.exception and not at.error
    assert_measured_claims_match(at, tiles=256, bench_tiles=16)  # (1024 / 64)^2 and (1024 / 256)^2
    assert_claims_match_the_chart(at)


def test_a_cuda_device_is_timed_too_and_joins_the_chart(make_app, monkeypatch):
    """No GPU here: a fake CUDA device (the CPU under another name) stands in, to test the data path."""
    calls = []
    real_sweep = sweep_module.run_sweep

    def fake_sweep(ns, *, device, dtype, **kw):
        calls.append((device, dtype))
        return real_sweep(ns, device="cpu", dtype=dtype, **kw).assign(device=device)

    env = Env(max_threads=2, devices=("cpu", "cuda"))
    monkeypatch.setattr(machine, "machine_env", lambda: env)  # app.py imports it afresh on every run
    monkeypatch.setattr(roofline, "cuda_available", lambda: True)  # the Roofline view times on every GPU there
    monkeypatch.setattr(roofline_runs, "run_sweep", fake_sweep)
    fake = "Fake GPU 80GB"
    monkeypatch.setattr(roofline_runs, "gpu_name", lambda: fake)
    at = open_view(make_app, **TINY, gpu_dtype="bfloat16", threads="1")
    assert "on this CPU and the CUDA GPU" in at.button(key="roof_run").proto.help
    at.button(key="roof_run").click().run()
    assert not at.exception and not at.error
    assert calls == [("cpu", "float32"), ("cuda", "bfloat16")]  # the GPU runs at the GPU roofs' dtype
    df = at.dataframe[0].value
    gpu = df[df["device_name"].eq(fake)].set_index("impl")
    stars = chart_points(at).query(f"star and device == '{fake} (timed here)'").set_index("algorithm")
    assert len(stars) == 3
    for alg, impl in (("naive", "naive"), ("kv_outer", "flash"), ("q_outer", "flash2")):
        assert stars.at[alg, "flops_s"] == pytest.approx(gpu.at[impl, "flops"] / gpu.at[impl, "time_s"])
        assert stars.at[alg, "bytes"] == gpu.at[impl, "hbm_bytes"]  # modelled at 2 bytes an element
    bars = speedup_bars(at)
    ratio = gpu.at["naive", "time_s"] / gpu.at["flash2", "time_s"]
    assert bars[("GPU: timed", "FA2", "measured")] == pytest.approx(ratio)
    # the paragraph names the device the run was faked on, its dtype, threads and repeats, and the speedups and FLOP/s
    # its own timings give
    (measured,) = [p for p in text(at).split("\n\n") if p.startswith(f"**Measured on {fake}**")]
    assert "(bfloat16," in measured  # the dtype the GPU ran at, as above
    assert shows(counted(measured, "threads?"), 1) and shows(counted(measured, "calls"), roofline_runs.REPEATS)
    speeds, reached = measured.split("Reached", 1)
    for alg, impl in (("FA1", "flash"), ("FA2", "flash2")):
        assert_speed_said(speeds.split(f"{alg} ")[1].split(", FA")[0], gpu.loc["naive"], gpu.loc[impl])
    for alg, impl in (("naive", "naive"), ("FA1", "flash"), ("FA2", "flash2")):
        assert shows(stated(reached, rf"\b{alg} "), gpu.at[impl, "flops"] / gpu.at[impl, "time_s"] / 1e9)
    assert all(t["xaxis"] == "x" for t in charts(at)[CHART]["data"] if t.get("name", "").endswith("(measured)")
               and "Fake GPU" in str(t.get("customdata")))  # the GPU's stars are in the GPUs' panel
    assert "not flash-attn's fused CUDA kernel" in text(at)


def test_timing_too_big_to_run_live_is_refused_with_a_fix_while_the_model_still_draws(make_app):
    at = make_app(view="roof", n="16384", br="4", bc="4")
    (error,) = [e.value for e in at.error]
    assert error.startswith("Timing here is off at these settings: At N = 16384") and "Raise the block size" in error
    assert not at.exception and len(chart_points(at)) == 3 * (len(GPUS) + 1)  # each GPU's and this CPU's
    assert_claims_match_the_chart(at)


# ----------------------------------------------------------------------------------------------------------------------
# controls and links


def test_controls_have_help_and_a_hostile_gpu_dtype_is_repaired_with_a_notice(make_app):
    at = make_app(view="roof", gpu_dtype="int8;drop")
    (warning,) = [w.value for w in at.warning]
    assert "`gpu_dtype=int8;drop` is not one of float16, bfloat16, float32; kept float16." in warning
    assert at.selectbox(key="gpu_dtype").value == "float16" and at.query_params["gpu_dtype"] == "float16"
    assert "tensor cores" in at.selectbox(key="gpu_dtype").proto.help
    assert "median" in at.button(key="roof_run").proto.help
    assert_claims_match_the_chart(at)


def test_gpu_dtype_round_trips_through_the_link():
    s, notices = parse_query({"gpu_dtype": "BFloat16"})
    assert (s.gpu_dtype, notices) == ("bfloat16", [])
    assert parse_query(s.to_query())[0] == s
