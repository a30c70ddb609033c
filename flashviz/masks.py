"""Mask and score presets in FlexAttention's own signatures, so one function works in flashviz and in torch.

    mask_mod(b, h, q_idx, kv_idx) -> bool tensor      True where query q_idx may attend to key kv_idx
    score_mod(score, b, h, q_idx, kv_idx) -> score    applied to the scaled score before the softmax

exactly as `torch.nn.attention.flex_attention.flex_attention` and `create_block_mask` take them (PyTorch's
FlexAttention, Dong et al. 2024). Combine presets with torch's own `and_masks` / `or_masks`.

Every function here is elementwise: it works on 0-d indices (FlexAttention vmaps it) and on broadcastable index
tensors (flashviz calls it with q_idx of shape (rows, 1) and kv_idx of shape (1, cols)).

Conventions (the same as flashviz's `causal` and `window` arguments):
    causal_mask                 query i sees keys j <= i (top-left aligned, as SDPA's is_causal)
    sliding_window(left, right) query i sees keys i - left <= j <= i + right (flash-attn's window_size; None on a
                                side = unbounded). attention-gym's generate_sliding_window(w) is sliding_window(w, 0).
    prefix_lm(prefix_len)       keys j < prefix_len are seen by every query, the rest causally (attention-gym's)
    document(lengths)           packed documents: a query sees every key of its own document (bidirectional;
                                and_masks it with causal_mask for packed causal training)
    attention_sink(sinks, window)  causal; query i sees the first `sinks` keys plus keys i - window <= j <= i
    chunked(chunk)              block-local causal: query i sees keys j <= i of its own chunk (j // chunk == i // chunk)
    dilated(window, dilation)   |i - j| <= window and (i - j) divisible by dilation (attention-gym's dilated
                                sliding window; and_masks it with causal_mask for the causal variant)
    alibi(num_heads)            score + m_h (j - i), slopes m_h = 2^(-8 (h + 1) / H) (Press et al. 2022)
    softcap(cap)                cap * tanh(score / cap) (Gemma 2's logit soft-capping)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Integral, Real

import torch
from torch.nn.attention.flex_attention import and_masks, or_masks

MaskMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
ScoreMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

# A reach beyond any sequence length: clamped to it, q_idx +- reach stays inside int64 (positions are < 2^62).
REACH_MAX = 1 << 62
ALIBI_SPAN = 8.0  # the exponent range of ALiBi's geometric slopes: m_h = 2^(-8 (h + 1) / H)


def _count(name: str, value: object, *, minimum: int, hint: str) -> int:
    """Return value as an int >= minimum, or raise an error that ends with `hint`."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int >= {minimum}, got {value!r} ({type(value).__name__}). {hint}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}. {hint}")
    return int(value)


def _named(fn, name: str):
    fn.__name__ = fn.__qualname__ = name
    return fn


