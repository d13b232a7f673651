"""Figures for Steps I–III: the causal DAG (alone or against a true DAG) and the Poincaré embedding
(a disk, or the 3-D ball when d = 3); the training curves are in :mod:`cape_pipeline.pl.curves`.

Every function draws on an Agg-backed :class:`matplotlib.figure.Figure` (no pyplot global
state), returns it, and writes a PNG when ``save`` is given.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Circle

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.pl._utils import (
    as_embedding_arrays,
    maybe_save,
    new_axes,
    place_hub_labels,
    place_labels,
)
from cape_pipeline.pl.curves import plot_training_curves

__all__ = ["plot_dag", "plot_poincare", "save_encoding_figures"]


def _subgraph_for_display(graph: CausalGraph, max_edges: int) -> tuple[Any, str]:
    """Return a networkx DiGraph of the ``max_edges`` strongest edges (largest
    weakly connected component if that splits the graph) and a caption."""
    import networkx as nx

    df = graph.to_frame()
    caption = f"{graph.n_features} features, {len(df)} edges"
    g = nx.DiGraph()
    if len(df) > max_edges:
        df = df.reindex(df["weight"].abs().sort_values(ascending=False).index[:max_edges])
        caption += f"; top {max_edges} by |weight|"
        g.add_weighted_edges_from(zip(df["source"], df["target"], df["weight"], strict=True))
        comps = list(nx.weakly_connected_components(g))
        if len(comps) > 1:
            largest = max(comps, key=len)
            g = g.subgraph(largest).copy()
            caption += f", largest component ({g.number_of_nodes()} nodes)"
    else:
        g.add_weighted_edges_from(zip(df["source"], df["target"], df["weight"], strict=True))
        n_isolated = graph.n_features - g.number_of_nodes()
        if graph.n_features <= 40 or n_isolated == graph.n_features:
            g.add_nodes_from(graph.feature_names.astype(str))  # small graphs: every feature drawn
        elif n_isolated:
            caption += f"; {n_isolated} features without edges not drawn"
    return g, caption


#: What the positions of each layout of :func:`plot_dag` mean (the figure's caption says it)
LAYOUT_CAPTIONS = {
    "layered": ("Rows are topological generations: top, the features without a parent among the drawn edges; "
                "each feature one row below its lowest parent, so every edge points down. Left-right order "
                "means nothing."),
    "spring": "Positions from a force-directed layout: linked features are drawn close; the axes mean nothing.",
    "circle": "Features clockwise from the top in their order in the data.",
}


def _layout(g: Any, layout: str, seed: int, order: Sequence[str] = ()) -> tuple[dict[Any, np.ndarray], str]:
    """Node positions and the layout used (``"layered"`` falls back to ``"spring"`` for a graph
    with cycles or without nodes)."""
    import networkx as nx

    if layout == "circle":  # clockwise from the top in ``order``: an edge (a chord) never crosses a node
        rank = {n: i for i, n in enumerate(order)}
        nodes = sorted(g.nodes, key=lambda n: rank.get(n, len(rank)))
        angle = np.pi / 2 - 2 * np.pi * np.arange(len(nodes)) / max(1, len(nodes))
        return {n: np.array([np.cos(a), np.sin(a)]) for n, a in zip(nodes, angle, strict=True)}, "circle"
    if layout == "layered" and nx.is_directed_acyclic_graph(g) and g.number_of_nodes():
        # rows: topological generations; within a row the nodes in the graph's order (the top
        # row) or by the mean place of their parents (fewer crossings), so that the drawing is
        # the same in every process (networkx's own multipartite layout orders a row as a set)
        first = {n: i for i, n in enumerate(g.nodes)}
        place: dict[Any, float] = {}
        xy = {}
        for k, gen in enumerate(nx.topological_generations(g)):
            row = sorted(gen, key=lambda n: (float(np.mean([place[p] for p in g.predecessors(n)])) if k else 0.0,
                                             first[n]))
            for i, n in enumerate(row):
                place[n] = i - (len(row) - 1) / 2
                xy[n] = (place[n], -float(k))
        arr = np.array(list(xy.values()), dtype=np.float64)
        arr -= arr.mean(axis=0)
        arr /= max(float(np.abs(arr).max()), 1e-12)
        return dict(zip(xy, arr, strict=True)), "layered"
    if layout not in ("layered", "spring"):
        raise ValueError(f"layout: expected 'layered', 'spring' or 'circle', got {layout!r}")
    return nx.spring_layout(g, seed=seed, k=1.5 / max(1.0, np.sqrt(g.number_of_nodes()))), "spring"


HUB_LABELS = 10
"""Nodes named in a DAG figure too large to name every node: the hubs."""


def _spread_labels(xy: np.ndarray, min_gap: float) -> np.ndarray:
    """Label positions near ``xy`` ``(n, 2)`` that keep at least ``min_gap`` apart vertically
    when they are closer than ``2·min_gap`` horizontally (a greedy pass in the order given:
    a label that would overlap one already placed moves down by ``min_gap`` until it fits)."""
    out = np.array(xy, dtype=np.float64, copy=True)
    for i in range(len(out)):
        for _ in range(50):
            close = [j for j in range(i) if abs(out[j, 0] - out[i, 0]) < 2 * min_gap and abs(out[j, 1] - out[i, 1]) < min_gap]
            if not close:
                break
            out[i, 1] -= min_gap
    return out


SIGN_COLORS = {"positive": "0.35", "negative": "tab:red"}
"""Edge colors of :func:`plot_dag` by the sign of the weight (a legend lists the signs that occur)."""

TRUTH_COLORS = {"correct": "tab:green", "reversed": "tab:orange", "extra": "tab:red", "missed": "0.6"}
"""Edge colors of :func:`plot_dag` against a true DAG, by status of the edge."""


def _against_truth(g: Any, graph: CausalGraph, truth: CausalGraph) -> tuple[list[str], list[tuple[str, str]]]:
    """Status of each edge of ``g`` against ``truth`` (``correct``, ``reversed`` or ``extra``), and
    the true edges among ``g``'s nodes that ``graph`` has in neither direction (``missed``)."""
    if not isinstance(truth, CausalGraph) or set(truth.feature_names.astype(str)) != set(graph.feature_names.astype(str)):
        raise ValueError("truth: expected a CausalGraph over the same features as graph")
    t = truth.to_frame()
    true_edges = list(zip(t["source"], t["target"], strict=True))
    true_set = set(true_edges)
    f = graph.to_frame()
    found = set(zip(f["source"], f["target"], strict=True))
    status = ["correct" if (s, d) in true_set else "reversed" if (d, s) in true_set else "extra" for s, d in g.edges]
    missed = [(s, d) for s, d in true_edges
              if (s, d) not in found and (d, s) not in found and s in g.nodes and d in g.nodes]
    return status, missed


