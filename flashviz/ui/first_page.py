"""A new browser tab's first chart: the tile map's start frame, drawn twice, the second time before Streamlit runs.

1. In the dashboard: a session's first run on How it works draws only this map (how_it_works.first_page_ui).
2. In the HTML page itself: Streamlit's page is an empty shell until its 2.7 MB of JavaScript has loaded, run and
   connected, 1.5-2 s on a 2-core machine, and only then can the first run draw anything. The map is SVG + CSS that
   the server writes without torch, so app.py serves the page with the same map in it (`routes`), at the place where
   the first run will draw it. The browser draws it as soon as the page and Streamlit's stylesheet have arrived. When
   the dashboard's own map arrives, a small inline script removes the copy before the browser paints again, so the
   map stays on screen from the first moment and never moves.

The copy is added only where the first page will be exactly that map at exactly that place: the URL's settings
(parsed by the dashboard's own parser) open How it works, without the Masks tab's mask, on a grid the map can draw,
with nothing to say about the URL (such a notice is drawn above the map), in a window at least MIN_WINDOW_PX wide (a
narrower one lays the page out otherwise; the copy is hidden there). Anything else, or any failure here, gets
Streamlit's page unchanged. The copy takes no clicks (the first page's map has no Play), is hidden from screen readers
(the dashboard's map follows), and is hidden after COPY_MAX_S even if the script never runs.

Imports neither torch nor streamlit (routes() imports streamlit and starlette when app.py calls it).
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from flashviz.figures.tilemap import frame_indices, tile_map_html
from flashviz.measure.trace import schedule_trace
from flashviz.ui.query import parse_query
from flashviz.ui.state import Env, Settings
from flashviz.vocab import DTYPE_BYTES

GRID_MAX = 64  # tiles per side the animation draws (64 x 64 x 2 panels: about 0.75 MB of markup)
COPY_ID = "fv-first-page"  # the copy's element; tests look for it
DONE_ATTR = "data-fv-first-page"  # set on <html> when the copy is removed: "map" (the dashboard's map arrived),
# "error" (an exception box or a dialog, such as the connection error, came instead)
COPY_MAX_S = 60  # the copy is hidden after this long whatever happens (a CSS animation: no script needed)
QUERY_MAX_FIELDS = 200  # URL parameters the parser looks at; more and the page is served without the copy
# With a tile map, the page title and the space above it are smaller, so that the grid, counters and Play fit a
# 1280 x 720 window (common.show_map sends it with every map, the copy holds it too). Sent with the map (one markdown
# element, whose code the browser already has), not with st.html, whose code would be one more download before the
# browser can draw the map.
COMPACT_HEADER_CSS = ("<style>.stMainBlockContainer { padding-top: 2.5rem; } "
                      ".stMainBlockContainer h1 { font-size: 1.6rem; padding: 0 0 0.25rem 0; }</style>")
# Where the first page draws the map, in CSS px, measured in Chromium (tests/test_browser.py checks that the copy
# lands there): below the compact title (COMPACT_HEADER_CSS) and the tab bar's blank place
# (how_it_works.TAB_BAR_SPACE), 2.5 + 1.6 x 1.2 + 0.25 + 3.5 rem at the theme's 18 px font; right of the sidebar
# (337.5 px) and the main column's padding (5 rem), which is on its right too. Px, not rem: before Streamlit's
# JavaScript runs, a rem is the browser's 16 px, not the theme's 18.
MAP_TOP_PX = 147.06
MAP_LEFT_PX = 427.5
MAP_RIGHT_PX = 90
MIN_WINDOW_PX = 880  # narrower windows: the main column's padding shrinks (768-879 px) or the sidebar covers it
_ROOT = '<div id="root"></div>'  # Streamlit's app root in its index.html; the copy goes right before it
_LOG = logging.getLogger(__name__)


def grid_error(s: Settings, cap: int = GRID_MAX, view: str = "the animation") -> str | None:
    """Why `view`, which draws at most cap x cap tiles, cannot draw settings s (and what to change), or None."""
    tr, tc = -(-s.n // s.br), -(-s.n // s.bc)
    if max(tr, tc) <= cap:
        return None
    need = -(-s.n // cap)
    return (f"N = {s.n} with Br = {s.br}, Bc = {s.bc} makes a {tr} × {tc} grid of tiles; {view} draws at most "
            f"{cap} × {cap}. Raise the block size to at least {need} or lower N.")


def start_frame(frame: int, n_computed: int) -> int:
    """The map frame the page opens at: the page's frame setting, where a map with n_computed computed tiles has it,
    else its last frame."""
    return min(frame, max(len(frame_indices(n_computed)) - 1, 0))


def first_page_map(s: Settings) -> str | None:
    """The first page's tile map for settings s: the start frame as a still picture; None where How it works answers
    otherwise (an error, the Masks tab's mask). The automatic row is the kernel's pick: no marker before it runs."""
    if grid_error(s) or s.usemask:
        return None
    try:
        return _still_map(s.n, s.br, s.bc, s.causal, s.window, s.loop_orders, s.d, DTYPE_BYTES[s.dtype],
                          None if s.autorow else s.row, s.frame)
    except (ValueError, TypeError):  # the tab says what is wrong
        return None


@functools.lru_cache(maxsize=32)
def _still_map(n: int, br: int, bc: int, causal: bool, window: tuple[int, int] | None, loop_orders: tuple[str, ...],
               d: int, dtype_bytes: int, row: int | None, frame: int) -> str:
    traces = [schedule_trace(n, br, bc, causal=causal, window=window, loop_order=order, d=d, dtype_bytes=dtype_bytes)
              for order in loop_orders]
    return tile_map_html(traces, row=row, start_frame=start_frame(frame, len(traces[0].computed_steps())), still=True)


def page_html(index: str, query: str, env: Env | None = None) -> str:
    """Streamlit's index.html with the first page's map in it for the URL's query string, where that map is what
    the dashboard's first run will draw (see the module's docstring); else index unchanged. env: the machine, as the
    dashboard parses the URL for it (threads and devices; None: one with 2 threads and no GPU). Never raises on a
    query."""
    if _ROOT not in index:
        return index
    try:
        params = parse_qs(query, keep_blank_values=True, max_num_fields=QUERY_MAX_FIELDS)
    except ValueError:  # too many fields
        return index
    settings, notices = parse_query(params, env)
    if notices or settings.view != "how":
        return index
    still = first_page_map(settings)
    return index if still is None else index.replace(_ROOT, copy_html(still) + _ROOT, 1)


def copy_html(still: str) -> str:
    """The map's markup (first_page_map) as the page's early copy: one element, placed where the first page draws the
    map, holding its own style, the compact title's (so the title Streamlit draws above it has its final size from
    the start) and the script that removes it, all of it, when the dashboard's own map arrives."""
    return (
        f'<div id="{COPY_ID}" aria-hidden="true">'
        f"<style>#{COPY_ID}{{position:fixed;top:{MAP_TOP_PX}px;left:{MAP_LEFT_PX}px;right:{MAP_RIGHT_PX}px;z-index:1;"
        "pointer-events:none;background:#fff;font-size:18px;line-height:1.6;"
        f"animation:fv-first-page-out 0s {COPY_MAX_S}s forwards}}"
        "@keyframes fv-first-page-out{to{visibility:hidden}}"
        f"@media (max-width:{MIN_WINDOW_PX - 0.02}px){{#{COPY_ID}{{display:none}}}}</style>"
        f"{COMPACT_HEADER_CSS}{still}"
        "<script>(() => {"
        f'const copy = document.getElementById("{COPY_ID}");'
        "const watch = new MutationObserver(() => {"
        'const map = document.querySelector("#root .fv-tilemap");'
        'if (!map && !document.querySelector("#root [data-testid=stException], [role=dialog]")) return;'
        "copy.remove(); watch.disconnect();"
        f'document.documentElement.setAttribute("{DONE_ATTR}", map ? "map" : "error");'
        "});"
        "watch.observe(document.documentElement, {childList: true, subtree: true});"
        "})();</script></div>"
    )


