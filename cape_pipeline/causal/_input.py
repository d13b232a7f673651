"""Input checks of Step I: :func:`prepare_matrix` (AnnData, DataFrame or array → standardized matrix)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from cape_pipeline._utils import column_mean_sd, row_blocks
from cape_pipeline.errors import CapeDataError

__all__ = ["prepare_matrix"]

logger = logging.getLogger(__name__)


def _names_list(names: Any, limit: int = 5) -> str:
    names = [str(n) for n in names]
    more = f" (+{len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(repr(n) for n in names[:limit]) + more


def _dense_float64(x: sp.spmatrix | sp.sparray) -> np.ndarray:
    """A numeric sparse ``(N, M)`` matrix as a new dense float64 array, filled a row block at a
    time: the values are those of ``x.astype(float64).toarray()`` without its float64 sparse copy."""
    n, m = x.shape
    csr = x.tocsr() if x.format != "csr" else x
    out = np.empty((n, m), dtype=np.float64)
    for s in row_blocks(n, m):
        out[s] = csr[s].toarray()
    return out


def prepare_matrix(
    data: Any, feature_names: Any = None, *, missing: str = "error"
) -> tuple[np.ndarray, np.ndarray]:
    """Validate input data and standardize each feature (mean 0, population sd 1).

    Parameters
    ----------
    data
        AnnData (``.X`` dense or scipy.sparse, ``.var_names``), pandas DataFrame (columns =
        features) or ``(N, M)`` array-like.
    feature_names
        Names for an array input (default ``x0 … x{M-1}``); overrides AnnData/DataFrame names
        when given.
    missing
        ``"error"``: NaN is refused; ``"mean"``: each feature's NaN becomes its observed mean
        (``DiscoverConfig.missing``). ±inf is refused either way.

    Returns
    -------
    x_std, names
        ``(N, M)`` float64 standardized matrix and ``(M,)`` object array of names.

    Raises
    ------
    CapeDataError
        Wrong dimensionality, N < 2, M < 2, non-numeric columns, NaN/inf (columns named),
        all-missing or constant features (named), or a name list of the wrong length.
    """
    names: Any = None
    source: Any = data  # the caller's array: never written to
    if hasattr(data, "X") and hasattr(data, "var_names"):
        x = source = data.X
        names = np.asarray(data.var_names, dtype=object)
        if sp.issparse(x):  # densified once, as float64, a row block at a time (no float64 sparse copy)
            x = _dense_float64(x) if x.dtype.kind in "biuf" else x.toarray()
        x = np.asarray(x)
    elif isinstance(data, pd.DataFrame):
        bad = [c for c in data.columns if not pd.api.types.is_numeric_dtype(data[c])]
        if bad:
            raise CapeDataError(f"data: non-numeric columns {_names_list(bad)}; expected numbers")
        names = np.asarray(data.columns.astype(str), dtype=object)
        x = data.to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
    else:
        if sp.issparse(data):
            data = _dense_float64(data) if data.dtype.kind in "biuf" else data.toarray()
        x = np.asarray(data)
    if x.dtype.kind not in "biuf":
        raise CapeDataError(f"data: expected a numeric matrix, got dtype {x.dtype}")
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise CapeDataError(f"data: expected a 2-D (N observations, M features) matrix, got shape {x.shape}")
    n, m = x.shape
    if feature_names is not None:
        names = np.asarray([str(f) for f in feature_names], dtype=object)
    if names is None:
        names = np.asarray([f"x{i}" for i in range(m)], dtype=object)
    if names.shape != (m,):
        raise CapeDataError(f"feature_names: expected {m} names (one per column), got {names.size}")
    if n < 2:
        raise CapeDataError(f"data: expected at least 2 observations (rows), got {n}")
    if m < 2:
        raise CapeDataError(f"data: expected at least 2 features (columns), got {m}")
    all_finite = all(bool(np.isfinite(x[s]).all()) for s in row_blocks(n, m))
    if not all_finite:
        finite = np.isfinite(x)
        all_missing = ~finite.any(axis=0) & np.isnan(x).all(axis=0)
        if all_missing.any():
            raise CapeDataError(f"data: features {_names_list(names[all_missing])} are all missing (NaN)")
        bad = ~finite.all(axis=0)
        if missing == "mean" and not np.isinf(x).any():
            col_mean = np.nanmean(x, axis=0)
            x = np.where(np.isnan(x), col_mean, x)
            logger.info("discover: %d missing values in %d features replaced by the feature means", int((~finite).sum()), int(bad.sum()))
        else:
            raise CapeDataError(
                f"data: features {_names_list(names[bad])} contain NaN or inf; impute or drop them first "
                "(NaN only: missing='mean')"
            )
    mean, sd = column_mean_sd(x)
    const = ~(sd > 1e-12 * np.maximum(1.0, np.abs(mean)))
    if const.any():
        raise CapeDataError(f"data: features {_names_list(names[const])} are constant; drop them first")
    if isinstance(source, np.ndarray) and np.may_share_memory(x, source):
        x = x.copy()
    # standardized in place: the same values as (x - mean) / sd, without two more (N, M) arrays
    x -= mean
    x /= sd
    return x, names

