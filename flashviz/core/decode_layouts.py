"""The tuned memory-layout paths of Flash-Decoding: the partial m, l and unnormalised O of every split, read from the
cache as it lies in memory. flash_decode (flashviz.core.decode) plans the splits and merges them; this module only
computes the splits' partials, and every path gives the same numbers.

Paths (all exact, all zero-copy for K/V except the last):
    contiguous cache: every split is one item of a batched matmul over views of the cache; when the strides allow
        (the splits tile the cache's length, or B * H_kv = 1) all full splits are ONE bmm over R * S items,
        otherwise one bmm per split over the R groups;
    paged cache, most pages in use and none shared: the page pool read in place (flashviz.core.decode_paged);
    other paged caches: pages gathered STEP_BYTES at a time, folded into their split with FlashAttention's online
        softmax (m_i, l_i, O_i rescaled per step: flashviz.core.softmax's step).

Legend as in flashviz.core.decode: B batch, H_kv K/V heads, G = H_q / H_kv, R = B * H_kv groups, GN = G * N_q
stacked rows, S splits, chunk = keys per split, d head dimension; m row max of the scores S_ij, l row sum of
P_ij = 2^(S_ij - m), in base 2 (log2 units: the queries come scaled by scale log2(e)), as flashviz.core.softmax.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from flashviz.core.decode_checks import CacheLayout
from flashviz.core.decode_paged import pool_owners, pool_partials
from flashviz.core.softmax import NEG_INF, online_softmax_step
from flashviz.core.softmax_variants import to_input_dtype

STEP_BYTES = 16 * 2**20  # bytes of K per step across all R groups: well inside a shared L3, so K/V gathered from pages
#                         (or sliced from the cache) are still in cache when the second matmul reads them

Piece = tuple[int, int, int, int, torch.Tensor, torch.Tensor]  # split0, count, key0, size, K (R*count, size, d), V
State = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # m (R, S, GN) log2, l (R, S, GN), unnormalised O (R, S, GN, d)


def _flat(x: torch.Tensor, *shape: int) -> torch.Tensor | None:
    """x.view(shape), or None when the strides do not allow a view (a reshape would copy the cache)."""
    try:
        return x.view(*shape)
    except RuntimeError:
        return None


def contiguous_pieces(k_cache: torch.Tensor, v_cache: torch.Tensor, chunk: int, n_splits: int, max_len: int,
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


def paged_pieces(k_cache: torch.Tensor, v_cache: torch.Tensor, table: torch.Tensor, chunk: int, n_splits: int,
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


def _fold(state: State, q3: torch.Tensor, piece: Piece, limit: torch.Tensor, limit_min: int) -> None:
    """One online-softmax step (flashviz.core.softmax) per split: fold a piece's keys into splits s0 .. s0+count-1
    of state (in place), every split one item of the batch."""
    s0, count, key0, size, k3, v3 = piece
    R, GN, d = q3.shape
    m, l, O = (x[:, s0 : s0 + count] for x in state)  # views (R, count, GN), (R, count, GN), (R, count, GN, d)
    q_b = q3 if count == 1 else q3[:, None].expand(R, count, GN, d).reshape(R * count, GN, d)  # q is tiny: copy ok
    # (R*count, GN, d) x (R*count, d, size) -> (R*count, GN, size); read size * d of K per item; log2 units, in the
    # accumulator dtype whatever K's (q3 comes in it): the scores of a bf16 cache are never rounded to bf16
    S_ij = torch.bmm(q_b, k3.transpose(1, 2).to(O.dtype)).view(R, count, GN, size)
    masked = key0 + count * size > limit_min  # some key of the piece is past some row's limit
    if masked:
        pos = key0 + torch.arange(count * size, device=q3.device).view(count, 1, size)  # key positions
        S_ij = S_ij.masked_fill_(pos >= limit[:, None, :, None], NEG_INF)
    P_ij, m_new, l_new, alpha = online_softmax_step(S_ij, m, l, masked)  # P_ij in S_ij's storage
    # (R*count, GN, size) x (R*count, size, d) -> (R*count, GN, d); read size * d of V per item. P~ rounded to V's
    # dtype (after its row sum), the product accumulated in O's dtype, as a tensor core's fp32 accumulator
    P_ij = to_input_dtype(P_ij, v3.dtype)
    PV = torch.bmm(P_ij.view(R * count, GN, size), v3.to(O.dtype)).view(R, count, GN, d)
    O.mul_(alpha[..., None]).add_(PV)  # O_s <- diag(alpha) O_s + P~ V
    l.copy_(l_new)
    m.copy_(m_new)


def _split_states(q4: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, table: torch.Tensor | None,
                  limit: torch.Tensor, layout: CacheLayout, plan: tuple[int, int, int], acc: torch.dtype
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """m (R, S, GN), l (R, S, GN), unnormalised O (R, S, GN, d) of every split, groups in (B, H_kv) order."""
    chunk, n_splits, step = plan
    B, H, GN, d = q4.shape
    if table is None:
        pieces = contiguous_pieces(k_cache, v_cache, chunk, n_splits, layout.max_len, chunk)
    else:
        q4, limit = q4.transpose(0, 1), limit.transpose(0, 1)  # gathered pages come in (H_kv, B) group order
        used = torch.arange(table.shape[1], device=table.device) < -(-layout.seqlens[:, None] // layout.page_size)
        pieces = paged_pieces(k_cache, v_cache, torch.where(used, table, 0), chunk, n_splits, layout.max_len, step)
    q3, limit = q4.reshape(B * H, GN, d), limit.reshape(B * H, GN)
    limit_min = int(limit.min()) if limit.numel() else 0
    state = (torch.full((B * H, n_splits, GN), NEG_INF, dtype=acc, device=q4.device),
             torch.zeros((B * H, n_splits, GN), dtype=acc, device=q4.device),
             torch.zeros((B * H, n_splits, GN, d), dtype=acc, device=q4.device))  # m, l, O of every split
    for piece in pieces:
        _fold(state, q3, piece, limit, limit_min)
    if table is not None:  # back to (B, H_kv) group order
        state = tuple(x.view(H, B, *x.shape[1:]).transpose(0, 1).reshape(B * H, *x.shape[1:]) for x in state)
    return state


def gather_step(layout: CacheLayout, block_k: int) -> int:
    """Keys per step of the gathered-pages path: whole KV blocks, about STEP_BYTES of fp32 K across all R groups.

    Example:
        >>> from flashviz.core.decode_checks import CacheLayout
        >>> gather_step(CacheLayout(1, 32, 8, 1, 128, 32768, None, torch.tensor([32768]), 32768), 256)  # 4 KiB/key
        4096
    """
    bytes_per_key = layout.batch * layout.heads_kv * layout.d * 4  # K of all groups at one position, fp32 bytes
    return max(1, STEP_BYTES // (bytes_per_key * block_k)) * block_k


def split_partials(q4: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, table: torch.Tensor | None,
                   limit: torch.Tensor, layout: CacheLayout, block_k: int, chunk: int, n_splits: int,
                   acc: torch.dtype) -> State:
    """m, l and unnormalised O of every split (shapes State's), groups in (B, H_kv) order, by the fastest exact path
    the cache's layout allows: the page pool in place, else views of a contiguous cache, else gathered pages.

    Args:
        q4: (B, H_kv, GN, d) scaled queries stacked per K/V group.  k_cache, v_cache: as flash_decode takes them.
        table: (B, max_pages) int64 block table, or None for a contiguous cache.
        limit: (B, H_kv, GN) one past the last key each stacked row sees.  layout: the checked geometry.
        block_k: keys per KV block.  chunk: keys per split (a multiple of block_k).  n_splits: S.
        acc: the accumulator dtype.
    """
    if table is not None and n_splits:
        owners = pool_owners(table, layout.seqlens, layout.page_size, k_cache.shape[0])
        if owners is not None:
            state = pool_partials(q4, k_cache, v_cache, owners, limit, chunk, n_splits, acc)
            if state is not None:
                return state
    return _split_states(q4, k_cache, v_cache, table, limit, layout, (chunk, n_splits, gather_step(layout, block_k)),
                         acc)
