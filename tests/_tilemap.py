"""Reading a tile map built by flashviz.figures.tilemap (well-formed markup) back into plain data for the tests.

The markup says things once where it can (see tilemap.py): tiles sit at (j, i) in units of a tile, a tile's reveal
frame K is its class rK whose time is the CSS variable --t (the start frame's: 0, CSS's default delay), the tile a
frame computes is the tile of class "c" revealed at the next frame ("now" on a still map), the counters' second and
third labels are drawn once per panel and their numbers in each frame, and an outline that stays for several frames
is one element with its length in --d. This module puts each frame's full picture back together."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

SVG = "{http://www.w3.org/2000/svg}"
FATES = {"f": "full", "p": "partial", "s": "skipped"}  # a tile's class letter -> its fate


@dataclass
class Panel:
    loop_order: str
    tiles: dict[tuple[int, int], dict]  # (i, j) -> {"fate", "done", "reveal" (frame; None if done), "delay" (s),
    #                                                "title" (hover text or None)}
    frames: dict[int, dict]  # frame k -> {"counter": [line 1, line 2, line 3], "current": (i, j), "delay": s,
    #                            "last": bool, "row": Q block i outlined, "column": K/V block j outlined}
    row_marker: dict | None  # {"row", "y"} in px inside the grid
    cell: float  # px per tile


@dataclass
class TileMap:
    title: str
    subtitle: str
    frames: int  # frames in the animation
    start: int  # the frame drawn before Play
    frame_s: float
    panels: list[Panel]
    controls: list[str]  # the labels' texts (Play / Pause, Restart)
    legend: str
    html: str
    still: bool  # the start frame as a still picture (no later frames, no Play)
    axis_titles: list[str]  # the texts around each grid: ticks and axis titles, panel by panel


def parse(html: str) -> TileMap:
    html = html[html.index('<div id="'):]  # the page's own CSS may come first
    root = ET.fromstring(html.replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" ', ))
    assert "fv-tilemap" in root.get("class", "")
    texts = {p.get("class"): "".join(p.itertext()) for p in root.iter("p")}
    css = "".join("".join(s.itertext()) for s in root.iter("style"))
    delays = {int(k): float(v) for k, v in re.findall(r"\.r(\d+)\{--t:([\d.]+)s\}", css)}
    frame_s = float(root.get("data-frame-s"))
    panels = [_panel(svg, delays, frame_s) for svg in root.iter(f"{SVG}svg")]
    labels = ["".join(lab.itertext()) for lab in root.iter("label")]
    legend = "".join(next(el for el in root.iter("span") if el.get("class", "").startswith("fv-legend")).itertext())
    axis = ["".join(t.itertext()) for svg in root.iter(f"{SVG}svg") for t in svg.findall(f"{SVG}text")]
    return TileMap(texts["fv-title"], texts["fv-sub"], int(root.get("data-frames")), int(root.get("data-start")),
                   frame_s, panels, labels, legend, html, root.get("data-still") == "1", axis)


def _frame_of(classes: list[str]) -> int | None:
    """K of an element's class rK, if it has one."""
    return next((int(c[1:]) for c in classes if re.fullmatch(r"r\d+", c)), None)


def _panel(svg: ET.Element, delays: dict[int, float], frame_s: float) -> Panel:
    tiles, frames, marker, current, now = {}, {}, None, {}, None
    cell = float(svg.get("data-cell"))
    for rect in svg.iter(f"{SVG}rect"):
        classes = rect.get("class", "").split()
        if classes[:1] != ["t"]:
            continue
        ij = (int(rect.get("y", "0")), int(rect.get("x", "0")))  # in units of a tile
        reveal = _frame_of(classes)
        title = rect.find(f"{SVG}title")
        tiles[ij] = {"fate": FATES[classes[1]], "done": "done" in classes, "reveal": reveal,
                     "delay": None if reveal is None else delays.get(reveal, 0.0),
                     "title": None if title is None else "".join(title.itertext())}
        if "c" in classes:
            current[reveal - 1] = ij  # in progress during the frame before its reveal
        if "now" in classes:  # a still map's tile in progress
            now = ij
    lbl = next((g for g in svg.iter(f"{SVG}g") if g.get("class") == "fv-lbl"), None)  # by line: y 22, y 44
    labels = {int(t.get("y")): "".join(t.itertext()) for t in ([] if lbl is None else lbl.findall(f"{SVG}text"))}
    outlines: dict[tuple[str, int], int] = {}
    for el in svg.iter():
        classes = el.get("class", "").split()
        kind = next((c for c in classes if c in ("ro", "co")), None)
        if kind is None:
            continue
        value = int(el.get("y" if kind == "ro" else "x", "0"))
        if "fr" in classes:  # a run: from its frame for --d seconds
            start = _frame_of(classes)
            length = round(float(re.search(r"--d:([\d.]+)s", el.get("style")).group(1)) / frame_s)
            outlines.update({(kind, k): value for k in range(start, start + length)})
    for g in svg.iter(f"{SVG}g"):
        classes = g.get("class", "").split()
        if "fr" not in classes:
            continue
        k = _frame_of(classes)
        first, *values = ["".join(t.itertext()) for t in g.findall(f"{SVG}text")]
        lines = [first] + [f"{labels[y]} {v}" if v else "" for y, v in zip((22, 44), values, strict=True)]
        for rect in g.findall(f"{SVG}rect"):
            kind = rect.get("class")
            outlines[(kind, k)] = int(rect.get("y" if kind == "ro" else "x", "0"))
        frames[k] = {"counter": lines, "current": current.get(k, now),
                     "delay": delays.get(k, 0.0), "last": "last" in classes}
    for k, frame in frames.items():
        frame["row"], frame["column"] = outlines.get(("ro", k)), outlines.get(("co", k))
    for line in svg.iter(f"{SVG}line"):
        if line.get("class") == "row-marker":
            marker = {"row": int(line.get("data-row")), "y": float(line.get("y1"))}
    return Panel(svg.get("data-loop-order"), tiles, frames, marker, cell)
