#!/usr/bin/env python
"""One command for a GPU: every check a CPU cannot make, in one run, into one markdown report.

On a machine with CUDA it

  1. runs the tests that exercise CUDA (the CUDA cases of the forward and backward suites, the second-device and
     dtype-rule tests, the layout properties) in a pytest subprocess;
  2. holds every kernel to flash-attn's dtype rule on the GPU (flashviz.measure.dtype_rule: bf16 and fp16, the
     forward, the backward, every decode path; the error against float64 at most 2x SDPA's own);
  3. times the forward, the backward, decoding and a masked forward against SDPA (its default choice and its flash
     backend), with the peak memory of each call;
  4. times and checks flashviz's Triton kernel, where `flashviz.triton` is installed and available, beside SDPA and
     flashviz's torch kernel (the same FA2 schedule in PyTorch);
  5. runs the ring with NCCL (one process per GPU) where there are 2 or more GPUs: its dtype rule, its step times;
  6. writes one markdown report: the device, the versions and every figure (gpu_report.md by default).

It is sized to finish in under 10 minutes on one GPU; a section that would start past the budget says
"not run: time budget". Without CUDA it says so in one line and exits 0. `--cpu-smoke` runs the same report on tiny
CPU sizes (the sections that need CUDA say so), so the report writer is exercised on any machine.

Usage:
    python scripts/gpu_check.py                      on a CUDA machine: gpu_report.md
    python scripts/gpu_check.py --out report.md
    python scripts/gpu_check.py --cpu-smoke --out /tmp/smoke.md   the report on tiny CPU sizes
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

BUDGET_S = 540.0  # the whole run: 9 minutes, so the report is written within 10
TEST_TIMEOUT_S = 240  # the pytest subprocess
CUDA_TESTS = ("tests/test_forward.py", "tests/test_backward.py", "tests/test_device.py", "tests/test_dtype_rule.py",
              "tests/test_layouts.py", "tests/test_triton.py")  # test_triton.py: its compiled-kernel cases (cuda)
CUDA_TEST_FILTER = "cuda or second_device or meta or dtype_rule or layouts"  # pytest -k: the device-sensitive tests
SMOKE_TESTS = ("tests/test_dtype_rule.py",)  # --cpu-smoke: one quick file, to run the subprocess path
SMOKE_TEST_FILTER = "ratio_and_verdict"
RULE_HEADING = "flash-attn's dtype rule (error vs float64, at most 2x SDPA's)"
NO_CUDA = "No CUDA device here (torch {torch}, torch.cuda.is_available() is False): nothing to check; run it on a GPU."


@dataclass
class Sizes:
    """Problem sizes of the benchmarks: a model's on a GPU, tiny for --cpu-smoke."""

    fwd: tuple[int, int, int, int]  # B, H, N, d of the forward and the masked forward
    bwd: tuple[int, int, int, int]  # B, H, N, d of the backward
    decode: tuple[int, int, int, int, int]  # B, H_q, H_kv, cache length, d
    block: int  # Br = Bc of flashviz's tiled kernels
    repeats: int  # timed calls per kernel
    small_rule: bool  # dtype_rule.error_table(small=)
    ring: tuple[int, int, int]  # H, N, d of the ring's run


GPU_SIZES = Sizes((1, 16, 4096, 128), (1, 8, 2048, 128), (8, 32, 8, 16384, 128), 128, 10, False, (8, 8192, 128))
SMOKE_SIZES = Sizes((1, 2, 128, 32), (1, 2, 64, 32), (2, 4, 2, 512, 32), 32, 3, True, (2, 128, 32))


@dataclass
class Report:
    """What the report says, section by section, as markdown lines."""

    title: str
    sections: list[tuple[str, list[str]]] = field(default_factory=list)
    start: float = field(default_factory=time.perf_counter)

    def add(self, heading: str, lines: list[str]) -> None:
        self.sections.append((heading, lines))

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def markdown(self) -> str:
        out = [f"# {self.title}", ""]
        for heading, lines in self.sections:
            out += [f"## {heading}", "", *lines, ""]
        out.append(f"Written in {self.elapsed():.0f} s.")
        return "\n".join(out) + "\n"


