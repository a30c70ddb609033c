"""The GPU pipeline view's plain data: each GPU's units, one tile's cycles on them, the three schedules' predictions
and Gantts, the papers' figures beside the model's, the exp2 polynomial's error and the lazy rescale's rate, measured.

Everything comes from flashviz.model.pipeline (arithmetic), flashviz.core.exp2poly (the polynomial, measured against
float64) and the Numerics view's lazy rescale (flashviz.views.numerics.data.lazy_rescale: FA4's conditional rescale
run on seeded inputs with LLM-like outlier channels, counted per row and tile). The papers' figures below are results
to compare with: none of them enters the model.

Legend: Br = Bc = 128 rows / keys per tile, d head dimension, N sequence length; cycles of the SM clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from flashviz.core.exp2poly import DEGREES, PolyError, error_table
from flashviz.model.pipeline import SCHEDULES, Prediction, gpu, simulate, tile_cycles, wave_efficiency
from flashviz.model.roofline import GPUS
from flashviz.views.numerics.data import NOT_COMPUTED, LabSettings, lazy_rescale

TAU = 8.0  # FA4's threshold, log2 units (a factor of 256)
SKIP_N, SKIP_D, SKIP_BLOCK = 1024, 128, 128  # the skip-rate run: N_q = N_k, d, Br = Bc (the Numerics lab's caps)
SHORT_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8"}
TOLERANCE = 0.25  # a paper's figure more than 25% from the model's is flagged on screen, with the reason
BAR_UNITS = ("mma", "exp", "fma", "smem")  # the units the per-tile bars show (l2 and hbm: the Roofline view's)
GANTT_TILES = 4  # K/V tiles the Gantt animates

# The papers' figures, each with its source; "check" says what the model computes to compare with it.
# (kind, GPU, schedule or phase, dtype, d, N, causal, figure, unit, source)
PAPER_TILES = (  # FlashAttention-4 (Zadouri et al., 2026), Section 2 and its blog: B200, 128 x 128 x 128, BF16
    ("B200", "forward", "mma", 1024), ("B200", "forward", "exp", 1024), ("B200", "forward", "smem", 768),
    ("B200", "backward", "mma", 2560), ("B200", "backward", "exp", 1024), ("B200", "backward", "smem", 3328),
)
# FlashAttention-3 (Shah et al., 2024), Figure 5 (forward, H100 SXM5, d = 128, 16k tokens, non-causal, BF16/FP16):
# FA2 370 and FA3 648 TFLOP/s at N = 16k (the abstract's "740 TFLOP/s, 75%" is FA3's best configuration, not this
# one). FlashAttention-4 (Zadouri et al., 2026): 1,613 TFLOP/s, 71%, on a B200 in BF16 (the blog says 1,605: the two
# sources differ by 0.5%); compared here at d = 128, N = 16k, non-causal (its headline shape as we read it).
PAPER_THROUGHPUT = (
    ("FA2", "H100", "bfloat16", 128, 16384, 370.0, "FA3 paper, Fig. 5 (d = 128, N = 16k)"),
    ("FA3", "H100", "bfloat16", 128, 16384, 648.0, "FA3 paper, Fig. 5 (d = 128, N = 16k)"),
    ("FA3", "H100", "float8_e4m3fn", 128, 16384, 1200.0, "FA3 paper: FP8 \"close to 1.2 PFLOPs/s\""),
    ("FA4", "B200", "bfloat16", 128, 16384, 1613.0, "FA4 paper, 71% (blog: 1,605)"),
)
# Why the model may stand above a paper: what it leaves out (each schedule's largest omission first).
WHY_ABOVE = {
    "FA2": "the model runs one CTA per SM with nothing overlapped; flash-attn's FA2 on Hopper also loses to its "
           "shared-memory reads through ldmatrix, which the model does not count",
    "FA3": "the model leaves out register pressure (two consumer warpgroups hold S, P and O in registers, so the "
           "overlap is shallower than the model's), the barriers between the warpgroups and instruction issue; and "
           "its H100 L2 bandwidth is an estimate, under which FA3's loads already take 96% of the CTA's time",
    "FA4": "the model leaves out the barriers between the MMA, softmax and correction warps, tensor memory's "
           "loads and stores of S, P and O, and the clock's drop under sustained tensor load; it is a bound of what "
           "the units allow",
}


def unit_table() -> pd.DataFrame:
    """Each GPU's units per SM, one row per GPU: SMs, clock (GHz), tensor FLOP/clk (bf16, fp8), exp2/clk, FMA/clk,
    shared memory bytes/clk, shared memory and TMEM (KiB), HBM and L2 (TB/s: the Roofline model's), source.

    Args:
        none: every GPU of flashviz.model.roofline.GPUS.
    Returns:
        DataFrame, one row per GPU, the columns above.
    Example:
        >>> t = unit_table().set_index("GPU")
        >>> int(t.at["B200", "tensor bf16 FLOP/clk"]), int(t.at["H100", "exp2/clk"])
        (8192, 16)
    """
    rows = []
    for g in GPUS:
        u = g.units
        rows.append({"GPU": g.name.split(" (")[0], "SMs": u.sms, "clock GHz": u.clock_hz / 1e9,
                     "tensor bf16 FLOP/clk": u.tensor_flops_per_clk["bfloat16"],
                     "tensor fp8 FLOP/clk": u.tensor_flops_per_clk.get("float8_e4m3fn", math.nan),
                     "exp2/clk": u.exp2_per_clk, "FMA/clk": u.fma_per_clk, "smem B/clk": u.smem_bytes_per_clk,
                     "smem KiB": u.smem_bytes // 1024, "TMEM KiB": u.tmem_bytes // 1024,
                     "HBM TB/s": g.bandwidth / 1e12, "L2 TB/s": g.l2_bandwidth / 1e12, "source": u.source})
    return pd.DataFrame(rows)


def tile_bars(head_dim: int, phase: str = "forward", dtypes: tuple[str, ...] = ("bfloat16", "float8_e4m3fn")
              ) -> pd.DataFrame:
    """One 128 x 128 tile's cycles on each unit, for every GPU and dtype it has (A100: no FP8).

    Args:
        head_dim: d.  phase: "forward" or "backward".  dtypes: the MMA dtypes to show.
    Returns:
        DataFrame: GPU, dtype, unit (BAR_UNITS), cycles, share (of the tile's MMA cycles).
    Example:
        >>> b = tile_bars(128).set_index(["GPU", "dtype", "unit"])
        >>> float(b.at[("H100", "bfloat16", "exp"), "share"]), float(b.at[("B200", "bfloat16", "exp"), "share"])
        (0.5, 1.0)
    """
    rows = []
    for g in GPUS:
        short = g.name.split(" (")[0]
        for dtype in dtypes:
            if dtype not in g.units.tensor_flops_per_clk:
                continue
            c = tile_cycles(g, head_dim=head_dim, dtype=dtype, phase=phase)
            rows += [{"GPU": short, "dtype": dtype, "unit": unit, "cycles": c[unit], "share": c[unit] / c["mma"]}
                     for unit in BAR_UNITS]
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class SkipRate:
    """FA4's lazy rescale measured on seeded inputs with LLM-like outlier channels (the Numerics view's run)."""

    tau: float  # the threshold, log2 units
    n: int  # N_q = N_k
    d: int  # head dimension
    block: int  # Br = Bc
    cells: int  # (row, tile) updates computed
    classic: int  # updates whose max grew (the classic kernel rescales at every tile anyway)
    lazy: int  # updates that rescale at tau
    rate: float  # lazy / cells: the share of rows FA4's correction warpgroup rescales at each tile
    skipped: float  # 1 - rate


def skip_rate(tau: float = TAU) -> SkipRate:
    """The share of (row, tile) updates that rescale O with FA4's threshold, on the Numerics lab's outlier inputs.

    Args:
        tau: the threshold, log2 units (FA4's 8).
    Returns:
        SkipRate.
    Example:
        >>> r = skip_rate()
        >>> r.lazy < r.classic < r.cells, r.rate < 0.05
        (True, True)
    """
    s = LabSettings(n_q=SKIP_N, n_k=SKIP_N, d=SKIP_D, heads=1, block=SKIP_BLOCK, tau=tau, outliers=True)
    r = lazy_rescale(s)
    cells = sum(1 for row in r.lazy.cells for c in row if c != NOT_COMPUTED)
    return SkipRate(tau, SKIP_N, SKIP_D, SKIP_BLOCK, cells, r.classic.total, r.lazy.total, r.lazy.total / cells,
                    1 - r.lazy.total / cells)


def predictions(gpu_name: str, dtype: str, head_dim: int, n: int, causal: bool, rate: float
                ) -> dict[str, Prediction | str]:
    """The three schedules simulated at one setting; a schedule that cannot run there maps to why (FA2 has no FP8).

    Args:
        gpu_name: a GPU's short name.  dtype, head_dim, n, causal: simulate's.  rate: FA4's measured rescale rate.
    Returns:
        schedule -> Prediction, or the reason it cannot run (a str).
    Example:
        >>> p = predictions("H100", "bfloat16", 128, 2048, False, 0.01)
        >>> p["FA2"].tflops < p["FA3"].tflops
        True
    """
    out: dict[str, Prediction | str] = {}
    for schedule in SCHEDULES:
        try:
            out[schedule] = simulate(schedule, gpu_name, seq_len=n, head_dim=head_dim, dtype=dtype, causal=causal,
                                     rescale_rate=rate if schedule == "FA4" else None)
        except ValueError as e:
            out[schedule] = str(e)
    return out


def gantt_window(preds: dict[str, Prediction | str], tiles: int = GANTT_TILES) -> float:
    """The cycles the Gantt shows: until the slowest schedule has finished its first `tiles` K/V tiles.

    Args:
        preds: predictions' answer.  tiles: K/V tiles the slowest schedule must finish.
    Returns:
        cycles.
    Example:
        >>> p = predictions("H100", "bfloat16", 128, 1024, False, 0.01)
        >>> gantt_window(p, 2) == float(p["FA2"].ops.query("0 <= tile <= 1")["end"].max())  # FA2: the slowest
        True
    """
    runs = [p for p in preds.values() if not isinstance(p, str)]
    slowest = min(runs, key=lambda p: p.tflops)
    return float(slowest.ops[slowest.ops["tile"].between(0, tiles - 1)]["end"].max())


def gantt_rows(p: Prediction, window: float) -> pd.DataFrame:
    """A prediction's Gantt rows that start within the window (the epilogue left out), with the schedule's name.

    Args:
        p: a Prediction.  window: the cycles shown.
    Returns:
        DataFrame: op, unit, tile, lane, start, end, schedule.
    Example:
        >>> g = gantt_rows(simulate("FA2", "H100", seq_len=1024), 8000)
        >>> sorted(set(g["tile"])), g["schedule"].iloc[0]
        ([-1, 0, 1], 'FA2')
    """
    ops = p.ops
    first = ops[(ops["start"] < window) & ~ops["op"].isin(["O / l", "store O"])]
    return first.assign(schedule=p.schedule)


def paper_checks(rate: float) -> pd.DataFrame:
    """Each paper figure beside the model's: the per-tile cycles and FA3's 50% (exact), the throughputs (model first;
    flagged beyond TOLERANCE with the reason).

    Args:
        rate: FA4's measured lazy rescale rate (skip_rate().rate).
    Returns:
        DataFrame: figure, source, paper, model, load (the loads' busy share of the CTA; NaN for a count), off
        (model / paper - 1), flagged, why.
    Example:
        >>> c = paper_checks(0.01).set_index("figure")
        >>> float(c.at["H100 tile, exp / mma cycles", "model"]), bool(c.at["FA4 on B200, bf16, TFLOP/s", "flagged"])
        (0.5, True)
    """
    rows = []
    for schedule, g, dtype, d, n, tflops, source in PAPER_THROUGHPUT:  # first: what a class asks about
        p = simulate(schedule, g, seq_len=n, head_dim=d, dtype=dtype,
                     rescale_rate=rate if schedule == "FA4" else None)
        rows.append({"figure": f"{schedule} on {g}, {SHORT_DTYPE[dtype]}, TFLOP/s", "source": source,
                     "paper": tflops, "model": p.tflops, "load": p.busy["load"]})
    for g, phase, unit, cycles in PAPER_TILES:
        rows.append({"figure": f"{g} {phase} tile, {unit} cycles", "source": "FA4 paper and blog",
                     "paper": float(cycles), "model": tile_cycles(g, phase=phase)[unit]})
    h100 = tile_cycles("H100")
    rows.append({"figure": "H100 tile, exp / mma cycles", "source": "FA3 paper, Section 3",
                 "paper": 0.5, "model": h100["exp"] / h100["mma"]})
    df = pd.DataFrame(rows)
    df["off"] = df["model"] / df["paper"] - 1
    df["flagged"] = df["off"].abs() > TOLERANCE
    df["why"] = [WHY_ABOVE[f.split()[0]].format(load=load) if flag and f.split()[0] in WHY_ABOVE else ""
                 for f, flag, load in zip(df["figure"], df["flagged"], df["load"], strict=True)]
    return df


def poly_errors(degrees: tuple[int, ...] = DEGREES) -> list[PolyError]:
    """The exp2 polynomial's error at each degree, against float64 (flashviz.core.exp2poly.error_table).

    Args:
        degrees: the polynomial's degrees.
    Returns:
        one PolyError per degree.
    Example:
        >>> e = {x.degree: x for x in poly_errors((3,))}
        >>> e[3].fp32 < 1e-4
        True
    """
    return error_table(degrees)


def waves(gpu_name: str, head_dim: int, rows_per_cta: int = 128) -> pd.DataFrame:
    """Wave quantisation at batch 1, heads x d = 2,048: for each N, the CTAs of a prefill (one per head and block of
    rows_per_cta queries) and of one decode step (one per head), without and with the keys split so that the CTAs
    fill the SMs (Flash-Decoding), and the share of the SMs' time they use.

    Args:
        gpu_name: a GPU's short name.  head_dim: d (heads = 2,048 / d).  rows_per_cta: queries per CTA.
    Returns:
        DataFrame: N, kind ("prefill", "decode", "decode, keys split"), programs, sms, efficiency.
    Example:
        >>> w = waves("H100", 128).set_index(["N", "kind"])
        >>> int(w.at[(512, "prefill"), "programs"]), round(float(w.at[(512, "decode"), "efficiency"]), 3)
        (64, 0.121)
    """
    g = gpu(gpu_name)
    sms = g.units.sms
    heads = 2048 // head_dim
    rows = []
    for n in (512, 1024, 2048, 4096, 8192, 16384, 32768):
        prefill = heads * math.ceil(n / rows_per_cta)
        splits = max(1, min(math.ceil(n / 128), sms // heads))  # Flash-Decoding: enough splits to fill the SMs
        for kind, programs in (("prefill", prefill), ("decode", heads), ("decode, keys split", heads * splits)):
            rows.append({"N": n, "kind": kind, "programs": programs, "sms": sms,
                         "efficiency": wave_efficiency(programs, sms)})
    return pd.DataFrame(rows)
