"""Decoding on the roofline: one new query row per sequence against a long KV cache is memory-bound.

At each generated token, attention reads the whole K/V cache (2 N d elements per K/V head) to do 4 N d FLOPs per
query head. With multi-head attention (H_kv = H) and fp16 that is 4 N d H FLOPs over 4 N d H bytes: about 1 FLOP per
byte, two orders of magnitude below a GPU's ridge point, so decoding runs at memory speed whatever the kernel.
Grouped-query attention shares each K/V head among g = H / H_kv query heads: the same FLOPs over g times fewer bytes,
so the intensity grows about g-fold (MQA, H_kv = 1: g = H). Counts come from flashviz.model.iomodel.io_cost
(q_outer with one query block and one K/V block: the cache read once, Q read and O, L written once).

References:
    Shazeer, "Fast Transformer Decoding: One Write-Head is All You Need" (2019): multi-query attention.
    Ainslie et al., "GQA: Training Generalized Multi-Query Transformer Models" (2023).

Legend: N cache length (keys already cached), N_q query rows per step (1 when decoding), d head dimension, B batch,
H query heads, H_kv key/value heads, g = H / H_kv.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from flashviz.model.iomodel import io_cost, validate_heads
from flashviz.model.roofline import GPUS, Device, attainable_flops, bound, predict_time
from flashviz.vocab import DTYPE_BYTES, Q_OUTER

DECODE_COLUMNS = ("device", "variant", "heads", "heads_kv", "kv_bytes", "hbm_bytes", "flops", "intensity",
                  "attainable_flops", "time_s", "bound", "kv_bytes_per_s")


@dataclass(frozen=True)
class DecodeCost:
    """Modelled HBM traffic and work of one decode step (N_q new query rows per sequence, all B and H)."""

    kv_bytes: int  # bytes of K and V cache read: 2 B H_kv N d dtype_bytes
    hbm_bytes: int  # every byte moved: the cache, Q, and O and L written
    flops: int  # 4 B H N_q N d: Q K^T and P V over the cache

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved."""
        return self.flops / self.hbm_bytes if self.hbm_bytes else 0.0


def decode_cost(cache_len: int, d: int, *, heads: int, heads_kv: int | None = None, batch: int = 1, n_q: int = 1,
                dtype: str = "float16") -> DecodeCost:
    """Bytes and FLOPs of one decode step against a KV cache of cache_len keys.

    Args:
        cache_len: N, keys in the cache (>= 1).  d: head dimension.
        heads, heads_kv: H query heads and H_kv K/V heads (None: H_kv = H; GQA: a divisor; MQA: 1).
        batch: B sequences.  n_q: new query rows per sequence (1 for decoding, a few for speculative decoding).
        dtype: name of the cache and activations' dtype (sets bytes per element).
    Returns:
        DecodeCost with kv_bytes, hbm_bytes, flops and intensity.

    Example:
        >>> mha = decode_cost(32768, 128, heads=32)  # fp16
        >>> mha.kv_bytes == 2 * 32 * 32768 * 128 * 2, round(mha.intensity, 3)
        (True, 1.0)
        >>> round(decode_cost(32768, 128, heads=32, heads_kv=8).intensity, 2)  # GQA, g = 4
        4.0
    """
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {tuple(DTYPE_BYTES)}, got {dtype!r}.")
    c = io_cost(Q_OUTER, n_q, cache_len, d, n_q, cache_len, batch=batch, heads=heads, heads_kv=heads_kv,
                dtype_bytes=DTYPE_BYTES[dtype])
    return DecodeCost(c.kv_reads * c.dtype_bytes, c.bytes, c.flops)


def attention_variants(heads: int, heads_kv: int | None = None) -> dict[str, int]:
    """MHA (H_kv = H), the given GQA (if 1 < heads_kv < heads) and MQA (H_kv = 1): name -> H_kv.

    Example:
        >>> attention_variants(32, 8)
        {'MHA': 32, 'GQA (g = 4)': 8, 'MQA': 1}
    """
    heads, heads_kv = validate_heads(heads, heads_kv)
    variants = {"MHA": heads}
    if 1 < heads_kv < heads:
        variants[f"GQA (g = {heads // heads_kv})"] = heads_kv
    variants["MQA"] = 1
    return variants


def decode_points(cache_len: int, d: int, *, heads: int, heads_kv: int | None = None, batch: int = 1,
                  n_q: int = 1, dtype: str = "float16", devices: Iterable[Device] = GPUS) -> pd.DataFrame:
    """One decode step of MHA, GQA and MQA on each device's roofline: bytes of KV cache per token and the time.

    Args:
        as for `decode_cost`; heads_kv picks the GQA row (MHA and MQA are always shown).
        devices: Devices (GPUS; add flashviz.measure.roof_probe.machine_roof(threads) for the measured
            CPU).
    Returns:
        Tidy DataFrame, one row per (device, variant), columns DECODE_COLUMNS: kv_bytes (K/V cache read per
        step), hbm_bytes, flops, intensity (FLOP/byte), attainable_flops (FLOP/s), time_s (predicted seconds per
        step), bound, kv_bytes_per_s (kv_bytes / time_s: the cache read rate the prediction implies).

    Example:
        >>> df = decode_points(32768, 128, heads=32, heads_kv=8)
        >>> set(df["bound"])
        {'memory'}
    """
    rows = []
    variants = attention_variants(heads, heads_kv)
    costs = {name: decode_cost(cache_len, d, heads=heads, heads_kv=h_kv, batch=batch, n_q=n_q, dtype=dtype)
             for name, h_kv in variants.items()}
    for device in devices:
        for name, c in costs.items():
            t = predict_time(c.flops, c.hbm_bytes, device, dtype)
            rows.append({"device": device.name, "variant": name, "heads": heads, "heads_kv": variants[name],
                         "kv_bytes": c.kv_bytes, "hbm_bytes": c.hbm_bytes, "flops": c.flops,
                         "intensity": c.intensity, "attainable_flops": attainable_flops(c.intensity, device, dtype),
                         "time_s": t, "bound": bound(c.intensity, device, dtype), "kv_bytes_per_s": c.kv_bytes / t})
    return pd.DataFrame.from_records(rows, columns=list(DECODE_COLUMNS))
