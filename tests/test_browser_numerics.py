"""The Numerics view in a real browser (`streamlit run` + Debian's headless Chromium, driven by playwright), at a
classroom projector's 1280 x 720: the controls and the start of the result show without scrolling, nothing is wider
than the window, and no two labels of a chart (ticks, axis titles, legend entries, bar labels, titles) overlap.

Screenshots go to artifacts/screenshots/ (CI artifacts).
"""

from __future__ import annotations

import pytest
from load import CONNECTED, EXCEPTION, IDLE, PAGE_END  # benchmarks/ is on pytest's path

from tests._browser import SHOTS

pytestmark = pytest.mark.browser

LOAD_MS = 240_000  # the first load imports torch in the server: slow on a busy 2-core machine
WIDTH, HEIGHT = 1280, 720
CHARTS = 6  # the view's plotly figures
QUERIES = {"defaults": "view=numerics",
           "fp8, N_q > N_k, causal": "view=numerics&nmdtype=e4m3&nmpdtype=e4m3&nmnq=300&nmnk=100&nmcausal=1&nmtau=16"}
# The text of a plotly chart: tick labels, axis titles, legend entries, bar labels, the title and subtitle, notes.
LABELS_JS = """(chart) => [...chart.querySelectorAll(
    '.xtick text, .ytick text, .g-xtitle text, .g-x2title text, .g-ytitle text, .legendtext, .bartext, ' +
    '.gtitle, .annotation-text')]
    .filter(t => t.textContent.trim() && getComputedStyle(t).visibility !== 'hidden')
    .map(t => { const b = t.getBoundingClientRect();
                return {text: t.textContent, x: b.x, y: b.y, w: b.width, h: b.height}; })"""
OVERLAP_PX = 1.0  # two boxes may touch by this much (anti-aliasing), no more


@pytest.fixture(scope="module", params=list(QUERIES))
def page(request, browser, streamlit_server):
    """The view at 1280 x 720, every chart drawn; its name."""
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    page.goto(f"{streamlit_server}/?{QUERIES[request.param]}")
    page.wait_for_selector(CONNECTED, timeout=LOAD_MS)
    page.wait_for_selector(PAGE_END, state="attached", timeout=LOAD_MS)
    page.wait_for_selector(IDLE, timeout=LOAD_MS)
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {CHARTS}",
                           timeout=LOAD_MS)
    page.mouse.move(5, 5)  # no hover label over the charts
    page.wait_for_timeout(1000)  # plotly's transitions
    yield page, request.param
    page.close()


def box(page, locator: str):
    b = page.locator(locator).first.bounding_box()
    assert b is not None, locator
    return b


def test_the_controls_and_the_start_of_the_result_show_without_scrolling(page):
    page, name = page
    assert page.locator(EXCEPTION).count() == 0
    page.screenshot(path=str(SHOTS / f"numerics-{name.replace(' ', '').replace(',', '-')}-1280x720.png"))
    assert page.evaluate("window.scrollY") == 0
    targets = {"input dtype": ".st-key-input_dtype", "P's dtype": ".st-key-p_dtype", "tile": ".st-key-numerics_block",
               "tau": ".st-key-tau", "N_q": ".st-key-n_q", "N_k": ".st-key-n_k", "Hadamard": ".st-key-hadamard",
               "outliers": ".st-key-outliers", "causal": ".st-key-numerics_causal",
               "ran with": "[data-testid='stCaptionContainer']:has-text('Ran with')",
               "first result": "h4:has-text('1. Every kernel errs')"}
    for what, locator in targets.items():
        b = box(page, locator)
        assert b["y"] >= 0 and b["y"] + b["height"] <= HEIGHT, (what, b)
        assert b["x"] >= 0 and b["x"] + b["width"] <= WIDTH, (what, b)


def test_nothing_is_wider_than_the_window(page):
    page, _ = page
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    widths = page.evaluate("[...document.querySelectorAll('.js-plotly-plot .main-svg, .stMarkdown, "
                           "[data-testid=\"stTable\"]')].map(e => e.getBoundingClientRect().right)")
    assert widths and max(widths) <= WIDTH


def overlaps(a: dict, b: dict) -> float:
    """The overlap of two boxes along the axis where it is smaller (0 when they do not overlap)."""
    dx = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
    dy = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
    return max(0.0, min(dx, dy))


def test_no_two_labels_of_a_chart_overlap(page):
    page, _ = page
    charts = page.locator(".js-plotly-plot")
    assert charts.count() == CHARTS
    for k in range(charts.count()):
        labels = charts.nth(k).evaluate(LABELS_JS)
        assert len(labels) >= 6, labels  # title, ticks, axis titles at least
        clashes = [(a["text"], b["text"]) for i, a in enumerate(labels) for b in labels[i + 1:]
                   if overlaps(a, b) > OVERLAP_PX]
        assert not clashes, (k, clashes)
