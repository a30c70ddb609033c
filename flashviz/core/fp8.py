"""FlashAttention-3's FP8 forward, emulated exactly on any device: per-block quantisation of Q, K and V, the optional
Hadamard rotation (incoherent processing), and P~ rounded to FP8 before P~ V.

References:
    FlashAttention-3 (Shah et al., 2024), Section 3.3 "Low-precision with FP8": Q, K, V are quantised to FP8 e4m3
        per block (one scale per block of rows) and, with incoherent processing, first multiplied by a random
        orthogonal matrix M (a Hadamard matrix times random +-1 signs), so (Q M)(K M)^T = Q K^T exactly while an
        outlier feature is spread over all d channels. Its kernel computes P~ in fp32, adds its row sum to l in
        fp32, and converts P~ to FP8 with an exponent offset of 8 (P~ 2^8 in [0, 256], far from e4m3's
        subnormals; hopper/softmax.h, Max_offset), which the final division by l cancels.
    Quantisation: x_q = round_fp8(x / s), s = amax(|x|) / fp8_max per block, saturating at fp8_max (e4m3: 448, e5m2:
        57344), as NVIDIA's conversions with satfinite do; the matmuls run on x_q s (dequantised) in fp32, as an FP8
        tensor core multiplies FP8 operands exactly and accumulates in fp32.

Legend: B batch, H query heads, H_kv K/V heads (dividing H), N_q / N_k query / key lengths, d head dimension, Bq the
quantisation block (block_size rows along N, per (b, h)), Bc the K/V tile of the softmax loop (also block_size).
Every value here is computed exactly as the GPU would (rounding is the same arithmetic everywhere); only speed
differs. The online softmax is flashviz.core.softmax's, in base 2 as FA3's kernel runs it. These names are also
importable from flashviz.numerics, beside the error measures and the outlier inputs.
"""

from __future__ import annotations

import math

import torch

from flashviz.core.softmax import LOG2_E, NEG_INF, online_softmax_step
from flashviz.core.softmax_variants import round_p
from flashviz.core.validate import validate_block, validate_causal, validate_qkv, validate_scale
from flashviz.vocab import E4M3, FP8_FORMATS, PRECISION_DTYPES

P_OFFSET_LOG2 = 8  # FA3's exponent offset for P in FP8: P~ 2^8 <= 256 < 448 (e4m3's max); cancels in O = acc / l


def fp8_dtype(fmt: object) -> torch.dtype:
    """The torch dtype of an FP8 format name: "e4m3" (torch.float8_e4m3fn) or "e5m2" (torch.float8_e5m2).

    Example:
        >>> fp8_dtype("e4m3")
        torch.float8_e4m3fn
    """
    if fmt not in FP8_FORMATS:
        raise ValueError(f"fmt must be one of {FP8_FORMATS} (e4m3: 3 mantissa bits, max 448, what FlashAttention-3 "
                         f"uses; e5m2: 2 mantissa bits, max 57344), got {fmt!r}.")
    return getattr(torch, PRECISION_DTYPES[fmt])


def quantize_blocks(x: torch.Tensor, fmt: str = E4M3, block_size: int = 128) -> torch.Tensor:
    """x rounded to FP8 per block of block_size rows along N (one scale per block and (b, h)), then dequantised.

    Args:
        x: (B, H, N, d) any floating dtype.
        fmt: "e4m3" or "e5m2".
        block_size: rows per quantisation block (>= 1); >= N gives one scale per (b, h).
    Returns:
        (B, H, N, d) float32: round_fp8(x / s) s with s = amax(|x_block|) / fp8_max (1 for an all-zero block).

    Example:
        >>> x = torch.tensor([0.3, 1.0, 30.0, 100.0]).view(1, 1, 4, 1)  # (B, H, N, d) = (1, 1, 4, 1)
        >>> [round(y, 4) for y in quantize_blocks(x, "e4m3", block_size=2).flatten().tolist()]
        [0.2857, 1.0, 28.5714, 100.0]

        Each block's largest value is exact (it maps to 448); 0.3 -> 0.3 x 448 = 134.4 rounds to 128 (3 mantissa
        bits: 16 apart between 128 and 256), i.e. 128 / 448 = 0.2857.
    """
    dt = fp8_dtype(fmt)
    block_size = validate_block("block_size", block_size)
    B, H, N, d = x.shape
    top = torch.finfo(dt).max
    pad = -N % block_size  # the last block may be short: pad with zeros, which change no amax
    xb = torch.nn.functional.pad(x.float(), (0, 0, 0, pad)).view(B, H, -1, block_size, d)  # (B, H, N/Bq, Bq, d)
    amax = xb.abs().amax(dim=(-2, -1), keepdim=True)  # (B, H, N/Bq, 1, 1)
    s = torch.where(amax > 0, amax / top, torch.ones_like(amax))  # the block's scale
    q8 = (xb / s).clamp(-top, top).to(dt)  # saturating round to FP8
    return (q8.float() * s).view(B, H, -1, d)[:, :, :N]  # (B, H, N, d) dequantised


