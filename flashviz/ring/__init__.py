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

The package: `layouts` (the layouts and the pure model), `attention` (ring_attention on a process group),
`runner` (run_ring: W processes on this machine). This module is the public face, `flashviz.ring`.
"""

from flashviz.ring.attention import (
    RingStepEvent,
    StepCallback,
    ring_attention,
)
from flashviz.ring.layouts import (
    BACKWARD,
    BACKWARD_FLOPS_PER_ELEMENT,
    CONTIGUOUS,
    FORWARD,
    FORWARD_FLOPS_PER_ELEMENT,
    LAYOUTS,
    PHASES,
    STRIPED,
    ZIGZAG,
    RingSchedule,
    RingStepPlan,
    accumulator_name,
    check_layout,
    global_position,
    imbalance,
    owner_rank,
    positions,
    ring_schedule,
    ring_step,
    shard,
    shard_bytes,
    step_statuses,
    tiles_per_rank,
    unshard,
)
from flashviz.ring.runner import (
    BACKENDS,
    FAIL_EXIT_CODE,
    FAIL_MODES,
    FAILURE_GRACE_S,
    POLL_S,
    STOP_GRACE_S,
    THREADS_PER_RANK,
    RingJob,
    RingRun,
    free_port,
    run_ring,
    run_ring_jobs,
)

__all__ = [
    "BACKENDS",
    "BACKWARD",
    "BACKWARD_FLOPS_PER_ELEMENT",
    "CONTIGUOUS",
    "FAILURE_GRACE_S",
    "FAIL_EXIT_CODE",
    "FAIL_MODES",
    "FORWARD",
    "FORWARD_FLOPS_PER_ELEMENT",
    "LAYOUTS",
    "PHASES",
    "POLL_S",
    "STOP_GRACE_S",
    "STRIPED",
    "THREADS_PER_RANK",
    "ZIGZAG",
    "RingJob",
    "RingRun",
    "RingSchedule",
    "RingStepEvent",
    "RingStepPlan",
    "StepCallback",
    "accumulator_name",
    "check_layout",
    "free_port",
    "global_position",
    "imbalance",
    "owner_rank",
    "positions",
    "ring_attention",
    "ring_schedule",
    "ring_step",
    "run_ring",
    "run_ring_jobs",
    "shard",
    "shard_bytes",
    "step_statuses",
    "tiles_per_rank",
    "unshard",
]
