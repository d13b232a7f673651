"""Label columns checked against an .h5ad's obs, and tables whose rows look like genes."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from cape_pipeline.errors import CapeDataError
from cape_pipeline.io import read
from cape_pipeline.io.layout import check_data_keys, looks_like_genes, orientation_hint


def _genes_as_rows(n_genes: int = 200, n_cells: int = 30) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.poisson(3.0, size=(n_genes, n_cells)), columns=[f"cell{i}" for i in range(n_cells)])
    df.insert(0, "gene", [f"GENE{i}" for i in range(n_genes)])
    return df


def test_h5ad_label_column_that_is_not_in_obs_lists_the_columns(tmp_path, counts_adata):
    counts_adata.obs = counts_adata.obs.rename(columns={"cell_type": "celltype"})
    path = tmp_path / "a.h5ad"
    counts_adata.write_h5ad(path)
    with pytest.raises(CapeDataError, match="labels 'cell_type': no such obs column; did you mean 'celltype'"):
        read(path, label_columns=["cell_type"])
    assert read(path, label_columns=["celltype"]).uns["cape_ingest"]["label_columns"] == ["celltype"]
    check_data_keys(path, labels=["celltype"], label_key="celltype")  # present: no error
    with pytest.raises(CapeDataError, match="no such layer; it has no layers"):
        check_data_keys(path, counts_layer="counts")


def test_csv_with_genes_as_rows_names_index_column_and_transpose(tmp_path, caplog):
    path = tmp_path / "genes_by_cells.csv"
    _genes_as_rows().to_csv(path, index=False)
    with pytest.raises(CapeDataError) as err:
        read(path)
    msg = str(err.value)
    assert "index_column='gene'" in msg and "transpose" in msg
    with caplog.at_level(logging.WARNING):
        adata = read(path, index_column="gene")
    assert adata.shape == (200, 30)
    assert "rows look like genes" in caplog.text and "transpose" in caplog.text


def test_cells_as_rows_get_no_orientation_warning(tmp_path, table, caplog):
    path = tmp_path / "t.csv"
    table.to_csv(path, index=False)
    with caplog.at_level(logging.WARNING):
        read(path, label_columns=["label"], index_column="cell_id")
    assert "transpose" not in caplog.text
    with pytest.raises(CapeDataError) as err:  # not an index: the advice stays label_columns
        read(path, index_column="cell_id")
    assert "label_columns" in str(err.value) and "index_column" not in str(err.value)


def test_orientation_rules():
    genes = [f"ENSG{i:011d}" for i in range(100)]
    assert looks_like_genes(genes) and looks_like_genes(["a", "b"], header="symbol")
    assert not looks_like_genes([f"cell_{i}" for i in range(100)])
    assert orientation_hint(genes, [f"c{i}" for i in range(10)]) is not None
    assert orientation_hint(genes[:10], [f"f{i}" for i in range(100)]) is None  # more columns, named like genes
    barcodes = [f"{s}-1" for s in ("AAACCTGAGAAGGCCT", "AAACCTGAGACAGACC", "AAACCTGAGATAGTCA")] * 10
    assert orientation_hint([f"r{i}" for i in range(2)], barcodes) is not None  # far more columns, named like cells
