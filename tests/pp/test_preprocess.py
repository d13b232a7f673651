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
    out = preprocess(_with_modality(counts_adata, "scrna"), min_genes=1, copy=True)
    rec = out.uns["cape_preprocess"]
    assert rec["input_state"] == "counts"
    assert "log1p" in rec["steps"] and any(s.startswith("normalize_total") for s in rec["steps"])
    libsize = np.expm1(np.asarray(out.X, dtype=np.float64)).sum(axis=1)
    np.testing.assert_allclose(libsize, 1e4, rtol=1e-3)


def test_counts_qc_min_genes_default_200(counts_adata):
    # with 50 genes no cell has 200 detected genes: the default QC removes all -> clear error
    with pytest.raises(CapeDataError, match="left after QC.*min_genes=200"):
        preprocess(_with_modality(counts_adata, "scrna"), copy=True)


def test_log_normalized_input_not_normalized_twice(counts_adata):
    counts_adata.X = np.log1p(counts_adata.X / counts_adata.X.sum(1, keepdims=True) * 1e4)
    # the counts behind these values could be read back (tests/pp/test_recover_counts.py); without that
    out = preprocess(_with_modality(counts_adata.copy(), "scrna"), min_cells=0, recover_counts=False, copy=True)
    assert out.uns["cape_preprocess"]["input_state"] == "log-normalized"
    np.testing.assert_allclose(out.X, counts_adata.X, rtol=1e-6)


def test_pbmc68k_reduced_uses_raw_without_renormalizing():
    a = cio.read("pbmc68k_reduced")
    out = preprocess(a, copy=True)
    rec = out.uns["cape_preprocess"]
    assert rec["used_raw"] and rec["input_state"] == "log-normalized"
    assert not any("normalize_total" in s or s == "log1p" for s in rec["steps"])
    raw = a.raw.to_adata()[:, out.var_names].X
    np.testing.assert_allclose(np.asarray(out.X.todense() if sp.issparse(out.X) else out.X),
                               raw.toarray() if sp.issparse(raw) else raw, rtol=1e-6)
    assert out.X.min() >= 0 and "bulk_labels" in out.obs


def test_hvg_selects_top_n(counts_adata):
    out = preprocess(_with_modality(counts_adata, "scrna"), min_genes=1, n_top_genes=10, copy=True)
    assert out.n_vars == 10


def test_proteomics_log1p_keeps_truth_graph():
    a = cio.read("sachs")
    out = preprocess(a, copy=True)
    np.testing.assert_allclose(out.X, np.log1p(a.X), rtol=1e-6)
    assert out.varp["true_dag"].sum() == 18


def test_proteomics_negative_with_log1p_is_clear():
    a = ad.AnnData(X=np.array([[1.0, -2.0], [3.0, 4.0], [0.5, 1.0]], dtype=np.float32),
                   var=pd.DataFrame(index=["p1", "p2"]))
    with pytest.raises(CapeDataError, match=r"negative values in feature\(s\) \['p2'\].*arcsinh"):
        preprocess(_with_modality(a, "proteomics"), copy=True)
    out = preprocess(_with_modality(a, "proteomics"), transform="arcsinh", copy=True)
    np.testing.assert_allclose(out.X, np.arcsinh(a.X / 5.0), rtol=1e-6)


def test_methylation_range_and_missing():
    x = np.array([[0.1, 0.9, np.nan], [0.2, 0.8, 0.5], [0.3, 0.7, 0.4]], dtype=np.float32)
    a = ad.AnnData(X=x, var=pd.DataFrame(index=["cg1", "cg2", "cg3"]))
    out = preprocess(_with_modality(a, "methylation"), copy=True)
    assert np.isnan(out.X).sum() == 1  # missing values are kept
    bad = ad.AnnData(X=x * 2, var=pd.DataFrame(index=["cg1", "cg2", "cg3"]))
    with pytest.raises(CapeDataError, match=r"β values outside \[0, 1\] in feature\(s\) \['cg2'"):
        preprocess(_with_modality(bad, "methylation"), copy=True)


def test_constant_and_all_missing_features_named():
    x = np.array([[0.1, 0.5, np.nan], [0.2, 0.5, np.nan], [0.3, 0.5, np.nan]], dtype=np.float32)
    a = ad.AnnData(X=x, var=pd.DataFrame(index=["a", "const", "gone"]))
    with pytest.raises(CapeDataError, match=r"\['gone'\].*entirely missing"):
        preprocess(_with_modality(a, "methylation"), copy=True)
    with pytest.raises(CapeDataError, match=r"\['const'\].*constant"):
        preprocess(_with_modality(a[:, :2].copy(), "synthetic"), copy=True)


def test_bad_parameters():
    with pytest.raises(CapeConfigError, match="preprocess.n_top_genes"):
        PreprocessConfig(n_top_genes=0)
    with pytest.raises(CapeConfigError, match="preprocess.transform"):
        PreprocessConfig(transform="sqrt")


