"""Attention modules, chosen by name through an extensible registry.

``dot`` is multi-head scaled dot-product attention (the default of every backbone). It takes
per-token rotary angles (CAPE, Eqs. 24–25), an optional additive score bias (the relative PE,
Eq. F.110) and a key padding mask, and calls
:func:`torch.nn.functional.scaled_dot_product_attention` (fused kernels).

Why not Performer (scBERT's backbone)? Performer's FAVOR+ approximates softmax attention with
random features to reach O(T) memory for T ≈ 16k genes. With the token budgets used here
(``max_tokens`` ≤ a few thousand), exact attention through the fused SDPA kernel is both
faster on CPU and exact; and rotary q/k (CAPE) is compatible with linear attention anyway
(paper 000 Sec. 3.5), so a Performer can be registered later with :func:`register_attention`
without touching the backbones.

Other attention variants of papers 001–003 (cone, RiemannFormer, APE) register here under
their own names; they must accept the same ``forward`` arguments.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from cape_pipeline.errors import CapeConfigError

__all__ = ["DotProductAttention", "ATTENTIONS", "register_attention", "build_attention"]


class DotProductAttention(nn.Module):
    """Multi-head softmax attention with optional rotary q/k, score bias and key padding.

    Parameters
    ----------
    d_model
        Width D; ``D % (2 * n_heads) == 0`` so every head holds whole rotary pairs.
    n_heads
        Number of heads H; head h uses angle columns ``h*Dh/2 : (h+1)*Dh/2``.
    dropout
        Dropout on the attention weights (training only).
    bias
        Bias in the q/k/v and output projections.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self,
        x: torch.Tensor,
        *,
        angles: torch.Tensor | None = None,
        score_bias: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
        key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attend over the T tokens of each observation.

        Parameters
        ----------
        x
            ``(B, T, D)`` float.
        angles
            ``(B, T, D/2)`` or ``(T, D/2)`` rotary angles in radians for q and k (Eq. 24); the
            values are not rotated.
        score_bias
            ``f(q, k) -> (B, H, T, T)`` added to the scaled scores (q, k are ``(B, H, T, Dh)``,
            after any rotation).
        key_padding_mask
            ``(B, T)`` bool, ``True`` = this key is ignored.

        Returns
        -------
        Tensor
            ``(B, T, D)``.
        """
        bsz, t, d = x.shape
        h = self.n_heads
        qkv = self.qkv(x).view(bsz, t, 3, h, d // h).permute(2, 0, 3, 1, 4)  # (3, B, H, T, Dh)
        q, k, v = qkv
        if angles is not None:
            from cape_pipeline.encodings.rope import apply_rotary

            a = angles.view(*angles.shape[:-1], h, d // (2 * h))  # (..., T, H, Dh/2)
            a = a.movedim(-2, -3)  # (..., H, T, Dh/2): head h takes its slice of the D/2 angles
            # Eq. 24 on q and k in one call (one cos/sin of the angles, no copy): (2, B, H, T, Dh)
            q, k = apply_rotary(qkv[:2], a)
        mask = None
        if score_bias is not None:
            mask = score_bias(q, k)  # (B, H, T, T)
        if key_padding_mask is not None:
            pad = torch.zeros(bsz, 1, 1, t, dtype=q.dtype, device=q.device)
            pad = pad.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
            mask = pad if mask is None else mask + pad
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0
        )  # (B, H, T, Dh)
        return self.out(y.transpose(1, 2).reshape(bsz, t, d))


ATTENTIONS: dict[str, type[nn.Module]] = {"dot": DotProductAttention}
"""Attention name → module class with ``(d_model, n_heads, dropout)`` constructor."""


def register_attention(name: str, cls: type[nn.Module], *, overwrite: bool = False) -> None:
    """Register an attention module class under ``name`` (for the variants of papers 001–003).

    Raises
    ------
    CapeConfigError
        If ``name`` is taken and ``overwrite`` is false.
    """
    if name in ATTENTIONS and not overwrite:
        raise CapeConfigError(f"attention {name!r} is already registered")
    ATTENTIONS[name] = cls


def build_attention(name: str, d_model: int, n_heads: int, dropout: float = 0.0) -> nn.Module:
    """Instantiate a registered attention by name.

    Raises
    ------
    CapeConfigError
        Unknown ``name``.
    """
    if name not in ATTENTIONS:
        raise CapeConfigError(f"attention {name!r} unknown; expected one of {sorted(ATTENTIONS)}")
    return ATTENTIONS[name](d_model, n_heads, dropout=dropout)
