"""Every link of today's format keeps working: the settings it gives and the notices about what it repaired are those
of the previous release.

tests/data/links_today.json holds 55 links (every view, every preset's settings, the links the docs and the lesson hand
out, an older release's link, hostile values, unknown parameter names) with the settings (URL form) and the notices that
the previous release's parser (commit 8eefc6c, before the view registry) gave for them on a machine with 2 threads and
no GPU. The notices are compared as a multiset: the page lists them in the order the settings are declared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flashviz.app import machine
from flashviz.app.query import parse_query
from flashviz.app.registry import LABELS, SLUGS
from flashviz.app.state import Env, default_settings
from tests._apptest import assert_clean

RECORDED = json.loads((Path(__file__).parent / "data" / "links_today.json").read_text())
ENV = Env(max_threads=RECORDED["env"]["max_threads"], devices=tuple(RECORDED["env"]["devices"]))
LINKS = RECORDED["links"]


RECORDED_VIEWS = "how, bench, block, io, correct, train, roof, decode, masks"  # the views when it was recorded


def with_todays_views(notice: str) -> str:
    """A recorded notice, with the list of views a bad `view` is told about as it is now (views get added)."""
    return notice.replace(f"is not one of {RECORDED_VIEWS};", f"is not one of {', '.join(SLUGS)};")


def link_id(link: dict) -> str:
    return "&".join(f"{k}={v}" for k, v in link["query"].items())[:60]


@pytest.mark.parametrize("link", LINKS, ids=[link_id(x) for x in LINKS])
def test_a_link_of_todays_format_gives_the_same_settings_and_notices(link):
    settings, notices = parse_query(link["query"], ENV)
    got, defaults = settings.to_query(), default_settings(ENV).to_query()
    assert {key: got[key] for key in link["settings"]} == link["settings"]
    assert {key: got[key] for key in got if key not in link["settings"]} == \
        {key: defaults[key] for key in got if key not in link["settings"]}  # settings added since: their defaults
    assert sorted(notices) == sorted(with_todays_views(n) for n in link["notices"])


def test_the_recorded_links_cover_every_view_presets_and_repairs():
    views = {x["settings"]["view"] for x in LINKS}
    assert views == set(RECORDED_VIEWS.split(", ")) <= set(LABELS)  # every view there was, each still a view
    assert sum(bool(x["notices"]) for x in LINKS) >= 20 and sum(not x["notices"] for x in LINKS) >= 20


@pytest.mark.parametrize("link", [x for x in LINKS if x["notices"]][:4] + [x for x in LINKS if not x["notices"]][:3],
                         ids=link_id)
def test_the_page_opens_such_a_link_on_its_tab_and_says_what_it_repaired(make_app, link, monkeypatch):
    monkeypatch.setattr(machine, "cpu_cores", lambda: ENV.max_threads)  # the recording's machine
    machine.machine_env.clear()
    try:
        at = make_app(**link["query"])
    finally:
        machine.machine_env.clear()  # the next page sees this machine again
    assert_clean(at)
    assert at.session_state["view"] == LABELS[link["settings"]["view"]]
    assert {key: at.query_params[key] for key in link["settings"]} == link["settings"]
    warnings = [w.value for w in at.warning if w.value.startswith("**Some settings in this link were adjusted:**")]
    assert len(warnings) == bool(link["notices"])
    assert all(f"- {with_todays_views(n)}" in warnings[0] for n in link["notices"][:10])