def hadamard_matrix(d: int) -> torch.Tensor:
    """The normalised Hadamard matrix H_d / sqrt(d) (Sylvester's construction), float64; orthogonal: H H^T = I.

    Args:
        d: a power of two (>= 1).
    Returns:
        (d, d) float64 with entries +-1/sqrt(d).

    Example:
        >>> (hadamard_matrix(2) * 2 ** 0.5).tolist()
        [[1.0, 1.0], [1.0, -1.0]]
    """
    if isinstance(d, bool) or not isinstance(d, int) or d < 1 or d & (d - 1):
        low = 1 << max(0, int(d).bit_length() - 1) if isinstance(d, int) and d >= 1 else 1
        raise ValueError(f"a Hadamard matrix needs d a power of two (1, 2, 4, ..., 64, 128, 256), got d={d!r}. "
                         f"Use hadamard=False, or pad the head dimension with zeros to {low * 2} (zero features "
                         f"change no score).")
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < d:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)  # [[H, H], [H, -H]]
    return h / math.sqrt(d)


def random_rotation(d: int, seed: int = 0) -> torch.Tensor:
    """FA3's incoherent-processing matrix M = diag(s) H_d / sqrt(d), s random +-1 (seeded): orthogonal, float64.

    Example:
        >>> M = random_rotation(8, seed=1)
        >>> torch.allclose(M @ M.T, torch.eye(8, dtype=torch.float64))
        True
    """
    h = hadamard_matrix(d)
    g = torch.Generator().manual_seed(seed)
    signs = torch.randint(0, 2, (d, 1), generator=g, dtype=torch.float64) * 2 - 1  # (d, 1) +-1
    return signs * h  # (d, d) row r of H times s_r


