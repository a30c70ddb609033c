"""Flash-Decoding: attention of a few new query rows against a long KV cache, split along the cache and merged exactly.

References:
    Flash-Decoding for long-context inference (Dao, Haziza, Massa, Sizov, 2023): the KV cache is cut into
        num_splits chunks computed in parallel; each yields a partial output O_s and its logsumexp L_s, and the
        partials are merged exactly: L = log sum_s exp(L_s), O = sum_s exp(L_s - L) O_s.
    flash-attn's flash_attn_with_kvcache: `cache_seqlens`, a paged cache addressed through `block_table` (vLLM's
        PagedAttention), bottom-right causal alignment, and `num_splits_heuristic` (csrc/flash_attn/flash_api.cpp).
    Grouped-query attention (Ainslie et al., 2023): G = H_q / H_kv query heads share one K/V head. The G * N_q query
        rows of a group are stacked into one tile, so each K/V head is read once for all of them (no repeat).

Legend: B batch, H_q / H_kv query / key-value heads, G = H_q / H_kv, N_q query rows (1 when decoding), d head
dimension, R = B * H_kv groups (one batched-matmul item each), GN = G * N_q stacked rows, S number of splits,
chunk = keys per split. Inside the kernel the softmax runs in base 2 (flashviz.core.softmax): the queries are scaled
by scale log2(e), m is the row max of the scores S_ij in log2 units and l the row sum of P_ij = 2^(S_ij - m); the
logsumexps L_s and L, the merge and the events are in natural log.

Read in this order: `plain_partials` is the algorithm as the paper draws it, one short loop over the splits (each
split's keys, one online-softmax step over them, its O_s and L_s), and `merge_partials` the exact merge, reusable by
any kernel that splits keys (ring attention's blocks too). `flash_decode` computes the same partials through the
tuned memory layouts of flashviz.core.decode_layouts (views of a contiguous cache, the page pool read in place, or
pages gathered step by step), which read the cache as it lies in memory; `decode_partials(..., plain=True)` runs the
plain loop on the same call, and tests/test_decode.py checks that both agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from flashviz.core.decode_checks import CacheLayout, check_block_k, check_layout, check_splits
from flashviz.core.decode_layouts import split_partials
from flashviz.core.softmax import LN_2, LOG2_E, NEG_INF, finite, online_softmax_step
from flashviz.core.softmax_variants import to_input_dtype
from flashviz.core.validate import validate_causal, validate_scale

DEFAULT_BLOCK_K = 256  # keys per KV block of a contiguous cache: flash-attn's split-KV kernel uses 64-256 by d
MAX_SPLITS = 128  # flash-attn's cap on the split count
BLOCK_M = 64  # stacked query rows per tile in flash-attn's split-KV kernel: a group of GN rows is ceil(GN/64) tiles
FILLED = 0.8  # flash-attn: units count as filled when work tiles >= 80% of them
NEAR_BEST = 0.85  # flash-attn: the smallest split count within 85% of the best wave efficiency wins


@dataclass(frozen=True)
class SplitEvent:
    """One split's partial result, for batch 0 and query head 0 (tensors on CPU)."""

    split: int  # s, 0-based
    num_splits: int  # S actually used (may be below the request: every split holds whole KV blocks)
    start: int  # first key position of the split (logical position in the sequence)
    stop: int  # one past its last key position (the last split stops at max(cache_seqlens))
    pages: tuple[int, ...]  # physical pages of batch 0 read by this split; () for a contiguous cache
    m: torch.Tensor  # (N_q,) row max m_s of the scaled scores over the split (natural log); -inf where the row sees
    #                  no key
    l: torch.Tensor  # (N_q,) row sum l_s of exp(S_ij - m_s) over the split; 0 where the row sees no key
    lse: torch.Tensor  # (N_q,) L_s = m_s + log l_s, the split's logsumexp


