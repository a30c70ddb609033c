"""The Decoding view's measurements: one decode step (Flash-Decoding, flash_decode) recorded for the animation, the
paged copy of a cache, and the time per step of flash_decode at a few split counts, SDPA and naive, interleaved.

A `DecodeSetup` holds the step as numbers (hashable, so the dashboard caches on it). `decode_trace` runs flash_decode
once on small random data and keeps, from its own on_split events, what the animation draws (a `DecodeTrace`, plain
numbers). `decode_timing` times the implementations side by side (flashviz.measure.timing.time_calls) and reports
the cache read rate next to this machine's measured bandwidth. Progress goes through `progress(done, total, label)`;
raise from it to stop (flashviz.measure.progress).

References: Flash-Decoding (Dao, Haziza, Massa, Sizov, 2023); vLLM's PagedAttention (block tables); flash-attn's
num_splits_heuristic (flashviz.core.decode).
Legend: B sequences, N keys of the longest, H_q / H_kv query / K/V heads, g = H_q / H_kv, d head dimension, S splits.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import pandas as pd
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
from flashviz.measure.impls import resolve_dtype
from flashviz.measure.progress import Progress
from flashviz.measure.roof_probe import machine_roof
from flashviz.measure.timing import threads_set_to, time_calls
from flashviz.model.decode import decode_cost
from flashviz.vocab import DTYPE_BYTES

LENS_FRACTIONS = {"one": (1.0,), "pair": (1.0, 1 / 3), "four": (1.0,) * 4, "ragged": (1.0, 0.7, 0.4, 0.1)}
ANIM_D = 16  # head dimension of the animation's random data: the schedule and the merge do not depend on d
SPARE_PAGES = 2  # free pages in the animation's and the timing's page pool (a pool is rarely full)
TIMED_SPLITS = (1, 2, 4)  # split counts always timed, besides the chosen one
NEEDLE_AT = 0.62  # the animation's query matches a run of keys starting at this fraction of sequence 0's length
NEEDLE_KEYS = 16  # keys in that run
NEEDLE_SHIFT = 6.0  # their scaled scores q.k/sqrt(d) are raised by this much (natural log units): about e^6 = 400x
# the weight of an ordinary key, so the split that holds them gets most of the merge, as a real query's few relevant
# keys do
WARMUP = 1  # untimed calls per implementation before the interleaved repeats
SDPA_LABEL, NAIVE_LABEL = "SDPA (enable_gqa)", "naive (K/V repeated)"
FLASH_LABEL = "flash_decode"  # the timed flash_decode runs are labelled "flash_decode S=<splits>"
REFERENCE_PREFIX = "{variant} K/V: "  # the reference variant's run: "MHA K/V: flash_decode S=<splits>"
CPU = "cpu"


@dataclass(frozen=True)
class DecodeSetup:
    """The decode step the view shows: hashable, so it keys the caches."""

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

    @property
    def bytes_per_key(self) -> int:
        """Bytes of K and V per cached key position: 2 x H_kv x d x the dtype's bytes."""
        return 2 * self.heads_kv * self.d * DTYPE_BYTES[self.dtype]

    @property
    def kv_bytes(self) -> int:
        """Bytes of K/V cache every step reads: all the batch's keys."""
        return self.bytes_per_key * sum(self.lens)

    @property
    def cache_intensity(self) -> float:
        """FLOP per cache byte: 4 N d FLOPs per query head over 2 N d b bytes per K/V head, 2 g / b."""
        return 2 * self.group / DTYPE_BYTES[self.dtype]

    @property
    def reference_heads_kv(self) -> int | None:
        """H_kv of the variant timed beside this one to set bytes against time: MHA's H_q under GQA or MQA, MQA's 1
        under MHA, None with one query head (nothing to compare).

        Example:
            >>> [DecodeSetup((64,), 8, h, 8, 0, 1, "float32", 1).reference_heads_kv for h in (2, 8)]
            [8, 1]
        """
        if self.heads_q == 1:
            return None
        return self.heads_q if self.heads_kv < self.heads_q else 1

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
    """The batch's cache lengths for a pattern of LENS_FRACTIONS (at least one key each).

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


def units_here(device: str, threads: int) -> int:
    """The parallel units flash_decode's heuristic sees on `device` at `threads` CPU threads (flashviz.core.decode.
    parallel_units: the threads on a CPU, 2 per SM on CUDA).

    Example:
        >>> units_here("cpu", 3)
        3
    """
    with threads_set_to(threads):
        return parallel_units(torch.device(device))


# ----------------------------------------------------------------------------------------------------------------------
# the animation's run: flash_decode on small random data, its events turned into a DecodeTrace


@dataclass(frozen=True)
class DecodeTrace:
    """One decode step for sequence 0, query head 0, query row 0: what the animation draws (plain numbers)."""

    seq_len: int  # keys of sequence 0 (the longest)
    block_k: int  # keys per KV block (the page size when paged)
    splits: tuple[tuple[int, int], ...]  # (start, stop) key range of each split, from the on_split events
    block_m: tuple[float, ...]  # m of each KV block on its own: max of its scaled scores
    block_l: tuple[float, ...]  # l of each KV block on its own: sum of exp(S_ij - block m)
    split_m: tuple[float, ...]  # m_s of each split (event)
    split_l: tuple[float, ...]  # l_s of each split (event)
    split_lse: tuple[float, ...]  # L_s = m_s + log l_s (event)
    weights: tuple[float, ...]  # exp(L_s - L): each split's share of the output (merge event)
    lse: float  # L, the merged logsumexp (merge event)
    needle: tuple[int, int] | None = None  # (start, stop) keys of sequence 0 the query matches (NEEDLE_SHIFT), if any


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


def block_stats(q0: torch.Tensor, k0: torch.Tensor, block_k: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Each KV block's own m (max scaled score) and l (sum of exp(S - m)) for one query row: the steps of the
    animation's running m and l.

    Args:
        q0: (d,) the query row.  k0: (N, d) its sequence's keys.  block_k: keys per block (the last one ragged).

    Example:
        >>> m, l = block_stats(torch.ones(4), torch.zeros(3, 4), 2)  # every score 0: l counts the block's keys
        >>> m, l
        ((0.0, 0.0), (2.0, 1.0))
    """
    n, d = k0.shape
    n_blocks = math.ceil(n / block_k)
    S_0 = (k0 @ q0) * d**-0.5  # (N,) scaled scores
    S_0 = F.pad(S_0, (0, n_blocks * block_k - n), value=float("-inf")).view(n_blocks, block_k)
    block_m = S_0.amax(1)  # (n_blocks,)
    block_l = (S_0 - block_m[:, None]).exp().sum(1)  # (n_blocks,)
    return tuple(block_m.tolist()), tuple(block_l.tolist())


