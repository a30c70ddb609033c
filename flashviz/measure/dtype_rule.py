"""flash-attn's dtype rule, applied to every kernel: in bf16 or fp16, a kernel's error against a float64 reference is at
most RULE_FACTOR times PyTorch SDPA's own error on the same inputs.

flash-attn's tests hold each kernel to the library the user would otherwise call: (kernel in bf16 - reference in
fp32) against (reference in bf16 - reference in fp32), with a factor of 2. Here the reference is float64 (exact to
the last bit that matters for fp32 too) and the "reference in bf16" is SDPA, so both numbers are plain errors
against float64 on the same rounded inputs. A kernel that rounds its scores S = Q K^T to bf16 lands 7 to 16x above
SDPA at a few thousand keys; one that keeps them in fp32 (and rounds only P before P V, as a tensor core takes it)
lands within 2x.

`error_table` runs every path this library has (the forward in both loop orders, causal, a mask_mod and a score_mod;
the backward's three gradients; Flash-Decoding's plain loop, its tuned layouts, a paged pool read in place or
gathered, several split counts, GQA) and returns one `RuleRow` per path. The ring's rows come from its own processes
(tests/test_ring_processes.py, scripts/gpu_check.py); `rule_row` makes them alike.

Legend: B batch, H_q / H_kv query / key-value heads, N_q / N_k query rows / keys, d head dimension.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from flashviz.vocab import KV_OUTER, Q_OUTER

RULE_FACTOR = 2.0  # flash-attn: "output error at most 2x the reference implementation's (in the same dtype)"


@dataclass(frozen=True)
class RuleRow:
    """One kernel path in one dtype against SDPA's error on the same inputs."""

    kernel: str  # "forward", "backward", "decode", "ring"
    dtype: str  # "bfloat16", "float16"
    path: str  # which path of the kernel: "q_outer causal", "paged pool, 4 splits", ...
    error: float  # the kernel's max |out - ref|, ref in float64
    sdpa_error: float  # SDPA's max |out - ref| on the same inputs, in the same dtype

    @property
    def ratio(self) -> float:
        """error / sdpa_error (inf when SDPA is exact and the kernel is not; 0 / 0 -> 1)."""
        if self.sdpa_error > 0:
            return self.error / self.sdpa_error
        return 1.0 if self.error == 0 else float("inf")

    @property
    def passes(self) -> bool:
        """flash-attn's rule: error <= RULE_FACTOR x SDPA's error (an exact SDPA allows only an exact kernel)."""
        return self.error <= RULE_FACTOR * self.sdpa_error


def max_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref|, computed in float64 (0 for empty tensors)."""
    diff = (out.detach().double() - ref.detach().double()).abs()
    return float(diff.max()) if diff.numel() else 0.0


def rule_row(kernel: str, path: str, out: torch.Tensor, sdpa_out: torch.Tensor, ref: torch.Tensor) -> RuleRow:
    """The row of one path: the kernel's out and SDPA's out (both in the inputs' dtype) against the float64 ref."""
    name = str(out.dtype).removeprefix("torch.")
    return RuleRow(kernel, name, path, max_error(out, ref), max_error(sdpa_out, ref))


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
         attn_mask: torch.Tensor | None = None, scale: float | None = None) -> torch.Tensor:
    """PyTorch SDPA in the inputs' dtype, K/V heads shared by groups of query heads (GQA) when H_kv < H_q."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=causal, scale=scale,
                                          enable_gqa=q.shape[1] != k.shape[1])


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **options) -> torch.Tensor:
    """SDPA's formula in float64 on the same (rounded) inputs: the exact answer to compare both against."""
    mask = options.pop("attn_mask", None)
    if mask is not None and mask.is_floating_point():  # an additive bias, in float64 too; a bool mask as it is
        mask = mask.double()
    return sdpa(q.double(), k.double(), v.double(), attn_mask=mask, **options)


