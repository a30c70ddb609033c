"""The Masks view's claim: `masks_tiles`, the tiles a mask computes, skips and masks and that the BlockMask lists the
same blocks as torch's create_block_mask (`mask_spec` reads the view's MaskSpec from the settings).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from flashviz.views.claim import Result
from flashviz.views.masks.data import NO_SCORE, MaskSpec, mask_data, spec_matches_torch
from flashviz.views.masks.presets import mask_settings

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.views.masks.settings import MasksSettings


def mask_spec(s: MasksSettings) -> MaskSpec:
    """The Masks view's mask from its settings: each setting of flashviz.views.masks.presets' table fills its field.

    Example:
        >>> from flashviz.views.masks.settings import MasksSettings
        >>> mask_spec(MasksSettings()).presets
        ('document', 'causal')
    """
    return MaskSpec(**{p.key: getattr(s, name) for name, p in mask_settings().items()})


def masks_tiles(s: MasksSettings) -> Result:
    """The Masks view's tile grid of its mask, and its BlockMask against torch's create_block_mask.

    Args:
        s: the step's settings (N, Br, Bc, H and the Masks view's own settings are read).
    Returns:
        Result: docs (packed documents), n, computed, tiles, share, visible (fraction of pairs), equal ("yes" /
        "no"), and for the slide's picture status and counts (the tile grid's fates); holds when the mask is
        documents AND causal, some tile is skipped and the BlockMask equals torch's.

    Example:
        >>> from flashviz.lesson.steps import INTRO
        >>> masks_tiles(INTRO.step("masks_tiles").view_settings()).values["computed"]
        55
    """
    spec = mask_spec(s)
    data = mask_data(spec, s.n, s.br, s.bc, s.heads)
    equal = spec_matches_torch(replace(spec, score=NO_SCORE), s.n, s.br, s.bc)
    g = data.grid
    values = {"docs": len(data.doc_lengths), "n": s.n, "computed": g.computed, "tiles": g.tiles,
              "share": g.computed / g.tiles, "visible": data.elements.visible_fraction, "equal": "yes" if equal else
              "no", "status": g.status, "counts": g.counts}
    return Result.of(values, {"the mask is not documents AND causal": spec.presets != ("document", "causal")
                            or spec.combine != "and", "no tile is skipped": g.computed == g.tiles,
                            "the BlockMask differs from create_block_mask": not equal})

