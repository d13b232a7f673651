"""Task metrics of paper 000 Supp. E (sklearn implementations).

* annotation: accuracy and macro-F1 (E.2);
* clustering: ARI, NMI and ASW of k-means clusters of cell embeddings (E.3);
* perturbation: MSE on the top-20 differentially expressed genes (GEARS protocol, E.1);
* age: median absolute error in years (E.4).
"""

from __future__ import annotations

import numpy as np
from sklearn import metrics as skm

__all__ = [
    "classification_metrics",
    "clustering_metrics",
    "top_de_genes",
    "mse_top_de",
    "regression_metrics",
]


def classification_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """Accuracy and macro-F1 of integer labels ``(n,)`` (paper 000 Supp. E.2)."""
    return {
        "accuracy": float(skm.accuracy_score(y_true, y_pred)),
        "macro_f1": float(skm.f1_score(y_true, y_pred, average="macro", zero_division=0)),
    }


def clustering_metrics(
    embeddings: np.ndarray, labels: np.ndarray, clusters: np.ndarray, *, sample_size: int | None = None, seed: int = 0
) -> dict[str, float]:
    """ARI and NMI of ``clusters`` against ``labels``, and ASW (paper 000 Supp. E.3).

    ``asw`` is the silhouette width of the embeddings ``(n, D)`` with respect to the true
    labels, rescaled to [0, 1] as ``(s + 1) / 2`` (the scIB "cell-type ASW");
    ``asw_clusters`` is the raw silhouette of the k-means clusters (in [-1, 1]).
    """
    out = {
        "ari": float(skm.adjusted_rand_score(labels, clusters)),
        "nmi": float(skm.normalized_mutual_info_score(labels, clusters)),
    }
    ok_l = 1 < len(np.unique(labels)) < len(labels)
    ok_c = 1 < len(np.unique(clusters)) < len(clusters)
    s = skm.silhouette_score(embeddings, labels, sample_size=sample_size, random_state=seed) if ok_l else np.nan
    out["asw"] = float((s + 1.0) / 2.0)
    out["asw_clusters"] = float(
        skm.silhouette_score(embeddings, clusters, sample_size=sample_size, random_state=seed) if ok_c else np.nan
    )
    return out


def top_de_genes(mean_perturbed: np.ndarray, mean_ctrl: np.ndarray, n_top: int = 20) -> np.ndarray:
    """Indices of the ``n_top`` genes with the largest |mean change| (descending).

    Parameters
    ----------
    mean_perturbed, mean_ctrl
        ``(M,)`` mean expression of the perturbed and control cells.
    """
    delta = np.abs(np.asarray(mean_perturbed) - np.asarray(mean_ctrl))
    return np.argsort(-delta, kind="stable")[: min(n_top, delta.size)]


def mse_top_de(pred: np.ndarray, truth: np.ndarray, de_idx: np.ndarray) -> float:
    """MSE between predicted and true mean post-perturbation expression on the DE genes."""
    return float(np.mean((np.asarray(pred)[de_idx] - np.asarray(truth)[de_idx]) ** 2))


def regression_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """Median absolute error (paper 000 Supp. E.4), MAE and Pearson r of ``(n,)`` arrays."""
    y_true, y_pred = np.asarray(y_true, float), np.asarray(y_pred, float)
    r = np.corrcoef(y_true, y_pred)[0, 1] if y_true.size > 1 and y_pred.std() > 0 else np.nan
    return {
        "medae": float(skm.median_absolute_error(y_true, y_pred)),
        "mae": float(skm.mean_absolute_error(y_true, y_pred)),
        "pearson_r": float(r),
    }
