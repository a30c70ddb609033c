"""The tile map's markup at the How it works view's defaults, as the page passes it to Streamlit (AppTest): what the
browser turns into elements before it draws the page's first chart. A size, not a time: benchmarks/first_chart.py
measures the time."""

from flashviz.app.state import Settings
from flashviz.figures.tilemap import MAX_FRAMES
from tests._apptest import assert_clean
from tests._tilemap import parse

MAP_BYTES_MAX = 40 * 1024  # the default page's map: 16 x 16 tiles, 120 frames


def test_the_default_pages_tile_map_is_at_most_40_kb_and_holds_every_frame(make_app):
    at = make_app()
    assert_clean(at)
    (html,) = [m.value for m in at.markdown if 'class="fv-tilemap"' in m.value]
    s = Settings()
    m = parse(html)
    (panel,) = m.panels  # one loop order at the defaults (16 x 16 tiles, 120 frames)
    assert len(panel.tiles) == -(-s.n // s.br) * -(-s.n // s.bc) and m.frames == len(panel.frames) == MAX_FRAMES
    assert panel.row_marker is not None  # the map the page ends with: the inspected row marked
    assert all(f["counter"][0] and f["counter"][1] and f["counter"][2] for f in panel.frames.values())
    assert len(html.encode()) <= MAP_BYTES_MAX, len(html.encode())
