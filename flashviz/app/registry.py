"""The dashboard's views, each declared once: its link slug (`?view=<slug>`), the function that draws it, and its
settings class (flashviz/views/<slug>/settings.py: its label, the shared settings it reads, those it borrows from
other views, its own).

A new view is its folder (flashviz/views/<slug>/: settings.py and page.py) plus one `View` line here. The page
(app.py) draws the views in this order and runs only the open one, importing its page module then (torch takes 2 to
3 s to import, pandas most of a second); the sidebar shows the shared settings the open view reads; the URL parser,
the widgets' session state and `Settings` (flashviz.app.state) compose every view's settings from here. Pure:
imports neither streamlit nor torch, so the URL parser can read it in milliseconds.

Legend: N sequence length, d head dimension, Br = block_q, Bc = block_k, B batch, H heads, H_q / H_kv query / K/V
heads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass
from typing import Any

from flashviz.kit.settings import SHARED, spec_of
from flashviz.views.backward.settings import BackwardSettings
from flashviz.views.bench.settings import BenchSettings
from flashviz.views.block.settings import BlockSettings
from flashviz.views.correct.settings import CorrectSettings
from flashviz.views.decode.settings import DecodeSettings
from flashviz.views.how.settings import HowSettings
from flashviz.views.io.settings import IOSettings
from flashviz.views.masks.settings import MasksSettings
from flashviz.views.numerics.settings import NumericsSettings
from flashviz.views.pipeline.settings import PipelineSettings
from flashviz.views.ring.settings import RingSettings
from flashviz.views.roof.settings import RoofSettings
from flashviz.views.train.settings import TrainSettings
from flashviz.views.triton.settings import TritonSettings

BORROWED_LISTED = 5  # a view that reads more of another view's settings than this says "its settings"


@dataclass(frozen=True, eq=False)
class View:
    """One view of the dashboard."""

    slug: str  # its link: ?view=<slug>
    draws: str  # the function of flashviz/views/<slug>/page.py that draws it, function(its settings) -> None
    settings: type  # its settings class (flashviz.kit.settings.view_settings)

    @property
    def label(self) -> str:
        """The view's name on the page."""
        return self.settings.LABEL

    @property
    def sidebar(self) -> tuple[str, ...]:
        """The shared settings it reads, drawn in the sidebar while it is open."""
        return self.settings.READS

    @property
    def own(self) -> Mapping[str, Field]:
        """Its own settings, drawn in the view: name -> field."""
        return self.settings.OWN

    @property
    def borrows(self) -> tuple[str, ...]:
        """Other views' own settings it reads (it may draw their widgets in its own view)."""
        return tuple(self.settings.BORROWS)

    def function(self) -> Callable[[Any], None]:
        """The function that draws the view, its module imported now."""
        return getattr(importlib.import_module(f"flashviz.views.{self.slug}.page"), self.draws)


VIEWS: tuple[View, ...] = (  # in the order the page offers them
    View("how", "how_it_works_ui", HowSettings),
    View("bench", "benchmark_ui", BenchSettings),
    View("block", "block_size_ui", BlockSettings),
    View("io", "io_model_ui", IOSettings),
    View("correct", "correctness_ui", CorrectSettings),
    View("train", "training_ui", TrainSettings),
    View("backward", "backward_ui", BackwardSettings),
    View("roof", "roofline_ui", RoofSettings),
    View("decode", "decoding_ui", DecodeSettings),
    View("masks", "masks_ui", MasksSettings),
    View("numerics", "numerics_ui", NumericsSettings),
    View("ring", "ring_ui", RingSettings),
    View("pipeline", "pipeline_ui", PipelineSettings),
    View("triton", "triton_ui", TritonSettings),
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


def short_name(name: str) -> str:
    """A setting's name in a line of text: its Spec's short name, else its label."""
    spec = spec_of(name)
    return spec.short or spec.label


def uses_text(view: View) -> str:
    """One line: the shared settings the view reads (drawn in the sidebar), and other views' settings it reads.

    Example:
        >>> uses_text(view_of("decode"))
        'Uses from the sidebar: d, dtype, device, threads; from the Benchmark view: repeats.'
    """
    shared = ", ".join(short_name(name) for name in SHARED if name in view.sidebar)
    text = f"Uses from the sidebar: {shared}" if shared else "Uses no setting of the sidebar"
    owners: dict[str, list[str]] = {}
    for name, owner in view.settings.BORROWS.items():
        owners.setdefault(owner.LABEL, []).append(short_name(name))
    for label, names in owners.items():
        text += (f"; from the {label} view: {', '.join(names)}" if len(names) <= BORROWED_LISTED
                 else f"; from the {label} view: its settings")
    return text + "."
