"""The dashboard in a real browser: `streamlit run` + Debian's headless Chromium, driven by playwright.

Checks what only a browser can: the page loads, the tile map (SVG + CSS) and plotly's charts are drawn, Play
advances the animation and Pause holds it, a control change redraws a chart, and no exception box appears.
Screenshots go to artifacts/screenshots/ (CI artifacts).
"""

from __future__ import annotations

import re

import pytest
from load import PAGE_END  # benchmarks/ is on pytest's pythonpath (pyproject.toml)

from tests._browser import LOAD_MS, SHOTS, settle

pytestmark = pytest.mark.browser


def open_page(browser, url: str, *, height: int = 1400, width: int = 1500):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(url)
    page.wait_for_selector("[data-testid='stApp'][data-test-connection-state='CONNECTED']", timeout=LOAD_MS)
    page.wait_for_selector(PAGE_END, state="attached", timeout=LOAD_MS)  # the page's last element: all drawn
    settle(page)
    return page


def wait_charts(page, n: int) -> None:
    """Wait until plotly has drawn at least n charts (its bundle loads lazily after the script run)."""
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {n}",
                           timeout=LOAD_MS)
    page.wait_for_timeout(500)


TILE_MAP = ".fv-tilemap svg.fv-grid"  # a panel of the tile map (flashviz.figures.tilemap)
VISIBLE_FRAME_TEXT = """() => {
    const frames = [...document.querySelectorAll('.fv-tilemap svg.fv-grid')[0].querySelectorAll('g.fr')];
    const shown = frames.filter(g => getComputedStyle(g).visibility === 'visible');
    return shown.map(g => [...g.querySelectorAll('text')].map(t => t.textContent).join(' ')).join(' | ');
}"""


def counter_text(page) -> str:
    """The counter over the tile map's first panel in the frame on screen ('FA1 tile k/K: i=.., j=.. HBM traffic
    so far ...'): exactly one frame is visible at a time."""
    text = page.evaluate(VISIBLE_FRAME_TEXT)
    assert text and " | " not in text, text
    return text


def play(page) -> None:
    page.locator(".fv-tilemap label.fv-playlabel").first.click()


def test_page_loads_charts_render_and_play_runs_the_animation(browser, streamlit_server):
    page = open_page(browser, streamlit_server)
    try:
        page.wait_for_selector(TILE_MAP)
        wait_charts(page, 1)  # the row inspector (plotly)
        assert page.get_by_text("Tile map of S = QK").count() >= 1
        before = counter_text(page)
        assert re.search(r"tile 1/\d+:", before)
        page.screenshot(path=str(SHOTS / "01-how-it-works.png"), full_page=True)
        play(page)
        page.wait_for_timeout(2500)
        after = counter_text(page)
        assert after != before and int(re.search(r"tile (\d+)/", after).group(1)) > 1
        play(page)  # the same control pauses
        paused = counter_text(page)
        page.wait_for_timeout(1200)
        assert counter_text(page) == paused  # Pause holds the frame
        assert page.locator(".fv-tilemap label.fv-playlabel").first.inner_text().strip() == "▶ Play"  # shown again
        page.screenshot(path=str(SHOTS / "02-playing-paused.png"), full_page=True)
        assert page.locator("[data-testid='stException']").count() == 0
    finally:
        page.close()


FIT_QUERIES = {"one panel": "", "two panels": "n=16&d=8&br=4&bc=4&causal=1&order=both"}


@pytest.mark.parametrize("size", [(1280, 720), (1440, 900)], ids=["1280x720", "1440x900"])
@pytest.mark.parametrize("panels", list(FIT_QUERIES))
def test_how_it_works_shows_grid_counters_and_play_without_scrolling(browser, streamlit_server, size, panels):
    width, height = size
    page = open_page(browser, f"{streamlit_server}/?{FIT_QUERIES[panels]}", width=width, height=height)
    try:
        page.wait_for_selector(TILE_MAP)
        assert page.evaluate("window.scrollY") == 0
        grid = page.locator(TILE_MAP).first
        boxes = {"grid": grid.locator("rect").first.bounding_box(),  # the grid's background, under the tiles
                 "counter": grid.locator("g.fr text").first.bounding_box(),
                 "play": page.locator(".fv-tilemap label.fv-playlabel").first.bounding_box()}
        for name, box in boxes.items():
            assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height, (name, box, size)
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, (name, box, size)
        page.screenshot(path=str(SHOTS / f"fit-{panels.replace(' ', '-')}-{width}x{height}.png"))
    finally:
        page.close()


