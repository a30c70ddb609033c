"""Device-agnostic kernels, checked without a GPU: no public kernel builds a tensor on another device than its inputs'.

A kernel that writes `torch.zeros(shape)` instead of `torch.zeros(shape, device=q.device)` is right on the CPU and
raises on CUDA ("Expected all tensors to be on the same device"), and a CPU-only test suite never sees it. Two checks
put the inputs on a device other than the CPU:

- **the "meta" device** (torch's own): tensors with shapes and no data. Every op mixing a meta tensor with a CPU one
  raises, exactly as CUDA would. It cannot run code that reads data (`.item()`, `int(t)`, `nonzero`): Flash-Decoding
  reads its cache lengths, and the `on_tile` events copy numbers to the CPU.
- **a second device with data** (`SecondDevice` below): inputs are wrapped in a tensor that reports the meta device
  while its data stays on the CPU. A dispatch mode runs every op on the CPU data and, like CUDA, refuses any op that
  mixes a tensor of the second device with a CPU tensor (0-d CPU tensors apart, which CUDA accepts as scalars); a
  factory call that names the second device (`device=q.device`) creates a tensor there, one that names no device
  creates it on the CPU, as torch does. So data-dependent kernels run too, with real numbers, and the outputs must
  come back on the second device and equal the plain CPU run's.

Every public kernel runs through both where it can (the second device everywhere): naive_attention,
flash_attention_forward in both loop orders (causal, window, mask_mod, score_mod, GQA, rescale_threshold, p_dtype,
a prebuilt schedule, return_lse, on_tile), flash_attention forward and backward, flash_attention_backward,
flash_decode (contiguous, paged in place, paged gathered, its split heuristic), fp8_attention and quantize_blocks,
to_block_mask; a mask_mod that closes over a tensor on the device (classified there: the kernels' inputs' device, or
tile_schedule's device=); the forward and decode in bf16 and fp16; the ring's local step functions (forward_step,
backward_step, on a rank of a two-rank zigzag ring without a process group) and its clock's synchronisation.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from flashviz.core.backward import flash_attention, flash_attention_backward
from flashviz.core.blockmask import to_block_mask
from flashviz.core.decode import flash_decode
from flashviz.core.flash import flash_attention_forward
from flashviz.core.reference import naive_attention
from flashviz.core.tiling import tile_schedule
from flashviz.masks import alibi, document, softcap
from flashviz.numerics import fp8_attention, quantize_blocks
from flashviz.ring import attention as ring_attention_module

SECOND = torch.device("meta")  # the device the second-device tensors report (their data stays on the CPU)
TRANSFERS = {torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default}  # ops that move data between devices


class OnSecondDevice(torch.Tensor):
    """A CPU tensor that says it lives on SECOND; only SecondDevice's dispatch mode runs ops on it."""

    @staticmethod
    def __new__(cls, data: torch.Tensor) -> OnSecondDevice:
        t = torch.Tensor._make_wrapper_subclass(cls, data.size(), strides=data.stride(),
                                                storage_offset=data.storage_offset(), dtype=data.dtype,
                                                device=SECOND, requires_grad=data.requires_grad)
        t.data_on_cpu = data
        return t

    def __repr__(self) -> str:
        return f"OnSecondDevice({self.data_on_cpu!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError(f"{func} on a second-device tensor outside SecondDevice(): enter the mode first.")


def kernel_line() -> str:
    """The innermost line of flashviz's code on the stack: where the offending op was called."""
    for frame in reversed(traceback.extract_stack()):
        if "/flashviz/" in frame.filename.replace("\\", "/"):
            return f"{frame.filename.split('flashviz/', 1)[-1]}:{frame.lineno}: {frame.line}"
    return "(no flashviz frame)"


