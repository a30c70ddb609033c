"""The Masks view's data, torch side: a mask described by preset names and numbers, drawn and checked as plain data.

The dashboard never runs code from the browser: a `MaskSpec` holds only preset names (flashviz.masks) and integers,
and `build_mask` turns it into a FlexAttention mask_mod and score_mod, with the Python code that builds the same
mask. From a mask this module computes, for the figures (flashviz.views.masks.figures, torch-free):

    element_map     the fraction of visible elements in each cell of a grid of at most MAP_CELLS_MAX cells per side
                    (a cell is one element up to N = MAP_CELLS_MAX; beyond, c x c elements), evaluated in slabs so
                    memory stays bounded at any N, with the exact count of visible elements;
    tile_grid       the tile schedule's statuses (full / partial / skipped) and counts;
    block_mask_rows the BlockMask a FlexAttention user would get (to_block_mask), its first query-block rows;
    matches_torch   whether that BlockMask lists the same blocks as torch's own create_block_mask;
    score_curves    what the score_mod does to a score: softcap's curve, or ALiBi's bias per head.

Legend: N sequence length (N_q = N_k), Br = block_q, Bc = block_k, Tr x Tc tiles, H heads.

Beside those, `mask_data` gathers everything the view draws for one MaskSpec, and the view's measurements: the tiled
kernel with the mask (its schedule built once, as FlexAttention reuses a BlockMask, the build timed apart) against
dense SDPA with the same boolean mask (`time_mask_runs`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask, and_masks, create_block_mask, create_mask, noop_mask, or_masks

from flashviz import masks
from flashviz.core.blockmask import to_block_mask
from flashviz.core.flash import MAX_STEP_WIDTH, flash_attention_forward
from flashviz.core.flash_schedule import schedule_steps
from flashviz.core.maskeval import ELEMENT_BUDGET, evaluate, index_grid
from flashviz.core.tilemask import TileMasks
from flashviz.core.tiling import TileSchedule, tile_schedule
from flashviz.limits import LIVE_INPUT_BYTES_MAX, WORK_FLOP_MAX
from flashviz.masks import MaskMod, ScoreMod
from flashviz.measure.impls import resolve_dtype
from flashviz.measure.memory import measure_memory
from flashviz.measure.progress import Progress, stage
from flashviz.measure.stats import min_repeats
from flashviz.measure.timing import threads_set_to, time_calls
from flashviz.measure.trace import ScheduleTrace, schedule_trace
from flashviz.model.flops import attention_flops
from flashviz.units import format_bytes
from flashviz.views.masks.presets import COMBINE, DOC_PATTERNS, PARAMS, PICKERS, PRESETS, SCORE_MODS
from flashviz.vocab import DENSE, DTYPE_BYTES, FULL, MASKED, PARTIAL, Q_OUTER, SKIPPED, TILE_STATUSES, UNMASKED

MAP_CELLS_MAX = 256  # cells per side of the element map: about 2 px each in a 560 px figure


# Mask elements per slab of the element map. On one thread 1 Mi was the fastest (document AND causal, N = 16384:
# 2.8 s against 3.6 s for 256 Ki); with more threads, fewer and larger calls win, as in maskeval.
MAP_SLAB_ONE_THREAD = 1 << 20


NO_COMBINE, NO_SCORE = "none", "none"  # MaskSpec.combine of a single preset, MaskSpec.score without a score_mod


@dataclass(frozen=True)
class MaskSpec:
    """A mask as names and numbers only (what the dashboard's URL carries). Hashable, so it keys caches. The field
    names are the keys of flashviz.views.masks.presets' PICKERS and PARAMS, and the defaults theirs (one preset
    alone)."""

    preset: str = PICKERS["preset"].default  # a key of presets.PRESETS
    combine: str = NO_COMBINE  # a key of presets.COMBINE: "none", "and" (and_masks) or "or" (or_masks)
    preset2: str = PICKERS["preset2"].default  # the second preset, used when combine is not "none"
    docs: str = PARAMS["docs"].default  # document: a key of presets.DOC_PATTERNS
    prefix: int = PARAMS["prefix"].default  # prefix_lm: keys every query sees (tokens)
    sinks: int = PARAMS["sinks"].default  # attention_sink: leading keys every query keeps (tokens)
    window: int = PARAMS["window"].default  # sliding_window left reach, attention_sink and dilated window (tokens)
    right: int = PARAMS["right"].default  # sliding_window right reach (tokens)
    chunk: int = PARAMS["chunk"].default  # chunked: tokens per chunk
    dilation: int = PARAMS["dilation"].default  # dilated: stride between visible keys
    score: str = NO_SCORE  # a key of presets.SCORE_MODS: "none", "alibi" or "softcap"
    cap: int = PARAMS["cap"].default  # softcap: scores are squashed into (-cap, cap)

    @property
    def presets(self) -> tuple[str, ...]:
        """The presets in use: one, or two when combined."""
        return (self.preset,) if self.combine == NO_COMBINE else (self.preset, self.preset2)


@dataclass(frozen=True)
class BuiltMask:
    """A MaskSpec made real at one N."""

    mask_mod: MaskMod  # FlexAttention mask_mod(b, h, q_idx, kv_idx) -> bool
    score_mod: ScoreMod | None  # score_mod(score, b, h, q_idx, kv_idx) -> score, or None
    code: str  # Python that builds the same mask_mod (and score_mod) with flashviz.masks and torch
    doc_lengths: tuple[int, ...]  # the document lengths at this N (empty when no document preset is used)


def doc_lengths(pattern: str, n: int) -> tuple[int, ...]:
    """A document pattern's lengths scaled to N: they sum to N exactly, and documents that would be empty at a small
    N are dropped (at N = 3 only 3 of 8 equal documents fit).

    Example:
        >>> doc_lengths("mixed", 4096), doc_lengths("equal4", 10), doc_lengths("equal8", 3)
        ((1000, 1500, 600, 996), (2, 3, 2, 3), (1, 1, 1))
    """
    if pattern not in DOC_PATTERNS:
        raise ValueError(f"document pattern must be one of {', '.join(DOC_PATTERNS)}, got {pattern!r}.")
    if n < 1:
        raise ValueError(f"N must be >= 1 to hold a document, got {n}.")
    ratios = DOC_PATTERNS[pattern].ratios
    total = sum(ratios)
    cuts = [n * sum(ratios[: k + 1]) // total for k in range(len(ratios))]  # document ends (floor), the last is N
    lengths = [b - a for a, b in zip([0, *cuts[:-1]], cuts, strict=True)]
    return tuple(x for x in lengths if x > 0)


def _argument(spec: MaskSpec, key: str, n: int) -> object:
    """The value a preset's factory gets for parameter `key`: the spec's number, or the document lengths at N."""
    value = getattr(spec, key)
    return list(doc_lengths(value, n)) if key == "docs" else value


def _preset(spec: MaskSpec, name: str, n: int) -> tuple[MaskMod, str]:
    """One preset's mask_mod at N and the code that builds it: its factory (presets.PRESETS) called with its
    parameters in order, or the factory itself when it takes none."""
    if name not in PRESETS:
        raise ValueError(f"mask preset must be one of {', '.join(PRESETS)}, got {name!r}.")
    preset = PRESETS[name]
    factory = getattr(masks, preset.factory)
    if not preset.params:
        return factory, preset.factory
    args = [_argument(spec, key, n) for key in preset.params]
    return factory(*args), f"{preset.factory}({', '.join(repr(a) for a in args)})"


def _score(spec: MaskSpec, heads: int) -> tuple[ScoreMod | None, str | None]:
    """The score_mod a spec names and the code that builds it (None, None without one)."""
    choice = SCORE_MODS[spec.score]
    if choice.factory is None:
        return None, None
    args = [heads] if choice.heads else [float(getattr(spec, key)) for key in choice.params]
    return getattr(masks, choice.factory)(*args), f"{choice.factory}({', '.join(repr(a) for a in args)})"


def build_mask(spec: MaskSpec, n: int, heads: int = 1) -> BuiltMask:
    """The mask_mod and score_mod a MaskSpec describes at sequence length N, and the code that builds them.

    Args:
        spec: preset names and numbers.  n: sequence length N (documents are scaled to it).
        heads: H, the number of heads ALiBi's slopes are spread over.
    Returns:
        BuiltMask(mask_mod, score_mod, code, doc_lengths).

    Example:
        >>> print(build_mask(MaskSpec("document", "and", "causal", docs="equal2", score="softcap", cap=5), 8).code)
        mask_mod = and_masks(document([4, 4]), causal_mask)
        score_mod = softcap(5.0)
    """
    if spec.combine not in COMBINE:
        raise ValueError(f"combine must be one of {', '.join(COMBINE)}, got {spec.combine!r}.")
    if spec.score not in SCORE_MODS:
        raise ValueError(f"score mod must be one of {', '.join(SCORE_MODS)}, got {spec.score!r}.")
    parts = [_preset(spec, name, n) for name in spec.presets]
    if len(parts) == 1:
        (mask_mod, code), = parts
    else:
        combinator = COMBINE[spec.combine][1]
        mask_mod = {"and_masks": and_masks, "or_masks": or_masks}[combinator](parts[0][0], parts[1][0])
        code = f"{combinator}({parts[0][1]}, {parts[1][1]})"
    score_mod, score_code = _score(spec, heads)
    lines = [f"mask_mod = {code}"] + ([f"score_mod = {score_code}"] if score_code else [])
    docs = doc_lengths(spec.docs, n) if "document" in spec.presets else ()
    return BuiltMask(mask_mod, score_mod, "\n".join(lines), docs)


@dataclass(frozen=True)
class ElementMap:
    """The element-level mask at a readable resolution."""

    n: int  # sequence length N
    cell: int  # elements per cell side: cell x cell elements per pixel (1 = exact)
    fraction: np.ndarray  # (cells, cells) float: fraction of the cell's elements that are visible
    visible: int  # visible elements in the whole N x N mask (exact)

    @property
    def visible_fraction(self) -> float:
        """Visible elements / N^2."""
        return self.visible / (self.n * self.n)


def element_map(mask_mod: MaskMod, n: int, cells_max: int = MAP_CELLS_MAX) -> ElementMap:
    """The fraction of visible elements of mask_mod (at b = h = 0) in each cell of a grid of at most cells_max cells
    per side, and the exact number of visible elements; rows are evaluated in slabs of at most ELEMENT_BUDGET
    elements (or whole cells of rows when one row of cells is larger), so memory stays bounded at any N.

    Example:
        >>> m = element_map(masks.causal_mask, 4, cells_max=2)
        >>> m.cell, m.fraction.tolist(), m.visible
        (2, [[0.75, 0.0], [1.0, 0.75]], 10)
    """
    cell = -(-n // cells_max)  # ceil(N / cells): elements per cell side
    cells = -(-n // cell)
    b, h = index_grid(1, 1)
    counts = torch.zeros(cells, cells, dtype=torch.float64)  # visible elements per cell
    budget = MAP_SLAB_ONE_THREAD if torch.get_num_threads() == 1 else ELEMENT_BUDGET
    rows_per_slab = max(cell, budget // n // cell * cell)  # whole cells of rows
    kv_idx = torch.arange(n)[None, :]  # (1, N)
    pad = cells * cell - n  # columns past N in the last cell
    for r0 in range(0, n, rows_per_slab):
        r1 = min(r0 + rows_per_slab, n)
        vis = evaluate(mask_mod, b, h, torch.arange(r0, r1)[:, None], kv_idx)[0, 0]  # (rows, N)
        vis = torch.nn.functional.pad(vis.to(torch.float32), (0, pad, 0, (-(r1 - r0)) % cell))  # whole cells
        counts[r0 // cell: r0 // cell + vis.shape[0] // cell] = (
            vis.view(vis.shape[0] // cell, cell, cells, cell).sum(dim=(1, 3), dtype=torch.float64))
    sizes = torch.full((cells,), float(cell), dtype=torch.float64)
    sizes[-1] = n - (cells - 1) * cell  # the last cell may be ragged
    area = sizes[:, None] * sizes[None, :]  # (cells, cells) in-bounds elements per cell
    return ElementMap(n=n, cell=cell, fraction=(counts / area).numpy(), visible=int(counts.sum().item()))


@dataclass(frozen=True)
class TileGrid:
    """The tile schedule of a mask as plain data."""

    n: int  # sequence length N
    block_q: int  # Br
    block_k: int  # Bc
    status: tuple[tuple[str, ...], ...]  # [q_block][k_block]: "full", "partial" or "skipped"
    counts: dict[str, int]  # tiles of each status
    ragged_full: int  # full tiles in a ragged last row or column: the BlockMask lists them as partial
    computed_elements: int  # (query, key) pairs inside computed tiles: visible ones and masked ones

    @property
    def tiles(self) -> int:
        return sum(self.counts.values())

    @property
    def computed(self) -> int:
        return self.tiles - self.counts[SKIPPED]


def tile_grid(schedule: TileSchedule) -> TileGrid:
    """Statuses and counts of a square schedule, and how many full tiles sit on a ragged edge.

    Example:
        >>> g = tile_grid(tile_schedule(5, 5, 2, 2, mask_mod=masks.causal_mask))
        >>> g.counts, g.ragged_full
        ({'full': 4, 'partial': 2, 'skipped': 3}, 3)
    """
    status = tuple(tuple(row) for row in schedule.status_grid())
    counts = {s: sum(row.count(s) for row in status) for s in TILE_STATUSES}
    ragged_q, ragged_k = schedule.n_q % schedule.block_q != 0, schedule.n_k % schedule.block_k != 0
    edge = {(i, j) for i in range(schedule.n_q_blocks) for j in range(schedule.n_k_blocks)
            if (ragged_q and i == schedule.n_q_blocks - 1) or (ragged_k and j == schedule.n_k_blocks - 1)}
    ragged_full = sum(status[i][j] == FULL for i, j in edge)
    computed_elements = sum(t.rows * t.cols for t in schedule.computed())
    return TileGrid(schedule.n_q, schedule.block_q, schedule.block_k, status, counts, ragged_full, computed_elements)


def block_mask_rows(block_mask: BlockMask, rows: int) -> list[dict[str, object]]:
    """The first `rows` query blocks of a BlockMask at (b, h) = (0, 0): the counts and the valid index prefixes.

    Example:
        >>> bm = to_block_mask(tile_schedule(4, 4, 2, 2, mask_mod=masks.causal_mask))
        >>> block_mask_rows(bm, 2)[1]
        {'q_block': 1, 'kv_num_blocks': 1, 'kv_indices': [1], 'full_kv_num_blocks': 1, 'full_kv_indices': [0]}
    """
    out = []
    num, idx = block_mask.kv_num_blocks[0, 0], block_mask.kv_indices[0, 0]  # (Tr,), (Tr, Tc)
    full_num, full_idx = block_mask.full_kv_num_blocks[0, 0], block_mask.full_kv_indices[0, 0]
    for i in range(min(rows, num.shape[0])):
        k, f = int(num[i]), int(full_num[i])
        out.append({"q_block": i, "kv_num_blocks": k, "kv_indices": idx[i, :k].tolist(),
                    "full_kv_num_blocks": f, "full_kv_indices": full_idx[i, :f].tolist()})
    return out


def same_blocks(ours: BlockMask, theirs: BlockMask) -> bool:
    """True if two BlockMasks list the same partial and full blocks (counts, and the valid index prefixes; entries
    past the counts are padding and may differ), with the same block size and lengths."""
    if ours.BLOCK_SIZE != theirs.BLOCK_SIZE or ours.seq_lengths != theirs.seq_lengths:
        return False
    for num, idx in (("kv_num_blocks", "kv_indices"), ("full_kv_num_blocks", "full_kv_indices")):
        n_ours, n_theirs = getattr(ours, num), getattr(theirs, num)
        i_ours, i_theirs = getattr(ours, idx), getattr(theirs, idx)
        if n_ours.shape != n_theirs.shape or not torch.equal(n_ours, n_theirs) or i_ours.shape != i_theirs.shape:
            return False
        valid = torch.arange(i_ours.shape[-1]) < n_ours.unsqueeze(-1)  # (B, H, Tr, Tc)
        if not torch.equal(i_ours[valid], i_theirs[valid]):
            return False
    return True


def matches_torch(mask_mod: MaskMod, n: int, block_q: int, block_k: int) -> bool:
    """Whether to_block_mask(tile_schedule(...)) lists the same blocks as torch's create_block_mask on the same mask
    (B = H = 1; create_block_mask builds the whole N x N mask, so keep N moderate).

    Example:
        >>> matches_torch(masks.causal_mask, 100, 32, 16)
        True
    """
    ours = to_block_mask(tile_schedule(n, n, block_q, block_k, mask_mod=mask_mod))
    theirs = create_block_mask(mask_mod, 1, 1, n, n, device="cpu", BLOCK_SIZE=(block_q, block_k))
    return same_blocks(ours, theirs)


def score_curves(spec: MaskSpec, n: int, heads: int, points: int = 101) -> dict[str, list[float]]:
    """What the score_mod does, as plain lists: softcap -> {"score", "capped"} over scores in [-3 cap, 3 cap];
    alibi -> {"offset"} (j - i from -(N - 1) to 0) and one "head h" list of the bias m_h (j - i) per head (at most
    8 heads); none -> {}.

    Example:
        >>> c = score_curves(MaskSpec(score="alibi"), 9, 2, points=3)
        >>> c["offset"], c["head 0"]
        ([-8.0, -4.0, 0.0], [-0.5, -0.25, 0.0])
    """
    built = build_mask(spec, n, heads)
    if built.score_mod is None:
        return {}
    zero = torch.zeros((), dtype=torch.int64)
    if spec.score == "softcap":
        score = torch.linspace(-3.0 * spec.cap, 3.0 * spec.cap, points, dtype=torch.float64)
        return {"score": score.tolist(), "capped": built.score_mod(score, zero, zero, zero, zero).tolist()}
    offset = torch.linspace(-(n - 1), 0, points, dtype=torch.float64)  # j - i, keys at or before the query
    out = {"offset": offset.tolist()}
    for h in range(min(heads, 8)):
        bias = built.score_mod(torch.zeros_like(offset), zero, torch.tensor(h), zero, offset)  # q_idx = 0, kv = j - i
        out[f"head {h}"] = bias.tolist()
    return out


TABLE_ROWS = 8  # query blocks of the BlockMask listed


@dataclass(frozen=True)
class MaskData:
    """Everything the view draws for one mask, as plain data."""

    code: str  # the Python that builds the mask_mod (and score_mod)
    sample: str  # a whole script: the imports, that code, our BlockMask and torch's create_block_mask of it
    doc_lengths: tuple[int, ...]  # document lengths at this N, if a document preset is used
    elements: ElementMap  # the element-level mask at a readable resolution
    grid: TileGrid  # the tile schedule's statuses and counts
    rows: list  # the BlockMask's first query-block rows (block_mask_rows)


def mask_data(spec: MaskSpec, n: int, block_q: int, block_k: int, heads: int, rows: int = TABLE_ROWS) -> MaskData:
    """Build the mask at N (ALiBi over H heads), evaluate it at element level, classify its tiles and export the
    BlockMask's first `rows` query blocks.

    Example:
        >>> data = mask_data(MaskSpec("causal"), 8, 4, 4, 1)
        >>> data.code, data.grid.counts, data.elements.visible, data.rows[1]["full_kv_indices"]
        ('mask_mod = causal_mask', {'full': 1, 'partial': 2, 'skipped': 1}, 36, [0])
    """
    built = build_mask(spec, n, heads)
    schedule = tile_schedule(n, n, block_q, block_k, mask_mod=built.mask_mod)
    return MaskData(built.code, code_sample(built.code, n, block_q, block_k, built.score_mod is not None),
                    built.doc_lengths, element_map(built.mask_mod, n), tile_grid(schedule),
                    block_mask_rows(to_block_mask(schedule), rows))


def code_sample(code: str, n: int, block_q: int, block_k: int, score: bool) -> str:
    """A script a user can paste: the imports, `code` (build_mask's), the schedule and its BlockMask, torch's own
    create_block_mask of the same mask_mod, and the flex_attention call (with score_mod=score_mod if `score`).

    Example:
        >>> print(code_sample("mask_mod = causal_mask", 8, 4, 4, False).splitlines()[-1])
        # out = flex_attention(q, k, v, block_mask=block_mask)
    """
    return ("from torch.nn.attention.flex_attention import (\n"
            "    and_masks, or_masks, create_block_mask, flex_attention)\n"
            "from flashviz.masks import *\n"
            "from flashviz.core.tiling import tile_schedule\n"
            "from flashviz.core.blockmask import to_block_mask\n\n"
            f"{code}\n"
            f"schedule = tile_schedule({n}, {n}, {block_q}, {block_k}, mask_mod=mask_mod)\n"
            "block_mask = to_block_mask(schedule)\n"
            f"same = create_block_mask(mask_mod, 1, 1, {n}, {n}, BLOCK_SIZE=({block_q}, {block_k}))\n"
            f"# out = flex_attention(q, k, v, block_mask=block_mask{', score_mod=score_mod' if score else ''})")


def spec_matches_torch(spec: MaskSpec, n: int, block_q: int, block_k: int) -> bool:
    """Whether our BlockMask of the spec's mask_mod equals create_block_mask's (a score_mod changes no block).

    Example:
        >>> spec_matches_torch(MaskSpec("chunked", chunk=24), 100, 32, 16)
        True
    """
    return matches_torch(build_mask(spec, n).mask_mod, n, block_q, block_k)


def mask_traces(spec: MaskSpec, n: int, block_q: int, block_k: int, loop_orders: tuple[str, ...],
                heads: int) -> tuple[list[ScheduleTrace], str]:
    """The tile schedule traces of the spec's mask (one per loop order) for the How it works tile map, and the first
    line of the code that builds the mask.

    Example:
        >>> traces, code = mask_traces(MaskSpec("causal"), 8, 4, 4, ("q_outer",), 1)
        >>> len(traces[0].computed_steps()), code
        (3, 'mask_mod = causal_mask')
    """
    built = build_mask(spec, n, heads)
    traces = [schedule_trace(n, block_q, block_k, loop_order=order, mask_mod=built.mask_mod) for order in loop_orders]
    return traces, built.code.splitlines()[0]


RUN_WARMUP = 1  # untimed kernel calls per run after the peak-memory call (itself a first call)


RUN_REPEATS = min_repeats()  # interleaved timed calls per run: 6, the fewest whose median has a 95% interval


SWEEP_WARMUP = 1  # untimed calls per preset


SWEEP_REPEATS = min_repeats()  # interleaved timed calls per preset: 6, the fewest with a 95% interval


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
        one dict per run (MASKED, DENSE, UNMASKED): kind, label, time_s, iqr_s, time_lo_s, time_hi_s (the median's
        95% interval) (s), repeats, set_aside, threads, threads_asked (flashviz.measure.timing.Timing.row),
        peak_bytes (above the inputs), build_s, build_iqr_s (s: the schedule, or the dense mask), tiles_computed,
        tiles, tiles_partial, steps (the schedule the timed calls used and the kernel's loop iterations on it; the
        dense run computes every tile in one call: its tiles_partial and steps are 0).
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
    return [{"kind": name, "label": MASK_RUN_LABELS[name], **t.row(), "iqr_s": t.iqr, "peak_bytes": peaks[name],
             "build_s": build_t[name].median,
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
    """Every preset of presets.PRESETS alone, at the spec's parameters (no score mod), then NO_MASK: noop_mask."""
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
        tiles_partial, steps (the kernel's loop iterations), time_s, iqr_s, time_lo_s, time_hi_s (the median's 95%
        interval), repeats, set_aside, threads, threads_asked (flashviz.measure.timing.Timing.row), build_s,
        build_iqr_s (s).
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
                     "computed": numbers["tiles_computed"] / numbers["tiles"], **numbers, **t.row(),
                     "iqr_s": t.iqr,
                     "build_s": build_t[name].median,
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

