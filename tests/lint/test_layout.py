"""The package's shape: the library by idea, the dashboard by view, data flowing one way, no import cycle.

No line count decides where code goes: a module holds one idea (a paper idea in the library, everything one view
needs in its folder) as long as the idea needs. A loose sanity cap (800 lines) only catches a module that has grown a
second idea. The layers, from the bottom: the library (core/, model/, measure/, figures/ and the modules beside them)
imports neither Streamlit nor anything of the dashboard. The dashboard has three layers: the kit (flashviz/kit/: what a
view is built with: settings, widgets, drawing, runs) below the views, the views (flashviz/views/<slug>/), and the
shell (flashviz/app/: registry, URL, sidebar, presenter, slides) above them, which composes the views. Nothing climbs:
the kit imports no view and nothing of the shell, a view imports nothing of the shell. A view's folder keeps the same
order inside (page -> figures and sentences -> data -> library), its figures and sentences import no torch, and its
page computes nothing (no torch); a view may read another's plain data, sentences and settings, and a page may draw
another view's widgets (its settings' `borrows`). The lesson sits above the views and reads the shell's and the kit's
pure settings modules only.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "flashviz"
MODULE_LINES_MAX = 800  # a sanity cap, not a rule: past it a module almost surely holds two ideas
LIBRARY = ("flashviz.core", "flashviz.model", "flashviz.measure", "flashviz.figures", "flashviz.masks",
           "flashviz.numerics", "flashviz.ring", "flashviz.triton", "flashviz.vocab", "flashviz.units",
           "flashviz.limits")
DASHBOARD = ("flashviz.views", "flashviz.kit", "flashviz.app", "flashviz.lesson", "streamlit")
KIT, SHELL = ("flashviz.kit",), ("flashviz.app",)
KIT_PURE = ("flashviz.kit.spec", "flashviz.kit.sizes", "flashviz.kit.settings", "flashviz.kit.machine")  # no streamlit
SHELL_SETTINGS = ("flashviz.app.registry", "flashviz.app.state", "flashviz.app.query")  # the composed settings, the URL
APP_SETTINGS = KIT_PURE + SHELL_SETTINGS  # pure declarations and the URL parser: no streamlit, no torch
NO_TORCH = ("figures", "sentences", "page", "animation", "tilemap", "settings", "presets")  # view modules: no torch


def modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_no_module_is_over_the_sanity_cap():
    long = {rel(p): n for p in modules().values() if (n := len(p.read_text().splitlines())) > MODULE_LINES_MAX}
    assert long == {}, f"modules over {MODULE_LINES_MAX} lines: does each still hold one idea?"


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that module `name` imports, anywhere in it (inside functions too), except under
    `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text())
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(
        node.test) for n in ast.walk(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base
                                                                                                   else []))
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}  # `from flashviz.kit import jobs` imports a module
    return {m for m in out if (m in known or m.split(".")[0] in ("streamlit", "torch")) and m != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


def upward(g: dict[str, set[str]]) -> list[str]:
    """Every import that runs against the layers, as 'importer -> imported (why)'."""
    bad = []
    for name, deps in sorted(g.items()):
        for dep in sorted(deps):
            if under(name, LIBRARY) and under(dep, DASHBOARD):
                bad.append(f"{name} -> {dep} (the library imports the dashboard)")
            if under(name, ("flashviz.lesson",)) and (dep.startswith("streamlit") or (
                    under(dep, SHELL + KIT) and not under(dep, APP_SETTINGS))):
                bad.append(f"{name} -> {dep} (the lesson reads the shell's and the kit's settings only)")
            if under(name, ("flashviz.views",)) and under(dep, ("flashviz.lesson",)):
                bad.append(f"{name} -> {dep} (a view imports the lesson above it)")
            if under(name, (*KIT, "flashviz.views")) and under(dep, SHELL):
                bad.append(f"{name} -> {dep} (the kit and the views import nothing of the shell above them)")
            if under(name, KIT) and under(dep, ("flashviz.views", "flashviz.lesson")):
                bad.append(f"{name} -> {dep} (the kit imports no view: the views are built with it)")
            parts = name.split(".")
            if len(parts) == 4 and parts[1] == "views":  # flashviz.views.<slug>.<module>
                if parts[3] != "page" and (dep.startswith("streamlit") or (under(dep, KIT) and not
                                           under(dep, KIT_PURE))):
                    bad.append(f"{name} -> {dep} (only a view's page draws with Streamlit)")
                if parts[3] in NO_TORCH and dep.split(".")[0] == "torch":
                    bad.append(f"{name} -> {dep} (a view's {parts[3]} imports no torch)")
                dparts = dep.split(".")
                other_view = len(dparts) == 4 and dparts[1] == "views" and dparts[2] != parts[2]
                if other_view and dparts[3] in ("page", "figures") and parts[3] != "page":
                    bad.append(f"{name} -> {dep} (a view reaches into another view's page or figures)")
    return bad


def test_data_flows_one_way():
    assert upward(graph()) == []


@pytest.mark.parametrize(("name", "source"), [
    ("flashviz.core.probe", "from flashviz.views.masks import data\n"),
    ("flashviz.figures.probe", "import streamlit as st\n"),
    ("flashviz.views.masks.figures", "import torch\n"),
    ("flashviz.views.masks.data", "from flashviz.kit import runs\n"),
    ("flashviz.lesson.probe", "from flashviz.app import sidebar\n"),
    ("flashviz.kit.probe", "from flashviz.app.state import Settings\n"),
    ("flashviz.kit.probe", "from flashviz.views.bench.settings import BenchSettings\n"),
    ("flashviz.views.bench.page", "from flashviz.app.registry import view_of\n"),
    ("flashviz.views.bench.claims", "def f():\n    from flashviz.app import state\n"),
])
def test_the_layer_check_sees_an_upward_import(tmp_path, name, source):
    path = tmp_path / "probe.py"
    path.write_text(source)
    g = graph()
    g[name] = imports(name, path, set(modules()))
    assert [b for b in upward(g) if b.startswith(name + " ")]


def test_no_import_cycles():
    g = {name: {d for d in deps if d.startswith("flashviz")} for name, deps in graph().items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(g[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for name in sorted(g):
        if name not in state:
            visit(name, [name])
    assert cycles == [], cycles


@pytest.mark.parametrize("source", ["import flashviz.kit.jobs\n", "from flashviz.kit import jobs\n",
                                    "def f():\n    from flashviz.kit.jobs import sweep\n"])
def test_the_cycle_check_sees_every_form_of_import(tmp_path, source):
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert imports("flashviz.app.probe", path, set(modules())) >= {"flashviz.kit.jobs"}


def test_figures_import_no_torch_even_through_what_they_import():
    """The figures (flashviz/figures/ and each view's figures, animation and tile map) draw plain data: importing them
    in a fresh interpreter loads no torch, directly or through another module."""
    import subprocess
    import sys

    names = sorted(n for n, p in modules().items() if (n.startswith("flashviz.figures.") or (
        n.startswith("flashviz.views.") and p.stem in ("figures", "animation", "tilemap"))))
    code = ("import importlib, sys\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module(name)\n"
            "    if 'torch' in sys.modules:\n"
            "        print(name)\n"
            "        break\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent, timeout=120)
    assert len(names) >= 10 and out.stdout.strip() == "", f"{out.stdout.strip()} imports torch"
