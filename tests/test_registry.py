"""The view registry (flashviz.app.registry) and the settings it declares: every view once, every setting once, every
name a view lists a real setting, and everything else (the URL, the parser, the widgets) derived from them."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from flashviz.app.query import parse_query
from flashviz.app.registry import LABELS, SLUGS, VIEWS, owner_of, view_of
from flashviz.app.session import WIDGET_KEYS
from flashviz.app.state import Settings, setting_fields, spec_of
from flashviz.kit.settings import SharedSettings
from flashviz.kit.spec import SIDEBAR, VIEW, url_key
from flashviz.kit.widgets import DRAW

SHARED = {f.name for f in fields(SharedSettings)}

ROOT = Path(__file__).resolve().parents[1]


def test_every_view_is_declared_once_with_its_link_label_and_function():
    assert len(SLUGS) == len(set(SLUGS)) == len(set(LABELS.values())) == len(VIEWS)
    assert spec_of("view").options == SLUGS and spec_of("view").labels == LABELS  # ?view=<slug> for each view
    for view in VIEWS:
        assert view_of(view.slug) is view and view.draws.isidentifier()  # a function of views/<slug>/page.py
        assert (ROOT / "flashviz" / "views" / view.slug / "page.py").is_file(), view.slug


def test_every_setting_is_declared_once_shared_or_by_the_view_that_owns_it():
    own = [name for view in VIEWS for name in view.own]
    assert len(own) == len(set(own)) and not set(own) & SHARED
    # the open view (the shell's), the shared settings, then each view's own
    assert [f.name for f in setting_fields()] == ["view", *(f.name for f in fields(SharedSettings)), *own]
    for view in VIEWS:
        assert all(spec_of(name).place == VIEW for name in view.own), view.slug
        assert set(view.sidebar) <= SHARED and all(spec_of(name).place == SIDEBAR for name in view.sidebar)
        assert all(owner_of(name) is not view for name in view.borrows), view.slug  # another view's settings


def test_everything_else_is_derived_from_the_declarations():
    names = [f.name for f in setting_fields()]
    keys = [url_key(f) for f in setting_fields()]
    assert list(Settings().to_query()) == keys and len(set(keys)) == len(keys)  # the URL carries every setting once
    for name in names:
        spec = spec_of(name)
        assert spec.widget in DRAW or spec.widget in ("", "views"), name  # every widget kind has a drawer
        assert spec.place == "app" or (spec.label and spec.help), name  # every widget has a label and help
    assert set(names) - {"window"} <= set(WIDGET_KEYS) and {"win_on", "win_left", "win_right"} <= set(WIDGET_KEYS)
    changed = Settings(n=97, row=90, window=(3, 1), impls=("sdpa",), view="io", cache_len=1000, mask="chunked")
    assert parse_query(changed.to_query()) == (changed, [])


def test_a_shared_setting_is_read_by_some_view_and_every_view_reads_its_own():
    read = {name for view in VIEWS for name in view.sidebar}
    assert SHARED - read == {"link"}  # Br = Bc (drawn with Br and Bc)
    for view in VIEWS:
        assert {"br", "bc"} <= set(view.sidebar) or not {"br", "bc"} & set(view.sidebar), view.slug  # both or none
