"""Every setting of the dashboard in one frozen dataclass, `Settings`: the open view, the shared settings
(flashviz.kit.settings) and each view's own (flashviz/views/<view>/settings.py), composed here from those declarations.
It is what the shell keeps: the URL form (`Settings.to_query`), the hostile-URL parser (flashviz.app.query.parse_query)
and the widgets' session state (flashviz.app.session) read and write all of it; a view is handed only its own
dataclass (`settings_of`). Adding a shared setting is one `setting(...)` line in flashviz.kit.settings; a view's own
setting, one in its settings class. Also here: the classroom presets. Pure: imports neither streamlit nor torch.

Legend: N sequence length (N_q = N_k), d head dimension, Br = block_q, Bc = block_k, B batch, H heads.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, fields, make_dataclass, replace
from typing import Any

from flashviz.app.registry import LABELS, SLUGS, VIEWS, View
from flashviz.kit.settings import Env, SharedSettings, copy_field
from flashviz.kit.settings import spec_of as declared_spec_of
from flashviz.kit.spec import APP, CHOICE, Spec, setting, spec_of_field, to_text, url_key
from flashviz.views.how.settings import BOTH

__all__ = ["PRESETS", "PRESET_KEEPS", "Env", "Preset", "Settings", "apply_preset", "clamp_row", "default_settings",
           "setting_fields", "settings_of", "spec_of"]  # Env: this machine, as the shell's parser and sidebar see it

VIEW_FIELD = setting("how", Spec(CHOICE, "views", options=SLUGS, labels=LABELS, place=APP))  # the open view


def _to_query(self: Any) -> dict[str, str]:
    """The URL form: every setting as a short string (parse_query(to_query()) gives the settings back)."""
    return {url_key(f): to_text(spec_of_field(f), getattr(self, f.name)) for f in setting_fields()}


# Every setting of the dashboard: the open view, the shared settings, then each view's own, in the registry's order.
# Hashable, so it can key caches. Composed from the views' settings classes, so that a setting is declared once.
Settings = make_dataclass(
    "Settings", [("view", str, VIEW_FIELD), *((f.name, f.type, copy_field(f)) for f in fields(SharedSettings)),
                 *((name, Any, copy_field(f)) for view in VIEWS for name, f in view.settings.OWN.items())],
    frozen=True, namespace={"to_query": _to_query, "__module__": __name__,
                            "__doc__": "Every setting of the dashboard, one declaration each. Hashable, so it can "
                                       "key caches; `settings_of(view, s)` gives a view the settings it reads."})


def setting_fields() -> tuple[Field, ...]:
    """The fields of Settings that are settings (they carry a Spec), in declaration order."""
    return tuple(f for f in fields(Settings) if "spec" in f.metadata)


def spec_of(f: Field | str) -> Spec:
    """The Spec of a setting, by field or by name: the open view's (the shell's own), or any other's
    (flashviz.kit.settings.spec_of: the shared settings and every view's)."""
    return spec_of_field(VIEW_FIELD) if f == "view" else declared_spec_of(f)


def settings_of(view: View, s: Settings) -> Any:
    """The open view's settings: its own dataclass (flashviz/views/<view>/settings.py), from every setting."""
    return view.settings(**{f.name: getattr(s, f.name) for f in fields(view.settings)})


def default_settings(env: Env | None = None) -> Settings:
    """Defaults for this machine (threads = every core torch may use; Env() without one)."""
    return Settings(threads=max(1, (env or Env()).max_threads))


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
