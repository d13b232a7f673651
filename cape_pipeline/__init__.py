"""cape_pipeline: causality-induced positional encoding (CAPE) for tabular omics.

Learn the causal DAG among features, embed it on the hyperboloid, turn it into rotary angles
and hand those to transformers (Xu et al., CAPE; paper 000 in shared/papers).

The torch-based parts (``discover``, ``embed``, ``encode``, ``load_encodings``,
``apply_rotary``, ``tl``, ``pl``, ``models``, ``tasks``) are imported on first use, so that
``import cape_pipeline`` and the ``cape`` command start quickly.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

from cape_pipeline import pp
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.errors import CapeConfigError, CapeDataError, CapeFileError, CapeInputError
from cape_pipeline.io import read

try:  # read once from the installed metadata
    __version__ = importlib.metadata.version("cape_pipeline")
except importlib.metadata.PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.1.0+unknown"

_LAZY = {
    "discover": ("cape_pipeline.causal.api", "discover"),
    "embed": ("cape_pipeline.hyperbolic", "embed"),
    "HyperbolicEmbedding": ("cape_pipeline.hyperbolic", "HyperbolicEmbedding"),
    "encode": ("cape_pipeline.encodings", "encode"),
    "CapeEncodings": ("cape_pipeline.encodings", "CapeEncodings"),
    "load_encodings": ("cape_pipeline.encodings", "load_encodings"),
    "apply_rotary": ("cape_pipeline.encodings", "apply_rotary"),
    "RotaryMultiheadAttention": ("cape_pipeline.models", "RotaryMultiheadAttention"),
    "run_pipeline": ("cape_pipeline.pipeline", "run_pipeline"),
    "run_task": ("cape_pipeline.tasks", "run_task"),
    "tl": ("cape_pipeline.tl", None),
    "pl": ("cape_pipeline.pl", None),
    "models": ("cape_pipeline.models", None),
    "tasks": ("cape_pipeline.tasks", None),
    "datasets": ("cape_pipeline.datasets", None),
}

__all__ = [
    "__version__",
    "read",
    "pp",
    "CausalGraph",
    "CapeInputError",
    "CapeDataError",
    "CapeFileError",
    "CapeConfigError",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        mod = importlib.import_module(module)
        value = mod if attr is None else getattr(mod, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cape_pipeline' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
