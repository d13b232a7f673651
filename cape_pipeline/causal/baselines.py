"""Baselines for Step I: the w/o-CSL correlation graph and gcastle's gradient DAG learners.

* :func:`correlation_graph` — the "w/o-CSL" ablation of paper 000 (Table 3): a similarity graph
  of thresholded absolute Pearson correlations. It is symmetric (both m → n and n → m are
  present) and therefore **not a DAG**.
* :func:`gcastle_weights` — gcastle 1.0.4's ``Notears`` (linear, Zheng et al. 2018),
  ``DAG_GNN`` (Yu et al. 2019) and ``NotearsLowRank`` (Fang et al. 2020) with their default
  settings, returning the continuous weight matrix and gcastle's own binary decision.

All take the same standardized ``(N, M)`` matrix as CAPE. Note that gcastle reseeds the global
numpy / torch generators inside ``learn``; these wrappers are for benchmarks and comparisons.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["GCASTLE_METHODS", "correlation_graph", "gcastle_weights"]

GCASTLE_METHODS = ("notears", "dag-gnn", "notears-low-rank")
_BLOCK_ENTRIES = 1 << 22


def correlation_graph(
    x_std: np.ndarray,
    threshold: float,
    *,
    max_edges_per_row: int | None = None,
) -> sp.csr_array:
    """Symmetric graph of Pearson correlations with ``|r| > threshold`` (w/o-CSL ablation).

    Computed in row blocks of the correlation matrix ``R = Xᵀ X / N`` (standardized X), so
    memory is O(N M + block·M + edges), never a dense ``M × M`` matrix for large M.

    Parameters
    ----------
    x_std
        ``(N, M)`` float, columns standardized to mean 0 and population sd 1.
    threshold
        Keep ``|r_mn| > threshold`` (m ≠ n).
    max_edges_per_row
        Keep at most this many strongest correlations per feature before symmetrising (None:
        all above the threshold).

    Returns
    -------
    scipy.sparse.csr_array
        ``(M, M)`` float64 with ``[m, n] = [n, m] = r_mn``: both directions are present, so
        the result is **not a DAG** (it is the undirected similarity graph of Table 3).
    """
    n, m = x_std.shape
    xs = np.asarray(x_std, dtype=np.float64) / np.sqrt(n)
    block = max(1, _BLOCK_ENTRIES // max(m, 1))
    rows, cols, vals = [], [], []
    for start in range(0, m, block):
        stop = min(m, start + block)
        r = xs[:, start:stop].T @ xs  # (b, M)
        r[np.arange(stop - start), np.arange(start, stop)] = 0.0
        mag = np.abs(r)
        keep = mag > threshold
        if max_edges_per_row is not None and max_edges_per_row < m:
            kth = np.partition(mag, m - max_edges_per_row, axis=1)[:, m - max_edges_per_row]
            keep &= mag >= kth[:, None]
        i, j = np.nonzero(keep)
        rows.append(i + start)
        cols.append(j)
        vals.append(r[i, j])
    r_all, c_all, v_all = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    # union of both directions (a top-k cut may keep only one side); r_mn = r_nm
    src = np.concatenate([r_all, c_all])
    dst = np.concatenate([c_all, r_all])
    w = np.concatenate([v_all, v_all])
    _, first = np.unique(src.astype(np.int64) * m + dst, return_index=True)
    return sp.csr_array((w[first], (src[first], dst[first])), shape=(m, m))


def gcastle_weights(
    x_std: np.ndarray, method: str, *, seed: int = 0, rank: int | None = None, **kwargs: object
) -> tuple[np.ndarray, np.ndarray]:
    """Run a gcastle gradient method with its default settings.

    Parameters
    ----------
    x_std
        ``(N, M)`` standardized data.
    method
        ``"notears"``, ``"dag-gnn"`` or ``"notears-low-rank"``.
    seed
        Seed passed to gcastle (it seeds global numpy/torch state itself).
    rank
        Rank for ``NotearsLowRank`` (required there).
    **kwargs
        Forwarded to the gcastle constructor (e.g. ``epochs`` for DAG_GNN).

    Returns
    -------
    weights, binary
        ``(M, M)`` float64 continuous weights (``[m, n]``: m → n) and gcastle's own ``(M, M)``
        0/1 decision (its default threshold 0.3).

    Raises
    ------
    ValueError
        For an unknown method.
    """
    import torch
    from castle.algorithms import DAG_GNN, Notears, NotearsLowRank

    x = np.asarray(x_std, dtype=np.float64)
    np.random.seed(seed)
    if method == "notears":
        algo = Notears(**kwargs)
        algo.learn(x)
        w = np.asarray(algo.weight_causal_matrix, dtype=np.float64)
    elif method == "notears-low-rank":
        algo = NotearsLowRank(**kwargs)
        algo.learn(x, rank=int(rank if rank is not None else max(1, x.shape[1] // 2)))
        w = np.asarray(algo.weight_causal_matrix, dtype=np.float64)
    elif method == "dag-gnn":
        algo = DAG_GNN(seed=seed, **kwargs)
        algo.learn(x)
        with torch.no_grad():
            w = torch.sinh(3.0 * algo.encoder.adj_A).detach().cpu().double().numpy()
    else:
        raise ValueError(f"unknown gcastle method {method!r}; expected one of {GCASTLE_METHODS}")
    binary = np.asarray(algo.causal_matrix, dtype=np.int8)
    return w, binary
