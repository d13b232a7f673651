"""Interpretability analyses of per-feature PE tables against a causal graph.

Benchmark code, not part of the package: ``benchmarks/peers/analysis.py`` uses it (run from
this folder, or with it on ``sys.path``); ``tests/benchmarks/test_pe_analysis.py`` tests it.

Paper 004 (Sec. 3.3, Fig. 3D–F) compares a learned PE with a ground-truth PE by the L2
distance after an orthogonal Procrustes alignment, and (Sec. 5, Fig. 5C; App. A.3) measures the
modularity of the PE-distance graph with respect to a known partition of the tokens. Here
the "ground truth" is the causal DAG over the M features:

* :func:`procrustes_distance` — Procrustes distance between two ``(M, D)`` tables;
* :func:`rsa` — representational similarity analysis (Kriegeskorte et al. 2008, Front. Syst.
  Neurosci. 2:4): Spearman correlation of PE distances with DAG hop distances, permutation p;
* :func:`modularity` — modularity of the PE's kNN graph w.r.t. the DAG's communities;
* :func:`pe_table` — the per-feature table of a trained backbone's PE.

All inputs are ``(M, D)`` arrays whose row m is feature ``graph.feature_names[m]``. Costs are
stated per function; :func:`rsa` holds ``(M, M)`` dense matrices, fine for M up to a few
thousand (M = 5000: ~200 MB per matrix).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse as sp
from scipy.linalg import orthogonal_procrustes
from scipy.sparse.csgraph import shortest_path
from scipy.spatial.distance import pdist
from scipy.stats import rankdata

from cape_pipeline.errors import CapeConfigError, CapeDataError

__all__ = ["pe_table", "procrustes_distance", "rsa", "modularity"]


def _check_table(pe: Any, name: str = "pe", n_rows: int | None = None) -> np.ndarray:
    """Validate an ``(M, D)`` finite table and return it as float64."""
    a = np.asarray(pe, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 2 or a.shape[1] < 1:
        raise CapeDataError(
            f"{name}: expected an (M, D) array with M >= 2, D >= 1, got shape {a.shape}"
        )
    if n_rows is not None and a.shape[0] != n_rows:
        raise CapeDataError(f"{name}: has {a.shape[0]} rows but the graph has {n_rows} features")
    if not np.isfinite(a).all():
        raise CapeDataError(f"{name}: contains NaN or inf")
    return a


def pe_table(model: Any) -> np.ndarray:
    """The per-feature PE table of a trained backbone (or of a PE module itself).

    ``learned-small-norm``: the effective table e^g·P that is added to the embedding;
    ``trainable-absolute`` / ``static-absolute``: their ``table``; ``cape`` / ``cape-input``: the
    angles φ ``(M, D/2)``.

    Parameters
    ----------
    model
        A :class:`~cape_pipeline.models.backbones.blocks.TokenTransformer` (its ``.pe`` is used) or a
        :class:`~cape_pipeline.models.pe.PositionalEncoding`.

    Returns
    -------
    ``(M, D)`` (or ``(M, D/2)`` for angles) float64 numpy array, detached, on the CPU.

    Raises
    ------
    CapeConfigError
        If the PE has no per-feature table (``none``, ``cape-additive``,
        ``trainable-relative``).
    """
    pe = getattr(model, "pe", model)
    name = getattr(pe, "name", type(pe).__name__)
    if name == "learned-small-norm":
        t = pe.log_gain.exp() * pe.table
    elif name in ("trainable-absolute", "static-absolute"):
        t = pe.table
    elif name in ("cape", "cape-input"):
        t = pe.angles
    else:
        raise CapeConfigError(
            f"pe={name!r} has no per-feature table; expected one of learned-small-norm, "
            "trainable-absolute, static-absolute, cape, cape-input"
        )
    return t.detach().cpu().double().numpy()


def procrustes_distance(pe: Any, reference: Any) -> float:
    """Orthogonal Procrustes distance between two per-feature tables (paper 004, Fig. 3D–E).

    Both tables are column-centred and scaled to unit Frobenius norm; the narrower one is
    zero-padded to the wider D (an isometric embedding, so distances within it are unchanged);
    then ``min_R ||A R − B||_F`` over orthogonal R (``scipy.linalg.orthogonal_procrustes``).
    Paper 004 aligns by an orthogonal Procrustes transform and reports the L2 norm of the
    difference; the centring and unit scaling make the number invariant to translation and
    global scale (e.g. to σ) and bound it in ``[0, 2]`` (0: same up to rotation/reflection,
    translation and scale; ≈√2: unrelated, when M ≫ D).

    Parameters
    ----------
    pe, reference
        ``(M, D1)`` and ``(M, D2)`` float arrays, rows matched by feature.

    Returns
    -------
    float, ``||A R − B||_F = sqrt(2 − 2·‖AᵀB‖_*)``. Cost O(M·D² + D³), D = max(D1, D2).

    Raises
    ------
    CapeDataError
        Not 2-D, fewer than 2 rows, different row counts, NaN/inf, or a constant table.
    """
    a, b = _check_table(pe, "pe"), _check_table(reference, "reference")
    if a.shape[0] != b.shape[0]:
        raise CapeDataError(
            f"procrustes_distance: pe has {a.shape[0]} rows, reference {b.shape[0]}"
        )
    d = max(a.shape[1], b.shape[1])
    a, b = (np.pad(x, ((0, 0), (0, d - x.shape[1]))) for x in (a, b))
    out = []
    for x, nm in ((a, "pe"), (b, "reference")):
        x = x - x.mean(axis=0)
        norm = np.linalg.norm(x)
        if norm == 0:
            raise CapeDataError(f"procrustes_distance: {nm} is constant (all rows equal)")
        out.append(x / norm)
    a, b = out
    r, _ = orthogonal_procrustes(a, b)
    return float(np.linalg.norm(a @ r - b))


def _hops(graph: Any) -> np.ndarray:
    """``(M, M)`` float64 undirected hop counts on the DAG's skeleton; inf across components.

    The same numbers as ``nx.shortest_path_length`` on ``graph.to_networkx().to_undirected()``
    (unweighted), computed by BFS in ``scipy.sparse.csgraph``: O(M·(M + E)) time, O(M²) memory.
    """
    b = sp.csr_array(graph.adjacency != 0, dtype=np.float64)
    return shortest_path(b, method="D", directed=False, unweighted=True)


def rsa(
    pe: Any,
    graph: Any,
    *,
    metric: str = "euclidean",
    n_permutations: int = 1000,
    seed: int = 0,
) -> dict[str, float | int]:
    """Representational similarity analysis of a PE table against DAG distances.

    Spearman ρ between the pairwise PE distances ``pdist(pe, metric)`` and the undirected
    shortest-path hop counts on the DAG's skeleton, over the pairs i < j in the same connected
    component (RSA, Kriegeskorte et al. 2008; used here as paper 004's question "does the
    learned PE mirror the ground-truth positions", Sec. 3.3/5). The null permutes the feature
    labels (rows of ``pe`` against nodes of the graph), recomputing ρ each time; the p-value is
    one-sided (PE distance grows with DAG distance): ``(1 + #{ρ_perm ≥ ρ}) / (1 + n_perm)``.

    Parameters
    ----------
    pe
        ``(M, D)`` float array, row m = ``graph.feature_names[m]``.
    graph
        :class:`~cape_pipeline.causal.graph.CausalGraph` with M features (edge direction and
        weights ignored).
    metric
        Any ``scipy.spatial.distance.pdist`` metric (``"euclidean"``, ``"cosine"``, ...).
    n_permutations
        Size of the permutation null; 0 gives ``p_value = nan``.
    seed
        Seed of the permutations.

    Returns
    -------
    dict with ``rho`` (float), ``p_value`` (float) and ``n_pairs`` (int, pairs compared).
    Cost: O(M²) memory (hop matrix, its ranks, one permuted copy); O(M² log M) for the observed
    ρ and O(M²) per permutation (O(M² log M) when the skeleton is disconnected).

    Raises
    ------
    CapeDataError
        Bad ``pe`` (see :func:`procrustes_distance`), row count ≠ ``graph.n_features``, fewer
        than 3 comparable pairs, or a negative ``n_permutations``.
    """
    a = _check_table(pe, "pe", graph.n_features)
    if n_permutations < 0:
        raise CapeDataError(f"rsa: n_permutations must be >= 0, got {n_permutations}")
    m = a.shape[0]
    hops = _hops(graph)
    iu = np.triu_indices(m, 1)
    d = pdist(a, metric=metric)  # condensed order == triu_indices order
    finite = np.isfinite(hops[iu])
    n_pairs = int(finite.sum())
    if n_pairs < 3:
        raise CapeDataError(
            f"rsa: only {n_pairs} feature pairs share a connected component; need >= 3"
        )
    # average ranks of the hop counts; a relabelling permutes pairs, so the multiset of finite
    # hop counts (hence each value's rank) is unchanged and the table can be permuted directly
    hop_rank = np.full((m, m), np.nan)
    hop_rank[iu[0][finite], iu[1][finite]] = rankdata(hops[iu][finite])
    hop_rank = np.fmax(hop_rank, hop_rank.T)
    d_rank_all = rankdata(d) if finite.all() else None

    def _rho(hr: np.ndarray) -> float:
        ok = np.isfinite(hr)
        x = d_rank_all if ok.all() else rankdata(d[ok])
        x, y = x - x.mean(), hr[ok] - hr[ok].mean()
        den = np.sqrt((x @ x) * (y @ y))
        return float(x @ y / den) if den > 0 else float("nan")

    rho = _rho(hop_rank[iu])
    if n_permutations == 0 or not np.isfinite(rho):
        return {"rho": rho, "p_value": float("nan"), "n_pairs": n_pairs}
    rng = np.random.default_rng(seed)
    null = np.empty(n_permutations)
    for i in range(n_permutations):
        p = rng.permutation(m)
        null[i] = _rho(hop_rank[np.ix_(p, p)][iu])
    p_value = (1.0 + np.sum(null >= rho - 1e-12)) / (1.0 + n_permutations)
    return {"rho": rho, "p_value": float(p_value), "n_pairs": n_pairs}


def modularity(
    pe: Any,
    graph: Any,
    *,
    k: int = 10,
    method: str = "louvain",
    seed: int = 0,
) -> dict[str, float | int]:
    """Modularity of the PE's kNN similarity graph w.r.t. the DAG's communities.

    Paper 004 (Sec. 4–5, App. A.3) scores a learned PE by the weighted modularity Q^W
    (Rubinov & Sporns 2010) of its token-similarity graph under a known partition. Here the
    partition is found on the DAG's undirected, unweighted skeleton (``method="louvain"``:
    ``nx.community.louvain_communities`` seeded by ``seed``; ``"greedy"``:
    ``greedy_modularity_communities``; isolated features are singleton communities). Instead
    of the paper's dense 1 − scaled-distance matrix, the PE graph is sparse: each feature joins
    its k nearest neighbours by cosine distance (symmetrised), edge weight (1 + cos)/2 ∈ [0, 1].
    Q is ``nx.community.modularity`` of that graph under the DAG partition.

    Parameters
    ----------
    pe
        ``(M, D)`` float array, row m = ``graph.feature_names[m]``.
    graph
        :class:`~cape_pipeline.causal.graph.CausalGraph` with M features.
    k
        Neighbours per feature (clipped to M − 1).
    method
        ``"louvain"`` or ``"greedy"``.
    seed
        Seed of the Louvain community detection.

    Returns
    -------
    dict with ``modularity`` (float in [−1/2, 1]) and ``n_communities`` (int).
    Cost: kNN O(M²·D) time in chunks (scikit-learn, brute force for cosine), O(M·k) memory;
    communities O(E log M).

    Raises
    ------
    CapeDataError
        Bad ``pe`` or row count ≠ ``graph.n_features``.
    CapeConfigError
        ``k < 1`` or unknown ``method``.
    """
    import networkx as nx
    from sklearn.neighbors import NearestNeighbors

    a = _check_table(pe, "pe", graph.n_features)
    if k < 1:
        raise CapeConfigError(f"modularity: k must be >= 1, got {k}")
    if method not in ("louvain", "greedy"):
        raise CapeConfigError(
            f"modularity: method {method!r} unknown; expected 'louvain' or 'greedy'"
        )
    m = a.shape[0]
    # undirected skeleton, nodes 0..M-1 (nx.Graph from a directed adjacency drops direction)
    skel = nx.from_scipy_sparse_array(sp.csr_array(graph.adjacency != 0, dtype=np.float64))
    if method == "louvain":
        comms = nx.community.louvain_communities(skel, weight=None, seed=seed)
    else:
        comms = nx.community.greedy_modularity_communities(skel, weight=None)
    kk = min(k, m - 1)
    dist, nbr = NearestNeighbors(n_neighbors=kk + 1, metric="cosine").fit(a).kneighbors(a)
    knn = nx.Graph()
    knn.add_nodes_from(range(m))
    for i in range(m):
        for dij, j in zip(dist[i], nbr[i], strict=True):
            if j != i:
                knn.add_edge(i, int(j), weight=float(np.clip(1.0 - dij / 2.0, 0.0, 1.0)))
    q = nx.community.modularity(knn, comms, weight="weight")
    return {"modularity": float(q), "n_communities": len(comms)}
