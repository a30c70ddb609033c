"""The Masks tab's measurements: the tiled kernel with a mask against dense SDPA with the same boolean mask and the
tiled kernel without a mask; and the tiled kernel with every preset against the fraction of tiles it computes.

Timed as FlexAttention is timed. flex_attention gets a BlockMask that create_block_mask built once; here the tiled
kernel gets a tile schedule (full, partial and skipped tiles, and the element masks of the partial ones) built once
by `prebuilt_schedule`, and every timed call reuses it (`flash_attention_forward(..., schedule=)`): no timed call
classifies the mask or evaluates its mask_mod. The build is timed on its own and reported next to the kernels, as is
the dense boolean mask SDPA gets (built once too). Building the schedule inside every timed call instead (mask_mod=
alone) times that build with the kernel, and a masked kernel then looks slower than the unmasked one, whose noop_mask
classifies cheaply and has no partial tiles to evaluate. Kernels and builds are each timed interleaved call by call
(flashviz.measure.timing.time_calls), after warm-up, with an explicit thread count.

Every function returns plain data (lists of dicts, one per run) and reports progress through `progress(done, total,
label)`; raise from it to stop (flashviz.measure.progress).

Legend: B = 1 batch, H heads, N sequence length (N_q = N_k), d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_mask, noop_mask

from flashviz.core.flash import MAX_STEP_WIDTH, flash_attention_forward
from flashviz.core.flash_schedule import schedule_steps
from flashviz.core.tilemask import TileMasks
from flashviz.core.tiling import TileSchedule, tile_schedule
from flashviz.limits import LIVE_INPUT_BYTES_MAX, WORK_FLOP_MAX
from flashviz.mask_presets import PRESETS
from flashviz.masks import MaskMod, ScoreMod
from flashviz.measure.impls import resolve_dtype
from flashviz.measure.maskview import NO_COMBINE, NO_SCORE, MaskSpec, build_mask
from flashviz.measure.memory import measure_memory
from flashviz.measure.progress import Progress, stage
from flashviz.measure.timing import threads_set_to, time_calls
from flashviz.model.flops import attention_flops
from flashviz.units import format_bytes
from flashviz.vocab import DENSE, DTYPE_BYTES, FULL, MASKED, PARTIAL, Q_OUTER, UNMASKED

RUN_WARMUP = 1  # untimed kernel calls per run after the peak-memory call (itself a first call)
RUN_REPEATS = 5  # interleaved timed calls per run: the median of five
SWEEP_WARMUP = 1  # untimed calls per preset
SWEEP_REPEATS = 5  # interleaved timed calls per preset
BUILD_REPEATS = 3  # interleaved timed builds of each schedule (and of the dense mask): the median of three
DENSE_BYTES_MAX = 1 << 29  # bytes (512 MiB) of the dense run's N x N boolean mask plus SDPA's additive copy
MASK_RUN_LABELS = {MASKED: "tiled, this mask", DENSE: "SDPA, dense mask", UNMASKED: "tiled, no mask"}
NO_MASK = "none"  # the sweep's unmasked row
NO_MASK_LABEL = "no mask"
RUN_CALLS = 1 + RUN_WARMUP + RUN_REPEATS  # kernel calls per run: peak memory, warm-up, timed
SWEEP_CALLS = SWEEP_WARMUP + SWEEP_REPEATS  # kernel calls per preset


def run_bytes(n: int, d: int, heads: int, dtype: str) -> tuple[int, int]:
    """Bytes a run needs: (q, k, v and the output; the dense run's N x N boolean mask plus the additive mask of the
    run's dtype that SDPA makes from it on the CPU).

    Example:
        >>> run_bytes(1024, 64, 4, "float32")  # 4 MiB of tensors; 1 MiB of boolean mask + 4 MiB of additive mask
        (4194304, 5242880)
    """
    b = DTYPE_BYTES[dtype]
    return 4 * heads * n * d * b, n * n * (1 + b)


def _inputs_problem(n: int, d: int, heads: int, dtype: str) -> str | None:
    inputs, _ = run_bytes(n, d, heads, dtype)
    if inputs > LIVE_INPUT_BYTES_MAX:
        return (f"q, k, v and the output at N = {n}, d = {d}, H = {heads} ({dtype}) take {format_bytes(inputs)}; "
                f"the cap is {format_bytes(LIVE_INPUT_BYTES_MAX)}. Lower N, d or H.")
    return None


def _flops_problem(calls: int, n: int, d: int, heads: int) -> str | None:
    """The shared FLOP cap, counted as if every call computed every tile."""
    flops = calls * attention_flops(n, n, d, heads=heads)
    if flops > WORK_FLOP_MAX:
        return (f"{calls} calls at N = {n}, d = {d}, H = {heads} cost up to {flops:.3g} FLOPs; the cap is "
                f"{WORK_FLOP_MAX:.3g}. Lower N, d or H (sidebar).")
    return None


def run_problem(n: int, d: int, heads: int, dtype: str) -> str | None:
    """Why `masked_runs` at these sizes is refused (a sentence with the fix), or None.

    Example:
        >>> run_problem(16384, 64, 8, "float32").split(":")[0]
        'Dense SDPA at N = 16384 needs the 16384 × 16384 boolean mask and the float32 mask SDPA makes from it'
    """
    _, dense = run_bytes(n, d, heads, dtype)
    if dense > DENSE_BYTES_MAX:
        return (f"Dense SDPA at N = {n} needs the {n} × {n} boolean mask and the {dtype} mask SDPA makes from it: "
                f"{format_bytes(dense)}; the cap is {format_bytes(DENSE_BYTES_MAX)}. Lower N (sidebar).")
    return _inputs_problem(n, d, heads, dtype) or _flops_problem(len(MASK_RUN_LABELS) * RUN_CALLS, n, d, heads)


def sweep_problem(n: int, d: int, heads: int, dtype: str) -> str | None:
    """Why `sparsity_runs` at these sizes is refused (with the fix), or None: the input cap, and the FLOP cap
    counted as if every preset computed every tile.

    Example:
        >>> sweep_problem(1024, 64, 4, "float32") is None
        True
    """
    return _inputs_problem(n, d, heads, dtype) or _flops_problem(sweep_calls(), n, d, heads)


def sweep_calls() -> int:
    """Kernel calls of a sweep: every preset and the unmasked kernel, warm-up and timed."""
    return (len(PRESETS) + 1) * SWEEP_CALLS


def prebuilt_schedule(n: int, block_q: int, block_k: int, mask_mod: MaskMod, heads: int,
                      device: torch.device | str = "cpu") -> TileSchedule:
    """The q_outer tile schedule of mask_mod on B = 1, H heads, with the element masks of its partial tiles already
    evaluated (kept in the schedule), so that a kernel call given `schedule=` evaluates the mask_mod nowhere.

    What create_block_mask is to flex_attention: built once, reused by every call.

    Example:
        >>> from flashviz.masks import causal_mask
        >>> s = prebuilt_schedule(8, 4, 4, causal_mask, heads=1)
        >>> s.counts(), len(s.hidden_cache), len(s.bias_cache)  # the two diagonal tiles' masks, in both forms
        ({'full': 1, 'partial': 2, 'skipped': 1}, 2, 2)
    """
    schedule = tile_schedule(n, n, block_q, block_k, mask_mod=mask_mod, loop_order=Q_OUTER, batch=1, heads=heads)
    masks = TileMasks(schedule, device)
    for tile in schedule.computed():
        if tile.status == PARTIAL:
            masks.bias(tile)  # evaluates the tile's mask once (hidden_cache) and its additive form (bias_cache)
    return schedule


def random_qkv(n: int, d: int, heads: int, dtype: str, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """q, k, v of shape (1, H, N, d) in dtype, standard normal from a fixed seed."""
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, heads, n, d, generator=g).to(resolve_dtype(dtype)) for _ in range(3))


def tiled_call(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, schedule: TileSchedule,
           score_mod: ScoreMod | None = None) -> Callable[[], torch.Tensor]:
    """One call of the tiled kernel (FA2 loop order) reusing a prebuilt schedule."""
    return lambda: flash_attention_forward(q, k, v, block_q=schedule.block_q, block_k=schedule.block_k,
                                           loop_order=Q_OUTER, schedule=schedule, score_mod=score_mod)


def _computed(schedule: TileSchedule) -> int:
    counts = schedule.counts()
    return counts[FULL] + counts[PARTIAL]


def kernel_steps(schedule: TileSchedule) -> int:
    """Loop iterations the tiled kernel runs on a prebuilt mask_mod schedule: its computed tiles, adjacent ones of a Q
    block merged into one step of up to MAX_STEP_WIDTH keys (flashviz.core.flash_schedule), as the timed calls do.

    Example:
        >>> from flashviz.masks import causal_mask
        >>> kernel_steps(prebuilt_schedule(256, 64, 64, causal_mask, heads=1))  # 10 tiles, one step per Q block
        4
    """
    return len(schedule_steps(schedule, merge=True, max_width=MAX_STEP_WIDTH))


def schedule_numbers(schedule: TileSchedule) -> dict[str, int]:
    """What a run's row says about the schedule its timed calls used: tiles, tiles_computed, tiles_partial, steps."""
    return {"tiles_computed": _computed(schedule), "tiles": len(schedule), "tiles_partial": schedule.counts()[PARTIAL],
            "steps": kernel_steps(schedule)}


def time_mask_runs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask_mod: MaskMod, score_mod: ScoreMod | None,
                   *, block_q: int, block_k: int, progress: Progress | None = None) -> list[dict[str, object]]:
    """Peak memory and time (median and IQR of RUN_REPEATS interleaved calls after RUN_WARMUP) of the tiled kernel
    with mask_mod (and score_mod) on its prebuilt schedule, dense SDPA with the boolean mask, and the tiled kernel
    with noop_mask on its prebuilt schedule (every tile full); plus each one's build, timed apart (BUILD_REPEATS).

    Args:
        q, k, v: (1, H, N, d) on the CPU.  mask_mod, score_mod: FlexAttention's signatures (score_mod may be None;
            SDPA gets the mask only).  block_q, block_k: Br and Bc.  progress: see flashviz.measure.progress.
    Returns:
        one dict per run (MASKED, DENSE, UNMASKED): kind, label, time_s, iqr_s (s), repeats, peak_bytes (above the
        inputs), build_s, build_iqr_s (s: the schedule, or the dense mask), tiles_computed, tiles, tiles_partial,
        steps (the schedule the timed calls used and the kernel's loop iterations on it; the dense run computes every
        tile in one call: its tiles_partial and steps are 0).
    """
    n, heads = q.shape[2], q.shape[1]
    builds = {MASKED: lambda: prebuilt_schedule(n, block_q, block_k, mask_mod, heads),
              DENSE: lambda: create_mask(mask_mod, 1, 1, n, n, device="cpu"),  # (1, 1, N, N) bool
              UNMASKED: lambda: prebuilt_schedule(n, block_q, block_k, noop_mask, heads)}
    total = len(builds) * (1 + BUILD_REPEATS + RUN_CALLS)
    built = {}
    for i, (name, build) in enumerate(builds.items()):  # what the timed calls reuse, built once
        if progress is not None:
            progress(i, total, f"building: {name}")
        built[name] = build()
    fns = {MASKED: tiled_call(q, k, v, built[MASKED], score_mod),
           DENSE: lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=built[DENSE]),
           UNMASKED: tiled_call(q, k, v, built[UNMASKED])}
    peaks, done = {}, len(builds)
    for name, fn in fns.items():
        if progress is not None:
            progress(done, total, f"peak memory: {name}")
        peaks[name], done = measure_memory(fn), done + 1
    build_t = time_calls(builds, warmup=0, repeats=BUILD_REPEATS, progress=stage(progress, done, total, "build: "))
    run_t = time_calls(fns, warmup=RUN_WARMUP, repeats=RUN_REPEATS,
                       progress=stage(progress, done + len(builds) * BUILD_REPEATS, total, "timing: "))
    tiles = len(built[MASKED])
    numbers = {MASKED: schedule_numbers(built[MASKED]), UNMASKED: schedule_numbers(built[UNMASKED]),
               DENSE: {"tiles_computed": tiles, "tiles": tiles, "tiles_partial": 0, "steps": 0}}
    return [{"kind": name, "label": MASK_RUN_LABELS[name], "time_s": t.median, "iqr_s": t.iqr,
             "repeats": len(t.samples), "peak_bytes": peaks[name], "build_s": build_t[name].median,
             "build_iqr_s": build_t[name].iqr, **numbers[name]}
            for name, t in run_t.items()]


