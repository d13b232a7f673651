"""The PEs built on CAPE angles: rotary on q/k (Eqs. 24–26), the rotated input (Eq. F.108),
the additive w/o-rotary ablation (Table 3) and, ours, the rotary with a learned per-head scale.

``cape-learned-scale`` (a third angle map, beside a larger fixed scale and geometric
frequencies). Paper 000 fixes the angle map at φ = c·e with c = π/4 (Sec. 3.5, below Eq. 25).
This PE keeps the CAPE angles it is given (by default those of φ = (π/4)·e) and lets every
head learn how fast it turns them: head h rotates q and k by ``exp(s_h) · φ`` over its slice of
the D/2 angles, with ``s_h`` a trained scalar initialized at 0, so training starts at the paper's
map exactly. The score of head h then depends on ``exp(s_h) · (φ_n − φ_m)``, still only on the
angle difference (Eq. 25). The scale is parameterized in log space so it stays positive, and
it is trained with the rest of the model (AdamW; the weight decay the training loop applies to
every parameter pulls ``s_h`` towards 0, i.e. towards the paper's map).

Deviation, documented: this is ours, not the paper's. It answers the question whether
a trained model wants larger angles than π/4 gives (median |φ| ≈ 0.06 rad on
pbmc68k_reduced); :meth:`CapeLearnedScalePE.head_scales` reads the learned factors.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.models.pe.base import PositionalEncoding

__all__ = ["CapeRotaryPE", "CapeInputPE", "CapeAdditivePE", "CapeLearnedScalePE", "check_angles"]


def _rotate(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs ``(2i, 2i+1)`` of ``x`` by ``angles[..., i]`` (Eq. 26).

    Delegates to :func:`cape_pipeline.encodings.rope.apply_rotary`; ``angles`` ``(..., T, D/2)``
    broadcasts against ``x`` ``(..., T, D)``.
    """
    from cape_pipeline.encodings.rope import apply_rotary

    return apply_rotary(x, angles)


def check_angles(angles: np.ndarray | torch.Tensor | None, n_features: int, *, name: str = "angles") -> torch.Tensor:
    """Validate CAPE angles and return them as a float32 tensor ``(M, d)``.

    Raises
    ------
    CapeDataError
        If ``angles`` is missing, not 2-D, has the wrong number of rows, or holds NaN/inf.
    """
    if angles is None:
        raise CapeDataError(f"{name}: CAPE angles are required (an (n_vars, d) array), got None")
    a = torch.as_tensor(np.asarray(angles) if not isinstance(angles, torch.Tensor) else angles)
    if a.ndim != 2:
        raise CapeDataError(f"{name}: expected a 2-D (n_vars, d) array, got shape {tuple(a.shape)}")
    if a.shape[0] != n_features:
        raise CapeDataError(
            f"{name}: {a.shape[0]} rows but the data has {n_features} features; align the "
            "encodings to var_names first (cape_pipeline.encodings)"
        )
    a = a.to(torch.float32)
    if not torch.isfinite(a).all():
        raise CapeDataError(f"{name}: contains NaN or inf")
    return a


class CapeRotaryPE(PositionalEncoding):
    """CAPE rotary PE on q and k (paper 000 Eqs. 24–26).

    ``q_m ← R(φ_m) W_q v_m``, ``k_n ← R(φ_n) W_k v_n``, values untouched, so the score
    ``q_mᵀ R(φ_n − φ_m) k_n`` depends on the angle difference only (Eq. 25).

    Parameters
    ----------
    angles
        ``(M, D/2)`` float, φ = (π/4)·e (Sec. 3.5, below Eq. 25), stored as a buffer (not trained).
    d_model
        Model width D.

    Raises
    ------
    CapeDataError
        If ``angles`` does not have ``D/2`` columns.
    """

    name = "cape"

    def __init__(self, angles: torch.Tensor, d_model: int) -> None:
        super().__init__()
        if angles.shape[1] != d_model // 2:
            raise CapeDataError(
                f"pe={self.name!r}: rotary needs d = D/2 = {d_model // 2} angle columns, got "
                f"{angles.shape[1]}; set the width to D = {2 * angles.shape[1]} (config={{'model': {{'d_model': "
                f"{2 * angles.shape[1]}}}}}, CLI --set train.d_model={2 * angles.shape[1]}), or embed with dim={d_model // 2} "
                f"(tl.embed(adata, dim={d_model // 2}), --set embed.dim={d_model // 2}), or use pe='cape-additive'"
            )
        self.register_buffer("angles", angles.clone())

    def rotary(self, idx: torch.Tensor) -> torch.Tensor:
        """Angles of each token's feature: (B, T) → (B, T, D/2)."""
        return self.angles[idx]


