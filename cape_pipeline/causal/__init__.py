"""Step I: causal structure learning over features (paper 000, Eqs. 5–10, Supp. G.4).

The names below are imported on first use (PEP 562), so that importing
:class:`~cape_pipeline.causal.graph.CausalGraph` (``import cape_pipeline``) does not load torch:
the ``cape`` command sets the OpenMP wait policy before torch loads its runtime.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "CausalGraph": "cape_pipeline.causal.graph",
    "DiscoverConfig": "cape_pipeline.causal.config",
    "LearnedConfig": "cape_pipeline.causal.config",
    "LowRankConfig": "cape_pipeline.causal.config",
    "RegressionConfig": "cape_pipeline.causal.config",
    "ScreenedConfig": "cape_pipeline.causal.config",
    "dag_metrics": "cape_pipeline.causal.metrics",
    "discover": "cape_pipeline.causal.api",
    "intervention_targets": "cape_pipeline.causal.interventions",
    "interventional_score": "cape_pipeline.causal.metrics",
}

__all__ = [
    "CausalGraph", "DiscoverConfig", "LearnedConfig", "LowRankConfig", "RegressionConfig", "ScreenedConfig", "dag_metrics",
    "discover", "intervention_targets", "interventional_score",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cape_pipeline.causal' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