class SecondDevice(TorchDispatchMode):
    """Runs every op on the CPU data of OnSecondDevice tensors, refusing what CUDA would refuse: one op's tensor
    arguments on two devices. Outputs of an op on the second device (or of a factory call naming it) are wrapped."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        devices, wrappers = set(), {}

        def unwrap(x):
            if isinstance(x, OnSecondDevice):
                devices.add(str(SECOND))
                wrappers[id(x.data_on_cpu)] = x
                return x.data_on_cpu
            if isinstance(x, torch.Tensor) and x.dim() > 0:
                devices.add(str(x.device))
            return x

        args, kwargs = tree_map(unwrap, (args, kwargs))
        if len(devices) > 1 and func not in TRANSFERS:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{' and '.join(sorted(devices))}! ({func}, called at {kernel_line()})")
        target = kwargs.get("device")
        if target is not None:
            on_second = torch.device(target) == SECOND
            if on_second:
                kwargs["device"] = torch.device("cpu")
        else:
            on_second = devices == {str(SECOND)}
        out = func(*args, **kwargs)
        if not on_second:
            return out

        def wrap(x):
            if isinstance(x, torch.Tensor):
                same = wrappers.get(id(x))  # an in-place op returns its argument: keep the same wrapper
                return same if same is not None else OnSecondDevice(x)
            return x

        return tree_map(wrap, out)


def to_second(t: torch.Tensor) -> torch.Tensor:
    """t on the second device (call inside SecondDevice()); a leaf that requires grad stays one."""
    out = OnSecondDevice(t.detach().clone())
    return out.requires_grad_() if t.requires_grad else out


def on_cpu(t: torch.Tensor) -> torch.Tensor:
    """t as a fresh CPU leaf (the reference run)."""
    return t.detach().clone().requires_grad_(t.requires_grad)


def to_meta(t: torch.Tensor) -> torch.Tensor:
    out = t.detach().to("meta")
    return out.requires_grad_() if t.requires_grad else out


# ----------------------------------------------------------------------------------------------------------------------
# the kernels, each a function of `put`, which moves a CPU tensor to the device under test

def inputs(b=1, h=2, h_kv=None, n_q=40, n_k=40, d=16, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, n_q, d, generator=g)
    k, v = (torch.randn(b, h_kv or h, n_k, d, generator=g) for _ in range(2))
    return tuple(x.requires_grad_(grad) for x in (q, k, v))


def forward(prebuilt: bool = False, **options) -> Callable:
    def run(put):
        q, k, v = map(put, inputs(h=4, h_kv=2))
        if prebuilt:  # a fresh one per run: a schedule caches its partial tiles' masks per device
            options["schedule"] = tile_schedule(40, 40, 16, 16, mask_mod=document([15, 25]), batch=1, heads=4)
        return flash_attention_forward(q, k, v, 16, **options)
    return run


def forward_on_tile(loop_order: str) -> Callable:
    def run(put):
        events = []
        q, k, v = map(put, inputs())
        out = flash_attention_forward(q, k, v, 16, causal=True, loop_order=loop_order, on_tile=events.append)
        assert events and all(e.m.device.type == "cpu" for e in events)  # events are on the CPU by contract
        return out
    return run


def training(**options) -> Callable:
    def run(put):
        q, k, v = map(put, inputs(h=4, h_kv=2, grad=True))
        out = flash_attention(q, k, v, block_size=16, **options)
        out.backward(put(torch.ones(out.shape)))
        return out, q.grad, k.grad, v.grad
    return run


def backward(put):
    q, k, v = inputs()
    out, L = flash_attention_forward(q, k, v, 16, causal=True, loop_order="q_outer", return_lse=True)
    dO = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    return flash_attention_backward(*map(put, (dO, q, k, v, out, L)), 16, causal=True, score_mod=softcap(20.0))


def backward_on_tile(put):
    q, k, v = inputs()
    out, L = flash_attention_forward(q, k, v, 16, window=(8, 0), return_lse=True)
    events = []
    grads = flash_attention_backward(*map(put, (torch.ones(out.shape), q, k, v, out, L)), 16, window=(8, 0),
                                     on_tile=events.append)
    assert events
    return grads


def decode(paged: str | None = None, **options) -> Callable:
    """flash_decode on a GQA cache of two sequences; paged "pool" (every page in use: read in place) or "gather"
    (a sparse pool: pages gathered)."""
    def run(put):
        q = torch.randn(2, 4, 2, 16, generator=torch.Generator().manual_seed(2))
        k, v = (torch.randn(2, 2, 64, 16, generator=torch.Generator().manual_seed(s)) for s in (3, 4))
        lens = torch.tensor([64, 37] if paged != "gather" else [64, 3])
        table = None
        if paged is not None:  # page p of sequence b is physical page 8 b + p
            k, v = (x.view(2, 2, 8, 8, 16).transpose(1, 2).reshape(16, 2, 8, 16) for x in (k, v))
            table = put(torch.arange(16).view(2, 8))
        events = []
        out = flash_decode(put(q), put(k), put(v), cache_seqlens=put(lens), block_table=table, causal=True,
                           on_split=events.append, **options)
        assert events
        return out
    return run


def fp8(**options) -> Callable:
    def run(put):
        q, k, v = map(put, inputs(h=4, h_kv=2, n_q=30, n_k=50))
        return fp8_attention(q, k, v, block_size=16, **options)
    return run


def closure_mask(put) -> Callable:
    """A mask_mod that closes over a tensor, FlexAttention's idiom (document ids passed to create_block_mask(...,
    device="cuda")): the ids live on the device under test, so the mask_mod runs only where they live."""
    doc_id = put(torch.repeat_interleave(torch.arange(3), torch.tensor([12, 20, 8])))  # (40,) document of each token

    def same_document(b, h, q_idx, kv_idx):
        return doc_id[q_idx] == doc_id[kv_idx]

    return same_document


def forward_closure(**options) -> Callable:
    def run(put):
        q, k, v = map(put, inputs(h=4, h_kv=2))
        return flash_attention_forward(q, k, v, 16, mask_mod=closure_mask(put), return_lse=True, **options)
    return run


def training_closure(put):
    q, k, v = map(put, inputs(h=4, h_kv=2, grad=True))
    out = flash_attention(q, k, v, block_size=16, mask_mod=closure_mask(put), causal=True)
    out.backward(put(torch.ones(out.shape)))
    return out, q.grad, k.grad, v.grad


def schedule_closure(put):
    """tile_schedule classified on an explicit device=, like create_block_mask's, exported as a BlockMask there."""
    device = put(torch.zeros(1)).device
    schedule = tile_schedule(40, 40, 16, 16, mask_mod=closure_mask(put), batch=1, heads=2, device=device)
    bm = to_block_mask(schedule, device=device)
    return bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks, bm.full_kv_indices


