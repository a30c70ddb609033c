"""The dashboard's first chart does not wait for torch or pandas: what it needs imports without them.

Importing torch takes 2 to 3 s and pandas most of a second, while the default view (the tile map) is integer
arithmetic on tiles plus the IO model's byte counts. Each check runs in a fresh interpreter (this process has long
imported both), with the repository first on sys.path.
"""

from __future__ import annotations

import ast
import importlib
import json
import pydoc
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import flashviz
from flashviz.app.registry import VIEWS
from flashviz.core.tilemask import TileMasks
from flashviz.core.tiling import tile_schedule, visible_mask
from flashviz.measure.trace import schedule_trace
from flashviz.model.iomodel import io_trace

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "pandas")
CPU_BUILD = torch.version.cuda is None and torch.version.hip is None  # what torch says of itself, once imported

PUBLIC = ["FULL", "PARTIAL", "SKIPPED", "BackwardTileEvent", "IOCost", "Tile", "TileEvent", "TileSchedule", "Timing",
          "attention_flops", "benchmark", "fa1_block_sizes", "flash_attention", "flash_attention_backward",
          "flash_attention_forward", "flash_decode", "hbm_vs_memory", "io_cost", "io_trace", "measure_memory",
          "naive_attention", "run_block_sweep", "run_sweep", "tile_schedule", "time_call", "time_calls",
          "to_block_mask"]


def run_fresh(code: str) -> dict:
    """Run `code` in a new interpreter rooted at the repository; it prints one JSON object as its last line."""
    prelude = f"import sys, json\nsys.path.insert(0, {str(ROOT)!r})\n"
    run = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=180,
                         cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


LOADED = f"print(json.dumps({{'loaded': [m for m in {HEAVY!r} if m in sys.modules], 'out': out}}))"


def test_the_first_chart_imports_neither_torch_nor_pandas():
    code = (
        "import flashviz, flashviz.vocab, flashviz.limits, flashviz.core.tiling, flashviz.core.validate\n"
        "import flashviz.measure.trace, flashviz.app.sidebar, flashviz.app.machine, flashviz.app.query\n"
        "import flashviz.kit.drawing, flashviz.kit.runs, flashviz.views.how.page  # the page and its first view\n"
        "from flashviz import tile_schedule, io_cost, FULL\n"
        "from flashviz.measure.trace import schedule_trace\n"
        "tr = schedule_trace(256, 32, 32, causal=True, d=64, loop_order='q_outer')\n"
        "sched = tile_schedule(256, 256, 32, 32, causal=True, window=(40, 0), loop_order='kv_outer')\n"
        "out = [len(tr.status), tr.hbm_bytes[-1], sched.counts(), [t.status for t in sched][:3],\n"
        "       io_cost('q_outer', 256, 256, 64, 32, 32, causal=True).bytes]\n"
        + LOADED
    )
    got = run_fresh(code)
    assert got["loaded"] == [], f"importing the first chart's modules pulled in {got['loaded']}"
    steps, last_bytes, counts, first, cost_bytes = got["out"]
    here = schedule_trace(256, 32, 32, causal=True, d=64, loop_order="q_outer")
    assert (steps, last_bytes) == (64, here.hbm_bytes[-1]) and last_bytes == cost_bytes  # the same numbers
    sched = tile_schedule(256, 256, 32, 32, causal=True, window=(40, 0), loop_order="kv_outer")
    assert counts == sched.counts() and first == [t.status for t in sched][:3]


@pytest.mark.skipif(not CPU_BUILD, reason=f"torch {torch.__version__} is a GPU build: machine_env imports torch to "
                    "ask torch.cuda.is_available()")
def test_machine_env_tells_a_cpu_build_of_torch_without_importing_it():
    got = run_fresh("from flashviz.app.machine import machine_env\n"
                    "from flashviz.kit.machine import torch_build_has_gpu\n"
                    "env = machine_env()\n"
                    "out = [list(env.devices), env.max_threads, torch_build_has_gpu()]\n" + LOADED)
    assert got["loaded"] == [], f"machine_env pulled in {got['loaded']}"
    devices, threads, gpu_build = got["out"]
    assert devices == ["cpu"] and threads >= 1 and gpu_build is False


