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
from dataclasses import replace

import pandas as pd
import streamlit as st

from flashviz.kit.drawing import show_figure
from flashviz.kit.runs import run_button_ui, timed_run
from flashviz.kit.widgets import draw
from flashviz.model.decode_batch import (
    PREFILL_BLOCK,
    decode_roofline_rows,
    variant_costs,
)
from flashviz.model.roofline import GPUS
from flashviz.units import format_bytes
from flashviz.views.decode import data as decoding
from flashviz.views.decode.animation import decode_animation
from flashviz.views.decode.data import (
    ANIM_D,
    SPARE_PAGES,
    DecodeSetup,
    divisors,
    live_bytes,
    seq_lens,
    timed_count,
    units_here,
)
from flashviz.views.decode.figures import bandwidth_figure, block_table_figure, decode_roofline_figure
from flashviz.views.decode.sentences import bytes_time_md, measured_md, merge_md, schedule_md, splits_md, story_md
from flashviz.views.decode.settings import DecodeSettings

# -- cached calls: the animation's small run and the timing run under the timing lock
BLOCKS_DRAWN_MAX = 4096  # KV blocks the animation draws; more need a larger page size
LIVE_KV_BYTES_MAX = 256 << 20  # bytes of K/V (contiguous plus paged copy) one live timing run may allocate
CACHE_ENTRIES = 16
AUTO = "auto"  # decsplits: the heuristic chooses


def setup_of(s: DecodeSettings) -> DecodeSetup:
    """The decode step the view's settings describe."""
    return DecodeSetup(seq_lens(s.cache_len, s.batch_lens), s.q_heads, s.kv_heads, s.d, s.page_size,
                       None if s.splits == AUTO else int(s.splits), s.dtype, s.threads)


# the animation's flash_decode run, its block table, pool size and paged error
animation_data = st.cache_data(decoding.decode_trace, show_spinner=False, max_entries=CACHE_ENTRIES)


decode_timing = timed_run(decoding.decode_timing)  # flash_decode, SDPA and naive, interleaved, in the timing worker


def _variant_name(h_q: int, h_kv: int) -> str:
    return "MHA" if h_kv == h_q else "MQA" if h_kv == 1 else f"GQA, g = {h_q // h_kv}"


def _controls_ui(s: DecodeSettings) -> DecodeSettings:
    """The view's widgets; H_kv is offered only among the divisors of H_q, and a value that does not divide (from a
    link, or after H_q changed) is repaired to the largest divisor below it, with a notice."""
    row1, row2 = st.columns(3), st.columns(3)
    draw("cache_len", row1[0])
    draw("q_heads", row1[1])
    ok = divisors(s.q_heads)
    if s.kv_heads not in ok:
        fixed = max(x for x in ok if x <= s.kv_heads) if s.kv_heads >= 1 else 1
        st.warning(f"H_kv = {s.kv_heads} does not divide H_q = {s.q_heads} (grouped-query attention shares each K/V "
                   f"head among the same number of query heads); using H_kv = {fixed}. With H_q = {s.q_heads}, "
                   f"H_kv can be {', '.join(map(str, ok))}.", icon="⚠️")
        st.session_state["kv_heads"] = fixed
        st.query_params["dechkv"] = str(fixed)
        s = replace(s, kv_heads=fixed)
    draw("kv_heads", row1[2], options=tuple(ok), labels={x: f"{x} ({_variant_name(s.q_heads, x)})" for x in ok})
    for name, col in zip(("splits", "page_size", "batch_lens"), row2, strict=True):
        draw(name, col)
    return s


def _animation_ui(setup: DecodeSetup, s: DecodeSettings) -> None:
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


def _measure_ui(setup: DecodeSetup, s: DecodeSettings) -> None:
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


def decoding_ui(s: DecodeSettings) -> None:
    """Draw the view for settings s."""
    st.markdown("Generating text, a model attends **one new query row per sequence** against everything it has "
                "cached. Flash-Decoding cuts the cache into splits computed side by side, then merges them exactly "
                "by their logsumexps.")
    s = _controls_ui(s)
    setup = setup_of(s)
    _animation_ui(setup, s)
    _story_ui(setup)
    _measure_ui(setup, s)
