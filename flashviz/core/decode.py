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
natural log. Paths (all exact, all zero-copy for K/V except the last):
    contiguous cache: every split is one item of a batched matmul over views of the cache; when the strides allow
        (the splits tile the cache's length, or B * H_kv = 1) all full splits are ONE bmm over R * S items,
        otherwise one bmm per split over the R groups;
    paged cache, most pages in use and none shared: the page pool read in place (flashviz.core.decode_paged);
    other paged caches: pages gathered STEP_BYTES at a time, folded into their split with FlashAttention's online
        softmax (m_i, l_i, O_i rescaled per step).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from flashviz.core.decode_checks import CacheLayout, check_block_k, check_layout, check_splits
from flashviz.core.decode_paged import pool_owners, pool_partials
from flashviz.core.validate import validate_causal, validate_scale

NEG_INF = float("-inf")
DEFAULT_BLOCK_K = 256  # keys per KV block of a contiguous cache: flash-attn's split-KV kernel uses 64-256 by d
MAX_SPLITS = 128  # flash-attn's cap on the split count
BLOCK_M = 64  # stacked query rows per tile in flash-attn's split-KV kernel: a group of GN rows is ceil(GN/64) tiles
FILLED = 0.8  # flash-attn: units count as filled when work tiles >= 80% of them
NEAR_BEST = 0.85  # flash-attn: the smallest split count within 85% of the best wave efficiency wins
STEP_BYTES = 16 * 2**20  # bytes of K per step across all R groups: well inside a shared L3, so K/V gathered from pages
#                         (or sliced from the cache) are still in cache when the second matmul reads them

Piece = tuple[int, int, int, int, torch.Tensor, torch.Tensor]  # split0, count, key0, size, K (R*count, size, d), V


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


def _finite(x: torch.Tensor) -> torch.Tensor:
    """-inf -> 0, so that exp(x - max) stays 0 (not NaN) for rows that see no key."""
    return torch.where(x == NEG_INF, torch.zeros((), dtype=x.dtype, device=x.device), x)


def _flat(x: torch.Tensor, *shape: int) -> torch.Tensor | None:
    """x.view(shape), or None when the strides do not allow a view (a reshape would copy the cache)."""
    try:
        return x.view(*shape)
    except RuntimeError:
        return None


def _contiguous_pieces(k_cache: torch.Tensor, v_cache: torch.Tensor, chunk: int, n_splits: int, max_len: int,
                       step: int) -> Iterator[Piece]:
    """Views of the (B, H_kv, N_max, d) cache; the full splits as ONE batch (R * S items) when strides allow."""
    B, H, _, d = k_cache.shape
    R, n_full, first = B * H, max_len // chunk, 0
    if n_full > 1:
        k3 = _flat(k_cache[:, :, : n_full * chunk], R * n_full, chunk, d)  # (B, H_kv, S, chunk, d) as one batch
        v3 = _flat(v_cache[:, :, : n_full * chunk], R * n_full, chunk, d)
        if k3 is not None and v3 is not None:
            yield 0, n_full, 0, chunk, k3, v3
            first = n_full
    for s in range(first, n_splits):  # splits one by one: the ragged last one, or all when no batched view exists
        for t0 in range(s * chunk, min((s + 1) * chunk, max_len), step):
            t1 = min(t0 + step, (s + 1) * chunk, max_len)
            yield s, 1, t0, t1 - t0, k_cache[:, :, t0:t1].reshape(R, t1 - t0, d), v_cache[:, :, t0:t1].reshape(
                R, t1 - t0, d)  # (R, t1 - t0, d): views of a standard-layout cache


def _paged_pieces(k_cache: torch.Tensor, v_cache: torch.Tensor, table: torch.Tensor, chunk: int, n_splits: int,
                  max_len: int, step: int) -> Iterator[Piece]:
    """Pages gathered step by step, groups in (H_kv, B) order: the gather writes them contiguous in that order."""
    H, page, d = k_cache.shape[1:]
    B = table.shape[0]
    k_p, v_p = k_cache.transpose(0, 1), v_cache.transpose(0, 1)  # (H_kv, num_pages, page, d) views
    for s in range(n_splits):
        for t0 in range(s * chunk, min((s + 1) * chunk, max_len), step):  # t0 is a page boundary
            p0, p1 = t0 // page, math.ceil(min(t0 + step, (s + 1) * chunk, max_len) / page)
            idx = table[:, p0:p1].reshape(-1)  # (B * pages,) physical pages, batch-major
            n = (p1 - p0) * page
            # gather: read and write n * d per group; (H_kv, B * pages, page, d) -> (H_kv * B, n, d)
            # advanced indexing copies whole pages (index_select on this strided view is ~100x slower on CPU)
            yield s, 1, t0, n, k_p[:, idx].view(H * B, n, d), v_p[:, idx].view(H * B, n, d)


def _partials(q3: torch.Tensor, piece: Piece, limit: torch.Tensor | None, limit_min: int, acc: torch.dtype
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """m, l and unnormalised O of `count` splits over `size` keys each, every split one item of the batch."""
    _, count, key0, size, k3, v3 = piece
    R, GN, d = q3.shape
    q_b = q3 if count == 1 else q3[:, None].expand(R, count, GN, d).reshape(R * count, GN, d)  # q is tiny: copy ok
    # (R*count, GN, d) x (R*count, d, size) -> (R*count, GN, size); read size * d of K per item
    S_ij = torch.bmm(q_b, k3.transpose(1, 2)).view(R, count, GN, size).to(acc)
    if limit is not None and key0 + count * size > limit_min:  # some key of the piece is past some row's limit
        pos = key0 + torch.arange(count * size, device=q3.device).view(count, 1, size)  # key positions
        S_ij = S_ij.masked_fill_(pos >= limit[:, None, :, None], NEG_INF)
    m = S_ij.amax(-1)  # (R, count, GN)
    P_ij = S_ij.sub_(_finite(m)[..., None]).exp_()  # (R, count, GN, size), in place: one pass fewer over scores
    l = P_ij.sum(-1)  # (R, count, GN)
    # (R*count, GN, size) x (R*count, size, d) -> (R*count, GN, d); read size * d of V per item
    O = torch.bmm(P_ij.view(R * count, GN, size).to(v3.dtype), v3).view(R, count, GN, d).to(acc)
    return m, l, O


def _accumulate(state: tuple[torch.Tensor, torch.Tensor, torch.Tensor], s0: int, count: int,
                part: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> None:
    """Online softmax: fold a piece's (m, l, O) into splits s0 .. s0+count-1 (in place)."""
    m, l, O = (x[:, s0 : s0 + count] for x in state)  # (R, count, GN), (R, count, GN), (R, count, GN, d)
    m_p, l_p, O_p = part
    m_new = torch.maximum(m, m_p)
    alpha, beta = torch.exp(m - _finite(m_new)), torch.exp(m_p - _finite(m_new))  # rescale old / new; 0 if empty
    O.mul_(alpha[..., None]).add_(beta[..., None] * O_p)
    l.mul_(alpha).add_(beta * l_p)
    m.copy_(m_new)


def _merge(m: torch.Tensor, l: torch.Tensor, O: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Exact logsumexp merge of S partials -> out (R, GN, d), L (R, GN), L_s and weights (R, S, GN)."""
    L_s = _finite(m) + torch.log(l)  # (R, S, GN); log 0 = -inf for splits a row does not see
    L = torch.logsumexp(L_s, dim=1)  # (R, GN); -inf for rows that see nothing
    out = (torch.exp(m - _finite(L)[:, None])[..., None] * O).sum(1)  # sum_s exp(L_s - L) O_s / l_s = exp(m_s - L) O_s
    return out, L, L_s, torch.exp(L_s - _finite(L)[:, None])


def _row_limits(layout: CacheLayout, causal: bool) -> torch.Tensor:
    """(B, H_kv, GN) one past the last key each stacked row sees (bottom-right causal: row i ends at L - N_q + i)."""
    lim = layout.seqlens.view(-1, 1, 1, 1).expand(layout.batch, layout.heads_kv, layout.group, layout.n_q)
    if causal:
        lim = lim - layout.n_q + 1 + torch.arange(layout.n_q, device=lim.device)
    return lim.reshape(layout.batch, layout.heads_kv, layout.group * layout.n_q)


def _plan(layout: CacheLayout, block_k: int | None, num_splits: int | None, device: torch.device
          ) -> tuple[int, int, int]:
    """(chunk, S, step): keys per split, splits used, keys per step (all multiples of block_k)."""
    block_k = block_k or layout.page_size or DEFAULT_BLOCK_K
    n_blocks = math.ceil(layout.max_len / block_k)
    if num_splits is None:
        tiles = layout.batch * layout.heads_kv * math.ceil(layout.group * layout.n_q / BLOCK_M)
        num_splits = num_splits_heuristic(tiles, parallel_units(device), n_blocks)
    chunk = max(1, math.ceil(n_blocks / num_splits)) * block_k
    n_splits = math.ceil(layout.max_len / chunk)
    bytes_per_key = layout.batch * layout.heads_kv * layout.d * 4  # K of all groups at one position, fp32 bytes
    step = max(1, STEP_BYTES // (bytes_per_key * block_k)) * block_k
    return chunk, n_splits, step


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


def _split_states(q4: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, table: torch.Tensor | None,
                  limit: torch.Tensor, layout: CacheLayout, plan: tuple[int, int, int], acc: torch.dtype
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """m (R, S, GN), l (R, S, GN), unnormalised O (R, S, GN, d) of every split, groups in (B, H_kv) order."""
    chunk, n_splits, step = plan
    B, H, GN, d = q4.shape
    if table is None:
        pieces = _contiguous_pieces(k_cache, v_cache, chunk, n_splits, layout.max_len, chunk)
    else:
        q4, limit = q4.transpose(0, 1), limit.transpose(0, 1)  # gathered pages come in (H_kv, B) group order
        used = torch.arange(table.shape[1], device=table.device) < -(-layout.seqlens[:, None] // layout.page_size)
        pieces = _paged_pieces(k_cache, v_cache, torch.where(used, table, 0), chunk, n_splits, layout.max_len, step)
    q3, limit = q4.reshape(B * H, GN, d), limit.reshape(B * H, GN)
    limit_min = int(limit.min()) if limit.numel() else 0
    state = (torch.full((B * H, n_splits, GN), NEG_INF, dtype=acc, device=q4.device),
             torch.zeros((B * H, n_splits, GN), dtype=acc, device=q4.device),
             torch.zeros((B * H, n_splits, GN, d), dtype=acc, device=q4.device))  # m, l, O of every split
    for piece in pieces:
        _accumulate(state, piece[0], piece[1], _partials(q3, piece, limit, limit_min, acc))
    if table is not None:  # back to (B, H_kv) group order
        state = tuple(x.view(H, B, *x.shape[1:]).transpose(0, 1).reshape(B * H, *x.shape[1:]) for x in state)
    return state


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
    chunk, n_splits, step = _plan(layout, block_k, num_splits, q.device)
    B, H, GN, d = layout.batch, layout.heads_kv, layout.group * layout.n_q, layout.d
    q4 = (q.to(acc) * scale).to(q.dtype).view(B, H, GN, d)  # (B, H_kv, G*N_q, d): rows g*N_q + i of group (b, h)
    limit = _row_limits(layout, causal)  # (B, H_kv, GN)
    state = None
    if table is not None and n_splits:
        owners = pool_owners(table, layout.seqlens, layout.page_size, k_cache.shape[0])
        if owners is not None:
            state = pool_partials(q4, k_cache, v_cache, owners, limit, chunk, n_splits, acc)
    if state is None:
        state = _split_states(q4, k_cache, v_cache, table, limit, layout, (chunk, n_splits, step), acc)
    out, L, L_s, weights = _merge(*state)  # (R, GN, d), (R, GN), (R, S, GN), (R, S, GN)
    if on_split is not None:
        _emit(on_split, state[0], state[1], L_s, weights, L, layout, chunk, table)
    out = out.reshape(B, layout.heads_q, layout.n_q, d).to(q.dtype)
    return (out, L.reshape(B, layout.heads_q, layout.n_q)) if return_lse else out
