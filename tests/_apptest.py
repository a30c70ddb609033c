"""Functions shared by the dashboard's AppTest files (test_app.py, test_lesson.py): reading the page's plotly figures
and captions, and running a heavy view with tiny settings."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np

from tests._tilemap import Panel, TileMap, parse

APP = Path(__file__).resolve().parent.parent / "app.py"  # the page
APP_TIMEOUT_S = 240  # one AppTest script run; generous because the CI machine may be shared and slow

TINY = {"ns": "32,64", "impls": "naive,flash,flash2,sdpa", "reps": "1", "d": "16", "n": "128", "br": "32",
        "bc": "32", "blocks": "16,32", "cds": "16", "cns": "32,33", "bblock": "32", "sure": "0"}  # each in a second
RUN_BUTTON = {"bench": "bench_run", "block": "block_run", "correct": "correct_run", "train": "train_run"}


def open_app(**query: str | list[str]):
    """An AppTest of the dashboard page with these query parameters, after its first run (a new browser tab)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=APP_TIMEOUT_S)
    at.query_params.update(query)
    return at.run()


def charts(at) -> dict[str, dict]:
    """Plotly figures on the page, by title text."""
    out = {}
    for el in at.get("plotly_chart"):
        spec = json.loads(el.proto.spec)
        out[spec["layout"].get("title", {}).get("text", "")] = spec
    return out


def chart(at, prefix: str) -> dict:
    """The one figure whose title starts with prefix."""
    (spec,) = [s for title, s in charts(at).items() if title.startswith(prefix)]
    return spec


def tile_map(at) -> TileMap:
    """The How it works view's tile map (flashviz.figures.tilemap's markup in a markdown element), read back."""
    (html,) = [m.value for m in at.markdown if 'class="fv-tilemap"' in m.value]
    return parse(html)


def done_grid(panel: Panel, frame: int) -> dict[tuple[int, int], bool]:
    """Per tile (i, j): drawn in full colour at `frame` (reached before that frame's tile), else pale."""
    return {ij: t["done"] or t["reveal"] <= frame for ij, t in panel.tiles.items()}


def subtitle(spec: dict) -> str:
    return spec["layout"]["title"].get("subtitle", {}).get("text", "")


def decode(z) -> np.ndarray:
    """A plotly typed array ({"dtype", "bdata", "shape"}) or nested list -> numpy array."""
    if isinstance(z, dict):
        shape = tuple(int(x) for x in z["shape"].split(",")) if "shape" in z else (-1,)
        return np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"])).reshape(shape)
    return np.asarray(z)


def assert_clean(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def run_heavy(make_app, view: str, **extra: str):
    at = make_app(**{**TINY, **extra}, view=view)
    assert_clean(at)
    at.button(key=RUN_BUTTON[view]).click().run()
    assert_clean(at)
    return at


def tiles_computed(at) -> list[int]:
    """The "k of T tiles computed" counts under the tile map's HBM metrics, one per loop order shown."""
    return [int(m.group(1)) for c in at.caption if (m := re.search(r"(\d+) of \d+ tiles computed", c.value))]
