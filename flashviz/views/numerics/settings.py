"""The Numerics view's own settings: the lab's input dtype, P's dtype, tile, FA4's tau, N_q, N_k, Hadamard, outlier
inputs, causal mask."""

from __future__ import annotations

from flashviz.kit.settings import view_settings
from flashviz.kit.spec import BOOL, CHOICE, INT, VIEW, Spec, setting
from flashviz.limits import NUMERICS_N_MAX
from flashviz.vocab import (
    PRECISION_LABELS,
    PRECISIONS,
)

# -- Numerics: bounded by flashviz.views.numerics.data.LabSettings' caps (flashviz.limits)
NO_P_ROUNDING = "none"  # the URL name of P~ not rounded (FA1/FA2 keep it in fp32)
P_PRECISIONS = (NO_P_ROUNDING, *(p for p in PRECISIONS if p != "float32"))  # what P~ may be rounded to
P_LABELS = {NO_P_ROUNDING: "P~ fp32", **{p: f"P~ {PRECISION_LABELS[p]}" for p in P_PRECISIONS[1:]}}
NUMERICS_BLOCKS = (4, 8, 16, 32, 64, 128, 256)  # tile sizes offered (a link may carry any from 1 to N max)
NUMERICS_TAUS = (0, 1, 2, 4, 8, 12, 16)  # tau offered, log2 units: 8 is FA4's; 16 lets P~ overflow fp16 and FP8
NUMERICS_TAU_MAX = 16  # 2^16 = 65536 > fp16's largest number 65504


@view_settings("Numerics")
class NumericsSettings:
    """The Numerics view's settings: the shared ones it reads and its own."""

    input_dtype: str = setting("bfloat16", Spec(
        CHOICE, "selectbox", "Input dtype", options=PRECISIONS, labels=PRECISION_LABELS, place=VIEW, short="inputs",
        help="What Q, K, V are stored in. bf16 keeps 8 significant bits (eps = 2⁻⁷), fp16 11, fp32 24. With an "
             "FP8 format (e4m3: 4 bits, max 448; e5m2: 3 bits) FA3's FP8 kernel joins the comparison and the "
             "other kernels run in fp32 on Q, K, V rounded to FP8 with one scale per head."), key="nmdtype")
    p_dtype: str = setting(NO_P_ROUNDING, Spec(
        CHOICE, "selectbox", "P's dtype", options=P_PRECISIONS, labels=P_LABELS, place=VIEW, short="P",
        help="What FA1 and FA2 round the probabilities P~ to before P V, as a GPU kernel does to feed its 16-bit "
             "or FP8 tensor cores (the row sum l is taken before the rounding). fp32: not rounded."),
        key="nmpdtype")
    numerics_block: int = setting(64, Spec(
        INT, "select_slider", "Tile Br = Bc", lo=1, hi=NUMERICS_N_MAX, options=NUMERICS_BLOCKS, place=VIEW,
        short="tile", help="Rows and keys per tile of FA1 and FA2, and the FP8 kernel's quantisation block. "
                           "Another tile size is another order of the sums."), key="nmblock")
    tau: int = setting(8, Spec(
        INT, "select_slider", "FA4's tau", lo=0, hi=NUMERICS_TAU_MAX, options=NUMERICS_TAUS, place=VIEW,
        short="tau", help="FA1 and FA2 rescale a row's sum and output only when its running max grew by more "
                          "than tau (log2 units: 8 is a factor of 256), as FlashAttention-4 does; 0 is the classic "
                          "update. The rescale chart compares tau = 0 with this tau (with 8 when it is 0)."),
        key="nmtau")
    n_q: int = setting(128, Spec(
        INT, "number_input", "N_q", lo=1, hi=NUMERICS_N_MAX, increment=32, place=VIEW, short="N_q",
        help="Query rows. With N_q ≠ N_k the two causal alignments differ."), key="nmnq")
    n_k: int = setting(256, Spec(
        INT, "number_input", "N_k", lo=1, hi=NUMERICS_N_MAX, increment=32, place=VIEW, short="N_k",
        help="Keys (and values). 2 heads of d = 64, batch 1."), key="nmnk")
    hadamard: bool = setting(True, Spec(
        BOOL, "toggle", "Hadamard (FP8 kernel)", place=VIEW, short="Hadamard",
        help="FA3's incoherent processing in the FP8 kernel of the error chart: Q and K times one random "
             "orthogonal matrix, which leaves Q Kᵀ unchanged and spreads outlier channels. The FP8 table shows "
             "both settings whatever this one is."), key="nmhad")
    outliers: bool = setting(True, Spec(
        BOOL, "toggle", "Outlier features", place=VIEW, short="outlier inputs",
        help="Inputs like a trained LLM's: 4 of the 64 channels of q and k 4x larger. The FP8 table shows both "
             "kinds of input whatever this one is."), key="nmout")
    numerics_causal: bool = setting(False, Spec(
        BOOL, "toggle", "Causal mask", place=VIEW, short="causal",
        help="A top-left causal mask (SDPA's is_causal) in the error, tile, rescale and FP8 charts. The "
             "causal alignment chart always compares both alignments."), key="nmcausal")
