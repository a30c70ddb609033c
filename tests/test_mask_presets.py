"""The Masks view's one preset table (flashviz.views.masks.presets) reproduces today's settings exactly: every URL key,
default, bound, step, label and help text is written out here, so old links keep meaning what they meant; the
dashboard's settings derived from it equal the ones declared today; and every preset builds the mask its factory
builds."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention.flex_attention import and_masks, create_mask, or_masks

from flashviz import masks
from flashviz.app.state import setting_fields, spec_of
from flashviz.kit.sizes import N_MAX
from flashviz.kit.spec import CHOICE, INT, VIEW, url_key
from flashviz.views.masks.data import MaskSpec, build_mask
from flashviz.views.masks.presets import PRESETS, mask_settings, params_of, preset_labels
from flashviz.views.masks.settings import MASK_PRESETS

PRESET_LABELS = {"causal": "causal", "sliding_window": "sliding window", "prefix_lm": "prefix LM",
                 "document": "document", "attention_sink": "attention sink", "chunked": "chunked",
                 "dilated": "dilated"}
TODAY = {  # url key: (default, lo, hi, step, label, help, labels of a choice)
    "mask": ("document", 0, 0, 1, "Mask",
             "A FlexAttention mask_mod preset from flashviz.masks (causal_mask, sliding_window, prefix_lm, document, "
             "attention_sink, chunked, dilated): which keys j each query i sees.", PRESET_LABELS),
    "mcomb": ("and", 0, 0, 1, "Combine",
              "Combine with a second mask: AND keeps a key only where both masks see it (torch's and_masks); OR "
              "where either does (or_masks).", {"none": "no", "and": "AND", "or": "OR"}),
    "mask2": ("causal", 0, 0, 1, "Second mask",
              "Combined with the first mask. Two presets of the same kind share their parameters.", PRESET_LABELS),
    "mdocs": ("mixed", 0, 0, 1, "Documents",
              "How N tokens are packed into documents, in relative lengths: 4 mixed = 1000 : 1500 : 600 : 996 (the "
              "lengths at N = 4096), 4 growing = 1 : 2 : 4 : 8. Scaled to N, so they always sum to N.",
              {"mixed": "4 mixed", "equal2": "2 equal", "equal4": "4 equal", "equal8": "8 equal",
               "growing": "4 growing"}),
    "mprefix": (256, 0, 16384, 64, "Prefix",
                "prefix_lm: keys j < prefix are seen by every query (bidirectional prefix); the rest is causal.", None),
    "msinks": (4, 0, 16384, 1, "Sinks",
               "attention_sink: the first keys every query keeps (StreamingLLM's attention sinks).", None),
    "mwin": (128, 0, 16384, 64, "Window",
             "sliding_window: keys i − w ≤ j a query sees; attention_sink: its causal window; dilated: the "
             "largest distance |i − j|.", None),
    "mright": (0, 0, 16384, 64, "Reach ahead",
               "sliding_window only: keys j ≤ i + right a query sees (0: causal sliding window).", None),
    "mchunk": (256, 1, 16384, 64, "Chunk",
               "chunked: query i sees keys j ≤ i of its own chunk (j // chunk = i // chunk).", None),
    "mdil": (4, 1, 1024, 1, "Dilation",
             "dilated: a query sees every dilation-th key within the window (i − j divisible by dilation).", None),
    "mscore": ("none", 0, 0, 1, "Score mod",
               "A score_mod changes the scores before the softmax; it never changes which tiles are computed. "
               "ALiBi adds m_h (j − i) per head (H from the sidebar); softcap squashes scores into (−cap, cap).",
               {"none": "none", "alibi": "ALiBi", "softcap": "softcap"}),
    "mcap": (30, 1, 1000, 1, "Cap", "softcap: cap · tanh(score / cap). Gemma 2 caps attention logits at 50.", None),
}


def test_the_table_has_todays_url_keys_defaults_bounds_labels_and_help():
    """Today's values, exactly: a preset added later comes after today's seven (and adds its function to the picker's
    help), so every link of today's format keeps its meaning."""
    table = {p.url_key: p for p in mask_settings().values()}
    assert list(table) == list(TODAY)  # the URL keys, in the order Settings declares them
    assert [p.name for p in mask_settings().values()] == list(mask_settings())  # keyed by the Settings name
    today = len(PRESET_LABELS)
    for key, (default, lo, hi, step, label, help_text, labels) in TODAY.items():
        p = table[key]
        got = p.labels if labels is not PRESET_LABELS else dict(list(p.labels.items())[:today])
        assert (p.url_key, p.default, p.label, got) == (key, default, label, labels), key
        if key == "mask" and new_factories():  # a new preset's function joins the list
            help_text = help_text.replace("dilated)", f"dilated, {', '.join(new_factories())})")
        assert p.help == help_text, key
        if labels is None:
            assert (p.lo, p.hi, p.step, p.widget) == (lo, hi, step, "number_input"), key
        else:
            assert p.widget == "selectbox" and p.options[:len(labels)] == tuple(labels), key
    assert list(preset_labels().items())[:today] == list(PRESET_LABELS.items())


