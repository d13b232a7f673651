"""Step I's regression algorithm: the statistics against statsmodels/scipy, the
orientation on a hub, the covariates, and the property the issue asks for — on counts with a
known graph, more cells keep more true edges and the kept graph stays mostly right."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import cape_pipeline as cape
from cape_pipeline.causal import CausalGraph, discover
from cape_pipeline.causal.config import DiscoverConfig
from cape_pipeline.causal.covariates import cell_state_labels, count_reliability, residualize
from cape_pipeline.causal.metrics import dag_metrics
from cape_pipeline.causal.regression import fit_regression, partial_f
from cape_pipeline.causal.regression.edge_test import min_effect_pvalues
from cape_pipeline.causal.regression.fit import _fit_split
from cape_pipeline.causal.regression.neighbourhood import gram_matrix
from cape_pipeline.causal.regression.orientation import greedy_likelihood_dag
from cape_pipeline.causal.regression.split_vote import vote
from cape_pipeline.datasets import simulated_hill_counts
from cape_pipeline.errors import CapeConfigError


def _std(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(0)) / x.std(0)


def test_partial_f_is_the_squared_t_of_ordinary_least_squares():
    import statsmodels.api as smx

    rng = np.random.default_rng(0)
    z = _std(rng.normal(size=(400, 6)))
    z[:, 0] = _std(0.5 * z[:, 1] - 0.3 * z[:, 2] + rng.normal(size=400))
    parents = torch.tensor([[1, 2, 3, 4]] + [[0, 2, 3, 4]] * 5)
    live = torch.ones(6, 4, dtype=torch.bool)
    f, r2, dof = partial_f(torch.from_numpy(z), parents, live, ridge=0.0)
    ols = smx.OLS(z[:, 0], smx.add_constant(z[:, [1, 2, 3, 4]])).fit()
    # the regressions have no intercept (the columns are centred): ν = N − K − 1 matches OLS's
    np.testing.assert_allclose(f[0].numpy(), ols.tvalues[1:] ** 2, rtol=1e-8)
    assert float(dof[0]) == ols.df_resid
    np.testing.assert_allclose(r2[0].numpy(), (f[0] / (f[0] + dof[0])).numpy())


def test_padding_candidates_do_not_change_the_statistics():
    rng = np.random.default_rng(1)
    z = torch.from_numpy(_std(rng.normal(size=(300, 5))))
    full, _, _ = partial_f(z, torch.tensor([[1, 2, 3]] * 5), torch.ones(5, 3, dtype=torch.bool))
    padded, _, dof = partial_f(z, torch.tensor([[1, 2, 3, 4]] * 5), torch.tensor([[True, True, True, False]] * 5))
    np.testing.assert_allclose(padded[:, :3].numpy(), full.numpy(), rtol=1e-10)
    assert (padded[:, 3] == 0).all() and float(dof[0]) == 300 - 3 - 1


def test_min_effect_test_is_the_f_test_at_zero_and_stricter_above():
    from scipy.stats import f as f_dist

    stat, dof = np.array([1.0, 9.0, 40.0]), np.full(3, 500.0)
    np.testing.assert_allclose(min_effect_pvalues(stat, dof, 502, 0.0), f_dist.sf(stat, 1, dof))
    p1, p2 = min_effect_pvalues(stat, dof, 502, 0.001), min_effect_pvalues(stat, dof, 502, 0.01)
    assert (p2 >= p1).all() and (p1 >= f_dist.sf(stat, 1, dof)).all()


def test_greedy_orientation_points_a_hub_at_its_children_and_is_acyclic():
    rng = np.random.default_rng(2)
    n = 5000
    hub = rng.normal(size=n)
    kids = [0.7 * hub + rng.normal(size=n) for _ in range(6)]
    z = _std(np.column_stack([hub, *kids]))
    # the skeleton: hub–child pairs only
    p, c = greedy_likelihood_dag(z, np.zeros(6, dtype=np.int64), np.arange(1, 7))
    assert p.size == 6
    assert (p == 0).sum() >= 5  # Markov-equivalent: at most one child may point into the hub
    g = sp.csr_array((np.ones(p.size), (p, c)), shape=(7, 7))
    assert CausalGraph.from_adjacency(g, [f"g{i}" for i in range(7)]).is_dag()


def test_residualize_removes_state_means_and_the_library_slope():
    rng = np.random.default_rng(3)
    n = 600
    labels = rng.integers(0, 3, n)
    lib = rng.normal(size=n)
    x = rng.normal(size=(n, 4)) + labels[:, None] * 2.0 + 1.5 * lib[:, None]
    z = residualize(x, labels, lib)
    for k in range(3):
        np.testing.assert_allclose(z[labels == k].mean(0), 0.0, atol=1e-10)
    lib_c = lib - np.array([lib[labels == k].mean() for k in range(3)])[labels]
    np.testing.assert_allclose(lib_c @ z, 0.0, atol=1e-8)
    np.testing.assert_allclose(z.std(0), 1.0)
    found = cell_state_labels(_std(x), 3, seed=0)
    assert found.shape == (n,) and len(np.unique(found)) == 3


def _hill(n: int, seed: int = 0, genes: int = 200):
    a = simulated_hill_counts(n, genes, n_types=3, seed=seed)
    cape.pp.preprocess(a, min_genes=0)  # genes seen in too few cells go; varp follows them
    return a, a.varp["true_dag"]


@pytest.mark.filterwarnings("ignore")
def test_more_cells_keep_more_true_edges_and_the_graph_stays_mostly_right():
    """The minimum-effect rule: its form does not depend on N, so with more cells the same test keeps
    more true edges (not fewer); on these counts the kept graph is mostly right at both sizes."""
    kept = []
    for n in (1500, 6000):
        a, truth = _hill(n)
        g = discover(a)
        assert g.params["support"] == "regression" and g.params["covariates_used"] == "library"
        # the counting-noise correction on counts at every number of cells
        assert g.params["measurement_error_used"] == "count thinning"
        m = dag_metrics(g.adjacency, truth)
        kept.append((m["precision"] * m["nnz"], m))
    (tp_small, small), (tp_large, large) = kept
    assert tp_large > 1.3 * tp_small, (small, large)
    assert small["precision"] >= 0.5 and large["precision"] >= 0.5, (small, large)


@pytest.mark.filterwarnings("ignore")
def test_fewer_cells_than_genes_give_a_small_graph_that_is_mostly_right():
    """Below one cell per gene the learned algorithm kept mostly false edges (95 % at 1,000 cells
    × 2,000 genes); the cross-fitted test keeps fewer, mostly true ones."""
    a, truth = _hill(400, seed=1, genes=600)
    assert a.n_obs < a.n_vars
    g = discover(a)
    m = dag_metrics(g.adjacency, truth)
    assert g.n_edges > 0 and m["precision"] >= 0.5, m


@pytest.mark.filterwarnings("ignore")
def test_scores_of_every_screened_pair_travel_beside_dag_parquet(tmp_path):
    a, _ = _hill(800)
    g = discover(a)
    es = g.edge_scores
    assert {"source", "target", "score", "f_stat", "qvalue", "accepted"} <= set(es.columns)
    assert len(es) > 10 * max(g.n_edges, 1)  # every screened pair, not only the DAG
    g.save(tmp_path)
    back = CausalGraph.load(tmp_path)
    assert (back.adjacency != g.adjacency).nnz == 0
    merged = es.merge(back.edge_scores, on=["source", "target"], suffixes=("", "_back"))
    assert len(merged) == len(es)
    np.testing.assert_allclose(merged["score"], merged["score_back"])
    import pandas as pd

    assert len(pd.read_parquet(tmp_path / "dag.parquet")) == g.n_edges
    raw = pd.read_parquet(tmp_path / "edge_scores.parquet")
    assert len(raw) == len(es) and int(raw["in_dag"].sum()) == g.n_edges


def test_algorithm_auto_by_data_kind_and_learned_options_left_unused():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(300, 30))
    g = discover(x, learned={"epochs": 2}, device="cpu")
    assert g.params["algorithm"] == g.params["support"] == "learned" and g.params["covariates_used"] == "none"
    import anndata as ad

    a = ad.AnnData(x.astype(np.float32))
    a.uns["cape_ingest"] = {"modality": "scrna"}
    g = discover(a, learned={"epochs": 2})
    assert g.params["algorithm"] == "regression" and g.params["unused_options"] == ["learned.epochs"]
    assert g.params["covariates_used"] == "none"  # no library size recorded; states only on request
    assert discover(a, covariates="states").params["covariates_used"] == "states"
    with pytest.raises(CapeConfigError, match="cape_library_size"):
        discover(a, covariates="library")


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"regression": {"min_effect": 1.0}}, r"regression\.min_effect"),
        ({"regression": {"fdr": 0.0}}, r"regression\.fdr"),
        ({"n_states": -1}, "n_states"),
        ({"covariates": "cells"}, "covariates"),
        ({"algorithm": "regression", "learned": {"epochs": 5}}, r"learned\.epochs: not used by algorithm='regression'"),
        ({"algorithm": "learned", "regression": {"min_effect": 0.01}}, r"regression\.min_effect: not used"),
        ({"regression": {"measurement_error": "poisson"}}, "measurement_error"),
        ({"algorithm": "learned", "regression": {"measurement_error": "thinning"}}, "measurement_error"),
        ({"regression": {"n_splits": 0}}, "n_splits"),
        ({"regression": {"n_splits": 2.5}}, "n_splits"),
        ({"algorithm": "learned", "regression": {"n_splits": 4}}, "n_splits"),
    ],
)
def test_new_options_are_validated(kw, match):
    with pytest.raises(CapeConfigError, match=match):
        DiscoverConfig(**kw)


def _split_fits(z: np.ndarray, n_splits: int, seed: int = 0):
    """The single-split fits that ``fit_regression(z, n_splits=…)`` votes over, made one by one."""
    fits = []
    zt = torch.from_numpy(z)
    for b in range(n_splits):
        rows = np.random.default_rng(seed if b == 0 else [seed, b]).permutation(z.shape[0])
        fits.append(_fit_split(z, zt, rows, n_candidates=10, min_effect=0.003, fdr=0.05,
                               ridge=1e-2, crossfit=True, noise=None, keep=None, order_rounds=0,
                               label_targets=None, progress=False, full_gram=gram_matrix(zt)))
    return fits


@pytest.mark.filterwarnings("ignore")
def test_split_vote_keeps_the_edges_most_splits_keep_and_aggregates_pairs():
    """``n_splits``: each split's fit is the one-split fit on that split, an edge is kept where at
    least half the splits keep it (acyclic, weight its mean), and the pair statistics are
    combined as ``split_vote.vote`` says (Meinshausen, Meier & Bühlmann's median rule for the p-value)."""
    a, _ = _hill(600, seed=2, genes=80)
    z = _std(np.asarray(a.X.toarray() if sp.issparse(a.X) else a.X, dtype=np.float64))
    one = fit_regression(z)
    assert one.n_splits == 1
    fits = _split_fits(z, 3)
    np.testing.assert_array_equal(one.adjacency.toarray(), fits[0].adjacency.toarray())  # split 0 = one split
    voted = fit_regression(z, n_splits=3)
    assert voted.n_splits == 3
    kept = sum((f.adjacency.toarray() != 0).astype(int) for f in fits)
    adj = voted.adjacency.toarray()
    # without perturbation labels the vote is the fit (no jackknife re-test: tests/causal/regression/test_jackknife.py)
    np.testing.assert_array_equal(adj, vote(fits, z.shape[1], 0.05).adjacency.toarray())
    assert adj.any() and not np.array_equal(adj != 0, fits[0].adjacency.toarray() != 0)
    assert ((adj != 0) <= (kept >= 2)).all()  # only edges kept in ≥ 2 of 3 splits ...
    assert ((adj != 0).sum() >= (kept >= 2).sum() - 3)  # ... and all of them but cycle breakers
    mean_w = sum(f.adjacency.toarray() for f in fits) / np.maximum(kept, 1)
    np.testing.assert_allclose(adj[adj != 0], mean_w[adj != 0])
    assert dag_metrics(sp.csr_array(adj), sp.csr_array(adj))["nnz"] == int((adj != 0).sum())
    import networkx as nx

    assert nx.is_directed_acyclic_graph(nx.from_numpy_array(adj, create_using=nx.DiGraph))
    # the pairs: the union, p = min(1, 2·median) with 1 where a split did not test the pair
    code = voted.parent * z.shape[1] + voted.child
    assert set(code.tolist()) == set(np.concatenate([f.parent * z.shape[1] + f.child for f in fits]).tolist())
    i = np.flatnonzero(voted.accepted)[0]
    ps, r2 = [], []
    for f in fits:
        hit = np.flatnonzero((f.parent == voted.parent[i]) & (f.child == voted.child[i]))
        ps.append(f.pvalue[hit[0]] if hit.size else 1.0)
        r2.append(f.partial_r2[hit[0]] if hit.size else 0.0)
    assert voted.pvalue[i] == pytest.approx(min(1.0, 2 * np.median(ps)))
    assert voted.partial_r2[i] == pytest.approx(np.mean(r2))
    assert [h["split"] for h in voted.history if h["stage"] == "edge test"] == [0, 1, 2]
    assert voted.history[-1]["stage"] == "split vote" and voted.history[-1]["n_edges"] == int((adj != 0).sum())


@pytest.mark.filterwarnings("ignore")
def test_n_splits_is_recorded_and_named_in_the_edge_rule():
    a, _ = _hill(400, seed=3, genes=60)
    g = discover(a, regression={"n_splits": 2})
    assert g.params["n_splits_used"] == 2 and "of 2 random splits" in g.params["edge_rule"]
    g1 = discover(a, regression={"n_splits": 1})
    assert g1.params["n_splits_used"] == 1 and "splits" not in g1.params["edge_rule"]
    with pytest.raises(CapeConfigError, match="n_splits"):
        fit_regression(np.zeros((40, 3)), n_splits=0)


def test_fit_regression_refuses_too_few_rows():
    from cape_pipeline.errors import CapeDataError

    with pytest.raises(CapeDataError, match="regression"):
        fit_regression(np.zeros((5, 3)))


def test_hill_simulator_is_a_seeded_dag_with_counts():
    a = simulated_hill_counts(300, 120, seed=5)
    b = simulated_hill_counts(300, 120, seed=5)
    assert (a.X != b.X).nnz == 0
    truth = a.varp["true_dag"]
    assert CausalGraph.from_adjacency(truth, a.var_names).is_dag() and truth.nnz > 100
    assert np.all(a.X.data == np.round(a.X.data)) and a.obs["cell_type"].nunique() == 6
    with pytest.raises(CapeConfigError, match="simulated-hill-counts"):
        simulated_hill_counts(300, 3)


def test_errors_in_variables_gives_a_noisy_parent_its_coefficient_back():
    """A regulator t is counted with noise (share 0.6 of its variance); its child c = t + e and
    a sibling s = t + e'. Regressed on both, ordinary least squares splits t's effect between the
    noisy parent and the sibling; with the parent's noise share known the sibling's F collapses
    and the parent's coefficient is t's (Fuller 1987, Sec. 2.2)."""
    rng = np.random.default_rng(6)
    n = 20000
    t = rng.normal(size=n)
    parent = t + rng.normal(scale=np.sqrt(1.5), size=n)  # noise share 1.5 / 2.5 = 0.6
    sib = t + rng.normal(scale=0.5, size=n)
    child = t + rng.normal(scale=0.5, size=n)
    z = torch.from_numpy(_std(np.column_stack([child, parent, sib])))
    table, live = torch.tensor([[1, 2], [0, 2], [0, 1]]), torch.ones(3, 2, dtype=torch.bool)
    f_ols, _, _ = partial_f(z, table, live)
    noise = torch.tensor([0.0, 0.6, 0.0], dtype=torch.float64)
    f_eiv, _, _ = partial_f(z, table, live, noise=noise)
    # OLS: the sibling carries the child (F in the thousands); corrected: it adds little
    assert f_ols[0, 1] > 1000 and f_eiv[0, 1] < 0.2 * f_ols[0, 1]
    assert f_eiv[0, 0] > 2 * f_ols[0, 0]
    with pytest.raises(CapeConfigError, match="reliability"):
        fit_regression(z.numpy(), reliability=np.array([1.0, 0.4]))


@pytest.mark.parametrize(("share", "sib_share"), [(0.1, 0.05), (0.5, 0.05), (0.99, 0.3)])
def test_errors_in_variables_correction_is_scaled_back_direction_by_direction(share, sib_share):
    """The correction along each direction of ``G v = λ·N·diag(δ) v`` (roots λ_i): in full where
    ``λ_i ≥ 1 + m``, scaled back to leave the root m where it is smaller, none below m
    (m = ``_EIV_MARGIN``·√(K/N)), so the corrected matrix's roots are ``λ_i − s_i`` with
    ``s_i = clip(λ_i − m, 0, 1)``. A parent whose sibling measures the same activity, with a
    noise share the data carry (0.1: every s_i = 1), more than its variance beyond the sibling
    (0.5: one direction scaled back) and nearly all of it with a noisier sibling (0.99: one
    direction not corrected).
    The reference is scipy's generalized eigensolver, ``G_c = G − D V diag(s) Vᵀ D`` with
    ``Vᵀ D V = I`` — not the Cholesky route of the code; no ridge (λ = 0)."""
    from scipy.linalg import eigh

    from cape_pipeline.causal.regression.neighbourhood import _EIV_MARGIN

    rng = np.random.default_rng(3)
    n = 400
    t_act = rng.normal(size=n)
    parent = t_act + rng.normal(scale=0.5, size=n)
    sib = t_act + rng.normal(scale=0.3, size=n)
    other = rng.normal(size=n)
    child = t_act + 0.5 * other + rng.normal(scale=0.5, size=n)
    z = _std(np.column_stack([child, parent, sib, other]))
    table, live = torch.tensor([[1, 2, 3]] * 4), torch.zeros(4, 3, dtype=torch.bool)
    live[0] = True  # only the child's regression is checked
    noise = torch.tensor([0.0, share, sib_share, 0.2], dtype=torch.float64)
    f, _, dof = partial_f(torch.from_numpy(z), table, live, ridge=0.0, noise=noise)
    x, y = z[:, 1:], z[:, 0]
    g = x.T @ x
    d = n * np.diag(noise.numpy()[1:])
    lam, v = eigh(g, d)  # G V = D V Λ, Vᵀ D V = I
    margin = _EIV_MARGIN * np.sqrt(3 / n)
    s = np.clip(lam - margin, 0.0, 1.0)
    regime = {0.1: s.min() == 1.0, 0.5: 0 < s.min() < 1, 0.99: s.min() == 0.0}[share]
    assert regime, (share, lam, s)
    gc = g - d @ v @ np.diag(s) @ v.T @ d
    np.testing.assert_allclose(np.sort(eigh(gc, d, eigvals_only=True)), np.sort(lam - s), rtol=1e-8)
    beta = np.linalg.solve(gc, x.T @ y)
    rss = y @ y - 2 * beta @ (x.T @ y) + beta @ g @ beta
    nu = n - 3 - 1
    f_ref = beta**2 / (rss / nu * np.diag(np.linalg.inv(gc)))
    np.testing.assert_allclose(f[0].numpy(), f_ref, rtol=1e-7)
    assert dof[0] == nu


@pytest.mark.filterwarnings("ignore")
def test_count_reliability_by_thinning_matches_an_independent_replicate():
    """Poisson counts at known rates: the thinned split-half reliability (Spearman–Brown) is
    the correlation of two independent full-depth replicates of the same cells, within 0.05
    (median over genes); it rises with a gene's depth; seeded; None for data that are not
    preprocessed counts."""
    import anndata as ad

    rng = np.random.default_rng(7)
    n, m = 4000, 60
    depth = np.geomspace(0.2, 20.0, m)  # mean counts per cell
    rate = depth * np.exp(0.5 * rng.normal(size=(n, m)) - 0.125)
    a = ad.AnnData(rng.poisson(rate).astype(np.float32))
    a.var_names = [f"g{j}" for j in range(m)]
    cape.pp.preprocess(a, min_genes=0, min_cells=0)
    lib = np.asarray(a.obs["cape_library_size"], dtype=np.float64)
    rel = count_reliability(a, None, lib, seed=0)
    assert rel.shape == (m,) and (rel >= 0.05).all() and (rel <= 1).all()
    np.testing.assert_array_equal(rel, count_reliability(a, None, lib, seed=0))
    # the oracle: a second, independent Poisson draw of the same cells at the same rates
    rep = [residualize(np.log1p(1e4 * c / lib[:, None]), None, np.log(lib)) for c in (
        np.expm1(a.X.toarray() if sp.issparse(a.X) else a.X) * lib[:, None] / 1e4, rng.poisson(rate))]
    oracle = (rep[0] * rep[1]).mean(0)
    assert np.median(np.abs(rel - oracle)) < 0.05, np.c_[rel, oracle][::10]
    from scipy.stats import spearmanr

    assert spearmanr(depth, rel)[0] > 0.9
    b = a.copy()
    b.X = (b.X.toarray() if sp.issparse(b.X) else b.X) + 0.3  # not log-normalized counts any more
    assert count_reliability(b, None, lib) is None
    del b.uns["cape_preprocess"]
    assert count_reliability(b, None, lib) is None


@pytest.mark.filterwarnings("ignore")
def test_measurement_error_is_an_option_and_recorded():
    a, truth = _hill(1500)
    default, thin = discover(a), discover(a, regression={"measurement_error": "thinning"})
    assert default.params["measurement_error_used"] == thin.params["measurement_error_used"] == "count thinning"
    assert (default.adjacency != thin.adjacency).nnz == 0
    none = discover(a, regression={"measurement_error": "none"})
    assert none.params["measurement_error_used"] == "none" and "counting noise" not in none.params["edge_rule"]
    assert 0.05 <= thin.params["median_reliability"] <= 1
    assert "counting noise" in thin.params["edge_rule"]
    assert dag_metrics(thin.adjacency, truth)["precision"] >= 0.5


def test_report_names_the_covariates_and_says_within_states_only_with_states():
    from cape_pipeline.report.sections import dag_lines

    doc = {"method": "cape", "n_edges": 3, "n_cycle_edges_dropped": 0, "support": "regression"}
    lib = "\n".join(dag_lines({**doc, "covariates_used": "library"}, 10))
    assert "covariates regressed out before Step I: log library size\n" in lib + "\n" and "within states" not in lib
    both = "\n".join(dag_lines({**doc, "covariates_used": "states+library", "n_states": 30}, 10))
    assert "30 cell states and log library size (the graph explains covariation within states)" in both
    assert "covariates regressed" not in "\n".join(dag_lines({**doc, "covariates_used": "none"}, 10))
