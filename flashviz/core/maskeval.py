"""Evaluate a FlexAttention mask_mod at element level, in bounded chunks, and classify the tiles it makes.

A mask_mod(b, h, q_idx, kv_idx) is called on broadcastable index tensors rather than through torch.vmap:

    b (B, 1, 1, 1), h (1, H, 1, 1), q_idx (rows, 1), kv_idx (1, cols)  ->  bool, broadcastable to (B, H, rows, cols)

so one call evaluates a whole slab of the mask at elementwise speed. A mask_mod that ignores b and h returns
(rows, cols); one that reads them returns (B, 1, rows, cols), (1, H, rows, cols) or (B, H, rows, cols).

A slab spans whole tiles where it can, and never more than ELEMENT_BUDGET elements, so classifying a mask costs a
few MiB however large N grows. Only in-bounds indices are ever passed (a ragged last tile is padded by
repeating its last index, which changes neither "any element visible" nor "every element visible").

Legend: Br = block_q, Bc = block_k; Tr, Tc tiles along N_q, N_k; B batch, H heads.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flashviz._lazy import lazy_import

if TYPE_CHECKING:
    import torch

    from flashviz.masks import MaskMod
else:
    torch = lazy_import("torch")  # imported when a mask is first evaluated: tiling.py imports this module without it

# Mask elements per mask_mod call. On one thread, 256 Ki keeps an int64 temporary such as j - i (2 MiB) in cache:
# 2 to 3x faster than 4 Mi at N = 4096. Multi-threaded, every op wakes the thread pool (milliseconds on a busy
# machine), so fewer, larger calls win: 4 Mi was 4 to 20x faster than 256 Ki on 2 threads (benchmarks/bench_masks.py).
SLAB_ONE_THREAD = 1 << 18
SLAB_THREADED = 1 << 22
ELEMENT_BUDGET = max(SLAB_ONE_THREAD, SLAB_THREADED)  # the most elements one call ever holds: 4 MiB bool, 32 MiB int64
CALL_SHAPES = "b (B,1,1,1), h (1,H,1,1), q_idx (rows,1), kv_idx (1,cols)"  # what a mask_mod is called with


def required_positional(fn: Callable) -> int | None:
    """How many positional parameters fn requires (no default), or None when it has no signature to read (builtins
    and some C callables: the call itself decides). Tells a mask_mod (4) from a score_mod (5) passed in its place.

    Example:
        >>> required_positional(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx)
        4
        >>> required_positional(lambda score, b, h, q_idx, kv_idx, cap=30.0: score)  # a default is not required
        5
    """
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in params)


def validate_mask_mod(mask_mod: object) -> MaskMod:
    """Return mask_mod if it is a callable of four arguments (b, h, q_idx, kv_idx), else raise TypeError."""
    if not callable(mask_mod):
        raise TypeError(f"mask_mod must be a function mask_mod(b, h, q_idx, kv_idx) -> bool tensor, got {mask_mod!r}. "
                        "Example: mask_mod=lambda b, h, q_idx, kv_idx: q_idx >= kv_idx.")
    if required_positional(mask_mod) == 5:
        raise TypeError(f"mask_mod {getattr(mask_mod, '__name__', mask_mod)} takes 5 arguments, like a "
                        "score_mod(score, b, h, q_idx, kv_idx). Pass it as score_mod=..., or give the mask "
                        "as mask_mod(b, h, q_idx, kv_idx) -> bool.")
    return mask_mod


def evaluate(mask_mod: MaskMod, b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor,
             kv_idx: torch.Tensor) -> torch.Tensor:
    """Call mask_mod on index tensors and check what it returns.

    Args:
        b: (B, 1, 1, 1) and h: (1, H, 1, 1) int64; q_idx: (rows, 1) and kv_idx: (1, cols) int64 positions.
    Returns:
        (B', H', rows, cols) bool with B' in {1, B} and H' in {1, H} (1 where the mask_mod ignores b or h).
    """
    full = (b.shape[0], h.shape[1], q_idx.shape[0], kv_idx.shape[1])
    name = getattr(mask_mod, "__name__", repr(mask_mod))
    try:
        out = mask_mod(b, h, q_idx, kv_idx)
    except Exception as e:  # the user's function: say how it was called and what it must be
        raise ValueError(
            f"mask_mod {name} raised {type(e).__name__}: {e}. It was called with int64 index tensors {CALL_SHAPES} "
            "and must be elementwise (torch ops that broadcast, no Python if on tensor values, no .item()). If it "
            "reads a table by position (like document(lengths)), the table must cover N_q and N_k."
        ) from e
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"mask_mod {name} must return a bool tensor, got {type(out).__name__} ({out!r}). Return a "
                        "tensor comparison such as q_idx >= kv_idx, not a Python bool.")
    if out.dtype != torch.bool:
        raise TypeError(f"mask_mod {name} must return a bool tensor (True = visible), got dtype {out.dtype}. "
                        "Return a comparison (q_idx >= kv_idx) or convert with .bool(); score changes belong in a "
                        "score_mod.")
    aligned = zip(reversed(out.shape), reversed(full), strict=False)
    if out.dim() > 4 or any(o not in (1, f) for o, f in aligned):
        raise ValueError(f"mask_mod {name} returned shape {tuple(out.shape)}, which does not broadcast to "
                         f"(B, H, rows, cols) = {full} when called with {CALL_SHAPES}. It must be elementwise: "
                         "do not reduce (sum, any, max) over a tensor and keep every index's shape.")
    out = out.reshape((1,) * (4 - out.dim()) + tuple(out.shape))
    return out.expand(out.shape[0], out.shape[1], full[2], full[3])


def index_grid(batch: int, heads: int, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """b (B, 1, 1, 1) and h (1, H, 1, 1) int64 index tensors for `evaluate`."""
    return (torch.arange(batch, device=device).view(batch, 1, 1, 1),
            torch.arange(heads, device=device).view(1, heads, 1, 1))


@dataclass(frozen=True)
class _Slab:
    """A run of whole tiles [t0, t1) along one axis, or a piece of the single tile t0 (t1 = t0 + 1)."""

    t0: int  # first tile
    t1: int  # one past the last tile
    idx: torch.Tensor  # (t1 - t0) * group positions, in-bounds (a ragged last tile repeats its last position)
    group: int  # positions per tile in this slab


def _slabs(n: int, block: int, cap: int, device: torch.device) -> Iterator[_Slab]:
    """Cut positions [0, n) of tiles of `block` into slabs of at most max(cap, 1) positions, aligned to tiles; the
    positions on `device`."""
    tiles = -(-n // block)
    if cap >= block:
        step = cap // block
        for t0 in range(0, tiles, step):
            t1 = min(t0 + step, tiles)
            yield _Slab(t0, t1, torch.arange(t0 * block, t1 * block, device=device).clamp_max_(n - 1), block)
        return
    cap = max(cap, 1)
    for t in range(tiles):
        end = min((t + 1) * block, n)
        for s in range(t * block, end, cap):
            stop = min(s + cap, end)
            yield _Slab(t, t + 1, torch.arange(s, stop, device=device), stop - s)


def classify_blocks(mask_mod: MaskMod, n_q: int, n_k: int, block_q: int, block_k: int, *, batch: int = 1,
                    heads: int = 1, budget: int | None = None, device: torch.device | str | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Which tiles of the n_q x n_k mask have any visible element, and which have every element visible.

    The mask_mod runs on `device`: the index tensors are made there, so a mask_mod that closes over a tensor
    (document ids, lengths) runs where that tensor lives, as create_block_mask(..., device=) does. Only the
    (B', H', Tr, Tc) answers come back to the CPU.

    Args:
        mask_mod: FlexAttention mask_mod, True = visible.  n_q, n_k >= 1: N_q, N_k.  block_q, block_k: Br, Bc.
        batch, heads: B and H, the ranges of b and h.
        budget: most mask elements evaluated per call; None = SLAB_ONE_THREAD or SLAB_THREADED, by torch's threads.
        device: where the mask_mod is evaluated (None: the CPU).
    Returns:
        any_visible, all_visible: (B', H', Tr, Tc) bool on the CPU, B' = B and H' = H where the mask_mod reads b or
        h, else 1.

    Example:
        >>> a, f = classify_blocks(lambda b, h, q, kv: q >= kv, 4, 4, 2, 2)
        >>> a[0, 0].int().tolist(), f[0, 0].int().tolist()
        ([[1, 0], [1, 1]], [[0, 0], [1, 0]])
    """
    if budget is None:
        budget = SLAB_ONE_THREAD if torch.get_num_threads() == 1 else SLAB_THREADED
    bq, bk = min(block_q, n_q), min(block_k, n_k)  # a tile larger than N is one tile of N
    Tr, Tc = -(-n_q // bq), -(-n_k // bk)
    device = torch.device("cpu" if device is None else device)
    b, h = index_grid(batch, heads, device)
    # A 2 x 3 probe (rows != cols) catches a mask_mod that reduces over an axis, whose output could pass as a
    # broadcast if rows == cols; it also tells whether the mask reads b or h.
    probe_q = torch.arange(2, device=device).clamp_max(n_q - 1)  # (2,)
    probe_k = torch.arange(3, device=device).clamp_max(n_k - 1)  # (3,)
    probe = evaluate(mask_mod, b, h, probe_q[:, None], probe_k[None, :])  # (B', H', 2, 3)
    Bp, Hp = probe.shape[:2]  # (B', H'): how many (b, h) the mask really varies over
    any_visible = torch.zeros(Bp, Hp, Tr, Tc, dtype=torch.uint8, device=device)  # (B', H', Tr, Tc)
    all_visible = torch.ones(Bp, Hp, Tr, Tc, dtype=torch.uint8, device=device)  # (B', H', Tr, Tc)
    per_row = max(budget // (Bp * Hp), 1)  # elements of one (b, h) mask row that one call may hold
    for cols in _slabs(n_k, bk, min(per_row, Tc * bk), device):
        for rows in _slabs(n_q, bq, per_row // cols.idx.numel(), device):
            vis = evaluate(mask_mod, b, h, rows.idx[:, None], cols.idx[None, :])  # (B', H', rows, cols)
            u = vis.reshape(Bp, Hp, rows.t1 - rows.t0, rows.group, cols.t1 - cols.t0, cols.group).view(torch.uint8)
            grid = (slice(None), slice(None), slice(rows.t0, rows.t1), slice(cols.t0, cols.t1))
            any_visible[grid] |= u.amax(dim=(3, 5))  # (B', H', tiles in slab rows, tiles in slab cols)
            all_visible[grid] &= u.amin(dim=(3, 5))
    return any_visible.bool().cpu(), all_visible.bool().cpu()  # Tr x Tc: the statuses are read on the CPU
