"""Regulators as prior knowledge of Step I: the features that may be parents
(``DiscoverConfig.regulators``), as GRN tools take a list of transcription factors —
GRNBoost2/GENIE3 in arboreto (``tf_names``, Moerman et al. 2019), pySCENIC's ``grn`` step
(a TF list file, Van de Sande et al. 2020) and CellOracle's base GRN (Kamimoto et al. 2023).

A list is given as one of (:func:`listed_regulators`):

- ``"human"`` or ``"mouse"``: the lists bundled in ``cape_pipeline/data/regulators/``
  (:func:`bundled_path`);
- ``"var:COLUMN"``: the features whose boolean ``adata.var[COLUMN]`` is True;
- a path to a text file (:func:`read_regulator_file`);
- in Python, a sequence of feature names.

:func:`resolve_regulators` matches the list against the features (exact names) and returns
their column indices with a summary recorded in the graph's ``params["regulators"]``.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cape_pipeline._utils import hash_bytes
from cape_pipeline.errors import CapeConfigError, CapeDataError, CapeFileError

__all__ = [
    "BUNDLED",
    "VAR_PREFIX",
    "Regulators",
    "bundled_path",
    "check_regulators",
    "listed_regulators",
    "parent_mask",
    "read_regulator_file",
    "regulators_fingerprint",
    "resolve_regulators",
]

logger = logging.getLogger(__name__)

#: names of the bundled lists (``cape_pipeline/data/regulators/<name>.txt``)
BUNDLED = ("human", "mouse")
#: ``regulators="var:COLUMN"`` reads the boolean column ``adata.var[COLUMN]``
VAR_PREFIX = "var:"
_FIELD_SEP = re.compile(r"[\s,;]+")


def check_regulators(value: Any) -> Any:
    """The value of ``DiscoverConfig.regulators`` in its stored form, or an error.

    ``None`` and strings are kept; a path (``os.PathLike``) becomes its string; a sequence of
    names becomes a tuple of str.

    Raises
    ------
    CapeConfigError
        Not None, a non-empty string, a path or a non-empty sequence of non-empty strings; or
        ``"var:"`` without a column name.
    """
    what = (f"None, {' or '.join(repr(b) for b in BUNDLED)}, '{VAR_PREFIX}COLUMN' (a boolean var column), "
            "a text file of names, or a list of names")
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        if not value.strip() or value.strip() == VAR_PREFIX:
            raise CapeConfigError(f"regulators: expected {what}, got {value!r}")
        return value
    if isinstance(value, Sequence) and not isinstance(value, bytes):
        names = tuple(value)
        if names and all(isinstance(v, str) and v.strip() for v in names):
            return names
    raise CapeConfigError(f"regulators: expected {what}, got {value!r}")


def bundled_path(name: str) -> Path:
    """Path of the bundled list ``name`` (one of :data:`BUNDLED`):
    ``cape_pipeline/data/regulators/<name>.txt`` inside the installed package."""
    from importlib import resources

    return Path(str(resources.files("cape_pipeline"))) / "data" / "regulators" / f"{name}.txt"


def read_regulator_file(path: str | os.PathLike[str]) -> list[str]:
    """Names listed in a regulator file, in file order, repeats removed.

    One name per line; blank lines and lines starting with ``#`` are skipped. A line with
    several fields (separated by tabs, spaces, commas or semicolons) gives its first field, so
    the first column of a TSV or CSV file works; a header line counts as a name unless it starts
    with ``#`` (it then matches no feature and only adds to the listed count).

    Raises
    ------
    CapeFileError
        Missing file, a directory, unreadable or not UTF-8, or no names in it (the file named).
    """
    p = Path(path).expanduser()
    if p.is_dir():
        raise CapeFileError(f"regulators: {p} is a directory; expected a text file with one gene name per line")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError as exc:
        raise CapeFileError(
            f"regulators: file {p} not found; expected a text file with one gene name per line, "
            f"{' or '.join(repr(b) for b in BUNDLED)} (bundled lists) or '{VAR_PREFIX}COLUMN'"
        ) from exc
    except UnicodeDecodeError as exc:
        raise CapeFileError(f"regulators: {p} is not a text file (not UTF-8)") from exc
    except OSError as exc:
        raise CapeFileError(f"regulators: cannot read {p} ({exc.strerror or exc})") from exc
    names: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        first = _FIELD_SEP.split(line, maxsplit=1)[0].strip("\"'")
        if first:
            names.append(first)
    if not names:
        raise CapeFileError(f"regulators: {p} lists no names (blank and '#' lines are skipped)")
    return list(dict.fromkeys(names))


def listed_regulators(spec: Any, var: Any = None) -> tuple[list[str], str]:
    """The names a ``regulators`` value lists, and how it was given.

    Parameters
    ----------
    spec
        A value accepted by :func:`check_regulators` (not None).
    var
        ``adata.var`` (a DataFrame indexed by the feature names), needed for ``"var:COLUMN"``.

    Returns
    -------
    names, source
        The listed names (repeats removed, in order) and a short description of the source:
        the bundled name, ``"var:COLUMN"``, the file path as given, or ``"list"``.

    Raises
    ------
    CapeFileError
        As :func:`read_regulator_file`; a bundled list that is not installed.
    CapeDataError
        ``"var:COLUMN"`` on data without ``var``, a missing column, or a column that is not
        boolean (True/False, or 0/1 without missing values).
    """
    spec = check_regulators(spec)
    if isinstance(spec, tuple):
        return list(dict.fromkeys(spec)), "list"
    if spec in BUNDLED:
        path = bundled_path(spec)
        if not path.is_file():
            raise CapeFileError(f"regulators: the bundled list {spec!r} is not installed ({path} is missing)")
        return read_regulator_file(path), spec
    if spec.startswith(VAR_PREFIX):
        column = spec[len(VAR_PREFIX):]
        if var is None:
            raise CapeDataError(f"regulators={spec!r}: the data have no var table (pass an AnnData, or a list or file)")
        if column not in var.columns:
            cols = ", ".join(repr(str(c)) for c in list(var.columns)[:10]) or "none"
            raise CapeDataError(f"regulators={spec!r}: var has no column {column!r} (columns: {cols})")
        col = var[column]
        values = col.to_numpy()
        if col.isna().any() or not (col.dtype == bool or set(np.unique(values).tolist()) <= {0, 1}):
            raise CapeDataError(
                f"regulators={spec!r}: var[{column!r}] must be boolean (True for a regulator), got dtype {col.dtype}"
            )
        return [str(n) for n in var.index[values.astype(bool)]], spec
    return read_regulator_file(spec), spec


def regulators_fingerprint(spec: Any) -> str:
    """Hash of the names a ``regulators`` value lists, for a cache key: a file's or bundled
    list's content (its path alone would not change when the file does); ``""`` for None and
    for ``"var:COLUMN"``, whose content is the data's (keyed by the upstream stage).

    Raises
    ------
    CapeFileError, CapeConfigError
        As :func:`listed_regulators`.
    """
    spec = check_regulators(spec)
    if spec is None or (isinstance(spec, str) and spec.startswith(VAR_PREFIX)):
        return ""
    names, _ = listed_regulators(spec)
    return _names_hash(names)


def _names_hash(names: Sequence[str]) -> str:
    """BLAKE2b-128 of the sorted, distinct names, one per line."""
    return hash_bytes("\n".join(sorted(set(names))))


@dataclass(frozen=True)
class Regulators:
    """A regulator list matched against the features (:func:`resolve_regulators`).

    Attributes
    ----------
    index
        ``(R,)`` int64, sorted: the columns of the features that may be parents.
    source
        How the list was given (``"human"``, ``"var:tf"``, a path, ``"list"``).
    n_listed
        Distinct names the list holds.
    names_hash
        BLAKE2b-128 of the sorted distinct listed names (:func:`regulators_fingerprint`).
    """

    index: np.ndarray
    source: str
    n_listed: int
    names_hash: str

    def summary(self) -> dict[str, Any]:
        """What the graph's ``params["regulators"]`` records: source, counts and the hash."""
        return {"source": self.source, "n_listed": self.n_listed, "n_among_features": int(self.index.size),
                "hash": self.names_hash}


