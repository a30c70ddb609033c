"""The "Masks" tab: build a FlexAttention mask from presets, see it at element level and as tiles, read the BlockMask
a FlexAttention user would get, and check it against torch's own create_block_mask, live.

The browser sends only preset names and numbers (the tab's settings, in the URL like every other); the mask_mod is
built here from flashviz.masks. Widgets -> cached data (flashviz.measure.maskview) -> figures (flashviz.figures.masks).
Every number on the page is computed from the data drawn next to it.

Legend: N sequence length, Br = block_q, Bc = block_k, Tr x Tc tiles.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace

import streamlit as st
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_mask, noop_mask

from flashviz.core.blockmask import to_block_mask
from flashviz.core.flash import flash_attention_forward
from flashviz.core.tiling import tile_schedule
from flashviz.figures.masks import (
    block_mask_table_figure,
    element_mask_figure,
    masked_run_figure,
    score_mod_figure,
    sparsity_time_figure,
    tile_map_figure,
)
from flashviz.figures.tilemap import tile_map_html
from flashviz.limits import LIVE_INPUT_BYTES_MAX, WORK_FLOP_MAX
from flashviz.mask_presets import PICKERS, mask_settings, params_of
from flashviz.measure.guards import format_bytes
from flashviz.measure.impls import resolve_dtype
from flashviz.measure.maskview import (
    NO_COMBINE,
    ElementMap,
    MaskSpec,
    TileGrid,
    block_mask_rows,
    build_mask,
    element_map,
    matches_torch,
    score_curves,
    tile_grid,
)
from flashviz.measure.memory import measure_memory
from flashviz.measure.timing import median_iqr, threads_set_to, time_calls
from flashviz.measure.trace import schedule_trace
from flashviz.ui.common import Progress, holding, run_button_ui, show_figure, show_map, timing_lock
from flashviz.ui.first_page import grid_error
from flashviz.ui.state import MASK_PRESETS, Settings
from flashviz.ui.widgets import draw
from flashviz.vocab import DTYPE_BYTES, Q_OUTER

TILE_GRID_MAX = 256  # tiles per side the tile map draws (65,536 tiles)
CHECK_N_MAX = 4096  # create_block_mask builds the whole N x N mask: about 150 MB of temporaries at 4096, 0.5 GB at 8192
TABLE_ROWS = 8  # query blocks of the BlockMask listed
RUN_REPEATS = 3  # interleaved timed calls per run: a median, while the Python tile loop keeps the run short
DENSE_BYTES_MAX = 1 << 29  # bytes (512 MiB) of the dense run's N x N boolean mask plus SDPA's additive copy


def mask_spec(s: Settings) -> MaskSpec:
    """The mask the tab's settings describe (names and numbers only): each setting of mask_presets' table fills its
    MaskSpec field."""
    return MaskSpec(**{p.key: getattr(s, url_key) for url_key, p in mask_settings().items()})


@dataclass(frozen=True)
class MaskData:
    """Everything the tab draws for one mask, as plain data."""

    code: str  # the Python that builds the mask_mod (and score_mod)
    doc_lengths: tuple[int, ...]  # document lengths at this N, if a document preset is used
    elements: ElementMap  # the element-level mask at a readable resolution
    grid: TileGrid  # the tile schedule's statuses and counts
    rows: list  # the BlockMask's first query-block rows (block_mask_rows)


@st.cache_data(show_spinner=False, max_entries=32)
def cached_mask_data(spec: MaskSpec, n: int, br: int, bc: int, heads: int) -> MaskData:
    """Build the mask at N (ALiBi over H heads), evaluate it at element level, classify its tiles and export the
    BlockMask."""
    built = build_mask(spec, n, heads)
    schedule = tile_schedule(n, n, br, bc, mask_mod=built.mask_mod)
    rows = block_mask_rows(to_block_mask(schedule), TABLE_ROWS)
    return MaskData(built.code, built.doc_lengths, element_map(built.mask_mod, n), tile_grid(schedule), rows)


@st.cache_data(show_spinner=False, max_entries=32)
def cached_matches_torch(spec: MaskSpec, n: int, br: int, bc: int) -> bool:
    """Whether our BlockMask equals create_block_mask's on this mask (pass score="none": it does not enter)."""
    return matches_torch(build_mask(spec, n).mask_mod, n, br, bc)


