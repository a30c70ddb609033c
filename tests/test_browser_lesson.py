"""The whole in-app lesson in a real browser at 1280 x 720, a projector's size: `streamlit run` + Debian's headless
Chromium, one page walked from `?lesson=intro` to the last step with Next.

At every step: the sidebar is collapsed, the step's callout (its number, title and claim) is on screen whole, the
start of the step's main result is on screen without scrolling, nothing is wider than the window, and no exception
box appears. Step 7 presses Run benchmark (its Try) and waits for the memory chart. PageDown, a presenter's clicker
key, moves on like Next; Leave brings the sidebar back. Screenshots of every step go to artifacts/screenshots/.
"""

from __future__ import annotations

import re

import pytest
from load import PAGE_END  # benchmarks/ is on pytest's pythonpath (pyproject.toml)

from flashviz.lesson.steps import INTRO
from tests._browser import LOAD_MS, SHOTS, settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WIDTH, HEIGHT = 1280, 720
MIN_VISIBLE_PX = 24  # a result "starts" on screen when at least its first line of text (24 px) is above the fold
RESULTS = {  # the start of each step's main result, by what the page draws there (own markup, text and roles)
    "tiles_fate": ".fv-tilemap .fv-title",
    "online_softmax": "role=heading[name='Row inspector: the online softmax of one query row']",
    "causal_halves": ".fv-tilemap .fv-sub",  # '... 256 tiles, 136 computed · causal'
    "masks_tiles": ".js-plotly-plot",  # the element mask and the tile map, side by side
    "io_passes": ".js-plotly-plot",
    "roofline_gpu": ".js-plotly-plot",
    "memory_growth": "role=button[name='▶ Run benchmark']",  # the results are drawn under it
    "training_recompute": "th:has-text('saved for the backward pass')",
    "decode_merge": "text=/^Sequence 0 holds/",  # the splits, then the animation
    "gqa_bytes": "role=heading[name='Why decoding is memory-bound']",
    "backward_recompute": ".fv-bw-head",  # the backward map's header, the map under it
    "numerics_rounding": "role=heading[name='1. Every kernel errs: by how much?']",
}
BELOW_THE_FOLD = {  # steps whose result the page draws lower than a 720 px window shows, and what it needs
    "online_softmax": "How it works draws the row inspector after the tile map, its controls, the HBM metrics and "
                      "the introduction (about 1,650 px down)",
    "training_recompute": "Training draws what each implementation keeps after the sweep's controls, its Run button "
                          "and what the run measured (about 850 px down)",
    "decode_merge": "Decoding draws the splits' merge weights after its controls and the 820 px animation (about "
                    "1,500 px down)",
    "gqa_bytes": "Decoding draws 'Why decoding is memory-bound' after the 820 px animation (about 1,900 px down)",
}
CALLOUT = "[data-testid='stAlert']:has-text('Step {k} of {n} ·')"  # the presenter's callout of step k of n
CHARTS_DRAWN = {"masks_tiles", "io_passes", "roofline_gpu"}  # plotly charts: wait until plotly has drawn them


def on_step(page, k: int) -> None:
    """Wait until the page presents step k (the URL says so and the run is complete)."""
    page.wait_for_function(f"new URLSearchParams(location.search).get('step') === '{k}'", timeout=LOAD_MS)
    settle(page)


def box_of(page, selector: str) -> dict:
    loc = page.locator(selector).first
    loc.wait_for(state="attached", timeout=LOAD_MS)
    box = loc.bounding_box()
    assert box is not None, selector
    return box


def fits_the_width(page) -> list[str]:
    """What is wider than the window: the page, its main area, a chart or the tile map (empty when nothing)."""
    return page.evaluate("""() => {
        const out = [];
        if (document.documentElement.scrollWidth > innerWidth) out.push('page');
        for (const m of document.querySelectorAll("[data-testid='stMain']"))
            if (m.scrollWidth > m.clientWidth) out.push('main area');
        for (const e of document.querySelectorAll('.js-plotly-plot, .fv-tilemap svg, [data-testid=stAlert]'))
            if (e.getBoundingClientRect().right > innerWidth + 0.5) out.push(e.className.baseVal ?? e.className);
        return out; }""")