def low_precision(dtype: torch.dtype, kernel: str) -> Callable:
    """A kernel in bf16 / fp16: scores widened to fp32, P rounded back, all on the inputs' device."""
    def run(put):
        q, k, v = (put(x.to(dtype)) for x in inputs(h=4, h_kv=2, n_q=3 if kernel == "decode" else 40))
        if kernel == "decode":
            return flash_decode(q, k, v, num_splits=2, block_k=8, causal=True, return_lse=True)
        return flash_attention_forward(q, k, v, 16, causal=True, loop_order=kernel, return_lse=True)
    return run


def ring_steps(put):
    """The ring's local step functions on rank 1 of a W = 2 zigzag causal ring, without a process group: both forward
    steps (its own shard, then rank 0's: a mask_mod on global positions) merged, then both backward steps."""
    world, n_local = 2, 12
    g = torch.Generator().manual_seed(5)
    q, dO = (put(torch.randn(1, 4, n_local, 8, generator=g)) for _ in range(2))
    kvs = {r: put(torch.randn(2, 1, 2, n_local, 8, generator=g)) for r in (1, 0)}  # (2, B, H_kv, n, d) per rank
    ring = ring_attention_module._Ring(None, 1, world, "zigzag", True, 4, 8 ** -0.5, None, {})
    O = L = None
    for kv_rank, kv in kvs.items():
        O, L, ring.plans[kv_rank], _ = ring_attention_module.forward_step(ring, q, kv, kv_rank, O, L)
    O, L = O.view(q.shape), L.view(q.shape[:3])
    grads = [ring_attention_module.backward_step(dO, q, kv, O, L, ring.plans[r]) for r, kv in kvs.items()]
    return O, L, grads


def ring_clock(put):
    """The ring's clock synchronises the inputs' device around a measured part (a no-op off CUDA) and counts it."""
    x = put(torch.ones(64, 64))
    with ring_attention_module._Clock(x.device) as clock:
        y = x @ x
    assert clock.wall >= 0 and clock.cpu >= 0
    return y


def block_mask(put):
    schedule = tile_schedule(40, 40, 16, 16, mask_mod=document([15, 25]), batch=1, heads=2)
    device = put(torch.zeros(1)).device
    bm = to_block_mask(schedule, device=device)
    return bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks, bm.full_kv_indices


