"""The two count simulators of cape_pipeline.datasets: shapes, sparsity, truth, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from cape_pipeline.causal.postprocess import is_acyclic
from cape_pipeline.datasets import TRUE_DAG_KEY, simulated_counts, simulated_grn_counts
from cape_pipeline.errors import CapeConfigError


def test_simulated_counts_shape_labels_and_determinism():
    a = simulated_counts(200, 300, n_types=4, seed=3)
    b = simulated_counts(200, 300, n_types=4, seed=3)
    assert a.shape == (200, 300) and sp.issparse(a.X)
    assert (a.X != b.X).nnz == 0
    assert set(a.obs["cell_type"].astype(str)) <= {f"type{k}" for k in range(4)}
    assert float(a.X.min()) >= 0 and np.allclose(a.X.data, np.round(a.X.data))


def test_grn_counts_truth_is_a_dag_that_drives_the_counts():
    a = simulated_grn_counts(2000, 300, n_types=4, seed=0)
    t = sp.csr_matrix(a.varp[TRUE_DAG_KEY])
    assert t.shape == (300, 300) and t.nnz == a.uns["cape_dataset_params"]["n_true_edges"] > 50
    assert is_acyclic(t) and t.diagonal().sum() == 0
    # parents are regulators only
    assert a.var["regulator"].to_numpy()[t.tocoo().row].all()
    # log-normalized expression: true edges correlate more than random pairs
    x = a.X.toarray()
    x = np.log1p(x / x.sum(1, keepdims=True) * 1e4)
    c = np.abs(np.corrcoef(x.T))
    coo = t.tocoo()
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, 300, (2, 500))
    keep = i != j
    assert np.nanmedian(c[coo.row, coo.col]) > 2 * np.nanmedian(c[i[keep], j[keep]])
    b = simulated_grn_counts(2000, 300, n_types=4, seed=0)
    assert (a.X != b.X).nnz == 0


def test_grn_counts_bad_parameters_name_them():
    with pytest.raises(CapeConfigError, match="simulated-grn-counts"):
        simulated_grn_counts(10, 1)
    with pytest.raises(CapeConfigError, match="shares"):
        simulated_grn_counts(10, 10, regulated_share=1.5)


def test_type_effect_sets_how_far_apart_the_cell_types_are():
    """Smaller ``type_effect`` → cell-type means closer; the draws (and so the labels) stay the same."""
    far = simulated_counts(600, 400, n_types=3, seed=1)
    near = simulated_counts(600, 400, n_types=3, seed=1, type_effect=0.2)
    same = simulated_counts(600, 400, n_types=3, seed=1, type_effect=1.0)
    assert (far.X != same.X).nnz == 0
    assert (far.obs["cell_type"] == near.obs["cell_type"]).all()
    assert near.uns["cape_dataset_params"]["type_effect"] == 0.2

    def spread(a):  # between-type sd of the log-normalized type means, averaged over module genes
        x = a.X.toarray()
        x = np.log1p(x / x.sum(1, keepdims=True) * 1e4)[:, a.var["module"].to_numpy() >= 0]
        means = np.stack([x[(a.obs["cell_type"] == t).to_numpy()].mean(0) for t in a.obs["cell_type"].cat.categories])
        return float(means.std(0).mean())

    assert spread(near) < 0.5 * spread(far)
    with pytest.raises(CapeConfigError, match="type_effect"):
        simulated_counts(10, 10, type_effect=-1.0)
