"""The README's code examples run as written: a newcomer copies them first."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_the_readme_has_the_core_masks_and_decoding_examples():
    joined = "\n".join(EXAMPLES)
    for name in ("flash_attention_forward", "to_block_mask", "flex_attention", "flash_decode", "block_table"):
        assert name in joined, name


@pytest.mark.parametrize("code", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_each_python_example_in_the_readme_runs(code):
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=README.parent)
    assert run.returncode == 0, run.stderr[-3000:]
