"""flashviz.triton: FA2's schedule as a Triton kernel (Triton's tutorial 06-fused-attention in flashviz's words).

`attention` runs the kernel (`kernel.py`), differentiable; `trace` runs it under Triton's interpreter and returns
what it did, read from the interpreter's own calls (`record.py`). Triton is an optional extra
(`pip install -e ".[triton]"`: triton==3.9.0 and numpy): `import flashviz` and `import flashviz.triton` work without
it, and `available()` says whether it is here.

Where there is no CUDA device, importing this package sets TRITON_INTERPRET=1, which triton reads when `triton.jit`
decorates a function, its own library's functions (tl.zeros, tl.maximum ...) included: it must be set before triton
is imported, and torch's profiler imports triton when it can. So `import flashviz` already sets it where torch is a
CPU-only build (read from torch/version.py, nothing imported: triton cannot compile there anyway), and this package
decides for CUDA builds by asking torch. `triton.jit` then makes interpreted functions that numpy runs on the CPU;
on CUDA the kernel compiles. Importing it does not import triton, nor torch where torch is a CPU build.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from flashviz.triton.record import TritonTrace

INSTALL = 'pip install -e ".[triton]"'  # the extra: triton==3.9.0 and numpy


def available() -> bool:
    """Whether Triton is importable here: its interpreter on a CPU, compiled on CUDA.

    Returns:
        True when both triton and numpy (its interpreter's arrays) can be imported.

    Example:
        >>> isinstance(available(), bool)
        True
    """
    return all(importlib.util.find_spec(name) is not None for name in ("triton", "numpy"))


def _torch_cpu_build() -> bool:
    """Whether the installed torch is a CPU-only build, read from torch/version.py without importing torch."""
    spec = importlib.util.find_spec("torch")
    version = Path(spec.origin).parent / "version.py" if spec and spec.origin else None
    if version is None or not version.exists():
        return True
    text = version.read_text()
    return "cuda: Optional[str] = None" in text and "hip: Optional[str] = None" in text


def prefer_interpreter(*, import_torch: bool = True) -> None:
    """Set TRITON_INTERPRET=1 where there is no CUDA device, unless the user set it: before triton is imported.

    Args:
        import_torch: also ask torch.cuda.is_available() (imports torch) when torch is a CUDA build; False decides
            only from the build, without importing anything (what `import flashviz` does).

    Example:
        >>> import os
        >>> prefer_interpreter(import_torch=False)
        >>> os.environ.get("TRITON_INTERPRET") in (None, "0", "1")
        True
    """
    if "TRITON_INTERPRET" in os.environ:
        return
    if "torch" not in sys.modules and _torch_cpu_build():
        os.environ["TRITON_INTERPRET"] = "1"
    elif import_torch:
        import torch

        if not torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"


def interpreted() -> bool:
    """Whether the kernel runs under Triton's interpreter here (no CUDA, or TRITON_INTERPRET=1 set by the user).

    Returns:
        True when TRITON_INTERPRET is on (this package sets it on import where there is no CUDA).

    Example:
        >>> interpreted() in (True, False)
        True
    """
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


_TRITON_FIRST = "triton" in sys.modules and not interpreted()  # triton imported before anything decided
prefer_interpreter()  # before triton.jit decorates anything


def _kernel():
    """The kernel module, imported after TRITON_INTERPRET is chosen; a teaching error when it cannot run."""
    if not available():
        raise ModuleNotFoundError(f"flashviz.triton needs triton and numpy: {INSTALL}")
    if _TRITON_FIRST and interpreted():
        raise RuntimeError("triton was imported before flashviz.triton on a machine without CUDA, so its functions "
                           "were compiled-mode functions: import flashviz.triton first, or set TRITON_INTERPRET=1 "
                           "before Python starts.")
    import flashviz.triton.kernel as kernel

    return kernel


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, scale: float | None = None,
              block_m: int = 64, block_n: int = 32) -> torch.Tensor:
    """softmax(scale q k^T) v by the Triton kernel (FA2's schedule, tutorial 06's structure), differentiable.

    Args:
        q, k, v: (B, H, N, d), one dtype (float32; float16 or bfloat16 on CUDA), d in 16, 32, 64, 128; any N.
        causal: top-left causal mask (query i sees keys j <= i).
        scale: softmax scale (None: 1 / sqrt(d)).
        block_m: BLOCK_M, query rows per program (a power of two >= 16).
        block_n: BLOCK_N, keys per inner step (a power of two >= 16 dividing block_m).
    Returns:
        O: (B, H, N, d) in q's dtype; its backward runs the kernel's `_attn_bwd_*`.

    Example:
        >>> import pytest, torch
        >>> _ = pytest.importorskip("flashviz.triton.kernel")
        >>> q, k, v = torch.randn(3, 1, 1, 50, 16).unbind(0)
        >>> o = attention(q, k, v, causal=True, block_m=32, block_n=16)
        >>> bool((o - torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max() < 1e-5)
        True
    """
    return _kernel().attention(q, k, v, causal=causal, scale=scale, block_m=block_m, block_n=block_n)


def trace(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, scale: float | None = None,
          block_m: int = 64, block_n: int = 32) -> TritonTrace:
    """Run the forward kernel under Triton's interpreter and record what it did, from the interpreter's own calls.

    Args:
        q, k, v: (B, H, N, d) float32 on the CPU, as `attention` takes them.
        causal, scale, block_m, block_n: as `attention`.
    Returns:
        TritonTrace: .tiles (one per (program, K/V block) computed: .q_block .k_block .head .stage), .programs,
        .out, .dots, .bytes_loaded, .bytes_stored, .events (each load, dot and store with its kernel line).

    Example:
        >>> import pytest, torch
        >>> _ = pytest.importorskip("flashviz.triton.kernel")
        >>> q, k, v = torch.zeros(3, 1, 1, 128, 16).unbind(0)
        >>> t = trace(q, k, v, causal=True)
        >>> [len(t.tiles_of(p)) for p in t.programs]  # K blocks per program: off the band + 2 on it
        [2, 4]
    """
    if not available():
        raise ModuleNotFoundError(f"flashviz.triton needs triton and numpy: {INSTALL}")
    if not interpreted():
        raise RuntimeError("trace reads Triton's interpreter: set TRITON_INTERPRET=1 before the first flashviz.triton "
                           "call (on CUDA the kernel is compiled, and a compiled kernel cannot be recorded).")
    _kernel()
    from flashviz.triton.record import record

    return record(q, k, v, causal=causal, scale=scale, block_m=block_m, block_n=block_n)
