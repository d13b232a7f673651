"""Rotary injection of CAPE angles into attention (paper 000, Sec. 3.5).

Eq. 22 injects a position into the queries and keys, q = 𝓘_q(v, e), k = 𝓘_k(v, e); Eq. 23 asks
the score to depend on the relative position γ(e_m, e_n). The rotary choice of 𝓘 (Eq. 24) meets
Eq. 23 exactly, as Eq. 25 shows.

``R(φ)`` is block diagonal with 2×2 blocks ``r(φ_i) = [[cos φ_i, −sin φ_i], [sin φ_i, cos φ_i]]``
(Eq. 26). **Pairing convention: interleaved** — angle ``i`` rotates the model dimensions
``(2i, 2i+1)``:

    y[2i]   = x[2i] cos φ_i − x[2i+1] sin φ_i
    y[2i+1] = x[2i] sin φ_i + x[2i+1] cos φ_i

Queries and keys are rotated (Eq. 24), values are not; then
``⟨R(φ_m) q, R(φ_n) k⟩ = qᵀ R(φ_n − φ_m) k`` depends on the angles only through φ_n − φ_m
(Eq. 25). With H heads of size Dh = D/H, head h uses the angle slice
``angles[..., h·Dh/2 : (h+1)·Dh/2]``.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["apply_rotary", "rotations"]


def apply_rotary(x: torch.Tensor, angles: torch.Tensor | Any) -> torch.Tensor:
    """Rotate each feature's vector by its CAPE angles, ``x_m ← R(φ_m) x_m`` (Eqs. 24, 26).

    Parameters
    ----------
    x
        ``(..., M, D)`` tensor (queries, keys or token embeddings), D even, any float dtype and
        device.
    angles
        ``(M, D/2)`` angles in radians (tensor or array-like), or any shape ``(..., M, D/2)``
        that broadcasts against ``x``'s leading axes (e.g. ``(B, M, D/2)`` when every sample has
        its own feature set, or ``(H, M, Dh/2)`` per head). Angle i rotates the pair
        (2i, 2i+1) (interleaved convention). A complex tensor is taken as the precomputed
        rotations e^{jφ} (:func:`rotations`), so layers that share angles compute them once.

    Returns
    -------
    torch.Tensor
        Same shape, dtype and device as ``x``. The rotation is computed in float32 (float64 if
        ``x`` is float64) with autocast disabled, then cast back to ``x.dtype``.

    Raises
    ------
    ValueError
        If D is odd, ``angles`` has fewer than 2 axes, its last axis is not D/2, or its
        feature axis does not match ``x.shape[-2]``.

    Examples
    --------
    >>> import math, torch
    >>> x = torch.tensor([[1.0, 0.0]])                 # M = 1, D = 2
    >>> apply_rotary(x, torch.tensor([[math.pi / 2]])).round(decimals=6).abs()
    tensor([[0., 1.]])
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
    if x.ndim < 2:
        raise ValueError(f"x: expected shape (..., M, D), got {tuple(x.shape)}")
    m, dim = x.shape[-2], x.shape[-1]
    if dim % 2:
        raise ValueError(f"x: the last dimension D={dim} must be even (one angle per pair)")
    ang = torch.as_tensor(angles, device=x.device)
    if ang.ndim < 2:
        raise ValueError(f"angles: expected shape (M, D/2), got {tuple(ang.shape)}")
    if ang.shape[-1] != dim // 2:
        raise ValueError(
            f"angles: last dimension {ang.shape[-1]} must equal D/2 = {dim // 2} (x has D={dim})"
        )
    if ang.shape[-2] != m:
        raise ValueError(
            f"angles: {ang.shape[-2]} features, but x has M={m} along axis -2 "
            "(align the encodings to the data's features first)"
        )
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    with torch.autocast(device_type=x.device.type, enabled=False):
        # pair (2i, 2i+1) as the complex number x_2i + j·x_2i+1; R(φ_i) is multiplication by
        # e^{jφ_i}: (x_2i cos φ − x_2i+1 sin φ) + j(x_2i sin φ + x_2i+1 cos φ). One complex
        # multiply is faster (forward + backward, CPU) than the real-arithmetic form.
        xc = torch.view_as_complex(x.to(work).reshape(*x.shape[:-1], dim // 2, 2).contiguous())  # (..., M, D/2)
        # e^{jφ} precomputed by rotations() (shared by several calls) or computed here, (..., M, D/2)
        rot = ang.to(xc.dtype) if ang.is_complex() else rotations(ang.to(work))
        y = torch.view_as_real(xc * rot).flatten(-2)  # (..., M, D), interleaved as before
    return y.to(x.dtype)


def rotations(angles: torch.Tensor) -> torch.Tensor:
    """Unit complex numbers e^{jφ} of ``angles`` (same shape, complex64 or complex128).

    Pass the result to :func:`apply_rotary` in place of the angles when several calls (layers,
    q and k) share them: R(φ) is then one complex multiply per call.
    """
    a = angles if angles.dtype in (torch.float32, torch.float64) else angles.float()
    return torch.polar(torch.ones_like(a), a)
