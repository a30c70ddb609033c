"""The project's vocabulary, each word defined once: every layer imports its names and labels from here.

Torch-free on purpose, so the figure builders and the dashboard's URL parsing can use it without importing torch.

    loop order      how a tiled kernel walks the tiles: "kv_outer" (FlashAttention-1, Algorithm 1: outer loop over
                    K/V blocks) or "q_outer" (FlashAttention-2: outer loop over Q blocks). Shown as FA1 / FA2.
    implementation  what a sweep runs and times: "naive" (materialises S and P), "flash" (the tiled kernel in the
                    kv_outer order), "flash2" (the tiled kernel in the q_outer order) and "sdpa" (PyTorch's fused
                    scaled_dot_product_attention). "flash" and "flash2" are the two loop orders under the names the
                    sweep, the CLI and the dashboard's links use.
    algorithm       what the IO model counts: "naive" or a loop order.
    tile status     "full" (every element visible: no mask work), "partial" (masked inside the tile) or "skipped"
                    (nothing visible: never loaded, never computed). Only tiles are ever "skipped".
    row status      a sweep row either ran ("ok") or was refused by a guard before it ran ("not run: <why>").
"""

from __future__ import annotations

# -- loop orders of the tiled kernels
KV_OUTER = "kv_outer"  # FlashAttention-1, Algorithm 1: outer loop over K/V blocks, O, l, m rescaled in HBM
Q_OUTER = "q_outer"  # FlashAttention-2: outer loop over Q blocks, one normalisation at the end
LOOP_ORDERS = (KV_OUTER, Q_OUTER)
LOOP_ORDER_SHORT = {KV_OUTER: "FA1", Q_OUTER: "FA2"}
LOOP_ORDER_LABELS = {KV_OUTER: "FA1 (kv_outer: outer loop over K/V)", Q_OUTER: "FA2 (q_outer: outer loop over Q)"}

# -- implementations a sweep runs
NAIVE, FLASH, FLASH2, SDPA = "naive", "flash", "flash2", "sdpa"
IMPLS = (NAIVE, FLASH, FLASH2, SDPA)
IMPL_LOOP_ORDER = {FLASH: KV_OUTER, FLASH2: Q_OUTER}  # the tiled implementations and the loop order each runs
TILED_IMPLS = tuple(IMPL_LOOP_ORDER)
IMPL_LABELS = {
    NAIVE: "naive (standard attention)",
    FLASH: "FA1 (flash)",  # the charts' and the controls' one name: the loop order, then the sweep's name for it
    FLASH2: "FA2 (flash2)",
    SDPA: "PyTorch SDPA",
    KV_OUTER: "FlashAttention-1 (kv_outer)",  # the IO model's names for the same two kernels
    Q_OUTER: "FlashAttention-2 (q_outer)",
}

# -- algorithms the IO model counts
ALGORITHMS = (NAIVE, KV_OUTER, Q_OUTER)
ALGORITHM_ALIASES = {FLASH: KV_OUTER, "flash1": KV_OUTER, FLASH2: Q_OUTER, "standard": NAIVE}

# -- sweep modes
FORWARD, TRAINING = "forward", "training"
MODES = (FORWARD, TRAINING)

# -- floating dtypes, by name, and their size
DTYPE_BYTES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}  # bytes per element
DTYPES = tuple(DTYPE_BYTES)  # the names torch gives them (torch.float32, ...)

# -- tile statuses
FULL = "full"  # every in-bounds element visible: computed with no mask work
PARTIAL = "partial"  # some elements visible: computed, with an element mask inside the tile
SKIPPED = "skipped"  # nothing visible: never loaded, never computed
TILE_STATUSES = (FULL, PARTIAL, SKIPPED)
TILE_STATUS_LABELS = {
    FULL: "full: computed, no mask",
    PARTIAL: "partial: computed, masked",
    SKIPPED: "skipped: never loaded",
}

