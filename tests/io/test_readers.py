from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import cape_pipeline.io as cio
from cape_pipeline.errors import CapeConfigError, CapeDataError, CapeFileError


def test_read_h5ad_roundtrip_sparse(tmp_path, counts_adata):
    counts_adata.X = sp.csr_matrix(counts_adata.X)
    p = tmp_path / "x.h5ad"
    counts_adata.write_h5ad(p)
    a = cio.read(p)
    assert a.shape == (300, 50)
    assert sp.issparse(a.X) and a.X.dtype == np.float32
    assert a.uns["cape_ingest"]["modality"] == "scrna"
    np.testing.assert_array_equal(a.X.toarray(), counts_adata.X.toarray())


def test_read_h5ad_backed(tmp_path, counts_adata):
    p = tmp_path / "x.h5ad"
    counts_adata.write_h5ad(p)
    a = cio.read(p, backed=True)
    assert a.isbacked and a.uns["cape_ingest"]["backed"] is True


def test_read_parquet_labels_and_index(tmp_path, table):
    p = tmp_path / "t.parquet"
    table.to_parquet(p, index=False)
    a = cio.read(p, label_columns=["label"], index_column="cell_id")
    assert a.shape == (20, 4)
    assert list(a.var_names) == ["f0", "f1", "f2", "f3"]
    assert a.obs_names[0] == "cell0" and list(a.obs["label"][:2]) == ["a", "b"]
    np.testing.assert_allclose(a.X, table[["f0", "f1", "f2", "f3"]].to_numpy(), rtol=1e-6)


def test_read_parquet_pandas_index(tmp_path, table):
    p = tmp_path / "t.parquet"
    table.drop(columns=["label"]).set_index("cell_id").to_parquet(p)
    a = cio.read(p)
    assert a.obs_names[3] == "cell3" and a.n_vars == 4


@pytest.mark.parametrize("suffix,sep", [(".csv", ","), (".tsv", "\t")])
def test_read_csv_tsv(tmp_path, table, suffix, sep):
    p = tmp_path / f"t{suffix}"
    table.to_csv(p, sep=sep, index=False)
    a = cio.read(p, label_columns=["label"], index_column="cell_id")
    assert a.shape == (20, 4) and "label" in a.obs


def test_catalog_sachs_and_synthetic():
    a = cio.read("sachs")
    assert a.shape == (7466, 11) and a.uns["cape_ingest"]["modality"] == "proteomics"
    assert a.varp["true_dag"].sum() == 18
    s = cio.read("synthetic-mlp", n_nodes=8, n_obs=100, seed=3)
    assert s.shape == (100, 8) and s.varp["true_dag"].nnz > 0
    s2 = cio.read("synthetic-mlp", n_nodes=8, n_obs=100, seed=3)
    np.testing.assert_array_equal(s.X, s2.X)  # seeded
    s3 = cio.read("synthetic-mlp", n_nodes=8, n_obs=100, seed=4)
    assert not np.array_equal(s.X, s3.X)


def test_catalog_entries_are_complete():
    cat = cio.load_catalog()
    assert {"pbmc68k_reduced", "krumsiek11", "sachs", "synthetic-mlp", "norman", "hpancreas", "altumage", "cellxgene"} <= set(cat)
    for e in cat.values():
        assert e.source and e.citation and e.modality
        if not e.bundled:
            assert e.path_env


def test_catalog_unbundled_without_copy_is_clear(monkeypatch):
    monkeypatch.delenv("CAPE_NORMAN_H5AD", raising=False)
    with pytest.raises(CapeFileError, match="norman: not bundled.*dataverse"):
        cio.read("norman")


def test_catalog_unbundled_with_local_copy(tmp_path, monkeypatch, counts_adata):
    p = tmp_path / "norman.h5ad"
    counts_adata.write_h5ad(p)
    monkeypatch.setenv("CAPE_NORMAN_H5AD", str(p))
    assert cio.read("norman").shape == (300, 50)


# ------------------------------------------------------------------------- bad input
def test_missing_file():
    with pytest.raises(CapeFileError, match="nope.h5ad: no such file"):
        cio.read("/tmp/definitely/nope.h5ad")


def test_unknown_catalog_name():
    with pytest.raises(CapeConfigError, match="unknown dataset 'pbmc3k'.*known: .*sachs"):
        cio.read("pbmc3k")


