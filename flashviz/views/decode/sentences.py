"""What the Decoding view says, in words: the animation's schedule and merge, why decoding is memory-bound, and its
measurements, each sentence a pure function of its numbers (the traces and costs of flashviz.views.decode.data, the
timed rows of flashviz.views.decode.data.decode_timing (median and quartiles of the repeats) and of this machine's
measured read bandwidth, so that a verdict stands only where the measurements separate. Streamlit-free.

A time is the median of the repeats with its 95% interval (time_lo_s, time_hi_s). One run is faster than another only
by the verdict rule every view uses (flashviz.measure.verdict.compare: the two intervals separate and both medians
converged); otherwise the sentence says it is too close to call here and what would settle it.

Legend: B sequences, H_q / H_kv query / K/V heads, g = H_q / H_kv, S splits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from flashviz.core.decode import BLOCK_M, FILLED, num_splits_heuristic
from flashviz.measure.stats import TARGET_REL_CI, min_repeats
from flashviz.measure.verdict import (
    BUSY,
    FEWER_THREADS,
    MORE_REPEATS,
    Verdict,
    cell,
    compare,
    fewer_threads,
    row_estimate,
    sentence,
    threads_capped,
)
from flashviz.model.decode_batch import (
    DECODE,
    PREFILL,
    bounds_by_device,
)
from flashviz.model.roofline import GPUS
from flashviz.units import format_bytes
from flashviz.views.decode.data import (
    CPU,
    FLASH_LABEL,
    NEEDLE_SHIFT,
    SDPA_LABEL,
    DecodeSetup,
    DecodeTrace,
    reference_label,
    variant_name,
)
from flashviz.vocab import DTYPE_BYTES

FOLLOWS_TOL = 0.2  # "time follows bytes" when the time ratio is within 20% of the bytes ratio
FAR_BELOW_ROOF = 0.5  # a read rate under this share of the probe's bandwidth is "far below its roof"
FASTER, SLOWER, CLOSE = "faster", "slower", "too close to call"  # what `verdict` finds


def timed_verdict(a: pd.Series, b: pd.Series, names: tuple[str, str] = ("a", "b")) -> Verdict | None:
    """compare() of two timed rows by their medians' 95% intervals; None where either row carries no interval."""
    ea, eb = row_estimate(a), row_estimate(b)
    return None if ea is None or eb is None else compare(ea, eb, names)


def verdict(a: pd.Series, b: pd.Series) -> str:
    """Whether run a is faster or slower than run b by the verdict rule (timed_verdict): FASTER or SLOWER only where it
    separates them, else CLOSE.

    Args:
        a, b: timed rows with time_s, time_lo_s, time_hi_s (the median and its 95% interval, s) and repeats.
    Returns:
        FASTER, SLOWER or CLOSE.

    Example:
        >>> row = lambda t, h, n=20: pd.Series({"time_s": t, "time_lo_s": t - h, "time_hi_s": t + h, "repeats": n})
        >>> verdict(row(1, .02), row(1.3, .02)), verdict(row(1, .02), row(1.03, .02)), verdict(row(3, .1), row(1, .02))
        ('faster', 'too close to call', 'slower')
        >>> verdict(row(1.0, 0.02, 3), row(1.3, 0.02, 3))  # three repeats: no 95% interval, no verdict
        'too close to call'
    """
    v = timed_verdict(a, b)
    if v is None or not v.separated:
        return CLOSE
    return FASTER if v.ratio < 1 else SLOWER


def _settle(verdicts: list[Verdict]) -> str:
    """What would settle comparisons too close to call, from their verdicts: more repeats (fewer than a 95% interval
    needs, or intervals wider than the target), a quieter machine (one too busy for clean calls), the threads asked
    for (measured with fewer: other work kept cores busy), or a longer cache (a difference within the noise)."""
    if not verdicts:
        return "no interval was recorded to judge by"
    n = min(min(v.a.repeats, v.b.repeats) for v in verdicts)
    fewest = min_repeats()
    if n < fewest:
        return f"{n} repeat(s) give no 95% interval of a median; {fewest} or more would settle it"
    if any(v.settle == BUSY for v in verdicts):
        return "the machine was too busy for clean timings (more calls were set aside than kept); a quieter machine"
    if capped := [v for v in verdicts if v.settle == FEWER_THREADS]:
        ran = threads_capped(capped[0])[0]
        return (f"they were {fewer_threads(capped[0])}; free cores, or **CPU threads** set to {ran} in the sidebar, "
                "would settle it")
    wide = [v for v in verdicts if v.settle == MORE_REPEATS]
    if wide:
        return (f"at {n} repeats their intervals reach ±{max(v.widest for v in wide):.0%} of the median (target "
                f"±{TARGET_REL_CI:.0%}); more repeats or a quieter machine would settle it")
    return f"the difference is within the noise at {n} repeats; a longer cache would settle it"


