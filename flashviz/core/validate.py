"""Input validation shared by every public entry point, and the validated config the kernels receive.

Each helper raises a ValueError or TypeError that says what was expected, what came, and how to fix it
(the style of torch's flex_attention `_validate_*` helpers). `assert` is kept for internal invariants only.

A public attention call (naive_attention, flash_attention_forward, flash_attention, flash_attention_backward)
validates its arguments once, into an AttentionConfig; the kernels it calls take that config as given and do not
validate again, so one training step validates once.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral, Real
from typing import TYPE_CHECKING

from flashviz._lazy import lazy_import
from flashviz.core.maskeval import validate_mask_mod
from flashviz.vocab import DTYPES, LOOP_ORDERS

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")  # the tensor checks only: the tile schedule's validators run without torch

Window = tuple[int | None, int | None] | None


@functools.cache
def _float_dtypes() -> tuple[torch.dtype, ...]:
    """The floating dtypes every kernel accepts (torch.float32, ...), as FLOAT_DTYPES; made on first use."""
    return tuple(getattr(torch, name) for name in DTYPES)


def __getattr__(name: str) -> object:
    """FLOAT_DTYPES, the floating dtypes every kernel accepts, made on first use (so importing this needs no torch)."""
    if name == "FLOAT_DTYPES":
        return _float_dtypes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def validate_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Check that q (B, H, N_q, d) and k, v (B, H_kv, N_k, d) are floating tensors that agree, H_kv dividing H."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape (B, H, N, d), got {type(t).__name__}.")
        if t.dim() != 4:
            raise ValueError(
                f"{name} must be 4-D (B, H, N, d), got {t.dim()}-D with shape {tuple(t.shape)}. "
                "Add missing batch/head dimensions with .unsqueeze(0), e.g. x[None, None] for a single (N, d) matrix."
            )
        if t.dtype not in _float_dtypes():
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
    if not (q.shape[0] == k.shape[0] == v.shape[0]):
        raise ValueError(
            f"q, k, v must share the batch dimension B (axis 0), got q B={q.shape[0]}, k B={k.shape[0]}, "
            f"v B={v.shape[0]}."
        )
    validate_heads(q.shape[1], k.shape[1], v.shape[1])
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


def validate_heads(h_q: int, h_k: int, h_v: int) -> None:
    """Check that k and v share H_kv heads and that H_kv divides H_q (grouped-query attention, as SDPA's enable_gqa).

    H_kv = H_q is multi-head attention, 1 < H_kv < H_q grouped-query (GQA), H_kv = 1 multi-query (MQA): each K/V
    head serves the H_q / H_kv query heads h_kv * G .. h_kv * G + G - 1, with G = H_q / H_kv.
    """
    if h_k != h_v:
        raise ValueError(
            f"k and v must have the same number of heads H_kv (axis 1), got k H={h_k} and v H={h_v}."
        )
    if h_k == h_q:
        return  # multi-head attention (or no heads at all: an empty call)
    if h_q == 0 or h_k == 0 or h_q % h_k:
        divisors = [n for n in range(1, h_q + 1) if h_q % n == 0]
        fix = (f"K/V head counts that divide {h_q}: {', '.join(map(str, divisors))} ({h_q} = multi-head, "
               "1 = multi-query)." if h_q else "With no query heads, give k and v no heads either.")
        raise ValueError(
            f"k and v have H_kv={h_k} heads, which does not divide q's H_q={h_q} heads: each K/V head must serve the "
            f"same number of query heads (grouped-query attention, as SDPA's enable_gqa=True). {fix}"
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
    """Return loop_order if it names a loop order of the tiled forward, or raise."""
    if loop_order not in LOOP_ORDERS:
        raise ValueError(
            f"loop_order must be one of {LOOP_ORDERS} ('kv_outer' = FlashAttention-1, 'q_outer' = FlashAttention-2), "
            f"got {loop_order!r}."
        )
    return str(loop_order)


def validate_causal(causal: object) -> bool:
    """Return causal if it is a bool, or raise (a truthy string or int is a mistake, not a yes)."""
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}.")
    return causal


def accumulator_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the tiled kernels compute scores and accumulate in: fp32 for fp16/bf16/fp32 inputs, fp64 for fp64.

    Example:
        >>> accumulator_dtype(torch.bfloat16)
        torch.float32
    """
    return torch.float64 if dtype == torch.float64 else torch.float32


@dataclass(frozen=True)
class AttentionConfig:
    """The validated settings of one attention call, made once at the public entry point (like nanoGPT's GPTConfig).

    Shapes follow the legend B batch, H heads, N_q / N_k query / key lengths, d head dimension, Br / Bc tile sizes.
    """

    B: int  # batch size
    H: int  # number of query heads H_q
    H_kv: int  # number of key/value heads; divides H (H_kv = H: multi-head, < H: grouped-query, 1: multi-query)
    n_q: int  # N_q, query sequence length (>= 0)
    n_k: int  # N_k, key/value sequence length (>= 0)
    d: int  # head dimension (>= 1), shared by q, k and v
    causal: bool  # top-left causal mask: query i sees keys j <= i
    window: Window  # (left, right) sliding window, None on a side = unbounded; None = no window
    scale: float  # softmax scale applied to q.k (default 1/sqrt(d)); finite and representable in `acc`
    acc: torch.dtype  # dtype the scores are computed in: fp32/fp64 accumulators (tiled), q's dtype (naive)
    block_q: int | None = None  # Br, query rows per tile (>= 1); None for naive attention, which does not tile
    block_k: int | None = None  # Bc, key columns per tile (>= 1); None for naive attention
    loop_order: str | None = None  # "kv_outer" (FA1) or "q_outer" (FA2); None where the order is fixed or moot
    mask_mod: Callable | None = None  # FlexAttention mask_mod(b, h, q_idx, kv_idx) -> bool, True = visible; with
    #                                   causal and window by intersection
    score_mod: Callable | None = None  # FlexAttention score_mod(score, b, h, q_idx, kv_idx) -> score, natural units

    @property
    def group(self) -> int:
        """G = H / H_kv, the query heads that share one K/V head (1 for multi-head attention)."""
        return self.H // self.H_kv if self.H_kv else 1


def _mods(q: torch.Tensor, k: torch.Tensor, mask_mod: object, score_mod: object) -> dict[str, Callable | None]:
    """The validated mask_mod and score_mod; a document mask must cover N_q and N_k exactly."""
    from flashviz.core.tilemods import validate_score_mod  # torch modules: the tensors q, k have brought torch in
    from flashviz.masks import check_mask_lengths

    if mask_mod is not None:
        mask_mod = validate_mask_mod(mask_mod)
        check_mask_lengths(mask_mod, q.shape[2], k.shape[2])
    return {"mask_mod": mask_mod, "score_mod": validate_score_mod(score_mod)}


def _shape_of(q: torch.Tensor, k: torch.Tensor) -> dict[str, int]:
    B, H, n_q, d = q.shape
    return {"B": B, "H": H, "H_kv": k.shape[1], "n_q": n_q, "n_k": k.shape[2], "d": d}


def naive_config(q: object, k: object, v: object, *, causal: object = False, window: object = None,
                 scale: object = None, mask_mod: object = None, score_mod: object = None) -> AttentionConfig:
    """Validate the arguments of naive attention: scores are computed in q's dtype, as plain PyTorch would.

    Args:
        q: (B, H, N_q, d) queries.  k, v: (B, H_kv, N_k, d) keys and values, H_kv dividing H.
        causal, window, scale, mask_mod, score_mod: as naive_attention.
    Returns:
        An AttentionConfig with no tiling (block_q, block_k, loop_order are None) and acc = q's dtype.

    Example:
        >>> naive_config(*(torch.zeros(1, 2, 8, 4),) * 3, causal=True).scale
        0.5
    """
    validate_qkv(q, k, v)
    causal = validate_causal(causal)
    window = validate_window(window)
    scale = validate_scale(scale, q.shape[-1], q.dtype)  # S is computed in q's dtype
    return AttentionConfig(**_shape_of(q, k), causal=causal, window=window, scale=scale, acc=q.dtype,
                           **_mods(q, k, mask_mod, score_mod))


def tiled_config(q: object, k: object, v: object, *, block_size: object = 64, block_q: object = None,
                 block_k: object = None, causal: object = False, window: object = None, scale: object = None,
                 loop_order: object = None, mask_mod: object = None, score_mod: object = None) -> AttentionConfig:
    """Validate the arguments of a tiled kernel (forward, backward or both).

    Args:
        q: (B, H, N_q, d) queries.  k, v: (B, H_kv, N_k, d) keys and values, H_kv dividing H.
        block_size: Br and Bc unless block_q / block_k are given.
        causal, window, scale, mask_mod, score_mod: as flash_attention_forward.
        loop_order: "kv_outer" or "q_outer" for a forward; None for the backward, whose loop order is fixed.
    Returns:
        An AttentionConfig with the tile sizes resolved and acc the accumulator dtype (see accumulator_dtype).

    Example:
        >>> cfg = tiled_config(*(torch.zeros(1, 2, 8, 4, dtype=torch.float16),) * 3, block_size=4, block_k=2)
        >>> cfg.block_q, cfg.block_k, cfg.acc
        (4, 2, torch.float32)
    """
    validate_qkv(q, k, v)
    block_q = validate_block("block_q", block_size if block_q is None else block_q)
    block_k = validate_block("block_k", block_size if block_k is None else block_k)
    causal = validate_causal(causal)
    window = validate_window(window)
    acc = accumulator_dtype(q.dtype)
    scale = validate_scale(scale, q.shape[-1], acc)  # the scores are computed in the accumulator dtype
    if loop_order is not None:
        loop_order = validate_loop_order(loop_order)
    return AttentionConfig(**_shape_of(q, k), causal=causal, window=window, scale=scale, acc=acc, block_q=block_q,
                           block_k=block_k, loop_order=loop_order, **_mods(q, k, mask_mod, score_mod))
