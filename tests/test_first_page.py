"""The first page's map in the HTML page itself (flashviz.ui.first_page): added exactly where the dashboard's first run
will draw that very map, never otherwise, and never at the cost of the page.

Where it lands on screen, and that it hands over to the dashboard's map without moving, is checked in Chromium
(tests/test_browser.py); that the dashboard's first page draws the same markup, in tests/test_first_paint.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flashviz.ui import first_page
from flashviz.ui.first_page import COMPACT_HEADER_CSS, COPY_ID, QUERY_MAX_FIELDS, first_page_map, page_html, routes
from flashviz.ui.query import parse_query
from flashviz.ui.state import Settings

ROOT = Path(__file__).resolve().parents[1]
INDEX = '<!DOCTYPE html><html><head><title>Streamlit</title></head><body><div id="root"></div></body></html>'
COPY_START = f'<div id="{COPY_ID}" aria-hidden="true">'


def copied_map(html: str) -> str | None:
    """The map markup in the page's copy, or None when the page has no copy. The copy is one element right before the
    app's root: its style, the compact title's, the map, the script."""
    if COPY_START not in html:
        return None
    assert html.count(COPY_START) == 1 and html.count('<div id="root"></div>') == 1, html[:300]
    start = html.index(COPY_START)
    end = html.index("</script></div>", start) + len("</script></div>")
    assert html[end:].startswith('<div id="root"></div>'), "the copy goes right before the app's root"
    copy = html[start:end]
    return copy[copy.index(COMPACT_HEADER_CSS) + len(COMPACT_HEADER_CSS):copy.index("<script>")]


def test_the_default_page_carries_the_first_pages_map():
    html = page_html(INDEX, "")
    assert copied_map(html) == first_page_map(Settings())
    assert html.replace(first_page.copy_html(first_page_map(Settings())), "") == INDEX  # nothing else changes
    assert "N = 1024" in html and 'data-still="1"' in html


@pytest.mark.parametrize("query", ["n=2048&causal=1", "order=both&n=512&br=32&bc=32", "window=128,0&n=1024",
                                   "view=how&frame=40&row=7&autorow=0", "dtype=float16&d=128"])
def test_a_link_with_settings_gets_the_map_for_those_settings(query):
    from urllib.parse import parse_qs

    settings, notices = parse_query(parse_qs(query))
    assert not notices
    assert copied_map(page_html(INDEX, query)) == first_page_map(settings)


def test_the_copy_is_the_link_s_own_map_not_the_default():
    causal = copied_map(page_html(INDEX, "n=2048&causal=1"))
    assert causal != first_page_map(Settings()) and "causal" in causal and "N = 2048" in causal


@pytest.mark.parametrize("query", [
    "view=bench", "view=io&n=2048", "view=masks",  # another tab opens first
    "usemask=1",  # the Masks tab's mask: its own map, drawn with torch
    "n=16384&br=16&bc=16",  # a grid the map cannot draw: the tab shows an error
    "n=abc", "n=1000000000", "br=0", "view=%3Cscript%3E", "row=-5",  # the page will say what it repaired, above the map
    "&".join(f"k{i}=1" for i in range(QUERY_MAX_FIELDS + 1)),  # more fields than the parser looks at
])
def test_no_copy_where_the_first_page_is_not_that_map_at_that_place(query):
    assert page_html(INDEX, query) == INDEX


def test_an_index_page_without_the_app_root_is_served_as_it_is():
    other = INDEX.replace('<div id="root"></div>', '<main id="app"></main>')
    assert page_html(other, "") == other


@given(st.text(max_size=300))
def test_any_query_string_gives_the_page_with_at_most_one_copy(query):
    html = page_html(INDEX, query)
    assert html == INDEX or copied_map(html) is not None


@given(st.dictionaries(st.sampled_from(["n", "br", "bc", "causal", "window", "order", "row", "autorow", "frame", "d",
                                        "dtype", "view", "usemask", "link"]),
                       st.text(alphabet="0123456789-,.abcfhnoqtuvw", max_size=8), max_size=6))
def test_a_copy_is_always_the_map_the_dashboard_draws_for_the_link(params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    settings, notices = parse_query({k: [v] for k, v in params.items()})
    copy = copied_map(page_html(INDEX, query))
    if notices or settings.view != "how":
        assert copy is None
    else:
        assert copy == first_page_map(settings)


def test_the_copy_hands_over_to_the_dashboards_map_and_gives_up_on_an_error():
    html = page_html(INDEX, "")
    script = html[html.index("<script>"):html.index("</script>")]
    assert 'querySelector("#root .fv-tilemap")' in script and "copy.remove()" in script
    assert "stException" in script and "[role=dialog]" in script  # an error or the connection dialog instead
    style = html[html.index("<style>"):html.index("</style>")]
    assert "pointer-events:none" in style and f"max-width:{first_page.MIN_WINDOW_PX - 0.02}px" in style
    assert re.search(rf"animation:fv-first-page-out 0s {first_page.COPY_MAX_S}s forwards", style)  # no script needed


def test_the_module_loads_neither_torch_nor_streamlit():
    code = ("import sys; import flashviz.ui.first_page as f; f.page_html('<div id=\"root\"></div>', 'n=512'); "
            "print('torch' in sys.modules, 'streamlit' in sys.modules, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == ["False", "False", "False"], out


def serve(route, query: str = "") -> tuple[int, dict[str, str], str]:
    """Call the route's endpoint as Starlette would for GET /?query: (status, headers, body)."""
    from starlette.requests import Request

    scope = {"type": "http", "method": "GET", "path": route.path, "query_string": query.encode(), "headers": [],
             "root_path": "", "scheme": "http", "server": ("127.0.0.1", 8501)}
    response = route.endpoint(Request(scope))
    return response.status_code, dict(response.headers), response.body.decode()


def test_the_route_serves_streamlits_own_page_with_the_copy():
    from streamlit import file_util

    (route,) = routes()
    index = (Path(file_util.get_static_dir()) / "index.html").read_text(encoding="utf-8")
    status, headers, body = serve(route)
    assert route.path == "/" and status == 200 and headers["cache-control"] == "no-cache"
    assert copied_map(body) == first_page_map(Settings()) and body == page_html(index, "")
    assert serve(route, "view=bench")[2] == index


def test_the_route_follows_the_base_url_path(monkeypatch):
    from streamlit import config

    monkeypatch.setattr(config, "get_option", lambda name: "/flashviz/" if name == "server.baseUrlPath" else None)
    (route,) = routes()
    assert route.path == "/flashviz/"


def test_a_failure_while_adding_the_copy_serves_the_page_unchanged(monkeypatch, caplog):
    def broken(index: str, query: str) -> str:
        raise RuntimeError("boom")

    (route,) = routes()
    monkeypatch.setattr(first_page, "page_html", broken)
    status, _, body = serve(route)
    assert status == 200 and COPY_ID not in body and '<div id="root"></div>' in body
    assert "could not be added" in caplog.text


def test_the_route_reads_a_link_for_this_machine_as_the_dashboard_does():
    from flashviz.ui.common import cpu_cores

    (route,) = routes()
    cores = cpu_cores()
    assert copied_map(serve(route, f"threads={cores}")[2]) is not None  # all of this machine's cores: no repair
    assert copied_map(serve(route, f"threads={cores + 1}")[2]) is None  # more: the page says it lowered them
