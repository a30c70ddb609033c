"""One measured row: its configuration (RunConfig, checked field by field) and what each implementation runs.

The four implementations a sweep times, all called with the same (B, H, N, d) inputs:

    naive   flashviz.core.reference.naive_attention: materialises S and P (FA1 Algorithm 0)
    flash   flash_attention_forward(loop_order="kv_outer") (FA1 Algorithm 1)
    flash2  flash_attention_forward(loop_order="q_outer") (FA2 Algorithm 1)
    sdpa    torch.nn.functional.scaled_dot_product_attention (PyTorch's fused kernel)

In training mode every implementation runs forward + backward (autograd.grad with a fixed random dO); the tiled ones
use flashviz.core.backward.flash_attention (FA2 forward saving O and L, tiled backward by recomputation). The error
of a row is measured against SDPA in float64 on the same inputs.

flashviz.measure.guards sizes a RunConfig before anything is allocated; flashviz.measure.sweep builds them and runs
the rows.

Legend: B batch, H heads, N sequence length (N_q = N_k = N), d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from flashviz.core.backward import flash_attention
from flashviz.core.flash import flash_attention_forward
from flashviz.core.reference import naive_attention
from flashviz.core.tiling import visible_mask
from flashviz.core.validate import FLOAT_DTYPES, Window
from flashviz.vocab import DTYPE_BYTES, FORWARD, IMPL_LOOP_ORDER, MODES, NAIVE, SDPA, TRAINING


@dataclass(frozen=True)
class RunConfig:
    """One attention configuration that a sweep measures for each implementation."""

    n: int  # sequence length N (N_q = N_k)
    d: int  # head dimension
    block_q: int  # Br, query rows per tile (tiled impls only)
    block_k: int  # Bc, key columns per tile (tiled impls only)
    causal: bool  # top-left causal mask
    window: Window  # (left, right) sliding window or None
    batch: int  # B
    heads: int  # H
    dtype: torch.dtype  # input dtype
    device: torch.device  # where the tensors live
    mode: str  # "forward" or "training" (forward + backward)

    @property
    def dtype_bytes(self) -> int:
        return dtype_bytes(self.dtype)  # bytes per element

    @property
    def masked(self) -> bool:
        return self.causal or self.window is not None


# ----------------------------------------------------------------------------------------------------------------------
# the fields of a RunConfig, checked


def resolve_dtype(dtype: object) -> torch.dtype:
    """A floating torch.dtype, from a dtype or its name ("float32", "bfloat16", ...).

    Example:
        >>> resolve_dtype("bfloat16")
        torch.bfloat16
    """
    resolved = getattr(torch, dtype.strip().removeprefix("torch."), None) if isinstance(dtype, str) else dtype
    if not isinstance(resolved, torch.dtype) or resolved not in FLOAT_DTYPES:
        names = ", ".join(repr(str(t).removeprefix("torch.")) for t in FLOAT_DTYPES)
        if dtype is None or isinstance(dtype, (str, torch.dtype)):
            given = repr(dtype[:40]) if isinstance(dtype, str) else str(dtype)  # None, 'Tensor', torch.int8
        elif isinstance(dtype, type):
            given = f"the class {dtype.__module__}.{dtype.__qualname__}"
        else:
            given = f"an object of type {type(dtype).__name__}"
        raise TypeError(f"dtype must be one of {names} (or the torch.dtype itself, e.g. torch.float32), "
                        f"got {given}.")
    return resolved


def dtype_bytes(dtype: object) -> int:
    """Bytes per element of a floating dtype (or its name), from flashviz.vocab.DTYPE_BYTES.

    Example:
        >>> dtype_bytes(torch.float16), dtype_bytes("float64")
        (2, 8)
    """
    return DTYPE_BYTES[str(resolve_dtype(dtype)).removeprefix("torch.")]


def resolve_device(device: object) -> torch.device:
    """A torch.device that exists here: "cpu", or "cuda" / "cuda:1" when CUDA is available."""
    try:
        dev = torch.device(device)
    except (TypeError, RuntimeError) as e:
        raise ValueError(f"device must be 'cpu' or 'cuda' (or 'cuda:1', ...), got {device!r}.") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch.cuda.is_available() is False here. Use device='cpu'.")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}.")
    return dev


def validate_mode(mode: object) -> str:
    """"forward" or "training"."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES} ('training' times forward + backward), got {mode!r}.")
    return str(mode)


