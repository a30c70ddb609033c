"""How one dashboard setting is declared: its `Spec` (URL form, widget, label, help, bounds or options), attached to a
dataclass field by `setting(default, Spec(...))`.

The shared settings (flashviz.app.state) and each view's own settings (flashviz/views/<view>/settings.py) are declared
this way; code reads a setting by its name (s.kv_heads), a link by its short URL key (dechkv). Everything else is
derived from the declarations: the URL form, the hostile-URL parser (flashviz.app.query), the
session-state keys and the widgets (flashviz.kit.widgets). Pure: imports neither streamlit nor torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field, dataclass, field, replace
from typing import Any

# How a value is parsed from and written to the URL.
INT, BOOL, CHOICE, INTS, STRS, WINDOW = "int", "bool", "choice", "ints", "strs", "window"
# Where a widget is drawn: the sidebar (a shared setting), the view that owns it, or the app itself (the views).
SIDEBAR, VIEW, APP = "sidebar", "view", "app"


@dataclass(frozen=True)
class Spec:
    """Everything the dashboard needs to know about one setting, besides its name and default."""

    kind: str  # URL form: INT, BOOL, CHOICE, INTS (comma list), STRS (comma list) or WINDOW ("left,right" / "none")
    widget: str  # streamlit widget: "select_slider", "slider", "number_input", "checkbox", "toggle", "radio",
    #              "selectbox", "multiselect"; "window" (on/left/right), "blocks" (link + Br + Bc), "views", "" (drawn
    #              by another setting's widget or by its view's own code)
    label: str = ""  # widget label
    help: str = ""  # widget help text (markdown)
    place: str = SIDEBAR  # SIDEBAR, VIEW or APP
    lo: int = 0  # INT / INTS: smallest allowed value
    hi: int = 0  # INT / INTS: largest allowed value
    options: tuple[Any, ...] = ()  # CHOICE / STRS: the allowed values; sliders and multiselects: the values offered
    labels: Mapping[str, str] | None = None  # display text of each option (radio, selectbox, views)
    increment: int = 1  # number_input: the amount its + and - buttons add
    half: bool = False  # drawn in half the sidebar's width, next to the following half-width setting
    env: str = ""  # "threads": hi is the machine's thread count; "devices": options are the machine's devices
    disabled: bool = False  # number_input: shown greyed out (a page sets it while another setting decides the value)
    short: str = ""  # its name in a line of text ("N", "B", "causal"), where a page says which settings it used
    key: str = ""  # the key a link writes it under, where that differs from its name (map_n: bwn); "": the name


def setting(default: Any, spec: Spec, *, key: str = "") -> Any:
    """A settings field: its default, its Spec (read back with `spec_of_field`) and, where it differs from the name,
    the key a link writes it under (the links made before the readable name existed keep working)."""
    return field(default=default, metadata={"spec": replace(spec, key=key) if key else spec})


def spec_of_field(f: Field) -> Spec:
    """The Spec a field was declared with."""
    return f.metadata["spec"]


def url_key(f: Field) -> str:
    """The key a link writes the setting under: its Spec's short key, else its name."""
    return spec_of_field(f).key or f.name


def to_text(spec: Spec, value: Any) -> str:
    """A setting's value as its URL string.

    Example:
        >>> to_text(Spec(WINDOW, "window"), (256, 0)), to_text(Spec(INTS, "multiselect"), (64, 97))
        ('256,0', '64,97')
    """
    if spec.kind == BOOL:
        return "1" if value else "0"
    if spec.kind == WINDOW:
        return "none" if value is None else f"{value[0]},{value[1]}"
    if spec.kind in (INTS, STRS):
        return ",".join(str(x) for x in value)
    return str(value)


def describe(spec: Spec, value: Any) -> str:
    """A setting's value in a line of text, by its short name: how a page says which settings a result ran with.

    Example:
        >>> describe(Spec(BOOL, "toggle", short="causal"), True), describe(Spec(INT, "slider", short="B"), 2)
        ('causal', 'B = 2')
        >>> describe(Spec(WINDOW, "window", short="window"), None), describe(Spec(INTS, "", short="N"), (64, 128))
        ('no window', 'N = 64, 128')
    """
    if spec.kind == BOOL:
        return spec.short if value else f"not {spec.short}"
    if spec.kind == WINDOW:
        return f"no {spec.short}" if value is None else f"{spec.short} ({value[0]}, {value[1]})"
    if spec.kind == CHOICE:
        return str(spec.labels.get(value, value) if spec.labels else value)
    if spec.kind in (INTS, STRS):
        return f"{spec.short} = {', '.join(str(x) for x in value)}"
    return f"{spec.short} = {value}"
