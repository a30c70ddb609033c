"""Start the dashboard with its heavy imports warmed: `python scripts/serve.py [streamlit run flags]`.

`streamlit run app.py` imports torch, pandas and plotly only when the first browser session runs app.py, so the first
visitor waits for all of them (torch alone takes seconds on a laptop). This launcher starts a background thread in the
server process that waits until Streamlit's server is up (so the health endpoint answers as early as before) and then
imports those modules while the browser is still loading the page; app.py later finds them in sys.modules. The flags
are `streamlit run`'s, unchanged. A failing import here is only reported: app.py raises it again, in the page.

Before anything starts it checks that a temporary directory is writable: torch's profiler (used by every benchmark)
imports torch._inductor, which needs one. With a read-only root file system and no writable /tmp the dashboard would
start and then fail at the first "Run benchmark"; it stops at once instead, with the fix in the message.

    python scripts/serve.py --server.port 8501
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository root (/app in the image): app.py and flashviz/ live here
APP = ROOT / "app.py"
# What app.py's first run imports, slowest first; flashviz.ui.* pulls in torch, pandas and plotly.
WARM_MODULES = ("torch", "pandas", "plotly.graph_objects", "flashviz.ui.how_it_works", "flashviz.ui.sidebar",
                "flashviz.ui.benchmark", "flashviz.ui.block_size", "flashviz.ui.correctness", "flashviz.ui.io_model",
                "flashviz.ui.training")
SERVER_POLL_S = 0.05  # seconds between looks at Streamlit's runtime state while the server starts
SERVER_WAIT_S = 60.0  # give up waiting for the server after this long and warm anyway
NO_TEMP_DIR = 2  # exit status when no temporary directory is writable


def temp_dir_problem() -> str | None:
    """None if a temporary directory is writable, else a message that says how to provide one."""
    try:
        tempfile.gettempdir()
    except FileNotFoundError as e:
        return (f"flashviz needs a writable temporary directory ({e}): torch's profiler, which every benchmark uses, "
                "writes there. The image declares /tmp as a volume, so `docker run --read-only` works as is; "
                "with a read-only root elsewhere, mount one: `docker run --read-only --tmpfs /tmp ...`, in Kubernetes "
                "an emptyDir volume at /tmp, or set TMPDIR to a writable directory.")
    return None


def wait_for_server(timeout_s: float = SERVER_WAIT_S) -> None:
    """Return once Streamlit's runtime has started (its server then answers), or after timeout_s."""
    from streamlit import runtime
    from streamlit.runtime.runtime import RuntimeState

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if runtime.exists() and runtime.get_instance().state != RuntimeState.INITIAL:
            return
        time.sleep(SERVER_POLL_S)


def warm_imports(modules: tuple[str, ...] = WARM_MODULES) -> None:
    """Import each module once; an import error is printed, not raised (app.py's own import shows it in the page)."""
    wait_for_server()
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # any import failure: the page shows it when app.py imports the module
            print(f"serve.py: warming {name} failed; the page will show the error:", file=sys.stderr)
            traceback.print_exc()


def main(flags: list[str]) -> int:
    problem = temp_dir_problem()
    if problem:
        print(problem, file=sys.stderr)
        return NO_TEMP_DIR
    if str(ROOT) not in sys.path:  # flashviz is imported from this checkout, as `streamlit run app.py` does
        sys.path.insert(0, str(ROOT))
    threading.Thread(target=warm_imports, name="warm-imports", daemon=True).start()
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", str(APP), *flags]
    return cli.main(prog_name="streamlit")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