def main_scroll(page) -> float:
    """How far the page's main area (Streamlit's scrolling container) is scrolled down, px."""
    return page.evaluate("document.querySelector(\"[data-testid='stMain']\").scrollTop")


def to_top(page) -> None:
    """Scroll the main area back to the top, as a teacher does to reach Next."""
    page.evaluate("document.querySelector(\"[data-testid='stMain']\").scrollTo(0, 0)")
    page.wait_for_timeout(200)


def sidebar_collapsed(page) -> bool:
    return page.locator("[data-testid='stSidebar']").first.get_attribute("data-collapsed") == "true"


def test_the_whole_lesson_fits_a_projector_step_by_step(browser, streamlit_server):
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    below = {}
    try:
        page.goto(f"{streamlit_server}/?lesson={INTRO.slug}")
        page.wait_for_selector(PAGE_END, state="attached", timeout=LOAD_MS)
        for k, step in enumerate(INTRO.steps, 1):
            name = step.check
            on_step(page, k)
            if name in CHARTS_DRAWN:
                page.wait_for_selector(".js-plotly-plot .main-svg", timeout=LOAD_MS)
                page.wait_for_timeout(500)
            assert main_scroll(page) == 0 and sidebar_collapsed(page), k
            callout = box_of(page, CALLOUT.format(k=k, n=len(INTRO.steps)))
            assert callout["y"] >= 0 and callout["y"] + callout["height"] <= HEIGHT, (k, callout)
            assert page.get_by_text(step.text[:60]).count() == 1  # its claim, as the data says it
            assert name in RESULTS, f"step {k}: add where its result starts on the page to RESULTS"
            result = box_of(page, RESULTS[name])
            on_screen = result["y"] >= 0 and result["y"] + MIN_VISIBLE_PX <= HEIGHT
            if not on_screen:
                below[name] = round(result["y"])
            assert fits_the_width(page) == [], k
            assert page.locator("[data-testid='stException']").count() == 0, k
            page.screenshot(path=str(SHOTS / f"lesson-step-{k:02d}-{WIDTH}x{HEIGHT}.png"))
            if name == "memory_growth":  # the step's Try: the run, then its memory chart
                page.get_by_role("button", name=re.compile("Run benchmark")).click()
                page.wait_for_selector("text=Benchmark sweep: done", timeout=LOAD_MS)
                page.get_by_text("Peak memory vs sequence length").first.wait_for(timeout=LOAD_MS)
                settle(page)
                to_top(page)
            if k < len(INTRO.steps):
                page.get_by_role("button", name="Next ▶").click()
        assert below.keys() == BELOW_THE_FOLD.keys(), (
            f"results below a 720 px window: {below} (BELOW_THE_FOLD lists the ones the pages still draw too low; "
            "a step whose result came up can leave that list)")
    finally:
        page.close()


def test_pagedown_moves_on_and_leave_brings_the_sidebar_back(browser, streamlit_server):
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    try:
        page.goto(f"{streamlit_server}/?lesson={INTRO.slug}&step=2")
        page.wait_for_selector(PAGE_END, state="attached", timeout=LOAD_MS)
        on_step(page, 2)
        page.keyboard.press("PageDown")  # a presenter's clicker
        on_step(page, 3)
        page.keyboard.press("PageUp")
        on_step(page, 2)
        assert sidebar_collapsed(page)
        page.get_by_role("button", name="✕ Leave the lesson").click()
        page.wait_for_function("!new URLSearchParams(location.search).has('lesson')", timeout=LOAD_MS)
        settle(page)
        assert not sidebar_collapsed(page) and "step=" not in page.url and "n=16" in page.url
        assert page.locator(CALLOUT.format(k=2, n=len(INTRO.steps))).count() == 0
    finally:
        page.close()
