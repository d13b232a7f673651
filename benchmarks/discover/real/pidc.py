"""PIDC, the information-theoretic GRN method BEELINE runs (Chan, Stumpf & Babtie 2017, *Cell
Systems* 5:251, doi:10.1016/j.cels.2017.08.014), written from the paper and from the definitions
of its reference implementation, NetworkInference.jl (MIT; github.com/Tchanders/NetworkInference.jl
at e5a3de3, with InformationMeasures.jl at 64810f2 and Discretizers.jl at 05913ee), for the
benchmark of ``real.py``: PIDC has no Python release and Julia does not install here.

The steps, each as NetworkInference.jl's ``PIDCNetworkInference`` with its defaults
(``discretizer="bayesian_blocks"``, ``estimator="maximum_likelihood"``):

1. **Discretization** (:func:`bayesian_blocks_edges`, :func:`discretize`): each gene's values
   are binned by Bayesian blocks for event data (Scargle et al. 2013, eq. 19 fitness, eq. 21 prior
   with p0 = 0.05), as Discretizers.jl's ``DiscretizeBayesianBlocks``: the prior's count is the
   running block end K, not the number of values (that implementation's choice, kept here so the
   bins are its bins); a gene with one value has one bin.
2. **Specific information** of each source X about each value y of each target Y,
   ``I(X; Y=y) = Σ_x p(x|y) log(p(x, y) / (p(x) p(y)))`` (DeWeese & Meister 1999), and the mutual
   information ``I(X; Y) = Σ_y p(y) I(X; Y=y)``, from maximum-likelihood frequencies.
3. **Proportional unique contribution** (PUC): with Williams & Beer's redundancy
   ``R(X, Z → Y) = Σ_y p(y) min(I(X; Y=y), I(Z; Y=y))``, the unique information of X about Y
   beside Z is ``I(X; Y) − R``, and ``u_XY = Σ_{Z ≠ X, Y} [(I(X;Y) − R(X, Z → Y)) + (I(X;Y) −
   R(Y, Z → X))] / I(X;Y)`` (Chan et al. 2017, Methods; a pair with ``I(X;Y) = 0``, at most
   :data:`MI_ZERO` bits, has PUC 0, as a term that is not finite counts 0 there). The sum over Z
   of ``min(a, s_Z)`` is read from the sorted specific informations and their cumulative sums, so
   the M³ triples cost O(M²·B·log M) (B bins per gene), not a loop over them.
4. **Context** (Chan et al. 2017, Methods): ``w_XY = F_X(u_XY) + F_Y(u_XY)``, F_X the cumulative distribution of a
   gamma fitted by maximum likelihood (location 0) to X's PUC scores with every other gene; where
   a gene's fit fails (a score of 0, all scores equal) NetworkInference.jl falls back to CLR's
   context for the pairs of that gene, ``√(max(0, z_X)² + max(0, z_Y)²)`` with ``z_X`` the
   score's standard score among X's (sample variance), and so does :func:`pidc`.

The network is undirected: the weight matrix is symmetric. ``tests/benchmarks/test_pidc.py``
checks MI, PUC and PIDC against the reference values NetworkInference.jl's own tests hold (10
genes of GeneNetWeaver's Yeast1 network, 140 samples) and the vectorized sums against the triple
loop.
"""

from __future__ import annotations

import numpy as np

__all__ = ["bayesian_blocks_edges", "discretize", "information", "puc_scores", "pidc", "context"]

#: Scargle et al. (2013)'s false-positive rate in the prior on the number of blocks (eq. 21)
P0 = 0.05
#: a mutual information at or below this (bits) is 0: rounding of independent frequencies, whose
#: PUC terms ``(I − R) / I`` would be a ratio of rounding errors
MI_ZERO = 1e-12


