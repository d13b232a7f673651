"""Does a Step II embedding carry the DAG? Measured properties (paper 000, Sec. 3.2 and 5.1).

* **Reconstruction** (Nickel & Kiela 2017, Sec. 4.1): for every feature u with at least one
  edge, rank all other features by distance to u; the DAG neighbours of u (edges in either
  direction) should come first. ``map`` is the mean over u of the average precision of that
  ranking; ``mean_rank`` is the mean over edges (u, v) of the rank of v among v and the
  non-neighbours of u (1 = best).
* **Distortion**: mean over pairs of connected features of ``|d_emb / (s · d_graph) − 1|``,
  ``d_graph`` the shortest-path length in the undirected skeleton (hops), with the scale ``s``
  the median of ``d_emb / d_graph`` (the graph metric has no unit; 0 = isometric up to scale).
* **Hierarchy** (causal generality, paper 000 Sec. 3.2): Spearman ρ of ‖e‖ with −PageRank
  (positive: causally general features nearer the origin) and with topological depth (longest
  path from a root; positive: deeper features farther out). Computed over features with at
  least one edge: an isolated feature has no position in the hierarchy.

All of this is evaluation, not a hot path: distances are computed in row chunks of the
``(anchors, M)`` distance matrix, never an M × M array, and for M above ``max_anchors`` a
random subset of anchors (rows) is used.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["embedding_quality", "reconstruction", "distortion", "topological_depth", "norm_spearman"]

_CHUNK = 256


def _skeleton(graph: Any) -> sp.csr_array:
    a = sp.csr_array(graph.adjacency) != 0
    und = sp.csr_array(a + a.T, dtype=bool)
    und.setdiag(False)
    und.eliminate_zeros()
    return und


def _anchors(candidates: np.ndarray, cap: int | None, seed: int) -> np.ndarray:
    if cap is None or candidates.size <= cap:
        return candidates
    return np.sort(np.random.default_rng(seed).choice(candidates, size=cap, replace=False))


def reconstruction(
    emb: Any, *, max_anchors: int | None = 2000, seed: int = 0, connected_only: bool = False
) -> dict[str, float]:
    """Edge reconstruction from distances (Nickel & Kiela 2017): mAP and mean rank.

    Measures Eq. 13 of paper 000, causal strength σ(v_m, v_n) ∝ 1 / d_l(p_m, p_n): the
    children of a feature should be among its nearest neighbours on the hyperboloid.

    Parameters
    ----------
    emb
        A :class:`~cape_pipeline.hyperbolic.embed.HyperbolicEmbedding` with its ``graph``.
    max_anchors
        Evaluate at most this many anchors u (a seeded random subset; ``None`` = all).
    seed
        Seed of that subset.
    connected_only
        Rank only features with at least one edge as candidates (features without edges, e.g.
        all placed at the origin by ``embed(isolated="origin")``, are left out of the ranking).

    Returns
    -------
    dict
        ``map`` in [0, 1] (1 = every node's neighbours are its nearest points), ``mean_rank``
        ≥ 1, ``n_anchors``. NaN values when the graph has no edge.
    """
    variants = ("connected",) if connected_only else ("all",)
    return _reconstruction(emb, max_anchors=max_anchors, seed=seed, variants=variants)[variants[0]]


def _reconstruction(
    emb: Any, *, max_anchors: int | None, seed: int, variants: tuple[str, ...]
) -> dict[str, dict[str, float]]:
    """:func:`reconstruction` for several candidate sets (``"all"``, ``"connected"``) from one
    pass over the anchors' distance rows."""
    und = _skeleton(emb.graph)
    deg = np.diff(und.indptr)
    rows = _anchors(np.flatnonzero(deg > 0), max_anchors, seed)
    if rows.size == 0:
        return {v: {"map": float("nan"), "mean_rank": float("nan"), "n_anchors": 0} for v in variants}
    m = emb.n_features
    aps: dict[str, list[np.ndarray]] = {v: [] for v in variants}
    ranks: dict[str, list[np.ndarray]] = {v: [] for v in variants}
    positions = np.arange(1, m + 1)
    for start in range(0, rows.size, _CHUNK):
        chunk = rows[start : start + _CHUNK]
        dist = np.asarray(emb.distances(chunk), dtype=np.float64)
        dist[np.arange(chunk.size), chunk] = np.inf  # the anchor itself ranks last
        truth = und[chunk].toarray()
        for v in variants:
            if v == "connected":
                dist = dist.copy()
                dist[:, deg == 0] = np.inf  # never ranked before a neighbour
            order = np.argsort(dist, axis=1, kind="stable")
            lab = np.take_along_axis(truth, order, axis=1)
            cum = np.cumsum(lab, axis=1)
            npos = cum[:, -1]
            aps[v].append((np.where(lab, cum / positions, 0.0).sum(1)) / npos)
            # rank of a neighbour among itself and the non-neighbours: 1 + non-neighbours before it
            j = np.broadcast_to(positions - 1, lab.shape)
            ranks[v].append((j - cum + 2)[lab])
    return {
        v: {
            "map": float(np.mean(np.concatenate(aps[v]))),
            "mean_rank": float(np.mean(np.concatenate(ranks[v]))),
            "n_anchors": int(rows.size),
        }
        for v in variants
    }


def distortion(emb: Any, *, max_sources: int | None = 256, seed: int = 0) -> float:
    """Average relative distortion of skeleton shortest-path lengths (see the module docstring).

    Parameters
    ----------
    emb
        Embedding with its ``graph``.
    max_sources
        Breadth-first searches from at most this many sources (seeded subset; ``None`` = all).
    seed
        Seed of that subset.

    Returns
    -------
    float
        ≥ 0; NaN when no two features are connected.
    """
    from scipy.sparse.csgraph import shortest_path

    und = _skeleton(emb.graph)
    src = _anchors(np.flatnonzero(np.diff(und.indptr) > 0), max_sources, seed)
    if src.size == 0:
        return float("nan")
    hops = shortest_path(und, unweighted=True, directed=False, indices=src)
    d_emb = np.asarray(emb.distances(src), dtype=np.float64)
    ok = np.isfinite(hops) & (hops > 0)
    if not ok.any():
        return float("nan")
    ratio = d_emb[ok] / hops[ok]
    scale = float(np.median(ratio))
    if not scale > 0:
        return float("nan")
    return float(np.mean(np.abs(ratio / scale - 1.0)))


def topological_depth(graph: Any) -> np.ndarray:
    """Longest directed path from a root to each feature (roots and isolated features: 0).

    A graph with directed cycles is measured on its condensation (each strongly connected
    component is one node). ``(M,)`` int64, in ``graph.feature_names`` order.
    """
    import networkx as nx

    cond = nx.condensation(nx.from_scipy_sparse_array(sp.csr_array(graph.adjacency), create_using=nx.DiGraph))
    depth_c = {c: level for level, nodes in enumerate(nx.topological_generations(cond)) for c in nodes}
    mapping = cond.graph["mapping"]
    return np.array([depth_c[mapping[i]] for i in range(graph.n_features)], dtype=np.int64)


def norm_spearman(norms: np.ndarray, values: np.ndarray) -> float:
    """Spearman ρ of ``norms`` with ``values``; NaN for fewer than 3 points or no variation."""
    from scipy.stats import spearmanr

    norms = np.asarray(norms, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if norms.size < 3 or np.ptp(norms) == 0 or np.ptp(values) == 0:
        return float("nan")
    return float(spearmanr(norms, values).statistic)


def embedding_quality(emb: Any, *, max_anchors: int | None = 2000, seed: int = 0) -> dict[str, Any]:
    """Every property of the module docstring for one embedding, as a JSON-ready dict.

    Parameters
    ----------
    emb
        A :class:`~cape_pipeline.hyperbolic.embed.HyperbolicEmbedding` with its ``graph``.
    max_anchors
        Anchor cap of :func:`reconstruction` (and 1/8 of it for :func:`distortion` sources).
    seed
        Seed of the anchor subsets.

    Returns
    -------
    dict
        ``map``, ``mean_rank`` (all features as candidates), ``map_connected``,
        ``mean_rank_connected`` (features with an edge only), ``distortion``, ``spearman_norm_vs_neg_pagerank``,
        ``spearman_norm_vs_depth`` (floats, ``None`` when undefined), ``n_connected``,
        ``n_isolated``, ``max_norm`` and ``norm_quantiles`` (50/90/99 % of ‖e‖ over
        connected features).
    """
    und = _skeleton(emb.graph)
    connected = np.diff(und.indptr) > 0
    norms = np.linalg.norm(np.asarray(emb.poincare, dtype=np.float64), axis=1)
    both = _reconstruction(
        emb, max_anchors=max_anchors, seed=seed, variants=("all", "connected") if (~connected).any() else ("all",)
    )
    rec = both["all"]
    rec_c = both.get("connected", rec)
    depth = topological_depth(emb.graph)
    sources = None if max_anchors is None else max(1, max_anchors // 8)
    nc = norms[connected]
    out = {
        "map": rec["map"],
        "mean_rank": rec["mean_rank"],
        "n_anchors": rec["n_anchors"],
        "map_connected": rec_c["map"],
        "mean_rank_connected": rec_c["mean_rank"],
        "distortion": distortion(emb, max_sources=sources, seed=seed),
        "spearman_norm_vs_neg_pagerank": norm_spearman(nc, -np.asarray(emb.pagerank)[connected]),
        "spearman_norm_vs_depth": norm_spearman(nc, depth[connected]),
        "n_connected": int(connected.sum()),
        "n_isolated": int((~connected).sum()),
        "max_norm": float(norms.max()) if norms.size else float("nan"),
        "norm_quantiles": {f"q{q}": float(np.quantile(nc, q / 100)) if nc.size else float("nan") for q in (50, 90, 99)},
    }
    return _finite_or_none(out)


def _finite_or_none(obj: Any) -> Any:
    """NaN/inf → None, recursively (JSON has no NaN)."""
    if isinstance(obj, dict):
        return {k: _finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj
