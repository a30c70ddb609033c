"""The Masks view: every number it shows is checked here against torch's own create_mask / create_block_mask at the
settings where it is shown; hostile links are repaired; the run buttons time what they say. The data and figures
without the app: tests/test_mask_figures.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from torch.nn.attention.flex_attention import and_masks, create_block_mask, create_mask, or_masks

from flashviz.app.query import parse_query
from flashviz.app.state import PRESETS as PRESET_STORIES
from flashviz.app.state import Env, Settings, apply_preset
from flashviz.core.tiling import tile_schedule
from flashviz.kit.lock import threads_lock
from flashviz.masks import (
    alibi,
    causal_mask,
    chunked,
    dilated,
    document,
    prefix_lm,
    sliding_window,
)
from flashviz.measure.verdict import compare, row_estimate
from flashviz.views.masks.data import SWEEP_REPEATS, MaskSpec, build_mask, doc_lengths
from flashviz.views.masks.page import CHECK_N_MAX
from flashviz.views.masks.presets import PRESETS
from flashviz.views.masks.sentences import (
    CLOSE,
    IN_PROPORTION,
    LESS,
    MORE,
    proportion,
    proportion_md,
    proportion_word,
    same_kernel_md,
)
from flashviz.views.masks.settings import MASK_PRESETS
from tests._apptest import assert_clean, charts, decode, done_grid, tile_map
from tests._numbers import counted, numbers, shows, stated, value


def summary(at) -> str:
    (text,) = [m.value for m in at.markdown if "tiles computed" in m.value]
    return text


def truth(mask_mod, n: int, block: int) -> dict[str, object]:
    """What the view must show, computed independently: torch's dense mask and create_block_mask."""
    dense = create_mask(mask_mod, 1, 1, n, n, device="cpu")[0, 0]  # (N, N) bool
    schedule = tile_schedule(n, n, block, block, mask_mod=mask_mod)
    counts = schedule.counts()
    return {"visible": dense.double().mean().item(), "counts": counts, "schedule": schedule,
            "computed": counts["full"] + counts["partial"], "tiles": sum(counts.values()),
            "block_mask": create_block_mask(mask_mod, 1, 1, n, n, device="cpu", BLOCK_SIZE=block)}


def assert_summary_matches(at, want: dict, n: int) -> None:
    text = summary(at)
    pct = want["computed"] / want["tiles"]
    assert f"**{want['computed']} of {want['tiles']} tiles computed ({pct:.1%})**" in text, text
    c = want["counts"]
    assert f"{c['full']} full, {c['partial']} partial, {c['skipped']} skipped" in text
    assert f"**{want['visible']:.1%} of the {n}² (query, key) pairs are visible**" in text
    inside = sum(t.rows * t.cols for t in want["schedule"] if t.status != "skipped")  # pairs in computed tiles
    masked = 1 - want["visible"] * n * n / inside
    assert f"; {masked:.1%} of the pairs inside computed tiles are masked" in text


def listed(values: list[int], shown: int = 6) -> str:
    """An index list as the table writes it: the first `shown` entries, then how many more."""
    head = ", ".join(str(v) for v in values[:shown])
    return f"[{head}, ... {len(values) - shown} more]" if len(values) > shown else f"[{head}]"


def assert_table_matches(at, block_mask) -> None:
    """The BlockMask table lists create_block_mask's own counts and indices, row by row."""
    (table,) = [s for t, s in charts(at).items() if t == "BlockMask tensors"]
    cols = table["data"][0]["cells"]["values"]
    for i, row in enumerate(cols[0]):
        q = int(row)
        kv_num, full_num = int(block_mask.kv_num_blocks[0, 0, q]), int(block_mask.full_kv_num_blocks[0, 0, q])
        assert int(cols[1][i]) == kv_num and int(cols[3][i]) == full_num
        assert cols[2][i] == listed(block_mask.kv_indices[0, 0, q, :kv_num].tolist())
        assert cols[4][i] == listed(block_mask.full_kv_indices[0, 0, q, :full_num].tolist())


# ----------------------------------------------------------------------------------------------------------------------
# the view, through AppTest


