"""Simulators of :mod:`cape_pipeline.datasets` written in this package (no gcastle): SDCD's
benchmark SEM (:func:`sdcd_sem`) and user-sized UMI counts with cell types
(:func:`simulated_counts`)."""

from __future__ import annotations

from typing import Any

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from cape_pipeline.errors import CapeConfigError

__all__ = ["TRUE_DAG_KEY", "sdcd_sem", "simulated_counts", "simulated_grn_counts"]

TRUE_DAG_KEY = "true_dag"
"""``adata.varp`` key of a known ground-truth graph: sparse (M, M), ``[m, n] != 0`` ⇔ m → n."""



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
    # topological generations: depth of each position in the order (longest path from a root)
    depth = np.zeros(d, dtype=np.int64)
    by_child = np.argsort(j, kind="stable")
    ii, jj = i[by_child], j[by_child]
    # positions are already a topological order: one pass in order of j settles every depth
    starts = np.searchsorted(jj, np.arange(d))
    ends = np.searchsorted(jj, np.arange(d), side="right")
    for pos in range(d):  # O(d + E) scalar pass over the order (no array work per node)
        if ends[pos] > starts[pos]:
            depth[pos] = depth[ii[starts[pos]:ends[pos]]].max() + 1
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


def _nb_counts(rng: np.random.Generator, n_cells: int, m: int, mean: Any, *, shape: float) -> sp.csr_matrix:
    """``(n_cells, m)`` float32 CSR negative-binomial counts (gamma–Poisson with gamma ``shape``),
    drawn in row blocks of about 8M values; ``mean(start, stop)`` gives a block's ``(b, m)`` means."""
    blocks = []
    step = max(1, (1 << 23) // m)
    for s in range(0, n_cells, step):
        mu = mean(s, min(s + step, n_cells))
        lam = rng.gamma(shape, mu / shape)
        blocks.append(sp.csr_matrix(rng.poisson(lam).astype(np.float32)))
    return sp.vstack(blocks, format="csr")


def simulated_counts(
    n_cells: int = 3000,
    n_genes: int = 15_000,
    n_types: int = 8,
    seed: int = 0,
    *,
    n_modules: int = 150,
    module_share: float = 0.3,
    target_umis: float = 3000.0,
    type_effect: float = 1.0,
) -> ad.AnnData:
    """Simulate a UMI-count matrix with cell types and co-regulated gene modules (our generator).

    Sized like a user's own 10x dataset (pbmc3k: 3,000 cells, ~10 % non-zero, median ~3,000
    UMIs per cell). ``module_share`` of the genes fall into ``n_modules`` modules; each cell
    type has its own mean activity per module (N(0, ``type_effect``²)), each cell its own
    activity around it (N(0, 0.5²)), so genes of one module co-vary within and across types. A gene's mean is
    ``base_g · s_c · exp(w_g · a_{c, module(g)})`` with ``base_g`` log-normal, library size
    ``s_c`` log-normal(0, 0.3²) and loading ``w_g ~ U[0.5, 1.5]``; counts are negative
    binomial (gamma–Poisson, dispersion 0.5). Generated in row blocks into a CSR matrix, so
    20,000 × 20,000 fits in a few hundred MB.

    Parameters
    ----------
    n_cells, n_genes, n_types
        N, M (≥ 2 each) and the number of cell types (≥ 1; ``obs["cell_type"]``).
    seed
        Seed of a local numpy ``Generator``.
    n_modules, module_share
        Gene modules and the share of genes in one (the rest: background noise only).
    target_umis
        Median total UMIs per cell the base means are scaled to (approximately).
    type_effect
        Standard deviation (log scale) of the cell types' mean module activities, ≥ 0. At
        the default 1.0 the types are far apart (annotation saturates at accuracy 1.0 from
        1,000 cells); smaller values bring them closer (0 = one type in all but name). The
        draws do not depend on it, so the same seed gives the same cells and genes.

    Returns
    -------
    AnnData
        ``X`` (N, M) CSR float32 raw counts; ``obs["cell_type"]`` categorical ``type0…``;
        ``var_names`` ``gene0…``; ``var["module"]`` (−1: none);
        ``uns["cape_dataset"] = "simulated-counts"`` and its parameters.

    Raises
    ------
    CapeConfigError
        If a size is below its minimum, ``module_share`` is outside [0, 1] or ``type_effect``
        is negative or not finite.
    """
    name = "simulated-counts"
    if n_cells < 2 or n_genes < 2 or n_types < 1 or n_modules < 1 or not 0 <= module_share <= 1:
        raise CapeConfigError(
            f"{name}: expected n_cells >= 2, n_genes >= 2, n_types >= 1, n_modules >= 1 and "
            f"0 <= module_share <= 1, got {n_cells}, {n_genes}, {n_types}, {n_modules}, {module_share}"
        )
    if not (np.isfinite(type_effect) and type_effect >= 0):
        raise CapeConfigError(f"{name}: type_effect: expected a finite number >= 0, got {type_effect!r}")
    rng = np.random.default_rng(seed)
    module = np.where(rng.random(n_genes) < module_share, rng.integers(0, n_modules, n_genes), -1)
    loading = rng.uniform(0.5, 1.5, n_genes) * (module >= 0)
    log_base = rng.normal(0.0, 1.5, n_genes)
    base = np.exp(log_base)
    base *= target_umis / base.sum()
    type_mean = float(type_effect) * rng.normal(0.0, 1.0, (n_types, n_modules))
    cell_type = rng.integers(0, n_types, n_cells)
    size = np.exp(rng.normal(0.0, 0.3, n_cells))
    mod_idx = np.where(module >= 0, module, 0)

    def mean(s: int, e: int) -> np.ndarray:
        act = type_mean[cell_type[s:e]] + rng.normal(0.0, 0.5, (e - s, n_modules))  # (b, modules)
        return base * size[s:e, None] * np.exp(loading * act[:, mod_idx])

    x = _nb_counts(rng, n_cells, n_genes, mean, shape=0.5)  # NB with dispersion 0.5
    adata = ad.AnnData(
        X=x,
        obs=pd.DataFrame(
            {"cell_type": pd.Categorical([f"type{k}" for k in cell_type])},
            index=[f"cell{k}" for k in range(n_cells)],
        ),
        var=pd.DataFrame({"module": module}, index=[f"gene{k}" for k in range(n_genes)]),
    )
    adata.uns["cape_dataset"] = name
    adata.uns["cape_dataset_params"] = {
        "n_cells": int(n_cells), "n_genes": int(n_genes), "n_types": int(n_types), "seed": int(seed),
        "n_modules": int(n_modules), "module_share": float(module_share), "target_umis": float(target_umis),
        "type_effect": float(type_effect),
    }
    return adata



def simulated_grn_counts(
    n_cells: int = 3000,
    n_genes: int = 2000,
    n_types: int = 8,
    seed: int = 0,
    *,
    regulator_share: float = 0.1,
    regulated_share: float = 0.5,
    max_parents: int = 3,
    type_sd: float = 1.0,
    noise_sd: float = 0.5,
    log_fold: float = 1.0,
    dispersion: float = 2.0,
    target_umis: float = 5000.0,
) -> ad.AnnData:
    """Simulate UMI counts driven by a known gene regulatory DAG, with cell types (our generator).

    Unlike :func:`simulated_counts` (co-regulated modules, no graph), the genes' log-activities
    follow a nonlinear structural equation model over a DAG, so Step I can be scored on counts:

    - the first ``regulator_share`` of a random topological order are regulators (TF-like hubs);
      each gene is regulated with probability ``regulated_share`` and then gets 1 to
      ``max_parents`` parents drawn uniformly among the regulators before it;
    - a gene without parents has activity ``a = μ[type, g] + ε`` with ``μ ~ N(0, type_sd²)`` per
      cell type and ``ε ~ N(0, noise_sd²)``;
    - a regulated gene has ``a = Σ_p w_p · tanh(s(a_p)) + ε``, ``s`` standardizing the parent
      over the cells, ``w_p = ±U[0.5, 1.5]`` (sign uniform), so its cell-type signal comes only
      through its parents;
    - counts are negative binomial (gamma–Poisson, shape ``dispersion``) with mean
      ``base_g · s_c · exp(log_fold · s(a_g))``, base log-normal(0, 1) scaled to
      ``target_umis`` per cell, library size ``s_c`` log-normal(0, 0.3²).

    Genes are computed one topological generation at a time (vectorized over the genes of a
    generation, no loop over genes or cells); the counts are drawn in row blocks into CSR.

    Parameters
    ----------
    n_cells, n_genes, n_types
        N (≥ 2), M (≥ 2) and the number of cell types (≥ 1; ``obs["cell_type"]``).
    seed
        Seed of a local numpy ``Generator``.
    regulator_share, regulated_share
        Share of genes that may regulate others, and share of genes with parents (0–1 each).
    max_parents
        Most parents per regulated gene (≥ 1).
    type_sd, noise_sd
        SD of the per-type mean and of the per-cell noise of each activity.
    log_fold
        Effect of one SD of activity on the log mean count.
    dispersion
        Shape of the gamma–Poisson (larger: closer to Poisson).
    target_umis
        Mean total UMIs per cell (approximately).

    Returns
    -------
    AnnData
        ``X`` (N, M) CSR float32 raw counts; ``obs["cell_type"]`` categorical ``type0…``;
        ``var_names`` ``gene0…``; ``var["regulator"]`` bool;
        ``varp["true_dag"]`` sparse 0/1 ``(M, M)`` with ``[m, n] = 1`` ⇔ m → n;
        ``uns["cape_dataset"] = "simulated-grn-counts"`` and its parameters.

    Raises
    ------
    CapeConfigError
        If a size is below its minimum or a share is outside [0, 1].
    """
    name = "simulated-grn-counts"
    if (
        n_cells < 2 or n_genes < 2 or n_types < 1 or max_parents < 1
        or not (0 <= regulator_share <= 1 and 0 <= regulated_share <= 1)
        or not (noise_sd > 0 and dispersion > 0 and type_sd >= 0)
    ):
        raise CapeConfigError(
            f"{name}: expected n_cells >= 2, n_genes >= 2, n_types >= 1, max_parents >= 1, shares in "
            f"[0, 1], noise_sd > 0, dispersion > 0 and type_sd >= 0, got {n_cells}, {n_genes}, {n_types}, "
            f"{max_parents}, {regulator_share}, {regulated_share}, {noise_sd}, {dispersion}, {type_sd}"
        )
    rng = np.random.default_rng(seed)
    m = int(n_genes)
    n_reg = max(1, int(round(regulator_share * m)))
    # parents, by position in the topological order: regulators before the child
    regulated = rng.random(m) < regulated_share
    regulated[0] = False
    pool = np.minimum(np.arange(m), n_reg)  # regulators available before each position
    k = np.where(regulated, rng.integers(1, max_parents + 1, m), 0)
    k = np.minimum(k, pool)
    # parents drawn with replacement among the regulators before the child, repeats dropped
    child_pos = np.repeat(np.arange(m), k)
    par_pos = np.floor(rng.random(child_pos.size) * pool[child_pos]).astype(np.int64)
    pairs = np.unique(np.stack([par_pos, child_pos], 1), axis=0)
    par_pos, child_pos = pairs[:, 0], pairs[:, 1]
    has = np.bincount(child_pos, minlength=m) > 0
    depth = np.zeros(m, dtype=np.int64)
    by_child = np.argsort(child_pos, kind="stable")
    ps_by_child = par_pos[by_child]
    starts = np.searchsorted(child_pos[by_child], np.arange(n_reg))
    ends = np.searchsorted(child_pos[by_child], np.arange(n_reg), side="right")
    for pos in range(1, n_reg):  # regulators may regulate each other: one scalar pass over them, O(n_reg + E)
        if ends[pos] > starts[pos]:
            depth[pos] = depth[ps_by_child[starts[pos]:ends[pos]]].max() + 1
    late = child_pos >= n_reg  # the other genes' parents are all regulators, settled above
    np.maximum.at(depth, child_pos[late], depth[par_pos[late]] + 1)
    w = rng.uniform(0.5, 1.5, child_pos.size) * rng.choice([-1.0, 1.0], child_pos.size)
    cell_type = rng.integers(0, n_types, n_cells)
    mu = rng.normal(0.0, type_sd, (n_types, m))
    std = np.zeros((n_cells, m))
    for g in range(int(depth.max(initial=0)) + 1):
        nodes = np.flatnonzero(depth == g)
        val = rng.normal(0.0, noise_sd, (n_cells, nodes.size))
        roots = ~has[nodes]
        val[:, roots] += mu[:, nodes[roots]][cell_type]  # (N, roots of this generation), not (N, M)
        sel = np.isin(child_pos, nodes[~roots])
        if sel.any():
            # val[:, child] += Σ_p w_p tanh(s(a_p)), as one sparse product over the edges
            into = sp.csr_matrix(
                (w[sel], (np.arange(int(sel.sum())), np.searchsorted(nodes, child_pos[sel]))),
                shape=(int(sel.sum()), nodes.size),
            )
            val += np.asarray((into.T @ np.tanh(std[:, par_pos[sel]]).T).T)
        std[:, nodes] = (val - val.mean(0)) / np.maximum(val.std(0), 1e-12)
    base = np.exp(rng.normal(0.0, 1.0, m))
    base *= target_umis / base.sum() / np.exp(log_fold**2 / 2)
    size = np.exp(rng.normal(0.0, 0.3, n_cells))
    x = _nb_counts(rng, n_cells, m, lambda s, e: base * size[s:e, None] * np.exp(log_fold * std[s:e]), shape=dispersion)
    order = rng.permutation(m)  # position → gene label
    x = x[:, np.argsort(order)]  # column j = gene j
    truth = sp.csr_matrix((np.ones(child_pos.size), (order[par_pos], order[child_pos])), shape=(m, m))
    is_reg = np.zeros(m, dtype=bool)
    is_reg[order[:n_reg]] = True
    adata = ad.AnnData(
        X=sp.csr_matrix(x),
        obs=pd.DataFrame(
            {"cell_type": pd.Categorical([f"type{t}" for t in cell_type])},
            index=[f"cell{c}" for c in range(n_cells)],
        ),
        var=pd.DataFrame({"regulator": is_reg}, index=[f"gene{g}" for g in range(m)]),
    )
    adata.varp[TRUE_DAG_KEY] = truth
    adata.uns["cape_dataset"] = name
    adata.uns["cape_dataset_params"] = {
        "n_cells": int(n_cells), "n_genes": m, "n_types": int(n_types), "seed": int(seed),
        "regulator_share": float(regulator_share), "regulated_share": float(regulated_share),
        "max_parents": int(max_parents), "type_sd": float(type_sd), "noise_sd": float(noise_sd),
        "log_fold": float(log_fold), "dispersion": float(dispersion), "target_umis": float(target_umis),
        "n_true_edges": int(child_pos.size),
    }
    return adata