@st.cache_data(show_spinner=False, max_entries=32)
def cached_score_curves(spec: MaskSpec, n: int, heads: int) -> dict[str, list[float]]:
    return score_curves(spec, n, heads)


CONTROLS_PER_ROW = 5  # widgets side by side: a 140 px select or number input each at 1280 px


@contextlib.contextmanager
def one_thread_if_idle() -> Iterator[None]:
    """Evaluate masks on one thread while no timing run holds the lock: on a busy machine the many small ops of a
    mask evaluation ran 4x faster on one thread than on two (N = 16384: about 3 s against 12 s). The thread count is
    process-wide, so it is changed only while holding the timing lock (as the row inspector does)."""
    lock = timing_lock()
    have_lock = lock.acquire(blocking=False)
    try:
        with threads_set_to(1 if have_lock else None):
            yield
    finally:
        if have_lock:
            lock.release()


def _controls_ui(s: Settings) -> None:
    """The preset pickers and the score mod, then the numbers they need (and the softcap's cap): on one row where
    they fit, so the maps start higher on a 720 px screen, else the numbers on the next."""
    spec = mask_spec(s)
    pickers = {p.key: p.url_key for p in PICKERS.values()}
    choices = [pickers["preset"], pickers["combine"]] + ([pickers["preset2"]] if spec.combine != NO_COMBINE else [])
    choices.append(pickers["score"])
    numbers = [p.url_key for p in params_of(spec.presets, spec.score)]
    rows = [choices + numbers] if len(choices) + len(numbers) <= CONTROLS_PER_ROW else [choices, numbers]
    for row in rows:
        for start in range(0, len(row), CONTROLS_PER_ROW):
            for name, col in zip(row[start:start + CONTROLS_PER_ROW], st.columns(CONTROLS_PER_ROW), strict=False):
                draw(name, col)


def masks_ui(s: Settings) -> None:
    """Draw the tab for settings s."""
    st.markdown("A FlexAttention **mask_mod** says which keys each query sees; the tiled kernel turns it into "
                "**full**, **partial** and **skipped** tiles, and FlexAttention into a **BlockMask**. N, Br and Bc "
                "come from the sidebar.")
    _controls_ui(s)
    if s.causal or s.window is not None:
        st.caption("The sidebar's causal mask and sliding window do not apply in this tab: its mask is built from "
                   "the presets above only.")
    error = grid_error(s, TILE_GRID_MAX, "this view")
    if error:
        st.error(error)
        return
    spec = mask_spec(s)
    try:
        with st.spinner(f"Evaluating the {s.n} × {s.n} mask ..."), one_thread_if_idle():
            data = cached_mask_data(spec, s.n, s.br, s.bc, s.heads)
    except (ValueError, TypeError) as e:  # the presets' own validation says what to change
        st.error(f"This mask cannot be built: {e}")
        return
    left, right = st.columns(2)
    with left:
        show_figure(element_mask_figure(data.elements.fraction, n=s.n, cell=data.elements.cell,
                                        visible_fraction=data.elements.visible_fraction, tile_q=s.br, tile_k=s.bc),
                    key="mask_elements")
    with right:
        show_figure(tile_map_figure(data.grid.status, n=s.n, block_q=s.br, block_k=s.bc, counts=data.grid.counts),
                    key="mask_tiles")
    _summary_ui(s, data)
    _block_mask_ui(s, spec, data)
    _score_mod_ui(s, spec)
    _run_ui(s, spec, data)
    _sweep_ui(s, spec)