@pytest.mark.parametrize("fields, gpu", [
    ("cuda: Optional[str] = '12.4'\nhip: Optional[str] = None\n", True),  # a CUDA build
    ("cuda = None\nhip = '6.2.41133'\n", True),  # a ROCm build: torch.cuda drives the AMD GPU
    ("cuda: Optional[str] = None\nhip: Optional[str] = None\n", False),  # a CPU build
    ("cuda = None\n", None),  # no hip field: cannot tell
    ("cuda = (\n", None),  # not Python
])
def test_torch_build_is_read_from_version_py(tmp_path, fields, gpu):
    from flashviz.kit.machine import torch_build_has_gpu

    version_py = tmp_path / "version.py"
    version_py.write_text("from typing import Optional\n__version__ = '2.13.0'\n" + fields)
    assert torch_build_has_gpu(version_py) is gpu
    assert torch_build_has_gpu(tmp_path / "missing.py") is None


@pytest.mark.parametrize("gpu_build", [True, None, False])
def test_cuda_available_asks_torch_unless_the_build_has_no_gpu(monkeypatch, gpu_build):
    from flashviz.kit import machine

    asked = []
    monkeypatch.setattr(machine, "torch_build_has_gpu", lambda: gpu_build)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: asked.append(1) or True)
    assert machine.cuda_available() is (gpu_build is not False)
    assert asked == ([] if gpu_build is False else [1])


def test_what_is_imported_lazily_works_once_torch_arrives():
    """torch and pandas, imported on first use by the light modules, give the same results as imported up front."""
    code = (
        "from flashviz.core.tiling import tile_schedule, visible_mask\n"
        "from flashviz.core import validate\n"
        "from flashviz.model.flops import visible_pairs\n"
        "from flashviz.model.iomodel import io_trace\n"
        "from flashviz.measure.trace import pick_row, row_trace\n"
        "before = [m for m in ('torch', 'pandas') if m in sys.modules]\n"
        "s = tile_schedule(8, 8, 4, 4, causal=True, window=(2, 0))\n"
        "dtypes = [str(t) for t in validate.FLOAT_DTYPES]  # the first use of torch imports it\n"
        "import torch\n"
        "from flashviz.core.tilemask import TileMasks  # the kernels' tile masks import torch themselves\n"
        "hidden = TileMasks(s, 'cpu').hidden(s.tile(1, 1)).tolist()\n"
        "from flashviz import flash_attention, masks\n"
        "q = torch.ones(1, 1, 8, 2, requires_grad=True)\n"
        "flash_attention(q, q, q, block_size=4, causal=True).sum().backward()\n"
        "doc = tile_schedule(4, 4, 2, 2, mask_mod=masks.document([1, 3]))\n"
        "out = [before, hidden, visible_mask(torch.arange(3), torch.arange(3), causal=True).tolist(),\n"
        "       dtypes, visible_pairs(16, 16, window=(3, 0)),\n"
        "       io_trace('kv_outer', 8, 8, 2, 4, 4).shape[0], doc.counts(), row_trace(16, 8, 4, 4, row=9).k_block,\n"
        "       pick_row(16, 8, 4, 4, causal=True).row, q.grad.abs().sum().item()]\n"
        + LOADED
    )
    got = run_fresh(code)
    before, hidden, vis, dtypes, pairs, io_rows, doc, k_blocks, row, grad = got["out"]
    assert before == [] and got["loaded"] == list(HEAVY)
    s = tile_schedule(8, 8, 4, 4, causal=True, window=(2, 0))
    assert hidden == TileMasks(s, "cpu").hidden(s.tile(1, 1)).tolist()
    assert vis == visible_mask(torch.arange(3), torch.arange(3), causal=True).tolist()
    assert dtypes == ["torch.float32", "torch.float64", "torch.float16", "torch.bfloat16"]
    from flashviz.masks import document
    from flashviz.measure.trace import pick_row, row_trace
    from flashviz.model.flops import visible_pairs
    assert pairs == visible_pairs(16, 16, window=(3, 0)) == (1 + 2 + 3) + 13 * 4  # rows 0-2 see 1-3 keys, the rest 4
    assert io_rows == len(io_trace("kv_outer", 8, 8, 2, 4, 4)) == 5
    assert doc == tile_schedule(4, 4, 2, 2, mask_mod=document([1, 3])).counts()
    assert tuple(k_blocks) == row_trace(16, 8, 4, 4, row=9).k_block
    assert row == pick_row(16, 8, 4, 4, causal=True).row
    assert grad > 0


