"""flash-attn's dtype rule for every kernel and path: in bf16 and fp16, the error against float64 is at most 2x SDPA's
own error on the same inputs (flashviz.measure.dtype_rule). The reference keeps its scores in float64, so a kernel
that rounds S = Q K^T to the inputs' dtype (7 to 16x SDPA's error on a long cache) fails here, where a reference that
rounds S too would have let it pass. The inputs carry a trained model's outlier channels (peaked softmax rows)."""

from __future__ import annotations

import pytest
import torch

from flashviz.core.decode import flash_decode
from flashviz.measure.dtype_rule import (
    RULE_FACTOR,
    RuleRow,
    backward_rows,
    decode_rows,
    forward_rows,
    paged,
    reference,
    rule_row,
    sdpa,
    table_md,
)
from flashviz.numerics import make_inputs

LOW = [torch.bfloat16, torch.float16]


def _assert_all_pass(rows: list[RuleRow]) -> None:
    assert rows
    failing = [r for r in rows if not r.passes]
    assert not failing, "\n" + table_md(failing)
    for r in rows:  # each row's numbers are real errors, not zeros: the rule compared something
        assert r.error > 0 and r.sdpa_error > 0


@pytest.mark.parametrize("dtype", LOW)
def test_the_forward_in_both_orders_with_masks_and_score_mod_is_within_twice_sdpas_error(dtype):
    rows = forward_rows(dtype, n=128, d=32, block=32)
    assert {r.path for r in rows} == {f"{o} {c}".strip() for o in ("kv_outer", "q_outer") for c in
                                      ("", "causal", "document mask_mod", "alibi score_mod")}
    _assert_all_pass(rows)


@pytest.mark.parametrize("dtype", LOW)
def test_the_backward_gradients_are_within_twice_sdpas_error(dtype):
    rows = backward_rows(dtype, n=64, d=32, block=16)
    assert [r.path for r in rows] == ["causal dQ", "causal dK", "causal dV"]
    _assert_all_pass(rows)


@pytest.mark.parametrize("dtype", LOW)
def test_decode_every_path_and_split_count_is_within_twice_sdpas_error(dtype):
    rows = decode_rows(dtype, n_cache=1024, d=64, groups=((4, 2), (4, 1), (2, 2)), splits=(1, 2, 3, 5, 8), page=32)
    paths = {r.path.split(",")[0].split(" ", 2)[2] for r in rows}
    assert paths == {"contiguous", "plain", "paged pool", "paged gather"}
    _assert_all_pass(rows)


@pytest.mark.parametrize("dtype", LOW)
def test_decode_with_ragged_lengths_speculative_rows_and_causal_is_within_twice_sdpas_error(dtype):
    """Several query rows (bottom-right causal), sequences of different lengths, a paged and a contiguous cache:
    each sequence held to SDPA on its own valid keys."""
    lens = [700, 333]
    q, k, v = make_inputs(2, 4, 3, 768, 64, dtype=dtype, outliers=True, seed=3, h_kv=2)
    ours, theirs, want = [], [], []
    k_p, table = paged(k, 32, 5, 0)
    v_p, _ = paged(v, 32, 5, 0)
    for kw in ({}, {"block_table": table}):
        kc, vc = (k_p, v_p) if kw else (k, v)
        out = flash_decode(q, kc, vc, cache_seqlens=torch.tensor(lens), causal=True, num_splits=3, **kw)
        for b, n in enumerate(lens):
            causal = torch.ones(3, n, dtype=torch.bool).tril(n - 3)  # bottom-right: row i sees keys <= n - 3 + i
            x = (q[b : b + 1], k[b : b + 1, :, :n], v[b : b + 1, :, :n])
            ours.append(out[b : b + 1])
            theirs.append(sdpa(*x, attn_mask=causal))
            want.append(reference(*x, attn_mask=causal))
    rows = [rule_row("decode", f"ragged {i}", o, t, w) for i, (o, t, w) in enumerate(zip(ours, theirs, want,
                                                                                          strict=True))]
    _assert_all_pass(rows)


def test_a_decode_that_rounds_its_scores_to_bf16_fails_the_rule():
    """The rule's power: the same decode with S rounded to bf16 (what the tuned layouts did) is far outside 2x."""
    q, k, v = make_inputs(1, 4, 1, 2048, 64, dtype=torch.bfloat16, outliers=True, seed=0, h_kv=1)
    scale = 64 ** -0.5
    S = (q.float() * scale) @ k.float().transpose(-1, -2)  # (1, 4, 1, N) fp32 scores
    rounded = torch.softmax(S.to(torch.bfloat16).float(), -1) @ v.float()  # S rounded to bf16 first
    row = rule_row("decode", "scores in bf16", rounded.to(torch.bfloat16), sdpa(q, k, v), reference(q, k, v))
    assert not row.passes and row.ratio > RULE_FACTOR
    good = rule_row("decode", "fp32 scores", flash_decode(q, k, v, num_splits=4), sdpa(q, k, v), reference(q, k, v))
    assert good.passes


def test_the_row_says_its_ratio_and_verdict():
    row = RuleRow("decode", "bfloat16", "x", error=0.003, sdpa_error=0.002)
    assert row.ratio == pytest.approx(1.5) and row.passes
    assert not RuleRow("decode", "bfloat16", "x", 0.005, 0.002).passes
    assert RuleRow("decode", "bfloat16", "x", 0.0, 0.0).ratio == 1.0
    assert "| decode | bfloat16 | x | 0.003 | 0.002 | 1.50 | yes |" in table_md([row])
