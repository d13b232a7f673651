"""The cross-fitting halves as moments (no copy of a half) against the standardized halves
themselves: their Gram matrices, the screen's tanh products, the candidates, the orientation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import cape_pipeline._utils as utils
from cape_pipeline.causal._input import _dense_float64
from cape_pipeline.causal.covariates import unit_sd, unit_sd_rows
from cape_pipeline.causal.regression.moments import split_moments
from cape_pipeline.causal.regression.orientation import greedy_likelihood_dag
from cape_pipeline.causal.screen import candidate_parents, tanh_round_runs

EPS64 = float(np.finfo(np.float64).eps)
EPS32 = float(np.finfo(np.float32).eps)


def _data(n: int, m: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, m))
    for j in range(1, m, 3):  # chains of strong parents: clear candidates, no near-ties at the top
        x[:, j] += 1.5 * x[:, j - 1]
    x[:, m - 1] = np.tanh(2 * x[:, 0]) + 0.3 * rng.standard_normal(n)  # a nonlinear child
    return unit_sd(x - x.mean(0))


def _split(n: int, seed: int) -> tuple[np.ndarray, torch.Tensor]:
    rows = np.random.default_rng(seed).permutation(n)
    first = torch.zeros(n, dtype=torch.bool)
    first[torch.from_numpy(rows[: n // 2])] = True
    return rows, first


@pytest.mark.parametrize("pool", [None, [0, 3, 4, 9, 12]])
def test_split_moments_equal_the_moments_of_the_standardized_halves(pool):
    n, m = 3001, 30
    z = _data(n, m, 0)
    zt = torch.from_numpy(z)
    rows, first = _split(n, 1)
    pl = None if pool is None else torch.tensor(pool)
    moms = split_moments(zt, first, zt.T @ zt, pool=pl)
    for mom, idx in zip(moms, (np.sort(rows[: n // 2]), np.sort(rows[n // 2 :])), strict=True):
        h = unit_sd_rows(z, idx)
        assert mom.n == idx.size
        # float64 sums of N terms of size ≤ O(1) each: absolute error ≲ N·ε; the second half's is
        # the difference of two such sums (the whole matrix's less the first half's)
        np.testing.assert_allclose(mom.gram.numpy(), h.T @ h, rtol=0, atol=4 * n * EPS64 * 10)
        t = np.tanh(h if pool is None else h[:, pool])
        t = (t - t.mean(0)) / t.std(0)
        # the tanh pass runs in float32 blocks (as the screen's own pass): error ≲ N·ε₃₂ on sums of size N
        np.testing.assert_allclose(mom.tanh_cross.numpy(), t.T @ h, rtol=0, atol=n * n * EPS32 / 100)


def test_split_moments_refuses_a_bad_split():
    zt = torch.zeros(10, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="bool"):
        split_moments(zt, torch.zeros(10, dtype=torch.int64), zt.T @ zt)
    with pytest.raises(ValueError, match="at least 2 rows"):
        split_moments(zt, torch.ones(10, dtype=torch.bool), zt.T @ zt)


def test_the_screen_from_moments_picks_the_candidates_of_the_rows():
    n, m, k = 4000, 40, 3
    z = _data(n, m, 2)
    zt = torch.from_numpy(z)
    rows, first = _split(n, 3)
    a, _ = split_moments(zt, first, zt.T @ zt, tanh=tanh_round_runs(m, k))
    half = torch.from_numpy(unit_sd_rows(z, np.sort(rows[: n // 2])))
    from_rows = candidate_parents(half, k)
    from_moments = candidate_parents(None, k, gram=a.gram, n_rows=a.n, tanh_cross=a.tanh_cross)
    assert from_moments.shape == from_rows.shape == (m, 4 * k)
    # the strong parents (the first columns) are the same; weak candidates may swap at near-ties
    assert torch.equal(from_moments[:, :k], from_rows[:, :k])
    assert (from_moments == from_rows).float().mean() > 0.9
    assert m - 1 in from_moments[0].tolist() or 0 in from_moments[m - 1].tolist()  # the tanh child is found
    with pytest.raises(ValueError, match="tanh_cross"):
        candidate_parents(None, k, gram=a.gram, n_rows=a.n)
    with pytest.raises(ValueError, match="n_rows"):
        candidate_parents(None, k, gram=a.gram)


def test_tanh_round_runs_where_the_table_fits():
    assert tanh_round_runs(2000, 10)
    assert tanh_round_runs(5, 10)  # 3 + 1 candidates fit in the 4 others
    assert not tanh_round_runs(4, 10)
    assert tanh_round_runs(50, 10, n_regulators=3)


def test_orientation_from_the_gram_matrix_equals_the_pass_over_the_rows():
    n, m = 2000, 25
    z = _data(n, m, 4)
    a = np.arange(0, m - 1)
    b = np.arange(1, m)
    by_rows = greedy_likelihood_dag(z, a, b)
    by_gram = greedy_likelihood_dag(z, a, b, gram=torch.from_numpy(z.T @ z))
    assert [x.tolist() for x in by_rows] == [x.tolist() for x in by_gram]


def test_dense_float64_equals_the_cast_sparse_matrix():
    x = sp.random(1000, 37, density=0.3, format="csr", dtype=np.float32, random_state=0)
    out = _dense_float64(x)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, x.astype(np.float64).toarray())
    np.testing.assert_array_equal(_dense_float64(x.tocsc()), out)


def test_column_mean_sd_in_row_blocks_equals_numpy(monkeypatch):
    x = np.random.default_rng(5).normal(3.0, 2.0, (5000, 7))
    small = utils.column_mean_sd(x)
    assert np.array_equal(small[0], x.mean(axis=0)) and np.array_equal(small[1], x.std(axis=0))
    monkeypatch.setattr(utils, "LARGE_MATRIX_ENTRIES", 100)
    monkeypatch.setattr(utils, "BLOCK_ENTRIES", 700)  # 100 rows a block
    mean, sd = utils.column_mean_sd(x)
    # the same two-pass formula, summed in another order: relative error ≲ N·ε
    np.testing.assert_allclose(mean, x.mean(axis=0), rtol=x.shape[0] * EPS64)
    np.testing.assert_allclose(sd, x.std(axis=0), rtol=x.shape[0] * EPS64)
