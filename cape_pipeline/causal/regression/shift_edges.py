"""The regression algorithm's interventional edges (:mod:`cape_pipeline.causal.regression`,
step 9): a perturbation's direct effects as edges, where the regressions cannot see them.

The edge test (step 3) asks of a pair that it explain ``min_effect`` of the child's variance
beyond the other candidates, over all the rows. A perturbation's rows are few in a screen (one
knockout's cells are 1–3 % of them), so the variance the perturbation itself moves in its child
is a small share of the child's total; where the observational signal is weak too (few UMIs per
gene and cell) a true parent's partial R² stays under the floor although the child's shift under
the perturbation is plain. The shift test of step 6
(:func:`~cape_pipeline.causal.regression.ordering.shift_tests`) reads that evidence directly: a
feature that shifts when feature a alone is perturbed is a descendant of a (interventional
faithfulness).

This step adds the descendant pairs that neither the DAG nor a two-step path explains:

1. every feature's residual given its DAG parents (their coefficients on the rows where the
   feature was not perturbed, step 5's regressions): a shift that the parents' own values
   carry is mediated by them, not direct — the interventional counterpart of the pruning
   given the DAG parents (:func:`parent_residuals`);
2. every perturbed feature's shifts of those residuals at the edge test's Benjamini–Hochberg
   level ``fdr`` (over all ``T × (M − 1)`` tests), kept where the control cells agree in sign:
   a's correlation with g's residual has the sign of g's shift times a's own
   (:func:`sign_concordant`; a shift that a difference between conditions makes, not a, has no
   such association);
3. a pair a → g is taken as direct unless a path a → h → g runs through the DAG's edges and the
   other shift pairs (a shifts h, and h is a parent of g or h's perturbation shifts g): one
   step of the transitive reduction that separates a parent from an ancestor (Wagner 2001's
   perturbation-graph reduction, *Bioinformatics* 17:1183);
4. the direct pairs and the DAG's edges are inserted greedily, the shift pairs first (most
   significant first), each edge unless it closes a cycle
   (:func:`~cape_pipeline.causal.postprocess.greedy_dag`): a DAG edge g → a that contradicts a
   shift of g under a's perturbation gives way;
5. the weight of every edge of a child whose parents changed is recomputed as the step 5
   weight, ``|partial correlation|`` given its DAG parents (floored at :data:`MIN_WEIGHT`, so an
   interventional edge whose observational partial correlation rounds to 0 stays an edge).

Measured against the fit without this step in ``benchmarks/discover/interventional/RESULTS.md``.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from cape_pipeline._utils import BLOCK_ENTRIES
from cape_pipeline.causal.postprocess import greedy_dag
from cape_pipeline.causal.regression.neighbourhood import partial_f, regressions
from cape_pipeline.causal.regression.ordering import shift_tests
from cape_pipeline.causal.screen import parent_table
from cape_pipeline.errors import CapeWarning

__all__ = ["INFLATION_WARNING", "MIN_WEIGHT", "add_shift_edges", "direct_shifts", "parent_residuals", "sign_concordant"]

#: the smallest weight an edge keeps: an interventional edge is an edge whatever its
#: observational partial correlation
MIN_WEIGHT = 1e-6
#: the shift tests' genomic-control inflation (:class:`~cape_pipeline.causal.regression.ordering.ShiftTests`)
#: above which :func:`add_shift_edges` warns that its edges may be run-to-run differences between
#: the conditions: 1.0–1.13 on the simulated screens whose cells are independent, 2.3–3.6 on AVICI's,
#: whose conditions are separate simulation runs; also above it where most genes are downstream of
#: most perturbed genes, as on BoolODE's small cyclic models (benchmarks/discover/interventional/RESULTS.md)
INFLATION_WARNING = 1.5


def parent_residuals(
    z: np.ndarray, zt: torch.Tensor, adjacency: sp.csr_array, keep: np.ndarray | None, *, ridge: float = 1e-2,
    noise: torch.Tensor | None = None, gram: torch.Tensor | None = None,
) -> np.ndarray:
    """Every feature's residual given its DAG parents (step 1 of the module docstring).

    Feature c's coefficients ``β`` on its parents come from
    :func:`~cape_pipeline.causal.regression.neighbourhood.regressions` (the rows where
    ``keep[:, c]``, ridge ``ridge``, the counting-noise correction with ``noise``), and its
    residual is ``z_c − Z_pa(c) β`` on every row (no intercept: the shift tests have their own).
    A feature without parents keeps its column.

    Parameters
    ----------
    z
        ``(N, M)`` float64 standardized matrix.
    zt
        ``z`` as a float64 tensor on the fit's device.
    adjacency
        ``(M, M)`` sparse DAG (``[p, c] ≠ 0`` ⇔ p → c).
    keep
        ``(N, M)`` bool rows of each feature's own regression, or None (all).
    ridge, noise, gram
        As in :func:`~cape_pipeline.causal.regression.neighbourhood.regressions`.

    Returns
    -------
    np.ndarray
        ``(N, M)`` float64, a new array (one more copy of ``z`` in memory), filled in row blocks
        of about :data:`~cape_pipeline._utils.BLOCK_ENTRIES` entries.
    """
    n, m = z.shape
    out = np.array(z, dtype=np.float64, copy=True)
    coo = sp.coo_array(adjacency)
    if coo.nnz == 0:
        return out
    tab, live = parent_table(coo.row.astype(np.int64), coo.col.astype(np.int64), m)
    coef, _, _ = regressions(zt, tab.to(zt.device), live.to(zt.device), ridge=ridge, noise=noise,
                             keep=None if keep is None else torch.from_numpy(keep), gram=gram)
    coef = (coef.cpu() * live).numpy()
    tab = tab.numpy()
    step = max(1, BLOCK_ENTRIES // max(1, m * tab.shape[1]))
    for start in range(0, n, step):
        block = z[start : start + step]
        out[start : start + step] -= np.einsum("nmw,mw->nm", block[:, tab], coef)
    return out


def sign_concordant(
    z: np.ndarray, resid: np.ndarray, keep: np.ndarray, source: np.ndarray, target: np.ndarray, *,
    label_targets: np.ndarray | None = None,
) -> np.ndarray:
    """Which shift pairs a → g the observational data agree with in sign.

    If a is a parent of g, a's observational association with g's residual given g's other
    parents has the sign of a's effect on g (monotone mechanisms; in a linear model it is the
    edge's coefficient). Under a's perturbation that effect moves g's residual by
    ``Δg ≈ effect · Δa``, ``Δa`` being a's own shift. So a direct pair has
    ``sign(r_ag) = sign(Δg · Δa)``, with ``r_ag`` the correlation of a's expression and g's
    residual over the control rows. A shift pair whose shift comes from a difference between the
    perturbed and the control conditions that a does not carry (a batch, a separate run) has no
    such association, and passes by chance, about half the time. Every pair is kept or dropped
    on this sign alone, with no level to set.

    Parameters
    ----------
    z
        ``(N, M)`` float64 standardized expression.
    resid
        ``(N, M)`` float64 residuals given the DAG parents (:func:`parent_residuals`).
    keep
        ``(N, M)`` bool: ``keep[i, j]`` ⇔ feature j was not perturbed in row i.
    source, target
        ``(P,)`` int64 shift pairs (a perturbed, g shifted).
    label_targets
        ``(N,)`` int, how many targets each row's label names (0: a control), or None (the
        controls are the rows where no feature was perturbed).

    Returns
    -------
    ``(P,)`` bool: the sign of ``r_ag`` equals that of ``Δg · Δa`` (False where either is 0, or
    where there are fewer than 3 control rows). ``Δ`` is the mean over the rows where a was
    perturbed less the mean over the controls. Time O(N·(P + S)), S the sources, in blocks.
    """
    p = source.size
    ctrl = (np.asarray(label_targets) == 0) if label_targets is not None else keep.all(axis=1)
    out = np.zeros(p, dtype=bool)
    if p == 0 or ctrl.sum() < 3:
        return out
    srcs, s_idx = np.unique(source, return_inverse=True)
    hit = sp.csc_array(~keep[:, srcs])  # (N, S) rows where each source was perturbed
    n_hit = np.maximum(np.asarray(hit.sum(axis=0)).ravel(), 1)
    z_ctrl, r_ctrl = z[ctrl], resid[ctrl]
    d_src = np.asarray(hit.multiply(z[:, srcs]).sum(axis=0)).ravel() / n_hit - z_ctrl[:, srcs].mean(axis=0)
    step = max(BLOCK_ENTRIES // max(z.shape[0], 1), 1)
    for b in range(0, p, step):
        a, g, si = source[b : b + step], target[b : b + step], s_idx[b : b + step]
        zc, rc = z_ctrl[:, a], r_ctrl[:, g]
        rc_mean = rc.mean(0)
        r = ((zc - zc.mean(0)) * (rc - rc_mean)).sum(0)
        # each pair's residual shift: the mean over its source's perturbed rows less the controls'
        shifted = np.asarray(hit[:, si].multiply(resid[:, g]).sum(axis=0)).ravel() / n_hit[si]
        d_tgt = shifted - rc_mean
        out[b : b + step] = np.sign(r) * np.sign(d_tgt * d_src[si]) > 0
    return out


def direct_shifts(source: np.ndarray, target: np.ndarray, dag_parent: np.ndarray, dag_child: np.ndarray,
                  m: int) -> np.ndarray:
    """Which shift pairs no two-step path explains (step 3 of the module docstring).

    Parameters
    ----------
    source, target
        ``(S,)`` int64 shift pairs (``source`` perturbed, ``target`` shifted), no repeats.
    dag_parent, dag_child
        ``(E,)`` int64 edges of the DAG.
    m
        Number of features M.

    Returns
    -------
    np.ndarray
        ``(S,)`` bool: True where no feature h ≠ source, target has source → h and h → target
        among the shift pairs and the DAG's edges. O(S·d) with d the graph's mean degree; the
        product is taken over the T perturbed rows only, never M × M.
    """
    if source.size == 0:
        return np.zeros(0, dtype=bool)
    par = np.r_[source, dag_parent].astype(np.int64)
    chi = np.r_[target, dag_child].astype(np.int64)
    off = par != chi
    u = sp.csr_array((np.ones(int(off.sum())), (par[off], chi[off])), shape=(m, m))
    u.sum_duplicates()
    u.data[:] = 1.0
    rows, where = np.unique(source, return_inverse=True)
    # (T, M): paths of length two from each perturbed feature; without self-loops in u their
    # middle feature is neither end
    two = (u[rows] @ u).tocsr()
    return np.asarray(two[where, target]).ravel() == 0


def add_shift_edges(
    z: np.ndarray,
    zt: torch.Tensor,
    adjacency: sp.csr_array,
    keep: np.ndarray,
    *,
    fdr: float,
    ridge: float = 1e-2,
    noise: torch.Tensor | None = None,
    label_targets: np.ndarray | None = None,
    may_parent: np.ndarray | None = None,
    gram: torch.Tensor | None = None,
) -> tuple[sp.csr_array, dict[str, Any]]:
    """The DAG with the perturbations' direct shifts added (steps 1–5 of the module docstring).

    Parameters
    ----------
    z
        ``(N, M)`` float64 standardized (covariate-adjusted) matrix the DAG was fitted on.
    zt
        ``z`` as a float64 tensor on the fit's device (the weights' regressions run there).
    adjacency
        ``(M, M)`` sparse DAG (``[p, c] ≠ 0`` ⇔ p → c), weights in (0, 1].
    keep
        ``(N, M)`` bool: ``keep[i, j]`` ⇔ feature j was not perturbed in row i.
    fdr
        Benjamini–Hochberg level of the shift tests (the edge test's).
    ridge, noise, gram
        As in :func:`~cape_pipeline.causal.regression.edge_test.prune_given_parents`.
    label_targets
        ``(N,)`` int, how many targets each row's label names (0: a control), or None
        (:func:`~cape_pipeline.causal.regression.ordering.shift_tests`).
    may_parent
        ``(M,)`` bool, the features that may be parents (regulators), or None (all).

    Returns
    -------
    adjacency, record
        The ``(M, M)`` sparse DAG and a history record (``stage`` ``"interventional edges"``,
        ``n_shift_pairs``, ``n_discordant`` (shift pairs whose sign the controls contradict,
        :func:`sign_concordant`), ``n_indirect``, ``n_added``, ``n_dropped`` (DAG edges that gave way),
        ``n_edges``, ``shift_inflation`` (the residual shift tests' genomic-control λ; above
        :data:`INFLATION_WARNING` a :class:`~cape_pipeline.errors.CapeWarning` is issued and its
        text recorded as ``warning``), ``seconds``). Without shift pairs the DAG comes back
        unchanged.

    Raises
    ------
    CapeConfigError
        As :func:`~cape_pipeline.causal.regression.ordering.shift_tests`.
    """
    t0 = time.perf_counter()
    m = z.shape[1]
    adjacency = sp.csr_array(adjacency)
    resid = parent_residuals(z, zt, adjacency, keep, ridge=ridge, noise=noise, gram=gram)
    shifts = shift_tests(resid, keep, fdr, label_targets=label_targets)
    src, tgt, pv = shifts.source, shifts.target, shifts.pvalue
    if may_parent is not None:
        ok = may_parent[src]
        src, tgt, pv = src[ok], tgt[ok], pv[ok]
    n_shift = src.size
    agree = sign_concordant(z, resid, keep, src, tgt, label_targets=label_targets)
    del resid
    src, tgt, pv = src[agree], tgt[agree], pv[agree]
    coo = adjacency.tocoo()
    dag_p, dag_c = coo.row.astype(np.int64), coo.col.astype(np.int64)
    direct = direct_shifts(src, tgt, dag_p, dag_c, m)
    record: dict[str, Any] = {"stage": "interventional edges", "n_shift_pairs": int(n_shift),
                              "n_discordant": int((~agree).sum()),
                              "n_indirect": int((~direct).sum()), "n_added": 0, "n_dropped": 0,
                              "n_edges": int(adjacency.nnz),
                              "shift_inflation": shifts.inflation if np.isfinite(shifts.inflation) else None}
    if shifts.inflation > INFLATION_WARNING:
        record["warning"] = (
            f"discover: the perturbation shift tests are inflated (genomic-control λ {shifts.inflation:.2f}; about 1 "
            "when most genes do not shift under most perturbations): the perturbed conditions differ from the "
            "controls in most genes. Either most genes lie downstream of most perturbed genes (a small, dense or "
            "cyclic network), or the conditions differ as batches or separate runs do, and then the interventional "
            "edges may include such differences (Python: regression={'shift_edges': False}; CLI: --set "
            "discover.regression.shift_edges=false keeps the regressions' edges only)")
        warnings.warn(record["warning"], CapeWarning, stacklevel=2)
    src, tgt, pv = src[direct], tgt[direct], pv[direct]
    fresh = ~np.isin(src * m + tgt, dag_p * m + dag_c)
    if not fresh.any():
        record["seconds"] = time.perf_counter() - t0
        return adjacency, record
    src, tgt, pv = src[fresh], tgt[fresh], pv[fresh]
    par = np.r_[src, dag_p]
    chi = np.r_[tgt, dag_c]
    kept = greedy_dag(par, chi, np.r_[2.0 - np.clip(pv, 0.0, 1.0), np.ones(dag_p.size)], m)
    par, chi = par[kept], chi[kept]
    n_added = int(kept[: src.size].sum())
    n_dropped = int((~kept[src.size:]).sum())
    # children whose parent set changed get step 5's weights given their new parents
    changed = np.zeros(m, dtype=bool)
    changed[tgt[kept[: src.size]]] = True
    changed[dag_c[~kept[src.size:]]] = True
    weight = np.asarray(adjacency[par, chi]).ravel() if par.size else np.zeros(0)
    redo = changed[chi]
    if redo.any():
        tab, live = parent_table(par[redo], chi[redo], m)
        _, r2, _ = partial_f(zt, tab.to(zt.device), live.to(zt.device), ridge=ridge, noise=noise,
                             keep=None if keep is None else torch.from_numpy(keep), gram=gram)
        r2 = r2.cpu().numpy()
        lv = live.numpy()
        rows = np.repeat(np.arange(m), lv.sum(1))
        w_new = sp.csr_array((np.sqrt(np.clip(r2[lv], 0.0, 1.0)), (tab.numpy()[lv], rows)), shape=(m, m))
        weight[redo] = np.asarray(w_new[par[redo], chi[redo]]).ravel()
    weight = np.maximum(weight, MIN_WEIGHT)
    out = sp.csr_array((weight, (par, chi)), shape=(m, m))
    record.update({"n_added": n_added, "n_dropped": n_dropped, "n_edges": int(out.nnz),
                   "seconds": time.perf_counter() - t0})
    return out, record
