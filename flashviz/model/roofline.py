"""The roofline: why FlashAttention is fast on a GPU, with numbers.

A kernel that does F FLOPs and moves Q bytes to and from HBM needs at least max(F / peak, Q / bandwidth) seconds:
it is compute-bound when its arithmetic intensity I = F / Q exceeds the device's ridge point peak / bandwidth, and
memory-bound below it, where it attains only I x bandwidth FLOP/s. Standard attention writes and re-reads S and P,
so its intensity is a few FLOPs per byte, far below a GPU's ridge (about 150-300 FLOP/byte); the tiled kernels move
O(N d) per pass instead of O(N^2), so their intensity grows with the tile size and they reach the compute roof.
FLOPs and bytes come from flashviz.model.iomodel.io_cost, so the prediction and the IO model agree. This machine's
roof is measured in flashviz.measure.roof_probe; this module is arithmetic only.

A GPU has a level between the chip's SRAM and HBM: its L2 cache (40 MiB on an A100, 50 MiB on an H100 or H200, 126 MB on
a B200: see its comment), with a few times HBM's bandwidth. `roofline_points` is a hierarchical roofline (Yang, Kurth,
Williams, "Hierarchical Roofline analysis for GPUs", CCPE 2020): everything the IO model moves off the SMs passes
through L2 (io_cost's bytes: the L2 traffic), and only part of it reaches HBM: the compulsory bytes (each input read
once, each output written once; for standard attention S and P written once) and the re-reads whose data did not stay in
L2. A re-read hits L2 when everything the kernel re-reads fits in it: K and V for FA2 (read once per Q block), Q, O, l
and m for FA1 (once per K/V block), S and P for standard attention. The predicted time is then max(F / peak, HBM bytes /
HBM bandwidth, L2 bytes / L2 bandwidth), and the largest term names the regime that bounds the kernel ("compute",
"memory" for HBM, "L2"): where two GPUs differ in the rate of that regime, their predictions differ. A device without an
L2 figure (this CPU) keeps the two-level model.

References:
    Williams, Waterman, Patterson, "Roofline: an insightful visual performance model" (CACM 2009).
    Yang, Kurth, Williams, "Hierarchical Roofline analysis for GPUs: accelerating performance optimization for the
    NERSC-9 Perlmutter system" (Concurrency and Computation: Practice and Experience, 2020).
    Device figures: see the comment on each Device below (NVIDIA datasheets, whitepapers and tuning guides; the L2
    bandwidths say whether they are published or measured).

Units: FLOP/s, bytes/s, seconds, FLOP/byte. Legend: N sequence length (N_q = N_k), d head dimension, B batch,
H query heads, H_kv key/value heads, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from flashviz.core.validate import Window
from flashviz.model.iomodel import IOCost, io_cost
from flashviz.vocab import ALGORITHMS, DTYPE_BYTES, KV_OUTER, NAIVE, Q_OUTER

KIB = 1024  # bytes per KiB
MIB = 1024 * KIB  # bytes per MiB (NVIDIA's "40 MB" L2 is 40 MiB: cudaDeviceProp.l2CacheSize = 41,943,040)
TERA = 1e12  # FLOP/s per TFLOP/s, bytes/s per TB/s
GIGA = 1e9  # bytes/s per GB/s, FLOP/s per GFLOP/s
COMPUTE, MEMORY, L2 = "compute", "memory", "L2"  # what bounds a kernel on a device (MEMORY: HBM, or a CPU's RAM)
ROOFLINE_COLUMNS = ("device", "algorithm", "flops", "hbm_bytes", "l2_bytes", "intensity", "l2_intensity",
                    "attainable_flops", "time_s", "compute_s", "hbm_s", "l2_s", "bound", "l2_hit", "speedup_vs_naive",
                    "measured")


@dataclass(frozen=True)
class SMUnits:
    """The units of one streaming multiprocessor (SM), each as results per clock, and the memories beside them.

    One table serves every schedule of flashviz.model.pipeline: no rate here is fitted to a kernel. The datasheet's
    dense tensor peak is sms x clock_hz x tensor_flops_per_clk (tests hold the two together).
    """

    sms: int  # streaming multiprocessors on the chip
    clock_hz: float  # the clock the datasheet's dense tensor peak assumes (the model runs every unit at it)
    tensor_flops_per_clk: dict[str, float]  # dense tensor-core FLOP per clock per SM, by dtype name (async MMA)
    mma_sync_flops_per_clk: float  # FLOP per clock per SM through Ampere's warp-level mma.sync (FA2's path)
    exp2_per_clk: int  # exp2 results per clock per SM on the multi-function unit (MUFU.EX2)
    fma_per_clk: int  # FP32 FMA (or add, max, multiply) results per clock per SM
    smem_bytes_per_clk: int  # shared-memory bytes per clock per SM (32 banks x 4 bytes)
    smem_bytes: int  # shared memory per SM, bytes (the largest carve-out a kernel may ask for)
    tmem_bytes: int  # tensor memory per SM, bytes (Blackwell's MMA accumulators; 0 before Blackwell)
    source: str  # where each figure comes from, in a line


@dataclass(frozen=True)
class Device:
    """What a roofline needs to know about a machine."""

    name: str  # label for tables and legends
    peak_flops: dict[str, float]  # FLOP/s by dtype name (dense, no sparsity)
    bandwidth: float  # bytes/s between main memory (HBM, or RAM) and the chip
    sram_per_sm: int | None  # bytes of shared memory (SRAM) per streaming multiprocessor; None for a CPU
    source: str  # where the figures come from
    measured: bool = False  # True for this machine's measured rates, False for published peaks
    l2_bytes: int | None = None  # bytes of L2 cache between the SMs and HBM; None: no L2 level in the model
    l2_bandwidth: float | None = None  # bytes/s the SMs can read from L2 (see each GPU's comment for the source)
    units: SMUnits | None = None  # the units of one SM (flashviz.model.pipeline's table); None for a CPU

    def peak(self, dtype: str) -> float:
        """Peak FLOP/s for inputs of this dtype (a name from flashviz.vocab.DTYPES)."""
        if dtype not in self.peak_flops:
            raise ValueError(f"{self.name} has no peak for dtype {dtype!r} in this model; known: "
                             f"{sorted(self.peak_flops)}. Use one of those.")
        return self.peak_flops[dtype]

    def ridge(self, dtype: str = "float16") -> float:
        """FLOP/byte at which the memory roof meets the compute roof: peak / bandwidth."""
        return self.peak(dtype) / self.bandwidth

    def l2_ridge(self, dtype: str = "float16") -> float | None:
        """FLOP per L2 byte at which L2's roof meets the compute roof: peak / L2 bandwidth (None without L2)."""
        return None if self.l2_bandwidth is None else self.peak(dtype) / self.l2_bandwidth

    def sram_elements(self, dtype: str) -> int | None:
        """Shared memory per SM in elements of this dtype (for marking the IO model's M axis); None for a CPU."""
        return None if self.sram_per_sm is None else self.sram_per_sm // DTYPE_BYTES[dtype]


