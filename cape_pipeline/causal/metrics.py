"""Structure-learning accuracy: SHD, TPR, FDR, precision, recall, F1, skeleton F1, AUPRC.

Definitions follow gcastle's ``MetricsDAG`` (1.0.4): a predicted pair with both m → n and
n → m is one *undirected* edge; TP = predicted directed edge present in the truth, or an
undirected edge whose skeleton pair is in the truth; FP = predicted edge whose pair is absent
from the true skeleton; reversed = directed edge whose reverse is true;
``SHD = extra skeleton pairs + missing skeleton pairs + reversed`` (a reversed edge counts once);
``TPR = TP / #true``; ``FDR = (reversed + FP) / #predicted``; precision / recall / F1 count
directed entries (``TP_dir / #predicted entries``, ``TP_dir / #true``). Unlike gcastle 1.0.4,
an undirected predicted edge adds one, not two, to TP (gcastle's TPR can exceed 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["dag_metrics", "interventional_score"]


def _dense(x: Any) -> np.ndarray:
    from cape_pipeline.causal.graph import CausalGraph

    if isinstance(x, CausalGraph):
        x = x.adjacency
    if sp.issparse(x):
        x = x.toarray()
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"expected a square (M, M) adjacency, got shape {a.shape}")
    return a


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def dag_metrics(pred: Any, true: Any, *, scores: Any = None) -> dict[str, float]:
    """Compare a predicted graph with the true DAG.

    Parameters
    ----------
    pred
        :class:`~cape_pipeline.causal.graph.CausalGraph` or ``(M, M)`` dense/sparse matrix;
        nonzero ``[m, n]`` means m → n. Weights are used for AUPRC unless ``scores`` is given.
    true
        The true graph, same forms; nonzero = edge.
    scores
        Optional ``(M, M)`` continuous edge scores (e.g. ``|A|`` before thresholding) for AUPRC.

    Returns
    -------
    dict
        ``shd`` (int), ``tpr``, ``fdr``, ``precision``, ``recall``, ``f1``, ``skeleton_f1``,
        ``auprc`` (sklearn ``average_precision_score`` of ``|score|`` over off-diagonal
        entries vs. directed truth; NaN if the truth has no edge), ``nnz`` (#predicted
        entries), ``n_true``. Diagonals are ignored.

    Raises
    ------
    ValueError
        On non-square or mismatched shapes.
    """
    from sklearn.metrics import average_precision_score

    w = _dense(pred)
    t = _dense(true) != 0
    if w.shape != t.shape:
        raise ValueError(f"pred shape {w.shape} != true shape {t.shape}")
    m = w.shape[0]
    off = ~np.eye(m, dtype=bool)
    b = (w != 0) & off
    t = t & off
    both = b & b.T
    directed = b & ~b.T
    und_upper = np.triu(both)
    t_skel = t | t.T
    tp_dir = directed & t
    tp_und = und_upper & t_skel
    n_tp = int(tp_dir.sum() + tp_und.sum())
    fp = int((directed & ~t_skel).sum() + (und_upper & ~t_skel).sum())
    reverse = int((directed & ~t & t.T).sum())
    n_pred = int(directed.sum() + und_upper.sum())
    n_true = int(t.sum())
    p_skel = np.triu(b | b.T)
    tr_skel = np.triu(t_skel)
    extra = int((p_skel & ~tr_skel).sum())
    missing = int((tr_skel & ~p_skel).sum())
    shd = extra + missing + reverse
    tpr = n_tp / max(n_true, 1)
    fdr = (reverse + fp) / max(n_pred, 1)
    # directed-entry precision/recall (gcastle _cal_precision_recall)
    n_entries = int(b.sum())
    tp_entries = int((b & t).sum())
    precision = tp_entries / n_entries if n_entries else 0.0
    recall = tp_entries / n_true if n_true else 0.0
    sk_tp = int((p_skel & tr_skel).sum())
    sk_p = sk_tp / max(int(p_skel.sum()), 1) if p_skel.any() else 0.0
    sk_r = sk_tp / max(int(tr_skel.sum()), 1)
    s = np.abs(_dense(scores) if scores is not None else w)
    auprc = float(average_precision_score(t[off], s[off])) if n_true else float("nan")
    return {
        "shd": int(shd),
        "tpr": float(tpr),
        "fdr": float(fdr),
        "precision": float(precision),
        "recall": float(recall),
        "f1": float(_f1(precision, recall)),
        "skeleton_f1": float(_f1(sk_p, sk_r)),
        "auprc": auprc,
        "nnz": n_pred,
        "n_true": n_true,
    }


def interventional_score(
    adata: Any,
    adjacency: Any,
    *,
    column: str = "condition",
    alpha: float = 0.05,
    n_random: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Score a graph against perturbations, without a true graph (CausalBench's statistical
    evaluation, Chevalley et al. 2023, Sec. 4.2).

    For each predicted edge A → B whose parent A is the single target of some cells, B's
    expression in the A-perturbed cells is compared with the control cells: a two-sided
    Mann–Whitney U test (scipy; the edge *shifts* when p < ``alpha``) and the 1-Wasserstein
    distance between the two samples. A true edge should shift more often than a random pair;
    the same statistics for ``n_random`` random pairs (A among the perturbed features, B any
    other feature; seeded) are returned beside them. Run it on cells held out from the fit.
    The cells that Step I leaves out (no assigned perturbation, or a target that is not a
    feature) are neither controls nor perturbed cells here.

    Parameters
    ----------
    adata
        AnnData with ``X`` ``(N, M)`` expression (log-normalized) and the perturbation labels
        in ``obs[column]`` (:func:`~cape_pipeline.causal.interventions.intervention_targets`).
    adjacency
        ``(M, M)`` predicted graph (dense, sparse or :class:`CausalGraph`), ``[a, b] ≠ 0`` ⇔ a → b,
        in ``adata.var_names`` order.
    column, alpha, n_random, seed
        Label column, test level, number of random pairs and their seed.

    Returns
    -------
    dict
        ``n_edges``, ``n_testable`` (edges whose parent is a single target), ``share_shifted``,
        ``mean_wasserstein``, ``random_share_shifted``, ``random_mean_wasserstein``, ``alpha``,
        ``column``, ``n_control``; the shares are NaN when nothing is testable.

    Raises
    ------
    CapeDataError
        No such column, no control cells, or no label whose targets are all features (as
        :func:`intervention_targets`).
    ValueError
        ``adjacency`` is not ``(M, M)``.
    """
    from scipy.stats import mannwhitneyu, wasserstein_distance

    from cape_pipeline.causal.interventions import intervention_targets

    m = adata.n_vars
    a = _dense(adjacency)
    if a.shape != (m, m):
        raise ValueError(f"adjacency: expected ({m}, {m}) for the data's features, got {a.shape}")
    iv = intervention_targets(adata.obs, adata.var_names, column)
    control = np.flatnonzero(iv.control_cells)  # never a cell without an assigned perturbation
    single, single_target = iv.single_targets
    x = adata.X
    x = x.toarray() if sp.issparse(x) else np.asarray(x)
    x = x.astype(np.float64)
    x_ctrl = x[control]  # the control cells, gathered once for every parent

    def score(par: np.ndarray, chi: np.ndarray) -> tuple[int, float, float]:
        shifted, dists = [], []
        for p in np.unique(par):  # one test per perturbed parent, vectorized over its children
            cells = single[single_target == p]
            if cells.size == 0:
                continue
            kids = chi[par == p]
            x_p = x[cells]
            pv = np.atleast_1d(mannwhitneyu(x_p[:, kids], x_ctrl[:, kids], axis=0).pvalue)
            shifted.append(np.nan_to_num(pv, nan=1.0) < alpha)
            dists.append([wasserstein_distance(x_p[:, k], x_ctrl[:, k]) for k in kids])
        if not shifted:
            return 0, float("nan"), float("nan")
        s, d = np.concatenate(shifted), np.concatenate(dists)
        return int(s.size), float(s.mean()), float(d.mean())

    par, chi = np.nonzero(a)
    n_test, share, dist = score(par, chi)
    rng = np.random.default_rng(seed)
    perturbed = np.unique(single_target)
    rp = rng.choice(perturbed, n_random) if perturbed.size else np.zeros(0, dtype=np.int64)
    rc = (rp + rng.integers(1, m, rp.size)) % m  # any other feature
    _, r_share, r_dist = score(rp, rc)
    return {
        "n_edges": int(par.size), "n_testable": n_test, "share_shifted": share, "mean_wasserstein": dist,
        "random_share_shifted": r_share, "random_mean_wasserstein": r_dist, "alpha": float(alpha),
        "column": column, "n_control": int(control.size),
    }