def test_defaults_show_the_mask_its_tiles_the_block_mask_and_the_check(make_app):
    at = make_app(view="masks")
    assert_clean(at)
    assert not at.warning
    mask = and_masks(document([250, 375, 150, 249]), causal_mask)  # 4 mixed documents at N = 1024, AND causal
    want = truth(mask, 1024, 64)
    assert_summary_matches(at, want, 1024)
    assert "Documents at N = 1024: 250, 375, 150, 249 tokens." in summary(at)
    (check,) = [s.value for s in at.success]
    assert check.startswith("**Equal to create_block_mask: yes.**")
    figs = charts(at)
    tiles = figs["Tile map"]
    codes = decode(tiles["data"][0]["z"])
    sched = tile_schedule(1024, 1024, 64, 64, mask_mod=mask)
    assert codes.tolist() == [[("full", "partial", "skipped").index(s) for s in row] for row in sched.status_grid()]
    assert [t["name"] for t in tiles["data"][1:]] == [f"{want['counts'][s]} {s}" for s in ("full", "partial",
                                                                                           "skipped")]
    elements = figs["Element mask"]
    z = decode(elements["data"][0]["z"])
    assert z.shape == (256, 256)  # N = 1024 drawn at 4 x 4 elements per pixel, and the page says so
    dense = create_mask(mask, 1, 1, 1024, 1024, device="cpu")[0, 0].float()
    assert np.allclose(z, dense.view(256, 4, 256, 4).mean(dim=(1, 3)).numpy())
    assert any("each pixel shows 4 × 4 elements" in c.value for c in at.caption)
    assert_table_matches(at, want["block_mask"])
    (code,) = [c.value for c in at.code]
    assert "mask_mod = and_masks(document([250, 375, 150, 249]), causal_mask)" in code


@pytest.mark.parametrize("name", list(PRESET_STORIES))
def test_the_views_claims_hold_at_every_classroom_preset(make_app, name):
    """The sidebar's presets change N, Br and Bc (and H): the summary still says what torch's own mask says."""
    s = apply_preset(Settings(), name)
    at = make_app(**{**s.to_query(), "view": "masks"})
    assert_clean(at)
    mask_mod = and_masks(document(list(doc_lengths("mixed", s.n))), causal_mask)  # the view's default mask
    want = truth(mask_mod, s.n, s.br)
    assert_summary_matches(at, want, s.n)
    if s.n <= 4096:  # the live check against create_block_mask runs up to N = 4096
        assert_table_matches(at, want["block_mask"])


def test_the_code_shown_builds_the_same_block_mask(make_app):
    at = make_app(view="masks", n="256", br="32", bc="32", mask="chunked", mcomb="or", mask2="prefix_lm",
                  mchunk="96", mprefix="40")
    assert_clean(at)
    (code,) = [c.value for c in at.code]
    scope: dict = {}
    exec(code, scope)  # the view's own code sample, run as a user would paste it
    want = truth(or_masks(chunked(96), prefix_lm(40)), 256, 32)
    for name in ("kv_num_blocks", "full_kv_num_blocks"):
        assert torch.equal(getattr(scope["block_mask"], name), getattr(want["block_mask"], name))
        assert torch.equal(getattr(scope["same"], name), getattr(want["block_mask"], name))
    assert_summary_matches(at, want, 256)


def test_an_and_combination_and_its_parameter_widgets(make_app):
    at = make_app(view="masks", n="512", br="32", bc="32", mask="sliding_window", mcomb="and", mask2="dilated",
                  mwin="100", mright="20", mdil="3")
    assert_clean(at)
    shown = {w.key for w in at.number_input}
    assert {"mask_window", "mask_right", "mask_dilation"} <= shown and not {"mask_prefix", "mask_sinks",
                                                                            "mask_chunk", "mask_cap"} & shown
    want = truth(and_masks(sliding_window(100, 20), dilated(100, 3)), 512, 32)
    assert_summary_matches(at, want, 512)
    assert next(s.value for s in at.success).startswith("**Equal to create_block_mask: yes.**")
    assert_table_matches(at, want["block_mask"])
    at.selectbox(key="mask_combine").set_value("none").run()  # one mask: the second picker and its parameter go
    assert_clean(at)
    assert at.query_params["mcomb"] == "none"
    assert "second_mask" not in {w.key for w in at.selectbox}
    assert "mask_dilation" not in {w.key for w in at.number_input}
    assert_summary_matches(at, truth(sliding_window(100, 20), 512, 32), 512)


