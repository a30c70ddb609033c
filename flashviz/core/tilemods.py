"""FlexAttention's score_mod inside the tiled kernels: applied to each computed tile, differentiated in the backward.

A score_mod(score, b, h, q_idx, kv_idx) -> score (torch.nn.attention.flex_attention's signature) changes the scaled
score s = scale * q.k, in natural units, before the softmax; masking happens after it, as in flex_attention. The
kernels keep S_ij in log2 units (Q pre-scaled by scale * log2 e), so with a score_mod they compute the natural score
scale * Q_i K_j^T, apply the score_mod, and only then multiply by log2(e).

The score_mod is called once per tile on broadcastable tensors laid out like the kernels' grouped rows (flash.py's
group_rows): with B batch, H query heads, H_kv K/V heads, G = H / H_kv, Br x Bc the tile,

    score (B, H_kv, Br, G, Bc), b (B, 1, 1, 1, 1), h (1, H_kv, 1, G, 1) the QUERY head h_kv G + g,
    q_idx (Br, 1, 1), kv_idx (1, 1, Bc)

so the tile is never copied to call it. An elementwise score_mod (torch ops that broadcast; FlexAttention's own
requirement) cannot tell this layout from flex_attention's scalars.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from flashviz.core.maskeval import required_positional
from flashviz.core.softmax import LOG2_E
from flashviz.masks import ScoreMod

SCORE_CALL = "score (B, H_kv, Br, G, Bc), b (B,1,1,1,1), h (1,H_kv,1,G,1), q_idx (Br,1,1), kv_idx (1,1,Bc)"


def validate_score_mod(score_mod: object) -> ScoreMod | None:
    """Return score_mod if it is None or a callable of five arguments (score, b, h, q_idx, kv_idx), else raise."""
    if score_mod is None:
        return None
    if not callable(score_mod):
        raise TypeError(f"score_mod must be a function score_mod(score, b, h, q_idx, kv_idx) -> score, or None, got "
                        f"{score_mod!r}. Example: score_mod=lambda score, b, h, q_idx, kv_idx: 30 * torch.tanh(score "
                        "/ 30).")
    if required_positional(score_mod) == 4:
        raise TypeError(f"score_mod {getattr(score_mod, '__name__', score_mod)} takes 4 arguments, like a "
                        "mask_mod(b, h, q_idx, kv_idx). Pass it as mask_mod=..., or give the score change as "
                        "score_mod(score, b, h, q_idx, kv_idx) -> score.")
    return score_mod


def checked_call(score_mod: ScoreMod, score: torch.Tensor, b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor,
                 kv_idx: torch.Tensor, call: str) -> torch.Tensor:
    """score_mod(score, b, h, q_idx, kv_idx), checked: a floating tensor that broadcasts to score's shape, expanded."""
    name = getattr(score_mod, "__name__", repr(score_mod))
    try:
        out = score_mod(score, b, h, q_idx, kv_idx)
    except Exception as e:  # the user's function: say how it was called and what it must be
        raise ValueError(f"score_mod {name} raised {type(e).__name__}: {e}. It was called with {call} and must be "
                         "elementwise (torch ops that broadcast, no Python if on tensor values, no .item()).") from e
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        got = f"dtype {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise TypeError(f"score_mod {name} must return a floating tensor (the new scores), got {got}. Masks that "
                        "return bool belong in mask_mod.")
    try:
        ok = torch.broadcast_shapes(out.shape, score.shape) == score.shape
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"score_mod {name} returned shape {tuple(out.shape)}, which does not broadcast to the "
                         f"scores' {tuple(score.shape)} when called with {call}. It must be elementwise: do not "
                         "reduce over an axis.")
    return out.expand(score.shape)


class TileScoreMod:
    """A score_mod bound to one call's batch and heads: applies it to (BH_kv, Br G, Bc) tiles of natural scores."""

    def __init__(self, score_mod: ScoreMod, B: int, H: int, H_kv: int, device: torch.device):
        self.score_mod, self.B, self.H_kv = score_mod, B, H_kv
        self.G = H // H_kv if H_kv else 1
        self.b = torch.arange(B, device=device).view(B, 1, 1, 1, 1)  # (B, 1, 1, 1, 1)
        self.h = torch.arange(H, device=device).view(1, H_kv, 1, self.G, 1)  # (1, H_kv, 1, G, 1) query heads
        self.device = device

    def _call(self, S_nat: torch.Tensor, q_start: int, q_end: int, k_start: int, k_end: int) -> torch.Tensor:
        shape = (self.B, self.H_kv, q_end - q_start, self.G, k_end - k_start)  # (B, H_kv, Br, G, Bc)
        q_idx = torch.arange(q_start, q_end, device=self.device).view(-1, 1, 1)  # (Br, 1, 1)
        kv_idx = torch.arange(k_start, k_end, device=self.device).view(1, 1, -1)  # (1, 1, Bc)
        return checked_call(self.score_mod, S_nat.view(shape), self.b, self.h, q_idx, kv_idx, SCORE_CALL)

    def log2_scores(self, S_nat: torch.Tensor, tile) -> torch.Tensor:
        """(BH_kv, Br G, Bc) natural scores -> score_mod(scores) in log2 units, a new (BH_kv, Br G, Bc) tensor."""
        out = self._call(S_nat, tile.q_start, tile.q_end, tile.k_start, tile.k_end)  # (B, H_kv, Br, G, Bc)
        return torch.mul(out.reshape(S_nat.shape), LOG2_E).to(S_nat.dtype)  # (BH_kv, Br G, Bc)

    def differentiable(self, S_nat: torch.Tensor, tile) -> tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
        """The modified scores in log2 units and the vector-Jacobian product dS_mod -> dS_nat of the score_mod.

        S_nat: (BH_kv, Br G, Bc) natural scores. The vjp takes dL/d(modified score) (BH_kv, Br G, Bc) and returns
        dL/d(natural score) of the same shape, by autograd through the score_mod on this tile only.
        """
        with torch.enable_grad():
            s = S_nat.detach().requires_grad_()
            out = self._call(s, tile.q_start, tile.q_end, tile.k_start, tile.k_end)  # (B, H_kv, Br, G, Bc)

        def vjp(dS_mod: torch.Tensor) -> torch.Tensor:
            if not out.requires_grad:  # the score_mod ignores the score: its gradient is 0
                return torch.zeros_like(S_nat)
            (grad,) = torch.autograd.grad(out, s, dS_mod.view(out.shape), allow_unused=True)
            return torch.zeros_like(S_nat) if grad is None else grad.view(S_nat.shape)

        return torch.mul(out.detach().reshape(S_nat.shape), LOG2_E).to(S_nat.dtype), vjp
