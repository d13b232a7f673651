"""Step I's input path standardizes in place where it owns the array, never in the caller's."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from cape_pipeline.causal._input import prepare_matrix
from cape_pipeline.causal.covariates import residualize, unit_sd, unit_sd_rows


def _data(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.gamma(0.5, 2.0, size=(300, 17)).astype(np.float32)
    x[x < 0.4] = 0.0
    return x


def _reference(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return (x - x.mean(axis=0)) / x.std(axis=0)


def test_prepare_matrix_leaves_the_callers_arrays_alone():
    x = _data()
    want = _reference(x)
    x64 = x.astype(np.float64)
    frame = pd.DataFrame(x64.copy())
    adata = ad.AnnData(x64.copy())
    kept = (x64.copy(), frame.copy(), adata.X.copy())
    for data in (x64, frame, adata, ad.AnnData(sp.csr_matrix(x)), x):
        got, _ = prepare_matrix(data)
        np.testing.assert_array_equal(got, want)  # the same values as (x - mean) / sd, bit for bit
    np.testing.assert_array_equal(x64, kept[0])
    pd.testing.assert_frame_equal(frame, kept[1])
    np.testing.assert_array_equal(adata.X, kept[2])


def test_residualize_overwrite_gives_the_same_values_in_place():
    z = _reference(_data(1))
    rng = np.random.default_rng(2)
    labels, lib = rng.integers(0, 4, size=z.shape[0]), rng.uniform(5.0, 9.0, size=z.shape[0])
    for lab, ell in ((labels, lib), (None, lib), (labels, None), (None, None)):
        copy = z.copy()
        want = residualize(z, lab, ell)
        np.testing.assert_array_equal(z, copy)  # without overwrite the input is untouched
        got = residualize(copy, lab, ell, overwrite=True)
        assert got is copy
        np.testing.assert_array_equal(got, want)


def test_unit_sd_in_place_and_by_rows():
    z = _reference(_data(3))
    z[:, 4] = 0.0  # a column with sd 0 becomes 0 either way
    rows = np.random.default_rng(4).permutation(z.shape[0])[:150]
    h = z[rows]
    want = unit_sd(h - h.mean(axis=0))
    np.testing.assert_array_equal(unit_sd_rows(z, rows), want)
    c = h - h.mean(axis=0)
    assert unit_sd(c, overwrite=True) is c
    np.testing.assert_array_equal(c, want)