def masked_runs(spec: MaskSpec, n: int, d: int, heads: int, br: int, bc: int, dtype: str, threads: int, *,
                progress: Progress | None = None) -> list[dict[str, object]]:
    """`time_mask_runs` of the mask a MaskSpec describes at N (ALiBi over H heads), on B = 1, H heads of random
    (1, H, N, d) inputs in dtype, on the CPU at `threads` intra-op threads.

    Example:
        >>> rows = masked_runs(MaskSpec("causal"), 64, 8, 1, 32, 32, "float32", 1)
        >>> [(r["kind"], r["tiles_computed"], r["tiles"]) for r in rows]
        [('masked', 3, 4), ('dense', 4, 4), ('unmasked', 4, 4)]
    """
    built = build_mask(spec, n, heads)
    with threads_set_to(threads), torch.no_grad():
        q, k, v = random_qkv(n, d, heads, dtype)
        return time_mask_runs(q, k, v, built.mask_mod, built.score_mod, block_q=br, block_k=bc, progress=progress)


def preset_mods(spec: MaskSpec, n: int) -> dict[str, MaskMod]:
    """Every preset of mask_presets.PRESETS alone, at the spec's parameters (no score mod), then NO_MASK: noop_mask."""
    mods = {name: build_mask(replace(spec, preset=name, combine=NO_COMBINE, score=NO_SCORE), n).mask_mod
            for name in PRESETS}
    return {**mods, NO_MASK: noop_mask}


