"""The FlashAttention papers' algorithms, plain: FlashAttention (Dao et al., 2022) Algorithm 1 and FlashAttention-2
(Dao, 2023) Algorithms 1 and 2, in the papers' names and order, each step marked with its line number.

Read these first: they show how tiles and the online softmax give exact attention without an N x N matrix, how FA2
defers the division and saves only L, and how the backward recomputes P from L. flashviz.core.flash and
flashviz.core.backward generalise them (masks, grouped-query heads, score_mod, numerics options, tile events).

Legend: B batch, H heads, N length, d head dimension; Br x Bc a tile; Tr = ceil(N / Br) Q blocks i, Tc = ceil(N / Bc)
K/V blocks j, the last of each possibly shorter. Each step is one matmul batched over (B, H); row vectors l, m, L, D
are (B, H, N, 1) columns, so diag(v) A is v * A. Here S = scale Q K^T (FA1's Algorithm 2 writes tau), so dQ and dK
carry the scale. Natural exp, as in the papers; flashviz's general kernels use exp2 with log2(e) folded into the scale
(cheaper on a GPU): 2^(x log2 e) = e^x and the max commutes with a positive factor, so m, P~, l, O are the same
numbers up to rounding, and their L is converted back to natural log.
"""

from __future__ import annotations

import math

import torch

from flashviz.core.validate import validate_block, validate_qkv, validate_scale


def _blocks(N: int, size: int) -> list[slice]:
    """The rows of each block: ceil(N / size) slices, the last one shorter when size does not divide N."""
    return [slice(start, min(start + size, N)) for start in range(0, N, size)]


def _setup(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, block_size: int, Br: int | None, Bc: int | None,
           scale: float | None) -> tuple[int, int, float]:
    """Check the inputs (Q, K, V share B, H and d; no grouped heads here) and return Br, Bc and the scale."""
    validate_qkv(Q, K, V)
    if K.shape[1] != Q.shape[1]:
        raise ValueError(f"K and V must have Q's H={Q.shape[1]} heads here, got {K.shape[1]}: this module keeps "
                         "the papers' multi-head attention. For grouped-query attention use flashviz.flash_attention.")
    Br = validate_block("Br", block_size if Br is None else Br)
    Bc = validate_block("Bc", block_size if Bc is None else Bc)
    return Br, Bc, validate_scale(scale, Q.shape[-1], Q.dtype)


def fa1_forward(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, block_size: int = 64, *, Br: int | None = None,
                Bc: int | None = None, scale: float | None = None) -> torch.Tensor:
    """FlashAttention, Algorithm 1: outer loop over K/V blocks j, inner over Q blocks i; O, l, m live in HBM and
    are rescaled and written back after every tile.

    Args:
        Q: (B, H, N, d).  K, V: (B, H, N_k, d) (the paper has N_k = N).  block_size: Br and Bc unless given.
        Br: query rows per tile.  Bc: key columns per tile (the paper derives both from the SRAM size M, line 1).
        scale: softmax scale, default 1/sqrt(d).
    Returns:
        O (B, H, N, d) = softmax(scale Q K^T) V.

    Example:
        >>> Q = K = V = torch.randn(1, 2, 10, 4, dtype=torch.float64)
        >>> torch.allclose(fa1_forward(Q, K, V, Br=4, Bc=3), torch.softmax(Q @ K.mT / 2, -1) @ V)
        True
    """
    Br, Bc, scale = _setup(Q, K, V, block_size, Br, Bc, scale)  # line 1: block sizes
    B, H, N, d = Q.shape
    # line 2: O = (0)_{N x d}, l = (0)_N, m = (-inf)_N in HBM
    O = Q.new_zeros(B, H, N, d)
    l = Q.new_zeros(B, H, N, 1)
    m = Q.new_full((B, H, N, 1), -math.inf)
    # lines 3-4: Q, O, l, m in Tr blocks of Br rows; K, V in Tc blocks of Bc rows
    Q_blocks, KV_blocks = _blocks(N, Br), _blocks(K.shape[2], Bc)
    for j in KV_blocks:  # line 5: for 1 <= j <= Tc
        K_j, V_j = K[:, :, j], V[:, :, j]  # line 6: load K_j, V_j (B, H, Bc, d)
        for i in Q_blocks:  # line 7: for 1 <= i <= Tr
            Q_i, O_i, l_i, m_i = Q[:, :, i], O[:, :, i], l[:, :, i], m[:, :, i]  # line 8: load Q_i, O_i, l_i, m_i
            S_ij = scale * Q_i @ K_j.mT  # line 9: S_ij = Q_i K_j^T (B, H, Br, Bc)
            m_ij = S_ij.amax(dim=-1, keepdim=True)  # line 10: m~_ij = rowmax(S_ij) (B, H, Br, 1)
            P_ij = torch.exp(S_ij - m_ij)  # line 10: P~_ij = exp(S_ij - m~_ij)
            l_ij = P_ij.sum(dim=-1, keepdim=True)  # line 10: l~_ij = rowsum(P~_ij)
            m_new = torch.maximum(m_i, m_ij)  # line 11: m_i^new = max(m_i, m~_ij)
            l_new = torch.exp(m_i - m_new) * l_i + torch.exp(m_ij - m_new) * l_ij  # line 11: l_i^new
            # line 12: O_i <- diag(l_i^new)^-1 (diag(l_i) e^(m_i - m_i^new) O_i + e^(m~_ij - m_i^new) P~_ij V_j)
            O[:, :, i] = (l_i * torch.exp(m_i - m_new) * O_i + torch.exp(m_ij - m_new) * (P_ij @ V_j)) / l_new
            l[:, :, i], m[:, :, i] = l_new, m_new  # line 13: l_i <- l_i^new, m_i <- m_i^new
    return O  # line 16


