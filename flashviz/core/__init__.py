"""Core kernels: the tile schedule, naive attention, tiled FlashAttention forward and backward (torch only)."""
