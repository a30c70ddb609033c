"""Fuzzing the public API with hypothesis: valid input never crashes and never gives NaN; invalid input gets a
ValueError or TypeError whose message names the argument at fault.

Covered: naive_attention, flash_attention_forward (both loop orders), flash_attention (forward + backward),
tile_schedule, io_cost, run_sweep's argument validation (plus a few tiny real sweeps), benchmark/time_call arguments.

"Valid" includes the edges: a single row, ragged tiles, block sizes far larger than N, windows with None sides or
reaches past int64, scale 0, negative, tiny or huge; empty tensors (B, H, N_q or N_k = 0) are checked once, by hand
(drawn, they were most of the cases). Values are checked against the float64 formula of tests/_oracle.py with the
drawn scale, and io_cost against a brute-force count from a dense mask (tests/test_iomodel.py). One boundary is
physical, not a bug: the scores scale * q.k must fit the dtype they are computed in (fp32 accumulators for the tiled
kernels, the input dtype for naive attention, which computes like plain PyTorch). A scale the dtype cannot hold at
all is rejected up front; scores that overflow only because of the data are IEEE's NaN, so the valid-input properties
`assume` they fit.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from flashviz import (
    IOCost,
    flash_attention,
    flash_attention_forward,
    io_cost,
    naive_attention,
    run_sweep,
    tile_schedule,
    time_call,
)
from flashviz.core.validate import FLOAT_DTYPES  # float32, float64, float16, bfloat16
from flashviz.vocab import TILE_STATUSES as STATUSES
from tests._oracle import formula_reference, reference_grads
from tests.test_iomodel import brute_force_split

BAD_DTYPES = (torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool, torch.complex64)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
QUICK = settings(max_examples=40, deadline=None)

# ----------------------------------------------------------------------------------------------------------------------
# strategies

side = st.one_of(st.none(), st.integers(0, 40), st.integers(2**40, 2**70))  # None = unbounded; past int64 too
windows = st.one_of(st.none(), st.tuples(side, side), st.lists(side, min_size=2, max_size=2))
blocks = st.one_of(st.integers(1, 48), st.sampled_from([1, 2**31, 2**63, 10**30]))
scales = st.one_of(
    st.none(),
    st.sampled_from([0, 0.0, -0.0, 1, -1.0, 1e-300, 5e-324, 1e4, -1e4, 3.0e4, 1e30, -1e30]),
    st.floats(-100, 100, allow_nan=False),
)


@st.composite
def qkv(draw, dtypes=FLOAT_DTYPES, max_n=24):
    """q (B, H, N_q, d), k, v (B, H_kv, N_k, d), H = G H_kv (G = 1 multi-head, else grouped-query or multi-query),
    every dimension >= 1 (empty tensors: test_empty_tensors)."""
    b, h_kv, group = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 3))
    n_q, n_k, d = draw(st.integers(1, max_n)), draw(st.integers(1, max_n)), draw(st.integers(1, 12))
    dtype = draw(st.sampled_from(dtypes))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    amp = draw(st.sampled_from([1.0, 1e-20, 30.0]))  # ordinary, vanishing and large (saturating softmax) inputs
    q, k, v = (amp * torch.randn(b, h, n, d, generator=g, dtype=torch.float64)
               for h, n in ((h_kv * group, n_q), (h_kv, n_k), (h_kv, n_k)))
    return tuple(t.to(dtype) for t in (q, k, v))


def compute_dtype(dtype: torch.dtype, kernel: str) -> torch.dtype:
    """The dtype the scores are computed in: fp32 accumulators for the tiled kernels, q's dtype for naive."""
    if kernel == "naive":
        return dtype
    return torch.float64 if dtype == torch.float64 else torch.float32


def scores_fit(q: torch.Tensor, k: torch.Tensor, scale: float | None, kernel: str) -> bool:
    """Whether every score scale * q.k (and q.k itself) stays well inside the compute dtype's range."""
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    limit = torch.finfo(compute_dtype(q.dtype, kernel)).max / 4  # headroom for exp2's log2(e) and rounding
    if abs(s) >= limit:  # the scale alone does not fit: rejected even for empty input (test_bad_scales)
        return False
    if q.numel() == 0 or k.numel() == 0:
        return True
    k = k.double().repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # (B, H, N_k, d): K/V head of each query head
    raw = (q.double() @ k.transpose(-2, -1)).abs().max().item()  # (B, H, N_q, N_k) -> max |q.k|
    return raw < limit and abs(s) * raw < limit