def test_unknown_loader_parameter():
    with pytest.raises(CapeConfigError, match="unknown parameter.*n_genes.*accepted"):
        cio.read("synthetic-mlp", n_genes=5)


def test_unsupported_suffix(tmp_path):
    p = tmp_path / "x.xlsx"
    p.write_bytes(b"junk")
    with pytest.raises(CapeFileError, match="unsupported file type '.xlsx'"):
        cio.read(p)


def test_corrupt_h5ad(tmp_path):
    p = tmp_path / "bad.h5ad"
    p.write_bytes(b"this is not hdf5" * 100)
    with pytest.raises(CapeFileError, match=r"bad.h5ad: not a readable .h5ad file"):
        cio.read(p)


def test_truncated_h5ad(tmp_path, counts_adata):
    p = tmp_path / "t.h5ad"
    counts_adata.write_h5ad(p)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(CapeFileError, match="corrupt or truncated"):
        cio.read(p)


def test_truncated_parquet(tmp_path, table):
    p = tmp_path / "t.parquet"
    table.to_parquet(p)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(CapeFileError, match=r"t.parquet: not a readable Parquet file"):
        cio.read(p)


def test_nan_rejected_for_scrna_allowed_for_proteomics(tmp_path, table):
    table.loc[3, "f2"] = np.nan
    p = tmp_path / "t.parquet"
    table.to_parquet(p, index=False)
    with pytest.raises(CapeDataError, match=r"NaN in feature\(s\) \['f2'\].*proteomics or methylation"):
        cio.read(p, label_columns=["label", "cell_id"])
    a = cio.read(p, label_columns=["label", "cell_id"], modality="proteomics")
    assert np.isnan(a.X).sum() == 1


def test_inf_rejected(tmp_path, table):
    table.loc[0, "f1"] = np.inf
    p = tmp_path / "t.csv"
    table.to_csv(p, index=False)
    with pytest.raises(CapeDataError, match=r"infinite values in feature\(s\) \['f1'\]"):
        cio.read(p, label_columns=["label", "cell_id"], modality="proteomics")


def test_inf_in_sparse_h5ad_named(tmp_path):
    x = sp.random(10, 5, density=0.5, format="csr", dtype=np.float32, random_state=0)
    x.data[0] = np.inf
    col = x.indices[0]
    a = ad.AnnData(X=x, var=pd.DataFrame(index=[f"g{i}" for i in range(5)]))
    p = tmp_path / "s.h5ad"
    a.write_h5ad(p)
    with pytest.raises(CapeDataError, match=rf"\['g{col}'\]"):
        cio.read(p)


def test_non_numeric_columns_named(tmp_path, table):
    p = tmp_path / "t.parquet"
    table.to_parquet(p, index=False)
    with pytest.raises(CapeDataError, match=r"non-numeric feature column\(s\) \['label', 'cell_id'\].*label_columns"):
        cio.read(p)


def test_duplicate_feature_names_csv(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("a,b,a\n1,2,3\n4,5,6\n")
    with pytest.raises(CapeDataError, match=r"duplicate column name\(s\) \['a'\]"):
        cio.read(p)


def test_duplicate_feature_names_h5ad(tmp_path):
    a = ad.AnnData(X=np.ones((3, 3), dtype=np.float32), var=pd.DataFrame(index=["g", "h", "g"]))
    p = tmp_path / "d.h5ad"
    a.write_h5ad(p)
    with pytest.raises(CapeDataError, match=r"duplicate feature name\(s\) \['g'\]"):
        cio.read(p)


def test_zero_features(tmp_path):
    p = tmp_path / "z.csv"
    p.write_text("label\na\nb\n")
    with pytest.raises(CapeDataError, match=r"no features \(0 columns\)"):
        cio.read(p, label_columns=["label"])


def test_too_few_observations(tmp_path):
    p = tmp_path / "one.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(CapeDataError, match=r"1 observation\(s\); expected at least 2"):
        cio.read(p)


def test_empty_csv(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text("")
    with pytest.raises(CapeFileError, match="empty file"):
        cio.read(p)


def test_unknown_label_column(tmp_path, table):
    p = tmp_path / "t.parquet"
    table.to_parquet(p, index=False)
    with pytest.raises(CapeDataError, match="column 'celltype' not found"):
        cio.read(p, label_columns=["celltype"])
