"""A new browser tab's first page is the tile map alone; on a fresh server it is drawn before torch loads (seconds
on a small machine).

Runs the default page in AppTest in a fresh interpreter (nothing imported yet, as on a new server, or torch imported
first, as on a server that has served a page) and records, each time a tile map is drawn, what had been imported by
then and whether the map marks the inspected row. The first page has a note in place of the rest; a fragment that
the browser reruns FIRST_PAGE_WAIT_S later starts the full run (which loads the kernel on a fresh server). AppTest runs
no timers, so the test runs that full run itself, and checks the fragment's side of it separately.
"""

import json
import subprocess
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

from flashviz.ui import sidebar
from flashviz.ui.first_page import first_page_map
from flashviz.ui.how_it_works import FIRST_PAGE_WAIT_S, FIRST_PAGE_WAITED, KERNEL_NOTE, PAGE_NOTE
from flashviz.ui.state import VIEWS, Settings

ROOT = Path(__file__).resolve().parents[1]
RECORD = """
import json, sys
{prelude}
import streamlit
from streamlit.delta_generator import DeltaGenerator
from streamlit.testing.v1 import AppTest
events, markdown, page_config = [], DeltaGenerator.markdown, streamlit.set_page_config
def record(self, body, *args, **kwargs):
    if 'class="fv-tilemap"' in str(body):
        events.append({"torch": "torch" in sys.modules, "pandas": "pandas" in sys.modules,
                       "emojis": "streamlit.emojis" in sys.modules, "row_marker": 'class="row-marker"' in body,
                       "still": 'data-still="1"' in body, "body": str(body)})
    return markdown(self, body, *args, **kwargs)
def record_main(body, *args, **kwargs):  # st.markdown: the main DeltaGenerator's method, bound at import
    return record(streamlit._main, body, *args, **kwargs)
def record_config(**kwargs):
    events.append({"page_config": sorted(kwargs)})
    return page_config(**kwargs)
DeltaGenerator.markdown, streamlit.markdown, streamlit.set_page_config = record, record_main, record_config
import streamlit.env_util
is_repl = streamlit.env_util.is_repl
def record_is_repl():
    events.append({"is_repl": True})
    return is_repl()
streamlit.env_util.is_repl = record_is_repl
def page(at):
    return {"info": [i.value for i in at.info], "charts": len(at.get("plotly_chart")),
            "widgets_in_tab": len(at.main.select_slider) + len(at.main.metric), "sidebar": len(at.sidebar.children),
            "sidebar_text": [h.value for h in at.sidebar.header], "tabs": len(at.tabs),
            "errors": [e.value for e in [*at.exception, *at.error]], "torch": "torch" in sys.modules,
            "emojis": "streamlit.emojis" in sys.modules, "waiting": "FIRST_PAGE_WAITED" in at.session_state}
at = AppTest.from_file("dashboard.py", default_timeout=300).run()
first = page(at)
at.run()  # the full run the fragment's timer starts (its st.rerun)
print(json.dumps({"events": events, "first": first, "then": page(at)}))
""".replace("FIRST_PAGE_WAITED", FIRST_PAGE_WAITED)


