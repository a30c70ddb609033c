"""Dashboard settings: one frozen dataclass, its URL form, and a defensive parser for hostile query strings.

Pure: imports neither streamlit nor torch, so the parser is fuzzed in milliseconds. A link carries every setting
(`to_query`), and `parse_query` turns any query mapping (repeated keys, non-numbers, huge, negative, unicode)
into valid Settings plus plain-text notices saying what was clamped and why. It never raises on input.

Legend: N sequence length (N_q = N_k), d head dimension, Br = block_q, Bc = block_k.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace

from flashviz.limits import BATCH_MAX, HEADS_MAX, LIST_MAX, REPEATS_MAX  # shared with the CLI
from flashviz.vocab import DTYPES, IMPLS, KV_OUTER, Q_OUTER

N_MIN, N_MAX = 1, 16384  # sequence length N; 16384^2 fp32 scores = 1 GiB, the most a laptop survives naively
D_MIN, D_MAX = 1, 512  # head dimension d
BLOCK_MIN, BLOCK_MAX = 1, 1024  # tile sizes Br, Bc (rows / columns of S per tile)

N_OPTIONS = (16, 32, 64, 97, 128, 256, 257, 512, 1000, 1024, 1025, 2048, 4096, 8192, 16384)  # powers of 2 + odd
D_OPTIONS = (8, 16, 32, 59, 64, 111, 128, 256)
BLOCK_OPTIONS = (4, 8, 16, 32, 64, 128, 256, 512)
BENCH_N_OPTIONS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
ORDERS = {"fa1": "FA1 (kv_outer)", "fa2": "FA2 (q_outer)", "both": "FA1 and FA2 side by side"}  # URL name -> label
LOOP_ORDER = {"fa1": KV_OUTER, "fa2": Q_OUTER}  # URL name -> tile_schedule loop_order
VIEWS = {  # URL slug -> tab label
    "how": "How it works",
    "bench": "Benchmark",
    "block": "Block size",
    "io": "IO model",
    "correct": "Correctness",
    "train": "Training",
}
_TRUE = {"1", "true", "yes", "on", "t", "y"}
_FALSE = {"0", "false", "no", "off", "f", "n"}
_INT = re.compile(r"[+-]?[0-9]{1,12}", re.ASCII)  # ASCII digits only: int() would accept Arabic-Indic digits too
_RAW_MAX = 200  # characters of a raw value we look at; longer values are rejected unread


@dataclass(frozen=True)
class Env:
    """What this machine offers; clamps that depend on it."""

    max_threads: int = 2  # CPU threads torch may use here
    devices: tuple[str, ...] = ("cpu",)  # "cuda" appears when torch.cuda.is_available()


@dataclass(frozen=True)
class Settings:
    """Every setting of the dashboard. Hashable, so it can key caches; `to_query` is its URL form."""

    n: int = 1024  # sequence length N (N_q = N_k)
    d: int = 64  # head dimension
    br: int = 64  # Br: query rows per tile
    bc: int = 64  # Bc: key columns per tile
    link: bool = True  # Br and Bc move together
    causal: bool = False  # top-left causal mask
    window: tuple[int, int] | None = None  # (left, right) sliding window reach, None = no window
    order: str = "fa1"  # "fa1" (kv_outer), "fa2" (q_outer) or "both"
    dtype: str = "float32"  # torch dtype name
    batch: int = 1  # B
    heads: int = 1  # H
    device: str = "cpu"  # "cpu" or "cuda"
    threads: int = 2  # torch CPU threads for timing runs
    row: int = 512  # query row shown by the row inspector
    view: str = "how"  # active tab (slug of VIEWS)
    ns: tuple[int, ...] = (256, 512, 1024, 2048, 4096)  # Benchmark: sequence lengths
    impls: tuple[str, ...] = IMPLS  # Benchmark: implementations
    reps: int = 5  # Benchmark / Block size / Training: timing repeats
    blocks: tuple[int, ...] = (16, 32, 64, 128, 256)  # Block size: block sizes swept at fixed N
    cds: tuple[int, ...] = (16, 32, 64, 128)  # Correctness: head dimensions
    cns: tuple[int, ...] = (64, 97, 256, 1000)  # Correctness: sequence lengths
    presets_applied: tuple[str, ...] = field(default=(), compare=False, repr=False)  # not a setting; for notices

    @property
    def loop_orders(self) -> tuple[str, ...]:
        """The tile_schedule loop orders this view shows."""
        return ("kv_outer", "q_outer") if self.order == "both" else (LOOP_ORDER[self.order],)

    def to_query(self) -> dict[str, str]:
        """The URL form: every setting as a short string (parse_query(to_query()) gives the settings back)."""
        def ints(xs: Sequence[int]) -> str:
            return ",".join(str(x) for x in xs)

        return {
            "n": str(self.n), "d": str(self.d), "br": str(self.br), "bc": str(self.bc),
            "link": _b(self.link), "causal": _b(self.causal),
            "window": "none" if self.window is None else ints(self.window),
            "order": self.order, "dtype": self.dtype, "batch": str(self.batch), "heads": str(self.heads),
            "device": self.device, "threads": str(self.threads), "row": str(self.row), "view": self.view,
            "ns": ints(self.ns), "impls": ",".join(self.impls), "reps": str(self.reps),
            "blocks": ints(self.blocks), "cds": ints(self.cds), "cns": ints(self.cns),
        }


def _b(x: bool) -> str:
    return "1" if x else "0"


def default_settings(env: Env = Env()) -> Settings:
    """Defaults for this machine (threads = every core torch may use)."""
    return Settings(threads=max(1, env.max_threads))


def shown(raw: object, limit: int = 40) -> str:
    """A raw URL value made safe to show inside inline code: printable ASCII, no backticks, truncated."""
    text = str(raw)
    safe = "".join(c if " " <= c <= "~" and c != "`" else "?" for c in text[:limit])
    return safe + ("..." if len(text) > limit else "")


class _Parser:
    """Collects notices while turning raw strings into clamped values."""

    def __init__(self, params: Mapping[str, object]):
        self.notices: list[str] = []
        self.raw: dict[str, str] = {}
        for key, value in params.items():
            values = list(value) if isinstance(value, (list, tuple)) else [value]
            if not values:
                continue
            if len(values) > 1:
                self.notices.append(f"`{shown(key)}` appears {len(values)} times in the link; using the last value.")
            self.raw[str(key)] = str(values[-1])

    def get(self, key: str) -> str | None:
        value = self.raw.get(key)
        if value is not None and len(value) > _RAW_MAX:
            self.notices.append(f"`{key}` is {len(value)} characters long; ignored it and kept the default.")
            return None
        return value

    def integer(self, key: str, default: int, lo: int, hi: int) -> int:
        raw = self.get(key)
        if raw is None:
            return default
        value = _to_int(raw)
        if value is None:
            self.notices.append(f"`{key}={shown(raw)}` is not a whole number; kept the default {default}.")
            return default
        return self._clamp(key, value, lo, hi)

    def _clamp(self, key: str, value: int, lo: int, hi: int) -> int:
        if value < lo or value > hi:
            clamped = min(max(value, lo), hi)
            self.notices.append(f"`{key}={shown(value)}` is outside {lo}..{hi}; clamped to {clamped}.")
            return clamped
        return value

    def boolean(self, key: str, default: bool) -> bool:
        raw = self.get(key)
        if raw is None:
            return default
        text = raw.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        self.notices.append(f"`{key}={shown(raw)}` is not true/false (use 1 or 0); kept {_b(default)}.")
        return default

    def choice(self, key: str, default: str, allowed: Sequence[str]) -> str:
        raw = self.get(key)
        if raw is None:
            return default
        text = raw.strip().lower()
        if text in allowed:
            return text
        self.notices.append(f"`{key}={shown(raw)}` is not one of {', '.join(allowed)}; kept {default}.")
        return default

    def int_list(self, key: str, default: tuple[int, ...], lo: int, hi: int) -> tuple[int, ...]:
        raw = self.get(key)
        if raw is None:
            return default
        parts = [p for p in raw.split(",") if p.strip()]
        values = []
        for part in parts:
            value = _to_int(part)
            if value is None:
                self.notices.append(f"`{key}` entry `{shown(part)}` is not a whole number; dropped it.")
                continue
            values.append(self._clamp(key, value, lo, hi))
        values = sorted(set(values))
        if len(values) > LIST_MAX:
            self.notices.append(f"`{key}` lists {len(values)} values; kept the first {LIST_MAX} (sweep size cap).")
            values = values[:LIST_MAX]
        if not values:
            self.notices.append(f"`{key}={shown(raw)}` holds no usable value; kept the default.")
            return default
        return tuple(values)

    def str_list(self, key: str, default: tuple[str, ...], allowed: Sequence[str]) -> tuple[str, ...]:
        raw = self.get(key)
        if raw is None:
            return default
        wanted = {p.strip().lower() for p in raw.split(",") if p.strip()}
        bad = wanted - set(allowed)
        if bad:
            listed = ", ".join(shown(b, 15) for b in sorted(bad)[:4])
            self.notices.append(f"`{key}` names unknown entries ({listed}); allowed: {', '.join(allowed)}.")
        values = tuple(a for a in allowed if a in wanted)
        if not values:
            self.notices.append(f"`{key}` names no known entry; kept the default.")
            return default
        return values

    def window(self, key: str, default: tuple[int, int] | None) -> tuple[int, int] | None:
        raw = self.get(key)
        if raw is None:
            return default
        text = raw.strip().lower()
        if text in ("", "none", "off", "0,none", "none,none"):
            return None
        parts = text.split(",")
        if len(parts) != 2:
            self.notices.append(f"`{key}={shown(raw)}` is not `left,right` (e.g. 256,0); no window.")
            return None
        sides = []
        for side, part in zip(("left", "right"), parts, strict=True):
            if part.strip() in ("none", "inf", ""):
                sides.append(N_MAX)  # unbounded: a reach of N_MAX covers every N this dashboard allows
                continue
            value = _to_int(part)
            if value is None:
                self.notices.append(f"`{key}` {side} reach `{shown(part)}` is not a whole number; no window.")
                return None
            sides.append(self._clamp(f"{key} {side}", value, 0, N_MAX))
        return (sides[0], sides[1])


def _to_int(raw: str) -> int | None:
    text = raw.strip()
    return int(text) if _INT.fullmatch(text) else None


def parse_query(params: Mapping[str, object], env: Env = Env()) -> tuple[Settings, list[str]]:
    """Settings from URL query parameters, clamped to what this dashboard and machine allow.

    Args:
        params: query parameters, each a string or a list of strings (repeated keys: the last one wins).
        env: the machine's limits (threads, devices).
    Returns:
        (settings, notices): valid settings, and one plain sentence per value that was changed or ignored.

    Example:
        >>> s, notes = parse_query({"n": "99999", "causal": "1"})
        >>> s.n, s.causal, len(notes)
        (16384, True, 1)
    """
    p = _Parser(params)
    base = default_settings(env)
    known = {f.name for f in fields(Settings)} - {"presets_applied"}
    unknown = sorted(k for k in p.raw if k not in known)
    if unknown:
        listed = ", ".join(f"`{shown(k, 20)}`" for k in unknown[:5])
        p.notices.append(f"Ignored unknown link parameter(s): {listed}" + (" ..." if len(unknown) > 5 else "") + ".")
    n = p.integer("n", base.n, N_MIN, N_MAX)
    br = p.integer("br", base.br, BLOCK_MIN, BLOCK_MAX)
    link = p.boolean("link", base.link)
    bc = p.integer("bc", br if link else base.bc, BLOCK_MIN, BLOCK_MAX)
    if link and bc != br:
        p.notices.append(f"`link=1` but `br={br}` and `bc={bc}` differ; unlinked them to keep both.")
        link = False
    devices = env.devices or ("cpu",)
    settings = Settings(
        n=n,
        d=p.integer("d", base.d, D_MIN, D_MAX),
        br=br,
        bc=bc,
        link=link,
        causal=p.boolean("causal", base.causal),
        window=p.window("window", base.window),
        order=p.choice("order", base.order, tuple(ORDERS)),
        dtype=p.choice("dtype", base.dtype, DTYPES),
        batch=p.integer("batch", base.batch, 1, BATCH_MAX),
        heads=p.integer("heads", base.heads, 1, HEADS_MAX),
        device=_device(p, devices),
        threads=p.integer("threads", base.threads, 1, max(1, env.max_threads)),
        row=p.integer("row", min(base.row, n - 1), 0, n - 1),
        view=p.choice("view", base.view, tuple(VIEWS)),
        ns=p.int_list("ns", base.ns, N_MIN, N_MAX),
        impls=p.str_list("impls", base.impls, IMPLS),
        reps=p.integer("reps", base.reps, 1, REPEATS_MAX),
        blocks=p.int_list("blocks", base.blocks, BLOCK_MIN, BLOCK_MAX),
        cds=p.int_list("cds", base.cds, D_MIN, D_MAX),
        cns=p.int_list("cns", base.cns, N_MIN, N_MAX),
    )
    return settings, p.notices


def _device(p: _Parser, devices: tuple[str, ...]) -> str:
    raw = p.get("device")
    if raw is not None and raw.strip().lower() == "cuda" and "cuda" not in devices:
        p.notices.append("`device=cuda` but this machine has no CUDA GPU; using the CPU.")
        return devices[0]
    return p.choice("device", devices[0], devices)


def clamp_row(settings: Settings) -> Settings:
    """Keep the inspected row inside 0..N-1 after N changed."""
    return settings if settings.row < settings.n else replace(settings, row=settings.n - 1)


@dataclass(frozen=True)
class Preset:
    """A classroom scenario: a one-line story and the settings it changes."""

    story: str  # what to show the class with it
    changes: tuple[tuple[str, object], ...]  # (Settings field, value) pairs


PRESETS: dict[str, Preset] = {
    "GPT-2 small layer": Preset(
        "One attention layer of GPT-2 small: N = 1024 tokens, 12 heads of d = 64, causal.",
        (("n", 1024), ("d", 64), ("heads", 12), ("batch", 1), ("causal", True), ("window", None),
         ("br", 64), ("bc", 64), ("link", True), ("row", 700)),
    ),
    "Long-context causal": Preset(
        "N = 8192, causal: almost half of the 64 x 64 tiles are never loaded.",
        (("n", 8192), ("d", 64), ("heads", 1), ("causal", True), ("window", None), ("br", 128), ("bc", 128),
         ("link", True), ("row", 6000), ("ns", (1024, 2048, 4096, 8192))),
    ),
    "Sliding window": Preset(
        "Mistral-style local attention: each query sees the previous 512 keys; only a band of tiles is computed.",
        (("n", 4096), ("d", 128), ("causal", True), ("window", (512, 0)), ("br", 128), ("bc", 128), ("link", True),
         ("row", 2000)),
    ),
    "Tiny grid for the whiteboard": Preset(
        "N = 16 with 4 x 4 tiles: few enough steps to narrate every one.",
        (("n", 16), ("d", 8), ("causal", True), ("window", None), ("br", 4), ("bc", 4), ("link", True),
         ("row", 9), ("order", "both")),
    ),
    "Ragged edges (odd N)": Preset(
        "N = 1000 with 64-wide tiles: the last row and column of tiles are only 40 wide.",
        (("n", 1000), ("d", 59), ("causal", False), ("window", None), ("br", 64), ("bc", 64), ("link", True),
         ("row", 990)),
    ),
}


def apply_preset(settings: Settings, name: str) -> Settings:
    """Settings with a preset's changes applied (unknown names change nothing)."""
    preset = PRESETS.get(name)
    if preset is None:
        return settings
    return clamp_row(replace(settings, **dict(preset.changes)))
