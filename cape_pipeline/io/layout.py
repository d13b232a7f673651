"""Where things are in a data file: its label columns and counts layer, checked against the file
before any stage runs (:func:`check_data_keys`), and whether a table's rows look like genes
rather than cells (:func:`orientation_hint`).

The names are the ones a user gives once, as scvi-tools' ``setup_anndata(layer=, labels_key=)``
takes them: ``labels`` (``ingest.label_columns``; the first is the label of annotation and
clustering unless ``train.label_key`` names another) and ``counts_layer``
(``preprocess.counts_layer``).
"""

from __future__ import annotations

import csv
import difflib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cape_pipeline.errors import CapeDataError

__all__ = ["FileKeys", "check_data_keys", "file_keys", "looks_like_cells", "looks_like_genes", "orientation_hint"]


@dataclass(frozen=True)
class FileKeys:
    """The names a file offers: ``kind`` ``"h5ad"`` (``columns`` = its ``obs`` columns, ``layers``
    its layers) or ``"table"`` (``columns`` = the table's columns; a table has no layers)."""

    kind: str
    columns: tuple[str, ...]
    layers: tuple[str, ...] = ()


def _h5ad_keys(path: Path) -> FileKeys:
    import h5py

    with h5py.File(path, "r") as f:
        obs = f.get("obs")
        if isinstance(obs, h5py.Group):
            order = obs.attrs.get("column-order", [])
            columns = [c.decode() if isinstance(c, bytes) else str(c) for c in list(order)]
        elif isinstance(obs, h5py.Dataset) and obs.dtype.names:  # anndata < 0.7: a compound dataset
            columns = [n for n in obs.dtype.names if n != "index"]
        else:
            columns = []
        layers = sorted(f["layers"].keys()) if isinstance(f.get("layers"), h5py.Group) else []
    return FileKeys("h5ad", tuple(columns), tuple(layers))


def _table_columns(path: Path) -> list[str]:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        schema = pq.read_schema(path)
        stored = [c for c in (schema.pandas_metadata or {}).get("index_columns", []) if isinstance(c, str)]
        return [str(n) for n in schema.names if n not in stored]
    with open(path, newline="") as fh:
        return next(csv.reader(fh, delimiter="\t" if suffix == ".tsv" else ","), [])


def file_keys(source: str | os.PathLike[str]) -> FileKeys | None:
    """The obs columns and layers of an ``.h5ad`` file, or the columns of a table, read without
    the data (HDF5 attributes, the Parquet schema, the CSV header); None for a catalog name or a
    file that cannot be read that way (the reader then names the problem)."""
    path = Path(source).expanduser()
    if not path.is_file():  # a catalog name, or a missing file (the ingest stage says so)
        return None
    try:
        if path.suffix.lower() == ".h5ad":
            return _h5ad_keys(path)
        return FileKeys("table", tuple(_table_columns(path)))
    except Exception:  # a corrupt or unreadable file: the ingest stage's reader says why, in one line
        return None


def _listing(names: Sequence[str], wanted: str, what: str) -> str:
    if not names:
        return f"it has no {what}"
    close = difflib.get_close_matches(wanted, list(names), n=1, cutoff=0.6)
    shown = ", ".join(list(names)[:20]) + (f", … ({len(names)} in all)" if len(names) > 20 else "")
    return (f"did you mean {close[0]!r}? " if close else "") + f"its {what}: {shown}"


def check_data_keys(
    source: str | os.PathLike[str],
    *,
    labels: Sequence[str] | None = None,
    label_key: str | None = None,
    counts_layer: str | None = None,
) -> None:
    """Check that the names a run reads from ``source`` are in it, before any stage runs.

    Parameters
    ----------
    source
        The data file (a catalog name is not checked here; its reader checks it).
    labels
        ``--labels`` / ``ingest.label_columns``: ``obs`` columns of an ``.h5ad``, columns of a table.
    label_key
        ``train.label_key``: an ``obs`` column of an ``.h5ad``; of a table, one of ``labels``
        (the other columns are features).
    counts_layer
        ``--counts-layer`` / ``preprocess.counts_layer``: a layer of an ``.h5ad`` (tables have none).

    Raises
    ------
    CapeDataError
        A name the file lacks; the one-line message lists the columns or layers it has.
    """
    keys = file_keys(source)
    if keys is None:
        return
    h5ad = keys.kind == "h5ad"
    what = "obs columns" if h5ad else "columns"
    for name in labels or ():
        if name not in keys.columns:
            raise CapeDataError(f"{source}: labels {name!r}: no such {what[:-1]}; {_listing(keys.columns, name, what)}")
    if label_key is not None:
        if h5ad and label_key not in keys.columns:
            raise CapeDataError(f"{source}: train.label_key {label_key!r}: no such obs column; "
                                f"{_listing(keys.columns, label_key, what)}")
        if not h5ad and label_key not in (labels or ()):
            hint = _listing(keys.columns, label_key, what) if label_key not in keys.columns else "it is read as a feature"
            raise CapeDataError(f"{source}: train.label_key {label_key!r}: not among the label columns "
                                f"(--labels {','.join(labels or []) or 'NAME'}); {hint}")
    if counts_layer is not None:
        if not h5ad:
            raise CapeDataError(f"{source}: --counts-layer {counts_layer!r}: a table has no layers; its values are "
                                "taken as counts when they are whole numbers (leave --counts-layer out)")
        if counts_layer not in keys.layers:
            raise CapeDataError(f"{source}: --counts-layer {counts_layer!r}: no such layer; "
                                f"{_listing(keys.layers, counts_layer, 'layers')}")


