"""The "Decoding" view: one decode step of Flash-Decoding (flash_decode) animated from its own on_split events, the
paged cache's block table, the memory-bound story with numbers (bytes per token, arithmetic intensity on the
roofline next to prefill) and, on request, the measured time per step of flash_decode, SDPA and naive as a cache read
rate against this machine's measured bandwidth.

Widgets -> cached calls (the animation's small run; the timing run under the timing lock) -> figures from
flashviz.views.decode.animation. Every sentence that claims something is computed from the numbers it states.

Legend: B sequences, N keys of the longest, H_q / H_kv query / K/V heads, g = H_q / H_kv, d head dimension, S splits.
"""

from __future__ import annotations

import math
import threading
from dataclasses import replace

import pandas as pd
import streamlit as st

from flashviz.app.drawing import show_figure
from flashviz.app.lock import Progress, holding
from flashviz.app.runs import run_button_ui
from flashviz.app.state import Settings
from flashviz.app.widgets import draw
from flashviz.core.decode import BLOCK_M, FILLED, num_splits_heuristic
from flashviz.model.decode_batch import (
    DECODE,
    PREFILL,
    PREFILL_BLOCK,
    bounds_by_device,
    decode_roofline_rows,
    variant_costs,
)
from flashviz.model.roofline import GPUS
from flashviz.units import format_bytes
from flashviz.views.decode import data as decoding
from flashviz.views.decode.animation import decode_animation
from flashviz.views.decode.data import (
    ANIM_D,
    CPU,
    NEEDLE_SHIFT,
    SPARE_PAGES,
    DecodeSetup,
    DecodeTrace,
    divisors,
    live_bytes,
    seq_lens,
    timed_count,
    units_here,
)
from flashviz.views.decode.figures import bandwidth_figure, block_table_figure, decode_roofline_figure
from flashviz.views.decode.sentences import bytes_time_md, measured_md, splits_md
from flashviz.vocab import DTYPE_BYTES

# -- cached calls: the animation's small run and the timing run under the timing lock
BLOCKS_DRAWN_MAX = 4096  # KV blocks the animation draws; more need a larger page size
LIVE_KV_BYTES_MAX = 256 << 20  # bytes of K/V (contiguous plus paged copy) one live timing run may allocate
CACHE_ENTRIES = 16
AUTO = "auto"  # decsplits: the heuristic chooses


def setup_of(s: Settings) -> DecodeSetup:
    """The decode step the view's settings describe."""
    return DecodeSetup(seq_lens(s.declen, s.declens), s.dechq, s.dechkv, s.d, s.decpage,
                       None if s.decsplits == AUTO else int(s.decsplits), s.dtype, s.threads)


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def animation_data(lens: tuple[int, ...], page: int, num_splits: int
                   ) -> tuple[DecodeTrace, list[list[int]] | None, int, float]:
    """decoding.decode_trace: the animation's flash_decode run, its block table, pool size and paged error."""
    return decoding.decode_trace(lens, page, num_splits)


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def decode_timing(setup: DecodeSetup, device: str, reps: int, _progress: Progress | None = None,
                  _lock: threading.Lock | None = None) -> tuple[pd.DataFrame, float | None, str]:
    """decoding.decode_timing under the timing lock: flash_decode, SDPA and naive, interleaved."""
    with holding(_lock or threading.Lock(), _progress):
        return decoding.decode_timing(setup, device, reps, progress=_progress)


def _variant_name(h_q: int, h_kv: int) -> str:
    return "MHA" if h_kv == h_q else "MQA" if h_kv == 1 else f"GQA, g = {h_q // h_kv}"


def _controls_ui(s: Settings) -> Settings:
    """The view's widgets; H_kv is offered only among the divisors of H_q, and a value that does not divide (from a
    link, or after H_q changed) is repaired to the largest divisor below it, with a notice."""
    row1, row2 = st.columns(3), st.columns(3)
    draw("declen", row1[0])
    draw("dechq", row1[1])
    ok = divisors(s.dechq)
    if s.dechkv not in ok:
        fixed = max(x for x in ok if x <= s.dechkv) if s.dechkv >= 1 else 1
        st.warning(f"H_kv = {s.dechkv} does not divide H_q = {s.dechq} (grouped-query attention shares each K/V "
                   f"head among the same number of query heads); using H_kv = {fixed}. With H_q = {s.dechq}, "
                   f"H_kv can be {', '.join(map(str, ok))}.", icon="⚠️")
        st.session_state["dechkv"] = fixed
        st.query_params["dechkv"] = str(fixed)
        s = replace(s, dechkv=fixed)
    draw("dechkv", row1[2], options=tuple(ok), labels={x: f"{x} ({_variant_name(s.dechq, x)})" for x in ok})
    for name, col in zip(("decsplits", "decpage", "declens"), row2, strict=True):
        draw(name, col)
    return s


H100_SMS = 132  # streaming multiprocessors of an H100 SXM5 (NVIDIA H100 datasheet)
GPU_UNITS = 2 * H100_SMS  # flash-attn's heuristic counts 2 work tiles per SM (flashviz.core.decode.parallel_units)


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


