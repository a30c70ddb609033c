"""The in-app lesson as data: a `Lesson` is a sequence of `Step`s, and each step is a view of the dashboard, its
settings (a link), one claim in plain words and the check that proves it.

The dashboard plays a lesson in presenter mode (`?lesson=intro&step=k`, flashviz.app.presenter): each step's settings
are loaded into the widgets, its view opens and its claim stands above it. A step's settings are URL keys and values,
exactly as a link carries them, read by the dashboard's own URL parser (flashviz.app.query.parse_query), so every step
is also a plain link (`?view=io&n=4096&heads=1`). Its claim is a template whose fields are the numbers it states
(`stated`); its check (the claim function of the view it opens, flashviz.views.<view>.claims, imported only when a check
runs: it needs torch) computes those numbers at the step's settings from the same functions the view draws with, and the
claim is confirmed when the check says it holds and renders the same text from its own numbers. docs/lesson.md's lesson
is written from this data (`python -m flashviz.lesson --write docs/lesson.md`).

Torch-free and streamlit-free: the presenter reads it before anything heavy loads. It reads the dashboard's pure
declarations (flashviz.app.registry's views, flashviz.app.state's settings, flashviz.app.query's parser) and is read by
the presenter (flashviz.app.presenter) and by tests/test_lesson.py.

Legend: N sequence length, d head dimension, Br = block_q, Bc = block_k, B batch, H heads, M on-chip memory (elements),
H_q / H_kv query / K/V heads, g = H_q / H_kv.
"""

from __future__ import annotations

import argparse
import importlib
import string
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from flashviz.app.query import parse_query
from flashviz.app.registry import LABELS, SLUGS, view_of
from flashviz.app.state import Env, Settings, settings_of
from flashviz.views.claim import Result
from flashviz.vocab import DQ_ATOMIC

LESSON_KEY, STEP_KEY = "lesson", "step"  # the link's keys of presenter mode: ?lesson=<slug>&step=<k>, k from 1


