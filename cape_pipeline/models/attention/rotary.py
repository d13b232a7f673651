"""The rotary multi-head attention: CAPE's injection (paper 000, Eqs. 22–25) inside
self-attention, the ``dot`` attention of every bundled backbone. The rotation itself is
:func:`cape_pipeline.encodings.rope.apply_rotary`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cape_pipeline.encodings.rope import apply_rotary

__all__ = ["RotaryMultiheadAttention"]


class RotaryMultiheadAttention(nn.Module):
    """Multi-head self-attention with CAPE rotary encodings on queries and keys: the injection
    𝓘 of Eq. 22 is the rotation of Eq. 24, so the score depends on φ_n − φ_m only (Eqs. 23, 25).

    The one attention module of the package: every bundled backbone uses it (registered as
    ``"dot"`` in :mod:`cape_pipeline.models.attention`), and it is exported publicly.

    ``q, k, v = x W_q, x W_k, x W_v`` split into H heads ``(B, H, M, Dh)``; head h's q and k are
    rotated with its slice of the D/2 angles (``angles[..., h·Dh/2:(h+1)·Dh/2]``), values are
    left untouched, an optional additive score bias (the relative PE of paper 000 Eq. F.110) and
    a key padding mask are added, and ``torch.nn.functional.scaled_dot_product_attention``
    computes ``softmax(q kᵀ / sqrt(Dh) + bias) v`` (fused kernels where available).

    Parameters
    ----------
    embed_dim
        Model width D; must be divisible by ``num_heads`` with an even head size Dh.
    num_heads
        Number of heads H.
    dropout
        Attention-probability dropout (training only).
    bias
        Bias in the q/k/v and output projections.

    Raises
    ------
    ValueError
        If ``embed_dim`` is not divisible by ``num_heads`` or the head size is odd.

    Examples
    --------
    >>> import torch
    >>> attn = RotaryMultiheadAttention(8, 2)
    >>> attn(torch.randn(3, 5, 8), torch.zeros(5, 4)).shape
    torch.Size([3, 5, 8])
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(
                f"embed_dim={embed_dim} must be a positive multiple of num_heads={num_heads}"
            )
        head_dim = embed_dim // num_heads
        if head_dim % 2:
            raise ValueError(
                f"head size embed_dim/num_heads = {head_dim} must be even for rotary pairs"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout: expected a value in [0, 1), got {dropout}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.dropout = float(dropout)
        self.in_proj = nn.Linear(embed_dim, 3 * embed_dim, bias=bias)  # W_q | W_k | W_v
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def _head_angles(self, angles: torch.Tensor | Any, ref: torch.Tensor) -> torch.Tensor:
        """``(..., M, D/2) → (..., H, M, Dh/2)``: split the angle vector into per-head slices."""
        ang = torch.as_tensor(angles, device=ref.device)
        if ang.ndim < 2 or ang.shape[-1] != self.embed_dim // 2:
            hint = ""
            if ang.ndim >= 2 and ang.shape[-1] == self.embed_dim:
                hint = (" (this looks like nn.MultiheadAttention's attn(query, key, value); this module is "
                        "self-attention: call attn(x, angles) with the rotary angles, e.g. CapeEncodings.angles "
                        "rows of the tokens' features)")
            raise ValueError(
                f"angles: expected shape (M, D/2) = (M, {self.embed_dim // 2}), got {tuple(ang.shape)}{hint}"
            )
        lead, m = ang.shape[:-2], ang.shape[-2]
        ang = ang.reshape(*lead, m, self.num_heads, self.head_dim // 2)
        return ang.movedim(-2, -3)

    def project(
        self, x: torch.Tensor, angles: torch.Tensor | Any | None, key_padding_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """The per-head q, k, v of ``x`` ``(B, M, D)``, with q and k rotated by ``angles`` (Eq. 24;
        ``None``: no rotation; a callable ``(q, k) -> (q, k)``: applied to the per-head q and k
        instead, e.g. paper 002's orthogonal maps), and the padded keys as a ``(B, 1, 1, M)`` bool mask (None without
        ``key_padding_mask``). Every attention of this family scores these q and k its own way.

        Returns
        -------
        q, k, v, padded
            ``(B, H, M, Dh)`` each, and the mask or None.

        Raises
        ------
        ValueError
            On shape mismatches of ``x``, ``angles`` or ``key_padding_mask``.
        """
        if x.ndim != 3 or x.shape[-1] != self.embed_dim:
            raise ValueError(f"x: expected shape (B, M, {self.embed_dim}), got {tuple(x.shape)}")
        bsz, m, _ = x.shape
        # (B, M, 3D) → (3, B, H, M, Dh)
        qkv = self.in_proj(x).view(bsz, m, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv
        if callable(angles):  # a per-token map of q and k (PositionalEncoding.qk_transform)
            q, k = angles(q, k)
        elif angles is not None:
            ang = self._head_angles(angles, x)  # (H, M, Dh/2) or (B, H, M, Dh/2)
            if ang.shape[-2] != m:
                raise ValueError(f"angles: {ang.shape[-2]} features, but x has M={m} tokens")
            q, k = apply_rotary(qkv[:2], ang)  # Eq. 24 on q and k in one call: (2, B, H, M, Dh)
        padded = None
        if key_padding_mask is not None:
            if key_padding_mask.shape != (bsz, m):
                raise ValueError(
                    f"key_padding_mask: expected shape ({bsz}, {m}), got {tuple(key_padding_mask.shape)}"
                )
            padded = key_padding_mask.to(device=x.device, dtype=torch.bool).view(bsz, 1, 1, m)
        return q, k, v, padded

    def forward(
        self,
        x: torch.Tensor,
        angles: torch.Tensor | Any | None = None,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        *,
        score_bias: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Attend over the M feature tokens.

        Parameters
        ----------
        x
            ``(B, M, D)`` token states.
        angles
            ``(M, D/2)`` or ``(B, M, D/2)`` CAPE angles in radians, or the same shapes of
            precomputed complex rotations e^{jφ} (:func:`rotations`, computed once for all
            layers); ``None`` gives plain attention (no positional information); a callable
            ``(q, k) -> (q, k)`` maps the per-head ``(B, H, M, Dh)`` q and k instead of a
            rotation (see :meth:`project`).
        key_padding_mask
            ``(B, M)`` bool, True marks padding keys to ignore (``nn.MultiheadAttention``
            convention). A row with every key masked yields NaN.
        need_weights
            Also return the attention probabilities.
        score_bias
            ``f(q, k) -> (B, H, M, M)`` added to the scaled scores; q, k are the per-head
            ``(B, H, M, Dh)`` tensors after any rotation (the relative PE, Eq. F.110).

        Returns
        -------
        torch.Tensor or tuple
            ``(B, M, D)``; with ``need_weights=True``, ``(out, weights)`` where ``weights`` is
            ``(B, H, M, M)`` (after dropout when training).

        Raises
        ------
        ValueError
            On shape mismatches.
        """
        q, k, v, padded = self.project(x, angles, key_padding_mask)  # checks the shapes
        bsz, m, _ = x.shape
        bias = score_bias(q, k) if score_bias is not None else None  # (B, H, M, M)
        out, weights = self.attend(q, k, v, padded, bias, need_weights)
        out = self.out_proj(out.transpose(1, 2).reshape(bsz, m, self.embed_dim))  # (B, M, D)
        return (out, weights) if need_weights else out

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        padded: torch.Tensor | None,
        bias: torch.Tensor | None,
        need_weights: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Scores, softmax and the weighted values of the per-head tensors (what an attention
        that subclasses this one replaces): scaled dot product, Eq. 25.

        Parameters
        ----------
        q, k, v
            ``(B, H, M, Dh)`` after :meth:`project` (q and k rotated).
        padded
            ``(B, 1, 1, M)`` bool, True at padding keys, or None.
        bias
            ``(B, H, M, M)`` added to the scaled scores, or None.
        need_weights
            Also return the probabilities.

        Returns
        -------
        out, weights
            ``(B, H, M, Dh)``, and ``(B, H, M, M)`` (after dropout when training) or None.
        """
        bsz, _, m, _ = q.shape
        mask = bias
        if padded is not None:
            pad = torch.zeros(bsz, 1, 1, m, dtype=q.dtype, device=q.device).masked_fill(padded, float("-inf"))
            mask = pad if mask is None else mask + pad
        p_drop = self.dropout if self.training else 0.0
        if need_weights:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)  # (B, H, M, M)
            if mask is not None:
                scores = scores + mask
            weights = F.dropout(torch.softmax(scores, dim=-1), p=p_drop, training=self.training)
            return weights @ v, weights
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p_drop), None