def needle_keys(n: int) -> tuple[int, int]:
    """The run of keys (start, stop) of an n-key sequence that the animation's query matches.

    Example:
        >>> needle_keys(1000), needle_keys(8)
        ((620, 636), (0, 8))
    """
    start = min(round(NEEDLE_AT * n), max(n - NEEDLE_KEYS, 0))
    return start, min(start + NEEDLE_KEYS, n)


def decode_trace(lens: tuple[int, ...], page: int, num_splits: int
                 ) -> tuple[DecodeTrace, list[list[int]] | None, int, float]:
    """Run flash_decode once (one head, d = ANIM_D, seed 0) and keep what the figures need: the trace of sequence 0
    (split ranges, m, l, L and merge weights from the on_split events; each block's own m and l), the block table,
    the pool size and, when paged, the largest difference from the same cache stored contiguously.

    The data are random, except a run of NEEDLE_KEYS keys of sequence 0 (needle_keys) that the query matches: their
    scores are NEEDLE_SHIFT higher, so the split holding them carries most of the merge (random keys alone would give
    every split about its share of the keys, and the merge would look like an average).

    Example:
        >>> trace, table, pages, err = decode_trace((600, 100), 64, 2)
        >>> trace.splits, pages, err < 1e-6  # 10 pages of 64 keys: 5 per split; 10 + 2 pages in use, 2 spare
        (((0, 320), (320, 600)), 14, True)
    """
    g = torch.Generator().manual_seed(0)
    B, n_max, block_k = len(lens), max(lens), page or DEFAULT_BLOCK_K
    q = torch.randn(B, 1, 1, ANIM_D, generator=g)  # (B, 1, 1, d): one new token, one head
    k, v = (torch.randn(B, 1, n_max, ANIM_D, generator=g) for _ in range(2))  # (B, 1, N, d)
    a, b = needle_keys(lens[0])
    q0 = q[0, 0, 0]  # (d,)
    k[0, 0, a:b] += NEEDLE_SHIFT * ANIM_D**0.5 / float(q0 @ q0) * q0  # (b - a, d): scores q.k / sqrt(d) + shift
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
    block_m, block_l = block_stats(q[0, 0, 0], k[0, 0, : lens[0]], block_k)  # sequence 0, head 0, row 0
    trace = DecodeTrace(lens[0], block_k, tuple((e.start, min(e.stop, lens[0])) for e in splits), block_m, block_l,
                        tuple(float(e.m[0]) for e in splits), tuple(float(e.l[0]) for e in splits),
                        tuple(float(e.lse[0]) for e in splits), tuple(merge.weights[:, 0].tolist()),
                        float(merge.lse[0]), (a, b))
    return trace, (table.tolist() if table is not None else None), num_pages, paged_err


# ----------------------------------------------------------------------------------------------------------------------
# the measurement


