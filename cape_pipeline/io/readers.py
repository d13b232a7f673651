"""Readers: ``.h5ad``, ``.parquet``, ``.csv``/``.tsv`` and catalog names → validated AnnData.

Every reader returns an AnnData with observations as rows and features as columns, float32
values (dense, or CSR sparse when the source was sparse), unique string ``var_names`` and label
columns in ``obs``; it is checked by :func:`validate_adata` before it is returned.
"""

from __future__ import annotations

import csv
import itertools
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from cape_pipeline._lazy import backed_as_dask, is_lazy
from cape_pipeline.errors import CapeConfigError, CapeDataError, CapeFileError
from cape_pipeline.io._lazy import (
    nonfinite_block,
    nonfinite_columns_lazy,
    parquet_dask_array,
    parquet_decoded_bytes,
)
from cape_pipeline.io.catalog import MODALITIES, get_entry
from cape_pipeline.io.layout import check_obs_labels, non_numeric_advice, orientation_hint

log = logging.getLogger(__name__)

MISSING_ALLOWED = ("proteomics", "methylation")
"""Modalities in which NaN marks a missing value rather than an error."""


def _available_memory() -> int:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 << 30


def read(
    source: str | os.PathLike[str],
    *,
    modality: str | None = None,
    label_columns: Sequence[str] | None = None,
    index_column: str | None = None,
    backed: bool | None = None,
    **loader_kwargs: Any,
) -> ad.AnnData:
    """Read a dataset into a validated AnnData.

    Parameters
    ----------
    source
        A path to ``.h5ad``, ``.parquet``, ``.csv`` or ``.tsv``, or the name of an entry of
        ``data_catalog.yaml`` (``cape datasets`` lists them).
    modality
        One of ``scrna``, ``proteomics``, ``methylation``, ``synthetic``. Catalog entries carry
        their own; files default to ``scrna``. Missing values (NaN) are allowed only for
        ``proteomics`` and ``methylation``.
    label_columns
        Columns that hold labels (cell type, age, ...) rather than features (CLI: ``--labels``).
        Parquet/CSV: they go to ``obs`` and all other columns must be numeric; ``.h5ad`` and
        catalog data: ``obs`` columns, checked to be there. Recorded in ``uns["cape_ingest"]``.
    index_column
        Parquet/CSV only: column holding observation names (``obs_names``).
    backed
        ``.h5ad``: open in backed (read-only, on-disk) mode. ``.parquet``: read lazily
        (:func:`read_parquet_lazy`, ``X`` a dask array over row groups). ``None`` picks this
        when the file (Parquet: its decoded size) is larger than half of the available memory.
    **loader_kwargs
        Passed to a catalog loader (e.g. ``n_nodes=50`` for ``synthetic-mlp``).

    Returns
    -------
    AnnData
        ``X`` float32 (N, M); ``uns["cape_ingest"]`` records source, modality and shape.

    Raises
    ------
    CapeFileError
        Missing, unreadable, corrupt or truncated file; unsupported suffix.
    CapeConfigError
        Unknown catalog name or loader parameter; unknown modality.
    CapeDataError
        NaN/inf, non-numeric feature columns, duplicate feature names, no features or fewer
        than two observations.

    Examples
    --------
    >>> import cape_pipeline as cape
    >>> adata = cape.read("sachs")
    >>> adata.shape
    (7466, 11)
    """
    src = str(source)
    path = Path(src).expanduser()
    if not is_file_source(src):
        entry = get_entry(src)
        modality = modality or entry.modality
        adata = entry.load(**loader_kwargs)
        if not adata.isbacked:
            adata.X = _as_float32(adata.X, where=src)
        check_obs_labels(adata.obs.columns, label_columns, src)
        label_columns = list(label_columns or entry.labels)
    else:
        if loader_kwargs:
            raise CapeConfigError(
                f"{src}: parameters {sorted(loader_kwargs)} apply to catalog datasets only"
            )
        check_file_source(src)
        suffix = path.suffix.lower()
        if suffix not in _READERS:
            raise CapeFileError(
                f"{src}: unsupported file type {suffix!r}; expected one of {sorted(_READERS)}"
            )
        if suffix == ".h5ad":
            adata = read_h5ad(path, backed=backed)
            check_obs_labels(adata.obs.columns, label_columns, src)
        elif suffix in (".parquet", ".pq") and (backed if backed is not None else parquet_decoded_bytes(path) > _available_memory() // 2):
            adata = read_parquet_lazy(path, label_columns=label_columns, index_column=index_column)
        else:
            adata = _READERS[suffix](path, label_columns=label_columns, index_column=index_column)
        modality = modality or adata.uns.get("cape_modality") or "scrna"
    if modality not in MODALITIES:
        raise CapeConfigError(f"modality: expected one of {MODALITIES}, got {modality!r}")
    validate_adata(adata, source=src, modality=modality)
    adata.uns["cape_ingest"] = {
        "source": src,
        "modality": modality,
        "n_obs": int(adata.n_obs),
        "n_vars": int(adata.n_vars),
        "label_columns": [c for c in (label_columns or []) if c in adata.obs.columns],
        "backed": bool(adata.isbacked or is_lazy(adata.X)),
    }
    return adata


def is_file_source(source: str | os.PathLike[str]) -> bool:
    """Whether ``source`` names a file (a known suffix, a path separator, or an existing path)
    rather than a catalog entry."""
    src = str(source)
    path = Path(src).expanduser()
    return path.suffix.lower() in _READERS or os.sep in src or path.exists()


def check_file_source(source: str | os.PathLike[str]) -> Path:
    """Check that ``source`` names a readable regular file, before it is hashed or read.

    Parameters
    ----------
    source
        A path given as SOURCE (``cape ingest SOURCE``, :func:`read`).

    Returns
    -------
    pathlib.Path
        The path, with ``~`` expanded.

    Raises
    ------
    CapeFileError
        ``SOURCE: no such file`` when nothing exists there; ``SOURCE: is a directory; expected a
        .h5ad, .parquet, .csv or .tsv file or a catalog name (cape datasets)`` for a directory;
        ``SOURCE: not a regular file`` for a device, pipe or socket; ``SOURCE: not readable
        (permission denied)`` when the file cannot be opened for reading.
    """
    src = str(source)
    path = Path(src).expanduser()
    if path.is_dir():
        raise CapeFileError(
            f"{src}: is a directory; expected a .h5ad, .parquet, .csv or .tsv file "
            "or a catalog name (cape datasets)"
        )
    if not path.exists():
        raise CapeFileError(f"{src}: no such file")
    if not path.is_file():
        raise CapeFileError(
            f"{src}: not a regular file; expected a .h5ad, .parquet, .csv or .tsv file"
        )
    if not os.access(path, os.R_OK):
        raise CapeFileError(f"{src}: not readable (permission denied)")
    return path


def _one_line(exc: BaseException) -> str:
    """``Type: message`` of an exception with its lines joined (pyarrow and h5py messages
    span lines, and the CLI prints one)."""
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def read_h5ad(path: str | os.PathLike[str], *, backed: bool | None = None) -> ad.AnnData:
    """Read an ``.h5ad`` file with anndata, in backed mode for files larger than memory.

    Values are cast to float32 in memory (backed files are left on disk as they are).

    Raises
    ------
    CapeFileError
        If the file is not a readable HDF5/AnnData file (corrupt or truncated).
    """
    path = Path(path)
    if backed is None:
        backed = path.stat().st_size > _available_memory() // 2
    try:
        adata = ad.read_h5ad(path, backed="r" if backed else None)
    except Exception as exc:  # h5py/anndata raise OSError, KeyError, ValueError, ...
        raise CapeFileError(
            f"{path}: not a readable .h5ad file (corrupt or truncated?): {_one_line(exc)}"
        ) from exc
    if not backed:
        adata.X = _as_float32(adata.X, where=str(path))
    return adata


def _as_float32(x: Any, *, where: str) -> Any:
    if x is None:
        raise CapeDataError(f"{where}: the AnnData has no X matrix")
    if sp.issparse(x):
        x = sp.csr_matrix(x)
        if not np.issubdtype(x.dtype, np.number):
            raise CapeDataError(f"{where}: X has non-numeric dtype {x.dtype}")
        return x.astype(np.float32)
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.number) and arr.dtype != bool:
        raise CapeDataError(f"{where}: X has non-numeric dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.float32)


def _frame_to_anndata(
    df: pd.DataFrame,
    *,
    where: str,
    label_columns: Sequence[str] | None,
    index_column: str | None,
) -> ad.AnnData:
    label_columns = list(label_columns or [])
    cols = [str(c) for c in df.columns]
    df.columns = cols
    for c in [*label_columns, *([index_column] if index_column else [])]:
        if c not in cols:
            raise CapeDataError(f"{where}: column {c!r} not found (columns: {cols[:10]}...)")
    if index_column:
        df = df.set_index(index_column)
    obs = df[label_columns].copy() if label_columns else pd.DataFrame(index=df.index)
    feats = df.drop(columns=label_columns)
    bad = [c for c in feats.columns if not (pd.api.types.is_numeric_dtype(feats[c]) or pd.api.types.is_bool_dtype(feats[c]))]
    _check_numeric(bad, where, list(feats.columns), feats[bad[0]].tolist() if bad else None)
    if index_column or not isinstance(feats.index, pd.RangeIndex):
        if (hint := orientation_hint(list(feats.index), list(feats.columns), header=index_column)) is not None:
            log.warning("%s: %s", where, hint)
    obs.index = _obs_index(feats.index)
    x = feats.to_numpy(dtype=np.float32, na_value=np.nan)
    return ad.AnnData(X=x, obs=obs, var=pd.DataFrame(index=pd.Index(feats.columns.astype(str))))


def _check_numeric(non_numeric: list[str], where: str, columns: list[str], first: list | None = None) -> None:
    if non_numeric:
        raise CapeDataError(f"{where}: non-numeric feature column(s) {non_numeric[:10]} ({len(non_numeric)} in all); "
                            + non_numeric_advice(non_numeric, columns, first))


def _obs_index(ids: Any) -> pd.Index:
    """Observation names as unique strings (a repeated name gets ``-<row>`` appended)."""
    index = pd.Index([str(i) for i in ids])
    return index if index.is_unique else pd.Index([f"{i}-{k}" for k, i in enumerate(index)])


def _not_parquet(path: Path, exc: BaseException) -> CapeFileError:
    return CapeFileError(f"{path}: not a readable Parquet file (corrupt or truncated?): {_one_line(exc)}")


def _check_duplicate_columns(names: Sequence[str], where: str) -> None:
    s = pd.Series([str(n) for n in names])
    dup = s[s.duplicated()].unique().tolist()
    if dup:
        raise CapeDataError(f"{where}: duplicate column name(s) {dup[:10]}; feature names must be unique")


def read_parquet(
    path: str | os.PathLike[str],
    *,
    label_columns: Sequence[str] | None = None,
    index_column: str | None = None,
) -> ad.AnnData:
    """Read a Parquet table (rows = observations, numeric columns = features) with pyarrow.

    A pandas index stored in the file becomes ``obs_names``.

    Raises
    ------
    CapeFileError
        If the file is not valid Parquet (corrupt or truncated).
    CapeDataError
        Non-numeric feature columns, duplicate column names (checked on the schema, before
        the data is read), unknown label/index columns.
    """
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        names = pq.read_schema(path).names
    except Exception as exc:  # ArrowInvalid, OSError, ...
        raise _not_parquet(path, exc) from exc
    # pyarrow cannot read a table whose columns share a name ("Multiple matches for FieldRef")
    _check_duplicate_columns(names, str(path))
    try:
        table = pq.read_table(path)
    except Exception as exc:  # ArrowInvalid, OSError, ...
        raise _not_parquet(path, exc) from exc
    return _frame_to_anndata(
        table.to_pandas(), where=str(path), label_columns=label_columns, index_column=index_column
    )


def read_parquet_lazy(
    path: str | os.PathLike[str],
    *,
    label_columns: Sequence[str] | None = None,
    index_column: str | None = None,
) -> ad.AnnData:
    """Read a Parquet table lazily: ``X`` is a dask array with one block per row group.

    Only the footer and the label/index columns are read here; feature values are read a row
    group at a time when a computation needs them. Same layout and checks as :func:`read_parquet`.

    Returns
    -------
    AnnData
        ``X`` a ``(N, M)`` float32 :class:`dask.array.Array` (nulls become NaN); ``obs`` holds
        the label columns, ``obs_names`` the index column or the stored pandas index.

    Raises
    ------
    CapeFileError
        If the file is not valid Parquet (corrupt or truncated).
    CapeDataError
        Non-numeric feature columns, duplicate column names, unknown label/index columns
        (all found from the schema, before any value is read).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        meta = pq.read_metadata(path)  # parsed once: a wide file's footer is large
        schema = meta.schema.to_arrow_schema()
    except Exception as exc:  # ArrowInvalid, OSError, ...
        raise _not_parquet(path, exc) from exc
    names = [str(n) for n in schema.names]
    _check_duplicate_columns(names, str(path))
    labels = list(label_columns or [])
    for c in [*labels, *([index_column] if index_column else [])]:
        if c not in names:
            raise CapeDataError(f"{path}: column {c!r} not found (columns: {names[:10]}...)")
    stored = [c for c in (schema.pandas_metadata or {}).get("index_columns", []) if isinstance(c, str)]
    index_cols = [index_column] if index_column else stored
    feats = [c for c in names if c not in labels and c not in index_cols and c not in stored]
    numeric = (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean, pa.types.is_decimal)
    _check_numeric([c for c in feats if not any(f(schema.field(c).type) for f in numeric)], str(path), feats)
    side = pq.ParquetFile(path, metadata=meta).read(columns=[*labels, *index_cols]).to_pandas(ignore_metadata=True)
    obs = side[labels].copy() if labels else pd.DataFrame(index=side.index)
    ids = side[index_cols[0]] if index_cols else pd.RangeIndex(len(side))
    obs.index = _obs_index(ids)
    x = parquet_dask_array(path, feats, meta)
    return ad.AnnData(X=x, obs=obs, var=pd.DataFrame(index=pd.Index(feats)))


def read_csv(
    path: str | os.PathLike[str],
    *,
    label_columns: Sequence[str] | None = None,
    index_column: str | None = None,
) -> ad.AnnData:
    """Read a ``.csv`` (comma) or ``.tsv`` (tab) table; same layout as :func:`read_parquet`.

    The separator follows the suffix: ``,`` for ``.csv``, a tab for ``.tsv``; there is no
    option to choose another.

    Raises
    ------
    CapeFileError
        If the file is empty or cannot be parsed, or is read as one column while its lines
        hold another separator (``;``, a tab, ``,`` or ``|``; the message names it and how to
        convert the file).
    CapeDataError
        As :func:`read_parquet`; also a header without data rows.
    """
    path = Path(path)
    sep = "\t" if path.suffix.lower() == ".tsv" else ","
    header: list[str] | None = None
    try:
        with open(path, newline="") as fh:
            rows = csv.reader(fh, delimiter=sep)
            header = next(rows, None)
            first = [r[0] for r in itertools.islice(rows, 5) if len(r) == 1]
        if not header:
            raise CapeFileError(f"{path}: empty file (expected a header row of column names)")
        if len(header) == 1:  # before pandas, which may take extra fields as an index
            _check_separator(path, sep, header[0], first)
        _check_duplicate_columns(header, str(path))
        df = pd.read_csv(path, sep=sep)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise CapeFileError(
            f"{path}: cannot parse as {'TSV' if sep == chr(9) else 'CSV'}: {_one_line(exc)}"
        ) from exc
    if len(df) == 0:
        raise CapeDataError(f"{path}: no data rows (only a header); expected one row per observation")
    return _frame_to_anndata(df, where=str(path), label_columns=label_columns, index_column=index_column)


_SEPARATORS = {";": "';'", "\t": "a tab", ",": "','", "|": "'|'"}


def _check_separator(path: Path, sep: str, header: str, values: list[str]) -> None:
    """Raise when a table read as one column has another separator in its header and in each
    of its first ``values`` (one column each), or in some value when there is no header."""
    text = "\n".join([header, *values])
    found = [c for c in _SEPARATORS if c != sep and all(c in v for v in [header, *values])]
    if not found:
        return
    other = max(found, key=text.count)
    if other == "\t":
        fix = f"rename it to {path.stem}.tsv"
    elif other == ",":
        fix = f"rename it to {path.stem}.csv"
    else:
        fix = (
            f"convert the file, e.g. pandas.read_csv({str(path)!r}, sep={other!r})"
            f".to_csv({path.stem + '.csv'!r}, index=False)"
        )
    raise CapeFileError(
        f"{path}: read as one column, but the lines contain {_SEPARATORS[other]}; CAPE reads "
        f"comma-separated .csv and tab-separated .tsv (the suffix picks the separator): {fix}"
    )


_READERS = {".h5ad": read_h5ad, ".parquet": read_parquet, ".pq": read_parquet, ".csv": read_csv, ".tsv": read_csv}


def _nonfinite_columns(adata: ad.AnnData) -> tuple[np.ndarray, np.ndarray]:
    """Column indices holding NaN, and those holding ±inf (in memory; backed or dask ``X``:
    one lazy pass over its row blocks)."""
    x = adata.X
    if adata.isbacked or is_lazy(x):
        return nonfinite_columns_lazy(backed_as_dask(adata))
    flags = nonfinite_block(x)
    return np.flatnonzero(flags[0]), np.flatnonzero(flags[1])


def validate_adata(adata: ad.AnnData, *, source: str = "data", modality: str = "scrna") -> None:
    """Check an AnnData for the problems that would break later stages.

    Checks: at least one feature and two observations; unique, non-empty ``var_names``;
    numeric ``X``; no ±inf; no NaN unless ``modality`` allows missing values
    (``proteomics``, ``methylation``).

    Raises
    ------
    CapeDataError
        With a one-line message that names ``source``, the offending feature columns and what
        was expected.
    """
    if adata.n_vars == 0:
        raise CapeDataError(f"{source}: no features (0 columns); expected at least one numeric feature")
    if adata.n_obs < 2:
        raise CapeDataError(f"{source}: {adata.n_obs} observation(s); expected at least 2 rows")
    names = adata.var_names.astype(str)
    if (names.str.len() == 0).any():
        raise CapeDataError(f"{source}: empty feature name(s); every feature needs a name")
    if not names.is_unique:
        dup = names[names.duplicated()].unique().tolist()
        raise CapeDataError(
            f"{source}: duplicate feature name(s) {dup[:10]} ({len(dup)} in all); feature names must be unique"
        )
    x = adata.X
    dtype = getattr(x, "dtype", None)
    if dtype is not None and not (np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_)):
        raise CapeDataError(f"{source}: X has non-numeric dtype {dtype}; expected numbers")
    nan_cols, inf_cols = _nonfinite_columns(adata)
    if inf_cols.size:
        raise CapeDataError(
            f"{source}: infinite values in feature(s) {names[inf_cols[:10]].tolist()} "
            f"({inf_cols.size} in all); expected finite numbers"
        )
    if nan_cols.size and modality not in MISSING_ALLOWED:
        raise CapeDataError(
            f"{source}: NaN in feature(s) {names[nan_cols[:10]].tolist()} ({nan_cols.size} in all); "
            f"missing values are allowed only for modality proteomics or methylation "
            f"(this data is {modality!r}; CLI: --set ingest.modality=...)"
        )