# ---------------------------------------------------------------------------- orientation
_ENSEMBL = re.compile(r"^ENS[A-Z]*G\d{6,}(\.\d+)?$")
_NUMBERED_GENE = re.compile(r"^(gene|g)[_\-.]?\d+$", re.IGNORECASE)
_CELL = re.compile(r"^([ACGTN]{8,}([-_.]\d+)?|cells?[_\-.]?\w*|barcode\w*)$", re.IGNORECASE)
_GENE_HEADERS = {"gene", "genes", "gene_id", "gene_ids", "gene_name", "gene_names", "gene_symbol", "gene_symbols",
                 "symbol", "symbols", "feature", "features", "feature_id", "feature_name", "ensembl", "ensembl_id"}
_INDEX_HEADERS = {"", "index", "id", "ids", "name", "names", "obs_names", "cell", "cells", "cell_id", "barcode",
                  "barcodes"}


def _known_genes() -> set[str]:
    from cape_pipeline.causal.regulators import bundled_path, read_regulator_file

    out: set[str] = set()
    for name in ("human", "mouse"):
        out.update(g.upper() for g in read_regulator_file(bundled_path(name)))
    return out


def looks_like_genes(names: Sequence[object], header: str | None = None) -> bool:
    """Whether row names (or the header of the column holding them) look like genes: a header such
    as ``gene``/``symbol``; half of the names Ensembl gene ids or numbered genes (``gene12``,
    ``g12``); or at least 3 names, and 1 %, among the bundled human/mouse transcription factors
    (most genes are not TFs, but every transcriptome holds some)."""
    if header is not None and header.strip().lower() in _GENE_HEADERS:
        return True
    text = [str(n) for n in names]
    if not text:
        return False
    if sum(bool(_ENSEMBL.match(t) or _NUMBERED_GENE.match(t)) for t in text) >= 0.5 * len(text):
        return True
    known = _known_genes()
    hits = sum(t.upper() in known for t in text)
    return hits >= 3 and hits >= 0.01 * len(text)


def looks_like_cells(names: Sequence[object]) -> bool:
    """Whether column names look like cells: half of them barcodes (``AAACCTGAGAAGGCCT-1``) or
    ``cell…``/``barcode…`` names."""
    text = [str(n) for n in names]
    return bool(text) and sum(bool(_CELL.match(t)) for t in text) >= 0.5 * len(text)


def looks_like_index(values: Sequence[object], header: str) -> bool:
    """Whether a table's first column holds row names: non-numeric, every value distinct, and a
    header that is empty (pandas' ``Unnamed: 0``), index-like or gene-like."""
    h = header.strip().lower()
    named = h.startswith("unnamed:") or h in _INDEX_HEADERS or h in _GENE_HEADERS
    text = [str(v) for v in values]
    return named and len(set(text)) == len(text)


def orientation_hint(row_names: Sequence[object], columns: Sequence[str], *, header: str | None = None) -> str | None:
    """A warning when a table (rows × ``columns``) looks transposed (genes as rows), else None.

    It looks transposed when it has more rows than columns and its row names look like genes
    (:func:`looks_like_genes`), or far more columns than rows (10×) named like cells
    (:func:`looks_like_cells`). ``header`` is the name of the column that holds the row names.
    """
    n_rows, n_cols = len(row_names), len(columns)
    genes = n_rows > n_cols and looks_like_genes(row_names, header)
    cells = n_cols >= 10 * n_rows and looks_like_cells(columns)
    if not (genes or cells):
        return None
    why = "its row names look like genes" if genes else "its column names look like cells"
    return (f"the table's rows look like genes, not cells ({n_rows} rows × {n_cols} columns; {why}): CAPE reads one "
            "row per cell; transpose the table first, e.g. pandas.read_csv(FILE, index_col=0).T.to_csv(NEW)")


def non_numeric_advice(non_numeric: Sequence[str], columns: Sequence[str], first: Sequence[object] | None) -> str:
    """What to do about non-numeric feature columns: name them with ``label_columns``, or, when
    the first column looks like row names (``first`` its values), make it the ``index_column``;
    when those row names look like genes, transpose the table."""
    advice = ("name label columns with label_columns=[...] (CLI: --labels NAME,NAME or "
              "--set ingest.label_columns=[...]) or remove them")
    head = str(columns[0]) if columns else ""
    if first is not None and non_numeric and non_numeric[0] == head and looks_like_index(first, head):
        advice = (f"the first column {head!r} looks like row names: give it as index_column={head!r} "
                  f"(CLI: --set ingest.index_column={head!r})" + ("" if len(non_numeric) == 1 else f"; {advice}"))
        hint = orientation_hint(list(first), list(columns[1:]), header=head)
        if hint is not None:
            advice += f"; {hint}"
    return advice


def check_obs_labels(columns: Sequence[object], labels: Sequence[str] | None, source: str) -> None:
    """Raise :class:`CapeDataError` listing ``columns`` (an AnnData's ``obs`` columns) when one of
    ``labels`` is not among them."""
    cols = [str(c) for c in columns]
    missing = [c for c in labels or () if c not in cols]
    if missing:
        raise CapeDataError(f"{source}: labels {missing[0]!r}: no such obs column; "
                            f"{_listing(cols, missing[0], 'obs columns')}")
