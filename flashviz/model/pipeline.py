"""Why FlashAttention is fast on a GPU, inside the chip: the units one tile occupies, and FA2, FA3 and FA4 as
pipelines over those units.

The roofline (flashviz.model.roofline) weighs FLOPs against bytes. Since FlashAttention-2 the limit sits inside the
SM: per tile of S the tensor cores do 4 Br Bc d FLOPs while the multi-function unit (MUFU) computes Br Bc
exponentials at 16 per clock, the FP32 units do the softmax's bookkeeping, and shared memory feeds the MMA's operands
at 128 bytes per clock. `tile_cycles` counts the cycles one tile needs on each unit, forward and backward, from the
operation counts and one table of unit rates (flashviz.model.roofline.SMUnits, each figure with its source).
`simulate` runs one CTA's operations over its K/V tiles on those units with a list scheduler (each op on one unit,
one op per unit at a time, started as soon as its dependencies and its unit allow), under three schedules:

    FA2  one warpgroup, serial within a tile, Ampere's warp-level mma.sync (Dao, 2023): on Hopper it reaches about
         two thirds of the tensor cores' peak, and nothing overlaps the softmax.
    FA3  producer / consumer warp specialisation: a producer warp loads K, V by TMA; two consumer warpgroups share the
         CTA's Q rows and ping-pong on the tensor cores, each issuing the next QK^T before its softmax (intra-warpgroup
         overlap) (Shah et al., 2024, Section 3).
    FA4  two Q tiles per CTA, one MMA warp, a softmax warpgroup per Q tile and a correction warpgroup that rescales O
         off the softmax's path, and only when a row's max grew by more than tau (lazy rescale, at the rate the caller
         measured); a share of exp2 computed by a polynomial on the FMA units, the share that balances the MUFU
         against the FMA units (Zadouri et al., 2026).

No rate is fitted to a kernel: the same SMUnits and the same per-score operation counts serve all three, and the
papers' throughputs are results to compare with (tests and the GPU pipeline view do so), never parameters. The model
leaves out register pressure, instruction issue, barrier latency and the clock's drop under load: it is an upper
bound of what the units allow, and where a paper is more than 25% below it the view says so and why.

References:
    Dao, "FlashAttention-2", 2023 (Algorithm 1; 4 warps, mma.sync).
    Shah, Bikshandi, Zhang, Thakkar, Ramani, Dao, "FlashAttention-3", 2024: Section 3.1 (warp specialisation,
        ping-pong), 3.2 (intra-warpgroup overlap); H100 SXM5 989 TFLOP/s of FP16 matmul, 3.9 TFLOP/s of exp, so at
        d = 128 the exponential takes 50% of the matmul's cycles; Figure 5: forward, d = 128, 16k tokens, FA2 370 and
        FA3 648 TFLOP/s (the headline 740, 75%, is its best configuration).
    Zadouri, Hoehnerbach, Shah, Liu, Thakkar, Dao, "FlashAttention-4", 2026, and its blog (Together AI): per 128 x 128
        x 128 BF16 tile on a B200 the forward needs 1,024 cycles of MMA, 1,024 of exp and 768 of shared memory, the
        backward 2,560, 1,024 and 3,328; 1,613 TFLOP/s (71%) in the paper, 1,605 in the blog.

Legend: Br = block_m (rows of Q per tile), Bc = block_n (keys per tile), d head dimension, N sequence length, b bytes
per element. A "tile" is one Br x Bc block of S. Units: cycles of the SM clock (SMUnits.clock_hz).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import pandas as pd

from flashviz.model.roofline import GPUS, Device

SCHEDULES = ("FA2", "FA3", "FA4")
DTYPES = ("float16", "bfloat16", "float8_e4m3fn")  # torch's names; fp8 runs the MMA in FP8, the softmax in FP32
ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float8_e4m3fn": 1}  # bytes per element of Q, K, V as the MMA reads them
PHASES = ("forward", "backward")
UNITS = ("load", "mma", "exp", "fma")  # the units the scheduler places ops on: TMA / L2 loads, tensor cores, MUFU, FP32

# FP32 operations per score besides the exponential, counted from the online softmax step (flashviz.core.softmax,
# FA2 Algorithm 1 in base 2): the row max (1 FMNMX), S x scale - m (1 FFMA), the row sum of P (1 FADD) and the
# conversion of P to 16 bits (F2FP packs two: 0.5).
FWD_FMA_PER_SCORE = 3.5
# Backward per score (FA2 Algorithm 2): P = exp2(S x scale - LSE) (1 FFMA), dS = P o (dP - D) (1 FADD, 1 FMUL), P and
# dS converted to 16 bits (0.5 each).
BWD_FMA_PER_SCORE = 4.0
# FP32 operations of one exp2 by polynomial (FA4 Section 3.1; measured in flashviz.core.exp2poly): Cody-Waite's
# floor and subtraction (2), Horner's degree-3 polynomial (3 FFMA), the exponent's add of j into the bits (1).
POLY_DEGREE = 3
POLY_FMA_PER_EXP = POLY_DEGREE + 3
STAGES = 2  # K/V buffers in shared memory: the load of tile j + 2 waits for tile j's P V (double buffering)
TOKENS, HIDDEN = 16384, 2048  # the papers' benchmark: batch x N = 16k tokens, heads x d = 2,048 (FA2, FA3, FA4)


def _units(device: Device):
    if device.units is None:
        raise ValueError(f"{device.name} has no SM unit table; use one of {[g.name for g in GPUS]}.")
    return device.units


def _check(dtype: str, device: Device) -> None:
    units = _units(device)
    if dtype not in units.tensor_flops_per_clk:
        raise ValueError(f"{device.name} has no tensor-core rate for dtype {dtype!r}; it has "
                         f"{sorted(units.tensor_flops_per_clk)} (FP8 arrived with Hopper).")


def l2_bytes_per_clk(device: Device) -> float:
    """One SM's share of the L2 bandwidth, bytes per clock (the roofline model's L2 figure over the SMs).

    Args:
        device: a GPU of GPUS (with an L2 figure and SM units).
    Returns:
        bytes per clock per SM.
    Example:
        >>> from flashviz.model.roofline import H100
        >>> round(l2_bytes_per_clk(H100), 1)  # 7.18 TB/s over 132 SMs at 1.83 GHz
        29.7
    """
    u = _units(device)
    return device.l2_bandwidth / (u.sms * u.clock_hz)


def hbm_bytes_per_clk(device: Device) -> float:
    """One SM's share of the HBM bandwidth, bytes per clock.

    Args:
        device: a GPU of GPUS.
    Returns:
        bytes per clock per SM.
    Example:
        >>> from flashviz.model.roofline import B200
        >>> round(hbm_bytes_per_clk(B200), 1)  # 8 TB/s over 148 SMs at 1.86 GHz
        29.1
    """
    u = _units(device)
    return device.bandwidth / (u.sms * u.clock_hz)


def tile_cycles(device: Device | str, *, block_m: int = 128, block_n: int = 128, head_dim: int = 128,
                dtype: str = "bfloat16", phase: str = "forward", seq_len: int = 8192) -> dict[str, float]:
    """Cycles one Br x Bc tile needs on each unit of one SM, from its operation counts and the SM's unit rates.

    Forward: S = Q K^T and O += P V (4 Br Bc d FLOPs on the tensor cores); Br Bc exp2 on the MUFU; the softmax's
    FP32 bookkeeping (FWD_FMA_PER_SCORE per score) and O's rescale (Br d); shared memory feeds the MMAs' operands Q,
    K and V (P stays in registers or tensor memory). Backward: S, dP = dO V^T, dV += P^T dO, dK += dS^T Q, dQ = dS K
    (10 Br Bc d FLOPs); P recomputed (Br Bc exp2); BWD_FMA_PER_SCORE per score; shared memory: the ten operands, P and
    dS written, dQ staged for its atomic add (FA4's 13 tile-sized transfers at Br = Bc = d; the paper gives the total,
    the split is ours). "l2": the K/V tile (forward) or the Q, dO tile and dQ's fp32 add (backward) through L2;
    "hbm": the tile's share of the compulsory HBM traffic at seq_len (each input read, each output written once).

    Args:
        device: a Device of flashviz.model.roofline.GPUS, or its short name ("A100", "H100", "H200", "B200").
        block_m, block_n: Br, Bc.  head_dim: d.  dtype: "float16", "bfloat16" or "float8_e4m3fn".
        phase: "forward" or "backward".  seq_len: N, for the tile's share of HBM traffic.
    Returns:
        {"mma", "exp", "fma", "smem", "l2", "hbm"}: cycles on each unit for one tile.

    Example:
        >>> c = tile_cycles("B200")  # FA4's 128 x 128 x 128 BF16 tile
        >>> c["mma"], c["exp"], c["smem"]
        (1024.0, 1024.0, 768.0)
        >>> c = tile_cycles("B200", phase="backward")
        >>> c["mma"], c["exp"], c["smem"]
        (2560.0, 1024.0, 3328.0)
    """
    device = gpu(device)
    _check(dtype, device)
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}.")
    for name, v in (("block_m", block_m), ("block_n", block_n), ("head_dim", head_dim), ("seq_len", seq_len)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}.")
    u = _units(device)
    b = ELEMENT_BYTES[dtype]
    m, n, d = block_m, block_n, head_dim
    scores = m * n  # one tile of S
    tiles = math.ceil(seq_len / m) * math.ceil(seq_len / n)  # tiles of one head
    if phase == "forward":
        flops = 2 * 2 * m * n * d  # S = Q K^T, O += P V
        fma = FWD_FMA_PER_SCORE * scores + m * d  # softmax bookkeeping; O *= alpha
        smem = (m * d + n * d) * b + n * d * b  # Q, K for S; V for P V (P in registers / TMEM)
        l2 = 2 * n * d * b  # K_j, V_j
        hbm = 4 * seq_len * d * b / tiles  # Q, K, V read, O written once per head
    else:
        flops = 5 * 2 * m * n * d  # S, dP, dV, dK, dQ
        fma = BWD_FMA_PER_SCORE * scores
        smem = (2 * (m * d + n * d)  # S = Q K^T, dP = dO V^T
                + (m * n + m * d) * 2  # dV += P^T dO, dK += dS^T Q
                + (m * n + n * d)  # dQ = dS K
                + 2 * m * n + m * d) * b  # P and dS written to shared memory, dQ staged for its atomic add
        l2 = 2 * m * d * b + m * d * 4  # Q_i, dO_i read; dQ_i added in fp32
        hbm = 8 * seq_len * d * b / tiles  # Q, K, V, O, dO read; dQ, dK, dV written
    return {"mma": flops / u.tensor_flops_per_clk[dtype], "exp": scores / u.exp2_per_clk,
            "fma": fma / u.fma_per_clk, "smem": smem / u.smem_bytes_per_clk, "l2": l2 / l2_bytes_per_clk(device),
            "hbm": hbm / hbm_bytes_per_clk(device)}


def gpu(device: Device | str) -> Device:
    """The Device of a short name ("A100", "H100", "H200", "B200", in any case) or the Device itself.

    Args:
        device: a Device, or a GPU's short name.
    Returns:
        the Device (ValueError for an unknown name, listing the known ones).
    Example:
        >>> gpu("H100").name, gpu("b200").name
        ('H100 (SXM)', 'B200 (SXM)')
    """
    if isinstance(device, Device):
        return device
    found = [g for g in GPUS if g.name.split(" (")[0] == str(device).upper() or g.name == device]
    if not found:
        raise ValueError(f"device must be one of {[g.name.split(' (')[0] for g in GPUS]}, got {device!r}.")
    return found[0]


def poly_share(device: Device | str, *, block_m: int = 128, block_n: int = 128, head_dim: int = 128,
               rescale_rate: float = 1.0) -> float:
    """FA4's share of exp2 computed by polynomial on the FMA units: the share that balances the MUFU's cycles against
    the FMA units' (the softmax's bookkeeping, O's rescale at rescale_rate and POLY_FMA_PER_EXP per emulated exp2).

    Args:
        device: a GPU.  block_m, block_n, head_dim: Br, Bc, d.  rescale_rate: the share of rows that
            rescale O at each tile (1: all).
    Returns:
        the share in [0, 1] (0 where the FMA units are already the busier).
    Example:
        >>> round(poly_share("B200"), 3)  # (1024 - 576) / (1024 + 768)
        0.25
    """
    u = _units(gpu(device))
    scores = block_m * block_n
    mufu = scores / u.exp2_per_clk
    base = (FWD_FMA_PER_SCORE * scores + rescale_rate * block_m * head_dim) / u.fma_per_clk
    per_share = scores * POLY_FMA_PER_EXP / u.fma_per_clk
    return min(1.0, max(0.0, (mufu - base) / (mufu + per_share)))


# ----------------------------------------------------------------------------------------------------------------------
# the list scheduler


@dataclass(frozen=True)
class Op:
    """One operation of a CTA: its unit, its duration and the ops it waits for."""

    name: str  # "load K,V", "QKᵀ", "max", "exp", "exp (poly)", "sum", "rescale O", "PV", "O / l", "store O"
    unit: str  # one of UNITS
    tile: int  # the K/V tile j it belongs to (-1: the Q tile's prologue or epilogue)
    lane: str  # who issues it: "producer", "WG1", "WG2", "MMA", "correction"
    cycles: float  # its duration on its unit
    deps: tuple[int, ...]  # indices of the ops it waits for


def list_schedule(ops: list[Op]) -> list[tuple[float, float]]:
    """Place ops on their units: repeatedly start, among the ops whose dependencies are placed, the one that can start
    first (its dependencies' ends and its unit's free time; on a tie the earlier op). One op per unit at a time.

    Args:
        ops: ops whose deps index earlier entries of the list (a dependency graph in program order).
    Returns:
        (start, end) of each op, in cycles.

    Example:
        >>> ops = [Op("a", "mma", 0, "WG1", 2, ()), Op("b", "exp", 0, "WG1", 3, (0,)), Op("c", "mma", 1, "WG1", 2, ())]
        >>> list_schedule(ops)  # c runs on the tensor cores while b waits for a
        [(0.0, 2.0), (2.0, 5.0), (2.0, 4.0)]
    """
    waiting = [len(op.deps) for op in ops]
    users: list[list[int]] = [[] for _ in ops]
    for i, op in enumerate(ops):
        for j in op.deps:
            if j >= i:
                raise ValueError(f"op {i} ({op.name}) depends on op {j}, which does not come before it.")
            users[j].append(i)
    ready_at = [0.0] * len(ops)  # the latest end of each op's dependencies so far
    free = dict.fromkeys(UNITS, 0.0)
    placed: list[tuple[float, float] | None] = [None] * len(ops)
    ready = [i for i, n in enumerate(waiting) if n == 0]
    while ready:
        best = min(ready, key=lambda i: (max(ready_at[i], free[ops[i].unit]), i))
        ready.remove(best)
        start = max(ready_at[best], free[ops[best].unit])
        end = start + ops[best].cycles
        placed[best] = (start, end)
        free[ops[best].unit] = end
        for k in users[best]:
            ready_at[k] = max(ready_at[k], end)
            waiting[k] -= 1
            if waiting[k] == 0:
                ready.append(k)
    if any(p is None for p in placed):
        raise ValueError("the ops' dependencies have a cycle")
    return placed  # type: ignore[return-value]


@dataclass(frozen=True)
class Costs:
    """The durations of one Q tile's ops against one K/V tile, in cycles."""

    load: float  # K_j and V_j through L2 (once per CTA)
    qk: float  # S = Q K^T: the tensor cores, or the shared memory that feeds them, whichever is slower
    pv: float  # O += P V
    pre: float  # row max and S x scale - m (FP32)
    exp: float  # the exp2 left on the MUFU
    poly: float  # the exp2 computed by polynomial on the FP32 units (FA4)
    post: float  # row sum and P's conversion (FP32)
    rescale: float  # O *= alpha (FP32), at the schedule's rescale rate
    mask: float  # the causal mask on a diagonal tile (FP32, one select per score)
    load_q: float  # Q's rows (the prologue)
    epilogue: float  # O / l (FP32)
    store: float  # O written out