# ----------------------------------------------------------------------------------------------------------------------
# implementations


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cfg: RunConfig) -> torch.Tensor:
    if cfg.window is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=cfg.causal)
    n = q.shape[2]
    idx = torch.arange(n, device=q.device)
    mask = visible_mask(idx, idx, causal=cfg.causal, window=cfg.window)  # (N, N) bool, True = visible
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _forward_fn(impl: str, cfg: RunConfig) -> Callable[..., torch.Tensor]:
    """q, k, v -> O for one implementation."""
    mask = {"causal": cfg.causal, "window": cfg.window}
    if impl == NAIVE:
        return lambda q, k, v: naive_attention(q, k, v, **mask)
    if impl == SDPA:
        return lambda q, k, v: _sdpa(q, k, v, cfg)
    if cfg.mode == TRAINING:
        return lambda q, k, v: flash_attention(q, k, v, block_q=cfg.block_q, block_k=cfg.block_k,
                                               loop_order=IMPL_LOOP_ORDER[impl], **mask)
    return lambda q, k, v: flash_attention_forward(q, k, v, block_q=cfg.block_q, block_k=cfg.block_k,
                                                   loop_order=IMPL_LOOP_ORDER[impl], **mask)


def call_fn(impl: str, cfg: RunConfig) -> Callable[..., tuple[torch.Tensor, ...]]:
    """The timed callable: (q, k, v, dO) -> (O,) in forward mode, (O, dQ, dK, dV) in training mode."""
    forward = _forward_fn(impl, cfg)
    if cfg.mode == FORWARD:
        def run_forward(q, k, v, dO):
            with torch.no_grad():
                return (forward(q, k, v),)
        return run_forward

    def run_training(q, k, v, dO):
        O = forward(q, k, v)  # (B, H, N, d)
        return (O.detach(), *torch.autograd.grad(O, (q, k, v), dO))  # dQ, dK, dV: (B, H, N, d) each
    return run_training


def make_inputs(cfg: RunConfig, seed: int) -> tuple[torch.Tensor, ...]:
    """q, k, v, dO of shape (B, H, N, d), drawn from a seeded generator on the CPU, then moved."""
    gen = torch.Generator().manual_seed(seed)
    shape = (cfg.batch, cfg.heads, cfg.n, cfg.d)
    q, k, v, dO = (torch.randn(shape, generator=gen, dtype=torch.float32).to(cfg.device, cfg.dtype)
                   for _ in range(4))
    if cfg.mode == TRAINING:
        q, k, v = (t.requires_grad_() for t in (q, k, v))
    return q, k, v, dO


def reference(q, k, v, dO, cfg: RunConfig) -> tuple[torch.Tensor, ...]:
    """SDPA in float64 on the same inputs: (O,) or (O, dQ, dK, dV)."""
    q64, k64, v64 = (t.detach().double().requires_grad_(cfg.mode == TRAINING) for t in (q, k, v))
    return call_fn(SDPA, replace(cfg, dtype=torch.float64))(q64, k64, v64, dO.double())


def max_abs_err(out: tuple[torch.Tensor, ...], ref: tuple[torch.Tensor, ...] | None) -> float:
    """max |x - x_ref| over every output (NaN without a reference)."""
    if ref is None:
        return math.nan
    return max(float((a.double() - b).abs().max()) if a.numel() else 0.0 for a, b in zip(out, ref, strict=True))