class CapeInputPE(CapeRotaryPE):
    """CAPE input rotation F(v, φ) = R(φ) v, applied once to the token embedding (Eq. F.108)."""

    name = "cape-input"

    def embed(self, h: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """(B, T, D) → (B, T, D): rotate each token's pairs by its feature's angles."""
        return _rotate(h, self.angles[idx])

    def rotary(self, idx: torch.Tensor) -> None:
        """No q/k rotation (the input was rotated instead)."""


class CapeAdditivePE(PositionalEncoding):
    """CAPE w/o-rotary ablation: add ``Linear(e)`` to the token embedding (Table 3).

    ``e`` is the per-feature CAPE vector ``(M, d_e)`` (angles or Poincaré points; they differ
    by the constant π/4, which the linear map absorbs). Any ``d_e`` works: a ``Linear(d_e, D)``
    projects it to the model width.
    """

    name = "cape-additive"

    def __init__(self, angles: torch.Tensor, d_model: int) -> None:
        super().__init__()
        self.register_buffer("e", angles.clone())
        self.proj = nn.Linear(angles.shape[1], d_model)

    def embed(self, h: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """(B, T, D) + Linear(e[idx]) (B, T, D)."""
        return h + self.proj(self.e[idx])



class CapeLearnedScalePE(CapeRotaryPE):
    """CAPE rotary PE on q and k with a learned scale per head: φ_h ← exp(s_h) · φ_h.

    Parameters
    ----------
    angles
        ``(M, D/2)`` float CAPE angles φ in radians (a buffer, not trained).
    d_model
        Model width D.
    n_heads
        Heads H; head h owns angle columns ``h·D/(2H) … (h+1)·D/(2H) − 1`` (the slices of
        :class:`~cape_pipeline.models.attention.rotary.RotaryMultiheadAttention`).

    Attributes
    ----------
    log_scale
        ``(H,)`` float32 parameter s, initialized at 0 (scale 1: the given angles as they are).

    Raises
    ------
    CapeDataError
        If ``angles`` does not have ``D/2`` columns.
    CapeConfigError
        If ``D/2`` is not divisible by ``n_heads``.
    """

    name = "cape-learned-scale"

    def __init__(self, angles: torch.Tensor, d_model: int, n_heads: int) -> None:
        super().__init__(angles, d_model)
        if n_heads <= 0 or (d_model // 2) % n_heads:
            raise CapeConfigError(
                f"pe='cape-learned-scale': D/2 = {d_model // 2} angle columns must split evenly into n_heads={n_heads}"
            )
        self.n_heads = int(n_heads)
        self.log_scale = nn.Parameter(torch.zeros(n_heads))

    def head_scales(self) -> torch.Tensor:
        """The learned factor of each head, ``exp(s)`` ``(H,)`` (1 = the paper's map)."""
        return self.log_scale.detach().exp()

    def rotary(self, idx: torch.Tensor) -> torch.Tensor:
        """Scaled angles of each token's feature: (B, T) → (B, T, D/2)."""
        per_col = self.log_scale.exp().repeat_interleave(self.angles.shape[1] // self.n_heads)  # (D/2,)
        return self.angles[idx] * per_col
