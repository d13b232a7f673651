"""DAGMA (linear, MLP) and partial-correlation baselines behind ``discover(method=...)``."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from cape_pipeline.causal.api import METHODS, discover, discover_scored
from cape_pipeline.causal.baselines import dagma_defaults, partial_correlation_matrix
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.causal.metrics import dag_metrics
from cape_pipeline.errors import CapeConfigError

NAMES = ["g0", "g1", "g2", "g3", "g4"]
#: a few hundred Adam steps instead of dagma-mlp's 230 000 at 25× its lr, and a lower
#: threshold so that edges survive (structure and reproducibility checks only)
FAST_MLP = {"T": 2, "warm_iter": 300, "max_iter": 600, "lr": 5e-3, "w_threshold": 0.1}


def _chain_fork(n: int = 500, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Linear-Gaussian SEM g0 → g1 → g2, g1 → g3 → g4 (a chain with a fork at g1)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 5))
    x = np.empty_like(z)
    x[:, 0] = z[:, 0]
    x[:, 1] = 0.9 * x[:, 0] + z[:, 1]
    x[:, 2] = 0.8 * x[:, 1] + z[:, 2]
    x[:, 3] = 0.9 * x[:, 1] + z[:, 3]
    x[:, 4] = -0.8 * x[:, 3] + z[:, 4]
    true = np.zeros((5, 5), dtype=int)
    true[0, 1] = true[1, 2] = true[1, 3] = true[3, 4] = 1
    return x, true


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    return _chain_fork()


def test_methods_registered():
    for name in ("dagma", "dagma-mlp", "partial-correlation"):
        assert name in METHODS


@pytest.mark.parametrize(
    ("method", "kwargs", "dag"),
    [("dagma", {}, True), ("dagma-mlp", FAST_MLP, True), ("partial-correlation", {}, False)],
)
def test_returns_graph(data, method, kwargs, dag):
    x, _ = data
    g, scores = discover_scored(x, method=method, feature_names=NAMES, seed=0, **kwargs)
    assert isinstance(g, CausalGraph)
    assert list(g.feature_names) == NAMES
    assert g.n_edges > 0
    assert np.isfinite(g.adjacency.data).all()
    assert scores is not None and scores.shape == (5, 5) and np.isfinite(scores).all()
    assert g.params["method"] == method
    if dag:
        assert g.is_dag()
    else:  # undirected like "correlation": both directions, same weight
        a = g.adjacency.toarray()
        np.testing.assert_array_equal(a, a.T)
        assert g.params["is_dag"] is False


def test_dagma_linear_recovers_skeleton(data):
    x, true = data
    g = discover(x, method="dagma", feature_names=NAMES, seed=0)
    assert dag_metrics(g, true)["skeleton_f1"] >= 0.8
    assert g.params["lambda1"] == dagma_defaults("dagma")["lambda1"] == 0.03


def test_partial_correlation_finds_skeleton(data):
    x, true = data
    g = discover(x, method="partial-correlation", feature_names=NAMES)
    assert dag_metrics(g, true)["skeleton_f1"] == 1.0
    # the 2-hop pair g0–g2 is marginally correlated but conditionally independent
    corr = discover(x, method="correlation", feature_names=NAMES)
    assert corr.adjacency[0, 2] != 0 and g.adjacency[0, 2] == 0


def test_partial_correlation_formula(data):
    x, _ = data
    xs = (x - x.mean(0)) / x.std(0)
    rho, alpha = partial_correlation_matrix(xs, alpha=1e-6)  # ≈ unpenalised: −Θ_ij/√(Θ_ii Θ_jj)
    theta = np.linalg.inv(xs.T @ xs / len(xs))
    ref = -theta / np.sqrt(np.outer(np.diag(theta), np.diag(theta)))
    np.fill_diagonal(ref, 0.0)
    np.testing.assert_allclose(rho, ref, atol=1e-3)
    assert alpha == 1e-6


def test_same_seed_same_result_and_global_state_kept(data):
    x, _ = data
    np.random.seed(123)
    random.seed(123)
    torch.manual_seed(123)
    before = (np.random.get_state()[1].copy(), random.getstate(), torch.get_rng_state().clone())
    dtype = torch.get_default_dtype()
    runs = [discover_scored(x, method="dagma-mlp", feature_names=NAMES, seed=1, **FAST_MLP) for _ in range(2)]
    assert runs[0][0].n_edges > 0
    np.testing.assert_array_equal(runs[0][0].adjacency.toarray(), runs[1][0].adjacency.toarray())
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    p1 = discover(x, method="partial-correlation", feature_names=NAMES)
    p2 = discover(x, method="partial-correlation", feature_names=NAMES)
    np.testing.assert_array_equal(p1.adjacency.toarray(), p2.adjacency.toarray())
    np.testing.assert_array_equal(np.random.get_state()[1], before[0])
    assert random.getstate() == before[1]
    assert torch.equal(torch.get_rng_state(), before[2])
    assert torch.get_default_dtype() == dtype


@pytest.mark.parametrize(
    ("method", "kwargs", "name"),
    [
        ("dagma", {"lambda1": -1.0}, "lambda1"),
        ("dagma", {"T": 0}, "T"),
        ("dagma", {"loss_type": "huber"}, "loss_type"),
        ("dagma", {"s": [1.0, -0.5]}, "s"),
        ("dagma", {"lr": float("nan")}, "lr"),
        ("dagma", {"lambda2": 0.1}, "lambda2"),  # MLP-only option
        ("dagma", {"max_edges_per_row": 3}, "max_edges_per_row"),
        ("dagma-mlp", {"hidden": 0}, "hidden"),
        ("dagma-mlp", {"mu_factor": 2.0}, "mu_factor"),
        ("partial-correlation", {"alpha": -1.0}, "alpha"),
        ("partial-correlation", {"alpha": "bic"}, "alpha"),
        ("partial-correlation", {"max_edges_per_row": 0}, "max_edges_per_row"),
        ("partial-correlation", {"lambda1": 0.1}, "lambda1"),
    ],
)
def test_bad_options(data, method, kwargs, name):
    x, _ = data
    with pytest.raises(CapeConfigError, match=name):
        discover(x, method=method, feature_names=NAMES, **kwargs)
