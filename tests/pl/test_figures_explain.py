"""Figures that explain themselves: hubs named in large DAGs, labels that do not overlap, the
curvature in the Poincaré title, the pipeline's losses in pipeline order."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.pl.figures import HUB_LABELS, _spread_labels, plot_dag, plot_poincare


def _graph(m: int = 60, seed: int = 0) -> CausalGraph:
    rng = np.random.default_rng(seed)
    a = np.triu(rng.uniform(0.3, 1.0, (m, m)), 1) * (rng.random((m, m)) < 0.08)
    return CausalGraph(feature_names=np.array([f"g{i}" for i in range(m)]), adjacency=sp.csr_array(a))


def test_large_dag_names_its_hubs():
    g = _graph()
    pr = np.random.default_rng(1).random(60)
    fig = plot_dag(g, pagerank=pr)
    named = {t.get_text() for t in fig.axes[0].texts}
    assert len(named) == HUB_LABELS
    shown = {f"g{i}" for i in np.argsort(-pr)}
    assert named <= shown and "hubs by PageRank named" in " ".join(fig.axes[0].get_title().split())


def test_labels_are_spread_apart():
    xy = np.array([[0.1, 0.1], [0.1, 0.11], [0.105, 0.1], [0.9, 0.9]])
    out = _spread_labels(xy, 0.05)
    for i in range(3):
        for j in range(i):
            assert abs(out[i, 1] - out[j, 1]) >= 0.05 - 1e-12
    np.testing.assert_array_equal(out[3], xy[3])  # far away: untouched


def test_poincare_title_has_the_curvature():
    from cape_pipeline.hyperbolic import embed

    emb = embed(_graph(20), dim=2, max_epochs=20)
    fig = plot_poincare(emb)
    assert f"curvature −{emb.params['curvature']:.3g}" in fig.axes[0].get_title()


def _train_output():
    import pandas as pd

    from cape_pipeline.tasks import TaskResult
    from cape_pipeline.tasks.results import TrainOutput

    conf = pd.DataFrame([[8, 2], [1, 9]], index=["a", "b"], columns=["a", "b"])
    curves = {"pretrain_loss": [1.0, 0.8], "finetune_loss": [0.7, 0.5, 0.4], "val_score": [-0.6, -0.5, -0.45]}
    res = [TaskResult("annotation", {"accuracy": 0.8}, curves=curves, confusion=conf, params={"arm": pe, "seed": 0})
           for pe in ("cape", "none")]
    return TrainOutput(results=res, tasks=["annotation"], arms=["cape", "none"], d_model=8)


def test_training_curves_in_panels_and_confusion_with_counts():
    from types import SimpleNamespace

    from cape_pipeline.pl.report import report_figures

    encode = SimpleNamespace(embed_loss=[2.0, 1.0], discover_history=[], encodings=SimpleNamespace(graph=None))
    figs = report_figures(_train_output(), None, {"differences": []}, [], umap=False, encode=encode)
    loss = figs["loss.png"]  # Step I, Step II, then the transformers' pretraining of each arm
    assert [ax.get_title().split(":")[0] for ax in loss.axes] == ["Step I", "Step II", "Transformers"]
    assert {ln.get_label() for ln in loss.axes[2].get_lines()} == {"cape", "none"}
    curves = figs["curves_annotation.png"]
    assert len(curves.axes) == 3  # pretraining, fine-tuning, validation: one panel each
    styles = {line.get_linestyle() for line in curves.axes[0].get_lines()}
    assert len(styles) == 2  # the two arms differ in line style, not only in color
    texts = {t.get_text() for t in figs["confusion_annotation_cape.png"].axes[0].texts}
    assert {"8", "2", "1", "9"} <= texts


def test_umap_legend_has_a_title():
    import anndata as ad

    from cape_pipeline.pl.report import _umap_figure
    from cape_pipeline.tasks import TaskResult

    rng = np.random.default_rng(0)
    a = ad.AnnData(X=np.zeros((40, 2), dtype=np.float32))
    a.obs["cell_type"] = np.repeat(["t0", "t1"], 20)
    r = TaskResult("clustering", {}, embeddings=rng.normal(size=(40, 4)).astype(np.float32),
                   params={"label_key": "cell_type"})
    fig = _umap_figure("cape", r, a)
    assert fig.axes[0].get_legend().get_title().get_text() == "cell_type"


def test_step1_panel_says_the_thresholded_graph_is_acyclic():
    from cape_pipeline.pl.curves import plot_training_curves

    g = _graph(10)
    history = [{"h": 0.5, "neg_elbo": 10.0}, {"h": 0.04, "neg_elbo": 8.0}]
    fig = plot_training_curves([1.0, 0.5], history, graph=g)
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "h = 0.04 > 0" in texts and "acyclic (checked)" in texts
    assert not plot_training_curves([1.0], [{"h": 0.0, "neg_elbo": 1.0}], graph=g).axes[0].texts


#: Step I's records with the regression algorithm: counts per stage and split, then the vote
_REGRESSION_HISTORY = [
    *({"stage": "screen", "n_candidate_pairs": 5000, "split": k} for k in range(2)),
    {"stage": "edge test", "n_pairs": 4800, "n_accepted": 40, "split": 0},
    {"stage": "orientation", "n_skeleton": 30, "n_oriented": 30, "split": 0},
    {"stage": "pruning", "n_pruned": 3, "n_edges": 27, "split": 0},
    {"stage": "split vote", "n_splits": 2, "n_edges_any_split": 35, "n_voted": 20, "n_edges": 20},
]


def test_loss_panels_in_pipeline_order_step2_on_a_log_axis():
    """loss.png: Step I, then Step II (log y), then the transformers; the regression algorithm's
    panel shows its counts per stage instead of claiming that the graph was given."""
    from cape_pipeline.pl.curves import plot_training_curves

    g = CausalGraph(feature_names=_graph(10).feature_names, adjacency=_graph(10).adjacency,
                    params={"method": "cape", "support": "regression"})
    fig = plot_training_curves([3.0, 1.0, 0.1, 0.05], _REGRESSION_HISTORY, graph=g,
                               training={"cape": [1.0, 0.5], "none": [1.1, 0.6]})
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[0].startswith("Step I") and titles[1].startswith("Step II") and titles[2].startswith("Transformers")
    assert fig.axes[1].get_yscale() == "log" and fig.axes[0].get_yscale() == "log"
    words = " ".join([titles[0], *(t.get_text() for t in fig.axes[0].texts)])
    assert "graph was given" not in words and "no Step I history" not in words
    assert "regression algorithm" in titles[0] and "no loss curve" in titles[0]
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks[0] == "screened pairs" and any(t.startswith("kept by the") for t in ticks)
    two = plot_training_curves([1.0, 0.5], [], graph=CausalGraph(
        feature_names=g.feature_names, adjacency=g.adjacency, params={"method": "true-dag"}))
    assert len(two.axes) == 2 and "the graph was given" in " ".join(t.get_text() for t in two.axes[0].texts)


def test_umap_of_more_than_4096_cells():
    """scanpy 1.11's neighbours fail on scipy 1.17 above 4,096 cells (csr_array.getnnz): the
    report's evaluate stage died on 20,000 cells before the UMAP went to umap-learn directly."""
    import anndata as ad

    from cape_pipeline.pl.report import _umap_figure
    from cape_pipeline.tasks import TaskResult

    rng = np.random.default_rng(0)
    n = 4200
    a = ad.AnnData(X=np.zeros((n, 1), dtype=np.float32))
    a.obs["cell_type"] = np.repeat(["t0", "t1", "t2"], n // 3)
    centers = rng.normal(size=(3, 8)) * 4
    emb = (centers[np.repeat(np.arange(3), n // 3)] + rng.normal(size=(n, 8))).astype(np.float32)
    fig = _umap_figure("cape", TaskResult("clustering", {}, embeddings=emb, params={"label_key": "cell_type"}), a)
    assert sum(len(c.get_offsets()) for c in fig.axes[0].collections) == n


def test_layered_rows_in_a_fixed_order():
    """The layered DAG's rows: roots in the graph's order, each child under the mean place of its
    parents (networkx's multipartite layout ordered a row as a set: another order per process)."""
    import networkx as nx

    from cape_pipeline.pl.figures import _layout

    g = nx.DiGraph([("r0", "c1"), ("r1", "c0"), ("r2", "c0"), ("r2", "c1"), ("r0", "c2")])
    pos, used = _layout(g, "layered", 0)
    assert used == "layered"
    x = {n: p[0] for n, p in pos.items()}
    assert x["r0"] < x["r1"] < x["r2"] and pos["r0"][1] > pos["c0"][1]
    assert x["c2"] < x["c1"] < x["c0"]  # parents' mean place: r0 (c2) < r0, r2 (c1) < r1, r2 (c0)
