from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cape_pipeline import CausalGraph
from cape_pipeline.errors import CapeDataError, CapeFileError


def test_from_edges_and_views():
    g = CausalGraph.from_edges([("a", "b", 0.5), ("b", "c")], feature_names=["a", "b", "c", "d"])
    assert g.n_features == 4 and g.n_edges == 2 and g.is_dag()
    assert g.adjacency[0, 1] == 0.5 and g.adjacency[1, 2] == 1.0
    nx_g = g.to_networkx()
    assert set(nx_g.nodes) == {"a", "b", "c", "d"} and nx_g["a"]["b"]["weight"] == 0.5
    df = g.to_frame()
    assert list(df.columns) == ["source", "target", "weight"]


def test_cycle_and_self_loop_detected():
    assert not CausalGraph.from_edges([("a", "b"), ("b", "a")]).is_dag()
    assert not CausalGraph.from_adjacency(np.eye(2), ["x", "y"]).is_dag()


def test_parquet_roundtrip_keeps_isolated_nodes(tmp_path):
    g = CausalGraph.from_edges([("a", "b", -0.3)], feature_names=["a", "b", "iso"], params={"method": "x"},
                               n_cycle_edges_dropped=2)
    g.write_parquet(tmp_path / "dag.parquet")
    h = CausalGraph.read_parquet(tmp_path / "dag.parquet")
    assert list(h.feature_names) == ["a", "b", "iso"] and h.params == {"method": "x"} and h.n_cycle_edges_dropped == 2
    np.testing.assert_array_equal(h.adjacency.toarray(), g.adjacency.toarray())
    assert pd.read_parquet(tmp_path / "dag.parquet").shape == (1, 3)  # plain pandas can read it


def test_errors(tmp_path):
    with pytest.raises(CapeDataError, match="duplicate feature names"):
        CausalGraph.from_edges([("a", "b")], feature_names=["a", "b", "a"])
    with pytest.raises(CapeDataError, match=r"not among feature_names"):
        CausalGraph.from_edges([("a", "z")], feature_names=["a", "b"])
    with pytest.raises(CapeDataError, match=r"expected shape \(2, 2\)"):
        CausalGraph.from_adjacency(np.zeros((3, 3)), ["a", "b"])
    with pytest.raises(CapeFileError, match="no such file"):
        CausalGraph.read_parquet(tmp_path / "none.parquet")
    (tmp_path / "bad.parquet").write_bytes(b"nope")
    with pytest.raises(CapeFileError, match="not a readable Parquet"):
        CausalGraph.read_parquet(tmp_path / "bad.parquet")


def test_save_load_directory_roundtrip(tmp_path):
    from cape_pipeline import CausalGraph

    g = CausalGraph.from_edges([("a", "b", 0.5), ("b", "c", -1.0)], feature_names=["a", "b", "c", "d"])
    g.history = [{"h": 0.1, "neg_elbo": 3.0}]
    g.save(tmp_path / "g")
    back = CausalGraph.load(tmp_path / "g")
    assert list(back.feature_names) == ["a", "b", "c", "d"] and back.n_edges == 2 and back.history == g.history
    (tmp_path / "g" / "history.json").write_text("{bad")
    import pytest

    from cape_pipeline.errors import CapeFileError

    with pytest.raises(CapeFileError, match="history.json"):
        CausalGraph.load(tmp_path / "g")
