"""Export a tile schedule as PyTorch FlexAttention's BlockMask, block for block what create_block_mask builds.

A BlockMask lists, per (b, h, query block), the key blocks to compute: (kv_num_blocks, kv_indices) for the partial
blocks (the kernel applies mask_mod inside them) and (full_kv_num_blocks, full_kv_indices) for the full ones (no mask
work); the rest are skipped. That is flashviz's partial / full / skipped, with one difference in convention:
create_block_mask pads the mask past N with False, so a ragged edge tile that is full here (every in-bounds element
visible) is a partial block there. flex_attention's output is the same either way; the export follows torch.
BLOCK_SIZE is stored as the pair (Br, Bc): create_block_mask(..., BLOCK_SIZE=128) stores (128, 128) too.

Legend: B batch, H heads, Tr = ceil(N_q / Br) query blocks, Tc = ceil(N_k / Bc) key blocks.
"""

from __future__ import annotations

import torch
from torch.nn.attention.flex_attention import BlockMask, and_masks

from flashviz.core.tiling import TileSchedule
from flashviz.masks import causal_mask, sliding_window
from flashviz.vocab import FULL, SKIPPED


def _ordered(dense: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(..., Tr, Tc) 0/1 block grid -> num_blocks (..., Tr) and indices (..., Tr, Tc) int32, listed blocks first.

    Ascending block order within the valid prefix, as create_block_mask (a stable descending sort of the grid).
    """
    dense = dense.to(torch.int32)
    num = dense.sum(dim=-1, dtype=torch.int32)  # (..., Tr)
    idx = torch.argsort(dense, dim=-1, descending=True, stable=True).to(torch.int32)  # (..., Tr, Tc)
    return num.contiguous(), idx.contiguous()


def _block_grids(schedule: TileSchedule) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-(b, h) grids any_visible, all_visible of shape (B', H', Tr, Tc), B' in {1, B}, H' in {1, H}."""
    if schedule.block_any is not None:
        return schedule.block_any, schedule.block_all
    Tr, Tc = schedule.n_q_blocks, schedule.n_k_blocks
    statuses = [[schedule.tile(i, j, step=0).status for j in range(Tc)] for i in range(Tr)]
    computed = torch.tensor([[s != SKIPPED for s in row] for row in statuses], dtype=torch.bool).view(1, 1, Tr, Tc)
    full = torch.tensor([[s == FULL for s in row] for row in statuses], dtype=torch.bool).view(1, 1, Tr, Tc)
    return computed, full


def block_mask_mod(schedule: TileSchedule):
    """The mask_mod that flex_attention applies inside partial blocks: mask_mod AND causal AND window, or None."""
    if schedule.combined_mask_mod is not None:
        return schedule.combined_mask_mod
    parts = ([causal_mask] if schedule.causal else []) + ([sliding_window(*schedule.window)] if schedule.window else [])
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else and_masks(*parts)


def to_block_mask(schedule: TileSchedule, device: torch.device | str = "cpu") -> BlockMask:
    """The schedule as a torch BlockMask equal to create_block_mask(mask_mod, B, H, N_q, N_k, BLOCK_SIZE=(Br, Bc)).

    Args:
        schedule: a TileSchedule; its batch and heads give B and H, its mask_mod AND causal AND window the mask.
        device: where the BlockMask's tensors live (flex_attention wants the device of q, k, v).
    Returns:
        A BlockMask with kv_num_blocks (B, H, Tr), kv_indices (B, H, Tr, Tc) (partial blocks), full_kv_num_blocks,
        full_kv_indices (full blocks), BLOCK_SIZE (Br, Bc), seq_lengths (N_q, N_k) and the mask_mod to apply inside
        partial blocks. A block is full only if every (b, h) row of its tile is full and it is not ragged.

    Example:
        >>> from flashviz.core.tiling import tile_schedule
        >>> bm = to_block_mask(tile_schedule(256, 256, 128, 128, causal=True))
        >>> bm.kv_num_blocks.tolist(), bm.full_kv_num_blocks.tolist()
        ([[[1, 1]]], [[[0, 1]]])
    """
    if not isinstance(schedule, TileSchedule):
        raise TypeError(f"to_block_mask takes a TileSchedule (from tile_schedule(...)), got {type(schedule).__name__}.")
    if schedule.n_q == 0 or schedule.n_k == 0:
        raise ValueError(f"to_block_mask needs N_q, N_k >= 1, got a {schedule.n_q} x {schedule.n_k} schedule: "
                         "a BlockMask has at least one block per side.")
    any_vis, all_vis = _block_grids(schedule)  # (B', H', Tr, Tc) each
    B, H = schedule.batch, schedule.heads
    shape = (B, H, schedule.n_q_blocks, schedule.n_k_blocks)
    any_vis, all_vis = any_vis.expand(shape), all_vis.expand(shape)
    # create_block_mask pads past N with False: a ragged last row or column of tiles is never full there
    ragged = torch.zeros(shape[2:], dtype=torch.bool)  # (Tr, Tc)
    if schedule.n_q % schedule.block_q:
        ragged[-1, :] = True
    if schedule.n_k % schedule.block_k:
        ragged[:, -1] = True
    full = all_vis & ~ragged  # (B, H, Tr, Tc)
    partial = any_vis & ~full  # (B, H, Tr, Tc)
    kv_num, kv_idx = _ordered(partial.to(device))
    full_num, full_idx = _ordered(full.to(device))
    return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=(schedule.block_q, schedule.block_k),
                                    mask_mod=block_mask_mod(schedule), seq_lengths=(schedule.n_q, schedule.n_k))