@dataclass(frozen=True)
class Step:
    """One step of a lesson: a view at some settings, the one thing the class sees there, and its proof.

    Example:
        >>> step = INTRO.step("causal_halves")
        >>> step.link, step.text.startswith("With the causal mask only 136 of the 256 tiles")
        ('?view=how&causal=1', True)
        >>> step.confirmed(Result({**step.stated, "computed": 137}, True))  # true, but not what the class reads
        False
    """

    title: str  # a few words, shown with the step's number
    view: str  # the registry slug of the view the step opens (?view=<slug>)
    settings: Mapping[str, str]  # URL key -> value, as a link carries them (the view's slug apart); the rest default
    claim: str  # the claim in plain words, a str.format template whose fields are the numbers it states
    stated: Mapping[str, Any]  # the numbers the claim states: claim.format(**stated) is what the class reads
    check: str  # the claim function in the view's claims module (flashviz.views.<view>.claims), settings -> Result
    action: str  # what the presenter does on the page at this step
    minutes: float  # time the step takes in class
    numbers: tuple[tuple[str, str], ...] = ()  # the slide's figures: (label, value), templates over the check's values
    claims: str = ""  # the module of its check where it is not the view's claims (flashviz.views.<view>.claims)

    def __post_init__(self) -> None:
        if self.view not in SLUGS:
            raise ValueError(f"Step {self.title!r}: view must be one of {', '.join(SLUGS)}, got {self.view!r}.")
        if "view" in self.settings:
            raise ValueError(f"Step {self.title!r}: give the view as `view`, not among the settings.")
        missing = {f for _, f, _, _ in string.Formatter().parse(self.claim) if f} - set(self.stated)
        if missing:
            raise ValueError(f"Step {self.title!r}: the claim names {sorted(missing)} but `stated` lacks them.")
        named = {f for label, value in self.numbers for text in (label, value)
                 for _, f, _, _ in string.Formatter().parse(text) if f}
        if named - set(self.stated):
            raise ValueError(f"Step {self.title!r}: its numbers name {sorted(named - set(self.stated))} but the claim "
                             "does not state them: a slide shows the numbers its claim states.")
        object.__setattr__(self, "numbers", tuple(tuple(pair) for pair in self.numbers))
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        object.__setattr__(self, "stated", MappingProxyType(dict(self.stated)))

    @property
    def text(self) -> str:
        """The claim as the class reads it."""
        return self.claim.format(**self.stated)

    @property
    def query(self) -> dict[str, str]:
        """The step's link as query parameters: the view, then its settings."""
        return {"view": self.view, **self.settings}

    @property
    def link(self) -> str:
        """The step's plain link, relative to the dashboard's address, e.g. '?view=io&n=4096&heads=1'."""
        return "?" + "&".join(f"{k}={v}" for k, v in self.query.items())

    def said_by(self, result: Result) -> str:
        """The claim written with a check's numbers."""
        return self.claim.format(**result.values)

    def figures(self, values: Mapping[str, Any]) -> list[tuple[str, str]]:
        """The slide's numbers, (label, value), written with a check's values.

        Example:
            >>> INTRO.step("causal_halves").figures(INTRO.step("causal_halves").stated)[2:]
            [('FA1 HBM traffic, no mask', '13.0 MiB'), ('FA1 HBM traffic, causal', '7.3 MiB')]
        """
        return [(label.format(**values), value.format(**values)) for label, value in self.numbers]

    def confirmed(self, result: Result) -> bool:
        """Whether a check confirms the claim: it holds, and its numbers give the text the class reads."""
        return result.holds and self.said_by(result) == self.text

    def run_check(self, env: Env | None = None) -> Result:
        """Run the step's check at its settings (this imports the check's module, and with it torch)."""
        return self.check_at(step_settings(self, env))

    def check_at(self, settings: Settings) -> Result:
        """Run the step's check at other settings (the class changed some): its numbers there. The check reads the
        settings of the view the step opens (flashviz/views/<view>/settings.py)."""
        return getattr(importlib.import_module(self.claims_module), self.check)(self.settings_of(settings))

    def settings_of(self, settings: Settings) -> Any:
        """What the step's view reads of every setting: its own settings class."""
        return settings_of(view_of(self.view), settings)

    def view_settings(self, env: Env | None = None) -> Any:
        """The settings the step's view opens with (its own settings class): what its check reads."""
        return self.settings_of(step_settings(self, env))

    @property
    def claims_module(self) -> str:
        """The module of the step's check: the claims of the view the step opens, unless the step names another."""
        return self.claims or f"flashviz.views.{self.view}.claims"


def step_settings(step: Step, env: Env | None = None) -> Settings:
    """The settings a step opens with: its link read by the dashboard's URL parser, every other setting at its
    default (this machine's threads with `env`).

    Example:
        >>> s = step_settings(INTRO.step("tiles_fate"))
        >>> s.view, s.n, s.causal
        ('how', 16, True)
    """
    settings, _ = parse_query(step.query, env)
    return settings


@dataclass(frozen=True)
class Lesson:
    """A lesson: steps played in order."""

    slug: str  # its link: ?lesson=<slug>
    title: str  # shown above each step
    steps: tuple[Step, ...] = field(default_factory=tuple)  # in order; step k of the link is steps[k - 1]

    def step(self, check: str) -> Step:
        """The step whose check is `check`, wherever it stands in the lesson.

        Example:
            >>> INTRO.step("io_passes").link
            '?view=io&n=4096&heads=1'
        """
        for step in self.steps:
            if step.check == check:
                return step
        raise ValueError(f"Lesson {self.slug!r} has no step checked by {check!r}; its checks are "
                         f"{', '.join(s.check for s in self.steps)}.")

    def link(self, k: int) -> str:
        """Step k's presenter link, e.g. '?lesson=intro&step=3'."""
        return f"?{LESSON_KEY}={self.slug}&{STEP_KEY}={k}"

    def clock(self) -> list[tuple[str, str]]:
        """Each step's start and end in class, 'm:ss'.

        Example:
            >>> INTRO.clock()[:2]
            [('0:00', '1:00'), ('1:00', '2:30')]
        """
        out, t = [], 0.0
        for step in self.steps:
            out.append((_mmss(t), _mmss(t + step.minutes)))
            t += step.minutes
        return out


