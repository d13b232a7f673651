"""The regression algorithm's last step (:mod:`cape_pipeline.causal.regression`, step 8): every
edge of the voted DAG tested again given its DAG parents, its coefficient's variance measured
by the delete-half jackknife instead of the least-squares formula.

The edge test's statistic ``β² / (σ² (G⁻¹)_jj)`` takes the variance of the coefficient from the
least-squares formula. With the counting-noise correction (errors in variables) the coefficient
comes from an inverted, corrected Gram matrix and varies more than that formula says; on counts
the errors are heteroscedastic too. Both make the test anti-conservative, most of all where the
correction does the most — a sibling seen through a noisy parent, whose coefficient spreads over
random halves of the cells further beyond the formula's standard error than a true edge's does
(the two compared in ``benchmarks/discover/interventional/RESULTS.md``).

The delete-d jackknife with d = N/2 (Shao & Wu 1989, *Ann. Statist.* 17:1176; half-sample
replication, McCarthy 1969, *Rev. Int. Stat. Inst.* 37:239) estimates the variance of an estimator from the
full N rows as the mean squared deviation of its values on random halves of the rows (for d =
N/2 the factor ``(N − d)/(d·S)`` is ``1/S``), whatever the estimator: no formula for the corrected
coefficient's variance is needed. The halves here are :data:`JACKKNIFE_SPLITS` random splits of
the rows into two, both halves of each used.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from cape_pipeline.causal.regression.edge_test import bh, table_pvalues
from cape_pipeline.causal.regression.neighbourhood import regressions
from cape_pipeline.causal.screen import parent_table

__all__ = ["JACKKNIFE_SPLITS", "jackknife_retest", "jackknife_variance"]

#: random splits of the rows into two halves (2 × this many half-sample fits). More splits make
#: the variance estimate less noisy; the gain levels off towards this many (8, 16 and 32
#: compared in benchmarks/discover/interventional/RESULTS.md)
JACKKNIFE_SPLITS = 32
#: salt of the halves' seeds: split b's rows from ``default_rng([seed, _SEED_SALT + b])``, apart
#: from the splits of the fit itself (``seed`` and ``[seed, b]``)
_SEED_SALT = 100


def jackknife_variance(
    z: np.ndarray,
    parents: torch.Tensor,
    live: torch.Tensor,
    *,
    ridge: float = 1e-2,
    noise: torch.Tensor | None = None,
    keep: np.ndarray | None = None,
    n_splits: int = JACKKNIFE_SPLITS,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Coefficients of every feature's regression on its parents, and their delete-half
    jackknife variances.

    Every feature is regressed on its live parents
    (:func:`~cape_pipeline.causal.regression.neighbourhood.regressions`, with the counting-noise correction
    and each feature's own rows where given) on all rows, giving ``β``, and on each half of
    ``n_splits`` random splits of the rows (each half centred on its own rows), giving
    ``β_1 … β_S`` (``S = 2·n_splits``); the variance is ``v = (1/S) Σ_s (β_s − β̄)²`` (module
    docstring).

    Parameters
    ----------
    z
        ``(N, M)`` float64 standardized matrix.
    parents, live
        ``(M, K)`` int64 parent table and bool mask of its live entries
        (:func:`~cape_pipeline.causal.screen.parent_table`).
    ridge
        Ridge λ of the regressions (correlation scale).
    noise
        ``(M,)`` float64 counting-noise shares (``1 − reliability``), or None.
    keep
        ``(N, M)`` bool, the rows of each feature's own regression (interventions), or None.
    n_splits
        Random splits of the rows into halves (:data:`JACKKNIFE_SPLITS`).
    seed
        Seeds the splits (split b from ``[seed, 100 + b]``).
    device
        Where the regressions run (each half is sent there from ``z`` on the CPU, with
        ``noise`` and ``keep``, by :func:`~cape_pipeline.causal.regression.neighbourhood.regressions`).

    Returns
    -------
    coef, var, dof
        On ``device``: ``(M, K)`` float64 coefficients on all rows and their jackknife variances (0 at
        padding), and ``(M,)`` float64 residual degrees of freedom of the all-rows regressions.

    Raises
    ------
    CapeConfigError
        ``n_splits`` is not an integer ≥ 2, or ``z`` has fewer than 4 rows.
    """
    from cape_pipeline.errors import CapeConfigError

    n = z.shape[0]
    if isinstance(n_splits, bool) or not isinstance(n_splits, (int, np.integer)) or n_splits < 2 or n < 4:
        raise CapeConfigError(f"jackknife: n_splits must be an integer >= 2 and z at least 4 rows, "
                              f"got n_splits={n_splits!r}, {n} rows")

    def fit(rows: np.ndarray | None) -> tuple[torch.Tensor, torch.Tensor]:
        zr = np.asarray(z, dtype=np.float64) if rows is None else np.asarray(z[rows], dtype=np.float64)
        if rows is not None:
            zr -= zr.mean(axis=0)  # a half centred on its own rows
        kr = None if keep is None else torch.from_numpy(np.ascontiguousarray(keep if rows is None else keep[rows]))
        coef, _, dof = regressions(torch.from_numpy(np.ascontiguousarray(zr)).to(device), parents, live, ridge=ridge,
                                   noise=noise, keep=kr)
        return coef, dof

    coef, dof = fit(None)
    halves = []
    for b in range(int(n_splits)):
        rows = np.random.default_rng([seed, _SEED_SALT + b]).permutation(n)
        halves += [fit(rows[: n // 2])[0], fit(rows[n // 2 :])[0]]
    est = torch.stack(halves)  # (S, M, K)
    return coef, ((est - est.mean(0)) ** 2).mean(0), dof


def jackknife_retest(
    z: np.ndarray,
    adjacency: sp.csr_array,
    *,
    min_effect: float,
    fdr: float,
    ridge: float = 1e-2,
    noise: torch.Tensor | None = None,
    keep: np.ndarray | None = None,
    n_splits: int = JACKKNIFE_SPLITS,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> tuple[sp.csr_array, dict[str, Any]]:
    """Test every edge of a DAG given its DAG parents, with the delete-half jackknife variance.

    The statistic of edge p → c is ``F = β² / v``, ``β`` its coefficient in c's regression on
    its DAG parents on all rows and ``v`` its jackknife variance (:func:`jackknife_variance`);
    its p-value is the edge test's minimum-effect test
    (:func:`~cape_pipeline.causal.regression.edge_test.min_effect_pvalues`, ``H₀: partial R² ≤
    min_effect``, with the regression's residual degrees of freedom), and an edge is kept where
    Benjamini–Hochberg at ``fdr`` over the DAG's edges rejects. A kept edge keeps its weight.

    Parameters
    ----------
    z
        ``(N, M)`` float64 standardized matrix the DAG was fitted on.
    adjacency
        ``(M, M)`` sparse DAG (``[p, c] ≠ 0`` ⇔ p → c), weights kept.
    min_effect, fdr, ridge
        As in :func:`~cape_pipeline.causal.regression.fit_regression`.
    noise, keep, n_splits, seed, device
        As in :func:`jackknife_variance`.

    Returns
    -------
    adjacency, record
        The ``(M, M)`` sparse DAG of the kept edges, and a history record (``stage``
        ``"jackknife re-test"``, ``n_tested``, ``n_dropped``, ``n_edges``, ``seconds``).

    Raises
    ------
    CapeConfigError
        As :func:`jackknife_variance`.
    """
    t0 = time.perf_counter()
    m = z.shape[1]
    coo = adjacency.tocoo()
    if coo.nnz == 0:
        return sp.csr_array((m, m)), {"stage": "jackknife re-test", "n_tested": 0, "n_dropped": 0, "n_edges": 0,
                                      "seconds": time.perf_counter() - t0}
    tab, mask = parent_table(coo.row.astype(np.int64), coo.col.astype(np.int64), m)
    coef, var, dof = jackknife_variance(z, tab, mask, ridge=ridge, noise=noise, keep=keep, n_splits=n_splits,
                                        seed=seed, device=device)
    coef, var, dof = coef.cpu(), var.cpu(), dof.cpu()
    f_stat = coef.numpy() ** 2 / np.maximum(var.numpy(), 1e-300)
    parent, child, pvalue = table_pvalues(f_stat, dof.numpy(), tab.numpy(), mask.numpy(), z.shape[0], keep, min_effect)
    kept, _ = bh(pvalue, fdr)
    weight = np.asarray(adjacency[parent[kept], child[kept]]).ravel()
    out = sp.csr_array((weight, (parent[kept], child[kept])), shape=(m, m))
    return out, {"stage": "jackknife re-test", "n_tested": int(parent.size), "n_dropped": int((~kept).sum()),
                 "n_edges": int(out.nnz), "seconds": time.perf_counter() - t0}