def time_preset_runs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mods: dict[str, MaskMod], *, block_q: int,
                     block_k: int, progress: Progress | None = None) -> list[dict[str, object]]:
    """Time (median and IQR of SWEEP_REPEATS interleaved calls after SWEEP_WARMUP) the tiled kernel with each
    mask_mod on its prebuilt schedule, and each schedule's build (BUILD_REPEATS), with the tiles it computes.

    Args:
        q, k, v: (1, H, N, d) on the CPU.  mods: name -> mask_mod (preset_mods).  block_q, block_k: Br and Bc.
    Returns:
        one dict per mask_mod, in mods' order: preset, label, computed (fraction of tiles), tiles_computed, tiles,
        tiles_partial, steps (the kernel's loop iterations), time_s, iqr_s, repeats, build_s, build_iqr_s (s).
    """
    n, heads = q.shape[2], q.shape[1]
    builds = {name: (lambda mod=mod: prebuilt_schedule(n, block_q, block_k, mod, heads)) for name, mod in mods.items()}
    total = len(mods) * (1 + BUILD_REPEATS + SWEEP_CALLS)
    schedules = {}
    for i, (name, build) in enumerate(builds.items()):
        if progress is not None:
            progress(i, total, f"building: {name}")
        schedules[name] = build()
    build_t = time_calls(builds, warmup=0, repeats=BUILD_REPEATS, progress=stage(progress, len(mods), total, "build: "))
    fns = {name: tiled_call(q, k, v, schedule) for name, schedule in schedules.items()}
    run_t = time_calls(fns, warmup=SWEEP_WARMUP, repeats=SWEEP_REPEATS,
                       progress=stage(progress, len(mods) * (1 + BUILD_REPEATS), total, "timing: "))
    rows = []
    for name, t in run_t.items():
        numbers = schedule_numbers(schedules[name])
        rows.append({"preset": name, "label": PRESETS[name].label if name in PRESETS else NO_MASK_LABEL,
                     "computed": numbers["tiles_computed"] / numbers["tiles"], **numbers, "time_s": t.median,
                     "iqr_s": t.iqr, "repeats": len(t.samples), "build_s": build_t[name].median,
                     "build_iqr_s": build_t[name].iqr})
    return rows


def sparsity_runs(spec: MaskSpec, n: int, d: int, heads: int, br: int, bc: int, dtype: str, threads: int, *,
                  progress: Progress | None = None) -> list[dict[str, object]]:
    """`time_preset_runs` of every preset alone at the spec's parameters (no score mod) and of no mask (the last
    row, preset NO_MASK), on random (1, H, N, d) inputs in dtype, on the CPU at `threads` intra-op threads.

    Example:
        >>> rows = sparsity_runs(MaskSpec(window=16, chunk=32, prefix=16), 64, 8, 1, 32, 32, "float32", 1)
        >>> [(r["preset"], r["tiles_computed"]) for r in rows][:2], rows[-1]["label"], rows[-1]["computed"]
        ([('causal', 3), ('sliding_window', 3)], 'no mask', 1.0)
    """
    mods = preset_mods(spec, n)
    with threads_set_to(threads), torch.no_grad():
        q, k, v = random_qkv(n, d, heads, dtype)
        return time_preset_runs(q, k, v, mods, block_q=br, block_k=bc, progress=progress)
