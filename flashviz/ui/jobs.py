"""Heavy work behind the Benchmark, Block size, Correctness and Training tabs: cached calls into flashviz.sweep,
serialised by the process-wide timing lock, and the caps that refuse a run before it starts.

Every cached function takes hashable arguments only (tuples, ints, strings); `_progress` and `_lock` are
unhashed (leading underscore) and carry the progress callback and the lock. Results are tidy DataFrames.
"""

from __future__ import annotations

import math
import threading

import pandas as pd
import streamlit as st

from flashviz.measure import attention_flops
from flashviz.sweep import run_block_sweep, run_sweep
from flashviz.ui.common import Progress, holding
from flashviz.ui.state import Settings

WORK_FLOP_MAX = 1.5e12  # FLOPs one request may cost: about a minute or two on a 2-core laptop
TILES_MAX = 1 << 16  # tiles per tiled-kernel call: the Python tile loop costs ~20-50 us per tile
CALLS_PER_ROW = 3  # besides the timed repeats: one warm-up, one memory measurement, one fp64 reference
CACHE_ENTRIES = 32  # sweeps kept per cached function (a DataFrame of a few dozen rows each)

Window = tuple[int, int] | None


def _tiles(n: int, br: int, bc: int) -> int:
    return -(-n // br) * -(-n // bc)


def work_guard(ns: tuple[int, ...], *, d: int, br: int, bc: int, batch: int, heads: int, reps: int,
               n_impls: int, training: bool = False) -> str | None:
    """Why a sweep is too big to run live (a sentence that says how to fix it), or None."""
    worst = max(ns)
    if any(_tiles(n, br, bc) > TILES_MAX for n in ns):
        need = math.ceil(worst / math.isqrt(TILES_MAX))
        return (f"At N = {worst}, tiles of Br = {br} x Bc = {bc} give {_tiles(worst, br, bc):,} tiles per call; the "
                f"Python tile loop allows {TILES_MAX:,}. Raise the block size to at least {need} or lower N.")
    flops = sum(attention_flops(n, n, d, batch=batch, heads=heads, training=training) for n in ns)
    total = flops * n_impls * (reps + CALLS_PER_ROW)
    if total > WORK_FLOP_MAX:
        return (f"This request would compute about {total / 1e12:.1f} TFLOP; the live cap is "
                f"{WORK_FLOP_MAX / 1e12:.1f} TFLOP (a minute or two on a laptop CPU). Lower the largest N, d, "
                f"batch, heads or repeats, or run `python -m flashviz bench` from a terminal.")
    return None


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def sweep(ns: tuple[int, ...], d: int, br: int, bc: int, causal: bool, window: Window, impls: tuple[str, ...],
          batch: int, heads: int, dtype: str, device: str, threads: int, reps: int, mode: str = "forward",
          _progress: Progress | None = None, _lock: threading.Lock | None = None) -> pd.DataFrame:
    """run_sweep over N, cached on every argument; timing runs take turns on `_lock`."""
    with holding(_lock or threading.Lock(), _progress):
        return run_sweep(list(ns), d=d, block_q=br, block_k=bc, causal=causal, window=window, impls=impls,
                         batch=batch, heads=heads, dtype=dtype, device=device, threads=threads, repeats=reps,
                         mode=mode, progress=_progress)


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def block_sweep(n: int, blocks: tuple[int, ...], d: int, causal: bool, window: Window, batch: int, heads: int,
                dtype: str, device: str, threads: int, reps: int, _progress: Progress | None = None,
                _lock: threading.Lock | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """run_block_sweep of flash and flash2 at one N, plus naive and SDPA at that N as reference lines."""
    with holding(_lock or threading.Lock(), _progress):
        tiled = run_block_sweep(n, list(blocks), d=d, causal=causal, window=window, impls=("flash", "flash2"),
                                batch=batch, heads=heads, dtype=dtype, device=device, threads=threads,
                                repeats=reps, progress=_progress)
        reference = run_sweep([n], d=d, causal=causal, window=window, impls=("naive", "sdpa"), batch=batch,
                              heads=heads, dtype=dtype, device=device, threads=threads, repeats=reps)
    return tiled, reference


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def correctness(ds: tuple[int, ...], ns: tuple[int, ...], br: int, bc: int, causal: bool, window: Window,
                dtype: str, device: str, threads: int, _progress: Progress | None = None,
                _lock: threading.Lock | None = None) -> pd.DataFrame:
    """max_abs_err of every implementation against SDPA in float64, for each (d, N): run_sweep with one repeat."""
    total = len(ds)
    frames = []
    with holding(_lock or threading.Lock(), _progress):
        for i, d in enumerate(ds):
            if _progress is not None:
                _progress(i, total, f"d = {d}")
            frames.append(run_sweep(list(ns), d=d, block_q=br, block_k=bc, causal=causal, window=window,
                                    impls=("naive", "flash", "flash2", "sdpa"), dtype=dtype, device=device,
                                    threads=threads, repeats=1, warmup=0))
        if _progress is not None:
            _progress(total, total, "done")
    return pd.concat(frames, ignore_index=True)


def sweep_args(s: Settings, *, ns: tuple[int, ...] | None = None, impls: tuple[str, ...] | None = None,
               mode: str = "forward") -> tuple:
    """The hashable arguments of `sweep` for settings s."""
    return (ns or s.ns, s.d, s.br, s.bc, s.causal, s.window, impls or s.impls, s.batch, s.heads, s.dtype, s.device,
            s.threads, s.reps, mode)