def test_a_score_mod_draws_its_curve_and_leaves_the_tiles_alone(make_app):
    base = make_app(view="masks", n="256", br="32", bc="32")
    at = make_app(view="masks", n="256", br="32", bc="32", mscore="softcap", mcap="12")
    assert_clean(at)
    assert at.number_input(key="mask_cap").value == 12
    figs = charts(at)
    (curve,) = [s for t, s in figs.items() if t.startswith("softcap(12)")]
    x, y = np.asarray(curve["data"][0]["x"]), np.asarray(curve["data"][0]["y"])
    assert np.allclose(y, 12 * np.tanh(x / 12)) and x.min() == -36 and x.max() == 36
    assert decode(figs["Tile map"]["data"][0]["z"]).tolist() == decode(
        charts(base)["Tile map"]["data"][0]["z"]).tolist()  # "never changes which pairs are visible"
    assert summary(at) == summary(base)
    assert any("it never changes which pairs are visible" in m.value for m in at.markdown)
    (code,) = [c.value for c in at.code]
    assert "score_mod = softcap(12.0)" in code and "score_mod=score_mod" in code

    at = make_app(view="masks", n="256", br="32", bc="32", mscore="alibi", heads="3")
    assert_clean(at)
    (lines,) = [s for t, s in charts(at).items() if t.startswith("alibi(3)")]
    assert "score_mod = alibi(3)" in next(c.value for c in at.code)
    assert [t["name"] for t in lines["data"]] == ["head 0", "head 1", "head 2"]
    for h, trace in enumerate(lines["data"]):
        offset = torch.tensor(trace["x"])
        want = alibi(3)(torch.zeros_like(offset), 0, torch.tensor(h), torch.tensor(0), offset)
        assert np.allclose(trace["y"], want.numpy())


def assert_ragged_said(at, n: int, edge_full: int) -> None:
    """The ragged-edge sentence names N and the count of edge tiles full on the tile map but partial in torch's
    BlockMask."""
    (said,) = [m.value for m in at.markdown if "ragged" in m.value]
    assert shows(stated(said, r"N ="), n) and n % 16
    assert shows(counted(said, r"ragged tiles? (?:is|are) full on the tile map"), edge_full)
    assert ("tile is" in said) == (edge_full == 1)


def test_a_ragged_n_says_how_many_edge_tiles_the_block_mask_lists_as_partial(make_app):
    at = make_app(view="masks", n="1000", mask="causal", mcomb="none")
    assert_clean(at)
    sched = tile_schedule(1000, 1000, 64, 64, mask_mod=causal_mask)
    theirs = create_block_mask(causal_mask, 1, 1, 1000, 1000, device="cpu", BLOCK_SIZE=64)
    ours_full = sched.counts()["full"]
    edge_full = ours_full - int(theirs.full_kv_num_blocks.sum())
    assert edge_full == 15  # the last row of tiles (40 rows high) is full below the diagonal here, partial there
    assert_ragged_said(at, 1000, edge_full)
    assert_table_matches(at, theirs)
    at = make_app(view="masks", n="97", br="16", bc="16", mask="dilated", mcomb="and", mask2="causal", mwin="40",
                  mdil="3")
    both = and_masks(dilated(40, 3), causal_mask)
    edge_full = tile_schedule(97, 97, 16, 16, mask_mod=both).counts()["full"] - int(
        create_block_mask(both, 1, 1, 97, 97, device="cpu", BLOCK_SIZE=16).full_kv_num_blocks.sum())
    assert edge_full == 1  # (6, 6): one element, seen
    assert_ragged_said(at, 97, edge_full)
    clean = make_app(view="masks", n="1024", mask="causal", mcomb="none")
    assert not any("ragged" in c.value for c in clean.caption)


