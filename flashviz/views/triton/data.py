"""The Triton view's plain data: the kernel's own record at the view's settings (`kernel_record`, from
flashviz.triton.trace under Triton's interpreter) beside the library's tile schedule and IO model, the kernel's
source (`source_lines`, read as text: the view shows it before triton is imported), the steps of one program's loop
(`ProgramStep`), and the shared-memory budget of tutorial 06's knobs per GPU (`smem_budget`).

Legend: N sequence length, d head dimension, Br = BLOCK_M, Bc = BLOCK_N, Tr = ceil(N / Br), Tc = ceil(N / Bc).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from flashviz.vocab import FLASH2, FULL, PARTIAL, Q_OUTER, SKIPPED

if TYPE_CHECKING:
    from flashviz.views.triton.settings import TritonSettings

KERNEL_FILE = Path(__file__).resolve().parents[2] / "triton" / "kernel.py"  # flashviz/triton/kernel.py
SMEM_LIMIT_KIB = {  # shared memory one program (thread block) may use: CUDA C Programming Guide, Table 23
    "A100": 164,  # compute capability 8.0: 164 KB of shared memory per SM
    "H100": 227,  # compute capability 9.0: 227 KB per thread block (228 KB per SM)
}
GPU_DTYPE_BYTES = 2  # fp16 / bf16, the dtype the kernel runs in on a GPU
SEED = 0  # the record's inputs: standard normal, batch 1, one head


@dataclass(frozen=True)
class TritonSetup:
    """The problem and the knobs the view runs the kernel with."""

    n: int  # N
    d: int  # HEAD_DIM
    causal: bool  # STAGE = 3 (causal) or 1
    block_m: int  # BLOCK_M (Br)
    block_n: int  # BLOCK_N (Bc)
    num_warps: int  # warps per program (GPU only)
    num_stages: int  # pipelining depth (GPU only: SMEM budget)
    program: int  # the followed program's pid_m (clamped to the grid)


def setup_of(s: TritonSettings) -> TritonSetup:
    """The view's settings as a TritonSetup, the followed program clamped to the grid.

    Example:
        >>> from flashviz.views.triton.settings import TritonSettings
        >>> setup_of(TritonSettings()).block_m, setup_of(TritonSettings(tr_program=31)).program
        (64, 3)
    """
    programs = -(-s.tr_n // s.tr_bm)
    return TritonSetup(s.tr_n, s.tr_d, s.tr_causal, s.tr_bm, s.tr_bn, s.tr_warps, s.tr_stages,
                       min(s.tr_program, programs - 1))


def setup_problem(setup: TritonSetup) -> str:
    """Why the kernel cannot run these knobs ("" when it can).

    Example:
        >>> setup_problem(TritonSetup(256, 64, True, 32, 64, 4, 2, 0))[:30]
        'BLOCK_N = 64 must divide BLOCK'
    """
    if setup.block_m % setup.block_n:
        return (f"BLOCK_N = {setup.block_n} must divide BLOCK_M = {setup.block_m}: the diagonal band of a Q block is "
                "then whole K blocks. Lower BLOCK_N or raise BLOCK_M.")
    return ""


@dataclass(frozen=True)
class ProgramStep:
    """One load, dot or store of the followed program, in the order it ran."""

    line: int  # the kernel.py line that issued it
    kind: str  # "load", "dot", "store"
    tensor: str  # "Q", "K", "V", "O", "L" ("" for a dot)
    block: int  # the block it touched: K/V block for K and V, Q block for Q, O, L; -1 for a dot
    stage: int  # STAGE of the inner loop it ran in (0 outside it)
    nbytes: int  # bytes the load or store moved (fp32 here)


@dataclass(frozen=True)
class KernelRecord:
    """What the kernel did at a setup (its record), beside what the library says it should do."""

    setup: TritonSetup
    grid: tuple[int, int]  # (programs along Q blocks, along heads)
    loaded: tuple[tuple[tuple[int, int], ...], ...]  # per program pid_m: (k_block, stage) in load order, head 0
    status: tuple[tuple[str, ...], ...]  # tile_schedule's statuses, Tr x Tc
    steps: tuple[ProgramStep, ...]  # the followed program's loads, dots and stores
    tiles: int  # tiles the kernel computed
    schedule_tiles: int  # tiles tile_schedule computes
    mismatched_programs: int  # programs whose K blocks differ from the schedule's row
    stage2: int  # STAGE 2 tiles
    partial: int  # tile_schedule's partial tiles
    bytes_loaded: int  # what the loads' masks let through
    model_bytes_loaded: int  # io_cost("flash2") reads x 4 bytes
    bytes_stored: int
    model_bytes_stored: int  # io_cost("flash2") writes x 4 bytes
    dots: int
    error: float  # max |O - O_ref| against SDPA in float64
    seconds: float  # wall time of the traced launch under the interpreter

    @property
    def counts(self) -> dict[str, int]:
        """tile_schedule's tiles of each status: full, partial, skipped."""
        return {s: sum(x == s for row in self.status for x in row) for s in (FULL, PARTIAL, SKIPPED)}


