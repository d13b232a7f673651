"""Cell-level covariates of Step I: cell states and library size, regressed out of every feature.

On single-cell counts the library size makes every gene co-vary with every other; it is an
exogenous input of every feature's model by default, which for a linear model is the same as
regressing it out of every feature first (Frisch–Waugh–Lovell). Cell states (k-means clusters of
the leading principal components, scikit-learn) are the other covariate, on request: they keep
the graph to covariation *within* states, which guards against hidden programs shared by many
genes but also removes a regulator's variation between states, the strongest evidence of its
edges where regulators drive the states. Measured in ``benchmarks/discover/counts/RESULTS.md``.

On counts, :func:`count_reliability` also measures how much of each gene's within-state
variance is counting noise, for the errors-in-variables regressions of the regression algorithm.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import scipy.sparse as sp

from cape_pipeline._keys import LIBRARY_SIZE as LIBRARY_SIZE_KEY
from cape_pipeline._utils import column_mean_sd, row_blocks
from cape_pipeline.errors import CapeConfigError, CapeDataError

__all__ = [
    "apply_covariates", "cell_context", "cell_state_labels", "count_reliability", "default_n_states", "residualize",
    "unit_sd", "unit_sd_rows", "unit_sd_torch", "wants_thinning",
]

log = logging.getLogger(__name__)

#: floor of a gene's reliability (its noise share is at most 95 %)
RELIABILITY_FLOOR = 0.05
#: :func:`count_reliability` thins at most this many cells (a random subset; per-gene sd of the
#: split-half correlation ≈ 1/√5000 ≈ 0.014)
RELIABILITY_MAX_CELLS = 5000


def default_n_states(n_obs: int) -> int:
    """Cell states used when ``n_states`` is None: ``min(30, max(2, N // 100))``.

    30 states at 3,000 cells and more. On simulated counts the ranking of true pairs hardly
    depends on how many more k-means states there are than cell types
    (``benchmarks/discover/counts/RESULTS.md``), so the number only needs to exceed the
    number of distinct states; 100 cells per state keep each state's means stable.
    """
    return int(min(30, max(2, int(n_obs) // 100)))


def cell_state_labels(x: np.ndarray, n_states: int, *, n_pcs: int = 30, seed: int = 0) -> np.ndarray:
    """Cell states as k-means clusters of the leading principal components (scikit-learn).

    Parameters
    ----------
    x
        ``(N, M)`` float matrix, standardized columns (the input of Step I).
    n_states
        Number of k-means clusters (≥ 1; 1 gives one state, i.e. only centring).
    n_pcs
        Principal components the clusters are found in (capped at ``min(N, M) − 1``).
    seed
        ``random_state`` of the randomized PCA and of k-means.

    Returns
    -------
    np.ndarray
        ``(N,)`` int64 labels in ``[0, n_states)``.
    """
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA

    n, m = x.shape
    k = int(min(max(1, n_states), n))
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    n_comp = int(max(1, min(n_pcs, n - 1, m - 1)))
    pcs = PCA(n_comp, svd_solver="randomized", random_state=seed).fit_transform(x)
    labels = KMeans(k, n_init=3, random_state=seed).fit_predict(pcs)
    return labels.astype(np.int64)


def residualize(
    x: np.ndarray, labels: np.ndarray | None, log_library: np.ndarray | None = None, *, overwrite: bool = False
) -> np.ndarray:
    """Regress the cell-state means and the log library size out of every feature; standardize.

    ``z = x − mean_state(x) − β · (ℓ − mean_state(ℓ))`` with ``β`` the pooled within-state slope
    of each feature on the log library size ``ℓ``; each column of ``z`` is then scaled to sd 1
    (a feature that the covariates explain fully becomes 0).

    Parameters
    ----------
    x
        ``(N, M)`` float64 matrix.
    labels
        ``(N,)`` int state labels, or None (one state).
    log_library
        ``(N,)`` log library sizes, or None.
    overwrite
        Write the result into ``x`` (a C-contiguous float64 array the caller no longer needs),
        so that no second ``(N, M)`` array is held; the values are the same either way.

    Returns
    -------
    np.ndarray
        ``(N, M)`` float64, columns mean 0 and sd 1 (or all 0); ``x`` itself with ``overwrite``.
    """
    n = x.shape[0]
    labels = np.zeros(n, dtype=np.int64) if labels is None else np.asarray(labels, dtype=np.int64)
    k = int(labels.max(initial=0)) + 1
    onehot = sp.csr_matrix((np.ones(n), (np.arange(n), labels)), shape=(n, k))
    counts = np.maximum(np.asarray(onehot.sum(0)).ravel(), 1.0)
    means = np.asarray(onehot.T @ x) / counts[:, None]  # (k, M)
    z = x if overwrite else x.copy()
    rows = row_blocks(*z.shape)
    for s in rows:  # z − means[labels], a block of rows at a time
        z[s] -= means[labels[s]]
    if log_library is not None:
        ell = np.asarray(log_library, dtype=np.float64)
        ell = ell - (np.asarray(onehot.T @ ell).ravel() / counts)[labels]
        ss = float(ell @ ell)
        if ss > 0:
            beta = (ell @ z) / ss
            for s in rows:  # z − ℓ βᵀ
                z[s] -= np.outer(ell[s], beta)
    return unit_sd(z, overwrite=True)


def unit_sd(z: np.ndarray, *, overwrite: bool = False) -> np.ndarray:
    """``(N, M)`` float64 centred columns divided by their sd; a column with sd ≤ 1e-12 becomes 0
    (the scaling of :func:`residualize` and of the regression algorithm's cross-fitting halves).
    With ``overwrite``, in ``z`` itself (the same values, no second ``(N, M)`` array kept)."""
    sd = column_mean_sd(z)[1]
    ok = sd > 1e-12
    if not overwrite:
        return np.divide(z, sd, out=np.zeros_like(z), where=ok)
    np.divide(z, sd, out=z, where=ok)
    z[:, ~ok] = 0.0
    return z


def unit_sd_rows(z: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """:func:`unit_sd` of ``z[rows] − mean(z[rows])``: ``(N, M)`` float64 and ``(R,)`` int in, a new
    ``(R, M)`` float64 array out, centred and scaled in place (no other array of its size)."""
    h = z[rows]
    h -= h.mean(axis=0)
    return unit_sd(h, overwrite=True)


def unit_sd_torch(h: Any) -> Any:
    """:func:`unit_sd` of ``h − mean(h)`` in torch, on ``h``'s device: ``(N, M)`` float tensor in,
    a new ``(N, M)`` tensor of the same dtype out (a column with sd ≤ 1e-12 becomes 0). The
    regression algorithm's cross-fitting halves on a GPU."""
    import torch

    h = h - h.mean(0)
    sd = h.std(0, unbiased=False)
    return torch.where(sd > 1e-12, h / sd.clamp_min(1e-300), torch.zeros((), dtype=h.dtype, device=h.device))


def cell_context(data: Any) -> tuple[bool, np.ndarray | None]:
    """Is ``data`` single-cell expression, and its cells' library sizes if known.

    Single-cell: an AnnData whose ingest or preprocess recorded modality ``"scrna"``
    (``uns["cape_ingest"]`` / ``uns["cape_preprocess"]``), or that carries
    ``obs["cape_library_size"]``. The library sizes are that column (total counts per cell
    before normalization, written by :func:`cape_pipeline.pp.preprocess` when the input held
    counts). Arrays and DataFrames are not single-cell data here.

    Returns
    -------
    single_cell, library_size
        bool, and ``(N,)`` float64 or None.

    Raises
    ------
    CapeDataError
        ``obs["cape_library_size"]`` has a value that is not finite and > 0 (names the column).
    """
    if not (hasattr(data, "obs") and hasattr(data, "uns")):
        return False, None
    mods = {
        (data.uns.get(key) or {}).get("modality")
        for key in ("cape_ingest", "cape_preprocess")
        if isinstance(data.uns.get(key), dict)
    }
    library = None
    if LIBRARY_SIZE_KEY in data.obs.columns:
        library = np.asarray(data.obs[LIBRARY_SIZE_KEY], dtype=np.float64)
        if not (np.isfinite(library).all() and (library > 0).all()):
            raise CapeDataError(
                f"obs[{LIBRARY_SIZE_KEY!r}]: expected each cell's total counts (finite, > 0); "
                f"{int((~np.isfinite(library) | (library <= 0)).sum())} cells are not"
            )
    return ("scrna" in mods) or library is not None, library


def apply_covariates(
    x_std: np.ndarray, cfg: Any, *, single_cell: bool, library: np.ndarray | None
) -> tuple[np.ndarray, dict[str, Any], np.ndarray | None]:
    """Regress the cell-level covariates out of the standardized matrix (``cfg.covariates``).

    Parameters
    ----------
    x_std
        ``(N, M)`` float64 standardized matrix.
    cfg
        The run's options (``covariates``, ``n_states``, ``seed``).
    single_cell, library
        From :func:`cell_context`.


    ``"auto"``: the log library size for single-cell data where preprocess recorded it, none
    otherwise (cell states only when asked for: :data:`~cape_pipeline.causal.algorithms.COVARIATES`).
    Returns the adjusted matrix (written into ``x_std``, which the caller hands over; the input
    itself when there are none), the params to record
    (``covariates_used``, ``n_states``) and the ``(N,)`` state labels (None without states).

    Raises
    ------
    CapeConfigError
        The library size is asked for but the data carry none (``obs["cape_library_size"]``).
    """
    want = cfg.covariates
    if want == "auto":
        want = "library" if single_cell and library is not None else "none"
    if "library" in want and library is None:
        raise CapeConfigError(
            f"covariates={cfg.covariates!r}: the data have no library sizes (obs[{LIBRARY_SIZE_KEY!r}], "
            "written by preprocess when the input holds counts); use covariates='states' or 'none'"
        )
    if want == "none":
        return x_std, {"covariates_used": "none"}, None
    n = x_std.shape[0]
    n_states = default_n_states(n) if cfg.n_states is None else int(cfg.n_states)
    labels = cell_state_labels(x_std, n_states, seed=int(cfg.seed)) if "states" in want and n_states > 1 else None
    log_lib = np.log(library) if "library" in want else None
    out = {"covariates_used": want, "n_states": int(n_states) if labels is not None else 1}
    return residualize(x_std, labels, log_lib, overwrite=True), out, labels


def wants_thinning(measurement_error: str) -> bool:
    """Whether the regression algorithm corrects for counting noise (``measurement_error``).

    ``"auto"`` and ``"thinning"``: yes, at every number of cells (the counts benchmark,
    ``benchmarks/discover/counts/RESULTS.md``: F1 rises with it at every size measured); ``"none"``:
    no. Either way the correction needs counts (:func:`count_reliability` returns None on
    other data).
    """
    return measurement_error != "none"


def count_reliability(
    data: Any,
    labels: np.ndarray | None,
    library: np.ndarray,
    *,
    seed: int = 0,
    max_cells: int = RELIABILITY_MAX_CELLS,
) -> np.ndarray | None:
    """Each gene's reliability on counts: the share of its within-state variance that is not
    counting noise, from binomial thinning (split-half).

    The counts are recovered from the preprocessed ``X`` (``log1p`` of ``normalize_total``:
    ``counts = expm1(X) · library / target_sum``) on at most ``max_cells`` random cells and
    split by binomial thinning, ``X¹ ~ Binomial(counts, ½)``, ``X² = counts − X¹``: under
    Poisson sampling the two halves are independent draws given the cell's expression (count
    splitting, Neufeld et al. 2024, *Biostatistics* 25:270; data thinning, Neufeld, Dharamshi,
    Gao & Witten 2024, *JMLR* 25:57). Each half is log-normalized, the same covariates are
    regressed out (:func:`residualize`), and the correlation ``ρ_g`` of a gene's two halves is
    the reliability of a half; the Spearman–Brown formula ``2ρ / (1 + ρ)`` gives that of the
    whole count. Overdispersion beyond Poisson counts as expression, not noise.

    Parameters
    ----------
    data
        The preprocessed AnnData (``X`` log-normalized, ``uns["cape_preprocess"]`` recording
        ``input_state == "counts"`` and ``config["target_sum"]``).
    labels
        ``(N,)`` int cell-state labels of the covariates, or None.
    library
        ``(N,)`` float64 library sizes (``obs["cape_library_size"]``).
    seed
        Seeds the cell subset and the thinning.
    max_cells
        Cells thinned (a random subset when N is larger).

    Returns
    -------
    np.ndarray or None
        ``(M,)`` float64 in [:data:`RELIABILITY_FLOOR`, 1]; None (logged) when the data do not
        hold preprocessed counts: no record of them, or ``X`` does not invert to whole numbers
        (more than 1 % of the entries off by more than 0.05).
    """
    rec = getattr(data, "uns", {}).get("cape_preprocess")
    target = (rec or {}).get("config", {}).get("target_sum") if isinstance(rec, dict) else None
    if not isinstance(rec, dict) or rec.get("input_state") != "counts" or not target:
        log.info("measurement_error: the data carry no record of preprocessed counts; no correction")
        return None
    n = data.n_obs
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(n, max_cells, replace=False)) if n > max_cells else np.arange(n)
    x = data.X[rows]
    x = x.toarray() if sp.issparse(x) else np.asarray(x)
    lib = np.asarray(library, dtype=np.float64)[rows]
    raw = np.expm1(x.astype(np.float64)) * (lib / float(target))[:, None]
    counts = np.rint(raw)
    off = np.abs(raw - counts) > 0.05
    if off.mean() > 0.01:
        log.info("measurement_error: X does not invert to whole counts (%.1f %% of entries); no correction",
                 100 * off.mean())
        return None
    half = rng.binomial(counts.astype(np.int64), 0.5).astype(np.float64)
    scale = (2.0 * float(target) / lib)[:, None]
    lab = None if labels is None else np.asarray(labels)[rows]
    log_lib = np.log(lib)
    z1 = residualize(np.log1p(half * scale), lab, log_lib, overwrite=True)
    z2 = residualize(np.log1p((counts - half) * scale), lab, log_lib, overwrite=True)
    rho = np.clip((z1 * z2).mean(axis=0), 0.0, 1.0)
    return np.clip(2.0 * rho / (1.0 + rho), RELIABILITY_FLOOR, 1.0)
