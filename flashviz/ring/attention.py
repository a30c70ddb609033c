"""`ring_attention` on an initialised process group: K/V shards sent round the ring by batch_isend_irecv while the
current shard's tiles are computed by flashviz's kernel, partials merged by logsumexp (flash_decode's merge), and a
backward that sends K, V and their dK, dV accumulators round the ring. flashviz/ring/__init__.py says the whole idea.

The transfers do not rely on message tags (NCCL ignores them): every rank posts its messages to rank r + 1, and its
receives from rank r - 1, in one fixed order, and point-to-point messages between two ranks are matched in the order
they were posted (NCCL, and gloo for one tag). The order, the same on every rank and at every step t:

    forward:  [t < W - 1] K/V shard, its owner rank
    backward: [t < W - 1] K/V shard, its owner rank;  then  dK/dV accumulator, its owner rank

Each step's compute is one function of the step's inputs (`forward_step`, `backward_step`), run and timed by the
loops below: on CUDA the measured parts end with a synchronisation of the compute stream (kernels are asynchronous,
so without it compute_s would time their launches), never of the communication stream, whose transfers overlap the
compute on purpose."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from flashviz.core.backward import DOUBLE_BACKWARD_MESSAGE, tiled_backward
from flashviz.core.decode import merge_partials
from flashviz.core.flash import build_schedule, tiled_forward
from flashviz.core.tiling import TileSchedule
from flashviz.core.validate import AttentionConfig, tiled_config
from flashviz.ring.layouts import (
    BACKWARD,
    BACKWARD_FLOPS_PER_ELEMENT,
    CONTIGUOUS,
    FORWARD,
    FORWARD_FLOPS_PER_ELEMENT,
    check_layout,
    global_position,
)
from flashviz.vocab import FULL, PARTIAL, Q_OUTER, SKIPPED

# ----------------------------------------------------------------------------------------------------------------------
# the ring on an initialised process group


@dataclass(frozen=True)
class RingStepEvent:
    """What a rank reports after each ring step (on_step), measured in its own process."""

    rank: int  # r
    step: int  # t, 0 .. W-1
    kv_rank: int  # whose K/V shard the rank held: read from the owner message that travels with the shard
    phase: str  # "forward" or "backward"
    world: int  # W
    tiles_computed: int  # tiles the kernel computed (full + partial), from the kernel's own tile schedule
    tiles_partial: int  # of them, computed with an element mask
    tiles_skipped: int  # tiles never loaded; all of them when the step is skipped whole
    flops: int  # FLOPs of the computed tiles (4 B H d per score element forward, 10 B H d backward)
    bytes_sent: int  # bytes of K/V (and dK/dV in the backward) this rank sent at this step; the 8-byte owner messages
    #                  that travel with them are not counted
    bytes_received: int  # bytes it received at this step (the same in a ring)
    start_s: float  # time.time() when the step began: one clock for all the processes of a machine
    compute_s: float  # wall seconds of the step's kernel (and its merge, or its dK/dV accumulation), up to the end
    #                   of its work on the device (the compute stream synchronised on CUDA)
    comm_s: float  # seconds spent waiting for the step's transfers after the compute: the transfer time not
    #                hidden behind the compute
    lse: tuple[float, ...]  # forward: the step's partial logsumexp L_t of each local query row, batch 0, query head 0
    #                         (natural log; -inf where none of the step's keys is visible); () in the backward
    compute_cpu_s: float = 0.0  # this process's CPU seconds (time.process_time, all its threads) over the same
    #                             measured compute as compute_s: on CPU ranks, compute_cpu_s well below compute_s x
    #                             the rank's threads means the rank waited for a core (W ranks sharing fewer cores)


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


def _exchange(ring: _Ring, sends: Sequence[torch.Tensor], recvs: Sequence[torch.Tensor]):
    """Post sends to rank r + 1 and receives from rank r - 1, in the order given, in one batch_isend_irecv; the
    requests. No tags: the receives match the sends by their order (the module's docstring states it)."""
    ops = [dist.P2POp(dist.isend, t, group=ring.group, group_peer=ring.peer(1)) for t in sends]
    ops += [dist.P2POp(dist.irecv, t, group=ring.group, group_peer=ring.peer(-1)) for t in recvs]
    return dist.batch_isend_irecv(ops)


def synchronize(device: torch.device) -> None:
    """Wait until the work queued on device's current (compute) stream has run: CUDA kernels return at launch, so a
    clock read after them without this times their launches. A no-op on the CPU (and any device that runs ops
    synchronously). Not the communication stream: a transfer posted before the compute keeps running."""
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()


class _Clock:
    """Wall (perf_counter) and process CPU (process_time) seconds of measured parts, each part ending with
    synchronize(device)."""

    def __init__(self, device: torch.device):
        self.device, self.wall, self.cpu = device, 0.0, 0.0

    def __enter__(self) -> _Clock:
        self._w, self._c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        synchronize(self.device)
        self.wall += time.perf_counter() - self._w
        self.cpu += time.process_time() - self._c


def _wait(requests, device: torch.device) -> float:
    """Wait for posted transfers (on CUDA until the compute stream may use what arrived); the seconds it took."""
    t0 = time.perf_counter()
    for r in requests or ():
        r.wait()
    synchronize(device)
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
    kwargs = {"block_size": ring.block_size, "scale": ring.scale, "loop_order": Q_OUTER}
    if ring.causal:
        pos = lambda r, i: global_position(i, r, n_local, ring.world, ring.layout)  # noqa: E731
        if pos(kv_rank, 0) > pos(ring.rank, n_local - 1):
            return None  # every key after every query: skipped whole
        if kv_rank == ring.rank:
            kwargs["causal"] = True
        elif pos(kv_rank, n_local - 1) > pos(ring.rank, 0):
            kwargs["mask_mod"] = _ring_causal(ring, n_local, kv_rank)
    config = tiled_config(q, k, v, **kwargs)
    return config, build_schedule(config, config.loop_order, q.device)  # classified on the shards' device


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
          clock: _Clock, comm_s: float, L_t: torch.Tensor | None) -> None:
    if ring.on_step is None:
        return
    B, H, n_local, d = q.shape
    computed, partial, skipped, area = _counts(plan, n_local, ring.block_size)
    per_element = FORWARD_FLOPS_PER_ELEMENT if phase == FORWARD else BACKWARD_FLOPS_PER_ELEMENT
    lse: tuple[float, ...] = ()
    if phase == FORWARD:
        lse = (float("-inf"),) * n_local if L_t is None or B * H == 0 else tuple(L_t[0, 0].double().cpu().tolist())
    ring.on_step(RingStepEvent(ring.rank, t, kv_rank, phase, ring.world, computed, partial, skipped,
                               per_element * B * H * d * area, sent, sent, start, clock.wall, comm_s, lse,
                               compute_cpu_s=clock.cpu))


