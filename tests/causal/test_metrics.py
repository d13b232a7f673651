from __future__ import annotations

import numpy as np
import pytest

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.causal.metrics import dag_metrics

TRUE = np.array(
    [
        [0, 1, 1, 0],
        [0, 0, 1, 0],
        [0, 0, 0, 1],
        [0, 0, 0, 0],
    ]
)


def test_hand_computed():
    pred = np.zeros((4, 4))
    pred[0, 1] = 0.9  # TP
    pred[2, 0] = 0.5  # reversed 0->2
    pred[1, 3] = 0.7  # FP
    # missing: 1->2, 2->3
    m = dag_metrics(pred, TRUE)
    # skeleton: extra {1-3}, missing {1-2, 2-3}; reversed 1 -> SHD 4
    assert m["shd"] == 4
    assert m["tpr"] == pytest.approx(1 / 4)
    assert m["fdr"] == pytest.approx(2 / 3)
    assert m["precision"] == pytest.approx(1 / 3)
    assert m["recall"] == pytest.approx(1 / 4)
    assert m["f1"] == pytest.approx(2 * (1 / 3) * (1 / 4) / (1 / 3 + 1 / 4))
    # skeleton: predicted {0-1, 0-2, 1-3}, true {0-1, 0-2, 1-2, 2-3}: 2 common
    assert m["skeleton_f1"] == pytest.approx(2 * (2 / 3) * (2 / 4) / (2 / 3 + 2 / 4))
    assert 0 < m["auprc"] <= 1


def test_perfect_and_empty():
    m = dag_metrics(TRUE * 0.5, TRUE)
    assert m["shd"] == 0 and m["f1"] == 1 and m["auprc"] == pytest.approx(1.0)
    e = dag_metrics(np.zeros((4, 4)), TRUE)
    assert e["shd"] == 4 and e["f1"] == 0 and e["tpr"] == 0


def test_undirected_counts_once():
    pred = np.zeros((4, 4))
    pred[0, 1] = pred[1, 0] = 1.0
    m = dag_metrics(pred, TRUE)
    assert m["tpr"] == pytest.approx(1 / 4)  # gcastle 1.0.4 would say 2/4
    assert m["shd"] == 3  # missing 0-2, 1-2, 2-3


def test_accepts_causal_graph():
    g = CausalGraph.from_adjacency(TRUE, list("abcd"))
    assert dag_metrics(g, g)["shd"] == 0


@pytest.mark.parametrize("seed", range(6))
def test_agrees_with_gcastle_on_dags(seed):
    from castle.metrics import MetricsDAG

    rng = np.random.default_rng(seed)
    m = 8
    true = np.triu((rng.random((m, m)) < 0.35).astype(int), 1)
    perm = rng.permutation(m)
    true = true[np.ix_(perm, perm)]
    pred = np.triu((rng.random((m, m)) < 0.3).astype(int), 1)
    pred = pred[np.ix_(perm[::-1], perm[::-1])] if seed % 2 else pred[np.ix_(perm, perm)]
    ours = dag_metrics(pred, true)
    theirs = MetricsDAG(pred.copy(), true.copy()).metrics
    assert ours["shd"] == theirs["shd"]
    for a, b in [("tpr", "tpr"), ("fdr", "fdr"), ("precision", "precision"), ("recall", "recall")]:
        assert ours[a] == pytest.approx(theirs[b], abs=1e-4)
    if not np.isnan(theirs["F1"]):
        assert ours["f1"] == pytest.approx(theirs["F1"], abs=1e-4)
