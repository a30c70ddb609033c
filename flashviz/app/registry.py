"""The dashboard's views, each declared once: its link slug (`?view=<slug>`), its label, the function that draws it, the
sidebar's shared settings it reads, the settings of other views it reads, and its own settings.

A new view is its folder (flashviz/views/<slug>/) plus one `View` line here. The page (app.py) draws the views in this
order and runs only the open one, importing its module then (torch takes 2 to 3 s to import, pandas most of a second);
the sidebar shows the shared settings the open view reads; the URL parser, the widgets and `Settings`
(flashviz.app.state) take every view's own settings from here. Pure: imports neither streamlit nor torch, so the URL
parser can read it in milliseconds.

Legend: N sequence length, d head dimension, Br = block_q, Bc = block_k, B batch, H heads, H_q / H_kv query / K/V
heads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field
from typing import Any

from flashviz.views.backward import settings as backward
from flashviz.views.bench import settings as bench
from flashviz.views.block import settings as block
from flashviz.views.correct import settings as correct
from flashviz.views.decode import settings as decode
from flashviz.views.how import settings as how
from flashviz.views.masks import settings as masks
from flashviz.views.numerics import settings as numerics
from flashviz.views.pipeline import settings as pipeline
from flashviz.views.ring import settings as ring
from flashviz.views.roof import settings as roof
from flashviz.views.triton import settings as triton


@dataclass(frozen=True, eq=False)
class View:
    """One view of the dashboard."""

    slug: str  # its link: ?view=<slug>
    label: str  # the view's label
    draws: str  # the function of flashviz/views/<slug>/page.py that draws it, function(settings) -> None
    sidebar: tuple[str, ...]  # the shared settings (flashviz.app.state, drawn in the sidebar) it reads
    own: Mapping[str, Field] = field(default_factory=dict)  # its own settings: name -> setting(default, Spec(VIEW))
    borrows: tuple[str, ...] = ()  # other views' own settings it reads (it may draw their widgets in its own view)

    def function(self) -> Callable[[Any], None]:
        """The function that draws the view, its module imported now."""
        return getattr(importlib.import_module(f"flashviz.views.{self.slug}.page"), self.draws)


VIEWS: tuple[View, ...] = (  # in the order the page offers them; own settings: each view's settings.py
    View("how", "How it works", "how_it_works_ui", sidebar=("n", "d", "br", "bc", "causal", "window", "dtype"),
         own=how.OWN, borrows=masks.SETTING_NAMES),  # with usemask on: the map of the Masks view's mask
    View("bench", "Benchmark", "benchmark_ui",
         sidebar=("d", "causal", "window", "dtype", "batch", "heads", "device", "threads"), own=bench.OWN),
    View("block", "Block size", "block_size_ui",
         sidebar=("n", "d", "causal", "window", "dtype", "batch", "heads", "device", "threads"), own=block.OWN,
         borrows=("reps", "sure")),
    View("io", "IO model", "io_model_ui", sidebar=("n", "d", "causal", "window", "dtype", "batch", "heads")),
    View("correct", "Correctness", "correctness_ui",
         sidebar=("br", "bc", "causal", "window", "dtype", "device", "threads"), own=correct.OWN),
    View("train", "Training", "training_ui",
         sidebar=("d", "causal", "window", "dtype", "batch", "heads", "device", "threads"),
         borrows=("ns", "impls", "bench_block", "reps", "sure")),
    View("backward", "Backward", "backward_ui",
         sidebar=("n", "d", "br", "bc", "window", "dtype", "batch", "heads", "device", "threads"), own=backward.OWN,
         borrows=("reps",)),
    View("roof", "Roofline", "roofline_ui",
         sidebar=("n", "d", "br", "bc", "causal", "window", "dtype", "batch", "heads", "threads"), own=roof.OWN,
         borrows=("bench_block",)),  # the Benchmark's tile size: its speedups are told apart from this view's
    View("decode", "Decoding", "decoding_ui", sidebar=("d", "dtype", "device", "threads"), own=decode.OWN,
         borrows=("reps",)),
    View("masks", "Masks", "masks_ui", sidebar=("n", "d", "br", "bc", "dtype", "heads", "threads"), own=masks.OWN),
    View("numerics", "Numerics", "numerics_ui", sidebar=(), own=numerics.OWN),
    View("ring", "Ring", "ring_ui", sidebar=(), own=ring.OWN),
    View("pipeline", "GPU pipeline", "pipeline_ui", sidebar=(), own=pipeline.OWN),
    View("triton", "Triton kernel", "triton_ui", sidebar=(), own=triton.OWN),
)
SLUGS = tuple(v.slug for v in VIEWS)
LABELS = {v.slug: v.label for v in VIEWS}  # slug -> the view's label


def view_of(slug: str) -> View:
    """The View of a slug (one of SLUGS)."""
    (found,) = [v for v in VIEWS if v.slug == slug]
    return found


def owner_of(name: str) -> View:
    """The View that declares an own setting (its widget is drawn in that view)."""
    (found,) = [v for v in VIEWS if name in v.own]
    return found
