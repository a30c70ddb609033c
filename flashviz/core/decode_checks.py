"""Input checks for flash_decode: KV-cache shapes, valid lengths, block tables and grouped-query head counts.

Each check raises a ValueError or TypeError that says what was expected, what came, and how to fix it.

Legend: B batch, H_q query heads, H_kv key/value heads (H_q % H_kv == 0), G = H_q / H_kv query heads per K/V head,
N_q query rows, N_max contiguous cache capacity, d head dimension.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flashviz.core.validate import FLOAT_DTYPES, validate_block, validate_positive


@dataclass(frozen=True)
class CacheLayout:
    """The checked geometry of one decode call (all sizes in elements, lengths in key positions)."""

    batch: int  # B
    heads_q: int  # H_q
    heads_kv: int  # H_kv
    n_q: int  # N_q query rows per sequence
    d: int  # head dimension
    capacity: int  # keys one sequence can hold: N_max (contiguous) or max_pages * page_size (paged)
    page_size: int | None  # keys per page; None for a contiguous cache
    seqlens: torch.Tensor  # (B,) int64 valid lengths on the cache's device
    max_len: int  # max(seqlens): keys beyond it are never read

    @property
    def group(self) -> int:
        """G: query heads sharing one K/V head (1 = MHA, H_q = MQA)."""
        return self.heads_q // self.heads_kv


def _check_tensor(name: str, t: object, layout: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape {layout}, got {type(t).__name__}.")
    if t.dim() != 4:
        raise ValueError(f"{name} must be 4-D {layout}, got {t.dim()}-D with shape {tuple(t.shape)}.")
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be float16, bfloat16, float32 or float64, got {t.dtype}. Use {name}.float().")
    return t


def check_heads(h_q: int, h_kv: int) -> None:
    """Grouped-query attention needs every K/V head shared by the same number of query heads."""
    if h_kv < 1 or h_q % h_kv:
        divisors = [h for h in range(1, h_q + 1) if h_q % h == 0]
        raise ValueError(
            f"the K/V cache has {h_kv} heads but q has {h_q}: H_q must be a multiple of H_kv (grouped-query "
            f"attention). With H_q={h_q}, use H_kv in {divisors} ({h_q} = MHA, 1 = MQA)."
        )


def check_tensors(q: object, k_cache: object, v_cache: object, paged: bool) -> None:
    """q (B, H_q, N_q, d); caches (B, H_kv, N_max, d) or, paged, (num_pages, H_kv, page_size, d)."""
    cache_layout = "(num_pages, H_kv, page_size, d)" if paged else "(B, H_kv, N_max, d)"
    _check_tensor("q", q, "(B, H_q, N_q, d)")
    _check_tensor("k_cache", k_cache, cache_layout)
    _check_tensor("v_cache", v_cache, cache_layout)
    if not (q.dtype == k_cache.dtype == v_cache.dtype):
        raise TypeError(f"q, k_cache, v_cache must share one dtype, got {q.dtype}, {k_cache.dtype}, "
                        f"{v_cache.dtype}. Cast them to a common dtype.")
    if not (q.device == k_cache.device == v_cache.device):
        raise ValueError(f"q, k_cache, v_cache must be on one device, got {q.device}, {k_cache.device}, "
                         f"{v_cache.device}. Move them with .to(device).")
    if k_cache.shape != v_cache.shape:
        raise ValueError(f"k_cache and v_cache must have one shape {cache_layout}, got {tuple(k_cache.shape)} and "
                         f"{tuple(v_cache.shape)}.")
    if q.shape[3] != k_cache.shape[3] or q.shape[3] < 1:
        raise ValueError(f"q and the caches must share the head dimension d >= 1 (last axis), got q d={q.shape[3]} "
                         f"and cache d={k_cache.shape[3]}.")
    if q.shape[2] < 1:
        raise ValueError(f"q must have at least one query row (N_q >= 1, axis 2), got shape {tuple(q.shape)}.")
    if not paged and k_cache.shape[0] != q.shape[0]:
        raise ValueError(f"a contiguous cache holds one sequence per batch element: k_cache batch {k_cache.shape[0]} "
                         f"!= q batch {q.shape[0]}. For a paged cache pass block_table=(B, max_pages).")
    check_heads(q.shape[1], k_cache.shape[1])


def _int_tensor(name: str, t: object, shape_doc: str) -> torch.Tensor:
    if isinstance(t, (list, tuple)):
        t = torch.tensor(t)
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be an integer tensor of shape {shape_doc}, got {type(t).__name__}.")
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers (torch.int32 or torch.int64), got {t.dtype}. "
                        f"Convert it with {name}.long() (rounding first if needed).")
    return t


def check_block_table(block_table: object, batch: int, num_pages: int) -> torch.Tensor:
    """Return the (B, max_pages) table as int64; entry ranges are checked against the lengths later."""
    table = _int_tensor("block_table", block_table, "(B, max_pages)")
    if table.dim() != 2 or table.shape[0] != batch or table.shape[1] < 1:
        raise ValueError(f"block_table must be (B, max_pages) = ({batch}, max_pages >= 1), got shape "
                         f"{tuple(table.shape)}. Row b lists sequence b's physical pages in logical order.")
    if num_pages < 1:
        raise ValueError("a paged k_cache needs at least one page (num_pages >= 1 on axis 0), got 0.")
    return table.long()


def check_seqlens(cache_seqlens: object, batch: int, capacity: int, device: torch.device) -> torch.Tensor:
    """Return (B,) int64 valid lengths in [0, capacity]; None means every sequence fills the cache."""
    if cache_seqlens is None:
        return torch.full((batch,), capacity, dtype=torch.long, device=device)
    lens = _int_tensor("cache_seqlens", cache_seqlens, "(B,)").to(device=device, dtype=torch.long)
    if lens.shape != (batch,):
        raise ValueError(f"cache_seqlens must be (B,) = ({batch},), one valid length per sequence, got shape "
                         f"{tuple(lens.shape)}.")
    if batch and int(lens.min()) < 0:
        raise ValueError(f"cache_seqlens must be >= 0, got {lens.tolist()}. A length counts the valid keys.")
    if batch and int(lens.max()) > capacity:
        raise ValueError(f"cache_seqlens {lens.tolist()} exceed the cache's capacity of {capacity} keys per "
                         "sequence. Grow the cache (N_max, or max_pages * page_size for a paged cache) or "
                         "shorten the lengths.")
    return lens


def check_table_entries(table: torch.Tensor, seqlens: torch.Tensor, page_size: int, num_pages: int) -> None:
    """Every page a sequence uses (logical page < ceil(len / page_size)) must name a physical page."""
    pages_used = (seqlens + page_size - 1) // page_size  # (B,) pages holding valid keys
    used = torch.arange(table.shape[1], device=table.device)[None, :] < pages_used[:, None]  # (B, max_pages)
    bad = used & ((table < 0) | (table >= num_pages))
    if bool(bad.any()):
        b, p = (int(i) for i in bad.nonzero()[0])
        raise ValueError(f"block_table[{b}, {p}] = {int(table[b, p])} is not a page of the cache: entries in use "
                         f"must lie in [0, {num_pages}) (num_pages = k_cache.shape[0]). Entries past a sequence's "
                         "last page are ignored and may hold any padding value.")


def check_causal_fits(causal: bool, seqlens: torch.Tensor, n_q: int) -> None:
    """Bottom-right causal: the N_q query rows are the last N_q positions, so every sequence needs >= N_q keys."""
    if causal and seqlens.numel() and int(seqlens.min()) < n_q:
        raise ValueError(f"causal=True puts the {n_q} query rows at the last {n_q} positions of each sequence, but "
                         f"cache_seqlens {seqlens.tolist()} has a sequence shorter than that. Append the new keys to "
                         f"the cache first (lengths >= N_q = {n_q}) or pass causal=False.")


def check_splits(num_splits: object) -> int | None:
    if num_splits is None:
        return None
    return validate_positive("num_splits", num_splits, "Use 1 (no split) up to the number of KV blocks, or None.")


def check_block_k(block_k: object, page_size: int | None) -> int | None:
    """block_k keys per KV block; a paged cache needs whole pages per block."""
    if block_k is None:
        return None
    block_k = validate_block("block_k", block_k)
    if page_size is not None and block_k % page_size:
        fix = page_size * max(1, block_k // page_size)
        raise ValueError(f"with a paged cache block_k must be a multiple of page_size={page_size} so that splits "
                         f"end on page boundaries, got {block_k}. Use block_k={fix} or leave it None.")
    return block_k


def check_layout(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, cache_seqlens: object,
                 block_table: object, causal: bool) -> tuple[CacheLayout, torch.Tensor | None]:
    """Run every shape check; return the layout and the (B, max_pages) int64 table (None when contiguous)."""
    paged = block_table is not None
    check_tensors(q, k_cache, v_cache, paged)
    batch, heads_q, n_q, d = q.shape
    table, page_size = None, None
    if paged:
        table = check_block_table(block_table, batch, k_cache.shape[0]).to(q.device)
        page_size = k_cache.shape[2]
        if page_size < 1:
            raise ValueError(f"a paged cache needs page_size >= 1 keys per page (axis 2), got k_cache shape "
                             f"{tuple(k_cache.shape)}.")
        capacity = table.shape[1] * page_size
    else:
        capacity = k_cache.shape[2]
    seqlens = check_seqlens(cache_seqlens, batch, capacity, q.device)
    if paged:
        check_table_entries(table, seqlens, page_size, k_cache.shape[0])
    check_causal_fits(causal, seqlens, n_q)
    max_len = int(seqlens.max()) if batch else 0
    layout = CacheLayout(batch, heads_q, k_cache.shape[1], n_q, d, capacity, page_size, seqlens, max_len)
    return layout, table