def versions(device: torch.device) -> list[str]:
    """The device and every version a reader needs to reproduce the figures."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    lines = [f"- flashviz commit: {commit.stdout.strip() or 'unknown'}",
             f"- Python {platform.python_version()}, torch {torch.__version__}, {platform.platform()}"]
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        try:
            nccl = torch.cuda.nccl.version()  # a tuple (major, minor, patch), an int in older builds
            nccl = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
        except (AttributeError, RuntimeError):
            nccl = "n/a"
        lines += [f"- device: {p.name}, compute capability {p.major}.{p.minor}, {p.total_memory / 2**30:.1f} GiB, "
                  f"{p.multi_processor_count} SMs; {torch.cuda.device_count()} GPU(s)",
                  f"- CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, NCCL {nccl}"]
    else:
        lines.append(f"- device: CPU ({torch.get_num_threads()} torch threads), --cpu-smoke sizes")
    try:
        import triton

        lines.append(f"- triton {triton.__version__}")
    except ImportError:
        lines.append("- triton: not installed")
    return lines


def run_tests(files: tuple[str, ...], keyword: str, timeout_s: float) -> list[str]:
    """pytest over files (-k keyword) in a subprocess; its summary line and, if it failed, its last lines."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not browser and not slow",
           "-k", keyword, *files]
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return [f"- `{' '.join(cmd[1:])}`: not finished within {timeout_s:.0f} s"]
    tail = done.stdout.strip().splitlines()
    summary = tail[-1] if tail else "(no output)"
    lines = [f"- `pytest -k \"{keyword}\" {' '.join(files)}`: **{summary}** (exit {done.returncode})"]
    if done.returncode != 0:
        lines += ["", "```", *tail[-25:], "```"]
    return lines


def rule_section(device: torch.device, sizes: Sizes) -> list[str]:
    from flashviz.measure.dtype_rule import error_table, table_md

    rows = [r for dtype in (torch.bfloat16, torch.float16)
            for r in error_table(dtype, device=device, small=sizes.small_rule)]
    failing = [r for r in rows if not r.passes]
    worst = max(rows, key=lambda r: r.ratio)
    return [f"{len(rows)} paths, {len(failing)} outside 2x SDPA's error; the largest ratio {worst.ratio:.2f} "
            f"({worst.kernel}, {worst.dtype}, {worst.path}).", "", table_md(rows)]


@dataclass(frozen=True)
class BenchRow:
    case: str  # forward, backward, decode, masks, triton
    impl: str  # flashviz's kernel, sdpa, sdpa flash, ...
    ms: float | None  # median milliseconds; None: not run
    ci: tuple[float, float] | None  # its 95% interval, ms
    peak_mib: float | None  # peak memory of one call, MiB
    note: str  # "not run: <why>", or what was compared


def _timed(case: str, fns: dict[str, Callable[[], object]], device: torch.device, repeats: int) -> list[BenchRow]:
    """Each callable timed (interleaved, flashviz's time_calls) and its peak memory measured; a callable that raises
    is a row that says why."""
    from flashviz.measure.memory import measure_memory
    from flashviz.measure.timing import time_calls

    runnable, rows = {}, []
    for name, fn in fns.items():
        try:
            fn()
            runnable[name] = fn
        except Exception as e:  # a backend that refuses these inputs: said in the report, not raised
            rows.append(BenchRow(case, name, None, None, None, f"not run: {type(e).__name__}: {str(e)[:120]}"))
    if runnable:
        timings = time_calls(runnable, warmup=2, repeats=repeats, sync_device=device)
        for name, fn in runnable.items():
            t = timings[name]
            peak = measure_memory(fn) if device.type == "cpu" else _cuda_peak(fn, device)
            rows.append(BenchRow(case, name, t.median * 1e3, (t.ci_low * 1e3, t.ci_high * 1e3), peak / 2**20, ""))
    return rows


def _cuda_peak(fn: Callable[[], object], device: torch.device) -> int:
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - start


def _sdpa_flash(fn: Callable[[], object]) -> Callable[[], object]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def run():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return fn()
    return run


