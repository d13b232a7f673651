"""Pure tensor functions on the Lorentz (hyperboloid) model H^d of curvature −1.

Paper 000, Sec. 3.4 and App. A.2. A point is ``p = (p⁰, p̃) ∈ R^{d+1}`` with ⟨p, p⟩_l = −1 and
p⁰ > 0 (Eq. 11); the origin is ``p_o = (1, 0, …, 0)``. Every function here is stateless, works on
the last axis, broadcasts over leading axes and keeps the input dtype (use float64: geoopt
recommends double precision for this manifold). The optimizer-facing manifold object is
``geoopt.Lorentz``; these helpers are the closed forms the loss and the export use.

Where geoopt's Lorentz math (``geoopt.manifolds.lorentz.math`` with k = 1: geoopt's hyperboloid
is ⟨x, x⟩_l = −k, curvature −1/k) gives the same numbers, the functions below call it:
:func:`minkowski_inner`, :func:`project` (``projx``), :func:`to_poincare` and :func:`from_poincare`
(``lorentz_to_poincare`` / ``poincare_to_lorentz`` with ``eps=0``). The others stay here because
geoopt's differ numerically where this package needs them:

- ``arcosh``/``dist``/``dist0``: geoopt clamps x² − 1 at 1e-15 instead of x at 1 + :data:`ACOSH_EPS`,
  so distances of (nearly) coincident points differ by up to ~1e-6 and the loss's trajectory
  with them; geoopt also has no all-pairs form (:func:`pairwise_dist`) that avoids a
  ``(B, N, d+1)`` tensor;
- ``expmap0``/``logmap0``: geoopt clamps the Minkowski norm at 1e-4, which changes the result by
  up to ~1e-9 (relative) for ``‖u‖ < 1e-4`` (``embed`` starts from ‖u‖ ≈ 1e-3) and makes
  ``logmap0`` wrong near the origin.
"""

from __future__ import annotations

import torch
from geoopt.manifolds.lorentz import math as _gmath

#: Lower clamp for −⟨p, q⟩_l before arcosh: keeps d arcosh/dx = 1/sqrt(x² − 1) finite when two
#: points coincide (the gradient through a clamped entry is zero).
ACOSH_EPS = 1e-12

#: geoopt's k for the unit hyperboloid ⟨x, x⟩_l = −1 (curvature −1): a 0-dim tensor, so it
#: neither changes the dtype nor the device of the points it meets.
_K = torch.tensor(1.0, dtype=torch.float64)


def minkowski_inner(u: torch.Tensor, v: torch.Tensor, *, keepdim: bool = False) -> torch.Tensor:
    r"""Minkowski (Lorentzian) inner product ⟨u, v⟩_l = −u⁰v⁰ + ũᵀṽ (paper 000, Eq. 12).

    Parameters
    ----------
    u, v
        ``(..., d+1)`` tensors (broadcastable).
    keepdim
        Keep the reduced last axis (size 1).

    Returns
    -------
    torch.Tensor
        ``(...)`` (or ``(..., 1)``) inner products, same dtype as the inputs.
    """
    out = _gmath.inner(u, v, keepdim=False)
    return out.unsqueeze(-1) if keepdim else out


def pairwise_minkowski_inner(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """All-pairs Minkowski inner products ⟨x_i, y_j⟩_l as one matrix product (Eq. 12).

    Parameters
    ----------
    x
        ``(B, d+1)`` points.
    y
        ``(N, d+1)`` points.

    Returns
    -------
    torch.Tensor
        ``(B, N)`` matrix; never materializes a ``(B, N, d+1)`` tensor.
    """
    y_flip = torch.cat([-y[..., :1], y[..., 1:]], dim=-1)  # g_l y
    return x @ y_flip.transpose(-1, -2)


def arcosh(x: torch.Tensor, *, eps: float = ACOSH_EPS) -> torch.Tensor:
    """Numerically safe arcosh for arguments that should be ≥ 1.

    ``x`` is clamped to ``[1 + eps, ∞)`` so that round-off (x slightly below 1) gives 0-ish
    distances rather than NaN and the derivative stays finite.

    Parameters
    ----------
    x
        Any-shape tensor.
    eps
        Clamp margin above 1.

    Returns
    -------
    torch.Tensor
        ``log(x + sqrt(x² − 1))`` elementwise, same shape and dtype.
    """
    x = torch.clamp_min(x, 1.0 + eps)
    return torch.log(x + torch.sqrt((x - 1.0) * (x + 1.0)))


def dist(x: torch.Tensor, y: torch.Tensor, *, keepdim: bool = False) -> torch.Tensor:
    """Geodesic distance d_l(x, y) = arcosh(−⟨x, y⟩_l) (paper 000, Sec. 3.4).

    Parameters
    ----------
    x, y
        ``(..., d+1)`` points on H^d (broadcastable).
    keepdim
        Keep the reduced last axis.

    Returns
    -------
    torch.Tensor
        ``(...)`` non-negative distances (curvature −1, so unitless "hyperbolic units").
    """
    return arcosh(-minkowski_inner(x, y, keepdim=keepdim))


def pairwise_dist(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """All-pairs geodesic distances, ``(B, d+1) × (N, d+1) → (B, N)``.

    Uses :func:`pairwise_minkowski_inner`, so memory is O(B·N), not O(B·N·d).
    """
    return arcosh(-pairwise_minkowski_inner(x, y))


def dist0(x: torch.Tensor, *, keepdim: bool = False) -> torch.Tensor:
    """Distance to the origin p_o = (1, 0, …, 0): d_l(x, p_o) = arcosh(x⁰).

    Paper 000 Eq. 14 (causal specificity ℓ(v_m) ∝ d_l(p_m, p_o): a causally general feature sits
    near the origin) and the regularizer of Eq. 17. The paper writes ``p⁰ = sqrt(1 + ‖p̃‖)``, a
    monotone stand-in; this is the exact distance (``docs/equations.md``).

    Parameters
    ----------
    x
        ``(..., d+1)`` points on H^d.

    Returns
    -------
    torch.Tensor
        ``(...)`` distances.
    """
    out = arcosh(x[..., 0])
    return out.unsqueeze(-1) if keepdim else out


def project(x: torch.Tensor) -> torch.Tensor:
    """Project onto H^d by recomputing the time coordinate: x⁰ = sqrt(1 + ‖x̃‖²).

    Parameters
    ----------
    x
        ``(..., d+1)``; only ``x[..., 1:]`` is used.

    Returns
    -------
    torch.Tensor
        ``(..., d+1)`` points with ⟨x, x⟩_l = −1 up to round-off.
    """
    return _gmath.project(x, k=_K)


def expmap0(u: torch.Tensor) -> torch.Tensor:
    """Exponential map at the origin for a tangent vector given by its spatial part.

    ``exp_{p_o}((0, ũ)) = (cosh‖ũ‖, sinh‖ũ‖ · ũ/‖ũ‖)`` (paper 000, Prop. A.3 at p_o).

    Parameters
    ----------
    u
        ``(..., d)`` spatial part of a tangent vector at the origin (the time part is 0).

    Returns
    -------
    torch.Tensor
        ``(..., d+1)`` points on H^d; ``u = 0`` maps to the origin.
    """
    r = torch.linalg.vector_norm(u, dim=-1, keepdim=True)
    safe = torch.clamp_min(r, 1e-300 if u.dtype == torch.float64 else 1e-30)
    scale = torch.where(r > 0, torch.sinh(r) / safe, torch.ones_like(r))
    return torch.cat([torch.cosh(r), scale * u], dim=-1)


def logmap0(x: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`expmap0`: the spatial tangent vector at p_o pointing to ``x``.

    Parameters
    ----------
    x
        ``(..., d+1)`` points on H^d.

    Returns
    -------
    torch.Tensor
        ``(..., d)`` vectors ``u`` with ``‖u‖ = d_l(x, p_o)``.
    """
    space = x[..., 1:]
    n = torch.linalg.vector_norm(space, dim=-1, keepdim=True)
    d = dist0(x, keepdim=True)
    safe = torch.clamp_min(n, 1e-300 if x.dtype == torch.float64 else 1e-30)
    return torch.where(n > 0, d / safe, torch.ones_like(n)) * space


def to_poincare(x: torch.Tensor) -> torch.Tensor:
    """Hyperboloid → Poincaré ball, e = p̃ / (p⁰ + 1) (paper 000, Eq. A.22).

    Parameters
    ----------
    x
        ``(..., d+1)`` points on H^d.

    Returns
    -------
    torch.Tensor
        ``(..., d)`` points with ‖e‖ < 1 (‖e‖ = tanh(d_l(x, p_o)/2)).
    """
    return _gmath.lorentz_to_poincare(x, _K)


def from_poincare(e: torch.Tensor) -> torch.Tensor:
    """Poincaré ball → hyperboloid, p = (1 + ‖e‖², 2e) / (1 − ‖e‖²) (paper 000, Eq. A.23).

    Parameters
    ----------
    e
        ``(..., d)`` points with ‖e‖ < 1.

    Returns
    -------
    torch.Tensor
        ``(..., d+1)`` points on H^d.
    """
    return _gmath.poincare_to_lorentz(e, _K, eps=0.0)


def constraint_residual(x: torch.Tensor) -> torch.Tensor:
    """``⟨x, x⟩_l + 1`` per point: zero on H^d (Eq. 11). ``(..., d+1) → (...)``."""
    return minkowski_inner(x, x) + 1.0


# ---- distances with finite gradients everywhere (attention in float32: models.attention.riemann)

SMOOTH_SMALL = 1e-4
"""Below this ``u = cosh d − 1`` the squared distance of :func:`pairwise_dist_smooth` and
:func:`dist0_smooth` uses ``2u − u²/3`` (error O(u³))."""

SMOOTH_EPS = 1e-12
"""Squared distances at or below this give distance 0 (zero gradient) in the sqrt."""


def _sq_from_cosh_minus_one(u: torch.Tensor) -> torch.Tensor:
    """``arccosh(1 + u)²`` for ``u = cosh d − 1`` (clamped to ≥ 0), with finite gradients at 0."""
    u = u.clamp_min(0.0)
    big = torch.acosh(1.0 + u.clamp_min(SMOOTH_SMALL)) ** 2
    return torch.where(u > SMOOTH_SMALL, big, 2.0 * u - u * u / 3.0)


def _safe_sqrt(sq: torch.Tensor) -> torch.Tensor:
    return torch.where(sq > SMOOTH_EPS, torch.sqrt(sq.clamp_min(SMOOTH_EPS)), torch.zeros_like(sq))


def pairwise_sq_dist_smooth(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """All-pairs squared geodesic distances ``d_H(x_i, y_j)²``: ``(..., N, d+1), (..., K, d+1) →
    (..., N, K)``, same dtype, from ``u = x0 y0 − ⟨x_{1:}, y_{1:}⟩ − 1`` (one matmul) as
    ``arccosh(1 + u)²`` or, for ``u ≤`` :data:`SMOOTH_SMALL`, ``2u − u²/3``: finite gradients at
    coincident points. Precision: ``u`` loses ~``x0·y0·ε`` absolutely far from the origin."""
    z = x[..., :, :1] * y[..., :, 0].unsqueeze(-2) - x[..., :, 1:] @ y[..., :, 1:].transpose(-2, -1)
    return _sq_from_cosh_minus_one(z - 1.0)


def dist0_smooth(x: torch.Tensor) -> torch.Tensor:
    """Geodesic distance from the origin ``o = (1, 0, …, 0)``: ``ρ = arccosh(max(1, x0))``.

    Parameters
    ----------
    x
        ``(..., d+1)`` float points of the hyperboloid (Lorentz model, curvature −1,
        coordinates ``(x0, x1..xd)``, ``x0 = sqrt(1 + ‖x_{1:}‖²)``).

    Returns
    -------
    torch.Tensor
        ``(...)`` distances (dimensionless, curvature −1 units), same dtype and device; exactly
        0 with finite (zero) gradient at the origin. Source: paper 001 Eq. 9 with ``m → ρ_m``.
    """
    return _safe_sqrt(_sq_from_cosh_minus_one(x[..., 0] - 1.0))


def pairwise_dist_smooth(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """All-pairs geodesic distances ``d_H(x_i, y_j) = arccosh(max(1, x0 y0 − ⟨x_{1:}, y_{1:}⟩))``.

    Parameters
    ----------
    x, y
        ``(..., N, d+1)`` and ``(..., K, d+1)`` float hyperboloid points (Lorentz model,
        curvature −1); leading axes broadcast.

    Returns
    -------
    torch.Tensor
        ``(..., N, K)`` distances, same dtype; 0 with finite gradients for coincident points.
        Its square enters Ω of paper 001 Eqs. 21–22.
    """
    return _safe_sqrt(pairwise_sq_dist_smooth(x, y))
