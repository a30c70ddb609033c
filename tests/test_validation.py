"""Bad input gets a ValueError or TypeError that names what was expected, what came, and the fix."""

import dataclasses
import math

import pytest
import torch

from flashviz import flash_attention, flash_attention_forward, naive_attention, tile_schedule
from flashviz.core import validate

GOOD = torch.randn(1, 2, 8, 4)
EMPTY_D = torch.empty(1, 2, 8, 0)  # head dimension 0


def qkv(**over):
    args = dict(q=GOOD, k=GOOD, v=GOOD)
    args.update(over)
    return args


BAD_TENSORS = [
    (qkv(q=torch.randn(8, 4)), ValueError, r"4-D \(B, H, N, d\), got 2-D.*unsqueeze"),
    (qkv(k=torch.randn(1, 8, 4)), ValueError, r"k must be 4-D"),
    (qkv(q=[[1.0]]), TypeError, r"q must be a torch.Tensor.*got list"),
    (qkv(v=torch.ones(1, 2, 8, 4, dtype=torch.int64)), TypeError, r"v must be float16, .*int64.*\.float\(\)"),
    (qkv(q=GOOD.double()), TypeError, r"share one dtype.*float64.*float32"),
    (qkv(k=torch.randn(2, 2, 8, 4), v=torch.randn(2, 2, 8, 4)), ValueError, r"batch dimension B.*q B=1, k B=2"),
    (qkv(k=torch.randn(1, 3, 8, 4), v=torch.randn(1, 3, 8, 4)), ValueError,
     r"H_kv=3 heads, which does not divide q's H_q=2.*divide 2: 1, 2 \(2 = multi-head, 1 = multi-query\)"),
    (qkv(k=torch.randn(1, 1, 8, 4)), ValueError, r"k and v must have the same number of heads.*k H=1 and v H=2"),
    (qkv(k=torch.randn(1, 2, 8, 5)), ValueError, r"head dimension d.*q d=4.*k d=5"),
    (qkv(v=torch.randn(1, 2, 9, 4)), ValueError, r"same sequence length N_k.*k N=8.*v N=9"),
    (qkv(v=torch.randn(1, 2, 8, 6)), ValueError, r"v must share the head dimension"),
    (dict(q=EMPTY_D, k=EMPTY_D, v=EMPTY_D), ValueError, r"d must be >= 1"),
]


@pytest.mark.parametrize("fn", [flash_attention_forward, naive_attention])
@pytest.mark.parametrize("args,exc,pattern", BAD_TENSORS)
def test_bad_tensors(fn, args, exc, pattern):
    with pytest.raises(exc, match=pattern):
        fn(args["q"], args["k"], args["v"])


def test_mixed_devices_message():
    # a meta tensor is a second device available on every machine
    with pytest.raises(ValueError, match=r"one device.*meta.*\.to\(device\)"):
        flash_attention_forward(GOOD, GOOD.to("meta"), GOOD)


BAD_OPTIONS = [
    (dict(block_size=0), ValueError, r"block_q must be >= 1, got 0"),
    (dict(block_q=-3), ValueError, r"block_q must be >= 1, got -3"),
    (dict(block_k=0), ValueError, r"block_k must be >= 1"),
    (dict(block_size=2.5), TypeError, r"block_q must be a positive int, got 2.5"),
    (dict(block_size=True), TypeError, r"positive int"),
    (dict(loop_order="fa3"), ValueError, r"loop_order must be one of .*kv_outer.*q_outer.*got 'fa3'"),
    (dict(window=5), ValueError, r"window must be a pair \(left, right\).*got 5"),
    (dict(window=(1, 2, 3)), ValueError, r"window must be a pair"),
    (dict(window=(-1, 0)), ValueError, r"left must be >= 0, got -1. Use None"),
    (dict(window=(0, 1.5)), TypeError, r"window right must be an int"),
    (dict(scale=math.nan), ValueError, r"scale must be finite, got nan"),
    (dict(scale=math.inf), ValueError, r"scale must be finite"),
    (dict(scale="0.1"), TypeError, r"scale must be a real number"),
    (dict(causal="yes"), TypeError, r"causal must be True or False"),
    (dict(on_tile=3), TypeError, r"on_tile must be a callable"),
]


