"""Step III: rotary form of the CAPE encodings and their export (paper 000, Sec. 3.5)."""

from __future__ import annotations

from cape_pipeline.encodings.angles import CapeEncodings, encode, load_encodings
from cape_pipeline.encodings.rope import RotaryMultiheadAttention, apply_rotary

__all__ = ["CapeEncodings", "encode", "load_encodings", "apply_rotary", "RotaryMultiheadAttention"]