# ----------------------------------------------------------------------------------------------------------------------
# the units of one SM (flashviz.model.pipeline): what one tile of attention occupies, unit by unit
#
# Shared by every GPU below (NVIDIA CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table, results
# per clock per SM for compute capability 8.0 / 9.0 / 10.0): exp2 (MUFU.EX2, "base-2 exponential") 16 on all three;
# 32-bit floating-point add, multiply, multiply-add 64 on 8.0 (A100), 128 on 9.0 (H100, H200) and 10.0 (B200).
# FlashAttention-3 (Shah et al., 2024), Section 3: an H100 SXM5 has 989 TFLOP/s of FP16 matmul "but only 3.9 TFLOP/s"
# of special functions: 16 x 132 SMs x 1.83 GHz = 3.86e12 exp2/s. FlashAttention-4 (Zadouri et al., 2026) and its
# blog: from H100 to B200 the tensor cores doubled while the MUFU (16 exp2 per clock per SM) and shared memory
# (128 bytes per clock per SM) stayed the same. Shared memory: 32 banks of 4 bytes per clock (the programming guide,
# "Shared Memory" of compute capability 5.x onward), 128 bytes/clock on every GPU here.
# Ampere's warp-level mma.sync (FA2's MMA) does not reach Hopper's peak: only the warpgroup-wide asynchronous wgmma
# does (NVIDIA Hopper tuning guide; Luo et al., "Dissecting the NVIDIA Hopper architecture through microbenchmarking",
# 2025, compare the two). About two thirds of the wgmma peak is the figure commonly reported for mma.sync on an H100;
# it is a recollection, not checked against that paper's table here, and it is the one rate of FA2's prediction that
# is not a datasheet figure. B200 is assumed to run mma.sync at H100's per-SM rate (no published figure).
MUFU_EXP2_PER_CLK = 16  # exp2 results per clock per SM, A100 to B200 (programming guide; FA3, FA4)
SMEM_BYTES_PER_CLK = 128  # 32 banks x 4 bytes per clock per SM (programming guide; FA4: unchanged on Blackwell)
HOPPER_MMA_SYNC = 4096 * 2 / 3  # FLOP/clk/SM through mma.sync on Hopper: about 2/3 of wgmma's (see above)
A100_UNITS = SMUnits(
    sms=108, clock_hz=1.41e9,  # A100 whitepaper: 108 SMs, 1,410 MHz boost
    tensor_flops_per_clk={"float16": 2048, "bfloat16": 2048},  # 1,024 dense FP16 FMA/clk/SM (whitepaper): 312 TF
    mma_sync_flops_per_clk=2048, exp2_per_clk=MUFU_EXP2_PER_CLK, fma_per_clk=64,  # mma.sync is Ampere's own MMA
    smem_bytes_per_clk=SMEM_BYTES_PER_CLK, smem_bytes=164 * KIB, tmem_bytes=0,
    source="A100 whitepaper (108 SMs, 1.41 GHz, 1,024 FP16 FMA/clk/SM); CUDA programming guide (MUFU 16, FP32 64 "
           "per clock per SM on 8.0); Ampere tuning guide (164 KB shared memory)")
