"""HyperbolicEmbedding.save / load: the files of the pipeline's embed stage, read back exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.hyperbolic import HyperbolicEmbedding, embed


def _graph() -> CausalGraph:
    return CausalGraph.from_edges(
        [("a", "b"), ("a", "c"), ("b", "d"), ("x", "y")], feature_names=list("abcdxyz")
    )


@pytest.mark.parametrize("geometry", ["hyperbolic", "euclidean"])
def test_save_load_round_trip(tmp_path, geometry):
    emb = embed(_graph(), dim=3, max_epochs=5, tol=0, geometry=geometry, seed=2)
    out = emb.save(tmp_path / "emb")
    assert out == tmp_path / "emb"
    assert sorted(p.name for p in out.iterdir()) == [
        "dag.parquet",
        "embedding.json",
        "embedding.npz",
    ]
    with np.load(out / "embedding.npz", allow_pickle=False) as z:
        want = {"hyperboloid", "poincare", "pagerank", "feature_names"} | (
            {"euclidean"} if geometry == "euclidean" else set()
        )
        assert set(z.files) == want
    meta = json.loads((out / "embedding.json").read_text())
    assert set(meta) == {"params", "geometry", "loss_history"}

    back = HyperbolicEmbedding.load(out)
    for name in ("hyperboloid", "poincare", "pagerank"):
        np.testing.assert_array_equal(getattr(back, name), getattr(emb, name))
    assert (
        back.feature_names.dtype == object
        and back.feature_names.tolist() == emb.feature_names.tolist()
    )
    assert back.loss_history == emb.loss_history
    assert back.geometry == geometry
    assert back.params["dim"] == 3 and back.params["seed"] == 2
    assert back.params["quality"].keys() == emb.params["quality"].keys()
    if geometry == "euclidean":
        np.testing.assert_array_equal(back.euclidean, emb.euclidean)
    else:
        assert back.euclidean is None
    assert back.graph is not None
    assert back.graph.feature_names.tolist() == emb.graph.feature_names.tolist()
    assert (back.graph.adjacency != emb.graph.adjacency).nnz == 0
    np.testing.assert_allclose(back.distances([0, 1]), emb.distances([0, 1]), rtol=0, atol=0)


def test_save_overwrites_and_skips_a_missing_graph(tmp_path):
    emb = embed(_graph(), dim=2, max_epochs=2, tol=0, evaluate=False)
    emb.save(tmp_path)
    emb.graph = None
    emb.save(tmp_path / "nograph")
    assert not (tmp_path / "nograph" / "dag.parquet").exists()
    assert HyperbolicEmbedding.load(tmp_path / "nograph").graph is None
    assert HyperbolicEmbedding.load(tmp_path).graph is not None