def _costs(schedule: str, device: Device, rows: int, block_n: int, d: int, dtype: str, rescale_rate: float,
           share: float) -> Costs:
    u = _units(device)
    b = ELEMENT_BYTES[dtype]
    rate = u.mma_sync_flops_per_clk if schedule == "FA2" else u.tensor_flops_per_clk[dtype]
    if schedule == "FA2" and dtype == "float8_e4m3fn":
        raise ValueError("FA2 has no FP8 path (mma.sync takes fp16 / bf16); choose FA3 or FA4 for float8_e4m3fn.")
    scores = rows * block_n
    l2 = l2_bytes_per_clk(device)
    smem = u.smem_bytes_per_clk
    return Costs(
        load=2 * block_n * d * b / l2,
        qk=max(2 * rows * block_n * d / rate, (rows * d + block_n * d) * b / smem),
        pv=max(2 * rows * block_n * d / rate, block_n * d * b / smem),
        pre=2 * scores / u.fma_per_clk, exp=(1 - share) * scores / u.exp2_per_clk,
        poly=share * scores * POLY_FMA_PER_EXP / u.fma_per_clk, post=1.5 * scores / u.fma_per_clk,
        rescale=rescale_rate * rows * d / u.fma_per_clk, mask=scores / u.fma_per_clk,
        load_q=rows * d * b / l2, epilogue=rows * d / u.fma_per_clk, store=rows * d * b / l2)