def bayesian_blocks_edges(values: np.ndarray) -> np.ndarray:
    """Bin edges of one gene's values by Bayesian blocks for event data, as Discretizers.jl's
    ``DiscretizeBayesianBlocks``: the sorted distinct values are the events (weighted by their
    counts), a block's fitness is ``n_k log(n_k / T_k)`` (Scargle et al. 2013, eq. 19) less the
    prior ``4 − log(73.53 · p0 · K^-0.478)`` (eq. 21, K the running block end), and the optimal
    partition is found by dynamic programming, O(n²) for n distinct values.

    Parameters
    ----------
    values
        ``(N,)`` float values of one gene, at least two distinct.

    Returns
    -------
    np.ndarray
        ``(B + 1,)`` increasing float64 edges, from the smallest value to the largest.
    """
    u, counts = np.unique(np.asarray(values, dtype=np.float64), return_counts=True)
    n = u.size
    edges = np.r_[u[0], 0.5 * (u[:-1] + u[1:]), u[-1]]
    block_length = u[-1] - edges
    count = np.zeros(n)
    best = np.zeros(n)
    last = np.zeros(n, dtype=np.int64)  # 1-based start of the last block ending at K
    for k in range(1, n + 1):
        widths = block_length[:k] - block_length[k]
        count[:k] += counts[k - 1]
        with np.errstate(divide="ignore"):  # a width that rounds to 0 gives +inf, as there
            fit = count[:k] * np.log(count[:k] / widths) - (4.0 - np.log(73.53 * P0 * k ** -0.478))
        fit[1:] += best[: k - 1]
        i = int(np.argmax(fit))
        last[k - 1] = i + 1
        best[k - 1] = fit[i]
    change_points = []
    ind = n + 1
    while True:
        change_points.append(ind)
        if ind == 1:
            break
        ind = int(last[ind - 2])
    return edges[np.asarray(change_points[::-1]) - 1]


def discretize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every gene's bin of every cell (:func:`bayesian_blocks_edges`; a value on an inner edge goes
    to the bin above it, the largest value to the last bin, as Discretizers.jl's
    ``LinearDiscretizer``).

    Parameters
    ----------
    x
        ``(N, M)`` float expression, cells × genes.

    Returns
    -------
    bins, n_bins
        ``(N, M)`` int64 bin ids from 0 and ``(M,)`` int64 bins per gene (1 for a constant gene).
    """
    x = np.asarray(x, dtype=np.float64)
    n, m = x.shape
    bins = np.zeros((n, m), dtype=np.int64)
    n_bins = np.ones(m, dtype=np.int64)
    for g in range(m):
        col = x[:, g]
        if col.min() == col.max():
            continue
        e = bayesian_blocks_edges(col)
        n_bins[g] = e.size - 1
        bins[:, g] = np.clip(np.searchsorted(e, col, side="right") - 1, 0, n_bins[g] - 1)
    return bins, n_bins


def _one_hot(bins: np.ndarray, n_bins: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(N, Σ n_bins)`` float64 indicators of every gene's bins, each gene's first column, and
    every column's count ``(Σ n_bins,)``."""
    offset = np.r_[0, np.cumsum(n_bins)[:-1]]
    n, m = bins.shape
    hot = np.zeros((n, int(n_bins.sum())))
    hot[np.repeat(np.arange(n), m), (bins + offset).ravel()] = 1.0
    return hot, offset, hot.sum(axis=0)


