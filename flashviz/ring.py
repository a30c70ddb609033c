"""Ring attention (context parallelism): the sequence dealt to W ranks, K/V shards sent round a ring, partials merged.

References:
    Ring Attention with Blockwise Transformers (Liu, Zaharia, Abbeel, 2023): each of W devices keeps one block of the
        queries; the K/V blocks travel round a ring of devices, the transfer of the next block overlapped with the
        compute on the current one, and the partial results are combined by their logsumexp.
    Flash-Decoding (Dao et al., 2023): the exact merge of partial outputs, O = sum_s exp(L_s - L) O_s with
        L = log sum_s exp(L_s); the ring merges its steps with the same code (flashviz.core.decode.merge_partials).
    ring-flash-attention (Zhu, 2024): ring_flash_attn (contiguous shards), zigzag_ring_flash_attn (2W chunks, rank r
        holding chunks r and 2W-1-r, which balances causal work), stripe_flash_attn; the backward sends K, V and the
        dK, dV accumulators round the ring, each step's gradients computed from the merged O and the global L.
    Striped Attention (Brandon et al., 2023): position i on rank i mod W, balanced causal work.
    Megatron-LM's context parallelism and torch.distributed.tensor.experimental.context_parallel use the zigzag
        ("load-balanced") sharding for causal attention.

Legend: W world size (ranks), r this rank, t ring step (0 .. W-1), B batch, H query heads, H_kv K/V heads (dividing H),
N the whole sequence, n = N / W positions per rank, d head dimension. At step t rank r holds the K/V shard of rank
kv_rank = (r - t) mod W: it computes its queries against those keys with flashviz's tiled kernel (a partial O_t and
its logsumexp L_t), while the shard travels on to rank r + 1 and the next one arrives from rank r - 1
(torch.distributed.batch_isend_irecv, posted before the compute and waited after it). Causal masks use the global
positions of the layout (`positions`): a step whose keys all lie after the rank's queries is skipped whole, and inside
a step the kernel's tile schedule skips the tiles no query sees.

Two halves: the pure model (`positions`, `ring_schedule`: which tiles each rank computes at each step and the bytes
it sends, without torch.distributed or a process), and the runtime (`shard` / `unshard`, `ring_attention` on an
initialised process group, `run_ring` which starts the W processes on this machine). The step events of a real run
agree with the schedule tile for tile and byte for byte (tests/test_ring_processes.py).
"""

from __future__ import annotations

import io
import math
import os
import socket
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing import connection as mp_connection

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from flashviz.core.backward import DOUBLE_BACKWARD_MESSAGE, tiled_backward
from flashviz.core.decode import merge_partials
from flashviz.core.flash import build_schedule, tiled_forward
from flashviz.core.tiling import TileSchedule
from flashviz.core.validate import AttentionConfig, tiled_config
from flashviz.vocab import DTYPE_BYTES, FULL, PARTIAL, SKIPPED

CONTIGUOUS, ZIGZAG, STRIPED = "contiguous", "zigzag", "striped"
LAYOUTS = (CONTIGUOUS, ZIGZAG, STRIPED)  # how the N positions are dealt to the W ranks (see positions)
FORWARD, BACKWARD = "forward", "backward"  # the phase of a ring step
PHASES = (FORWARD, BACKWARD)
BACKENDS = ("gloo", "nccl")  # gloo: CPU tensors; nccl: one CUDA device per rank (cuda:rank)
FAIL_MODES = ("raise", "exit", "hang")  # run_ring's fail_rank: what the chosen rank does before its first ring step
FAIL_EXIT_CODE = 3  # the exit code of a rank made to die with fail_rank=(rank, "exit")
# FLOPs per computed score element: the forward's two matmuls (S = Q K^T, O = P V) at 2 FLOPs per multiply-add
# per head dimension; the backward's five (S recomputed, dV, dP, dQ, dK), 2.5x the forward (FA2, Section 4)
FORWARD_FLOPS_PER_ELEMENT = 2 * 2
BACKWARD_FLOPS_PER_ELEMENT = 5 * 2
FAILURE_GRACE_S = 1.0  # after a rank fails, how long the others' reports are still read (to name the first cause)
POLL_S = 0.1  # the longest the parent waits for a message before it looks at the clock again
STOP_GRACE_S = 5.0  # how long a terminated rank has to exit before it is killed
# intra-op threads of each rank, as torchrun sets OMP_NUM_THREADS=1: W ranks on W cores. On a shared machine more
# threads per process than cores free made one rank's forward + backward 15x slower (N = 2048, 2 threads, 2 cores)
THREADS_PER_RANK = 1
TAG_KV, TAG_KV_OWNER, TAG_DKV, TAG_DKV_OWNER = 0, 1, 2, 3  # message tags: the two transfers may be in flight at once


# ----------------------------------------------------------------------------------------------------------------------
# the layouts: which global positions each rank holds (pure: ints in, ints out)


