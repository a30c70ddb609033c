"""The dashboard uses Streamlit's public API only: no private module, no private attribute, nothing that styles or
scripts Streamlit's own markup (its CSS class names, its test ids), no script of our own in the page. A new Streamlit
release can change any of those without notice; the public API is what it keeps.

The app is app.py, the shell (flashviz/app/), the kit (flashviz/kit/) and the views (flashviz/views/), and
flashviz/figures/tilemap.py, whose markup the page draws.
Browser tests may find Streamlit's widgets by their test ids; the app may not.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP = sorted([ROOT / "app.py", *(ROOT / "flashviz" / "app").glob("*.py"), *(ROOT / "flashviz" / "kit").glob("*.py"),
              *(ROOT / "flashviz" / "views").rglob("*.py"), ROOT / "flashviz" / "figures" / "tilemap.py"])
PUBLIC_MODULES = {"streamlit", "streamlit.components.v1"}  # what an app may import (st.* is the rest)
FORBIDDEN_TEXT = {
    "Streamlit's test ids": re.compile(r"data-testid|data-test-"),
    "Streamlit's CSS class names": re.compile(r"\.st[A-Z]\w*|\bst-(?:key|emotion)|\.stApp|stMain|stSidebar"),
    "a script in the page": re.compile(r"<script", re.IGNORECASE),
    "Streamlit's markup hooks": re.compile(r"unsafe_allow_javascript|#root\b|window\.parent"),
}


def sources() -> list[tuple[Path, str]]:
    return [(p, p.read_text()) for p in APP]


@pytest.mark.parametrize("path", APP, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_only_public_streamlit_modules_are_imported(path):
    tree = ast.parse(path.read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {f"streamlit.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                 and n.module == "streamlit" for a in n.names
                 if a.name.startswith("_") or importlib.util.find_spec(f"streamlit.{a.name}") is not None}
    private = {m for m in imported if m.split(".")[0] == "streamlit" and m not in PUBLIC_MODULES}
    assert private == set(), f"{path.name} imports Streamlit's internals"


@pytest.mark.parametrize("path", APP, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_private_streamlit_attribute_is_used(path):
    tree = ast.parse(path.read_text())
    names = {"st", "streamlit"}
    private = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
               and isinstance(n.value, ast.Name) and n.value.id in names and n.attr.startswith("_")]
    modules = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
               and isinstance(n.value, ast.Name) and n.value.id == "streamlit" and n.attr in
               {"runtime", "delta_generator", "file_util", "env_util", "config", "web", "elements", "proto"}]
    assert private + modules == [], f"{path.name} reaches into Streamlit"


@pytest.mark.parametrize("what", list(FORBIDDEN_TEXT))
def test_the_app_neither_styles_nor_scripts_streamlits_markup(what):
    found = [f"{p.name}:{text[:m.start()].count(chr(10)) + 1}: {m.group(0)}" for p, text in sources()
             for m in FORBIDDEN_TEXT[what].finditer(text)]
    assert found == [], f"{what} in the app"


@pytest.mark.parametrize("snippet", ["import streamlit.delta_generator\n", "from streamlit import file_util\n",
                                     "st._main.markdown('x')\n", "X = '.stMainBlockContainer { padding: 0 }'\n",
                                     "Y = '[data-testid=stApp]'\n", "Z = '<script>alert(1)</script>'\n"])
def test_the_checks_catch_what_they_look_for(tmp_path, snippet, monkeypatch):
    probe = tmp_path / "probe.py"
    probe.write_text(snippet)
    monkeypatch.setattr(f"{__name__}.APP", [probe])
    checks = [lambda: test_only_public_streamlit_modules_are_imported(probe),
              lambda: test_no_private_streamlit_attribute_is_used(probe),
              *[lambda w=w: test_the_app_neither_styles_nor_scripts_streamlits_markup(w) for w in FORBIDDEN_TEXT]]
    failed = 0
    for check in checks:
        try:
            check()
        except AssertionError:
            failed += 1
    assert failed >= 1, snippet
