"""The numerics lab's plain data: how far each kernel is from float64, and why two correct kernels disagree.

For one LabSettings (input precision, P's dtype, tile size, tau, Hadamard, outliers, N_q, N_k, causal), every
function here runs the kernels on the same seeded inputs and returns a frozen dataclass of ints, floats, strings and
tuples, from which the figures (flashviz.figures.numerics) and the sentences (flashviz.figures.numerics_text) are
made. The FA4, FA3 and causal-alignment experiments are in numerics_ideas.py.

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
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from flashviz.core.flash import flash_attention_forward
from flashviz.core.reference import naive_attention
from flashviz.limits import NUMERICS_D_MAX, NUMERICS_HEADS_MAX, NUMERICS_N_MAX, tile_problem
from flashviz.numerics import ErrorStats, error_stats, fp8_attention, make_inputs, quantize_blocks
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
