"""Input validation shared by every public entry point.

Each helper raises a ValueError or TypeError that says what was expected, what came, and how to fix it
(the style of torch's flex_attention `_validate_*` helpers). `assert` is kept for internal invariants only.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import torch

from flashviz.vocab import DTYPES, LOOP_ORDERS

FLOAT_DTYPES = tuple(getattr(torch, name) for name in DTYPES)  # the floating dtypes every kernel accepts

Window = tuple[int | None, int | None] | None


def validate_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Check that q, k, v are (B, H, N, d) floating tensors that agree with one another."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape (B, H, N, d), got {type(t).__name__}.")
        if t.dim() != 4:
            raise ValueError(
                f"{name} must be 4-D (B, H, N, d), got {t.dim()}-D with shape {tuple(t.shape)}. "
                "Add missing batch/head dimensions with .unsqueeze(0), e.g. x[None, None] for a single (N, d) matrix."
            )
        if t.dtype not in FLOAT_DTYPES:
            raise TypeError(
                f"{name} must be float16, bfloat16, float32 or float64, got {t.dtype}. Convert it with {name}.float()."
            )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(
            f"q, k, v must share one dtype, got q={q.dtype}, k={k.dtype}, v={v.dtype}. Cast them to a common dtype."
        )
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"q, k, v must be on one device, got q={q.device}, k={k.device}, v={v.device}. Move them with .to(device)."
        )
    if not (q.shape[0] == k.shape[0] == v.shape[0] and q.shape[1] == k.shape[1] == v.shape[1]):
        raise ValueError(
            "q, k, v must share batch and head dimensions (B, H), got "
            f"q={tuple(q.shape[:2])}, k={tuple(k.shape[:2])}, v={tuple(v.shape[:2])}."
        )
    if q.shape[3] != k.shape[3]:
        raise ValueError(
            f"q and k must share the head dimension d (last axis), got q d={q.shape[3]} and k d={k.shape[3]}."
        )
    if k.shape[2] != v.shape[2]:
        raise ValueError(
            f"k and v must have the same sequence length N_k (axis 2), got k N={k.shape[2]} and v N={v.shape[2]}."
        )
    if q.shape[3] < 1:
        raise ValueError(f"the head dimension d must be >= 1, got q of shape {tuple(q.shape)}.")
    if v.shape[3] != q.shape[3]:
        raise ValueError(
            f"v must share the head dimension d of q and k, got v d={v.shape[3]} and q d={q.shape[3]}."
        )


def validate_positive(name: str, value: object, hint: str = "") -> int:
    """Return value as an int >= 1, or raise; `hint` ends the error message."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be a positive int, got {value!r} ({type(value).__name__}).")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}.{' ' + hint if hint else ''}")
    return int(value)


def validate_block(name: str, value: object) -> int:
    """Return a block (tile) size as an int >= 1, or raise."""
    return validate_positive(name, value, "Typical tile sizes are 16 to 512.")


def validate_length(name: str, value: object) -> int:
    """Return a sequence length as an int >= 0, or raise."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be a non-negative int, got {value!r} ({type(value).__name__}).")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}.")
    return int(value)


def validate_window(window: object) -> Window:
    """Return window as (left, right) with ints >= 0 or None, or None for no window."""
    if window is None:
        return None
    if not isinstance(window, (tuple, list)) or len(window) != 2:
        raise ValueError(
            f"window must be a pair (left, right) of ints >= 0 or None, got {window!r}. "
            "Example: window=(128, 0) lets query i see keys i-128 .. i."
        )
    out = []
    for side, w in zip(("left", "right"), window, strict=True):
        if w is None:
            out.append(None)
            continue
        if isinstance(w, bool) or not isinstance(w, Integral):
            raise TypeError(f"window {side} must be an int >= 0 or None (unbounded), got {w!r}.")
        if w < 0:
            raise ValueError(
                f"window {side} must be >= 0, got {w}. Use None (not -1) for an unbounded side."
            )
        out.append(int(w))
    return (out[0], out[1])


def validate_scale(scale: object, d: int, dtype: torch.dtype | None = None) -> float:
    """Return the softmax scale: 1/sqrt(d) when None, else a finite real.

    With `dtype` (the dtype the scores are computed in), also reject a scale that the dtype cannot hold: multiplied
    into the scores it would be inf, and every output NaN. Half of the dtype's max leaves room for the kernels'
    base-2 factor log2(e) ~ 1.44. Scores that overflow because the inputs are huge are not caught here.
    """
    if scale is None:
        return 1.0 / math.sqrt(d) if d > 0 else 1.0
    if isinstance(scale, bool) or not isinstance(scale, Real):
        raise TypeError(f"scale must be a real number or None (for 1/sqrt(d)), got {scale!r}.")
    try:
        value = float(scale)
    except OverflowError:  # an int too large for a float
        raise ValueError(f"scale must be finite, got an int of {len(str(scale))} digits, too large for a float. "
                         "Leave it as None for the default 1/sqrt(d).") from None
    if not math.isfinite(value):
        raise ValueError(f"scale must be finite, got {scale}. Leave it as None for the default 1/sqrt(d).")
    if dtype is not None and abs(value) > torch.finfo(dtype).max / 2:
        raise ValueError(
            f"scale={scale} does not fit the {dtype} scores (max {torch.finfo(dtype).max:.4g}): every score would "
            f"overflow to inf. Use |scale| <= {torch.finfo(dtype).max / 2:.4g}, typically 1/sqrt(d) (None)."
        )
    return value


def validate_loop_order(loop_order: object) -> str:
    if loop_order not in LOOP_ORDERS:
        raise ValueError(
            f"loop_order must be one of {LOOP_ORDERS} ('kv_outer' = FlashAttention-1, 'q_outer' = FlashAttention-2), "
            f"got {loop_order!r}."
        )
    return str(loop_order)


def validate_causal(causal: object) -> bool:
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}.")
    return causal
