"""Masks inside a computed tile of the tiled kernels: which elements of a partial tile are hidden (`TileMasks`, made
on demand and cached), and those elements set to -inf.

References:
    FlexAttention (Dong et al., 2024): a BlockMask's partial blocks apply the mask_mod element by element, its full
        blocks apply none; flash-attn's kernels do the same for the causal diagonal and the window's edges.

Legend: B batch, H query heads, H_kv key/value heads, G = H / H_kv query heads per K/V head, Br x Bc the tile.
The scores arrive in the kernels' grouped layout (flash.py's group_rows): (BH_kv, Br G, Bc), row r * G + g holding
query r of head g of the group, so one mask (Br, Bc) for every head, or one per (b, h) (B H, Br, Bc), is viewed to
broadcast against them without a copy.
"""

from __future__ import annotations

import torch

from flashviz.core.maskeval import evaluate, index_grid
from flashviz.core.softmax import NEG_INF
from flashviz.core.tiling import Tile, TileSchedule, visible_mask


def _grouped(S_ij: torch.Tensor, mask: torch.Tensor, G: int) -> tuple[torch.Tensor, torch.Tensor]:
    """S_ij (BH_kv, Br G, Bc) and a tile mask (Br, Bc) or (B H, Br, Bc) as views that broadcast together."""
    if G == 1:
        return S_ij, mask  # (BH, Br, Bc) and (Br, Bc) or (BH, Br, Bc)
    BH_kv, _, Bc = S_ij.shape
    Br = mask.shape[-2]
    # (B H, Br, Bc) with head h = h_kv G + g -> (BH_kv, Br, G, Bc); one mask for all heads (Br, Bc) -> (Br, 1, Bc)
    mask = mask.view(BH_kv, G, Br, Bc).transpose(1, 2) if mask.dim() == 3 else mask[:, None, :]
    return S_ij.view(BH_kv, Br, G, Bc), mask  # S_ij may be a strided slice of a step: splitting its rows is a view


def mask_tile(S_ij: torch.Tensor, hidden: torch.Tensor, G: int) -> None:
    """Set the hidden elements of a partial tile's scores to -inf, in place.

    Args:
        S_ij: (BH_kv, Br G, Bc) scores in group_rows' layout.
        hidden: (Br, Bc) bool, True where the key is not visible, the same for every head; or (B H, Br, Bc) for a
            mask_mod that reads b or h, row b H + h (TileMasks.hidden).
        G: query heads per K/V head.

    Example:
        >>> S = torch.zeros(2, 4, 3)  # two K/V groups of G = 2 heads, Br = 2 queries, Bc = 3 keys
        >>> mask_tile(S, torch.tensor([[False, True, True], [False, False, True]]), G=2)
        >>> S[0]  # rows: query 0 head 0, query 0 head 1, query 1 head 0, query 1 head 1
        tensor([[0., -inf, -inf],
                [0., -inf, -inf],
                [0., 0., -inf],
                [0., 0., -inf]])
    """
    if S_ij.numel() == 0:
        return  # B H = 0: nothing to mask (and no (b, h) for a per-head mask to match)
    S, hidden = _grouped(S_ij, hidden, G)
    S.masked_fill_(hidden, NEG_INF)


def add_tile_bias(S_ij: torch.Tensor, bias: torch.Tensor, G: int) -> None:
    """mask_tile with the additive form of the mask (TileMasks.bias: 0 visible, -inf hidden), in place: the same
    result for finite scores, about 8x faster on CPU.

    Args:
        S_ij: (BH_kv, Br G, Bc) scores in group_rows' layout.
        bias: (Br, Bc) or (B H, Br, Bc), 0 where visible and -inf where hidden.
        G: query heads per K/V head.

    Example:
        >>> S = torch.ones(1, 2, 2)
        >>> add_tile_bias(S, torch.tensor([[0.0, NEG_INF], [0.0, 0.0]]), G=1)
        >>> S
        tensor([[[1., -inf],
                 [1., 1.]]])
    """
    if S_ij.numel() == 0:
        return  # B H = 0
    S, bias = _grouped(S_ij, bias, G)
    S.add_(bias)


