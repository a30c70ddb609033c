"""The IO model view's settings: it has none of its own; it reads the problem size, the mask and the dtype."""

from __future__ import annotations

from flashviz.kit.settings import view_settings


@view_settings("IO model", reads=("n", "d", "causal", "window", "dtype", "batch", "heads"))
class IOSettings:
    """The IO model view's settings: the shared ones it reads."""
