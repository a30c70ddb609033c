"""FA2's forward and backward as one Triton kernel, shaped like Triton's tutorial 06-fused-attention.

The forward is FA2's schedule (flashviz's q_outer loop order): one program per (Q block, batch x head), the Q block
loaded once, K/V blocks walked left to right with the online softmax in base 2 (m_i, l_i, acc,
qk_scale = sm_scale / ln 2), and the logsumexp L saved for the backward. `_attn_fwd_inner` walks one stage:

    STAGE 1  causal, off the diagonal band: K blocks 0 .. start_m * BLOCK_M, every score visible, no causal mask
    STAGE 2  causal, on the band: K blocks start_m * BLOCK_M .. (start_m + 1) * BLOCK_M, the causal mask applied
    STAGE 3  not causal: every K block 0 .. N, no causal mask

Any N: a block that runs past N reads zeros for its missing rows (a bounds mask on every load) and -inf-like scores
for its missing columns, and the loops stop at N, so the kernel visits exactly the tiles `tile_schedule` computes.
Causal is top-left (query i sees keys j <= i), as in every flashviz kernel.

The backward is FA2's Algorithm 2 by recomputation: `_attn_bwd_preprocess` computes D = rowsum(dO * O); `_attn_bwd`
runs one program per block index, which computes dK, dV of K block `pid` (`_attn_bwd_dkdv`, Q blocks walked) and dQ
of Q block `pid` (`_attn_bwd_dq`, K blocks walked), each in a masked band stage and an unmasked stage.

Where there is no CUDA, `flashviz.triton` sets TRITON_INTERPRET=1 before this module imports triton: `triton.jit`
then makes each kernel an interpreted function that numpy runs on the CPU, program after program; on CUDA it compiles.
fp32 on the CPU; on CUDA fp16, bf16 and fp32 (tl.dot in TF32 there).

Legend: B batch, H heads, N sequence length, d = HEAD_DIM head dimension; BLOCK_M = Br query rows per program,
BLOCK_N = Bc keys per inner step; tensors (B, H, N, d) contiguous, so one head is N * d consecutive elements.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2_E = 1.44269504  # 1 / ln(2): exp(x) = exp2(x * LOG2_E)
HEAD_DIMS = (16, 32, 64, 128)  # d the kernel takes: tl.arange needs a power of two


@triton.jit
def _attn_fwd_inner(acc, l_i, m_i, q,  #
                    k_head, v_head, start_m, qk_scale, N_CTX,  #
                    BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,  #
                    STAGE: tl.constexpr, offs_m, offs_n, offs_d):
    # range of K/V blocks this stage walks
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:
        lo, hi = start_m * BLOCK_M, tl.minimum((start_m + 1) * BLOCK_M, N_CTX)
        lo = tl.multiple_of(lo, BLOCK_M)
    else:
        lo, hi = 0, N_CTX
    # loop over K, V and update the accumulator
    for start_n in tl.range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n  # (BLOCK_N,) key positions of this block
        col_ok = cols < N_CTX  # bounds mask: the last block may run past N
        k = tl.load(k_head + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)  # (Bc, d)
        # -- compute qk ----
        qk = tl.dot(q, tl.trans(k))  # (Br, d) x (d, Bc) -> (Br, Bc): S_ij
        keep = col_ok[None, :]
        if STAGE == 2:
            keep = keep & (offs_m[:, None] >= cols[None, :])  # causal mask on the band
        qk = qk * qk_scale + tl.where(keep, 0.0, -1.0e6)  # base-2 scores; hidden ones far below every other
        m_ij = tl.maximum(m_i, tl.max(qk, 1))  # (Br,) running max
        qk = qk - m_ij[:, None]
        p = tl.math.exp2(qk)  # (Br, Bc): P_ij, unnormalised
        l_ij = tl.sum(p, 1)
        # -- update m_i and l_i
        alpha = tl.math.exp2(m_i - m_ij)  # (Br,) rescale of what came before
        l_i = l_i * alpha + l_ij
        # -- update output accumulator --
        acc = acc * alpha[:, None]
        v = tl.load(v_head + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)  # (Bc, d)
        acc = tl.dot(p.to(v.dtype), v, acc)  # (Br, Bc) x (Bc, d) -> (Br, d): O_i += P_ij V_j
        # update m_i
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, sm_scale, M, Out, N_CTX,  #
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr):
    start_m = tl.program_id(0)  # which Q block
    off_hz = tl.program_id(1)  # which (batch, head)
    head = off_hz.to(tl.int64) * N_CTX * HEAD_DIM  # first element of this head in Q, K, V and Out
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (Br,) query positions
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX  # bounds mask: the last Q block may run past N
    # initialize offsets, m_i, l_i, acc
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # 1/ln(2): the softmax runs in base 2
    # load q: it stays on chip for the whole loop
    q = tl.load(Q + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)  # (Br, d)
    # stage 1 (causal) or 3 (not causal): the blocks off the band, no causal mask
    if STAGE & 1:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, K + head, V + head, start_m, qk_scale, N_CTX,  #
                                        BLOCK_M, HEAD_DIM, BLOCK_N, 4 - STAGE, offs_m, offs_n, offs_d)
    # stage 2 (causal): the blocks on the band, with the causal mask
    if STAGE & 2:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, K + head, V + head, start_m, qk_scale, N_CTX,  #
                                        BLOCK_M, HEAD_DIM, BLOCK_N, 2, offs_m, offs_n, offs_d)
    # epilogue
    m_i += tl.math.log2(l_i)  # L_i in base 2: m_i + log2(l_i)
    acc = acc / l_i[:, None]  # O_i = acc / l_i
    tl.store(M + off_hz * N_CTX + offs_m, m_i, mask=row_ok)
    tl.store(Out + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(Out.type.element_ty),
             mask=row_ok[:, None])


@triton.jit
def _attn_bwd_preprocess(O, DO, Delta, N_CTX, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr):
    off_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    off_hz = tl.program_id(1)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = off_m < N_CTX
    head = off_hz.to(tl.int64) * N_CTX * HEAD_DIM
    o = tl.load(O + head + off_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + head + off_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)  # (Br,): D_i = rowsum(dO_i * O_i)
    tl.store(Delta + off_hz * N_CTX + off_m, delta, mask=row_ok)


@triton.jit
def _attn_bwd_dkdv(dk, dv, Q, k, v, DO, M, D,  #
                   qk_scale, N_CTX, start_n, lo, hi,  #
                   BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, HEAD_DIM: tl.constexpr, MASK: tl.constexpr):
    # dK_j and dV_j of one K block (BLOCK_N1 keys on chip), walking Q blocks of BLOCK_M1 rows from lo to hi
    offs_n = start_n + tl.arange(0, BLOCK_N1)
    offs_d = tl.arange(0, HEAD_DIM)
    for start_m in tl.range(lo, hi, BLOCK_M1):
        offs_m = start_m + tl.arange(0, BLOCK_M1)
        row_ok = offs_m < N_CTX
        qT = tl.load(Q + offs_m[None, :] * HEAD_DIM + offs_d[:, None], mask=row_ok[None, :], other=0.0)  # (d, Bm)
        m = tl.load(M + offs_m, mask=row_ok, other=0.0)  # (Bm,) L in base 2
        qkT = tl.dot(k, qT) * qk_scale  # (Bn, d) x (d, Bm) -> (Bn, Bm): S_ij^T in base 2
        pT = tl.math.exp2(qkT - m[None, :])  # P_ij^T, recomputed from L
        keep = row_ok[None, :] & (offs_n[:, None] < N_CTX)
        if MASK:
            keep = keep & (offs_m[None, :] >= offs_n[:, None])  # causal mask on the band
        pT = tl.where(keep, pT, 0.0)
        do = tl.load(DO + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)  # (Bm, d)
        # compute dV
        dv += tl.dot(pT.to(do.dtype), do)  # (Bn, Bm) x (Bm, d): dV_j += P_ij^T dO_i
        Di = tl.load(D + offs_m, mask=row_ok, other=0.0)  # (Bm,)
        # compute dP and dS
        dpT = tl.dot(v, tl.trans(do))  # (Bn, d) x (d, Bm): dP_ij^T = V_j dO_i^T
        dsT = pT * (dpT - Di[None, :])  # dS_ij^T = P_ij^T * (dP_ij^T - D_i)
        dk += tl.dot(dsT.to(qT.dtype), tl.trans(qT))  # (Bn, Bm) x (Bm, d): dK_j += dS_ij^T Q_i (scale: later)
    return dk, dv


@triton.jit
def _attn_bwd_dq(dq, q, K, V, do, m, Di,  #
                 qk_scale, N_CTX, start_m, lo, hi,  #
                 BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr, HEAD_DIM: tl.constexpr, MASK: tl.constexpr):
    # dQ_i of one Q block (BLOCK_M2 rows on chip), walking K/V blocks of BLOCK_N2 keys from lo to hi
    offs_m = start_m + tl.arange(0, BLOCK_M2)
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in tl.range(lo, hi, BLOCK_N2):
        offs_n = start_n + tl.arange(0, BLOCK_N2)
        col_ok = offs_n < N_CTX
        kT = tl.load(K + offs_n[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0)  # (d, Bn)
        vT = tl.load(V + offs_n[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0)  # (d, Bn)
        qk = tl.dot(q, kT) * qk_scale  # (Bm, d) x (d, Bn) -> (Bm, Bn): S_ij in base 2
        p = tl.math.exp2(qk - m[:, None])  # P_ij, recomputed from L
        keep = col_ok[None, :]
        if MASK:
            keep = keep & (offs_m[:, None] >= offs_n[None, :])  # causal mask on the band
        p = tl.where(keep, p, 0.0)
        # compute dP and dS
        dp = tl.dot(do, vT)  # (Bm, d) x (d, Bn): dP_ij = dO_i V_j^T
        ds = p * (dp - Di[:, None])  # dS_ij = P_ij * (dP_ij - D_i)
        dq += tl.dot(ds.to(kT.dtype), tl.trans(kT))  # (Bm, Bn) x (Bn, d): dQ_i += dS_ij K_j (scale: later)
    return dq


@triton.jit
def _attn_bwd(Q, K, V, sm_scale, DO, DQ, DK, DV, M, D, N_CTX,  #
              BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr,  #
              HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr):
    pid = tl.program_id(0)  # K block pid for dK, dV; Q block pid for dQ (BLOCK_N1 == BLOCK_M2)
    off_hz = tl.program_id(1)
    head = off_hz.to(tl.int64) * N_CTX * HEAD_DIM
    Q += head
    K += head
    V += head
    DO += head
    DQ += head
    DK += head
    DV += head
    M += off_hz * N_CTX
    D += off_hz * N_CTX
    qk_scale = sm_scale * 1.44269504  # 1/ln(2)
    offs_d = tl.arange(0, HEAD_DIM)

    # -- dK, dV of K block pid: load K_j, V_j once; they stay on chip
    start_n = pid * BLOCK_N1
    offs_n = start_n + tl.arange(0, BLOCK_N1)
    col_ok = offs_n < N_CTX
    k = tl.load(K + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)  # (Bn1, d)
    v = tl.load(V + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
    dk = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    lo = 0
    if CAUSAL:  # the Q blocks on the band (masked), then every one below it; none above sees these keys
        lo = tl.minimum(start_n + BLOCK_N1, N_CTX)
        dk, dv = _attn_bwd_dkdv(dk, dv, Q, k, v, DO, M, D, qk_scale, N_CTX, start_n, start_n, lo,  #
                                BLOCK_M1, BLOCK_N1, HEAD_DIM, True)
    dk, dv = _attn_bwd_dkdv(dk, dv, Q, k, v, DO, M, D, qk_scale, N_CTX, start_n, lo, N_CTX,  #
                            BLOCK_M1, BLOCK_N1, HEAD_DIM, False)
    tl.store(DV + offs_n[:, None] * HEAD_DIM + offs_d[None, :], dv.to(DV.type.element_ty), mask=col_ok[:, None])
    dk *= sm_scale  # dS is the gradient of the scaled scores: dK = scale dS^T Q
    tl.store(DK + offs_n[:, None] * HEAD_DIM + offs_d[None, :], dk.to(DK.type.element_ty), mask=col_ok[:, None])

    # -- dQ of Q block pid: load Q_i, dO_i, L_i, D_i once
    start_m = pid * BLOCK_M2
    offs_m = start_m + tl.arange(0, BLOCK_M2)
    row_ok = offs_m < N_CTX
    q = tl.load(Q + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)  # (Bm2, d)
    do = tl.load(DO + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    m = tl.load(M + offs_m, mask=row_ok, other=0.0)
    Di = tl.load(D + offs_m, mask=row_ok, other=0.0)
    dq = tl.zeros([BLOCK_M2, HEAD_DIM], dtype=tl.float32)
    hi = N_CTX
    if CAUSAL:  # the K blocks off the band (unmasked), then the band (masked); none right of it is seen
        hi = start_m
        dq = _attn_bwd_dq(dq, q, K, V, do, m, Di, qk_scale, N_CTX, start_m, start_m,
                          tl.minimum(start_m + BLOCK_M2, N_CTX), BLOCK_M2, BLOCK_N2, HEAD_DIM, True)
    dq = _attn_bwd_dq(dq, q, K, V, do, m, Di, qk_scale, N_CTX, start_m, 0, hi,  #
                      BLOCK_M2, BLOCK_N2, HEAD_DIM, False)
    dq *= sm_scale
    tl.store(DQ + offs_m[:, None] * HEAD_DIM + offs_d[None, :], dq.to(DQ.type.element_ty), mask=row_ok[:, None])


def check_args(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_m: int, block_n: int) -> None:
    """Say what the kernel takes, and how to fix a call it cannot run."""
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(f"q, k and v must be (B, H, N, d) of one shape; got {tuple(q.shape)}, {tuple(k.shape)} and "
                         f"{tuple(v.shape)}. The Triton kernel has no GQA and no cross-attention: repeat K/V heads "
                         "(repeat_interleave) or use flashviz.flash_attention.")
    if q.shape[-1] not in HEAD_DIMS:
        raise ValueError(f"head dimension d = {q.shape[-1]} is not one of {HEAD_DIMS}: tl.arange needs a power of "
                         "two from 16 on. Pad d with zeros to the next one, or use flashviz.flash_attention.")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"q, k, v must share one of float32, float16, bfloat16; got {q.dtype}, {k.dtype}, {v.dtype}.")
    if q.shape[2] < 1:
        raise ValueError("N must be at least 1.")
    for name, b in (("block_m", block_m), ("block_n", block_n)):
        if b < 16 or b & (b - 1):
            raise ValueError(f"{name} = {b} must be a power of two of at least 16 (tl.arange and tl.dot's minimum).")
    if block_m % block_n:
        raise ValueError(f"block_n = {block_n} must divide block_m = {block_m}: the diagonal band of a Q block is "
                         "then whole K blocks. Try block_n = 32 with block_m = 64.")


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float, block_m: int,
            block_n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch `_attn_fwd`: O (B, H, N, d) in q's dtype and L (B, H, N) fp32, the logsumexp in base 2."""
    B, H, N, d = q.shape
    o = torch.empty_like(q)
    lse = torch.empty((B, H, N), device=q.device, dtype=torch.float32)
    grid = (triton.cdiv(N, block_m), B * H, 1)  # one program per (Q block, batch x head)
    _attn_fwd[grid](q, k, v, sm_scale, lse, o, N, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n,
                    STAGE=3 if causal else 1, num_warps=4, num_stages=2)
    return o, lse


