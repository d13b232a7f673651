"""Cone attention (paper 003): attention logits from hyperbolic entailment-cone hierarchies.

Queries and keys are mapped from Euclidean space into the Poincaré half-space ``𝖧^d`` (the
last coordinate ``x_d > 0`` is the height, ``x_{:-1}`` the horizontal part) and the logit of
pair (i, j) is ``−γ_h · Hgt(u_i, v_j)``, minus the Euclidean height of ``sup₂(u, v)``, the
lowest common ancestor of u and v in the infinite-setting shadow-cone partial order
(paper 003, Sec. 3.1). There is no ``1/sqrt(Dh)`` scaling; ``γ_h > 0`` is a learnable
per-head softmax temperature. Two constructions are registered in
:data:`cape_pipeline.models.attention.ATTENTIONS`:

``cone-penumbral`` (:class:`PenumbralConeAttention`, Def. 1, Eqs. 5–7 and appendix 21–23)
    light source = horosphere at height ``r`` (= ``h`` of the map ξ, Eq. 11; the paper uses 1).
    With ``a = ‖u_{:-1} − v_{:-1}‖`` and ``s_x = sqrt(r² − x_d²)``, a cone containing u and v
    exists iff ``(a − s_u)² + v_d² < r²  or  a ≤ s_u`` (Eq. 23, equivalently ``a < s_u + s_v``);
    then ``Hgt = max(u_d, v_d, sqrt(r² − ((s_u + s_v − a)/2)²))`` (Eqs. 5/21), otherwise
    ``Hgt = sqrt(((a² + u_d² − v_d²)/(2a))² + v_d²)`` (Eqs. 6/22), the radius of the geodesic
    through u and v. Both branches equal ``r`` on the boundary (Eq. 33), so Hgt is continuous.
``cone-umbral`` (:class:`UmbralConeAttention`, Def. 2, Eq. 8)
    light source = the ideal point ``x_d = ∞``, points are balls of radius ``r`` (paper: 0.1):
    ``Hgt = max(u_d, v_d, a / (2 sinh r) + (u_d + v_d)/2)``; points come from ψ (Eq. 10).

Both heights are symmetric in (u, v). With ``u_d = v_d`` the umbral logits are
``−γ a / (2 sinh r)`` + const, i.e. softmax-normalised cone attention is the Laplacian kernel
(the limit stated after Eq. 8).

Composition with CAPE: when ``angles`` are given, q and k are rotated exactly as in
:class:`~cape_pipeline.models.attention.rotary.RotaryMultiheadAttention` (paper 000 Eq. 24, per-head
angle slices, interleaved pairs) *before* the map ξ/ψ; the height coordinate is the last
coordinate of each head (index ``Dh − 1``, which rotates with ``Dh − 2``).

Numerics: every sqrt argument and denominator is clamped (``_EPS``), each branch of the
piecewise penumbral formula is evaluated on inputs clipped to its own domain (so the branch
``torch.where`` discards never produces inf/NaN gradients), and ψ clamps ``x_d`` to
``±PSI_CLAMP`` (heights in ``[e^-15, e^15]``) so ``exp`` cannot overflow. Pairwise distances use
``‖u‖² + ‖v‖² − 2 u·v`` (a matmul), and queries are processed ``chunk_size`` rows at a time,
so the forward pass holds O(chunk · T) scalars per head and never an O(T² · Dh) tensor
(autograd still keeps O(T²) scalars per head for backward, as attention weights do).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from cape_pipeline.models.attention.rotary import RotaryMultiheadAttention

__all__ = [
    "xi_map",
    "psi_map",
    "penumbral_height",
    "umbral_height",
    "ConeAttention",
    "PenumbralConeAttention",
    "UmbralConeAttention",
]

_EPS = 1e-12
"""Floor for every sqrt argument and denominator (squared lengths)."""

PSI_CLAMP = 15.0
"""ψ clamps the height logit ``x_d`` to ``[−15, 15]`` (heights e^±15) to keep ``exp`` finite."""


def xi_map(x: torch.Tensor, height: float = 1.0) -> torch.Tensor:
    """Penumbral map ξ (paper 003 Eq. 11): ``ξ(x)_{:-1} = x_{:-1}·h·σ(x_d)``, ``ξ(x)_d = h·σ(x_d)``.

    ``x``: ``(..., d)`` float tensor, d ≥ 2; returns the same shape and dtype, a point of the
    half-space strictly below the light-source horosphere at height ``h``.
    """
    hgt = height * torch.sigmoid(x[..., -1:])
    return torch.cat([x[..., :-1] * hgt, hgt], dim=-1)


def psi_map(x: torch.Tensor) -> torch.Tensor:
    """Umbral map ψ (paper 003 Eq. 10): ``ψ(x)_{:-1} = x_{:-1}·e^{x_d}``, ``ψ(x)_d = e^{x_d}``.

    ``x``: ``(..., d)`` float tensor, d ≥ 2; returns the same shape and dtype. ``x_d`` is clamped
    to ``[−PSI_CLAMP, PSI_CLAMP]`` first (no overflow; zero gradient beyond the clamp).
    """
    hgt = torch.exp(x[..., -1:].clamp(-PSI_CLAMP, PSI_CLAMP))
    return torch.cat([x[..., :-1] * hgt, hgt], dim=-1)


def _pair_dist(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``(..., Mq, n), (..., Mk, n) → (..., Mq, Mk)`` Euclidean distances ``a`` (0 where
    ``a² ≤ _EPS``, with zero gradient there, so ``a = 0`` at ``u = v`` is exact and finite)."""
    sq = (u * u).sum(-1, keepdim=True) + (v * v).sum(-1).unsqueeze(-2) - 2.0 * (u @ v.transpose(-2, -1))
    return torch.where(sq > _EPS, torch.sqrt(sq.clamp_min(_EPS)), torch.zeros_like(sq))