@pytest.mark.parametrize("kwargs,exc,pattern", BAD_OPTIONS, ids=str)
def test_bad_options(kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        flash_attention_forward(GOOD, GOOD, GOOD, **kwargs)


def test_naive_validates_its_options_too():
    with pytest.raises(ValueError, match="window"):
        naive_attention(GOOD, GOOD, GOOD, window=(None, -2))
    with pytest.raises(ValueError, match="finite"):
        naive_attention(GOOD, GOOD, GOOD, scale=float("-inf"))


@pytest.mark.parametrize(
    "args,exc,pattern",
    [
        ((10, 10, 0, 4), ValueError, r"block_q must be >= 1"),
        ((-1, 10, 4, 4), ValueError, r"n_q must be >= 0"),
        ((10, 10.0, 4, 4), TypeError, r"n_k must be a non-negative int"),
    ],
)
def test_bad_schedule_arguments(args, exc, pattern):
    with pytest.raises(exc, match=pattern):
        tile_schedule(*args)
    with pytest.raises(ValueError, match="loop_order"):
        tile_schedule(4, 4, 2, 2, loop_order="diagonal")


def test_one_training_step_validates_once(monkeypatch):
    # The entry point validates into an AttentionConfig; the forward and backward kernels take it as given.
    calls = []
    real = validate.validate_qkv
    monkeypatch.setattr(validate, "validate_qkv", lambda *a: calls.append(1) or real(*a))
    q, k, v = (torch.randn(1, 2, 8, 4, requires_grad=True) for _ in range(3))
    flash_attention(q, k, v, block_size=4, causal=True).sum().backward()
    assert len(calls) == 1 and q.grad is not None
    calls.clear()
    naive_attention(GOOD, GOOD, GOOD)
    flash_attention_forward(GOOD, GOOD, GOOD, 4)
    assert len(calls) == 2


def test_config_is_frozen_and_resolves_defaults():
    half = GOOD.half()
    cfg = validate.tiled_config(half, half, half, block_size=4, block_k=2, loop_order="q_outer")
    assert (cfg.B, cfg.H, cfg.n_q, cfg.n_k, cfg.d) == (1, 2, 8, 8, 4)
    assert (cfg.block_q, cfg.block_k, cfg.loop_order, cfg.acc, cfg.scale) == (4, 2, "q_outer", torch.float32, 0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.scale = 1.0
    naive = validate.naive_config(half, half, half)
    assert naive.acc == torch.float16 and naive.block_q is None and naive.loop_order is None


def test_the_forward_kernel_on_tensors_that_require_grad_says_to_use_flash_attention():
    q = GOOD.clone().requires_grad_()
    with pytest.raises(ValueError, match=r"has no backward.*Use flash_attention\(q, k, v, \.\.\.\) for gradients"):
        flash_attention_forward(q, GOOD, GOOD, 4)
    with torch.no_grad():  # inference on a model's activations is fine
        torch.testing.assert_close(flash_attention_forward(q, GOOD, GOOD, 4), naive_attention(GOOD, GOOD, GOOD))


def test_a_hostile_link_is_repaired_to_values_inside_the_bounds_and_said_so():
    """The dashboard's URL parser clamps every number to its setting's bounds (a block size of 0, N = 10^9, a
    negative d, more threads than the machine has) and says what it changed; it never passes such a value on."""
    from flashviz.app.query import parse_query
    from flashviz.app.state import Env
    from flashviz.kit.sizes import BLOCK_MIN, D_MIN, N_MAX

    s, notices = parse_query({"n": "1000000000", "br": "0", "d": "-5", "threads": "99"}, Env(max_threads=2))
    assert (s.n, s.br, s.d, s.threads) == (N_MAX, BLOCK_MIN, D_MIN, 2)
    for key in ("n", "br", "d", "threads"):
        assert any(note.startswith(f"`{key}=") and "clamped" in note for note in notices), (key, notices)
