"""Take the README's screenshots: one PNG per dashboard view, in a real headless Chromium, into docs/screenshots/.

Starts `streamlit run app.py` on a free 127.0.0.1 port (benchmarks/load.py's own_server), opens each view with
small classroom settings in the URL, presses the view's run button where it has one, waits until plotly has drawn,
and saves a screenshot of the top of the page: How it works at 1440 x 900 and 1280 x 720 (the window a classroom
projector often has: grid, counters and Play must show without scrolling), the other views at 1440 x 1600.
Measured figures differ from machine to machine; the pictures show what each view looks like, not reference numbers.

Run:  python docs/take_screenshots.py            (about a minute; overwrites docs/screenshots/*.png)
      python docs/take_screenshots.py 10-backward.png   (only the files named)
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from load import CHROMIUM, CHROMIUM_ARGS, CONNECTED, EXCEPTION, IDLE, PAGE_END, own_server  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
WAIT_MS = 240_000  # the slowest step: the first page load imports torch in the server
COMMON = "d=64&threads=2&batch=1&heads=1&dtype=float32"
FULL = (1440, 1600)  # the top of a long page
VIEWS = [  # (file name, query, run button key or None, plotly charts to wait for, viewport (width, height))
    ("01-how-it-works.png", f"view=how&n=256&br=32&bc=32&link=1&causal=1&order=fa1&{COMMON}", None, 2, (1440, 900)),
    ("01-how-it-works-1280x720.png", "view=how&n=16&d=8&br=4&bc=4&link=1&causal=1&order=both&threads=2", None, 2,
     (1280, 720)),
    ("02-benchmark.png", f"view=bench&ns=512,1024,2048&impls=naive,flash,flash2,sdpa&reps=3&bblock=256&"
                         f"{COMMON.replace('heads=1', 'heads=4')}", "bench_run", 4, FULL),
    ("03-block-size.png", f"view=block&n=1024&blocks=16,32,64,128,256&reps=3&{COMMON}", "block_run", 1, FULL),
    ("04-io-model.png", f"view=io&n=4096&{COMMON}", None, 1, FULL),
    ("05-correctness.png", f"view=correct&cds=16,59,64&cns=64,97,257&br=64&bc=64&{COMMON}", "correct_run", 0, FULL),
    ("06-training.png", f"view=train&ns=128,256,512&impls=naive,flash2,sdpa&reps=2&bblock=128&{COMMON}",
     "train_run", 2, FULL),
    ("07-roofline.png", f"view=roof&{COMMON}", None, 1, FULL),
    ("08-decoding.png", "view=decode&decpage=64&dechq=32&dechkv=8&declens=ragged&declen=4096&decsplits=3&d=64&"
                        "threads=2", None, 2, FULL),
    ("09-masks.png", f"view=masks&{COMMON}", None, 2, FULL),
    ("10-backward.png", "view=backward&bwn=32&bwd=16&bwblock=8&bwcausal=1&dq=atomic&bwframe=6&threads=2", None, 0,
     FULL),
    ("11-numerics.png", "view=numerics&threads=2", None, 5, FULL),
]


def main(names: list[str]) -> int:
    """Take the screenshots named (all when none is)."""
    from playwright.sync_api import sync_playwright

    unknown = set(names) - {view[0] for view in VIEWS}
    if unknown:
        print(f"unknown screenshot(s) {sorted(unknown)}; choose from {[view[0] for view in VIEWS]}")
        return 2

    OUT.mkdir(parents=True, exist_ok=True)
    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    with tempfile.TemporaryDirectory() as tmp, own_server(Path(tmp) / "timing.jsonl", Path(tmp) / "server.log") as (
            url, _), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            for name, query, button, charts, (width, height) in [v for v in VIEWS if not names or v[0] in names]:
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(f"{url}/?{query}")
                page.wait_for_selector(CONNECTED, timeout=WAIT_MS)
                page.wait_for_selector(PAGE_END, state="attached", timeout=WAIT_MS)  # the page's last element
                page.wait_for_timeout(500)
                page.wait_for_selector(IDLE, timeout=WAIT_MS)
                if button:
                    page.locator(f".st-key-{button} button:visible").click()
                    page.wait_for_timeout(500)
                    page.wait_for_selector(IDLE, timeout=WAIT_MS)
                page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {charts}",
                                       timeout=WAIT_MS)
                page.mouse.move(5, 5)  # no tooltip in the picture
                if name == "01-how-it-works.png":  # a frame in the middle of the animation tells more than the first
                    play = page.locator(".fv-tilemap label.fv-playlabel").first  # the same control pauses
                    play.click()
                    page.wait_for_timeout(4000)
                    play.click()
                    page.mouse.move(5, 5)
                page.wait_for_timeout(1500)  # plotly's transitions
                if page.locator(EXCEPTION).count():
                    raise RuntimeError(f"{name}: the page shows an exception box")
                page.screenshot(path=str(OUT / name))
                print(f"wrote {OUT / name}")
                page.close()
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
