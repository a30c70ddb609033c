"""The numerics lab's plain data: how far each kernel is from float64, and why two correct kernels disagree.

For one LabSettings (input precision, P's dtype, tile size, tau, Hadamard, outliers, N_q, N_k, causal), every function
here runs the kernels on the same seeded inputs and returns a frozen dataclass of ints, floats, strings and tuples, from
which the figures (flashviz.views.numerics.figures) and the sentences (flashviz.views.numerics.sentences) are made. The
FA4, FA3 and causal-alignment experiments follow them.

References:
    flash-attn's tests (tests/test_flash_attn.py, hopper/test_flash_attn.py): a kernel's max |error| against the
        reference may be at most twice a plain PyTorch run's in the same dtype, plus fwd_atol = 2 max|(ref + 0.3 -
        0.3) - ref| computed in the output dtype (the rounding of numbers near 1). Here the reference is float64.
    FlashAttention-2 (Dao, 2023), Section 3.1: the tiled kernels take their sums in a different order from SDPA and
        from each other (per tile, rescaled), so in a 16-bit dtype their outputs differ in the last bits while each
        stays as close to the exact value as plain PyTorch.

Legend: B = 1 batch, H heads, N_q / N_k query / key lengths, d head dimension, Br = Bc = block.
Inputs of an FP8 precision: the kernels other than FP8 run in fp32 on Q, K, V rounded to FP8 with one scale per
(b, h) (per-tensor quantisation, the plain way); the FP8 kernel (flashviz.numerics.fp8_attention) gets the fp32
inputs and does its own per-block quantisation (and Hadamard); the reference is float64 of the fp32 inputs.

Beside those, the paper experiments: FlashAttention-4's lazy rescale (`lazy_rescale`, rescales per row and tile at
tau 0 and tau), FlashAttention-3's FP8 with and without Hadamard (`fp8_table`), top-left against bottom-right
causal masks (`causal_alignment`); and the view's run: every experiment on one LabSettings with progress (`run_lab`),
its cost counted before it starts (`lab_work`, `lab_problem`).
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from flashviz.core.backward import flash_attention
from flashviz.core.decode import flash_decode
from flashviz.core.flash import flash_attention_forward
from flashviz.core.reference import naive_attention
from flashviz.core.softmax_variants import FA4_THRESHOLD
from flashviz.limits import NUMERICS_D_MAX, NUMERICS_HEADS_MAX, NUMERICS_N_MAX, NUMERICS_SEEDS_MAX, tile_problem
from flashviz.measure.dtype_rule import RuleRow, max_error
from flashviz.measure.progress import Progress, stage
from flashviz.numerics import ErrorStats, error_stats, fp8_attention, make_inputs, quantize_blocks
from flashviz.views.numerics.settings import NO_P_ROUNDING, NumericsSettings
from flashviz.vocab import (
    FLASH,
    FLASH2,
    FP8,
    FP8_FORMATS,
    IMPL_LOOP_ORDER,
    NAIVE,
    NUMERICS_KERNEL_LABELS,
    PRECISION_DTYPES,
    PRECISIONS,
    Q_OUTER,
    SDPA,
)

PLAIN = NAIVE  # the plain PyTorch run of flash-attn's rule: standard attention in the same dtype


TILE_SIZES = (16, 32, 64, 128)  # the tile sizes whose outputs the spread compares (those <= max(N_q, N_k))


ATOL_PROBE = 0.3  # flash-attn's fwd_atol: 2 max|(ref + 0.3 - 0.3) - ref| in the output dtype


@dataclass(frozen=True)
class LabSettings:
    """One configuration of the numerics lab (the view's widgets), validated on construction."""

    n_q: int = 128  # N_q, query rows (1 .. NUMERICS_N_MAX)
    n_k: int = 256  # N_k, keys (1 .. NUMERICS_N_MAX); N_q != N_k shows the two causal alignments apart
    d: int = 64  # head dimension (1 .. NUMERICS_D_MAX); Hadamard needs a power of two
    heads: int = 2  # H (1 .. NUMERICS_HEADS_MAX), batch 1
    precision: str = "bfloat16"  # the inputs' precision: float32, bfloat16, float16, e4m3 or e5m2 (vocab.PRECISIONS)
    p_precision: str | None = None  # P~'s dtype before P V in FA1/FA2 (a PRECISIONS name); None: fp32, unrounded
    block: int = 64  # Br = Bc of FA1/FA2, the FP8 kernel's quantisation block and K/V tile
    tau: float = 8.0  # FA1/FA2's rescale threshold in log2 units (FA4's rule; 0 = the classic update)
    hadamard: bool = True  # the FP8 kernel's incoherent processing (FA3)
    outliers: bool = True  # inputs with outlier features (flashviz.numerics.make_inputs(outliers=True))
    causal: bool = False  # top-left causal mask (SDPA's is_causal) in the error experiments
    seed: int = 0  # the inputs' seed (and the Hadamard signs')

    def __post_init__(self) -> None:
        for name, top in (("n_q", NUMERICS_N_MAX), ("n_k", NUMERICS_N_MAX), ("d", NUMERICS_D_MAX),
                          ("heads", NUMERICS_HEADS_MAX), ("block", NUMERICS_N_MAX)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise ValueError(f"{name} must be an int from 1 to {top}, got {value!r}.")
        for name, value, allowed in (("precision", self.precision, PRECISIONS),
                                     ("p_precision", self.p_precision, (None, *PRECISIONS))):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}.")
        if isinstance(self.tau, bool) or not isinstance(self.tau, (int, float)) or not 0 <= self.tau < float("inf"):
            raise ValueError(f"tau must be a finite number >= 0 (log2 units; FA4 uses 8), got {self.tau!r}.")
        for name in ("hadamard", "outliers", "causal"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}.")
        problem = tile_problem([max(self.n_q, self.n_k)], self.block, self.block)
        if problem is not None:
            raise ValueError(problem)

    @property
    def is_fp8(self) -> bool:
        """Whether the inputs are FP8 (then the FP8 kernel runs too)."""
        return self.precision in FP8_FORMATS

    @property
    def hadamard_runs(self) -> bool:
        """Hadamard on and possible (d a power of two)."""
        return self.hadamard and self.d & (self.d - 1) == 0


def torch_dtype(precision: str) -> torch.dtype:
    """The torch dtype of a precision name ("bfloat16" -> torch.bfloat16, "e4m3" -> torch.float8_e4m3fn).

    Example:
        >>> torch_dtype("e5m2")
        torch.float8_e5m2
    """
    return getattr(torch, PRECISION_DTYPES[precision])


@dataclass(frozen=True)
class LabInputs:
    """The tensors one experiment runs on (B = 1)."""

    q: torch.Tensor  # (1, H, N_q, d) what naive, FA1, FA2 and SDPA get: the precision's dtype (fp32 for FP8)
    k: torch.Tensor  # (1, H, N_k, d)
    v: torch.Tensor  # (1, H, N_k, d)
    source: tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # fp32 q, k, v before any FP8 rounding (the FP8
    #                                                          kernel's inputs); the run inputs themselves otherwise
    ref: torch.Tensor  # (1, H, N_q, d) float64 attention of the unrounded inputs (of source for FP8)


def lab_inputs(s: LabSettings, *, outliers: bool | None = None, seed: int | None = None,
               causal: bool | None = None) -> LabInputs:
    """The seeded inputs of s (or of its outliers / seed / causal replaced) and their float64 reference.

    Example:
        >>> x = lab_inputs(LabSettings(n_q=8, n_k=16, d=8, heads=1, precision="e4m3"))
        >>> x.q.dtype, x.ref.dtype, tuple(x.k.shape)
        (torch.float32, torch.float64, (1, 1, 16, 8))
    """
    outliers = s.outliers if outliers is None else outliers
    causal = s.causal if causal is None else causal
    seed = s.seed if seed is None else seed
    src = make_inputs(1, s.heads, s.n_q, s.n_k, s.d, dtype=torch.float64, outliers=outliers, seed=seed)
    if s.is_fp8:
        source = tuple(x.float() for x in src)
        run = tuple(quantize_blocks(x, s.precision, block_size=x.shape[2]) for x in source)  # one scale per (b, h)
    else:
        run = source = tuple(x.to(torch_dtype(s.precision)) for x in src)
    ref = naive_attention(*(x.double() for x in source), causal=causal)  # (1, H, N_q, d) float64
    return LabInputs(*run, source, ref)


def run_kernel(kernel: str, s: LabSettings, x: LabInputs, *, block: int | None = None,
               causal: bool | None = None) -> torch.Tensor:
    """One kernel's output on x: naive, flash (FA1), flash2 (FA2) and sdpa on x.q, x.k, x.v; fp8 on x.source.

    Example:
        >>> s = LabSettings(n_q=8, n_k=8, d=8, heads=1, precision="float32")
        >>> run_kernel("flash2", s, lab_inputs(s)).shape
        torch.Size([1, 1, 8, 8])
    """
    causal = s.causal if causal is None else causal
    block = s.block if block is None else block
    if kernel == NAIVE:
        return naive_attention(x.q, x.k, x.v, causal=causal)
    if kernel in IMPL_LOOP_ORDER:
        p_dtype = None if s.p_precision is None else torch_dtype(s.p_precision)
        return flash_attention_forward(x.q, x.k, x.v, block, causal=causal, loop_order=IMPL_LOOP_ORDER[kernel],
                                       rescale_threshold=s.tau, p_dtype=p_dtype)
    if kernel == SDPA:
        return F.scaled_dot_product_attention(x.q, x.k, x.v, is_causal=causal)  # top-left, as causal=True here
    if kernel == FP8:
        fmt = s.precision if s.is_fp8 else FP8_FORMATS[0]
        return fp8_attention(*x.source, fmt=fmt, block_size=block, hadamard=s.hadamard_runs, causal=causal,
                             seed=s.seed)
    raise ValueError(f"kernel must be one of {tuple(NUMERICS_KERNEL_LABELS)}, got {kernel!r}.")


@dataclass(frozen=True)
class KernelError:
    """One kernel's error against float64, and flash-attn's verdict on it."""

    kernel: str  # naive, flash, flash2, sdpa or fp8 (vocab.NUMERICS_KERNELS)
    label: str  # naive, FA1, FA2, SDPA, FA3 FP8
    stats: ErrorStats  # max |error|, RMSE, relative RMSE, the per-row max |error|
    bound: float  # 2 x the plain run's max |error| + fwd_atol
    passes: bool  # stats.max_abs <= bound: flash-attn's test would pass


@dataclass(frozen=True)
class KernelErrors:
    """Every kernel's error on the same inputs, side by side."""

    precision: str  # the inputs' precision name
    out_dtype: str  # the outputs' dtype name (fp32 for FP8 inputs)
    eps: float  # machine epsilon of the precision (the gap between 1 and the next number)
    plain_max_abs: float  # the plain run's (naive attention's) max |error|
    fwd_atol: float  # 2 max|(ref + 0.3 - 0.3) - ref| in the output dtype
    rows: tuple[KernelError, ...]  # naive, FA1, FA2, SDPA (and FA3 FP8 for FP8 inputs)
    notes: tuple[str, ...]  # what did not run as asked, and why (e.g. Hadamard with d not a power of two)


def fwd_atol(ref: torch.Tensor, dtype: torch.dtype) -> float:
    """flash-attn's rounding floor: 2 max|(r + 0.3 - 0.3) - r| with r = ref rounded to dtype, computed in dtype.

    Example:
        >>> fwd_atol(torch.tensor([1.0], dtype=torch.float64), torch.bfloat16)  # 1.3 rounds to 1.296875
        0.0078125
    """
    r = ref.to(dtype)
    return 2 * ((r + ATOL_PROBE - ATOL_PROBE).double() - r.double()).abs().max().item() if r.numel() else 0.0


def kernel_errors(s: LabSettings) -> KernelErrors:
    """The error of naive, FA1, FA2, SDPA (and FA3's FP8 kernel for FP8 inputs) against float64, side by side.

    Example:
        >>> r = kernel_errors(LabSettings(n_q=32, n_k=32, d=16, heads=1, block=16))
        >>> [row.label for row in r.rows], all(row.passes for row in r.rows)
        (['naive', 'FA1', 'FA2', 'SDPA'], True)
    """
    x = lab_inputs(s)
    kernels = [NAIVE, FLASH, FLASH2, SDPA, *([FP8] if s.is_fp8 else [])]
    outs = {kn: run_kernel(kn, s, x) for kn in kernels}
    stats = {kn: error_stats(out, x.ref) for kn, out in outs.items()}
    atol = fwd_atol(x.ref, outs[PLAIN].dtype)
    bound = 2 * stats[PLAIN].max_abs + atol
    rows = tuple(KernelError(kn, NUMERICS_KERNEL_LABELS[kn], stats[kn], bound, stats[kn].max_abs <= bound)
                 for kn in kernels)
    notes = ("Hadamard needs d a power of two: the FP8 kernel ran without it",) if (
        s.is_fp8 and s.hadamard and not s.hadamard_runs) else ()
    return KernelErrors(s.precision, str(outs[PLAIN].dtype).removeprefix("torch."),
                        torch.finfo(torch_dtype(s.precision)).eps, stats[PLAIN].max_abs, atol, rows, notes)


@dataclass(frozen=True)
class FlashVsSdpa:
    """FA2 against SDPA in the same dtype: how much they differ, and how far each is from float64."""

    precision: str  # the inputs' precision name
    eps: float  # its machine epsilon
    max_diff: float  # max |O_FA2 - O_SDPA|, both in the output dtype
    flash_error: float  # FA2's max |error| against float64
    sdpa_error: float  # SDPA's max |error| against float64
    differing: float  # the fraction of output elements where the two differ at all


def flash_vs_sdpa(s: LabSettings) -> FlashVsSdpa:
    """FA2 and SDPA on the same inputs: their difference against each one's error ("they round differently").

    Example:
        >>> r = flash_vs_sdpa(LabSettings(n_q=64, n_k=64, d=16, heads=1, block=16))
        >>> r.max_diff <= r.flash_error + r.sdpa_error  # the triangle inequality, whatever the rounding
        True
    """
    x = lab_inputs(s)
    fa2, sdpa = run_kernel(FLASH2, s, x), run_kernel(SDPA, s, x)
    diff = (fa2.double() - sdpa.double()).abs()
    return FlashVsSdpa(s.precision, torch.finfo(torch_dtype(s.precision)).eps, diff.max().item(),
                       error_stats(fa2, x.ref).max_abs, error_stats(sdpa, x.ref).max_abs,
                       (diff > 0).double().mean().item())


@dataclass(frozen=True)
class TwoErrors:
    """flash-attn's comparison for every kernel: (kernel in the dtype - reference in fp32) against (reference in the
    dtype - reference in fp32), the reference being SDPA's formula (its scores in fp32, then in the dtype). For
    kernels that run in fp32 (fp32 and FP8 inputs) the wider reference is float64."""

    precision: str  # the inputs' precision name
    dtype: str  # the dtype the kernels ran in (fp32 for FP8 inputs, which the lab runs in fp32)
    wide: str  # the reference's wider dtype: float32 for bf16 / fp16 kernels (flash-attn's), float64 for fp32 ones
    rows: tuple[RuleRow, ...]  # per kernel: .error = max|kernel - ref fp32|, .sdpa_error = max|ref low - ref fp32|


TWO_ERROR_KERNELS = ("FA1", "FA2", "decode", "backward dQ", "backward dK", "backward dV")


def two_errors(s: LabSettings) -> TwoErrors:
    """flash-attn's two errors per kernel on the lab's inputs: FA1 and FA2 (the lab's mask), flash_decode (every
    query row against the keys as a cache, no mask) and the backward's dQ, dK, dV (the lab's mask, dO seeded).

    The reference in fp32 is SDPA on the inputs upcast to fp32 (flash-attn's attention_ref with upcast=True); the
    reference in the dtype is SDPA on the inputs as they are. A kernel passes when its error is at most 2x the
    reference's: the rule tests/test_dtype_rule.py holds every path to against float64.

    Example:
        >>> r = two_errors(LabSettings(n_q=16, n_k=32, d=8, heads=1, block=8))
        >>> [row.path for row in r.rows][:3], all(row.passes for row in r.rows)
        (['FA1', 'FA2', 'decode'], True)
    """
    x = lab_inputs(s)
    q, k, v = x.q, x.k, x.v
    wide = torch.float32 if q.dtype in (torch.bfloat16, torch.float16) else torch.float64  # fp32 runs: float64
    up = tuple(t.to(wide) for t in (q, k, v))

    def sdpa(a, b, c, causal=s.causal):
        return F.scaled_dot_product_attention(a, b, c, is_causal=causal)

    ref32, ref_low = sdpa(*up), sdpa(q, k, v)
    outs = {"FA1": run_kernel(FLASH, s, x), "FA2": run_kernel(FLASH2, s, x)}
    rows = [RuleRow("forward", str(q.dtype).removeprefix("torch."), name, max_error(out, ref32),
                    max_error(ref_low, ref32)) for name, out in outs.items()]
    dec32, dec_low = sdpa(*up, causal=False), sdpa(q, k, v, causal=False)
    rows.append(RuleRow("decode", rows[0].dtype, "decode", max_error(flash_decode(q, k, v), dec32),
                        max_error(dec_low, dec32)))
    dO = torch.randn(q.shape, generator=torch.Generator().manual_seed(s.seed + 1), dtype=torch.float64).to(q.dtype)

    def grads(fn, xs):
        xs = [t.detach().clone().requires_grad_() for t in xs]
        return torch.autograd.grad(fn(*xs), xs, dO.to(xs[0].dtype))

    ours = grads(lambda a, b, c: flash_attention(a, b, c, block_size=s.block, causal=s.causal), (q, k, v))
    want, theirs = grads(sdpa, up), grads(sdpa, (q, k, v))
    rows += [RuleRow("backward", rows[0].dtype, f"backward {n}", max_error(o, w), max_error(t, w))
             for n, o, w, t in zip(("dQ", "dK", "dV"), ours, want, theirs, strict=True)]
    return TwoErrors(s.precision, rows[0].dtype, str(wide).removeprefix("torch."), tuple(rows))


@dataclass(frozen=True)
class TileSpread:
    """FA2's output over tile sizes: how much the tile size changes it, against its error."""

    precision: str  # the inputs' precision name
    blocks: tuple[int, ...]  # the tile sizes run (Br = Bc)
    errors: tuple[float, ...]  # per tile size: max |error| against float64
    pairwise: tuple[tuple[float, ...], ...]  # (len(blocks), len(blocks)) max |O_a - O_b| in the output dtype
    max_spread: float  # the largest pairwise difference
    eps: float  # the precision's machine epsilon


def tile_spread(s: LabSettings, blocks: tuple[int, ...] = TILE_SIZES) -> TileSpread:
    """FA2 run with each tile size on the same inputs: the spread of its outputs and each one's error.

    Example:
        >>> r = tile_spread(LabSettings(n_q=64, n_k=64, d=16, heads=1, precision="float32"), (16, 32))
        >>> r.blocks, r.max_spread < 1e-6
        ((16, 32), True)
    """
    n = max(s.n_q, s.n_k)
    blocks = tuple(b for b in blocks if b <= n) or (min(blocks),)
    x = lab_inputs(s)
    outs = [run_kernel(FLASH2, s, x, block=b).double() for b in blocks]
    pairwise = tuple(tuple((a - b).abs().max().item() if a.numel() else 0.0 for b in outs) for a in outs)
    spread = max(itertools.chain.from_iterable(pairwise))
    return TileSpread(s.precision, blocks, tuple(error_stats(o, x.ref).max_abs for o in outs), pairwise, spread,
                      torch.finfo(torch_dtype(s.precision)).eps)


NOT_COMPUTED = -1  # a (row, tile) cell of the rescale map whose tile is skipped (causal): never computed


FP8_SEEDS = 5  # seeds the FP8 table averages over: the Hadamard effect must hold on every one, not on average only


@dataclass(frozen=True)
class RescaleRun:
    """One FA2 run with on_tile: which rows rescaled at which tile, and the largest intermediate values."""

    tau: float  # the rescale threshold, log2 units
    cells: tuple[tuple[int, ...], ...]  # (N_q, Tc): 1 row i rescaled at K/V tile j, 0 not, NOT_COMPUTED skipped
    per_tile: tuple[int, ...]  # (Tc,) rescales at each K/V tile j, summed over the rows
    total: int  # rescales of the whole run (batch 0, head 0)
    max_p: float  # the largest P~_ij = 2^(S_ij - m_i) of the run: 1 with tau = 0, up to 2^tau with a stale max
    max_l: float  # the largest running row sum l_i


@dataclass(frozen=True)
class LazyRescale:
    """FA4's conditional rescale against the classic update, on the same inputs (FA2 loop order)."""

    n_q: int  # N_q
    n_k: int  # N_k
    block: int  # Br = Bc
    classic: RescaleRun  # tau = 0
    lazy: RescaleRun  # tau = the settings' tau (FA4_THRESHOLD = 8 when the settings say 0)
    max_out_diff: float  # max |O_lazy - O_classic| over every head, in the output dtype
    max_acc: float  # bound on the largest |accumulator| entry: lazy.max_l x max|v| (batch 0, head 0)
    acc_dtype: str  # where l and the accumulator live: float32 (or float64)
    acc_max: float  # torch.finfo(acc_dtype).max
    p_dtype: str  # where P~ is rounded before P V: the settings' p_precision, else the accumulator dtype
    p_max: float  # torch.finfo of that dtype: P~ <= 2^tau must stay below it
    out_dtype: str  # the outputs' dtype (float32 for FP8 inputs, which the kernels run in fp32)
    out_eps: float  # its machine epsilon: max_out_diff in steps of the output's rounding


def _rescale_run(s: LabSettings, x, tau: float) -> tuple[RescaleRun, torch.Tensor, list]:
    events = []
    p_dtype = None if s.p_precision is None else torch_dtype(s.p_precision)
    out = flash_attention_forward(x.q, x.k, x.v, s.block, causal=s.causal, loop_order=Q_OUTER,
                                  rescale_threshold=tau, p_dtype=p_dtype, on_tile=events.append)
    n_tiles = -(-s.n_k // s.block)
    cells = [[NOT_COMPUTED] * n_tiles for _ in range(s.n_q)]
    for e in events:
        for r, flag in enumerate(e.rescaled.tolist()):
            cells[e.q_start + r][e.k_block] = int(flag)
    per_tile = tuple(sum(max(row[j], 0) for row in cells) for j in range(n_tiles))
    max_l = max((e.l.max().item() for e in events if e.l.numel()), default=0.0)
    return RescaleRun(tau, tuple(map(tuple, cells)), per_tile, sum(per_tile), 1.0, max_l), out, events


def lazy_rescale(s: LabSettings) -> LazyRescale:
    """Rescales per row and tile with tau = 0 and with FA4's tau; the outputs' difference; the largest P~ and l.

    The largest P~ comes from the two runs' events: a tile's largest P~ is 2^(its row max - the stale max), and the
    largest over a row's tiles is e^(m_classic - m_lazy) at some tile (m in natural log: the true running max minus
    the stale one), so no score is recomputed outside the kernel.

    Example:
        >>> r = lazy_rescale(LabSettings(n_q=64, n_k=256, d=16, heads=1, block=32))
        >>> r.lazy.total <= r.classic.total, r.max_out_diff < 1e-2, 1.0 <= r.lazy.max_p <= 2.0 ** 8
        (True, True, True)
    """
    x = lab_inputs(s)
    tau = s.tau if s.tau > 0 else FA4_THRESHOLD
    classic, out0, ev0 = _rescale_run(s, x, 0.0)
    lazy, out_t, ev_t = _rescale_run(s, x, tau)
    gaps = [(a.m - b.m).nan_to_num(0.0).max().item() for a, b in zip(ev0, ev_t, strict=True) if a.m.numel()]
    lazy = RescaleRun(tau, lazy.cells, lazy.per_tile, lazy.total, math.exp(max(gaps, default=0.0)), lazy.max_l)
    acc = torch.float64 if x.q.dtype == torch.float64 else torch.float32
    p_dtype = acc if s.p_precision is None else torch_dtype(s.p_precision)
    v_max = x.v[0, 0].abs().max().item() if x.v.numel() else 0.0
    return LazyRescale(s.n_q, s.n_k, s.block, classic, lazy, (out_t.double() - out0.double()).abs().max().item(),
                       lazy.max_l * v_max, str(acc).removeprefix("torch."), torch.finfo(acc).max,
                       str(p_dtype).removeprefix("torch."), torch.finfo(p_dtype).max,
                       str(out_t.dtype).removeprefix("torch."), torch.finfo(out_t.dtype).eps)


@dataclass(frozen=True)
class Fp8Cell:
    """The FP8 kernel's RMSE on one kind of input, with or without Hadamard, over the table's seeds."""

    outliers: bool  # inputs with outlier features
    hadamard: bool  # incoherent processing on
    rmse: float  # mean RMSE against float64 over the seeds
    rmse_per_seed: tuple[float, ...]  # one per seed, in the table's order


@dataclass(frozen=True)
class Fp8Table:
    """FA3's FP8 RMSE, 2 x 2: plain / outlier inputs x Hadamard off / on."""

    fmt: str  # "e4m3" or "e5m2"
    block: int  # the quantisation block
    seeds: tuple[int, ...]  # the inputs' seeds
    cells: tuple[Fp8Cell, ...]  # (plain, off), (plain, on), (outliers, off), (outliers, on)
    note: str  # "" or why Hadamard could not run (then the "on" cells repeat "off")

    def cell(self, outliers: bool, hadamard: bool) -> Fp8Cell:
        """The cell of one input kind and Hadamard setting."""
        return next(c for c in self.cells if c.outliers == outliers and c.hadamard == hadamard)


def fp8_table(s: LabSettings, n_seeds: int = FP8_SEEDS, *, progress: Progress | None = None) -> Fp8Table:
    """The FP8 kernel's RMSE with and without Hadamard, on plain and on outlier inputs, over n_seeds seeds;
    progress(done, 4 n_seeds, label) after each run (raise from it to stop: flashviz.measure.progress).

    Example:
        >>> t = fp8_table(LabSettings(n_q=64, n_k=64, d=32, heads=1, block=32), n_seeds=2)
        >>> t.cell(True, True).rmse < t.cell(True, False).rmse  # Hadamard helps where the outliers are
        True
    """
    if isinstance(n_seeds, bool) or not isinstance(n_seeds, int) or not 1 <= n_seeds <= NUMERICS_SEEDS_MAX:
        raise ValueError(f"n_seeds must be an int from 1 to {NUMERICS_SEEDS_MAX}, got {n_seeds!r}.")
    seeds = tuple(range(s.seed, s.seed + n_seeds))
    fmt = s.precision if s.is_fp8 else FP8_FORMATS[0]
    cells = []
    for outliers in (False, True):
        for hadamard in (False, True):
            cfg = replace(s, precision=fmt, hadamard=hadamard)
            errs = []
            for seed in seeds:
                x = lab_inputs(replace(cfg, seed=seed), outliers=outliers)
                errs.append(error_stats(run_kernel(FP8, replace(cfg, seed=seed), x), x.ref).rmse)
                if progress is not None:
                    progress(len(cells) * n_seeds + len(errs), 4 * n_seeds,
                             f"FP8 {'outlier' if outliers else 'plain'} inputs, Hadamard {'on' if hadamard else 'off'}"
                             f", seed {seed}")
            cells.append(Fp8Cell(outliers, hadamard, statistics.fmean(errs), tuple(errs)))
    note = "" if s.d & (s.d - 1) == 0 else f"Hadamard needs d a power of two (d = {s.d}): the 'on' cells ran without"
    return Fp8Table(fmt, s.block, seeds, tuple(cells), note)


@dataclass(frozen=True)
class CausalAlignment:
    """Top-left (SDPA's is_causal) against bottom-right (flash-attn, flash_decode) causal masks when N_q != N_k."""

    n_q: int  # N_q
    n_k: int  # N_k
    offset: int  # N_k - N_q: bottom-right's diagonal is shifted right by this many keys
    top_left_last: tuple[int, ...]  # per query i: the last key it sees top-left, min(i, N_k - 1)
    bottom_right_last: tuple[int, ...]  # per query i: the last key bottom-right, i + offset (-1: sees no key)
    keys_differ: tuple[int, ...]  # per query i: how many keys one alignment shows and the other hides
    row_diff: tuple[float, ...]  # per query i: max |O_top_left - O_bottom_right| over heads and d
    max_diff: float  # the largest of row_diff
    decode_diff: float  # max |flash_decode(causal=True) - bottom-right FA2|, both on fp32 copies of the inputs (so


def causal_mask_at(offset: int):
    """A FlexAttention mask_mod for a causal mask whose diagonal is shifted right by offset keys: query i sees key
    j when j <= i + offset. offset 0 is top-left (SDPA's is_causal), N_k - N_q bottom-right (flash-attn's).

    Example:
        >>> m = causal_mask_at(4 - 2)  # bottom-right for N_q = 2, N_k = 4
        >>> m(0, 0, torch.arange(2)[:, None], torch.arange(4)[None, :]).int().tolist()
        [[1, 1, 1, 0], [1, 1, 1, 1]]
    """

    def causal_at(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + offset

    causal_at.__name__ = f"causal_at_{offset}"
    return causal_at


def causal_alignment(s: LabSettings) -> CausalAlignment:
    """Which keys each query sees under the two alignments, and how much the outputs differ (FA2, s's precision,
    both masks as a mask_mod on the same code path, so with N_q = N_k the outputs are identical).

    Example:
        >>> r = causal_alignment(LabSettings(n_q=4, n_k=8, d=8, heads=1, block=4, precision="float32"))
        >>> r.top_left_last, r.bottom_right_last, r.keys_differ
        ((0, 1, 2, 3), (4, 5, 6, 7), (4, 4, 4, 4))
    """
    x = lab_inputs(s, causal=True)
    p = None if s.p_precision is None else torch_dtype(s.p_precision)
    run = {"loop_order": Q_OUTER, "rescale_threshold": s.tau, "p_dtype": p}  # one code path for both masks
    top_left = flash_attention_forward(x.q, x.k, x.v, s.block, mask_mod=causal_mask_at(0), **run)
    bottom = flash_attention_forward(x.q, x.k, x.v, s.block, mask_mod=causal_mask_at(s.n_k - s.n_q), **run)
    offset = s.n_k - s.n_q
    tl = tuple(min(i, s.n_k - 1) for i in range(s.n_q))
    br = tuple(max(min(i + offset, s.n_k - 1), -1) for i in range(s.n_q))
    rows = (top_left.double() - bottom.double()).abs().amax(dim=(0, 1, 3))  # (N_q,)
    decode = math.nan
    if offset >= 0:  # flash_decode's causal=True is bottom-right; compared in fp32, so only the keys seen can differ
        q32, k32, v32 = (t.float() for t in (x.q, x.k, x.v))
        dec = flash_decode(q32, k32, v32, causal=True, block_k=s.block, num_splits=1)
        ref = flash_attention_forward(q32, k32, v32, s.block, loop_order=Q_OUTER,
                                      mask_mod=causal_mask_at(offset))
        decode = (dec.double() - ref.double()).abs().max().item()
    return CausalAlignment(s.n_q, s.n_k, offset, tl, br, tuple(abs(a - b) for a, b in zip(tl, br, strict=True)),
                           tuple(rows.tolist()), rows.max().item(), decode)


# -- the lesson's claims about the Numerics view, each a number a test can check at the view's defaults
VIEW_DEFAULTS = LabSettings()  # the Numerics view opens at these (bf16, N_q = 128, N_k = 256, tiles of 64, tau = 8)


def flash_sdpa_gap_in_eps(s: LabSettings = VIEW_DEFAULTS) -> float:
    """max |FA2 - SDPA| in machine epsilons of s's precision, when both pass flash-attn's rule (NaN otherwise): the
    claim "FA2 and SDPA differ by one bf16 step and neither is wrong" at the defaults.

    Example:
        >>> flash_sdpa_gap_in_eps()
        1.0
    """
    passes = {row.kernel: row.passes for row in kernel_errors(s).rows}
    r = flash_vs_sdpa(s)
    return r.max_diff / r.eps if passes[FLASH2] and passes[SDPA] else math.nan


def rescales_saved(s: LabSettings = VIEW_DEFAULTS) -> float:
    """How many times fewer rescales FA4's tau makes than tau = 0 (batch 0, head 0): 98 / 3 at the defaults.

    Example:
        >>> round(rescales_saved(), 1)
        32.7
    """
    r = lazy_rescale(s)
    return r.classic.total / r.lazy.total if r.lazy.total else math.inf


def hadamard_gain(s: LabSettings = VIEW_DEFAULTS, n_seeds: int = FP8_SEEDS) -> float:
    """FP8 RMSE without Hadamard / with it, on outlier inputs, when it is lower with it on every seed (NaN
    otherwise): the claim "the rotation halves FP8's error on outlier inputs" (6.5e-2 -> 3.3e-2 at the defaults).

    Example:
        >>> round(hadamard_gain(), 1)
        2.0
    """
    t = fp8_table(s, n_seeds)
    off, on = t.cell(True, False), t.cell(True, True)
    every = all(b < a for a, b in zip(off.rmse_per_seed, on.rmse_per_seed, strict=True))
    return off.rmse / on.rmse if every else math.nan


# Per-unit costs of the lab on a 2-core laptop CPU with the machine otherwise idle (CPU time of run_lab over N_q, N_k
# from 128 to 1024 and tiles from 8 to 256, one thread; rounded up about twofold): a kernel call with its inputs and
# float64 reference, one tile of a tiled kernel's Python loop, one FLOP. A busy machine takes several times longer.
CALL_S = 2e-3  # seconds per kernel call (seeded inputs, float64 reference, the small ops around the kernel)


TILE_S = 1e-4  # seconds per tile of a tiled kernel's loop (a dozen small ops, the on_tile events)


FLOP_S = 1e-10  # seconds per FLOP (float64 references and low-precision casts run far below fp32 matmul peak)


AUTO_S = 3.0  # seconds: a run estimated at most this long starts when the page opens (with a progress bar)


LAB_S_MAX = 30.0  # seconds: a run estimated longer is refused (several minutes on a busy shared server)


FP8_RUNS = 4  # cells of the FP8 table: plain / outliers x Hadamard off / on, each over FP8_SEEDS seeds


@dataclass(frozen=True)
class LabWork:
    """What one run_lab call costs, counted before it starts."""

    calls: int  # kernel calls, each on seeded inputs with a float64 reference
    tiles: int  # tiles of the tiled kernels' loops (FA1, FA2, the FP8 kernel's K/V blocks, flash_decode's blocks)
    flops: float  # 4 H N_q N_k d per attention call
    seconds: float  # the estimate: calls x CALL_S + tiles x TILE_S + flops x FLOP_S

    @property
    def runs_at_once(self) -> bool:
        """Small enough to run when the page opens."""
        return self.seconds <= AUTO_S


def _tiles(s: LabSettings, block: int) -> int:
    return -(-s.n_q // block) * -(-s.n_k // block)  # T(block), an upper bound under a causal mask


def lab_work(s: LabSettings, n_seeds: int = FP8_SEEDS) -> LabWork:
    """Kernel calls, tiles and FLOPs of run_lab(s), and the seconds they take on a 2-core laptop (an estimate).

    Example:
        >>> w = lab_work(LabSettings())
        >>> w.calls, w.tiles, w.runs_at_once
        (68, 362, True)
    """
    t, kv_blocks = _tiles(s, s.block), -(-s.n_k // s.block)
    spread = [b for b in TILE_SIZES if b <= max(s.n_q, s.n_k)] or [min(TILE_SIZES)]
    fp8_calls = FP8_RUNS * n_seeds
    # (calls, tiles) per experiment; every experiment also builds its inputs and float64 reference (one call)
    parts = {
        "kernel errors": (5 + s.is_fp8, 2 * t + s.is_fp8 * kv_blocks),  # naive, FA1, FA2, SDPA (+ FP8)
        "flash vs SDPA": (3, t),
        "tile spread": (1 + len(spread), sum(_tiles(s, b) for b in spread)),
        "lazy rescale": (3, 2 * t),
        "FP8 table": (2 * fp8_calls, fp8_calls * kv_blocks),  # inputs + reference, then the kernel, per run
        "causal alignment": (5, 3 * t + kv_blocks),  # 2 masked FA2, flash_decode, a masked FA2 in fp32
        "flash-attn's two errors": (7, 5 * t + kv_blocks),  # FA1, FA2, decode, SDPA x 4, a forward + backward
    }
    calls = sum(c for c, _ in parts.values())
    tiles = sum(n for _, n in parts.values())
    flops = 4.0 * s.heads * s.n_q * s.n_k * s.d * calls
    return LabWork(calls, tiles, flops, calls * CALL_S + tiles * TILE_S + flops * FLOP_S)


def lab_problem(s: LabSettings, work: LabWork | None = None) -> str | None:
    """Why run_lab(s) is too big to run live (a sentence that says how to fix it), or None.

    Example:
        >>> lab_problem(LabSettings()) is None
        True
        >>> print(lab_problem(LabSettings(n_q=1024, n_k=1024, block=4)).split(". ")[-1])
        Raise the tile size to at least 8, or lower N_q or N_k.
    """
    work = work or lab_work(s)
    if work.seconds <= LAB_S_MAX:
        return None
    fits = next((b for b in (2 ** e for e in range(1, 11)) if b > s.block
                 and lab_work(replace(s, block=b)).seconds <= LAB_S_MAX), None)
    fix = f"Raise the tile size to at least {fits}, or lower N_q or N_k." if fits else "Lower N_q or N_k."
    return (f"At N_q = {s.n_q}, N_k = {s.n_k} with {s.block} x {s.block} tiles the lab would run {work.tiles:,} tiles "
            f"and {work.calls} kernel calls: about {work.seconds:.0f} s on an idle laptop CPU, over the live cap of "
            f"{LAB_S_MAX:.0f} s. {fix}")


@dataclass(frozen=True)
class LabResult:
    """Every experiment of the numerics lab on one LabSettings (the Numerics view draws each)."""

    settings: LabSettings  # what it ran with
    errors: KernelErrors  # every kernel against float64, flash-attn's rule
    vs_sdpa: FlashVsSdpa  # FA2 against SDPA in the same dtype
    spread: TileSpread  # FA2 over tile sizes
    rescale: LazyRescale  # FA4's conditional rescale against tau = 0
    fp8: Fp8Table  # FA3's FP8 RMSE, plain / outliers x Hadamard off / on
    causal: CausalAlignment  # top-left against bottom-right causal masks
    two: TwoErrors  # flash-attn's two errors per kernel: kernel vs reference in fp32, reference in the dtype vs fp32


STEPS = ("kernel errors", "FA2 vs SDPA", "tile sizes", "lazy rescale", "FP8 table", "causal alignment",
         "flash-attn's two errors")


def lab_run(args: tuple, *, progress: Progress | None = None) -> LabResult:
    """run_lab on LabSettings(*args): the lab as a timed run, its settings a plain (hashable) tuple."""
    return run_lab(LabSettings(*args), progress=progress)


def run_lab(s: LabSettings, *, n_seeds: int = FP8_SEEDS, progress: Progress | None = None) -> LabResult:
    """Every experiment on s, in STEPS' order; progress(done, total, label) before each (and after each FP8 run).

    Args:
        s: the settings.  n_seeds: seeds of the FP8 table.
        progress: flashviz.measure.progress's callback; raise from it to stop the run (nothing is returned).
    Returns:
        LabResult.

    Example:
        >>> r = run_lab(LabSettings(n_q=16, n_k=32, d=8, heads=1, block=8), n_seeds=1)
        >>> [row.label for row in r.errors.rows], r.causal.offset
        (['naive', 'FA1', 'FA2', 'SDPA'], 16)
    """
    fp8_runs = FP8_RUNS * n_seeds
    total = len(STEPS) - 1 + fp8_runs
    runs = (lambda: kernel_errors(s), lambda: flash_vs_sdpa(s), lambda: tile_spread(s), lambda: lazy_rescale(s),
            lambda: fp8_table(s, n_seeds, progress=stage(progress, 4, total)), lambda: causal_alignment(s),
            lambda: two_errors(s))
    results = []
    for i, (label, run) in enumerate(zip(STEPS, runs, strict=True)):
        if progress is not None:
            progress(i if i <= 4 else i - 1 + fp8_runs, total, label)  # the FP8 table counts per run
        results.append(run())
    if progress is not None:
        progress(total, total, "done")
    return LabResult(s, *results)


def lab_settings(s: NumericsSettings) -> LabSettings:
    """The lab's settings of the view's widgets (raises ValueError, saying why, for a combination the lab refuses).

    Example:
        >>> lab_settings(NumericsSettings(n_q=97, p_dtype="e4m3")).n_q, lab_settings(NumericsSettings()).p_precision
        (97, None)
    """
    p = None if s.p_dtype == NO_P_ROUNDING else s.p_dtype
    return LabSettings(n_q=s.n_q, n_k=s.n_k, precision=s.input_dtype, p_precision=p, block=s.numerics_block,
                       tau=float(s.tau), hadamard=s.hadamard, outliers=s.outliers, causal=s.numerics_causal)
