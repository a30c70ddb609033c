"""Start the dashboard: `python scripts/serve.py [streamlit run flags]` is `streamlit run app.py` with a check first.

Before anything starts it checks that a temporary directory is writable: torch's profiler (used by every benchmark)
imports torch._inductor, which needs one. With a read-only root file system and no writable /tmp the dashboard would
start and then fail at the first "Run benchmark"; it stops at once instead, with the fix in the message.

It does not import torch or pandas ahead of the page. The page draws its first chart, the tile map, without them
(flashviz imports them on first use), and importing them in a background thread races every library that looks a
module up in sys.modules while another thread is still initialising it: plotly, building the first figure, found
pandas half-imported and failed ("partially initialized module 'pandas' has no attribute 'Series'").

    python scripts/serve.py --server.port 8501
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository root (/app in the image): app.py, flashviz/
APP = ROOT / "app.py"
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


def main(flags: list[str]) -> int:
    problem = temp_dir_problem()
    if problem:
        print(problem, file=sys.stderr)
        return NO_TEMP_DIR
    if str(ROOT) not in sys.path:  # flashviz is imported from this checkout, as `streamlit run app.py` does
        sys.path.insert(0, str(ROOT))
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", str(APP), *flags]
    return cli.main(prog_name="streamlit")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
