"""Figures for Steps I–III: the causal DAG, the Poincaré embedding and the training loss.

Every function draws on an Agg-backed :class:`matplotlib.figure.Figure` (no pyplot global
state), returns it, and writes a PNG when ``save`` is given.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Circle

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.pl._utils import as_embedding_arrays, maybe_save, new_axes

__all__ = ["plot_dag", "plot_poincare", "plot_loss"]


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


def _layout(g: Any, layout: str, seed: int) -> dict[Any, np.ndarray]:
    import networkx as nx

    if layout == "layered" and nx.is_directed_acyclic_graph(g) and g.number_of_nodes():
        for layer, nodes in enumerate(nx.topological_generations(g)):
            for n in nodes:
                g.nodes[n]["layer"] = layer
        pos = nx.multipartite_layout(g, subset_key="layer", align="horizontal")
        return {n: np.array([x, -y]) for n, (x, y) in pos.items()}
    if layout not in ("layered", "spring"):
        raise ValueError(f"layout: expected 'layered' or 'spring', got {layout!r}")
    return nx.spring_layout(g, seed=seed, k=1.5 / max(1.0, np.sqrt(g.number_of_nodes())))


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


def plot_dag(
    graph: CausalGraph,
    *,
    max_edges: int = 150,
    layout: str = "layered",
    pagerank: np.ndarray | None = None,
    labels: bool | None = None,
    seed: int = 0,
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
        graphs with cycles) or ``"spring"``.
    pagerank
        ``(M,)`` values to color nodes by (e.g. ``encodings.pagerank``); default: uniform color.
    labels
        Draw every node name (``True``), none (``False``), or by default every name when at
        most 40 nodes are shown and else the :data:`HUB_LABELS` hubs (largest PageRank when
        given, else degree).
    seed
        Seed of the spring layout.
    ax
        Axes to draw on; default: a new figure.
    save
        Write a PNG here.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError
        If ``graph`` is not a CausalGraph or an AnnData.
    ValueError
        For an unknown ``layout``.
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
    fig, ax = new_axes(ax, (7, 6))
    g, caption = _subgraph_for_display(graph, max_edges)
    pos = _layout(g, layout, seed)
    nodes = list(g.nodes)
    if pagerank is not None:
        lookup = dict(zip(graph.feature_names.astype(str), np.asarray(pagerank), strict=True))
        color: Any = [lookup[n] for n in nodes]
    else:
        color = "tab:blue"
    weights = np.array([abs(d["weight"]) for _, _, d in g.edges(data=True)])
    widths = 0.5 + 2.5 * weights / weights.max() if weights.size else []
    edge_color = ["tab:red" if d["weight"] < 0 else "0.35" for _, _, d in g.edges(data=True)]
    size = 300 if len(nodes) <= 40 else max(20, 6000 // max(1, len(nodes)))
    drawn = nx.draw_networkx_nodes(
        g, pos, nodelist=nodes, node_color=color, node_size=size, cmap="viridis", ax=ax
    )
    nx.draw_networkx_edges(
        g, pos, width=widths, edge_color=edge_color, arrowsize=10, node_size=size, ax=ax, alpha=0.8
    )
    if labels if labels is not None else len(nodes) <= 40:
        nx.draw_networkx_labels(g, pos, font_size=8, ax=ax)
    elif labels is None:  # larger graphs: name the hubs (top HUB_LABELS by PageRank, else degree)
        if pagerank is not None:
            rank = {n: lookup[n] for n in nodes}
        else:
            rank = {n: float(g.degree(n)) for n in nodes}
        hubs = sorted(nodes, key=lambda n: -rank[n])[:HUB_LABELS]
        nx.draw_networkx_labels(g, pos, labels={n: n for n in hubs}, font_size=8, ax=ax,
                                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7})
        caption += f"; the {len(hubs)} hubs by {'PageRank' if pagerank is not None else 'degree'} named"
    if pagerank is not None and drawn is not None:
        fig.colorbar(drawn, ax=ax, label="PageRank π (Eq. 18)", shrink=0.7)
    ax.set_title(f"Causal DAG ({caption}); red = negative weight", fontsize=9)
    ax.set_axis_off()
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


def plot_poincare(
    obj: Any,
    *,
    annotate: int | Sequence[str] = 10,
    edges: bool = True,
    max_edges: int = 300,
    ax: Axes | None = None,
    save: str | os.PathLike[str] | None = None,
) -> Figure:
    """Poincaré-ball view of the embedding, colored by causal PageRank (Eq. A.22, Eq. 18).

    Roots (high PageRank) should sit near the center and leaves near the unit circle.

    Parameters
    ----------
    obj
        :class:`~cape_pipeline.encodings.CapeEncodings` or
        :class:`~cape_pipeline.hyperbolic.HyperbolicEmbedding` (``poincare`` (M, d), ``pagerank``).
    annotate
        Label the ``annotate`` features with the largest PageRank, or the named features.
    edges
        Draw the DAG's edges (the strongest ``max_edges``) as faint lines when a graph is attached.
    max_edges
        Maximum number of edges drawn.
    ax
        Axes to draw on; default: a new figure.
    save
        Write a PNG here.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError
        If ``obj`` has no ``poincare``/``pagerank``.
    """
    e, pr, names, graph = as_embedding_arrays(obj)
    e = np.asarray(e, dtype=np.float64)
    pr = np.asarray(pr, dtype=np.float64)
    names = np.asarray(names).astype(str)
    xy, how = _project_2d(e)
    fig, ax = new_axes(ax, (6.5, 6))
    ax.add_patch(Circle((0, 0), 1.0, fill=False, color="0.3", lw=1))
    if edges and graph is not None and graph.n_edges:
        df = graph.to_frame()
        df = df.reindex(df["weight"].abs().sort_values(ascending=False).index[:max_edges])
        index = {n: i for i, n in enumerate(names)}
        for s, t in zip(df["source"], df["target"], strict=True):
            i, j = index[s], index[t]
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
    ranked = np.argsort(-np.where(shown, pr, -np.inf))  # features at the origin are not labelled
    label_idx = (
        ranked[: min(int(annotate), int(shown.sum()))]
        if isinstance(annotate, int)
        else np.flatnonzero(np.isin(names, list(annotate)))
    )
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
    kappa = (getattr(obj, "params", None) or {}).get("curvature")
    curv = f", curvature −{kappa:.3g}" if isinstance(kappa, (int, float)) and kappa == kappa else ""
    ax.set_title(f"Poincaré ball, M = {len(e)}, d = {e.shape[1]}{curv} ({how})", fontsize=9)
    maybe_save(fig, save)
    return fig


def plot_loss(
    history: Sequence[float] | Mapping[str, Sequence[float]] | Any,
    *,
    logy: bool = False,
    label: str | None = None,
    ax: Axes | None = None,
    save: str | os.PathLike[str] | None = None,
) -> Figure:
    """Training curves: loss per epoch (Eq. 15 for the embedding, Eq. 10 terms for Step I).

    Parameters
    ----------
    history
        A sequence of floats, an object with ``loss_history`` (HyperbolicEmbedding), an
        AnnData after :func:`cape_pipeline.tl.embed` (its stored loss curve), or a
        mapping ``{label: sequence}`` of several curves. A mapping is drawn one panel per curve
        (their scales differ, e.g. −ELBO and h(A)), or overlaid when ``ax`` is given; empty
        curves are skipped.
    logy
        Logarithmic y axis.
    label
        Legend label (single curve).
    ax
        Axes to draw on (to overlay several curves); default: a new figure.
    save
        Write a PNG here.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If there is no loss value to draw.
    """
    if hasattr(history, "uns") and hasattr(history, "var_names"):  # an AnnData after tl.embed
        from cape_pipeline import _keys

        stored = (history.uns.get(_keys.UNS) or {}).get("embed", {}).get("loss_history")
        if stored is None:
            raise ValueError("plot_loss: adata.uns['cape']['embed']['loss_history'] not found; run "
                             "cape_pipeline.tl.embed(adata) first")
        history, label = np.asarray(stored, dtype=np.float64), label or "embed (Eq. 15)"
    if isinstance(history, Mapping):
        curves = {
            str(k): np.asarray(v, dtype=np.float64).ravel() for k, v in history.items() if len(v)
        }
    else:
        curves = {
            label or "": np.asarray(getattr(history, "loss_history", history), dtype=np.float64)
        }
    if not curves or any(v.ndim != 1 or v.size == 0 for v in curves.values()):
        raise ValueError("history: expected a non-empty sequence of loss values")
    if ax is not None or len(curves) == 1:
        fig, ax = new_axes(ax, (6, 4))
        axes = [ax] * len(curves)
    else:
        fig = Figure(figsize=(4.2 * len(curves), 3.6), layout="constrained")
        FigureCanvasAgg(fig)
        axes = list(fig.subplots(1, len(curves), squeeze=False)[0])
    for (name, values), a in zip(curves.items(), axes, strict=True):
        a.plot(np.arange(1, values.size + 1), values, label=name or None)
        a.set_xlabel("epoch" if len(curves) == 1 or "embed" in name else "step")
        a.set_ylabel("loss")
        if logy:
            a.set_yscale("log")
        if len(curves) > 1 and len(set(map(id, axes))) > 1:
            a.set_title(name, fontsize=9)
        elif name:
            a.legend()
        a.grid(alpha=0.3)
    maybe_save(fig, save)
    return fig


def plot_training_curves(
    embed_loss: Sequence[float], discover_history: Sequence[Mapping[str, Any]], *, graph: CausalGraph | None = None
) -> Figure:
    """Two panels: Step II loss per epoch (Eq. 15), and Step I −ELBO and h(A) at the end of each
    augmented-Lagrangian outer step (Eqs. 8 and 10, log scale). A panel without data says why
    (a given graph has no Step I history).

    Parameters
    ----------
    embed_loss
        Loss per epoch of :func:`cape_pipeline.hyperbolic.embed` (``loss_history``).
    discover_history
        ``CausalGraph.history`` of Step I: one mapping per outer step with ``h`` (and
        ``neg_elbo`` for method ``cape``), or per epoch with ``stage``, ``val_nll`` and ``h``
        (support ``"learned"``: validation NLL per stage and ρ(A) on a second axis).
    graph
        The returned DAG: when the acyclicity measure ends above 0 but this thresholded graph
        is acyclic, the Step I panel says so (h measures the continuous weights, not the
        returned graph).
    """
    fig = Figure(figsize=(11, 4), layout="constrained")
    FigureCanvasAgg(fig)
    ax_embed, ax_disc = fig.subplots(1, 2)
    if len(embed_loss):
        plot_loss(list(embed_loss), ax=ax_embed, label="contrastive + PageRank loss (Eq. 15)")
    else:
        _no_curve(ax_embed, "no Step II loss recorded")
    ax_embed.set_title("Step II: hyperboloid embedding")
    steps = [h for h in discover_history if "h" in h]
    if steps and all("stage" in h and "val_nll" in h for h in steps):
        # support="learned": validation NLL per epoch, stages side by side, and ρ(A) in stage 2
        x = np.arange(1, len(steps) + 1)
        stage = np.array([int(h["stage"]) for h in steps])
        val = np.array([float(h["val_nll"]) for h in steps])
        names = {1: "stage 1: learned screen", 2: "stage 2: acyclic fit", 3: "stage 3: refit on the DAG"}
        for k in np.unique(stage):
            ax_disc.plot(x[stage == k], val[stage == k], label=f"validation NLL, {names.get(int(k), k)}")
        ax_disc.set_xlabel("epoch (all stages)")
        ax_disc.set_ylabel("held-out Gaussian NLL (nats per row)")
        two = stage == 2
        if two.any():
            ax_h = ax_disc.twinx()
            ax_h.plot(x[two], [max(float(h["h"]), 1e-16) for h, t in zip(steps, two, strict=True) if t],
                      color="0.3", ls="--", label="ρ(A), stage 2")
            ax_h.set_yscale("log")
            ax_h.set_ylabel("spectral radius ρ(A) (log scale)")
            ax_h.legend(loc="upper center")
        ax_disc.legend(loc="upper right", fontsize=8)
    elif steps:
        x = np.arange(1, len(steps) + 1)
        if all("neg_elbo" in h for h in steps):
            ax_disc.plot(x, [float(h["neg_elbo"]) for h in steps], marker="o", label="−ELBO")
        ax_disc.plot(x, [max(float(h["h"]), 1e-16) for h in steps], marker="s", label="h(A)")
        ax_disc.set_yscale("log")
        ax_disc.set_xlabel("outer step (augmented Lagrangian)")
        ax_disc.set_ylabel("value at the end of the outer step (log scale)")
        ax_disc.legend()
    else:
        _no_curve(ax_disc, "no Step I history:\nthe graph was given (discover.method=true-dag)\nor came from a baseline")
    last_h = float(steps[-1]["h"]) if steps else 0.0
    if graph is not None and last_h > 0 and graph.is_dag():
        ax_disc.text(0.02, 0.02, f"the last h = {last_h:.2g} > 0 measures the continuous weights;\n"
                     f"the returned graph ({graph.n_edges} edges above the threshold) is acyclic (checked)",
                     transform=ax_disc.transAxes, fontsize=7, va="bottom",
                     bbox={"boxstyle": "round", "fc": "white", "ec": "0.7", "alpha": 0.9})
    ax_disc.set_title("Step I: causal discovery")
    return fig


def _no_curve(ax: Axes, text: str) -> None:
    """An empty panel that says why it is empty (no axes with meaningless ticks)."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=10, color="0.35")
    ax.set_axis_off()


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