def penumbral_height(u: torch.Tensor, v: torch.Tensor, r: float = 1.0) -> torch.Tensor:
    """Height of ``sup₂(u, v)`` for infinite-setting penumbral cones (paper 003 Def. 1, Eqs. 5–7,
    21–23), for all pairs.

    Parameters
    ----------
    u, v
        ``(..., Mq, d)`` and ``(..., Mk, d)`` points of the half-space (last coordinate is the
        height, expected in ``(0, r)``, e.g. from :func:`xi_map` with ``height=r``); leading
        axes broadcast.
    r
        Height of the horosphere light source.

    Returns
    -------
    torch.Tensor
        ``(..., Mq, Mk)`` heights, same dtype; ``≤ r`` when a cone contains both points (Eq. 21),
        ``> r`` otherwise (Eq. 22); symmetric under swapping u and v.
    """
    ud, vd = u[..., :, -1:], v[..., :, -1].unsqueeze(-2)  # (..., Mq, 1), (..., 1, Mk)
    a = _pair_dist(u[..., :-1], v[..., :-1])  # (..., Mq, Mk)
    su = torch.sqrt((r * r - ud * ud).clamp_min(_EPS))
    sv = torch.sqrt((r * r - vd * vd).clamp_min(_EPS))
    reach = su + sv
    in_cone = a < reach  # Eq. 23: (a − s_u)² + v_d² < r²  or  a ≤ s_u  ⟺  a < s_u + s_v
    # Eq. 21 on a clipped to its domain a ≤ s_u + s_v, so the sqrt argument is ≥ r² − r² = 0.
    half = (reach - torch.minimum(a, reach)) / 2
    sq_in = r * r - half * half
    # Eq. 22 on a clipped to its domain a ≥ s_u + s_v > 0 (denominator bounded away from 0).
    a_out = torch.maximum(a, reach)
    centre = (a_out * a_out + ud * ud - vd * vd) / (2 * a_out)
    sq_out = centre * centre + vd * vd
    hgt = torch.sqrt(torch.where(in_cone, sq_in, sq_out).clamp_min(_EPS))
    # max(u_d, v_d, ·) of Eq. 21; a no-op on the Eq. 22 branch (the geodesic through u and v
    # rises above both), so it is applied to both branches at once.
    return torch.maximum(torch.maximum(hgt, ud), vd)


def umbral_height(u: torch.Tensor, v: torch.Tensor, r: float = 0.1) -> torch.Tensor:
    """Height of ``sup₂(u, v)`` for infinite-setting umbral cones (paper 003 Def. 2, Eq. 8):
    ``max(u_d, v_d, ‖u_{:-1} − v_{:-1}‖ / (2 sinh r) + (u_d + v_d)/2)``.

    ``u``: ``(..., Mq, d)``, ``v``: ``(..., Mk, d)`` half-space points (e.g. :func:`psi_map`);
    ``r`` the radius of the ball around each point. Returns ``(..., Mq, Mk)``, symmetric in
    (u, v).
    """
    ud, vd = u[..., :, -1:], v[..., :, -1].unsqueeze(-2)
    a = _pair_dist(u[..., :-1], v[..., :-1])
    lca = a / (2 * math.sinh(r)) + (ud + vd) / 2
    return torch.maximum(torch.maximum(lca, ud), vd)


