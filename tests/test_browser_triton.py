"""The Triton kernel view (?view=triton) in a real browser: `streamlit run` + Debian's headless Chromium.

Checks what only a browser can: ▶ Play runs by itself (a Streamlit fragment that reruns every 0.8 s), moving the
marked line of the kernel's source and the slider on, step after step, and pauses; at 1280 x 720 nothing is wider
than the window and no chart label overlaps another. Screenshots go to artifacts/screenshots/.
"""

from __future__ import annotations

import pytest
from load import PAGE_END  # benchmarks/ is on pytest's pythonpath (pyproject.toml)

from tests._browser import LABEL_BOXES, LOAD_MS, SHOTS, label_problems, settle

pytestmark = pytest.mark.browser

WIDTH, HEIGHT = 1280, 720  # a classroom projector's window
RUNNING = "() => { const r = document.querySelector('.fv-source .fv-run'); return r ? r.textContent : null; }"
STEP = "() => document.querySelector('.st-key-triton_step input[type=range]').value"
TOO_WIDE = """(width) => [...document.querySelectorAll('[data-testid="stMain"] *')]
    .filter(e => !e.ownerSVGElement && !e.closest('.fv-source'))  // the source scrolls sideways in its own box
    .map(e => [e, e.getBoundingClientRect()])
    .filter(([e, b]) => b.width > 0 && (b.right > width + 1 || b.left < -1))
    .map(([e, b]) => e.tagName + '.' + (e.getAttribute('class') || ''))"""


def test_play_walks_the_program_line_by_line_and_pauses(browser, streamlit_server):
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    try:
        page.goto(f"{streamlit_server}/?view=triton&trn=200&trprog=3")
        page.wait_for_selector("[data-testid='stApp'][data-test-connection-state='CONNECTED']", timeout=LOAD_MS)
        page.wait_for_selector(PAGE_END, state="attached", timeout=LOAD_MS)
        settle(page)
        assert page.evaluate(STEP) == "1"
        first = page.evaluate(RUNNING)
        assert "q = tl.load(Q + head" in first
        page.locator(".st-key-triton_play button").first.click()
        page.wait_for_function(f"() => Number(({STEP})()) >= 4", timeout=60_000)  # three steps on by itself
        seen = page.evaluate(RUNNING)
        assert seen != first and ("tl.load" in seen or "tl.dot" in seen)
        page.screenshot(path=str(SHOTS / f"view-triton-play-{WIDTH}x{HEIGHT}.png"))
        page.locator(".st-key-triton_play button").first.click()  # pause
        settle(page)
        paused = page.evaluate(STEP)
        page.wait_for_timeout(2500)  # three Play periods: a paused loop stays where it is
        assert page.evaluate(STEP) == paused
        assert page.evaluate(TOO_WIDE, WIDTH) == []
        assert label_problems(page.evaluate(LABEL_BOXES)) == []
    finally:
        page.close()
