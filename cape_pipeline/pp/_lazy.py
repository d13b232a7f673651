"""Out-of-core scRNA preprocessing over a lazy (dask) ``X``: backed ``.h5ad`` or lazy Parquet.

The same steps as the in-memory path of :func:`cape_pipeline.pp.preprocess` — ``filter_cells``,
``filter_genes``, ``normalize_total``, ``log1p``, top-n ``seurat``-flavor highly variable genes —
computed as dask reductions over row blocks of the on-disk matrix with the synchronous
scheduler, so memory holds one block (plus per-gene float64 sums) at a time and never ``X``.
Three passes over the file, each one :func:`dask.compute`:

1. per cell, detected genes; per gene, detected cells among the cells that pass
   ``filter_cells`` (a cell's filter depends on its own row only, so both come in one pass);
2. per gene, the sums of ``y`` and ``y²`` with ``y = expm1(log1p(x · target_sum / lib))`` over
   kept cells × kept genes (a library size is a row sum, computed inside the block);
3. the kept cells × selected genes, log-normalized, as float32 blocks, and on counts each kept
   cell's library size (its sum over the kept genes, as the in-memory path records it for
   Step I).

Log-normalized values whose counts can be read back (:func:`cape_pipeline.pp.recover_counts`,
row by row, so block by block) are checked in one more pass first and then read as counts.

Highly variable genes (``seurat`` flavor, Satija et al. 2015, as documented by scanpy): on the
normalized, de-logged values ``y`` take each gene's mean μ and unbiased variance σ²,
dispersion ``log(σ²/μ)``, mean ``log1p(μ)``; cut the means into 20 equal-width bins and z-score the
dispersions within each bin (a bin holding a single gene gives it 1); keep the genes whose
normalized dispersion is at least the n-th highest.
"""

from __future__ import annotations

import logging
from typing import Any

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from cape_pipeline._keys import LIBRARY_SIZE
from cape_pipeline._lazy import backed_as_dask
from cape_pipeline.errors import CapeDataError

_F64_VALUES = 1 << 20
"""Values per float64 piece of a block in the per-gene moments (8 MB)."""

logger = logging.getLogger("cape_pipeline.pp")
_SCHEDULER = "synchronous"
"""One block at a time, in the calling thread: memory is bounded by a block, not by the cores."""


def _f64(block: Any) -> Any:
    """A float64 copy (the transforms below work in place; a block may be shared)."""
    return sp.csr_matrix(block, dtype=np.float64, copy=True) if sp.issparse(block) else np.array(block, dtype=np.float64)


def _qc_counts(block: Any, min_genes: int, size: int) -> np.ndarray:
    """``(1, size)`` int64: detected values per column among the rows with at least
    ``min_genes`` detected (stored non-zero) values (M entries), then those per-row counts
    (padded with -1). One output per block, so a block is read once and released at once."""
    b = sp.csr_matrix(block) if sp.issparse(block) else np.asarray(block)
    per_row = np.diff(b.indptr) if sp.issparse(b) else np.count_nonzero(b, axis=1)
    keep = per_row >= min_genes
    b = b if keep.all() else b[keep]
    if sp.issparse(b):
        per_col = np.bincount(b.indices[b.data != 0], minlength=block.shape[1])
    else:
        per_col = np.count_nonzero(b, axis=0)
    out = np.full((1, size), -1, dtype=np.int64)
    out[0, : per_col.size] = per_col
    out[0, per_col.size : per_col.size + per_row.size] = per_row
    return out


def _kept_rows(block: Any, cells: np.ndarray) -> Any:
    """The rows ``cells`` (bool ``(rows, 1)``) of ``block``, CSR where it is sparse."""
    rows = cells[:, 0]
    b = sp.csr_matrix(block) if sp.issparse(block) else np.asarray(block)
    return b if rows.all() else b[rows]


def _library_sizes(b: Any, qc_genes: np.ndarray) -> np.ndarray:
    """``(rows,)`` float64: each row's sum over the columns ``qc_genes`` (its library size)."""
    return np.asarray((b if qc_genes.size == b.shape[1] else b[:, qc_genes]).sum(axis=1, dtype=np.float64)).ravel()


def _normalized(block: Any, cells: np.ndarray, genes: np.ndarray, target_sum: float | None, log: bool,
                qc_genes: np.ndarray) -> Any:
    """Rows ``cells`` (bool ``(rows, 1)``), columns ``genes`` of ``block`` in float64, scaled to
    ``target_sum`` per row when given (library size over ``qc_genes``; zero rows stay zero) and
    log1p-ed when ``log``."""
    b = _kept_rows(block, cells)
    m = b.shape[1]
    if target_sum is not None:
        lib = _library_sizes(b, qc_genes)
        lib[lib == 0] = 1.0
        scale = target_sum / lib
    b = _f64(b if genes.size == m else b[:, genes])
    if target_sum is not None:
        if sp.issparse(b):
            b.data *= np.repeat(scale, np.diff(b.indptr))
        else:
            b *= scale[:, None]
    if log:
        if sp.issparse(b):
            np.log1p(b.data, out=b.data)
        else:
            np.log1p(b, out=b)
    return b