H100_UNITS = SMUnits(
    sms=132, clock_hz=1.83e9,  # H100 SXM5: 132 SMs; 989.4 TF = 132 x 4,096 x 1.83 GHz (the datasheet's tensor clock)
    tensor_flops_per_clk={"float16": 4096, "bfloat16": 4096, "float8_e4m3fn": 8192},  # FP8: 1,979 TF dense
    mma_sync_flops_per_clk=HOPPER_MMA_SYNC, exp2_per_clk=MUFU_EXP2_PER_CLK, fma_per_clk=128,
    smem_bytes_per_clk=SMEM_BYTES_PER_CLK, smem_bytes=228 * KIB, tmem_bytes=0,
    source="H100 datasheet (989.4 TF BF16 and 1,979 TF FP8 dense) over 132 SMs at 1.83 GHz; CUDA programming guide "
           "(MUFU 16, FP32 128 per clock per SM on 9.0); FA3 (3.9 TFLOP/s of exp); Hopper tuning guide (228 KB)")
# B200 (the HGX B200's GPU, 1,000 W): 148 SMs (Chips and Cheese, "Nvidia's B200: keeping the CUDA juggernaut rolling",
# 2025: 2 dies x 74 SMs); dense BF16 2.25 PFLOP/s and FP8 4.5 PFLOP/s (NVIDIA HGX B200 datasheet: 36 and 72 PFLOPS
# with sparsity for 8 GPUs; FA4's blog: "BF16 tensor core throughput increases from 1 to 2.25 PFLOPs"). 2.25e15 =
# 148 x 8,192 x 1.86 GHz: FA4's per-tile counts (1,024 MMA cycles for 2 x 2 x 128^3 FLOP) give 8,192 FLOP/clk/SM, and
# 1.86 GHz is the tensor clock spec listings give. Tensor memory: 128 lanes x 512 columns x 4 bytes = 256 KiB per SM
# (CUDA PTX ISA, "Tensor Memory"); shared memory up to 228 KB per SM (Blackwell tuning guide).
B200_UNITS = SMUnits(
    sms=148, clock_hz=1.86e9,
    tensor_flops_per_clk={"float16": 8192, "bfloat16": 8192, "float8_e4m3fn": 16384},
    mma_sync_flops_per_clk=HOPPER_MMA_SYNC, exp2_per_clk=MUFU_EXP2_PER_CLK, fma_per_clk=128,
    smem_bytes_per_clk=SMEM_BYTES_PER_CLK, smem_bytes=228 * KIB, tmem_bytes=256 * KIB,
    source="HGX B200 datasheet (2.25 PF BF16, 4.5 PF FP8 dense) over 148 SMs (Chips and Cheese 2025) at 1.86 GHz; "
           "FA4 (1,024 MMA and exp cycles per 128^3 tile); PTX ISA (256 KiB TMEM); Blackwell tuning guide (228 KB)")


# NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM column): FP16 / BF16 Tensor Core 312 TFLOPS dense (624 with
# sparsity), TF32 156, FP32 19.5, FP64 Tensor Core 19.5 TFLOPS; GPU memory bandwidth 2,039 GB/s (HBM2e).
# NVIDIA Ampere GPU Architecture Tuning Guide, 1.4.1.2: A100 shared memory configurable up to 164 KB per SM.
# L2: 40 MB (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020: "a 40 MB Level 2 cache"; 40 MiB as CUDA
# reports it), read bandwidth 5,120 bytes per clock (the same whitepaper: 2.3x V100's 2,048 bytes/clk at V100's clock)
# at the 1,410 MHz boost clock: 7.2 TB/s. Published (a peak derived from the whitepaper's bytes per clock).
A100_L2_BANDWIDTH = 5120 * 1.41e9  # bytes/s: published bytes/clk x boost clock
A100 = Device("A100 (SXM 80GB)", {"float16": 312 * TERA, "bfloat16": 312 * TERA, "float32": 19.5 * TERA,
                                  "float64": 19.5 * TERA},
              2039 * GIGA, 164 * KIB, "NVIDIA A100 datasheet (80GB SXM); Ampere tuning guide (shared memory); A100 "
                                      "whitepaper (L2: 40 MB, 5,120 bytes/clk, published)",
              l2_bytes=40 * MIB, l2_bandwidth=A100_L2_BANDWIDTH, units=A100_UNITS)
# NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column): FP16 / BF16 Tensor Core 1,979 TFLOPS "with sparsity",
# 989.4 dense; FP32 67 (66.9), FP64 Tensor Core 67 TFLOPS; GPU memory bandwidth 3.35 TB/s (HBM3).
# NVIDIA Hopper Tuning Guide, 1.4.1.2: H100 shared memory configurable up to 228 KB per SM.
# L2: 50 MB on H100 SXM5 (NVIDIA Hopper architecture in-depth, 2022: "A 50 MB L2 cache in H100 is 1.25x larger than
# A100's 40 MB"). NVIDIA publishes no L2 bandwidth for Hopper. The figure here is an estimate: about 5.5 TB/s read
# from L2 on an H100 PCIe, 114 SMs at up to 1,755 MHz, as recalled from a microbenchmark (Chips and Cheese, "Nvidia's
# H100: Funny L2, and Tons of Bandwidth", 2023: the SM count and clock are the article's; the 5.5 TB/s reading of its
# chart is not checked against the article here), scaled to the SXM5's 132 SMs at 1,980 MHz: about 7.2 TB/s. Not a
# datasheet figure: the Hopper L2 regimes the model predicts depend on it.
HOPPER_L2_BANDWIDTH = 5.5 * TERA * (132 / 114) * (1980 / 1755)  # bytes/s: measured on PCIe, scaled to the SXM5
H100 = Device("H100 (SXM)", {"float16": 989.4 * TERA, "bfloat16": 989.4 * TERA, "float8_e4m3fn": 1979 * TERA,
                             "float32": 66.9 * TERA, "float64": 66.9 * TERA},
              3.35 * TERA, 228 * KIB, "NVIDIA H100 datasheet (SXM, dense = half the sparsity figure); Hopper tuning "
                                      "guide (shared memory); L2 50 MB (Hopper in-depth), L2 bandwidth measured "
                                      "(Chips and Cheese 2023, H100 PCIe, scaled to the SXM5's SMs and clock)",
              l2_bytes=50 * MIB, l2_bandwidth=HOPPER_L2_BANDWIDTH, units=H100_UNITS)
# NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column): the same GH100 compute as H100 SXM (FP16 / BF16 Tensor Core
# 1,979 TFLOPS with sparsity, 989.4 dense; FP32 67, FP64 Tensor Core 67 TFLOPS) with 141 GB of HBM3e at 4.8 TB/s.
# Shared memory per SM as H100 (same Hopper SM, Hopper tuning guide). L2: the same GH100 die and clocks as H100 SXM,
# so the same 50 MB and the same measured-and-scaled L2 bandwidth (an estimate): only HBM differs.
H200 = Device("H200 (SXM)", {"float16": 989.4 * TERA, "bfloat16": 989.4 * TERA, "float8_e4m3fn": 1979 * TERA,
                             "float32": 66.9 * TERA, "float64": 66.9 * TERA},
              4.8 * TERA, 228 * KIB, "NVIDIA H200 datasheet (SXM, dense = half the sparsity figure); Hopper tuning "
                                     "guide (shared memory); L2 as H100 SXM (same GH100 die)",
              l2_bytes=50 * MIB, l2_bandwidth=HOPPER_L2_BANDWIDTH, units=H100_UNITS)
