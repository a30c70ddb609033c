#!/usr/bin/env python
"""Mutation check: inject one single-point bug at a time into a copy of the checkout and check the fast suite fails.

A test suite is only as good as the bugs it catches. Each mutant below is a bug a user would hit (the softmax scale
ignored, a mask off by one, a timing unit wrong, a hostile URL value let through, ...) written as an exact snippet of
the source and its replacement. For every mutant the script

  1. copies the checkout (the files git lists, tracked and untracked-but-not-ignored) into a temporary directory,
  2. replaces the snippet, which must occur EXACTLY ONCE in its file (else the mutant is "stale": the code moved,
     and the mutant must be updated),
  3. runs the fast suite there: python -m pytest -m "not browser and not slow" -x -q -p no:cacheprovider, over the
     mutant's declared test files (the ones that exercise that code; `--full` runs the whole fast suite instead),
  4. records "killed" (a test failed), or "survived" (every test passed: the suite misses that bug).

It prints a table (mutant, file, result, first failing test) and exits non-zero if any mutant survived or is stale,
or if the unmutated tests do not pass to begin with (the baseline run, skipped with --no-baseline).

Usage:
    python scripts/mutants.py                     every mutant, declared test files, one at a time
    python scripts/mutants.py --list              the mutants, and whether each snippet is still found once
    python scripts/mutants.py --only scale_ignored,causal_off_by_one
    python scripts/mutants.py --full --jobs 2     the whole fast suite per mutant, two copies side by side
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAST = ["-m", "not browser and not slow", "-x", "-q", "-p", "no:cacheprovider"]
TIMEOUT_S = 1200  # one mutant's test run; a mutant that hangs the suite counts as killed ("timeout")


@dataclass(frozen=True)
class Mutant:
    name: str  # short identifier, for --only
    file: str  # path relative to the repository root
    old: str  # exact snippet; must occur exactly once in the file
    new: str  # its replacement: the bug
    description: str  # what a user would see
    tests: tuple[str, ...]  # the fast-suite test files (or doctest modules) that run for it


# ----------------------------------------------------------------------------------------------------------------------
# the mutants: (name, file, old snippet, new snippet, description, test files)

_SCORE = ("    if score is not None:\n"
          "        S_ij = score.log2_scores(S_ij, step)  # (BH_kv, rows G, cols) score_mod(scale q.k) log2(e)\n")
_MASK = ("    for t in step.tiles:\n"
         "        if t.status != PARTIAL:\n"
         "            continue  # full tiles apply no mask; a partial one masks its own block of the step\n"
         "        rows = slice((t.q_start - step.q_start) * G, (t.q_end - step.q_start) * G)\n"
         "        S_t = S_ij[:, rows, t.k_start - step.k_start:t.k_end - step.k_start]"
         "  # (BH_kv, Br G, Bc) view of the step\n"
         "        if score is None:\n"
         "            add_tile_bias(S_t, masks.bias(t), G)"
         "  # finite inputs give finite q.k: + (-inf) hides it, as SDPA\n"
         "        else:\n"
         "            mask_tile(S_t, masks.hidden(t), G)"
         "  # a score_mod may return +-inf or NaN where hidden: overwrite it\n")
_MOD_THEN_MASK, _MASK_THEN_MOD = _SCORE + _MASK, _MASK + _SCORE  # flash.py's _mod_and_mask, and the bug

MUTANTS = [
    Mutant("scale_ignored", "flashviz/core/validate.py",
           "    return value\n\n\ndef validate_loop_order",
           "    return 1.0 / math.sqrt(d) if d > 0 else 1.0\n\n\ndef validate_loop_order",
           "every kernel ignores the user's scale and uses 1/sqrt(d)",
           ("tests/test_forward.py", "tests/test_backward.py", "tests/test_decode.py")),
    Mutant("timing_in_ms", "flashviz/measure/timing.py",
           "                wall = now() - t0\n",
           "                wall = (now() - t0) * 1e3\n",
           "time_call (and benchmark) report milliseconds labelled as seconds",
           ("tests/test_measure.py",)),
    Mutant("time_calls_in_ks", "flashviz/measure/timing.py",
           "                wall = now() - t0\n",
           "                wall = (now() - t0) / 1e3\n",
           "time_calls, and so every sweep's time_s and GFLOP/s, off by 1000",
           ("tests/test_measure.py", "tests/test_sweep.py")),
    Mutant("disturbed_calls_kept", "flashviz/measure/load.py",
           "[(s < DISTURBED_SHARE * typical or waited_long(q, w)) and w >= JUDGED_FROM_S",
           "[False and (s < DISTURBED_SHARE * typical or waited_long(q, w)) and w >= JUDGED_FROM_S",
           "a call during which the process lost its cores is kept: a busy machine's slow calls move the median",
           ("tests/test_disturbed.py",)),
    Mutant("peer_waits_ignored", "flashviz/measure/load.py",
           "    waited = waits if waits is not None and threads != 1 else [0.0] * len(walls)\n",
           "    waited = [0.0] * len(walls)\n",
           "on more threads a call whose threads waited for a core is kept, while a spinning peer hides the wait",
           ("tests/test_disturbed.py",)),
    Mutant("waits_left_in", "flashviz/measure/load.py",
           "    if waits is None or threads != 1:\n        return [float(w) for w in walls]\n",
           "    return [float(w) for w in walls]\n",
           "on one thread a call's wait for a core stays in its time: the median is the neighbours', not the kernel's",
           ("tests/test_disturbed.py",)),
    Mutant("thread_cap_ignored", "flashviz/measure/timing.py",
           "    if _thread_cap is not None:\n        threads = min(threads, _thread_cap)\n",
           "",
           "timings use every thread asked for though other work keeps cores busy (threads wait for each other)",
           ("tests/test_disturbed.py",)),
    Mutant("unsettled_rows_name_winners", "flashviz/measure/verdict.py",
           "    return replace(e, converged=False, busy=True) if aside is not None and aside > values[3] else e\n",
           "    return e\n",
           "a median the run left unsettled (the machine too busy for clean calls) still names a winner",
           ("tests/test_disturbed.py",)),
    Mutant("capped_rows_name_winners", "flashviz/measure/verdict.py",
           "    separated = disjoint and real and ea.converged and eb.converged and not (ea.capped or eb.capped)\n",
           "    separated = disjoint and real and ea.converged and eb.converged\n",
           "a median measured with fewer threads than asked (other work kept cores busy) still names a winner",
           ("tests/test_disturbed.py",)),
    Mutant("timed_runs_in_the_server", "flashviz/kit/lock.py",
           "    if os.environ.get(WORKER_ENV) == \"inline\":\n",
           "    if True:\n",
           "the dashboard's timed runs execute in the server's own process, beside its page-drawing threads",
           ("tests/test_app.py",)),
    Mutant("rescale_factor_one", "flashviz/core/softmax.py",
           "    alpha = torch.exp2(m_i - m_safe)  # (..., Br) 2^(m_i - m_new)",
           "    alpha = torch.ones_like(m_safe)  # (..., Br) 2^(m_i - m_new)",
           "the online softmax never rescales what earlier tiles accumulated",
           ("tests/test_forward.py",)),
    Mutant("causal_off_by_one", "flashviz/core/tiling.py",
           "        mask = diff <= 0",
           "        mask = diff <= 1",
           "causal lets query i see key i + 1 (naive and the kernels agree with each other: only an oracle sees it)",
           ("tests/test_forward.py",)),
    Mutant("window_edge_off_by_one", "flashviz/core/tiling.py",
           "        m = diff >= -left",
           "        m = diff > -left",
           "a sliding window (left, right) hides key i - left",
           ("tests/test_forward.py",)),
    Mutant("decode_merge_weight", "flashviz/core/decode.py",
           "    outs = O / l.clamp(min=1.0).unsqueeze(-1)",
           "    outs = O",
           "Flash-Decoding merges the unnormalised split outputs with the logsumexp weights exp(L_s - L)",
           ("tests/test_decode.py",)),
    Mutant("decode_scores_in_input_dtype", "flashviz/core/decode_layouts.py",
           "    S_ij = torch.bmm(q_b, k3.transpose(1, 2).to(O.dtype)).view(R, count, GN, size)",
           "    S_ij = torch.bmm(q_b, k3.transpose(1, 2).to(O.dtype)).to(k3.dtype).to(O.dtype)"
           ".view(R, count, GN, size)",
           "Flash-Decoding rounds the scores S = Q K^T of a bf16 / fp16 cache to bf16 / fp16 before the softmax: "
           "7 to 16x SDPA's error on a long cache, invisible in fp32",
           ("tests/test_dtype_rule.py",)),
    Mutant("backward_drops_D", "flashviz/core/backward.py",
           "    dS_ij = dP_ij.sub_(D_blocks[i]).mul_(P_ij)",
           "    dS_ij = dP_ij.mul_(P_ij)",
           "the backward forgets D_i = rowsum(dO * O): dS = P * dP",
           ("tests/test_backward.py",)),
    Mutant("lse_in_log2", "flashviz/core/flash.py",
           "        L[:, rows] = (m_i + torch.log2(l_i)) * LN_2  # natural-log logsumexp",
           "        L[:, rows] = m_i + torch.log2(l_i)  # natural-log logsumexp",
           "FA2's logsumexp comes back in base 2 (and the backward recomputes P from it)",
           ("tests/test_forward.py", "tests/test_backward.py")),
    Mutant("url_value_unclamped", "flashviz/app/query.py",
           "clamped = min(max(value, lo), hi)",
           "clamped = value",
           "a hostile URL value (n=10**9, br=0) reaches the dashboard unrepaired",
           ("tests/test_validation.py",)),
    Mutant("blockmask_full_partial_swapped", "flashviz/core/blockmask.py",
           "    kv_num, kv_idx = _ordered(partial.to(device))\n    full_num, full_idx = _ordered(full.to(device))",
           "    kv_num, kv_idx = _ordered(full.to(device))\n    full_num, full_idx = _ordered(partial.to(device))",
           "the BlockMask export lists full blocks as partial and partial ones as full",
           ("tests/test_masks_blockmask.py",)),
    # -- more bugs a user would hit
    Mutant("gqa_head_modulo", "flashviz/core/flash.py",
           "    x = x.reshape(B * heads_kv, G, N, *rest)  # (B H_kv, G, N, *rest)",
           "    x = x.reshape(B, G, heads_kv, N, *rest).transpose(1, 2).reshape(B * heads_kv, G, N, *rest)",
           "GQA pairs query head h with K/V head h % H_kv instead of h // G",
           ("tests/test_gqa.py",)),
    Mutant("ragged_last_key_block_dropped", "flashviz/core/tiling.py",
           "        self.n_k_blocks = -(-self.n_k // self.block_k)  # Tc = ceil(N_k / Bc)",
           "        self.n_k_blocks = self.n_k // self.block_k  # Tc = ceil(N_k / Bc)",
           "the ragged last K/V block is never visited: keys past the last whole tile are ignored",
           ("tests/test_forward.py",)),
    Mutant("neg_inf_guard_removed", "flashviz/core/softmax.py",
           "    m_safe = m_new.masked_fill(m_new == NEG_INF, 0.0) if partial else m_new  # (..., Br)",
           "    m_safe = m_new  # (..., Br)",
           "a row that sees no key gets NaN (-inf - -inf) instead of zeros",
           ("tests/test_forward.py",)),
    Mutant("dk_scale_dropped", "flashviz/core/backward.py",
           "            dK_j.baddbmm_(dS_ij.transpose(1, 2), Q_i, alpha=scale)",
           "            dK_j.baddbmm_(dS_ij.transpose(1, 2), Q_i)",
           "dK misses the softmax scale",
           ("tests/test_backward.py",)),
    Mutant("memory_reports_final_level", "flashviz/measure/memory.py",
           "        peak = max(peak, level)\n    return peak",
           "        peak = max(peak, level)\n    return level",
           "measure_memory reports what is still alive at the end, not the peak",
           ("tests/test_measure.py",)),
    Mutant("io_kv_outer_reads_q_once", "flashviz/model/iosteps.py",
           "        reads_q = sum(band.tiles * (2 * band.rows * d + 2 * band.rows) for band in bands)",
           "        reads_q = sum((2 * band.rows * d + 2 * band.rows) for band in bands if band.tiles)",
           "the IO model charges FA1's Q_i, O_i, l_i, m_i once per row instead of once per computed tile",
           ("tests/test_iomodel.py",)),
    Mutant("backward_flops_factor", "flashviz/model/flops.py",
           "MATMULS_BACKWARD = 5  # recompute S",
           "MATMULS_BACKWARD = 4  # recompute S",
           "training FLOPs forget the recomputation of S (3 x the forward instead of 3.5 x)",
           ("tests/test_measure.py",)),
    Mutant("kv_outer_visits_rows_first", "flashviz/core/tiling.py",
           "            k_block, q_block = divmod(step, self.n_q_blocks)",
           "            q_block, k_block = divmod(step, self.n_k_blocks)",
           "FA1's schedule lists its tiles in FA2's order (outer loop over Q blocks)",
           ("tests/test_tiling.py",)),
    Mutant("paged_logical_page_off_by_one", "flashviz/core/decode_paged.py",
           "        pos = owner_p[:, None] * page + torch.arange(page, device=q4.device)",
           "        pos = (owner_p[:, None] + 1) * page + torch.arange(page, device=q4.device)",
           "a paged cache read in place masks each page as if it were the next logical page",
           ("tests/test_decode.py",)),
    Mutant("decode_splits_overlap", "flashviz/core/decode_layouts.py",
           "            t1 = min(t0 + step, (s + 1) * chunk, max_len)\n            yield s, 1, t0, t1 - t0, k_cache",
           "            t1 = min(t0 + step + 1, (s + 1) * chunk + 1, max_len)\n"
           "            yield s, 1, t0, t1 - t0, k_cache",
           "Flash-Decoding splits of a contiguous cache overlap by one key: that key counts twice",
           ("tests/test_decode.py",)),
    Mutant("score_mod_after_mask", "flashviz/core/flash.py", _MOD_THEN_MASK, _MASK_THEN_MOD,
           "the forward masks first and applies the score_mod after (a soft-cap turns -inf into a finite score)",
           ("tests/test_masked_kernels.py",)),
    Mutant("half_accumulators", "flashviz/core/validate.py",
           "    return torch.float64 if dtype == torch.float64 else torch.float32",
           "    return torch.float64 if dtype == torch.float64 else dtype",
           "the tiled kernels accumulate fp16 / bf16 inputs in fp16 / bf16 instead of fp32",
           ("tests/test_forward.py",)),
    Mutant("sweep_late_rows_ok", "flashviz/measure/sweep.py",
           "        if late is not None:\n            why.update(dict.fromkeys(fns, late))",
           "        if late is not None:\n            pass",
           "a row stopped by the time budget while timing says ok, with no time",
           ("tests/test_sweep.py",)),
    Mutant("sweep_hbm_bytes_fp32", "flashviz/measure/sweep.py",
           "window=cfg.window, batch=cfg.batch, heads=cfg.heads, dtype_bytes=cfg.dtype_bytes).bytes)",
           "window=cfg.window, batch=cfg.batch, heads=cfg.heads, dtype_bytes=4).bytes)",
           "the sweep's modelled HBM bytes price every dtype at 4 bytes per element",
           ("tests/test_sweep.py",)),
    Mutant("skipped_tiles_computed", "flashviz/core/tiling.py",
           "        return SKIPPED\n",
           "        return PARTIAL\n",
           "tiles nothing sees are loaded and computed (masked to zero: the output is right, the work and the reads "
           "are not, and NaN or garbage in them leaks)",
           ("tests/test_backward.py",)),
    Mutant("tile_full_too_early", "flashviz/core/tiling.py",
           "    if last_q - left <= k_start and q_start + right >= last_k:",
           "    if last_q - left <= k_start + 1 and q_start + right >= last_k:",
           "a window tile with one hidden element is called full, so the kernels skip its mask",
           ("tests/test_forward.py",)),
    Mutant("io_gqa_kv_per_query_head", "flashviz/model/iomodel.py",
           "    return IOCost(c.algorithm, reads_q * bh + reads_kv * bh_kv, writes * bh + writes_kv * bh_kv, "
           "flops * bh,\n                  c.dtype_bytes, reads_kv * bh_kv, writes_kv * bh_kv, c.backward, c.dq_mode)",
           "    return IOCost(c.algorithm, reads_q * bh + reads_kv * bh, writes * bh + writes_kv * bh_kv, "
           "flops * bh,\n                  c.dtype_bytes, reads_kv * bh, writes_kv * bh_kv, c.backward, c.dq_mode)",
           "the IO model charges GQA's shared K/V once per query head instead of once per K/V head",
           ("tests/test_iomodel.py",)),
    Mutant("decode_causal_top_left", "flashviz/core/decode.py",
           "        lim = lim - layout.n_q + 1 + torch.arange(layout.n_q, device=lim.device)",
           "        lim = 1 + torch.arange(layout.n_q, device=lim.device)",
           "causal decoding aligns the new rows top-left (row i sees keys 0..i) instead of bottom-right",
           ("tests/test_decode.py",)),
    Mutant("fp8_state_on_cpu", "flashviz/core/fp8.py",
           "    m = torch.full(Q.shape[:3], NEG_INF, **f32)",
           "    m = torch.full(Q.shape[:3], NEG_INF, dtype=torch.float32)",
           "fp8_attention's running max is made on the CPU whatever the inputs' device: a device mismatch on CUDA",
           ("tests/test_device.py",)),
    Mutant("decode_state_on_cpu", "flashviz/core/decode_layouts.py",
           "             torch.zeros((B * H, n_splits, GN), dtype=acc, device=q4.device),",
           "             torch.zeros((B * H, n_splits, GN), dtype=acc),",
           "Flash-Decoding's running sums are made on the CPU whatever the cache's device (a kernel that reads its "
           "cache lengths, which the meta device cannot run)",
           ("tests/test_device.py",)),
    Mutant("verdict_inside_the_noise", "flashviz/measure/verdict.py",
           "    separated = disjoint and real and ea.converged and eb.converged",
           "    separated = real and ea.converged and eb.converged",
           "a timing verdict names a faster kernel though the two medians' 95% intervals overlap",
           ("tests/test_noise.py",)),
    Mutant("timing_allocator_unpinned", "flashviz/measure/timing.py",
           "    with threads_set_to(threads) as n_threads, steady_allocator(), contextlib.ExitStack() as stack:",
           "    with threads_set_to(threads) as n_threads, contextlib.ExitStack() as stack:",
           "a timing runs with glibc's moving mmap and trim thresholds: naive attention's time switches between two "
           "states from call to call",
           ("tests/test_allocator.py",)),
    Mutant("zigzag_second_chunk", "flashviz/ring/layouts.py",
           "    return rank * c + i + (i >= c) * (2 * (world - 1 - rank) * c)  # chunk r, then chunk 2W-1-r",
           "    return rank * c + i + (i >= c) * (2 * (world - 1) * c)  # chunk r, then chunk 2W-1-r",
           "zigzag deals every rank's second half the last chunk instead of chunk 2W-1-r (shards overlap)",
           ("tests/test_ring.py",)),
    Mutant("ring_merge_keeps_last_step", "flashviz/ring/attention.py",
           "    O, L = merge_partials(torch.stack((O, O_t)), torch.stack((L, L_flat)))  # (B H, n, d), (B H, n)",
           "    O, L = O_t, L_flat  # (B H, n, d), (B H, n)",
           "ring attention keeps the last step's partial instead of merging every step by logsumexp",
           ("tests/test_ring_processes.py",)),
]


# ----------------------------------------------------------------------------------------------------------------------
# running them


def stale(m: Mutant, root: Path = ROOT) -> str | None:
    """Why a mutant cannot be applied (None when its snippet occurs exactly once)."""
    path = root / m.file
    if not path.exists():
        return f"stale mutant: {m.file} does not exist"
    count = path.read_text().count(m.old)
    if count != 1:
        return f"stale mutant: snippet not found in {m.file}" if count == 0 else (
            f"stale mutant: snippet found {count} times in {m.file} (must be exactly once)")
    return None


def checkout_files(root: Path) -> list[str]:
    """The files of the checkout as git lists them: tracked, and untracked but not ignored."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                         capture_output=True, check=True).stdout.decode()
    return sorted({f for f in out.split("\0") if f and (root / f).is_file()})


