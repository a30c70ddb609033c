"""The roofline: why FlashAttention is fast on a GPU, with numbers.

A kernel that does F FLOPs and moves Q bytes to and from HBM needs at least max(F / peak, Q / bandwidth) seconds:
it is compute-bound when its arithmetic intensity I = F / Q exceeds the device's ridge point peak / bandwidth, and
memory-bound below it, where it attains only I x bandwidth FLOP/s. Standard attention writes and re-reads S and P,
so its intensity is a few FLOPs per byte, far below a GPU's ridge (about 150-300 FLOP/byte); the tiled kernels move
O(N d) per pass instead of O(N^2), so their intensity grows with the tile size and they reach the compute roof.
FLOPs and bytes come from flashviz.model.iomodel.io_cost, so the prediction and the IO model agree. This machine's
roof is measured in flashviz.measure.roof_probe; this module is arithmetic only.

References:
    Williams, Waterman, Patterson, "Roofline: an insightful visual performance model" (CACM 2009).
    Device figures: see the comment on each Device below (NVIDIA datasheets and tuning guides).

Units: FLOP/s, bytes/s, seconds, FLOP/byte. Legend: N sequence length (N_q = N_k), d head dimension, B batch,
H query heads, H_kv key/value heads, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from flashviz.core.validate import Window
from flashviz.model.iomodel import io_cost
from flashviz.vocab import ALGORITHMS, DTYPE_BYTES, NAIVE

KIB = 1024  # bytes per KiB
TERA = 1e12  # FLOP/s per TFLOP/s, bytes/s per TB/s
GIGA = 1e9  # bytes/s per GB/s, FLOP/s per GFLOP/s
COMPUTE, MEMORY = "compute", "memory"  # what bounds a kernel on a device
ROOFLINE_COLUMNS = ("device", "algorithm", "flops", "hbm_bytes", "intensity", "attainable_flops", "time_s", "bound",
                    "speedup_vs_naive", "measured")


@dataclass(frozen=True)
class Device:
    """What a roofline needs to know about a machine."""

    name: str  # label for tables and legends
    peak_flops: dict[str, float]  # FLOP/s by dtype name (dense, no sparsity)
    bandwidth: float  # bytes/s between main memory (HBM, or RAM) and the chip
    sram_per_sm: int | None  # bytes of shared memory (SRAM) per streaming multiprocessor; None for a CPU
    source: str  # where the figures come from
    measured: bool = False  # True for this machine's measured rates, False for published peaks

    def peak(self, dtype: str) -> float:
        """Peak FLOP/s for inputs of this dtype (a name from flashviz.vocab.DTYPES)."""
        if dtype not in self.peak_flops:
            raise ValueError(f"{self.name} has no peak for dtype {dtype!r} in this model; known: "
                             f"{sorted(self.peak_flops)}. Use one of those.")
        return self.peak_flops[dtype]

    def ridge(self, dtype: str = "float16") -> float:
        """FLOP/byte at which the memory roof meets the compute roof: peak / bandwidth."""
        return self.peak(dtype) / self.bandwidth

    def sram_elements(self, dtype: str) -> int | None:
        """Shared memory per SM in elements of this dtype (for marking the IO model's M axis); None for a CPU."""
        return None if self.sram_per_sm is None else self.sram_per_sm // DTYPE_BYTES[dtype]


# NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM column): FP16 / BF16 Tensor Core 312 TFLOPS dense (624 with
# sparsity), TF32 156, FP32 19.5, FP64 Tensor Core 19.5 TFLOPS; GPU memory bandwidth 2,039 GB/s (HBM2e).
# NVIDIA Ampere GPU Architecture Tuning Guide, 1.4.1.2: A100 shared memory configurable up to 164 KB per SM.
A100 = Device("A100 (SXM 80GB)", {"float16": 312 * TERA, "bfloat16": 312 * TERA, "float32": 19.5 * TERA,
                                  "float64": 19.5 * TERA},
              2039 * GIGA, 164 * KIB, "NVIDIA A100 datasheet (80GB SXM); Ampere tuning guide (shared memory)")
# NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column): FP16 / BF16 Tensor Core 1,979 TFLOPS "with sparsity",
# 989.4 dense; FP32 67 (66.9), FP64 Tensor Core 67 TFLOPS; GPU memory bandwidth 3.35 TB/s (HBM3).
# NVIDIA Hopper Tuning Guide, 1.4.1.2: H100 shared memory configurable up to 228 KB per SM.
H100 = Device("H100 (SXM)", {"float16": 989.4 * TERA, "bfloat16": 989.4 * TERA, "float32": 66.9 * TERA,
                             "float64": 66.9 * TERA},
              3.35 * TERA, 228 * KIB, "NVIDIA H100 datasheet (SXM, dense = half the sparsity figure); Hopper tuning "
                                      "guide (shared memory)")
# NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column): the same GH100 compute as H100 SXM (FP16 / BF16 Tensor Core
# 1,979 TFLOPS with sparsity, 989.4 dense; FP32 67, FP64 Tensor Core 67 TFLOPS) with 141 GB of HBM3e at 4.8 TB/s.
# Shared memory per SM as H100 (same Hopper SM, Hopper tuning guide).
H200 = Device("H200 (SXM)", {"float16": 989.4 * TERA, "bfloat16": 989.4 * TERA, "float32": 66.9 * TERA,
                             "float64": 66.9 * TERA},
              4.8 * TERA, 228 * KIB, "NVIDIA H200 datasheet (SXM, dense = half the sparsity figure); Hopper tuning "
                                     "guide (shared memory)")
GPUS = (A100, H100, H200)


# ----------------------------------------------------------------------------------------------------------------------
# the model


def predict_time(flops: float, nbytes: float, device: Device, dtype: str = "float16") -> float:
    """Roofline time in seconds: max(flops / peak, bytes / bandwidth), the least time the work can take.

    Example:
        >>> predict_time(312e12, 0, A100)  # one second of A100 fp16 tensor work
        1.0
        >>> predict_time(1.0, 2039e9, A100)  # one second of A100 HBM traffic
        1.0
    """
    return max(flops / device.peak(dtype), nbytes / device.bandwidth)


def attainable_flops(intensity: float, device: Device, dtype: str = "float16") -> float:
    """FLOP/s attainable at an arithmetic intensity (FLOP/byte): min(peak, intensity x bandwidth).

    Example:
        >>> attainable_flops(1.0, H100) == 3.35e12  # memory-bound: one FLOP per byte at 3.35 TB/s
        True
        >>> attainable_flops(1e6, H100) == H100.peak("float16")  # compute-bound
        True
    """
    return min(device.peak(dtype), intensity * device.bandwidth)


def bound(intensity: float, device: Device, dtype: str = "float16") -> str:
    """"memory" below the device's ridge point, "compute" at or above it."""
    return COMPUTE if intensity >= device.ridge(dtype) else MEMORY


# ----------------------------------------------------------------------------------------------------------------------
# attention on the roofline


def roofline_points(n: int, d: int, *, block_q: int = 64, block_k: int = 64, causal: bool = False,
                    window: Window = None, batch: int = 1, heads: int = 1, heads_kv: int | None = None,
                    dtype: str = "float16", devices: Iterable[Device] = GPUS,
                    algorithms: Iterable[str] = ALGORITHMS) -> pd.DataFrame:
    """Naive, FA1 (kv_outer) and FA2 (q_outer) on each device's roofline, at one set of attention settings.

    Args:
        n: sequence length (N_q = N_k).  d: head dimension.  block_q, block_k: Br, Bc of the tiled kernels.
        causal, window: the mask.  batch, heads, heads_kv: B, H, H_kv (GQA).
        dtype: input dtype name; sets the bytes per element and which peak each device uses.
        devices: Devices to place the points on (GPUS; add flashviz.measure.roof_probe.machine_roof(threads) for the
            measured CPU).
        algorithms: any of "naive", "kv_outer", "q_outer" (aliases accepted).
    Returns:
        Tidy DataFrame, one row per (device, algorithm), columns ROOFLINE_COLUMNS: device (name), algorithm,
        flops, hbm_bytes (from io_cost), intensity (FLOP/byte), attainable_flops (FLOP/s), time_s (predicted
        seconds), bound ("memory" or "compute"), speedup_vs_naive (naive's predicted time / this one's, on the
        same device; NaN without a naive row), measured (whether the device's rates were measured).

    Example:
        >>> df = roofline_points(4096, 64, block_q=128, block_k=128, heads=8)
        >>> df.set_index(["device", "algorithm"]).loc[("H100 (SXM)", "naive"), "bound"]
        'memory'
    """
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {tuple(DTYPE_BYTES)}, got {dtype!r}.")
    costs = {a: io_cost(a, n, n, d, block_q, block_k, causal=causal, window=window, batch=batch, heads=heads,
                        heads_kv=heads_kv, dtype_bytes=DTYPE_BYTES[dtype]) for a in algorithms}
    records = []
    for device in devices:
        times = {a: predict_time(c.flops, c.bytes, device, dtype) for a, c in costs.items()}
        for a, c in costs.items():
            naive_time = times.get(NAIVE)
            records.append({"device": device.name, "algorithm": c.algorithm, "flops": c.flops, "hbm_bytes": c.bytes,
                            "intensity": c.intensity, "attainable_flops": attainable_flops(c.intensity, device, dtype),
                            "time_s": times[a], "bound": bound(c.intensity, device, dtype),
                            "speedup_vs_naive": naive_time / times[a] if naive_time is not None else float("nan"),
                            "measured": device.measured})
    return pd.DataFrame.from_records(records, columns=list(ROOFLINE_COLUMNS))


def roof_lines(devices: Iterable[Device] = GPUS, *, dtype: str = "float16", intensities: Iterable[float] = (
        0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)) -> pd.DataFrame:
    """The roofs themselves, for drawing: attainable FLOP/s against intensity for each device, plus its ridge.

    Returns:
        Tidy DataFrame with columns device, intensity (FLOP/byte), attainable_flops (FLOP/s), ridge (FLOP/byte),
        peak_flops (FLOP/s), bandwidth (bytes/s); one row per (device, intensity), the ridge point included.

    Example:
        >>> r = roof_lines([A100])
        >>> round(float(r["ridge"].iloc[0]), 1)  # 312 TFLOP/s / 2.039 TB/s
        153.0
    """
    records = []
    for device in devices:
        ridge = device.ridge(dtype)
        for x in sorted({*intensities, ridge}):
            records.append({"device": device.name, "intensity": x,
                            "attainable_flops": attainable_flops(x, device, dtype), "ridge": ridge,
                            "peak_flops": device.peak(dtype), "bandwidth": device.bandwidth})
    return pd.DataFrame.from_records(records)


def sram_marks(dtype: str = "float32", devices: Iterable[Device] = (A100, H100)) -> pd.DataFrame:
    """Typical on-chip SRAM sizes for marking the IO model's M axis: shared memory per SM, in elements of dtype.

    Example:
        >>> sram_marks("float32").set_index("device")["M"].to_dict()
        {'A100 (SXM 80GB)': 41984, 'H100 (SXM)': 58368}
    """
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {tuple(DTYPE_BYTES)}, got {dtype!r}.")
    return pd.DataFrame([{"device": dev.name, "M": dev.sram_elements(dtype), "sram_bytes": dev.sram_per_sm,
                          "label": f"{dev.name}: {dev.sram_per_sm // KIB} KiB shared memory per SM"}
                         for dev in devices if dev.sram_per_sm is not None])
