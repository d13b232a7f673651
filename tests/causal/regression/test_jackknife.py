"""The regression algorithm's jackknife re-test (step 8): the delete-half jackknife
variance against the least-squares formula where that formula is right and where it is not, the
re-test's decisions, and its place in ``fit_regression``."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from cape_pipeline.causal.regression import fit_regression
from cape_pipeline.causal.regression.jackknife import jackknife_retest, jackknife_variance
from cape_pipeline.causal.regression.neighbourhood import regressions
from cape_pipeline.causal.screen import parent_table
from cape_pipeline.errors import CapeConfigError

# 64 splits: each split's two disjoint halves give about one degree of freedom to the variance,
# so the jackknife variance's relative standard deviation is about √(2/64) ≈ 0.18; the bounds
# below are at least 2.5 of those from the expected ratio.
N_SPLITS = 64


def _std(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(0)) / x.std(0)


def _child_on(z: np.ndarray, parents: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Parent table of feature 0 on ``parents`` (the other features have none)."""
    p = np.asarray(parents, dtype=np.int64)
    return parent_table(p, np.zeros_like(p), z.shape[1])


def test_jackknife_variance_is_the_least_squares_variance_with_homoscedastic_errors():
    rng = np.random.default_rng(0)
    n = 3000
    x = rng.normal(size=(n, 2))
    y = 0.4 * x[:, 0] + 0.2 * x[:, 1] + rng.normal(size=n)
    z = _std(np.c_[y, x])
    tab, mask = _child_on(z, [1, 2])
    coef, var, dof = jackknife_variance(z, tab, mask, ridge=0.0, n_splits=N_SPLITS)
    coef_ols, var_ols, _ = regressions(torch.from_numpy(z), tab, mask, ridge=0.0)
    np.testing.assert_allclose(coef.numpy(), coef_ols.numpy(), rtol=1e-12)  # all rows: the same fit
    ratio = var[0, :2].numpy() / var_ols[0, :2].numpy()
    assert ((ratio > 0.55) & (ratio < 1.45)).all(), ratio
    assert float(dof[0]) == n - 2 - 1
    assert (var[1:] == 0).all()  # features without parents: padding only


def test_jackknife_variance_sees_errors_the_least_squares_formula_misses():
    # errors whose sd grows with |x|: the true variance of β̂ is E[x⁴]/E[x²]² = 3 times the
    # least-squares formula's (White's heteroscedasticity-consistent variance, Gaussian x)
    rng = np.random.default_rng(1)
    n = 3000
    x = rng.normal(size=n)
    y = 0.3 * x + np.abs(x) * rng.normal(size=n)
    z = _std(np.c_[y, x])
    tab, mask = _child_on(z, [1])
    _, var, _ = jackknife_variance(z, tab, mask, ridge=0.0, n_splits=N_SPLITS)
    _, var_ols, _ = regressions(torch.from_numpy(z), tab, mask, ridge=0.0)
    ratio = float(var[0, 0] / var_ols[0, 0])
    assert 1.8 < ratio < 4.5, ratio


def test_retest_keeps_a_real_edge_with_its_weight_and_drops_an_empty_one():
    rng = np.random.default_rng(2)
    n = 2000
    x = rng.normal(size=(n, 2))
    y = 0.5 * x[:, 0] + rng.normal(size=n)  # x1 is not a parent
    z = _std(np.c_[y, x])
    adj = sp.csr_array((np.array([0.4, 0.1]), (np.array([1, 2]), np.array([0, 0]))), shape=(3, 3))
    out, record = jackknife_retest(z, adj, min_effect=0.003, fdr=0.05, n_splits=8)
    assert out.nnz == 1 and out[1, 0] == 0.4
    assert record == {"stage": "jackknife re-test", "n_tested": 2, "n_dropped": 1, "n_edges": 1,
                      "seconds": record["seconds"]}
    empty, rec0 = jackknife_retest(z, sp.csr_array((3, 3)), min_effect=0.003, fdr=0.05)
    assert empty.nnz == 0 and rec0["n_tested"] == 0


def test_retest_uses_each_childs_own_rows_with_interventions():
    # rows where the child was intervened on carry no information on its parents: with them
    # left out (keep) the coefficient is the observational one
    rng = np.random.default_rng(3)
    n = 2000
    x = rng.normal(size=n)
    y = 0.5 * x + rng.normal(size=n)
    y[:500] = 3.0 + rng.normal(size=500)  # do(y) in the first 500 rows
    z = _std(np.c_[y, x])
    keep = np.ones((n, 2), dtype=bool)
    keep[:500, 0] = False
    tab, mask = _child_on(z, [1])
    coef, _, dof = jackknife_variance(z, tab, mask, ridge=0.0, keep=keep, n_splits=4)
    coef_own, _, _ = regressions(torch.from_numpy(z), tab, mask, ridge=0.0, keep=torch.from_numpy(keep))
    np.testing.assert_allclose(coef.numpy(), coef_own.numpy(), rtol=1e-12)
    assert float(dof[0]) == n - 500 - 1 - 1


@pytest.mark.parametrize("bad", [1, 0, 2.5, True])
def test_jackknife_refuses_fewer_than_two_splits(bad):
    z = _std(np.random.default_rng(4).normal(size=(50, 3)))
    tab, mask = _child_on(z, [1])
    with pytest.raises(CapeConfigError, match="n_splits"):
        jackknife_variance(z, tab, mask, n_splits=bad)


def test_fit_regression_re_tests_the_voted_dag_with_labels_and_several_splits_only():
    rng = np.random.default_rng(5)
    n, m = 1200, 8
    intervened = np.zeros((n, m), dtype=bool)
    intervened[:100, 2] = True  # do(x2) in the first 100 rows
    z = rng.normal(size=(n, m))
    for c in range(1, m):  # a chain 0 → 1 → … → 7
        z[:, c] = 0.6 * z[:, c - 1] + rng.normal(size=n)
        if c == 2:
            z[:100, 2] = 2.0 + rng.normal(size=100)
    z = _std(z)
    for fit in (fit_regression(z, n_splits=1, intervened=intervened), fit_regression(z, n_splits=3)):
        assert all(r["stage"] != "jackknife re-test" for r in fit.history)  # one split, or no labels
    several = fit_regression(z, n_splits=3, intervened=intervened)
    record = several.history[-1]
    assert record["stage"] == "jackknife re-test"
    assert record["n_tested"] - record["n_dropped"] == record["n_edges"] == several.adjacency.nnz
    assert several.n_pruned == record["n_dropped"]
    voted = next(r for r in several.history if r["stage"] == "split vote")
    assert record["n_tested"] == voted["n_edges"]
