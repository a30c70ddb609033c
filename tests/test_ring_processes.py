"""flashviz.ring in real processes: W = 1 to 4 ranks on gloo, against float64 attention in one process; the step
events against the model; runs that fail on purpose (a rank raises, dies, hangs) end with an error naming the rank and
leave no process and no port behind; the torchrun command.

Starting a rank costs seconds (it imports torch), so the correctness matrix is one run of 4 processes computing every
configuration (run_ring_jobs; the smaller worlds on subgroups of the first ranks), with tiny tensors. The runs that
last their timeout (a hang), start three processes of their own (torchrun) or two runs at once are marked slow.
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from _oracle import make_qkv, max_err, reference, reference_grads

import flashviz.ring as ring_module
import flashviz.ring.runner as ring_runner
from flashviz import naive_attention
from flashviz.measure.dtype_rule import reference as dtype_reference
from flashviz.measure.dtype_rule import rule_row, sdpa
from flashviz.numerics import make_inputs
from flashviz.ring import BACKWARD, FORWARD, LAYOUTS, RingJob, ring_schedule, run_ring, run_ring_jobs, shard_bytes

ROOT = Path(__file__).resolve().parent.parent
N, D, BLOCK = 48, 8, 4  # N divisible by 2W for W = 1..4; tiles of 4 (zigzag chunks of 6 for W = 4: partial tiles)
GRAD_FLOOR = 5e-6  # absolute floor of the gradients' 2x rule, as tests/test_backward.py's for fp32
PLAN_FIELDS = ("rank", "step", "kv_rank", "phase", "tiles_computed", "tiles_partial", "tiles_skipped", "flops",
               "bytes_sent")


def _job(world, layout, causal, H=2, H_kv=2, n=N, block=BLOCK, dtype=torch.float32, grad=True, seed=0):
    q, k, v = make_qkv(1, H, n, n, D, dtype=dtype, seed=seed, h_kv=H_kv)
    dO = torch.randn(q.shape, generator=torch.Generator().manual_seed(seed + 1)).to(dtype) if grad else None
    return RingJob(q, k, v, world, causal, layout, block, dO)


MATRIX = [(w, layout, causal) for w in (1, 2, 3, 4) for layout in LAYOUTS for causal in (False, True)]
GQA = [(2, "zigzag", True, 4, 2), (4, "striped", True, 4, 2), (3, "contiguous", False, 3, 1)]
WORK = [("contiguous", 4), ("zigzag", 4), ("striped", 4), ("contiguous", 16)]  # W = 4, N = 64, (layout, block)
BF16 = [1, 2, 3, 4]


@pytest.fixture(scope="module")
def runs():
    """Every configuration, one run of 4 processes: {name: (job, RingRun)}."""
    jobs = {("fp32", *c): _job(*c) for c in MATRIX}
    jobs |= {("gqa", w, layout, causal, H, H_kv): _job(w, layout, causal, H, H_kv) for w, layout, causal, H, H_kv
             in GQA}
    jobs |= {("work", layout, block): _job(4, layout, True, n=64, block=block, grad=False) for layout, block in WORK}
    jobs |= {("bf16", w): RingJob(*make_inputs(1, 2, N, N, D, dtype=torch.bfloat16, outliers=True, seed=w), w, True,
                                  "zigzag", BLOCK) for w in BF16}
    results = run_ring_jobs(list(jobs.values()), timeout_s=300)
    return {name: (job, run) for (name, job), run in zip(jobs.items(), results, strict=True)}


def _fp32_runs(runs):
    return [(name, job, run) for name, (job, run) in runs.items() if name[0] in ("fp32", "gqa")]


def test_the_forward_is_attention_over_the_whole_sequence_within_1e_5(runs):
    for name, job, run in _fp32_runs(runs):
        assert run.out.shape == job.q.shape and run.out.dtype == torch.float32
        assert max_err(run.out, reference(job.q, job.k, job.v, causal=job.causal)) <= 1e-5, name
        G = job.q.shape[1] // job.k.shape[1]
        S = job.q.double() @ job.k.double().repeat_interleave(G, 1).transpose(-1, -2) / math.sqrt(D)
        if job.causal:
            S = S.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), -math.inf)
        assert max_err(run.lse, torch.logsumexp(S, -1)) <= 1e-5, name


def test_the_gradients_are_within_twice_fp32_autogradss_own_error(runs):
    for name, job, run in _fp32_runs(runs):
        ref = reference_grads(job.q, job.k, job.v, job.dO, causal=job.causal)
        q, k, v = (t.clone().requires_grad_() for t in (job.q, job.k, job.v))
        plain = torch.autograd.grad(naive_attention(q, k, v, causal=job.causal), (q, k, v), job.dO)
        for grad_name, g, p, r in zip(("dq", "dk", "dv"), (run.dq, run.dk, run.dv), plain, ref, strict=True):
            assert g.shape == r.shape
            assert max_err(g, r) <= 2 * max_err(p, r) + GRAD_FLOOR, (name, grad_name)


def test_bf16_partials_merged_in_fp32_stay_within_twice_sdpas_error(runs):
    """flash-attn's rule with an fp32-scored reference (SDPA in bf16; flashviz.measure.dtype_rule), on inputs with
    outlier channels: the steps' partials stay fp32 until the one final rounding."""
    for w in BF16:
        job, run = runs[("bf16", w)]
        assert run.out.dtype == torch.bfloat16
        row = rule_row("ring", f"zigzag causal W={w}", run.out, sdpa(job.q, job.k, job.v, causal=True),
                       dtype_reference(job.q, job.k, job.v, causal=True))
        assert row.passes and row.error > 0, (row, row.ratio)


