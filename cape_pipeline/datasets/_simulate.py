"""Simulators of :mod:`cape_pipeline.datasets` written in this package (no gcastle): SDCD's
benchmark SEM (:func:`sdcd_sem`); the UMI-count simulators are in :mod:`._counts`."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from cape_pipeline.errors import CapeConfigError

__all__ = ["TRUE_DAG_KEY", "sdcd_sem"]

TRUE_DAG_KEY = "true_dag"
"""``adata.varp`` key of a known ground-truth graph: sparse (M, M), ``[m, n] != 0`` ⇔ m → n."""


def _depths(parent: np.ndarray, child: np.ndarray, m: int) -> np.ndarray:
    """``(m,)`` int64 topological generation (longest path from a root) of ``m`` nodes numbered
    in a topological order (``parent < child`` on every edge): one scalar pass over the nodes
    with parents, in that order, O(m + E)."""
    depth = np.zeros(m, dtype=np.int64)
    by_child = np.argsort(child, kind="stable")
    ps, cs = parent[by_child], child[by_child]
    starts, ends = np.searchsorted(cs, np.arange(m)), np.searchsorted(cs, np.arange(m), side="right")
    for pos in np.flatnonzero(ends > starts):
        depth[pos] = depth[ps[starts[pos] : ends[pos]]].max() + 1
    return depth


def sdcd_sem(
    n_nodes: int = 100,
    n_obs: int = 10_000,
    seed: int = 0,
    *,
    edges_per_node: int = 4,
    hidden: int = 100,
    noise_sd: float = 0.5,
) -> ad.AnnData:
    """Simulate SDCD's benchmark data (Nazaret et al. 2024): an ER DAG, MLP mechanisms, standardized.

    Our own implementation of the generator described in the SDCD paper (not its code):

    - an Erdős–Rényi DAG with exactly ``edges_per_node · n_nodes`` edges (distinct pairs drawn
      uniformly below a random topological order);
    - each node ``x_j = g_j(s(x_pa(j))) + ε_j``, ``ε_j ~ N(0, noise_sd²)``, where ``s``
      standardizes each parent column over the samples and ``g_j`` is a one-hidden-layer MLP
      with ``hidden`` sigmoid units, no biases, and every weight ``±U[0.5, 2]`` (sign uniform);
      a root is noise alone;
    - finally every column is standardized (mean 0, sd 1), which removes varsortability.

    Nodes are computed one topological generation at a time (all nodes whose parents are
    done, together), so the cost is O(N · E · hidden) with no Python loop over nodes.

    Parameters
    ----------
    n_nodes
        d (>= 2).
    n_obs
        N (>= 2); SDCD uses 10,000 (20 % held out for its early stopping).
    seed
        Seed of a local numpy ``Generator`` (global RNG state is untouched).
    edges_per_node
        Edges per node (4 in SDCD's benchmark); capped at ``d(d − 1)/2``.
    hidden, noise_sd
        MLP width (100) and noise standard deviation (0.5).

    Returns
    -------
    AnnData
        ``X`` (N, d) float32 standardized; ``var_names`` ``x0..x{d-1}``;
        ``varp["true_dag"]`` sparse 0/1 ``(d, d)`` with ``[m, n] = 1`` ⇔ m → n;
        ``uns["cape_dataset"] = "sdcd-sem"`` and its parameters.

    Raises
    ------
    CapeConfigError
        If ``n_nodes < 2``, ``n_obs < 2``, ``edges_per_node < 1``, ``hidden < 1`` or
        ``noise_sd < 0``.
    """
    name = "sdcd-sem"
    if n_nodes < 2:
        raise CapeConfigError(f"{name}: n_nodes must be >= 2, got {n_nodes}")
    if n_obs < 2:
        raise CapeConfigError(f"{name}: n_obs must be >= 2, got {n_obs}")
    if edges_per_node < 1 or hidden < 1 or not noise_sd >= 0:
        raise CapeConfigError(
            f"{name}: edges_per_node and hidden must be >= 1 and noise_sd >= 0, got "
            f"{edges_per_node}, {hidden}, {noise_sd}"
        )
    rng = np.random.default_rng(seed)
    d = int(n_nodes)
    n_pairs = d * (d - 1) // 2
    n_edges = int(min(edges_per_node * d, n_pairs))
    # distinct pairs (i < j) of the topological order, drawn without replacement by index
    flat = rng.choice(n_pairs, size=n_edges, replace=False)
    # invert flat index → (i, j), i < j, row-major over the upper triangle
    i = (d - 2 - np.floor(np.sqrt(-8.0 * flat + 4.0 * d * (d - 1) - 7) / 2.0 - 0.5)).astype(np.int64)
    j = (flat + i + 1 - d * (d - 1) // 2 + (d - i) * ((d - i) - 1) // 2).astype(np.int64)
    order = rng.permutation(d)  # position in the topological order → node label
    src, dst = order[i], order[j]
    b = sp.csr_matrix((np.ones(n_edges), (src, dst)), shape=(d, d))
    depth = _depths(i, j, d)  # topological generations of the positions
    by_child = np.argsort(j, kind="stable")
    ii, jj = i[by_child], j[by_child]
    starts = np.searchsorted(jj, np.arange(d))
    x = np.zeros((n_obs, d), dtype=np.float64)
    xs = np.zeros((n_obs, d), dtype=np.float64)  # standardized copies fed to the children
    indeg = np.bincount(jj, minlength=d)
    kmax = int(indeg.max(initial=0))
    parent_pos = np.full((d, max(kmax, 1)), -1, dtype=np.int64)
    slot = np.arange(jj.size) - starts[jj]
    parent_pos[jj, slot] = ii
    def _signed(size: tuple[int, ...]) -> np.ndarray:
        return rng.uniform(0.5, 2.0, size=size) * rng.choice([-1.0, 1.0], size=size)
    w1 = _signed((d, max(kmax, 1), hidden)) * (parent_pos >= 0)[:, :, None]
    w2 = _signed((d, hidden))
    noise = rng.normal(0.0, noise_sd, size=(n_obs, d))
    chunk = max(1, (1 << 24) // max(n_obs * hidden, 1))
    for g in range(int(depth.max(initial=0)) + 1):
        nodes = np.flatnonzero(depth == g)  # positions in the topological order
        for s in range(0, nodes.size, chunk):
            nd = nodes[s : s + chunk]
            val = noise[:, nd].copy()
            has = indeg[nd] > 0
            if has.any():
                nh = nd[has]
                pp = parent_pos[nh]  # (g, kmax), -1 = none (its weights are 0)
                xp = xs.T[np.where(pp >= 0, pp, 0)].transpose(0, 2, 1)  # (g, N, kmax)
                hid = 1.0 / (1.0 + np.exp(-(xp @ w1[nh])))  # (g, N, hidden)
                val[:, has] += (hid @ w2[nh][:, :, None])[:, :, 0].T
            x[:, nd] = val
            xs[:, nd] = (val - val.mean(0)) / np.maximum(val.std(0), 1e-12)
    # column p of x is the node at topological position p; relabel to node ids
    out = np.empty_like(xs)
    out[:, order] = xs
    names = [f"x{k}" for k in range(d)]
    adata = ad.AnnData(
        X=out.astype(np.float32),
        obs=pd.DataFrame(index=[f"s{k}" for k in range(n_obs)]),
        var=pd.DataFrame(index=names),
    )
    adata.varp[TRUE_DAG_KEY] = b
    adata.uns["cape_dataset"] = name
    adata.uns["cape_dataset_params"] = {
        "n_nodes": d, "n_obs": int(n_obs), "seed": int(seed), "edges_per_node": int(edges_per_node),
        "hidden": int(hidden), "noise_sd": float(noise_sd), "n_true_edges": int(n_edges),
    }
    return adata