@dataclass(frozen=True)
class MergeEvent:
    """The exact merge of the splits' partials, for batch 0 and query head 0 (tensors on CPU)."""

    num_splits: int  # S
    lse_splits: torch.Tensor  # (S, N_q) L_s of each split
    weights: torch.Tensor  # (S, N_q) exp(L_s - L): split s's share of the output; columns sum to 1 (0 if empty)
    lse: torch.Tensor  # (N_q,) L = log sum_s exp(L_s)


def merge_partials(outs: torch.Tensor, lses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact merge of attention over disjoint parts of the keys (Flash-Decoding's splits, ring attention's
    blocks): L = log sum_s exp(L_s) and O = sum_s exp(L_s - L) O_s.

    Args:
        outs: (S, ..., d) each part's output O_s, normalised over its own keys (softmax(S_s) V_s).
        lses: (S, ...) each part's logsumexp L_s, natural log; -inf where a part shows a row no key (that part's
            O_s is then ignored, whatever it holds).
    Returns:
        out (..., d) and L (...,), in float32 (float64 if an input is float64); a row no part shows a key gets
        out = 0 and L = -inf, never NaN.

    Example:
        >>> # one row, keys split in two parts whose logsumexps are equal: each weighs 1/2, and L = L_s + log 2
        >>> out, L = merge_partials(torch.tensor([[[1.0]], [[3.0]]]), torch.tensor([[0.5], [0.5]]))
        >>> out.tolist(), round(L.item(), 4)
        ([[2.0]], 1.1931)
        >>> merge_partials(torch.full((2, 1, 1), float("nan")), torch.full((2, 1), NEG_INF))  # nothing seen
        (tensor([[0.]]), tensor([-inf]))
    """
    if outs.dim() < 2 or lses.shape != outs.shape[:-1]:
        raise ValueError(f"merge_partials takes outs (S, ..., d) and lses (S, ...) with one shape but d, got outs "
                         f"{tuple(outs.shape)} and lses {tuple(lses.shape)}. Stack the parts along a first axis.")
    dtype = torch.promote_types(torch.promote_types(outs.dtype, lses.dtype), torch.float32)
    outs, lses = outs.to(dtype), lses.to(dtype)
    L = torch.logsumexp(lses, dim=0)  # (...) -inf where no part shows the row a key
    weights = torch.exp(lses - finite(L))  # (S, ...) exp(L_s - L): each part's share, summing to 1 (0 if empty)
    parts = outs.masked_fill(torch.isneginf(lses).unsqueeze(-1), 0.0)  # (S, ..., d) an empty part adds nothing
    return (weights.unsqueeze(-1) * parts).sum(0), L  # (..., d), (...)


def plain_partials(q4: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, table: torch.Tensor | None,
                   limit: torch.Tensor, chunk: int, n_splits: int, acc: torch.dtype
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Flash-Decoding split by split, as the paper draws it: each split's keys, one online-softmax step over them
    (flashviz.core.softmax, base 2), its output O_s and logsumexp L_s. merge_partials then merges them.

    Args:
        q4: (B, H_kv, GN, d) queries scaled by scale log2(e), stacked per K/V group (row g N_q + i of group
            (b, h) is query row i of head h G + g).
        k_cache, v_cache: (B, H_kv, N_max, d), or (num_pages, H_kv, page_size, d) with table.
        table: (B, max_pages) int64 physical page of each logical page, every entry a valid page; or None.
        limit: (B, H_kv, GN) one past the last key each row sees.
        chunk: keys per split.  n_splits: S (S chunk covers every row's keys).  acc: the accumulator dtype.
    Returns:
        outs (S, B, H_kv, GN, d) and lses (S, B, H_kv, GN) in acc, natural log; a split that shows a row no key
        gives it O_s = 0 and L_s = -inf.
    """
    B, H, GN, d = q4.shape
    outs = q4.new_zeros((n_splits, B, H, GN, d), dtype=acc)  # (S, B, H_kv, GN, d)
    lses = q4.new_full((n_splits, B, H, GN), NEG_INF, dtype=acc)  # (S, B, H_kv, GN)
    q_s = q4.to(acc)  # (B, H_kv, GN, d)
    page = k_cache.shape[2]  # N_max, or page_size when paged
    capacity = page if table is None else table.shape[1] * page  # keys one sequence can hold
    for s in range(n_splits):
        pos = torch.arange(s * chunk, min((s + 1) * chunk, capacity), device=q4.device)  # (n,) the split's keys
        if table is None:
            K_s, V_s = k_cache[:, :, pos].to(acc), v_cache[:, :, pos].to(acc)  # (B, H_kv, n, d)
        else:  # pages (B, n) and offsets (n,) -> (B, n, H_kv, d) -> (B, H_kv, n, d), gathered
            at = (table[:, pos // page], slice(None), pos % page)
            K_s, V_s = (x[at].transpose(1, 2).to(acc) for x in (k_cache, v_cache))
        S_s = q_s @ K_s.transpose(-1, -2)  # (B, H_kv, GN, n) scores, log2 units
        S_s.masked_fill_(pos >= limit.unsqueeze(-1), NEG_INF)  # keys past each row's limit
        nothing = torch.full(S_s.shape[:-1], NEG_INF, dtype=acc, device=q4.device)  # (B, H_kv, GN) no key seen yet
        P_s, m_s, l_s, _ = online_softmax_step(S_s, nothing, torch.zeros_like(nothing), partial=True)
        P_s = to_input_dtype(P_s, v_cache.dtype)  # P~ rounded to V's dtype (after its fp32 row sum l_s), as a GPU
        #                                           kernel hands it to the tensor core for P V
        outs[s] = P_s @ V_s / l_s.clamp(min=1.0).unsqueeze(-1)  # (B, H_kv, GN, d) O_s; l_s >= 1 once a key is seen
        lses[s] = (m_s + torch.log2(l_s)) * LN_2  # (B, H_kv, GN) L_s
    return outs, lses


def _split_outputs(m: torch.Tensor, l: torch.Tensor, O: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The tuned paths' partials m (R, S, GN) log2 units, l (R, S, GN), unnormalised O (R, S, GN, d) as
    merge_partials takes them, the split axis first: outs (S, R, GN, d) = O / l, lses (S, R, GN) natural log."""
    outs = O / l.clamp(min=1.0).unsqueeze(-1)  # l >= 1 once a row has seen a key (its max adds 2^0); else O = 0
    lses = (m + torch.log2(l)) * LN_2  # -inf where the split shows the row no key
    return outs.movedim(1, 0), lses.movedim(1, 0)


def parallel_units(device: torch.device) -> int:
    """Units that run work tiles at once: torch's intra-op threads on CPU, 2 tiles per SM on CUDA (as flash-attn)."""
    if device.type == "cuda":
        return 2 * torch.cuda.get_device_properties(device).multi_processor_count
    return torch.get_num_threads()


def num_splits_heuristic(work_tiles: int, units: int, n_blocks: int, max_splits: int = MAX_SPLITS) -> int:
    """flash-attn's rule: split only while the units are not filled; take the fewest splits near the best efficiency.

    Efficiency of S splits = waves / ceil(waves) with waves = work_tiles * S / units (the last wave's idle units
    are the loss). S is eligible only if it changes the blocks per split (ceil(n_blocks / S)); otherwise it is the
    same schedule as S - 1.

    Args:
        work_tiles: tiles without splitting: B * H_kv * ceil(G * N_q / 64).
        units: parallel units (see parallel_units).
        n_blocks: KV blocks of the longest sequence.
        max_splits: cap on the answer.
    Returns:
        The split count, >= 1.

    Example:
        >>> num_splits_heuristic(work_tiles=8, units=2, n_blocks=128)  # 8 tiles already fill 2 threads
        1
        >>> num_splits_heuristic(work_tiles=48, units=108, n_blocks=64)  # flash-attn's example: 2 splits, eff 0.89
        2
    """
    if work_tiles >= FILLED * units or n_blocks <= 1:
        return 1
    max_splits = min(max_splits, units, n_blocks)
    blocks_per = [math.ceil(n_blocks / s) for s in range(1, max_splits + 1)]
    efficiency = []
    for s in range(1, max_splits + 1):
        eligible = s == 1 or blocks_per[s - 1] != blocks_per[s - 2]
        waves = work_tiles * s / units
        efficiency.append(waves / math.ceil(waves) if eligible else 0.0)
    best = max(efficiency)
    return next(s for s, e in enumerate(efficiency, start=1) if e >= NEAR_BEST * best)


def _row_limits(layout: CacheLayout, causal: bool) -> torch.Tensor:
    """(B, H_kv, GN) one past the last key each stacked row sees (bottom-right causal: row i ends at L - N_q + i)."""
    lim = layout.seqlens.view(-1, 1, 1, 1).expand(layout.batch, layout.heads_kv, layout.group, layout.n_q)
    if causal:
        lim = lim - layout.n_q + 1 + torch.arange(layout.n_q, device=lim.device)
    return lim.reshape(layout.batch, layout.heads_kv, layout.group * layout.n_q)


def _plan(layout: CacheLayout, block_k: int | None, num_splits: int | None, device: torch.device
          ) -> tuple[int, int, int]:
    """(block_k, chunk, S): keys per KV block, keys per split (whole blocks) and the splits used."""
    block_k = block_k or layout.page_size or DEFAULT_BLOCK_K
    n_blocks = math.ceil(layout.max_len / block_k)
    if num_splits is None:
        tiles = layout.batch * layout.heads_kv * math.ceil(layout.group * layout.n_q / BLOCK_M)
        num_splits = num_splits_heuristic(tiles, parallel_units(device), n_blocks)
    chunk = max(1, math.ceil(n_blocks / num_splits)) * block_k
    return block_k, chunk, math.ceil(layout.max_len / chunk)


def _emit(on_split: Callable[[object], None], m: torch.Tensor, l: torch.Tensor, L_s: torch.Tensor,
          weights: torch.Tensor, L: torch.Tensor, layout: CacheLayout, chunk: int,
          table: torch.Tensor | None) -> None:
    """Report each split, then the merge, for group 0 (batch 0, K/V head 0) rows 0..N_q-1 (query head 0).
    m (natural log), l, L_s, weights: (S, R, GN); L: (R, GN)."""
    n_q, n_splits = layout.n_q, m.shape[0]
    rows = slice(0, n_q) if m.shape[1] else slice(0, 0)
    cpu = (lambda x: x[:, 0, rows].detach().cpu()) if m.shape[1] else (lambda x: x.new_zeros(n_splits, n_q).cpu())
    m0, l0, L_s0, w0 = cpu(m), cpu(l), cpu(L_s), cpu(weights)
    for s in range(n_splits):
        start, stop = s * chunk, min((s + 1) * chunk, layout.max_len)
        pages: tuple[int, ...] = ()
        if table is not None and layout.batch:
            end0 = min(stop, int(layout.seqlens[0]))  # batch 0's own keys in this split
            pages = tuple(int(p) for p in table[0, start // layout.page_size : -(-end0 // layout.page_size)])
        on_split(SplitEvent(s, n_splits, start, stop, pages, m0[s], l0[s], L_s0[s]))
    lse0 = L[0, rows].detach().cpu() if L.shape[0] else torch.full((n_q,), NEG_INF)  # events live on the CPU
    on_split(MergeEvent(n_splits, L_s0, w0, lse0))


@dataclass(frozen=True)
class _Call:
    """One checked flash_decode call, planned: what both the plain and the tuned paths read."""

    layout: CacheLayout  # the checked geometry
    table: torch.Tensor | None  # (B, max_pages) int64 block table as given, or None for a contiguous cache
    q4: torch.Tensor  # (B, H_kv, GN, d) q scaled by scale log2(e), in acc: row g N_q + i of group (b, h)
    limit: torch.Tensor  # (B, H_kv, GN) one past the last key each stacked row sees
    block_k: int  # keys per KV block
    chunk: int  # keys per split: whole KV blocks
    n_splits: int  # S
    acc: torch.dtype  # the accumulator dtype: fp32, or fp64 for fp64 inputs


def _prepare(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, cache_seqlens: object,
             num_splits: object, block_k: object, causal: object, scale: object, block_table: object) -> _Call:
    """Check a call's arguments (errors that say how to fix them) and plan its splits."""
    causal = validate_causal(causal)
    layout, table = check_layout(q, k_cache, v_cache, cache_seqlens, block_table, causal)
    block_k, num_splits = check_block_k(block_k, layout.page_size), check_splits(num_splits)
    scale = validate_scale(scale, layout.d, q.dtype)
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32  # accumulator dtype
    # split the keys: S chunks of whole KV blocks (flash-attn's heuristic when num_splits is None)
    block_k, chunk, n_splits = _plan(layout, block_k, num_splits, q.device)
    B, H, GN, d = layout.batch, layout.heads_kv, layout.group * layout.n_q, layout.d
    # (B, H_kv, G*N_q, d) log2 units, kept in acc: a GPU kernel scales q in fp32 registers, and the scores S_ij are
    # computed and kept in fp32 whatever q's dtype. reshape: q may be any strided layout (a model's (B, N, H, d)
    # transposed, a slice); it is tiny, so a copy costs nothing
    q4 = (q.to(acc) * (scale * LOG2_E)).reshape(B, H, GN, d)
    return _Call(layout, table, q4, _row_limits(layout, causal), block_k, chunk, n_splits, acc)


def _tuned(c: _Call, k_cache: torch.Tensor, v_cache: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """m (R, S, GN) log2 units, l (R, S, GN), unnormalised O (R, S, GN, d) through the tuned memory layouts."""
    return split_partials(c.q4, k_cache, v_cache, c.table, c.limit, c.layout, c.block_k, c.chunk, c.n_splits, c.acc)


def decode_partials(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *,
                    cache_seqlens: torch.Tensor | None = None, num_splits: int | None = None,
                    block_k: int | None = None, causal: bool = False, scale: float | None = None,
                    block_table: torch.Tensor | None = None, plain: bool = False
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Every split's output O_s and logsumexp L_s of a flash_decode call, before the merge: by plain_partials'
    loop over splits (plain=True) or by the tuned memory layouts flash_decode runs (plain=False).

    Args:
        q, k_cache, v_cache, cache_seqlens, num_splits, block_k, causal, scale, block_table: as flash_decode.
        plain: the plain loop over splits instead of the tuned layouts.
    Returns:
        outs (S, B, H_q, N_q, d) and lses (S, B, H_q, N_q) in the accumulator dtype (natural log; a split that shows
        a row no key: O_s = 0, L_s = -inf); merge_partials(outs, lses) is flash_decode's (out, L).

    Example:
        >>> q, k = torch.randn(1, 4, 1, 16), torch.randn(1, 2, 300, 16)  # GQA: 2 K/V heads for 4 query heads
        >>> outs, lses = decode_partials(q, k, k, num_splits=3, block_k=64, plain=True)
        >>> outs.shape, lses.shape  # 3 splits of 128, 128 and 44 keys
        (torch.Size([3, 1, 4, 1, 16]), torch.Size([3, 1, 4, 1]))
        >>> tuned = decode_partials(q, k, k, num_splits=3, block_k=64)
        >>> torch.allclose(outs, tuned[0], atol=1e-6) and torch.allclose(lses, tuned[1], atol=1e-6)
        True
    """
    c = _prepare(q, k_cache, v_cache, cache_seqlens, num_splits, block_k, causal, scale, block_table)
    L = c.layout
    if plain:
        table = c.table
        if table is not None:  # entries past a sequence's last page may hold anything: read page 0 there (masked)
            used = torch.arange(table.shape[1], device=table.device) < -(-L.seqlens[:, None] // L.page_size)
            table = torch.where(used, table, 0)
        outs, lses = plain_partials(c.q4, k_cache, v_cache, table, c.limit, c.chunk, c.n_splits, c.acc)
    else:
        outs, lses = _split_outputs(*_tuned(c, k_cache, v_cache))  # (S, R, GN, d), (S, R, GN)
    S = c.n_splits
    return outs.reshape(S, L.batch, L.heads_q, L.n_q, L.d), lses.reshape(S, L.batch, L.heads_q, L.n_q)


def flash_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *,
                 cache_seqlens: torch.Tensor | None = None, num_splits: int | None = None, block_k: int | None = None,
                 causal: bool = False, scale: float | None = None, block_table: torch.Tensor | None = None,
                 return_lse: bool = False, on_split: Callable[[object], None] | None = None):
    """Attention of N_q new query rows per sequence against a KV cache, split along the cache (Flash-Decoding).

    Args:
        q: (B, H_q, N_q, d) queries; N_q is small (1 when decoding, a few for speculative decoding).
        k_cache, v_cache: (B, H_kv, N_max, d) contiguous, or (num_pages, H_kv, page_size, d) paged with block_table;
            H_q % H_kv == 0 (MHA H_kv = H_q, GQA, MQA H_kv = 1). Same dtype and device as q.
        cache_seqlens: (B,) int valid keys per sequence (keys 0 .. len-1); None = the whole cache (N_max, or
            max_pages * page_size when paged).
        num_splits: chunks the keys are cut into (each whole KV blocks; fewer are used when the blocks do not
            divide further); None = num_splits_heuristic on this machine's parallel units.
        block_k: keys per KV block (default 256, or page_size when paged; a multiple of page_size when paged).
        causal: bottom-right causal: query row i is position len - N_q + i and sees keys 0 .. len - N_q + i.
        scale: softmax scale, default 1/sqrt(d).
        block_table: (B, max_pages) int physical page of each logical page; entries past a sequence's last page
            are ignored.
        return_lse: also return the logsumexp L.
        on_split: called with a SplitEvent per split, then one MergeEvent (batch 0, query head 0).
    Returns:
        out (B, H_q, N_q, d) in q's dtype (rows that see no key are zeros); with return_lse also L (B, H_q, N_q)
        in the accumulator dtype (fp32, or fp64 for fp64 inputs), -inf for rows that see no key.

    Example:
        >>> q = torch.randn(2, 8, 1, 64)                                     # one new token, 8 query heads
        >>> k_cache, v_cache = torch.randn(2, 2, 1000, 64), torch.randn(2, 2, 1000, 64)  # 2 K/V heads (GQA)
        >>> out = flash_decode(q, k_cache, v_cache, cache_seqlens=torch.tensor([1000, 517]), num_splits=4)
        >>> out.shape
        torch.Size([2, 8, 1, 64])
    """
    # 1. check the call and split the keys: S chunks of whole KV blocks (flash-attn's heuristic by default)
    c = _prepare(q, k_cache, v_cache, cache_seqlens, num_splits, block_k, causal, scale, block_table)
    layout = c.layout
    # 2. each split on its own: row max m_s, row sum l_s and unnormalised output O_s (decode_layouts picks the path;
    # plain_partials is the same computation written as one loop over the splits)
    m, l, O = _tuned(c, k_cache, v_cache)  # (R, S, GN) log2 units, (R, S, GN), (R, S, GN, d)
    outs, lses = _split_outputs(m, l, O)  # (S, R, GN, d) O_s, (S, R, GN) L_s
    # 3. the exact merge: L = log sum_s exp(L_s), out = sum_s exp(L_s - L) O_s
    out, L = merge_partials(outs, lses)  # (R, GN, d), (R, GN)
    if on_split is not None:
        weights = torch.exp(lses - finite(L))  # (S, R, GN) exp(L_s - L), each split's share
        _emit(on_split, (m * LN_2).movedim(1, 0), l.movedim(1, 0), lses, weights, L, layout, c.chunk, c.table)
    out = out.reshape(layout.batch, layout.heads_q, layout.n_q, layout.d).to(q.dtype)
    return (out, L.reshape(layout.batch, layout.heads_q, layout.n_q)) if return_lse else out
