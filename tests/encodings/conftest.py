"""Shared fixtures of the encodings tests."""

from __future__ import annotations

import pytest

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.hyperbolic import embed


@pytest.fixture(scope="module")
def emb():
    """A 6-feature embedding (d = 4): a small DAG over a–e and one isolated feature ``iso``."""
    edges = [("a", "b", 1.5), ("a", "c", -0.7), ("b", "d", 2.0), ("c", "d", 0.6), ("d", "e", 1.0)]
    g = CausalGraph.from_edges(edges, feature_names=["a", "b", "c", "d", "e", "iso"])
    return embed(g, dim=4, max_epochs=30, tol=0, lr=1e-2, seed=0)
