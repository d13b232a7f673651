"""Counts read back from log-normalized values (``cape_pipeline.pp.recover_counts``) and their use
by ``preprocess``: exact where the values are log1p of library-normalized counts (any target sum,
natural log or log2, dense or sparse, float32), refused where they are not (TPM-like scaling,
values rounded to three decimals)."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pytest
import scipy.sparse as sp

from cape_pipeline.causal.covariates import count_reliability
from cape_pipeline.errors import CapeConfigError
from cape_pipeline.pp import preprocess, recover_counts


def _counts(seed: int = 0, n: int = 200, m: int = 300) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.negative_binomial(2, 0.4, size=(n, m)).astype(np.float32)
    c[:, :3] = rng.poisson(400, size=(n, 3))  # large counts: float32 precision matters there
    return c


def _lognorm(c: np.ndarray, target: float, log=np.log1p) -> np.ndarray:
    c64 = c.astype(np.float64)
    return log(c64 / c64.sum(1, keepdims=True) * target).astype(np.float32)


@pytest.mark.parametrize("target", [1e4, 1e6, 3217.5])
@pytest.mark.parametrize("sparse", [False, True])
def test_counts_come_back_exactly(target, sparse):
    c = _counts()
    x = _lognorm(c, target)
    got, rec = recover_counts(sp.csr_matrix(x) if sparse else x)
    assert sp.issparse(got) == sparse and got.dtype == np.float32
    np.testing.assert_array_equal(got.toarray() if sparse else got, c)
    assert rec == {"base": "e", "unit_shares": {"1": 1.0}}


def test_log2_values():
    c = _counts(1)
    got, rec = recover_counts(_lognorm(c, 1e4, log=lambda v: np.log2(1.0 + v)))
    np.testing.assert_array_equal(got, c)
    assert rec["base"] == "2"


def test_a_cell_without_a_single_count_is_read_with_a_larger_unit():
    c = _counts(2)
    c[:10][c[:10] == 1] = 2  # ten cells whose smallest count is 2 (as after keeping only some genes)
    c[10:20][(c[10:20] == 1) | (c[10:20] == 2)] = 3
    got, rec = recover_counts(_lognorm(c, 1e4))
    np.testing.assert_array_equal(got, c)
    assert rec["unit_shares"] == {"1": 0.9, "2": 0.05, "3": 0.05}


def test_values_that_are_not_counts_are_refused():
    c = _counts(3)
    rng = np.random.default_rng(3)
    tpm_like = np.log1p(np.expm1(_lognorm(c, 1e4).astype(np.float64)) * rng.uniform(0.8, 1.2, c.shape))
    assert recover_counts(tpm_like) is None
    rounded = np.round(_lognorm(c, 1e4), 3)  # large counts no longer come back whole
    assert recover_counts(rounded) is None
    assert recover_counts(np.zeros((5, 4))) is None  # nothing to read


def test_preprocess_goes_on_as_from_the_counts():
    c = _counts(4)
    from_counts = preprocess(ad.AnnData(c.copy()), n_top_genes=100, min_genes=0, copy=True)
    from_log = preprocess(ad.AnnData(_lognorm(c, 1e4)), n_top_genes=100, copy=True)
    rec = from_log.uns["cape_preprocess"]
    assert rec["input_state"] == "counts" and rec["counts_source"] == "X (recovered from log-normalized values)"
    assert rec["counts_recovered"] == {"base": "e", "unit_shares": {"1": 1.0}}
    assert list(from_log.var_names) == list(from_counts.var_names)
    np.testing.assert_allclose(from_log.X, from_counts.X, rtol=1e-6)
    np.testing.assert_array_equal(from_log.obs["cape_library_size"], from_counts.obs["cape_library_size"])
    # Step I's counting-noise correction reads the counts back from the result
    rel = count_reliability(from_log, None, from_log.obs["cape_library_size"].to_numpy(), seed=0)
    assert rel is not None and rel.shape == (100,)


def test_recovery_can_be_turned_off_and_leaves_other_input_alone():
    c = _counts(5)
    off = preprocess(ad.AnnData(_lognorm(c, 1e4)), n_top_genes=100, recover_counts=False, copy=True)
    assert off.uns["cape_preprocess"]["input_state"] == "log-normalized"
    assert "cape_library_size" not in off.obs and off.uns["cape_preprocess"]["counts_source"] is None
    with pytest.raises(CapeConfigError, match="recover_counts"):
        preprocess(ad.AnnData(c), recover_counts="yes", copy=True)