def information(bins: np.ndarray, n_bins: np.ndarray, target: int,
                one_hot: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every gene's mutual information with gene ``target`` and its specific information about each
    of the target's values (bits; maximum-likelihood frequencies).

    Parameters
    ----------
    bins, n_bins
        From :func:`discretize`.
    target
        The target gene's column.
    one_hot
        :func:`_one_hot` of the bins (made here when None; :func:`puc_scores` makes it once for
        every target).

    Returns
    -------
    mi, si
        ``(M,)`` float64 ``I(X; Y)`` and ``(M, B_Y)`` float64 ``I(X; Y=y)``, X every gene (the
        target's own row is its entropy and its self-information; callers leave it out).
    """
    hot, offset, col_counts = _one_hot(bins, n_bins) if one_hot is None else one_hot
    n = bins.shape[0]
    by = int(n_bins[target])
    joint = hot.T @ hot[:, offset[target] : offset[target] + by]  # (Σ bins, B_Y) counts
    c_x = col_counts[:, None]
    c_y = col_counts[None, offset[target] : offset[target] + by]
    with np.errstate(divide="ignore", invalid="ignore"):
        term = (joint / c_y) * np.log2(joint * n / (c_x * c_y))
    term = np.where(np.isfinite(term), term, 0.0)
    si = np.add.reduceat(term, offset, axis=0)  # (M, B_Y)
    mi = si @ (c_y.ravel() / n)
    return mi, si


def _sum_min(s: np.ndarray) -> np.ndarray:
    """``out[x, b] = Σ_z min(s[x, b], s[z, b])`` over every row z (x included), per column, from
    the sorted column and its cumulative sums: O(M·B·log M)."""
    m = s.shape[0]
    srt = np.sort(s, axis=0)
    cum = np.vstack([np.zeros((1, s.shape[1])), np.cumsum(srt, axis=0)])
    out = np.empty_like(s)
    for b in range(s.shape[1]):
        below = np.searchsorted(srt[:, b], s[:, b], side="left")  # rows with a smaller value
        out[:, b] = cum[below, b] + s[:, b] * (m - below)
    return out


def puc_scores(bins: np.ndarray, n_bins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The proportional unique contribution of every pair (step 3 of the module docstring).

    Parameters
    ----------
    bins, n_bins
        ``(N, M)`` int bin ids from 0 and ``(M,)`` bins per gene (:func:`discretize`).

    Returns
    -------
    puc, mi
        ``(M, M)`` float64 symmetric PUC scores (0 on the diagonal) and mutual informations (bits).
    """
    n, m = bins.shape
    one_hot = _one_hot(bins, n_bins)
    mi = np.zeros((m, m))
    half = np.zeros((m, m))  # half[x, y] = Σ_{z ≠ x, y} (I(X;Y) − R(X, Z → Y)) / I(X;Y), target y
    for y in range(m):
        mi_y, si = information(bins, n_bins, y, one_hot)
        si[y] = 0.0  # the target is not a source: min(a, 0) = 0 adds nothing
        p_y = one_hot[2][one_hot[1][y] : one_hot[1][y] + int(n_bins[y])] / n
        red = (_sum_min(si) - si) @ p_y  # Σ_{z ≠ x} R(X, Z → Y), the z = y row adding 0
        with np.errstate(divide="ignore", invalid="ignore"):
            h = ((m - 2) * mi_y - red) / mi_y
        h = np.where(np.isfinite(h) & (mi_y > MI_ZERO), np.maximum(h, 0.0), 0.0)
        h[y] = 0.0
        half[:, y] = h
        mi_y[y] = 0.0
        mi[:, y] = mi_y
    return half + half.T, mi


def context(scores: np.ndarray) -> np.ndarray:
    """PIDC's network context (step 4 of the module docstring) of a symmetric score matrix.

    Parameters
    ----------
    scores
        ``(M, M)`` float64 symmetric PUC scores (:func:`puc_scores`), M ≥ 3; the diagonal is ignored.

    Returns
    -------
    np.ndarray
        ``(M, M)`` float64 symmetric weights, 0 on the diagonal.
    """
    from scipy.special import digamma, gammainc, polygamma

    m = scores.shape[0]
    off = ~np.eye(m, dtype=bool)
    rows = scores[off].reshape(m, m - 1)  # each gene's scores with every other gene
    mean = rows.mean(axis=1)
    var = rows.var(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mlog = np.log(rows).mean(axis=1)
    s = np.log(mean) - mlog  # the gamma MLE solves log a − ψ(a) = s
    fit_ok = np.isfinite(s) & (s > 0) & (rows > 0).all(axis=1)
    s = np.where(fit_ok, s, 1.0)
    a = 0.5 / s  # Minka (2002)'s start, then Distributions.jl's gamma_mle_update (his Newton step on 1/a)
    for _ in range(1000):
        ia = 1.0 / a
        a_new = 1.0 / (ia + (-s + np.log(a) - digamma(a)) / (a * a * (ia - polygamma(1, a))))
        done = np.abs(a_new - a) <= 1e-16 * np.maximum(a, 1.0)
        a = a_new
        if done.all():
            break
    theta = mean / a
    cdf = gammainc(a[:, None], np.maximum(scores, 0.0) / theta[:, None])  # F_X(u_XY), row X
    gamma_w = cdf + cdf.T
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (scores - mean[:, None]) / np.sqrt(var)[:, None]
    z = np.where((var[:, None] > 0) & (z > 0), z, 0.0)
    clr_w = np.sqrt(z * z + (z * z).T)
    both = fit_ok[:, None] & fit_ok[None, :]
    w = np.where(both, gamma_w, clr_w)
    np.fill_diagonal(w, 0.0)
    return w


def pidc(x: np.ndarray) -> np.ndarray:
    """PIDC's undirected network of a cells × genes matrix (the steps of the module docstring).

    Parameters
    ----------
    x
        ``(N, M)`` float expression, cells × genes, M ≥ 3.

    Returns
    -------
    np.ndarray
        ``(M, M)`` float64 symmetric edge weights in [0, 2] (CLR's fallback may exceed 2), 0 on the
        diagonal; a larger weight is a more confident edge.

    Raises
    ------
    ValueError
        Fewer than 3 genes (PUC needs a third gene).
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] < 3:
        raise ValueError(f"pidc: expected a cells × genes matrix with at least 3 genes, got shape {x.shape}")
    bins, n_bins = discretize(x)
    puc, _ = puc_scores(bins, n_bins)
    return context(puc)
