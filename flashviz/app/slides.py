"""A lesson step as a slide: its claim, the numbers it states and the one picture that proves them, together in a
1280 x 720 window (flashviz.app.presenter draws the slide; "Explore this view" opens the step's full view).

Every slide runs its step's check (flashviz.lesson.steps.Step.run_check: the claim function of the step's view, which
computes the numbers through the same layers the view draws with) at the settings on screen, shows the numbers it
returned as metrics, and draws its picture from what the same check returned: the model's counts, the tile schedule,
the traces of the real kernels, the peaks it measured. Nothing on a slide is typed in: a slide whose check finds other
numbers than the claim states says so.

Each picture is a small plotly figure drawn by the figures of the view its step opens (the `*_picture` functions of
flashviz/views/<view>/figures.py, sized and finished by flashviz.figures.slide); this module only says which picture
each step shows. Importing it loads plotly, pandas and the views' figures (no torch): the presenter imports it when it
draws a slide.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from flashviz.views.backward.figures import backward_picture
from flashviz.views.bench.figures import memory_picture
from flashviz.views.decode.figures import decode_picture, gqa_picture
from flashviz.views.how.figures import row_picture, scores_picture, tiles_picture
from flashviz.views.io.figures import io_picture
from flashviz.views.masks.figures import masks_picture
from flashviz.views.numerics.figures import numerics_picture
from flashviz.views.pipeline.figures import pipeline_picture
from flashviz.views.ring.figures import context_picture
from flashviz.views.roof.figures import roof_picture
from flashviz.views.train.figures import train_picture
from flashviz.views.triton.figures import triton_picture

if TYPE_CHECKING:
    import plotly.graph_objects as go


Picture = Callable[[Any, Mapping[str, Any]], "go.Figure"]  # a view's settings and the check's values -> the picture
PICTURES: dict[str, Picture] = {  # a step's check -> the one picture that proves its numbers
    "scores_softmax": scores_picture,
    "memory_growth": memory_picture,
    "tiles_fate": tiles_picture,
    "online_softmax": row_picture,
    "io_passes": io_picture,
    "roofline_gpu": roof_picture,
    "exp_bottleneck": pipeline_picture,
    "causal_halves": tiles_picture,
    "masks_tiles": masks_picture,
    "training_recompute": train_picture,
    "backward_recompute": backward_picture,
    "decode_merge": decode_picture,
    "context_parallel": context_picture,
    "gqa_bytes": gqa_picture,
    "numerics_rounding": numerics_picture,
    "triton_schedule": triton_picture,
}


def picture(check: str, s: Any, values: Mapping[str, Any]) -> go.Figure:
    """The picture of the step checked by `check`, at s (the settings of the step's view), with its check's values.

    Example:
        >>> from flashviz.lesson.steps import INTRO, step_settings
        >>> step = INTRO.step("causal_halves")
        >>> s = step_settings(step)
        >>> fig = picture(step.check, step.settings_of(s), step.check_at(s).values)
        >>> fig.layout.height, [t.name for t in fig.data][1:]
        (470, ['120 full', '16 partial', '120 skipped'])
    """
    if check not in PICTURES:
        raise ValueError(f"No slide picture for the check {check!r}: add one to PICTURES (one of "
                         f"{', '.join(PICTURES)}).")
    return PICTURES[check](s, values)


__all__ = ["PICTURES", "picture"]
