"""Options of Step III (:func:`cape_pipeline.encodings.encode`), defined and validated once."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from cape_pipeline._config import FromOptions
from cape_pipeline.errors import CapeConfigError

__all__ = ["DEFAULT_SCALE", "FREQUENCY_MAPS", "EncodeConfig", "pair_frequencies", "angles_from_poincare"]

#: c of the angle map φ = c·e (Sec. 3.5, below Eq. 25): angles φ = c · e lie in (−π/4, π/4) radians.
DEFAULT_SCALE = math.pi / 4

#: The angle maps: ``single`` is the paper's φ = c·e (one frequency c for every pair);
#: ``geometric`` gives pair i its own frequency c·ω_i, ω_i geometric over [1, ``frequency_range``].
FREQUENCY_MAPS = ("single", "geometric")


@dataclass(frozen=True)
class EncodeConfig(FromOptions):
    """Options of :func:`~cape_pipeline.encodings.encode` (Step III), validated on construction.

    The angle map is ``φ_i = scale · ω_i · e_i`` for the rotary pair i (i = 0 … d−1) of a
    feature with Poincaré point e. The paper's map (Sec. 3.5, below Eq. 25) is ω_i = 1 and
    ``scale`` = π/4. A learned per-head scale is a trained parameter, so it is a PE of the
    model, not an option here: ``pe="cape-learned-scale"`` (``--set
    'train.compare=[default,cape-learned-scale]'``), which starts at these angles.

    Attributes
    ----------
    scale
        The constant c of φ = c·e (Sec. 3.5, below Eq. 25) (radians per unit of Poincaré
        coordinate), > 0. The default π/4 keeps every angle in (−π/4, π/4).
    frequencies
        ``"single"`` (default, the paper): ω_i = 1 for every pair. ``"geometric"``: RoPE's
        multi-frequency idea (Su et al. 2021, RoFormer Eq. 15, where pair i turns at its own
        θ_i over a geometric range) applied to the coordinate a pair rotates:
        ω_i = ``frequency_range`` ^ (i / (d − 1)), so pair 0 keeps the paper's c and pair d−1
        turns ``frequency_range`` times faster. The heads take contiguous slices of the d
        pairs, so head h sees the h-th sub-range of frequencies.
    frequency_range
        ω_{d−1} / ω_0 of the ``geometric`` map, ≥ 1 (default 100; ignored for ``single``).

    Raises
    ------
    CapeConfigError
        On construction, if ``scale`` is not a finite positive number, ``frequencies`` is not
        one of :data:`FREQUENCY_MAPS` or ``frequency_range`` is not a finite number ≥ 1.
    """

    _method: ClassVar[str] = "encode"

    scale: float = DEFAULT_SCALE
    frequencies: str = "single"
    frequency_range: float = 100.0

    def __post_init__(self) -> None:
        scale = self.scale
        if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
            raise CapeConfigError(f"scale: expected a finite number > 0, got {scale!r}")
        if self.frequencies not in FREQUENCY_MAPS:
            raise CapeConfigError(f"frequencies: expected one of {list(FREQUENCY_MAPS)}, got {self.frequencies!r}")
        r = self.frequency_range
        if not (isinstance(r, (int, float)) and math.isfinite(r) and r >= 1):
            raise CapeConfigError(f"frequency_range: expected a finite number >= 1, got {r!r}")


def pair_frequencies(d: int, config: EncodeConfig) -> np.ndarray | None:
    """The per-pair frequency multipliers ω (``(d,)`` float64, ω_0 = 1) of ``config``'s angle
    map, or ``None`` for the paper's single frequency (ω_i = 1). See :class:`EncodeConfig`."""
    if config.frequencies == "single":
        return None
    return np.asarray(float(config.frequency_range), dtype=np.float64) ** (np.arange(d) / max(d - 1, 1))


def angles_from_poincare(e: np.ndarray, config: EncodeConfig) -> tuple[np.ndarray, np.ndarray | None]:
    """The angle map of ``config`` on Poincaré points ``e`` ``(M, d)``: ``(φ, ω)`` with
    φ = scale · ω · e ``(M, d)`` float64 radians and ω the :func:`pair_frequencies`
    (``None``, i.e. φ = scale · e, for the paper's single frequency; Sec. 3.5, below Eq. 25)."""
    e = np.asarray(e, dtype=np.float64)
    freq = pair_frequencies(e.shape[1], config)
    mult = float(config.scale) if freq is None else float(config.scale) * freq
    return mult * e, freq
