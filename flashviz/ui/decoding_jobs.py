"""The Decoding tab's computations: its settings as one DecodeSetup, the animation's small flash_decode run and the
timing run (both cached), and the model rows its story quotes. No widgets here: flashviz.ui.decoding draws them.

Legend: B sequences, N keys of the longest, H_q / H_kv query / K/V heads, g = H_q / H_kv, d head dimension, S splits.
"""

from __future__ import annotations

import math
import statistics
import threading
from dataclasses import dataclass

import pandas as pd
import streamlit as st
import torch
import torch.nn.functional as F

from flashviz.core.decode import (
    BLOCK_M,
    DEFAULT_BLOCK_K,
    MergeEvent,
    SplitEvent,
    flash_decode,
    num_splits_heuristic,
    parallel_units,
)
from flashviz.core.reference import naive_attention
from flashviz.figures.decode import DecodeTrace
from flashviz.measure.impls import resolve_dtype
from flashviz.measure.timing import median_iqr, threads_set_to, time_calls
from flashviz.model.decode import attention_variants, decode_cost
from flashviz.model.roofline import GPUS, Device, attainable_flops, bound, predict_time, roofline_points, this_machine
from flashviz.ui.lock import Progress, holding
from flashviz.ui.state import Settings
from flashviz.vocab import DTYPE_BYTES, Q_OUTER

LENS_FRACTIONS = {"one": (1.0,), "pair": (1.0, 1 / 3), "four": (1.0,) * 4, "ragged": (1.0, 0.7, 0.4, 0.1)}
ANIM_D = 16  # head dimension of the animation's random data: the schedule and the merge do not depend on d
SPARE_PAGES = 2  # free pages in the animation's and the timing's page pool (a pool is rarely full)
BLOCKS_DRAWN_MAX = 4096  # KV blocks the animation draws; more need a larger page size
LIVE_KV_BYTES_MAX = 256 << 20  # bytes of K/V (contiguous plus paged copy) one live timing run may allocate
TIMED_SPLITS = (1, 2, 4)  # split counts always timed, besides the chosen one
PREFILL_BLOCK = 128  # Br = Bc of the prefill point on the roofline (FA2, causal)
WARMUP = 1  # untimed calls per implementation before the interleaved repeats
CACHE_ENTRIES = 16


@dataclass(frozen=True)
class DecodeSetup:
    """The decode step this tab shows: hashable, so it keys the caches."""

    lens: tuple[int, ...]  # keys per sequence (sequence 0 is the longest)
    heads_q: int  # H_q
    heads_kv: int  # H_kv, a divisor of H_q
    d: int  # head dimension
    page: int  # keys per page; 0 = contiguous cache
    splits: int | None  # requested S; None = the heuristic
    dtype: str  # name of the element type
    threads: int  # CPU threads (the heuristic's parallel units on a CPU)

    @property
    def group(self) -> int:
        return self.heads_q // self.heads_kv

    @property
    def block_k(self) -> int:
        return self.page or DEFAULT_BLOCK_K  # flash_decode's default: the page, or 256 keys

    @property
    def n_blocks(self) -> int:
        return math.ceil(max(self.lens) / self.block_k)

    def work_tiles(self) -> int:
        """Tiles before splitting, as flash-attn counts them: B * H_kv * ceil(G * N_q / 64)."""
        return len(self.lens) * self.heads_kv * math.ceil(self.group / BLOCK_M)

    def chosen_splits(self, units: int) -> int:
        """The S flash_decode is asked for: the request, or the heuristic's answer on `units` parallel units."""
        return self.splits or num_splits_heuristic(self.work_tiles(), units, self.n_blocks)

    def used_splits(self, requested: int) -> int:
        """Splits actually used: each split holds whole KV blocks, so asking for more than the blocks allow gives
        fewer (flash_decode's rule: chunk = ceil(blocks / S) blocks).

        Example:
            >>> DecodeSetup((1000,), 8, 2, 64, 0, 3, "float32", 2).used_splits(3)  # 4 blocks of 256: 2 + 2
            2
        """
        chunk = math.ceil(self.n_blocks / requested) * self.block_k
        return math.ceil(max(self.lens) / chunk)


def seq_lens(n: int, pattern: str) -> tuple[int, ...]:
    """The batch's cache lengths for a pattern of DEC_LENS (at least one key each).

    Example:
        >>> seq_lens(1024, "ragged")
        (1024, 717, 410, 102)
    """
    return tuple(max(1, round(n * f)) for f in LENS_FRACTIONS[pattern])