def visible_rows(n_q: int, n_k: int, causal: bool, window) -> torch.Tensor:
    """(N_q,) bool: which query rows see at least one key (query i sees keys i - left <= j <= i + right)."""
    left, right = window if window is not None else (None, None)
    rows = []
    for i in range(n_q):
        lo = 0 if left is None else max(0, i - left)
        hi = n_k - 1 if right is None else min(n_k - 1, i + right)
        if causal:
            hi = min(hi, i)
        rows.append(lo <= hi)
    return torch.tensor(rows, dtype=torch.bool)


def assert_valid_output(out: torch.Tensor, q: torch.Tensor, n_k: int, causal: bool, window) -> None:
    assert out.shape == q.shape and out.dtype == q.dtype
    assert not torch.isnan(out).any(), "NaN in the output of valid input"
    assert torch.isfinite(out).all(), "inf in the output of valid input"
    rows = visible_rows(q.shape[2], n_k, causal, window)
    assert (out[:, :, ~rows] == 0).all(), "a row that sees no key must output zeros"


# ----------------------------------------------------------------------------------------------------------------------
# valid input: no crash, no NaN


@FUZZ
@given(data=qkv(), block_q=blocks, block_k=blocks, causal=st.booleans(), window=windows, scale=scales,
       loop_order=st.sampled_from(["kv_outer", "q_outer"]))
def test_flash_forward_valid_input(data, block_q, block_k, causal, window, scale, loop_order):
    q, k, v = data
    assume(scores_fit(q, k, scale, "flash"))
    events = []
    out, lse = flash_attention_forward(q, k, v, block_q=block_q, block_k=block_k, causal=causal, window=window,
                                       scale=scale, loop_order=loop_order, return_lse=True, on_tile=events.append)
    assert_valid_output(out, q, k.shape[2], causal, window)
    assert lse.shape == q.shape[:3] and not torch.isnan(lse).any()
    assert all(e.status in ("full", "partial") for e in events)


@FUZZ
@given(data=qkv(), causal=st.booleans(), window=windows, scale=scales)
def test_naive_valid_input(data, causal, window, scale):
    q, k, v = data
    assume(scores_fit(q, k, scale, "naive"))
    out = naive_attention(q, k, v, causal=causal, window=window, scale=scale)
    assert_valid_output(out, q, k.shape[2], causal, window)


@FUZZ
@given(data=qkv(dtypes=(torch.float64,), max_n=16), block_q=blocks, block_k=blocks, causal=st.booleans(),
       window=windows, scale=scales, loop_order=st.sampled_from(["kv_outer", "q_outer"]))
def test_flash_agrees_with_naive_on_the_edges(data, block_q, block_k, causal, window, scale, loop_order):
    """On the edge inputs (huge blocks, huge reaches, scale 0 / tiny / huge) flash and naive are still attention:
    the float64 formula softmax(scale q k^T + mask) v with the drawn scale."""
    q, k, v = data
    assume(scores_fit(q, k, scale, "naive"))
    out = flash_attention_forward(q, k, v, block_q=block_q, block_k=block_k, causal=causal, window=window,
                                  scale=scale, loop_order=loop_order)
    ref = formula_reference(q, k, v, causal=causal, window=window, scale=scale)
    torch.testing.assert_close(out, ref, atol=1e-9, rtol=1e-7)
    naive = naive_attention(q, k, v, causal=causal, window=window, scale=scale)
    torch.testing.assert_close(naive, ref, atol=1e-9, rtol=1e-7)


@QUICK
@given(data=qkv(dtypes=(torch.float32, torch.float64), max_n=12), block_q=blocks, block_k=blocks,
       causal=st.booleans(), window=windows, scale=scales)