def _summary_ui(s: Settings, data: MaskData) -> None:
    """The sparsity in words, every number from the data drawn below."""
    g, e = data.grid, data.elements
    masked_work = 1 - e.visible / g.computed_elements if g.computed_elements else 0.0
    docs = (f" Documents at N = {s.n}: {', '.join(str(x) for x in data.doc_lengths)} tokens."
            if data.doc_lengths else "")
    st.markdown(
        f"**{g.computed} of {g.tiles} tiles computed ({g.computed / g.tiles:.1%})**: {g.counts['full']} full, "
        f"{g.counts['partial']} partial, {g.counts['skipped']} skipped. **{e.visible_fraction:.1%} of the "
        f"{s.n}² (query, key) pairs are visible**; {masked_work:.1%} of the pairs inside computed tiles are masked "
        f"(computed, then thrown away). Dense attention with a boolean mask computes all {s.n}² pairs.{docs}"
    )
    if e.cell > 1:
        st.caption(f"The element mask is drawn at {e.fraction.shape[0]} × {e.fraction.shape[1]} pixels: each pixel "
                   f"shows {e.cell} × {e.cell} elements, shaded by the fraction visible (exact counts).")


def _block_mask_ui(s: Settings, spec: MaskSpec, data: MaskData) -> None:
    st.subheader("The BlockMask FlexAttention sees")
    _check_ui(s, spec)
    tr = len(data.grid.status)
    show_figure(block_mask_table_figure(data.rows, n_q_blocks=tr), key="mask_block_table")
    if data.grid.ragged_full:
        st.caption(f"N = {s.n} is not a multiple of the tile size, so the last row or column of tiles is ragged: "
                   f"{_tiles_are(data.grid.ragged_full)} full on the tile map (every in-bounds pair visible) but "
                   "partial in the BlockMask, because create_block_mask pads the mask past N with masked pairs.")
    st.markdown("The same mask in Python (FlexAttention's signatures: the function works in both libraries):")
    score = ", score_mod=score_mod" if spec.score != "none" else ""
    st.code("from torch.nn.attention.flex_attention import (\n"
            "    and_masks, or_masks, create_block_mask, flex_attention)\n"
            "from flashviz.masks import *\n"
            "from flashviz.core.tiling import tile_schedule\n"
            "from flashviz.core.blockmask import to_block_mask\n\n"
            f"{data.code}\n"
            f"schedule = tile_schedule({s.n}, {s.n}, {s.br}, {s.bc}, mask_mod=mask_mod)\n"
            "block_mask = to_block_mask(schedule)\n"
            f"same = create_block_mask(mask_mod, 1, 1, {s.n}, {s.n}, BLOCK_SIZE=({s.br}, {s.bc}))\n"
            f"# out = flex_attention(q, k, v, block_mask=block_mask{score})", language="python", wrap_lines=True)


def _tiles_are(k: int) -> str:
    """'1 ragged tile is' / '3 ragged tiles are'."""
    return f"{k} ragged tile is" if k == 1 else f"{k} ragged tiles are"


def _check_ui(s: Settings, spec: MaskSpec) -> None:
    """The live check against torch's create_block_mask (skipped above CHECK_N_MAX, and saying so)."""
    if s.n > CHECK_N_MAX:
        st.markdown(f"Equal to create_block_mask: **not checked live** at N = {s.n}: create_block_mask builds the "
                    f"whole N × N mask, so this tab runs it only up to N = {CHECK_N_MAX}.")
        return
    with st.spinner("Building the same mask with torch's create_block_mask ..."), one_thread_if_idle():
        same = cached_matches_torch(replace(spec, score="none"), s.n, s.br, s.bc)  # a score_mod changes no block
    if same:
        st.success(f"**Equal to create_block_mask: yes.** torch's create_block_mask(mask_mod, 1, 1, {s.n}, {s.n}, "
                   f"BLOCK_SIZE=({s.br}, {s.bc})) lists the same partial and full blocks as this BlockMask, for "
                   "every query block.")
    else:
        st.error(f"Equal to create_block_mask: **no**: torch's create_block_mask lists different blocks for this mask "
                 f"at N = {s.n}, Br = {s.br}, Bc = {s.bc}.")


