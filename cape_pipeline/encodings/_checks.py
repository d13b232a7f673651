"""Invariants of :class:`~cape_pipeline.encodings.CapeEncodings`, checked on creation, save and load."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from cape_pipeline.errors import CapeDataError
from cape_pipeline.hyperbolic import lorentz

_ANGLE_RTOL = 1e-9
_ANGLE_ATOL = 1e-12
_POINCARE_ATOL = 1e-9


def poincare_from_hyperboloid(p: np.ndarray) -> np.ndarray:
    """Eq. A.22 for numpy arrays, ``(M, d+1) → (M, d)``: :func:`cape_pipeline.hyperbolic.lorentz.to_poincare`
    on a float64 view (off the hot path)."""
    return lorentz.to_poincare(torch.from_numpy(np.asarray(p, dtype=np.float64))).numpy()


def _hyperboloid_residual(p: np.ndarray) -> np.ndarray:
    """``(⟨p, p⟩_l + 1) / max(1, (p⁰)²)``: relative violation of Eq. 11 per row."""
    p = np.asarray(p, dtype=np.float64)
    q = lorentz.constraint_residual(torch.from_numpy(p)).numpy()
    return q / np.maximum(1.0, p[:, 0] ** 2)


def _validate_arrays(enc: Any, *, where: str) -> None:
    """Shapes, finiteness, ‖e‖ < 1, φ = scale·ω·e (ω = 1 without per-pair frequencies),
    e = f_d(p), ⟨p, p⟩_l = −1; raise CapeDataError."""
    m = enc.feature_names.size
    d = enc.angles.shape[1] if enc.angles.ndim == 2 else -1
    shapes = {
        "angles": (enc.angles.shape, (m, d)),
        "poincare": (enc.poincare.shape, (m, d)),
        "hyperboloid": (enc.hyperboloid.shape, (m, d + 1)),
        "pagerank": (enc.pagerank.shape, (m,)),
    }
    for name, (got, want) in shapes.items():
        if d < 1 or got != want:
            raise CapeDataError(f"{where}: {name} has shape {got}, expected {want}")
    names = enc.feature_names.astype(str)
    if np.unique(names).size != m:
        raise CapeDataError(f"{where}: feature names are not unique")
    for name in ("angles", "poincare", "hyperboloid", "pagerank"):
        if not np.isfinite(getattr(enc, name)).all():
            raise CapeDataError(f"{where}: {name} contains NaN or inf")
    norms = np.linalg.norm(enc.poincare, axis=1)
    if (norms >= 1.0).any():
        bad = names[norms >= 1.0][:5].tolist()
        raise CapeDataError(f"{where}: Poincaré points must satisfy ‖e‖ < 1; violated for {bad}")
    freq = getattr(enc, "frequencies", None)
    if freq is not None:
        freq = np.asarray(freq, dtype=np.float64)
        if freq.shape != (d,) or not np.isfinite(freq).all() or (freq <= 0).any():
            raise CapeDataError(f"{where}: frequencies must be {d} finite positive numbers, got shape {freq.shape}")
    mult = enc.scale if freq is None else enc.scale * freq
    if not np.allclose(enc.angles, mult * enc.poincare, rtol=_ANGLE_RTOL, atol=_ANGLE_ATOL):
        what = "scale · poincare" if freq is None else "scale · frequencies · poincare"
        raise CapeDataError(f"{where}: angles differ from {what} (scale={enc.scale})")
    res = np.abs(_hyperboloid_residual(enc.hyperboloid))
    if (res > 1e-8).any() or (enc.hyperboloid[:, 0] <= 0).any():
        raise CapeDataError(
            f"{where}: hyperboloid points violate ⟨p, p⟩_l = −1, p⁰ > 0 (max relative error {res.max():.2e})"
        )
    if not np.allclose(
        enc.poincare, poincare_from_hyperboloid(enc.hyperboloid), atol=_POINCARE_ATOL, rtol=0
    ):
        raise CapeDataError(
            f"{where}: poincare differs from p̃ / (p⁰ + 1) of the hyperboloid points"
        )
