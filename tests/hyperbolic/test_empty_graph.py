"""An empty graph is not a converged embedding (``tl.embed`` must not report
``final_loss: nan, converged: True`` for a DAG without edges and leave every angle 0 in silence)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.errors import CapeWarning
from cape_pipeline.hyperbolic import embed


def test_embedding_an_empty_graph_warns_and_is_not_converged():
    g = CausalGraph(feature_names=np.array([f"g{i}" for i in range(5)]), adjacency=sp.csr_array((5, 5)))
    with pytest.warns(CapeWarning, match="nothing to train.*threshold"):
        e = embed(g, dim=2, max_epochs=5)
    assert e.params["trained"] is False and e.params["converged"] is False
    assert np.abs(e.poincare).max() == 0.0


def test_a_graph_with_edges_trains_without_that_warning(recwarn):
    a = sp.csr_array(np.triu(np.ones((5, 5)), 1))
    g = CausalGraph(feature_names=np.array([f"g{i}" for i in range(5)]), adjacency=a)
    e = embed(g, dim=2, max_epochs=5)
    assert e.params["trained"] is True
    assert not [w for w in recwarn if issubclass(w.category, CapeWarning)]