@dataclass(frozen=True)
class Shape:
    """How a schedule lays one CTA out: its Q tiles (one per consumer warpgroup) and the rows of each."""

    q_tiles: int  # Q tiles (warpgroups that own rows) per CTA
    rows: int  # rows of Q per Q tile
    lanes: tuple[str, ...]  # the warpgroup of each Q tile


def shape(schedule: str, block_m: int) -> Shape:
    """One CTA of a schedule: FA2 one warpgroup on Br rows, FA3 two consumer warpgroups on Br / 2 rows each, FA4 two
    Q tiles of Br rows each.

    Args:
        schedule: "FA2", "FA3" or "FA4".  block_m: Br.
    Returns:
        Shape: Q tiles per CTA, rows of each, their warpgroups.
    Example:
        >>> shape("FA3", 128).rows, shape("FA4", 128).q_tiles * shape("FA4", 128).rows
        (64, 256)
    """
    if schedule == "FA2":
        return Shape(1, block_m, ("WG1",))
    if schedule == "FA3":
        return Shape(2, block_m // 2, ("WG1", "WG2"))
    if schedule == "FA4":
        return Shape(2, block_m, ("WG1", "WG2"))
    raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}.")


def cta_ops(schedule: str, device: Device | str, *, k_tiles: int, block_m: int = 128, block_n: int = 128,
            head_dim: int = 128, dtype: str = "bfloat16", masked_tiles: int = 0,
            rescale_rate: float | None = None) -> list[Op]:
    """The ops of one CTA over k_tiles K/V tiles, with their dependencies, in the schedule's program order.

    Args:
        schedule: "FA2", "FA3" or "FA4".  device: a GPU (Device or short name).
        k_tiles: K/V tiles the CTA visits.  block_m, block_n, head_dim, dtype: as tile_cycles.
        masked_tiles: how many of the last tiles straddle the causal diagonal (each gets a mask op).
        rescale_rate: FA4's share of (row, tile) updates that rescale O (measured: flashviz.views.pipeline.data);
            None: every tile rescales. FA2 and FA3 always rescale.
    Returns:
        The ops, each depending on earlier ones only.

    Example:
        >>> ops = cta_ops("FA2", "H100", k_tiles=2)
        >>> [o.name for o in ops][7:13]  # tile 1: its max waits for tile 0's P V, O's rescale before its own P V
        ['load K,V', 'QKᵀ', 'max', 'exp', 'sum', 'rescale O']
    """
    device = gpu(device)
    _check(dtype, device)
    if k_tiles < 1:
        raise ValueError(f"k_tiles must be >= 1, got {k_tiles}.")
    lay = shape(schedule, block_m)
    rate = 1.0 if schedule != "FA4" or rescale_rate is None else rescale_rate
    share = poly_share(device, block_m=lay.rows, block_n=block_n, head_dim=head_dim,
                       rescale_rate=rate) if schedule == "FA4" else 0.0
    c = _costs(schedule, device, lay.rows, block_n, head_dim, dtype, rate, share)
    ops: list[Op] = []

    def add(name: str, unit: str, tile: int, lane: str, cycles: float, *deps: int | None) -> int:
        ops.append(Op(name, unit, tile, lane, cycles, tuple(sorted({x for x in deps if x is not None}))))
        return len(ops) - 1

    serial = schedule == "FA2"
    loader = "WG1" if serial else "producer"
    mma_lane = "MMA" if schedule == "FA4" else None
    load_q = [add("load Q", "load", -1, loader, c.load_q) for _ in range(lay.q_tiles)]
    loads: list[int] = []
    qk: dict[tuple[int, int], int] = {}
    pv: dict[tuple[int, int], int] = {}
    post: dict[tuple[int, int], int] = {}
    last_rescale: dict[int, int] = {}
    for j in range(k_tiles):
        free_buffer = [pv.get((q, j - STAGES)) for q in range(lay.q_tiles)]  # the buffer K_j, V_j overwrite
        prev_load = loads[-1] if loads else None
        if serial:  # FA2 loads the next tile while this one computes, from the same warps
            loads.append(add("load K,V", "load", j, loader, c.load, prev_load, qk.get((0, j - 1)), *free_buffer))
        else:
            loads.append(add("load K,V", "load", j, loader, c.load, prev_load, *free_buffer))
        for q in range(lay.q_tiles):
            lane = lay.lanes[q]
            masked = j >= k_tiles - masked_tiles
            # S_j: after Q and K_j are in; FA2 waits for its own previous tile to finish; FA3 / FA4 issue S_{j}
            # while the softmax of tile j - 1 runs, but hold at most two S tiles (S_j needs P V of j - 2 done)
            qk_deps = [load_q[q], loads[j], qk.get((q, j - 1))]
            qk_deps += [pv.get((q, j - 1))] if serial else [pv.get((q, j - 2))]
            qk[q, j] = add("QKᵀ", "mma", j, mma_lane or lane, c.qk, *qk_deps)
            pre_deps = [qk[q, j], post.get((q, j - 1))]
            if schedule != "FA4":  # the softmax warpgroup rescales O itself before its next max (FA2, FA3)
                pre_deps.append(last_rescale.get(q))
            m = add("mask", "fma", j, lane, c.mask, qk[q, j]) if masked else None
            pre = add("max", "fma", j, lane, c.pre, *pre_deps, m)
            e = add("exp", "exp", j, lane, c.exp, pre)
            p = add("exp (poly)", "fma", j, lane, c.poly, pre) if c.poly > 0 else None
            post[q, j] = add("sum", "fma", j, lane, c.post, e, p)
            r = None
            if c.rescale > 0 and j > 0:
                r = add("rescale O", "fma", j, "correction" if schedule == "FA4" else lane, c.rescale,
                        pre, pv.get((q, j - 1)), post[q, j] if serial else None)  # FA2: after its sum
                last_rescale[q] = r
            pv_deps = [post[q, j], r, loads[j], pv.get((q, j - 1))]
            if schedule == "FA3":  # ping-pong: WG2's GEMMs of tile j follow WG1's (named barriers, FA3 3.1)
                pv_deps.append(pv.get((q - 1, j)) if q else pv.get((lay.q_tiles - 1, j - 1)))
            pv[q, j] = add("PV", "mma", j, mma_lane or lane, c.pv, *pv_deps)
    for q in range(lay.q_tiles):
        lane = "correction" if schedule == "FA4" else lay.lanes[q]
        ep = add("O / l", "fma", -1, lane, c.epilogue, pv[q, k_tiles - 1])
        add("store O", "load", -1, lane if serial else "producer", c.store, ep)
    return ops


