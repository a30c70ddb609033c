"""Split-KV partials straight from a paged KV cache, without gathering its pages.

A paged cache (num_pages, H_kv, page_size, d) is, as it lies in memory, a batch of num_pages * H_kv tiles of
(page_size, d): one batched matmul can read every page in place. What differs from page to page is only which query
rows it belongs to, so the (small) queries are laid out per tile instead of gathering the (large) keys and values:
page p of sequence b gets the G * N_q stacked rows of b. With small pages these per-tile rows and outputs are a
sizeable fraction of K/V (G * N_q / page_size of it: a quarter at page_size 16 with G * N_q = 4), so the pool is
read a step of pages at a time and they stay in cache: one sequence's rows are laid out once and reused by every
step, and each step's per-page outputs are summed into their split by a 0/1 matrix product before the next step
(a single sequence and split, every page in use: the matmul itself accumulates the steps, one op per step fewer).
The small per-page row max and row sum are gathered into logical page order and reduced per split (a gather, not a
scatter: no write contention). Pages that no sequence uses are computed and dropped, so this path is taken only
when most of the pool is in use and no page is shared (see pool_owners).

Legend as in flashviz.core.decode: B batch, H = H_kv, GN = G * N_q stacked rows, S splits, d head dimension. Scores
are in log2 units (the queries come scaled by scale log2(e)) and P_ij = 2^(S_ij - m), as flashviz.core.softmax's.
"""

from __future__ import annotations

import torch

from flashviz.core.softmax import NEG_INF, finite
from flashviz.core.softmax_variants import to_input_dtype

POOL_MIN_USE = 0.5  # read the whole pool only if at least half of its pages hold valid keys (else gather pages)
STEP_ROW_BYTES = 4 * 2**20  # bytes of per-page query rows (and of per-page outputs) per step: they stay in cache
#                             (2 MiB of L2 per core here), and a step still reads 4 MiB * page_size / (G * N_q) of K
#                             (16 MiB at page_size 16 with G * N_q = 4; the whole pool at page_size 256)