def naive_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lens: tuple[int, ...]) -> torch.Tensor:
    """Plain attention per sequence on its valid keys, K/V repeated for each query head of a group.

    Args:
        q: (B, H_q, 1, d).  k, v: (B, H_kv, N_max, d).  lens: valid keys per sequence.
    Returns:
        (B, H_q, 1, d).

    Example:
        >>> k = torch.randn(2, 1, 5, 4)
        >>> out = naive_decode(torch.randn(2, 2, 1, 4), k, k, (5, 2))
        >>> out.shape
        torch.Size([2, 2, 1, 4])
    """
    g = q.shape[1] // k.shape[1]
    return torch.cat([naive_attention(q[b : b + 1], k[b : b + 1, :, :n].repeat_interleave(g, 1),
                                      v[b : b + 1, :, :n].repeat_interleave(g, 1)) for b, n in enumerate(lens)])


def timed_splits(setup: DecodeSetup, units: int) -> dict[str, int | None]:
    """The flash_decode runs a timing makes: label -> num_splits argument (None = the heuristic). TIMED_SPLITS and the
    chosen S, each schedule once: requests that give the same splits are one run (the heuristic's, if it is one).

    Example:
        >>> timed_splits(DecodeSetup((1024,), 8, 2, 64, 0, 3, "float32", 2), units=2)  # 4 blocks: S = 3 runs as 2
        {'flash_decode S=1': 1, 'flash_decode S=2': 2, 'flash_decode S=4': 4}
    """
    chosen = setup.chosen_splits(units)
    runs: dict[int, tuple[str, int | None]] = {}  # splits used -> (label, num_splits argument)
    for s in sorted({*TIMED_SPLITS, chosen}):
        auto = s == chosen and setup.splits is None
        used = setup.used_splits(s)
        if used not in runs or auto:  # the heuristic's run keeps its place and takes the "(auto)" label
            runs[used] = (f"{FLASH_LABEL} S={used}" + (" (auto)" if auto else ""), None if auto else s)
    return dict(runs.values())


def variant_name(heads_q: int, heads_kv: int) -> str:
    """'MHA', 'MQA' or 'GQA' for H_q query heads sharing H_kv K/V heads.

    Example:
        >>> variant_name(8, 8), variant_name(8, 1), variant_name(8, 2)
        ('MHA', 'MQA', 'GQA')
    """
    return "MHA" if heads_kv == heads_q else "MQA" if heads_kv == 1 else "GQA"


def reference_label(setup: DecodeSetup, units: int) -> str | None:
    """The label of the reference variant's run (flash_decode at the chosen S on MHA's, or MQA's, K/V), or None.

    Example:
        >>> reference_label(DecodeSetup((1024,), 8, 2, 64, 0, 2, "float32", 2), 2)
        'MHA K/V: flash_decode S=2'
    """
    ref = setup.reference_heads_kv
    if ref is None:
        return None
    chosen = setup.used_splits(setup.chosen_splits(units))
    return REFERENCE_PREFIX.format(variant=variant_name(setup.heads_q, ref)) + f"{FLASH_LABEL} S={chosen}"


def timed_count(setup: DecodeSetup, device: str) -> int:
    """How many implementations decode_timing times: the flash_decode runs, the reference variant's, SDPA and naive.

    Example:
        >>> timed_count(DecodeSetup((1024,), 8, 2, 64, 0, 3, "float32", 2), "cpu")
        6
    """
    units = units_here(device, setup.threads)
    return len(timed_splits(setup, units)) + 2 + (reference_label(setup, units) is not None)


def live_bytes(setup: DecodeSetup) -> int:
    """Bytes of K/V a timing run allocates: the contiguous cache, the paged copy, naive's K/V of one sequence
    repeated for each of the g query heads of a group, and the reference variant's cache (and its paged copy).

    Example:
        >>> live_bytes(DecodeSetup((1000, 500), 8, 2, 64, 256, None, "float32", 2))  # + MHA's 8 MiB twice
        25067520
    """
    b = DTYPE_BYTES[setup.dtype]
    n_max = math.ceil(max(setup.lens) / setup.page) * setup.page if setup.page else max(setup.lens)
    per_head = 2 * len(setup.lens) * n_max * setup.d * b  # K and V of one K/V head
    heads = setup.heads_kv + (setup.reference_heads_kv or 0)
    repeated = 2 * setup.heads_q * max(setup.lens) * setup.d * b if setup.group > 1 else 0  # naive, one sequence
    return per_head * heads * (2 if setup.page else 1) + repeated


