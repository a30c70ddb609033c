"""Any input layout: every public kernel takes non-contiguous q, k, v (a model's (B, N, H, d) transposed to
(B, H, N, d), a slice of a larger tensor, K/V heads expanded for GQA with stride 0, a paged pool transposed) and
returns what it returns for the same values laid out contiguously. A property test over the layouts."""

from __future__ import annotations

import torch
import torch.distributed as dist
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flashviz import (
    flash_attention,
    flash_attention_backward,
    flash_attention_forward,
    flash_decode,
    naive_attention,
)
from flashviz.core.decode import decode_partials
from flashviz.masks import document
from flashviz.numerics import fp8_attention
from flashviz.ring import ring_attention

LAYOUTS = ("contiguous", "bnhd", "sliced", "expanded")
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def lay_out(x: torch.Tensor, layout: str, seed: int) -> torch.Tensor:
    """x's values (B, H, N, d) in `layout`: "bnhd" a (B, N, H, d) tensor transposed, "sliced" every other row and
    the first d features of a larger tensor, "expanded" head 0 broadcast to every head (stride 0; x's other heads
    are replaced by head 0's values, so compare against .contiguous() of the answer)."""
    B, H, N, d = x.shape
    if layout == "contiguous":
        return x.contiguous()
    if layout == "bnhd":
        return x.transpose(1, 2).contiguous().transpose(1, 2)
    if layout == "sliced":
        big = torch.randn(B, H, 2 * N, d + 3, generator=torch.Generator().manual_seed(seed), dtype=x.dtype)
        big[:, :, ::2, :d] = x
        return big[:, :, ::2, :d]
    assert layout == "expanded"
    return x[:, :1].expand(B, H, N, d)


def _inputs(shape_q, shape_kv, layouts, seed):
    g = torch.Generator().manual_seed(seed)
    xs = (torch.randn(shape_q, generator=g), torch.randn(shape_kv, generator=g), torch.randn(shape_kv, generator=g))
    laid = tuple(lay_out(x, lay, seed + i) for i, (x, lay) in enumerate(zip(xs, layouts, strict=True)))
    return laid, tuple(x.contiguous() for x in laid)


def _same(a, b):
    if isinstance(a, tuple | list):
        for x, y in zip(a, b, strict=True):
            _same(x, y)
        return
    assert a.shape == b.shape and a.dtype == b.dtype
    assert torch.allclose(a, b, atol=1e-6, rtol=1e-6), (a - b).abs().max()


layouts3 = st.tuples(*(st.sampled_from(LAYOUTS) for _ in range(3)))


@SETTINGS
@given(layouts=layouts3, loop_order=st.sampled_from(("kv_outer", "q_outer")), causal=st.booleans(),
       h_kv=st.sampled_from((1, 2, 4)), seed=st.integers(0, 50))
def test_the_forward_and_naive_attention_take_any_layout(layouts, loop_order, causal, h_kv, seed):
    (q, k, v), contiguous = _inputs((2, 4, 24, 8), (2, h_kv, 24, 8), layouts, seed)
    for kwargs in ({"causal": causal}, {"mask_mod": document([10, 14])}):
        _same(flash_attention_forward(q, k, v, 8, loop_order=loop_order, return_lse=True, **kwargs),
              flash_attention_forward(*contiguous, 8, loop_order=loop_order, return_lse=True, **kwargs))
    _same(naive_attention(q, k, v, causal=causal), naive_attention(*contiguous, causal=causal))


