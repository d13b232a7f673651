from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from cape_pipeline.causal import CausalGraph, dag_metrics
from cape_pipeline.cli import main
from cape_pipeline.errors import CapeConfigError, CapeFileError
from cape_pipeline.paper import FIG3_FILES, FIG3_N_NODES, reproduce_fig3

# small N and a short Step I budget keep this fast; the real command uses the library defaults
N, EPOCHS, SEED = 500, 50, 1


@pytest.fixture(scope="module")
def fig3(tmp_path_factory):
    out = tmp_path_factory.mktemp("fig3")
    return out, reproduce_fig3(out, n_samples=N, seed=SEED, epochs=EPOCHS)


def _numbers(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _numbers(v)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield obj


def _strict_json(path):
    def no_constant(name):
        raise ValueError(f"{path}: non-finite JSON constant {name}")

    return json.loads(path.read_text(), parse_constant=no_constant)


def test_every_file_written_and_non_empty(fig3):
    out, rec = fig3
    assert set(rec["files"]) == set(FIG3_FILES)
    for role, name in FIG3_FILES.items():
        path = out / name
        assert rec["files"][role] == str(path)
        assert path.is_file() and path.stat().st_size > 0, name
        if name.endswith(".png"):
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temporaries


def test_coordinates_table(fig3):
    out, _ = fig3
    df = pd.read_csv(out / "fig3_coordinates.csv")
    assert list(df.columns) == ["ID", "x", "y", "z", "norm", "pagerank"]
    assert len(df) == FIG3_N_NODES
    assert df["ID"].tolist() == list(range(FIG3_N_NODES))
    xyz = df[["x", "y", "z"]].to_numpy()
    assert np.isfinite(xyz).all()
    np.testing.assert_allclose(df["norm"], np.linalg.norm(xyz, axis=1), rtol=1e-12, atol=1e-15)
    assert (df["norm"] < 1).all()
    assert (df["pagerank"] > 0).all()
    assert df["pagerank"].sum() == pytest.approx(1.0, abs=1e-9)


def test_json_is_finite_and_consistent(fig3):
    out, rec = fig3
    saved = _strict_json(out / "fig3.json")
    assert saved == rec
    assert all(math.isfinite(v) for v in _numbers(saved))
    assert saved["seed"] == SEED and saved["n_samples"] == N and saved["n_nodes"] == FIG3_N_NODES
    assert saved["command"].startswith("cape reproduce fig3 --out ")
    assert f"--n-samples {N}" in saved["command"] and f"--epochs {EPOCHS}" in saved["command"]
    assert saved["discover_params"]["effective_epochs"] == EPOCHS
    assert saved["discover_params"]["threshold"] == 0.2
    assert saved["embed_params"]["dim"] == 3
    assert set(saved["runtime_s"]) == {"simulate", "discover", "embed", "outputs", "total"}
    assert all(v >= 0 for v in saved["runtime_s"].values())

    true = CausalGraph.read_parquet(out / "true_dag.parquet")
    learned = CausalGraph.read_parquet(out / "learned_dag.parquet")
    assert true.n_features == learned.n_features == FIG3_N_NODES
    assert true.is_dag() and learned.is_dag()
    assert saved["n_true_edges"] == true.n_edges and saved["n_learned_edges"] == learned.n_edges
    m = dag_metrics(learned, true)
    assert saved["shd"] == m["shd"]
    assert saved["f1"] == pytest.approx(m["f1"])
    assert saved["skeleton_f1"] == pytest.approx(m["skeleton_f1"])

    df = pd.read_csv(out / "fig3_coordinates.csv")
    sp = saved["spearman_norm_vs_neg_pagerank"]
    if sp["rho"] is not None:  # None only when the PageRank or the norms are constant
        res = spearmanr(df["norm"], -df["pagerank"])
        assert sp["rho"] == pytest.approx(res.statistic)
        assert sp["p_value"] == pytest.approx(res.pvalue)
        assert -1 <= sp["rho"] <= 1 and 0 <= sp["p_value"] <= 1
    b = learned.adjacency.toarray() != 0
    connected = b.any(axis=0) | b.any(axis=1)
    spc = saved["spearman_norm_vs_neg_pagerank_connected"]
    assert spc["n_nodes"] == connected.sum()
    if spc["rho"] is not None:
        res = spearmanr(df["norm"][connected], -df["pagerank"][connected])
        assert spc["rho"] == pytest.approx(res.statistic)


@pytest.mark.parametrize(
    "kwargs,error,needle",
    [
        ({"n_samples": 1}, CapeConfigError, "n_samples"),
        ({"seed": -1}, CapeConfigError, "seed"),
        ({"epochs": 0}, CapeConfigError, "epochs"),
    ],
)
def test_bad_parameters(tmp_path, kwargs, error, needle):
    with pytest.raises(error, match=needle):
        reproduce_fig3(tmp_path / "o", **kwargs)
    assert not (tmp_path / "o").exists()


def test_out_is_a_file(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(CapeFileError, match="not a directory"):
        reproduce_fig3(f)


def test_cli_fig3(tmp_path, capsys):
    out = tmp_path / "cli"
    code = main(["reproduce", "fig3", "--out", str(out), "--seed", "2", "--n-samples", "300", "--epochs", "20"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert "SHD" in cap.out and "Spearman" in cap.out and f"wrote {out / 'fig3.json'}" in cap.out
    rec = _strict_json(out / "fig3.json")
    assert rec["seed"] == 2 and rec["n_samples"] == 300
    assert rec["command"] == f"cape reproduce fig3 --out {out} --seed 2 --n-samples 300 --epochs 20"
    assert all((out / name).stat().st_size > 0 for name in FIG3_FILES.values())


@pytest.mark.parametrize(
    "args,needle",
    [(["--n-samples", "1"], "n_samples: expected an integer >= 2"), (["--seed", "-3"], "seed: expected")],
)
def test_cli_bad_input_exit_2(tmp_path, capsys, args, needle):
    code = main(["reproduce", "fig3", "--out", str(tmp_path / "o"), *args])
    err = capsys.readouterr().err
    assert code == 2 and needle in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cli_out_is_a_file_exit_2(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("x")
    code = main(["reproduce", "fig3", "--out", str(f)])
    err = capsys.readouterr().err
    assert code == 2 and "not a directory" in err
