"""Row-block (dask) views of a backed or lazily read AnnData ``X``: the base layer's piece that
both :mod:`cape_pipeline.io` (validation, Parquet) and :mod:`cape_pipeline.pp` (out-of-core
preprocessing) use. dask is imported inside the functions, so ``import cape_pipeline`` stays
fast.
"""

from __future__ import annotations

from typing import Any

import anndata as ad

__all__ = ["CHUNK_ROWS", "backed_as_dask", "is_lazy"]

CHUNK_ROWS = 2048
"""Rows per block of a backed ``.h5ad`` ``X`` (a lazy Parquet ``X`` has one block per row group)."""


def backed_as_dask(adata: ad.AnnData, chunk_rows: int | None = None) -> Any:
    """``X`` of an AnnData as a dask array of row blocks, without reading it.

    Parameters
    ----------
    adata
        AnnData opened with ``backed="r"``, or one whose ``X`` is already a dask array.
    chunk_rows
        Rows per block (default :data:`CHUNK_ROWS`); a dask ``X`` keeps its row blocks and is
        rechunked to whole rows.

    Returns
    -------
    dask.array.Array
        ``(N, M)`` with the file's dtype; blocks are ndarrays (dense) or CSR matrices (sparse).
    """
    import dask.array as da

    x = adata.X
    if isinstance(x, da.Array):
        return x if x.numblocks[1] == 1 else x.rechunk({1: -1})
    from anndata.experimental import read_elem_lazy

    rows = chunk_rows or CHUNK_ROWS
    return read_elem_lazy(adata.file["X"], chunks=(rows, adata.n_vars))


def is_lazy(x: Any) -> bool:
    """Whether ``x`` is a dask array (without importing dask when it is not loaded)."""
    import sys

    da = sys.modules.get("dask.array")
    return da is not None and isinstance(x, da.Array)
