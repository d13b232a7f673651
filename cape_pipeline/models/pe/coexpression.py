"""Co-expression embedding of the features: the data-derived gene vectors that stand in for
pretrained gene tokens (static-absolute PE, scGPT's co-expression start, scBERT's gene2vec)."""

from __future__ import annotations

import numpy as np

COEXPRESSION_EXACT_MAX = 2000
"""Up to this many features :func:`coexpression_embedding` eigendecomposes the M × M
correlation; above, a randomized SVD of the standardized data (no M × M matrix)."""


def coexpression_embedding(x: np.ndarray, dim: int, *, seed: int = 0) -> np.ndarray:
    """Fixed per-feature vectors from the feature–feature correlation (gene2vec stand-in).

    The top-``dim`` eigenvectors of the Pearson correlation ``C`` (M, M) of the training
    data, scaled by √λ (so ``row_i · row_j ≈ C_ij``), signs fixed so each column's largest
    entry is positive, then scaled to RMS 1 per entry (the scale of an N(0, 1) embedding).
    Missing values (NaN) are ignored pairwise via mean imputation; constant features get 0.
    Above :data:`COEXPRESSION_EXACT_MAX` features the eigenvectors come from a randomized SVD
    of the standardized ``(N, M)`` data (sklearn), O(N·M·dim) time and no M × M matrix.

    Parameters
    ----------
    x
        ``(N, M)`` float training data (log-normalized expression, β values, ...).
    dim
        Output width D; columns beyond ``min(M, N)`` are zero.
    seed
        Seeds the randomized SVD (large M only).

    Returns
    -------
    ndarray
        ``(M, dim)`` float32.
    """
    x = np.asarray(x, dtype=np.float64)
    mu = np.nanmean(x, axis=0)
    xc = np.where(np.isnan(x), 0.0, x - np.where(np.isnan(mu), 0.0, mu))
    sd = np.sqrt((xc**2).mean(axis=0))
    z = np.divide(xc, sd, out=np.zeros_like(xc), where=sd > 0)
    n, m = z.shape
    k = min(dim, m, n)
    if m <= COEXPRESSION_EXACT_MAX:
        c = (z.T @ z) / max(n, 1)
        lam, vec = np.linalg.eigh(c)
        order = np.argsort(lam)[::-1][:k]
        lam, vec = np.clip(lam[order], 0.0, None), vec[:, order]
    else:
        from sklearn.utils.extmath import randomized_svd

        _, sv, vt = randomized_svd(z / np.sqrt(max(n, 1)), n_components=k, random_state=seed)
        lam, vec = sv**2, vt.T  # eigenpairs of C = zᵀz / N
    flip = np.sign(vec[np.argmax(np.abs(vec), axis=0), np.arange(vec.shape[1])])
    vec = vec * np.where(flip == 0, 1.0, flip)
    emb = np.zeros((m, dim))
    emb[:, : vec.shape[1]] = vec * np.sqrt(lam)
    rms = np.sqrt((emb**2).mean())
    if rms > 0:
        emb /= rms
    return emb.astype(np.float32)