def new_factories() -> list[str]:
    """The flashviz.masks functions of presets added after today's seven, each once, not already listed."""
    today = {PRESETS[name].factory for name in PRESET_LABELS}
    return list(dict.fromkeys(p.factory for p in PRESETS.values() if p.factory not in today))


def test_the_dashboards_mask_settings_have_todays_values():
    """The Settings fields the dashboard derives from the table (the Masks view's settings class) carry today's
    defaults, bounds, steps, labels and help: old links and the widgets mean what they meant."""
    declared = {url_key(f): f for f in setting_fields()}  # old links name them by these keys
    today = len(PRESET_LABELS)
    for key, (default, lo, hi, step, label, _help, labels) in TODAY.items():
        spec = spec_of(declared[key])
        assert declared[key].default == default and spec.label == label and spec.place == VIEW, key
        if labels is None:
            assert (spec.kind, spec.lo, spec.hi, spec.increment, spec.widget) == (INT, lo, hi, step, "number_input")
        else:
            got = spec.labels if labels is not PRESET_LABELS else dict(list(spec.labels.items())[:today])
            assert (spec.kind, got, spec.widget) == (CHOICE, labels, "selectbox"), key
    assert preset_labels() == MASK_PRESETS and max(p.hi for p in mask_settings().values()) == N_MAX


def test_mask_spec_defaults_are_the_tables_one_preset_alone():
    table = mask_settings()
    spec = MaskSpec()
    for key, p in table.items():
        if p.url_key != "mcomb":  # a MaskSpec is one preset unless told to combine; the view opens with AND
            assert getattr(spec, p.key) == p.default, key
    assert spec.combine == "none" and spec.presets == ("document",)


INDEPENDENT = {  # preset -> the mask its factory builds at the spec below (N = 64), written out by hand
    "causal": masks.causal_mask,
    "sliding_window": masks.sliding_window(9, 3),
    "prefix_lm": masks.prefix_lm(10),
    "document": masks.document([16, 16, 16, 16]),
    "attention_sink": masks.attention_sink(2, 9),
    "chunked": masks.chunked(12),
    "dilated": masks.dilated(9, 3),
}
SPEC = {"docs": "equal4", "prefix": 10, "sinks": 2, "window": 9, "right": 3, "chunk": 12, "dilation": 3}


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_builds_its_factorys_mask_and_the_code_that_rebuilds_it(name):
    built = build_mask(MaskSpec(name, **SPEC), 64)
    dense = create_mask(built.mask_mod, 1, 1, 64, 64, device="cpu")
    assert torch.equal(dense, create_mask(INDEPENDENT[name], 1, 1, 64, 64, device="cpu"))
    scope = {name: getattr(masks, name) for name in dir(masks)}
    exec(built.code, scope)  # the code sample the view shows, run as a user would paste it
    assert torch.equal(create_mask(scope["mask_mod"], 1, 1, 64, 64, device="cpu"), dense)
    assert set(INDEPENDENT) == set(PRESETS)  # a new preset gets its hand-written mask here


def test_combined_presets_and_score_mods_build_what_torch_combines():
    built = build_mask(MaskSpec("chunked", "or", "prefix_lm", chunk=12, prefix=10, score="softcap", cap=7), 64, 2)
    want = or_masks(masks.chunked(12), masks.prefix_lm(10))
    assert torch.equal(create_mask(built.mask_mod, 1, 1, 64, 64, device="cpu"),
                       create_mask(want, 1, 1, 64, 64, device="cpu"))
    assert built.code == "mask_mod = or_masks(chunked(12), prefix_lm(10))\nscore_mod = softcap(7.0)"
    x = torch.tensor([-50.0, 0.0, 3.0, 50.0])
    assert torch.allclose(built.score_mod(x, 0, 0, 0, 0), 7.0 * torch.tanh(x / 7.0))
    alibi = build_mask(MaskSpec("causal", "and", "dilated", score="alibi"), 64, 4)
    assert alibi.code.endswith("score_mod = alibi(4)")
    offset = torch.tensor([-3.0, 0.0])
    assert torch.allclose(alibi.score_mod(torch.zeros(2), 0, torch.tensor(1), torch.tensor(0), offset),
                          offset * 2.0 ** (-8.0 * 2 / 4))  # head 1 of 4: slope 2^(-8 * 2 / 4)
    both = and_masks(masks.causal_mask, masks.dilated(128, 4))
    assert torch.equal(create_mask(alibi.mask_mod, 1, 1, 64, 64, device="cpu"),
                       create_mask(both, 1, 1, 64, 64, device="cpu"))


def test_the_controls_drawn_are_the_presets_parameters_each_once():
    assert [p.url_key for p in params_of(("attention_sink", "dilated"), "none")] == ["msinks", "mwin", "mdil"]
    assert [p.url_key for p in params_of(("causal",), "softcap")] == ["mcap"]
    assert [p.url_key for p in params_of(("document", "document"), "alibi")] == ["mdocs"]
    assert params_of(("evil",), "evil") == []