def routes() -> list[Any]:
    """The HTTP route app.py adds to Streamlit's: its page (static/index.html, the app's root URL) with the first
    page's map in it (page_html). Any failure serves Streamlit's page unchanged: the copy must never cost the page."""
    from starlette.responses import HTMLResponse
    from starlette.routing import Route
    from streamlit import config, file_util

    from flashviz.ui.common import cpu_cores, torch_build_has_gpu

    index = Path(file_util.get_static_dir(), "index.html").read_text(encoding="utf-8")
    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    # The machine as the dashboard sees it (common.machine_env), without importing torch (2-3 s before the server
    # could answer): a GPU build may have CUDA. Where it has none and a link asks for it, the page repairs the link
    # above the map, which then comes a line lower than the copy.
    env = Env(max_threads=cpu_cores(), devices=("cpu", "cuda") if torch_build_has_gpu() is not False else ("cpu",))

    def page(request: Any) -> HTMLResponse:  # a plain function: Starlette runs it in a worker thread
        try:
            html = page_html(index, request.url.query, env)
        except Exception:  # a bug here must not take the page down
            _LOG.exception("the first page's map could not be added to the page")
            html = index
        return HTMLResponse(html, headers={"Cache-Control": "no-cache"})  # as Streamlit serves its HTML

    return [Route(f"/{base}/" if base else "/", page, methods=["GET"])]