def _score_mod_ui(s: Settings, spec: MaskSpec) -> None:
    if spec.score == "none":
        return
    st.subheader("The score mod")
    curves = cached_score_curves(spec, s.n, s.heads)
    show_figure(score_mod_figure(curves, kind=spec.score, heads=s.heads, cap=spec.cap, n=s.n), key="mask_score")
    st.caption("A score_mod changes scores before the softmax; it never changes which pairs are visible, so the "
               "element mask, the tile map and the BlockMask above are the same with or without it.")


# ----------------------------------------------------------------------------------------------------------------------
# the run button: the mask at work


MASKED, DENSE, UNMASKED = "masked", "dense", "unmasked"  # the three runs (masked_run_figure's kinds)
MASK_RUN_LABELS = {MASKED: "tiled, this mask", DENSE: "SDPA, dense mask", UNMASKED: "tiled, no mask"}


def run_bytes(n: int, d: int, heads: int, dtype: str) -> tuple[int, int]:
    """Bytes a run needs: (q, k, v and the output; the dense run's N x N boolean mask plus the additive mask of the
    run's dtype that SDPA makes from it on the CPU).

    Example:
        >>> run_bytes(1024, 64, 4, "float32")  # 4 MiB of tensors; 1 MiB of boolean mask + 4 MiB of additive mask
        (4194304, 5242880)
    """
    b = DTYPE_BYTES[dtype]
    return 4 * heads * n * d * b, n * n * (1 + b)


def run_problem(s: Settings) -> str | None:
    """Why a run at these settings is refused (with the fix), or None."""
    inputs, dense = run_bytes(s.n, s.d, s.heads, s.dtype)
    if inputs > LIVE_INPUT_BYTES_MAX:
        return (f"q, k, v and the output at N = {s.n}, d = {s.d}, H = {s.heads} ({s.dtype}) take "
                f"{format_bytes(inputs)}; the cap is {format_bytes(LIVE_INPUT_BYTES_MAX)}. Lower N, d or H.")
    if dense > DENSE_BYTES_MAX:
        return (f"Dense SDPA at N = {s.n} needs the {s.n} × {s.n} boolean mask and the {s.dtype} mask SDPA makes "
                f"from it: {format_bytes(dense)}; the cap is {format_bytes(DENSE_BYTES_MAX)}. Lower N (sidebar).")
    flops = len(MASK_RUN_LABELS) * (RUN_REPEATS + 1) * attention_flops(s.n, s.d, s.heads)
    if flops > WORK_FLOP_MAX:
        return (f"{len(MASK_RUN_LABELS) * (RUN_REPEATS + 1)} calls at N = {s.n}, d = {s.d}, H = {s.heads} cost up "
                f"to {flops:.3g} FLOPs; the cap is {WORK_FLOP_MAX:.3g}. Lower N, d or H (sidebar).")
    return None


def attention_flops(n: int, d: int, heads: int) -> int:
    """FLOPs of one unmasked forward call: QKᵀ and PV, 2·N²·d each, per head."""
    return 4 * heads * n * n * d


@st.cache_data(show_spinner=False, max_entries=16)
def masked_runs(spec: MaskSpec, n: int, d: int, heads: int, br: int, bc: int, dtype: str, threads: int,
                _progress: Progress | None = None, _lock: threading.Lock | None = None) -> list[dict[str, object]]:
    """Time (median and IQR of RUN_REPEATS interleaved calls) and peak memory of the tiled kernel with the mask (and
    score mod), dense SDPA with the boolean mask, and the tiled kernel without a mask, on B = 1, H heads, CPU."""
    built = build_mask(spec, n, heads)
    dt = resolve_dtype(dtype)
    with holding(_lock or threading.Lock(), _progress), threads_set_to(threads), torch.no_grad():
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(1, heads, n, d, generator=g).to(dt) for _ in range(3))  # (1, H, N, d) each
        dense = create_mask(built.mask_mod, 1, 1, n, n, device="cpu")  # (1, 1, N, N) bool
        tiled = {"block_q": br, "block_k": bc, "loop_order": Q_OUTER}
        fns = {
            MASKED: lambda: flash_attention_forward(q, k, v, **tiled, mask_mod=built.mask_mod,
                                                    score_mod=built.score_mod),
            DENSE: lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=dense),
            # no mask, on the same (mask_mod) path as the masked run: noop_mask keeps every tile full
            UNMASKED: lambda: flash_attention_forward(q, k, v, **tiled, mask_mod=noop_mask),
        }
        steps = len(fns) + RUN_REPEATS
        peaks = {}
        for i, (name, fn) in enumerate(fns.items()):  # the memory call is also each run's untimed warm-up call
            if _progress is not None:
                _progress(i, steps, f"peak memory (and warm-up): {name}")
            peaks[name] = measure_memory(fn)
        samples: dict[str, list[float]] = {name: [] for name in fns}
        for r in range(RUN_REPEATS):
            if _progress is not None:
                _progress(len(fns) + r, steps, f"timing: repeat {r + 1} of {RUN_REPEATS}")
            for name, t in time_calls(fns, warmup=0, repeats=1).items():
                samples[name].append(t.median)
    return [{"kind": name, "label": MASK_RUN_LABELS[name], "time_s": median_iqr(ts)[0], "iqr_s": median_iqr(ts)[1],
             "peak_bytes": peaks[name], "repeats": len(ts)} for name, ts in samples.items()]


