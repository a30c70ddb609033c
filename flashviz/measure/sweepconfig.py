"""Sweep configuration: what one measured row is (RunConfig) and the checks every sweep argument passes first.

The sweep's names for its implementations and modes, the largest N and d it accepts, and one small `validate_*` /
`resolve_*` helper per argument, each raising an error that says how to fix the call (STYLE item 9). sweep.py
builds its RunConfigs with `build_configs`; flashviz.measure.guards sizes them.

Legend: B batch, H heads, N sequence length (N_q = N_k = N), d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from numbers import Integral, Real

import torch

from flashviz.core.validate import FLOAT_DTYPES, Window, validate_causal, validate_window
from flashviz.vocab import IMPLS, MODES

MAX_N = 1 << 17  # 131072: beyond this even the tiled Python kernels take hours on a CPU
MAX_D = 1024  # largest head dimension a sweep accepts (real models use 64-256)


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
        return torch.empty((), dtype=self.dtype).element_size()  # bytes per element

    @property
    def masked(self) -> bool:
        return self.causal or self.window is not None


# ----------------------------------------------------------------------------------------------------------------------
# validation


def _validate_int(name: str, value: object, low: int, high: int | None = None, fix: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__}).")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"between {low} and {high}"
        raise ValueError(f"{name} must be {bound}, got {value}. {fix}".rstrip())
    return int(value)


def validate_ns(ns: object) -> list[int]:
    """The sequence lengths of a sweep: a non-empty list of ints in [1, MAX_N], duplicates dropped, order kept."""
    if isinstance(ns, (int, str)) or not isinstance(ns, Iterable):
        raise TypeError(f"ns must be a list of sequence lengths, e.g. [256, 512, 1024], got {ns!r}.")
    out = [_validate_int("every N", n, 1, MAX_N, "Sequence lengths of 256 to 8192 show the N^2 story on a CPU.")
           for n in ns]
    if not out:
        raise ValueError("ns must list at least one sequence length, e.g. [256, 512, 1024].")
    return list(dict.fromkeys(out))


def validate_impls(impls: object, allowed: Sequence[str] = IMPLS) -> list[str]:
    if isinstance(impls, str) or not isinstance(impls, Iterable):
        raise TypeError(f"impls must be a list of implementation names from {tuple(allowed)}, got {impls!r}.")
    out = list(dict.fromkeys(impls))
    bad = [i for i in out if i not in allowed]
    if bad or not out:
        raise ValueError(f"impls must be a non-empty list drawn from {tuple(allowed)}, got {list(impls)!r}"
                         + (f" (unknown: {bad})." if bad else "."))
    return out


def resolve_dtype(dtype: object) -> torch.dtype:
    """A floating torch.dtype, from a dtype or its name ("float32", "bfloat16", ...)."""
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


def _validate_time_budget(seconds: object) -> float | None:
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, Real):
        raise TypeError(f"time_budget_s must be None (no limit) or a number of seconds, got {seconds!r} "
                        f"({type(seconds).__name__}).")
    try:
        value = float(seconds)
    except OverflowError:  # an int too large for a float: no limit in practice
        value = math.inf
    if math.isnan(value) or value < 0:
        raise ValueError(f"time_budget_s must be None (no limit) or a number of seconds >= 0, got {seconds!r}.")
    return value


def resolve_device(device: object) -> torch.device:
    try:
        dev = torch.device(device)
    except (TypeError, RuntimeError) as e:
        raise ValueError(f"device must be 'cpu' or 'cuda' (or 'cuda:1', ...), got {device!r}.") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch.cuda.is_available() is False here. Use device='cpu'.")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}.")
    return dev


def _validate_mode(mode: object) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES} ('training' times forward + backward), got {mode!r}.")
    return str(mode)


def _validate_progress(progress: object) -> Callable[[int, int, str], None] | None:
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be None or a callable progress(done, total, label), got {progress!r}.")
    return progress


def build_configs(ns: list[int], block_pairs: list[tuple[int, int]], *, d, causal, window, batch, heads, dtype,
                  device, mode) -> list[RunConfig]:
    """One RunConfig per (N, (Br, Bc)), N outermost, after validating the arguments the configurations share."""
    d = _validate_int("d", d, 1, MAX_D, "Head dimensions are usually 64 or 128.")
    batch = _validate_int("batch", batch, 1)
    heads = _validate_int("heads", heads, 1)
    causal, window = validate_causal(causal), validate_window(window)
    dtype, device, mode = resolve_dtype(dtype), resolve_device(device), _validate_mode(mode)
    return [RunConfig(n, d, bq, bk, causal, window, batch, heads, dtype, device, mode)
            for n in ns for bq, bk in block_pairs]

