"""The regression algorithm's edge test (:mod:`cape_pipeline.causal.regression`, step 3): the
minimum-effect F test of a partial R², Benjamini–Hochberg over the pairs (statsmodels), and the
Stouffer combination of the two cross-fitting halves (scipy); the regressions and tests of a
candidate table (:func:`candidate_pvalues`) and of a DAG's edges given their DAG parents
(:func:`prune_given_parents`, step 5), on the data's device."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from cape_pipeline.causal.regression.neighbourhood import partial_f
from cape_pipeline.causal.screen import parent_table

__all__ = ["bh", "candidate_pvalues", "combine_halves", "min_effect_pvalues", "prune_given_parents", "table_pvalues"]


def min_effect_pvalues(
    f_stat: np.ndarray, dof: np.ndarray, n_obs: int | np.ndarray, min_effect: float
) -> np.ndarray:
    """p-values of the minimum-effect test ``H₀: partial R² ≤ min_effect`` (one parameter).

    Under ``H₀`` at its boundary the partial F follows a noncentral F(1, ν) with
    noncentrality ``λ₀ = N·f²``, ``f² = min_effect / (1 − min_effect)`` (Cohen's effect size);
    ``min_effect = 0`` is the ordinary F test of a zero coefficient.

    Parameters
    ----------
    f_stat, dof
        ``(E,)`` partial F statistics and their residual degrees of freedom ν.
    n_obs
        N, the rows of the regression: one int, or ``(E,)`` per test where the regressions use
        different rows (with interventions each child is fitted on the cells where it was not
        intervened on, ``N_c`` of them).
    min_effect
        The floor on partial R², in [0, 1).

    Returns
    -------
    np.ndarray
        ``(E,)`` float64 p-values.
    """
    from scipy.stats import f as f_dist
    from scipy.stats import ncf

    f_stat = np.asarray(f_stat, dtype=np.float64)
    dof = np.asarray(dof, dtype=np.float64)
    if min_effect <= 0:
        return f_dist.sf(f_stat, 1, dof)
    nc = np.asarray(n_obs, dtype=np.float64) * min_effect / (1.0 - min_effect)
    return ncf.sf(f_stat, 1, dof, nc)


def table_pvalues(
    f_stat: np.ndarray, dof: np.ndarray, parents: np.ndarray, live: np.ndarray, n_rows: int,
    keep: np.ndarray | None, min_effect: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`min_effect_pvalues` of the live entries of a table of regressions (every child's
    on its candidates or DAG parents, :func:`~cape_pipeline.causal.regression.neighbourhood.regressions`).

    Parameters
    ----------
    f_stat
        ``(M, K)`` float64 statistics, entry ``[c, j]`` that of parent ``parents[c, j]`` of c.
    dof
        ``(M,)`` float64 residual degrees of freedom of each child's regression.
    parents, live
        ``(M, K)`` int64 parent table and bool mask of its live entries.
    n_rows
        N, the rows of every regression without ``keep``.
    keep
        ``(N, M)`` bool, each child's own rows (interventions), or None: a child's N is then its
        own row count.
    min_effect
        The floor on partial R².

    Returns
    -------
    parent, child, pvalue
        ``(E,)`` of the live entries, in row-major order of the table.
    """
    m = parents.shape[0]
    parent = parents[live]
    child = np.broadcast_to(np.arange(m)[:, None], parents.shape)[live]
    n_obs = n_rows if keep is None else keep.sum(0)[child]  # each child's own rows
    return parent, child, min_effect_pvalues(f_stat[live], dof[child], n_obs, min_effect)


def bh(p: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Benjamini–Hochberg (statsmodels): reject flags and adjusted p-values (q-values)."""
    from statsmodels.stats.multitest import multipletests

    if p.size == 0:
        return np.zeros(0, dtype=bool), np.zeros(0)
    reject, q, _, _ = multipletests(p, alpha=alpha, method="fdr_bh")
    return reject, q


def combine_halves(parts: list[tuple[np.ndarray, ...]], m: int) -> tuple[np.ndarray, ...]:
    """One row per pair over the halves: mean F and R², Stouffer-combined p, number of tests."""
    from scipy.stats import norm

    parent = np.concatenate([pt[0] for pt in parts]).astype(np.int64)
    child = np.concatenate([pt[1] for pt in parts]).astype(np.int64)
    key = parent * m + child
    uniq, inv = np.unique(key, return_inverse=True)
    cnt = np.bincount(inv).astype(np.float64)
    mean = [np.bincount(inv, weights=np.concatenate([pt[i] for pt in parts])) / cnt for i in (2, 3)]
    p = np.clip(np.concatenate([pt[4] for pt in parts]), 1e-300, 1.0 - 1e-16)
    z = np.bincount(inv, weights=norm.isf(p)) / np.sqrt(cnt)
    return uniq // m, uniq % m, mean[0], mean[1], norm.sf(z), cnt.astype(np.int64)


def _keep_tensor(keep: np.ndarray | None) -> torch.Tensor | None:
    # partial_f moves it to the data's device
    return None if keep is None else torch.from_numpy(keep)


def candidate_pvalues(
    z: torch.Tensor | None, cand: torch.Tensor, live: torch.Tensor, ridge: float, min_effect: float,
    noise: torch.Tensor | None, keep: np.ndarray | None, gram: torch.Tensor | None = None,
    n_rows: int | None = None,
) -> tuple[np.ndarray, ...]:
    """Regressions (:func:`~cape_pipeline.causal.regression.neighbourhood.partial_f`, on ``z``'s device) and
    minimum-effect p-values (:func:`table_pvalues`, on the CPU) of the live entries of a candidate
    table.

    Parameters
    ----------
    z
        ``(N, M)`` float64 tensor, standardized columns (a cross-fitting half), or None where
        ``gram`` and ``n_rows`` stand for it.
    cand, live
        ``(M, K)`` int64 candidate table and bool mask of its live entries (any device).
    ridge, min_effect
        As in :func:`~cape_pipeline.causal.regression.fit_regression`.
    noise
        ``(M,)`` float64 measurement-noise shares, or None.
    keep
        ``(N, M)`` bool numpy array of each child's own rows, or None.
    gram
        ``(M, M)`` float64 ``zᵀz`` (:func:`~cape_pipeline.causal.regression.neighbourhood.gram_matrix`)
        the regressions read their moments from, or None (they gather ``z``'s columns).
    n_rows
        N, the rows behind ``gram`` when ``z`` is None.

    Returns
    -------
    parent, child, f_stat, r2, pvalue
        numpy arrays, each ``(E,)`` over the live entries in row-major order.
    """
    f_stat, r2, dof = partial_f(z, cand, live, ridge=ridge, noise=noise, keep=_keep_tensor(keep), gram=gram,
                                n_rows=n_rows)
    f_np, r2_np, dof_np, cand_np, lv = (t.cpu().numpy() for t in (f_stat, r2, dof, cand, live))
    n = z.shape[0] if z is not None else int(n_rows)
    parent, child, p = table_pvalues(f_np, dof_np, cand_np, lv, n, keep, min_effect)
    return parent, child, f_np[lv], r2_np[lv], p


def prune_given_parents(
    z: torch.Tensor, dag_p: np.ndarray, dag_c: np.ndarray, m: int, *, ridge: float, min_effect: float, fdr: float,
    noise: torch.Tensor | None, keep: np.ndarray | None, gram: torch.Tensor | None = None,
) -> tuple[sp.csr_array, int]:
    """Step 5 of the regression algorithm: every DAG edge tested again given its child's DAG
    parents (CAM's pruning, Bühlmann, Peters & Ernst 2014; the minimum-effect test, BH at
    ``fdr`` over the DAG's edges), the regressions on ``z``'s device.

    Parameters
    ----------
    z
        ``(N, M)`` float64 tensor the DAG was fitted on.
    dag_p, dag_c
        ``(E,)`` int64 edges ``dag_p → dag_c``.
    m
        Number of features M.
    ridge, min_effect, fdr, noise, keep, gram
        As in :func:`candidate_pvalues` and :func:`bh`.

    Returns
    -------
    adjacency, n_removed
        ``(M, M)`` sparse float64 adjacency of the kept edges (weight ``|partial correlation|``
        given the DAG parents) and how many edges were removed.
    """
    if dag_p.size == 0:
        return sp.csr_array((m, m)), 0
    tab, mask = parent_table(dag_p, dag_c, m)
    f_d, r2_d, dof_d = partial_f(z, tab, mask, ridge=ridge, noise=noise, keep=_keep_tensor(keep), gram=gram)
    mk = mask.numpy()
    r2_np = r2_d.cpu().numpy()
    pp, cc, p_d = table_pvalues(f_d.cpu().numpy(), dof_d.cpu().numpy(), tab.numpy(), mk, z.shape[0], keep, min_effect)
    kept, _ = bh(p_d, fdr)
    w = np.sqrt(r2_np[mk][kept])
    return sp.csr_array((w, (pp[kept], cc[kept])), shape=(m, m)), int((~kept).sum())
