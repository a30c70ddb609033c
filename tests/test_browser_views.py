"""Every view of the dashboard on a classroom projector: a real `streamlit run` and Debian's headless Chromium at
1280 x 720, one view after another on one shared server.

For every view in flashviz.app.registry, at its default settings:
- nothing is wider than the window (the page does not scroll sideways, and no element's box passes its right edge);
- the view's main control (its run button, or its map or chart) and the start of its result are within the first
  720 px, without scrolling; for a view with a run button, the result it draws after a press (at small sizes, so the
  test stays short: the layout above the result does not depend on them) starts there too;
- every plotly chart drew data (not just axes), and no two of its labels overlap and none is cut off by the chart's
  edge or its legend's box: the SVG text of axis titles, tick labels, annotations (subplot titles included), legend
  entries, text on the points, and the title and subtitle; no table's text passes its column or the chart's bottom.
Screenshots of each view at 1280 x 720 go to artifacts/screenshots/ (CI artifacts).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from load import CONNECTED, IDLE, PAGE_END  # benchmarks/ is on pytest's pythonpath

from flashviz.app.registry import VIEWS
from tests._browser import LABEL_BOXES, SHOTS, TABLE_TEXT_CUT, label_problems

pytestmark = pytest.mark.browser

WIDTH, HEIGHT = 1280, 720  # a classroom projector's window
LOAD_MS = 240_000  # the first load imports torch in the server: slow on a busy 2-core machine
RUN_MS = 600_000  # a run at the small sizes below, on a machine shared with other work
RESULT_SHOWN_PX = 120  # at least this much of the result is on screen: its start, not a sliver
CHART = ".js-plotly-plot"
TILE_MAP = ".fv-tilemap svg.fv-grid"


@dataclass(frozen=True)
class Layout:
    """Where a view's main control and result are (CSS selectors; charts by the key the view gives them)."""

    control: str  # the main control: the run button, or the map or chart that is the view
    result: str  # the start of the result (before a press: what the page shows in its place)
    run: str = ""  # the query string of a small run; empty: the view has no run button
    after: str = ""  # the result a press draws


def key(name: str) -> str:
    """The element Streamlit draws for a widget or chart with this key."""
    return f".st-key-{name}"


SMALL_RUN = "d=16&heads=1&reps=1"
LAYOUTS = {
    "how": Layout(".fv-tilemap label.fv-playlabel", TILE_MAP),
    "bench": Layout(f"{key('bench_run')} button", "[data-testid='stAlert']", f"ns=128,256,512&bblock=64&{SMALL_RUN}",
                    f"{key('bench_memory')} {CHART}"),
    "block": Layout(f"{key('block_run')} button", "[data-testid='stAlert']", f"n=256&blocks=32,64&{SMALL_RUN}",
                    f"{key('block_figure')} {CHART}"),
    "io": Layout(f"{key('io_hbm_vs_m')} {CHART}", f"{key('io_hbm_vs_m')} .nsewdrag"),
    "correct": Layout(f"{key('correct_run')} button", "[data-testid='stAlert']", "cds=16,59&cns=64,97",
                      "[data-testid='stAlert']:has-text('Largest error')"),  # its verdict, the chart under it
    "train": Layout(f"{key('train_run')} button", "[data-testid='stAlert']", f"ns=128,256&bblock=64&{SMALL_RUN}",
                    f"{key('train_memory')} {CHART}"),
    "roof": Layout(f"{key('roof_chart')} {CHART}", f"{key('roof_chart')} .nsewdrag"),
    "decode": Layout(f"{key('decode_animation')} {CHART}", f"{key('decode_animation')} .nsewdrag"),
    "masks": Layout(f"{key('mask_elements')} {CHART}", f"{key('mask_tiles')} .nsewdrag"),
    "ring": Layout(f"{key('ring_run')} button", f"{key('ring_map')} {CHART}", "rgn=64&rgw=2&rgblock=16&rgheads=1",
                   "[data-testid='stAlert']:has-text('rings in')"),  # its verdict; the map, the run's charts under it
    "triton": Layout(f"{key('triton_play')} button", f"{key('triton_record')} {CHART}"),  # Play; the kernel's record
}
ANY_RESULT = f"{CHART}, {TILE_MAP}, [data-testid='stAlert']"
DEFAULT_LAYOUT = Layout(f"[data-testid='stBaseButton-primary'], {CHART}, {TILE_MAP}", ANY_RESULT)  # a new view


def layout_of(slug: str) -> Layout:
    return LAYOUTS.get(slug, DEFAULT_LAYOUT)


# Boxes of everything in the main column that reaches past the window's edges (elements inside a box that scrolls
# sideways, a table or a code block, are that box's business: the box itself is checked).
WIDE_ELEMENTS = """() => {
    const main = document.querySelector("[data-testid='stMain']");
    const scrolls = el => { const o = getComputedStyle(el).overflowX; return o === 'auto' || o === 'scroll' ||
                                                                             o === 'hidden' || o === 'clip'; };
    const out = [];
    for (const el of main.querySelectorAll('*')) {
        const r = el.getBoundingClientRect();
        if (r.width === 0 || r.height === 0 || (r.right <= innerWidth + 1 && r.left >= -1)) continue;
        let p = el.parentElement, clipped = false;
        while (p && p !== main) { if (scrolls(p)) { clipped = true; break; } p = p.parentElement; }
        if (!clipped) out.push(`${el.tagName}.${el.className.baseVal ?? el.className} [${r.left}, ${r.right}]`);
    }
    return {scrollWidth: document.documentElement.scrollWidth, innerWidth, wide: out.slice(0, 10)};
}"""


