"""A causal order from a perturbation screen, for the regression algorithm's ordered re-test
(:mod:`cape_pipeline.causal.regression`, step 6).

A feature whose expression shifts when feature a is perturbed is a descendant of a
(interventional faithfulness), so it cannot be among a's parents; and a direct child of a
shifts with it. The neighbourhood regressions of steps 2–3 condition each feature on all its
screened candidates, its children and their other parents among them, which takes much of a
true parent's partial R² away. Given a causal order, a feature is instead regressed on the
candidates that precede it only: its non-descendants, the parent test of an ordered
(Bayesian-network) factorisation.

* :func:`shift_tests` — the shift of every feature under every perturbed feature, from one
  additive least-squares model of all perturbed and control rows (combinations of targets, as
  in Norman et al.'s screen, add their rows to each target's estimate): the descendant pairs at
  a Benjamini–Hochberg level, and the p-values at pairs asked for (the screened candidates);
* :func:`causal_order` — a topological order of those pairs together with the current DAG.

How close the re-test with the order from the perturbations (and the shift-consistency check
of step 6) comes to the re-test given the true order is measured in
``benchmarks/discover/interventional/RESULTS.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from cape_pipeline._utils import BLOCK_ENTRIES
from cape_pipeline.causal.postprocess import greedy_dag

__all__ = ["CANDIDATE_SHIFT_ALPHA", "SHIFT_CONSISTENCY_P", "SHIFT_FDR", "ShiftTests", "causal_order", "shift_tests"]

#: rows in which a feature must be the only target before its shifts are tested
MIN_PERTURBED_ROWS = 3
#: Benjamini–Hochberg level of the shift tests over all targets × features. The shift pairs only
#: order the genes (they are not edges), so a lenient level keeps more true ancestor pairs
#: (levels compared in benchmarks/discover/interventional/RESULTS.md)
SHIFT_FDR = 0.2
#: unadjusted level at which a shift between two screened candidates (neighbours in the screen,
#: so a priori often an ancestor pair) also orders them, after the BH pairs
CANDIDATE_SHIFT_ALPHA = 0.05
#: an edge p → c whose parent was perturbed alone is kept only if c's shift under p has
#: p-value ≤ this (a direct child shifts with its parent); see ``regression.fit_regression``.
#: Lenient: a knocked-down TF need not move a target that sits on the saturated part of a Hill
#: curve (the SERGIO-like generator), so a strict level drops true edges there, which costs more
#: than it gains at Norman's size (levels compared in benchmarks/discover/interventional)
SHIFT_CONSISTENCY_P = 0.5
#: targets that occur in combinations (rows with two or more feature targets) the additive model
#: solves for jointly (a dense (C, C) pseudo-inverse); beyond it, combination rows are left out
MAX_COMBINATION_TARGETS = 2000
#: bins of [0, 1] in which every shift test's p-value is counted for the inflation λ (:class:`ShiftTests`)
_INFLATION_BINS = 10_000


@dataclass(frozen=True)
class ShiftTests:
    """What :func:`shift_tests` returns.

    Attributes
    ----------
    source, target, pvalue
        ``(S,)`` int64, int64, float64: the pairs rejected at the Benjamini–Hochberg level
        (``source`` perturbed, ``target`` shifted), over all ``T × (M − 1)`` tests.
    pair_pvalue
        ``(P,)`` float64: the p-value at each pair asked for; NaN where the source is not a
        tested target (or the pair is a target against itself).
    n_targets
        T, the features tested as perturbation sources.
    combinations_used
        Whether rows with two or more feature targets entered the model.
    inflation
        The genomic-control inflation of all ``T × (M − 1)`` tests (Devlin & Roeder 1999,
        *Biometrics* 55:997): the median of their χ²₁ statistics (from the p-values, read on a grid
        of 10⁻⁴ in p) over the median of χ²₁, 0.455. About 1 where the tests are calibrated and
        most features do not shift under most perturbations; well above 1 where the perturbed
        conditions differ from the controls in most features, which the tests, counting every
        cell as a replicate, read as shifts (``benchmarks/discover/interventional/RESULTS.md``).
        NaN without tests.
    """

    source: np.ndarray
    target: np.ndarray
    pvalue: np.ndarray
    pair_pvalue: np.ndarray
    n_targets: int
    combinations_used: bool
    inflation: float = float("nan")


def shift_tests(
    z: np.ndarray, keep: np.ndarray, fdr: float = SHIFT_FDR, *, label_targets: np.ndarray | None = None,
    pairs: tuple[np.ndarray, np.ndarray] | None = None,
) -> ShiftTests:
    """Which features shift when each perturbed feature is perturbed: t tests in one additive
    least-squares model of the perturbation screen.

    Every feature g is modelled on the control rows and the rows whose targets are all features
    as ``z[i, g] = μ_g + Σ_{a targeted in row i} β_{a,g} + ε`` (ordinary least squares with an
    intercept, one residual variance per feature), so a target's rows in combinations count
    towards its β beside its single-target rows. ``β_{a,g}`` is tested (two-sided t, residual
    degrees of freedom) for every target a that is the only target of at least
    :data:`MIN_PERTURBED_ROWS` rows. Without combination rows this is each target's mean shift
    against the controls with a pooled variance, ``(1/n_a + 1/n_ctrl)·σ²_g``. The intercept enters
    through the Sherman–Morrison identity, so the only dense solve is over the targets that occur
    in combinations (at most :data:`MAX_COMBINATION_TARGETS`; more, and combination rows are
    left out). Rows whose label names a target that is not a feature (``label_targets``) are
    left out: they are neither controls nor perturbations of features alone.
    Benjamini–Hochberg at ``fdr`` runs over all ``T × (M − 1)`` tests; the features are read in
    blocks of about 2²² entries, keeping only p-values ≤ ``fdr`` and those at ``pairs``.
    O(N·M + C²·M) time. Memory beyond ``z`` and ``keep``: one ``(N, M)`` bool mask, the sparse
    design, one block of rows and its ``(T, block)`` p-values, and the kept p-values (about
    ``fdr · T · M`` under the null); no M × M matrix. A row in which the shifted feature is itself
    a target (a combination ``a + g``) enters g's model additively although g is set there; the
    interaction goes into ``β_{a,g}`` and the residual variance, which weakens the test of a
    direct child that is co-targeted with its parent (its p-value comes out larger).

    Parameters
    ----------
    z
        ``(N, M)`` float64 (covariate-adjusted, standardized) expression.
    keep
        ``(N, M)`` bool: ``keep[i, j]`` ⇔ feature j was not perturbed in row i.
    fdr
        Benjamini–Hochberg level of the returned descendant pairs.
    label_targets
        ``(N,)`` int: how many targets each row's label names, features or not
        (:class:`~cape_pipeline.causal.interventions.Interventions`); 0 marks a control. None:
        every target is taken to be a feature.
    pairs
        ``((P,), (P,))`` int64 sources and targets whose p-values to return, or None.

    Returns
    -------
    ShiftTests
        Empty pairs (and an all-NaN ``pair_pvalue``) when there are fewer than 3 control rows or
        no feature is the only target of :data:`MIN_PERTURBED_ROWS` rows.

    Raises
    ------
    CapeConfigError
        ``keep`` is not ``(N, M)``, ``label_targets`` not ``(N,)``, or ``pairs`` not two equal
        ``(P,)`` arrays of feature indices.
    """
    from scipy.stats import t as t_dist

    from cape_pipeline.errors import CapeConfigError

    n, m = z.shape
    if keep.shape != (n, m):
        raise CapeConfigError(f"shift_tests: keep must be ({n}, {m}) like z, got {keep.shape}")
    if label_targets is not None and np.shape(label_targets) != (n,):
        raise CapeConfigError(f"shift_tests: label_targets must be ({n},), got {np.shape(label_targets)}")
    ps, pt = (np.zeros(0, np.int64), np.zeros(0, np.int64)) if pairs is None else (
        np.asarray(pairs[0], dtype=np.int64), np.asarray(pairs[1], dtype=np.int64))
    if ps.shape != pt.shape or ps.ndim != 1 or (ps.size and (min(ps.min(), pt.min()) < 0 or max(ps.max(), pt.max()) >= m)):
        raise CapeConfigError(f"shift_tests: pairs must be two (P,) arrays of feature indices in [0, {m}), "
                              f"got shapes {ps.shape} and {pt.shape}")
    pair_p = np.full(ps.shape, np.nan)
    model = _additive_model(keep, label_targets)
    empty = np.zeros(0, dtype=np.int64)
    if model is None:
        return ShiftTests(empty, empty, np.zeros(0), pair_p, 0, False)
    rows, design, tested, pos, u, c = model.rows, model.design, model.tested, model.pos, model.u, model.c
    kinv_c, n_comb, denom, var_beta, dof = model.kinv_c, model.kinv_c.shape[0], model.denom, model.var_beta, model.dof
    col_of = np.full(m, -1, dtype=np.int64)
    col_of[tested] = np.arange(tested.size)
    asked = np.flatnonzero(col_of[ps] >= 0)
    asked = asked[np.argsort(pt[asked], kind="stable")]  # the asked pairs of tested sources, by target
    asked_t = pt[asked]
    src, tgt, pv = [], [], []
    grid = np.zeros(_INFLATION_BINS + 1, dtype=np.int64)  # every test's p-value on a grid of 1/_INFLATION_BINS
    step = max(BLOCK_ENTRIES // max(rows.size, 1), 1)
    for s in range(0, m, step):
        y = z[rows, s : s + step]
        ybar = y.mean(axis=0)
        w = design.T @ y - np.outer(u, ybar)  # D̃ᵀy, D̃ the centred design
        kw = np.vstack([kinv_c @ w[:n_comb], w[n_comb:] / u[n_comb:, None]])  # K⁻¹w (K's diagonal is u)
        beta = kw + np.outer(c, c @ w) / denom  # Sherman–Morrison: (K − uuᵀ/N)⁻¹w
        rss = np.maximum((y * y).sum(axis=0) - rows.size * ybar * ybar - (beta * w).sum(axis=0), 0.0)
        se = np.sqrt(np.outer(var_beta[pos], rss / dof))
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.where(se > 0, 2.0 * t_dist.sf(np.abs(beta[pos] / se), dof), 1.0)
        inside = (tested >= s) & (tested < s + p.shape[1])
        p[np.flatnonzero(inside), tested[inside] - s] = 1.0  # a target against itself is not a test
        grid += np.bincount(np.minimum(np.nan_to_num(p.ravel(), nan=1.0) * _INFLATION_BINS, _INFLATION_BINS).astype(np.int64),
                            minlength=_INFLATION_BINS + 1)
        grid[-1] -= int(inside.sum())  # less the targets against themselves (p = 1)
        hit_r, hit_c = np.nonzero(p <= fdr)
        src.append(tested[hit_r])
        tgt.append(hit_c + s)
        pv.append(p[hit_r, hit_c])
        here = asked[np.searchsorted(asked_t, s) : np.searchsorted(asked_t, s + p.shape[1])]
        pair_p[here] = p[col_of[ps[here]], pt[here] - s]
    pair_p[ps == pt] = np.nan
    pv_all = np.concatenate(pv)
    n_tests = tested.size * (m - 1)
    # Benjamini–Hochberg over all n_tests p-values, of which only these ≤ fdr can be rejected
    order = np.argsort(pv_all, kind="stable")
    passed = pv_all[order] <= fdr * np.arange(1, pv_all.size + 1) / n_tests
    k = int(np.flatnonzero(passed).max()) + 1 if passed.any() else 0
    keep_idx = order[:k]
    return ShiftTests(np.concatenate(src)[keep_idx].astype(np.int64), np.concatenate(tgt)[keep_idx].astype(np.int64),
                      pv_all[keep_idx], pair_p, int(tested.size), model.combos, _inflation(grid))


def _inflation(grid: np.ndarray) -> float:
    """Genomic-control λ from the counts of p-values in bins of width 1/``_INFLATION_BINS`` (the
    last bin holds p = 1): the median p-value's χ²₁ (the upper median of an even count, at its
    bin's centre) over the median of χ²₁."""
    from scipy.stats import chi2

    total = int(grid.sum())
    if total == 0:
        return float("nan")
    k = int(np.searchsorted(np.cumsum(grid), (total + 1) / 2))  # the bin of the median
    p_med = min((k + 0.5) / _INFLATION_BINS, 1.0)
    return float(chi2.isf(p_med, 1) / chi2.ppf(0.5, 1))


