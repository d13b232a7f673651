"""The regressions read from one Gram matrix ``ZᵀZ`` against the regressions on gathered columns."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import cape_pipeline.causal.regression.neighbourhood as nbh
from cape_pipeline.causal.regression import fit_regression
from cape_pipeline.causal.regression.neighbourhood import gram_matrix, regressions
from cape_pipeline.datasets import simulated_hill_counts

EPS = float(np.finfo(np.float64).eps)


def _table(m: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    parents = torch.randint(0, m, (m, k), generator=g)
    parents[parents == torch.arange(m)[:, None]] = (parents[parents == torch.arange(m)[:, None]] + 1) % m
    live = torch.rand(m, k, generator=g) > 0.2  # some padding entries
    return parents, live


@pytest.mark.parametrize("noise", [False, True])
def test_regressions_from_the_gram_matrix_equal_those_on_the_gathered_columns(noise):
    n, m, k = 4000, 60, 8
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, m)) @ (np.eye(m) + 0.3 * rng.standard_normal((m, m)) / np.sqrt(m))
    z = torch.from_numpy((x - x.mean(0)) / x.std(0))
    parents, live = _table(m, k, 1)
    delta = torch.from_numpy(rng.uniform(0.0, 0.4, m)) if noise else None
    g = gram_matrix(z)
    assert g is not None and g.shape == (m, m)
    direct = regressions(z, parents, live, noise=delta)
    read = regressions(z, parents, live, noise=delta, gram=g)
    # the moments differ by the order of N-term float64 sums: relative error ≲ N·ε; the solves of
    # these well-conditioned K × K systems (condition < 10) and the noise correction's eigen-
    # decomposition amplify it by at most a few hundred: rtol = 1000·N·ε ≈ 1e-9
    rtol = 1000 * n * EPS
    for a, b in zip(direct, read, strict=True):
        torch.testing.assert_close(b, a, rtol=rtol, atol=rtol)


def test_gram_matrix_is_skipped_with_many_features_and_keep_needs_the_rows(monkeypatch):
    z = torch.ones(10, 6, dtype=torch.float64)
    torch.testing.assert_close(gram_matrix(z), z.T @ z)
    monkeypatch.setattr(nbh, "GRAM_MAX_FEATURES", 5)
    assert gram_matrix(z) is None
    parents, live = _table(6, 2, 0)
    with pytest.raises(ValueError, match="keep needs z"):
        regressions(None, parents, live, keep=torch.ones(10, 6, dtype=torch.bool), gram=torch.zeros(6, 6),
                    n_rows=10)


@pytest.mark.parametrize("noise", [False, True])
def test_per_feature_rows_from_the_downdated_gram_matrix_equal_those_gathered(monkeypatch, noise):
    # each perturbed feature drops its own cells (30 each, one feature 130): its regression's moments
    # are ZᵀZ less those rows' products, against the (b, N, K) columns gathered on the kept rows
    n, m, k = 3000, 80, 8
    rng = np.random.default_rng(2)
    x = rng.standard_normal((n, m)) @ (np.eye(m) + 0.3 * rng.standard_normal((m, m)) / np.sqrt(m))
    z = torch.from_numpy((x - x.mean(0)) / x.std(0))
    keep = np.ones((n, m), dtype=bool)
    perturbed = rng.permutation(m)[:40]
    for i, c in enumerate(perturbed):
        keep[i * 30 : (i + 1) * 30, c] = False
    keep[2000:2100, perturbed[0]] = False
    keep_t = torch.from_numpy(keep)
    parents, live = _table(m, k, 3)
    delta = torch.from_numpy(rng.uniform(0.0, 0.4, m)) if noise else None
    downdated = regressions(z, parents, live, noise=delta, keep=keep_t)
    given = regressions(z, parents, live, noise=delta, keep=keep_t, gram=gram_matrix(z))
    monkeypatch.setattr(nbh, "GRAM_MAX_FEATURES", 0)  # the pass over the rows
    gathered = regressions(z, parents, live, noise=delta, keep=keep_t)
    assert gathered[2].min() < n - k - 1  # the perturbed features' own rows were used
    # the downdate subtracts two N-term float64 sums of O(1) entries: absolute error ≲ N·ε on
    # moments of order N; the well-conditioned K × K solves amplify it by at most a few hundred
    rtol = 1000 * n * EPS
    for a, b, c in zip(gathered, downdated, given, strict=True):
        torch.testing.assert_close(b, a, rtol=rtol, atol=rtol)
        torch.testing.assert_close(c, b, rtol=0.0, atol=0.0)


def test_the_dag_is_the_same_with_and_without_the_gram_matrix(monkeypatch):
    a = simulated_hill_counts(1200, 80, seed=3)
    x = np.log1p(a.X.toarray() if hasattr(a.X, "toarray") else np.asarray(a.X, dtype=np.float64))
    x = x[:, x.std(0) > 0].astype(np.float64)
    x = (x - x.mean(0)) / x.std(0)
    with_gram = fit_regression(x, n_splits=2, seed=0)
    monkeypatch.setattr(nbh, "GRAM_MAX_FEATURES", 0)  # every regression gathers its columns
    gathered = fit_regression(x, n_splits=2, seed=0)
    assert with_gram.adjacency.nnz > 0
    assert (with_gram.adjacency != 0).toarray().tolist() == (gathered.adjacency != 0).toarray().tolist()
    # the screen reads float64 moments where the row passes use float32 halves: a near-tie at a
    # feature's k-th candidate may go the other way, so the screened pairs agree almost everywhere
    pairs_g = set(zip(with_gram.parent.tolist(), with_gram.child.tolist(), strict=True))
    pairs_r = set(zip(gathered.parent.tolist(), gathered.child.tolist(), strict=True))
    assert len(pairs_g ^ pairs_r) <= 0.01 * len(pairs_r)
