"""Dashboard settings, each declared once: the shared settings here (the sidebar's: problem size, mask, dtype, machine),
each view's own in flashviz/views/<view>/settings.py. `Settings` is one frozen dataclass of all of them, read by
readable names (s.kv_heads); every field carries its `Spec` (flashviz.app.spec: default, bounds or options, widget
kind, label, help text, and the short key a link writes it under where that differs from its name).

Everything else is derived from these declarations: the URL form (`Settings.to_query`), the hostile-URL parser
(flashviz.app.query.parse_query), the session-state keys and the widgets (flashviz.app.widgets). Adding a shared setting
is one `setting(...)` line here; a view's own setting, one in its registry entry. Also here: the classroom presets.
Pure: imports neither streamlit nor torch.

Legend: N sequence length (N_q = N_k), d head dimension, Br = block_q, Bc = block_k, B batch, H heads.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, fields, make_dataclass, replace
from typing import Any

from flashviz.app.registry import LABELS, SLUGS, VIEWS
from flashviz.app.sizes import (
    BLOCK_MAX,
    BLOCK_MIN,
    BLOCK_OPTIONS,
    D_MAX,
    D_MIN,
    D_OPTIONS,
    N_MAX,
    N_MIN,
    N_OPTIONS,
)
from flashviz.app.spec import APP, BOOL, CHOICE, INT, WINDOW, Spec, setting, spec_of_field, to_text, url_key
from flashviz.limits import BATCH_MAX, HEADS_MAX  # shared with the CLI
from flashviz.views.how.settings import BOTH, LOOP_ORDER
from flashviz.vocab import DTYPES, LOOP_ORDERS


@dataclass(frozen=True)
class Env:
    """What this machine offers; clamps that depend on it."""

    max_threads: int = 2  # CPU threads torch may use here
    devices: tuple[str, ...] = ("cpu",)  # "cuda" appears when torch.cuda.is_available()


@dataclass(frozen=True)
class SharedSettings:
    """The settings several views read, drawn in the sidebar (each view's registry entry lists those it reads)."""

    view: str = setting("how", Spec(CHOICE, "views", options=SLUGS, labels=LABELS, place=APP))
    n: int = setting(1024, Spec(
        INT, "select_slider", "Sequence length N", lo=N_MIN, hi=N_MAX, options=N_OPTIONS, short="N",
        help="Tokens per sequence (N_q = N_k = N). Powers of two plus odd sizes (97, 257, 1000, 1025) whose last "
             "tile is ragged. Naive attention's memory grows with N²; FlashAttention's with N."))
    d: int = setting(64, Spec(
        INT, "select_slider", "Head dimension d", lo=D_MIN, hi=D_MAX, options=D_OPTIONS, short="d",
        help="Features per head (the width of Q, K, V). GPT-2 uses 64; odd values (59, 111) test ragged code paths."))
    br: int = setting(64, Spec(
        INT, "blocks", "Block rows Br (queries per tile)", lo=BLOCK_MIN, hi=BLOCK_MAX, options=BLOCK_OPTIONS,
        short="Br", help="Query rows per tile: the height of one tile of S."))
    bc: int = setting(64, Spec(
        INT, "", "Block columns Bc (keys per tile)", lo=BLOCK_MIN, hi=BLOCK_MAX, options=BLOCK_OPTIONS, short="Bc",
        help="Key columns per tile: the width of one tile of S."))
    link: bool = setting(True, Spec(
        BOOL, "", "Link Br and Bc", short="Br = Bc",
        help="Use one block size for query rows (Br) and key columns (Bc), as most kernels do."))
    causal: bool = setting(False, Spec(
        BOOL, "toggle", "Causal mask", short="causal",
        help="Query i sees keys j ≤ i (decoder models, as SDPA's is_causal). Tiles above the diagonal are "
             "skipped: never loaded, never computed."))
    window: tuple[int, int] | None = setting(None, Spec(
        WINDOW, "window", "Sliding window", lo=0, hi=N_MAX, increment=64, short="window",
        help="Each query sees only nearby keys: i − left ≤ j ≤ i + right (flash-attn's window_size). Combined "
             "with the causal mask by intersection."))  # (left, right) reach; None = no window
    dtype: str = setting("float32", Spec(
        CHOICE, "selectbox", "dtype", options=DTYPES, short="dtype",
        help="Element type of Q, K, V. Accumulators stay fp32 (fp64 for float64). Half types halve the "
             "bytes moved; on a CPU they are slower, not faster."))
    batch: int = setting(1, Spec(
        INT, "number_input", "batch B", lo=1, hi=BATCH_MAX, half=True, short="B",
        help="Sequences processed together. Memory and time scale linearly with B."))
    heads: int = setting(4, Spec(
        INT, "number_input", "heads H", lo=1, hi=HEADS_MAX, half=True, short="H",
        help="Attention heads per layer. Memory and time scale linearly with H."))
    device: str = setting("cpu", Spec(
        CHOICE, "selectbox", "device", options=("cpu", "cuda"), env="devices", short="device",
        help="Where the benchmarks run. CUDA is listed only when PyTorch sees a GPU. The tile animation "
             "always runs its small trace on the CPU."))
    threads: int = setting(2, Spec(
        INT, "select_slider", "CPU threads", lo=1, hi=2, env="threads", short="threads",
        help="The most intra-op threads a timing run may use. The timing worker uses fewer when other work keeps "
             "cores busy (two threads on one free core wait for each other at every small op), and says under "
             "each result how many it used and why."))


def _loop_orders(self: Any) -> tuple[str, ...]:
    """The tile_schedule loop orders How it works shows."""
    return LOOP_ORDERS if self.order == BOTH else (LOOP_ORDER[self.order],)


def _to_query(self: Any) -> dict[str, str]:
    """The URL form: every setting as a short string (parse_query(to_query()) gives the settings back)."""
    return {url_key(f): to_text(spec_of_field(f), getattr(self, f.name)) for f in setting_fields()}


# Every setting of the dashboard: the shared ones, then each view's own, in the registry's order. Hashable, so it can
# key caches. Built from the registry, so that a view's settings are declared in its entry only.
Settings = make_dataclass(
    "Settings", [(name, Any, f) for view in VIEWS for name, f in view.own.items()], bases=(SharedSettings,),
    frozen=True, namespace={"loop_orders": property(_loop_orders), "to_query": _to_query,
                            "__doc__": "Every setting of the dashboard, one declaration each. Hashable, so it can "
                                       "key caches.", "__module__": __name__})


def setting_fields() -> tuple[Field, ...]:
    """The fields of Settings that are settings (they carry a Spec), in declaration order."""
    return tuple(f for f in fields(Settings) if "spec" in f.metadata)


def spec_of(f: Field | str) -> Spec:
    """The Spec of a setting, by field or by name."""
    if isinstance(f, str):
        (f,) = [g for g in fields(Settings) if g.name == f]
    return spec_of_field(f)


def for_machine(spec: Spec, env: Env) -> Spec:
    """The Spec with the bounds or options that depend on this machine filled in."""
    if spec.env == "threads":
        return replace(spec, hi=max(1, env.max_threads), options=tuple(range(1, max(1, env.max_threads) + 1)))
    if spec.env == "devices":
        return replace(spec, options=tuple(env.devices) or ("cpu",))
    return spec


def default_settings(env: Env = Env()) -> Settings:
    """Defaults for this machine (threads = every core torch may use)."""
    return Settings(threads=max(1, env.max_threads))


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
         ("br", 64), ("bc", 64), ("link", True), ("row", 881)),
    ),
    "Long-context causal": Preset(
        "N = 8192, causal: almost half of the 64 x 64 tiles are never loaded.",
        (("n", 8192), ("d", 64), ("heads", 1), ("causal", True), ("window", None), ("br", 128), ("bc", 128),
         ("link", True), ("row", 8143), ("ns", (1024, 2048, 4096, 8192))),
    ),
    "Sliding window": Preset(
        "Local attention: each query sees the 512 keys on either side; only a band of 268 of the 1024 tiles is "
        "computed. Turn on the causal mask to keep only the previous 512 (Mistral-style): 150 of the band's 268 "
        "tiles remain.",
        (("n", 4096), ("d", 128), ("causal", False), ("window", (512, 512)), ("br", 128), ("bc", 128),
         ("link", True), ("row", 1531)),
    ),
    "Tiny grid for the whiteboard": Preset(
        "N = 16 with 4 x 4 tiles, causal, FA1 and FA2 side by side: 10 computed, 6 skipped; few enough tiles to "
        "narrate every one.",
        (("n", 16), ("d", 8), ("causal", True), ("window", None), ("br", 4), ("bc", 4), ("link", True),
         ("row", 15), ("order", BOTH)),
    ),
    "Ragged edges (odd N)": Preset(
        "N = 1000 with 64-wide tiles: the last row and column of tiles are only 40 wide.",
        (("n", 1000), ("d", 59), ("causal", False), ("window", None), ("br", 64), ("bc", 64), ("link", True),
         ("row", 229)),
    ),
}


PRESET_KEEPS = ("view", "device", "threads")  # what a preset leaves alone: where you are and what the machine has


def apply_preset(settings: Settings, name: str) -> Settings:
    """Settings of a preset: every setting at its default except PRESET_KEEPS, then the preset's changes, so no
    setting of an earlier preset survives (unknown names change nothing)."""
    preset = PRESETS.get(name)
    if preset is None:
        return settings
    kept = {key: getattr(settings, key) for key in PRESET_KEEPS}
    return clamp_row(replace(Settings(), **kept, **dict(preset.changes)))
