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


def test_plot_dag_legend_lists_the_signs_that_occur():
    """dag.png said "red = negative weight" where every weight was positive: the legend now has
    one entry per sign present, with its edge count."""
    rng = np.random.default_rng(0)
    a = np.triu(rng.random((12, 12)) < 0.3, 1) * rng.uniform(0.2, 1.0, (12, 12))
    names = [f"g{i}" for i in range(12)]
    n = int((a != 0).sum())
    ax = plot_dag(CausalGraph.from_adjacency(a, names)).axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"positive weight ({n})"]
    assert "negative" not in ax.get_title() and "red" not in ax.get_title()
    signed = a * np.where(rng.random(a.shape) < 0.5, -1.0, 1.0)
    neg = int((signed < 0).sum())
    ax = plot_dag(CausalGraph.from_adjacency(signed, names)).axes[0]
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [f"positive weight ({n - neg})", f"negative weight ({neg})"]
    colors = {tuple(h.get_color()) if not isinstance(h.get_color(), str) else h.get_color()
              for h in legend.legend_handles}
    assert colors == {"0.35", "tab:red"}


def _marker_discs(fig):
    """(centre, radius) in pixels of every node marker of plot_dag's axes."""
    ax = fig.axes[0]
    (nodes,) = [c for c in ax.collections if len(c.get_offsets())]
    centres = ax.transData.transform(np.asarray(nodes.get_offsets()))
    radii = np.sqrt(np.broadcast_to(nodes.get_sizes(), (len(centres),))) / 2 * fig.dpi / 72
    return list(zip(centres, radii, strict=True))


def _covers(box, centre, r):
    """Whether a label box and a marker disc intersect (nearest point of the box to the centre)."""
    nx_, ny_ = np.clip(centre[0], box.x0, box.x1), np.clip(centre[1], box.y0, box.y1)
    return np.hypot(nx_ - centre[0], ny_ - centre[1]) < r


@pytest.mark.parametrize("layout", ["layered", "spring"])
def test_plot_dag_hub_labels_clear_of_nodes_and_each_other(layout):
    """The hubs of a large DAG are named beside their nodes: no label box (the renderer's text
    extent) covers a node marker or another label, and the caption says what the positions mean."""
    rng = np.random.default_rng(3)
    m = 200
    a = np.triu(rng.random((m, m)) < 0.03, 1) * rng.uniform(0.5, 2, (m, m))
    fig = plot_dag(CausalGraph.from_adjacency(a, [f"GENE{i}" for i in range(m)]), layout=layout,
                   pagerank=rng.random(m), max_edges=120)
    boxes = _label_boxes(fig)
    assert len(boxes) == 10 and not _intersecting(boxes)
    discs = _marker_discs(fig)
    assert len(discs) > 40
    assert not [(name, i) for name, box in boxes for i, (c, r) in enumerate(discs) if _covers(box, c, r)]
    title = " ".join(fig.axes[0].get_title().split())
    assert ("Rows are topological generations" in title and "every edge points down" in title) \
        if layout == "layered" else "force-directed" in title


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


def test_plot_poincare_takes_an_anndata_after_tl_embed(emb):
    import anndata as ad

    adata = ad.AnnData(np.zeros((3, len(emb.feature_names))))
    adata.var_names = list(emb.feature_names)
    with pytest.raises(TypeError, match="tl.embed"):
        plot_poincare(adata)
    adata.varm["cape_poincare"] = emb.poincare
    adata.var["cape_pagerank"] = emb.pagerank
    adata.varp["cape_dag"] = emb.graph.adjacency
    assert isinstance(plot_poincare(adata), Figure)