def _times_faster(a: float, b: float) -> str:
    """How a time a compares with b, in words: '2.5× faster than' / '1.3× slower than'."""
    return f"{b / a:.1f}× faster than" if a <= b else f"{a / b:.1f}× slower than"


def run_md(runs: list[dict[str, object]], computed: int, tiles: int) -> str:
    """The result in words, every number from the runs."""
    t = {r["kind"]: float(r["time_s"]) for r in runs}
    m = {r["kind"]: int(r["peak_bytes"]) for r in runs}
    return (f"The tiled kernel with this mask ({computed} of {tiles} tiles computed) took "
            f"**{t[MASKED] * 1e3:.3g} ms**: {_times_faster(t[MASKED], t[UNMASKED])} the unmasked tiled kernel "
            f"({t[UNMASKED] * 1e3:.3g} ms) and {_times_faster(t[MASKED], t[DENSE])} dense SDPA with the boolean mask "
            f"({t[DENSE] * 1e3:.3g} ms), which computes every pair. Peak memory above the inputs: "
            f"{format_bytes(m[MASKED])} masked tiled, {format_bytes(m[DENSE])} dense SDPA, "
            f"{format_bytes(m[UNMASKED])} unmasked tiled.")


def _run_ui(s: Settings, spec: MaskSpec, data: MaskData) -> None:
    st.subheader("The mask at work")
    st.markdown(f"Times the tiled kernel (FlashAttention-2 loop order) with this mask, dense SDPA with the {s.n} × "
                f"{s.n} boolean mask (it cannot skip a tile) and the tiled kernel with no mask, interleaved call by "
                f"call, {RUN_REPEATS} repeats after one untimed call that measures its peak memory, at the sidebar's "
                f"N, d, H, Br, Bc and dtype on the CPU ({s.threads} thread(s)).")
    problem = run_problem(s)
    if problem:
        st.warning(f"This run is refused: {problem}", icon="🛑")
        return
    args = (spec, s.n, s.d, s.heads, s.br, s.bc, s.dtype, s.threads)
    runs = run_button_ui("masks", masked_runs, args, label="Run the mask", title="Mask timing",
                         help="Times the three runs on these settings (cached per setting).",
                         idle=f"Press **Run the mask** to time the three runs "
                              f"({len(MASK_RUN_LABELS) * (RUN_REPEATS + 1)} calls).")
    if runs is None:
        return
    if spec.score != "none":
        st.caption(f"SDPA has no score-mod hook: its row runs the mask only, without {spec.score}. The masked tiled "
                   "row applies the score mod too; the unmasked row applies neither.")
    show_figure(masked_run_figure(runs), key="mask_run")
    st.markdown(run_md(runs, data.grid.computed, data.grid.tiles))
    with st.expander("All measurements"):
        st.dataframe(runs, hide_index=True)


# ----------------------------------------------------------------------------------------------------------------------
# the sweep button: time against sparsity, one point per preset


