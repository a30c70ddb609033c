"""What a view's settings are made of: the shared settings (the sidebar's: problem size, mask, dtype, machine), one
small dataclass, and `view_settings`, which makes a view's own settings class (flashviz/views/<view>/settings.py) a
frozen dataclass of the shared settings it reads, the settings of other views it borrows, and its own.

Every field carries its `Spec` (flashviz.kit.spec: default, bounds or options, widget kind, label, help text, and the
short key a link writes it under where that differs from its name). A view's page and claims read their own class
by readable names (s.kv_heads); a shared setting the view does not declare is not there to read. The shell
(flashviz.app.state) composes every view's settings into the one URL. Pure: imports neither streamlit nor torch.

Legend: N sequence length (N_q = N_k), d head dimension, Br = block_q, Bc = block_k, B batch, H heads.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import Any

from flashviz.kit.sizes import (
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
from flashviz.kit.spec import BOOL, CHOICE, INT, WINDOW, Spec, setting, spec_of_field
from flashviz.limits import BATCH_MAX, HEADS_MAX  # shared with the CLI
from flashviz.vocab import DTYPES


@dataclass(frozen=True)
class Env:
    """What this machine offers; clamps that depend on it."""

    max_threads: int = 2  # CPU threads torch may use here
    devices: tuple[str, ...] = ("cpu",)  # "cuda" appears when torch.cuda.is_available()


@dataclass(frozen=True)
class SharedSettings:
    """The settings several views read, drawn in the sidebar; each view's settings declare those it reads."""

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


SHARED: tuple[str, ...] = tuple(f.name for f in fields(SharedSettings))
FIELDS: dict[str, Field] = {f.name: f for f in fields(SharedSettings)}  # every setting declared so far, by name


def copy_field(f: Field) -> Field:
    """A fresh field with f's default and Spec, for another dataclass (a Field belongs to one class)."""
    if f.default_factory is not MISSING:
        return field(default_factory=f.default_factory, metadata=f.metadata)
    return field(default=f.default, metadata=f.metadata)


def view_settings(label: str, *, reads: tuple[str, ...] = (), borrows: tuple[tuple[type, tuple[str, ...]], ...] = (),
                  also_reads: tuple[str, ...] = (), own: Mapping[str, Field] | None = None) -> Callable[[type], type]:
    """Make a view's settings class a frozen dataclass of the shared settings it `reads` (drawn in the sidebar while it
    is open), the settings it `borrows` from other views' classes ((class, names) pairs: it reads them, and may draw
    their widgets) and its own fields, declared in its body with `setting(default, Spec(...))` (or, made from a table,
    in `own`). `also_reads`: shared settings it reads without drawing them in the sidebar (it says they do not apply
    to it, or it draws another view's result made with them).

    The class gets LABEL (the view's name on the page), READS, OWN (name -> Field of its own settings) and BORROWS
    (name -> the class that owns it). Own settings are unique across views: one value per link key.

    Example:
        >>> from flashviz.kit.spec import VIEW
        >>> @view_settings("Demo", reads=("n",))
        ... class DemoSettings:
        ...     demo_reps: int = setting(3, Spec(INT, "slider", "Repeats", lo=1, hi=9, place=VIEW))
        >>> DemoSettings(n=64), DemoSettings.READS, tuple(DemoSettings.OWN)
        (DemoSettings(n=64, demo_reps=3), ('n',), ('demo_reps',))
    """
    unknown = [name for name in (*reads, *also_reads) if name not in SHARED]
    if unknown:
        raise ValueError(f"{label}: {unknown} are not shared settings; the shared ones are {SHARED}")

    def make(cls: type) -> type:
        for name, f in (own or {}).items():
            setattr(cls, name, f)
        own_annotations = {**inspect.get_annotations(cls), **{name: Any for name in own or {}}}
        names = [name for name in own_annotations if isinstance(cls.__dict__.get(name), Field)]
        taken = [name for name in names if name in FIELDS]
        if taken:
            raise ValueError(f"{cls.__name__}: {taken} are declared already (by the shared settings or a view)")
        borrowed = {name: owner for owner, names in borrows for name in names}
        added = ({name: FIELDS[name] for name in SHARED if name in reads or name in also_reads}
                 | {name: owner.OWN[name] for name, owner in borrowed.items()})
        annotations = {**SharedSettings.__annotations__, **{name: owner.__annotations__[name]
                                                            for name, owner in borrowed.items()}}
        cls.__annotations__ = {**{name: annotations[name] for name in added}, **own_annotations}
        for name, f in added.items():
            setattr(cls, name, copy_field(f))
        made = dataclass(frozen=True)(cls)
        made.LABEL, made.READS, made.BORROWS = label, tuple(reads), borrowed
        made.OWN = {f.name: f for f in fields(made) if f.name in names}
        FIELDS.update(made.OWN)
        return made

    return make


def spec_of(f: Field | str) -> Spec:
    """The Spec of a setting, by field or by name (a shared setting, or one of a view whose settings are imported)."""
    return spec_of_field(FIELDS[f] if isinstance(f, str) else f)


def for_machine(spec: Spec, env: Env) -> Spec:
    """The Spec with the bounds or options that depend on this machine filled in."""
    if spec.env == "threads":
        return replace(spec, hi=max(1, env.max_threads), options=tuple(range(1, max(1, env.max_threads) + 1)))
    if spec.env == "devices":
        return replace(spec, options=tuple(env.devices) or ("cpu",))
    return spec