def test_large_n_is_drawn_downsampled_and_says_the_check_is_not_run(make_app):
    at = make_app(view="masks", n="8192", br="256", bc="256", mask="causal", mcomb="none")
    assert_clean(at)
    assert not at.success
    (unchecked,) = [m.value for m in at.markdown if "**not checked live**" in m.value]
    assert shows(stated(unchecked, r"not checked live\*\* at N ="), 8192)
    assert shows(stated(unchecked, r"only up to N ="), CHECK_N_MAX) and CHECK_N_MAX < 8192
    pixels = decode(charts(at)["Element mask"]["data"][0]["z"]).shape
    assert pixels == (256, 256)  # 32 x 32 elements per pixel
    (per_pixel,) = [c.value for c in at.caption if "each pixel shows" in c.value]
    assert [value(stated(per_pixel, "each pixel shows", k)) for k in (0, 1)] == [8192 / p for p in pixels]


def test_a_grid_beyond_the_cap_is_refused_with_a_fix(make_app):
    at = make_app(view="masks", n="16384", br="32", bc="32")
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert "512 × 512 grid of tiles" in error and "Raise the block size to at least 64" in error
    assert not charts(at)


def test_the_view_never_waits_for_a_timing_run_and_leaves_the_thread_count_alone(make_app):
    lock = threads_lock()
    assert lock.acquire(timeout=60)  # another session is timing: the view evaluates on the threads it has
    try:
        threads = torch.get_num_threads()
        at = make_app(view="masks", n="384", br="32", bc="32", mask="chunked", mcomb="none", mchunk="100")
        assert_clean(at)
        assert torch.get_num_threads() == threads
    finally:
        lock.release()
    assert_summary_matches(at, truth(chunked(100), 384, 32), 384)
    at = make_app(view="masks", n="384", br="32", bc="32", mask="chunked", mcomb="none", mchunk="101")
    assert_clean(at)
    assert torch.get_num_threads() == threads and lock.acquire(blocking=False)  # one thread inside, lock given back
    lock.release()


HOSTILE = [
    {"mask": "__import__('os').system('id')", "mcomb": "xor"},
    {"mask2": "evil", "mscore": "lambda s, *a: s"},
    {"mwin": "-5", "mright": "1e9", "mdil": "0", "mcap": "99999999"},
    {"mdocs": "1000,1500,600", "mprefix": "１２", "mchunk": "0"},
    {"msinks": ["1", "2"], "mcomb": "and", "mask2": "document", "mdocs": "equal8"},
]


@pytest.mark.parametrize("query", HOSTILE, ids=[",".join(q) for q in HOSTILE])
def test_hostile_mask_links_are_repaired_with_a_notice(make_app, query):
    at = make_app(view="masks", n="256", br="32", bc="32", **query)
    assert_clean(at)
    (warning,) = [w.value for w in at.warning]
    assert warning.startswith("**Some settings in this link were adjusted:**")
    parsed, _ = parse_query({"view": "masks", "n": "256", "br": "32", "bc": "32", **query},
                            Env(max_threads=int(at.query_params["threads"])))
    assert at.query_params == parsed.to_query()
    assert parsed.mask in MASK_PRESETS and parsed.second_mask in MASK_PRESETS
    assert parsed.mask_combine in ("none", "and", "or")
    assert parsed.mask_dilation >= 1 and parsed.mask_chunk >= 1 and parsed.mask_window >= 0
    assert 1 <= parsed.mask_cap <= 1000
    assert summary(at)  # the view still draws


def test_eight_documents_at_a_tiny_n_keep_only_the_ones_that_fit(make_app):
    at = make_app(view="masks", n="16", br="4", bc="4", mask="document", mcomb="none", mdocs="equal8")
    assert_clean(at)
    assert "Documents at N = 16: 2, 2, 2, 2, 2, 2, 2, 2 tokens." in summary(at)
    at = make_app(view="masks", n="5", br="4", bc="4", mask="document", mcomb="none", mdocs="equal8")
    assert_clean(at)
    assert "Documents at N = 5: 1, 1, 1, 1, 1 tokens." in summary(at)  # three empty documents dropped
    assert_summary_matches(at, truth(document([1] * 5), 5, 4), 5)


