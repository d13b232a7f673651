"""Figures that explain themselves (issue 29, figures): hubs named in large DAGs, labels that do
not overlap, the curvature in the Poincaré title."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.pl.figures import HUB_LABELS, _spread_labels, plot_dag, plot_poincare


def _graph(m: int = 60, seed: int = 0) -> CausalGraph:
    rng = np.random.default_rng(seed)
    a = np.triu(rng.uniform(0.3, 1.0, (m, m)), 1) * (rng.random((m, m)) < 0.08)
    return CausalGraph(feature_names=np.array([f"g{i}" for i in range(m)]), adjacency=sp.csr_array(a))


def test_large_dag_names_its_hubs():
    g = _graph()
    pr = np.random.default_rng(1).random(60)
    fig = plot_dag(g, pagerank=pr)
    named = {t.get_text() for t in fig.axes[0].texts}
    assert len(named) == HUB_LABELS
    shown = {f"g{i}" for i in np.argsort(-pr)}
    assert named <= shown and "hubs by PageRank named" in fig.axes[0].get_title()


def test_labels_are_spread_apart():
    xy = np.array([[0.1, 0.1], [0.1, 0.11], [0.105, 0.1], [0.9, 0.9]])
    out = _spread_labels(xy, 0.05)
    for i in range(3):
        for j in range(i):
            assert abs(out[i, 1] - out[j, 1]) >= 0.05 - 1e-12
    np.testing.assert_array_equal(out[3], xy[3])  # far away: untouched


def test_poincare_title_has_the_curvature():
    from cape_pipeline.hyperbolic import embed

    emb = embed(_graph(20), dim=2, max_epochs=20)
    fig = plot_poincare(emb)
    assert f"curvature −{emb.params['curvature']:.3g}" in fig.axes[0].get_title()
