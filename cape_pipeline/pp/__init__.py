"""Preprocessing per modality (scanpy), recognizing input that is already normalized.

Paper 000 Supp. F.1: QC (min genes per cell), ``normalize_total`` to 1e4, ``log1p``, top-n
highly variable features. Proteomics and methylation take their own paths (no library-size
normalization; missing values allowed).
"""

from __future__ import annotations

from cape_pipeline.pp._counts import recover_counts
from cape_pipeline.pp._preprocess import PreprocessConfig, detect_input_state, preprocess

__all__ = ["preprocess", "PreprocessConfig", "detect_input_state", "recover_counts"]
