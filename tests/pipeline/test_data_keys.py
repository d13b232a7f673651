"""Where the labels and counts are in a user's file (``--labels``, ``--counts-layer``, the YAML
config's ``labels:``/``counts_layer:``, ``run_pipeline(labels=, counts_layer=)``): checked against
the file before any stage runs, and Step I's use of the counts recorded in its params."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import scanpy as sc

from cape_pipeline.cli import main
from cape_pipeline.datasets import simulated_grn_counts
from cape_pipeline.pipeline import run_pipeline
from cape_pipeline.pipeline.config import read_config_file
from cape_pipeline.pipeline.stages.discover import COUNTS_NOT_FOUND
from cape_pipeline.report.sections import dag_lines

# these 400-cell runs name the counting-noise correction (measurement_error=thinning, which the
# default "auto" does too on counts) and use one split of the cells
FAST = ["--set", "discover.regression.measurement_error=thinning", "--set", "discover.regression.n_splits=1"]
FAST_OVERRIDES = {"discover": {"regression.measurement_error": "thinning", "regression.n_splits": 1}}


@pytest.fixture(scope="module")
def scanpy_file(tmp_path_factory):
    """A scanpy-processed .h5ad: X = log1p(normalize_total), raw counts in layers["counts"],
    labels in obs["celltype"]; 400 cells x 30 genes."""
    adata = simulated_grn_counts(400, 30, n_types=3, seed=0)
    adata.layers["counts"] = adata.X.copy()
    adata.obs["celltype"] = adata.obs.pop("cell_type")
    sc.pp.normalize_total(adata, target_sum=1e4)
    sc.pp.log1p(adata)
    path = tmp_path_factory.mktemp("data") / "processed.h5ad"
    adata.write_h5ad(path)
    return path


def _cli(args, capsys):
    code = main([str(a) for a in args])
    cap = capsys.readouterr()
    return code, cap.out, " ".join(cap.err.split())  # rich wraps long lines


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--labels", "cell_type", "--counts-layer", "counts"], "labels 'cell_type': no such obs column; did you mean "
                                                                "'celltype'? its obs columns: celltype"),
        (["--labels", "celltype", "--counts-layer", "countz"], "--counts-layer 'countz': no such layer; did you mean "
                                                               "'counts'? its layers: counts"),
        (["--labels", "celltype", "--set", "train.label_key=cell_typ"], "train.label_key 'cell_typ': no such obs column"),
    ],
)
def test_a_name_the_file_lacks_fails_at_the_dry_run(scanpy_file, tmp_path, capsys, args, needle):
    code, _, err = _cli(["run", scanpy_file, *args, "--dry-run", "--workdir", tmp_path], capsys)
    assert code == 2 and needle in err and "Traceback" not in err
    assert not (tmp_path / "ingest").exists()  # checked before any stage ran


def test_yaml_config_takes_the_same_keys(scanpy_file, tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("labels: celltype\ncounts_layer: countz\ndiscover:\n  regression:\n    n_splits: 1\n")
    assert read_config_file(cfg) == {"discover": {"regression": {"n_splits": 1}}, "ingest": {"label_columns": ["celltype"]},
                                     "preprocess": {"counts_layer": "countz"}}
    code, _, err = _cli(["run", scanpy_file, "--config", cfg, "--dry-run", "--workdir", tmp_path], capsys)
    assert code == 2 and "its layers: counts" in err


def test_table_label_key_must_be_a_label_column(tmp_path, table):
    path = tmp_path / "t.csv"
    table.to_csv(path, index=False)
    with pytest.raises(Exception, match="train.label_key 'label': not among the label columns.*read as a feature"):
        run_pipeline(str(path), until="ingest", workdir=tmp_path / "w", overrides={"train": {"label_key": "label"}},
                     labels="cell_id")
    with pytest.raises(Exception, match="a table has no layers"):
        run_pipeline(str(path), until="ingest", workdir=tmp_path / "w", labels="label,cell_id", counts_layer="counts")


def test_counts_layer_turns_on_the_counting_noise_correction(scanpy_file, tmp_path, capsys):
    code, _, err = _cli(["run", scanpy_file, "--labels", "celltype", "--counts-layer", "counts", "--until", "discover",
                         *FAST, "--workdir", tmp_path], capsys)
    assert code == 0, err
    assert COUNTS_NOT_FOUND not in err and "counts=layers['counts']" in err
    res = run_pipeline(str(scanpy_file), until="discover", workdir=tmp_path, labels="celltype", counts_layer="counts",
                       overrides=FAST_OVERRIDES)
    assert all(r.cached for r in res.records)  # the Python keywords are the CLI's flags
    p = res.output("discover").params
    assert p["counts"] == "layers['counts']"
    assert p["covariates_used"] == "library" and p["measurement_error_used"] == "count thinning"
    adata = res.output("preprocess")
    assert adata.uns["cape_ingest"]["label_columns"] == ["celltype"]
    assert adata.uns["cape_preprocess"]["counts_source"] == "layers['counts']"
    counts = adata.layers["counts"]
    np.testing.assert_allclose(adata.obs["cape_library_size"], np.asarray(counts.sum(axis=1)).ravel(), rtol=1e-6)


def test_log_normalized_x_gives_back_its_counts(tmp_path):
    # X = log1p(normalize_total(counts)) and no layer named: the counts are read back from X (with
    # 100 genes every cell but one has a gene of one count; that one is read with a unit of 2)
    adata = simulated_grn_counts(400, 100, n_types=3, seed=0)
    adata.layers["counts"] = adata.X.copy()
    sc.pp.normalize_total(adata, target_sum=1e4)
    sc.pp.log1p(adata)
    path = tmp_path / "lognorm.h5ad"
    adata.write_h5ad(path)
    res = run_pipeline(str(path), until="discover", workdir=tmp_path / "w", labels="cell_type",
                       overrides=FAST_OVERRIDES)
    p = res.output("discover").params
    assert p["counts"] == "X (recovered from log-normalized values)" and not p.get("warnings")
    assert p["covariates_used"] == "library" and p["measurement_error_used"] == "count thinning"
    adata = res.output("preprocess")
    counts = adata.layers["counts"]
    np.testing.assert_allclose(adata.obs["cape_library_size"], np.asarray(counts.sum(axis=1)).ravel(), rtol=1e-6)


def test_without_counts_the_log_and_the_report_say_so(scanpy_file, tmp_path, capsys, caplog):
    # the counts cannot be read back (as from TPM): here they are not, by the switch that turns it off
    no_recovery = {**FAST_OVERRIDES, "preprocess": {"recover_counts": False}}
    with caplog.at_level(logging.WARNING):  # before the CLI, which replaces the root logger's handlers
        res = run_pipeline(str(scanpy_file), until="discover", workdir=tmp_path / "py", labels="celltype",
                           overrides=no_recovery)
    assert COUNTS_NOT_FOUND in caplog.text
    code, _, err = _cli(["run", scanpy_file, "--labels", "celltype", "--until", "discover", *FAST,
                         "--set", "preprocess.recover_counts=false", "--workdir", tmp_path], capsys)
    assert code == 0 and COUNTS_NOT_FOUND in err  # a warning: shown without -v
    graph = res.output("discover")
    assert graph.params["counts"] is None and graph.params["covariates_used"] == "none"
    assert graph.n_edges > 0  # the report lists Step I's warnings beside its edges
    g = {"method": graph.params["method"], "n_edges": graph.n_edges, "n_cycle_edges_dropped": 0,
         "warnings": graph.params["warnings"]}
    assert any(COUNTS_NOT_FOUND in line for line in dag_lines(g, 30))