def kernel_record(setup: TritonSetup) -> KernelRecord:
    """Run the kernel under Triton's interpreter at the setup (batch 1, one head, fp32) and read its record.

    Args:
        setup: the problem and knobs (setup_problem(setup) must be "").
    Returns:
        KernelRecord: the record next to tile_schedule's tiles and io_cost's FA2 bytes.

    Example:
        >>> import pytest
        >>> _ = pytest.importorskip("flashviz.triton.kernel")
        >>> r = kernel_record(TritonSetup(256, 64, True, 64, 32, 4, 2, 1))
        >>> [len(row) for row in r.loaded], r.mismatched_programs, r.bytes_loaded == r.model_bytes_loaded
        ([2, 4, 6, 8], 0, True)
    """
    import torch

    from flashviz import io_cost, tile_schedule
    from flashviz import triton as ft

    g = torch.Generator().manual_seed(SEED)
    q, k, v = (torch.randn(1, 1, setup.n, setup.d, generator=g) for _ in range(3))
    start = time.perf_counter()
    t = ft.trace(q, k, v, causal=setup.causal, block_m=setup.block_m, block_n=setup.block_n)
    seconds = time.perf_counter() - start
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=setup.causal)
    schedule = tile_schedule(setup.n, setup.n, setup.block_m, setup.block_n, causal=setup.causal,
                             loop_order=Q_OUTER)
    status = tuple(tuple(schedule.tile(i, j).status for j in range(schedule.n_k_blocks))
                   for i in range(schedule.n_q_blocks))
    loaded = tuple(tuple((x.k_block, x.stage) for x in t.tiles_of(p)) for p in t.programs)
    want = [[j for j, s in enumerate(row) if s != SKIPPED] for row in status]
    cost = io_cost(FLASH2, setup.n, setup.n, setup.d, setup.block_m, setup.block_n, causal=setup.causal)
    (followed,) = [p for p in t.programs if p.q_block == setup.program]
    steps = tuple(ProgramStep(e.line, e.kind, e.tensor,
                              -1 if e.kind == "dot" else e.first_row // (setup.block_n if e.tensor in "KV"
                                                                        else setup.block_m),
                              e.stage, e.nbytes) for e in t.events_of(followed))
    return KernelRecord(
        setup, t.grid, loaded, status, steps, len(t.tiles), sum(x.computed for x in schedule),
        sum([j for j, _ in row] != w for row, w in zip(loaded, want, strict=True)),
        sum(x.stage == 2 for x in t.tiles), sum(s == PARTIAL for row in status for s in row),
        t.bytes_loaded, cost.reads * 4, t.bytes_stored, cost.writes * 4, t.dots,
        float((t.out.double() - ref).abs().max()), seconds)


def source_lines() -> tuple[str, ...]:
    """The kernel's source file, line by line (index i holds line i + 1), read as text.

    Example:
        >>> any(line.startswith("def _attn_fwd_inner(") for line in source_lines())
        True
    """
    return tuple(KERNEL_FILE.read_text().splitlines())


def forward_span(lines: tuple[str, ...]) -> tuple[int, int]:
    """(first, last) line numbers of the forward kernel: `_attn_fwd_inner`'s decorator to `_attn_fwd`'s last line.

    Example:
        >>> first, last = forward_span(source_lines())
        >>> source_lines()[first - 1], source_lines()[first]
        ('@triton.jit', 'def _attn_fwd_inner(acc, l_i, m_i, q,  #')
    """
    first = next(i for i, line in enumerate(lines) if line.startswith("def _attn_fwd_inner("))
    end = next(i for i, line in enumerate(lines) if line.startswith("def _attn_bwd_preprocess("))
    last = end - 1
    while not lines[last - 1].strip() or lines[last - 1].startswith("@"):
        last -= 1
    return first, last  # 1-based: the decorator is line `first`


@dataclass(frozen=True)
class SmemRow:
    """The shared memory one program of the forward needs on one GPU, against what it may use."""

    gpu: str
    need: int  # bytes: (BLOCK_M + 2 BLOCK_N num_stages) d dtype_bytes
    limit: int  # bytes one program may use
    fits: bool


def smem_need(block_m: int, block_n: int, num_stages: int, d: int, dtype_bytes: int = GPU_DTYPE_BYTES) -> int:
    """Bytes of shared memory the forward keeps per program: Q once, K and V num_stages deep.

    Example:
        >>> smem_need(128, 64, 3, 128)  # (128 + 2 * 64 * 3) * 128 * 2
        131072
    """
    return (block_m + 2 * block_n * num_stages) * d * dtype_bytes


def smem_budget(block_m: int, block_n: int, num_stages: int, d: int) -> tuple[SmemRow, ...]:
    """The forward's SMEM need at these knobs on each GPU of SMEM_LIMIT_KIB, fp16 elements.

    Example:
        >>> [(r.gpu, r.fits) for r in smem_budget(128, 128, 3, 128)]  # 229376 bytes: A100's "out of resource"
        [('A100', False), ('H100', True)]
    """
    need = smem_need(block_m, block_n, num_stages, d)
    return tuple(SmemRow(gpu, need, kib * 1024, need <= kib * 1024) for gpu, kib in SMEM_LIMIT_KIB.items())