SWEEP_REPEATS = 3  # interleaved timed calls per preset: the Python tile loop runs 8 kernels per repeat
NO_MASK = "none"  # the sweep's unmasked row


def sweep_problem(s: Settings) -> str | None:
    """Why a sweep at these settings is refused (with the fix), or None: the run's input cap, and the shared FLOP
    cap counted as if every preset computed every tile."""
    inputs, _ = run_bytes(s.n, s.d, s.heads, s.dtype)
    if inputs > LIVE_INPUT_BYTES_MAX:
        return (f"q, k, v and the output at N = {s.n}, d = {s.d}, H = {s.heads} ({s.dtype}) take "
                f"{format_bytes(inputs)}; the cap is {format_bytes(LIVE_INPUT_BYTES_MAX)}. Lower N, d or H.")
    calls = (len(MASK_PRESETS) + 1) * (SWEEP_REPEATS + 1)
    flops = calls * attention_flops(s.n, s.d, s.heads)
    if flops > WORK_FLOP_MAX:
        return (f"{calls} calls at N = {s.n}, d = {s.d}, H = {s.heads} cost up to {flops:.3g} FLOPs; the cap is "
                f"{WORK_FLOP_MAX:.3g}. Lower N, d or H (sidebar).")
    return None


@st.cache_data(show_spinner=False, max_entries=16)
def sparsity_runs(spec: MaskSpec, n: int, d: int, heads: int, br: int, bc: int, dtype: str, threads: int,
                  _progress: Progress | None = None, _lock: threading.Lock | None = None) -> list[dict[str, object]]:
    """Time (median and IQR of SWEEP_REPEATS interleaved calls, after one untimed call each) the tiled kernel with
    every preset alone, at the tab's parameters and without a score mod, and without a mask, on B = 1, H heads, CPU;
    with the fraction of tiles each computes. The unmasked row ("preset" NO_MASK) comes last."""
    mods = {name: build_mask(replace(spec, preset=name, combine="none", score="none"), n).mask_mod
            for name in MASK_PRESETS}
    counts = {name: tile_schedule(n, n, br, bc, mask_mod=mod).counts() for name, mod in mods.items()}
    tiles = -(-n // br) * -(-n // bc)
    dt = resolve_dtype(dtype)
    with holding(_lock or threading.Lock(), _progress), threads_set_to(threads), torch.no_grad():
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(1, heads, n, d, generator=g).to(dt) for _ in range(3))  # (1, H, N, d) each
        tiled = {"block_q": br, "block_k": bc, "loop_order": Q_OUTER}
        fns = {name: (lambda mod=mod: flash_attention_forward(q, k, v, **tiled, mask_mod=mod))
               for name, mod in mods.items()}
        fns[NO_MASK] = lambda: flash_attention_forward(q, k, v, **tiled, mask_mod=noop_mask)  # same path, no mask
        steps = len(fns) + SWEEP_REPEATS
        for i, (name, fn) in enumerate(fns.items()):
            if _progress is not None:
                _progress(i, steps, f"warm-up: {MASK_PRESETS.get(name, 'no mask')}")
            fn()
        samples: dict[str, list[float]] = {name: [] for name in fns}
        for r in range(SWEEP_REPEATS):
            if _progress is not None:
                _progress(len(fns) + r, steps, f"timing: repeat {r + 1} of {SWEEP_REPEATS}")
            for name, t in time_calls(fns, warmup=0, repeats=1).items():
                samples[name].append(t.median)
    rows = []
    for name, ts in samples.items():
        c = counts.get(name, {"full": tiles, "partial": 0})
        done = c["full"] + c["partial"]
        rows.append({"preset": name, "label": MASK_PRESETS.get(name, "no mask"), "computed": done / tiles,
                     "tiles_computed": done, "tiles": tiles, "time_s": median_iqr(ts)[0], "iqr_s": median_iqr(ts)[1],
                     "repeats": len(ts)})
    return rows


