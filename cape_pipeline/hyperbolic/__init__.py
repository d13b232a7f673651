"""Step II: hyperboloid embedding of the causal DAG (paper 000, Sec. 3.4, Eqs. 11–21)."""

from __future__ import annotations

from cape_pipeline.hyperbolic import lorentz
from cape_pipeline.hyperbolic.embed import (
    HyperbolicEmbedding,
    causal_pagerank,
    embed,
    k_hop_positives,
)

__all__ = ["HyperbolicEmbedding", "causal_pagerank", "embed", "k_hop_positives", "lorentz"]