def split_count(label: str) -> int:
    """S of a "flash_decode S=<splits>[ (auto)]" label.

    Example:
        >>> split_count("flash_decode S=4 (auto)")
        4
    """
    return int(label.split("S=")[1].split()[0])


def split_verdicts(df: pd.DataFrame) -> dict[int, str]:
    """Each timed split count S > 1 against S = 1: FASTER, SLOWER or CLOSE (`verdict`); {} without S = 1.

    Example:
        >>> df = pd.DataFrame({"label": ["flash_decode S=1", "flash_decode S=2", "flash_decode S=4"],
        ...                    "time_s": [10.0, 10.0, 5.3], "time_lo_s": [9.8, 9.5, 5.2],
        ...                    "time_hi_s": [10.2, 10.5, 5.4], "repeats": [20] * 3})
        >>> split_verdicts(df)  # S = 4 took about half S = 1's time, and the intervals separate
        {2: 'too close to call', 4: 'faster'}
    """
    flash = df[df["label"].str.startswith(FLASH_LABEL)]
    by_s = {split_count(str(r["label"])): r for _, r in flash.iterrows()}
    if 1 not in by_s:
        return {}
    return {s: verdict(by_s[s], by_s[1]) for s in sorted(by_s) if s > 1}


def _ms(row: pd.Series) -> str:
    return f"{row['time_s'] * 1e3:.3g} ms (95% interval {row['time_lo_s'] * 1e3:.3g}–{row['time_hi_s'] * 1e3:.3g})"


def _against(v: Verdict | None) -> str:
    """A row's time against another's as a verdict cell (flashviz.measure.verdict.cell), or "no interval"."""
    return "no interval" if v is None else cell(v)


def splits_md(df: pd.DataFrame, setup: DecodeSetup, units: int, device: str) -> str:
    """The split counts timed against S = 1, each with its median and 95% interval, a verdict per split count only where
    the verdict rule separates it from S = 1, and why splitting can help or not here: the work tiles against the
    parallel units (a split fills idle ones, and always adds the merge).

    Args:
        df: decode_timing's rows (label, time_s, time_lo_s, time_hi_s, repeats).  setup: the decode step.
        units: the parallel units flash_decode's heuristic sees.  device: "cpu" or a CUDA device.
    Returns:
        A markdown paragraph; "" without S = 1 or another split count.
    """
    flash = df[df["label"].str.startswith(FLASH_LABEL)]
    by_s = {split_count(str(r["label"])): r for _, r in flash.iterrows()}
    if 1 not in by_s or len(by_s) < 2:
        return ""
    one, tiles = by_s[1], setup.work_tiles()
    what = "threads" if device == CPU else "units"
    others = sorted(s for s in by_s if s > 1)
    against = {s: timed_verdict(by_s[s], one, (f"S = {s}", "S = 1")) for s in others}
    timed = ", ".join(f"S = {s}: {_ms(by_s[s])}, time against S = 1's {_against(against[s])}" for s in others)
    text = f"**Splits, measured** (median of the repeats, its 95% interval in brackets). S = 1: {_ms(one)}; {timed}. "
    if tiles >= units:
        text += (f"Here S = 1 already has {tiles} work tile(s) for {units} {what}, so none is idle: a split adds the "
                 "merge (S partial outputs and logsumexps written, then combined) and fills nothing")
    else:
        text += (f"Here S = 1 has {tiles} work tile(s) for {units} {what}, leaving {units - tiles} idle: splits can "
                 "fill them, at the price of the merge")
    found = split_verdicts(df)
    parts = []
    for kind, words in ((FASTER, "faster than S = 1"), (SLOWER, "slower than S = 1")):
        mine = [s for s in others if found[s] == kind]
        if mine:
            every = len(mine) == len(others) and len(others) > 1
            parts.append(f"{'every split count' if every else 'S = ' + ', '.join(map(str, mine))} "
                         f"{'was' if every or len(mine) == 1 else 'were'} {words}")
    close = [s for s in others if found[s] == CLOSE]
    if close:
        settle = _settle([against[s] for s in close if against[s] is not None])
        parts.append(f"S = {', '.join(map(str, close))} against S = 1 is too close to call here: {settle}")
    return text + "; " + "; ".join(parts) + "."


