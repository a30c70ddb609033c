"""The Triton view's words: each sentence a pure function of the numbers it quotes. No torch."""

from __future__ import annotations

from flashviz.units import and_list, format_bytes

INTRO = (
    "**FA2's schedule as a Triton kernel** shaped like Triton's tutorial 06 (`_attn_fwd`, `_attn_fwd_inner`: STAGE 1 "
    "off the diagonal band, STAGE 2 on it with the causal mask), run here by **Triton's interpreter**; the record is "
    "read from the interpreter's own calls. **▶ Play** follows one program's loop line by line.")
INSTALL = ('Triton is not installed here, so the kernel cannot run. It is an optional extra (a 286 MB wheel, about '
           '1 GB installed): `pip install -e ".[triton]"` installs triton==3.9.0 and numpy, then reload this page.')
COMPILED = ("Triton compiles the kernel on this machine's GPU, and a compiled kernel cannot be recorded line by line: "
            "start the dashboard with `TRITON_INTERPRET=1` to run it under Triton's interpreter here "
            "(`benchmarks/bench_triton.py` times the compiled kernel).")
PLAY_HELP = "Step through the followed program's loads, dots and stores, one line of the kernel each."


def step_note(k: int, total: int, kind: str, tensor: str, block: int, stage: int, nbytes: int) -> str:
    """What the marked line did at step k of total.

    Example:
        >>> step_note(2, 35, "load", "K", 3, 1, 8192)
        'Step 2 of 35: load K block 3 (STAGE 1), 8.0 KiB.'
    """
    where = f" (STAGE {stage})" if stage else ""
    if kind == "dot":
        return f"Step {k} of {total}: tl.dot{where}, on chip."
    return f"Step {k} of {total}: {kind} {tensor} block {block}{where}, {format_bytes(nbytes)}."


def record_sentence(grid: tuple[int, int], k_blocks: list[int], tiles: int, schedule_tiles: int, mismatched: int,
                    stage2: int, partial: int) -> str:
    """The record against tile_schedule.

    Example:
        >>> record_sentence((4, 1), [2, 4, 6, 8], 20, 20, 0, 8, 8)[:60]
        'The launch grid is 4 × 1 programs; they loaded 2, 4, 6 and 8'
    """
    same = ("the same tiles as `tile_schedule` (FA2's loop order), program by program"
            if mismatched == 0 else f"**{mismatched} programs differ** from `tile_schedule`")
    return (f"The launch grid is {grid[0]} × {grid[1]} programs; they loaded {and_list([str(b) for b in k_blocks])} "
            f"K blocks: {tiles} tiles in all, {same} ({schedule_tiles} tiles). {stage2} ran in STAGE 2, with the "
            f"causal mask; the schedule calls {partial} tiles partial.")


def bytes_sentence(loaded: int, model_loaded: int, stored: int, model_stored: int, dots: int, error: float,
                   seconds: float) -> str:
    """The record's bytes against io_cost, the dots, the error and the interpreter's time.

    Example:
        >>> bytes_sentence(100, 100, 10, 10, 4, 1e-7, 0.2)[:40]
        'The loads moved 100 B and the stores 10 '
    """
    agree = "exactly" if (loaded, stored) == (model_loaded, model_stored) else "**not**"
    return (f"The loads moved {format_bytes(loaded)} and the stores {format_bytes(stored)} (fp32), {agree} what "
            f"`io_cost`'s FA2 model counts ({format_bytes(model_loaded)} read, {format_bytes(model_stored)} written); "
            f"{dots} `tl.dot` calls. Error against SDPA in float64: {error:.1e}. The interpreter took {seconds:.2f} s.")


def smem_sentence(block_m: int, block_n: int, num_stages: int, num_warps: int, d: int, need: int,
                  fits: dict[str, bool]) -> str:
    """The SMEM budget in words: the tutorial's "out of resource: shared memory" before a GPU says it.

    Example:
        >>> smem_sentence(128, 128, 3, 4, 128, 229376, {"A100": False, "H100": True})[:50]
        'Q once and K, V num_stages deep: (128 + 2 · 128 · '
    """
    bad = [gpu for gpu, ok in fits.items() if not ok]
    verdict = (f"it fits on {' and '.join(fits)}" if not bad else
               f"on {' and '.join(bad)} the compile fails with *out of resource: shared memory*; lower num_stages, "
               "BLOCK_N or BLOCK_M")
    return (f"Q once and K, V num_stages deep: ({block_m} + 2 · {block_n} · {num_stages}) · {d} · 2 bytes = "
            f"{format_bytes(need)} per program in fp16; {verdict}. num_warps ({num_warps} here) does not change it.")
