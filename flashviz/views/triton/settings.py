"""The Triton view's own settings: the problem the kernel runs (N, d, causal), tutorial 06's knobs (BLOCK_M, BLOCK_N,
num_warps, num_stages) and the program whose loop the source follows. Torch-free: the URL parser reads them."""

from __future__ import annotations

from flashviz.kit.settings import view_settings
from flashviz.kit.spec import BOOL, INT, VIEW, Spec, setting

# -- Triton: one small problem under Triton's interpreter (every program runs in numpy, one after the other)
TR_N_OPTIONS = (64, 100, 128, 200, 256, 384, 512)
TR_N_MAX = 512  # positions: at the cap with 16 x 16 tiles (1024 tiles) a trace takes about 6 s on a busy 2-core CPU
TR_D_OPTIONS = (16, 32, 64, 128)  # the kernel's head dimensions (tl.arange: powers of two)
TR_BLOCK_OPTIONS = (16, 32, 64, 128)
TR_WARPS = (1, 2, 4, 8)
TR_STAGES = (1, 2, 3, 4, 5)
TR_PROGRAM_MAX = 31  # Q blocks at N = 512 and BLOCK_M = 16, minus one


@view_settings("Triton kernel")
class TritonSettings:
    """The Triton kernel view's settings: the shared ones it reads and its own."""

    tr_n: int = setting(256, Spec(
        INT, "select_slider", "N (positions)", lo=1, hi=TR_N_MAX, options=TR_N_OPTIONS, place=VIEW, short="N",
        help="Sequence length. Any N: the last Q and K blocks may run past it, and the kernel's bounds masks "
             "keep them from reading or writing past the end (try 200)."), key="trn")
    tr_d: int = setting(64, Spec(
        INT, "select_slider", "Head dim d", lo=16, hi=128, options=TR_D_OPTIONS, place=VIEW, short="d",
        help="HEAD_DIM, a constexpr of the kernel: tl.arange(0, HEAD_DIM) needs a power of two."), key="trd")
    tr_causal: bool = setting(True, Spec(
        BOOL, "toggle", "Causal", place=VIEW, short="causal",
        help="STAGE = 3: each program walks the K blocks left of the diagonal band without a mask (STAGE 1), "
             "then the band with the causal mask (STAGE 2). Off: STAGE = 1, one walk over every K block "
             "(the inner function's STAGE 3)."), key="trcausal")
    tr_bm: int = setting(64, Spec(
        INT, "select_slider", "BLOCK_M", lo=16, hi=128, options=TR_BLOCK_OPTIONS, place=VIEW, short="BLOCK_M",
        help="Query rows per program (Br): the launch grid has ceil(N / BLOCK_M) programs per head."), key="trbm")
    tr_bn: int = setting(32, Spec(
        INT, "select_slider", "BLOCK_N", lo=16, hi=128, options=TR_BLOCK_OPTIONS, place=VIEW, short="BLOCK_N",
        help="Keys per step of the inner loop (Bc). It must divide BLOCK_M, so that the diagonal band of a Q "
             "block is whole K blocks."), key="trbn")
    tr_warps: int = setting(4, Spec(
        INT, "select_slider", "num_warps", lo=1, hi=8, options=TR_WARPS, place=VIEW, short="num_warps",
        help="Warps (32 threads each) per program on a GPU. The interpreter ignores it; it sets the threads "
             "that share one program's tile."), key="trwarps")
    tr_stages: int = setting(2, Spec(
        INT, "select_slider", "num_stages", lo=1, hi=5, options=TR_STAGES, place=VIEW, short="num_stages",
        help="Software-pipelining depth on a GPU: how many K and V blocks are in shared memory at once while "
             "the next ones load. It multiplies their share of the SMEM budget."), key="trstages")
    tr_program: int = setting(1, Spec(
        INT, "number_input", "Program (pid_m)", lo=0, hi=TR_PROGRAM_MAX, place=VIEW, short="program",
        help="The program whose loop the source follows: its Q block (tl.program_id(0)), head 0. Past the "
             "grid it is the last program."), key="trprog")
