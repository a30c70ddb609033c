"""Whether this machine has a CUDA (or ROCm) GPU, told without importing torch where the installed build cannot have
one (importing it takes 2 to 3 s)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path


def torch_build_has_gpu(version_py: Path | None = None) -> bool | None:
    """Whether the installed torch was built for a GPU (CUDA or ROCm), read from torch/version.py without importing
    torch (2 to 3 s); None when that cannot be told (torch missing, or a version.py without both fields).

    A CPU-only build, such as the `+cpu` wheels, sets `cuda = None` and `hip = None` there; a CUDA build sets cuda
    to its version string, a ROCm build hip (torch.cuda then drives the AMD GPU).

    Args:
        version_py: the version.py to read; None: the installed torch's, found with importlib.util.find_spec.
    """
    if version_py is None:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            return None
        version_py = Path(spec.submodule_search_locations[0]) / "version.py"
    fields = _constants(version_py)
    if "cuda" not in fields or "hip" not in fields:
        return None
    return fields["cuda"] is not None or fields["hip"] is not None


def _constants(path: Path) -> dict[str, object]:
    """The top-level `name = constant` and `name: type = constant` assignments of a Python file ({} if unreadable)."""
    try:
        body = ast.parse(path.read_text(encoding="utf-8")).body
    except (OSError, SyntaxError, ValueError):
        return {}
    out = {}
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign):
            target = node.target
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant):
            out[target.id] = node.value.value
    return out


def cuda_available() -> bool:
    """torch.cuda.is_available(), without importing torch where the installed build has no GPU support."""
    if torch_build_has_gpu() is False:
        return False
    import torch  # a GPU build (or one we cannot tell): ask torch, as it knows whether a device is there

    return torch.cuda.is_available()
