"""The problem sizes the dashboard offers and allows: sequence length N, head dimension d and tile sizes Br, Bc, as
bounds (what a link may ask for) and as the values a slider or a multiselect offers.

Shared by the sidebar's settings (flashviz.app.state) and the views' own (flashviz.app.registry). Pure: plain constants.

Legend: N sequence length (N_q = N_k), d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

from typing import Protocol

N_MIN, N_MAX = 1, 16384  # sequence length N; 16384^2 fp32 scores = 1 GiB, the most a laptop survives naively
D_MIN, D_MAX = 1, 512  # head dimension d
BLOCK_MIN, BLOCK_MAX = 1, 1024  # tile sizes Br, Bc (rows / columns of S per tile)

N_OPTIONS = (16, 32, 64, 97, 128, 256, 257, 512, 1000, 1024, 1025, 2048, 4096, 8192, 16384)  # powers of 2 + odd
D_OPTIONS = (8, 16, 32, 59, 64, 111, 128, 256)
BLOCK_OPTIONS = (4, 8, 16, 32, 64, 128, 256, 512)
GRID_MAX = 64  # tiles per side the tile map animates (64 x 64 x 2 panels: about 0.75 MB of markup)


class Grid(Protocol):
    """What grid_error reads of the settings: N and the tile sizes."""

    n: int
    br: int
    bc: int


def grid_error(s: Grid, cap: int = GRID_MAX, view: str = "the animation") -> str | None:
    """Why `view`, which draws at most cap x cap tiles, cannot draw the N x N grid of Br x Bc tiles of settings s
    (and what to change), or None.

    Example:
        >>> from types import SimpleNamespace as S
        >>> grid_error(S(n=1024, br=64, bc=64)) is None, grid_error(S(n=16384, br=16, bc=16)).split(";")[0]
        (True, 'N = 16384 with Br = 16, Bc = 16 makes a 1024 × 1024 grid of tiles')
    """
    n, br, bc = s.n, s.br, s.bc
    tr, tc = -(-n // br), -(-n // bc)
    if max(tr, tc) <= cap:
        return None
    need = -(-n // cap)
    return (f"N = {n} with Br = {br}, Bc = {bc} makes a {tr} × {tc} grid of tiles; {view} draws at most "
            f"{cap} × {cap}. Raise the block size to at least {need} or lower N.")