# ----------------------------------------------------------------------------------------------------------------------
# a whole attention call


@dataclass(frozen=True)
class Prediction:
    """simulate's answer: the predicted throughput and one CTA's Gantt."""

    schedule: str  # "FA2", "FA3" or "FA4"
    device: str  # the GPU's name
    dtype: str  # the MMA's dtype
    seq_len: int  # N
    head_dim: int  # d
    causal: bool  # the causal mask
    tflops: float  # predicted TFLOP/s (4 N^2 d per head, half of it when causal, as the papers count)
    utilisation: float  # tflops over the GPU's dense tensor peak at dtype (the datasheet's)
    ops: pd.DataFrame  # the longest CTA's Gantt: op, unit, tile, lane, start, end (cycles)
    cta_cycles: float  # that CTA's cycles
    programs: int  # CTAs launched (batch x heads x Q blocks)
    sms: int  # SMs they spread over
    waves: int  # ceil(programs / SMs)
    rows_per_cta: int  # rows of Q per CTA
    busy: dict[str, float]  # each unit's busy share of the longest CTA's time
    rescale_rate: float | None  # the rate FA4 ran at (None: every tile rescales)
    poly_share: float  # the share of exp2 by polynomial (0 outside FA4)


def _gantt(ops: list[Op], placed: list[tuple[float, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"op": o.name, "unit": o.unit, "tile": o.tile, "lane": o.lane, "start": s, "end": e}
                         for o, (s, e) in zip(ops, placed, strict=True)])


