"""The Masks view's data, torch side: a mask described by preset names and numbers, drawn and checked as plain data.

The dashboard never runs code from the browser: a `MaskSpec` holds only preset names (flashviz.masks) and integers,
and `build_mask` turns it into a FlexAttention mask_mod and score_mod, with the Python code that builds the same
mask. From a mask this module computes, for the figures (flashviz.figures.masks, torch-free):

    element_map     the fraction of visible elements in each cell of a grid of at most MAP_CELLS_MAX cells per side
                    (a cell is one element up to N = MAP_CELLS_MAX; beyond, c x c elements), evaluated in slabs so
                    memory stays bounded at any N, with the exact count of visible elements;
    tile_grid       the tile schedule's statuses (full / partial / skipped) and counts;
    block_mask_rows the BlockMask a FlexAttention user would get (to_block_mask), its first query-block rows;
    matches_torch   whether that BlockMask lists the same blocks as torch's own create_block_mask;
    score_curves    what the score_mod does to a score: softcap's curve, or ALiBi's bias per head.

Legend: N sequence length (N_q = N_k), Br = block_q, Bc = block_k, Tr x Tc tiles, H heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn.attention.flex_attention import BlockMask, and_masks, create_block_mask, or_masks

from flashviz import masks
from flashviz.core.blockmask import to_block_mask
from flashviz.core.maskeval import ELEMENT_BUDGET, evaluate, index_grid
from flashviz.core.tiling import TileSchedule, tile_schedule
from flashviz.mask_presets import COMBINE, DOC_PATTERNS, PARAMS, PICKERS, PRESETS, SCORE_MODS
from flashviz.masks import MaskMod, ScoreMod
from flashviz.vocab import FULL, SKIPPED, TILE_STATUSES

MAP_CELLS_MAX = 256  # cells per side of the element map: about 2 px each in a 560 px figure
# Mask elements per slab of the element map. On one thread 1 Mi was the fastest (document AND causal, N = 16384:
# 2.8 s against 3.6 s for 256 Ki); with more threads, fewer and larger calls win, as in maskeval.
MAP_SLAB_ONE_THREAD = 1 << 20
NO_COMBINE, NO_SCORE = "none", "none"  # MaskSpec.combine of a single preset, MaskSpec.score without a score_mod


@dataclass(frozen=True)
class MaskSpec:
    """A mask as names and numbers only (what the dashboard's URL carries). Hashable, so it keys caches. The field
    names are the keys of flashviz.mask_presets' PICKERS and PARAMS, and the defaults theirs (one preset alone)."""

    preset: str = PICKERS["preset"].default  # a key of mask_presets.PRESETS
    combine: str = NO_COMBINE  # a key of mask_presets.COMBINE: "none", "and" (and_masks) or "or" (or_masks)
    preset2: str = PICKERS["preset2"].default  # the second preset, used when combine is not "none"
    docs: str = PARAMS["docs"].default  # document: a key of mask_presets.DOC_PATTERNS
    prefix: int = PARAMS["prefix"].default  # prefix_lm: keys every query sees (tokens)
    sinks: int = PARAMS["sinks"].default  # attention_sink: leading keys every query keeps (tokens)
    window: int = PARAMS["window"].default  # sliding_window left reach, attention_sink and dilated window (tokens)
    right: int = PARAMS["right"].default  # sliding_window right reach (tokens)
    chunk: int = PARAMS["chunk"].default  # chunked: tokens per chunk
    dilation: int = PARAMS["dilation"].default  # dilated: stride between visible keys
    score: str = NO_SCORE  # a key of mask_presets.SCORE_MODS: "none", "alibi" or "softcap"
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
    """One preset's mask_mod at N and the code that builds it: its factory (mask_presets.PRESETS) called with its
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