def _nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _check_owner(owner: torch.Tensor, expected: int, what: str, ring: _Ring, t: int) -> int:
    got = int(owner.item())
    if got != expected:
        raise RuntimeError(f"rank {ring.rank} received the {what} of rank {got} at ring step {t}, expected rank "
                           f"{expected}: the ranks are out of step (did every rank of the group call ring_attention "
                           "with the same settings?).")
    return got


def forward_step(ring: _Ring, q: torch.Tensor, kv: torch.Tensor, kv_rank: int, O: torch.Tensor | None,
                 L: torch.Tensor | None):
    """One forward step's compute, on this rank: its queries against kv_rank's shard, merged into the running result.

    Args:
        q: (B, H, n, d) this rank's queries.  kv: (2, B, H_kv, n, d) the K/V shard held at this step.
        O, L: (B H, n, d) and (B H, n) the merged output and logsumexp so far, in the accumulator dtype; None at
            step 0.
    Returns:
        (O, L, plan, L_t): the merged result so far, the step's kernel plan (None: skipped whole, O and L as they
        came), and the step's own logsumexp (B, H, n) or None.
    """
    B, H, n_local, d = q.shape
    plan = _plan(ring, q, kv[0], kv[1], kv_rank)
    if plan is None:
        return O, L, None, None
    # the partial stays in fp32 (fp64 for fp64): a bf16 step output rounded before the merge would add one rounding
    # per step; the merged output is rounded to q's dtype once, at the end (as ring-flash-attention keeps out fp32)
    O_t, L_t = tiled_forward(q, kv[0], kv[1], plan[0], schedule=plan[1], out_dtype=plan[0].acc)  # (B, H, n, d)
    O_t, L_flat = O_t.reshape(B * H, n_local, d), L_t.reshape(B * H, n_local)
    if O is None:
        return O_t, L_flat, plan, L_t
    # the Flash-Decoding merge of the running result and this step's partial: exact, in fp32
    O, L = merge_partials(torch.stack((O, O_t)), torch.stack((L, L_flat)))  # (B H, n, d), (B H, n)
    return O, L, plan, L_t


