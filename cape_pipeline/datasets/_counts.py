"""UMI-count simulators of :mod:`cape_pipeline.datasets`: user-sized counts with cell types
(:func:`simulated_counts`) and counts with a known regulatory graph from two mechanisms
(:func:`simulated_grn_counts`, ours; :func:`simulated_hill_counts`, after SERGIO's description)."""

from __future__ import annotations

import copy
from typing import Any

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from cape_pipeline._utils import BLOCK_ENTRIES
from cape_pipeline.datasets._simulate import TRUE_DAG_KEY, _depths
from cape_pipeline.errors import CapeConfigError

__all__ = ["simulated_counts", "simulated_grn_counts", "simulated_hill_counts"]


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


def _counts_anndata(name: str, x: Any, cell_type: np.ndarray, var: dict[str, Any], params: dict[str, Any]) -> ad.AnnData:
    """The simulators' AnnData: ``X`` the ``(N, M)`` counts as CSR, ``obs["cell_type"]``
    ``type0…`` from the codes ``cell_type``, genes ``gene0…`` with the ``var`` columns, and the
    generator's ``name`` and ``params`` in ``uns``."""
    n_cells, m = x.shape
    adata = ad.AnnData(
        X=sp.csr_matrix(x),
        obs=pd.DataFrame(
            {"cell_type": pd.Categorical([f"type{k}" for k in cell_type])},
            index=[f"cell{k}" for k in range(n_cells)],
        ),
        var=pd.DataFrame(var, index=[f"gene{k}" for k in range(m)]),
    )
    adata.uns["cape_dataset"] = name
    adata.uns["cape_dataset_params"] = params
    return adata


