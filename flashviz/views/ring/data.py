"""The Ring view's numbers: the ring's schedule as the model predicts it (flashviz.ring.ring_schedule: which K/V shard
each rank holds at each step, which tiles it computes or skips, the bytes it sends) and, on request, one real run in W
processes on this machine (flashviz.ring.run_ring_jobs on gloo) with its own step events, its error against one
process in float64, the merge of one row across the steps, and the error of fp32 and bf16 partials as the world grows.

A `RingSetup` holds the view's settings (hashable, so the dashboard caches on it). `score_map` and `layout_work` read
the model only (no process); `ring_run` starts the processes once and runs every configuration the view shows in them
(the chosen one forward and backward, the other two layouts, W = 1, 2, 4 in fp32 and bf16): starting a process costs
seconds (it imports torch), a ring at these sizes milliseconds. Everything returned is plain data.

References: Ring Attention (Liu, Zaharia, Abbeel, 2023); ring-flash-attention's zigzag and striped layouts (Zhu, 2024;
Brandon et al., 2023); Flash-Decoding's logsumexp merge (flashviz.core.decode.merge_partials), which the ring reuses.
Legend: N positions, W ranks (processes), r a rank, t a ring step, n = N / W positions per rank, T = ceil(n / Br) tiles
per side of one step, H heads, d head dimension, L_t a step's partial logsumexp, L the merged one.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from flashviz.measure.guards import naive_bytes_needed
from flashviz.measure.impls import RunConfig
from flashviz.measure.progress import Progress
from flashviz.model.flops import attention_flops
from flashviz.ring import (
    BACKWARD,
    FORWARD,
    LAYOUTS,
    RingJob,
    RingRun,
    RingSchedule,
    RingStepEvent,
    check_layout,
    owner_rank,
    positions,
    ring_schedule,
    run_ring_jobs,
    shard_bytes,
)
from flashviz.ring.layouts import RankWork
from flashviz.ring.runner import float64_reference
from flashviz.vocab import SKIPPED

RING_D = 32  # head dimension of the view's random inputs
BATCH = 1
SEED = 0  # of the random q, k, v and dO
MAP_TILES_MAX = 128  # tiles per side of the N x N map (N / Br): the map's cells and the one-process job's tile loop
PRECISION_WORLDS = (1, 2, 4)  # the worlds the precision chart compares
PRECISION_DTYPES = ("float32", "bfloat16")
FP32_TOLERANCE = 1e-5  # the fp32 ring's largest error against one process in float64 is at most this
RUN_TIMEOUT_S = 120.0  # the whole run, the processes' start included


@dataclass(frozen=True)
class RingSetup:
    """The ring the view shows: hashable, so it keys the caches."""

    n: int  # N, the whole sequence
    world: int  # W, ranks (one process each)
    layout: str  # one of flashviz.ring.LAYOUTS
    causal: bool  # top-left causal over the global positions
    block: int  # Br = Bc of the tiled kernel on each rank
    dtype: str  # "float32" or "bfloat16": the inputs' and the partial outputs' dtype
    heads: int  # H = H_kv
    d: int = RING_D  # head dimension

    def schedule(self, layout: str | None = None, *, world: int | None = None,
                 backward: bool = False) -> RingSchedule:
        """ring_schedule at these settings (another layout or world if given)."""
        return ring_schedule(self.n, self.world if world is None else world, layout or self.layout, self.block,
                             self.causal, batch=BATCH, heads=self.heads, head_dim=self.d, dtype=self.dtype,
                             backward=backward)


def setup_of(s) -> RingSetup:
    """The ring a RingSettings describes (its rg* fields).

    Example:
        >>> from flashviz.views.ring.settings import RingSettings
        >>> setup_of(RingSettings())
        RingSetup(n=256, world=4, layout='contiguous', causal=True, block=32, dtype='float32', heads=2, d=32)
    """
    return RingSetup(s.ring_n, s.world, s.layout, s.ring_causal, s.ring_block, s.partials, s.ring_heads)


def setup_problem(setup: RingSetup) -> str | None:
    """Why the view cannot draw or run these settings, and how to fix it; None when it can.

    Example:
        >>> setup_problem(RingSetup(100, 4, "zigzag", True, 32, "float32", 2))[:47]
        'N = 100 is not divisible by 2W = 8: zigzag cuts'
        >>> setup_problem(RingSetup(4096, 4, "zigzag", True, 8, "float32", 2))[:60]
        'N / Br = 512 tiles per side of the map; the view draws at mo'
    """
    try:
        check_layout(setup.n, setup.world, setup.layout)
    except ValueError as e:
        return str(e)
    per_side = math.ceil(setup.n / setup.block)
    if per_side > MAP_TILES_MAX:
        return (f"N / Br = {per_side} tiles per side of the map; the view draws at most {MAP_TILES_MAX} (and runs W "
                f"= 1 as one kernel call of that many squared). Raise the tile size to at least "
                f"{math.ceil(setup.n / MAP_TILES_MAX)} or lower N.")
    return None


# ----------------------------------------------------------------------------------------------------------------------
# why split one sequence at all: a long context's bytes and FLOPs, on one device and per rank

LONG_N = 131072  # 128k tokens: the context lengths that context parallelism exists for
# a model of Llama 3 8B's shape (Meta's config.json: 32 layers, 32 attention heads, 8 K/V heads, head size 128), bf16
LONG_LAYERS, LONG_HEADS, LONG_HEADS_KV, LONG_D, LONG_DTYPE = 32, 32, 8, 128, "bfloat16"
LONG_MODEL = (f"Llama 3 8B's shape ({LONG_LAYERS} layers, {LONG_HEADS_KV} K/V heads, d = {LONG_D}) "
              f"in {LONG_DTYPE}")  # the model, in words (its {LONG_HEADS} query heads count in its FLOPs)


@dataclass(frozen=True)
class LongContext:
    """One sequence of LONG_N tokens through the LONG_* model: what one device would hold and compute, and what each
    of W ranks holds and computes when the sequence is sharded over them (N / W positions each; where W does not
    divide N, the largest shard's ceil(N / W))."""

    n: int  # N, the sequence
    world: int  # W, ranks (one device each)
    shard: int  # ceil(N / W) positions: a rank's shard (the largest, where W does not divide N)
    kv_bytes: int  # K and V of every layer for the whole sequence: 2 L H_kv N d bytes-per-element
    kv_rank_bytes: int  # a rank's K/V shards of every layer: kv_bytes x shard / N
    scores_bytes: int  # standard attention's S and P of one layer, all heads: 2 H N^2 bytes-per-element
    flops: int  # attention FLOPs of one layer's forward over the whole sequence: 4 N^2 d H (no mask)
    flops_rank: int  # a rank's share: its shard's queries against all N keys, flops x shard / N

    @property
    def even(self) -> bool:
        """Whether W divides N: every shard the same size."""
        return self.n % self.world == 0


def long_context(world: int) -> LongContext:
    """The LONG_* model at N = LONG_N on one device and over W ranks, counted by the library's own functions:
    shard_bytes (a rank's K/V), naive_bytes_needed (standard attention's N x N matrices) and attention_flops.

    Example:
        >>> c = long_context(4)
        >>> c.shard, c.kv_bytes // 2**30, c.kv_rank_bytes // 2**30, c.scores_bytes // 2**30
        (32768, 16, 4, 2048)
    """
    if world < 1:
        raise ValueError(f"W must be at least 1 rank, got {world}.")
    shard = -(-LONG_N // world)  # ceil(N / W)
    kv = LONG_LAYERS * shard_bytes(1, LONG_HEADS_KV, LONG_N, 1, LONG_D, LONG_DTYPE)  # W = 1: the whole sequence
    kv_rank = LONG_LAYERS * shard_bytes(1, LONG_HEADS_KV, shard, 1, LONG_D, LONG_DTYPE)  # one shard's positions
    config = RunConfig(n=LONG_N, d=LONG_D, block_q=LONG_D, block_k=LONG_D, causal=False, window=None, batch=1,
                       heads=LONG_HEADS, dtype=getattr(torch, LONG_DTYPE), device=torch.device("cpu"),
                       mode=FORWARD)  # the ring's phase name is the sweep's mode name
    flops = attention_flops(LONG_N, LONG_N, LONG_D, heads=LONG_HEADS)
    flops_rank = attention_flops(shard, LONG_N, LONG_D, heads=LONG_HEADS)  # its queries, every key
    return LongContext(LONG_N, world, shard, kv, kv_rank, naive_bytes_needed(config), flops, flops_rank)


# ----------------------------------------------------------------------------------------------------------------------
# the model: no process


@dataclass(frozen=True)
class MapGrid:
    """The N x N scores as tiles, rows by rank (each rank's query tiles), columns by the rank whose K/V they are."""

    n: int  # N
    world: int  # W
    layout: str  # the layout
    causal: bool  # causal or not
    block: int  # Br = Bc
    tiles: int  # T = ceil(n / Br): tiles per side of one rank's step
    status: tuple[tuple[str, ...], ...]  # [r T + i][k T + j]: tile (i, j) of rank r's queries against rank k's keys
    spans: tuple[tuple[int, int], ...]  # [r T + i]: the first and last global position of that tile of rank r

    def step(self, row: int, col: int) -> int:
        """The ring step at which the tile at (row, col) is computed: (rank - kv rank) mod W."""
        return (row // self.tiles - col // self.tiles) % self.world

    def counts(self, rank: int | None = None) -> dict[str, int]:
        """Tiles by status (full, partial, skipped), of one rank's rows or of all."""
        rows = range(len(self.status)) if rank is None else range(rank * self.tiles, (rank + 1) * self.tiles)
        out: dict[str, int] = {}
        for r in rows:
            for s in self.status[r]:
                out[s] = out.get(s, 0) + 1
        return out

    def steps_run(self, rank: int) -> tuple[int, ...]:
        """The ring steps at which `rank` computes at least one tile (the others it skips whole)."""
        T = self.tiles
        return tuple(t for t in range(self.world)
                     if any(self.status[rank * T + i][((rank - t) % self.world) * T + j] != SKIPPED
                            for i in range(T) for j in range(T)))


def score_map(setup: RingSetup) -> MapGrid:
    """The model's tiles of every (rank, step), laid out as the N x N map the view animates.

    Example:
        >>> g = score_map(RingSetup(256, 4, "contiguous", True, 32, "float32", 2))
        >>> g.tiles, [g.steps_run(r) for r in range(4)]  # rank r computes steps 0 .. r, skips the rest whole
        (2, [(0,), (0, 1), (0, 1, 2), (0, 1, 2, 3)])
    """
    sched = setup.schedule()
    W = setup.world
    n_local = setup.n // W
    T = -(-n_local // setup.block)
    grid = [[SKIPPED] * (W * T) for _ in range(W * T)]
    for plan in sched.of(FORWARD):
        for i, row in enumerate(plan.statuses):
            for j, status in enumerate(row):
                grid[plan.rank * T + i][plan.kv_rank * T + j] = status
    spans = []
    for r in range(W):
        pos = positions(setup.n, W, r, setup.layout)
        spans += [(pos[i * setup.block], pos[min((i + 1) * setup.block, n_local) - 1]) for i in range(T)]
    return MapGrid(setup.n, W, setup.layout, setup.causal, setup.block, T, tuple(map(tuple, grid)), tuple(spans))


@dataclass(frozen=True)
class LayoutWork:
    """One layout's work per rank over the whole forward ring, as the model counts it."""

    layout: str  # one of LAYOUTS
    tiles: tuple[int, ...]  # computed tiles of each rank
    flops: tuple[int, ...]  # FLOPs of each rank's computed tiles
    imbalance: float  # max / mean of the tiles: 1 is balanced, the ring waits for the busiest rank


def work_of(layout: str, work: RankWork) -> LayoutWork:
    """A layout's forward work per rank, from the model's plans (a RingSchedule) or a run's events (a RingRun)."""
    flops = [0] * work.world
    for record in work.of(FORWARD):
        flops[record.rank] += record.flops
    return LayoutWork(layout, work.tiles_per_rank(), tuple(flops), work.imbalance())


def layout_work(setup: RingSetup) -> tuple[tuple[LayoutWork, ...], dict[str, str]]:
    """Each layout's work at the setup's N, W, tile and mask: the valid layouts' LayoutWork, and why the others
    cannot shard N (layout -> check_layout's message).

    Example:
        >>> works, bad = layout_work(RingSetup(256, 4, "contiguous", True, 32, "float32", 2))
        >>> [(w.layout, w.tiles, round(w.imbalance, 3)) for w in works], bad
        ([('contiguous', (3, 7, 11, 15), 1.667), ('zigzag', (9, 9, 9, 9), 1.0), ('striped', (12, 12, 12, 12), 1.0)], {})
    """
    works, bad = [], {}
    for layout in LAYOUTS:
        try:
            works.append(work_of(layout, setup.schedule(layout)))
        except ValueError as e:
            bad[layout] = str(e)
    return tuple(works), bad


def contiguous_causal_bounds(world: int) -> tuple[float, float]:
    """Where max / mean tiles of the plain (contiguous) ring lies under causal: rank r computes r whole steps and its
    own diagonal step, T^2 r + T (T + 1) / 2 tiles of T x T per step. With one tile per step (T = 1) rank r computes
    r + 1 tiles and the ratio is 2W / (W + 1); as the tiles shrink (T large) the diagonal step costs half a step, rank
    r computes r + 1/2 steps' worth and the ratio tends to (2W - 1) / W. Every tile count lies between the two.

    Example:
        >>> contiguous_causal_bounds(4)  # the map at N = 256, Br = 32 (T = 2): 15 / 9 = 1.667
        (1.6, 1.75)
    """
    return 2 * world / (world + 1), (2 * world - 1) / world


# ----------------------------------------------------------------------------------------------------------------------
# the run: W processes on this machine


@dataclass(frozen=True)
class MergeRow:
    """One query row's merge across the ring steps: its partial logsumexps and their weights in the output."""

    position: int  # the row's global position
    rank: int  # the rank that holds it
    local: int  # its index in that rank's shard
    lse_steps: tuple[float, ...]  # L_t of each step t (natural log; -inf where the step's keys are all hidden)
    kv_ranks: tuple[int, ...]  # whose K/V the rank held at each step
    lse: float  # L, the run's merged logsumexp of the row (over all N keys)
    weights: tuple[float, ...]  # exp(L_t - L): the share of the output each step's partial O_t carries

    @property
    def weight_sum(self) -> float:
        return math.fsum(self.weights)

    @property
    def lse_of_steps(self) -> float:
        """log sum_t exp(L_t): the merge's L recomputed from the steps' reports."""
        finite = [x for x in self.lse_steps if x > -math.inf]
        top = max(finite)
        return top + math.log(math.fsum(math.exp(x - top) for x in finite))


@dataclass(frozen=True)
class PrecisionPoint:
    """The largest error of one ring against one process in float64, at one world size and dtype of partials."""

    dtype: str  # "float32" or "bfloat16"
    world: int  # W
    max_error: float  # max |O - O_ref| over every element
    mean_error: float  # mean |O - O_ref|
    rounding: float  # mean |round(O_ref) - O_ref|: the error of the exact output stored in this dtype, the floor


@dataclass(frozen=True)
class RingResult:
    """One real run of the view's ring, with what the view draws from it."""

    setup: RingSetup  # the settings it ran with
    processes: int  # processes started (the largest world of its jobs)
    rings: int  # rings run in them (run_ring_jobs' jobs)
    seconds: float  # wall time of the whole run: the processes' start, every ring, the gathering
    events: tuple[RingStepEvent, ...]  # the chosen ring's steps, forward then backward, by (rank, step)
    ring_s: tuple[float, ...]  # per rank: seconds inside ring_attention (forward and backward)
    model: RingSchedule  # ring_schedule of the chosen ring, forward and backward
    model_bytes: dict[tuple[str, int], int]  # (phase, step) -> the bytes the model says each rank sends then
    mismatches: tuple[str, ...]  # where an event differs from the model (tiles, FLOPs, bytes, K/V owner); () if none
    errors: dict[str, float]  # max |error| against one process in float64: out, lse, dq, dk, dv
    merge: MergeRow  # the last position's merge across the steps
    layouts: tuple[LayoutWork, ...]  # each layout's tiles and FLOPs per rank from its run's own events
    layout_mismatches: tuple[str, ...]  # where those differ from the model
    precision: tuple[PrecisionPoint, ...]  # fp32 and bf16 partials at W = 1, 2, 4 (those that shard N)

    @property
    def exact(self) -> bool:
        """Every event equals the model, and an fp32 ring's error is within FP32_TOLERANCE."""
        return (not self.mismatches and not self.layout_mismatches
                and (self.setup.dtype != "float32" or self.errors["out"] <= FP32_TOLERANCE))


def inputs(setup: RingSetup, dtype: str | None = None) -> tuple[torch.Tensor, ...]:
    """q, k, v, dO (B, H, N, d), seeded, in `dtype` (default the setup's); the same values for every dtype up to
    rounding.

    Example:
        >>> [tuple(t.shape) for t in inputs(RingSetup(8, 2, "contiguous", True, 4, "float32", 2))][0]
        (1, 2, 8, 32)
    """
    gen = torch.Generator().manual_seed(SEED)
    full = [torch.randn(BATCH, setup.heads, setup.n, setup.d, generator=gen) for _ in range(4)]  # (B, H, N, d)
    return tuple(t.to(getattr(torch, dtype or setup.dtype)) for t in full)


def max_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got - want| in float64 (0 for empty tensors)."""
    return float((got.double() - want).abs().max()) if got.numel() else 0.0


def mean_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """mean |got - want| in float64 (0 for empty tensors)."""
    return float((got.double() - want).abs().mean()) if got.numel() else 0.0


def model_bytes(model: RingSchedule) -> dict[tuple[str, int], int]:
    """(phase, step) -> the bytes each rank sends at that step, as the model counts them (the same on every rank).

    Example:
        >>> model_bytes(ring_schedule(8, 2, "contiguous", 4, head_dim=2, backward=True))  # K, V: 2 x 4 x 2 fp32
        {('forward', 0): 64, ('forward', 1): 0, ('backward', 0): 128, ('backward', 1): 64}
    """
    out: dict[tuple[str, int], int] = {}
    for p in model.steps:
        out.setdefault((p.phase, p.step), p.bytes_sent)
        assert out[(p.phase, p.step)] == p.bytes_sent, "every rank sends the same at a step"
    return out


def mismatches(events, model: RingSchedule, phases: tuple[str, ...]) -> tuple[str, ...]:
    """Every event field the model predicts (K/V owner, tiles computed, partial, skipped, FLOPs, bytes sent) that
    differs, as 'phase step t rank r: field event != model'.

    Example:
        >>> s = ring_schedule(8, 2, "zigzag", 2, True)
        >>> mismatches([], s, (FORWARD,))[:1]
        ('forward: 0 events, the model has 4 steps',)
    """
    plans = {(p.phase, p.rank, p.step): p for p in model.steps if p.phase in phases}
    got = [e for e in events if e.phase in phases]
    if len(got) != len(plans):
        return (f"{'/'.join(phases)}: {len(got)} events, the model has {len(plans)} steps",)
    out = []
    for e in got:
        p = plans.get((e.phase, e.rank, e.step))
        if p is None:
            out.append(f"{e.phase} step {e.step} rank {e.rank}: not in the model")
            continue
        for name in ("kv_rank", "tiles_computed", "tiles_partial", "tiles_skipped", "flops", "bytes_sent"):
            if getattr(e, name) != getattr(p, name):
                out.append(f"{e.phase} step {e.step} rank {e.rank}: {name} {getattr(e, name)} != {getattr(p, name)}")
    return tuple(out)


def merge_row(run: RingRun, n: int, position: int | None = None) -> MergeRow:
    """The merge of one query row (default the last position, which sees every key under causal) from the run's
    events (each step's L_t of batch 0, head 0) and its merged L.

    Example:
        >>> from flashviz.ring import run_ring
        >>> q = torch.randn(1, 1, 8, 4)
        >>> run = run_ring(q, q, q, world=2, causal=True, block_size=2)  # doctest: +SKIP
        >>> merge_row(run, 8).weight_sum  # doctest: +SKIP
        1.0000000...
    """
    p = n - 1 if position is None else position
    rank = owner_rank(p, n, run.world, run.layout)
    local = positions(n, run.world, rank, run.layout).index(p)
    steps = sorted((e for e in run.of(FORWARD) if e.rank == rank), key=lambda e: e.step)
    lse_steps = tuple(float(e.lse[local]) for e in steps)
    L = float(run.lse[0, 0, p])
    weights = tuple(math.exp(x - L) if x > -math.inf else 0.0 for x in lse_steps)
    return MergeRow(p, rank, local, lse_steps, tuple(e.kv_rank for e in steps), L, weights)


def run_plan(setup: RingSetup) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...], int]:
    """What a run of the view computes besides the chosen ring (forward and backward): the other layouts that shard
    N at W (forward), and the (dtype, world) of the precision sweep (forward, the chosen layout, each world of
    PRECISION_WORLDS that shards N); and the processes it starts (the largest world).

    Example:
        >>> others, sweep, processes = run_plan(RingSetup(256, 2, "zigzag", True, 32, "float32", 2))
        >>> others, [w for d, w in sweep if d == "bfloat16"], processes
        (('contiguous', 'striped'), [1, 2, 4], 4)
    """
    def shards(world: int, layout: str) -> bool:
        try:
            check_layout(setup.n, world, layout)
        except ValueError:
            return False
        return True

    others = tuple(x for x in LAYOUTS if x != setup.layout and shards(setup.world, x))
    sweep = tuple((dtype, w) for dtype in PRECISION_DTYPES for w in PRECISION_WORLDS if shards(w, setup.layout))
    return others, sweep, max([setup.world, *(w for _, w in sweep)])


def _jobs(setup: RingSetup) -> list[RingJob]:
    """The run's jobs, in run_plan's order: the chosen ring with dO, the other layouts, the precision sweep."""
    others, sweep, _ = run_plan(setup)
    q, k, v, dO = inputs(setup)
    kw = {"causal": setup.causal, "block_size": setup.block}
    jobs = [RingJob(q, k, v, setup.world, layout=setup.layout, dO=dO, **kw)]
    jobs += [RingJob(q, k, v, setup.world, layout=layout, **kw) for layout in others]
    typed = {dtype: inputs(setup, dtype)[:3] for dtype in PRECISION_DTYPES}
    jobs += [RingJob(*typed[dtype], w, layout=setup.layout, **kw) for dtype, w in sweep]
    return jobs


def ring_run(setup: RingSetup, *, progress: Progress | None = None, fail_rank: tuple[int, str] | None = None,
             timeout_s: float = RUN_TIMEOUT_S) -> RingResult:
    """Run the view's rings in real processes (gloo, one per rank) and compare them with the model and with one
    process in float64.

    Args:
        setup: the ring (a valid one: setup_problem(setup) is None).
        progress: progress(done, total, label), called before the processes start and after they are gathered.
        fail_rank, timeout_s: as in flashviz.ring.run_ring_jobs (a rank made to fail, the run's time limit).
    Returns:
        A RingResult. Raises run_ring_jobs' RuntimeError (naming the rank and the cause) when a rank fails.

    Example:
        >>> r = ring_run(RingSetup(16, 2, "zigzag", True, 4, "float32", 1))  # doctest: +SKIP
        >>> r.errors["out"] <= FP32_TOLERANCE, r.mismatches  # doctest: +SKIP
        (True, ())
    """
    problem = setup_problem(setup)
    if problem:
        raise ValueError(problem)
    others, sweep, processes = run_plan(setup)
    jobs = _jobs(setup)
    if progress is not None:
        progress(0, 1, f"starting {processes} processes and running {len(jobs)} rings")
    t0 = time.perf_counter()
    runs = run_ring_jobs(jobs, timeout_s=timeout_s, fail_rank=fail_rank)
    seconds = time.perf_counter() - t0
    main = runs[0]
    q, k, v, dO = (jobs[0].q, jobs[0].k, jobs[0].v, jobs[0].dO)
    ref = float64_reference(q, k, v, dO, setup.causal)
    errors = {name: max_error(getattr(main, name), ref[name]) for name in ("out", "lse", "dq", "dk", "dv")}
    model = setup.schedule(backward=True)
    works, layout_bad = [], []
    for layout, run in zip((setup.layout, *others), runs, strict=False):
        works.append(work_of(layout, run))
        layout_bad += [f"{layout}: {m}" for m in mismatches(run.of(FORWARD), setup.schedule(layout), (FORWARD,))]
    works.sort(key=lambda w: LAYOUTS.index(w.layout))
    precision = []
    refs = {}
    for (dtype, w), run, job in zip(sweep, runs[1 + len(others):], jobs[1 + len(others):], strict=True):
        if dtype not in refs:
            ref_out = float64_reference(job.q, job.k, job.v, None, setup.causal)["out"]  # (B, H, N, d) float64
            refs[dtype] = ref_out, mean_error(ref_out.to(job.q.dtype), ref_out)
        ref_out, rounding = refs[dtype]
        precision.append(PrecisionPoint(dtype, w, max_error(run.out, ref_out), mean_error(run.out, ref_out),
                                        rounding))
    if progress is not None:
        progress(1, 1, f"{len(jobs)} rings gathered from {processes} processes")
    return RingResult(setup, processes, len(jobs), seconds, main.events, main.ring_s, model, model_bytes(model),
                      mismatches(main.events, model, (FORWARD, BACKWARD)), errors, merge_row(main, setup.n),
                      tuple(works), tuple(layout_bad), tuple(precision))
