"""The Decoding view's claims: `decode_merge`, the splits' partial outputs merged by logsumexp equal one pass over
the whole cache; `gqa_bytes`, what grouped-query attention saves in the bytes a decode step reads.
`decode_setup` and `decode_error` are the problem both read.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from flashviz.core.decode import flash_decode
from flashviz.measure import impls as runs
from flashviz.model.decode_batch import variant_costs
from flashviz.model.roofline import H100, MEMORY, bound, predict_time
from flashviz.units import format_bytes
from flashviz.views.claim import Result
from flashviz.views.decode.data import DecodeSetup, decode_trace, naive_decode, seq_lens, units_here

if TYPE_CHECKING:  # a check reads the settings' fields only
    from flashviz.views.decode.settings import DecodeSettings


LSE_TOL = 1e-5  # |L - log sum_s exp(L_s)| allowed in float32


DECODE_TOL = 1e-5  # largest |flash_decode - attention over the whole cache| allowed in float32


def decode_setup(s: DecodeSettings) -> DecodeSetup:
    """The decode step the Decoding view's settings describe.

    Example:
        >>> from flashviz.views.decode.settings import DecodeSettings
        >>> decode_setup(DecodeSettings()).lens, decode_setup(DecodeSettings()).group
        ((16384, 5461), 4)
    """
    return DecodeSetup(seq_lens(s.cache_len, s.batch_lens), s.q_heads, s.kv_heads, s.d, s.page_size,
                       None if s.splits == "auto" else int(s.splits), s.dtype, s.threads)  # "auto": heuristic


def decode_error(setup: DecodeSetup, num_splits: int, seed: int = 0) -> float:
    """Largest |flash_decode - plain attention over each sequence's whole cache| at the step's shapes (seeded).

    Args:
        setup: the decode step (lengths, heads, d, dtype).  num_splits: S.  seed: of the random q, k, v.
    Returns:
        The largest absolute difference of the outputs, (B, H_q, 1, d) each.

    Example:
        >>> decode_error(DecodeSetup((300, 100), 4, 2, 16, 0, 2, "float32", 1), 2) < 1e-6
        True
    """
    g = torch.Generator().manual_seed(seed)
    dt = runs.resolve_dtype(setup.dtype)
    q = torch.randn(len(setup.lens), setup.heads_q, 1, setup.d, generator=g).to(dt)  # (B, H_q, 1, d)
    k, v = (torch.randn(len(setup.lens), setup.heads_kv, max(setup.lens), setup.d, generator=g).to(dt)
            for _ in range(2))  # (B, H_kv, N, d)
    out = flash_decode(q, k, v, cache_seqlens=torch.tensor(setup.lens), num_splits=num_splits)
    return float((out - naive_decode(q, k, v, setup.lens)).abs().max())


def decode_merge(s: DecodeSettings) -> Result:
    """The Decoding animation's own events (flash_decode's on_split): the splits, their logsumexps and the merge
    weights; and the merged output against attention over the whole cache.

    Args:
        s: the step's settings (the Decoding view's own, the sidebar's d, dtype, device and threads).
    Returns:
        Result: keys (of sequence 0), splits, lse (the merge's L), weights (their sum), error (the output against
        attention over the whole cache), and for the slide's picture split_keys ((start, end) of each split's keys),
        split_weights (each split's weight) and split_lse (each split's L_s); holds when there are several splits,
        the weights sum to 1, L is log sum exp(L_s) and the output is exact.

    Example:
        >>> from flashviz.lesson.steps import INTRO
        >>> r = decode_merge(INTRO.step("decode_merge").view_settings())
        >>> r.holds, r.values["splits"]
        (True, 4)
    """
    setup = decode_setup(s)
    splits = setup.chosen_splits(units_here(s.device, s.threads))
    trace, *_ = decode_trace(setup.lens, setup.page, splits)
    top = max(trace.split_lse)
    merged = top + math.log(math.fsum(math.exp(x - top) for x in trace.split_lse))  # log sum_s exp(L_s)
    err = decode_error(setup, splits)
    values = {"keys": trace.seq_len, "splits": len(trace.splits), "lse": trace.lse, "weights": math.fsum(trace.weights),
              "error": err, "split_keys": trace.splits, "split_weights": trace.weights, "split_lse": trace.split_lse}
    return Result.of(values, {"one split only": len(trace.splits) < 2,
                            "the weights do not sum to 1": not abs(math.fsum(trace.weights) - 1) <= 1e-6,
                            "L is not log sum exp(L_s)": not abs(trace.lse - merged) <= LSE_TOL,
                            "the merged output differs from attention over the whole cache": not err <= DECODE_TOL})


def gqa_bytes(s: DecodeSettings) -> Result:
    """The Decoding view's bytes per step of this GQA against MHA (the decode model, summed over the batch), and the
    time the roofline model predicts for each on an H100, where a decode step is bound by HBM. A prediction for a GPU,
    not a measurement: on this machine the view's *Run decode timing* sets the measured time ratio against the bytes
    ratio (flashviz.views.decode.sentences.bytes_vs_time), and says "time follows bytes" only where it does.

    Args:
        s: the step's settings (the Decoding view's own, the sidebar's d and dtype).
    Returns:
        Result: hq, hkv, g, gqa and mha (formatted K/V bytes per step), ratio, flops, gpu, predicted (MHA's predicted
        time over this GQA's on the gpu), and for the slide's picture variants (MHA, this GQA, MQA), kv_bytes (each
        one's K/V bytes per step) and this_variant (True for the settings' own); holds when it is GQA, the bytes fall
        g-fold, the FLOPs do not change and the model bounds both steps by HBM on the gpu (so the predicted time
        ratio is about the bytes ratio).

    Example:
        >>> from flashviz.lesson.steps import INTRO
        >>> r = gqa_bytes(INTRO.step("gqa_bytes").view_settings())
        >>> r.values["ratio"], round(r.values["predicted"], 2), r.holds
        (4.0, 4.0, True)
    """
    setup = decode_setup(s)
    costs = variant_costs(setup.lens, setup.d, setup.heads_q, setup.heads_kv, setup.dtype).set_index("variant")
    this, mha = costs[costs["this"]].iloc[0], costs.loc["MHA"]
    dtype = setup.dtype if setup.dtype in H100.peak_flops else "float16"
    times = {k: predict_time(r["flops"], r["hbm_bytes"], H100, dtype) for k, r in (("this", this), ("mha", mha))}
    values = {"hq": setup.heads_q, "hkv": setup.heads_kv, "g": setup.group, "gqa": format_bytes(this["kv_bytes"]),
              "mha": format_bytes(mha["kv_bytes"]), "ratio": float(mha["kv_bytes"] / this["kv_bytes"]),
              "flops": int(this["flops"]), "gpu": H100.name.split(" (")[0],
              "predicted": float(times["mha"] / times["this"]), "variants": tuple(str(name) for name in costs.index),
              "kv_bytes": tuple(float(b) for b in costs["kv_bytes"]),
              "this_variant": tuple(bool(t) for t in costs["this"])}
    hbm_bound = all(bound(r["intensity"], H100, dtype) == MEMORY for r in (this, mha))
    return Result.of(values, {"not grouped-query attention": not 1 < setup.heads_kv < setup.heads_q,
                            "the bytes do not fall g-fold": values["ratio"] != setup.group,
                            "the FLOPs differ": costs["flops"].nunique() != 1,
                            "the model does not bound the step by HBM on the GPU": not hbm_bound})
