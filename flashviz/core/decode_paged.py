"""Split-KV partials straight from a paged KV cache, without gathering its pages.

A paged cache (num_pages, H_kv, page_size, d) is, as it lies in memory, a batch of num_pages * H_kv tiles of
(page_size, d): one batched matmul can read every page in place. What differs from page to page is only which query
rows it belongs to, so the (small) queries are gathered per page instead of the (large) keys and values: page p of
sequence b gets the G * N_q stacked rows of b. The scores of each page are then reduced into their sequence's split
(scatter_reduce / index_add by the page's slot b * S + s). Pages that no sequence uses are computed and masked out,
so this path is taken only when most of the pool is in use and no page is shared (see pool_owners).

Legend as in flashviz.core.decode: B batch, H = H_kv, GN = G * N_q stacked rows, S splits, d head dimension.
"""

from __future__ import annotations

import torch

NEG_INF = float("-inf")
POOL_MIN_USE = 0.5  # read the whole pool only if at least half of its pages hold valid keys (else gather pages)


def pool_owners(table: torch.Tensor, seqlens: torch.Tensor, page_size: int, num_pages: int
                ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(owner_b, owner_p): the sequence and logical page of each physical page, or None when pages are shared or
    fewer than POOL_MIN_USE of them are in use. Unused pages get logical page max_pages: past every valid key."""
    used = torch.arange(table.shape[1], device=table.device) < -(-seqlens[:, None] // page_size)  # (B, max_pages)
    phys = table[used]  # (n_used,) physical pages in use
    if phys.numel() < POOL_MIN_USE * num_pages or torch.unique(phys).numel() != phys.numel():
        return None
    b_idx, p_idx = used.nonzero(as_tuple=True)
    owner_b = torch.zeros(num_pages, dtype=torch.long, device=table.device)
    owner_p = torch.full((num_pages,), table.shape[1], dtype=torch.long, device=table.device)
    owner_b[phys], owner_p[phys] = b_idx, p_idx
    return owner_b, owner_p


def pool_partials(q4: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  owners: tuple[torch.Tensor, torch.Tensor], limit: torch.Tensor, chunk: int, n_splits: int,
                  acc: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """m, l, unnormalised O of every split, shapes (B*H, S, GN), (B*H, S, GN), (B*H, S, GN, d); None when the cache
    is not laid out as one batch of pages (then the caller gathers pages instead).

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
    owner_b, owner_p = owners
    slot = owner_b * n_splits + (owner_p * page // chunk).clamp(max=n_splits - 1)  # (n_pages,) in B*S
    q_items = q4[owner_b].reshape(n_pages * H, GN, d)  # (n_pages*H, GN, d): write GN*d per page, not page*d
    # (n_pages*H, GN, d) x (n_pages*H, d, page) -> (n_pages*H, GN, page); read page*d of K per item
    S_ij = torch.bmm(q_items, k3.transpose(1, 2)).view(n_pages, H, GN, page).to(acc)
    pos = owner_p[:, None] * page + torch.arange(page, device=q4.device)  # (n_pages, page) logical key positions
    S_ij = S_ij.masked_fill_(pos[:, None, None, :] >= limit[owner_b][..., None], NEG_INF)
    m = torch.full((B * n_splits, H, GN), NEG_INF, dtype=acc, device=q4.device)
    m_items = S_ij.amax(-1)  # (n_pages, H, GN)
    m.scatter_reduce_(0, slot.view(-1, 1, 1).expand_as(m_items), m_items, "amax")  # (B*S, H, GN) max per split
    m_safe = torch.where(m == NEG_INF, torch.zeros((), dtype=acc, device=m.device), m)
    P_ij = S_ij.sub_(m_safe[slot][..., None]).exp_()  # (n_pages, H, GN, page), in place over the scores
    l = torch.zeros_like(m).index_add_(0, slot, P_ij.sum(-1))  # (B*S, H, GN)
    # (n_pages*H, GN, page) x (n_pages*H, page, d) -> (n_pages*H, GN, d); read page*d of V per item
    O_items = torch.bmm(P_ij.view(n_pages * H, GN, page).to(v3.dtype), v3).view(n_pages, H, GN, d).to(acc)
    O = torch.zeros(B * n_splits, H, GN, d, dtype=acc, device=q4.device).index_add_(0, slot, O_items)
    return tuple(x.view(B, n_splits, H, *x.shape[2:]).transpose(1, 2).reshape(B * H, n_splits, *x.shape[2:])
                 for x in (m, l, O))