class _AdditiveModel(NamedTuple):
    """The design of :func:`shift_tests` and the pieces of its least-squares solution."""

    rows: np.ndarray  #: (R,) rows used: controls and rows whose every target is a feature
    design: sp.csr_array  #: (R, F) 0/1 over the perturbed features, combination targets first
    tested: np.ndarray  #: (T,) features tested as sources
    pos: np.ndarray  #: (T,) their columns in ``design``
    kinv_c: np.ndarray  #: (C, C) pseudo-inverse of the combination block of K = DᵀD
    c: np.ndarray  #: (F,) K⁻¹u
    u: np.ndarray  #: (F,) Dᵀ1, rows per target (also K's diagonal outside the combination block)
    denom: float  #: N − uᵀK⁻¹u
    var_beta: np.ndarray  #: (F,) diagonal of (D̃ᵀD̃)⁻¹, D̃ the centred design
    dof: int  #: residual degrees of freedom
    combos: bool  #: whether combination rows were used


def _additive_model(keep: np.ndarray, label_targets: np.ndarray | None) -> _AdditiveModel | None:
    """:class:`_AdditiveModel` of the screen ``keep`` (see :func:`shift_tests`), or None where no
    feature can be tested."""
    n_hit = keep.shape[1] - keep.sum(axis=1)
    named = n_hit if label_targets is None else np.asarray(label_targets)
    rows = np.flatnonzero(named == n_hit)  # controls and rows whose every target is a feature
    hit = n_hit[rows]
    single = rows[hit == 1]
    if (hit == 0).sum() < 3 or single.size == 0:
        return None
    tested, counts = np.unique(np.argmax(~keep[single], axis=1), return_counts=True)
    tested = tested[counts >= MIN_PERTURBED_ROWS]
    if tested.size == 0:
        return None
    comb = (~keep[rows[hit >= 2]]).any(axis=0)  # (M,) targets that occur in combinations
    combos = bool(comb.any())
    if comb.sum() > MAX_COMBINATION_TARGETS:
        rows, hit, combos = rows[hit <= 1], hit[hit <= 1], False
        comb[:] = False
    r_hit, f_hit = np.nonzero(~keep[rows])
    d_full = sp.csc_array((np.ones(r_hit.size), (r_hit, f_hit)), shape=(rows.size, keep.shape[1]))
    used = np.flatnonzero(np.diff(d_full.indptr) > 0)  # features perturbed in these rows
    cols = np.r_[used[comb[used]], used[~comb[used]]]  # combination targets first
    n_comb = int(comb[used].sum())
    design = sp.csr_array(d_full[:, cols])
    u = np.asarray(design.sum(axis=0)).ravel().astype(np.float64)
    kc = (design[:, :n_comb].T @ design[:, :n_comb]).toarray() if n_comb else np.zeros((0, 0))
    # pseudo-inverse and rank of the symmetric block from one eigendecomposition (numpy's tolerance)
    lam, vec = np.linalg.eigh(kc)
    big = lam > (lam.max(initial=0.0) * max(n_comb, 1) * np.finfo(np.float64).eps)
    kinv_c = (vec[:, big] / lam[big]) @ vec[:, big].T
    c = np.r_[kinv_c @ u[:n_comb], np.ones(cols.size - n_comb)]  # K⁻¹u; K = diag(u) outside the block
    denom = rows.size - u @ c  # N − uᵀK⁻¹u (> 0 while there are control rows)
    var_beta = np.r_[np.diag(kinv_c), 1.0 / u[n_comb:]] + c * c / denom
    rank = int(big.sum()) + cols.size - n_comb
    dof = rows.size - 1 - rank
    if dof < 1:
        return None
    col_in_design = np.full(keep.shape[1], -1, dtype=np.int64)
    col_in_design[cols] = np.arange(cols.size)
    return _AdditiveModel(rows, design, tested, col_in_design[tested], kinv_c, c, u, float(denom), var_beta, dof,
                          combos)