def _mmss(minutes: float) -> str:
    seconds = round(minutes * 60)
    return f"{seconds // 60}:{seconds % 60:02d}"


# In the claims, "×\u00a0" (a no-break space) keeps a factor on the same line as its ×. The problem comes first (what
# S and P are, and what keeping them costs), then the cure (tiles, the online softmax, fewer bytes), then its uses.
TINY = {"n": "16", "d": "8", "br": "4", "causal": "1", "order": "both", "row": "15"}  # the whiteboard's grid
INTRO = Lesson("intro", "FlashAttention, tile by tile", (
    Step("What S = QKᵀ and the softmax are", "how", {"n": "16", "d": "8", "br": "4", "order": "both"},
         "Attention scores every query against every key: S = QKᵀ/√d holds N × N = {scores} scores per head at "
         "N = {n}. The softmax turns each row of S into weights P = exp(S − m) / l, with m the row's max and l its "
         "sum of exponentials: every row of P sums to {rowsum:.3f}, and the output is O = PV. Standard attention "
         "writes S and P to memory whole, N² numbers each.",
         {"scores": 256, "n": 16, "rowsum": 1.0}, "scores_softmax",
         "Point at one row of S, then the same row of P: the largest score gets the largest weight.", 1.0,
         (("Scores per head, N × N", "{scores}"), ("Every row of P sums to", "{rowsum:.3f}")),
         claims="flashviz.lesson.claims"),
    Step("The problem: memory grows with N²", "bench", {},
         "Naive attention's peak memory grows {naive_growth:.1f}× per doubling of N, to {naive_peak} at N = {n:,}: "
         "S and P are N² each. FA1's grows {fa1_growth:.1f}× and FA2's {fa2_growth:.1f}× (only the output grows "
         "with N), so at N = {n:,} they need {saving:.0f}× less.",
         {"naive_growth": 3.9, "naive_peak": "130.0 MiB", "n": 2048, "fa1_growth": 1.4, "fa2_growth": 1.3,
          "saving": 36}, "memory_growth",
         "The slide measured the peaks as it opened; Explore this view to time the kernels too.", 1.5,
         (("Standard attention at N = {n:,}", "{naive_peak}"), ("Standard, per doubling of N", "{naive_growth:.1f}×"),
          ("FA1 / FA2, per doubling", "{fa1_growth:.1f}× / {fa2_growth:.1f}×"),
          ("Less memory at N = {n:,}", "{saving:.0f}×"))),
    Step("The cure: tiles, each one's fate known", "how", TINY,
         "FlashAttention cuts S into tiles and never writes S or P whole: {computed} of the {tiles} tiles are "
         "computed ({full} full, {partial} partial on the diagonal) and {skipped} are skipped: never loaded, never "
         "computed.",
         {"computed": 10, "tiles": 16, "full": 6, "partial": 4, "skipped": 6}, "tiles_fate",
         "Explore this view and press ▶ Play: FA1 walks down each column of tiles, FA2 along each row; each tile is "
         "computed on chip and thrown away.", 1.5,
         (("Tiles computed", "{computed} of {tiles}"), ("Full", "{full}"), ("Partial, on the diagonal", "{partial}"),
          ("Skipped", "{skipped}"))),
    Step("Online softmax: rescale, then exact", "how", TINY,
         "Row {row}'s running max m grows on {rescales} of its {tiles} tiles, and each time its sum l is first scaled "
         "by e^(m_old − m_new) < 1, then the tile's own terms are added. After the last tile the kernel's "
         "L = m + log l = {lse:.4f}: the exact logsumexp of the whole row.",
         {"row": 15, "rescales": 3, "tiles": 4, "lse": 2.96528}, "online_softmax",
         "Follow m and l across the tiles: each rise of m scales l down before the tile's terms join it.", 1.5,
         (("Row", "{row}"), ("Tiles where m grew", "{rescales} of {tiles}"), ("Kernel's L = m + log l", "{lse:.4f}"))),
    Step("Bigger tiles, fewer passes over HBM", "io", {"n": "4096", "heads": "1"},
         "Each doubling of the on-chip memory M halves FA1's and FA2's HBM accesses (×\u00a0{fa1_ratio:.2f} and "
         "×\u00a0{fa2_ratio:.2f} at the first doubling): bigger tiles, fewer passes. From M = 4dN = {flat:,} one block "
         "holds every key and they flatten (FA1 at {fa1:.2f} million, FA2 at {fa2:.2f} million); standard "
         "attention stays at {naive:.1f} million whatever M is.",
         {"fa1_ratio": 0.5, "fa2_ratio": 0.5, "flat": 1048576, "fa1": 1.6, "fa2": 1.05, "naive": 68.2},
         "io_passes",
         "Explore this view and switch on the causal mask: the flash curves start at half and meet the unmasked ones "
         "at 4dN.", 1.0,
         (("FA1 at the first doubling of M", "×{fa1_ratio:.2f}"), ("FA2 at the first doubling", "×{fa2_ratio:.2f}"),
          ("Flat from M = 4dN", "{flat:,}"), ("Standard attention, millions", "{naive:.1f}"))),
    Step("Why it is fast on a GPU", "roof", {"n": "4096", "br": "128"},
         "On an {gpu} at {dtype}, naive attention does {intensity:.1f} FLOPs per byte it moves, far below the "
         "ridge point of {ridge:.0f} FLOP/byte: it is HBM-bound. The tiled kernels send fewer bytes to HBM and "
         "re-read the rest from L2, so the roofline model predicts FA2 {fa2:.2f}× and FA1 {fa1:.2f}× faster than "
         "naive, both bound by {fa2_bound}.",
         {"gpu": "H100", "dtype": "float16", "intensity": 31.5, "ridge": 295, "fa2": 8.45, "fa1": 5.52,
          "fa2_bound": "L2"},
         "roofline_gpu",
         "Explore this view and press *Time naive, FA1 and FA2 here* to put this CPU's measured speedup next to the "
         "model's.", 1.0,
         (("Naive's FLOPs per byte", "{intensity:.1f}"), ("{gpu}'s ridge, {dtype}", "{ridge:.0f}"),
          ("Predicted: FA2", "{fa2:.2f}×"), ("Predicted: FA1", "{fa1:.2f}×"))),
    Step("On a GPU the exponential is the bottleneck", "pipeline", {},
         "Inside the chip the limit is the exponential. Per 128 × 128 tile at d = {d} in bf16, an H100's tensor cores "
         "need {h100_mma:,.0f} cycles and its exponential unit {h100_exp:,.0f} ({h100_share:.0%}); a B200 doubled the "
         "tensor cores but not the exponential unit: {b200_mma:,.0f} against {b200_exp:,.0f} ({b200_share:.0%}). So "
         "FA4 computes {poly:.0%} of the exponentials by a cubic polynomial on the FP32 units; its error, "
         "{poly_err:.1e}, hides under bf16's own rounding, {bf16:.1e}.",
         {"d": 128, "h100_mma": 2048, "h100_exp": 1024, "h100_share": 0.5, "b200_mma": 1024, "b200_exp": 1024,
          "b200_share": 1.0, "poly": 0.32, "poly_err": 8.6e-5, "bf16": 3.9e-3},
         "exp_bottleneck",
         "Explore this view and press ▶ Play: in the same cycles FA3 and FA4 finish more tiles than FA2, because the "
         "exponential of one tile runs under the matmul of another.", 0.5,
         (("H100: exp / MMA per tile", "{h100_share:.0%}"), ("B200: exp / MMA per tile", "{b200_share:.0%}"),
          ("The cubic's error", "{poly_err:.1e}"), ("bf16's own rounding", "{bf16:.1e}"))),
    Step("Causal halves the work", "how", {"causal": "1"},
         "With the causal mask only {computed} of the {tiles} tiles are computed ({share:.0%}): the {skipped} above "
         "the diagonal are skipped, never loaded. {order}'s HBM traffic per head falls from {unmasked} without the "
         "mask to {traffic} (×\u00a0{ratio:.2f}).",
         {"computed": 136, "tiles": 256, "share": 0.53125, "skipped": 120, "order": "FA1", "unmasked": "13.0 MiB",
          "traffic": "7.3 MiB", "ratio": 0.5586}, "causal_halves",
         "Explore this view, open the sidebar (» at the top left) and switch the causal mask off and on.", 1.0,
         (("Tiles computed", "{computed} of {tiles}"), ("Skipped", "{skipped}"),
          ("{order} HBM traffic, no mask", "{unmasked}"), ("{order} HBM traffic, causal", "{traffic}"))),
    Step("Programmable masks skip whole tiles", "masks", {},
         "{docs} packed documents AND causal at N = {n:,}: a query sees only earlier keys of its own document, so "
         "only {computed} of the {tiles} tiles are computed ({share:.1%}). The BlockMask of these tiles equals "
         "torch's create_block_mask: {equal}.",
         {"docs": 4, "n": 1024, "computed": 55, "tiles": 256, "share": 0.21484, "equal": "yes"},
         "masks_tiles",
         "Explore this view and change *Documents* or the second mask; the code under the BlockMask builds the same "
         "mask.", 1.0,
         (("Tiles computed", "{computed} of {tiles}"), ("Share", "{share:.1%}"), ("Documents", "{docs}"),
          ("Equal to create_block_mask", "{equal}"))),
    Step("Training: recompute P instead of keeping it", "train", {},
         "For the backward pass naive attention keeps P, {batch} × {heads} × {n}² {dtype} values: {p} at N = "
         "{n:,}. FlashAttention keeps only O and the logsumexp L ({lse}) and recomputes P tile by tile: five "
         "matmuls instead of four, {extra:.0%} more backward FLOPs ({gflop:.2f} GFLOP).",
         {"batch": 1, "heads": 4, "n": 2048, "dtype": "float32", "p": "64.0 MiB", "lse": "32.0 KiB", "extra": 0.25,
          "gflop": 2.15}, "training_recompute",
         "Explore this view: ▶ Run training benchmark measures forward + backward.", 1.0,
         (("Naive keeps P", "{p}"), ("FlashAttention keeps L", "{lse}"), ("More backward FLOPs", "{extra:.0%}"),
          ("Added", "{gflop:.2f} GFLOP"))),
    Step("The backward pass, tile by tile", "backward",
         {"bwn": "32", "bwd": "16", "bwblock": "8", "bwcausal": "1", "dq": DQ_ATOMIC, "n": "4096", "br": "128"},
         "The forward saved only O and the logsumexp L: the backward recomputes P = exp(S − L) tile by tile, and every "
         "recomputed row still sums to 1. At a GPU's sizes (N = {n:,}, d = {d}, {block}-wide tiles, causal) it moves "
         "{saving:.1f}× less HBM traffic than standard attention's backward, which writes P and dS (N² each). On a "
         "GPU every K/V column adds into dQ_i with atomics, whose order varies, and summed in another order dQ changes "
         "in its last bits; a deterministic second pass costs {extra:.0%} more FLOPs.",
         {"n": 4096, "d": 64, "block": 128, "saving": 6.2, "extra": 0.4},
         "backward_recompute",
         "Explore this view and press ▶ Play: K_j, V_j, dK_j and dV_j stay on chip for a column; switch *dQ* to see "
         "the second pass.", 1.0,
         (("Less HBM traffic than standard", "{saving:.1f}×"), ("Deterministic dQ: more FLOPs", "{extra:.0%}"))),
    Step("Flash-Decoding's exact merge", "decode", {},
         "{keys:,} cached keys in {splits} splits, computed in parallel, each with its own logsumexp L_s. The merge "
         "weighs split s by exp(L_s − L), with L = log Σ exp(L_s) = {lse:.4g}: the weights sum to {weights:.3f} and "
         "the output is exact attention over the whole cache.",
         {"keys": 16384, "splits": 4, "lse": 10.5006, "weights": 1.0}, "decode_merge",
         "Explore this view and press ▶ Play on the animation: the splits read their blocks in parallel, the last "
         "frame merges them.", 0.5,
         (("Cached keys", "{keys:,}"), ("Splits", "{splits}"), ("L = log Σ exp(L_s)", "{lse:.4g}"),
          ("The weights sum to", "{weights:.3f}"))),
    Step("Context parallelism: one sequence, W devices", "ring", {"rgw": "4"},
         "At N = {n:,} tokens, Llama 3 8B's shape keeps {kv} of K/V; standard attention's S and P would take "
         "{scores} a layer, and even FlashAttention computes {flops} a layer on one device. Context parallelism gives "
         "each of W = {world} ranks (a process per device) a shard of N / W = {shard:,} positions: {kv_rank} of K/V "
         "and {flops_rank} a layer.",
         {"n": 131072, "kv": "16.0 GiB", "scores": "2048.0 GiB", "flops": "281 TFLOP", "world": 4, "shard": 32768,
          "kv_rank": "4.0 GiB", "flops_rank": "70.4 TFLOP"}, "context_parallel",
         "Explore this view: the map deals a classroom's N = 256 to the 4 ranks; switch *Layout* to zigzag under "
         "causal, then ▶ Run the ring in real processes.", 0.5,
         (("K/V, one device", "{kv}"), ("K/V per rank, W = {world}", "{kv_rank}"), ("S and P, one layer", "{scores}"),
          ("Attention per rank, a layer", "{flops_rank}"))),
    Step("Grouped-query attention reads g-fold fewer bytes", "decode", {},
         "Each decode step reads the whole K/V cache. With {hq} query heads sharing {hkv} K/V heads (GQA, g = {g}), "
         "a step reads {gqa} of K/V against multi-head attention's {mha}: {ratio:g}× fewer bytes for the same "
         "{flops:,} FLOPs. On an {gpu}, where the step is bound by HBM, the roofline model predicts it "
         "{predicted:.2f}× faster; *Run decode timing* measures whether time follows bytes on this machine.",
         {"hq": 8, "hkv": 2, "g": 4, "gqa": "21.3 MiB", "mha": "85.3 MiB", "ratio": 4.0, "flops": 44738560,
          "gpu": "H100", "predicted": 4.00},
         "gqa_bytes",
         "Explore this view, scroll to *Why decoding is memory-bound* and set *K/V heads H_kv* to 8 (MHA) or 1 (MQA).",
         0.5,
         (("MHA reads", "{mha}"), ("GQA reads, g = {g}", "{gqa}"), ("Fewer bytes", "{ratio:g}×"),
          ("FLOPs, both", "{flops:,}"))),
    Step("Why outputs differ from SDPA", "numerics", {},
         "In bf16 FA2 and SDPA differ by {gap:.0f} rounding step and both pass flash-attn's test rule: neither is "
         "wrong, they add in different orders. FlashAttention-4's lazy rescale (tau = {tau:.0f}) rescales {lazy} "
         "times where the classic rule rescales {classic}, for the same output, and on inputs with outlier features "
         "FlashAttention-3's Hadamard rotation cuts FP8's error {gain:.1f}×.",
         {"gap": 1.0, "tau": 8.0, "lazy": 3, "classic": 98, "gain": 2.0}, "numerics_rounding",
         "Explore this view: switch *Input dtype* to fp32 or FP8 e4m3, or turn Hadamard off, and read the sentences "
         "again.", 1.0,
         (("Rounding steps, FA2 vs SDPA", "{gap:.0f}"), ("Rescales: classic / lazy", "{classic} / {lazy}"),
          ("Hadamard cuts FP8's error", "{gain:.1f}×"), ("Lazy rescale's tau", "{tau:.0f}"))),
    Step("The same schedule as a Triton kernel", "triton", {},
         "Written as a Triton kernel in the shape of Triton's tutorial 06 and run by Triton's interpreter, FA2's "
         "causal schedule at N = {n} launches {programs} programs that load {blocks} K blocks: {tiles} tiles, the "
         "tiles tile_schedule computes, and {read} read, the bytes io_cost's FA2 model counts.",
         {"n": 256, "programs": 4, "blocks": "2, 4, 6 and 8", "tiles": 20, "read": "384.0 KiB"}, "triton_schedule",
         "Explore this view and press ▶ Play: the marked line of the kernel and the K block it loads move together; "
         "raise num_stages until the shared-memory bar passes a GPU's limit.", 0.5,
         (("Programs", "{programs}"), ("K blocks per program", "{blocks}"), ("Tiles", "{tiles}"),
          ("Read", "{read}"))),
))
LESSONS: dict[str, Lesson] = {INTRO.slug: INTRO}