# NVIDIA B200 (HGX B200 datasheet, per GPU: 36 PFLOPS FP16 / BF16 with sparsity for 8 GPUs, so 2.25 dense; FP32 600
# and FP64 296 TFLOPS for 8 GPUs: 75 and 37 per GPU; 180 GB of HBM3e at 8 TB/s per GPU).
# L2: sources disagree. NVIDIA's datasheet gives none for B200; Chips and Cheese (2025), testing one, report 126 MB
# across its two dies (the figure used here); spec listings give 65.5 MB or 96 MB.
# L2 bandwidth: not published and not measured here; an estimate that keeps the H100 estimate's ratio of L2 to HBM
# bandwidth (7.2 / 3.35 TB/s) at the B200's 8 TB/s of HBM: about 17 TB/s. (Hopper's bytes per clock per SM carried
# over to 148 SMs would give 7.6 TB/s, below the B200's own HBM: not credible.) The model's B200 L2 regimes depend on
# it.
B200_L2_BANDWIDTH = HOPPER_L2_BANDWIDTH / (3.35 * TERA) * (8 * TERA)  # bytes/s: H100's L2 / HBM ratio
B200 = Device("B200 (SXM)", {"float16": 2250 * TERA, "bfloat16": 2250 * TERA, "float8_e4m3fn": 4500 * TERA,
                             "float32": 75 * TERA, "float64": 37 * TERA},
              8 * TERA, 228 * KIB, "NVIDIA HGX B200 datasheet (per GPU: dense = half the sparsity figure, 8 TB/s); "
                                   "Blackwell tuning guide (shared memory); L2 126 MB as tested (Chips and Cheese "
                                   "2025; listings disagree), L2 bandwidth estimated at the H100's L2 / HBM ratio",
              l2_bytes=126 * 1000 * 1000, l2_bandwidth=B200_L2_BANDWIDTH, units=B200_UNITS)
GPUS = (A100, H100, H200, B200)


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


def level_times(flops: float, hbm_bytes: float, l2_bytes: float, device: Device, dtype: str = "float16"
                ) -> dict[str, float]:
    """The time each level needs: COMPUTE flops / peak, MEMORY HBM bytes / HBM bandwidth and, on a device with an L2
    figure, L2 bytes / L2 bandwidth. The largest is the hierarchical roofline's time; its key is the regime.

    Example:
        >>> t = level_times(312e12, 2039e9, 0, A100)  # one second of tensor work and one of HBM traffic
        >>> t["compute"], t["memory"], t["L2"]
        (1.0, 1.0, 0.0)
        >>> sorted(level_times(1.0, 1.0, 1.0, Device("cpu", {"float16": 1.0}, 1.0, None, "fake")))
        ['compute', 'memory']
    """
    times = {COMPUTE: flops / device.peak(dtype), MEMORY: hbm_bytes / device.bandwidth}
    if device.l2_bandwidth is not None:
        times[L2] = l2_bytes / device.l2_bandwidth
    return times


def regime(times: dict[str, float]) -> str:
    """The regime whose time is the largest (on a tie, the first of compute, memory, L2).

    Example:
        >>> regime({"compute": 1.0, "memory": 3.0, "L2": 2.0})
        'memory'
    """
    return max(times, key=times.__getitem__)


@dataclass(frozen=True)
class Traffic:
    """One kernel's bytes at the levels of a device's memory: through L2, and what reaches HBM."""

    l2_bytes: int  # everything the IO model moves between the SMs and memory (io_cost's bytes): it all passes L2
    compulsory_bytes: int  # what reaches HBM even with an L2 that holds everything: inputs once, outputs once
    reread_bytes: int  # the rest: the re-reads (FA1's Q, O, l, m; FA2's K, V; naive's S and P read back)
    reread_set_bytes: int  # what must stay in L2 for those re-reads to hit it
    l2_hit: bool | None  # whether the re-read set fits in the device's L2; None: no L2 in the model
    hbm_bytes: int  # compulsory, plus the re-reads unless they hit L2