class _Attention(torch.autograd.Function):
    """The kernel's forward and backward as one autograd node."""

    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale, block_m, block_n):
        q, k, v = (t.contiguous() for t in (q, k, v))
        o, lse = forward(q, k, v, causal, sm_scale, block_m, block_n)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale, ctx.block_m, ctx.block_n = causal, sm_scale, block_m, block_n
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        do = do.contiguous()
        B, H, N, d = q.shape
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        delta = torch.empty_like(lse)
        blocks = triton.cdiv(N, ctx.block_m)
        _attn_bwd_preprocess[(blocks, B * H)](o, do, delta, N, BLOCK_M=ctx.block_m, HEAD_DIM=d)
        # dK, dV: K blocks of block_m keys, Q walked block_n rows at a time; dQ: Q blocks of block_m rows, K walked
        # block_n keys at a time (the tutorial's BLOCK_M1 < BLOCK_N1 and BLOCK_M2 > BLOCK_N2)
        _attn_bwd[(blocks, B * H)](q, k, v, ctx.sm_scale, do, dq, dk, dv, lse, delta, N,  #
                                   BLOCK_M1=ctx.block_n, BLOCK_N1=ctx.block_m, BLOCK_M2=ctx.block_m,
                                   BLOCK_N2=ctx.block_n, HEAD_DIM=d, CAUSAL=ctx.causal, num_warps=4, num_stages=2)
        return dq, dk, dv, None, None, None, None


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, scale: float | None = None,
              block_m: int = 64, block_n: int = 32) -> torch.Tensor:
    """softmax(scale q k^T) v by the Triton kernel: FA2's schedule, differentiable.

    Args:
        q, k, v: (B, H, N, d), one dtype (float32; float16 or bfloat16 on CUDA), d in 16, 32, 64, 128.
        causal: top-left causal mask (query i sees keys j <= i).
        scale: softmax scale (None: 1 / sqrt(d)).
        block_m: BLOCK_M, query rows per program (a power of two >= 16).
        block_n: BLOCK_N, keys per inner step (a power of two >= 16 dividing block_m).
    Returns:
        O: (B, H, N, d) in q's dtype.

    Example:
        >>> import torch
        >>> q, k, v = torch.randn(3, 1, 2, 40, 16).unbind(0)
        >>> o = attention(q, k, v, causal=True, block_m=32, block_n=16)
        >>> ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        >>> o.shape, bool((o - ref).abs().max() < 1e-5)
        (torch.Size([1, 2, 40, 16]), True)
    """
    check_args(q, k, v, block_m, block_n)
    sm_scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    return _Attention.apply(q, k, v, bool(causal), sm_scale, block_m, block_n)