class TileMasks:
    """Element masks of partial tiles, made on demand; `hidden(tile)` is what the kernels' masked_fill_ takes.

    Contract: hidden(tile) is a bool tensor, True where the key is NOT visible, broadcastable to the kernels'
    (B*H, rows, cols) scores S_ij, with rows = tile.rows and cols = tile.cols:
        (rows, cols)         causal / window only, or a mask_mod that ignores b and h: one mask for every (b, h);
        (B*H, rows, cols)    a mask_mod that reads b or h; b-major (row b*H + h), as q.reshape(B*H, N, d) lays out
                             the heads, with B = schedule.batch and H = schedule.heads.
    A mask_mod is intersected with the schedule's causal and window. Causal and window masks depend only on
    j - i, so they are cached by k_start - q_start and shape (all diagonal tiles of a causal schedule share one);
    mask_mod masks are evaluated once per partial tile and device and kept in the schedule (TileSchedule.
    hidden_cache), so every call that reuses a prebuilt schedule skips the mask_mod. That cache holds at most
    partial tiles x Br x Bc bools (x B H for a mask_mod that reads b or h): 10 MiB for 78 tiles of 128 x 128 x 8.
    bias(tile) is the same mask as an additive fp32 tile (0 visible, -inf hidden), what the forward kernels add to
    S_ij; it is cached the same way (TileSchedule.bias_cache, 4 bytes per element of the same partial tiles).

    Example:
        >>> from flashviz.core.tiling import tile_schedule
        >>> from flashviz.masks import document
        >>> s = tile_schedule(4, 4, 2, 2, mask_mod=document([1, 3]))
        >>> TileMasks(s, "cpu").hidden(s.tile(0, 0)).tolist()
        [[False, True], [True, False]]
    """

    def __init__(self, schedule: TileSchedule, device: torch.device | str):
        self.causal, self.window, self.device = schedule.causal, schedule.window, torch.device(device)
        self.mask_mod, self.per_head = schedule.combined_mask_mod, schedule.mask_reads_bh
        self.batch, self.heads = schedule.batch, schedule.heads
        self._hidden: dict[tuple[int, int, int], torch.Tensor] = {}
        self._bias: dict[tuple[int, int, int], torch.Tensor] = {}
        self._shared = schedule.hidden_cache  # mask_mod tiles: kept with the schedule, reused across calls
        self._shared_bias = schedule.bias_cache  # their additive form, likewise

    def hidden(self, tile: Tile) -> torch.Tensor:
        """(rows, cols) or (B*H, rows, cols) bool, True where the key is NOT visible (see the class docstring)."""
        if self.mask_mod is not None:
            return self._hidden_mask_mod(tile)
        key = (tile.k_start - tile.q_start, tile.rows, tile.cols)
        if key not in self._hidden:
            q_idx = torch.arange(tile.q_start, tile.q_end, device=self.device)
            k_idx = torch.arange(tile.k_start, tile.k_end, device=self.device)
            mask = visible_mask(q_idx, k_idx, causal=self.causal, window=self.window)
            assert mask is not None, "only masked schedules have partial tiles"
            self._hidden[key] = ~mask
        return self._hidden[key]

    def bias(self, tile: Tile) -> torch.Tensor:
        """hidden(tile) as an additive fp32 mask of the same shape: 0 where the key is visible, -inf where hidden.

        S_ij.add_(bias) masks a tile like S_ij.masked_fill_(hidden, -inf), about 8x faster on CPU (a plain
        elementwise add against a per-element branch); -inf + a finite score is -inf. fp64 scores add it exactly.
        """
        if self.mask_mod is not None:
            cache, key = self._shared_bias, (tile.q_block, tile.k_block, str(self.device))
        else:
            cache, key = self._bias, (tile.k_start - tile.q_start, tile.rows, tile.cols)
        if key not in cache:
            hidden = self.hidden(tile)  # (rows, cols) or (B*H, rows, cols) bool
            cache[key] = torch.zeros(hidden.shape, device=self.device).masked_fill_(hidden, NEG_INF)
        return cache[key]

    def _hidden_mask_mod(self, tile: Tile) -> torch.Tensor:
        key = (tile.q_block, tile.k_block, str(self.device))
        if key not in self._shared:
            self._shared[key] = self._evaluate_hidden(tile)
        return self._shared[key]

    def _evaluate_hidden(self, tile: Tile) -> torch.Tensor:
        b, h = index_grid(self.batch, self.heads, self.device)
        q_idx = torch.arange(tile.q_start, tile.q_end, device=self.device)[:, None]  # (rows, 1)
        k_idx = torch.arange(tile.k_start, tile.k_end, device=self.device)[None, :]  # (1, cols)
        vis = evaluate(self.mask_mod, b, h, q_idx, k_idx)  # (B', H', rows, cols)
        if not self.per_head:
            return ~vis[0, 0]  # (rows, cols)
        vis = vis.expand(self.batch, self.heads, tile.rows, tile.cols)  # (B, H, rows, cols)
        return ~vis.reshape(self.batch * self.heads, tile.rows, tile.cols)  # (B*H, rows, cols), b-major