def measured_md(df: pd.DataFrame, bandwidth: float | None, machine: str) -> str:
    """What the measurement shows: the fastest flash_decode against SDPA and, on a CPU, the share of the machine's
    measured read bandwidth each flash_decode run reached."""
    flash = df[df["label"].str.startswith(FLASH_LABEL)]
    best = flash.loc[flash["time_s"].idxmin()]
    sdpa = df[df["label"] == SDPA_LABEL].iloc[0]
    text = (f"Fastest flash_decode here: **{best['label']}**, {best['time_s'] * 1e3:.3g} ms per step, reading the "
            f"cache at **{best['GB_per_s']:.3g} GB/s**")
    if bandwidth:
        shares = flash["GB_per_s"] * 1e9 / bandwidth
        text += (f": {best['GB_per_s'] * 1e9 / bandwidth:.0%} of the **{bandwidth / 1e9:.3g} GB/s** read bandwidth "
                 f"measured here ({machine}); the flash_decode runs reached {shares.min():.0%}–{shares.max():.0%} "
                 "of it")
    text += f". SDPA: {sdpa['time_s'] * 1e3:.3g} ms ({sdpa['GB_per_s']:.3g} GB/s). "
    v = timed_verdict(best, sdpa, (str(best["label"]), "SDPA"))
    text += sentence(v) if v is not None else "The two times carry no interval, so they name no faster side."
    above = df[df["GB_per_s"] * 1e9 > bandwidth] if bandwidth else df.iloc[:0]
    if len(above):
        text += (f" {', '.join(above['label'])} read faster than the x.sum() probe measured: part of the "
                 f"{format_bytes(float(df['kv_bytes'].iloc[0]))} cache came from the CPU's own caches, or these "
                 "reads use the memory better than that probe.")
    return text


@dataclass(frozen=True)
class BytesTime:
    """The same flash_decode run on two caches of different size: bytes ratio against time ratio."""

    split: int  # S both runs used
    big: str  # the larger cache's variant, e.g. "MHA (H_kv = 8)"
    small: str  # the smaller one's, e.g. "this GQA (H_kv = 2)"
    big_bytes: float  # K/V bytes per step of the larger cache
    small_bytes: float  # of the smaller
    bytes_ratio: float  # big_bytes / small_bytes
    time_ratio: float  # the larger cache's median time / the smaller's
    lo: float  # the time ratio's 95% interval (compare's ratio_low): big low / small high
    hi: float  # big high / small low
    shares: tuple[float, float] | None  # (larger, smaller) read rate / the probe's bandwidth; None without one
    follows: str  # FOLLOWS, NOT_FOLLOWS or CLOSE
    repeats: int  # the fewer repeats of the two runs


FOLLOWS, NOT_FOLLOWS = "time follows bytes", "time does not follow bytes"  # BytesTime.follows, besides CLOSE