# ----------------------------------------------------------------------------------------------------------------------
# How it works, with this view's mask


def test_how_it_works_animates_the_masks_view_mask(make_app):
    at = make_app(view="how", usemask="1", n="512", br="32", bc="32", causal="1", mask="sliding_window",
                  mcomb="or", mask2="prefix_lm", mwin="60", mright="10", mprefix="40")
    assert_clean(at)
    mask = or_masks(sliding_window(60, 10), prefix_lm(40))  # the sidebar's causal toggle does not apply
    sched = tile_schedule(512, 512, 32, 32, mask_mod=mask)
    computed = sum(t.status != "skipped" for t in sched)
    m = tile_map(at)
    assert m.frames == min(computed, 120) and m.title == "Tile map of S = QKᵀ: the Masks view's mask"
    grid = sched.status_grid()
    (panel,) = m.panels
    assert {ij: t["fate"] for ij, t in panel.tiles.items()} == {
        (i, j): grid[i][j] for i in range(len(grid)) for j in range(len(grid[0]))}
    assert all(done_grid(panel, m.frames).values())  # every tile reached by the end of the run
    final = [t for t in sched if t.status != "skipped"][-1]  # the last computed tile, in progress at the end
    assert panel.frames[m.frames - 1]["current"] == (final.q_block, final.k_block)
    assert f"{computed} computed · mask from the Masks view" in m.subtitle
    (note,) = [m.value for m in at.markdown if m.value.startswith("**Mask from the Masks view**")]
    assert "`mask_mod = or_masks(sliding_window(60, 10), prefix_lm(40))`" in note
    assert f"{computed} of {len(sched)} tiles computed" in note
    assert not at.metric and not any(t.startswith("Row inspector") for t in charts(at))  # they model causal only
    at.toggle(key="use_mask").set_value(False).run()  # back to the sidebar's causal mask, with its counters
    assert_clean(at)
    assert at.query_params["usemask"] == "0" and at.metric
    causal = tile_schedule(512, 512, 32, 32, causal=True).counts()
    assert tile_map(at).frames == min(causal["full"] + causal["partial"], 120)


# ----------------------------------------------------------------------------------------------------------------------
# the run button


def run_sentence(at) -> str:
    (text,) = [m.value for m in at.markdown if m.value.startswith("With this mask the tiled kernel computed")]
    return text


def assert_run_sentence_quotes_the_chart(at, n: int, block: int, mask_mod) -> None:
    """The sentence under the run's chart quotes the chart's own numbers: the three times, the proportional mark
    (the unmasked time x the tiles computed, counted here from tile_schedule), and the ratio between them."""
    (fig,) = [s for t, s in charts(at).items() if t == "The mask at work: time and peak memory"]
    time_bars, memory_bars, mark = fig["data"]
    assert list(time_bars["x"]) == ["tiled, this mask", "SDPA, dense mask", "tiled, no mask"]
    assert fig["layout"]["xaxis"]["type"] == "category"  # so that plotly draws the bars
    masked, dense, unmasked = (float(x) for x in decode(time_bars["y"]))  # ms, as drawn
    assert masked > 0 and dense > 0 and unmasked > 0 and (decode(memory_bars["y"]) > 0).all()
    counts = tile_schedule(n, n, block, block, mask_mod=mask_mod).counts()
    computed, tiles = counts["full"] + counts["partial"], sum(counts.values())
    expect = float(decode(mark["y"])[0])
    assert expect == pytest.approx(unmasked * computed / tiles)
    line = run_sentence(at)
    assert f"computed **{computed} of {tiles} tiles ({computed / tiles:.1%})** and took **{masked:.3g} ms**" in line
    assert f"in **{unmasked:.3g} ms**" in line and f"it would take **{expect:.3g} ms**" in line
    rows = {str(r["kind"]): r for r in at.dataframe[-1].value.to_dict("records")}  # the run's rows, intervals too
    v = proportion(rows["masked"], rows["unmasked"])  # this run's masked time against its unmasked one, scaled
    assert v.ratio == pytest.approx(masked / expect, rel=0.01)
    said = [value(x) for x in numbers(line.split("it took ")[1].split(" that")[0])]
    assert said == pytest.approx([v.ratio_low, v.ratio_high] if not v.separated else
                                 [v.ratio, v.ratio_low, v.ratio_high], abs=0.006)
    word = proportion_word(v)
    assert (word in line) and (("**Why more than in proportion here.**" in line) == (word == MORE))
    assert f"every pair: {dense:.3g} ms" in line


