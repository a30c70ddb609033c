"""What the Triton kernel did, read from Triton's interpreter while it runs (`record`, behind `flashviz.triton.trace`).

Under TRITON_INTERPRET=1 every `tl.program_id`, `tl.load`, `tl.dot` and `tl.store` of a kernel becomes a call of one
object, the interpreter's builder (`triton.runtime.interpreter.interpreter_builder`): `set_grid_idx(x, y, z)` before
each program, `create_masked_load(ptrs, mask, ...)` for each load (a tensor descriptor's load calls it too),
`create_dot(a, b, acc, ...)`, `create_masked_store(ptrs, value, mask)`. `record` wraps those four methods on the
builder for the length of one launch and notes, per call:

- which program runs (the grid index: pid_m = the Q block, pid_hz = batch x head);
- for a load or store, which tensor it touches and which rows, from its addresses (each of Q, K, V, O, L is one
  contiguous allocation, so an address says the tensor and the row), and the bytes its mask lets through;
- the kernel line that issued it and the stage it ran in, from the interpreter's Python frames: the interpreter runs
  the kernel's own source (its line numbers kept), and `_attn_fwd_inner`'s frame holds its STAGE.

A K load opens a tile: (program, K block, stage). Nothing here decides which tiles exist: the tests hold this record
against `tile_schedule` and `io_cost`, which were written without it.

Legend: B batch, H heads, N sequence length, d head dimension, Br = BLOCK_M, Bc = BLOCK_N.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from triton.runtime import interpreter

import flashviz.triton.kernel as kernel

KERNEL_FILE = inspect.getsourcefile(kernel)  # the interpreter runs the kernels' source under this file name
LOAD, DOT, STORE = "load", "dot", "store"  # the kinds of event recorded


@dataclass(frozen=True)
class Program:
    """One program of the launch grid."""

    q_block: int  # pid_m = tl.program_id(0): the Q block it owns
    head: int  # pid_hz = tl.program_id(1): batch x head (b * H + h)


@dataclass(frozen=True)
class TritonTile:
    """One (program, K/V block) the kernel computed: a K load in `_attn_fwd_inner`."""

    q_block: int  # pid_m of the program
    k_block: int  # the K/V block it loaded: first key // BLOCK_N
    head: int  # pid_hz of the program
    stage: int  # STAGE of the loop that loaded it: 1 off the band, 2 on the band (causal mask), 3 not causal
    order: int  # its place among the program's tiles, 0-based


@dataclass(frozen=True)
class Event:
    """One builder call the kernel made: a load, a dot or a store."""

    program: Program  # which program made it
    kind: str  # "load", "dot" or "store"
    line: int  # the line of kernel.py that issued it
    function: str  # the kernel function that line is in (_attn_fwd or _attn_fwd_inner)
    tensor: str  # "Q", "K", "V", "O", "L" for loads and stores; "" for a dot
    first_row: int  # first row (position in N) the load or store touched; -1 for a dot
    rows: int  # rows it touched (inside the bounds mask); 0 for a dot
    nbytes: int  # bytes the mask let through; 0 for a dot
    stage: int  # STAGE of the enclosing _attn_fwd_inner; 0 outside it


@dataclass(frozen=True)
class TritonTrace:
    """What one launch of `_attn_fwd` did, read from the interpreter."""

    n: int  # N
    d: int  # head dimension
    block_m: int  # BLOCK_M (Br)
    block_n: int  # BLOCK_N (Bc)
    causal: bool
    programs: tuple[Program, ...]  # the launch grid, in the order the interpreter ran them
    tiles: tuple[TritonTile, ...]  # one per K block loaded, in order, program after program
    events: tuple[Event, ...]  # every load, dot and store, in order
    out: torch.Tensor  # O (B, H, N, d), what the kernel stored
    lse: torch.Tensor  # L (B, H, N) in base 2, what the kernel stored

    @property
    def grid(self) -> tuple[int, int]:
        """(programs along Q blocks, programs along batch x head)."""
        return max(p.q_block for p in self.programs) + 1, max(p.head for p in self.programs) + 1

    @property
    def dots(self) -> int:
        """tl.dot calls issued (two per tile: S = Q K^T, then O += P V)."""
        return sum(e.kind == DOT for e in self.events)

    @property
    def bytes_loaded(self) -> int:
        """Bytes the loads' masks let through (rows past N are not read)."""
        return sum(e.nbytes for e in self.events if e.kind == LOAD)

    @property
    def bytes_stored(self) -> int:
        """Bytes the stores wrote: O and L."""
        return sum(e.nbytes for e in self.events if e.kind == STORE)

    def tiles_of(self, program: Program) -> list[TritonTile]:
        """The tiles one program computed, in the order it loaded their K blocks."""
        return [t for t in self.tiles if (t.q_block, t.head) == (program.q_block, program.head)]

    def events_of(self, program: Program) -> list[Event]:
        """The loads, dots and stores of one program, in order."""
        return [e for e in self.events if e.program == program]


