"""The package's shape: no module over 400 lines, no function over 60 (its docstring apart), no import cycle between
its modules.

Modules that are being split into smaller ones are listed below with what they exceed; each entry goes when its split
lands (a listed module that no longer exceeds its limit fails the test, so the list only shrinks).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "flashviz"
MODULE_LINES_MAX = 400
FUNCTION_LINES_MAX = 60

LONG_MODULES: set[str] = set()  # being split (none left)
LONG_FUNCTIONS: set[str] = set()  # being split (none left)


def modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def test_no_module_is_over_400_lines():
    long = {rel(p) for p in modules().values() if len(p.read_text().splitlines()) > MODULE_LINES_MAX}
    assert long - LONG_MODULES == set(), f"modules over {MODULE_LINES_MAX} lines: split them"
    assert LONG_MODULES - long == set(), "these are split now: take them off LONG_MODULES"


def functions(path: Path) -> dict[str, int]:
    """Qualified name -> lines of every function and method in a module, from `def` to its last line, its docstring
    apart: a public function's docstring carries Args, Returns and an Example however many options it has, and the
    limit is on the code a reader has to follow."""
    out = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = child.body
                doc = body[0] if body and isinstance(body[0], ast.Expr) and isinstance(
                    getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str) else None
                doc_lines = doc.end_lineno - doc.lineno + 1 if doc is not None else 0
                out[prefix + child.name] = child.end_lineno - child.lineno + 1 - doc_lines
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(ast.parse(path.read_text()), "")
    return out


def test_no_function_is_over_60_lines():
    long = {f"{rel(p)}:{name}" for p in modules().values() for name, lines in functions(p).items()
            if lines > FUNCTION_LINES_MAX}
    assert long - LONG_FUNCTIONS == set(), f"functions over {FUNCTION_LINES_MAX} lines: split them"
    assert LONG_FUNCTIONS - long == set(), "these are split now: take them off LONG_FUNCTIONS"


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
            out |= {f"{base}.{a.name}" for a in node.names}  # `from flashviz.ui import jobs` imports a module
    return {m for m in out if m in known and m != name}


def test_no_import_cycles():
    mods = modules()
    graph = {name: imports(name, path, set(mods)) for name, path in mods.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == [], cycles


@pytest.mark.parametrize("source", ["import flashviz.ui.jobs\n", "from flashviz.ui import jobs\n",
                                    "def f():\n    from flashviz.ui.jobs import sweep\n"])
def test_the_cycle_check_sees_every_form_of_import(tmp_path, source):
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert imports("flashviz.ui.probe", path, set(modules())) >= {"flashviz.ui.jobs"}