def test_flash_attention_backward_valid_input(data, block_q, block_k, causal, window, scale):
    q, k, v = (t.clone().requires_grad_() for t in data)
    assume(scores_fit(q.detach(), k.detach(), scale, "flash"))
    assume(scale is None or abs(float(scale)) <= 1e4)  # the gradients carry a factor scale: keep them in range
    out = flash_attention(q, k, v, block_q=block_q, block_k=block_k, causal=causal, window=window, scale=scale)
    assert_valid_output(out.detach(), q.detach(), k.shape[2], causal, window)
    grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out), allow_unused=True)
    for name, g in zip("qkv", grads, strict=True):
        assert g is None or not torch.isnan(g).any(), f"NaN in d{name}"
    if q.dtype == torch.float64:  # the values: the float64 formula's gradients with the drawn scale
        mask = dict(causal=causal, window=window, scale=scale)
        ref = reference_grads(q, k, v, torch.ones_like(out), **mask)
        for name, g, r in zip("qkv", grads, ref, strict=True):
            g = torch.zeros_like(r) if g is None else g
            torch.testing.assert_close(g, r, rtol=1e-6, atol=1e-9 * (1 + r.abs().max().item()), msg=f"d{name}")


def test_backward_block_size_past_int64():
    q, k, v = (torch.randn(1, 1, 4, 2, requires_grad=True, dtype=torch.float64) for _ in range(3))
    out = flash_attention(q, k, v, block_q=2**63)
    out.sum().backward()
    ref = reference_grads(q, k, v, torch.ones_like(out))
    for g, r in zip((q.grad, k.grad, v.grad), ref, strict=True):
        torch.testing.assert_close(g, r)


@pytest.mark.parametrize("shape", [(0, 2, 5, 5, 1), (1, 0, 5, 5, 1), (2, 2, 0, 5, 1), (2, 2, 5, 0, 1), (1, 4, 5, 5, 0)],
                         ids=["B=0", "H=0", "N_q=0", "N_k=0", "H_kv=0"])
def test_empty_tensors(shape):
    """(B, H, N_q, N_k, H_kv) with one of them 0: every kernel returns q's shape, zeros where a row sees no key (all
    rows when N_k = 0), lse -inf there, and gradients of the inputs' shapes, all zero."""
    b, h, n_q, n_k, h_kv = shape
    if h_kv == 0:  # no K/V heads for 4 query heads is not grouped-query attention: a teaching error
        with pytest.raises(ValueError, match="does not divide"):
            flash_attention_forward(torch.zeros(b, h, n_q, 4), *(torch.zeros(b, 0, n_k, 4),) * 2)
        return
    q = torch.randn(b, h, n_q, 4, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(b, h, n_k, 4, dtype=torch.float64, requires_grad=True) for _ in range(2))
    zeros = torch.zeros(b, h, n_q, 4, dtype=torch.float64)
    assert torch.equal(naive_attention(q, k, v, causal=True), zeros if n_k == 0 else naive_attention(q, k, v,
                                                                                                     causal=True))
    for loop_order in ("kv_outer", "q_outer"):
        out, lse = flash_attention_forward(q.detach(), k.detach(), v.detach(), block_size=4, loop_order=loop_order,
                                           return_lse=True)
        assert out.shape == q.shape and lse.shape == q.shape[:3]
        if n_k == 0:
            assert torch.equal(out, zeros) and bool(torch.isneginf(lse).all())
    out = flash_attention(q, k, v, block_size=4, causal=True)
    grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out), allow_unused=True)
    for g, x in zip(grads, (q, k, v), strict=True):
        assert g is None or (g.shape == x.shape and not g.any())


@QUICK
@given(n_q=st.integers(0, 300), n_k=st.integers(0, 300), block_q=blocks, block_k=blocks, causal=st.booleans(),
       window=windows, loop_order=st.sampled_from(["kv_outer", "q_outer"]))
