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


# ---------------------------------------------------------------------------- dag.parquet / edge_scores.parquet
@pytest.fixture(scope="module")
def fitted():
    """Step I's default (regression) algorithm on 800 simulated cells × 80 genes: a DAG of a few
    dozen edges and a few thousand scored pairs."""
    import warnings

    import cape_pipeline as cape
    from cape_pipeline.causal import discover
    from cape_pipeline.datasets import simulated_hill_counts

    a = simulated_hill_counts(800, 80, n_types=3, seed=0)
    cape.pp.preprocess(a, min_genes=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = discover(a, regression={"n_splits": 1})
    assert g.n_edges > 5 and len(g.edge_scores) > 10 * g.n_edges
    return g


def test_dag_parquet_holds_the_edges_and_edge_scores_parquet_every_scored_pair(fitted, tmp_path):
    import networkx as nx

    g = fitted
    g.save(tmp_path)
    dag = pd.read_parquet(tmp_path / "dag.parquet")
    assert len(dag) == g.adjacency.nnz
    assert list(dag.columns) == ["source", "target", "weight", "score", "qvalue"]
    net = nx.from_pandas_edgelist(dag, edge_attr="weight", create_using=nx.DiGraph)
    assert net.number_of_edges() == g.n_edges  # a network built from the file is the DAG
    np.testing.assert_array_equal(dag["weight"], g.to_frame()["weight"])
    es = pd.read_parquet(tmp_path / "edge_scores.parquet")
    assert list(es.columns) == [*g.edge_scores.columns, "in_dag"] and es["in_dag"].dtype == bool
    assert len(es) == len(g.edge_scores) and int(es["in_dag"].sum()) == g.n_edges
    kept = es[es["in_dag"]].merge(dag, on=["source", "target"], suffixes=("", "_dag"))
    assert len(kept) == g.n_edges
    np.testing.assert_array_equal(kept["score"], kept["score_dag"])
    np.testing.assert_array_equal(kept["qvalue"], kept["qvalue_dag"])

    back = CausalGraph.read_parquet(tmp_path / "dag.parquet")
    assert (back.adjacency != g.adjacency).nnz == 0 and list(back.feature_names) == list(g.feature_names)
    pd.testing.assert_frame_equal(back.edge_scores, g.edge_scores.reset_index(drop=True))
    assert back.params.keys() == g.params.keys()


def _write_earlier_layout(g: CausalGraph, path) -> None:
    """``dag.parquet`` as it was written before the scores had their own file: the DAG's edges
    (``in_dag`` True) then every other scored pair (weight 0, ``in_dag`` False) in one table."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    edges = g.to_frame().assign(in_dag=True)
    both = edges.merge(g.edge_scores, on=["source", "target"], how="left")
    rest = g.edge_scores.merge(edges[["source", "target"]], on=["source", "target"], how="left", indicator=True)
    rest = rest[rest["_merge"] == "left_only"].drop(columns="_merge")
    rest.insert(2, "weight", 0.0)
    rest.insert(3, "in_dag", False)
    table = pa.Table.from_pandas(pd.concat([both, rest], ignore_index=True), preserve_index=False)
    meta = {**table.schema.metadata, b"cape.feature_names": json.dumps(g.feature_names.tolist()).encode(),
            b"cape.params": json.dumps({"method": "cape"}).encode(), b"cape.n_cycle_edges_dropped": b"1"}
    pq.write_table(table.replace_schema_metadata(meta), path)


def test_dag_parquet_of_the_earlier_layout_reads_as_before(tmp_path):
    scores = pd.DataFrame({"source": ["a", "a", "c", "d"], "target": ["b", "c", "b", "a"],
                           "score": [0.9, 0.2, 0.1, 0.05], "qvalue": [0.01, 0.3, 0.6, 0.8]})
    g = CausalGraph.from_edges([("a", "b", 0.5), ("b", "c", -1.0)], feature_names=["a", "b", "c", "d", "iso"],
                               edge_scores=scores)  # b → c is an edge nothing scored
    _write_earlier_layout(g, tmp_path / "dag.parquet")
    assert len(pd.read_parquet(tmp_path / "dag.parquet")) == 5
    back = CausalGraph.read_parquet(tmp_path / "dag.parquet")
    assert list(back.feature_names) == ["a", "b", "c", "d", "iso"] and back.n_cycle_edges_dropped == 1
    np.testing.assert_array_equal(back.adjacency.toarray(), g.adjacency.toarray())
    got = back.edge_scores.sort_values(["source", "target"], ignore_index=True)
    pd.testing.assert_frame_equal(got, scores.sort_values(["source", "target"], ignore_index=True))
    back.save(tmp_path / "new")  # and it writes the current layout
    assert len(pd.read_parquet(tmp_path / "new" / "dag.parquet")) == 2
    assert len(pd.read_parquet(tmp_path / "new" / "edge_scores.parquet")) == 4


def test_graph_without_scores_leaves_no_edge_scores_file(tmp_path):
    from cape_pipeline.errors import CapeWarning

    scores = pd.DataFrame({"source": ["a", "b"], "target": ["b", "a"], "score": [0.9, 0.1]})
    scored = CausalGraph.from_edges([("a", "b", 0.5)], feature_names=["a", "b"], edge_scores=scores)
    plain = CausalGraph.from_edges([("b", "a", 2.0)], feature_names=["a", "b"])
    scored.write_parquet(tmp_path / "dag.parquet")
    assert (tmp_path / "edge_scores.parquet").is_file()
    plain.write_parquet(tmp_path / "dag.parquet")  # an earlier run's scores must not stay beside it
    assert not (tmp_path / "edge_scores.parquet").exists()
    assert list(pd.read_parquet(tmp_path / "dag.parquet").columns) == ["source", "target", "weight"]
    assert CausalGraph.read_parquet(tmp_path / "dag.parquet").edge_scores is None

    # a scores file of another graph copied beside a dag.parquet is not taken for its scores
    (tmp_path / "one").mkdir()
    scored.write_parquet(tmp_path / "one" / "dag.parquet")
    other = CausalGraph.from_edges([("b", "a", 1.0)], feature_names=["a", "b"], edge_scores=scores)
    other.write_parquet(tmp_path / "two.parquet")
    assert (tmp_path / "two_edge_scores.parquet").is_file()  # named after its DAG file
    (tmp_path / "two_edge_scores.parquet").replace(tmp_path / "one" / "edge_scores.parquet")
    with pytest.warns(CapeWarning, match="scores another DAG"):
        assert CausalGraph.read_parquet(tmp_path / "one" / "dag.parquet").edge_scores is None
    (tmp_path / "one" / "edge_scores.parquet").unlink()
    with pytest.warns(CapeWarning, match="not beside it"):
        h = CausalGraph.read_parquet(tmp_path / "one" / "dag.parquet")
    assert h.edge_scores is None and h.n_edges == 1


def test_export_replaces_or_removes_edge_scores_in_out(tmp_path):
    """``--out`` after a run whose graph has no scores holds no ``edge_scores.parquet`` of an
    earlier run, and the export manifest lists what is there."""
    import json

    from cape_pipeline.pipeline.cache import ArtifactCache
    from cape_pipeline.pipeline.stages import STAGES
    from cape_pipeline.pipeline.stages._base import export_artifact

    scores = pd.DataFrame({"source": ["a", "b"], "target": ["b", "a"], "score": [0.9, 0.1]})
    scored = CausalGraph.from_edges([("a", "b", 0.5)], feature_names=["a", "b"], edge_scores=scores)
    plain = CausalGraph.from_edges([("b", "a", 2.0)], feature_names=["a", "b"])
    cache, out = ArtifactCache(tmp_path / "w"), tmp_path / "out"
    for key, g in (("0" * 32, scored), ("1" * 32, plain)):
        art = cache.store("discover", key, lambda d, g=g: g.save(d), {})
        export_artifact(STAGES["discover"], art, out)
        listed = set(json.loads((out / "discover_manifest.json").read_text())["files"])
        assert listed == ({"dag.parquet", "history.json"} | ({"edge_scores.parquet"} if g is scored else set()))
        assert (out / "edge_scores.parquet").exists() == (g is scored)
        assert CausalGraph.read_parquet(out / "dag.parquet").n_edges == 1