def check_layout(n: int, world: int, layout: str) -> int:
    """Validate a sharding of N positions over W ranks; return n = N / W, the positions per rank.

    Example:
        >>> check_layout(48, 4, "zigzag")
        12
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}. contiguous deals W equal blocks, zigzag "
                         "2W chunks (rank r holds chunks r and 2W-1-r), striped position i to rank i mod W.")
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ValueError(f"world must be an integer >= 1 (the number of ranks, one process each), got {world!r}.")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"N must be a positive integer (the sequence length), got {n!r}.")
    unit = 2 * world if layout == ZIGZAG else world
    if n % unit:
        why = f"2W = {unit}: zigzag cuts the sequence into 2W equal chunks" if layout == ZIGZAG else f"W = {unit}"
        raise ValueError(f"N = {n} is not divisible by {why}, so the ranks cannot hold equal shards. Pad the sequence "
                         f"to N = {math.ceil(n / unit) * unit} (or drop the last {n % unit} position"
                         f"{'s' if n % unit > 1 else ''}: N = {n // unit * unit}), or pick a world size that divides N"
                         f"{' / 2' if layout == ZIGZAG else ''}.")
    return n // world


def global_position(i, rank: int, n_local: int, world: int, layout: str):
    """The global position of local position i (an int or an integer tensor) of `rank`'s shard.

    contiguous: rank r holds r n .. r n + n - 1.  striped: r + W i.  zigzag (chunks of c = n / 2): the first half of
    the shard is chunk r, the second chunk 2W-1-r. Positions increase along every shard, so a block of local positions
    spans [its first position, its last position]. Plain arithmetic, so it works on index tensors (as a mask_mod's).

    Example:
        >>> global_position(torch.arange(4), 0, 4, 2, "zigzag").tolist(), global_position(3, 1, 4, 2, "striped")
        ([0, 1, 6, 7], 7)
    """
    if layout == CONTIGUOUS:
        return rank * n_local + i
    if layout == STRIPED:
        return rank + world * i
    c = n_local // 2  # zigzag chunk length
    return rank * c + i + (i >= c) * (2 * (world - 1 - rank) * c)  # chunk r, then chunk 2W-1-r


def positions(n: int, world: int, rank: int, layout: str) -> tuple[int, ...]:
    """The global positions rank `rank` holds, in the order of its shard.

    Example:
        >>> positions(8, 2, 0, "zigzag"), positions(8, 2, 1, "zigzag")  # chunks of 2: rank 0 holds 0 and 3
        ((0, 1, 6, 7), (2, 3, 4, 5))
        >>> positions(8, 2, 1, "striped"), positions(8, 2, 1, "contiguous")
        ((1, 3, 5, 7), (4, 5, 6, 7))
    """
    n_local = check_layout(n, world, layout)
    if not 0 <= rank < world:
        raise ValueError(f"rank must be in 0 .. {world - 1} for a world of {world}, got {rank}.")
    return tuple(int(global_position(i, rank, n_local, world, layout)) for i in range(n_local))


def owner_rank(position: int, n: int, world: int, layout: str) -> int:
    """The rank that holds a global position (the inverse of positions), for drawing the N x N map by rank.

    Example:
        >>> [owner_rank(p, 8, 2, "zigzag") for p in range(8)]
        [0, 0, 1, 1, 1, 1, 0, 0]
    """
    n_local = check_layout(n, world, layout)
    if layout == CONTIGUOUS:
        return position // n_local
    if layout == STRIPED:
        return position % world
    chunk = position // (n_local // 2)
    return chunk if chunk < world else 2 * world - 1 - chunk


def ring_step(query_position: int, key_position: int, n: int, world: int, layout: str) -> int:
    """The ring step at which the score of (query, key) is computed: its query's rank holds its key's shard at step
    (rank of the query - rank of the key) mod W. Colours the N x N score map by step.

    Example:
        >>> [[ring_step(i, j, 4, 2, "contiguous") for j in range(4)] for i in range(4)]
        [[0, 0, 1, 1], [0, 0, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0]]
    """
    return (owner_rank(query_position, n, world, layout) - owner_rank(key_position, n, world, layout)) % world


# ----------------------------------------------------------------------------------------------------------------------
# the model: which tiles each rank computes at each ring step, and the bytes it sends (pure)


@dataclass(frozen=True)
class RingStepPlan:
    """One ring step of one rank, as the model predicts it (ring_schedule)."""

    rank: int  # r: the rank whose queries are computed
    step: int  # t: the ring step, 0 .. W-1
    kv_rank: int  # whose K/V shard rank r holds at step t: (r - t) mod W
    phase: str  # "forward" or "backward"
    tiles_computed: int  # tiles of the rank's n x n scores against those keys that are loaded and computed
    tiles_partial: int  # of them, those computed with an element mask (some scores hidden by causality)
    tiles_skipped: int  # tiles no query of the rank sees (never loaded); every tile of a step skipped whole
    flops: int  # FLOPs of the computed tiles: 4 B H d (forward) or 10 B H d (backward) per computed score element
    bytes_sent: int  # bytes this rank sends at this step: its K/V shard (not at the last step) and, in the
    #                  backward, the dK, dV accumulators (in the accumulator dtype) at every step when W > 1
    statuses: tuple[tuple[str, ...], ...]  # [q_block][k_block] "full" / "partial" / "skipped" of the step's tiles


@dataclass(frozen=True)
class RingSchedule:
    """The model of a ring: every (phase, rank, step) with its tiles and bytes. Compare with a run's events."""

    n: int  # N, the whole sequence
    world: int  # W
    layout: str  # one of LAYOUTS
    block_size: int  # Br = Bc of the tiled kernel on each rank
    causal: bool  # top-left causal over the global positions
    steps: tuple[RingStepPlan, ...]  # forward steps by (rank, step), then the backward's (if asked for)

    def of(self, phase: str = FORWARD) -> tuple[RingStepPlan, ...]:
        """The steps of one phase, by (rank, step)."""
        return tuple(s for s in self.steps if s.phase == phase)

    def tiles_per_rank(self, phase: str = FORWARD) -> tuple[int, ...]:
        """Computed tiles of each rank over the whole ring (the rank's work)."""
        return tiles_per_rank(self.of(phase), self.world)

    def imbalance(self, phase: str = FORWARD) -> float:
        """max / mean of the ranks' computed tiles: 1 is balanced; the ring's time is the busiest rank's."""
        return imbalance(self.tiles_per_rank(phase))


def tiles_per_rank(steps: Sequence[RingStepPlan | RingStepEvent], world: int) -> tuple[int, ...]:
    """Computed tiles per rank summed over the given steps (plans or events).

    Example:
        >>> tiles_per_rank(ring_schedule(16, 2, "contiguous", 4, causal=True).steps, 2)
        (3, 7)
    """
    work = [0] * world
    for s in steps:
        work[s.rank] += s.tiles_computed
    return tuple(work)


def imbalance(work: Sequence[float]) -> float:
    """max / mean of per-rank work (1.0 = every rank equally busy; inf if no rank computes anything).

    Example:
        >>> imbalance([10, 26, 42, 58])  # contiguous causal, W = 4, 4 x 4 tiles per step: 58 / 34
        1.7058823529411764
    """
    mean = sum(work) / len(work)
    return max(work) / mean if mean else math.inf


def shard_bytes(batch: int, heads_kv: int, n: int, world: int, head_dim: int, dtype: str = "float32") -> int:
    """Bytes of one rank's K and V shards: 2 B H_kv (N / W) d elements; each rank sends it W - 1 times a forward.

    Example:
        >>> shard_bytes(1, 8, 4096, 4, 128, "bfloat16")  # K and V, 1024 positions each, bf16
        4194304
    """
    return 2 * batch * heads_kv * (n // world) * head_dim * DTYPE_BYTES[dtype]


def accumulator_name(dtype: str) -> str:
    """The dtype the kernels accumulate in (float64 for float64, else float32): the dK, dV that travel the ring.

    Example:
        >>> accumulator_name("bfloat16"), accumulator_name("float64")
        ('float32', 'float64')
    """
    return "float64" if dtype == "float64" else "float32"


def step_statuses(n: int, world: int, layout: str, block_size: int, causal: bool, rank: int,
                  kv_rank: int) -> tuple[tuple[str, ...], ...]:
    """Statuses of the tiles of rank's n x n scores against kv_rank's keys: [q_block][k_block].

    A tile of local query rows [q0, q1) and key columns [k0, k1) spans global positions [first, last] on each side
    (positions increase along a shard), so under causal it is skipped when its first key comes after its last query,
    full when its last key comes no later than its first query, partial otherwise: the corner rule of
    core/tiling.py on global positions. Without causal every tile is full.

    Example:
        >>> step_statuses(8, 2, "zigzag", 2, True, rank=0, kv_rank=1)  # rank 0 holds 0 1 6 7, rank 1 holds 2 3 4 5
        (('skipped', 'skipped'), ('full', 'full'))
    """
    n_local = check_layout(n, world, layout)
    T = -(-n_local // block_size)  # Tr = Tc tiles per side of the local n x n
    bounds = [(b * block_size, min((b + 1) * block_size, n_local) - 1) for b in range(T)]
    if not causal:
        return tuple((FULL,) * T for _ in range(T))

    def span(r: int, first: int, last: int) -> tuple[int, int]:
        return (global_position(first, r, n_local, world, layout), global_position(last, r, n_local, world, layout))

    rows = []
    for qa, qb in bounds:
        q_first, q_last = span(rank, qa, qb)
        row = []
        for ka, kb in bounds:
            k_first, k_last = span(kv_rank, ka, kb)
            row.append(SKIPPED if k_first > q_last else FULL if k_last <= q_first else PARTIAL)
        rows.append(tuple(row))
    return tuple(rows)


def _area(statuses: tuple[tuple[str, ...], ...], n_local: int, block_size: int) -> int:
    """Score elements in the computed tiles (rows x columns each, ragged last blocks included)."""
    size = [min(block_size, n_local - b * block_size) for b in range(len(statuses))]
    return sum(size[i] * size[j] for i, row in enumerate(statuses) for j, s in enumerate(row) if s != SKIPPED)


def ring_schedule(n: int, world: int, layout: str = CONTIGUOUS, block_size: int = 64, causal: bool = False, *,
                  batch: int = 1, heads: int = 1, heads_kv: int | None = None, head_dim: int = 64,
                  dtype: str = "float32", backward: bool = False) -> RingSchedule:
    """The model of a ring run: for every rank and step, whose K/V it holds, its tiles and the bytes it sends.

    Args:
        n: N, the whole sequence (divisible by W, or 2W for zigzag).  world: W.  layout: one of LAYOUTS.
        block_size: Br = Bc of the tiled kernel each rank runs.  causal: top-left causal over global positions.
        batch, heads, heads_kv, head_dim, dtype: B, H, H_kv (default H), d and the inputs' dtype name, for FLOPs
            and bytes.
        backward: also the backward's steps (K/V sent W - 1 times, dK/dV accumulators W times when W > 1).
    Returns:
        A RingSchedule; .steps are RingStepPlan, forward then backward, each by (rank, step).

    Example:
        >>> s = ring_schedule(64, 4, "contiguous", 4, causal=True)
        >>> s.tiles_per_rank(), round(s.imbalance(), 3)  # rank r computes r + 1 steps: the last rank the most
        ((10, 26, 42, 58), 1.706)
        >>> z = ring_schedule(64, 4, "zigzag", 4, causal=True)
        >>> z.tiles_per_rank(), z.imbalance()  # chunks r and 2W-1-r: every rank the same work
        ((34, 34, 34, 34), 1.0)
        >>> [p.kv_rank for p in s.of() if p.rank == 1]  # whose K/V rank 1 holds at steps 0, 1, 2, 3
        [1, 0, 3, 2]
    """
    n_local = check_layout(n, world, layout)
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive integer (Br = Bc of the tiled kernel), got {block_size!r}.")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {tuple(DTYPE_BYTES)}, got {dtype!r}.")
    heads_kv = heads if heads_kv is None else heads_kv
    kv_bytes = shard_bytes(batch, heads_kv, n, world, head_dim, dtype)
    dkv_bytes = shard_bytes(batch, heads_kv, n, world, head_dim, accumulator_name(dtype))
    steps = []
    for phase in PHASES if backward else (FORWARD,):
        per_element = FORWARD_FLOPS_PER_ELEMENT if phase == FORWARD else BACKWARD_FLOPS_PER_ELEMENT
        for rank in range(world):
            for t in range(world):
                kv_rank = (rank - t) % world
                statuses = step_statuses(n, world, layout, block_size, causal, rank, kv_rank)
                flat = [s for row in statuses for s in row]
                sent = kv_bytes if t < world - 1 else 0
                if phase == BACKWARD and world > 1:
                    sent += dkv_bytes
                steps.append(RingStepPlan(
                    rank, t, kv_rank, phase, sum(s != SKIPPED for s in flat), flat.count(PARTIAL),
                    flat.count(SKIPPED), per_element * batch * heads * head_dim * _area(statuses, n_local, block_size),
                    sent, statuses))
    return RingSchedule(n, world, layout, block_size, causal, tuple(steps))


# ----------------------------------------------------------------------------------------------------------------------
# sharding


def _index(n: int, world: int, rank: int, layout: str, device: torch.device) -> torch.Tensor:
    return torch.tensor(positions(n, world, rank, layout), dtype=torch.long, device=device)  # (n,)


def shard(x: torch.Tensor, world: int, rank: int, layout: str) -> torch.Tensor:
    """Rank `rank`'s shard of a (B, H, N, d) tensor along the sequence: (B, H, N / W, d), in the order of positions.

    Example:
        >>> x = torch.arange(8.0).view(1, 1, 8, 1)
        >>> shard(x, 2, 0, "zigzag").flatten().tolist()
        [0.0, 1.0, 6.0, 7.0]
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 3:
        raise ValueError(f"shard takes a (B, H, N, ...) tensor, sharded along N (dim 2), got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}.")
    n = x.shape[2]
    if layout == CONTIGUOUS:
        n_local = check_layout(n, world, layout)
        if not 0 <= rank < world:
            raise ValueError(f"rank must be in 0 .. {world - 1} for a world of {world}, got {rank}.")
        return x[:, :, rank * n_local:(rank + 1) * n_local]  # (B, H, n, ...) a view
    return x.index_select(2, _index(n, world, rank, layout, x.device))  # (B, H, n, ...)


def unshard(shards: Sequence[torch.Tensor], layout: str) -> torch.Tensor:
    """The inverse of shard: rank 0's, 1's, ... shards (B, H, N / W, d) back into (B, H, N, d).

    Example:
        >>> x = torch.randn(2, 3, 12, 4)
        >>> torch.equal(unshard([shard(x, 3, r, "striped") for r in range(3)], "striped"), x)
        True
    """
    world = len(shards)
    if world < 1:
        raise ValueError("unshard needs the shards of every rank (at least one), got none.")
    shapes = {tuple(s.shape) for s in shards}
    if len(shapes) != 1:
        raise ValueError(f"every rank's shard must have the same shape, got {sorted(shapes)}.")
    n = shards[0].shape[2] * world
    check_layout(n, world, layout)
    if layout == CONTIGUOUS:
        return torch.cat(list(shards), dim=2)  # (B, H, N, ...)
    order = torch.cat([_index(n, world, r, layout, shards[0].device) for r in range(world)])  # (N,) position of row
    out = torch.empty(*shards[0].shape[:2], n, *shards[0].shape[3:], dtype=shards[0].dtype, device=shards[0].device)
    out.index_copy_(2, order, torch.cat(list(shards), dim=2))  # (B, H, N, ...)
    return out


# ----------------------------------------------------------------------------------------------------------------------
# the ring on an initialised process group


@dataclass(frozen=True)
class RingStepEvent:
    """What a rank reports after each ring step (on_step), measured in its own process."""

    rank: int  # r
    step: int  # t, 0 .. W-1
    kv_rank: int  # whose K/V shard the rank held: read from the owner tag that travels with the shard
    phase: str  # "forward" or "backward"
    world: int  # W
    tiles_computed: int  # tiles the kernel computed (full + partial), from the kernel's own tile schedule
    tiles_partial: int  # of them, computed with an element mask
    tiles_skipped: int  # tiles never loaded; all of them when the step is skipped whole
    flops: int  # FLOPs of the computed tiles (4 B H d per score element forward, 10 B H d backward)
    bytes_sent: int  # bytes of K/V (and dK/dV in the backward) this rank sent at this step; the 8-byte owner tags
    #                  that travel with them are not counted
    bytes_received: int  # bytes it received at this step (the same in a ring)
    start_s: float  # time.time() when the step began: one clock for all the processes of a machine
    compute_s: float  # seconds of the step's kernel (and its merge, or its dK/dV accumulation)
    comm_s: float  # seconds spent waiting for the step's transfers after the compute: the transfer time not
    #                hidden behind the compute
    lse: tuple[float, ...]  # forward: the step's partial logsumexp L_t of each local query row, batch 0, query head 0
    #                         (natural log; -inf where none of the step's keys is visible); () in the backward


StepCallback = Callable[[RingStepEvent], None]


@dataclass
class _Ring:
    """One ring_attention call's settings and the per-step kernel plans the backward reuses."""

    group: object  # the process group (None: the default one)
    rank: int  # r in the group
    world: int  # W
    layout: str  # how the sequence was sharded, one of LAYOUTS
    causal: bool  # top-left causal over the global positions
    block_size: int  # Br = Bc of the tiled kernel
    scale: float  # softmax scale
    on_step: StepCallback | None  # called with each step's RingStepEvent
    plans: dict[int, tuple[AttentionConfig, TileSchedule] | None]  # kv_rank -> the forward's kernel plan of that
    #                                                                step (None: skipped whole), reused backward

    def peer(self, offset: int) -> int:
        """The group rank r + offset (mod W)."""
        return (self.rank + offset) % self.world


def _exchange(ring: _Ring, sends: Sequence[tuple[torch.Tensor, int]], recvs: Sequence[tuple[torch.Tensor, int]]):
    """Post (tensor, tag) sends to rank r + 1 and receives from rank r - 1 in one batch_isend_irecv; the requests."""
    ops = [dist.P2POp(dist.isend, t, group=ring.group, tag=tag, group_peer=ring.peer(1)) for t, tag in sends]
    ops += [dist.P2POp(dist.irecv, t, group=ring.group, tag=tag, group_peer=ring.peer(-1)) for t, tag in recvs]
    return dist.batch_isend_irecv(ops)


def _wait(requests) -> float:
    """Wait for posted transfers; the seconds it took."""
    t0 = time.perf_counter()
    for r in requests or ():
        r.wait()
    return time.perf_counter() - t0


def _ring_causal(ring: _Ring, n_local: int, kv_rank: int):
    """The step's causal mask on global positions, as a FlexAttention mask_mod: key position <= query position."""
    rank, world, layout = ring.rank, ring.world, ring.layout

    def ring_causal(b, h, q_idx, kv_idx):
        return (global_position(kv_idx, kv_rank, n_local, world, layout)
                <= global_position(q_idx, rank, n_local, world, layout))

    return ring_causal


def _plan(ring: _Ring, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv_rank: int):
    """The kernel's config and tile schedule for the step holding kv_rank's shard, or None when no query sees it.

    The step's kind follows from the global positions: no causal mask, or every key before every query: no mask;
    the rank's own shard: plain causal (the same positions on both sides, increasing); every key after every query:
    skipped whole; otherwise the global-position mask_mod, classified tile by tile by the kernel's schedule.
    """
    n_local = q.shape[2]
    kwargs = {"block_size": ring.block_size, "scale": ring.scale, "loop_order": "q_outer"}
    if ring.causal:
        pos = lambda r, i: global_position(i, r, n_local, ring.world, ring.layout)  # noqa: E731
        if pos(kv_rank, 0) > pos(ring.rank, n_local - 1):
            return None  # every key after every query: skipped whole
        if kv_rank == ring.rank:
            kwargs["causal"] = True
        elif pos(kv_rank, n_local - 1) > pos(ring.rank, 0):
            kwargs["mask_mod"] = _ring_causal(ring, n_local, kv_rank)
    config = tiled_config(q, k, v, **kwargs)
    return config, build_schedule(config, config.loop_order)


def _counts(plan, n_local: int, block_size: int) -> tuple[int, int, int, int]:
    """(computed, partial, skipped, computed score elements) of a step's kernel schedule."""
    if plan is None:
        T = -(-n_local // block_size)
        return 0, 0, T * T, 0
    schedule: TileSchedule = plan[1]
    counts = schedule.counts()
    area = sum(t.rows * t.cols for t in schedule.computed())
    return counts[FULL] + counts[PARTIAL], counts[PARTIAL], counts[SKIPPED], area


def _emit(ring: _Ring, phase: str, t: int, kv_rank: int, plan, q: torch.Tensor, sent: int, start: float,
          compute_s: float, comm_s: float, L_t: torch.Tensor | None) -> None:
    if ring.on_step is None:
        return
    B, H, n_local, d = q.shape
    computed, partial, skipped, area = _counts(plan, n_local, ring.block_size)
    per_element = FORWARD_FLOPS_PER_ELEMENT if phase == FORWARD else BACKWARD_FLOPS_PER_ELEMENT
    lse: tuple[float, ...] = ()
    if phase == FORWARD:
        lse = (float("-inf"),) * n_local if L_t is None or B * H == 0 else tuple(L_t[0, 0].double().cpu().tolist())
    ring.on_step(RingStepEvent(ring.rank, t, kv_rank, phase, ring.world, computed, partial, skipped,
                               per_element * B * H * d * area, sent, sent, start, compute_s, comm_s, lse))


def _nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _check_owner(owner: torch.Tensor, expected: int, what: str, ring: _Ring, t: int) -> int:
    got = int(owner.item())
    if got != expected:
        raise RuntimeError(f"rank {ring.rank} received the {what} of rank {got} at ring step {t}, expected rank "
                           f"{expected}: the ranks are out of step (did every rank of the group call ring_attention "
                           "with the same settings?).")
    return got


def _ring_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ring: _Ring) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward ring: O (B, H, n, d) in q's dtype and L (B, H, n) in the accumulator dtype."""
    B, H, n_local, d = q.shape
    W = ring.world
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    kv = torch.stack((k, v))  # (2, B, H_kv, n, d): K and V travel as one message
    owner = torch.full((1,), ring.rank, dtype=torch.long, device=q.device)  # whose shard kv is
    O = L = None  # (B H, n, d), (B H, n) the merged output and logsumexp so far, in acc
    for t in range(W):
        start, t0 = time.time(), time.perf_counter()
        kv_rank = _check_owner(owner, (ring.rank - t) % W, "K/V shard", ring, t)
        requests, sent = None, 0
        if t < W - 1:  # post the next shard's transfer before the compute: it travels while the kernel runs
            kv_next, owner_next = torch.empty_like(kv), torch.empty_like(owner)
            requests = _exchange(ring, [(kv, TAG_KV), (owner, TAG_KV_OWNER)],
                                 [(kv_next, TAG_KV), (owner_next, TAG_KV_OWNER)])
            sent = _nbytes(kv)
        plan = ring.plans[kv_rank] = _plan(ring, q, kv[0], kv[1], kv_rank)
        L_t = None
        if plan is not None:
            O_t, L_t = tiled_forward(q, kv[0], kv[1], plan[0], schedule=plan[1])  # (B, H, n, d) q.dtype, (B, H, n)
            O_t, L_flat = O_t.reshape(B * H, 1, n_local, d).to(acc), L_t.reshape(B * H, 1, n_local)
            if O is None:
                O, L = O_t[:, 0], L_flat[:, 0]  # (B H, n, d), (B H, n)
            else:  # the Flash-Decoding merge of the running result and this step's partial, in fp32
                O, L = merge_partials(torch.stack((O, O_t[:, 0])), torch.stack((L, L_flat[:, 0])))
        compute_s = time.perf_counter() - t0
        comm_s = _wait(requests)
        if requests is not None:
            kv, owner = kv_next, owner_next
        _emit(ring, FORWARD, t, kv_rank, plan, q, sent, start, compute_s, comm_s, L_t)
    assert O is not None  # step 0 holds the rank's own shard: its diagonal is never skipped
    return O.view(B, H, n_local, d).to(q.dtype), L.view(B, H, n_local)


def _ring_backward(dO: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, O: torch.Tensor,
                   L: torch.Tensor, ring: _Ring) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The backward ring: K, V travel as in the forward, and with them the dK, dV accumulators of their owner.

    At step t the rank computes its queries' gradients against kv_rank's keys with the tiled backward (FA2
    Algorithm 2) from the merged O and the global L (so P_ij = exp(S_ij - L_i) is the final softmax), adds dQ_t to
    its own dQ and dK_t, dV_t to the accumulator that arrived with the shard, and sends that accumulator on. After
    W steps each accumulator has visited every rank and, one hop more, is back with its owner.
    """
    W = ring.world
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    kv = torch.stack((k, v))  # (2, B, H_kv, n, d)
    owner = torch.full((1,), ring.rank, dtype=torch.long, device=q.device)
    dQ = torch.zeros(q.shape, dtype=acc, device=q.device)  # (B, H, n, d)
    dkv_requests = dkv_in = dkv_owner_in = None  # the accumulator arriving from rank r - 1 (posted a step earlier)
    dkv = torch.zeros(kv.shape, dtype=acc, device=q.device)  # (2, B, H_kv, n, d) accumulator of the held shard
    for t in range(W):
        start, t0 = time.time(), time.perf_counter()
        kv_rank = _check_owner(owner, (ring.rank - t) % W, "K/V shard", ring, t)
        requests, sent = None, 0
        if t < W - 1:
            kv_next, owner_next = torch.empty_like(kv), torch.empty_like(owner)
            requests = _exchange(ring, [(kv, TAG_KV), (owner, TAG_KV_OWNER)],
                                 [(kv_next, TAG_KV), (owner_next, TAG_KV_OWNER)])
            sent = _nbytes(kv)
        plan = ring.plans[kv_rank]
        grads = None
        if plan is not None:
            grads = tiled_backward(dO, q, kv[0], kv[1], O, L, plan[0], plan[1])  # dQ_t, dK_t, dV_t
            dQ += grads[0]
        compute_s = time.perf_counter() - t0
        comm_s = 0.0
        if t > 0:  # the accumulator of kv_rank's shard, sent by rank r - 1 at the end of step t - 1
            comm_s += _wait(dkv_requests)
            dkv = dkv_in
            _check_owner(dkv_owner_in, kv_rank, "dK/dV accumulator", ring, t)
        t1 = time.perf_counter()
        if grads is not None:
            dkv[0] += grads[1]
            dkv[1] += grads[2]
        compute_s += time.perf_counter() - t1
        if W > 1:  # send the accumulator on with its owner's tag: it is back home after step W - 1
            dkv_in, dkv_owner_in = torch.empty_like(dkv), torch.empty_like(owner)
            dkv_owner = torch.full_like(owner, kv_rank)  # kept alive (and dkv with it) until the send completes
            dkv_requests = _exchange(ring, [(dkv, TAG_DKV), (dkv_owner, TAG_DKV_OWNER)],
                                     [(dkv_in, TAG_DKV), (dkv_owner_in, TAG_DKV_OWNER)])
            sent += _nbytes(dkv)
        comm_s += _wait(requests)
        if requests is not None:
            kv, owner = kv_next, owner_next
        _emit(ring, BACKWARD, t, kv_rank, plan, q, sent, start, compute_s, comm_s, None)
    if W > 1:  # this rank's own accumulator, back from its last visit (rank r - 1)
        _wait(dkv_requests)
        dkv = dkv_in
        _check_owner(dkv_owner_in, ring.rank, "dK/dV accumulator", ring, W)
    return dQ.to(q.dtype), dkv[0].to(k.dtype), dkv[1].to(v.dtype)


class _RingAttention(torch.autograd.Function):
    """Forward: the ring, saving q, k, v, O and L (this rank's shards only). Backward: the ring of gradients."""

    @staticmethod
    def forward(ctx, q, k, v, ring: _Ring):
        O, L = _ring_forward(q, k, v, ring)
        ctx.save_for_backward(q, k, v, O, L)
        ctx.ring = ring
        ctx.mark_non_differentiable(L)
        return O, L

    @staticmethod
    def backward(ctx, dO, _dL):
        if torch.is_grad_enabled():  # the engine runs backward in grad mode only for create_graph=True
            raise RuntimeError(DOUBLE_BACKWARD_MESSAGE.replace("flash_attention", "ring_attention", 1))
        q, k, v, O, L = ctx.saved_tensors
        dO = torch.zeros_like(O) if dO is None else dO
        dq, dk, dv = _ring_backward(dO, q, k, v, O, L, ctx.ring)
        return dq, dk, dv, None


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, group=None, causal: bool = False,
                   layout: str = CONTIGUOUS, block_size: int = 64, scale: float | None = None,
                   return_lse: bool = False, on_step: StepCallback | None = None):
    """Attention over a sequence sharded across the ranks of a process group: the ring (call it on every rank).

    Args:
        q: (B, H, n, d) this rank's query shard (shard(q, W, rank, layout)).  k, v: (B, H_kv, n, d) its K/V shards,
            H_kv dividing H (grouped-query attention). n = N / W, the same on every rank.
        group: an initialised torch.distributed process group (None: the default group). Every rank of it calls
            ring_attention with the same settings; gloo works on CPU tensors, NCCL on each rank's CUDA device.
        causal: top-left causal over the global positions of the layout (query i sees keys j <= i).
        layout: how the sequence was sharded, one of LAYOUTS.
        block_size: Br = Bc of flashviz's tiled kernel on each rank.  scale: softmax scale, default 1/sqrt(d).
        return_lse: also return L (B, H, n), the logsumexp over all N keys (natural log, accumulator dtype).
        on_step: called after each ring step with a RingStepEvent (forward, and the backward's steps when
            gradients flow through the output).
    Returns:
        O (B, H, n, d) in q's dtype, differentiable with respect to q, k and v; or (O, L) with return_lse.

    Example:
        >>> import torch.distributed as dist
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # a one-rank group
        >>> q = torch.randn(1, 2, 16, 8, requires_grad=True)
        >>> events = []
        >>> out = ring_attention(q, q, q, causal=True, block_size=4, on_step=events.append)
        >>> out.sum().backward()
        >>> [(e.phase, e.step, e.kv_rank, e.tiles_computed, e.tiles_skipped) for e in events]
        [('forward', 0, 0, 10, 6), ('backward', 0, 0, 10, 6)]
        >>> dist.destroy_process_group()
    """
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("ring_attention runs on every rank of an initialised torch.distributed process group, and "
                           "none is initialised. Call torch.distributed.init_process_group first (torchrun sets its "
                           "environment), or use run_ring(q, k, v, world=W), which starts the W processes itself.")
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    if rank < 0:
        raise ValueError("this process is not a member of the given group; call ring_attention on its ranks only.")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"{name} must be this rank's (B, H, N / W, d) shard, got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}.")
    if k.shape[2] != q.shape[2]:
        raise ValueError(f"q, k and v shards must hold the same positions (N / W each), got {q.shape[2]} queries and "
                         f"{k.shape[2]} keys. Shard all three with shard(x, world, rank, layout).")
    check_layout(q.shape[2] * world, world, layout)
    if on_step is not None and not callable(on_step):
        raise TypeError(f"on_step must be a callable taking a RingStepEvent, or None, got {type(on_step).__name__}.")
    config: AttentionConfig = tiled_config(q, k, v, block_size=block_size, scale=scale, causal=causal)
    ring = _Ring(group, rank, world, layout, config.causal, config.block_q, config.scale, on_step, {})
    O, L = _RingAttention.apply(q, k, v, ring)
    return (O, L) if return_lse else O


# ----------------------------------------------------------------------------------------------------------------------
# run_ring: the W processes on this machine, supervised


@dataclass(frozen=True)
class RingJob:
    """One ring computation for run_ring_jobs: the whole (unsharded) inputs and the ring's settings."""

    q: torch.Tensor  # (B, H, N, d) all the queries
    k: torch.Tensor  # (B, H_kv, N, d) all the keys, H_kv dividing H
    v: torch.Tensor  # (B, H_kv, N, d) all the values
    world: int  # W: ranks 0 .. W-1 of the run compute it (a subgroup when the run has more ranks)
    causal: bool = False  # top-left causal over the global positions
    layout: str = CONTIGUOUS  # one of LAYOUTS
    block_size: int = 64  # Br = Bc of the tiled kernel on each rank
    dO: torch.Tensor | None = None  # (B, H, N, d) gradient of the loss with respect to the output: the backward runs
    scale: float | None = None  # softmax scale, default 1/sqrt(d)


@dataclass(frozen=True)
class RingRun:
    """What run_ring gathers from the ranks: the whole outputs and every rank's step events."""

    out: torch.Tensor  # (B, H, N, d) the attention output, unsharded, in q's dtype, on the CPU
    lse: torch.Tensor  # (B, H, N) the logsumexp over all N keys (natural log, accumulator dtype)
    dq: torch.Tensor | None  # (B, H, N, d) gradients for the job's dO, unsharded; None without dO
    dk: torch.Tensor | None  # (B, H_kv, N, d)
    dv: torch.Tensor | None  # (B, H_kv, N, d)
    events: tuple[RingStepEvent, ...]  # every rank's steps: the forward's by (rank, step), then the backward's
    world: int  # W
    layout: str  # the layout it ran with
    causal: bool  # whether it was causal
    block_size: int  # the kernel's tile size
    ring_s: tuple[float, ...]  # per rank: seconds inside ring_attention (its forward, and backward with dO)

    def of(self, phase: str = FORWARD) -> tuple[RingStepEvent, ...]:
        """The events of one phase, by (rank, step)."""
        return tuple(e for e in self.events if e.phase == phase)

    def tiles_per_rank(self, phase: str = FORWARD) -> tuple[int, ...]:
        """Computed tiles of each rank over the ring, as its kernel counted them."""
        return tiles_per_rank(self.of(phase), self.world)

    def imbalance(self, phase: str = FORWARD) -> float:
        """max / mean of the ranks' computed tiles (1 = balanced)."""
        return imbalance(self.tiles_per_rank(phase))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on this machine now: the operating system's pick for a socket bound to port 0.

    Example:
        >>> 0 < free_port() < 65536
        True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _check_job(job: RingJob, backend: str) -> None:
    """Raise ValueError / TypeError for a job that cannot run, saying how to fix it."""
    if not isinstance(job, RingJob):
        raise TypeError(f"run_ring_jobs takes RingJob items, got {type(job).__name__}.")
    check_layout(job.q.shape[2] if isinstance(job.q, torch.Tensor) and job.q.dim() == 4 else 1, job.world,
                 job.layout)  # layout and world first: their errors say the most
    for name, t in (("q", job.q), ("k", job.k), ("v", job.v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"{name} must be a (B, H, N, d) tensor of the whole sequence, got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}.")
    tiled_config(job.q, job.k, job.v, block_size=job.block_size, scale=job.scale, causal=job.causal)
    if job.k.shape[2] != job.q.shape[2]:
        raise ValueError(f"the ring shards one sequence: q, k and v need the same N, got {job.q.shape[2]} queries "
                         f"and {job.k.shape[2]} keys.")
    check_layout(job.q.shape[2], job.world, job.layout)
    if job.dO is not None and (not isinstance(job.dO, torch.Tensor) or job.dO.shape != job.q.shape):
        raise ValueError(f"dO must have q's shape {tuple(job.q.shape)} (the gradient of the loss with respect to the "
                         f"output), got {tuple(job.dO.shape) if isinstance(job.dO, torch.Tensor) else job.dO!r}.")
    if backend == "nccl" and torch.cuda.device_count() < job.world:
        raise ValueError(f"backend 'nccl' runs one rank per CUDA device: a world of {job.world} needs {job.world} "
                         f"devices, this machine has {torch.cuda.device_count()}. Use backend='gloo' (CPU).")


def _check_fail_rank(fail_rank, world: int):
    if fail_rank is None:
        return None
    if (not isinstance(fail_rank, tuple) or len(fail_rank) != 2 or not isinstance(fail_rank[0], int)
            or not 0 <= fail_rank[0] < world or fail_rank[1] not in FAIL_MODES):
        raise ValueError(f"fail_rank must be (rank, mode) with rank in 0 .. {world - 1} and mode one of {FAIL_MODES}, "
                         f"or None, got {fail_rank!r}.")
    return fail_rank


def _to_bytes(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _from_bytes(data: bytes):
    return torch.load(io.BytesIO(data), weights_only=True)


def _run_job(job: dict, rank: int, group, device: torch.device, report: Callable) -> tuple[dict, list]:
    """This rank's part of one job: shard, ring forward (and backward), its shards of the results and its events."""
    W, layout = job["world"], job["layout"]
    q, k, v = (shard(job[x], W, rank, layout).to(device).clone(memory_format=torch.contiguous_format)
               for x in ("q", "k", "v"))
    grad = job["dO"] is not None
    for t in (q, k, v):
        t.requires_grad_(grad)
    events: list[RingStepEvent] = []

    def on_step(e: RingStepEvent) -> None:
        events.append(e)
        report(e)

    t0 = time.perf_counter()
    out, lse = ring_attention(q, k, v, group=group, causal=job["causal"], layout=layout,
                              block_size=job["block_size"], scale=job["scale"], return_lse=True, on_step=on_step)
    if grad:
        out.backward(shard(job["dO"], W, rank, layout).to(device))
    seconds = time.perf_counter() - t0
    shards = {"out": out.detach().cpu(), "lse": lse.cpu(), "seconds": seconds}
    for name, t in (("dq", q), ("dk", k), ("dv", v)):
        shards[name] = t.grad.cpu() if grad else None
    return shards, events


def _rank_main(rank: int, world: int, port: int, backend: str, payload: bytes, timeout_s: float, fail_rank,
               messages) -> None:
    """One rank's process: join the group, run every job it is part of, report each result, then leave.

    messages: this rank's end of a one-way pipe to the parent. A send is written before it returns, so what a rank
    reported is there even if its process dies the next instant, and the pipe's end tells the parent it has ended.
    """
    try:
        device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        torch.set_num_threads(THREADS_PER_RANK)
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=timeout_s))
        jobs = _from_bytes(payload)
        # every rank creates every subgroup, in the same order (new_group is collective)
        groups = {w: None if w == world else dist.new_group(list(range(w)))
                  for w in sorted({j["world"] for j in jobs})}
        messages.send(("ready", rank))
        if fail_rank is not None and fail_rank[0] == rank:
            mode = fail_rank[1]
            if mode == "raise":
                raise RuntimeError(f"failure injected by fail_rank=({rank}, 'raise')")
            if mode == "exit":
                os._exit(FAIL_EXIT_CODE)
            while True:  # "hang"
                time.sleep(60)
        for i, job in enumerate(jobs):
            if rank >= job["world"]:
                continue
            messages.send(("enter", rank, i))
            shards, events = _run_job(job, rank, groups[job["world"]], device,
                                      lambda e, i=i: messages.send(("step", rank, i, e.phase, e.step)))
            messages.send(("result", rank, i, _to_bytes(shards), events))
        dist.barrier()  # no rank leaves while a neighbour still reads from it
        dist.destroy_process_group()
        messages.send(("done", rank))
    except Exception as e:  # reported to the parent, which names this rank and ends the run
        messages.send(("error", rank, time.time(), f"{type(e).__name__}: {e}",
                      "".join(traceback.format_exception(e)[-6:])))
        os._exit(1)  # no interpreter shutdown: a broken process group may block it


class _Supervisor:
    """The parent's view of the ranks: their messages, results, failures and how far each got."""

    def __init__(self, jobs: Sequence[RingJob], world: int):
        self.job_worlds = [j.world for j in jobs]
        self.job_name = (lambda i: "the ring") if len(jobs) == 1 else (lambda i: f"the ring of job {i}")
        self.world = world
        self.results: dict[tuple[int, int], tuple[dict, list]] = {}  # (job, rank) -> (shards, events)
        self.done: set[int] = set()
        self.errors: dict[int, tuple[float, str, str]] = {}  # rank -> (time, what it raised, traceback tail)
        self.dead: dict[int, int] = {}  # rank -> exit code of a rank that ended without a word
        self.where = dict.fromkeys(range(world), "starting (importing torch, joining the process group)")
        self.position = {r: (-1, 0) for r in range(world)}  # (job it is in or waits for, steps done + entered)

    def _next_job(self, rank: int, after: int) -> int:
        return next((i for i in range(after, len(self.job_worlds)) if rank < self.job_worlds[i]),
                    len(self.job_worlds))

    def handle(self, msg: tuple) -> None:
        kind, rank = msg[0], msg[1]
        if kind == "ready":
            self.where[rank] = "in the process group, not in a ring yet"
            self.position[rank] = (self._next_job(rank, 0), 0)
        elif kind == "enter":
            self.where[rank] = f"in {self.job_name(msg[2])}, no step done"
            self.position[rank] = (msg[2], 1)
        elif kind == "step":
            self.where[rank] = f"in {self.job_name(msg[2])}, after {msg[3]} step {msg[4]}"
            self.position[rank] = (msg[2], self.position[rank][1] + 1)
        elif kind == "result":
            self.results[(msg[2], rank)] = (_from_bytes(msg[3]), msg[4])
            self.where[rank] = f"done with {self.job_name(msg[2])}"
            self.position[rank] = (self._next_job(rank, msg[2] + 1), 0)
        elif kind == "done":
            self.done.add(rank)
            self.where[rank] = "done"
        elif kind == "error":
            self.errors[rank] = msg[2:]

    def ended(self, rank: int, process) -> None:
        """The rank's pipe closed: its process ended, and everything it sent has been read. Without 'done' or an
        error before, it died without a word."""
        process.join(STOP_GRACE_S)  # the pipe closes as the process exits: its exit code follows at once
        if rank not in self.done and rank not in self.errors:
            self.dead[rank] = process.exitcode if process.exitcode is not None else 0

    def failure_message(self) -> str:
        """The first cause first: a rank that died without a word, else the earliest error; then the others."""
        parts = []
        for r, code in sorted(self.dead.items()):
            how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            parts.append((-math.inf, r, f"rank {r} died ({how}) without reporting an error, while it was "
                                        f"{self.where[r]}: the process ended (os._exit, a signal, out of memory or a "
                                        "crash)", ""))
        for r, (when, what, tb) in self.errors.items():
            parts.append((when, r, f"rank {r} raised {what}", tb))
        parts.sort()
        _, first, head, tb = parts[0]
        text = f"ring run failed on rank {first}: {head}."
        if tb:
            text += "\n" + tb.rstrip()
        if len(parts) > 1:
            text += "\nthen: " + "; ".join(p[2] for p in parts[1:])
        return text

    def timeout_message(self, timeout_s: float) -> str:
        """Name the ranks that got least far: the others are waiting for them in the ring."""
        least = min(self.position.values())
        stuck = [r for r in range(self.world) if self.position[r] == least and r not in self.done]
        names = ", ".join(str(r) for r in stuck)
        where = "; ".join(f"rank {r}: {self.where[r]}" for r in range(self.world))
        return (f"ring run timed out after {timeout_s:g} s: rank{'s' if len(stuck) > 1 else ''} {names} made the "
                f"least progress (hung or too slow; the other ranks wait for {'them' if len(stuck) > 1 else 'it'} in "
                f"the ring). Where each rank was: {where}. If the run is only slow, raise timeout_s.")


def _stop(procs: Sequence, graceful: bool) -> None:
    """Every process started is joined (graceful) or terminated, and killed if it outlives STOP_GRACE_S."""
    if graceful:
        for p in procs:
            if p.pid is not None:
                p.join(STOP_GRACE_S)
    for p in procs:
        if p.pid is not None and p.is_alive():
            p.terminate()
    for p in procs:
        if p.pid is not None:
            p.join(STOP_GRACE_S)
            if p.is_alive():
                p.kill()
                p.join()


def _assemble(job: RingJob, results: dict, index: int) -> RingRun:
    """The ranks' shards of one job unsharded, their events in (phase, rank, step) order."""
    per_rank = [results[(index, r)] for r in range(job.world)]
    whole = {name: None if per_rank[0][0][name] is None else unshard([s[name] for s, _ in per_rank], job.layout)
             for name in ("out", "lse", "dq", "dk", "dv")}
    events = sorted((e for _, evs in per_rank for e in evs), key=lambda e: (PHASES.index(e.phase), e.rank, e.step))
    return RingRun(whole["out"], whole["lse"], whole["dq"], whole["dk"], whole["dv"], tuple(events), job.world,
                   job.layout, job.causal, job.block_size, tuple(s["seconds"] for s, _ in per_rank))


def run_ring_jobs(jobs: Sequence[RingJob], *, backend: str = "gloo", timeout_s: float = 120,
                  fail_rank: tuple[int, str] | None = None) -> list[RingRun]:
    """Several rings in one set of processes: W = the largest job's world, each job on ranks 0 .. job.world - 1.

    Starting a process costs seconds (it imports torch), so a run of several configurations (the three layouts, a
    sweep of W) starts the processes once; a job of a smaller world runs on a subgroup of the first ranks. Jobs run
    one after the other, in order. The protocol, the failures and the cleanup are run_ring's.

    Args:
        jobs: RingJob items (whole inputs and settings).  backend, timeout_s, fail_rank: as in run_ring, for the
            whole run.
    Returns:
        One RingRun per job, in order.

    Example:
        >>> q = torch.randn(1, 2, 24, 8)
        >>> runs = run_ring_jobs([RingJob(q, q, q, world=w, causal=True, layout="zigzag", block_size=4)
        ...                       for w in (1, 2, 3)])  # doctest: +SKIP
        >>> [r.world for r in runs]  # doctest: +SKIP
        [1, 2, 3]
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} (gloo: CPU tensors; nccl: a CUDA device per rank), got "
                         f"{backend!r}.")
    jobs = list(jobs)
    if not jobs:
        raise ValueError("run_ring_jobs needs at least one RingJob.")
    for job in jobs:
        _check_job(job, backend)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not timeout_s > 0:
        raise ValueError(f"timeout_s must be a number of seconds > 0, got {timeout_s!r}.")
    world = max(j.world for j in jobs)
    fail_rank = _check_fail_rank(fail_rank, world)
    payload = _to_bytes([{"q": j.q.detach().cpu(), "k": j.k.detach().cpu(), "v": j.v.detach().cpu(),
                          "dO": None if j.dO is None else j.dO.detach().cpu(), "world": j.world,
                          "causal": bool(j.causal), "layout": j.layout, "block_size": j.block_size,
                          "scale": j.scale} for j in jobs])
    context = mp.get_context("spawn")  # a fresh interpreter per rank: no forked threads or CUDA state
    pipes = [context.Pipe(duplex=False) for _ in range(world)]  # (parent's reading end, rank's writing end)
    port = free_port()
    procs = [context.Process(target=_rank_main, name=f"flashviz-ring-rank{r}", daemon=True,
                             args=(r, world, port, backend, payload, timeout_s, fail_rank, pipes[r][1]))
             for r in range(world)]
    supervisor = _Supervisor(jobs, world)
    finished = False
    try:
        for p, (_, writer) in zip(procs, pipes, strict=True):
            p.start()
            writer.close()  # the rank holds the only writing end: its pipe closes when its process ends
        reading = {reader: r for r, (reader, _) in enumerate(pipes)}
        deadline = time.monotonic() + timeout_s
        failed_at = None
        while True:
            now = time.monotonic()
            if failed_at is not None and (now - failed_at >= FAILURE_GRACE_S or not reading):
                raise RuntimeError(supervisor.failure_message())
            if failed_at is None and len(supervisor.done) == world:
                break
            if failed_at is None and now >= deadline:
                raise RuntimeError(supervisor.timeout_message(timeout_s))
            for reader in mp_connection.wait(list(reading), timeout=max(0.01, min(POLL_S, deadline - now))):
                try:
                    supervisor.handle(reader.recv())
                except (EOFError, OSError):  # the rank's process has ended
                    rank = reading.pop(reader)
                    supervisor.ended(rank, procs[rank])
            if failed_at is None and (supervisor.errors or supervisor.dead):
                failed_at = time.monotonic()
        finished = True
    finally:
        _stop(procs, graceful=finished)
        for reader, writer in pipes:
            reader.close()
            writer.close()
    return [_assemble(job, supervisor.results, i) for i, job in enumerate(jobs)]


def run_ring(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, world: int, causal: bool = False,
             layout: str = CONTIGUOUS, block_size: int = 64, backend: str = "gloo", dO: torch.Tensor | None = None,
             timeout_s: float = 120, scale: float | None = None,
             fail_rank: tuple[int, str] | None = None) -> RingRun:
    """Ring attention on this machine in `world` real processes: shard, run the ring, gather everything back.

    Each rank is a process of its own (torch.multiprocessing, spawn) with one intra-op thread (THREADS_PER_RANK, as
    torchrun's default), joined into a process group by a TCP store on 127.0.0.1 at a port the operating system
    reports free (so concurrent runs do not collide), with the group's timeout set to timeout_s. The ranks shard the
    inputs, run ring_attention (and its backward with dO) and send their shards of the results and their step events
    to this process, which unshards them.

    Failures end the run within timeout_s with a RuntimeError that names the rank and the cause: a rank that raises
    (its exception and traceback), a rank whose process dies without a word (its exit code), a rank that hangs (the
    rank that got least far, and where every rank was). Every process is joined, terminated or killed before
    run_ring returns or raises: none is left behind, nor the port.

    Args:
        q: (B, H, N, d) all queries.  k, v: (B, H_kv, N, d), H_kv dividing H.
        world: W >= 1 processes (ranks).  causal, layout, block_size, scale: as in ring_attention.
        backend: "gloo" (CPU) or "nccl" (rank r on cuda:r; the same code).
        dO: (B, H, N, d) the gradient of a loss with respect to the output: the backward ring runs too.
        timeout_s: seconds for the whole run, process start (importing torch, about 1 to 3 s) included.
        fail_rank: for testing the failure paths: (rank, "raise" | "exit" | "hang") makes that rank raise a
            RuntimeError, end its process with os._exit(3), or sleep for ever, just before its first ring step.
    Returns:
        A RingRun: .out, .lse (whole, on the CPU), .dq, .dk, .dv (with dO, else None), .events (every rank's
        RingStepEvent), .ring_s (each rank's seconds inside the ring).

    Example:
        >>> from flashviz.core.reference import naive_attention
        >>> q = torch.randn(1, 2, 32, 8)
        >>> run = run_ring(q, q, q, world=2, causal=True, layout="zigzag", block_size=8)  # doctest: +SKIP
        >>> torch.allclose(run.out, naive_attention(q, q, q, causal=True), atol=1e-5)  # doctest: +SKIP
        True
    """
    job = RingJob(q, k, v, world, causal, layout, block_size, dO, scale)
    return run_ring_jobs([job], backend=backend, timeout_s=timeout_s, fail_rank=fail_rank)[0]