def plot_dag(
    graph: CausalGraph,
    *,
    max_edges: int = 150,
    layout: str = "layered",
    pagerank: np.ndarray | None = None,
    labels: bool | None = None,
    seed: int = 0,
    truth: CausalGraph | None = None,
    ax: Axes | None = None,
    save: str | os.PathLike[str] | None = None,
) -> Figure:
    """Draw the causal DAG (Step I output) with networkx.

    Parameters
    ----------
    graph
        The DAG (``adjacency[m, n] ≠ 0`` ⇔ m → n), or an AnnData after
        :func:`cape_pipeline.tl.discover` (its ``varp["cape_dag"]``; nodes colored by
        ``var["cape_pagerank"]`` when :func:`~cape_pipeline.tl.embed` ran).
    max_edges
        Larger graphs show only their ``max_edges`` strongest edges (by |weight|) and, if that
        splits the graph, the largest weakly connected component.
    layout
        ``"layered"`` (topological generations, roots on top; falls back to spring for
        graphs with cycles), ``"spring"``, or ``"circle"`` (the features clockwise on a circle
        from the top in the graph's order, so no edge passes through a node: the same places
        for two graphs over the same features).
    pagerank
        ``(M,)`` values to color nodes by (e.g. ``encodings.pagerank``); default: uniform color.
    labels
        Draw every node name (``True``), none (``False``), or by default every name when at
        most 40 nodes are shown and else the :data:`HUB_LABELS` hubs (largest PageRank when
        given, else degree). No two label boxes intersect. A name drawn for every node sits on
        its node, or moves up or down with a leader line where it would cover another
        (:func:`~cape_pipeline.pl._utils.place_labels`); a hub's name sits beside its node, clear of
        every node and label, with a leader line (adjustText,
        :func:`~cape_pipeline.pl._utils.place_hub_labels`).
    seed
        Seed of the spring layout.
    truth
        A true DAG over the same features: each edge is colored by its status against it
        (:data:`TRUTH_COLORS`: green in the truth, orange reversed, red not in the truth), the
        true edges found in neither direction are drawn dashed grey, and a legend counts them.
        Default: edges colored by the sign of their weight (:data:`SIGN_COLORS`), with a legend
        entry for each sign that occurs.
    ax
        Axes to draw on; default: a new figure.
    save
        Write a PNG here.

    Returns
    -------
    matplotlib.figure.Figure
        Its title gives the counts and what the positions mean (:data:`LAYOUT_CAPTIONS`).

    Raises
    ------
    TypeError
        If ``graph`` is not a CausalGraph or an AnnData.
    ValueError
        For an unknown ``layout``, or a ``truth`` over other features.
    CapeDataError
        An AnnData without ``varp["cape_dag"]`` (a ``ValueError``; names ``tl.discover``).
    """
    import networkx as nx

    if hasattr(graph, "varp") and hasattr(graph, "var_names"):  # an AnnData after tl.discover
        from cape_pipeline import _keys

        adata, graph = graph, CausalGraph.from_anndata(graph, _keys.DAG)
        if pagerank is None and _keys.PAGERANK in adata.var:
            pagerank = np.asarray(adata.var[_keys.PAGERANK], dtype=np.float64)
    if not isinstance(graph, CausalGraph):
        raise TypeError(f"graph: expected a CausalGraph or an AnnData after tl.discover, got {type(graph).__name__}")
    fig, ax = new_axes(ax, (7, 6.5))
    g, caption = _subgraph_for_display(graph, max_edges)
    pos, used = _layout(g, layout, seed, graph.feature_names.astype(str))
    nodes = list(g.nodes)
    if pagerank is not None:
        lookup = dict(zip(graph.feature_names.astype(str), np.asarray(pagerank), strict=True))
        color: Any = [lookup[n] for n in nodes]
    else:
        color = "tab:blue"
    signed = np.array([float(d["weight"]) for _, _, d in g.edges(data=True)])
    weights = np.abs(signed)
    widths = 0.5 + 2.5 * weights / weights.max() if weights.size and weights.max() > 0 else 1.0
    edge_color = [SIGN_COLORS["negative"] if w < 0 else SIGN_COLORS["positive"] for w in signed]
    if truth is not None:
        status, missed = _against_truth(g, graph, truth)
        edge_color = [TRUTH_COLORS[s] for s in status]
    size = 300 if len(nodes) <= 40 else max(20, 6000 // max(1, len(nodes)))
    drawn = nx.draw_networkx_nodes(
        g, pos, nodelist=nodes, node_color=color, node_size=size, cmap="viridis", ax=ax
    )
    nx.draw_networkx_edges(
        g, pos, width=widths, edge_color=edge_color, arrowsize=10, node_size=size, ax=ax, alpha=0.8
    )
    if truth is not None:
        if missed:
            nx.draw_networkx_edges(nx.DiGraph(missed), pos, width=1.2, edge_color=TRUTH_COLORS["missed"],
                                   style="dashed", arrowsize=10, node_size=size, ax=ax, alpha=0.8)
        labels_of = {"correct": "correct", "reversed": "reversed", "extra": "not in truth"}
        handles = [Line2D([], [], color=TRUTH_COLORS[k], lw=2, label=f"{v} ({status.count(k)})")
                   for k, v in labels_of.items()]
        handles.append(Line2D([], [], color=TRUTH_COLORS["missed"], lw=2, ls="--", label=f"missed ({len(missed)})"))
        ax.legend(handles=handles, loc="lower right", fontsize=8, frameon=False)
    elif signed.size:  # one entry per sign that occurs
        handles = [Line2D([], [], color=SIGN_COLORS[k], lw=2, label=f"{k} weight ({n})")
                   for k, n in (("positive", int((signed >= 0).sum())), ("negative", int((signed < 0).sum()))) if n]
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(handles), fontsize=8,
                  frameon=False, title="edges (width ∝ |weight|)", title_fontsize=8)
    rank = {n: lookup[n] for n in nodes} if pagerank is not None else {n: float(g.degree(n)) for n in nodes}
    by_rank = sorted(nodes, key=lambda n: -rank[n])
    named: list[str] = []
    hubs = False
    if labels if labels is not None else len(nodes) <= 40:
        named = by_rank
    elif labels is None:  # larger graphs: name the hubs (top HUB_LABELS by PageRank, else degree)
        named, hubs = by_rank[:HUB_LABELS], True
        caption += f"; the {len(named)} hubs by {'PageRank' if pagerank is not None else 'degree'} named"
    if pagerank is not None and drawn is not None:
        fig.colorbar(drawn, ax=ax, label="PageRank π (Eq. 18)", shrink=0.7)
    against = "; edges against the true DAG" if truth is not None else ""
    ax.set_title(textwrap.fill(f"Causal DAG ({caption}){against}", 100) + "\n"  # fits the 7-inch figure
                 + textwrap.fill(LAYOUT_CAPTIONS[used], 110), fontsize=8.5)
    ax.set_axis_off()
    style = {"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.85}
    if named and hubs:  # last, once the layout is final: beside their nodes, clear of every node and label
        place_hub_labels(ax, pos, named, drawn, fontsize=8, bbox=style)
    elif named:  # every node named: on its node, no two label boxes intersecting
        place_labels(ax, pos, named, fontsize=8, bbox=style)
    maybe_save(fig, save)
    return fig


def _project_2d(e: np.ndarray) -> tuple[np.ndarray, str]:
    """First two coordinates when d ≤ 2; else each point keeps its true radius ‖e‖ (its
    hyperbolic distance to the origin, i.e. the causal-generality axis) and takes the direction
    of its uncentered 2-D PCA projection. A plain linear projection would pull points from the
    boundary of a high-dimensional ball towards the center and hide the hierarchy."""
    if e.shape[1] == 1:
        return np.column_stack([e[:, 0], np.zeros(len(e))]), "e₀"
    if e.shape[1] == 2:
        return e, "Poincaré coordinates"
    _, _, vt = np.linalg.svd(e, full_matrices=False)
    proj = e @ vt[:2].T
    pn = np.linalg.norm(proj, axis=1, keepdims=True)
    radius = np.linalg.norm(e, axis=1, keepdims=True)
    xy = np.where(pn > 0, proj / np.where(pn > 0, pn, 1.0), 0.0) * radius
    return xy, f"true radius ‖e‖, direction from a 2-D PCA of the {e.shape[1]}-D ball"


def _strongest_edges(graph: CausalGraph, names: np.ndarray, max_edges: int) -> list[tuple[int, int]]:
    """Row indices (into ``names``) of the ``max_edges`` edges of largest |weight|, strongest first."""
    df = graph.to_frame()
    df = df.reindex(df["weight"].abs().sort_values(ascending=False).index[:max_edges])
    index = {n: i for i, n in enumerate(names)}
    return [(index[s], index[t]) for s, t in zip(df["source"], df["target"], strict=True)]


def _label_rows(annotate: int | Sequence[str], pr: np.ndarray, names: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """Rows to name: the ``annotate`` shown features of largest PageRank, or the named ones."""
    ranked = np.argsort(-np.where(shown, pr, -np.inf))  # features not shown are not labelled
    return (
        ranked[: min(int(annotate), int(shown.sum()))]
        if isinstance(annotate, int)
        else np.flatnonzero(np.isin(names, list(annotate)))
    )


def _coincident_groups(e: np.ndarray, rows: np.ndarray, tol: float = 0.05) -> list[list[int]]:
    """``rows`` (ascending) grouped greedily by Euclidean distance < ``tol`` to the group's first point."""
    left = sorted(int(i) for i in rows)
    groups = []
    while left:
        group = [j for j in left if np.linalg.norm(e[j] - e[left[0]]) < tol]
        groups.append(group)
        left = [j for j in left if j not in group]
    return groups


def _ball_3d(e: np.ndarray, pr: np.ndarray, names: np.ndarray, graph: CausalGraph | None, *,
             annotate: int | Sequence[str], edges: bool, max_edges: int, ax: Axes | None) -> tuple[Figure, Axes]:
    """:func:`plot_poincare` with ``projection="3d"``: the unit ball of R³, its wireframe sphere, the
    edges as lines, the points colored by PageRank; points that (nearly) coincide share one label."""
    if ax is None:
        fig = Figure(figsize=(7.5, 6.5), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1, projection="3d")
    elif getattr(ax, "name", "") != "3d":
        raise ValueError("ax: projection='3d' needs 3-D axes (fig.add_subplot(projection='3d'))")
    a: Any = ax
    fig = a.figure
    u, v = np.mgrid[0 : 2 * np.pi : 25j, 0 : np.pi : 13j]
    a.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.55", alpha=0.15, lw=0.6)
    if edges and graph is not None and graph.n_edges:
        for i, j in _strongest_edges(graph, names, max_edges):
            a.plot(*(np.stack([e[i], e[j]]).T), color="0.35", lw=1.0, alpha=0.8)
    # a linear color scale: the ball is for small graphs, whose PageRank spans less than a decade
    sc = a.scatter(e[:, 0], e[:, 1], e[:, 2], c=pr, cmap="viridis", s=70 if len(e) <= 40 else 18,
                   depthshade=False, edgecolors="k", linewidths=0.5)
    for group in _coincident_groups(e, _label_rows(annotate, pr, names, np.ones(len(e), dtype=bool))):
        p = e[group[0]]
        a.text(p[0], p[1], p[2], "  " + ",".join(names[group]), fontsize=9)
    fig.colorbar(sc, ax=a, label="PageRank π (Eq. 18)", shrink=0.6, pad=0.1)
    for setter in (a.set_xlim, a.set_ylim, a.set_zlim):
        setter(-1, 1)
    a.set_box_aspect((1, 1, 1))
    a.set_xlabel("e₀")
    a.set_ylabel("e₁")
    a.set_zlabel("e₂")
    return fig, a


def plot_poincare(
    obj: Any,
    *,
    annotate: int | Sequence[str] = 10,
    edges: bool = True,
    max_edges: int = 300,
    projection: str = "2d",
    ax: Axes | None = None,
    save: str | os.PathLike[str] | None = None,
) -> Figure:
    """Poincaré-ball view of the embedding, colored by causal PageRank (Eq. A.22, Eq. 18).

    Roots (high PageRank) should sit near the center and leaves near the unit circle.

    Parameters
    ----------
    obj
        :class:`~cape_pipeline.encodings.CapeEncodings`,
        :class:`~cape_pipeline.hyperbolic.HyperbolicEmbedding` (``poincare`` (M, d), ``pagerank``),
        or an AnnData after :func:`cape_pipeline.tl.embed`.
    annotate
        Label the ``annotate`` features with the largest PageRank, or the named features.
    edges
        Draw the DAG's edges (the strongest ``max_edges``) as faint lines when a graph is attached.
    max_edges
        Maximum number of edges drawn.
    projection
        ``"2d"``: the unit disk (d > 2 keeps each radius and takes the direction of a 2-D PCA).
        ``"3d"`` (d = 3 only): the unit ball of R³ in perspective, every point drawn (PageRank
        on a linear color scale); points that (nearly) coincide share one label.
    ax
        Axes to draw on (3-D axes for ``projection="3d"``); default: a new figure.
    save
        Write a PNG here.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError
        If ``obj`` has no ``poincare``/``pagerank`` (an AnnData: no ``tl.embed`` output).
    ValueError
        An unknown ``projection``, or ``"3d"`` with d ≠ 3 or with 2-D ``ax``.
    """
    e, pr, names, graph = as_embedding_arrays(obj)
    e = np.asarray(e, dtype=np.float64)
    pr = np.asarray(pr, dtype=np.float64)
    names = np.asarray(names).astype(str)
    kappa = (getattr(obj, "params", None) or {}).get("curvature")
    curv = f", curvature −{kappa:.3g}" if isinstance(kappa, (int, float)) and kappa == kappa else ""
    if projection not in ("2d", "3d"):
        raise ValueError(f"projection: expected '2d' or '3d', got {projection!r}")
    if projection == "3d":
        if e.shape[1] != 3:
            raise ValueError(f"projection='3d' draws the unit ball of R³: expected d = 3, got d = {e.shape[1]}")
        fig, ax = _ball_3d(e, pr, names, graph, annotate=annotate, edges=edges, max_edges=max_edges, ax=ax)
        ax.set_title(f"Poincaré ball, M = {len(e)}, d = 3{curv}", fontsize=9)
        maybe_save(fig, save)
        return fig
    xy, how = _project_2d(e)
    fig, ax = new_axes(ax, (6.5, 6))
    ax.add_patch(Circle((0, 0), 1.0, fill=False, color="0.3", lw=1))
    if edges and graph is not None and graph.n_edges:
        for i, j in _strongest_edges(graph, names, max_edges):
            ax.plot([xy[i, 0], xy[j, 0]], [xy[i, 1], xy[j, 1]], color="0.7", lw=0.5, zorder=1)
    positive = pr[pr > 0]
    norm = (
        LogNorm(vmin=positive.min(), vmax=positive.max())
        if positive.size and positive.min() < positive.max()
        else None
    )
    at_origin = np.linalg.norm(e, axis=1) == 0
    if at_origin.any() and not at_origin.all():
        ax.scatter([0], [0], marker="x", color="0.4", s=60, zorder=3,
                   label=f"{int(at_origin.sum())} features without edges (origin)")
        ax.legend(loc="lower left", fontsize=7, frameon=False)
    shown = ~at_origin if not at_origin.all() else at_origin
    sc = ax.scatter(
        xy[shown, 0], xy[shown, 1], c=pr[shown], cmap="viridis", norm=norm,
        s=18 if shown.sum() > 200 else 40, zorder=2,
    )
    fig.colorbar(sc, ax=ax, label="PageRank π (Eq. 18)", shrink=0.7)
    label_idx = _label_rows(annotate, pr, names, shown)  # features at the origin are not labelled
    spots = _spread_labels(xy[label_idx] + 0.02, 0.045)
    for i, spot in zip(label_idx, spots, strict=True):
        moved = np.abs(spot - (xy[i] + 0.02)).max() > 1e-9
        ax.annotate(names[i], xy[i], xytext=spot, fontsize=7, textcoords="data",
                    arrowprops={"arrowstyle": "-", "color": "0.5", "lw": 0.5} if moved else None)
    ax.set_xlim(-1.05, 1.05)
    ax.set_ylim(-1.05, 1.05)
    ax.set_aspect("equal")
    if e.shape[1] > 2:
        ax.set_xlabel("‖e‖ × direction on PC 1")
        ax.set_ylabel("‖e‖ × direction on PC 2")
    else:
        ax.set_xlabel("e₀")
        ax.set_ylabel("e₁" if e.shape[1] == 2 else "")
    ax.set_title(f"Poincaré ball, M = {len(e)}, d = {e.shape[1]}{curv} ({how})", fontsize=9)
    maybe_save(fig, save)
    return fig


def save_encoding_figures(
    encodings: Any,
    d: str | os.PathLike[str],
    *,
    embed_loss: Sequence[float] = (),
    discover_history: Sequence[Mapping[str, Any]] = (),
) -> list[Path]:
    """Render the figures that travel with exported encodings into directory ``d`` (PNG,
    120 dpi, each written under a temporary name and renamed): ``dag.png``
    (:func:`plot_dag`, when the encodings carry their graph), ``poincare.png``
    (:func:`plot_poincare`) and ``loss.png`` (:func:`plot_training_curves`).

    Returns
    -------
    list of Path
        The files written.
    """
    from cape_pipeline._utils import atomic_path

    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    figs = {
        "poincare.png": plot_poincare(encodings),
        "loss.png": plot_training_curves(embed_loss, discover_history, graph=encodings.graph),
    }
    if encodings.graph is not None:
        figs["dag.png"] = plot_dag(encodings.graph, pagerank=encodings.pagerank)
    written = []
    for name, fig in figs.items():
        with atomic_path(d / name) as tmp:
            fig.savefig(tmp, dpi=120, bbox_inches="tight", format="png")
        written.append(d / name)
    return written
