"""A fresh dashboard draws its first chart, the tile map, before it loads torch (seconds on a small machine).

Runs the default page in AppTest in a fresh interpreter (nothing imported yet, as on a new server) and records, each
time a tile map is drawn, whether torch had been imported by then and whether the map marks the inspected row.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = """
import json, sys
from streamlit.delta_generator import DeltaGenerator
from streamlit.testing.v1 import AppTest
events, markdown = [], DeltaGenerator.markdown
def record(self, body, *args, **kwargs):
    if 'class="fv-tilemap"' in str(body):
        events.append({"torch": "torch" in sys.modules, "pandas": "pandas" in sys.modules,
                       "row_marker": 'class="row-marker"' in body})
    return markdown(self, body, *args, **kwargs)
DeltaGenerator.markdown = record
at = AppTest.from_file("app.py", default_timeout=300).run()
print(json.dumps({"events": events, "errors": [e.value for e in [*at.exception, *at.error]]}))
"""


def test_the_tile_map_is_drawn_before_torch_loads_and_redrawn_with_the_row_marker():
    run = subprocess.run([sys.executable, "-c", RECORD], capture_output=True, text=True, cwd=ROOT, timeout=600,
                         check=True)
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert not out["errors"], out["errors"]
    first, last = out["events"][0], out["events"][-1]
    assert not first["torch"] and not first["pandas"], out  # the first chart waits for neither
    assert not first["row_marker"]  # the row is picked by the kernel, which is not loaded yet
    assert last["torch"] and last["row_marker"] and len(out["events"]) == 2, out  # then the map marks it