class ConeAttention(RotaryMultiheadAttention):
    """Base of the cone attentions: :class:`RotaryMultiheadAttention` (same constructor,
    ``forward``, fused ``in_proj``/``out_proj``, head layout, rotary angles — applied to q and k
    *before* the map into the half-space — and key padding mask) with the scores
    ``q kᵀ/sqrt(Dh)`` replaced by ``−γ_h · Hgt(map(q_i), map(k_j))`` (:meth:`attend`).

    Subclasses set :meth:`to_halfspace` (ξ or ψ) and :meth:`height` (Eq. 5–7 or 8).

    γ: ``γ_h = exp(log_gamma[h])`` (positive, one per head), initialised to 1. Why 1: the
    paper gives no value; with γ = 1 the in-cone penumbral logits span at most ``r = 1`` and
    the umbral logits grow like ``a/(2 sinh 0.1) ≈ 5a``, both of the same O(1)–O(10) order as
    scaled dot-product logits at initialisation, so attention starts neither uniform nor
    saturated and the log-parametrisation lets training rescale it multiplicatively.

    Parameters
    ----------
    embed_dim, num_heads, dropout, bias
        As :class:`RotaryMultiheadAttention` (head size Dh even and ≥ 2).
    chunk_size
        Query rows processed at a time (memory O(chunk_size · T) per head in the forward).

    Raises
    ------
    ValueError
        Bad sizes (as the parent), or ``chunk_size < 1``.
    """

    def __init__(
        self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True, *, chunk_size: int = 128
    ):
        super().__init__(embed_dim, num_heads, dropout=dropout, bias=bias)
        if chunk_size < 1:
            raise ValueError(f"chunk_size: expected a positive int, got {chunk_size}")
        self.chunk_size = int(chunk_size)
        self.log_gamma = nn.Parameter(torch.zeros(num_heads))

    @property
    def gamma(self) -> torch.Tensor:
        """``(H,)`` positive temperatures γ_h."""
        return self.log_gamma.exp()

    def to_halfspace(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        """Map ``(..., Dh)`` Euclidean vectors into the half-space ``𝖧^Dh``."""
        raise NotImplementedError

    def height(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        """Pairwise LCA heights ``(..., Mq, d), (..., Mk, d) → (..., Mq, Mk)``."""
        raise NotImplementedError

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        padded: torch.Tensor | None,
        bias: torch.Tensor | None,
        need_weights: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Cone scores in place of the dot product: logits ``−γ_h · Hgt(map(q_i), map(k_j))``
        (plus ``bias``), softmax, weighted values. The rotated Euclidean q and k are mapped into
        the half-space here; the cone arithmetic runs in float32 (float64 for float64 inputs),
        ``chunk_size`` query rows at a time; padding keys get probability exactly 0.

        Parameters and returns as :meth:`RotaryMultiheadAttention.attend`; ``weights`` is in
        ``v``'s dtype.
        """
        m = q.shape[2]
        work = torch.float64 if q.dtype == torch.float64 else torch.float32
        with torch.autocast(device_type=q.device.type, enabled=False):
            u = self.to_halfspace(q.to(work))  # (B, H, M, Dh)
            w = self.to_halfspace(k.to(work))
            gamma = self.gamma.to(work).view(1, -1, 1, 1)
            p_drop = self.dropout if self.training else 0.0
            outs, weights = [], []
            for start in range(0, m, self.chunk_size):
                stop = min(start + self.chunk_size, m)
                logits = -gamma * self.height(u[:, :, start:stop], w)  # (B, H, c, M)
                if bias is not None:
                    logits = logits + bias[..., start:stop, :].to(work)
                if padded is not None:
                    logits = logits.masked_fill(padded, float("-inf"))
                probs = F.dropout(torch.softmax(logits, dim=-1), p=p_drop, training=self.training)
                outs.append(probs.to(v.dtype) @ v)
                if need_weights:
                    weights.append(probs)
        out = torch.cat(outs, dim=2) if len(outs) > 1 else outs[0]  # (B, H, M, Dh)
        return out, (torch.cat(weights, dim=2).to(v.dtype) if need_weights else None)


class PenumbralConeAttention(ConeAttention):
    """``cone-penumbral``: ξ (Eq. 11, light-source height ``h = r = 1`` as in the paper's
    experiments) then the penumbral LCA height (Def. 1, Eqs. 5–7 / 21–23). See
    :class:`ConeAttention` for arguments, shapes and errors.
    """

    light_height: float = 1.0

    def to_halfspace(self, x: torch.Tensor) -> torch.Tensor:
        """ξ of Eq. 11 with ``h = light_height``."""
        return xi_map(x, self.light_height)

    def height(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Penumbral LCA heights (Eqs. 5–7 / 21–23), ``r = light_height``."""
        return penumbral_height(u, v, self.light_height)


class UmbralConeAttention(ConeAttention):
    """``cone-umbral``: ψ (Eq. 10) then the umbral LCA height (Def. 2, Eq. 8) with ball radius
    ``r = 0.1`` as in the paper's experiments. See :class:`ConeAttention` for arguments,
    shapes and errors.
    """

    radius: float = 0.1

    def to_halfspace(self, x: torch.Tensor) -> torch.Tensor:
        """ψ of Eq. 10."""
        return psi_map(x)

    def height(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Umbral LCA heights (Eq. 8), ``r = radius``."""
        return umbral_height(u, v, self.radius)
