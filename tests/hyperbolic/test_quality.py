from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import average_precision_score

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.hyperbolic import HyperbolicEmbedding, lorentz
from cape_pipeline.hyperbolic.quality import (
    distortion,
    embedding_quality,
    reconstruction,
    topological_depth,
)


def _euclid(graph: CausalGraph, x: np.ndarray) -> HyperbolicEmbedding:
    import torch

    hyp = lorentz.expmap0(torch.from_numpy(x)).numpy()
    return HyperbolicEmbedding(
        hyperboloid=hyp, poincare=lorentz.to_poincare(torch.from_numpy(hyp)).numpy(),
        pagerank=np.full(len(x), 1 / len(x)), feature_names=graph.feature_names.copy(),
        geometry="euclidean", graph=graph, euclidean=x,
    )


def _chain(m: int) -> CausalGraph:
    return CausalGraph.from_edges([(f"g{i}", f"g{i + 1}") for i in range(m - 1)])


def test_perfect_line_embedding():
    g = _chain(6)
    emb = _euclid(g, np.arange(6, dtype=float)[:, None])
    rec = reconstruction(emb)
    assert rec["map"] == pytest.approx(1.0) and rec["mean_rank"] == pytest.approx(1.0)
    assert distortion(emb) == pytest.approx(0.0, abs=1e-12)


def test_map_and_rank_match_a_direct_computation():
    rng = np.random.default_rng(0)
    m = 40
    a = np.triu(rng.random((m, m)) < 0.1, 1).astype(float)
    g = CausalGraph.from_adjacency(a, [f"g{i}" for i in range(m)])
    emb = _euclid(g, rng.normal(size=(m, 3)))
    und = (a + a.T) > 0
    dist = emb.distances()
    aps, ranks = [], []
    for i in range(m):
        if not und[i].any():
            continue
        mask = np.arange(m) != i
        aps.append(average_precision_score(und[i, mask], -dist[i, mask]))
        neg = mask & ~und[i]
        for j in np.flatnonzero(und[i]):
            ranks.append(1 + int((dist[i, neg] < dist[i, j]).sum()))
    rec = reconstruction(emb)
    assert rec["map"] == pytest.approx(np.mean(aps))
    assert rec["mean_rank"] == pytest.approx(np.mean(ranks))
    # anchor subsampling is seeded and bounded
    sub = reconstruction(emb, max_anchors=10, seed=3)
    assert sub["n_anchors"] == 10 and sub == reconstruction(emb, max_anchors=10, seed=3)


def test_topological_depth_with_and_without_cycles():
    g = CausalGraph.from_edges([("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")])
    assert dict(zip(g.feature_names, topological_depth(g), strict=True)) == {"a": 0, "b": 1, "c": 2, "d": 3}
    # a directed cycle x → y → z → x feeding w: the cycle is one level of the condensation
    cyc = CausalGraph.from_edges([("x", "y"), ("y", "z"), ("z", "x"), ("z", "w")])
    assert dict(zip(cyc.feature_names, topological_depth(cyc), strict=True)) == {"x": 0, "y": 0, "z": 0, "w": 1}


def test_quality_dict_is_json_ready_and_handles_empty_graphs():
    import json

    g = CausalGraph.from_adjacency(sp.csr_array((4, 4)), list("abcd"))
    q = embedding_quality(_euclid(g, np.zeros((4, 2))))
    assert q["map"] is None and q["n_isolated"] == 4
    json.dumps(q, allow_nan=False)


def test_connected_only_leaves_isolated_features_out_of_the_ranking():
    g = CausalGraph.from_edges([("a", "b"), ("b", "c")], feature_names=["a", "b", "c", "x", "y"])
    # isolated x, y at the origin, nearer to every connected point than its neighbours
    emb = _euclid(g, np.array([[1.0, 0], [3.0, 0], [5.0, 0], [0, 0], [0, 0]]))
    assert reconstruction(emb)["mean_rank"] > 1.2
    rc = reconstruction(emb, connected_only=True)
    assert rc["map"] == pytest.approx(1.0) and rc["mean_rank"] == pytest.approx(1.0)
    q = embedding_quality(emb)
    assert q["map_connected"] == pytest.approx(1.0) and q["n_isolated"] == 2
