"""Attention modules, chosen by name through an extensible registry.

``dot`` is :class:`cape_pipeline.models.attention.rotary.RotaryMultiheadAttention`, the package's one
attention module (exported here as :data:`DotProductAttention` too): multi-head scaled
dot-product attention with per-token rotary angles (CAPE, Eqs. 24–25), an optional additive
score bias (the relative PE, Eq. F.110) and a key padding mask, computed by
:func:`torch.nn.functional.scaled_dot_product_attention` (fused kernels).

Why not Performer (scBERT's backbone)? Performer's FAVOR+ approximates softmax attention with
random features to reach O(T) memory for T ≈ 16k genes. With the token budgets used here
(``max_tokens`` ≤ a few thousand), exact attention through the fused SDPA kernel is both
faster on CPU and exact; and rotary q/k (CAPE) is compatible with linear attention anyway
(paper 000 Sec. 3.5), so a Performer can be registered later with :func:`register_attention`
without touching the backbones.

Other attention variants of papers 001–003 (cone, RiemannFormer, APE) register here under
their own names; they must accept the same constructor ``(d_model, n_heads, dropout=)`` and
``forward(x, angles, key_padding_mask, *, score_bias=None)``; an attention that sets
``needs_positions = True`` (``riemann``) also gets ``positions=`` ``(B, 1+T, d+1)``, the tokens'
hyperboloid points with the origin at <cls>.
"""

from __future__ import annotations

from torch import nn

from cape_pipeline.errors import CapeConfigError
from cape_pipeline.models.attention.cone import PenumbralConeAttention, UmbralConeAttention
from cape_pipeline.models.attention.riemann import RiemannAttention
from cape_pipeline.models.attention.rotary import RotaryMultiheadAttention

__all__ = ["DotProductAttention", "RotaryMultiheadAttention", "ATTENTIONS", "register_attention", "build_attention"]

DotProductAttention = RotaryMultiheadAttention
"""The default attention of every backbone (an alias, not a second implementation)."""

ATTENTIONS: dict[str, type[nn.Module]] = {
    "dot": RotaryMultiheadAttention,
    "cone-penumbral": PenumbralConeAttention,  # paper 003 Def. 1
    "cone-umbral": UmbralConeAttention,  # paper 003 Def. 2
    "riemann": RiemannAttention,  # paper 001 (conformal scale + Locality Focusing); needs_positions
}
"""Attention name → module class with ``(d_model, n_heads, dropout=)`` constructor."""


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
