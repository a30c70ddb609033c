"""The Masks view's own settings: every setting comes from the preset table (flashviz.views.masks.presets); a new preset
is one entry there."""

from __future__ import annotations

from dataclasses import Field

from flashviz.kit.settings import view_settings
from flashviz.kit.spec import CHOICE, INT, VIEW, Spec, setting
from flashviz.views.masks.presets import MaskParam, mask_settings, preset_labels  # torch-free: the presets in one table

MASK_PRESETS = preset_labels()  # URL name -> label of each preset the Masks view offers


def mask_setting(p: MaskParam) -> Field:
    """A Masks setting as flashviz.views.masks.presets declares it: default, bounds, step, label and help."""
    if p.options:
        return setting(p.default, Spec(CHOICE, p.widget, p.label, help=p.help, place=VIEW, options=p.options,
                                       labels=p.labels), key=p.url_key)
    return setting(p.default, Spec(INT, p.widget, p.label, help=p.help, place=VIEW, lo=p.lo, hi=p.hi,
                                   increment=p.step), key=p.url_key)


@view_settings("Masks",
               reads=("n", "d", "br", "bc", "dtype", "heads", "threads"), also_reads=("causal", "window"),
               own={name: mask_setting(param) for name, param in mask_settings().items()})
class MasksSettings:
    """The Masks view's settings: the shared ones it reads and its own, from the preset table."""
