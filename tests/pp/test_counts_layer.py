"""preprocess(counts_layer=): the counts of a scanpy-processed AnnData taken from a layer."""

from __future__ import annotations

import numpy as np
import pytest
import scanpy as sc

from cape_pipeline.errors import CapeDataError
from cape_pipeline.pp import preprocess


@pytest.fixture
def processed(counts_adata):
    counts_adata.layers["counts"] = counts_adata.X.copy()
    sc.pp.normalize_total(counts_adata, target_sum=1e4)
    sc.pp.log1p(counts_adata)
    sc.pp.scale(counts_adata)  # X as a scanpy user leaves it: scaled, negatives
    return counts_adata


def test_counts_layer_gives_the_library_size_and_normalizes_the_counts(processed):
    counts = processed.layers["counts"].copy()
    out = preprocess(processed, counts_layer="counts", n_top_genes=50, copy=True)
    rec = out.uns["cape_preprocess"]
    assert rec["input_state"] == "counts" and rec["counts_source"] == "layers['counts']"
    assert out.n_obs == processed.n_obs  # cells taken as given (QC happened upstream)
    np.testing.assert_allclose(out.obs["cape_library_size"], counts.sum(1))  # every gene passes min_cells
    expected = np.log1p(counts / counts.sum(1, keepdims=True) * 1e4)
    np.testing.assert_allclose(out.X, expected[:, [processed.var_names.get_loc(g) for g in out.var_names]], rtol=1e-4)


def test_counts_layer_missing_or_not_counts(processed):
    with pytest.raises(CapeDataError, match=r"no such layer \(layers: counts\)"):
        preprocess(processed, counts_layer="raw_counts", copy=True)
    processed.layers["logs"] = np.log1p(processed.layers["counts"] + 0.5)
    with pytest.raises(CapeDataError, match="holds log-normalized values, not counts"):
        preprocess(processed, counts_layer="logs", copy=True)


def test_without_a_layer_counts_in_x_are_recorded(counts_adata):
    out = preprocess(counts_adata, min_genes=0, copy=True)
    assert out.uns["cape_preprocess"]["counts_source"] == "X"
