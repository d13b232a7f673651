"""Learned algorithm of Step I (``discover(algorithm="learned")``, the default above 20 features)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from cape_pipeline.causal.api import discover, discover_scored
from cape_pipeline.causal.config import AUTO_LOW_RANK_MAX, DiscoverConfig, resolve_algorithm
from cape_pipeline.causal.learned import CandidateMLP, fit_learned
from cape_pipeline.causal.metrics import dag_metrics
from cape_pipeline.causal.postprocess import greedy_dag, is_acyclic
from cape_pipeline.causal.screen import candidate_parents
from cape_pipeline.datasets import sdcd_sem
from cape_pipeline.errors import CapeConfigError, CapeWarning


def test_sdcd_sem_has_exactly_4d_edges_is_a_dag_standardized_and_seeded() -> None:
    a = sdcd_sem(30, 500, seed=3)
    b = a.varp["true_dag"]
    assert b.nnz == 120 and is_acyclic(b)
    x = np.asarray(a.X, dtype=np.float64)
    np.testing.assert_allclose(x.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(x.std(0), 1, atol=1e-4)
    again = sdcd_sem(30, 500, seed=3)
    np.testing.assert_array_equal(again.X, a.X)
    assert (again.varp["true_dag"] != b).nnz == 0
    assert (sdcd_sem(30, 500, seed=4).varp["true_dag"] != b).nnz > 0
    # a child is a function of its parents: regressing on them explains most of its variance
    child = int(np.argmax(np.asarray(b.sum(0)).ravel()))
    par = b[:, [child]].nonzero()[0]
    beta, *_ = np.linalg.lstsq(x[:, par], x[:, child], rcond=None)
    r2 = 1 - np.var(x[:, child] - x[:, par] @ beta)
    assert r2 > 0.5
    with pytest.raises(CapeConfigError, match="n_nodes"):
        sdcd_sem(1)


def test_greedy_dag_keeps_the_stronger_direction_and_every_edge_between_components() -> None:
    # 0 ⇄ 1 (0 → 1 stronger), a 3-cycle 2 → 3 → 4 → 2 (4 → 2 weakest), 1 → 2 between components
    parent = np.array([0, 1, 2, 3, 4, 1, 5])
    child = np.array([1, 0, 3, 4, 2, 2, 5])
    weight = np.array([0.9, 0.3, 0.8, 0.7, 0.2, 0.5, 1.0])
    keep = greedy_dag(parent, child, weight, 6)
    assert keep.tolist() == [True, False, True, True, False, True, False]  # self-loop 5 → 5 dropped
    g = sp.csr_array((np.ones(keep.sum()), (parent[keep], child[keep])), shape=(6, 6))
    assert is_acyclic(g)


def test_greedy_dag_on_random_dense_digraphs_is_acyclic_and_maximal() -> None:
    rng = np.random.default_rng(0)
    m = 15
    p, c = np.nonzero(rng.random((m, m)) < 0.3)
    w = rng.random(p.size)
    keep = greedy_dag(p, c, w, m)
    g = sp.csr_array((np.ones(keep.sum()), (p[keep], c[keep])), shape=(m, m))
    assert is_acyclic(g)
    # maximal: each skipped non-loop edge would close a cycle
    for i in np.flatnonzero(~keep & (p != c)):
        g2 = g.tolil()
        g2[p[i], c[i]] = 1.0
        assert not is_acyclic(sp.csr_array(g2))


def test_candidate_mlp_ignores_masked_candidates() -> None:
    m, k, b = 6, 3, 8
    parents = torch.tensor([[(i + j + 1) % m for j in range(k)] for i in range(m)])
    mask = torch.ones(m, k)
    mask[0, 1] = 0.0
    model = CandidateMLP(parents, mask, hidden=4, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1)
    xt = torch.randn(m, b, generator=g)
    loss = model(xt)
    with torch.no_grad():
        strength = model.strength()
        # feature 0's own prediction does not change when its masked candidate does
        xp = xt[parents]
        xp2 = xp.clone()
        xp2[0, 1] += 5.0
        h1 = torch.sigmoid(torch.baddbmm(model.b1, model.weights(), xp))
        h2 = torch.sigmoid(torch.baddbmm(model.b1, model.weights(), xp2))
    assert torch.equal(h1[0], h2[0])
    assert strength[0, 1] == 0 and (strength[mask > 0] > 0).all()
    loss.backward()
    assert model.w1.grad[0, :, 1].abs().max() == 0
    assert model.w1.grad[0, :, 0].abs().max() > 0


def test_candidate_parents_never_self_and_contain_a_nonlinear_parent() -> None:
    rng = np.random.default_rng(0)
    n, m = 3000, 30
    x = rng.normal(size=(n, m))
    # x1 = x0³ − 3·x0 + noise: no linear correlation with x0, found by the tanh round only if
    # the residual's nonlinear screen works; x2 = x1 + noise (linear)
    x[:, 1] = (x[:, 0] ** 3 - 3 * x[:, 0]) / np.sqrt(6) + 0.3 * rng.normal(size=n)
    x[:, 2] = x[:, 1] + 0.5 * rng.normal(size=n)
    xs = (x - x.mean(0)) / x.std(0)
    assert abs(np.corrcoef(xs[:, 0], xs[:, 1])[0, 1]) < 0.05
    p = candidate_parents(torch.tensor(xs, dtype=torch.float32), 2)
    assert p.shape[0] == m and (p != torch.arange(m)[:, None]).all()
    assert 2 in p[1].tolist()


def test_fit_learned_recovers_most_of_a_small_sdcd_graph_as_a_dag() -> None:
    a = sdcd_sem(30, 3000, seed=0, edges_per_node=2)
    truth = (a.varp["true_dag"].toarray() != 0).astype(int)
    fit = fit_learned(torch.tensor(a.X), n_candidates=5, seed=0)
    adj = fit.adjacency
    assert is_acyclic(adj)
    assert (adj.data > 0).all()
    met = dag_metrics((adj.toarray() != 0).astype(int), truth, scores=fit.scores(30))
    corr = np.abs(np.corrcoef(np.asarray(a.X).T))
    np.fill_diagonal(corr, 0)
    corr_f1 = dag_metrics((corr > 0.3).astype(int), truth)["f1"]
    assert met["f1"] > 0.6 and met["f1"] > corr_f1 + 0.2, (met, corr_f1)
    assert met["auprc"] > 0.5
    stages = {h["stage"] for h in fit.history}
    assert stages == {1, 2, 3}
    # the held-out NLL of the screen went down: the MLPs learned
    s1 = [h["val_nll"] for h in fit.history if h["stage"] == 1]
    assert s1[-1] < s1[0] - 5


def test_algorithm_auto_resolves_by_size_and_learned_refuses_low_rank_options() -> None:
    assert DiscoverConfig().algorithm == "auto"
    assert resolve_algorithm("auto", AUTO_LOW_RANK_MAX) == "low-rank"
    assert resolve_algorithm("auto", AUTO_LOW_RANK_MAX + 1) == "learned"
    assert resolve_algorithm("screened", 5000) == "screened"
    with pytest.raises(CapeConfigError, match=r"low_rank\.rank: not used by algorithm='learned'"):
        DiscoverConfig(algorithm="learned", low_rank={"rank": 10})
    with pytest.raises(CapeConfigError, match="posterior"):
        DiscoverConfig(algorithm="learned", low_rank={"posterior": "mean"})


def test_discover_default_on_30_features_uses_the_learned_algorithm_and_records_it() -> None:
    a = sdcd_sem(30, 1500, seed=1)
    g, scores = discover_scored(a, learned={"epochs": 15}, device="cpu")
    assert g.params["algorithm"] == g.params["support"] == "learned" and g.params["support_requested"] == "auto"
    assert g.is_dag() and scores is not None and scores.shape == (30, 30)
    assert g.params["n_edges"] == g.n_edges and 0 <= g.params["isolated_share"] <= 1
    assert g.params["output_threshold"] == pytest.approx(0.1)
    assert g.history and {"stage", "val_nll", "h"} <= set(g.history[0])


def test_mostly_isolated_graph_warns_with_the_fix_and_records_it() -> None:
    a = sdcd_sem(25, 800, seed=2)
    with pytest.warns(CapeWarning, match=r"have no edge .*threshold=") as rec:
        g = discover(a, method="correlation", threshold=0.99, device="cpu")
    assert g.params["isolated_share"] > 0.5 and g.params["warnings"] == [str(rec[0].message)]
    assert "--set discover.threshold=" in g.params["warnings"][0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapeWarning)
        g2 = discover(a, method="correlation", threshold=0.1, device="cpu")
    assert g2.params["warnings"] == [] and g2.params["n_isolated"] == 0


def test_report_and_stage_summary_say_edges_isolated_share_and_the_warning() -> None:
    from cape_pipeline.pipeline.stages.discover import STAGE
    from cape_pipeline.report.sections import dag_lines

    a = sdcd_sem(25, 800, seed=2)
    with pytest.warns(CapeWarning):
        g = discover(a, method="correlation", threshold=0.9, device="cpu")
    summary = STAGE.summary(g)
    assert summary["n_edges"] == g.n_edges and summary["n_isolated"] == g.params["n_isolated"]
    assert summary["isolated_share"] > 0.5
    doc = {"method": "correlation", "n_edges": g.n_edges, "n_cycle_edges_dropped": 0, "support": None,
           "n_isolated": g.params["n_isolated"], "isolated_share": g.params["isolated_share"],
           "warnings": g.params["warnings"], "metrics_vs_truth": None}
    text = "\n".join(dag_lines(doc, 25))
    assert g.n_edges == 8 and f"{g.params['n_isolated']} of 25 features (84 %) have no edge" in text
    assert "**Warning**" in text and "--set discover.threshold=" in text
    empty = "\n".join(dag_lines({**doc, "n_edges": 0}, 25))
    assert "The DAG is empty" in empty and "**Warning**" not in empty