@SETTINGS
@given(layouts=layouts3, dO_layout=st.sampled_from(LAYOUTS), h_kv=st.sampled_from((1, 2)), seed=st.integers(0, 50))
def test_the_backward_and_autograd_take_any_layout(layouts, dO_layout, h_kv, seed):
    (q, k, v), contiguous = _inputs((1, 2, 20, 8), (1, h_kv, 20, 8), layouts, seed)
    out, L = flash_attention_forward(q, k, v, 8, causal=True, return_lse=True)
    dO = lay_out(torch.randn(out.shape, generator=torch.Generator().manual_seed(seed)), dO_layout, seed)
    _same(flash_attention_backward(dO, q, k, v, lay_out(out, "bnhd", 0), L, 8, causal=True),
          flash_attention_backward(dO.contiguous(), *contiguous, out, L, 8, causal=True))

    def grads(xs):
        xs = [x.detach().requires_grad_() for x in xs]  # a leaf keeps its layout
        o = flash_attention(*xs, block_size=8, causal=True)
        o.backward(dO)
        return (o, *[x.grad for x in xs])

    _same(grads((q, k, v)), grads(contiguous))


@SETTINGS
@given(layouts=layouts3, n_q=st.sampled_from((1, 3)), groups=st.sampled_from(((4, 2), (4, 1), (2, 2))),
       splits=st.sampled_from((1, 2, 5)), causal=st.booleans(), seed=st.integers(0, 50))
def test_decode_takes_any_layout_of_q_and_of_a_contiguous_cache(layouts, n_q, groups, splits, causal, seed):
    """The original failure: q of a model's (B, N, H, d) transposed, GQA, N_q > 1 (".view" on q)."""
    h, h_kv = groups
    (q, k, v), contiguous = _inputs((2, h, n_q, 8), (2, h_kv, 40, 8), layouts, seed)
    lens = torch.tensor([40, 23])
    kw = {"cache_seqlens": lens, "num_splits": splits, "block_k": 8, "causal": causal, "return_lse": True}
    _same(flash_decode(q, k, v, **kw), flash_decode(*contiguous, **kw))
    kw.pop("return_lse")
    _same(decode_partials(q, k, v, plain=True, **kw), decode_partials(*contiguous, plain=True, **kw))


@SETTINGS
@given(q_layout=st.sampled_from(LAYOUTS), pool_layout=st.sampled_from(("contiguous", "transposed", "sliced")),
       splits=st.sampled_from((1, 3)), seed=st.integers(0, 50))
def test_decode_takes_any_layout_of_a_paged_pool(q_layout, pool_layout, splits, seed):
    g = torch.Generator().manual_seed(seed)
    q = lay_out(torch.randn(2, 4, 2, 8, generator=g), q_layout, seed)
    pools = [torch.randn(10, 2, 8, 8, generator=g) for _ in range(2)]  # (num_pages, H_kv, page, d)
    if pool_layout == "transposed":  # stored (H_kv, num_pages, page, d)
        pools = [p.transpose(0, 1).contiguous().transpose(0, 1) for p in pools]
    elif pool_layout == "sliced":  # every other page of a larger pool
        pools = [torch.stack((p, torch.randn(p.shape, generator=g)), 1).flatten(0, 1)[::2] for p in pools]
    table = torch.tensor([[3, 1, 7, 0], [5, 2, 9, 4]])
    kw = {"cache_seqlens": torch.tensor([30, 17]), "block_table": table, "num_splits": splits, "causal": True}
    _same(flash_decode(q, *pools, **kw), flash_decode(q.contiguous(), *(p.contiguous() for p in pools), **kw))


@SETTINGS
@given(layouts=layouts3, seed=st.integers(0, 50))
def test_fp8_attention_takes_any_layout(layouts, seed):
    (q, k, v), contiguous = _inputs((1, 2, 32, 16), (1, 2, 32, 16), layouts, seed)
    _same(fp8_attention(q, k, v, block_size=16), fp8_attention(*contiguous, block_size=16))


def test_ring_attention_takes_any_layout_on_a_one_rank_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        for layouts in (("bnhd", "sliced", "expanded"), ("sliced", "bnhd", "bnhd")):
            (q, k, v), contiguous = _inputs((1, 4, 16, 8), (1, 2, 16, 8), layouts, 0)
            _same(ring_attention(q, k, v, causal=True, block_size=4, return_lse=True),
                  ring_attention(*contiguous, causal=True, block_size=4, return_lse=True))
    finally:
        dist.destroy_process_group()
