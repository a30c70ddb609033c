"""Reading a tile map built by flashviz.figures.tilemap (well-formed markup) back into plain data for the tests."""

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
    #                                                "size" (px), "title" (hover text or None)}
    frames: dict[int, dict]  # frame k -> {"counter": [line 1, line 2], "current": (i, j), "delay": s, "last": bool}
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
    delays = {int(k): float(v) for k, v in re.findall(r"\.r(\d+)\{animation-delay:([\d.]+)s\}", css)}
    panels = [_panel(svg, delays) for svg in root.iter(f"{SVG}svg")]
    labels = ["".join(lab.itertext()) for lab in root.iter("label")]
    legend = "".join(next(el for el in root.iter("span") if el.get("class", "").startswith("fv-legend")).itertext())
    axis = ["".join(t.itertext()) for svg in root.iter(f"{SVG}svg") for t in svg.findall(f"{SVG}text")]
    return TileMap(texts["fv-title"], texts["fv-sub"], int(root.get("data-frames")), int(root.get("data-start")),
                   float(root.get("data-frame-s")), panels, labels, legend, html, root.get("data-still") == "1",
                   axis)


def _panel(svg: ET.Element, delays: dict[int, float]) -> Panel:
    tiles, frames, marker = {}, {}, None
    cell = float(svg.get("data-cell"))
    for rect in svg.iter(f"{SVG}rect"):
        classes = rect.get("class", "").split()
        if classes[:1] != ["t"]:
            continue
        x, y, size = float(rect.get("x")), float(rect.get("y")), float(rect.get("width"))
        reveal = next((int(c[1:]) for c in classes if c[0] == "r"), None)
        title = rect.find(f"{SVG}title")
        tiles[(int((y + size / 2) // cell), int((x + size / 2) // cell))] = {  # by its centre: x, y are rounded
            "fate": FATES[classes[1]], "done": "done" in classes, "reveal": reveal, "size": size,
            "delay": delays.get(reveal), "title": None if title is None else "".join(title.itertext())}
    for g in svg.iter(f"{SVG}g"):
        if g.get("data-frame") is not None:
            cur = next(r for r in g.iter(f"{SVG}rect") if r.get("class") == "cur")
            size = float(cur.get("width"))
            frames[int(g.get("data-frame"))] = {
                "counter": ["".join(t.itertext()) for t in g.iter(f"{SVG}text")],
                "current": (round(float(cur.get("y")) / size), round(float(cur.get("x")) / size)),
                "delay": float(re.search(r"animation-delay:([\d.-]+)s", g.get("style")).group(1)),
                "last": "last" in g.get("class").split()}
    for line in svg.iter(f"{SVG}line"):
        if line.get("class") == "row-marker":
            marker = {"row": int(line.get("data-row")), "y": float(line.get("y1"))}
    return Panel(svg.get("data-loop-order"), tiles, frames, marker, cell)