def copy_checkout(root: Path, dest: Path) -> None:
    for f in checkout_files(root):
        target = dest / f
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / f, target)


def run_pytest(copy: Path, targets: list[str]) -> tuple[str, str]:
    """(result, first failing test) of the fast suite over targets in the copy."""
    env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pytest", *FAST, *targets]
    try:
        proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "killed", f"(timeout after {TIMEOUT_S} s)"
    out = proc.stdout + proc.stderr
    failed = re.search(r"^(?:FAILED|ERROR) (.+?)(?: - |$)", out, re.MULTILINE)
    first = failed.group(1) if failed else ""
    if proc.returncode == 0:
        return "survived", ""
    if proc.returncode in (1, 2) and (failed or "error" in out.lower()):
        return "killed", first or out.strip().splitlines()[-1][:100]
    return "broken", f"pytest exit {proc.returncode}: {out.strip().splitlines()[-1][:100] if out.strip() else ''}"


def run_mutant(m: Mutant, copy: Path, full: bool) -> tuple[str, str, float]:
    path = copy / m.file
    original = path.read_text()
    t0 = time.perf_counter()
    path.write_text(original.replace(m.old, m.new, 1))
    try:
        result, first = run_pytest(copy, ["tests", "flashviz"] if full else list(m.tests))
    finally:
        path.write_text(original)
    return result, first, time.perf_counter() - t0


