"""The dashboard's first chart, the tile map, is drawn before torch or pandas load (seconds on a small machine).

Runs the page in AppTest in a fresh interpreter (nothing imported yet, as on a new server, or torch imported first, as
on a server that has served a page) and records, each time the page draws a tile map (flashviz.kit.drawing.show_map,
the one function every map goes through), what had been imported by then and whether the map marks the inspected row.
"""

import json
import subprocess
import sys
from pathlib import Path

from flashviz.app.registry import VIEWS
from flashviz.figures.tilemap import ROOT_CLASS

ROOT = Path(__file__).resolve().parents[1]
RECORD = """
import json, sys
{prelude}
import flashviz.kit.drawing as drawing
events, show_map = [], drawing.show_map
def record(html, *where):
    events.append({"torch": "torch" in sys.modules, "pandas": "pandas" in sys.modules,
                   "row_marker": 'class="row-marker"' in html, "map": 'class="ROOT_CLASS"' in html})
    return show_map(html, *where)
drawing.show_map = record  # before the page imports its views, so How it works draws through it
from streamlit.testing.v1 import AppTest
at = AppTest.from_file("app.py", default_timeout=300).run()
print(json.dumps({"events": events, "errors": [e.value for e in [*at.exception, *at.error]],
                  "charts": len(at.get("plotly_chart")), "views": len(at.segmented_control(key="view").options),
                  "torch": "torch" in sys.modules,
                  "maps_on_page": sum('class="ROOT_CLASS"' in m.value for m in at.markdown)}))
""".replace("ROOT_CLASS", ROOT_CLASS)


def record(prelude: str = "") -> dict:
    """The tile maps the default page drew (what was imported by each), and the page after its run."""
    code = RECORD.replace("{prelude}", prelude)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_on_a_fresh_server_the_map_is_drawn_before_torch_loads_then_marks_the_row():
    out = record()
    assert not out["errors"], out
    maps = out["events"]
    assert [m["map"] for m in maps] == [True, True], out  # drawn, then redrawn in its place with the row marker
    assert not maps[0]["torch"] and not maps[0]["pandas"], out  # the first chart waits for neither
    assert not maps[0]["row_marker"], out  # the automatic row is the kernel's pick: not known before torch
    assert maps[1]["torch"] and maps[1]["row_marker"], out
    assert out["maps_on_page"] == 1 and out["charts"] >= 1 and out["views"] == len(VIEWS), out  # the whole page


def test_on_a_warm_server_the_map_is_drawn_once_with_its_row_marker():
    out = record("import torch  # a server that has loaded the kernel for an earlier page")
    assert not out["errors"], out
    (only,) = out["events"]
    assert only["map"] and only["row_marker"], out  # the pick is there at once: no redraw
    assert out["maps_on_page"] == 1 and out["charts"] >= 1, out