def test_tile_schedule_valid_input(n_q, n_k, block_q, block_k, causal, window, loop_order):
    sched = tile_schedule(n_q, n_k, block_q, block_k, causal=causal, window=window, loop_order=loop_order)
    tr, tc = -(-n_q // block_q), -(-n_k // block_k)
    assert len(sched) == tr * tc
    tiles = list(sched) if len(sched) <= 2000 else sched[:50] + sched[-50:]
    assert all(t.status in STATUSES for t in tiles)
    if len(sched) <= 2000:
        assert sorted((t.q_block, t.k_block) for t in tiles) == [(i, j) for i in range(tr) for j in range(tc)]
        assert sum(sched.counts().values()) == len(sched)


@QUICK
@given(algorithm=st.sampled_from(["naive", "flash", "flash2", "kv_outer", "q_outer"]), n_q=st.integers(1, 60),
       n_k=st.integers(1, 60), d=st.integers(1, 256), block_q=blocks, block_k=blocks, causal=st.booleans(),
       window=windows, batch=st.integers(1, 8), heads=st.integers(1, 8), dtype_bytes=st.sampled_from([1, 2, 4, 8]))
def test_io_cost_valid_input(algorithm, n_q, n_k, d, block_q, block_k, causal, window, batch, heads, dtype_bytes):
    """The counts are the brute-force count of test_iomodel (a dense mask, the accounting rules tile by tile), times
    B H, whatever the blocks (huge ones too) and the reaches (past int64 too)."""
    c = io_cost(algorithm, n_q, n_k, d, block_q, block_k, causal=causal, window=window, batch=batch, heads=heads,
                dtype_bytes=dtype_bytes)
    name = {"flash": "kv_outer", "flash2": "q_outer"}.get(algorithm, algorithm)
    reach = None if window is None else tuple(None if w is None else min(w, 10**6) for w in window)  # >= N: all
    reads_q, reads_kv, writes, flops = brute_force_split(name, n_q, n_k, d, min(block_q, n_q), min(block_k, n_k),
                                                         causal, reach)
    bh = batch * heads
    assert (c.reads, c.kv_reads, c.writes, c.flops) == (bh * (reads_q + reads_kv), bh * reads_kv, bh * writes,
                                                        bh * flops)
    assert c.bytes == (c.reads + c.writes) * dtype_bytes


@settings(max_examples=4, deadline=None)
@given(ns=st.lists(st.integers(1, 40), min_size=1, max_size=2), block=st.integers(1, 64), causal=st.booleans(),
       window=st.one_of(st.none(), st.tuples(st.one_of(st.none(), st.integers(0, 8)), st.integers(0, 8))),
       dtype=st.sampled_from(["float32", "float64"]))
def test_run_sweep_tiny_valid_input(ns, block, causal, window, dtype):
    df = run_sweep(ns, d=8, block_size=block, causal=causal, window=window, dtype=dtype,
                   impls=("naive", "flash", "flash2", "sdpa"), repeats=1, warmup=0, threads=1)
    assert len(df) == 4 * len(set(ns))
    ok = df[df["status"] == "ok"]
    assert len(ok) == len(df), df[["impl", "N", "status"]]
    assert not ok["time_s"].isna().any() and not ok["max_abs_err"].isna().any()
    assert (ok["max_abs_err"] < 1e-4).all()


# ----------------------------------------------------------------------------------------------------------------------
# invalid input: ValueError / TypeError naming the argument


def raises_naming(exc, names, fn, *args, **kwargs):
    """Call fn and check it raises `exc` (a class or tuple) with a message mentioning one of `names`."""
    names = (names,) if isinstance(names, str) else names
    with pytest.raises(exc) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert any(re.search(rf"(?<![A-Za-z_]){re.escape(n)}(?![A-Za-z_])", message) for n in names), (
        f"{type(info.value).__name__} message does not name {names}: {message!r}")
    return message


KERNELS = {
    "flash": lambda q, k, v, **kw: flash_attention_forward(q, k, v, **kw),
    "naive": lambda q, k, v, **kw: naive_attention(q, k, v, **kw),
    "flash_attention": lambda q, k, v, **kw: flash_attention(q, k, v, **kw),
}
GOOD = torch.randn(1, 2, 6, 4)


@QUICK
@given(kernel=st.sampled_from(sorted(KERNELS)), dtype=st.sampled_from(BAD_DTYPES), which=st.sampled_from("qkv"))
def test_non_float_dtypes_are_type_errors(kernel, dtype, which):
    args = {"q": GOOD, "k": GOOD, "v": GOOD}
    args[which] = torch.ones(1, 2, 6, 4, dtype=dtype)
    raises_naming(TypeError, which, KERNELS[kernel], args["q"], args["k"], args["v"])


@QUICK
@given(kernel=st.sampled_from(sorted(KERNELS)), which=st.sampled_from("qkv"),
       bad=st.sampled_from(["list", "ndarray-like", "3d", "5d", "batch", "heads", "d", "n_k", "dtype", "device"]))
def test_mismatched_tensors_are_rejected(kernel, which, bad):
    args = {"q": GOOD, "k": GOOD, "v": GOOD}
    t = {
        "list": [[1.0]], "ndarray-like": 3.0, "3d": torch.randn(2, 6, 4), "5d": torch.randn(1, 1, 2, 6, 4),
        "batch": torch.randn(3, 2, 6, 4), "heads": torch.randn(1, 5, 6, 4), "d": torch.randn(1, 2, 6, 7),
        "n_k": torch.randn(1, 2, 9, 4), "dtype": GOOD.double(), "device": GOOD.to("meta"),
    }[bad]
    args[which] = t
    if bad == "n_k" and which == "q":  # N_q may differ from N_k: a longer q is valid input, not a mismatch
        out = KERNELS[kernel](args["q"], args["k"], args["v"])
        assert out.shape == t.shape and not torch.isnan(out).any()
        return
    names = ("q", "k", "v", "q, k, v")
    raises_naming((ValueError, TypeError), names, KERNELS[kernel], args["q"], args["k"], args["v"])


bad_blocks = st.one_of(st.integers(-(2**70), 0), st.floats(allow_nan=True),
                       st.sampled_from([True, False, None, "64", torch.tensor(8), (8,)]))


@QUICK
@given(bad=bad_blocks, arg=st.sampled_from(["block_size", "block_q", "block_k"]),
       kernel=st.sampled_from(["flash", "flash_attention"]))
def test_bad_block_sizes(bad, arg, kernel):
    if bad is None and arg != "block_size":  # block_q=None / block_k=None is valid: "use block_size"
        out = KERNELS[kernel](GOOD, GOOD, GOOD, **{arg: bad})
        torch.testing.assert_close(out, KERNELS[kernel](GOOD, GOOD, GOOD))
        return
    names = {"block_size": ("block_size", "block_q"), "block_q": ("block_q",), "block_k": ("block_k",)}[arg]
    raises_naming((ValueError, TypeError), names, KERNELS[kernel], GOOD, GOOD, GOOD, **{arg: bad})


bad_windows = st.one_of(
    st.integers(-5, 5), st.text(max_size=5), st.tuples(st.integers(0, 5)), st.tuples(*[st.integers(0, 5)] * 3),
    st.tuples(st.integers(-(2**70), -1), st.one_of(st.none(), st.integers(0, 5))),
    st.tuples(st.one_of(st.none(), st.integers(0, 5)), st.integers(-(2**70), -1)),
    st.tuples(st.floats(), st.none()), st.tuples(st.booleans(), st.none()), st.tuples(st.text(max_size=3), st.none()),
    st.sampled_from([{}, set(), (None,), b"ab", 1.5]),
)


@QUICK
@given(bad=bad_windows, kernel=st.sampled_from(sorted(KERNELS)))
def test_bad_windows(bad, kernel):
    raises_naming((ValueError, TypeError), "window", KERNELS[kernel], GOOD, GOOD, GOOD, window=bad)


bad_scales = st.one_of(
    st.sampled_from([math.nan, -math.nan, math.inf, -math.inf, 10**400, -(10**400), 1e300, -1e300, 3.5e38,
                     True, False, "0.1", torch.tensor(0.5), [1.0], 1j]),
    st.floats(min_value=2e38, allow_infinity=True),
)


@QUICK
@given(bad=bad_scales, kernel=st.sampled_from(sorted(KERNELS)))
def test_bad_scales(bad, kernel):
    raises_naming((ValueError, TypeError), "scale", KERNELS[kernel], GOOD, GOOD, GOOD, scale=bad)


@QUICK
@given(scale=st.floats(min_value=4e4, max_value=1e38), sign=st.sampled_from([1, -1]))
def test_scale_that_half_cannot_hold_is_rejected_by_naive(scale, sign):
    h = GOOD.half()
    raises_naming(ValueError, "scale", naive_attention, h, h, h, scale=sign * scale)
    out = flash_attention_forward(h, h, h, scale=sign * 1e-3)  # a representable scale is fine
    assert not torch.isnan(out).any()


@QUICK
@given(bad=st.one_of(st.integers(), st.text(max_size=4), st.none()), kernel=st.sampled_from(sorted(KERNELS)))
def test_bad_causal(bad, kernel):
    raises_naming(TypeError, "causal", KERNELS[kernel], GOOD, GOOD, GOOD, causal=bad)


@QUICK
@given(bad=st.one_of(st.text(max_size=8), st.integers(), st.none()))
def test_bad_loop_order(bad):
    assume(bad not in ("kv_outer", "q_outer"))
    raises_naming(ValueError, "loop_order", flash_attention_forward, GOOD, GOOD, GOOD, loop_order=bad)


bad_lengths = st.one_of(st.integers(max_value=-1), st.floats(), st.sampled_from([True, None, "8"]))


@QUICK
@given(bad=bad_lengths, pos=st.integers(0, 3))
def test_bad_tile_schedule_arguments(bad, pos):
    args = [10, 10, 4, 4]  # n_q, n_k, block_q, block_k; every drawn value is bad for each (negative, float, ...)
    args[pos] = bad
    names = ("n_q", "n_k", "block_q", "block_k")[pos]
    raises_naming((ValueError, TypeError), names, tile_schedule, *args)


@QUICK
@given(arg=st.sampled_from(["algorithm", "n_q", "n_k", "d", "block_q", "block_k", "batch", "heads", "dtype_bytes",
                            "causal", "window"]),
       bad=st.one_of(st.integers(-(2**40), -1), st.floats(), st.sampled_from([None, True, "x", (1,)])))
def test_bad_io_cost_arguments(arg, bad):
    kwargs = dict(algorithm="flash", n_q=16, n_k=16, d=8, block_q=4, block_k=4, causal=False, window=None, batch=1,
                  heads=1, dtype_bytes=4)
    kwargs[arg] = bad
    positional = [kwargs.pop(n) for n in ("algorithm", "n_q", "n_k", "d", "block_q", "block_k")]
    if (arg == "causal" and isinstance(bad, bool)) or (arg == "window" and bad is None):  # valid values
        cost = io_cost(*positional, **kwargs)
        assert isinstance(cost, IOCost) and cost.reads > 0 and cost.writes > 0 and cost.flops > 0
        return
    raises_naming((ValueError, TypeError), arg, io_cost, *positional, **kwargs)


SWEEP_BAD = {  # argument -> bad values; names: words the message may use for it
    "ns": ([], 5, "128", None, [0], [-1], [1.5], [True], [None], [10**9], ["64"]),
    "d": (0, -1, 1.5, True, None, 10**6),
    "block_size": (0, -1, 2.5, True, None, "64"),
    "impls": ([], "naive", ["bogus"], None, 3),
    "batch": (0, -2, 1.5, None),
    "heads": (0, -2, 1.5, None),
    "dtype": (torch.int32, torch.bool, "int8", "bogus", None, 3),
    "repeats": (0, -1, 1.5, None, True),
    "warmup": (-1, 1.5, None),
    "causal": (1, "yes", None),
    "window": (5, (1,), (-1, 0), (1.5, 0)),
    "device": ("tpu", 3, None, "cuda:100000"),  # no machine has 100001 CUDA devices
    "mode": ("backward", None, 1),
    "threads": (0, -1, 1.5, "2"),
    "progress": (3, "bar"),
    "memory_budget_bytes": (0, -5, 1.5),
    "seed": (-1, 1.5, None),
}
SWEEP_NAMES = {"ns": ("ns", "N"), "block_size": ("block_size", "block_q")}


@QUICK
@given(arg=st.sampled_from(sorted(SWEEP_BAD)), data=st.data())
def test_bad_run_sweep_arguments(arg, data):
    bad = data.draw(st.sampled_from(SWEEP_BAD[arg]))
    kwargs = dict(ns=[8], d=4, impls=("flash",), repeats=1, warmup=0)
    kwargs[arg] = bad
    ns = kwargs.pop("ns")
    raises_naming((ValueError, TypeError), SWEEP_NAMES.get(arg, (arg,)), run_sweep, ns, **kwargs)


@QUICK
@given(arg=st.sampled_from(["warmup", "repeats"]), bad=st.one_of(st.integers(max_value=-1), st.floats(),
                                                                 st.sampled_from([None, True, "3"])))
def test_bad_timing_arguments(arg, bad):
    raises_naming((ValueError, TypeError), arg, time_call, torch.zeros, 1, **{arg: bad})


def test_non_callable_is_a_type_error():
    raises_naming(TypeError, "fn", time_call, 42)
    raises_naming(TypeError, "on_tile", flash_attention_forward, GOOD, GOOD, GOOD, on_tile="print")