def reread_set(algorithm: str, n_q: int, n_k: int, d: int, *, batch: int = 1, heads: int = 1,
               heads_kv: int | None = None, dtype_bytes: int = 2) -> int:
    """Bytes a kernel re-reads, all of which must stay in L2 for the re-reads to hit it: S and P for naive (written,
    then read back), Q, O, l and m for FA1 (kv_outer: read again on every K/V block), K and V for FA2 (q_outer: read
    again for every Q block). The whole call's, every (batch, head) at once: a conservative rule.

    Example:
        >>> reread_set("naive", 1024, 1024, 64, heads=4) == 2 * 4 * 1024**2 * 2  # S and P, fp16
        True
        >>> reread_set("q_outer", 1024, 1024, 64, heads=8, heads_kv=2) == 2 * 2 * 1024 * 64 * 2  # K, V per K/V head
        True
    """
    h_kv = heads if heads_kv is None else heads_kv
    if algorithm == NAIVE:
        elements = 2 * batch * heads * n_q * n_k
    elif algorithm == KV_OUTER:
        elements = batch * heads * n_q * (2 * d + 2)
    elif algorithm == Q_OUTER:
        elements = 2 * batch * h_kv * n_k * d
    else:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}.")
    return elements * dtype_bytes


def traffic(cost: IOCost, compulsory_bytes: int, reread_set_bytes: int, device: Device) -> Traffic:
    """Split a kernel's io_cost between L2 and HBM on a device: the re-reads reach HBM unless their set fits in L2.

    Example:
        >>> from flashviz.model.iomodel import io_cost
        >>> c = io_cost("q_outer", 1024, 1024, 64, 64, 64, heads=4, dtype_bytes=2)
        >>> one = io_cost("q_outer", 1024, 1024, 64, 1024, 1024, heads=4, dtype_bytes=2).bytes  # one pass
        >>> t = traffic(c, one, reread_set("q_outer", 1024, 1024, 64, heads=4), A100)
        >>> t.l2_hit, t.hbm_bytes == one, t.l2_bytes == c.bytes
        (True, True, True)
    """
    reread = cost.bytes - compulsory_bytes
    if device.l2_bytes is None:
        return Traffic(cost.bytes, compulsory_bytes, reread, reread_set_bytes, None, cost.bytes)
    hit = reread_set_bytes <= device.l2_bytes
    return Traffic(cost.bytes, compulsory_bytes, reread, reread_set_bytes, hit,
                   compulsory_bytes + (0 if hit else reread))


def compulsory_bytes(algorithm: str, n: int, d: int, *, causal: bool = False, window: Window = None, batch: int = 1,
                     heads: int = 1, heads_kv: int | None = None, dtype_bytes: int = 2) -> int:
    """Bytes that reach HBM even when every re-read hits L2, by the IO model's own rules: a tiled kernel with a single
    tile (every input read once, every output written once); naive with S and P written but not read back.

    Example:
        >>> compulsory_bytes("q_outer", 1024, 64, heads=4) == 4 * (4 * 1024 * 64 + 1024) * 2  # Q, K, V, O and L
        True
    """
    kw = dict(causal=causal, window=window, batch=batch, heads=heads, heads_kv=heads_kv, dtype_bytes=dtype_bytes)
    if algorithm == NAIVE:
        return io_cost(NAIVE, n, n, d, n, n, **kw).bytes - 2 * batch * heads * n * n * dtype_bytes  # S, P read back
    return io_cost(algorithm, n, n, d, n, n, **kw).bytes


# ----------------------------------------------------------------------------------------------------------------------
# attention on the roofline


