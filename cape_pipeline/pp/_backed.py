"""Out-of-core scRNA preprocessing for AnnData opened in backed mode (files larger than memory).

The same steps as the in-memory path of :func:`cape_pipeline.pp.preprocess` — ``filter_cells``,
``filter_genes``, ``normalize_total``, ``log1p``, top-n ``seurat``-flavor highly variable genes —
computed in passes over row chunks of the on-disk matrix, so memory holds one chunk plus the
final ``N × n_top`` result. Per-gene statistics are accumulated in float64.

Highly variable genes (``seurat`` flavor, Satija et al. 2015, as documented by scanpy): on the
normalized, de-logged values ``y = expm1(x)`` take each gene's mean μ and unbiased variance σ²,
dispersion ``log(σ²/μ)``, mean ``log1p(μ)``; cut the means into 20 equal-width bins and z-score the
dispersions within each bin (a bin holding a single gene gives it 1); keep the genes whose
normalized dispersion is at least the n-th highest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from cape_pipeline.errors import CapeDataError

CHUNK_ROWS = 2048


def _chunks(x: Any, rows: np.ndarray | None = None) -> Iterator[tuple[np.ndarray, Any]]:
    """Yield ``(row_indices, block)`` over chunks of :data:`CHUNK_ROWS` rows (only ``rows``
    where given); ``block`` is float64 CSR or ndarray."""
    n = x.shape[0]
    chunk = CHUNK_ROWS
    for start in range(0, n, chunk):
        idx = np.arange(start, min(start + chunk, n))
        if rows is not None:
            idx = idx[rows[idx]]
            if idx.size == 0:
                continue
            block = x[start : start + chunk][rows[start : start + chunk]]
        else:
            block = x[start : start + chunk]
        if sp.issparse(block):
            block = sp.csr_matrix(block, dtype=np.float64)
        else:
            block = np.asarray(block, dtype=np.float64)
        yield idx, block


def _nnz_rows(block: Any) -> np.ndarray:
    return np.diff(block.indptr) if sp.issparse(block) else (block != 0).sum(axis=1)


def _nnz_cols(block: Any, m: int) -> np.ndarray:
    if sp.issparse(block):
        return np.bincount(block.indices[block.data != 0], minlength=m)
    return (block != 0).sum(axis=0)


def _transform(block: Any, genes: np.ndarray, scale: np.ndarray | None, log: bool) -> Any:
    """Keep ``genes`` columns, multiply rows by ``scale`` and apply log1p when asked."""
    b = block[:, genes]
    if scale is not None:
        b = sp.csr_matrix(b.multiply(scale[:, None])) if sp.issparse(b) else b * scale[:, None]
    if log:
        if sp.issparse(b):
            b = b.copy()
            b.data = np.log1p(b.data)
        else:
            b = np.log1p(b)
    return b


def seurat_hvg(mean: np.ndarray, var: np.ndarray, n_top: int, n_bins: int = 20) -> np.ndarray:
    """Boolean mask of the top-``n_top`` genes by ``seurat``-flavor normalized dispersion.

    Parameters
    ----------
    mean, var
        ``(M,)`` float64 per-gene mean and unbiased variance of the normalized, de-logged values.
    n_top
        Number of genes to keep (ties at the cut-off are all kept).
    n_bins
        Number of equal-width bins of ``log1p(mean)``.
    """
    mean = mean.copy()
    mean[mean == 0] = 1e-12
    disp = var / mean
    disp[disp == 0] = np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        disp = np.log(disp)
    df = pd.DataFrame({"mean": np.log1p(mean), "disp": disp})
    df["bin"] = pd.cut(df["mean"], bins=n_bins)
    stats = df.groupby("bin", observed=True)["disp"].agg(avg="mean", dev="std")
    single = stats["dev"].isnull()
    stats.loc[single, "dev"] = stats.loc[single, "avg"]
    stats.loc[single, "avg"] = 0.0
    per_gene = stats.loc[df["bin"]]
    norm = (df["disp"].to_numpy() - per_gene["avg"].to_numpy()) / per_gene["dev"].to_numpy()
    norm = np.nan_to_num(norm, nan=-np.inf)
    n_top = min(n_top, norm.size)
    cutoff = np.sort(norm)[::-1][n_top - 1]
    return norm >= cutoff


def preprocess_backed_scrna(
    adata: ad.AnnData,
    *,
    state: str,
    min_genes: int,
    min_cells: int,
    target_sum: float,
    n_top: int,
    where: str,
) -> tuple[ad.AnnData, list[str]]:
    """Preprocess a backed scRNA AnnData chunk by chunk (see the module docstring).

    Parameters
    ----------
    adata
        AnnData opened with ``backed="r"``; ``X`` (N, M) counts, normalized or log-normalized.
    state
        From :func:`cape_pipeline.pp.detect_input_state` (``"scaled"`` is refused).
    min_genes, min_cells, target_sum, n_top
        As in :class:`cape_pipeline.pp.PreprocessConfig`.
    where
        Prefix for error messages.

    Returns
    -------
    (AnnData, list of str)
        The in-memory ``(N', n_top)`` result (float32; CSR when the file is sparse) and the
        steps applied.

    Raises
    ------
    CapeDataError
        Scaled input, or fewer than 2 cells / no genes left after QC.
    """
    if state == "scaled":
        raise CapeDataError(
            f"{where}: backed file holds scaled values (negatives); pass counts or log-normalized data"
        )
    x = adata.X
    n, m = x.shape
    steps: list[str] = [f"backed: streamed in chunks of {CHUNK_ROWS} rows"]
    # pass 1: detected genes per cell
    n_genes = np.zeros(n, dtype=np.int64)
    for idx, block in _chunks(x):
        n_genes[idx] = _nnz_rows(block)
    cells = n_genes >= min_genes if min_genes > 0 else np.ones(n, dtype=bool)
    if min_genes > 0:
        steps.append(f"filter_cells(min_genes={min_genes})")
    # pass 2: detected cells per gene (over kept cells)
    n_cells = np.zeros(m, dtype=np.int64)
    for _, block in _chunks(x, cells):
        n_cells += _nnz_cols(block, m)
    genes = np.flatnonzero(n_cells >= min_cells) if min_cells > 0 else np.arange(m)
    if min_cells > 0:
        steps.append(f"filter_genes(min_cells={min_cells})")
    if cells.sum() < 2 or genes.size < 1:
        raise CapeDataError(
            f"{where}: {int(cells.sum())} cells x {genes.size} genes left after QC "
            f"(min_genes={min_genes}, min_cells={min_cells}); lower these thresholds"
        )
    # pass 3: library sizes over kept genes
    scale = None
    if state == "counts":
        scale = np.zeros(n)
        for idx, block in _chunks(x, cells):
            lib = np.asarray(block[:, genes].sum(axis=1)).ravel()
            lib[lib == 0] = 1.0
            scale[idx] = target_sum / lib
        steps += [f"normalize_total(target_sum={target_sum:g})", "log1p"]
    elif state == "normalized":
        steps.append("log1p (input already normalized)")
    else:
        steps.append(f"no normalization (input is {state})")
    log = state in ("counts", "normalized")
    # pass 4: per-gene mean/variance of expm1(log-normalized values)
    keep = genes
    if n_top < genes.size:
        s1 = np.zeros(genes.size)
        s2 = np.zeros(genes.size)
        for idx, block in _chunks(x, cells):
            b = _transform(block, genes, scale[idx] if scale is not None else None, log)
            y = b.copy() if sp.issparse(b) else np.expm1(b)
            if sp.issparse(y):
                y.data = np.expm1(y.data)
                s1 += np.asarray(y.sum(axis=0)).ravel()
                s2 += np.asarray(y.multiply(y).sum(axis=0)).ravel()
            else:
                s1 += y.sum(axis=0)
                s2 += (y * y).sum(axis=0)
        k = int(cells.sum())
        mean = s1 / k
        var = (s2 / k - mean**2) * (k / (k - 1))
        keep = genes[seurat_hvg(mean, var, n_top)]
        steps.append(f"highly_variable_genes(n_top_genes={n_top}, flavor='seurat')")
    # pass 5: materialize the kept cells x kept genes
    blocks = [
        _transform(block, keep, scale[idx] if scale is not None else None, log)
        for idx, block in _chunks(x, cells)
    ]
    xs = sp.vstack(blocks, format="csr") if sp.issparse(blocks[0]) else np.vstack(blocks)
    xs = xs.astype(np.float32)
    cell_idx = np.flatnonzero(cells)
    obs = adata.obs.iloc[cell_idx].copy()
    var = adata.var.iloc[keep][[]].copy()
    out = ad.AnnData(X=xs, obs=obs, var=var)
    return out, steps