def resolve_regulators(spec: Any, names: Any, data: Any = None) -> Regulators:
    """Match a ``regulators`` value against the features ``names`` (exact, case-sensitive).

    Parameters
    ----------
    spec
        A value of ``DiscoverConfig.regulators`` (not None).
    names
        ``(M,)`` feature names, in column order.
    data
        The data (AnnData for ``"var:COLUMN"``); only its ``var`` is read.

    Returns
    -------
    Regulators

    Raises
    ------
    CapeConfigError
        None of the listed names is a feature (a species or gene-ID mismatch is likely; the
        message shows some of both, and how many would match ignoring case).
    CapeFileError, CapeDataError
        As :func:`listed_regulators`.

    Examples
    --------
    >>> reg = resolve_regulators(["SOX2", "PAX6", "Myc"], ["SOX2", "GAPDH", "PAX6", "MYC"])
    >>> reg.index.tolist(), reg.n_listed
    ([0, 2], 3)
    """
    var = getattr(data, "var", None) if hasattr(data, "var_names") else None  # AnnData (an ndarray has .var())
    listed, source = listed_regulators(spec, var)
    feats = np.asarray([str(n) for n in names], dtype=object)
    member = np.isin(feats, np.asarray(listed, dtype=object))
    index = np.flatnonzero(member).astype(np.int64)
    if index.size == 0:
        folded = {n.casefold() for n in listed}
        n_fold = sum(f.casefold() in folded for f in feats.tolist())
        hint = (f"; {n_fold} match when case is ignored (names are matched exactly)" if n_fold
                else "; a species or gene-ID mismatch (symbols against Ensembl IDs, human against mouse)?")
        raise CapeConfigError(
            f"regulators={source!r}: none of the {len(listed):,} listed names is among the {feats.size:,} features "
            f"(features: {', '.join(map(repr, feats[:5].tolist()))}, …; listed: "
            f"{', '.join(map(repr, listed[:5]))}, …){hint}"
        )
    logger.info("regulators: %s of %s listed (%s) are among the %s features", f"{index.size:,}",
                f"{len(listed):,}", source, f"{feats.size:,}")
    return Regulators(index=index, source=source, n_listed=len(listed), names_hash=_names_hash(listed))


def parent_mask(index: Any, m: int) -> np.ndarray:
    """``(M,)`` bool: True at the features ``index`` (``(R,)`` ints) lists, the ones that may be parents.

    Raises
    ------
    CapeConfigError
        ``index`` is empty, not integer or outside ``[0, M)``.
    """
    reg = np.unique(np.asarray(index))
    if reg.size == 0 or reg.dtype.kind not in "iu" or reg[0] < 0 or reg[-1] >= m:
        raise CapeConfigError(f"regulators: expected a non-empty array of feature indices in [0, {m}), got {index!r}")
    out = np.zeros(m, dtype=bool)
    out[reg] = True
    return out
