from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.encodings import encode
from cape_pipeline.hyperbolic import HyperbolicEmbedding, embed
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
    assert "top 20" in " ".join(fig.axes[0].get_title().split())
    with pytest.raises(ValueError):
        plot_dag(CausalGraph.from_edges([("a", "b")]), layout="radial")


def test_plot_dag_on_a_circle_against_a_true_dag():
    """Fig. 3a's view: the features on a circle from the top, each edge colored by its status
    against the true DAG, the true edges found in neither direction dashed, counts in a legend."""
    names = ["a", "b", "c", "d"]
    truth = CausalGraph.from_edges([("a", "b"), ("b", "c"), ("c", "d")], feature_names=names)
    learned = CausalGraph.from_edges([("a", "b"), ("c", "b"), ("a", "d")], feature_names=names)
    ax = plot_dag(learned, layout="circle", truth=truth).axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["correct (1)", "reversed (1)", "not in truth (1)", "missed (1)"]
    at = {t.get_text(): t.get_position() for t in ax.texts}  # the node labels: a, b, c, d clockwise from the top
    np.testing.assert_allclose([at[n] for n in names], [[0, 1], [1, 0], [0, -1], [-1, 0]], atol=1e-12)
    assert "against the true DAG" in " ".join(ax.get_title().split())
    with pytest.raises(ValueError, match="same features"):
        plot_dag(learned, truth=CausalGraph.from_edges([("x", "y")]))


def _label_boxes(fig):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [(t.get_text(), t.get_window_extent(renderer)) for t in fig.axes[0].texts]


def _intersecting(boxes):
    """Pairs of label boxes whose interiors intersect (touching edges allowed)."""
    out = []
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1:]:
            w = min(ba.x1, bb.x1) - max(ba.x0, bb.x0)
            h = min(ba.y1, bb.y1) - max(ba.y0, bb.y0)
            if w > 1e-6 and h > 1e-6:
                out.append((a, b))
    return out


@pytest.mark.parametrize("layout", ["circle", "layered", "spring"])
def test_plot_dag_labels_never_overlap(layout, tmp_path):
    """`make demo`'s dag.png printed "LST1ROBP" where two hub labels collided: every drawn label
    box is now disjoint from the others, on a crowded graph (40 long names on a small canvas, all
    named) and on a large one (hubs named), whatever the layout."""
    rng = np.random.default_rng(1)
    names = [f"GENE-LONG-NAME-{i:02d}" for i in range(40)]
    a = np.triu(rng.random((40, 40)) < 0.15, 1) * 1.0
    fig = plot_dag(CausalGraph.from_adjacency(a, names), layout=layout, save=tmp_path / "dag.png")
    boxes = _label_boxes(fig)
    assert len(boxes) == 40 and not _intersecting(boxes)
    m = 300
    big = np.triu(rng.random((m, m)) < 0.02, 1) * rng.uniform(0.5, 2, (m, m))
    fig = plot_dag(CausalGraph.from_adjacency(big, [f"HLA-{i}" for i in range(m)]), layout=layout,
                   pagerank=rng.random(m), max_edges=150)
    boxes = _label_boxes(fig)
    assert len(boxes) >= 5 and not _intersecting(boxes)


def test_plot_poincare_embedding_and_encodings(emb, tmp_path):
    fig = plot_poincare(emb, save=tmp_path / "p.png")
    assert isinstance(fig, Figure) and _is_png(tmp_path / "p.png")
    assert "PCA" in fig.axes[0].get_title()
    fig = plot_poincare(encode(emb), annotate=["g0", "g1"], edges=False)
    assert isinstance(fig, Figure)
    with pytest.raises(TypeError):
        plot_poincare(np.zeros((3, 2)))


def test_plot_poincare_ball_in_3d(emb, tmp_path):
    """``projection="3d"`` (Fig. 3c): the unit ball of R³; every feature named, points that coincide
    (here the isolated ones at the origin) under one label."""
    names = ["a", "b", "c", "d", "e"]
    e = np.array([[0.1, 0.0, 0.0], [0.5, 0.2, 0.0], [0.0, -0.7, 0.3], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    graph = CausalGraph.from_edges([("a", "b"), ("b", "c")], feature_names=names)
    e3 = HyperbolicEmbedding(np.zeros((5, 4)), e, np.array([0.4, 0.2, 0.2, 0.1, 0.1]), np.array(names), graph=graph)
    fig = plot_poincare(e3, projection="3d", save=tmp_path / "ball.png")
    assert _is_png(tmp_path / "ball.png") and fig.axes[0].name == "3d"
    labels = [t.get_text().strip() for t in fig.axes[0].texts]
    assert sorted(",".join(labels).split(",")) == names and "d,e" in labels
    with pytest.raises(ValueError, match="d = 3"):
        plot_poincare(emb, projection="3d")  # d = 6
    with pytest.raises(ValueError, match="3-D axes"):
        plot_poincare(e3, projection="3d", ax=Figure().add_subplot())
    with pytest.raises(ValueError, match="projection"):
        plot_poincare(e3, projection="4d")


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
    assert "94 features without edges not drawn" in " ".join(fig.axes[0].get_title().split())
    small = plot_dag(CausalGraph.from_edges(edges, feature_names=names[:10]))
    assert "not drawn" not in small.axes[0].get_title()