# Per plotly chart: whether it drew any data (a bar, a marker, a line, a heatmap's image, a table's cells): a chart
# with only empty axes is a chart whose data plotly could not place (strings on a linear axis, say).
EMPTY_CHARTS = """() => [...document.querySelectorAll('.js-plotly-plot')].filter(plot => {
    const real = p => { const d = p.getAttribute('d'); return d && d !== 'M0,0Z' && !/^M[^LHVCQAZ]*Z?$/.test(d); };
    const marks = [...plot.querySelectorAll('path.point, g.point path, path.js-line, path.js-fill')]
        .filter(p => !p.closest('.legend'));  // the legend draws a symbol for every trace, data or not
    return !(marks.some(real) || plot.querySelector('.heatmaplayer image, g.table .cell-rect'));
}).map(plot => { const h = plot.closest("[class*='st-key-']");
                 return h ? [...h.classList].find(c => c.startsWith('st-key-')) : '(no key)'; })"""


CUT_WIDGET_LABELS = """() => [...document.querySelectorAll('section.main [data-testid=stWidgetLabel], \
[data-testid=stMain] [data-testid=stWidgetLabel]')]
    .filter(l => l.offsetParent !== null)
    .flatMap(l => [l, ...l.querySelectorAll('*')])
    .filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).textOverflow === 'ellipsis')
    .map(e => e.innerText.slice(0, 60))"""  # a label in the main area that its column cuts ("Mask from the Mask...")


def open_view(browser, url: str):
    """A 1280 x 720 page on `url`, once the script run has drawn the whole page and plotly its charts."""
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    page.goto(url)
    page.wait_for_selector(CONNECTED, timeout=LOAD_MS)
    page.wait_for_selector(PAGE_END, state="attached", timeout=LOAD_MS)
    settle(page)
    return page


def settle(page) -> None:
    """Wait until the script run is over and plotly has drawn every chart on the page."""
    page.wait_for_timeout(300)
    page.wait_for_selector(IDLE, timeout=RUN_MS)
    page.wait_for_function("[...document.querySelectorAll('.stPlotlyChart, [data-testid=stPlotlyChart]')]"
                           ".every(c => c.querySelector('.main-svg'))", timeout=LOAD_MS)
    page.wait_for_timeout(1500)  # plotly's transitions and the legend's layout


def top_box(page, selector: str) -> dict:
    """The bounding box of the first visible element that matches, on the unscrolled page."""
    page.evaluate("() => document.querySelectorAll('*').forEach(e => { if (e.scrollTop) e.scrollTop = 0; })")
    loc = page.locator(selector).filter(visible=True).first
    loc.wait_for(state="visible", timeout=LOAD_MS)
    return loc.bounding_box()


def assert_on_screen(page, what: str, selector: str, *, shown: float) -> None:
    """The element's top, and `shown` px of it (or all of it, if shorter), lie within the 1280 x 720 window."""
    box = top_box(page, selector)
    assert box is not None, (what, selector)
    need = min(box["height"], shown)
    assert box["y"] >= 0 and box["y"] + need <= HEIGHT, f"{what} at y = {box['y']:.0f}: below the first {HEIGHT} px"
    assert box["x"] >= 0 and box["x"] + min(box["width"], WIDTH) <= WIDTH, f"{what} is off the side: {box}"


def assert_fits(page, slug: str) -> None:
    """Nothing wider than the window, no chart without data, and no chart label overlapping or cut off."""
    wide = page.evaluate(WIDE_ELEMENTS)
    assert wide["scrollWidth"] <= wide["innerWidth"], f"{slug}: the page scrolls sideways ({wide})"
    assert wide["wide"] == [], f"{slug}: elements wider than the window: {wide['wide']}"
    assert page.evaluate(EMPTY_CHARTS) == [], f"{slug}: charts that drew no data"
    problems = label_problems(page.evaluate(LABEL_BOXES))
    assert problems == [], f"{slug}: {problems}"
    assert page.evaluate(TABLE_TEXT_CUT) == [], f"{slug}: table text cut by its column or the chart's edge"
    assert page.evaluate(CUT_WIDGET_LABELS) == [], f"{slug}: widget labels cut short with an ellipsis"
    assert page.locator("[data-testid='stException']").count() == 0, slug


@pytest.mark.parametrize("slug", [v.slug for v in VIEWS])
def test_a_view_at_its_defaults_fits_a_projector(browser, streamlit_server, slug):
    layout = layout_of(slug)
    page = open_view(browser, f"{streamlit_server}/?view={slug}")
    try:
        page.screenshot(path=str(SHOTS / f"view-{slug}-{WIDTH}x{HEIGHT}.png"))
        assert_on_screen(page, f"{slug}: its main control", layout.control, shown=RESULT_SHOWN_PX)
        assert_on_screen(page, f"{slug}: the start of its result", layout.result, shown=RESULT_SHOWN_PX)
        assert_fits(page, slug)
    finally:
        page.close()


@pytest.mark.parametrize("slug", [v.slug for v in VIEWS if layout_of(v.slug).run])
def test_a_views_result_after_a_run_starts_on_screen(browser, streamlit_server, slug):
    layout = layout_of(slug)
    page = open_view(browser, f"{streamlit_server}/?view={slug}&{layout.run}")
    try:
        page.locator(layout.control).first.click()
        page.wait_for_timeout(500)
        settle(page)
        page.screenshot(path=str(SHOTS / f"view-{slug}-run-{WIDTH}x{HEIGHT}.png"))
        assert_on_screen(page, f"{slug}: its result after a run", layout.after, shown=RESULT_SHOWN_PX)
        assert_fits(page, slug)
    finally:
        page.close()
