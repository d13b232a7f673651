"""Options of Step III (:func:`cape_pipeline.encodings.encode`), defined and validated once."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from cape_pipeline._config import FromOptions
from cape_pipeline.errors import CapeConfigError

__all__ = ["DEFAULT_SCALE", "EncodeConfig"]

#: c of the angle map φ = c·e (Sec. 3.5, below Eq. 25): angles φ = c · e lie in (−π/4, π/4) radians.
DEFAULT_SCALE = math.pi / 4


@dataclass(frozen=True)
class EncodeConfig(FromOptions):
    """Options of :func:`~cape_pipeline.encodings.encode` (Step III), validated on construction.

    Attributes
    ----------
    scale
        The constant c of φ = c·e (Sec. 3.5, below Eq. 25) (radians per unit of Poincaré coordinate), > 0: the angles are
        φ = c·e. The default π/4 keeps every angle in (−π/4, π/4).

    Raises
    ------
    CapeConfigError
        On construction, if ``scale`` is not a finite positive number.
    """

    _method: ClassVar[str] = "encode"

    scale: float = DEFAULT_SCALE

    def __post_init__(self) -> None:
        scale = self.scale
        if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
            raise CapeConfigError(f"scale: expected a finite number > 0, got {scale!r}")
