"""The Masks view's presets in one table: each mask preset, its parameters (bounds, defaults, URL keys, labels and
help), the document patterns, the ways to combine two presets and the score mods.

Everything else is derived from these declarations: `flashviz.views.masks.data.MaskSpec` and `build_mask` (the
mask_mod and the Python code the view shows), the view's controls (which parameters a preset draws), and the
dashboard's settings (`mask_settings`: the name, URL key, default, bounds, label and help of every setting of the view).
A new preset is one `MaskPreset(...)` entry in PRESETS (plus its function in flashviz.masks if it is a new mask).

Torch-free on purpose: the dashboard's URL parsing and settings read it without importing torch. The factories are
named, not imported: `build_mask` looks each one up in flashviz.masks.

Legend: N sequence length, i a query position, j a key position.
"""

from __future__ import annotations

from dataclasses import dataclass

POSITIONS_MAX = 16384  # tokens: the largest N the dashboard offers (flashviz.kit.sizes.N_MAX), so the largest reach
DILATION_MAX = 1024  # dilated(window, dilation): a stride beyond this leaves only the diagonal at any N shown
CAP_MAX = 1000  # softcap(cap): scores of fp32 attention are far below this; larger caps change nothing
CHOICE_WIDGET, NUMBER_WIDGET = "selectbox", "number_input"  # the streamlit widget of a choice and of a number


@dataclass(frozen=True)
class MaskParam:
    """One setting of the Masks view: a preset's parameter, or one of the pickers (which preset, how to combine)."""

    key: str  # the MaskSpec field it fills
    url_key: str  # the dashboard setting's short key in the URL
    label: str  # widget label
    help: str  # widget help text (markdown)
    default: int | str  # the value a fresh page (and a link without this key) has
    lo: int = 0  # an int setting: smallest allowed value
    hi: int = 0  # an int setting: largest allowed value
    step: int = 1  # an int setting: the number input's step
    choices: tuple[tuple[str, str], ...] = ()  # a choice setting: (URL value, label) pairs; () for an int

    @property
    def name(self) -> str:
        """The setting's name in MasksSettings (and the URL's Settings): "mask" and "second_mask" for the pickers,
        "mask_<key>" for the others."""
        return {"preset": "mask", "preset2": "second_mask"}.get(self.key, f"mask_{self.key}")

    @property
    def labels(self) -> dict[str, str] | None:
        """URL value -> label of a choice setting; None for an int."""
        return dict(self.choices) if self.choices else None

    @property
    def options(self) -> tuple[str, ...]:
        """The allowed URL values of a choice setting; () for an int."""
        return tuple(value for value, _ in self.choices)

    @property
    def widget(self) -> str:
        """The streamlit widget that draws it."""
        return CHOICE_WIDGET if self.choices else NUMBER_WIDGET


@dataclass(frozen=True)
class MaskPreset:
    """A mask_mod preset of flashviz.masks, as the view offers it."""

    name: str  # URL value and MaskSpec.preset
    label: str  # shown in the pickers
    factory: str  # the flashviz.masks function: called with the params' values in order; no params: the mask_mod
    params: tuple[str, ...]  # MaskParam keys (PARAMS) in the factory's argument order
    describe: str  # which keys j query i sees, in words


@dataclass(frozen=True)
class DocPattern:
    """A way of packing N tokens into documents."""

    label: str  # shown in the picker
    ratios: tuple[int, ...]  # relative document lengths, scaled to N by flashviz.views.masks.data.doc_lengths


@dataclass(frozen=True)
class ScoreChoice:
    """A score_mod the view offers (or none)."""

    label: str  # shown in the picker
    factory: str | None  # the flashviz.masks function; None: no score_mod
    params: tuple[str, ...] = ()  # MaskParam keys of its arguments, in order
    heads: bool = False  # whether its one argument is the sidebar's head count H (ALiBi's slopes)


PRESETS: dict[str, MaskPreset] = {p.name: p for p in (
    MaskPreset("causal", "causal", "causal_mask", (), "query i sees keys j ≤ i"),
    MaskPreset("sliding_window", "sliding window", "sliding_window", ("window", "right"),
               "query i sees keys i − window ≤ j ≤ i + right"),
    MaskPreset("prefix_lm", "prefix LM", "prefix_lm", ("prefix",),
               "every query sees the first prefix keys, the rest causally"),
    MaskPreset("document", "document", "document", ("docs",), "a query sees every key of its own document"),
    MaskPreset("attention_sink", "attention sink", "attention_sink", ("sinks", "window"),
               "causal: the first sinks keys plus keys i − window ≤ j ≤ i"),
    MaskPreset("chunked", "chunked", "chunked", ("chunk",), "query i sees keys j ≤ i of its own chunk"),
    MaskPreset("dilated", "dilated", "dilated", ("window", "dilation"),
               "|i − j| ≤ window and i − j divisible by dilation"),
)}

DOC_PATTERNS: dict[str, DocPattern] = {
    "mixed": DocPattern("4 mixed", (1000, 1500, 600, 996)),  # the packed-training example of the README (N = 4096)
    "equal2": DocPattern("2 equal", (1, 1)),
    "equal4": DocPattern("4 equal", (1, 1, 1, 1)),
    "equal8": DocPattern("8 equal", (1,) * 8),
    "growing": DocPattern("4 growing", (1, 2, 4, 8)),
}
COMBINE: dict[str, tuple[str, str | None]] = {  # URL value -> (label, torch's combinator; None: one mask)
    "none": ("no", None),
    "and": ("AND", "and_masks"),
    "or": ("OR", "or_masks"),
}
SCORE_MODS: dict[str, ScoreChoice] = {
    "none": ScoreChoice("none", None),
    "alibi": ScoreChoice("ALiBi", "alibi", heads=True),
    "softcap": ScoreChoice("softcap", "softcap", ("cap",)),
}


