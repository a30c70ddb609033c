"""The Backward view (?view=backward) in a real browser: `streamlit run` + Debian's headless Chromium via playwright.

Checks what only a browser can: at 1280 x 720 the backward's tile map, its counters and Play show without scrolling
and nothing is wider than the window; Play animates the map (the frame on screen, read from the CSS animation's
state, moves on); the measured price's plotly chart draws with no two labels overlapping. Screenshots go to
artifacts/screenshots/.
"""

from __future__ import annotations

import re

import pytest
from load import PAGE_END  # benchmarks/ is on pytest's pythonpath (pyproject.toml)

from tests._browser import LOAD_MS, SHOTS, settle

pytestmark = pytest.mark.browser

WIDTH, HEIGHT = 1280, 720  # a classroom projector's window
MAP = ".fv-backward"
VISIBLE_FRAME = """() => {
    const grid = document.querySelector('.fv-backward svg.fv-grid');
    const shown = [...grid.querySelectorAll('g.fr')].filter(g => getComputedStyle(g).visibility === 'visible');
    return shown.map(g => [...g.querySelectorAll('text')].map(t => t.textContent).join(' | '));
}"""
TOO_WIDE = """(width) => [...document.querySelectorAll('[data-testid="stMain"] *')]
    .filter(e => !e.closest('.katex-mathml') && !e.ownerSVGElement)  // hidden MathML; clipped by their <svg>
    .map(e => [e, e.getBoundingClientRect()])
    .filter(([e, b]) => b.width > 0 && (b.right > width + 1 || b.left < -1))
    .map(([e, b]) => e.tagName + '.' + (e.getAttribute('class') || '') + ' ' + Math.round(b.left) + '..' +
         Math.round(b.right))"""
CHART_LABELS = """() => [...document.querySelectorAll('.js-plotly-plot .main-svg text')]
    .filter(t => t.textContent.trim() && getComputedStyle(t).visibility !== 'hidden')
    .map(t => { const b = t.getBoundingClientRect(); return [t.textContent, b.left, b.top, b.right, b.bottom]; })
    .filter(([s, l, t, r, b]) => r - l > 0 && b - t > 0)"""


def open_view(browser, server: str, query: str):
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    page.goto(f"{server}/?view=backward&{query}")
    page.wait_for_selector("[data-testid='stApp'][data-test-connection-state='CONNECTED']", timeout=LOAD_MS)
    page.wait_for_selector(PAGE_END, state="attached", timeout=LOAD_MS)  # the page's last element: all drawn
    settle(page)
    return page


def frame_on_screen(page) -> str:
    """The counters of the map's first panel in the frame on screen: exactly one frame is visible at a time."""
    shown = page.evaluate(VISIBLE_FRAME)
    assert len(shown) == 1, shown
    return shown[0]


def overlaps(labels: list) -> list[tuple[str, str]]:
    """Pairs of chart labels whose boxes overlap by more than a pixel each way."""
    out = []
    for a in range(len(labels)):
        for b in range(a + 1, len(labels)):
            (s, l1, t1, r1, b1), (u, l2, t2, r2, b2) = labels[a], labels[b]
            if min(r1, r2) - max(l1, l2) > 1 and min(b1, b2) - max(t1, t2) > 1:
                out.append((s, u))
    return out


MAPS = {"atomic": "", "both": "dq=both", "pass-2": "dq=deterministic&bwframe=15"}  # the map's three layouts


@pytest.mark.parametrize("layout", list(MAPS))
def test_the_map_its_counters_and_play_fit_1280x720_and_play_animates(browser, streamlit_server, layout):
    page = open_view(browser, streamlit_server, MAPS[layout])
    try:
        page.wait_for_selector(f"{MAP} svg.fv-grid")
        assert page.evaluate("window.scrollY") == 0
        grid = page.locator(f"{MAP} svg.fv-grid").first
        boxes = {"grid": grid.locator("rect").first.bounding_box(),  # the grid's background, under the tiles
                 "counters": grid.locator("g.fr text.counter").first.bounding_box(),
                 "last counter": grid.locator("g.fr text.counter").nth(3).bounding_box(),
                 "play": page.locator(f"{MAP} label.fv-playlabel").first.bounding_box()}
        for name, box in boxes.items():
            assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= HEIGHT, (name, box)
            assert box["x"] >= 0 and box["x"] + box["width"] <= WIDTH, (name, box)
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
        assert page.evaluate(TOO_WIDE, WIDTH) == []
        page.screenshot(path=str(SHOTS / f"backward-{layout}-1280x720.png"))
        before = frame_on_screen(page)
        page.locator(f"{MAP} label.fv-playlabel").first.click()
        page.wait_for_function(f"() => ({VISIBLE_FRAME})()[0] !== {before!r}", timeout=20_000)
        after = frame_on_screen(page)
        tile = re.compile(r"tile (\d+)/")
        assert int(tile.search(after).group(1)) > int(tile.search(before).group(1)), (before, after)
        assert page.locator("[data-testid='stException']").count() == 0
    finally:
        page.close()


def test_the_measured_price_chart_draws_with_no_overlapping_labels(browser, streamlit_server):
    page = open_view(browser, streamlit_server, "n=128&d=16&br=32&bc=32&heads=1&reps=1")
    try:
        page.get_by_role("button", name="Run forward + backward").click()
        page.wait_for_selector("text=Backward price: done", timeout=LOAD_MS)
        settle(page)
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 1", timeout=LOAD_MS)
        chart = page.locator(".js-plotly-plot").first
        chart.scroll_into_view_if_needed()
        page.wait_for_timeout(1000)
        chart.screenshot(path=str(SHOTS / "backward-price-1280x720.png"))
        labels = page.evaluate(CHART_LABELS)
        texts = " ".join(s for s, *_ in labels)
        assert "peak memory" in texts and "tiled" in texts
        assert overlaps(labels) == []
        box = chart.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= WIDTH
        assert page.locator("[data-testid='stException']").count() == 0
    finally:
        page.close()
