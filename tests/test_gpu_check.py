"""scripts/gpu_check.py, the one command for a GPU, on the paths a machine without CUDA can run: the one-line refusal,
and the whole report written on tiny CPU sizes (--cpu-smoke), its figures checked against each other."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine runs the checks instead")
def test_without_cuda_it_says_so_in_one_line_and_exits_0(tmp_path):
    out = tmp_path / "report.md"
    done = _run("--out", str(out))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and "No CUDA" in lines[0] and torch.__version__ in lines[0]
    assert not out.exists()


def _table(text: str, heading: str) -> list[list[str]]:
    """The rows of the first markdown table after `## heading`, as lists of cells (header and rule dropped)."""
    body = text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]


@pytest.mark.skipif(torch.cuda.is_available(), reason="--cpu-smoke is for machines without CUDA")
def test_the_report_on_tiny_cpu_sizes_has_every_section_and_its_figures_agree(tmp_path):
    mod = _module()
    out = tmp_path / "report.md"
    done = _run("--cpu-smoke", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text()
    for heading in ("Device and versions", "Tests", mod.RULE_HEADING, "Benchmarks against SDPA and its flash backend",
                    "Ring attention with NCCL"):
        assert f"## {heading}" in text
    assert f"torch {torch.__version__}" in text
    assert re.search(r"\*\*1 passed, \d+ deselected", text)  # the pytest subprocess ran and passed
    rule = _table(text, mod.RULE_HEADING)
    assert {r[0] for r in rule} == {"forward", "backward", "decode"} and {r[1] for r in rule} == {"bfloat16",
                                                                                                   "float16"}
    for _kernel, _dtype, path, error, sdpa_error, ratio, verdict in rule:  # each ratio is its error / SDPA's
        assert float(ratio) == pytest.approx(float(error) / float(sdpa_error), rel=0.02, abs=0.006), path
        assert verdict == ("yes" if float(error) <= 2 * float(sdpa_error) * 1.001 else "NO")
    assert all(r[-1] == "yes" for r in rule)
    bench = _table(text, "Benchmarks against SDPA and its flash backend")
    cases = {r[0].split(" ")[0] for r in bench}
    assert {"forward", "masks:", "decode", "triton"} <= cases
    for case, _impl, ms, ci, x_sdpa, peak, note in bench:
        if not ms:
            assert note.startswith("not run: ")
            continue
        low, high = map(float, ci.split(" - "))
        assert low <= float(ms) <= high and float(peak) >= 0
        sdpa = [float(r[2]) for r in bench if r[0] == case and r[1] == "sdpa"]
        assert float(x_sdpa) == pytest.approx(float(ms) / sdpa[0], rel=0.02, abs=0.006)
    assert "not run: the ring with NCCL needs 2 or more GPUs, this machine has 0." in text


def test_a_section_that_raises_is_reported_and_the_others_still_run():
    mod = _module()
    report = mod.Report("t")

    def broken():
        raise RuntimeError("boom")

    mod.section(report, "first", broken)
    mod.section(report, "second", lambda: ["fine"])
    text = report.markdown()
    assert "**failed**: RuntimeError: boom" in text and "## second\n\nfine" in text
