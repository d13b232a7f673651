"""Lazy (dask) views of on-disk matrices: Parquet row groups and backed ``.h5ad`` ``X``.

A Parquet table becomes a dask array with one block per row group: a block is read by pyarrow
(only the feature columns of that row group) when a computation needs it, so memory holds a
row group at a time. A backed ``.h5ad`` ``X`` becomes a dask array of row blocks through
:func:`cape_pipeline._lazy.backed_as_dask` (shared with :mod:`cape_pipeline.pp`).
dask is imported inside the functions, so ``import cape_pipeline`` stays fast.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

log = logging.getLogger(__name__)

_LARGE_BLOCK = 256 << 20
"""A Parquet row group larger than this (decoded, float32) gets a warning: it is the unit of memory."""


class _RowGroupReader:
    """Reads row groups of one Parquet file with its footer parsed once (a wide file's footer
    takes ~0.7 kB of memory per row group and column, more than a block of values)."""

    def __init__(self, path: str, columns: Sequence[str], metadata: Any = None) -> None:
        import pyarrow.parquet as pq

        self.path = path
        self.columns = list(columns)
        self.metadata = metadata if metadata is not None else pq.read_metadata(path)

    def __call__(self, group: int) -> np.ndarray:
        """Row group ``group`` as a ``(rows, len(columns))`` float32 array; nulls become NaN."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        f = pq.ParquetFile(self.path, metadata=self.metadata, pre_buffer=False)
        table = f.read_row_group(group, columns=self.columns)
        cols = [
            c.to_numpy() if c.type == pa.float32() and c.null_count == 0 and c.num_chunks == 1
            else c.cast(pa.float32()).to_numpy(zero_copy_only=False)
            for c in table.columns
        ]
        out = np.column_stack(cols) if cols else np.empty((table.num_rows, 0), dtype=np.float32)
        del table, cols
        pa.default_memory_pool().release_unused()  # arrow's allocator would keep the freed row group
        return out.astype(np.float32, copy=False)


def parquet_dask_array(path: str | os.PathLike[str], columns: Sequence[str], metadata: Any = None) -> Any:
    """A lazy ``(N, len(columns))`` float32 dask array over a Parquet file, one block per row group.

    Parameters
    ----------
    path
        A Parquet file whose ``columns`` are numeric or boolean.
    columns
        Names of the feature columns, in output order.
    metadata
        The file's parsed footer (:func:`pyarrow.parquet.read_metadata`), when the caller has it.

    Returns
    -------
    dask.array.Array
        Float32, chunks ``(rows of each row group, len(columns))``; only the footer is read
        here, a block's values when a computation needs them. Memory while computing: the
        footer plus about two copies of one row group.
    """
    import dask
    import dask.array as da

    reader = _RowGroupReader(str(path), [str(c) for c in columns], metadata)
    meta, m = reader.metadata, len(reader.columns)
    read = dask.delayed(reader, pure=False)  # keys by uuid: the reader is not hashed
    blocks = []
    for g in range(meta.num_row_groups):
        rows = meta.row_group(g).num_rows
        if rows * m * 4 > _LARGE_BLOCK:
            log.warning(
                "%s: row group %d holds %d MB of values; lazy reading keeps a row group in memory "
                "(write the file with a smaller row_group_size)", path, g, rows * m * 4 >> 20,
            )
        blocks.append(da.from_delayed(read(g), (rows, m), np.float32))
    if not blocks:
        return da.zeros((0, m), dtype=np.float32, chunks=(1, m))
    return da.concatenate(blocks, axis=0)


def parquet_decoded_bytes(path: str | os.PathLike[str]) -> int:
    """Size of a Parquet table's values once decoded as float32 (rows x columns x 4), from its
    footer; 0 when the footer cannot be read (the reader then reports the file)."""
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(str(path)).metadata
    except Exception:  # corrupt or truncated: read_parquet raises the CapeFileError
        return 0
    return int(meta.num_rows) * int(meta.num_columns) * 4


def nonfinite_block(block: Any) -> np.ndarray:
    """``(2, M)`` bool: row 0 marks columns of ``block`` holding NaN, row 1 those holding ±inf.

    ``block`` is an ndarray or a scipy sparse matrix (only stored values can be non-finite).
    """
    m = block.shape[1]
    out = np.zeros((2, m), dtype=bool)
    if sp.issparse(block):
        b = sp.csr_matrix(block)
        out[0, b.indices[np.isnan(b.data)]] = True
        out[1, b.indices[np.isinf(b.data)]] = True
        return out
    b = np.asarray(block)
    if np.issubdtype(b.dtype, np.floating):
        out[0] = np.isnan(b).any(axis=0)
        out[1] = np.isinf(b).any(axis=0)
    return out


def nonfinite_columns_lazy(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """Column indices of a dask array holding NaN, and those holding ±inf (one pass, one block
    in memory at a time)."""
    import dask
    import dask.array as da

    if x.numblocks[1] != 1:
        x = x.rechunk({1: -1})
    nb, m = x.numblocks[0], x.shape[1]
    flags = da.map_blocks(
        nonfinite_block, x, chunks=((2,) * nb, (m,)), dtype=bool, meta=np.empty((0, 0), dtype=bool)
    )
    nan, inf = dask.compute(flags[0::2].any(axis=0), flags[1::2].any(axis=0), scheduler="synchronous")
    return np.flatnonzero(nan), np.flatnonzero(inf)