def _scanpy_like(n=300, m=400, seed=0):
    """Counts with what a scanpy user's AnnData carries: obsm, obsp, uns, var/obs columns, layers."""
    rng = np.random.default_rng(seed)
    x = rng.negative_binomial(2, 0.3, (n, m)).astype(np.float32)
    a = ad.AnnData(
        X=x,
        obs=pd.DataFrame({"cell_type": pd.Categorical(rng.choice(["T", "B"], n))}, index=[f"c{i}" for i in range(n)]),
        var=pd.DataFrame({"gene_symbol": [f"SYM{j}" for j in range(m)]}, index=[f"g{j}" for j in range(m)]),
    )
    a.obsm["X_umap"] = rng.normal(size=(n, 2)).astype(np.float32)
    a.obsp["connectivities"] = sp.random(n, n, density=0.01, format="csr", random_state=seed)
    a.varm["PCs"] = rng.normal(size=(m, 3))
    a.layers["counts"] = x.copy()
    a.uns["my_notes"] = {"lab": "x"}
    a.X[0, :] = 0  # an empty cell: removed by QC, so rows move
    a.X[0, :3] = 1
    a.layers["counts"] = a.X.copy()
    return a


def test_in_place_by_default_keeps_what_the_user_had():
    """preprocess is in place (scanpy), keeps obsm/obsp/uns/var columns/layers."""
    a = _scanpy_like()
    umap_before = a.obsm["X_umap"].copy()
    result = preprocess(a, min_genes=10, n_top_genes=100)
    assert result is None  # scanpy's convention for in-place functions
    assert a.n_vars == 100 and a.n_obs == 299 and "c0" not in a.obs_names
    rec = a.uns["cape_preprocess"]
    assert rec["shape_in"] == [300, 400] and rec["shape_out"] == [299, 100]
    assert a.uns["my_notes"] == {"lab": "x"}
    assert a.obs["cell_type"].dtype == "category"
    # obsm follows the kept cells, row for row
    np.testing.assert_array_equal(a.obsm["X_umap"], umap_before[1:])
    assert a.obsp["connectivities"].shape == (299, 299)
    # var keeps the user's columns and gains scanpy's highly-variable statistics
    assert a.var["gene_symbol"].tolist() == ["SYM" + g[1:] for g in a.var_names]
    assert {"highly_variable", "means", "dispersions"} <= set(a.var.columns)
    assert a.varm["PCs"].shape == (100, 3)
    # layers keep their own values (raw counts), X holds the log-normalized values
    cols = [int(g[1:]) for g in a.var_names]
    np.testing.assert_array_equal(np.asarray(a.layers["counts"]), _scanpy_like().X[1:][:, cols])
    assert a.X.dtype == np.float32 and float(np.asarray(a.X).max()) < 15


def test_copy_true_leaves_the_input_untouched():
    a = _scanpy_like()
    out = preprocess(a, min_genes=10, n_top_genes=100, copy=True)
    assert a.shape == (300, 400) and "cape_preprocess" not in a.uns
    assert out.shape == (299, 100) and "X_umap" in out.obsm and out.uns["my_notes"] == {"lab": "x"}


def test_switch_to_raw_is_logged_and_obsm_kept(caplog):
    a = cio.read("pbmc68k_reduced")
    with caplog.at_level("INFO", logger="cape_pipeline.pp._preprocess"):
        preprocess(a)
    assert any("using .raw" in r.getMessage() for r in caplog.records)
    assert "X_umap" in a.obsm and a.obsm["X_umap"].shape[0] == a.n_obs
    assert a.uns["cape_preprocess"]["used_raw"] and float(np.asarray(a.X.min())) >= 0
    assert "bulk_labels_colors" in a.uns


def test_in_place_refuses_a_backed_anndata(tmp_path):
    a = _scanpy_like()
    del a.layers["counts"]
    p = tmp_path / "x.h5ad"
    a.write_h5ad(p)
    backed = ad.read_h5ad(p, backed="r")
    with pytest.raises(CapeConfigError, match="copy=True"):
        preprocess(backed, min_genes=10)


def test_n_top_genes_is_scanpys_name_and_the_earlier_one_still_works(counts_adata):
    a = _with_modality(counts_adata, "scrna")
    out = preprocess(a, min_genes=1, n_top_genes=10, copy=True)
    assert out.n_vars == 10 and out.uns["cape_preprocess"]["config"]["n_top_genes"] == 10
    with pytest.warns(FutureWarning, match="now called preprocess.n_top_genes"):
        old = preprocess(a, min_genes=1, n_top_features=10, copy=True)
    assert list(old.var_names) == list(out.var_names)
    # keywords replace the fields of a config that is given too
    given = preprocess(a, PreprocessConfig(min_genes=1, n_top_genes=50), n_top_genes=10, copy=True)
    assert given.n_vars == 10


def test_unknown_keyword_names_the_closest(counts_adata):
    with pytest.raises(CapeConfigError, match=r"'n_top_gene'.*did you mean 'n_top_genes'\?"):
        preprocess(_with_modality(counts_adata, "scrna"), n_top_gene=10, copy=True)
    with pytest.raises(CapeConfigError, match="give only n_top_genes"):
        preprocess(counts_adata, n_top_genes=10, n_top_features=10, copy=True)
