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
chunk = keys per split. m is the row max of the scaled scores S_ij and l the row sum of P_ij = exp(S_ij - m), in
natural log. The splits' partials come from flashviz.core.decode_layouts, which reads the cache as it lies in
memory (views of a contiguous cache, the page pool in place, or gathered pages); this module plans the splits and
merges them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from flashviz.core.decode_checks import CacheLayout, check_block_k, check_layout, check_splits
from flashviz.core.decode_layouts import NEG_INF, finite, split_partials
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
    m: torch.Tensor  # (N_q,) row max m_s of the scaled scores over the split; -inf where the row sees no key
    l: torch.Tensor  # (N_q,) row sum l_s of exp(S_ij - m_s) over the split; 0 where the row sees no key
    lse: torch.Tensor  # (N_q,) L_s = m_s + log l_s, the split's logsumexp


@dataclass(frozen=True)
class MergeEvent:
    """The exact merge of the splits' partials, for batch 0 and query head 0 (tensors on CPU)."""

    num_splits: int  # S
    lse_splits: torch.Tensor  # (S, N_q) L_s of each split
    weights: torch.Tensor  # (S, N_q) exp(L_s - L): split s's share of the output; columns sum to 1 (0 if empty)
    lse: torch.Tensor  # (N_q,) L = log sum_s exp(L_s)


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


def merge_partials(L_s: torch.Tensor, O_s: torch.Tensor,
                   log_scale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The exact logsumexp merge of S partial attention results of the same query rows over disjoint sets of keys.

    Each partial s saw its own keys: its logsumexp L_s = log sum_j exp(S_ij) over them and its output O_s. Over all
    the keys, L = log sum_s exp(L_s) and O = sum_s exp(L_s - L) O_s (Flash-Decoding's merge; ring attention merges
    the steps of its ring the same way). A partial that saw no key of a row has L_s = -inf and weighs 0; a row no
    partial saw gets O = 0 and L = -inf, never NaN.

    Args:
        L_s: (R, S, rows) each partial's logsumexp, natural log, -inf where it saw no key of the row.
        O_s: (R, S, rows, d) each partial's output in L_s's dtype: normalised (O_s = sum_j exp(S_ij - L_s) v_j) when
            log_scale is None; else unnormalised against exp(log_scale), O_s = sum_j exp(S_ij - log_scale) v_j
            (flash_decode's O_s against its row max m_s: one division fewer).
        log_scale: (R, S, rows) the log of what O_s is scaled against, or None for normalised partials.
    Returns:
        out (R, rows, d), L (R, rows) and the weights exp(L_s - L) (R, S, rows): each partial's share of a row
        (they sum to 1 over s, 0 for a row that sees nothing).

    Example:
        >>> L_s = torch.tensor([[[0.0], [0.0]]])  # two partials of equal mass for one row
        >>> out, L, w = merge_partials(L_s, torch.tensor([[[[1.0]], [[3.0]]]]))
        >>> out.item(), round(L.item(), 4), w.flatten().tolist()
        (2.0, 0.6931, [0.5, 0.5])
    """
    L = torch.logsumexp(L_s, dim=1)  # (R, rows); -inf for rows that see nothing
    L_fin = finite(L)[:, None]  # (R, 1, rows): exp(x - L) stays 0, not NaN, where L = -inf
    scale = L_s if log_scale is None else log_scale  # (R, S, rows)
    out = (torch.exp(scale - L_fin)[..., None] * O_s).sum(1)  # (R, rows, d) sum_s exp(L_s - L) O_s
    return out, L, torch.exp(L_s - L_fin)


def _merge(m: torch.Tensor, l: torch.Tensor, O: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Exact logsumexp merge of S partials -> out (R, GN, d), L (R, GN), L_s and weights (R, S, GN)."""
    L_s = finite(m) + torch.log(l)  # (R, S, GN); log 0 = -inf for splits a row does not see
    # O is unnormalised against the split's max m_s: sum_s exp(L_s - L) O_s / l_s = sum_s exp(m_s - L) O_s
    out, L, weights = merge_partials(L_s, O, log_scale=m)
    return out, L, L_s, weights


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
    """Report each split, then the merge, for group 0 (batch 0, K/V head 0) rows 0..N_q-1 (query head 0)."""
    n_q, n_splits = layout.n_q, m.shape[1]
    rows = slice(0, n_q) if m.shape[0] else slice(0, 0)
    cpu = (lambda x: x[0, :, rows].detach().cpu()) if m.shape[0] else (lambda x: x.new_zeros(n_splits, n_q).cpu())
    m0, l0, L_s0, w0 = cpu(m), cpu(l), cpu(L_s), cpu(weights)
    for s in range(n_splits):
        start, stop = s * chunk, min((s + 1) * chunk, layout.max_len)
        pages: tuple[int, ...] = ()
        if table is not None and layout.batch:
            end0 = min(stop, int(layout.seqlens[0]))  # batch 0's own keys in this split
            pages = tuple(int(p) for p in table[0, start // layout.page_size : -(-end0 // layout.page_size)])
        on_split(SplitEvent(s, n_splits, start, stop, pages, m0[s], l0[s], L_s0[s]))
    lse0 = L[0, rows].detach().cpu() if L.shape[0] else torch.full((n_q,), NEG_INF)
    on_split(MergeEvent(n_splits, L_s0, w0, lse0))


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
    causal = validate_causal(causal)
    layout, table = check_layout(q, k_cache, v_cache, cache_seqlens, block_table, causal)
    block_k, num_splits = check_block_k(block_k, layout.page_size), check_splits(num_splits)
    scale = validate_scale(scale, layout.d, q.dtype)
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32  # accumulator dtype
    # 1. split the keys: S chunks of whole KV blocks (flash-attn's heuristic when num_splits is None)
    block_k, chunk, n_splits = _plan(layout, block_k, num_splits, q.device)
    B, H, GN, d = layout.batch, layout.heads_kv, layout.group * layout.n_q, layout.d
    q4 = (q.to(acc) * scale).to(q.dtype).view(B, H, GN, d)  # (B, H_kv, G*N_q, d): rows g*N_q + i of group (b, h)
    limit = _row_limits(layout, causal)  # (B, H_kv, GN)
    # 2. each split on its own: row max m_s, row sum l_s and unnormalised output O_s (decode_layouts picks the path)
    m, l, O = split_partials(q4, k_cache, v_cache, table, limit, layout, block_k, chunk, n_splits, acc)
    # 3. the exact merge: L = log sum_s exp(L_s) with L_s = m_s + log l_s, out = sum_s exp(L_s - L) O_s / l_s
    out, L, L_s, weights = _merge(m, l, O)  # (R, GN, d), (R, GN), (R, S, GN), (R, S, GN)
    if on_split is not None:
        _emit(on_split, m, l, L_s, weights, L, layout, chunk, table)
    out = out.reshape(B, layout.heads_q, layout.n_q, d).to(q.dtype)
    return (out, L.reshape(B, layout.heads_q, layout.n_q)) if return_lse else out
