"""How the sequence is dealt to the ranks and what each rank computes: the layouts (contiguous, zigzag, striped), the
pure model of a ring's steps (`ring_schedule`: tiles computed and skipped, FLOPs and bytes per rank and step, without
torch.distributed or a process) and `shard` / `unshard`. flashviz/ring/__init__.py says the whole idea."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from flashviz.vocab import DTYPE_BYTES, FULL, PARTIAL, SKIPPED

CONTIGUOUS, ZIGZAG, STRIPED = "contiguous", "zigzag", "striped"
LAYOUTS = (CONTIGUOUS, ZIGZAG, STRIPED)  # how the N positions are dealt to the W ranks (see positions)
FORWARD, BACKWARD = "forward", "backward"  # the phase of a ring step
PHASES = (FORWARD, BACKWARD)
# FLOPs per computed score element: the forward's two matmuls (S = Q K^T, O = P V) at 2 FLOPs per multiply-add
# per head dimension; the backward's five (S recomputed, dV, dP, dQ, dK), 2.5x the forward (FA2, Section 4)
FORWARD_FLOPS_PER_ELEMENT = 2 * 2
BACKWARD_FLOPS_PER_ELEMENT = 5 * 2

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


class StepWork(Protocol):
    """What tiles_per_rank reads of a step: a RingStepPlan of the model or a RingStepEvent of a real run."""

    rank: int  # r
    phase: str  # "forward" or "backward"
    tiles_computed: int  # tiles the step computes (full + partial)


class RankWork:
    """Each rank's work over a ring, from its records: the model's plans (RingSchedule) or a real run's events
    (flashviz.ring.runner.RingRun) alike. A subclass has `world` and gives its records."""

    world: int  # W

    def records(self) -> Sequence[StepWork]:
        """Every (phase, rank, step) record: the model's plans (RingSchedule) or a run's events (RingRun)."""
        raise NotImplementedError

    def of(self, phase: str = FORWARD) -> tuple[StepWork, ...]:
        """The records of one phase, by (rank, step)."""
        return tuple(s for s in self.records() if s.phase == phase)

    def tiles_per_rank(self, phase: str = FORWARD) -> tuple[int, ...]:
        """Computed tiles of each rank over the whole ring (the rank's work)."""
        return tiles_per_rank(self.of(phase), self.world)

    def imbalance(self, phase: str = FORWARD) -> float:
        """max / mean of the ranks' computed tiles: 1 is balanced; the ring's time is the busiest rank's."""
        return imbalance(self.tiles_per_rank(phase))


@dataclass(frozen=True)
class RingSchedule(RankWork):
    """The model of a ring: every (phase, rank, step) with its tiles and bytes. Compare with a run's events."""

    n: int  # N, the whole sequence
    world: int  # W
    layout: str  # one of LAYOUTS
    block_size: int  # Br = Bc of the tiled kernel on each rank
    causal: bool  # top-left causal over the global positions
    steps: tuple[RingStepPlan, ...]  # forward steps by (rank, step), then the backward's (if asked for)

    def records(self) -> tuple[RingStepPlan, ...]:
        """The model's steps, every (phase, rank, step)."""
        return self.steps


def tiles_per_rank(steps: Sequence[StepWork], world: int) -> tuple[int, ...]:
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