KERNELS: dict[str, Callable] = {
    "naive": lambda put: naive_attention(*map(put, inputs(h=4, h_kv=2)), causal=True, score_mod=alibi(4)),
    "naive_mask_mod": lambda put: naive_attention(*map(put, inputs()), mask_mod=document([15, 25])),
    "forward_kv_outer": forward(),
    "forward_q_outer_causal": forward(loop_order="q_outer", causal=True, return_lse=True),
    "forward_window": forward(window=(9, 3), loop_order="kv_outer"),
    "forward_mask_mod_score_mod": forward(mask_mod=document([15, 25]), score_mod=softcap(20.0), loop_order="q_outer"),
    "forward_prebuilt_schedule": forward(prebuilt=True, score_mod=softcap(20.0)),
    "forward_rescale_threshold": forward(causal=True, rescale_threshold=8.0),
    "forward_p_dtype": forward(loop_order="q_outer", p_dtype=torch.float8_e4m3fn, rescale_threshold=8.0),
    "forward_on_tile_kv_outer": forward_on_tile("kv_outer"),
    "forward_on_tile_q_outer": forward_on_tile("q_outer"),
    "flash_attention_causal": training(causal=True),
    "flash_attention_mask_mod_score_mod": training(mask_mod=document([15, 25]), score_mod=alibi(4)),
    "flash_attention_backward": backward,
    "flash_attention_backward_on_tile": backward_on_tile,
    "decode_contiguous": decode(num_splits=3),
    "decode_contiguous_batched_splits": decode(num_splits=4, block_k=16),
    "decode_paged_in_place": decode("pool", num_splits=3),
    "decode_paged_gathered": decode("gather", num_splits=2),
    "decode_return_lse": decode(num_splits=2, return_lse=True),
    "decode_split_heuristic": decode(),
    "decode_paged_split_heuristic": decode("pool"),
    "forward_mask_mod_closure_kv_outer": forward_closure(),
    "forward_mask_mod_closure_q_outer_causal": forward_closure(loop_order="q_outer", causal=True),
    "flash_attention_mask_mod_closure": training_closure,
    "tile_schedule_closure_on_device": schedule_closure,
    "forward_bf16_kv_outer": low_precision(torch.bfloat16, "kv_outer"),
    "forward_fp16_q_outer": low_precision(torch.float16, "q_outer"),
    "decode_bf16": low_precision(torch.bfloat16, "decode"),
    "decode_fp16": low_precision(torch.float16, "decode"),
    "ring_local_steps": ring_steps,
    "ring_clock": ring_clock,
    "fp8": fp8(),
    "fp8_causal_e5m2": fp8(causal=True, fmt="e5m2"),
    "fp8_hadamard": fp8(hadamard=True, seed=3),
    "quantize_blocks": lambda put: quantize_blocks(put(inputs()[0]), "e4m3", block_size=16),
    "to_block_mask": block_mask,
}
READS_DATA = {  # what the meta device cannot run, and why
    "forward_on_tile_kv_outer": "events copy m and l to the CPU",
    "forward_on_tile_q_outer": "events copy m and l to the CPU",
    "flash_attention_backward_on_tile": "events copy norms to the CPU",
    "decode_contiguous": "reads the cache lengths",
    "decode_contiguous_batched_splits": "reads the cache lengths",
    "decode_paged_in_place": "reads the cache lengths and the block table",
    "decode_paged_gathered": "reads the cache lengths and the block table",
    "decode_return_lse": "reads the cache lengths",
    "to_block_mask": "BlockMask reads its block counts",
    "decode_split_heuristic": "reads the cache lengths",
    "decode_paged_split_heuristic": "reads the cache lengths and the block table",
    "decode_bf16": "reads the cache lengths",
    "decode_fp16": "reads the cache lengths",
    # a mask_mod is classified on the inputs' device, tile by tile: its statuses are data
    "forward_mask_mod_score_mod": "classifies the mask_mod's tiles on the inputs' device",
    "flash_attention_mask_mod_score_mod": "classifies the mask_mod's tiles on the inputs' device",
    "forward_mask_mod_closure_kv_outer": "classifies the mask_mod's tiles on the inputs' device",
    "forward_mask_mod_closure_q_outer_causal": "classifies the mask_mod's tiles on the inputs' device",
    "flash_attention_mask_mod_closure": "classifies the mask_mod's tiles on the inputs' device",
    "tile_schedule_closure_on_device": "classifies the mask_mod's tiles on the given device",
    "ring_local_steps": "classifies the ring's global-position mask on the shards' device",
}


def tensors(out) -> list[torch.Tensor]:
    return [x for x in tree_flatten(out)[0] if isinstance(x, torch.Tensor)]


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_kernel_runs_on_a_second_device_and_returns_there_the_cpu_numbers(name):
    want = tensors(KERNELS[name](on_cpu))
    with SecondDevice():
        got = tensors(KERNELS[name](to_second))
        assert got and all(x.device == SECOND for x in got), [x.device for x in got]
        got = [x.data_on_cpu.detach().clone() for x in got]
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w.detach(), rtol=0, atol=0, equal_nan=True)  # the same ops on the same data


@pytest.mark.parametrize("name", sorted(set(KERNELS) - set(READS_DATA)))
def test_every_kernel_that_reads_no_data_runs_on_meta_tensors(name):
    got = tensors(KERNELS[name](to_meta))
    assert got and all(x.device.type == "meta" for x in got), [x.device for x in got]


def test_the_second_device_refuses_what_cuda_refuses_and_allows_what_it_allows():
    with SecondDevice():
        x = to_second(torch.ones(3))
        with pytest.raises(RuntimeError, match="found at least two devices, cpu and meta"):
            _ = x + torch.ones(3)  # a CPU tensor made without device=
        assert (x + torch.ones(3, device=x.device)).device == SECOND  # made where the input lives
        assert (x * torch.tensor(2.0)).device == SECOND  # a 0-d CPU tensor is a scalar, as CUDA allows
        assert x.cpu().device.type == "cpu" and torch.ones(2).to(x.device).device == SECOND  # transfers
        assert int(x.sum()) == 3  # data-dependent code runs
