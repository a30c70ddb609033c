"""What the browser tests share: where their screenshots go and how they wait for a script run to be drawn.

The `browser` fixture itself (Debian's Chromium under playwright) is in tests/conftest.py.
"""

from __future__ import annotations

from pathlib import Path

from load import IDLE  # benchmarks/ is on pytest's pythonpath (pyproject.toml)

SHOTS = Path(__file__).resolve().parent.parent / "artifacts" / "screenshots"  # what the tests saw, to look at
LOAD_MS = 180_000  # the first load imports torch in the server: slow on a busy 2-core machine


def settle(page, timeout_ms: int = LOAD_MS) -> None:
    """Wait until the script run has finished and the browser has drawn it."""
    page.wait_for_timeout(300)
    page.wait_for_selector(IDLE, timeout=timeout_ms)
    page.wait_for_timeout(1200)


OVERLAP_PX = 1.5  # two text boxes that share less than this in either direction only touch

# Every plotly table's text that passes its column's sides or the chart's bottom (a header cut by its neighbour, a row
# pushed out of the figure by a line that wrapped): one line per such text.
TABLE_TEXT_CUT = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(plot => {
    const svg = plot.querySelector('.main-svg').getBoundingClientRect();
    return [...plot.querySelectorAll('g.table g.y-column')].flatMap(column => {
        const rect = column.querySelector('rect.cell-rect').getBoundingClientRect();
        return [...column.querySelectorAll('text.cell-text')].filter(t => t.textContent.trim()).flatMap(t => {
            const r = t.getBoundingClientRect();
            const out = r.left < rect.left - 1 || r.right > rect.right + 1 || r.bottom > svg.bottom + 1;
            return out ? [`${t.textContent.trim()}: x ${Math.round(r.left)}-${Math.round(r.right)} in its ` +
                          `column's ${Math.round(rect.left)}-${Math.round(rect.right)}, bottom ` +
                          `${Math.round(r.bottom)} of the chart's ${Math.round(svg.bottom)}`] : [];
        });
    });
})"""

# Per plotly chart: the boxes of its labels, and the chart's own box.
LABEL_BOXES = """() => [...document.querySelectorAll('.js-plotly-plot')].map(plot => {
    const svg = plot.querySelector('.main-svg').getBoundingClientRect();
    const skip = '.hoverlayer, .slider-container, .updatemenu-container, .heatmaplayer, .table, .modebar';
    const boxes = [], cut = [];
    for (const t of plot.querySelectorAll('svg.main-svg text')) {
        const style = getComputedStyle(t);
        const text = t.textContent.trim();
        if (!text || t.closest(skip) || style.visibility === 'hidden' || style.display === 'none' ||
            +style.opacity === 0 || +style.fillOpacity === 0 || /rgba\\(.*,\\s*0\\)/.test(style.fill)) continue;
        const r = t.getBoundingClientRect();
        if (r.width === 0 || r.height === 0) continue;
        boxes.push({text, x0: r.left, x1: r.right, y0: r.top, y1: r.bottom});
        const legend = t.closest('g.legend');  // plotly clips a legend's entries to the legend's box
        const bg = legend && legend.querySelector('rect.bg');
        const b = bg && bg.getBoundingClientRect();
        if (b && (r.right > b.right + 1 || r.left < b.left - 1)) cut.push(text);
    }
    const holder = plot.closest("[class*='st-key-']");
    const name = holder ? [...holder.classList].find(c => c.startsWith('st-key-')) : '(no key)';
    return {name, svg: {x0: svg.left, x1: svg.right, y0: svg.top, y1: svg.bottom}, boxes, cut};
})"""


def overlaps(a: dict, b: dict) -> bool:
    """Whether two boxes share more than OVERLAP_PX in both directions."""
    return (min(a["x1"], b["x1"]) - max(a["x0"], b["x0"]) > OVERLAP_PX
            and min(a["y1"], b["y1"]) - max(a["y0"], b["y0"]) > OVERLAP_PX)


def label_problems(charts: list[dict]) -> list[str]:
    """Labels of one chart that overlap another label or reach past the chart's edge.

    Example:
        >>> box = lambda t, x0, y0: {"text": t, "x0": x0, "x1": x0 + 40, "y0": y0, "y1": y0 + 20}
        >>> svg = {"x0": 0, "x1": 100, "y0": 0, "y1": 100}
        >>> label_problems([{"name": "c", "svg": svg, "boxes": [box("a", 0, 0), box("b", 30, 10), box("c", 0, 60)]}])
        ["c: 'a' overlaps 'b'"]
        >>> label_problems([{"name": "c", "svg": svg, "boxes": [box("wide", 80, 0)]}])
        ["c: 'wide' is cut off by the chart's edge"]
    """
    found = []
    for chart in charts:
        boxes, svg = chart["boxes"], chart["svg"]
        found += [f"{chart['name']}: {text!r} is cut off by its legend's edge" for text in chart.get("cut", [])]
        for i, a in enumerate(boxes):
            if a["x0"] < svg["x0"] - 1 or a["x1"] > svg["x1"] + 1 or a["y0"] < svg["y0"] - 1 or a["y1"] > svg["y1"] + 1:
                found.append(f"{chart['name']}: {a['text']!r} is cut off by the chart's edge")
            found += [f"{chart['name']}: {a['text']!r} overlaps {b['text']!r}" for b in boxes[i + 1:] if overlaps(a, b)]
    return found