def test_the_run_at_the_views_defaults_quotes_the_numbers_its_chart_draws(make_app):
    at = make_app(view="masks")  # N = 1024, Br = Bc = 64, H = 4, d = 64: 4 documents AND causal
    assert_clean(at)
    assert "mask_run" not in [c.key for c in at.get("plotly_chart")]
    at.button(key="masks_run").click().run()
    assert_clean(at)
    mask_mod = and_masks(document(list(doc_lengths("mixed", 1024))), causal_mask)
    assert_run_sentence_quotes_the_chart(at, 1024, 64, mask_mod)


def test_the_run_button_times_the_three_runs_and_says_what_it_measured(make_app):
    at = make_app(view="masks", n="256", br="32", bc="32", heads="2", d="32")
    at.button(key="masks_run").click().run()
    assert_clean(at)
    assert_run_sentence_quotes_the_chart(at, 256, 32, and_masks(document(list(doc_lengths("mixed", 256))), causal_mask))


def test_a_score_mod_run_says_sdpa_runs_the_mask_only(make_app):
    at = make_app(view="masks", n="128", br="32", bc="32", heads="2", d="16", mscore="softcap")
    at.button(key="masks_run").click().run()
    assert_clean(at)
    assert any("SDPA has no score-mod hook: its row runs the mask only, without softcap" in c.value
               for c in at.markdown)


def test_a_run_too_large_for_the_dense_mask_is_refused_with_a_fix(make_app):
    at = make_app(view="masks", n="16384", br="128", bc="128", heads="8")
    assert_clean(at)
    (refusal,) = [w.value for w in at.warning if w.value.startswith("This run is refused")]
    assert refusal.startswith("This run is refused: Dense SDPA at N = 16384") and "Lower N (sidebar)" in refusal
    assert not [b for b in at.button if b.key == "masks_run"]


def test_time_every_preset_draws_one_bar_per_preset_next_to_its_time_in_proportion(make_app):
    at = make_app(view="masks", n="128", br="32", bc="32", heads="1", d="16", mwin="32", mprefix="32", mchunk="64",
                  msinks="4", mdil="4", mdocs="equal4")
    assert_clean(at)
    assert "mask_sweep" not in [c.key for c in at.get("plotly_chart")]
    at.button(key="mask_sweep_run").click().run()
    assert_clean(at)
    spec = MaskSpec(window=32, prefix=32, chunk=64, sinks=4, dilation=4, docs="equal4")
    mods = {p.label: build_mask(replace(spec, preset=name), 128).mask_mod for name, p in PRESETS.items()}
    counts = {label: tile_schedule(128, 128, 32, 32, mask_mod=mod).counts() for label, mod in mods.items()}
    computed = {label: c["full"] + c["partial"] for label, c in counts.items()}
    (fig,) = [s for t, s in charts(at).items() if t == "Time of every preset against its time in proportion to tiles"]
    bars, marks = fig["data"]
    names = list(bars["y"])
    assert names[0] == "no mask · 100%" and len(names) == len(mods) + 1  # one bar per preset, the unmasked on top
    order = sorted(mods, key=lambda label: -computed[label])  # most tiles first
    assert names[1:] == [f"{label} · {computed[label] / 16:.0%}" for label in order]
    times = dict(zip(names, decode(bars["x"]).tolist(), strict=True))  # ms
    unmasked = times["no mask · 100%"]
    assert all(t > 0 for t in times.values())
    assert decode(marks["x"]).tolist() == pytest.approx([unmasked] + [unmasked * computed[lb] / 16 for lb in order])
    text = next(m.value for m in at.markdown if "presets took at most" in m.value)
    rows = at.dataframe[-1].value.to_dict("records")  # the sweep's rows: each preset's interval, the unmasked last
    words = {str(r["label"]): proportion_word(proportion(r, rows[-1])) for r in rows[:-1]}
    held = [lb for lb in mods if words[lb] in (LESS, IN_PROPORTION)]
    assert text.startswith(f"**{len(held)} of {len(mods)} presets took at most 1.2× their time in proportion**")
    for lb in mods:  # each preset over its time in proportion, by the verdict rule, has its own line
        assert (f"- **{lb}** ({computed[lb] / 16:.0%} of tiles, " in text) == (words[lb] == MORE)
    best = min(mods, key=lambda label: computed[label])  # the first on a tie, as the page says
    t = times[f"{best} · {computed[best] / 16:.0%}"]
    assert (f"**{best}** computed the fewest tiles, {computed[best]} of 16 ({computed[best] / 16:.1%}), and took "
            f"**{t:.3g} ms**, ") in text
    v = compare(row_estimate(next(r for r in rows if r["label"] == best)), row_estimate(rows[-1]))
    against = text.split(f"**{t:.3g} ms**, ")[1].split(" the unmasked kernel's")[0]
    assert [value(x) for x in numbers(against)] == pytest.approx(
        [v.ratio, v.ratio_low, v.ratio_high] if v.separated else [v.ratio_low, v.ratio_high], abs=0.006)
    rows = at.dataframe[-1].value
    build = float(rows.loc[rows["label"] == best, "build_s"].iloc[0])
    assert f"Its schedule took {build * 1e3:.3g} ms to build, once, before the timing." in text
    assert list(rows["label"]) == [*mods, "no mask"] and (rows["repeats"] == SWEEP_REPEATS).all()