def fa2_forward(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, block_size: int = 64, *, Br: int | None = None,
                Bc: int | None = None, scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashAttention-2, Algorithm 1: outer loop over Q blocks i; the unnormalised O_i stays on chip, is divided by
    l_i once at the end, and only the logsumexp L_i = m_i + log l_i is saved for the backward.

    Args:
        Q: (B, H, N, d).  K, V: (B, H, N_k, d).  block_size: Br and Bc unless given.  Br, Bc: the tile.
        scale: softmax scale, default 1/sqrt(d).
    Returns:
        O (B, H, N, d) and L (B, H, N), the natural-log logsumexp of each row of scale Q K^T.

    Example:
        >>> Q = K = V = torch.randn(1, 2, 10, 4, dtype=torch.float64)
        >>> O, L = fa2_forward(Q, K, V, Br=4, Bc=3)
        >>> torch.allclose(L, torch.logsumexp(Q @ K.mT / 2, -1))
        True
    """
    Br, Bc, scale = _setup(Q, K, V, block_size, Br, Bc, scale)
    B, H, N, d = Q.shape
    Q_blocks, KV_blocks = _blocks(N, Br), _blocks(K.shape[2], Bc)  # line 1: Tr blocks Q_i, Tc blocks K_j, V_j
    O, L = torch.empty_like(Q), Q.new_empty(B, H, N, 1)  # line 2: O in Tr blocks O_i, L in Tr blocks L_i
    for i in Q_blocks:  # line 3: for 1 <= i <= Tr
        Q_i = Q[:, :, i]  # line 4: load Q_i (B, H, Br, d)
        # line 5: on chip, O_i^(0) = (0)_{Br x d}, l_i^(0) = (0)_Br, m_i^(0) = (-inf)_Br
        O_i = Q.new_zeros(B, H, Q_i.shape[2], d)
        l_i = Q.new_zeros(B, H, Q_i.shape[2], 1)
        m_i = Q.new_full((B, H, Q_i.shape[2], 1), -math.inf)
        for j in KV_blocks:  # line 6: for 1 <= j <= Tc
            K_j, V_j = K[:, :, j], V[:, :, j]  # line 7: load K_j, V_j (B, H, Bc, d)
            S_ij = scale * Q_i @ K_j.mT  # line 8: S_i^(j) = Q_i K_j^T (B, H, Br, Bc)
            m_new = torch.maximum(m_i, S_ij.amax(dim=-1, keepdim=True))  # line 9: m_i^(j) = max(m_i^(j-1), rowmax)
            P_ij = torch.exp(S_ij - m_new)  # line 9: P~_i^(j) = exp(S_i^(j) - m_i^(j))
            l_new = torch.exp(m_i - m_new) * l_i + P_ij.sum(dim=-1, keepdim=True)  # line 9: l_i^(j)
            O_i = torch.exp(m_i - m_new) * O_i + P_ij @ V_j  # line 10: O_i^(j) = diag(e^(m_old - m_new)) O_i + P~ V_j
            m_i, l_i = m_new, l_new
        O[:, :, i] = O_i / l_i  # lines 12 and 14: O_i = diag(l_i^(Tc))^-1 O_i^(Tc), written to HBM
        L[:, :, i] = m_i + torch.log(l_i)  # lines 13 and 15: L_i = m_i^(Tc) + log(l_i^(Tc)), written to HBM
    return O, L.squeeze(-1)  # line 17


def fa2_backward(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, O: torch.Tensor, dO: torch.Tensor,
                 L: torch.Tensor, block_size: int = 64, *, Br: int | None = None, Bc: int | None = None,
                 scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FlashAttention-2, Algorithm 2: the backward by recomputation. Outer loop over K/V blocks j (dK_j, dV_j stay
    on chip), inner over Q blocks i (dQ_i is read, updated and written back to HBM); P_ij = exp(S_ij - L_i) is
    recomputed from Q_i, K_j and L_i, never stored.

    Args:
        Q, O, dO: (B, H, N, d).  K, V: (B, H, N_k, d).  L: (B, H, N), fa2_forward's logsumexp.
        block_size, Br, Bc, scale: as in fa2_forward (any tiles give the same gradients).
    Returns:
        dQ, dK, dV, shaped like Q, K, V.

    Example:
        >>> Q, K, V = (torch.randn(1, 2, 10, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
        >>> dO = torch.randn(1, 2, 10, 4, dtype=torch.float64)
        >>> (torch.softmax(Q @ K.mT / 2, -1) @ V).backward(dO)
        >>> O, L = fa2_forward(Q.detach(), K.detach(), V.detach(), Br=4, Bc=3)
        >>> dQ, dK, dV = fa2_backward(Q.detach(), K.detach(), V.detach(), O, dO, L, Br=4, Bc=3)
        >>> all(torch.allclose(g, t.grad) for g, t in ((dQ, Q), (dK, K), (dV, V)))
        True
    """
    Br, Bc, scale = _setup(Q, K, V, block_size, Br, Bc, scale)
    # line 1: Q in Tr blocks, K, V in Tc blocks; line 2: O, dO, L in Tr blocks
    Q_blocks, KV_blocks = _blocks(Q.shape[2], Br), _blocks(K.shape[2], Bc)
    L = L.unsqueeze(-1)  # (B, H, N, 1)
    dQ, dK, dV = torch.zeros_like(Q), torch.empty_like(K), torch.empty_like(V)  # line 3: dQ = 0 in HBM
    D = (dO * O).sum(dim=-1, keepdim=True)  # line 4: D = rowsum(dO o O) (B, H, N, 1), in Tr blocks D_i
    for j in KV_blocks:  # line 5: for 1 <= j <= Tc
        K_j, V_j = K[:, :, j], V[:, :, j]  # line 6: load K_j, V_j (B, H, Bc, d)
        dK_j, dV_j = torch.zeros_like(K_j), torch.zeros_like(V_j)  # line 7: dK_j = dV_j = (0)_{Bc x d} on chip
        for i in Q_blocks:  # line 8: for 1 <= i <= Tr
            Q_i, dO_i, L_i, D_i = Q[:, :, i], dO[:, :, i], L[:, :, i], D[:, :, i]  # line 9: load (O_i: in D_i)
            S_ij = scale * Q_i @ K_j.mT  # line 10: S_i^(j) = Q_i K_j^T (B, H, Br, Bc)
            P_ij = torch.exp(S_ij - L_i)  # line 11: P_i^(j) = exp(S_ij - L_i)
            dV_j = dV_j + P_ij.mT @ dO_i  # line 12: dV_j <- dV_j + (P_i^(j))^T dO_i (B, H, Bc, d)
            dP_ij = dO_i @ V_j.mT  # line 13: dP_i^(j) = dO_i V_j^T (B, H, Br, Bc)
            dS_ij = P_ij * (dP_ij - D_i)  # line 14: dS_i^(j) = P_i^(j) o (dP_i^(j) - D_i)
            dQ[:, :, i] += scale * dS_ij @ K_j  # line 15: dQ_i <- dQ_i + dS_i^(j) K_j, written back to HBM
            dK_j = dK_j + scale * dS_ij.mT @ Q_i  # line 16: dK_j <- dK_j + dS_i^(j)^T Q_i
        dK[:, :, j], dV[:, :, j] = dK_j, dV_j  # line 18: write dK_j, dV_j to HBM
    return dQ, dK, dV  # line 20
