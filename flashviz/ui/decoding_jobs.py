"""The Decoding tab's cached calls: its settings as one DecodeSetup, the animation's small flash_decode run and the
timing run under the timing lock, both from flashviz.measure.decoding; the caps that refuse what the tab cannot show.
No widgets here: flashviz.ui.decoding draws them.

Legend: B sequences, N keys of the longest, H_q / H_kv query / K/V heads, g = H_q / H_kv, d head dimension, S splits.
"""

from __future__ import annotations

import threading

import pandas as pd
import streamlit as st

from flashviz.measure import decoding
from flashviz.measure.decoding import DecodeSetup, DecodeTrace, seq_lens
from flashviz.ui.lock import Progress, holding
from flashviz.ui.state import Settings

BLOCKS_DRAWN_MAX = 4096  # KV blocks the animation draws; more need a larger page size
LIVE_KV_BYTES_MAX = 256 << 20  # bytes of K/V (contiguous plus paged copy) one live timing run may allocate
CACHE_ENTRIES = 16
AUTO = "auto"  # decsplits: the heuristic chooses


def setup_of(s: Settings) -> DecodeSetup:
    """The decode step the tab's settings describe."""
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
