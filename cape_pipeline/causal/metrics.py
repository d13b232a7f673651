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

__all__ = ["dag_metrics"]


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