def _animation_ui(setup: DecodeSetup, s: Settings) -> None:
    if setup.n_blocks > BLOCKS_DRAWN_MAX:
        st.error(f"{max(setup.lens)} keys in pages of {setup.page} make {setup.n_blocks} KV blocks; the animation "
                 f"draws at most {BLOCKS_DRAWN_MAX}. Raise the page size to at least "
                 f"{math.ceil(max(setup.lens) / BLOCKS_DRAWN_MAX)} or shorten the cache.")
        return
    units = units_here(s.device, s.threads)
    trace, table, num_pages, paged_err = animation_data(setup.lens, setup.page, setup.chosen_splits(units))
    show_figure(decode_animation(trace), key="decode_animation")
    st.markdown(schedule_md(setup, trace, units, s.device))
    st.markdown(merge_md(trace))
    st.markdown(f"Built from flash_decode's own on_split events at these lengths, splits and pages (random data, "
                f"one K/V head, d = {ANIM_D}: the schedule and the merge do not depend on the head count or d), for "
                "sequence 0, query head 0. **Running m**: the largest scaled score q·k/√d the split has read; "
                "**running l**: Σ exp(score − m) over its keys, rescaled whenever m grows (the dips). Press ▶ Play or "
                "drag the slider.")
    if table is not None:
        show_figure(block_table_figure(table, setup.lens, setup.page, num_pages, trace.splits),
                    key="decode_block_table")
        colours = ("one colour: S = 1, one split reads every page" if len(trace.splits) == 1 else
                   f"{len(trace.splits)} colours, one per split")
        st.markdown(f"The {len(setup.lens)} sequence(s) use {num_pages - SPARE_PAGES} of the pool's {num_pages} "
                    f"pages, shuffled; flash_decode follows the block table. The table has {colours}: a split reads "
                    f"the same key range of every sequence, wherever its pages lie in the pool. At these settings the "
                    f"output differs from the same cache stored contiguously by at most {paged_err:.1e}.")


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


def _story_ui(setup: DecodeSetup) -> None:
    st.subheader("Why decoding is memory-bound")
    costs = variant_costs(setup.lens, setup.d, setup.heads_q, setup.heads_kv, setup.dtype)
    rows = decode_roofline_rows(setup.lens, setup.d, setup.heads_q, setup.heads_kv, setup.dtype, GPUS)
    for para in story_md(setup, rows, costs):
        st.markdown(para)
    roofs = pd.DataFrame([{"device": d.name, "peak_flops": d.peak(setup.dtype), "bandwidth": d.bandwidth}
                          for d in GPUS])
    fig = decode_roofline_figure(rows, roofs, dtype=setup.dtype,
                                 prefill=f"prefill: all {max(setup.lens)} tokens at once, causal, Br = Bc = "
                                         f"{PREFILL_BLOCK}")
    show_figure(fig, key="decode_roofline")
    table = costs.assign(**{"K/V per step (MiB)": costs["kv_bytes"] / 2**20,
                            "intensity (FLOP/byte)": costs["intensity"]})
    st.dataframe(table[["variant", "heads_kv", "K/V per step (MiB)", "intensity (FLOP/byte)"]], hide_index=True,
                 column_config={"K/V per step (MiB)": st.column_config.NumberColumn(format="%.4g"),
                                "intensity (FLOP/byte)": st.column_config.NumberColumn(format="%.3g")})


def _measure_ui(setup: DecodeSetup, s: Settings) -> None:
    st.subheader("Measured here")
    st.markdown("Time per decode step on this machine, the implementations interleaved call by call, as the rate "
                "at which each reads the K/V cache (its bytes / the median time).")
    draw("reps", st)
    need = live_bytes(setup)
    if need > LIVE_KV_BYTES_MAX:
        ref = setup.reference_heads_kv
        st.error(f"A timing run at these settings needs {format_bytes(need)} of K/V tensors (the cache"
                 + (", its paged copy" if setup.page else "")
                 + (f", the {decoding.variant_name(setup.heads_q, ref)} cache it is compared with" if ref else "")
                 + (" and naive's K/V repeated for every query head" if setup.group > 1 else "")
                 + f"); the live cap is {format_bytes(LIVE_KV_BYTES_MAX)}. Lower the cache length, the heads, "
                 "d (sidebar) or the batch.")
        return
    n_fns = timed_count(setup, s.device)  # the flash_decode runs, SDPA and naive
    result = run_button_ui(
        "decode", decode_timing, (setup, s.device, s.reps), label="Run decode timing", title="Decode timing",
        help="Times flash_decode at a few split counts, SDPA and naive on these settings (cached per setting).",
        idle=f"Press **Run decode timing** to time {n_fns} implementations × {s.reps} repeat(s) on "
             f"{format_bytes(setup.kv_bytes)} of K/V cache" + (
                 f" (and flash_decode on {decoding.variant_name(setup.heads_q, ref)}'s "
                 f"{format_bytes(replace(setup, heads_kv=ref).kv_bytes)}, to set bytes against time)"
                 if (ref := setup.reference_heads_kv) else "") + ".")
    if result is None:
        return
    df, bandwidth, machine = result
    show_figure(bandwidth_figure(df, bandwidth), key="decode_bandwidth")
    st.markdown(measured_md(df, bandwidth, machine))
    units = units_here(s.device, s.threads)
    st.markdown(splits_md(df, setup, units, s.device))
    st.markdown(bytes_time_md(df, bandwidth, setup, units))
    if setup.page:
        st.markdown(f"flash_decode reads the paged cache ({setup.page} keys per page); SDPA and naive read the same "
                    "keys stored contiguously.")
    with st.expander("All measurements"):
        st.dataframe(df, hide_index=True)


def decoding_ui(s: Settings) -> None:
    """Draw the view for settings s."""
    st.markdown("Generating text, a model attends **one new query row per sequence** against everything it has "
                "cached. Flash-Decoding cuts the cache into splits computed side by side, then merges them exactly "
                "by their logsumexps.")
    s = _controls_ui(s)
    setup = setup_of(s)
    _animation_ui(setup, s)
    _story_ui(setup)
    _measure_ui(setup, s)
