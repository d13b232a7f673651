"""Step II: hyperboloid embedding of the causal DAG (paper 000, Sec. 3.4, Eqs. 11–21)."""

from __future__ import annotations

from cape_pipeline.hyperbolic import lorentz
from cape_pipeline.hyperbolic.config import EmbedConfig
from cape_pipeline.hyperbolic.embed import embed
from cape_pipeline.hyperbolic.graph import causal_pagerank, k_hop_positives
from cape_pipeline.hyperbolic.result import HyperbolicEmbedding

__all__ = [
    "EmbedConfig",
    "HyperbolicEmbedding",
    "causal_pagerank",
    "embed",
    "k_hop_positives",
    "lorentz",
]