def _pairs(table: dict) -> tuple[tuple[str, str], ...]:
    """(URL value, label) of every entry of a table whose values have a label (or are (label, ...) tuples)."""
    return tuple((name, entry[0] if isinstance(entry, tuple) else entry.label) for name, entry in table.items())


PICKERS: dict[str, MaskParam] = {p.key: p for p in (  # which preset(s), how combined, which score mod
    MaskParam("preset", "mask", "Mask", default="document", choices=_pairs(PRESETS),
              help="A FlexAttention mask_mod preset from flashviz.masks ("
                   + ", ".join(dict.fromkeys(p.factory for p in PRESETS.values())) + "): which keys j each query i "
                   "sees."),
    MaskParam("combine", "mcomb", "Combine", default="and", choices=_pairs(COMBINE),
              help="Combine with a second mask: AND keeps a key only where both masks see it (torch's and_masks); OR "
                   "where either does (or_masks)."),
    MaskParam("preset2", "mask2", "Second mask", default="causal", choices=_pairs(PRESETS),
              help="Combined with the first mask. Two presets of the same kind share their parameters."),
    MaskParam("score", "mscore", "Score mod", default="none", choices=_pairs(SCORE_MODS),
              help="A score_mod changes the scores before the softmax; it never changes which tiles are computed. "
                   "ALiBi adds m_h (j − i) per head (H from the sidebar); softcap squashes scores into (−cap, cap)."),
)}
PARAMS: dict[str, MaskParam] = {p.key: p for p in (  # the presets' and the score mods' arguments
    MaskParam("docs", "mdocs", "Documents", default="mixed", choices=_pairs(DOC_PATTERNS),
              help="How N tokens are packed into documents, in relative lengths: 4 mixed = 1000 : 1500 : 600 : 996 "
                   "(the lengths at N = 4096), 4 growing = 1 : 2 : 4 : 8. Scaled to N, so they always sum to N."),
    MaskParam("prefix", "mprefix", "Prefix", default=256, lo=0, hi=POSITIONS_MAX, step=64,
              help="prefix_lm: keys j < prefix are seen by every query (bidirectional prefix); the rest is causal."),
    MaskParam("sinks", "msinks", "Sinks", default=4, lo=0, hi=POSITIONS_MAX,
              help="attention_sink: the first keys every query keeps (StreamingLLM's attention sinks)."),
    MaskParam("window", "mwin", "Window", default=128, lo=0, hi=POSITIONS_MAX, step=64,
              help="sliding_window: keys i − w ≤ j a query sees; attention_sink: its causal window; dilated: the "
                   "largest distance |i − j|."),
    MaskParam("right", "mright", "Reach ahead", default=0, lo=0, hi=POSITIONS_MAX, step=64,
              help="sliding_window only: keys j ≤ i + right a query sees (0: causal sliding window)."),
    MaskParam("chunk", "mchunk", "Chunk", default=256, lo=1, hi=POSITIONS_MAX, step=64,
              help="chunked: query i sees keys j ≤ i of its own chunk (j // chunk = i // chunk)."),
    MaskParam("dilation", "mdil", "Dilation", default=4, lo=1, hi=DILATION_MAX,
              help="dilated: a query sees every dilation-th key within the window (i − j divisible by dilation)."),
    MaskParam("cap", "mcap", "Cap", default=30, lo=1, hi=CAP_MAX,
              help="softcap: cap · tanh(score / cap). Gemma 2 caps attention logits at 50."),
)}
SETTING_ORDER = ("preset", "combine", "preset2", "docs", "prefix", "sinks", "window", "right", "chunk", "dilation",
                 "score", "cap")  # the order of the settings in MasksSettings (and in the URL)


def mask_settings() -> dict[str, MaskParam]:
    """Every setting of the Masks view, by its name in Settings, in Settings order: what a Settings field and its Spec
    need (URL key, default, lo, hi, step, label, help; options and labels for a choice, whose widget is a selectbox).

    Example:
        >>> s = mask_settings()
        >>> list(s)[:4], s["mask_window"].default, s["mask_window"].url_key, s["mask_combine"].labels
        (['mask', 'mask_combine', 'second_mask', 'mask_docs'], 128, 'mwin', {'none': 'no', 'and': 'AND', 'or': 'OR'})
    """
    table = {**PICKERS, **PARAMS}
    return {table[key].name: table[key] for key in SETTING_ORDER}


def preset_labels() -> dict[str, str]:
    """URL value -> label of every preset, in table order (the pickers' options).

    Example:
        >>> list(preset_labels().items())[:2]
        [('causal', 'causal'), ('sliding_window', 'sliding window')]
    """
    return dict(_pairs(PRESETS))


def params_of(presets: tuple[str, ...], score: str) -> list[MaskParam]:
    """The parameters to draw for these presets and this score mod, each once, in the order the presets name them
    (a name that is not in the tables draws nothing).

    Example:
        >>> [p.name for p in params_of(("sliding_window", "dilated"), "softcap")]
        ['mask_window', 'mask_right', 'mask_dilation', 'mask_cap']
    """
    keys = [k for name in presets if name in PRESETS for k in PRESETS[name].params]
    keys += list(SCORE_MODS[score].params) if score in SCORE_MODS else []
    return [PARAMS[k] for k in dict.fromkeys(keys)]