def causal_order(m: int, dag_parent: np.ndarray, dag_child: np.ndarray, shift_source: np.ndarray,
                 shift_target: np.ndarray, shift_p: np.ndarray) -> np.ndarray:
    """A topological order of the perturbation shifts and the current DAG, as ranks.

    The shift pairs (ancestor → descendant, most significant first) take precedence over the
    DAG's edges; each edge is inserted unless it closes a cycle
    (:func:`~cape_pipeline.causal.postprocess.greedy_dag`). Among the features the graph leaves
    unordered, those with more outgoing edges come first (networkx's lexicographical
    topological sort): a hub is more often a regulator than a target.

    Parameters
    ----------
    m
        Number of features M.
    dag_parent, dag_child
        ``(E,)`` int64 edges of the current DAG.
    shift_source, shift_target, shift_p
        ``(S,)`` ancestor pairs (:func:`shift_tests`) and their p-values.

    Returns
    -------
    np.ndarray
        ``(M,)`` int64: ``rank[j]`` is feature j's position (0 first); ``rank[p] < rank[c]`` for
        every kept edge ``p → c``.
    """
    import networkx as nx

    parent = np.r_[shift_source, dag_parent].astype(np.int64)
    child = np.r_[shift_target, dag_child].astype(np.int64)
    # a shift weighs 2 − p, above every DAG edge's 1: shifts first, the most significant first
    weight = np.r_[2.0 - np.clip(shift_p, 0.0, 1.0), np.ones(dag_parent.size)]
    kept = greedy_dag(parent, child, weight, m)
    h = nx.DiGraph()
    h.add_nodes_from(range(m))
    h.add_edges_from(zip(parent[kept].tolist(), child[kept].tolist(), strict=True))
    out_degree = dict(h.out_degree())
    order = list(nx.lexicographical_topological_sort(h, key=lambda v: (-out_degree[v], v)))
    rank = np.empty(m, dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(m)
    return rank