class _Regions:
    """Which tensor and row an address belongs to: each tensor one contiguous (B, H, N, row) allocation."""

    def __init__(self, tensors: dict[str, torch.Tensor], n: int):
        self.n = n
        self.spans = [(name, t.data_ptr(), t.data_ptr() + t.numel() * t.element_size(),
                       t.stride(-2) * t.element_size() if t.dim() == 4 else t.element_size(), t.element_size())
                      for name, t in tensors.items()]

    def locate(self, ptrs: np.ndarray, mask: np.ndarray) -> tuple[str, int, int, int]:
        """(tensor, first row, rows, bytes) of the elements a masked access touches."""
        addrs = ptrs[np.broadcast_to(mask, ptrs.shape)].astype(np.int64)
        if addrs.size == 0:
            return "", -1, 0, 0
        low = int(addrs.min())
        for name, start, end, row_bytes, item in self.spans:
            if start <= low < end:
                rows = np.unique((addrs - start) // row_bytes)
                return name, int(rows.min()) % self.n, int(rows.size), int(addrs.size) * item
        return "?", -1, 0, 0


def _kernel_frame() -> tuple[int, str, int]:
    """(line, function, stage) of the innermost kernel frame on the stack, and the STAGE of _attn_fwd_inner's."""
    frame = sys._getframe(2)
    line, function, stage = -1, "", 0
    while frame is not None:
        if frame.f_code.co_filename == KERNEL_FILE:
            if line < 0:
                line, function = frame.f_lineno, frame.f_code.co_name
            if frame.f_code.co_name == "_attn_fwd_inner":
                value = frame.f_locals.get("STAGE", 0)
                stage = int(getattr(value, "value", value))
                break
        frame = frame.f_back
    return line, function, stage


@contextmanager
def _wrapped(builder: Any, hooks: dict[str, Callable[..., Any]]) -> Iterator[None]:
    """Replace some of the builder's methods on the instance for the length of the block."""
    saved = {name: builder.__dict__.get(name) for name in hooks}
    try:
        for name, hook in hooks.items():
            builder.__dict__[name] = hook
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                builder.__dict__.pop(name, None)
            else:
                builder.__dict__[name] = old


def record(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, scale: float | None = None,
           block_m: int = 64, block_n: int = 32) -> TritonTrace:
    """Launch `_attn_fwd` under the interpreter with its builder's calls wrapped; what it did, as a TritonTrace.

    Args:
        q, k, v: (B, H, N, d) float32 on the CPU.
        causal, scale, block_m, block_n: as `flashviz.triton.attention`.
    Returns:
        TritonTrace (see `flashviz.triton.trace`).

    Example:
        >>> import torch
        >>> q, k, v = torch.zeros(3, 1, 1, 100, 16).unbind(0)
        >>> t = record(q, k, v, block_m=32, block_n=32)
        >>> t.grid, len(t.tiles), t.dots, t.bytes_loaded == (100 + 4 * 2 * 100) * 16 * 4  # Q once, K and V 4 times
        ((4, 1), 16, 32, True)
    """
    kernel.check_args(q, k, v, block_m, block_n)
    if q.device.type != "cpu":
        raise ValueError(f"trace runs the interpreter on CPU tensors; got {q.device}: pass q.cpu(), k.cpu(), v.cpu().")
    q, k, v = (t.contiguous() for t in (q, k, v))
    B, H, N, d = q.shape
    sm_scale = d ** -0.5 if scale is None else float(scale)
    o, lse = torch.empty_like(q), torch.empty((B, H, N), dtype=torch.float32)
    regions = _Regions({"Q": q, "K": k, "V": v, "O": o, "L": lse}, N)
    builder = interpreter.interpreter_builder
    cls = type(builder)
    programs: list[Program] = []
    events: list[Event] = []
    tiles: list[TritonTile] = []

    def set_grid_idx(x, y, z):
        cls.set_grid_idx(builder, x, y, z)
        programs.append(Program(int(x), int(y)))

    def note(kind: str, ptrs: Any, mask: Any) -> None:
        line, function, stage = _kernel_frame()
        if ptrs is None:
            name, first, rows, nbytes = "", -1, 0, 0
        else:
            name, first, rows, nbytes = regions.locate(ptrs.data, mask.data)
        program = programs[-1]
        events.append(Event(program, kind, line, function, name, first, rows, nbytes, stage))
        if kind == LOAD and name == "K":
            order = sum((t.q_block, t.head) == (program.q_block, program.head) for t in tiles)
            tiles.append(TritonTile(program.q_block, first // block_n, program.head, stage, order))

    def create_masked_load(ptrs, mask, other, cache_policy, is_volatile):
        note(LOAD, ptrs, mask)
        return cls.create_masked_load(builder, ptrs, mask, other, cache_policy, is_volatile)

    def create_masked_store(ptrs, value, mask, cache_policy):
        note(STORE, ptrs, mask)
        return cls.create_masked_store(builder, ptrs, value, mask, cache_policy)

    def create_dot(a, b, acc, input_precision, max_num_imprecise_acc):
        note(DOT, None, None)
        return cls.create_dot(builder, a, b, acc, input_precision, max_num_imprecise_acc)

    hooks = {"set_grid_idx": set_grid_idx, "create_masked_load": create_masked_load,
             "create_masked_store": create_masked_store, "create_dot": create_dot}
    with _wrapped(builder, hooks):
        kernel._attn_fwd[(-(-N // block_m), B * H, 1)](q, k, v, sm_scale, lse, o, N, HEAD_DIM=d, BLOCK_M=block_m,
                                                         BLOCK_N=block_n, STAGE=3 if causal else 1)
    return TritonTrace(N, d, block_m, block_n, bool(causal), tuple(programs), tuple(tiles), tuple(events), o, lse)