def pool_owners(table: torch.Tensor, seqlens: torch.Tensor, page_size: int, num_pages: int
                ) -> tuple[torch.Tensor, ...] | None:
    """(owner_b, owner_p, table, used): the sequence and logical page of each physical page, the table and its
    (B, max_pages) in-use mask; None when pages are shared or fewer than POOL_MIN_USE of them are in use.
    Unused pages get logical page max_pages: past every valid key, so they are masked out."""
    used = torch.arange(table.shape[1], device=table.device) < -(-seqlens[:, None] // page_size)  # (B, max_pages)
    phys = table[used]  # (n_used,) physical pages in use
    if phys.numel() < POOL_MIN_USE * num_pages or torch.unique(phys).numel() != phys.numel():
        return None
    b_idx, p_idx = used.nonzero(as_tuple=True)
    owner_b = torch.zeros(num_pages, dtype=torch.long, device=table.device)
    owner_p = torch.full((num_pages,), table.shape[1], dtype=torch.long, device=table.device)
    owner_b[phys], owner_p[phys] = b_idx, p_idx
    return owner_b, owner_p, table, used


def pool_partials(q4: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  owners: tuple[torch.Tensor, ...], limit: torch.Tensor, chunk: int, n_splits: int,
                  acc: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """m (log2 units), l, unnormalised O of every split, shapes (B*H, S, GN), (B*H, S, GN), (B*H, S, GN, d); None
    when the cache is not laid out as one batch of pages (then the caller gathers pages instead).

    Args:
        q4: (B, H, GN, d) scaled queries, stacked per K/V group.
        k_cache, v_cache: (num_pages, H, page_size, d).
        owners: pool_owners' answer.
        limit: (B, H, GN) one past the last key position each row sees.
        chunk: keys per split (a multiple of page_size).  n_splits: S >= 1.  acc: accumulator dtype.
    """
    B, H, GN, d = q4.shape
    n_pages, _, page, _ = k_cache.shape
    try:
        k3, v3 = k_cache.view(n_pages * H, page, d), v_cache.view(n_pages * H, page, d)  # the pool, in place
    except RuntimeError:
        return None
    owner_b, owner_p, table, used = owners
    split = (owner_p * page // chunk).clamp(max=n_splits - 1)  # (n_pages,) split of each physical page
    step = min(n_pages, max(1, STEP_ROW_BYTES // (H * GN * d * q4.element_size())))  # pages per step
    S_ij = _pool_scores(q4, k3, owner_b, step).view(n_pages, H, GN, page)  # in q4's dtype, acc: never rounded
    if int(owner_p.max()) * page + page > int(limit.min()):  # some page holds keys past some row's limit
        pos = owner_p[:, None] * page + torch.arange(page, device=q4.device)  # (n_pages, page) logical positions
        S_ij = S_ij.masked_fill_(pos[:, None, None, :] >= limit[owner_b][..., None], NEG_INF)
    to_splits = _logical(table, used, chunk // page, n_splits)  # per-page rows -> (B, S, pages per split, ...)
    m = to_splits(S_ij.amax(-1), NEG_INF).amax(2)  # (B, S, H, GN) row max of each split
    m_safe = finite(m)  # (B, S, H, GN) the -inf guard of flashviz.core.softmax
    segment = owner_b * n_splits + split  # (n_pages,) the (sequence, split) each page belongs to
    m_page = m_safe.view(B * n_splits, H, GN)  # one segment: broadcast its row max to every page, no gather
    m_page = m_page[segment] if B * n_splits > 1 else m_page  # (n_pages or 1, H, GN)
    # not the online step: the pool is scored in one pass, so each split's max is known before any exponential and
    # nothing is rescaled; P~_ij = 2^(S_ij - m_s), as that step's would be
    P_ij = S_ij.sub_(m_page[..., None]).exp2_()  # (n_pages, H, GN, page), in place over the scores
    l = to_splits(P_ij.sum(-1), 0.0).sum(2)  # (B, S, H, GN)
    live = torch.zeros(n_pages, dtype=torch.bool, device=q4.device)
    live[table[used]] = True  # (n_pages,) pages some sequence uses
    O = _pool_values(P_ij, v3, segment, live, B * n_splits, step)  # (B*S, H*GN*d)
    O = O.view(B, n_splits, H, GN, d)
    return tuple(x.transpose(1, 2).reshape(B * H, n_splits, *x.shape[3:]) for x in (m, l, O))


def _pool_scores(q4: torch.Tensor, k3: torch.Tensor, owner_b: torch.Tensor, step: int) -> torch.Tensor:
    """S_ij (n_pages * H, GN, page) of every page, in q4's dtype (the accumulator's: a bf16 / fp16 page is read and
    widened, its scores stay fp32): one batched matmul per `step` pages over the pool in place.

    Each (page, H) tile meets the G * N_q stacked rows of its sequence. With one sequence those rows are the same
    for every step, so they are laid out once (step * H * GN * d, cache-resident) and reused; otherwise they are
    gathered per step from the page owners.
    """
    B, H, GN, d = q4.shape
    page = k3.shape[1]
    n_pages = k3.shape[0] // H
    S_ij = torch.empty(n_pages * H, GN, page, dtype=q4.dtype, device=q4.device)
    q_rep = q4[0].expand(step, H, GN, d).reshape(step * H, GN, d) if B == 1 else None  # (step*H, GN, d)
    for p0 in range(0, n_pages, step):
        p1 = min(p0 + step, n_pages)
        q_items = q_rep[: (p1 - p0) * H] if q_rep is not None else q4[owner_b[p0:p1]].reshape(-1, GN, d)
        # (pages*H, GN, d) x (pages*H, d, page) -> (pages*H, GN, page); read page * d of K per tile
        torch.bmm(q_items, k3[p0 * H : p1 * H].transpose(1, 2).to(q4.dtype), out=S_ij[p0 * H : p1 * H])
    return S_ij


def _pool_values(P_ij: torch.Tensor, v3: torch.Tensor, segment: torch.Tensor, live: torch.Tensor, n_segments: int,
                 step: int) -> torch.Tensor:
    """sum over the pages of each segment (sequence b, split s) of P_ij @ V, shape (n_segments, H * GN * d).

    Each step's per-page partials (step * H * GN * d, cache-resident) are summed into their segments at once by a
    (n_segments, step) 0/1 matrix product; with one segment the steps accumulate in the matmul (baddbmm) instead,
    since every parallel op can wait for a descheduled thread on a loaded machine. Pages no sequence uses have
    P_ij = 0, but their V may hold anything (even NaN, and 0 * NaN = NaN), so their partials are zeroed before the
    sum.
    """
    n_pages, H, GN, page = P_ij.shape
    d = v3.shape[-1]
    all_live = bool(live.all())
    P_ij = to_input_dtype(P_ij, v3.dtype)  # P~ rounded to V's dtype after its row sum, as a tensor core takes it
    wide = P_ij.dtype  # the products accumulate in fp32 (fp64 for fp64 inputs), never in a bf16 / fp16 output
    if n_segments == 1 and all_live:  # one segment: the matmul sums the steps' tiles
        acc = torch.zeros(step * H, GN, d, dtype=wide, device=v3.device)  # (step*H, GN, d) tile sums
        for p0 in range(0, n_pages, step):
            p1 = min(p0 + step, n_pages)
            # acc[:pages*H] += (pages*H, GN, page) x (pages*H, page, d); read page * d of V per tile
            acc[: (p1 - p0) * H].baddbmm_(P_ij[p0:p1].reshape(-1, GN, page), v3[p0 * H : p1 * H].to(wide))
        return acc.view(step, H * GN * d).sum(0, keepdim=True)  # (1, H*GN*d)
    onehot = torch.zeros(n_segments, n_pages, dtype=P_ij.dtype, device=P_ij.device)
    onehot[segment, torch.arange(n_pages, device=segment.device)] = 1.0  # (n_segments, n_pages): page -> segment
    O = torch.zeros(n_segments, H * GN * d, dtype=P_ij.dtype, device=P_ij.device)
    O_pages = torch.empty(step * H, GN, d, dtype=wide, device=v3.device)  # one step's per-page partials
    for p0 in range(0, n_pages, step):
        p1 = min(p0 + step, n_pages)
        out = O_pages[: (p1 - p0) * H]
        # (pages*H, GN, page) x (pages*H, page, d) -> (pages*H, GN, d); read page * d of V per tile
        torch.bmm(P_ij[p0:p1].reshape(-1, GN, page), v3[p0 * H : p1 * H].to(wide), out=out)
        rows = out.view(p1 - p0, H * GN * d)
        if not all_live:
            rows = rows.masked_fill(~live[p0:p1, None], 0.0)
        # (n_segments, pages) x (pages, H*GN*d) -> (n_segments, H*GN*d): each segment's pages summed
        O.addmm_(onehot[:, p0:p1], rows)
    return O


def _logical(table: torch.Tensor, used: torch.Tensor, pages_per_split: int, n_splits: int):
    """A function mapping per-physical-page values (n_pages, ...) to (B, S, pages_per_split, ...) in logical order,
    `fill` where a sequence has no page. A gather, not a scatter: no two pages write to one split's slot."""
    n = pages_per_split * n_splits  # logical pages the splits cover (>= every sequence's used pages)
    pad = max(0, n - table.shape[1])
    view = torch.nn.functional.pad(table, (0, pad))[:, :n]  # (B, n) physical page of each logical page
    valid = torch.nn.functional.pad(used, (0, pad))[:, :n]  # (B, n)
    B = table.shape[0]
    idx = torch.where(valid, view, 0)
    all_valid = bool(valid.all())  # every slot holds a page (full splits): nothing to fill

    def to_splits(x: torch.Tensor, fill: float) -> torch.Tensor:
        out = x[idx]  # (B, n, ...) gathered per logical page: a new tensor, so filled in place
        if not all_valid:
            out.masked_fill_(~valid.view(B, n, *([1] * (x.dim() - 1))), fill)
        return out.view(B, n_splits, pages_per_split, *x.shape[1:])

    return to_splits