def sweep_md(rows: list[dict[str, object]]) -> str:
    """The sweep in one sentence, every number from the rows: the preset that computed the fewest tiles (the first
    in preset order on a tie) against the unmasked kernel."""
    *presets, unmasked = rows
    best = min(presets, key=lambda r: int(r["tiles_computed"]))
    t, t0 = float(best["time_s"]), float(unmasked["time_s"])
    return (f"**{best['label']}** computed the fewest tiles, {best['tiles_computed']} of {best['tiles']} "
            f"({float(best['computed']):.1%}), and took **{t * 1e3:.3g} ms**, {t / t0:.1%} of the unmasked kernel's "
            f"{t0 * 1e3:.3g} ms: time proportional to tiles computed would be {float(best['computed']):.1%}.")


def _sweep_ui(s: Settings, spec: MaskSpec) -> None:
    st.subheader("Time against sparsity, every preset")
    st.markdown(f"Times the tiled kernel with each of the {len(MASK_PRESETS)} presets alone (at this tab's window, "
                f"prefix, documents, sinks, chunk and dilation; no score mod) and with no mask, interleaved call by "
                f"call, {SWEEP_REPEATS} repeats after one untimed call each, at the sidebar's N, d, H, Br, Bc and "
                f"dtype on the CPU ({s.threads} thread(s)).")
    problem = sweep_problem(s)
    if problem:
        st.warning(f"This sweep is refused: {problem}", icon="🛑")
        return
    args = (spec, s.n, s.d, s.heads, s.br, s.bc, s.dtype, s.threads)
    calls = (len(MASK_PRESETS) + 1) * (SWEEP_REPEATS + 1)
    rows = run_button_ui("mask_sweep", sparsity_runs, args, label="Time every preset", title="Preset timing",
                         help="Times every preset and the unmasked kernel on these settings (cached per setting).",
                         idle=f"Press **Time every preset** to time the {len(MASK_PRESETS)} presets and the unmasked "
                              f"kernel ({calls} calls).")
    if rows is None:
        return
    show_figure(sparsity_time_figure(rows[:-1], unmasked_s=float(rows[-1]["time_s"])), key="mask_sweep")
    st.markdown(sweep_md(rows))
    with st.expander("All preset timings"):
        st.dataframe(rows, hide_index=True)


# ----------------------------------------------------------------------------------------------------------------------
# the How it works tab, with this tab's mask


@st.cache_data(show_spinner=False, max_entries=16)
def cached_mask_map(spec: MaskSpec, n: int, br: int, bc: int, loop_orders: tuple[str, ...],
                    heads: int) -> tuple[str, int, int]:
    """The animated tile map of the mask (one panel per loop order, flashviz.figures.tilemap's HTML), its computed
    tiles and all tiles."""
    mask_mod = build_mask(spec, n, heads).mask_mod
    traces = [schedule_trace(n, br, bc, loop_order=order, mask_mod=mask_mod) for order in loop_orders]
    computed = len(traces[0].computed_steps())
    html = tile_map_html(traces, title="Tile map of S = QKᵀ: the Masks tab's mask",
                         subtitle=(f"N = {n} · Br = {br}, Bc = {bc} · {traces[0].steps} tiles, {computed} computed · "
                                   "mask from the Masks tab"))
    return html, computed, traces[0].steps


def how_it_works_mask_ui(s: Settings) -> None:
    """The How it works tile map for the Masks tab's mask, and what the tab cannot show for it."""
    spec = mask_spec(s)
    try:
        with one_thread_if_idle():
            html, computed, tiles = cached_mask_map(spec, s.n, s.br, s.bc, s.loop_orders, s.heads)
    except (ValueError, TypeError) as e:
        st.error(f"The Masks tab's mask cannot be drawn here: {e}")
        return
    show_map(html)
    st.markdown(f"**Mask from the Masks tab**: `{build_mask(spec, s.n, s.heads).code.splitlines()[0]}`: "
                f"{computed} of {tiles} tiles computed. The sidebar's causal mask and window do not apply while it "
                "is on. The HBM counters and the row inspector model the causal mask and window only, so they are "
                "left out; switch off *Mask from the Masks tab* in the sidebar to see them.")
