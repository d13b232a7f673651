from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import cape_pipeline.io as cio
from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.pp import PreprocessConfig, detect_input_state, preprocess


def _with_modality(adata, modality):
    adata.uns["cape_ingest"] = {"modality": modality}
    return adata


def test_detect_states():
    assert detect_input_state(np.array([[0, 1, 5], [2, 0, 3]], dtype=np.float32)) == "counts"
    assert detect_input_state(np.log1p(np.array([[0, 1, 5], [2, 0, 3]], dtype=np.float32))) == "log-normalized"
    assert detect_input_state(np.array([[-0.5, 1.2], [0.3, 0.1]])) == "scaled"
    assert detect_input_state(np.array([[120.5, 3000.2], [0.3, 0.1]])) == "normalized"


def test_counts_are_normalized_and_logged(counts_adata):
    out = preprocess(_with_modality(counts_adata, "scrna"), min_genes=1)
    rec = out.uns["cape_preprocess"]
    assert rec["input_state"] == "counts"
    assert "log1p" in rec["steps"] and any(s.startswith("normalize_total") for s in rec["steps"])
    libsize = np.expm1(np.asarray(out.X, dtype=np.float64)).sum(axis=1)
    np.testing.assert_allclose(libsize, 1e4, rtol=1e-3)


def test_counts_qc_min_genes_default_200(counts_adata):
    # with 50 genes no cell has 200 detected genes: the default QC removes all -> clear error
    with pytest.raises(CapeDataError, match="left after QC.*min_genes=200"):
        preprocess(_with_modality(counts_adata, "scrna"))


def test_log_normalized_input_not_normalized_twice(counts_adata):
    counts_adata.X = np.log1p(counts_adata.X / counts_adata.X.sum(1, keepdims=True) * 1e4)
    out = preprocess(_with_modality(counts_adata.copy(), "scrna"), min_cells=0)
    assert out.uns["cape_preprocess"]["input_state"] == "log-normalized"
    np.testing.assert_allclose(out.X, counts_adata.X, rtol=1e-6)


def test_pbmc68k_reduced_uses_raw_without_renormalizing():
    a = cio.read("pbmc68k_reduced")
    out = preprocess(a)
    rec = out.uns["cape_preprocess"]
    assert rec["used_raw"] and rec["input_state"] == "log-normalized"
    assert not any("normalize_total" in s or s == "log1p" for s in rec["steps"])
    raw = a.raw.to_adata()[:, out.var_names].X
    np.testing.assert_allclose(np.asarray(out.X.todense() if sp.issparse(out.X) else out.X),
                               raw.toarray() if sp.issparse(raw) else raw, rtol=1e-6)
    assert out.X.min() >= 0 and "bulk_labels" in out.obs


def test_hvg_selects_top_n(counts_adata):
    out = preprocess(_with_modality(counts_adata, "scrna"), min_genes=1, n_top_features=10)
    assert out.n_vars == 10


def test_proteomics_log1p_keeps_truth_graph():
    a = cio.read("sachs")
    out = preprocess(a)
    np.testing.assert_allclose(out.X, np.log1p(a.X), rtol=1e-6)
    assert out.varp["true_dag"].sum() == 18


def test_proteomics_negative_with_log1p_is_clear():
    a = ad.AnnData(X=np.array([[1.0, -2.0], [3.0, 4.0], [0.5, 1.0]], dtype=np.float32),
                   var=pd.DataFrame(index=["p1", "p2"]))
    with pytest.raises(CapeDataError, match=r"negative values in feature\(s\) \['p2'\].*arcsinh"):
        preprocess(_with_modality(a, "proteomics"))
    out = preprocess(_with_modality(a, "proteomics"), transform="arcsinh")
    np.testing.assert_allclose(out.X, np.arcsinh(a.X / 5.0), rtol=1e-6)


def test_methylation_range_and_missing():
    x = np.array([[0.1, 0.9, np.nan], [0.2, 0.8, 0.5], [0.3, 0.7, 0.4]], dtype=np.float32)
    a = ad.AnnData(X=x, var=pd.DataFrame(index=["cg1", "cg2", "cg3"]))
    out = preprocess(_with_modality(a, "methylation"))
    assert np.isnan(out.X).sum() == 1  # missing values are kept
    bad = ad.AnnData(X=x * 2, var=pd.DataFrame(index=["cg1", "cg2", "cg3"]))
    with pytest.raises(CapeDataError, match=r"β values outside \[0, 1\] in feature\(s\) \['cg2'"):
        preprocess(_with_modality(bad, "methylation"))


def test_constant_and_all_missing_features_named():
    x = np.array([[0.1, 0.5, np.nan], [0.2, 0.5, np.nan], [0.3, 0.5, np.nan]], dtype=np.float32)
    a = ad.AnnData(X=x, var=pd.DataFrame(index=["a", "const", "gone"]))
    with pytest.raises(CapeDataError, match=r"\['gone'\].*entirely missing"):
        preprocess(_with_modality(a, "methylation"))
    with pytest.raises(CapeDataError, match=r"\['const'\].*constant"):
        preprocess(_with_modality(a[:, :2].copy(), "synthetic"))


def test_bad_parameters():
    with pytest.raises(CapeConfigError, match="preprocess.n_top_features"):
        PreprocessConfig(n_top_features=0)
    with pytest.raises(CapeConfigError, match="preprocess.transform"):
        PreprocessConfig(transform="sqrt")
