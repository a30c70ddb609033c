"""The GPU pipeline view's own settings: the GPU, the MMA's dtype, the head dimension, N and the causal mask of the
schedules it simulates (flashviz.model.pipeline)."""

from __future__ import annotations

from flashviz.kit.settings import view_settings
from flashviz.kit.spec import BOOL, CHOICE, INT, VIEW, Spec, setting

# -- GPU pipeline: the GPUs of flashviz.model.roofline.GPUS by short name (the model reads them by that name)
PIPE_GPUS = ("a100", "h100", "h200", "b200")  # a link's values are lower case (flashviz.app.query)
PIPE_GPU_LABELS = {g: g.upper() for g in PIPE_GPUS}
PIPE_DTYPES = ("bfloat16", "float16", "float8_e4m3fn")  # torch's names; fp8 from Hopper on
PIPE_DTYPE_LABELS = {"bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8 (e4m3)"}
PIPE_D_OPTIONS = (64, 128, 256)  # head dimensions the papers report
PIPE_N_OPTIONS = (512, 1024, 2048, 4096, 8192, 16384)  # N, at batch x N = 16k tokens as in the papers
PIPE_N_MAX = 16384


@view_settings("GPU pipeline")
class PipelineSettings:
    """The GPU pipeline view's settings: the shared ones it reads and its own."""

    pipe_gpu: str = setting("b200", Spec(
        CHOICE, "selectbox", "GPU", options=PIPE_GPUS, labels=PIPE_GPU_LABELS, place=VIEW, short="GPU",
        help="The GPU whose units the schedules run on: SMs, clock, tensor FLOP per clock, exp2 per clock (MUFU), "
             "FP32 FMA per clock, shared-memory bytes per clock, each with its source in "
             "flashviz/model/roofline.py."), key="pipegpu")
    pipe_dtype: str = setting("bfloat16", Spec(
        CHOICE, "selectbox", "MMA dtype", options=PIPE_DTYPES, labels=PIPE_DTYPE_LABELS, place=VIEW,
        short="dtype", help="What the tensor cores multiply. FP8 doubles their rate on H100 and B200 while the "
                            "exponential unit stays the same: the softmax needs even more overlap. The A100 "
                            "has no FP8."), key="pipedtype")
    pipe_d: int = setting(128, Spec(
        INT, "select_slider", "Head dimension d", lo=64, hi=256, options=PIPE_D_OPTIONS, place=VIEW, short="d",
        help="The MMA's work per score grows with d, the exponential's does not: at small d the exponential "
             "weighs more."), key="piped")
    pipe_n: int = setting(16384, Spec(
        INT, "select_slider", "Sequence length N", lo=128, hi=PIPE_N_MAX, options=PIPE_N_OPTIONS, place=VIEW,
        short="N", help="Keys and queries per sequence, with batch x N = 16k tokens and heads x d = 2,048, as the "
                        "papers benchmark."), key="pipen")
    pipe_causal: bool = setting(False, Spec(
        BOOL, "toggle", "Causal", place=VIEW, short="causal",
        help="Each Q block visits only the keys up to its last row; the tiles on the diagonal are masked."),
        key="pipecausal")
