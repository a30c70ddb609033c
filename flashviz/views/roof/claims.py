"""The Roofline view's claim: `roofline_gpu`, where naive attention and the tiled kernels sit on a GPU's hierarchical
roofline (HBM, L2, compute) at the step's settings and the speedup the model predicts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flashviz.model.roofline import GPUS, H100, MEMORY, roofline_points
from flashviz.views.claim import Result
from flashviz.vocab import (
    KV_OUTER,
    NAIVE,
    Q_OUTER,
)

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.views.roof.settings import RoofSettings


def roofline_gpu(s: RoofSettings) -> Result:
    """The hierarchical roofline model's points on the published GPUs at the view's GPU dtype (the CPU's measured roof
    does not enter): naive's intensity against the H100's ridge, the predicted speedups there and the regime (HBM, L2
    or compute) that bounds each kernel on the H100.

    Args:
        s: the step's settings (N, d, Br, Bc, mask, B, H and the GPU dtype are read).
    Returns:
        Result: gpu, dtype, intensity (naive's FLOP per HBM byte), ridge (FLOP/byte), fa1, fa2 (predicted speedups on
        the H100), naive_bound, fa1_bound, fa2_bound (the regime of each on the H100), and for the slide's picture
        device (the H100's Device: its peaks) and points (roofline_points' rows of the H100); holds when naive is
        HBM-bound on every GPU, FA2 beats FA1 on the H100 and FA1 beats naive on every GPU.

    Example:
        >>> from flashviz.lesson.steps import INTRO
        >>> r = roofline_gpu(INTRO.step("roofline_gpu").view_settings())
        >>> r.holds, round(r.values["fa2"], 2), round(r.values["fa1"], 2), r.values["fa2_bound"]
        (True, 8.45, 5.52, 'L2')
    """
    df = roofline_points(s.n, s.d, block_q=s.br, block_k=s.bc, causal=s.causal, window=s.window, batch=s.batch,
                         heads=s.heads, dtype=s.gpu_dtype, devices=GPUS)
    points = df[df["device"].eq(H100.name)]
    h100 = points.set_index("algorithm")
    values = {"gpu": H100.name.split(" (")[0], "dtype": s.gpu_dtype,
              "intensity": float(h100.at[NAIVE, "intensity"]), "ridge": H100.ridge(s.gpu_dtype),
              "fa1": float(h100.at[KV_OUTER, "speedup_vs_naive"]), "fa2": float(h100.at[Q_OUTER, "speedup_vs_naive"]),
              "naive_bound": str(h100.at[NAIVE, "bound"]), "fa1_bound": str(h100.at[KV_OUTER, "bound"]),
              "fa2_bound": str(h100.at[Q_OUTER, "bound"]), "device": H100, "points": points}
    naive = df[df["algorithm"].eq(NAIVE)]
    by = df.pivot(index="device", columns="algorithm", values="speedup_vs_naive")
    return Result.of(values, {"naive is not HBM-bound on every GPU": not naive["bound"].eq(MEMORY).all(),
                            "FA2 is not predicted faster than FA1 on the H100": not values["fa2"] > values["fa1"],
                            "FA1 is not predicted faster than naive on every GPU": not (by[KV_OUTER] > 1).all()})