def causal_mask(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
    """Top-left causal mask: query i sees keys j <= i.

    Example:
        >>> z = torch.tensor(0)  # b = h = 0
        >>> causal_mask(z, z, torch.arange(3)[:, None], torch.arange(3)[None, :]).int().tolist()
        [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    """
    return q_idx >= kv_idx


def sliding_window(left: int | None, right: int | None = 0) -> MaskMod:
    """Query i sees keys i - left <= j <= i + right; None on a side means unbounded.

    Args:
        left: keys visible before the query (>= 0, or None).  right: keys visible after it (>= 0, or None).
    Returns:
        A mask_mod. sliding_window(w, 0) is causal with w keys of look-back (w + 1 keys including the query itself).

    Example:
        >>> z = torch.tensor(0)  # b = h = 0
        >>> m = sliding_window(1, 0)
        >>> m(z, z, torch.arange(3)[:, None], torch.arange(3)[None, :]).int().tolist()
        [[1, 0, 0], [1, 1, 0], [0, 1, 1]]
    """
    hint = "Use None (not -1) for an unbounded side; e.g. sliding_window(128, 0) is causal with 128 keys of look-back."
    lo = None if left is None else min(_count("sliding_window left", left, minimum=0, hint=hint), REACH_MAX)
    hi = None if right is None else min(_count("sliding_window right", right, minimum=0, hint=hint), REACH_MAX)

    # Compared as j <= i + right rather than j - i <= right: the shifted index is one row or column, so no int64
    # temporary of the mask's full size is made (about 2x faster on CPU at N = 4096).
    def window_mask(b, h, q_idx, kv_idx):
        if hi is None and lo is None:
            return (kv_idx >= 0) | (q_idx >= 0)  # every pair, in the broadcast shape
        ok = None if hi is None else kv_idx <= q_idx + hi
        low = None if lo is None else kv_idx >= q_idx - lo
        return low if ok is None else (ok if low is None else ok & low)

    return _named(window_mask, f"sliding_window_{left}_{right}")


def prefix_lm(prefix_len: int) -> MaskMod:
    """Prefix LM: every query sees the first `prefix_len` keys; the rest of the sequence is causal.

    Example:
        >>> z = torch.tensor(0)  # b = h = 0
        >>> prefix_lm(2)(z, z, torch.arange(3)[:, None], torch.arange(3)[None, :]).int().tolist()
        [[1, 1, 0], [1, 1, 0], [1, 1, 1]]
    """
    n = min(_count("prefix_len", prefix_len, minimum=0, hint="It is the number of leading keys every query sees."),
            REACH_MAX)

    def prefix_mask(b, h, q_idx, kv_idx):
        return kv_idx < n

    return _named(or_masks(prefix_mask, causal_mask), f"prefix_lm_{prefix_len}")


def document(lengths: Sequence[int]) -> MaskMod:
    """Packed documents: a query sees every key of its own document, and nothing of the others.

    Args:
        lengths: token count of each document, in order; they must sum to the sequence length N (checked by
            `check_mask_lengths` wherever N is known, e.g. in tile_schedule).
    Returns:
        A mask_mod with attribute `seq_len` = sum(lengths). For packed causal training use
        and_masks(document(lengths), causal_mask).

    Example:
        >>> z = torch.tensor(0)  # b = h = 0
        >>> document([2, 1])(z, z, torch.arange(3)[:, None], torch.arange(3)[None, :]).int().tolist()
        [[1, 1, 0], [1, 1, 0], [0, 0, 1]]
    """
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence) or len(lengths) == 0:
        raise TypeError(f"document lengths must be a non-empty list of ints (tokens per document), got {lengths!r}. "
                        "Example: document([1000, 1500, 600, 996]) for 4 documents packed into N = 4096.")
    counts = [_count(f"document lengths[{i}]", n, minimum=1, hint="Drop empty documents from the list.")
              for i, n in enumerate(lengths)]
    doc_id = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts))  # (N,) document of each token

    def document_mask(b, h, q_idx, kv_idx):
        ids = doc_id if doc_id.device == q_idx.device else doc_id.to(q_idx.device)
        return ids[q_idx] == ids[kv_idx]

    document_mask.seq_len = sum(counts)
    return _named(document_mask, f"document_{len(counts)}_docs")


def attention_sink(sinks: int, window: int) -> MaskMod:
    """Causal attention to the first `sinks` keys plus a sliding window: keys j <= i with j < sinks or j >= i - window.

    Example:
        >>> z = torch.tensor(0)  # b = h = 0
        >>> m = attention_sink(1, 1)
        >>> m(z, z, torch.arange(4)[:, None], torch.arange(4)[None, :]).int().tolist()
        [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 1, 1]]
    """
    n = min(_count("sinks", sinks, minimum=0, hint="It is the number of leading keys every query keeps."), REACH_MAX)
    w = min(_count("window", window, minimum=0, hint="It is the look-back: query i sees keys i - window .. i."),
            REACH_MAX)

    def sink_mask(b, h, q_idx, kv_idx):
        return kv_idx < n

    return _named(and_masks(or_masks(sink_mask, sliding_window(w, 0)), causal_mask), f"attention_sink_{sinks}_{window}")