def test_changing_controls_redraws_the_tile_map(browser, streamlit_server):
    page = open_page(browser, streamlit_server + "/?n=256&br=32&bc=32")
    try:
        page.wait_for_selector(TILE_MAP)
        assert "no mask" in page.locator(".fv-tilemap .fv-sub").first.text_content()
        page.get_by_text("Causal mask", exact=True).click()  # the toggle's label
        settle(page)
        assert "causal" in page.locator(".fv-tilemap .fv-sub").first.text_content()
        assert re.search(r"tile 1/36:", counter_text(page))  # 8 x 8 tiles, 36 of them under the diagonal
        slider = page.get_by_role("slider", name="Sequence length N")
        slider.focus()
        slider.press("ArrowRight")  # 256 -> 257: an odd size, a ragged last tile
        settle(page)
        assert "N = 257" in page.locator(".fv-tilemap .fv-sub").first.text_content()
        assert "n=257" in page.url and "causal=1" in page.url  # the link reproduces the view
        page.screenshot(path=str(SHOTS / "03-causal-n257.png"), full_page=True)
        assert page.locator("[data-testid='stException']").count() == 0
    finally:
        page.close()


def test_every_view_and_a_hostile_link_render_without_an_exception_box(browser, streamlit_server):
    query = "n=-5&d=%F0%9F%99%82&causal=maybe&view=bench&ns=64,128&reps=1&impls=naive,flash2,sdpa&blocks=16,32"
    page = open_page(browser, f"{streamlit_server}/?{query}", height=2400)
    try:
        assert page.get_by_text("Some settings in this link were adjusted").count() == 1
        page.get_by_role("button", name="Run benchmark").click()
        page.wait_for_selector("text=Benchmark sweep: done", timeout=LOAD_MS)
        settle(page)
        wait_charts(page, 4)
        page.screenshot(path=str(SHOTS / "04-benchmark.png"), full_page=True)
        for i, name in enumerate(["Block size", "IO model", "Correctness", "Training", "How it works"]):
            page.get_by_role("radiogroup", name="View").get_by_role("radio", name=name, exact=True).click()
            settle(page)
            page.screenshot(path=str(SHOTS / f"{5 + i:02d}-{name.lower().replace(' ', '-')}.png"), full_page=True)
            assert page.locator("[data-testid='stException']").count() == 0, name
        assert "view=how" in page.url
    finally:
        page.close()


def test_a_setting_change_during_a_run_leaves_a_still_running_box_with_cancel(browser, streamlit_server):
    query = "view=bench&ns=1024,2048&impls=flash,flash2&bblock=16&reps=10&d=64"  # many small tiles: a slow run
    page = open_page(browser, f"{streamlit_server}/?{query}")
    try:
        page.get_by_role("button", name="Run benchmark").click()
        page.wait_for_selector("text=/timing|memory of/", timeout=LOAD_MS)  # the worker is measuring
        page.get_by_text("Causal mask").click()  # reruns the script; the worker goes on
        page.wait_for_selector("text=is still running", timeout=LOAD_MS)
        page.screenshot(path=str(SHOTS / "11-still-running.png"), full_page=True)
        page.get_by_role("button", name="Cancel the run").click()
        page.wait_for_selector("text=Cancelled", timeout=60_000)
        assert page.get_by_text("is still running").count() == 0
        assert page.locator("[data-testid='stException']").count() == 0
    finally:
        page.close()


NEW_VIEWS = [  # (link, charts plotly must draw, text the page must show)
    ("view=roof", 1, "Predicted on a GPU, measured here"),
    ("view=decode&decpage=64&dechq=32&dechkv=8&declens=ragged&declen=4096&decsplits=3", 2,
     "Why decoding is memory-bound"),
    ("view=masks", 2, "Equal to create_block_mask"),
]


@pytest.mark.parametrize("query,charts,text", NEW_VIEWS, ids=["roofline", "decoding", "masks"])
def test_roofline_decoding_and_masks_views_draw_in_a_real_browser(browser, streamlit_server, query, charts, text):
    page = open_page(browser, f"{streamlit_server}/?{query}", height=2400)
    try:
        wait_charts(page, charts)
        assert page.get_by_text(text).count() >= 1
        if "decode" in query:  # the decode step animates: Play moves its slider off the first frame
            before = page.locator(".slider-container .slider-label").first.text_content()
            page.locator(".updatemenu-button").filter(has_text="Play").first.click()
            page.wait_for_timeout(2500)
            assert page.locator(".slider-container .slider-label").first.text_content() != before
        page.screenshot(path=str(SHOTS / f"{query.split('&')[0].split('=')[1]}.png"), full_page=True)
        assert page.locator("[data-testid='stException']").count() == 0
    finally:
        page.close()