def table(rows: list[tuple[str, ...]]) -> str:
    header = ("mutant", "file", "result", "first failing test")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]

    def line(r: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--list", action="store_true", help="list the mutants and whether each applies; run nothing")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="run only these mutants (comma-separated, or repeat the option)")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run side by side, each in its own copy (default 1)")
    ap.add_argument("--full", action="store_true", help="run the whole fast suite for every mutant, not only the "
                                                        "mutant's declared test files")
    ap.add_argument("--no-baseline", action="store_true", help="skip the run of the unmutated tests first")
    args = ap.parse_args(argv)

    names = [n for arg in args.only for n in arg.split(",") if n]
    unknown = sorted(set(names) - {m.name for m in MUTANTS})
    if unknown:
        ap.error(f"unknown mutant(s) {unknown}; --list shows them")
    chosen = [m for m in MUTANTS if not names or m.name in names]
    if len({m.name for m in MUTANTS}) != len(MUTANTS):
        ap.error("two mutants share a name")
    problems = {m.name: stale(m) for m in chosen}
    if args.list:
        for m in chosen:
            print(f"{m.name:34} {m.file:32} {problems[m.name] or 'ok'}\n{'':34} {m.description}")
        return 1 if any(problems.values()) else 0
    if args.jobs < 1:
        ap.error("--jobs must be >= 1")

    rows: dict[str, tuple[str, ...]] = {m.name: (m.name, m.file, "stale", why) for m in chosen
                                        if (why := problems[m.name])}
    runnable = [m for m in chosen if not problems[m.name]]
    workdir = Path(tempfile.mkdtemp(prefix="flashviz-mutants-"))
    try:
        copies = []
        for w in range(min(args.jobs, max(1, len(runnable)))):
            copies.append(workdir / f"copy{w}")
            copy_checkout(ROOT, copies[-1])
        scope = "the whole fast suite" if args.full else "each mutant's declared test files"
        print(f"{len(runnable)} mutants, fast suite ({' '.join(FAST)}) over {scope}, {len(copies)} job(s)",
              flush=True)
        if not args.no_baseline and runnable:
            targets = ["tests", "flashviz"] if args.full else sorted({t for m in runnable for t in m.tests})
            result, first = run_pytest(copies[0], targets)
            if result != "survived":  # "survived" here means: every unmutated test passed
                print(f"baseline: the unmutated tests do not pass ({result}: {first}); fix that first")
                return 2
            print("baseline: the unmutated tests pass", flush=True)
        free = list(copies)

        def one(m: Mutant) -> None:
            copy = free.pop()
            try:
                result, first, seconds = run_mutant(m, copy, args.full)
            finally:
                free.append(copy)
            rows[m.name] = (m.name, m.file, result, first)
            print(f"  {m.name}: {result} ({seconds:.0f} s) {first}", flush=True)

        with ThreadPoolExecutor(max_workers=len(copies)) as pool:
            list(pool.map(one, runnable))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    ordered = [rows[m.name] for m in chosen]
    print()
    print(table(ordered))
    bad = [r for r in ordered if r[2] != "killed"]
    print(f"\n{len(ordered) - len(bad)} of {len(ordered)} mutants killed"
          + (f"; not killed: {', '.join(r[0] for r in bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