def test_the_public_names_are_unchanged_and_each_resolves_to_its_module():
    assert flashviz.__all__ == PUBLIC
    from flashviz import flash_attention, io_cost, tile_schedule  # noqa: F401 (the import is the check)

    for name in PUBLIC:
        value = getattr(flashviz, name)
        module = flashviz._MODULE_OF[name]
        assert value is getattr(sys.modules[module], name), name
    assert set(PUBLIC) <= set(dir(flashviz))
    assert "tile_schedule" in pydoc.render_doc(flashviz)
    with pytest.raises(AttributeError, match="no attribute 'tile_shedule'"):
        flashviz.tile_shedule  # noqa: B018 (a misspelt name)
    from flashviz import masks  # submodules still import as attributes

    assert masks.causal_mask.__name__ == "causal_mask"


def test_from_flashviz_import_works_in_a_fresh_interpreter():
    got = run_fresh("from flashviz import flash_attention, tile_schedule, io_cost\n"
                    "import flashviz\n"
                    "unresolved = sorted(n for n in flashviz.__all__ if n not in vars(flashviz))\n"
                    "assert all(getattr(flashviz, n) is not None for n in unresolved)  # each resolves on first use\n"
                    "out = [f.__module__ for f in (flash_attention, tile_schedule, io_cost)] + [unresolved]\n"
                    + LOADED)
    assert got["out"] == ["flashviz.core.backward", "flashviz.core.tiling", "flashviz.model.iomodel",
                          sorted(set(PUBLIC) - {"flash_attention", "tile_schedule", "io_cost"})]


@pytest.mark.parametrize("n, br, bc, causal, window, order, d, nbytes", [
    (256, 32, 32, True, None, "q_outer", 64, 4),
    (256, 32, 32, True, None, "kv_outer", 64, 2),
    (100, 16, 24, False, (20, 5), "q_outer", 32, 8),
    (97, 32, 16, True, (40, 0), "kv_outer", 16, 4),
    (64, 64, 64, False, None, "kv_outer", 8, 4),
])
def test_schedule_trace_counters_are_io_traces_columns(n, br, bc, causal, window, order, d, nbytes):
    """One source: the tile map's counters are io_trace's rows (less the start row), not a second count."""
    tr = schedule_trace(n, br, bc, causal=causal, window=window, loop_order=order, d=d, dtype_bytes=nbytes)
    df = io_trace(order, n, n, d, br, bc, causal=causal, window=window, dtype_bytes=nbytes)
    df = df[df["step"] >= 0]
    assert list(tr.hbm_bytes) == [float(x) for x in df["hbm_bytes"]]
    assert list(tr.flops) == [float(x) for x in df["flops"]]
    assert list(tr.status) == list(df["status"]) and list(tr.q_block) == list(df["q_block"])


def test_every_view_names_a_function_and_the_page_imports_none_of_their_modules_up_front():
    views = set()
    for view in VIEWS:
        module, function = f"flashviz.views.{view.slug}.page", view.draws
        assert callable(getattr(importlib.import_module(module), function)), view.slug
        views.add(module)
    tree = ast.parse((ROOT / "app.py").read_text())
    top = {f"{node.module}.{a.name}" if node.module == "flashviz.app" else node.module
           for node in tree.body if isinstance(node, ast.ImportFrom) for a in node.names}
    top |= {a.name for node in tree.body if isinstance(node, ast.Import) for a in node.names}
    assert not top & views, top & views
    got = run_fresh("import flashviz.app.registry, flashviz.app.state, flashviz.app.query\n"
                    f"out = sorted(m for m in sys.modules if m in {sorted(views)!r})\n" + LOADED)
    assert got["out"] == [] and got["loaded"] == []  # reading the registry imports no view, nor torch or pandas


def test_a_lazy_module_imports_on_first_use_and_forwards_every_access(tmp_path, monkeypatch):
    from flashviz._lazy import LazyModule, lazy_import

    (tmp_path / "lazy_probe.py").write_text("VALUE = 1\ndef double(x):\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazy_probe", raising=False)
    probe = lazy_import("lazy_probe")
    assert isinstance(probe, LazyModule) and "lazy_probe" not in sys.modules and "not imported" in repr(probe)
    assert probe.double(21) == 42 and "lazy_probe" in sys.modules and "loaded" in repr(probe)
    monkeypatch.setattr(sys.modules["lazy_probe"], "VALUE", 7)  # a patch of the real module shows through
    assert probe.VALUE == 7 and "double" in dir(probe)
    with pytest.raises(AttributeError):
        probe.missing  # noqa: B018 (an attribute the module lacks)
    assert lazy_import("lazy_probe") is sys.modules["lazy_probe"]  # once imported, the module itself