def simulate(schedule: str, device: Device | str, *, seq_len: int, head_dim: int = 128, dtype: str = "bfloat16",
             causal: bool = False, block_m: int = 128, block_n: int = 128, rescale_rate: float | None = None,
             tokens: int = TOKENS, hidden: int = HIDDEN) -> Prediction:
    """Predict one schedule's forward throughput on a GPU: each CTA's ops list-scheduled on the SM's units, the CTAs
    spread over the SMs (longest first, each SM taking the next CTA when it finishes one: wave quantisation), FLOPs
    counted as the papers do.

    Args:
        schedule: "FA2", "FA3" or "FA4".  device: a GPU (Device or "A100", "H100", "H200", "B200").
        seq_len: N.  head_dim: d.  dtype: "float16", "bfloat16" or "float8_e4m3fn".  causal: the causal mask.
        block_m, block_n: Br, Bc (FA3 splits Br between its two warpgroups; FA4 runs two Q tiles of Br rows).
        rescale_rate: FA4's measured share of row updates that rescale O (None: all of them).
        tokens, hidden: batch x N and heads x d of the benchmark (the papers': 16k and 2,048).
    Returns:
        Prediction: .tflops, .utilisation, .ops (the longest CTA's Gantt rows: op, unit, tile, lane, start, end), and
        the CTA's cycles, programs, SMs, waves and each unit's busy share.

    Example:
        >>> p = simulate("FA3", "H100", seq_len=1024, head_dim=128)  # 16 x 16 heads x 8 Q blocks
        >>> p.programs, p.waves, sorted(set(p.ops["unit"]))
        (2048, 16, ['exp', 'fma', 'load', 'mma'])
    """
    device = gpu(device)
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"seq_len must be a positive int, got {seq_len!r}.")
    if head_dim < 1 or hidden % head_dim:
        raise ValueError(f"head_dim must divide hidden = {hidden}, got {head_dim}.")
    u = _units(device)
    lay = shape(schedule, block_m)
    rows = lay.q_tiles * lay.rows
    batch = max(1, tokens // seq_len)
    heads = hidden // head_dim
    q_blocks = math.ceil(seq_len / rows)
    k_all = math.ceil(seq_len / block_n)

    runs: dict[tuple[int, int], tuple[float, list[Op], list[tuple[float, float]]]] = {}

    def run(k: int, masked: int) -> float:
        if (k, masked) not in runs:
            ops = cta_ops(schedule, device, k_tiles=k, block_m=block_m, block_n=block_n, head_dim=head_dim,
                          dtype=dtype, masked_tiles=masked, rescale_rate=rescale_rate)
            placed = list_schedule(ops)
            runs[k, masked] = (max(e for _, e in placed), ops, placed)
        return runs[k, masked][0]

    cta_times = []
    for i in range(q_blocks):
        if causal:  # keys up to the block's last row; the tiles that cross the diagonal are masked
            last_row = min(seq_len, (i + 1) * rows) - 1
            k = last_row // block_n + 1
            masked = k - (i * rows) // block_n
            cta_times.append(run(k, masked))
        else:
            cta_times.append(run(k_all, 0))
    programs = batch * heads * q_blocks
    sm_free = [0.0] * u.sms
    for t in sorted(cta_times * (batch * heads), reverse=True):  # longest first onto the SM free soonest
        heapq.heapreplace(sm_free, sm_free[0] + t)
    cycles = max(sm_free)
    flops = 4 * seq_len * seq_len * head_dim * batch * heads * (0.5 if causal else 1.0)
    tflops = flops / (cycles / u.clock_hz) / 1e12
    longest = max(runs, key=lambda key: runs[key][0])
    span, ops, placed = runs[longest]
    busy = {unit: sum(e - s for o, (s, e) in zip(ops, placed, strict=True) if o.unit == unit) / span
            for unit in UNITS}
    share = poly_share(device, block_m=lay.rows, block_n=block_n, head_dim=head_dim,
                       rescale_rate=1.0 if rescale_rate is None else rescale_rate) if schedule == "FA4" else 0.0
    return Prediction(schedule, device.name, dtype, seq_len, head_dim, causal, tflops,
                      tflops * 1e12 / device.peak(dtype), _gantt(ops, placed), span, programs, u.sms,
                      math.ceil(programs / u.sms), rows, busy, rescale_rate, share)


def wave_efficiency(programs: int, sms: int) -> float:
    """The share of SM time a launch of equal programs uses: programs / (waves x SMs), waves = ceil(programs / SMs).

    Args:
        programs: CTAs launched (>= 1).  sms: SMs (>= 1).
    Returns:
        the share in (0, 1].
    Example:
        >>> wave_efficiency(132, 132), round(wave_efficiency(133, 132), 3)  # one program past a wave: half idle
        (1.0, 0.504)
    """
    if programs < 1 or sms < 1:
        raise ValueError(f"programs and sms must be >= 1, got {programs} and {sms}.")
    return programs / (math.ceil(programs / sms) * sms)
