"""A module that is imported on first attribute access, so that importing flashviz's light modules stays light.

torch takes 2 to 3 s to import and pandas most of a second, while the dashboard's first chart (the tile schedule and
the IO model's byte counts) needs neither. A module that uses torch only inside some of its functions binds

    if TYPE_CHECKING:
        import torch
    else:
        torch = lazy_import("torch")  # imported by the first torch.<name> that runs

and its functions keep writing torch.arange(...): torch is imported when one of them first runs, not when the module
is imported. Nothing is added to sys.modules before then, and every access reads the real module's attribute, so a
monkeypatched torch.<name> is seen as usual.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class LazyModule(types.ModuleType):
    """Stands in for the module `name` until an attribute is read, then imports it and forwards every access."""

    def __init__(self, name: str):
        super().__init__(name, f"{name}, imported on first attribute access")
        self._lazy_target: types.ModuleType | None = None

    def _lazy_load(self) -> types.ModuleType:
        if self._lazy_target is None:
            self._lazy_target = importlib.import_module(self.__name__)
        return self._lazy_target

    def __getattr__(self, attr: str) -> Any:  # only called for names the stand-in itself lacks
        return getattr(self._lazy_load(), attr)

    def __dir__(self) -> list[str]:
        return dir(self._lazy_load())

    def __repr__(self) -> str:
        state = "loaded" if self._lazy_target is not None else "not imported yet"
        return f"<lazy module {self.__name__!r} ({state})>"


def lazy_import(name: str) -> types.ModuleType:
    """The module `name` if it is already imported, else a LazyModule that imports it on first attribute access.

    Example:
        >>> json = lazy_import("json")
        >>> json.dumps([1, 2])
        '[1, 2]'
    """
    module = sys.modules.get(name)
    return module if module is not None else LazyModule(name)
