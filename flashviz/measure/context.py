"""What a measurement ran on: torch version, thread count, CPU model, GPU, Python and OS, for a sweep's CSV.

A time means little without its machine: `run_context` names it, run_sweep keeps it in `df.attrs["context"]`, and
`with_context` writes it into every row (constant columns) so that a CSV says where its numbers come from.

The CPU model comes from /proc/cpuinfo ("model name", or ARM's "Hardware" / "Processor") on Linux, where
platform.processor() is often empty; elsewhere from platform.processor(), then platform.machine().
"""

from __future__ import annotations

import platform
from pathlib import Path

import pandas as pd
import torch

from flashviz.measure.allocator import allocator

CPUINFO = Path("/proc/cpuinfo")  # Linux: one "key : value" line per field, a block per logical CPU
CPUINFO_KEYS = ("model name", "Hardware", "Processor", "cpu model")  # x86, ARM boards, older ARM, MIPS
# with_context adds these columns
CONTEXT_COLUMNS = ("torch_version", "cpu_model", "gpu", "python_version", "platform", "allocator")


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's model name, e.g. "Intel(R) Xeon(R) Processor"; "unknown" when nothing names it.

    Args:
        cpuinfo: the file to read ("key : value" lines), /proc/cpuinfo by default; skipped when absent.
    Returns:
        str.

    Example:
        >>> isinstance(cpu_model(), str) and cpu_model() != ""
        True
    """
    try:
        lines = cpuinfo.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    fields = {}
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and value.strip():
            fields.setdefault(key.strip(), value.strip())
    for key in CPUINFO_KEYS:
        if key in fields:
            return fields[key]
    return platform.processor() or platform.machine() or "unknown"


def run_context(threads: int | None = None, device: str | torch.device = "cpu") -> dict[str, str | int]:
    """The machine and software a run measured on.

    Args:
        threads: the intra-op threads the run used (None: torch's current count).
        device: the device it ran on; for CUDA the GPU's name is filled in.
    Returns:
        dict with threads and CONTEXT_COLUMNS: torch_version, cpu_model, gpu ("" on the CPU), python_version,
        platform, allocator (the C allocator's state while timing: flashviz.measure.allocator).

    Example:
        >>> ctx = run_context(1)
        >>> ctx["threads"], ctx["torch_version"] == torch.__version__, ctx["gpu"]
        (1, True, '')
    """
    dev = torch.device(device)
    gpu = torch.cuda.get_device_name(dev) if dev.type == "cuda" else ""
    return {"threads": torch.get_num_threads() if threads is None else int(threads),
            "torch_version": str(torch.__version__), "cpu_model": cpu_model(), "gpu": gpu,
            "python_version": platform.python_version(), "platform": platform.platform(),
            "allocator": allocator()}


def with_context(df: pd.DataFrame, context: dict[str, str | int] | None = None) -> pd.DataFrame:
    """df with the run's context as constant columns (those it does not have yet), ready for to_csv.

    Args:
        df: a sweep's rows.  context: run_context()'s dict; None: df.attrs["context"] (run_sweep keeps it there),
            else this process's run_context().
    Returns:
        A new DataFrame: df's columns, then the context's missing ones.

    Example:
        >>> out = with_context(pd.DataFrame({"time_s": [1.0, 2.0], "threads": [1, 1]}), run_context(1))
        >>> list(out.columns) == ["time_s", "threads", *CONTEXT_COLUMNS], out["torch_version"].nunique()
        (True, 1)
    """
    if context is None:
        context = df.attrs.get("context") or run_context()
    extra = {k: v for k, v in context.items() if k not in df.columns}
    return df.assign(**extra)