def _inputs(b: int, h: int, h_kv: int, n_q: int, n_k: int, d: int, dtype: torch.dtype, device, seed: int):
    """q, k, v with a trained model's outlier channels (logits' std ~4: peaked rows, where rounding S shows)."""
    from flashviz.numerics import make_inputs

    q, k, v = make_inputs(b, h, n_q, n_k, d, dtype=dtype, outliers=True, seed=seed, h_kv=h_kv)
    return q.to(device), k.to(device), v.to(device)


def forward_rows(dtype: torch.dtype, *, n: int = 256, d: int = 64, heads: tuple[int, int] = (4, 2), block: int = 64,
                 device: torch.device | str = "cpu", seed: int = 0) -> list[RuleRow]:
    """flash_attention_forward in both loop orders: plain, causal, a document mask_mod and an ALiBi score_mod
    (SDPA takes ALiBi as an additive float mask, so it is held to SDPA too; its slopes are powers of 2, so at
    n <= 256 every bias is exact in bf16 and fp16 and SDPA's mask is not rounded)."""
    from flashviz.core.flash import flash_attention_forward
    from flashviz.masks import alibi, document

    q, k, v = _inputs(1, heads[0], heads[1], n, n, d, dtype, device, seed)
    ref, ref_causal = reference(q, k, v), reference(q, k, v, causal=True)
    lengths = [n // 4, n // 2, n - n // 4 - n // 2]
    doc = document(lengths)
    idx = torch.arange(n, device=q.device)
    doc_mask = doc(0, 0, idx[:, None], idx[None, :])  # (N, N) bool, True = visible
    slopes = alibi(heads[0])
    bias = torch.stack([slopes(torch.zeros((), dtype=torch.float64, device=q.device), 0, torch.tensor(h),
                               idx[:, None], idx[None, :]) for h in range(heads[0])])[None]  # (1, H, N, N) float64
    cases = (
        ("", {}, ref, sdpa(q, k, v)),
        ("causal", {"causal": True}, ref_causal, sdpa(q, k, v, causal=True)),
        ("document mask_mod", {"mask_mod": doc}, reference(q, k, v, attn_mask=doc_mask),
         sdpa(q, k, v, attn_mask=doc_mask)),
        ("alibi score_mod", {"score_mod": slopes}, reference(q, k, v, attn_mask=bias),
         sdpa(q, k, v, attn_mask=bias.to(dtype))),
    )
    rows = []
    for order in (KV_OUTER, Q_OUTER):
        for name, options, want, theirs in cases:
            out = flash_attention_forward(q, k, v, block, loop_order=order, **options)
            rows.append(rule_row("forward", f"{order} {name}".strip(), out, theirs, want))
    return rows


def backward_rows(dtype: torch.dtype, *, n: int = 256, d: int = 64, heads: tuple[int, int] = (4, 2), block: int = 64,
                  device: torch.device | str = "cpu", seed: int = 0) -> list[RuleRow]:
    """flash_attention's dQ, dK, dV (causal, GQA) against SDPA's backward in the same dtype."""
    from flashviz.core.backward import flash_attention

    q, k, v = _inputs(1, heads[0], heads[1], n, n, d, dtype, device, seed)
    dO = torch.randn(q.shape, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64).to(q)

    def grads(fn, *xs):
        xs = [x.detach().clone().requires_grad_() for x in xs]
        out = fn(*xs)
        out.backward(dO.to(out.dtype))
        return [x.grad for x in xs]

    want = grads(lambda a, b, c: reference(a, b, c, causal=True), q.double(), k.double(), v.double())
    ours = grads(lambda a, b, c: flash_attention(a, b, c, block_size=block, causal=True), q, k, v)
    theirs = grads(lambda a, b, c: sdpa(a, b, c, causal=True), q, k, v)
    return [rule_row("backward", f"causal {name}", o, t, w)
            for name, o, t, w in zip(("dQ", "dK", "dV"), ours, theirs, want, strict=True)]


def paged(cache: torch.Tensor, page: int, spare: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A (B, H_kv, N, d) cache as a (B * N / page + spare, H_kv, page, d) pool in shuffled page order (spare pages
    hold garbage) and its (B, N / page) block table."""
    B, H, N, d = cache.shape
    n_pages = B * N // page
    perm = torch.randperm(n_pages + spare, generator=torch.Generator().manual_seed(seed))[:n_pages]
    pool = torch.randn(n_pages + spare, H, page, d, generator=torch.Generator().manual_seed(seed + 1)).to(cache)
    pool[perm] = cache.view(B, H, N // page, page, d).transpose(1, 2).reshape(n_pages, H, page, d)
    return pool, perm.view(B, N // page).to(cache.device)


def decode_rows(dtype: torch.dtype, *, n_cache: int = 4096, d: int = 128, groups: tuple[tuple[int, int], ...] = (
                (8, 2), (4, 1)), splits: tuple[int, ...] = (1, 4, 16), page: int = 64, n_q: int = 1,
                device: torch.device | str = "cpu", seed: int = 0) -> list[RuleRow]:
    """flash_decode on a full cache: the tuned contiguous layout, the page pool read in place and pages gathered,
    each at several split counts, and the plain loop over splits; every GQA grouping in `groups`."""
    from flashviz.core.decode import decode_partials, flash_decode, merge_partials

    rows = []
    for h, h_kv in groups:
        q, k, v = _inputs(2, h, h_kv, n_q, n_cache, d, dtype, device, seed)
        want, theirs = reference(q, k, v), sdpa(q, k, v)
        pool = {"paged pool": (paged(k, page, 1, seed), paged(v, page, 1, seed)),
                "paged gather": (paged(k, page, 3 * n_cache // page, seed), paged(v, page, 3 * n_cache // page, seed))}
        for s in splits:
            out = flash_decode(q, k, v, num_splits=s)
            rows.append(rule_row("decode", f"GQA {h}/{h_kv} contiguous, {s} splits", out, theirs, want))
            outs, lses = decode_partials(q, k, v, num_splits=s, plain=True)
            plain = merge_partials(outs, lses)[0].to(dtype)
            rows.append(rule_row("decode", f"GQA {h}/{h_kv} plain, {s} splits", plain, theirs, want))
            for name, ((k_p, table), (v_p, _)) in pool.items():
                out = flash_decode(q, k_p, v_p, block_table=table, num_splits=s)
                rows.append(rule_row("decode", f"GQA {h}/{h_kv} {name}, {s} splits", out, theirs, want))
        out = flash_decode(q, k, v)  # the split heuristic's choice on this machine
        rows.append(rule_row("decode", f"GQA {h}/{h_kv} contiguous, heuristic splits", out, theirs, want))
    return rows


def error_table(dtype: torch.dtype, *, device: torch.device | str = "cpu", small: bool = False) -> list[RuleRow]:
    """Every row of the forward, the backward and the decode (the ring's come from its processes). small: sizes
    for a quick run (the report writer's check); otherwise the sizes of a real model's decode step."""
    if small:
        return (forward_rows(dtype, n=128, d=32, block=32, device=device)
                + backward_rows(dtype, n=64, d=32, block=32, device=device)
                + decode_rows(dtype, n_cache=512, d=64, splits=(1, 4), device=device))
    return forward_rows(dtype, device=device) + backward_rows(dtype, device=device) + decode_rows(dtype, device=device)


def table_md(rows: list[RuleRow]) -> str:
    """The rows as a markdown table: kernel, dtype, path, error, SDPA's error, ratio, within the rule."""
    lines = ["| kernel | dtype | path | error | SDPA's error | ratio | within 2x |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r.kernel} | {r.dtype} | {r.path} | {r.error:.3g} | {r.sdpa_error:.3g} | {r.ratio:.2f} | "
              f"{'yes' if r.passes else 'NO'} |" for r in rows]
    return "\n".join(lines)