def _ring_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ring: _Ring) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward ring: O (B, H, n, d) in q's dtype and L (B, H, n) in the accumulator dtype."""
    B, H, n_local, d = q.shape
    W = ring.world
    kv = torch.stack((k, v))  # (2, B, H_kv, n, d): K and V travel as one message
    owner = torch.full((1,), ring.rank, dtype=torch.long, device=q.device)  # whose shard kv is
    O = L = None  # (B H, n, d), (B H, n) the merged output and logsumexp so far, in acc
    for t in range(W):
        start = time.time()
        kv_rank = _check_owner(owner, (ring.rank - t) % W, "K/V shard", ring, t)
        requests, sent = None, 0
        if t < W - 1:  # post the next shard's transfer before the compute: it travels while the kernel runs
            kv_next, owner_next = torch.empty_like(kv), torch.empty_like(owner)
            requests = _exchange(ring, [kv, owner], [kv_next, owner_next])  # the fixed order: shard, owner
            sent = _nbytes(kv)
        with _Clock(q.device) as clock:
            O, L, plan, L_t = forward_step(ring, q, kv, kv_rank, O, L)
        ring.plans[kv_rank] = plan
        comm_s = _wait(requests, q.device)
        if requests is not None:
            kv, owner = kv_next, owner_next
        _emit(ring, FORWARD, t, kv_rank, plan, q, sent, start, clock, comm_s, L_t)
    assert O is not None  # step 0 holds the rank's own shard: its diagonal is never skipped
    return O.view(B, H, n_local, d).to(q.dtype), L.view(B, H, n_local)


def backward_step(dO: torch.Tensor, q: torch.Tensor, kv: torch.Tensor, O: torch.Tensor, L: torch.Tensor, plan
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """One backward step's compute: dQ_t, dK_t, dV_t of this rank's queries against the held shard (FA2 Algorithm 2
    from the merged O and the global L, so P_ij = exp(S_ij - L_i) is the final softmax); None when the forward
    skipped the step whole (plan None)."""
    if plan is None:
        return None
    return tiled_backward(dO, q, kv[0], kv[1], O, L, plan[0], plan[1])


def _ring_backward(dO: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, O: torch.Tensor,
                   L: torch.Tensor, ring: _Ring) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The backward ring: K, V travel as in the forward, and with them the dK, dV accumulators of their owner.

    At step t the rank computes its queries' gradients against kv_rank's keys (backward_step), adds dQ_t to its own
    dQ and dK_t, dV_t to the accumulator that arrived with the shard, and sends that accumulator on. After W steps
    each accumulator has visited every rank and, one hop more, is back with its owner.
    """
    W = ring.world
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    kv = torch.stack((k, v))  # (2, B, H_kv, n, d)
    owner = torch.full((1,), ring.rank, dtype=torch.long, device=q.device)
    dQ = torch.zeros(q.shape, dtype=acc, device=q.device)  # (B, H, n, d)
    dkv_requests = dkv_in = dkv_owner_in = None  # the accumulator arriving from rank r - 1 (posted a step earlier)
    dkv = torch.zeros(kv.shape, dtype=acc, device=q.device)  # (2, B, H_kv, n, d) accumulator of the held shard
    for t in range(W):
        start = time.time()
        kv_rank = _check_owner(owner, (ring.rank - t) % W, "K/V shard", ring, t)
        requests, sent = None, 0
        if t < W - 1:  # the fixed order, 1 of 2: the shard, its owner
            kv_next, owner_next = torch.empty_like(kv), torch.empty_like(owner)
            requests = _exchange(ring, [kv, owner], [kv_next, owner_next])
            sent = _nbytes(kv)
        plan = ring.plans[kv_rank]
        with _Clock(q.device) as clock:
            grads = backward_step(dO, q, kv, O, L, plan)  # dQ_t, dK_t, dV_t
            if grads is not None:
                dQ += grads[0]
        comm_s = 0.0
        if t > 0:  # the accumulator of kv_rank's shard, sent by rank r - 1 at the end of step t - 1
            comm_s += _wait(dkv_requests, q.device)
            dkv = dkv_in
            _check_owner(dkv_owner_in, kv_rank, "dK/dV accumulator", ring, t)
        with clock:
            if grads is not None:
                dkv[0] += grads[1]
                dkv[1] += grads[2]
        if W > 1:  # the fixed order, 2 of 2: the accumulator, its owner; it is back home after step W - 1
            dkv_in, dkv_owner_in = torch.empty_like(dkv), torch.empty_like(owner)
            dkv_owner = torch.full_like(owner, kv_rank)  # kept alive (and dkv with it) until the send completes
            dkv_requests = _exchange(ring, [dkv, dkv_owner], [dkv_in, dkv_owner_in])
            sent += _nbytes(dkv)
        comm_s += _wait(requests, q.device)
        if requests is not None:
            kv, owner = kv_next, owner_next
        _emit(ring, BACKWARD, t, kv_rank, plan, q, sent, start, clock, comm_s, None)
    if W > 1:  # this rank's own accumulator, back from its last visit (rank r - 1)
        _wait(dkv_requests, q.device)
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