def test_every_event_is_the_models_step_and_rank_r_holds_the_kv_of_rank_r_minus_t(runs):
    for name, (job, run) in runs.items():
        W, (B, H, n, d) = job.world, job.q.shape
        model = ring_schedule(n, W, job.layout, job.block_size, job.causal, batch=B, heads=H,
                              heads_kv=job.k.shape[1], head_dim=d, dtype=str(job.q.dtype).removeprefix("torch."),
                              backward=job.dO is not None)
        assert [tuple(getattr(e, f) for f in PLAN_FIELDS) for e in run.events] == [
            tuple(getattr(p, f) for f in PLAN_FIELDS) for p in model.steps], name
        assert all(e.kv_rank == (e.rank - e.step) % W and e.world == W for e in run.events)
        assert all(e.bytes_received == e.bytes_sent for e in run.events)


def test_causal_work_per_rank_zigzag_balanced_contiguous_2w_over_w_plus_1(runs):
    zigzag, striped = runs[("work", "zigzag", 4)][1], runs[("work", "striped", 4)][1]
    contiguous, one_tile = runs[("work", "contiguous", 4)][1], runs[("work", "contiguous", 16)][1]
    assert zigzag.imbalance() <= 1.05 and striped.imbalance() <= 1.05
    T = 64 // 4 // 4  # tiles per side of a rank's step
    work = [T * (T + 1) // 2 + r * T * T for r in range(4)]
    assert contiguous.tiles_per_rank() == tuple(work)
    assert one_tile.imbalance() == pytest.approx(2 * 4 / (4 + 1))  # one tile per step: rank r does r + 1 steps


def test_bytes_sent_per_rank_are_the_shard_w_minus_1_times(runs):
    for name, job, run in _fp32_runs(runs):
        W, (B, _, n, d), H_kv = job.world, job.q.shape, job.k.shape[1]
        kv = shard_bytes(B, H_kv, n, W, d)
        for r in range(W):
            assert sum(e.bytes_sent for e in run.of(FORWARD) if e.rank == r) == (W - 1) * kv, name
            assert sum(e.bytes_sent for e in run.of(BACKWARD) if e.rank == r) == (W - 1 + (W > 1) * W) * kv, name


def test_the_steps_partial_logsumexps_merge_into_the_rows_logsumexp(runs):
    for name, job, run in _fp32_runs(runs):
        W, n_local = job.world, N // job.world
        for r in range(W):
            L_t = torch.tensor([e.lse for e in run.of(FORWARD) if e.rank == r], dtype=torch.float64)  # (W, n)
            final = ring_module.shard(run.lse, W, r, job.layout)[0, 0].double()  # (n,) batch 0, head 0
            assert L_t.shape == (W, n_local)
            assert torch.allclose(torch.logsumexp(L_t, 0), final, atol=1e-5), name


def test_the_timeline_is_measured_per_rank_in_step_order(runs):
    _, run = runs[("fp32", 4, "zigzag", True)]
    for r in range(4):
        for phase in (FORWARD, BACKWARD):
            mine = [e for e in run.of(phase) if e.rank == r]
            assert [e.step for e in mine] == [0, 1, 2, 3]
            assert all(a.start_s <= b.start_s for a, b in itertools.pairwise(mine))
            assert all(e.compute_s > 0 and e.comm_s >= 0 and e.compute_cpu_s >= 0 for e in mine)
            assert sum(e.compute_cpu_s for e in mine) > 0  # the same measured compute, in process CPU time
    assert len(run.ring_s) == 4 and all(s > 0 for s in run.ring_s)


# ----------------------------------------------------------------------------------------------------------------------
# failures: the rank is named, nothing is left behind


def _spawned_children() -> set[int]:
    """Pids of this process's children started by multiprocessing's spawn (the ranks), from /proc."""
    kids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and b"spawn_main" in cmdline:
            kids.add(int(entry.name))
    return kids


def _port_is_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed connection's TIME_WAIT is not a listener
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@pytest.fixture
def ports(monkeypatch):
    """The ports run_ring picks."""
    picked, free_port = [], ring_runner.free_port

    def recording_free_port(*args):
        picked.append(free_port(*args))
        return picked[-1]

    monkeypatch.setattr(ring_runner, "free_port", recording_free_port)
    return picked


@pytest.mark.parametrize(("mode", "timeout_s", "says"), [
    ("raise", 120, r"ring run failed on rank 1: rank 1 raised RuntimeError: failure injected by fail_rank"),
    ("exit", 120, r"ring run failed on rank 1: rank 1 died \(exit code 3\) without reporting an error"),
    # the timeout must outlast the ranks' start (importing torch) for the hang to be the one thing that stops them
    pytest.param("hang", 15, r"ring run timed out after 15 s: rank 1 made the least progress", marks=pytest.mark.slow),
])
def test_a_rank_that_fails_ends_the_run_naming_it_and_leaves_nothing_behind(mode, timeout_s, says, ports):
    q = torch.randn(1, 2, 16, 4)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=says) as e:
        run_ring(q, q, q, world=2, causal=True, layout="zigzag", block_size=4, dO=q, timeout_s=timeout_s,
                 fail_rank=(1, mode))
    assert time.monotonic() - t0 < timeout_s + 2 * ring_runner.STOP_GRACE_S
    print(f"{mode}: {e.value}")
    assert multiprocessing.active_children() == []
    assert _spawned_children() == set()
    assert len(ports) == 1 and _port_is_free(ports[0])


