"""The README's and docs/api.md's code examples run as written: a newcomer copies them first. And the README stays a
front page: its commands are the ones CI and the scripts run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "docs" / "api.md"]
EXAMPLES = [(doc.relative_to(ROOT).as_posix(), code) for doc in DOCS
            for code in re.findall(r"```python\n(.*?)```", doc.read_text(), re.S)]
README = (ROOT / "README.md").read_text()


def test_the_docs_have_the_core_masks_and_decoding_examples():
    joined = "\n".join(code for _, code in EXAMPLES)
    for name in ("flash_attention_forward", "to_block_mask", "flex_attention", "flash_decode", "block_table"):
        assert name in joined, name


@pytest.mark.parametrize("code", [code for _, code in EXAMPLES], ids=[f"{doc}-{i}" for i, (doc, _) in
                                                                        enumerate(EXAMPLES)])
def test_each_python_example_runs(code):
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]


def test_the_readme_is_a_front_page_whose_commands_are_those_ci_runs():
    assert len(README.splitlines()) <= 200
    quick = re.search(r"## Quick start\n\n```bash\n(.*?)```", README, re.S).group(1)
    commands = [line for line in quick.splitlines() if line and not line.startswith("#")]
    assert commands[-1] == "./scripts/test.sh"  # what .ci/run runs
    assert "./scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
    assert "streamlit run app.py" in commands[-2] and "-r requirements.txt" in commands[-2]
    pinned = re.search(r"^torch==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    assert commands[0] == f"pip install torch=={pinned} --index-url https://download.pytorch.org/whl/cpu"
    assert "-r requirements-dev.txt" in (ROOT / "scripts" / "test.sh").read_text()


def test_every_link_in_the_readme_and_the_docs_leads_to_a_file_or_a_view():
    from flashviz.app.registry import SLUGS

    for doc in [*DOCS, *(ROOT / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#]+)\)", doc.read_text()):
            if target.startswith("http"):
                continue
            assert (doc.parent / target).exists() or target == "benchmarks.md" or target == "docs/benchmarks.md", \
                (doc.name, target)  # benchmarks.md is written by benchmarks/run_all.py
    views = re.findall(r"\| `\?view=(\w+)` \|", README)
    assert views == [slug for slug in SLUGS if slug in views] and len(views) >= 9  # real views, in the views' order