def _grn_anndata(
    name: str, rng: np.random.Generator, x: Any, par_pos: np.ndarray, child_pos: np.ndarray, cell_type: np.ndarray,
    flag: tuple[str, int], params: dict[str, Any],
) -> ad.AnnData:
    """:func:`_counts_anndata` of counts simulated over gene positions (columns of ``x``, edges
    ``par_pos → child_pos``): genes are labelled by a random permutation drawn from ``rng``;
    ``var[flag[0]]`` marks the first ``flag[1]`` positions; the true graph goes to
    ``varp["true_dag"]`` and its edge count to the parameters."""
    m = x.shape[1]
    order = rng.permutation(m)  # position → gene label
    marked = np.zeros(m, dtype=bool)
    marked[order[: flag[1]]] = True
    adata = _counts_anndata(
        name, x[:, np.argsort(order)], cell_type, {flag[0]: marked}, {**params, "n_true_edges": int(child_pos.size)}
    )
    adata.varp[TRUE_DAG_KEY] = sp.csr_matrix(
        (np.ones(child_pos.size), (order[par_pos], order[child_pos])), shape=(m, m)
    )
    return adata


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
        the default 1.0 the types are far apart (annotation saturates with a thousand cells or
        so); smaller values bring them closer (0 = one type in all but name). The
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
    return _counts_anndata(name, x, cell_type, {"module": module}, {
        "n_cells": int(n_cells), "n_genes": int(n_genes), "n_types": int(n_types), "seed": int(seed),
        "n_modules": int(n_modules), "module_share": float(module_share), "target_umis": float(target_umis),
        "type_effect": float(type_effect),
    })



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
    depth = _depths(par_pos, child_pos, m)
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
            # val[:, child] += Σ_p w_p tanh(s(a_p)), one sparse product over the edges per block of cells
            into = sp.csr_matrix(
                (w[sel], (np.arange(int(sel.sum())), np.searchsorted(nodes, child_pos[sel]))),
                shape=(int(sel.sum()), nodes.size),
            )
            src = par_pos[sel]
            step = max(1, BLOCK_ENTRIES // src.size)
            for s in range(0, n_cells, step):
                val[s : s + step] += np.asarray((into.T @ np.tanh(std[s : s + step, src]).T).T)
        # standardized a block of genes at a time: no temporaries of the generation's (N, genes) size
        step = max(1, BLOCK_ENTRIES // n_cells)
        for s in range(0, nodes.size, step):
            v = val[:, s : s + step]
            std[:, nodes[s : s + step]] = (v - v.mean(0)) / np.maximum(v.std(0), 1e-12)
        del val
    base = np.exp(rng.normal(0.0, 1.0, m))
    base *= target_umis / base.sum() / np.exp(log_fold**2 / 2)
    size = np.exp(rng.normal(0.0, 0.3, n_cells))
    x = _nb_counts(rng, n_cells, m, lambda s, e: base * size[s:e, None] * np.exp(log_fold * std[s:e]), shape=dispersion)
    std = None  # the (N, M) activities are not needed past the counts
    return _grn_anndata(name, rng, x, par_pos, child_pos, cell_type, ("regulator", n_reg), {
        "n_cells": int(n_cells), "n_genes": m, "n_types": int(n_types), "seed": int(seed),
        "regulator_share": float(regulator_share), "regulated_share": float(regulated_share),
        "max_parents": int(max_parents), "type_sd": float(type_sd), "noise_sd": float(noise_sd),
        "log_fold": float(log_fold), "dispersion": float(dispersion), "target_umis": float(target_umis),
    })


def simulated_hill_counts(
    n_cells: int = 3000,
    n_genes: int = 2000,
    n_types: int = 6,
    seed: int = 0,
    *,
    tf_share: float = 0.15,
    master_share: float = 0.3,
    max_parents: int = 4,
    hill_n: float = 2.0,
    noise_q: float = 0.8,
    repress_share: float = 0.3,
    outlier_share: float = 0.02,
    target_umis: float = 4000.0,
    library_sd: float = 0.4,
    dropout_slope: float = 8.0,
    dropout_quantile: float = 0.45,
    knockdowns: int = 0,
    knockdown_cells: int = 50,
    knockdown_efficiency: float = 0.9,
) -> ad.AnnData:
    """Simulate UMI counts from a regulatory DAG with Hill kinetics, after SERGIO's description.

    A second count generator with another mechanism than :func:`simulated_grn_counts`, written
    from the description of SERGIO (Dibaeinia & Sinha 2020, *Cell Systems* 11:252): expression
    is the steady state of production and decay, targets are driven by Hill functions of their
    regulators on the linear scale, noise is intrinsic (it propagates down the graph), and the
    counts carry SERGIO's technical noise (outlier genes, library size, dropout, Poisson):

    - genes in a random topological order; the first ``tf_share`` are transcription factors
      (TFs), the first ``master_share`` of those are master regulators (MRs, no parents); every
      other gene gets 1 to ``max_parents`` parents among the TFs before it, chosen with
      probability proportional to a Pareto(2) fitness of each TF (scale-free out-degree);
    - an MR's production rate is ``b[type, g] ~ U(0.5, 5)`` per cell type; a target's is
      ``basal_g + Σ_p K_gp · hill(x_p)`` with ``|K| ~ U(1, 5)``, ``hill(x) = xⁿ / (hⁿ + xⁿ)`` for
      an activator and ``hⁿ / (hⁿ + xⁿ)`` for a repressor (``repress_share`` of the edges),
      ``n = hill_n`` and ``h`` the regulator's mean steady state over the cell types (SERGIO's
      half response); decay 1, so the steady state equals the production;
    - each cell draws ``x_g = max(0, P_g + q·√P_g·ε)`` one topological generation at a time,
      with ``P_g`` computed from *that cell's* regulator values (SERGIO's chemical-Langevin noise
      at steady state, so a regulator's fluctuation reaches its targets);
    - technical noise: ``outlier_share`` of the genes are scaled by ``exp(N(0.8, 1))``, each gene
      by a capture efficiency ``exp(N(0, 1))``; cells are scaled to ``target_umis`` times a
      log-normal(0, ``library_sd``) library size; an entry is kept with probability
      ``1 / (1 + exp(−dropout_slope·(log1p(x) − q)))``, ``q`` the ``dropout_quantile`` of all
      ``log1p(x)``; counts are Poisson.
    - with ``knockdowns`` > 0, a Perturb-seq screen (CRISPRi, as in SERGIO's knockouts): that
      many TFs with targets, chosen at random, are knocked down in ``knockdown_cells`` further
      cells each (random cell types), whose production rate of the target is multiplied by
      ``1 − knockdown_efficiency`` before the noise, so the change propagates to its
      descendants. These cells are drawn from a second generator seeded by ``(seed, 1)``,
      after the ``n_cells`` control cells, so the control cells are the same as without
      knockdowns. ``obs["condition"]`` is ``"ctrl"`` or the knocked-down gene's name (GEARS'
      convention, read by Step I as interventions).

    Vectorized over cells and the genes of one generation; counts drawn in row blocks.

    Parameters
    ----------
    n_cells, n_genes, n_types
        N (≥ 2), M (≥ 4) and the number of cell types (≥ 1; ``obs["cell_type"]``).
    seed
        Seed of a local numpy ``Generator``.
    tf_share, master_share
        Share of genes that are TFs, and share of the TFs that are master regulators (0–1).
    max_parents
        Most parents per target (≥ 1).
    hill_n, noise_q, repress_share
        Hill coefficient, intrinsic noise q, share of repressing edges.
    outlier_share, target_umis, library_sd, dropout_slope, dropout_quantile
        SERGIO's technical-noise settings (outlier genes, mean UMIs per cell, library-size sd,
        dropout logistic slope and midpoint quantile in [0, 1]).
    knockdowns, knockdown_cells, knockdown_efficiency
        TFs knocked down (0: no screen, no ``condition`` column; at most the TFs that have
        targets), cells per knockdown (≥ 1) and the share of production removed, in [0, 1].

    Returns
    -------
    AnnData
        ``X`` (N, M) CSR float32 counts (N = ``n_cells`` + ``knockdowns · knockdown_cells``);
        ``obs["cell_type"]`` (and ``obs["condition"]`` with knockdowns); ``var["tf"]`` bool;
        ``varp["true_dag"]`` sparse 0/1 ``(M, M)`` with ``[m, n] = 1`` ⇔ m → n;
        ``uns["cape_dataset"] = "simulated-hill-counts"`` and its parameters.

    Raises
    ------
    CapeConfigError
        If a size is below its minimum or a share or quantile is outside [0, 1].
    """
    name = "simulated-hill-counts"
    shares = (tf_share, master_share, repress_share, outlier_share, dropout_quantile)
    if (
        n_cells < 2 or n_genes < 4 or n_types < 1 or max_parents < 1
        or not all(0 <= v <= 1 for v in shares)
        or not (hill_n > 0 and noise_q >= 0 and target_umis > 0 and library_sd >= 0)
        or knockdowns < 0 or knockdown_cells < 1 or not 0 <= knockdown_efficiency <= 1
    ):
        raise CapeConfigError(
            f"{name}: expected n_cells >= 2, n_genes >= 4, n_types >= 1, max_parents >= 1, shares and "
            f"dropout_quantile in [0, 1], hill_n > 0, noise_q >= 0, target_umis > 0, library_sd >= 0, knockdowns >= 0, "
            f"knockdown_cells >= 1, knockdown_efficiency in [0, 1]; got {n_cells}, {n_genes}, {n_types}, {max_parents}, "
            f"{shares}, {hill_n}, {noise_q}, {target_umis}, {library_sd}, {knockdowns}, {knockdown_cells}, "
            f"{knockdown_efficiency}"
        )
    rng = np.random.default_rng(seed)
    m = int(n_genes)
    n_tf = int(min(m - 1, max(2, round(tf_share * m))))
    n_mr = int(min(n_tf - 1, max(1, round(master_share * n_tf))))
    # parents by position: each target draws among the TFs before it, ∝ a Pareto fitness
    fitness = rng.pareto(2.0, n_tf) + 1.0
    cum = np.cumsum(fitness)
    k = rng.integers(1, max_parents + 1, m)
    k[:n_mr] = 0
    child_pos = np.repeat(np.arange(m), k)
    avail = np.minimum(child_pos, n_tf)  # TFs before the child
    par_pos = np.searchsorted(cum, rng.random(child_pos.size) * cum[avail - 1], side="right")
    par_pos = np.minimum(par_pos, avail - 1)
    pairs = np.unique(np.stack([par_pos, child_pos], 1), axis=0)
    par_pos, child_pos = pairs[:, 0], pairs[:, 1]
    depth = _depths(par_pos, child_pos, m)  # longest path from an MR
    strength = rng.uniform(1.0, 5.0, par_pos.size)
    repress = rng.random(par_pos.size) < repress_share
    b = np.zeros((n_types, m))
    b[:, :n_mr] = rng.uniform(0.5, 5.0, (n_types, n_mr))
    basal = np.zeros(m)
    basal[n_mr:] = rng.uniform(0.0, 0.5, m - n_mr)
    half = np.ones(m)

    def production(x: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """(rows, nodes) production rates of ``nodes`` given the regulator values in ``x``."""
        sel = np.isin(child_pos, nodes)
        xp = x[:, par_pos[sel]]
        h = half[par_pos[sel]] ** hill_n
        act = xp**hill_n / (h + xp**hill_n)
        contrib = strength[sel] * np.where(repress[sel], 1.0 - act, act)
        into = sp.csr_matrix(
            (np.ones(int(sel.sum())), (np.arange(int(sel.sum())), np.searchsorted(nodes, child_pos[sel]))),
            shape=(int(sel.sum()), nodes.size),
        )
        return np.asarray(contrib @ into) + basal[nodes]

    steady = np.zeros((n_types, m))  # per-type steady states: the half responses
    for g in range(int(depth.max()) + 1):
        nodes = np.flatnonzero(depth == g)
        steady[:, nodes] = b[:, nodes] + basal[nodes] if g == 0 else production(steady, nodes)
        half[nodes] = np.maximum(steady[:, nodes].mean(0), 1e-3)
    def express(gen: np.random.Generator, types: np.ndarray, target: np.ndarray | None = None) -> np.ndarray:
        """(cells, M) steady states, one topological generation at a time; ``target``: each
        cell's knocked-down gene position (its production scaled by 1 − efficiency), or None."""
        x = np.zeros((types.size, m))
        for g in range(int(depth.max()) + 1):
            nodes = np.flatnonzero(depth == g)
            mean = b[types][:, nodes] + basal[nodes] if g == 0 else production(x, nodes)
            if target is not None:
                mean = np.where(target[:, None] == nodes[None, :], mean * (1.0 - knockdown_efficiency), mean)
            x[:, nodes] = np.maximum(mean + noise_q * np.sqrt(mean) * gen.normal(size=mean.shape), 0.0)
        return x

    def observe(gen: np.random.Generator, x: np.ndarray, mid: float | None = None) -> tuple[sp.csr_matrix, float]:
        """CSR counts of captured expression ``x``: library size, dropout around ``mid`` (None:
        this ``x``'s ``dropout_quantile`` of ``log1p``) and Poisson, drawn in row blocks."""
        x = x * (target_umis * np.exp(gen.normal(0.0, library_sd, x.shape[0])) / np.maximum(x.sum(1), 1e-12))[:, None]
        lx = np.log1p(x)
        mid = float(np.quantile(lx, dropout_quantile)) if mid is None else mid
        blocks = []
        step = max(1, (1 << 23) // m)
        for s in range(0, x.shape[0], step):
            blk = x[s : s + step]
            keep = gen.random(blk.shape) < 1.0 / (1.0 + np.exp(-dropout_slope * (lx[s : s + step] - mid)))
            blocks.append(sp.csr_matrix(gen.poisson(blk * keep).astype(np.float32)))
        return sp.vstack(blocks, format="csr"), mid

    cell_type = rng.integers(0, n_types, n_cells)
    x = express(rng, cell_type)
    outlier = rng.random(m) < outlier_share
    scale = np.exp(rng.normal(0.0, 1.0, m))
    scale[outlier] *= np.exp(rng.normal(0.8, 1.0, int(outlier.sum())))
    counts, mid = observe(rng, x * scale)
    target = np.zeros(0, dtype=np.int64)
    if knockdowns:  # the screen: its own generator, after the control cells (which stay as they were)
        prng = np.random.default_rng([seed, 1])
        regulators = np.unique(par_pos)
        kd = prng.choice(regulators, size=min(int(knockdowns), regulators.size), replace=False)
        target = np.repeat(kd, int(knockdown_cells))
        ct_p = prng.integers(0, n_types, target.size)
        screen, _ = observe(prng, express(prng, ct_p, target) * scale, mid)  # the controls' dropout midpoint
        counts = sp.vstack([counts, screen], format="csr")
        cell_type = np.r_[cell_type, ct_p]
    order = copy.deepcopy(rng).permutation(m)  # the gene labels _grn_anndata draws next
    adata = _grn_anndata(name, rng, counts, par_pos, child_pos, cell_type, ("tf", n_tf), {
        "n_cells": int(n_cells), "n_genes": m, "n_types": int(n_types), "seed": int(seed),
        "tf_share": float(tf_share), "master_share": float(master_share), "max_parents": int(max_parents),
        "hill_n": float(hill_n), "noise_q": float(noise_q), "repress_share": float(repress_share),
        "outlier_share": float(outlier_share), "target_umis": float(target_umis), "library_sd": float(library_sd),
        "dropout_slope": float(dropout_slope), "dropout_quantile": float(dropout_quantile),
        **({"knockdowns": int(np.unique(target).size), "knockdown_cells": int(knockdown_cells),
            "knockdown_efficiency": float(knockdown_efficiency)} if knockdowns else {}),
    })
    if knockdowns:
        names = np.asarray(adata.var_names, dtype=object)
        labels = np.r_[np.full(n_cells, "ctrl", dtype=object), names[order[target]]]
        adata.obs["condition"] = pd.Categorical(labels.astype(str))
    return adata