def record(prelude: str = "") -> dict:
    """The tile maps drawn (what was imported by each) and the page after the first run and after the next."""
    code = RECORD.replace("{prelude}", prelude)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600,
                         check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_the_tile_map_is_drawn_before_torch_loads_and_redrawn_with_the_row_marker():
    out = record()
    first, then = out["first"], out["then"]
    assert not first["errors"] and not then["errors"], out
    maps = [e for e in out["events"] if "row_marker" in e]
    assert len(maps) == 3, out  # the first page's; the next run's, twice: as on screen, then with the kernel
    assert not maps[0]["torch"] and not maps[0]["pandas"], out  # the first chart waits for neither
    assert not maps[0]["emojis"], out  # nor for the page icon (its emoji check loads a catalogue)
    assert not maps[0]["row_marker"]  # the automatic row is the kernel's pick, not loaded yet
    assert maps[0]["still"] and not maps[2]["still"], out  # the start frame as a picture first, then the animation
    # the very picture the server puts in the HTML page (tests/test_first_page.py), so the copy hands over unseen
    assert maps[0]["body"].endswith(first_page_map(Settings())), out
    assert maps[1] == {**maps[0], "emojis": maps[1]["emojis"], "body": maps[1]["body"]}, out  # redrawn as it was
    assert maps[1]["body"].endswith(first_page_map(Settings())), out  # while torch loads
    # the first page: the map, the note and the sidebar's header, no tabs and no widgets (the browser would hold the
    # map back until the widgets' code had loaded), and still no torch at its end
    assert not first["torch"] and first["charts"] == 0 and first["widgets_in_tab"] == 0 == first["tabs"], out
    assert first["sidebar"] == 1 and first["sidebar_text"] == [sidebar.HEADER], first  # its header: no widget
    assert first["info"] == [KERNEL_NOTE] and first["waiting"], first
    assert not first["emojis"], first  # the note is ASCII: no emoji catalogue while the browser fetches the map's code
    assert not [e for e in out["events"] if "is_repl" in e], out  # nor Streamlit's REPL check (common.skip_repl_check)
    # the next run loads the kernel, marks the row and draws the inspector
    assert maps[2]["torch"] and maps[2]["row_marker"] and then["charts"] >= 1 and then["widgets_in_tab"] >= 3, out
    assert then["sidebar"] >= 10 and then["tabs"] == len(VIEWS), out
    assert KERNEL_NOTE not in then["info"] and not then["waiting"], then
    # the page icon is set after the page: a run's first call leaves it out, a complete run's last call adds it
    configs = [e["page_config"] for e in out["events"] if "page_config" in e]
    assert len(configs) == 3 and "page_icon" not in configs[0] and "page_icon" not in configs[1], configs
    assert configs[2] == ["page_icon"], configs


def test_a_new_tab_on_a_warm_server_gets_the_tile_map_alone_then_the_page():
    out = record("import torch  # a server that has loaded the kernel for an earlier page")
    first, then = out["first"], out["then"]
    assert not first["errors"] and not then["errors"], out
    maps = [e for e in out["events"] if "row_marker" in e]
    assert len(maps) == 2 and maps[0]["still"] and not maps[1]["still"], out  # no redraw: nothing to load
    assert maps[1]["row_marker"], out
    # the first page holds nothing whose code the browser would wait for before drawing the map
    assert first["charts"] == 0 and first["widgets_in_tab"] == 0 == first["tabs"], out
    assert first["sidebar"] == 1 and first["sidebar_text"] == [sidebar.HEADER], first
    assert first["info"] == [PAGE_NOTE] and first["waiting"], first
    assert then["charts"] >= 1 and then["widgets_in_tab"] >= 3 and then["sidebar"] >= 10, then
    assert PAGE_NOTE not in then["info"] and not then["waiting"], then


def test_only_a_sessions_first_run_is_a_first_page(make_app):
    at = make_app(view="bench")  # a link to another tab: its first run draws that tab and the sidebar
    assert not at.exception and len(at.sidebar.children) >= 10 and FIRST_PAGE_WAITED not in at.session_state
    at.session_state[sidebar.VIEW_KEY] = VIEWS["how"]  # then How it works: the page as usual, the sidebar stays
    at.run()
    assert not at.exception and len(at.sidebar.children) >= 10 and FIRST_PAGE_WAITED not in at.session_state
    assert at.get("plotly_chart") and not [i for i in at.info if i.value in (PAGE_NOTE, KERNEL_NOTE)]


def _timer_script():
    import streamlit as st

    from flashviz.ui.how_it_works import _first_page_note, _first_page_wait

    st.session_state["runs"] = st.session_state.get("runs", 0) + 1
    if st.session_state["runs"] == 1:
        _first_page_note("first page")  # a session's first page: the note, and the fragment's first run
        _first_page_wait("first page")  # what the browser's timer runs next: the same fragment, which asks for a
        # full run
    st.markdown(f"run {st.session_state['runs']}")


def test_the_waiting_fragment_shows_the_note_then_asks_for_a_full_run():
    at = AppTest.from_function(_timer_script, default_timeout=60).run()
    assert not at.exception
    assert at.session_state["runs"] == 2 and at.markdown[-1].value == "run 2"  # the timer's call reran the app
    assert at.session_state[FIRST_PAGE_WAITED] is True
    assert 0 < FIRST_PAGE_WAIT_S <= 1  # the browser asks within a second of the page's arrival
