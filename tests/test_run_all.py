"""benchmarks/run_all.py: docs/benchmarks.md holds each figure as the median and range of several runs, with its
command, and says when a run failed."""

from __future__ import annotations

import sys
import textwrap

import pytest
import run_all  # benchmarks/ is on pytest's pythonpath (pyproject.toml)

FAKE = textwrap.dedent('''
    """A stand-in benchmark: its figure is 1, 2, 3, ... on successive runs (a counter file next to it)."""
    import json, pathlib, sys
    here = pathlib.Path(__file__).parent
    count = here / "count"
    n = int(count.read_text()) + 1 if count.exists() else 1
    count.write_text(str(n))
    out = sys.argv[sys.argv.index("--json") + 1]
    pathlib.Path(out).write_text(json.dumps([
        {"key": "ratio", "value": float(n), "unit": "x", "label": "fake time / reference time"},
        {"key": "peak", "value": 1000.0 * n, "unit": "MiB", "label": "fake peak"}]))
''')
BROKEN = "import sys\nprint('boom: the kernel crashed', file=sys.stderr)\nsys.exit(3)\n"


@pytest.fixture
def benches(tmp_path, monkeypatch):
    (tmp_path / "fake.py").write_text(FAKE)
    (tmp_path / "broken.py").write_text(BROKEN)
    fake = run_all.Bench("fake", str(tmp_path / "fake.py"), ("--size", "7"), "A fake benchmark", "Counts its runs.")
    broken = run_all.Bench("broken", str(tmp_path / "broken.py"), (), "A broken benchmark", "Always fails.")
    monkeypatch.setattr(run_all, "BENCHES", (fake, broken))
    monkeypatch.setattr(run_all, "BY_NAME", {"fake": fake, "broken": broken})
    return tmp_path


def test_the_page_gives_median_and_range_of_every_figure_and_the_command(benches):
    out = benches / "benchmarks.md"
    assert run_all.main(["--only", "fake", "--runs", "3", "--out", str(out)]) == 0
    page = out.read_text()
    assert "| fake time / reference time | **2.00x** | 1.00x to 3.00x | 3 |" in page  # values 1, 2, 3
    assert "| fake peak | **2000 MiB** | 1000 MiB to 3000 MiB | 3 |" in page
    assert f"`python benchmarks/{benches / 'fake.py'} --size 7` (3 runs)" in page
    assert "Load average" in page and "CPU cores" in page and "torch" in page


def test_a_failed_run_is_on_the_page_and_the_exit_code_says_so(benches):
    out = benches / "benchmarks.md"
    assert run_all.main(["--runs", "3", "--out", str(out)]) == 1
    page = out.read_text()
    assert page.count("A run failed: exit code 3: boom: the kernel crashed") == 3
    assert "**2.00x**" in page  # the other benchmark's figures are still there


def test_fewer_than_three_runs_is_refused(benches, capsys):
    with pytest.raises(SystemExit):
        run_all.main(["--runs", "2"])
    assert "at least 3" in capsys.readouterr().err


@pytest.mark.parametrize("bench", run_all.BENCHES, ids=lambda b: b.name)
def test_every_listed_benchmark_takes_its_arguments_and_json(bench):
    """The page's commands parse: each script accepts its listed arguments and --json (checked with --help, which
    parses nothing but the script's options exist; then its parser is run on the page's arguments)."""
    import subprocess

    env = {"PYTHONPATH": f"{run_all.ROOT}:{run_all.ROOT / 'benchmarks'}", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, str(run_all.ROOT / "benchmarks" / bench.script), "--help"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "--json" in proc.stdout
    for flag in (a for a in bench.args if a.startswith("--")):
        assert flag in proc.stdout, f"{bench.script} has no {flag}"


def test_update_replaces_only_the_named_section_and_dates_it(benches):
    out = benches / "benchmarks.md"
    assert run_all.main(["--runs", "3", "--out", str(out)]) == 1  # the whole page: fake 1, 2, 3 and broken
    before = out.read_text()
    broken = before[before.index("## A broken benchmark"):]
    assert run_all.main(["--only", "fake", "--runs", "3", "--update", "--out", str(out)]) == 0  # fake: 4, 5, 6
    page = out.read_text()
    assert "| fake time / reference time | **5.00x** | 4.00x to 6.00x | 3 |" in page and "**2.00x**" not in page
    assert page.count("## A fake benchmark") == 1 and page.endswith(broken)  # the other section as it was
    assert "Measured by `python benchmarks/run_all.py --only fake --update` on" in page
    assert page.startswith(before[:before.index("## ")])  # the header, for the sections it measured


def test_update_needs_only(benches, capsys):
    with pytest.raises(SystemExit):
        run_all.main(["--runs", "3", "--update"])
    assert "--only" in capsys.readouterr().err