# ----------------------------------------------------------------------------------------------------------------------
# docs/lesson.md's lesson, written from the data


BEGIN, END = "<!-- lesson {slug}: begin -->", "<!-- lesson {slug}: end -->"  # the generated part of docs/lesson.md


def step_markdown(lesson: Lesson, k: int) -> str:
    """Step k of a lesson in markdown: its time, title, view and both links, the claim, what to do, its check.

    Example:
        >>> print(step_markdown(INTRO, 5).splitlines()[2])
        **IO model**: `?view=io&n=4096&heads=1`, in the lesson `?lesson=intro&step=5`
    """
    step, (start, end) = lesson.steps[k - 1], lesson.clock()[k - 1]
    return (f"### {k}. {step.title} ({start}–{end})\n\n"
            f"**{LABELS[step.view]}**: `{step.link}`, in the lesson `{lesson.link(k)}`\n\n"
            f"> {step.text}\n\n"
            f"{step.action} *Checked by* `{step.claims_module}.{step.check}`.\n")


def lesson_markdown(lesson: Lesson) -> str:
    """The whole lesson in markdown, between the markers docs/lesson.md keeps it in.

    Example:
        >>> text = lesson_markdown(INTRO)
        >>> text.splitlines()[0], text.count("\\n### ") == len(INTRO.steps)  # one heading per step
        ('<!-- lesson intro: begin -->', True)
    """
    total = _mmss(sum(step.minutes for step in lesson.steps))
    head = (f"{BEGIN.format(slug=lesson.slug)}\n"
            f"*Written by `python -m flashviz.lesson --write docs/lesson.md` from flashviz/lesson/steps.py: "
            f"{len(lesson.steps)} steps, {total}. Open `?{LESSON_KEY}={lesson.slug}` to play it in the dashboard.*\n\n")
    steps = "\n".join(step_markdown(lesson, k) for k in range(1, len(lesson.steps) + 1))
    return f"{head}{steps}{END.format(slug=lesson.slug)}"


