from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.encodings import encode
from cape_pipeline.hyperbolic import embed
from cape_pipeline.pl import plot_dag, plot_loss, plot_poincare


@pytest.fixture(scope="module")
def emb():
    rng = np.random.default_rng(0)
    a = np.triu(rng.random((60, 60)) < 0.08, 1) * rng.uniform(-2, 2, (60, 60))
    return embed(CausalGraph.from_adjacency(a, [f"g{i}" for i in range(60)]), dim=6, max_epochs=5, tol=0)


def _is_png(path):
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_dag_small_and_large(emb, tmp_path):
    fig = plot_dag(emb.graph, pagerank=emb.pagerank, save=tmp_path / "dag.png")
    assert isinstance(fig, Figure) and _is_png(tmp_path / "dag.png")
    fig = plot_dag(emb.graph, max_edges=20, layout="spring", save=tmp_path / "top.png")
    assert "top 20" in fig.axes[0].get_title()
    with pytest.raises(ValueError):
        plot_dag(CausalGraph.from_edges([("a", "b")]), layout="circle")


def test_plot_poincare_embedding_and_encodings(emb, tmp_path):
    fig = plot_poincare(emb, save=tmp_path / "p.png")
    assert isinstance(fig, Figure) and _is_png(tmp_path / "p.png")
    assert "PCA" in fig.axes[0].get_title()
    fig = plot_poincare(encode(emb), annotate=["g0", "g1"], edges=False)
    assert isinstance(fig, Figure)
    with pytest.raises(TypeError):
        plot_poincare(np.zeros((3, 2)))


def test_plot_loss(emb, tmp_path):
    assert isinstance(plot_loss(emb, save=tmp_path / "l.png", logy=True), Figure)
    assert isinstance(plot_loss([3.0, 2.0, 1.0], label="x"), Figure)
    fig = plot_loss(
        {"embed (Step II)": [3.0, 2.0], "discover h(A) (Step I)": [1.0, 0.1], "empty": []}
    )
    assert len(fig.axes) == 2
    with pytest.raises(ValueError):
        plot_loss([])
    with pytest.raises(ValueError):
        plot_loss({"a": []})


def test_plot_dag_summarizes_isolated_features():
    """A sparse DAG over many genes is drawn without its isolated genes (a caption counts them)."""
    edges = [(f"g{i}", f"g{i + 1}") for i in range(5)]
    names = [f"g{i}" for i in range(100)]
    fig = plot_dag(CausalGraph.from_edges(edges, feature_names=names))
    assert "94 features without edges not drawn" in fig.axes[0].get_title()
    small = plot_dag(CausalGraph.from_edges(edges, feature_names=names[:10]))
    assert "not drawn" not in small.axes[0].get_title()
