"""What the Benchmark view says, pure functions of its measured rows: the speedups, the causal ratios, and why a
tiled kernel can be slower than standard attention here. The Block size and Training views say the same."""

from __future__ import annotations

import pandas as pd

from flashviz.vocab import NAIVE, OK, TILED_IMPLS


def slower_why(traffic: str) -> str:
    """Why a tiled kernel can be slower than naive on a CPU; `traffic` says where this view shows the modelled HBM
    traffic ("the modelled traffic chart below", ...) or is empty where it shows none.

    Example:
        >>> slower_why("").endswith("HBM traffic: see the IO model view.")
        True
    """
    return ("This flashviz kernel is plain PyTorch: every tile is one Python loop iteration with a few small matmuls, "
            "so small tiles and a single head pay that overhead thousands of times. And on a CPU the \"SRAM\" is the "
            "cache while naive's N × N matrix still fits in RAM, so naive pays no slow round trip. On a GPU the gap "
            "FlashAttention closes is HBM traffic: see " + (f"{traffic} and " if traffic else "")
            + "the IO model view.")


def plural(n: int, word: str) -> str:
    """A count with its noun, singular for one.

    Example:
        >>> plural(1, "measurement"), plural(3, "repeat")
        ('1 measurement', '3 repeats')
    """
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def speedups(df: pd.DataFrame) -> pd.DataFrame:
    """naive time / tiled time per (N, tiled impl) where both ran: one row each, column "speedup"."""
    ok = df[df["status"].astype(str) == OK]
    naive = ok[ok["impl"] == NAIVE].set_index("N")["time_s"]
    tiled = ok[ok["impl"].isin(TILED_IMPLS)]
    out = tiled.assign(speedup=tiled["N"].map(naive) / tiled["time_s"])
    return out.dropna(subset=["speedup"])[["impl", "N", "speedup"]]


def causal_ratios(df: pd.DataFrame) -> pd.DataFrame:
    """Per implementation: time without and with the causal mask and their ratio (causal / no mask)."""
    ok = df[df["status"].astype(str) == OK]
    table = ok.pivot_table(index="impl", columns="causal", values="time_s", aggfunc="first")
    table = table.reindex(columns=[False, True]).dropna()
    return pd.DataFrame({"implementation": table.index, "no mask (ms)": table[False].values * 1e3,
                         "causal (ms)": table[True].values * 1e3,
                         "causal / no mask": table[True].values / table[False].values})