def with_lesson(doc: str, lesson: Lesson) -> str:
    """A document with its lesson section (between the markers) rewritten from the data.

    Example:
        >>> doc = "# Notes\\n<!-- lesson intro: begin -->\\nold\\n<!-- lesson intro: end -->\\nafter\\n"
        >>> new = with_lesson(doc, INTRO)
        >>> new.startswith("# Notes\\n<!-- lesson intro: begin -->") and new.endswith("end -->\\nafter\\n")
        True
    """
    begin, end = BEGIN.format(slug=lesson.slug), END.format(slug=lesson.slug)
    if begin not in doc or end not in doc:
        raise ValueError(f"The document has no lesson section: add the lines {begin!r} and {end!r} where it goes.")
    head, rest = doc.split(begin, 1)
    return head + lesson_markdown(lesson) + rest.split(end, 1)[1]


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m flashviz.lesson --markdown` prints a lesson; `--write PATH` rewrites its section of PATH; `--check`
    runs every step's check and says whether each claim is confirmed, with the numbers it found (exit 1 if one is
    not)."""
    parser = argparse.ArgumentParser(prog="python -m flashviz.lesson", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lesson", default=INTRO.slug, choices=sorted(LESSONS))
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--markdown", action="store_true", help="print the lesson in markdown")
    group.add_argument("--write", type=Path, metavar="PATH", help="rewrite the lesson's section of PATH")
    group.add_argument("--check", action="store_true", help="run every step's check")
    args = parser.parse_args(argv)
    lesson = LESSONS[args.lesson]
    if args.markdown:
        print(lesson_markdown(lesson))
    elif args.write:
        args.write.write_text(with_lesson(args.write.read_text(), lesson))
    else:
        failed = 0
        for k, step in enumerate(lesson.steps, 1):
            result = step.run_check()
            ok = step.confirmed(result)
            failed += not ok
            numbers = {key: x for key, x in result.values.items() if isinstance(x, (bool, int, float, str))}
            print(f"{k}. {step.title}: {'confirmed' if ok else 'NOT CONFIRMED'} {numbers}"  # not the slides' data
                  + ("" if ok else f"\n   {result.why or step.said_by(result)}"))
        return 1 if failed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
