"""The whole in-app lesson in a real browser at 1280 x 720, a projector's size: `streamlit run` + Debian's headless
Chromium, one page walked from `?lesson=intro` to the last step with Next.

Every step opens as its slide, at the top: the sidebar collapsed, the step's callout (its number, title and claim), the
numbers the claim states (metrics) and its one picture all inside the window without scrolling, no label of the picture
over another or cut by its edge, nothing wider than the window, no exception box. PageDown and PageUp, a presenter's
clicker keys, move steps wherever the page was scrolled, from a slide and from a step's full view (Explore this view);
the step they open shows its claim, numbers and picture in the window (a slide can scroll only through Streamlit's own
padding under the page, STREAMLIT_FLOOR_PX, and a scroll there is kept by the next step: its size is measured and
recorded). The arrow keys move steps as PageDown / PageUp do. Leave brings the sidebar back.
Screenshots of every slide go to artifacts/screenshots/.
"""

from __future__ import annotations

import pytest
from load import PAGE_END  # benchmarks/ is on pytest's pythonpath (pyproject.toml)

from flashviz.lesson.steps import INTRO
from tests._browser import LABEL_BOXES, LOAD_MS, SHOTS, label_problems, settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WIDTH, HEIGHT = 1280, 720
CALLOUT = "[data-testid='stAlert']:has-text('Step {k} of {n} ·')"  # the presenter's callout of step k of n
METRICS = "[data-testid='stMetric']"  # the numbers the claim states
PICTURE = ".js-plotly-plot"  # the slide's one picture
STREAMLIT_FLOOR_PX = 200  # most a slide can scroll: Streamlit's own padding under a page (about 160 px in 1.67),
# which an app cannot remove without styling Streamlit's markup; a scroll there persists into the next step


def on_step(page, k: int) -> None:
    """Wait until the page presents step k (the URL says so and the run is complete)."""
    page.wait_for_function(f"new URLSearchParams(location.search).get('step') === '{k}'", timeout=LOAD_MS)
    settle(page)


def boxes(page, selector: str) -> list[dict]:
    page.locator(selector).first.wait_for(state="attached", timeout=LOAD_MS)
    return [b for b in (loc.bounding_box() for loc in page.locator(selector).all()) if b is not None]


def inside(box: dict) -> bool:
    """Whole inside the window."""
    return box["y"] >= 0 and box["y"] + box["height"] <= HEIGHT and box["x"] >= 0 and \
        box["x"] + box["width"] <= WIDTH + 0.5


def fits_the_width(page) -> list[str]:
    """What is wider than the window: the page, its main area, a chart or a callout (empty when nothing)."""
    return page.evaluate("""() => {
        const out = [];
        if (document.documentElement.scrollWidth > innerWidth) out.push('page');
        for (const m of document.querySelectorAll("[data-testid='stMain']"))
            if (m.scrollWidth > m.clientWidth) out.push('main area');
        for (const e of document.querySelectorAll('.js-plotly-plot, [data-testid=stAlert]'))
            if (e.getBoundingClientRect().right > innerWidth + 0.5) out.push(e.className.baseVal ?? e.className);
        return out; }""")


def main_scroll(page) -> float:
    """How far the page's main area (Streamlit's scrolling container) is scrolled down, px."""
    return page.evaluate("document.querySelector(\"[data-testid='stMain']\").scrollTop")


def scroll_down(page, px: int) -> float:
    """Scroll the main area down as a student would (the mouse wheel over it); returns how far it went."""
    page.mouse.move(WIDTH / 2, HEIGHT / 2)
    page.mouse.wheel(0, px)
    page.wait_for_timeout(500)
    return main_scroll(page)


def sidebar_collapsed(page) -> bool:
    return page.locator("[data-testid='stSidebar']").first.get_attribute("data-collapsed") == "true"


def slack(page) -> float:
    """How far the page's main area can scroll at all, px."""
    return page.evaluate("(m => m.scrollHeight - m.clientHeight)(document.querySelector(\"[data-testid='stMain']\"))")