def timed(kind: str, t: float, half: float, repeats: int = 20, **more) -> dict:
    return {"kind": kind, "label": kind, "time_s": t, "time_lo_s": t * (1 - half), "time_hi_s": t * (1 + half),
            "repeats": repeats, "iqr_s": t * half, **more}


def test_the_same_unmasked_kernel_in_two_runs_is_compared_by_the_verdict_rule():
    # the trial's page: the unmasked kernel at 181 ms in the mask's run, then 64.5 ms in the presets' sweep
    run, sweep = [timed("unmasked", 0.181, 0.02)], [timed("unmasked", 0.0645, 0.02)]
    said = same_kernel_md(run, sweep)
    assert shows(stated(said, "on this page: "), 181) and shows(stated(said, "ms in the mask's run, "), 64.5)
    v = compare(row_estimate(run[0]), row_estimate(sweep[0]))
    assert v.separated and "load changed between the two runs" in said
    assert [value(x) for x in numbers(said.split("took ")[1].split(" the time")[0])] == pytest.approx(
        [v.ratio, v.ratio_low, v.ratio_high], abs=0.006)
    close = same_kernel_md(run, [timed("unmasked", 0.175, 0.3)])  # a noisy sweep: nothing said of the load
    assert "load changed" not in close and "too close to call here" in close
    assert same_kernel_md(run, None) == "" and same_kernel_md(None, sweep) == ""


@pytest.mark.parametrize(("t", "half", "word"), [(0.1, 0.01, MORE), (0.05, 0.01, IN_PROPORTION),
                                                 (0.02, 0.01, LESS), (0.05, 0.3, CLOSE), (0.1, 0.01, CLOSE)])
def test_a_masked_time_is_called_in_proportion_or_not_only_where_the_intervals_say_so(t, half, word):
    repeats = 3 if (t, word) == (0.1, CLOSE) else 20  # three calls: no 95% interval, no word
    masked = timed("masked", t, half, repeats, tiles_computed=8, tiles=16)
    unmasked = timed("unmasked", 0.1, 0.01, repeats, tiles_computed=16, tiles=16)
    v = proportion(masked, unmasked)
    assert v.ratio == pytest.approx(t / 0.05) and proportion_word(v) == word  # 8 of 16 tiles: 0.05 s in proportion
    if word == CLOSE:  # and its advice names nothing this view lacks: it has no repeats control
        assert "too close to call" in proportion_md(v) and "repeats" not in proportion_md(v)
    else:
        assert word in proportion_md(v) and shows(numbers(proportion_md(v))[0], v.ratio)