def _moments(block: Any, cells: np.ndarray, genes: np.ndarray, target_sum: float | None, log: bool) -> np.ndarray:
    """``(1, 2G)``: per-gene sums of ``y`` then of ``y²``, ``y = expm1`` of the normalized block
    (taken :data:`_F64_VALUES` values at a time: the float64 copy is the largest temporary)."""
    out = np.zeros((2, genes.size))
    step = max(1, _F64_VALUES // max(genes.size, 1))
    for start in range(0, block.shape[0], step):
        y = _normalized(block[start : start + step], cells[start : start + step], genes, target_sum, log, genes)
        if sp.issparse(y):
            np.expm1(y.data, out=y.data)
            out[0] += np.asarray(y.sum(axis=0)).ravel()
            out[1] += np.asarray(y.multiply(y).sum(axis=0)).ravel()
        else:
            np.expm1(y, out=y)
            out[0] += y.sum(axis=0)
            out[1] += np.einsum("ij,ij->j", y, y)
    return out.reshape(1, -1)


def _selected(block: Any, cells: np.ndarray, keep: np.ndarray, target_sum: float | None, log: bool,
              qc_genes: np.ndarray) -> Any:
    return _normalized(block, cells, keep, target_sum, log, qc_genes).astype(np.float32)


def _library(block: Any, cells: np.ndarray, qc_genes: np.ndarray) -> np.ndarray:
    """``(kept rows, 1)`` float64: each kept row's library size over ``qc_genes``."""
    return _library_sizes(_kept_rows(block, cells), qc_genes).reshape(-1, 1)


def _recoverable(block: Any) -> np.ndarray:
    """``(1, 1)`` int64: the position in :data:`~cape_pipeline.pp._counts.BASES` of the log base
    whose inverse gives this block's counts back, -1 where none does."""
    from cape_pipeline.pp._counts import BASES, recover_counts

    got = recover_counts(block, quiet=True)
    return np.array([[-1 if got is None else [b for b, _ in BASES].index(got[1]["base"])]], dtype=np.int64)


def _recovered(block: Any) -> Any:
    """The block's counts (:func:`~cape_pipeline.pp.recover_counts`; every block was checked)."""
    from cape_pipeline.pp._counts import recover_counts

    return recover_counts(block, quiet=True)[0]


def _per_block(x: Any, fn: Any, width: int, *args: Any, out_dtype: Any = np.float64, **kwargs: Any) -> Any:
    """``(n_blocks, width)`` dask array: row b is ``fn(block b of x, blocks b of args, **kwargs)``."""
    import dask.array as da

    return da.map_blocks(
        fn, x, *args, chunks=((1,) * x.numblocks[0], (width,)), dtype=out_dtype,
        meta=np.empty((0, 0), dtype=out_dtype), **kwargs,
    )


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

    Returns
    -------
    numpy.ndarray
        ``(M,)`` bool.
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


def preprocess_lazy_scrna(
    adata: ad.AnnData,
    *,
    state: str,
    min_genes: int,
    min_cells: int,
    target_sum: float,
    n_top: int,
    where: str,
    recover: bool = False,
) -> tuple[ad.AnnData, list[str], str | None]:
    """Preprocess a backed or lazily read scRNA AnnData in dask passes (see the module docstring).

    Parameters
    ----------
    adata
        AnnData opened with ``backed="r"`` or with a dask ``X``; ``X`` (N, M) counts, normalized
        or log-normalized, dense or CSR blocks. Not modified, and ``X`` is never loaded whole.
    state
        From :func:`cape_pipeline.pp.detect_input_state` (``"scaled"`` is refused).
    min_genes, min_cells, target_sum, n_top
        As in :class:`cape_pipeline.pp.PreprocessConfig`.
    where
        Prefix for error messages.
    recover
        With ``state == "log-normalized"``: read the counts back where every block's values allow
        it (:func:`cape_pipeline.pp.recover_counts`), and go on as from counts.

    Returns
    -------
    (AnnData, list of str, str or None)
        The in-memory ``(N', M')`` result, ``M' ≤ n_top`` (float32; CSR when the blocks are
        sparse), equal to the in-memory scanpy path, with ``obs["cape_library_size"]`` on counts
        (the kept cells' sums over the genes ``filter_genes`` keeps); the steps applied; and the
        log base the counts were read back in (``"e"``, ``"2"``) or None.

    Raises
    ------
    CapeDataError
        Scaled input, or fewer than 2 cells / no genes left after QC.
    """
    import dask
    import dask.array as da

    if state == "scaled":
        raise CapeDataError(
            f"{where}: backed file holds scaled values (negatives); pass counts or log-normalized data"
        )
    x = backed_as_dask(adata)
    n, m = x.shape
    rows = x.chunks[0]
    steps: list[str] = [f"backed: streamed with dask in {len(rows)} row blocks of <= {max(rows, default=0)} rows"]
    base = None
    if state == "log-normalized" and recover:
        from cape_pipeline.pp._counts import BASES

        found = _per_block(x, _recoverable, 1, out_dtype=np.int64).compute(scheduler=_SCHEDULER).ravel()
        if found.size and (found >= 0).all() and (found == found[0]).all():
            base = BASES[int(found[0])][0]
            x = x.map_blocks(_recovered, dtype=np.float32, meta=x._meta)
            state = "counts"
            steps.append(f"counts recovered from the log-normalized values (log base {base})")
        else:
            logger.info(
                "preprocess: the log-normalized values do not invert to whole counts in %d of %d row blocks; "
                "the counts stay unknown", int((found < 0).sum()), found.size)
    # pass 1: detected genes per cell; detected cells per gene among the cells kept
    qc = _per_block(x, _qc_counts, m + max(rows), out_dtype=np.int64, min_genes=min_genes, size=m + max(rows))
    n_cells, per_row = dask.compute(qc[:, :m].sum(axis=0), qc[:, m:], scheduler=_SCHEDULER)
    n_genes = np.concatenate([r[:k] for r, k in zip(per_row, rows, strict=True)])
    cells = n_genes >= min_genes
    if min_genes > 0:
        steps.append(f"filter_cells(min_genes={min_genes})")
    genes = np.flatnonzero(n_cells >= min_cells) if min_cells > 0 else np.arange(m)
    if min_cells > 0:
        steps.append(f"filter_genes(min_cells={min_cells})")
    if cells.sum() < 2 or genes.size < 1:
        raise CapeDataError(
            f"{where}: {int(cells.sum())} cells x {genes.size} genes left after QC "
            f"(min_genes={min_genes}, min_cells={min_cells}); lower these thresholds"
        )
    if state == "counts":
        steps += [f"normalize_total(target_sum={target_sum:g})", "log1p"]
    elif state == "normalized":
        steps.append("log1p (input already normalized)")
    else:
        steps.append(f"no normalization (input is {state})")
    norm = dict(target_sum=target_sum if state == "counts" else None, log=state in ("counts", "normalized"))
    mask = da.from_array(cells[:, None], chunks=(rows, (1,)))
    # pass 2: per-gene mean / variance of the de-logged normalized values -> seurat HVG
    keep = genes
    if n_top < genes.size:
        sums = _per_block(x, _moments, 2 * genes.size, mask, genes=genes, **norm).sum(axis=0)
        sums = sums.compute(scheduler=_SCHEDULER)
        k = int(cells.sum())
        mean = sums[: genes.size] / k
        var = (sums[genes.size :] / k - mean**2) * (k / (k - 1))
        keep = genes[seurat_hvg(mean, var, n_top)]
        steps.append(f"highly_variable_genes(n_top_genes={n_top}, flavor='seurat')")
    # pass 3: the kept cells x kept genes, one float32 block per row block
    sparse = sp.issparse(x._meta)
    kept_rows = tuple(int(c.sum()) for c in np.split(cells, np.cumsum(rows)[:-1]))
    meta = sp.csr_matrix((0, 0), dtype=np.float32) if sparse else np.empty((0, 0), np.float32)
    out = da.map_blocks(_selected, x, mask, chunks=(kept_rows, (keep.size,)), dtype=np.float32, meta=meta,
                        keep=keep, qc_genes=genes, **norm)
    parts = list(out.to_delayed().ravel())
    n_out = len(parts)
    if state == "counts":  # the library sizes in the same pass: each block is read once for both
        lib = da.map_blocks(_library, x, mask, chunks=(kept_rows, (1,)), dtype=np.float64,
                            meta=np.empty((0, 0)), qc_genes=genes)
        parts += list(lib.to_delayed().ravel())
    computed = dask.compute(*parts, scheduler=_SCHEDULER)
    blocks = computed[:n_out]
    xs = sp.vstack(blocks, format="csr") if sparse else np.vstack(blocks)
    obs = pd.DataFrame({"_cape_pos": np.flatnonzero(cells)}, index=adata.obs_names[cells])
    if state == "counts":
        obs[LIBRARY_SIZE] = np.concatenate([np.asarray(b).ravel() for b in computed[n_out:]])
    var = pd.DataFrame({"_cape_pos": keep}, index=adata.var_names[keep])
    return ad.AnnData(X=xs, obs=obs, var=var), steps, base
