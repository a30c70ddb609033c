"""A batch of decode steps over caches of different lengths, on the roofline: the bytes and FLOPs of MHA, the given
GQA and MQA summed over the batch, the same points on each device's roofline next to prefill of the longest
sequence, and which devices bound them by memory or by compute. Counts from flashviz.model.decode (decode_cost) and
flashviz.model.roofline; arithmetic only, no torch.

Legend: B sequences of N_b keys each, d head dimension, H_q query heads, H_kv K/V heads, g = H_q / H_kv.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from flashviz.model.decode import attention_variants, decode_cost
from flashviz.model.roofline import (
    COMPUTE,
    GPUS,
    MEMORY,
    Device,
    attainable_flops,
    bound,
    predict_time,
    roofline_points,
)
from flashviz.vocab import Q_OUTER

PREFILL_BLOCK = 128  # Br = Bc of the prefill point on the roofline (FA2, causal)
DECODE, PREFILL = "decode", "prefill"  # the kinds of roofline rows
PREFILL_LABEL = "prefill (FA2)"  # of the longest sequence, causal


def variant_costs(lens: Sequence[int], d: int, heads_q: int, heads_kv: int, dtype: str) -> pd.DataFrame:
    """MHA, this GQA and MQA at this batch: K/V bytes, all bytes and FLOPs of one step (summed over sequences).

    Args:
        lens: keys per sequence.  d: head dimension.  heads_q, heads_kv: H_q and this H_kv.  dtype: element type.
    Returns:
        one row per variant: variant, heads_kv, kv_bytes, hbm_bytes, flops, intensity (FLOP/byte), this (the row of
        heads_kv).

    Example:
        >>> df = variant_costs((1000, 500), 64, 8, 2, "float16")
        >>> df["kv_bytes"].tolist()  # 2 (K, V) x H_kv x 1500 keys x 64 x 2 bytes
        [3072000, 768000, 384000]
    """
    rows = []
    for name, h_kv in attention_variants(heads_q, heads_kv).items():
        costs = [decode_cost(n, d, heads=heads_q, heads_kv=h_kv, dtype=dtype) for n in lens]
        kv, total, flops = (sum(getattr(c, a) for c in costs) for a in ("kv_bytes", "hbm_bytes", "flops"))
        rows.append({"variant": name, "heads_kv": h_kv, "kv_bytes": kv, "hbm_bytes": total, "flops": flops,
                     "intensity": flops / total, "this": h_kv == heads_kv})
    return pd.DataFrame(rows)


def decode_roofline_rows(lens: Sequence[int], d: int, heads_q: int, heads_kv: int, dtype: str,
                         devices: Sequence[Device] = GPUS, prefill_block: int = PREFILL_BLOCK) -> pd.DataFrame:
    """The decode variants (variant_costs) and prefill of the longest sequence (FA2, causal, Br = Bc =
    prefill_block) on each device's roofline: decode_roofline_figure's points.

    Returns:
        one row per (device, point): device, label, kind (DECODE or PREFILL), intensity, attainable_flops, flops,
        hbm_bytes, time_s (predicted), bound (MEMORY or COMPUTE).

    Example:
        >>> rows = decode_roofline_rows((1024,), 64, 8, 8, "float16")
        >>> sorted(set(rows["bound"][rows["kind"] == "decode"])), sorted(set(rows["label"]))
        (['memory'], ['MHA', 'MQA', 'prefill (FA2)'])
    """
    rows = []
    costs = variant_costs(lens, d, heads_q, heads_kv, dtype)
    for dev in devices:
        for r in costs.itertuples():
            rows.append({"device": dev.name, "label": r.variant, "kind": DECODE, "intensity": r.intensity,
                         "attainable_flops": attainable_flops(r.intensity, dev, dtype), "flops": r.flops,
                         "hbm_bytes": r.hbm_bytes, "time_s": predict_time(r.flops, r.hbm_bytes, dev, dtype),
                         "bound": bound(r.intensity, dev, dtype)})
    prefill = roofline_points(max(lens), d, block_q=prefill_block, block_k=prefill_block, causal=True,
                              heads=heads_q, heads_kv=heads_kv, dtype=dtype, devices=devices, algorithms=(Q_OUTER,))
    for r in prefill.itertuples():
        rows.append({"device": r.device, "label": PREFILL_LABEL, "kind": PREFILL, "intensity": r.intensity,
                     "attainable_flops": r.attainable_flops, "flops": r.flops, "hbm_bytes": r.hbm_bytes,
                     "time_s": r.time_s, "bound": r.bound})
    return pd.DataFrame(rows)


def bounds_by_device(rows: pd.DataFrame, devices: Sequence[Device], dtype: str) -> dict[str, list[tuple[str, float]]]:
    """The devices on which every one of `rows` is memory-bound, and those on which every one is compute-bound,
    each with its ridge point (FLOP/byte) at dtype; a device where the rows disagree is in neither list.

    Example:
        >>> rows = decode_roofline_rows((1024,), 64, 8, 8, "float16")
        >>> b = bounds_by_device(rows[rows["kind"] == "decode"], GPUS, "float16")
        >>> [name for name, _ in b["memory"]], b["compute"]
        (['A100 (SXM 80GB)', 'H100 (SXM)', 'H200 (SXM)', 'B200 (SXM)'], [])
    """
    return {kind: [(d.name, d.ridge(dtype)) for d in devices if (rows.loc[rows["device"] == d.name, "bound"] == kind)
                   .all()] for kind in (MEMORY, COMPUTE)}