def divisors(h: int) -> list[int]:
    """The K/V head counts that grouped-query attention allows with h query heads.

    Example:
        >>> divisors(12)
        [1, 2, 3, 4, 6, 12]
    """
    return [x for x in range(1, h + 1) if h % x == 0]


def setup_of(s: Settings) -> DecodeSetup:
    return DecodeSetup(seq_lens(s.declen, s.declens), s.dechq, s.dechkv, s.d, s.decpage,
                       None if s.decsplits == "auto" else int(s.decsplits), s.dtype, s.threads)


# ----------------------------------------------------------------------------------------------------------------------
# the animation's run: flash_decode on small random data, its events turned into a DecodeTrace


def paged_copy(k: torch.Tensor, v: torch.Tensor, lens: tuple[int, ...], page: int, seed: int = 0
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The contiguous cache (B, H_kv, N_max, d) scattered into shuffled pages of a pool with SPARE_PAGES free ones:
    k_pages, v_pages (num_pages, H_kv, page, d) and the (B, max_pages) block table (unused entries 0).

    Example:
        >>> k = torch.arange(6.0).view(1, 1, 6, 1)  # keys 0..5 of one sequence
        >>> k_p, _, table = paged_copy(k, k, (6,), 4)
        >>> k_p.shape, k_p[table[0, 1], 0, :, 0].tolist()  # logical page 1: keys 4, 5 and padding
        (torch.Size([4, 1, 4, 1]), [4.0, 5.0, 0.0, 0.0])
    """
    B, H, n_max, d = k.shape
    max_pages = math.ceil(n_max / page)
    used = torch.arange(max_pages) < torch.tensor([math.ceil(n / page) for n in lens])[:, None]  # (B, max_pages)
    n_used = int(used.sum())
    perm = torch.randperm(n_used + SPARE_PAGES, generator=torch.Generator().manual_seed(seed))[:n_used]
    table = torch.zeros(B, max_pages, dtype=torch.int64)
    table[used] = perm
    pools = []
    for x in (k, v):
        blocks = F.pad(x, (0, 0, 0, max_pages * page - n_max)).view(B, H, max_pages, page, d).transpose(1, 2)
        pool = x.new_zeros(n_used + SPARE_PAGES, H, page, d)
        pool[perm] = blocks[used]  # (n_used, H, page, d): page j of sequence b lands at table[b, j]
        pools.append(pool)
    return pools[0], pools[1], table


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def animation_data(lens: tuple[int, ...], page: int, num_splits: int
                   ) -> tuple[DecodeTrace, list[list[int]] | None, int, float]:
    """Run flash_decode once (one head, d = ANIM_D, seed 0) and keep what the figures need: the trace of sequence 0
    (split ranges, m, l, L and merge weights from the on_split events; each block's own m and l), the block table
    the pool size and the largest difference from the same cache stored contiguously when paged."""
    g = torch.Generator().manual_seed(0)
    B, n_max, block_k = len(lens), max(lens), page or DEFAULT_BLOCK_K
    q = torch.randn(B, 1, 1, ANIM_D, generator=g)  # (B, 1, 1, d): one new token, one head
    k, v = (torch.randn(B, 1, n_max, ANIM_D, generator=g) for _ in range(2))  # (B, 1, N, d)
    caches, table, num_pages = (k, v), None, 0
    if page:
        k_p, v_p, table = paged_copy(k, v, lens, page)
        caches, num_pages = (k_p, v_p), k_p.shape[0]
    events: list[object] = []
    out = flash_decode(q, *caches, cache_seqlens=torch.tensor(lens), num_splits=num_splits, block_table=table,
                       on_split=events.append)
    paged_err = 0.0
    if page:  # the same cache stored contiguously: the paged result must equal it
        paged_err = float((out - flash_decode(q, k, v, cache_seqlens=torch.tensor(lens), num_splits=num_splits,
                                              block_k=block_k)).abs().max())
    splits = [e for e in events if isinstance(e, SplitEvent)]
    (merge,) = [e for e in events if isinstance(e, MergeEvent)]
    n_blocks = math.ceil(lens[0] / block_k)
    S_0 = (q[0, 0, 0] @ k[0, 0, : lens[0]].T) * ANIM_D**-0.5  # (N_0,) scaled scores of sequence 0, head 0, row 0
    S_0 = F.pad(S_0, (0, n_blocks * block_k - lens[0]), value=float("-inf")).view(n_blocks, block_k)
    block_m = S_0.amax(1)  # (n_blocks,)
    block_l = (S_0 - block_m[:, None]).exp().sum(1)  # (n_blocks,)
    trace = DecodeTrace(lens[0], block_k, tuple((e.start, min(e.stop, lens[0])) for e in splits),
                        tuple(block_m.tolist()), tuple(block_l.tolist()),
                        tuple(float(e.m[0]) for e in splits), tuple(float(e.l[0]) for e in splits),
                        tuple(float(e.lse[0]) for e in splits), tuple(merge.weights[:, 0].tolist()),
                        float(merge.lse[0]))
    return trace, (table.tolist() if table is not None else None), num_pages, paged_err


# ----------------------------------------------------------------------------------------------------------------------
# the model: bytes, FLOPs and the roofline


def variant_costs(setup: DecodeSetup) -> pd.DataFrame:
    """MHA, this GQA and MQA at this batch: K/V bytes, all bytes and FLOPs of one step (summed over sequences).

    Example:
        >>> df = variant_costs(DecodeSetup((1000, 500), 8, 2, 64, 0, None, "float16", 2))
        >>> df["kv_bytes"].tolist()  # 2 (K, V) x H_kv x 1500 keys x 64 x 2 bytes
        [3072000, 768000, 384000]
    """
    rows = []
    for name, h_kv in attention_variants(setup.heads_q, setup.heads_kv).items():
        costs = [decode_cost(n, setup.d, heads=setup.heads_q, heads_kv=h_kv, dtype=setup.dtype) for n in setup.lens]
        kv, total, flops = (sum(getattr(c, a) for c in costs) for a in ("kv_bytes", "hbm_bytes", "flops"))
        rows.append({"variant": name, "heads_kv": h_kv, "kv_bytes": kv, "hbm_bytes": total, "flops": flops,
                     "intensity": flops / total, "this": h_kv == setup.heads_kv})
    return pd.DataFrame(rows)


def roofline_rows(setup: DecodeSetup, devices: tuple[Device, ...] = GPUS) -> pd.DataFrame:
    """Decode variants and prefill of the longest sequence (FA2, causal) on each device: decode_roofline_figure's
    points."""
    rows = []
    costs = variant_costs(setup)
    for dev in devices:
        for r in costs.itertuples():
            rows.append({"device": dev.name, "label": r.variant, "kind": "decode", "intensity": r.intensity,
                         "attainable_flops": attainable_flops(r.intensity, dev, setup.dtype), "flops": r.flops,
                         "hbm_bytes": r.hbm_bytes, "time_s": predict_time(r.flops, r.hbm_bytes, dev, setup.dtype),
                         "bound": bound(r.intensity, dev, setup.dtype)})
    prefill = roofline_points(max(setup.lens), setup.d, block_q=PREFILL_BLOCK, block_k=PREFILL_BLOCK, causal=True,
                              heads=setup.heads_q, heads_kv=setup.heads_kv, dtype=setup.dtype, devices=devices,
                              algorithms=(Q_OUTER,))
    label = "prefill (FA2)"  # of the longest sequence, causal: the roofline's subtitle says so
    for r in prefill.itertuples():
        rows.append({"device": r.device, "label": label, "kind": "prefill", "intensity": r.intensity,
                     "attainable_flops": r.attainable_flops, "flops": r.flops, "hbm_bytes": r.hbm_bytes,
                     "time_s": r.time_s, "bound": r.bound})
    return pd.DataFrame(rows)


def bound_sentence(rows: pd.DataFrame, devices: tuple[Device, ...], dtype: str) -> str:
    """'memory-bound on A100, H100 and H200' (or split by bound), with each device's ridge."""
    parts = []
    for kind in ("memory", "compute"):
        names = [f"{d.name.split(' (')[0]} (ridge {d.ridge(dtype):.3g})" for d in devices
                 if (rows.loc[rows["device"] == d.name, "bound"] == kind).all()]
        if names:
            parts.append(f"**{kind}-bound** on {', '.join(names)}")
    return "; ".join(parts)


# ----------------------------------------------------------------------------------------------------------------------
# the measurement


def _naive_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lens: tuple[int, ...]) -> torch.Tensor:
    """Plain attention per sequence on its valid keys, K/V repeated for each query head of a group."""
    g = q.shape[1] // k.shape[1]
    return torch.cat([naive_attention(q[b : b + 1], k[b : b + 1, :, :n].repeat_interleave(g, 1),
                                      v[b : b + 1, :, :n].repeat_interleave(g, 1)) for b, n in enumerate(lens)])


def timed_splits(setup: DecodeSetup, units: int) -> dict[str, int | None]:
    """The flash_decode runs a timing makes: label -> num_splits argument (None = the heuristic). TIMED_SPLITS and the
    chosen S, each schedule once (two requests that give the same splits are one run).

    Example:
        >>> timed_splits(DecodeSetup((1024,), 8, 2, 64, 0, 3, "float32", 2), units=2)  # 4 blocks: S = 3 runs as 2
        {'flash_decode S=1': 1, 'flash_decode S=2': 2, 'flash_decode S=4': 4}
    """
    chosen = setup.chosen_splits(units)
    runs: dict[str, int | None] = {}
    for s in sorted({*TIMED_SPLITS, chosen}):
        auto = s == chosen and setup.splits is None
        name = f"flash_decode S={setup.used_splits(s)}" + (" (auto)" if auto else "")
        runs.setdefault(name, None if auto else s)
    return runs


def live_bytes(setup: DecodeSetup) -> int:
    """Bytes of K/V a timing run allocates: the contiguous cache, the paged copy, and naive's K/V of one sequence
    repeated for each of the g query heads of a group.

    Example:
        >>> live_bytes(DecodeSetup((1000, 500), 8, 2, 64, 256, None, "float32", 2))  # 2 MiB twice + 2 x 8 x 1000 x 256
        8290304
    """
    b = DTYPE_BYTES[setup.dtype]
    n_max = math.ceil(max(setup.lens) / setup.page) * setup.page if setup.page else max(setup.lens)
    cache = 2 * len(setup.lens) * setup.heads_kv * n_max * setup.d * b  # K and V
    repeated = 2 * setup.heads_q * max(setup.lens) * setup.d * b if setup.group > 1 else 0  # naive, one sequence
    return cache * (2 if setup.page else 1) + repeated


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def decode_timing(setup: DecodeSetup, device: str, reps: int, _progress: Progress | None = None,
                  _lock: threading.Lock | None = None) -> tuple[pd.DataFrame, float | None, str]:
    """Median time per decode step of flash_decode (TIMED_SPLITS and the chosen S), SDPA (enable_gqa, boolean mask)
    and naive, interleaved call by call; with this machine's measured RAM read bandwidth (bytes/s; None on a GPU)
    and its name."""
    with holding(_lock or threading.Lock(), _progress), threads_set_to(setup.threads), torch.no_grad():
        dev, dt = torch.device(device), resolve_dtype(setup.dtype)
        g = torch.Generator().manual_seed(0)
        B, n = len(setup.lens), max(setup.lens)
        q = torch.randn(B, setup.heads_q, 1, setup.d, generator=g).to(dev, dt)
        k, v = (torch.randn(B, setup.heads_kv, n, setup.d, generator=g).to(dev, dt) for _ in range(2))
        lens = torch.tensor(setup.lens, device=dev)
        caches, table = (k, v), None
        if setup.page:
            k_p, v_p, table = paged_copy(k.cpu(), v.cpu(), setup.lens, setup.page)
            caches, table = (k_p.to(dev), v_p.to(dev)), table.to(dev)
        mask = (torch.arange(n, device=dev) < lens[:, None])[:, None, None, :]  # (B, 1, 1, N) bool
        fns = {name: (lambda n=n: flash_decode(q, *caches, cache_seqlens=lens, block_table=table, num_splits=n))
               for name, n in timed_splits(setup, parallel_units(dev)).items()}
        fns["SDPA (enable_gqa)"] = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        fns["naive (K/V repeated)"] = lambda: _naive_decode(q, k, v, setup.lens)
        samples: dict[str, list[float]] = {name: [] for name in fns}
        for r in range(reps):
            if _progress is not None:
                _progress(r, reps, f"repeat {r + 1} of {reps}")
            for name, t in time_calls(fns, warmup=WARMUP if r == 0 else 0, repeats=1).items():
                samples[name].append(t.median)
        machine = this_machine()
    kv_bytes = sum(decode_cost(x, setup.d, heads=setup.heads_q, heads_kv=setup.heads_kv, dtype=setup.dtype).kv_bytes
                   for x in setup.lens)
    rows = []
    for name, ts in samples.items():
        med, _ = median_iqr(ts)
        q1, q3 = statistics.quantiles(ts, n=4, method="inclusive")[::2] if len(ts) > 1 else (med, med)
        rows.append({"label": name, "time_s": med, "q1_s": q1, "q3_s": q3, "kv_bytes": kv_bytes,
                     "GB_per_s": kv_bytes / med / 1e9, "threads": setup.threads, "repeats": len(ts)})
    on_cpu = dev.type == "cpu"  # this_machine() probes the CPU's RAM: no yardstick for a GPU's memory
    return pd.DataFrame(rows), (machine.bandwidth if on_cpu else None), machine.name


# ----------------------------------------------------------------------------------------------------------------------
# the tab