def roofline_points(n: int, d: int, *, block_q: int = 64, block_k: int = 64, causal: bool = False,
                    window: Window = None, batch: int = 1, heads: int = 1, heads_kv: int | None = None,
                    dtype: str = "float16", devices: Iterable[Device] = GPUS,
                    algorithms: Iterable[str] = ALGORITHMS) -> pd.DataFrame:
    """Naive, FA1 (kv_outer) and FA2 (q_outer) on each device's hierarchical roofline, at one set of attention settings.

    Args:
        n: sequence length (N_q = N_k).  d: head dimension.  block_q, block_k: Br, Bc of the tiled kernels.
        causal, window: the mask.  batch, heads, heads_kv: B, H, H_kv (GQA).
        dtype: input dtype name; sets the bytes per element and which peak each device uses.
        devices: Devices to place the points on (GPUS; add flashviz.measure.roof_probe.machine_roof(threads) for the
            measured CPU).
        algorithms: any of "naive", "kv_outer", "q_outer" (aliases accepted).
    Returns:
        Tidy DataFrame, one row per (device, algorithm), columns ROOFLINE_COLUMNS: device (name), algorithm,
        flops, hbm_bytes (what reaches HBM: `traffic`), l2_bytes (io_cost's bytes, all through L2), intensity
        (FLOP per HBM byte), l2_intensity (FLOP per L2 byte), attainable_flops (flops / time_s), time_s (predicted
        seconds: the largest of compute_s, hbm_s, l2_s), compute_s, hbm_s, l2_s (each level's time; l2_s NaN without
        L2), bound ("compute", "memory" or "L2": the largest), l2_hit (whether the re-reads fit in L2; None without
        L2), speedup_vs_naive (naive's predicted time / this one's, on the same device; NaN without a naive row),
        measured (whether the device's rates were measured).

    Example:
        >>> df = roofline_points(4096, 64, block_q=128, block_k=128, heads=8)
        >>> by = df.set_index(["device", "algorithm"])
        >>> by.loc[("H100 (SXM)", "naive"), "bound"], by.loc[("A100 (SXM 80GB)", "q_outer"), "bound"]
        ('memory', 'compute')
    """
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {tuple(DTYPE_BYTES)}, got {dtype!r}.")
    b = DTYPE_BYTES[dtype]
    kw = dict(causal=causal, window=window, batch=batch, heads=heads, heads_kv=heads_kv)
    costs = {a: io_cost(a, n, n, d, block_q, block_k, dtype_bytes=b, **kw) for a in algorithms}
    floors = {a: compulsory_bytes(c.algorithm, n, d, dtype_bytes=b, **kw) for a, c in costs.items()}
    sets = {a: reread_set(c.algorithm, n, n, d, batch=batch, heads=heads, heads_kv=heads_kv, dtype_bytes=b)
            for a, c in costs.items()}
    records = []
    for device in devices:
        moved = {a: traffic(c, floors[a], sets[a], device) for a, c in costs.items()}
        levels = {a: level_times(c.flops, moved[a].hbm_bytes, moved[a].l2_bytes, device, dtype)
                  for a, c in costs.items()}
        times = {a: max(t.values()) for a, t in levels.items()}
        naive_time = times.get(NAIVE)
        for a, c in costs.items():
            t, m = levels[a], moved[a]
            records.append({"device": device.name, "algorithm": c.algorithm, "flops": c.flops,
                            "hbm_bytes": m.hbm_bytes, "l2_bytes": m.l2_bytes,
                            "intensity": c.flops / m.hbm_bytes if m.hbm_bytes else 0.0,
                            "l2_intensity": c.intensity, "attainable_flops": c.flops / times[a] if times[a] else 0.0,
                            "time_s": times[a], "compute_s": t[COMPUTE], "hbm_s": t[MEMORY],
                            "l2_s": t.get(L2, float("nan")), "bound": regime(t), "l2_hit": m.l2_hit,
                            "speedup_vs_naive": naive_time / times[a] if naive_time is not None else float("nan"),
                            "measured": device.measured})
    return pd.DataFrame.from_records(records, columns=list(ROOFLINE_COLUMNS))


def roof_lines(devices: Iterable[Device] = GPUS, *, dtype: str = "float16", intensities: Iterable[float] = (
        0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)) -> pd.DataFrame:
    """The roofs themselves, for drawing: attainable FLOP/s against intensity for each device, plus its ridge.

    Returns:
        Tidy DataFrame with columns device, intensity (FLOP/byte), attainable_flops (FLOP/s), ridge (FLOP/byte),
        peak_flops (FLOP/s), bandwidth (bytes/s), l2_bandwidth (bytes/s, NaN without L2), l2_ridge (FLOP/byte, NaN
        without L2); one row per (device, intensity), the ridge point included.

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
                            "peak_flops": device.peak(dtype), "bandwidth": device.bandwidth,
                            "l2_bandwidth": device.l2_bandwidth or float("nan"),
                            "l2_ridge": device.l2_ridge(dtype) or float("nan")})
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
