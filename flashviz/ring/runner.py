"""`run_ring`: the ring on this machine in W real processes (spawn, gloo on 127.0.0.1 at a free port, or NCCL with one
GPU per rank), supervised: a rank that raises, dies or hangs ends the run within its timeout with an error naming
the rank and the cause, and no process or port is left behind."""

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

from flashviz.core.validate import tiled_config
from flashviz.ring.attention import (
    RingStepEvent,
    ring_attention,
)
from flashviz.ring.layouts import (
    CONTIGUOUS,
    PHASES,
    RankWork,
    check_layout,
    shard,
    unshard,
)

BACKENDS = ("gloo", "nccl")  # gloo: CPU tensors; nccl: one CUDA device per rank (cuda:rank)
FAIL_MODES = ("raise", "exit", "hang")  # run_ring's fail_rank: what the chosen rank does before its first ring step
FAIL_EXIT_CODE = 3  # the exit code of a rank made to die with fail_rank=(rank, "exit")
FAILURE_GRACE_S = 1.0  # after a rank fails, how long the others' reports are still read (to name the first cause)
POLL_S = 0.1  # the longest the parent waits for a message before it looks at the clock again
STOP_GRACE_S = 5.0  # how long a terminated rank has to exit before it is killed
# intra-op threads of each rank, as torchrun sets OMP_NUM_THREADS=1: W ranks on W cores. On a shared machine more
# threads per process than cores free made one rank's forward + backward 15x slower (N = 2048, 2 threads, 2 cores)
THREADS_PER_RANK = 1

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
class RingRun(RankWork):
    """What run_ring gathers from the ranks: the whole outputs and every rank's step events (its work per rank as
    its kernels counted it: RankWork's of, tiles_per_rank, imbalance)."""

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

    def records(self) -> tuple[RingStepEvent, ...]:
        """The run's events, every (phase, rank, step)."""
        return self.events


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


def float64_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dO: torch.Tensor | None = None,
                      causal: bool = False) -> dict[str, torch.Tensor]:
    """What a ring run is checked against: attention over the whole sequence in one process, in float64, on the
    inputs' own values. S is built once and gives both the output and the logsumexp.

    Args:
        q: (B, H, N, d).  k, v: (B, H_kv, N, d), H_kv dividing H.  dO: (B, H, N, d) or None.
        causal: top-left causal over the global positions, as ring_attention's.
    Returns:
        "out" (B, H, N, d) and "lse" (B, H, N), and with dO "dq", "dk", "dv" (the inputs' shapes); all float64.

    Example:
        >>> q = torch.randn(1, 2, 8, 4)
        >>> ref = float64_reference(q, q[:, :1], q[:, :1], torch.ones_like(q), causal=True)
        >>> sorted(ref), ref["dk"].shape, ref["lse"].dtype
        (['dk', 'dq', 'dv', 'lse', 'out'], torch.Size([1, 1, 8, 4]), torch.float64)
    """
    q, k, v = (t.detach().double().requires_grad_(dO is not None) for t in (q, k, v))
    group = q.shape[1] // k.shape[1]  # query heads per K/V head
    S = (q @ k.repeat_interleave(group, 1).transpose(-1, -2)) / math.sqrt(q.shape[-1])  # (B, H, N, N)
    if causal:
        S = S.masked_fill(torch.ones(S.shape[-2:], dtype=torch.bool, device=S.device).triu(1), -math.inf)
    out = torch.softmax(S, dim=-1) @ v.repeat_interleave(group, 1)  # (B, H, N, d)
    ref = {"out": out.detach(), "lse": torch.logsumexp(S, dim=-1).detach()}
    if dO is not None:
        ref.update(zip(("dq", "dk", "dv"), torch.autograd.grad(out, (q, k, v), dO.double()), strict=True))
    return ref
