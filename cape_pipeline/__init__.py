"""cape_pipeline: causality-induced positional encoding (CAPE) for tabular omics.

Learn the causal DAG among features, embed it on the hyperboloid, turn it into rotary angles
and hand those to transformers (Xu et al., CAPE; paper 000 in shared/papers).
"""

from __future__ import annotations

from cape_pipeline import pp
from cape_pipeline._version import __version__
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.errors import CapeConfigError, CapeDataError, CapeFileError, CapeInputError
from cape_pipeline.io import read

__all__ = [
    "__version__",
    "read",
    "pp",
    "CausalGraph",
    "CapeInputError",
    "CapeDataError",
    "CapeFileError",
    "CapeConfigError",
]