def chunked(chunk: int) -> MaskMod:
    """Block-local causal attention (chunked attention): query i sees keys j <= i with j // chunk == i // chunk.

    Example:
        >>> z = torch.tensor(0)  # b = h = 0
        >>> chunked(2)(z, z, torch.arange(4)[:, None], torch.arange(4)[None, :]).int().tolist()
        [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]]
    """
    c = _count("chunk", chunk, minimum=1, hint="It is the number of tokens per chunk, e.g. chunked(8192).")

    def chunk_mask(b, h, q_idx, kv_idx):
        return (q_idx // c == kv_idx // c) & (kv_idx <= q_idx)

    return _named(chunk_mask, f"chunked_{chunk}")


def dilated(window: int, dilation: int) -> MaskMod:
    """Dilated sliding window: query i sees keys with |i - j| <= window and (i - j) divisible by `dilation`.

    Example:
        >>> z = torch.tensor(0)  # b = h = 0
        >>> dilated(2, 2)(z, z, torch.arange(4)[:, None], torch.arange(4)[None, :]).int().tolist()
        [[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1]]
    """
    w = min(_count("window", window, minimum=0, hint="It is the largest distance |i - j| a query reaches."),
            REACH_MAX)
    s = _count("dilation", dilation, minimum=1, hint="dilation=1 is a plain sliding window.")

    def dilated_mask(b, h, q_idx, kv_idx):  # i - j divisible by s  <=>  i mod s == j mod s (i, j >= 0)
        return (kv_idx >= q_idx - w) & (kv_idx <= q_idx + w) & (q_idx % s == kv_idx % s)

    return _named(dilated_mask, f"dilated_{window}_{dilation}")


def alibi(num_heads: int) -> ScoreMod:
    """ALiBi: adds m_h (j - i) to the score of head h, slopes m_h = 2^(-8 (h + 1) / num_heads).

    Example:
        >>> alibi(2)(torch.zeros(()), 0, torch.tensor(0), torch.tensor(3), torch.tensor(1)).item()  # 2^-4 (1 - 3)
        -0.125
    """
    H = _count("num_heads", num_heads, minimum=1, hint="Pass the model's number of query heads H.")

    def alibi_mod(score, b, h, q_idx, kv_idx):
        slope = torch.exp2(-(h + 1) * ALIBI_SPAN / H)  # m_h
        return score + slope * (kv_idx - q_idx)

    return _named(alibi_mod, f"alibi_{num_heads}")


def softcap(cap: float) -> ScoreMod:
    """Logit soft-capping: cap * tanh(score / cap) keeps every score in (-cap, cap).

    Example:
        >>> round(softcap(30.0)(torch.tensor(100.0), 0, 0, 0, 0).item(), 3)
        29.924
    """
    if isinstance(cap, bool) or not isinstance(cap, Real):
        raise TypeError(f"softcap cap must be a positive real number, got {cap!r}. Gemma 2 uses 50.0.")
    c = float(cap)
    if not 0 < c < float("inf"):
        raise ValueError(f"softcap cap must be finite and > 0, got {cap}. Gemma 2 uses 50.0; leave out softcap "
                         "for no capping.")

    def softcap_mod(score, b, h, q_idx, kv_idx):
        return c * torch.tanh(score / c)

    return _named(softcap_mod, f"softcap_{cap}")


def _declared_lengths(fn: object, depth: int = 0) -> list[int]:
    """Sequence lengths that document() masks inside `fn` require, found through and_masks/or_masks closures."""
    if depth > 16 or not callable(fn):
        return []
    found = [fn.seq_len] if isinstance(getattr(fn, "seq_len", None), int) else []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        inner = value if isinstance(value, (tuple, list)) else (value,)
        for item in inner:
            if callable(item) and item is not fn:
                found += _declared_lengths(item, depth + 1)
    return found


def check_mask_lengths(mask_mod: MaskMod, n_q: int, n_k: int) -> None:
    """Raise ValueError if a document() mask inside `mask_mod` does not cover exactly N_q queries and N_k keys.

    Example:
        >>> check_mask_lengths(document([3, 4]), 7, 7)
    """
    for total in _declared_lengths(mask_mod):
        if total != n_q or total != n_k:
            raise ValueError(
                f"document lengths sum to {total} but the attention is {n_q} queries x {n_k} keys: the lengths must "
                f"sum to N. Add a padding document of the missing tokens (e.g. lengths + [{max(n_q, n_k) - total}]) "
                "or shorten the last document." if total < max(n_q, n_k) else
                f"document lengths sum to {total} but the attention is {n_q} queries x {n_k} keys: the lengths must "
                f"sum to N. Shorten or drop the last documents by {total - min(n_q, n_k)} tokens."
            )