def fp8_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, fmt: str = E4M3, block_size: int = 128,
                  hadamard: bool = False, causal: bool = False, scale: float | None = None,
                  seed: int = 0) -> torch.Tensor:
    """FlashAttention-3's FP8 forward, emulated: block-quantised Q, K, V, optional incoherent processing, P in FP8.

    Steps (FA3, Section 3.3): with hadamard, Q <- Q M and K <- K M (M = random_rotation(d, seed), so Q K^T is
    unchanged); Q, K, V quantised per block of block_size rows (quantize_blocks); S = scale Q K^T in fp32 on the
    dequantised values; then, K/V block by K/V block of block_size keys, the online softmax in fp32 and base 2
    (flashviz.core.softmax): P~ = 2^(S log2(e) - m) is added to l unrounded, and P~ 2^8 (FA3's offset) is rounded to
    FP8 (saturating) before P~ V; O = acc / (l 2^8).

    Args:
        q: (B, H, N_q, d).  k, v: (B, H_kv, N_k, d), H_kv dividing H (GQA: query head h reads K/V head h // (H/H_kv)).
        fmt: "e4m3" (FA3's format) or "e5m2".
        block_size: quantisation block of Q, K, V rows, and the K/V tile of the softmax loop (>= 1).
        hadamard: incoherent processing; needs d a power of two (else ValueError: pad d or turn it off).
        causal: top-left causal mask (query i sees keys j <= i), as SDPA's is_causal.
        scale: softmax scale, default 1/sqrt(d).
        seed: the random signs of M.
    Returns:
        O (B, H, N_q, d) float32; rows that see no key are zeros.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> q, k, v = (torch.randn(1, 2, 64, 32, generator=g) for _ in range(3))
        >>> ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double())
        >>> err = (fp8_attention(q, k, v, hadamard=True) - ref).abs().max().item()
        >>> 1e-3 < err < 0.1  # FP8 keeps ~2 significant digits
        True
    """
    validate_qkv(q, k, v)
    dt = fp8_dtype(fmt)
    block_size = validate_block("block_size", block_size)
    causal = validate_causal(causal)
    if not isinstance(hadamard, bool):
        raise TypeError(f"hadamard must be True or False, got {hadamard!r}.")
    d = q.shape[-1]
    scale = validate_scale(scale, d, torch.float32)
    if hadamard:
        M = random_rotation(d, seed).to(q.device)  # (d, d) float64, made on the CPU (its seeded signs are the same
        #                                            on every device); raises for d not a power of two
        q, k = (x.double() @ M for x in (q, k))  # (B, H, N, d): the same Q K^T, outliers spread over d channels
    Qd, Kd, Vd = (quantize_blocks(x, fmt, block_size) for x in (q, k, v))  # fp32, dequantised
    G = q.shape[1] // k.shape[1] if k.shape[1] else 1
    Kd, Vd = Kd.repeat_interleave(G, dim=1), Vd.repeat_interleave(G, dim=1)  # (B, H, N_k, d) per query head
    return _fp8_softmax_pv(Qd, Kd, Vd, scale * LOG2_E, dt, block_size, causal)


def _fp8_softmax_pv(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, scale_log2: float, dt: torch.dtype,
                    block: int, causal: bool) -> torch.Tensor:
    """FA3's loop over K/V blocks in fp32 and base 2, with P~ 2^8 rounded to dt before P~ V. Q: (B, H, N_q, d);
    K, V: (B, H, N_k, d), dequantised fp32; scale_log2 = scale log2(e). Returns O (B, H, N_q, d) float32."""
    n_q, n_k = Q.shape[2], K.shape[2]
    f32 = dict(dtype=torch.float32, device=Q.device)
    m = torch.full(Q.shape[:3], NEG_INF, **f32)  # (B, H, N_q) running max, log2 units
    l = torch.zeros(Q.shape[:3], **f32)  # (B, H, N_q) running sum of P~, unrounded
    acc = torch.zeros(Q.shape, **f32)  # (B, H, N_q, d) running sum of round(P~ 2^8) V
    i = torch.arange(n_q, device=Q.device)[:, None]  # (N_q, 1) query index
    for j0 in range(0, n_k, block):
        # scaled after the FP8 matmul, as FA3's softmax does (not through a pre-scaled Q, which the other kernels
        # use): one rounding fewer before an FP8 cast, where a flipped rounding moves P~ by a whole FP8 step
        S = torch.matmul(Q, K[:, :, j0:j0 + block].transpose(-1, -2)).mul_(scale_log2)  # (B, H, N_q, Bc) log2 units
        if causal:
            j = torch.arange(j0, min(j0 + block, n_k), device=Q.device)[None, :]  # (1, Bc) key index
            S = S.masked_fill(j > i, NEG_INF)  # top-left
        P, m, l, alpha = online_softmax_step(S, m, l, partial=causal)  # l sums the unrounded P~, as FA3
        P8 = round_p(P * 2.0 ** P_OFFSET_LOG2, dt)  # (B, H, N_q, Bc) in [0, 256]: what the FP8 tensor core reads
        acc = alpha[..., None] * acc + P8 @ V[:, :, j0:j0 + block]  # (B, H, N_q, d)
    l_offset = l * 2.0 ** P_OFFSET_LOG2  # (B, H, N_q) the offset cancels in O = acc / l
    return acc / l_offset.clamp(min=torch.finfo(torch.float32).tiny)[..., None]  # rows that saw nothing: 0 / tiny
