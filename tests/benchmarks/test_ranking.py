"""Tests of the shrinkage partial correlation of ``benchmarks/discover/ranking/ranking.py``: its
entries are the ridge regressions of each gene on all the others, λ → 0 gives the partial
correlation and a large λ ranks pairs as |Pearson|."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

_PATH = Path(__file__).parents[2] / "benchmarks" / "discover" / "ranking" / "ranking.py"
_spec = importlib.util.spec_from_file_location("ranking_benchmark", _PATH)
ranking = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ranking)


def _data(n: int = 400, m: int = 6, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, m))
    x[:, 1] += 0.8 * x[:, 0]
    x[:, 2] += 0.6 * x[:, 1]
    return x


def test_pcor_is_the_ridge_regression_of_each_gene_on_the_others():
    x = _data()
    z = ranking._standardize(x)
    lam = 3.0
    c = z.T @ z / len(z)
    theta = np.linalg.inv(c + lam * np.eye(c.shape[0]))
    j = 2
    others = [i for i in range(c.shape[0]) if i != j]
    # ridge normal equations on the correlation scale: (C_oo + λI) β = C_oj
    beta = np.linalg.solve(c[np.ix_(others, others)] + lam * np.eye(len(others)), c[others, j])
    np.testing.assert_allclose(-theta[others, j] / theta[j, j], beta, rtol=1e-10)
    d = np.sqrt(np.diag(theta))
    want = np.abs(theta / d[:, None] / d[None, :])
    np.fill_diagonal(want, 0.0)
    np.testing.assert_allclose(ranking.pcor(x, lam), want, rtol=1e-9, atol=1e-12)


def test_pcor_limits():
    x = _data()
    z = ranking._standardize(x)
    prec = np.linalg.inv(z.T @ z / len(z))
    d = np.sqrt(np.diag(prec))
    partial = np.abs(prec / d[:, None] / d[None, :])
    np.fill_diagonal(partial, 0.0)
    np.testing.assert_allclose(ranking.pcor(x, 1e-9), partial, atol=1e-6)
    corr = np.abs(np.corrcoef(x.T))
    np.fill_diagonal(corr, 0.0)
    iu = np.triu_indices(x.shape[1], 1)
    # a large λ orders the pairs as |Pearson|: x0 - x2 is marginal only (through x1)
    assert (np.argsort(ranking.pcor(x, 1e6)[iu]) == np.argsort(corr[iu])).all()
    assert ranking.pcor(x, 1e-9)[0, 2] < 0.1 < corr[0, 2]


def test_cv_lambda_prefers_little_shrinkage_with_many_cells():
    lam, errors = ranking.cv_lambda(_data(n=4000))
    assert lam == ranking.LAMBDAS[int(np.argmin(errors))]
    assert lam <= 1.0
