"""Step III: rotary form of the CAPE encodings and their export (paper 000, Sec. 3.5).

The attention that applies them is :class:`cape_pipeline.models.RotaryMultiheadAttention`."""

from __future__ import annotations

from cape_pipeline.encodings.angles import encode
from cape_pipeline.encodings.config import DEFAULT_SCALE, EncodeConfig
from cape_pipeline.encodings.export import CapeEncodings, load_encodings
from cape_pipeline.encodings.rope import apply_rotary

__all__ = [
    "CapeEncodings",
    "DEFAULT_SCALE",
    "EncodeConfig",
    "encode",
    "load_encodings",
    "apply_rotary",
]
