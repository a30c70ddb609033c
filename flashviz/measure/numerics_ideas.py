"""The numerics lab's paper experiments, as plain data: FlashAttention-4's lazy rescale, FlashAttention-3's FP8 with
incoherent processing, and the two causal alignments when N_q != N_k.

References:
    FlashAttention-4 (flash-attn's CuTe-DSL kernels, flash_attn/cute/softmax.py): rescale only when the running max
        grew by more than tau = 8 (log2 units); flashviz.core.softmax_variants explains why O and L stay exact.
    FlashAttention-3 (Shah et al., 2024), Sections 3.3 and 4.3: FP8 with per-block quantisation and incoherent
        processing (a random Hadamard rotation of Q and K); RMSE 2.4e-2 without it, 9.1e-3 with it, on outlier inputs.
    Causal alignment: PyTorch SDPA's is_causal (and causal=True here) is top-left, query i sees keys j <= i;
        flash-attn (since 2.1) and this repo's flash_decode align bottom-right, query i sees j <= i + N_k - N_q, so
        the last query sees every key (the new token of a KV-cache decode). They agree only when N_q = N_k.

Legend: B = 1 batch, H heads, N_q / N_k query / key lengths, d head dimension, Br = Bc = block, Tr = ceil(N_q / Br),
Tc = ceil(N_k / Bc) tiles, tau in log2 units. The rescale counts are batch 0, head 0's (the on_tile events' rows).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

import torch

from flashviz.core.decode import flash_decode
from flashviz.core.flash import flash_attention_forward
from flashviz.core.softmax_variants import FA4_THRESHOLD
from flashviz.limits import NUMERICS_SEEDS_MAX
from flashviz.measure.numerics_lab import (
    LabSettings,
    flash_vs_sdpa,
    kernel_errors,
    lab_inputs,
    run_kernel,
    torch_dtype,
)
from flashviz.measure.progress import Progress
from flashviz.numerics import error_stats
from flashviz.vocab import FLASH2, FP8, FP8_FORMATS, Q_OUTER, SDPA

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
    #                     only the alignment could differ); NaN when N_q > N_k (a decode needs N_q <= N_k)


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