# -- sweep row statuses
OK = "ok"  # the row ran and was measured
NOT_RUN = "not run"  # a guard refused the row before it ran; its status reads "not run: <why>"

# -- how the tiled backward accumulates dQ (the IO model and the Backward view)
DQ_ATOMIC = "atomic"  # FA2 Algorithm 2: dQ_i += dS_ij K_j into HBM after every tile (atomic adds on a GPU)
DQ_DETERMINISTIC = "deterministic"  # a second pass, outer loop over Q blocks: dQ_i built on chip, written once
DQ_MODES = (DQ_ATOMIC, DQ_DETERMINISTIC)
DQ_MODE_LABELS = {DQ_ATOMIC: "atomic dQ", DQ_DETERMINISTIC: "deterministic dQ (second pass)"}

# -- where an operand of a backward tile lives (FA2 Algorithm 2, outer loop over K/V blocks j)
ON_CHIP_COLUMN = "on chip for the whole column"  # K_j, V_j loaded once; dK_j, dV_j accumulated, written once
ON_CHIP_TILE = "on chip, this tile only"  # S_ij, P_ij, dP_ij, dS_ij: recomputed, never written to HBM
HBM_STREAMED = "streamed from HBM every tile"  # Q_i, dO_i, L_i, D_i
HBM_READ_WRITE = "read and written back in HBM every tile"  # dQ_i (an atomic add on a GPU)
ON_CHIP_ROW = "on chip for the whole row"  # deterministic dQ's second pass: Q_i, dO_i, L_i, D_i and dQ_i (written once)
OPERAND_PLACES = (ON_CHIP_COLUMN, ON_CHIP_ROW, ON_CHIP_TILE, HBM_STREAMED, HBM_READ_WRITE)

# -- the numerics lab (flashviz.numerics, flashviz.views.numerics.data): input precisions by name, the FP8 kernel,
#    causal alignments
E4M3, E5M2 = "e4m3", "e5m2"  # FP8 formats: 4 exponent + 3 mantissa bits (max 448), 5 + 2 (max 57344)
FP8_FORMATS = (E4M3, E5M2)
PRECISIONS = ("float32", "bfloat16", "float16", *FP8_FORMATS)  # what the lab's inputs are stored in
PRECISION_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16", E4M3: "float8_e4m3fn",
                    E5M2: "float8_e5m2"}  # the name torch gives each (torch.<name>)
PRECISION_LABELS = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", E4M3: "FP8 e4m3", E5M2: "FP8 e5m2"}
FP8 = "fp8"  # the FP8 kernel: FlashAttention-3's forward, emulated (flashviz.numerics.fp8_attention)
NUMERICS_KERNELS = (NAIVE, FLASH, FLASH2, SDPA, FP8)
NUMERICS_KERNEL_LABELS = {NAIVE: "naive", FLASH: "FA1", FLASH2: "FA2", SDPA: "SDPA", FP8: "FA3 FP8"}
TOP_LEFT = "top_left"  # causal alignment of SDPA's is_causal and this repo's causal=True: query i sees keys j <= i
BOTTOM_RIGHT = "bottom_right"  # flash-attn's and flash_decode's: query i sees keys j <= i + N_k - N_q
CAUSAL_ALIGNMENTS = (TOP_LEFT, BOTTOM_RIGHT)
CAUSAL_ALIGNMENT_LABELS = {TOP_LEFT: "top-left (SDPA is_causal)", BOTTOM_RIGHT: "bottom-right (flash-attn)"}

# -- the Masks view's timed runs (flashviz.views.masks.data, drawn and told by its figures and sentences)
MASKED = "masked"  # the tiled kernel with the mask, on its schedule built once
DENSE = "dense"  # SDPA with the dense N x N boolean mask: every pair computed
UNMASKED = "unmasked"  # the tiled kernel with no mask: every tile computed
MASK_RUNS = (MASKED, DENSE, UNMASKED)