def assert_slide(page, k: int, *, at_top: bool = True) -> None:
    """Step k's slide: its callout, its numbers and its picture inside the window; at the top, or (after a scroll)
    at most Streamlit's own padding down."""
    step, n = INTRO.steps[k - 1], len(INTRO.steps)
    page.wait_for_selector(f"{PICTURE} .main-svg", timeout=LOAD_MS)
    page.wait_for_timeout(500)
    assert sidebar_collapsed(page), k
    assert slack(page) <= STREAMLIT_FLOOR_PX, (k, slack(page))  # the slide itself fits; the rest is padding
    assert main_scroll(page) == 0 if at_top else main_scroll(page) <= STREAMLIT_FLOOR_PX, (k, main_scroll(page))
    (callout,) = boxes(page, CALLOUT.format(k=k, n=n))
    assert inside(callout), (k, callout)
    assert page.get_by_text(step.text[:60]).count() == 1  # its claim, as the data says it
    metrics = boxes(page, METRICS)
    assert len(metrics) == len(step.numbers) and all(inside(b) for b in metrics), (k, metrics)
    for label, value in step.figures(step.stated):  # the numbers it states, as the check computed them
        assert page.locator(METRICS).filter(has_text=label).filter(has_text=value).count() == 1, (k, label, value)
    (picture,) = boxes(page, PICTURE)
    assert inside(picture), (k, picture)
    assert label_problems(page.evaluate(LABEL_BOXES)) == [], k  # no label of the picture over another or cut
    assert fits_the_width(page) == [], k
    assert page.locator("[data-testid='stException']").count() == 0, k


def test_every_step_is_a_slide_that_fits_a_projector(browser, streamlit_server):
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    try:
        page.goto(f"{streamlit_server}/?lesson={INTRO.slug}")
        page.wait_for_selector(PAGE_END, state="attached", timeout=LOAD_MS)
        for k in range(1, len(INTRO.steps) + 1):
            on_step(page, k)
            assert_slide(page, k)
            page.screenshot(path=str(SHOTS / f"lesson-step-{k:02d}-{WIDTH}x{HEIGHT}.png"))
            if k < len(INTRO.steps):
                page.get_by_role("button", name="Next ▶").click()
    finally:
        page.close()


def test_the_arrow_keys_move_steps_and_the_offset_a_wheel_scroll_leaves(browser, streamlit_server, record_property):
    """ArrowRight / ArrowDown go on and ArrowLeft / ArrowUp back, as PageDown / PageUp do, after a mouse-wheel scroll.
    The step they open keeps the scroll (Streamlit keeps a page's scroll across reruns, and its public API cannot
    scroll): only Streamlit's padding under the slide, which the test measures and records (`scroll_offset_px`)."""
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    try:
        page.goto(f"{streamlit_server}/?lesson={INTRO.slug}&step=2")
        page.wait_for_selector(PAGE_END, state="attached", timeout=LOAD_MS)
        on_step(page, 2)
        offsets = []
        for key, k in (("ArrowRight", 3), ("ArrowDown", 4), ("ArrowLeft", 3), ("ArrowUp", 2)):
            scroll_down(page, 400)  # the mouse wheel over the slide
            page.keyboard.press(key)
            on_step(page, k)
            assert_slide(page, k, at_top=False)  # its callout, numbers and picture in the window
            offsets.append(main_scroll(page))
        record_property("scroll_offset_px", offsets)
        print(f"scroll offset after a wheel scroll, steps 3, 4, 3, 2: {offsets} px")
        assert all(0 < o <= STREAMLIT_FLOOR_PX for o in offsets), offsets  # the padding, no further
    finally:
        page.close()


def test_the_keyboard_moves_steps_wherever_the_page_was_scrolled(browser, streamlit_server):
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    try:
        page.goto(f"{streamlit_server}/?lesson={INTRO.slug}&step=2")
        page.wait_for_selector(PAGE_END, state="attached", timeout=LOAD_MS)
        on_step(page, 2)
        scroll_down(page, 400)  # whatever a slide leaves to scroll (Streamlit's padding under the page)
        page.keyboard.press("PageDown")  # a presenter's clicker
        on_step(page, 3)
        assert_slide(page, 3, at_top=False)  # a slide is not taller than the window: only the padding scrolled
        scroll_down(page, -400)
        page.get_by_role("button", name="Explore this view").click()  # How it works: a long page
        settle(page)
        assert page.locator(CALLOUT.format(k=3, n=len(INTRO.steps))).count() == 1
        assert scroll_down(page, 1500) > 300  # the student scrolled down the full view
        page.keyboard.press("PageDown")
        on_step(page, 4)
        assert_slide(page, 4, at_top=False)  # the next step opens as its slide, its claim and picture on screen
        page.keyboard.press("PageUp")
        on_step(page, 3)
        assert_slide(page, 3, at_top=False)
        page.get_by_role("button", name="✕ Leave the lesson").click()
        page.wait_for_function("!new URLSearchParams(location.search).has('lesson')", timeout=LOAD_MS)
        settle(page)
        assert not sidebar_collapsed(page) and "step=" not in page.url and "n=16" in page.url
        assert page.locator(CALLOUT.format(k=3, n=len(INTRO.steps))).count() == 0
    finally:
        page.close()