def test_bad_requests_are_refused_before_any_process_starts(ports):
    q = torch.randn(1, 1, 12, 4)
    with pytest.raises(ValueError, match="not divisible by 2W = 8"):
        run_ring(q, q, q, world=4, layout="zigzag")
    with pytest.raises(ValueError, match="world must be an integer >= 1"):
        run_ring(q, q, q, world=0)
    with pytest.raises(ValueError, match="layout must be one of"):
        run_ring(q, q, q, world=2, layout="ring")
    with pytest.raises(ValueError, match="fail_rank must be"):
        run_ring(q, q, q, world=2, fail_rank=(2, "raise"))
    with pytest.raises(ValueError, match="backend must be one of"):
        run_ring(q, q, q, world=2, backend="mpi")
    with pytest.raises(ValueError, match="dO must have q's shape"):
        run_ring(q, q, q, world=2, dO=q[:, :, :6])
    assert ports == [] and multiprocessing.active_children() == []


@pytest.mark.slow
def test_concurrent_runs_get_their_own_ports_and_both_finish():
    from concurrent.futures import ThreadPoolExecutor

    q = torch.randn(1, 1, 16, 4)
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(run_ring, q, q, q, world=2, causal=True, layout=layout, block_size=4)
                   for layout in ("zigzag", "striped")]
        outs = [f.result(timeout=300).out for f in futures]
    for out in outs:
        assert max_err(out, reference(q, q, q, causal=True)) <= 1e-5
    assert multiprocessing.active_children() == []


# ----------------------------------------------------------------------------------------------------------------------
# torchrun


@pytest.mark.slow
def test_torchrun_runs_the_ring_command_with_its_own_rendezvous():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(port),
           "-m", "flashviz", "ring", "--seq-len", "32", "--head-dim", "8", "--heads", "2", "--causal", "--layout",
           "zigzag", "--block-size", "4"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "W=2 (torchrun, gloo)" in out
    errors = re.search(r"float64: out (\S+), lse (\S+), dq (\S+), dk (\S+), dv (\S+)", out).groups()
    assert all(float(x.rstrip(",")) <= 1e-5 for x in errors), errors
    balance = re.findall(r"busiest rank / mean: (\S+) \(model (\S+)\)", out)
    assert len(balance) == 2 and all(a == b == "1.000" for a, b in balance)  # zigzag: measured as modelled
    assert len(re.findall(r"^\s*(forward|backward)\s+\d", out, re.M)) == 2 * 2 * 2  # every rank, step and phase
