"""RiemannFormer attention (paper 001) on CAPE's hyperbolic feature positions.

Paper 001 equips position m with the conformal metric ``M_m = s^m I`` (Eqs. 6–8), with
``s = e^w / (e^w + α) ∈ (0, 1)``, learnable w and hyperparameter α = 0.1, so the score of
Eq. 9 is ``⟨T_m⁻¹ q_m, T_n⁻¹ k_n⟩ = s^{(m+n)/2} q_mᵀ R((n−m)θ) k_n`` (RoPE when s = 1). Its
locality focusing (Sec. 2.1, Eqs. 19–22) multiplies the softmax matrix S elementwise by
``Ω_mn = G_σ(p_m, p_n) = exp(−‖p_m − p_n‖² / (2σ²))`` and returns ``(S ⊙ Ω) V`` without
renormalising.

CAPE adaptation: a token's position is its feature's point ``p_m`` on the hyperboloid (Lorentz
model, curvature −1, ``x0 = sqrt(1 + ‖x_{1:}‖²)``). The rotation is whatever rotary angles the
positional encoding passes (applied by :meth:`RotaryMultiheadAttention.project`, unchanged);
the index m of the conformal factor becomes ``ρ_m = d_H(o, p_m) = arccosh(x0)``, so
``q̃_m = s_h^{ρ_m/2} q_m`` and ``k̃_n = s_h^{ρ_n/2} k_n`` (one s_h per head); Ω uses the geodesic
distance ``d_H(p_m, p_n) = arccosh(max(1, x0 y0 − ⟨x_{1:}, y_{1:}⟩))`` and a learnable width σ_h
per head. The ``<cls>`` token (index 0) is exempt: its conformal factor is 1 and row 0 and
column 0 of Ω are 1, whatever point the caller placed there.

Numerics (:func:`cape_pipeline.hyperbolic.lorentz.pairwise_sq_dist_smooth`, the package's one
Lorentz distance for attention): ``d²`` is computed from ``u = max(0, z − 1)`` (``z = cosh d``,
one matmul per chunk) as ``arccosh(1 + u)²`` for ``u > SMOOTH_SMALL`` and its Taylor series ``2u − u²/3`` below, so
gradients stay finite at coincident points (``arccosh'(1) = ∞``); distances are the square
root of that with a zero-gradient floor, as :mod:`cape_pipeline.models.attention.cone` does. The
geometry runs in float32 (float64 when x or the positions are float64) with autocast off;
for points far from the origin ``z − 1`` loses absolute precision ~ ``x0·y0·ε``. Queries are
processed ``chunk_size`` rows at a time (forward memory O(B·H·chunk·M)).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cape_pipeline.hyperbolic.lorentz import (
    dist0_smooth,
    pairwise_dist_smooth,
    pairwise_sq_dist_smooth,
)
from cape_pipeline.models.attention.rotary import RotaryMultiheadAttention

__all__ = ["lorentz_norm", "lorentz_pairwise_distance", "RiemannAttention"]

lorentz_norm = dist0_smooth
"""``ρ = d_H(o, x)`` with finite gradients at the origin: :func:`cape_pipeline.hyperbolic.lorentz.dist0_smooth`."""
lorentz_pairwise_distance = pairwise_dist_smooth
"""All-pairs ``d_H`` with finite gradients at coincident points:
:func:`cape_pipeline.hyperbolic.lorentz.pairwise_dist_smooth`."""


class RiemannAttention(RotaryMultiheadAttention):
    """RiemannFormer attention (paper 001 Eqs. 6–9, 19–22) with hyperbolic feature positions.

    ``S = softmax(s_h^{(ρ_m+ρ_n)/2} q_mᵀ k_n / sqrt(Dh) + bias)`` over keys (q, k rotated by the
    angles as in the parent, Eq. 9 with ``m → ρ_m``), then ``out = (S ⊙ Ω) V`` with
    ``Ω_mn = exp(−d_H(p_m, p_n)² / (2σ_h²))`` and no renormalisation (Eq. 22). ``s_h = e^{w_h} /
    (e^{w_h} + α)`` (``w`` starts at 0, i.e. s = 1/(1+α)); ``σ_h = exp(log_sigma_h)``. Token 0
    (``<cls>``) has conformal factor 1 and Ω row/column 0 equal to 1. With s → 1 (w → ∞) and
    σ → ∞ it equals :class:`RotaryMultiheadAttention` (RoPE).

    Parameters
    ----------
    embed_dim, num_heads, dropout, bias
        As :class:`RotaryMultiheadAttention`.
    alpha
        α > 0 of ``s = e^w/(e^w+α)`` (paper 001: 0.1).
    sigma
        Initial width σ > 0 of Ω (hyperbolic distance units), the same for every head.
    chunk_size
        Query rows processed at a time (≥ 1).

    Raises
    ------
    ValueError
        Bad sizes (as the parent), ``alpha <= 0``, ``sigma <= 0`` or ``chunk_size < 1``.

    Examples
    --------
    >>> import torch
    >>> attn = RiemannAttention(8, 2)
    >>> pts = torch.zeros(3, 5, 3); pts[..., 0] = 1.0   # every token at the origin
    >>> attn(torch.randn(3, 5, 8), torch.zeros(5, 4), positions=pts).shape
    torch.Size([3, 5, 8])
    """

    needs_positions = True

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        alpha: float = 0.1,
        sigma: float = 1.0,
        chunk_size: int = 256,
    ):
        super().__init__(embed_dim, num_heads, dropout=dropout, bias=bias)
        if not alpha > 0:
            raise ValueError(f"alpha: expected a positive float, got {alpha}")
        if not sigma > 0:
            raise ValueError(f"sigma: expected a positive float, got {sigma}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size: expected a positive int, got {chunk_size}")
        self.alpha = float(alpha)
        self.chunk_size = int(chunk_size)
        self.w = nn.Parameter(torch.zeros(num_heads))
        self.log_sigma = nn.Parameter(torch.full((num_heads,), math.log(sigma)))

    def log_conformal_factor(self) -> torch.Tensor:
        """``(H,)`` ``log s_h = log σ(w_h − log α)`` (≤ 0, stable for large |w|)."""
        return F.logsigmoid(self.w - math.log(self.alpha))

    def forward(
        self,
        x: torch.Tensor,
        angles: torch.Tensor | Any | None = None,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        *,
        score_bias: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Attend over the M = 1+T tokens (``<cls>`` first).

        Parameters
        ----------
        x, angles, key_padding_mask
            As :meth:`RotaryMultiheadAttention.forward`: ``(B, M, D)``, ``(M, D/2)`` /
            ``(B, M, D/2)`` angles or rotations (None: no rotation), ``(B, M)`` bool (True =
            padding key, weight exactly 0).
        need_weights
            Also return ``S ⊙ Ω`` ``(B, H, M, M)`` (after dropout when training).
        score_bias
            ``f(q, k) -> (B, H, M, M)`` added to the scaled scores; q, k are the rotated
            per-head ``(B, H, M, Dh)`` tensors *before* the conformal scaling.
        positions
            ``(B, M, d+1)`` (or ``(M, d+1)``, shared) float hyperboloid points, one per token;
            row 0 (``<cls>``) is ignored.

        Returns
        -------
        torch.Tensor or tuple
            ``(B, M, D)`` in ``x.dtype``; with ``need_weights``, ``(out, weights)``.

        Raises
        ------
        ValueError
            ``positions`` is None or misshapen, or shape mismatches as the parent.
        """
        if positions is None:
            raise ValueError(
                "riemann attention needs the features' hyperboloid points (positions=); use a pe "
                "whose encodings carry Poincare/hyperboloid coordinates"
            )
        q, k, v, pad = self.project(x, angles, key_padding_mask)  # checks the shapes
        bsz, m, _ = x.shape
        pos = torch.as_tensor(positions, device=x.device)
        if pos.ndim == 2:
            pos = pos.unsqueeze(0).expand(bsz, -1, -1)
        if pos.ndim != 3 or pos.shape[:2] != (bsz, m) or pos.shape[-1] < 2:
            raise ValueError(f"positions: expected shape ({bsz}, {m}, d+1), got {tuple(pos.shape)}")
        bias = score_bias(q, k) if score_bias is not None else None
        work = torch.float64 if torch.float64 in (x.dtype, pos.dtype) else torch.float32
        with torch.autocast(device_type=x.device.type, enabled=False):
            pos = pos.to(work)
            not_cls = torch.ones(m, dtype=torch.bool, device=x.device)
            not_cls[0] = False
            rho = torch.where(not_cls, lorentz_norm(pos), 0.0)  # (B, M); <cls>: factor 1
            log_s = self.log_conformal_factor().to(work).view(1, -1, 1, 1)
            factor = torch.exp(0.5 * log_s * rho[:, None, :, None])  # (B, H, M, 1) = s_h^{ρ/2}
            qs = q.to(work) * factor / math.sqrt(self.head_dim)
            ks = k.to(work) * factor
            inv_two_var = (0.5 * torch.exp(-2.0 * self.log_sigma)).to(work).view(1, -1, 1, 1)
            p_drop = self.dropout if self.training else 0.0
            outs, weights = [], []
            for start in range(0, m, self.chunk_size):
                stop = min(start + self.chunk_size, m)
                scores = qs[:, :, start:stop] @ ks.transpose(-2, -1)  # (B, H, c, M)
                if bias is not None:
                    scores = scores + bias[..., start:stop, :].to(work)
                if pad is not None:
                    scores = scores.masked_fill(pad, float("-inf"))
                d2 = pairwise_sq_dist_smooth(pos[:, start:stop], pos)  # (B, c, M)
                keep = not_cls[start:stop, None] & not_cls[None, :]  # <cls> row/col: Ω = 1
                d2 = torch.where(keep, d2, torch.zeros_like(d2))
                omega = torch.exp(-d2[:, None] * inv_two_var)  # (B, H, c, M), Eq. 21
                probs = torch.softmax(scores, dim=-1) * omega  # S ⊙ Ω, Eq. 22
                probs = F.dropout(probs, p=p_drop, training=self.training)
                outs.append(probs.to(v.dtype) @ v)
                if need_weights:
                    weights.append(probs)
        out = torch.cat(outs, dim=2) if len(outs) > 1 else outs[0]  # (B, H, M, Dh)
        out = self.out_proj(out.transpose(1, 2).reshape(bsz, m, self.embed_dim))
        if need_weights:
            return out, torch.cat(weights, dim=2).to(x.dtype)
        return out
