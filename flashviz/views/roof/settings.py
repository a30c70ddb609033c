"""The Roofline view's own settings: the element type the GPU roofs assume."""

from __future__ import annotations

from flashviz.kit.settings import view_settings
from flashviz.kit.spec import CHOICE, VIEW, Spec, setting
from flashviz.views.bench.settings import BenchSettings
from flashviz.vocab import (
    DTYPE_BYTES,
    DTYPES,
)

# -- Roofline: the GPU dtypes FlashAttention runs in (not float64), tensor-core types first
GPU_DTYPES = tuple(sorted((t for t in DTYPES if DTYPE_BYTES[t] <= 4), key=DTYPE_BYTES.get))
GPU_DTYPE_LABELS = {t: f"{t} ({'tensor' if DTYPE_BYTES[t] == 2 else 'CUDA'} cores)" for t in GPU_DTYPES}


@view_settings("Roofline",
               reads=("n", "d", "br", "bc", "causal", "window", "dtype", "batch", "heads", "threads"),
               borrows=((BenchSettings, ("bench_block",)),))
class RoofSettings:
    """The Roofline view's settings: the shared ones it reads, the ones it borrows and its own."""

    gpu_dtype: str = setting("float16", Spec(
        CHOICE, "selectbox", "GPU dtype", options=GPU_DTYPES, labels=GPU_DTYPE_LABELS, place=VIEW,
        short="GPU dtype",
        help="Element type the GPU roofs and points assume. FlashAttention runs fp16/bf16 on tensor cores (A100: "
             "312 TFLOP/s dense); fp32 runs on CUDA cores (19.5 TFLOP/s), so naive attention is already "
             "compute-bound there and the predicted speedup is about 1x. This CPU uses the sidebar's dtype."))