def bench_section(device: torch.device, sizes: Sizes, report: Report) -> list[str]:
    import torch.nn.functional as F

    from flashviz.core.backward import flash_attention
    from flashviz.core.decode import flash_decode
    from flashviz.core.flash import flash_attention_forward
    from flashviz.masks import document
    from flashviz.numerics import make_inputs

    dtype = torch.bfloat16
    B, H, N, d = sizes.fwd
    q, k, v = (x.to(device) for x in make_inputs(B, H, N, N, d, dtype=dtype, outliers=True))
    sdpa_causal = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
    rows = _timed(f"forward causal B={B} H={H} N={N} d={d} bf16", {
        "flashviz q_outer": lambda: flash_attention_forward(q, k, v, sizes.block, causal=True, loop_order="q_outer"),
        "sdpa": sdpa_causal, "sdpa flash": _sdpa_flash(sdpa_causal)}, device, sizes.repeats)

    lengths = [N // 4, N // 2, N - N // 4 - N // 2]
    doc = document(lengths)
    idx = torch.arange(N, device=device)
    mask = doc(0, 0, idx[:, None], idx[None, :])  # (N, N) bool: SDPA takes the mask whole
    sdpa_mask = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # noqa: E731
    if report.elapsed() < BUDGET_S:
        rows += _timed(f"masks: document {lengths} B={B} H={H} N={N} d={d} bf16 (SDPA: a bool mask)", {
            "flashviz q_outer mask_mod": lambda: flash_attention_forward(q, k, v, sizes.block, mask_mod=doc,
                                                                         loop_order="q_outer"),
            "sdpa": sdpa_mask, "sdpa flash": _sdpa_flash(sdpa_mask)}, device, sizes.repeats)

    B, H, N, d = sizes.bwd
    xs = [x.to(device).requires_grad_() for x in make_inputs(B, H, N, N, d, dtype=dtype, outliers=True)]
    dO = torch.randn(xs[0].shape, device=device, dtype=dtype)

    def train(fn):
        def run():
            out = fn(*xs)
            return torch.autograd.grad(out, xs, dO)
        return run

    def sdpa_train(*a):
        return F.scaled_dot_product_attention(*a, is_causal=True)

    if report.elapsed() < BUDGET_S:
        rows += _timed(f"forward + backward causal B={B} H={H} N={N} d={d} bf16", {
            "flashviz flash_attention": train(lambda *a: flash_attention(*a, block_size=sizes.block, causal=True)),
            "sdpa": train(sdpa_train), "sdpa flash": _sdpa_flash(train(sdpa_train))}, device, sizes.repeats)

    B, Hq, Hkv, L, d = sizes.decode
    q1, kc, vc = (x.to(device) for x in make_inputs(B, Hq, 1, L, d, dtype=dtype, outliers=True, h_kv=Hkv))
    sdpa_dec = lambda: F.scaled_dot_product_attention(q1, kc, vc, enable_gqa=True)  # noqa: E731
    if report.elapsed() < BUDGET_S:
        rows += _timed(f"decode B={B} H={Hq}/{Hkv} cache={L} d={d} bf16", {
            "flashviz flash_decode": lambda: flash_decode(q1, kc, vc), "sdpa": sdpa_dec,
            "sdpa flash": _sdpa_flash(sdpa_dec)}, device, sizes.repeats)
    rows += triton_rows(device, sizes, report)
    return bench_md(rows)


def triton_rows(device: torch.device, sizes: Sizes, report: Report) -> list[BenchRow]:
    """flashviz.triton's kernel against SDPA, where the module exists and says it is available."""
    case = "triton forward causal"
    try:
        import flashviz.triton as fv_triton
    except ImportError as e:
        return [BenchRow(case, "flashviz.triton", None, None, None, f"not run: not installed ({e})")]
    if not fv_triton.available():
        return [BenchRow(case, "flashviz.triton", None, None, None, "not run: triton is not available here")]
    if device.type != "cuda":
        return [BenchRow(case, "flashviz.triton", None, None, None, "not run: timed on CUDA only (the interpreter "
                         "on a CPU is a model, not a kernel)")]
    if report.elapsed() > BUDGET_S:
        return [BenchRow(case, "flashviz.triton", None, None, None, "not run: time budget")]
    import torch.nn.functional as F

    from flashviz.measure.dtype_rule import reference, rule_row
    from flashviz.numerics import make_inputs

    B, H, N, d = sizes.fwd
    q, k, v = (x.to(device) for x in make_inputs(B, H, N, N, d, dtype=torch.bfloat16, outliers=True))
    sdpa = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
    from flashviz import flash_attention

    rows = _timed(f"{case} B={B} H={H} N={N} d={d} bf16", {
        "flashviz.triton": lambda: fv_triton.attention(q, k, v, causal=True), "sdpa": sdpa,
        "flashviz torch kernel": lambda: flash_attention(q, k, v, causal=True, block_size=sizes.block)},
        device, sizes.repeats)
    row = rule_row("triton", "causal", fv_triton.attention(q, k, v, causal=True), sdpa(),
                   reference(q, k, v, causal=True))
    verdict = "within" if row.passes else "OUTSIDE"
    note = f"error {row.error:.3g} vs SDPA's {row.sdpa_error:.3g}: {row.ratio:.2f}x ({verdict} 2x)"
    return [replace(r, note=note) if r.impl == "flashviz.triton" and r.ms is not None else r for r in rows]


def bench_md(rows: list[BenchRow]) -> list[str]:
    lines = ["Medians of interleaved calls (flashviz.measure.timing.time_calls, the device synchronised after each), "
             "their 95% interval, and one call's peak memory above its start.", "",
             "| case | implementation | median ms | 95% interval ms | x SDPA | peak MiB | note |",
             "|---|---|---|---|---|---|---|"]
    sdpa_ms = {r.case: r.ms for r in rows if r.impl == "sdpa" and r.ms}
    for r in rows:
        if r.ms is None:
            lines.append(f"| {r.case} | {r.impl} | | | | | {r.note} |")
            continue
        ratio = f"{r.ms / sdpa_ms[r.case]:.2f}" if r.case in sdpa_ms else ""
        lines.append(f"| {r.case} | {r.impl} | {r.ms:.3f} | {r.ci[0]:.3f} - {r.ci[1]:.3f} | {ratio} | "
                     f"{r.peak_mib:.1f} | {r.note} |")
    return lines


def ring_section(sizes: Sizes, report: Report) -> list[str]:
    """The ring with NCCL, one process per GPU (up to 4): the dtype rule and every rank's step times."""
    n_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n_gpus < 2:
        return [f"not run: the ring with NCCL needs 2 or more GPUs, this machine has {n_gpus}."]
    if report.elapsed() > BUDGET_S:
        return ["not run: time budget"]
    from flashviz.measure.dtype_rule import reference, rule_row, sdpa, table_md
    from flashviz.numerics import make_inputs
    from flashviz.ring import RingJob, run_ring_jobs

    world = min(n_gpus, 4)
    H, N, d = sizes.ring
    q, k, v = make_inputs(1, H, N, N, d, dtype=torch.bfloat16, outliers=True)
    job = RingJob(q, k, v, world, True, "zigzag", sizes.block, torch.randn(q.shape).to(q.dtype))
    (run,) = run_ring_jobs([job, job], backend="nccl", timeout_s=180)[1:]  # the first run warms NCCL and the kernels
    row = rule_row("ring", f"zigzag causal W={world}", run.out, sdpa(q, k, v, causal=True),
                   reference(q, k, v, causal=True))
    lines = [f"W = {world}, N = {N}, H = {H}, d = {d}, bf16, zigzag causal; the second of two runs.", "",
             table_md([row]), "", "| rank | phase | step | compute ms | compute CPU ms | comm ms |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {e.rank} | {e.phase} | {e.step} | {e.compute_s * 1e3:.2f} | {e.compute_cpu_s * 1e3:.2f} | "
              f"{e.comm_s * 1e3:.2f} |" for e in sorted(run.events, key=lambda e: (e.phase, e.step, e.rank))]
    return lines


def section(report: Report, heading: str, fn: Callable[[], list[str]]) -> None:
    """Run one section into the report; a section that raises says so and the rest still run."""
    if report.elapsed() > BUDGET_S:
        report.add(heading, ["not run: time budget"])
        return
    t0 = time.perf_counter()
    try:
        lines = fn()
    except Exception as e:  # the report is the product: one failing section must not lose the others
        lines = [f"**failed**: {type(e).__name__}: {e}"]
    report.add(heading, [*lines, "", f"({time.perf_counter() - t0:.1f} s)"])
    print(f"{heading}: done at {report.elapsed():.0f} s", flush=True)


def check(device: torch.device, sizes: Sizes, tests: tuple[tuple[str, ...], str]) -> Report:
    report = Report(f"flashviz GPU check: {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'}")
    report.add("Device and versions", versions(device))
    section(report, "Tests", lambda: run_tests(tests[0], tests[1], TEST_TIMEOUT_S))
    section(report, RULE_HEADING, lambda: rule_section(device, sizes))
    section(report, "Benchmarks against SDPA and its flash backend", lambda: bench_section(device, sizes, report))
    section(report, "Ring attention with NCCL", lambda: ring_section(sizes, report))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "gpu_report.md", help="where the markdown report goes")
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="without CUDA: the report on tiny CPU sizes (checks the writer, measures nothing real)")
    args = parser.parse_args(argv)
    if torch.cuda.is_available():
        report = check(torch.device("cuda", 0), GPU_SIZES, (CUDA_TESTS, CUDA_TEST_FILTER))
    elif args.cpu_smoke:
        report = check(torch.device("cpu"), SMOKE_SIZES, (SMOKE_TESTS, SMOKE_TEST_FILTER))
    else:
        print(NO_CUDA.format(torch=torch.__version__))
        return 0
    args.out.write_text(report.markdown())
    print(f"report: {args.out} ({report.elapsed():.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
