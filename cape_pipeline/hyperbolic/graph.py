"""The graph side of Step II: k-hop positive pairs (Eq. 16) and causal PageRank (Eq. 18)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.errors import CapeConfigError

__all__ = ["k_hop_positives", "causal_pagerank"]


def _max_product(left: sp.csr_array, right: sp.csr_array) -> sp.csr_array:
    """Sparse max-product ``C[m, n] = max_j left[m, j] · right[j, n]`` (non-negative inputs).

    Enumerates the (m, j, n) triples of the join (Σ_j nnz(left[:, j]) · nnz(right[j, :]) of
    them), then max-reduces duplicates; memory is O(#triples), never O(M²).
    """
    m = left.shape[0]
    lc = left.tocoo()
    counts = np.diff(right.indptr)[lc.col]
    total = int(counts.sum())
    if total == 0:
        return sp.csr_array(left.shape, dtype=np.float64)
    rows = np.repeat(lc.row.astype(np.int64), counts)
    lw = np.repeat(lc.data, counts)
    first = np.cumsum(counts) - counts
    idx = np.repeat(right.indptr[lc.col].astype(np.int64), counts) + (
        np.arange(total, dtype=np.int64) - np.repeat(first, counts)
    )
    cols = right.indices[idx].astype(np.int64)
    w = lw * right.data[idx]
    key = rows * m + cols
    order = np.argsort(key, kind="stable")
    key, w = key[order], w[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    wmax = np.maximum.reduceat(w, starts)
    ukey = key[starts]
    return sp.csr_array((wmax, (ukey // m, ukey % m)), shape=left.shape)


def k_hop_positives(adjacency: Any, hops: int = 2) -> sp.csr_array:
    """Positive pairs N_k^+ of Eq. 16 with their strongest-path weights, computed sparsely.

    ``W[m, n] = max over directed paths between m and n (either direction) of length ≤ hops of the
    product of |A| along the path``; for a direct edge this is ``|A_mn|``. The diagonal is zero.

    Parameters
    ----------
    adjacency
        ``(M, M)`` scipy.sparse or dense array, ``A[m, n] ≠ 0`` ⇔ m → n.
    hops
        Maximum path length, the k of N_k^+ (paper default 2; ``EmbedConfig.k_hop``).

    Returns
    -------
    scipy.sparse.csr_array
        ``(M, M)`` symmetric float64 matrix of positive weights (> 0 exactly on positive pairs).

    Raises
    ------
    CapeConfigError
        If ``hops < 1``.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[0, 2.0, 0], [0, 0, 0.5], [0, 0, 0]])
    >>> k_hop_positives(a, hops=2).toarray()
    array([[0. , 2. , 1. ],
           [2. , 0. , 0.5],
           [1. , 0.5, 0. ]])
    """
    if int(hops) < 1:
        raise CapeConfigError(f"k_hop: expected an integer ≥ 1, got {hops!r}")
    a = sp.csr_array(abs(sp.csr_array(adjacency, dtype=np.float64)))
    a.eliminate_zeros()
    a.sort_indices()
    strongest = a.copy()
    power = a
    for _ in range(int(hops) - 1):
        power = _max_product(power, a)
        if power.nnz == 0:
            break
        strongest = sp.csr_array(strongest.maximum(power))
    both = sp.csr_array(strongest.maximum(strongest.T)).tolil()
    both.setdiag(0.0)
    out = sp.csr_array(both)
    out.eliminate_zeros()
    out.sort_indices()
    return out


def causal_pagerank(graph: CausalGraph, *, restart: float = 0.15) -> np.ndarray:
    """PageRank π of Eq. 18: a walk from each node to its parents, so roots collect mass.

    Computed with ``networkx.pagerank`` on the *reversed* graph with weights |A| and
    ``alpha = 1 − restart``; dangling nodes (roots, in the reversed graph) restart uniformly.

    Parameters
    ----------
    graph
        The causal DAG.
    restart
        Restart weight w of Eq. 18, in (0, 1).

    Returns
    -------
    numpy.ndarray
        ``(M,)`` float64, positive, sums to 1, in ``graph.feature_names`` order.

    Raises
    ------
    CapeConfigError
        If ``restart`` is not in (0, 1).
    """
    import networkx as nx

    if not 0.0 < float(restart) < 1.0:
        raise CapeConfigError(f"restart: expected a value in (0, 1), got {restart!r}")
    # reversed edges child → parent, weight |A|
    g = nx.from_scipy_sparse_array(abs(sp.csr_array(graph.adjacency)).T, create_using=nx.DiGraph)
    pr = nx.pagerank(g, alpha=1.0 - float(restart), weight="weight", max_iter=1000, tol=1e-12)
    return np.array([pr[i] for i in range(graph.n_features)], dtype=np.float64)