def bytes_vs_time(df: pd.DataFrame, bandwidth: float | None, setup: DecodeSetup, units: int) -> BytesTime | None:
    """flash_decode at the chosen S on this step's K/V and on the reference variant's (MHA's under GQA or MQA, MQA's
    under MHA), compared by the verdict rule (compare): FOLLOWS when the time ratio's whole 95% interval lies within
    FOLLOWS_TOL of the bytes ratio, NOT_FOLLOWS when it lies wholly outside that band, each only where both intervals
    are real 95% ones and both medians converged; CLOSE otherwise.

    Args:
        df: decode_timing's rows (label, time_s, time_lo_s, time_hi_s, kv_bytes, GB_per_s, repeats).
        bandwidth: this machine's measured read bandwidth (bytes/s), or None.  setup: the step.
        units: the parallel units flash_decode's heuristic sees (which S the runs used).
    Returns:
        BytesTime, or None when the reference variant was not timed.

    Example:
        >>> setup = DecodeSetup((4096,), 8, 2, 64, 0, 2, "float32", 2)
        >>> df = pd.DataFrame({"label": ["flash_decode S=2", "MHA K/V: flash_decode S=2"], "time_s": [1.0, 1.8],
        ...                    "time_lo_s": [0.98, 1.77], "time_hi_s": [1.02, 1.83], "kv_bytes": [4e6, 16e6],
        ...                    "repeats": [20, 20]})
        >>> df["GB_per_s"] = df["kv_bytes"] / df["time_s"] / 1e9
        >>> r = bytes_vs_time(df, 1e9, setup, 2)
        >>> r.bytes_ratio, round(r.time_ratio, 2), r.follows  # 4x the bytes took 1.8x the time
        (4.0, 1.8, 'time does not follow bytes')
    """
    ref_label = reference_label(setup, units)
    rows = df.set_index("label")
    split = setup.used_splits(setup.chosen_splits(units))
    mine_label = next((x for x in rows.index if str(x).startswith(f"{FLASH_LABEL} S={split}")), None)
    if ref_label is None or ref_label not in rows.index or mine_label is None:
        return None
    mine = (rows.loc[mine_label], f"this {variant_name(setup.heads_q, setup.heads_kv)} (H_kv = {setup.heads_kv})")
    ref = (rows.loc[ref_label],
           f"{variant_name(setup.heads_q, setup.reference_heads_kv)} (H_kv = {setup.reference_heads_kv})")
    (big, big_name), (small, small_name) = (ref, mine) if ref[0]["kv_bytes"] > mine[0]["kv_bytes"] else (mine, ref)
    bytes_ratio = float(big["kv_bytes"] / small["kv_bytes"])
    time_ratio = float(big["time_s"] / small["time_s"])
    v = timed_verdict(big, small)
    lo, hi = (v.ratio_low, v.ratio_high) if v is not None else (math.nan, math.nan)
    band = (bytes_ratio / (1 + FOLLOWS_TOL), bytes_ratio * (1 + FOLLOWS_TOL))
    repeats = min(int(big["repeats"]), int(small["repeats"]))
    known = v is not None and min(v.a.level, v.b.level) >= v.confidence and v.a.converged and v.b.converged
    if known and band[0] <= lo and hi <= band[1]:
        follows = FOLLOWS
    elif known and (hi < band[0] or lo > band[1]):
        follows = NOT_FOLLOWS
    else:
        follows = CLOSE
    shares = ((float(big["GB_per_s"]) * 1e9 / bandwidth, float(small["GB_per_s"]) * 1e9 / bandwidth)
              if bandwidth else None)
    return BytesTime(split, big_name, small_name, float(big["kv_bytes"]), float(small["kv_bytes"]), bytes_ratio,
                     time_ratio, lo, hi, shares, follows, repeats)


def bytes_time_md(df: pd.DataFrame, bandwidth: float | None, setup: DecodeSetup, units: int) -> str:
    """Bytes against time, measured (`bytes_vs_time`) in words: the bytes ratio, the time ratio with its range, and
    "time follows bytes" only where the numbers show it; the share of the probe's bandwidth the two runs reached.
    "" when no reference variant was timed."""
    r = bytes_vs_time(df, bandwidth, setup, units)
    if r is None:
        return ""
    text = (f"**Bytes against time, measured.** flash_decode at S = {r.split} read {format_bytes(r.big_bytes)} of K/V "
            f"for {r.big} and {format_bytes(r.small_bytes)} for {r.small}: **{r.bytes_ratio:.3g}× the bytes took "
            f"{r.time_ratio:.2f}× the time** (95% interval, {r.lo:.2f}–{r.hi:.2f}×).")
    if r.follows == FOLLOWS:
        text += f" Time follows bytes here: the time ratio's interval is within {FOLLOWS_TOL:.0%} of the bytes ratio."
    elif r.follows == NOT_FOLLOWS:
        text += (" Time does not follow bytes here: the bytes cost less than their share of the time, and the rest "
                 "(the Python loop over splits and blocks, the merge, each call's fixed work) does not shrink with "
                 "the cache." if r.hi < r.bytes_ratio else
                 " Time does not follow bytes here: the larger cache cost more than its bytes (it falls out of the "
                 "CPU's caches).")
    elif r.repeats < min_repeats():
        text += (f" Whether time follows bytes is too close to call here: {r.repeats} repeat(s) give no 95% "
                 f"interval of a median; {min_repeats()} or more would settle it.")
    else:
        text += (f" Whether time follows bytes is too close to call here: the time ratio's interval reaches across "
                 f"the band within {FOLLOWS_TOL:.0%} of the bytes ratio, or a median is not known to "
                 f"±{TARGET_REL_CI:.0%}; more repeats would settle it.")
    if r.shares is not None:
        text += (f" The two read the cache at {min(r.shares):.0%}–{max(r.shares):.0%} of the "
                 f"{bandwidth / 1e9:.3g} GB/s this machine's probe measured"
                 + (": far below its roof, so the bytes are not what sets the time" if max(r.shares) < FAR_BELOW_ROOF
                    else "") + ".")
    return text


def schedule_md(setup: DecodeSetup, trace: DecodeTrace, units: int, device: str) -> str:
    """What the animation shows and why one splits at all: the work tiles of a decode step against the parallel
    units that run them (here, and on an H100), and what flash-attn's rule chooses on each."""
    used = len(trace.splits)
    chunk = trace.splits[0][1] - trace.splits[0][0] if used > 1 else trace.seq_len
    per_split = -(-setup.n_blocks // used)
    text = (f"Sequence 0 holds **{trace.seq_len} keys in {setup.n_blocks} KV block(s)** of {setup.block_k} keys, "
            f"cut into **S = {used} split(s)**" + (f" of {chunk} keys ({per_split} blocks each, the last one "
                                                   "shorter)" if used > 1 and trace.seq_len % chunk else
                                                   f" of {chunk} keys ({per_split} blocks each)" if used > 1 else "")
            + f'. The slider\'s "each split has read k of its {per_split} blocks" counts the blocks every split has '
            "folded in so far; all splits advance together, each with its own m, l and logsumexp L_s.")
    tiles = setup.work_tiles()
    what = "threads" if device == CPU else "units (2 per SM)"
    here = setup.chosen_splits(units) if setup.splits is None else num_splits_heuristic(tiles, units, setup.n_blocks)
    gpu = num_splits_heuristic(tiles, GPU_UNITS, setup.n_blocks)
    text += (f"\n\n**Why split at all.** A decode step has only {tiles} work tile(s), B·H_kv·⌈g/64⌉ = "
             f"{len(setup.lens)}·{setup.heads_kv}·{math.ceil(setup.group / BLOCK_M)}: one new query row per sequence "
             "and K/V head, each reading its whole cache block after block. A GPU runs hundreds of tiles at once: an "
             f"H100 has {H100_SMS} SMs, {GPU_UNITS} units, so without splits {max(GPU_UNITS - tiles, 0)} of them "
             f"would idle; cutting the cache into S splits makes S × {tiles} tiles, and flash-attn's rule picks S = "
             f"{gpu} there. This machine has {units} {what}: ")
    if setup.n_blocks <= 1:
        text += "one KV block only, nothing to split."
    elif tiles >= FILLED * units:
        text += (f"{tiles} tile(s) already keep at least {FILLED:.0%} of them busy, so the rule does not split "
                 f"(S = {here}): a split would add merge work and fill no idle one.")
    else:
        text += (f"{tiles} tile(s) leave {what} idle, so the rule splits: S = {here}, the fewest splits within 85% of "
                 "the best wave efficiency.")
    if setup.splits is None:
        text += f" **Auto** chose S = {used}: {tiles} work tile(s) on {units} {what}."
    elif setup.splits > used:
        text += (f" You asked for {setup.splits}, but every split holds whole blocks: {setup.n_blocks} block(s) "
                 f"give at most {used}.")
    return text


def merge_md(trace: DecodeTrace) -> str:
    """The merge in words: each split's weight exp(L_s - L) against its share of the keys, and why they differ."""
    if len(trace.splits) == 1:
        return "**The merge.** One split: its partial output is the output (weight 1)."
    shares = [(b - a) / trace.seq_len for a, b in trace.splits]
    top = max(range(len(trace.weights)), key=trace.weights.__getitem__)
    weights = ", ".join(f"split {s} {w:.2f}" for s, w in enumerate(trace.weights))
    text = (f"**The merge.** Split s contributes exp(L_s − L) of the output: {weights} (the bars at the end). By "
            f"their share of the keys alone they would get {', '.join(f'{x:.2f}' for x in shares)}.")
    if trace.needle is not None:
        a, b = trace.needle
        owner = next((s for s, (lo, hi) in enumerate(trace.splits) if lo <= a < hi), top)
        text += (f" Keys {a}–{b - 1} are the ones this query matches (in this demo their scores are raised by "
                 f"{NEEDLE_SHIFT:g}; the rest are random): split {owner}, which holds them, has the largest L_s and "
                 f"gets {trace.weights[owner]:.0%} of the output. A plain average of the splits would give it "
                 f"{1 / len(trace.splits):.0%}: the logsumexps are what makes the merge exact.")
    return text


def bound_sentence(rows: pd.DataFrame, dtype: str) -> str:
    """'**memory-bound** on A100 (ridge 153), H100 ... and H200 ...' (or split by bound): bounds_by_device in words."""
    parts = []
    for kind, devices in bounds_by_device(rows, GPUS, dtype).items():
        names = [f"{name.split(' (')[0]} (ridge {ridge:.3g})" for name, ridge in devices]
        if names:
            parts.append(f"**{kind}-bound** on {', '.join(names)}")
    return "; ".join(parts)


def story_md(setup: DecodeSetup, rows: pd.DataFrame, costs: pd.DataFrame) -> list[str]:
    """The memory-bound story at these settings, one claim per paragraph, each computed from the model."""
    this = costs[costs["this"]].iloc[0]
    b, g, B = DTYPE_BYTES[setup.dtype], setup.group, len(setup.lens)
    per_key, rough = setup.bytes_per_key, setup.cache_intensity
    decode = rows[rows["kind"] == DECODE]
    mine = decode[decode["label"] == this["variant"]]
    prefill = rows[rows["kind"] == PREFILL]
    paras = [
        f"**Bytes per token.** One decode step reads the whole K/V cache: {per_key:,} bytes per cached key "
        f"(K and V × H_kv = {setup.heads_kv} heads × d = {setup.d} × {b} bytes of {setup.dtype}), so "
        f"**{format_bytes(this['kv_bytes'])} per step** for the {sum(setup.lens):,} keys of {B} sequence(s): "
        f"{format_bytes(this['kv_bytes'] / B)} per generated token on average.",
        f"**Arithmetic intensity {this['intensity']:.3g} FLOP/byte**: {this['flops']:,} FLOPs (4·N·d per query "
        f"head) over {this['hbm_bytes']:,} bytes moved, all but {this['hbm_bytes'] - this['kv_bytes']:,} of them "
        f"the cache (the rest: the query, the output and its logsumexp). The cache alone gives 2·g / {b} bytes "
        f"= 2·{g}/{b} = {rough:.3g} FLOP/byte: "
        + ("each K/V byte serves every query head of its group, so GQA multiplies the intensity by g."
           if g > 1 else "with MHA every K/V head serves a single query head."),
        f"This step is {bound_sentence(mine, setup.dtype)} (ridge = peak / bandwidth in FLOP/byte, at "
        f"{setup.dtype}): below the ridge the roofline model's time is the bytes over the bandwidth, whatever the "
        "kernel. "
        f"Prefill of the same {max(setup.lens)} tokens runs at {prefill['intensity'].iloc[0]:.3g} FLOP/byte: "
        f"{bound_sentence(prefill, setup.dtype)}.",
    ]
    mha = costs[costs["variant"] == "MHA"].iloc[0]
    if g > 1:
        paras.append(f"**GQA reads fewer bytes.** Against MHA (H_kv = H_q = {setup.heads_q}: "
                     f"{format_bytes(mha['kv_bytes'])}), these {setup.heads_kv} K/V head(s) read "
                     f"**{mha['kv_bytes'] / this['kv_bytes']:.3g}× fewer K/V bytes** for the same "
                     f"{this['flops']:,} FLOPs.")
    elif setup.heads_q > 1:
        mqa = costs[costs["variant"] == "MQA"].iloc[0]
        paras.append(f"**This is MHA.** With MQA (one K/V head) the step would read "
                     f"{this['kv_bytes'] / mqa['kv_bytes']:.3g}× fewer K/V bytes ({format_bytes(mqa['kv_bytes'])}) "
                     "for the same FLOPs.")
    return paras


H100_SMS = 132  # streaming multiprocessors of an H100 SXM5 (NVIDIA H100 datasheet)


GPU_UNITS = 2 * H100_SMS  # flash-attn's heuristic counts 2 work tiles per SM (flashviz.core.decode.parallel_units)