def _caches(setup: DecodeSetup, heads_kv: int, dev: torch.device, g: torch.Generator
            ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor], torch.Tensor | None]:
    """Random contiguous K, V (B, H_kv, N, d) and what flash_decode reads: the paged copy and its table when paged."""
    dt = resolve_dtype(setup.dtype)
    B, n = len(setup.lens), max(setup.lens)
    k, v = (torch.randn(B, heads_kv, n, setup.d, generator=g).to(dev, dt) for _ in range(2))  # (B, H_kv, N, d)
    if not setup.page:
        return k, v, (k, v), None
    k_p, v_p, table = paged_copy(k.cpu(), v.cpu(), setup.lens, setup.page)
    return k, v, (k_p.to(dev), v_p.to(dev)), table.to(dev)


def _decode_calls(setup: DecodeSetup, dev: torch.device) -> dict[str, object]:
    """The timed calls on random data: flash_decode at each timed split count (on the paged copy when paged), the
    same at the chosen S on the reference variant's K/V, SDPA with enable_gqa and a boolean mask of the valid keys,
    and naive with K/V repeated (both on the contiguous cache)."""
    dt = resolve_dtype(setup.dtype)
    g = torch.Generator().manual_seed(0)
    B, n = len(setup.lens), max(setup.lens)
    q = torch.randn(B, setup.heads_q, 1, setup.d, generator=g).to(dev, dt)  # (B, H_q, 1, d)
    k, v, caches, table = _caches(setup, setup.heads_kv, dev, g)
    lens = torch.tensor(setup.lens, device=dev)
    mask = (torch.arange(n, device=dev) < lens[:, None])[:, None, None, :]  # (B, 1, 1, N) bool
    units = parallel_units(dev)
    fns = {name: (lambda s=s: flash_decode(q, *caches, cache_seqlens=lens, block_table=table, num_splits=s))
           for name, s in timed_splits(setup, units).items()}
    ref = reference_label(setup, units)
    if ref is not None:
        _, _, ref_caches, ref_table = _caches(setup, setup.reference_heads_kv, dev, g)
        chosen = setup.chosen_splits(units)
        fns[ref] = lambda: flash_decode(q, *ref_caches, cache_seqlens=lens, block_table=ref_table, num_splits=chosen)
    fns[SDPA_LABEL] = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    fns[NAIVE_LABEL] = lambda: naive_decode(q, k, v, setup.lens)
    return fns


def decode_timing(setup: DecodeSetup, device: str, reps: int, *, progress: Progress | None = None
                  ) -> tuple[pd.DataFrame, float | None, str]:
    """Median time per decode step of flash_decode (TIMED_SPLITS and the chosen S; and at the chosen S on the reference
    variant's K/V, to set bytes against time), SDPA (enable_gqa, boolean mask) and naive, interleaved call by call
    (WARMUP untimed calls each, then `reps` repeats), at setup.threads threads.

    Returns:
        (one row per implementation: label, time_s (median), q1_s, q3_s (quartiles), time_lo_s, time_hi_s (the
        median's 95% interval: flashviz.measure.verdict compares rows by it), kv_bytes, GB_per_s (K/V bytes /
        median), heads_kv (of the cache it read), repeats, set_aside, threads, threads_asked (Timing.row: a row
        with more calls set aside than kept, or fewer threads than asked, names no winner); this machine's
        measured RAM read bandwidth in bytes/s (None on a GPU: the probe reads the CPU's RAM); this machine's name).

    Example:
        >>> df, bandwidth, _ = decode_timing(DecodeSetup((300, 100), 2, 1, 8, 0, 2, "float32", 1), "cpu", 1)
        >>> list(df["label"]), bandwidth > 0  # two KV blocks: S = 4 runs as S = 2, timed once; then on MHA's K/V
        (['flash_decode S=1', 'flash_decode S=2', 'MHA K/V: flash_decode S=2', 'SDPA (enable_gqa)', 'naive (K/V \
repeated)'], True)
    """
    dev = torch.device(device)
    with threads_set_to(setup.threads), torch.no_grad():
        t = time_calls(_decode_calls(setup, dev), warmup=WARMUP, repeats=reps, progress=progress, sync_device=dev)
        machine = machine_roof(setup.threads)
    ref = reference_label(setup, parallel_units(dev))
    rows = []
    for name, timing in t.items():
        heads_kv = setup.reference_heads_kv if name == ref else setup.heads_kv
        kv_bytes = sum(decode_cost(x, setup.d, heads=setup.heads_q, heads_kv=heads_kv, dtype=setup.dtype).kv_bytes
                       for x in setup.lens)
        ts = timing.samples
        q1, q3 = statistics.quantiles(ts, n=4, method="inclusive")[::2] if len(ts) > 1 else (timing.median,) * 2
        rows.append({"label": name, **timing.row(), "q1_s": q1, "q3_s": q3, "kv_bytes": kv_bytes,
                     "GB_per_s": kv_bytes / timing.median / 1e9, "heads_kv": heads_kv})
    return pd.DataFrame(rows), (machine.bandwidth if dev.type == CPU else None), machine.name
