"""The product of Step III, :class:`CapeEncodings`, and its export directory.

Paper 000, Sec. 3.5 and App. A.2.3. Export directory (fixed file names, readable by
pandas/pyarrow alone)::

    encodings.parquet   one row per feature: feature, pagerank, angle_0..angle_{d-1},
                        poincare_0..poincare_{d-1}, hyperboloid_0..hyperboloid_d (float64)
    dag.parquet         the causal DAG, one row per edge: source, target, weight, and score,
                        qvalue where Step I scored pairs (CausalGraph.write_parquet; absent
                        when no graph was given)
    edge_scores.parquet every pair Step I scored: source, target, score, the algorithm's
                        statistics, in_dag (CausalGraph.write_parquet; only when it scored pairs)
    manifest.json       format, package version, d, scale, frequencies, parameters, data fingerprint
                        (manifest_extra), BLAKE2b checksum and size of each file
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cape_pipeline._utils import (
    atomic_dir,
    atomic_path,
    hash_file,
    write_json_atomic,
)
from cape_pipeline.causal.graph import EDGE_SCORES_FILE, CausalGraph
from cape_pipeline.encodings._checks import _validate_arrays
from cape_pipeline.encodings.config import DEFAULT_SCALE
from cape_pipeline.errors import CapeConfigError, CapeDataError, CapeFileError

__all__ = [
    "CapeEncodings",
    "load_encodings",
    "ENCODINGS_FILE",
    "DAG_FILE",
    "EDGE_SCORES_FILE",
    "MANIFEST_FILE",
    "FORMAT_NAME",
    "FORMAT_VERSION",
]

log = logging.getLogger(__name__)

ENCODINGS_FILE = "encodings.parquet"
DAG_FILE = "dag.parquet"
MANIFEST_FILE = "manifest.json"
FORMAT_NAME = "cape-encodings"
FORMAT_VERSION = 1

_RESERVED_KEYS = frozenset(
    {
        "format",
        "format_version",
        "cape_pipeline_version",
        "n_features",
        "d",
        "scale",
        "frequencies",
        "geometry",
        "embed_params",
        "files",
        "has_dag",
    }
)


@dataclass
class CapeEncodings:
    """CAPE positional encodings of M features: the product users take away (Step III).

    Attributes
    ----------
    feature_names
        ``(M,)`` object array of str, unique; row order of every array.
    angles
        ``(M, d)`` float64 rotary angles φ = scale · e in radians (Sec. 3.5, below Eq. 25), or
        φ_i = scale · ω_i · e_i with per-pair ``frequencies`` ω; angle i rotates the
        model dimension pair (2i, 2i+1), see :func:`cape_pipeline.encodings.rope.apply_rotary`.
    poincare
        ``(M, d)`` float64 Poincaré-ball points e (Eq. A.22), ‖e‖ < 1.
    hyperboloid
        ``(M, d+1)`` float64 Lorentz points p (Eq. 11), ⟨p, p⟩_l = −1.
    pagerank
        ``(M,)`` float64 causal PageRank π (Eq. 18).
    scale
        The constant c of φ = c·e (default π/4).
    frequencies
        ``(d,)`` float64 per-pair frequency multipliers ω (the ``geometric`` map of
        :class:`~cape_pipeline.encodings.EncodeConfig`), or ``None`` for the paper's single
        frequency (ω_i = 1).
    graph
        The causal DAG the encodings came from, or ``None``.
    params
        Parameters of the embedding (see :func:`cape_pipeline.hyperbolic.embed`).
    geometry
        ``"hyperbolic"`` or ``"euclidean"`` (w/o-hyperbolic ablation).
    manifest
        The manifest read by :func:`load_encodings` (empty for fresh encodings).
    """

    feature_names: np.ndarray
    angles: np.ndarray
    poincare: np.ndarray
    hyperboloid: np.ndarray
    pagerank: np.ndarray
    scale: float = DEFAULT_SCALE
    frequencies: np.ndarray | None = None
    graph: CausalGraph | None = None
    params: dict[str, Any] = field(default_factory=dict)
    geometry: str = "hyperbolic"
    manifest: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_anndata(cls, adata: Any, *, angles_key: str = "cape_angles", graph_key: str = "cape_dag") -> CapeEncodings:
        """The encodings :mod:`cape_pipeline.tl` wrote into ``adata`` (``tl.discover`` →
        ``tl.embed`` → ``tl.encode``), ready for :meth:`save`; see
        :func:`cape_pipeline.encodings._anndata.encodings_from_anndata` (keys read, errors)."""
        from cape_pipeline.encodings._anndata import encodings_from_anndata

        return encodings_from_anndata(cls, adata, angles_key=angles_key, graph_key=graph_key)

    @property
    def d(self) -> int:
        """Number of angles per feature (= D/2 for a D-dimensional model)."""
        return int(self.angles.shape[1])

    @property
    def n_features(self) -> int:
        """Number of features M."""
        return int(self.angles.shape[0])

    def __repr__(self) -> str:
        return (
            f"CapeEncodings(n_features={self.n_features}, d={self.d}, scale={self.scale:.6g}, "
            + ("" if self.frequencies is None else
               f"frequencies={self.frequencies[0]:.3g}…{self.frequencies[-1]:.3g}, ")
            + f"geometry={self.geometry!r}, graph={'yes' if self.graph is not None else 'no'})"
        )

    # ------------------------------------------------------------------ tables
    def to_frame(self) -> pd.DataFrame:
        """One row per feature: ``feature``, ``pagerank``, ``angle_*``, ``poincare_*``, ``hyperboloid_*``."""
        d = self.d
        cols: dict[str, Any] = {
            "feature": self.feature_names.astype(str),
            "pagerank": self.pagerank.astype(np.float64),
        }
        cols.update({f"angle_{i}": self.angles[:, i] for i in range(d)})
        cols.update({f"poincare_{i}": self.poincare[:, i] for i in range(d)})
        cols.update({f"hyperboloid_{i}": self.hyperboloid[:, i] for i in range(d + 1)})
        return pd.DataFrame(cols)

    # ------------------------------------------------------------------ align
    def align(self, var_names: Sequence[str] | Any, *, missing: str = "error") -> np.ndarray:
        """Angles in the feature order of another dataset.

        Parameters
        ----------
        var_names
            Feature names of the target dataset (e.g. ``adata.var_names``), length N.
        missing
            ``"error"``: raise when a name has no encoding. ``"zero"``: give it angle 0 in every
            pair (the identity rotation, i.e. no positional information) and log a warning
            with their count. Either way it is an error when no name has an encoding.

        Returns
        -------
        numpy.ndarray
            ``(N, d)`` float64 angles in radians, row j for ``var_names[j]``.

        Raises
        ------
        CapeDataError
            When none of ``var_names`` is in the encodings (whatever ``missing``; the message
            shows the first names of both, since the encodings were made for other data); with
            ``missing="error"``, when some are missing, naming up to 10 and their count.
        CapeConfigError
            If ``missing`` is not ``"error"`` or ``"zero"``.

        Examples
        --------
        >>> import numpy as np
        >>> enc = CapeEncodings(np.array(["a", "b"], dtype=object), np.ones((2, 1)),
        ...                     np.ones((2, 1)) * 0.5, np.zeros((2, 2)), np.full(2, 0.5))
        >>> enc.align(["b", "c"], missing="zero")[:, 0]
        array([1., 0.])
        """
        if missing not in ("error", "zero"):
            raise CapeConfigError(f"missing: expected 'error' or 'zero', got {missing!r}")
        names = np.asarray([str(v) for v in var_names], dtype=object)
        index = pd.Index(self.feature_names.astype(str))
        pos = index.get_indexer(names.astype(str))
        absent = pos < 0
        if names.size and absent.all():

            def first(a: np.ndarray) -> str:
                return ", ".join(repr(str(s)) for s in a[:5]) + (", ..." if a.size > 5 else "")

            raise CapeDataError(
                f"encodings: none of the data's {names.size} features are in the encodings "
                f"(first data features: {first(names)}; first encoding features: "
                f"{first(self.feature_names)}); the encodings were made for other data"
            )
        if absent.any() and missing == "zero":
            miss = names[absent]
            log.warning(
                "encodings: %d of %d data features have no encoding and get angle 0 (no positional "
                "information): %s%s",
                miss.size,
                names.size,
                ", ".join(repr(str(s)) for s in miss[:5]),
                f" and {miss.size - 5} more" if miss.size > 5 else "",
            )
        if absent.any() and missing == "error":
            miss = names[absent]
            shown = ", ".join(repr(s) for s in miss[:10])
            more = f" and {miss.size - 10} more" if miss.size > 10 else ""
            raise CapeDataError(
                f"{miss.size} of {names.size} features have no CAPE encoding: {shown}{more}. "
                "Subset the data to encoded features, or pass missing='zero' to give them angle 0."
            )
        out = np.zeros((names.size, self.d), dtype=np.float64)
        out[~absent] = self.angles[pos[~absent]]
        return out

    # ------------------------------------------------------------------ save
    def save(
        self,
        dir: str | os.PathLike[str],
        *,
        manifest_extra: dict[str, Any] | None = None,
        overwrite: bool = False,
    ) -> Path:
        """Write ``encodings.parquet``, ``dag.parquet`` (with ``edge_scores.parquet`` when the
        graph has :attr:`~cape_pipeline.causal.CausalGraph.edge_scores`) and ``manifest.json``
        into ``dir``, atomically (the module docstring lists each file's columns).

        The files are written into a temporary sibling directory that is renamed onto ``dir``
        at the end, so readers see either the old directory or the complete new one.

        Parameters
        ----------
        dir
            Target directory.
        manifest_extra
            JSON-serializable entries added to the manifest (e.g. ``data_fingerprint``,
            upstream parameters); must not reuse a reserved key.
        overwrite
            Replace an existing ``dir``.

        Returns
        -------
        pathlib.Path
            ``dir``.

        Raises
        ------
        CapeFileError
            If ``dir`` exists and ``overwrite`` is False, or is a file.
        CapeConfigError
            If ``manifest_extra`` reuses a reserved key.
        """
        target = Path(dir)
        if target.exists() and not overwrite:
            raise CapeFileError(f"{target}: already exists; pass overwrite=True to replace it")
        if target.exists() and not target.is_dir():
            raise CapeFileError(f"{target}: exists and is not a directory")
        extra = dict(manifest_extra or {})
        clash = sorted(set(extra) & _RESERVED_KEYS)
        if clash:
            raise CapeConfigError(f"manifest_extra: keys {clash} are reserved by the manifest")
        _validate_arrays(self, where="CapeEncodings")

        import pyarrow as pa
        import pyarrow.parquet as pq

        from cape_pipeline import __version__

        with atomic_dir(target) as tmp:
            table = pa.Table.from_pandas(self.to_frame(), preserve_index=False)
            meta = dict(table.schema.metadata or {})
            meta[b"cape.scale"] = repr(float(self.scale)).encode()
            meta[b"cape.d"] = str(self.d).encode()
            table = table.replace_schema_metadata(meta)
            with atomic_path(tmp / ENCODINGS_FILE) as p:
                pq.write_table(table, p)
            files = [ENCODINGS_FILE]
            if self.graph is not None:
                self.graph.write_parquet(tmp / DAG_FILE)
                files.append(DAG_FILE)
                if (tmp / EDGE_SCORES_FILE).is_file():
                    files.append(EDGE_SCORES_FILE)
            manifest: dict[str, Any] = {
                "format": FORMAT_NAME,
                "format_version": FORMAT_VERSION,
                "cape_pipeline_version": __version__,
                "n_features": self.n_features,
                "d": self.d,
                "scale": float(self.scale),
                "frequencies": None if self.frequencies is None else [float(w) for w in self.frequencies],
                "geometry": self.geometry,
                "embed_params": self.params,
                "has_dag": self.graph is not None,
                "files": {
                    f: {"blake2b": hash_file(tmp / f), "bytes": (tmp / f).stat().st_size}
                    for f in files
                },
                **extra,
            }
            write_json_atomic(tmp / MANIFEST_FILE, manifest)
        self.manifest = manifest
        return target


# ---------------------------------------------------------------------------------------- load
def load_encodings(dir: str | os.PathLike[str]) -> CapeEncodings:
    """Read and validate an export written by :meth:`CapeEncodings.save`.

    Checks that every file exists and matches its manifest checksum, that the columns and
    shapes agree with the manifest's d, and the invariants (finite, ‖e‖ < 1, φ = scale·ω·e,
    e = f_d(p) of Eq. A.22, ⟨p, p⟩_l = −1) and that the DAG's feature names equal the encodings'.

    Parameters
    ----------
    dir
        Directory holding ``encodings.parquet``, ``manifest.json`` and (optionally) ``dag.parquet``.

    Returns
    -------
    CapeEncodings
        With ``manifest`` set to the parsed ``manifest.json``.

    Raises
    ------
    CapeFileError
        If the directory or a file is missing, unreadable, or does not match its checksum.
    CapeDataError
        If columns, shapes or values are invalid.
    """
    import pyarrow.parquet as pq

    root = Path(dir)
    if not root.is_dir():
        raise CapeFileError(f"{root}: no such directory (expected a CAPE encodings export)")
    mpath = root / MANIFEST_FILE
    if not mpath.is_file():
        raise CapeFileError(f"{mpath}: missing; {root} is not a CAPE encodings export")
    try:
        manifest = json.loads(mpath.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CapeFileError(f"{mpath}: not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise CapeFileError(f"{mpath}: not a {FORMAT_NAME!r} manifest")
    if int(manifest.get("format_version", -1)) > FORMAT_VERSION:
        raise CapeFileError(
            f"{mpath}: format_version {manifest.get('format_version')} is newer than this "
            f"cape_pipeline understands ({FORMAT_VERSION}); upgrade cape_pipeline"
        )
    files = manifest.get("files", {})
    required = [ENCODINGS_FILE] + ([DAG_FILE] if manifest.get("has_dag") else [])
    required += [EDGE_SCORES_FILE] if EDGE_SCORES_FILE in files and manifest.get("has_dag") else []
    for fname in required:
        fpath = root / fname
        if not fpath.is_file():
            raise CapeFileError(f"{fpath}: missing (listed in {MANIFEST_FILE})")
        want = files.get(fname, {}).get("blake2b")
        if want is None:
            raise CapeFileError(f"{mpath}: no checksum recorded for {fname}")
        if hash_file(fpath) != want:
            raise CapeFileError(
                f"{fpath}: checksum does not match {MANIFEST_FILE} (file modified or corrupt)"
            )
    epath = root / ENCODINGS_FILE
    try:
        df = pq.read_table(epath).to_pandas()
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise CapeFileError(f"{epath}: not a readable Parquet file ({exc})") from exc
    d = int(manifest.get("d", -1))
    scale = float(manifest.get("scale", DEFAULT_SCALE))
    freq = manifest.get("frequencies")  # absent from exports made before per-pair frequencies
    if freq is not None and not (isinstance(freq, list) and all(isinstance(w, (int, float)) for w in freq)):
        raise CapeFileError(f"{mpath}: frequencies: expected null or a list of {d} numbers")
    want_cols = (
        ["feature", "pagerank"]
        + [f"angle_{i}" for i in range(d)]
        + [f"poincare_{i}" for i in range(d)]
        + [f"hyperboloid_{i}" for i in range(d + 1)]
    )
    absent = [c for c in want_cols if c not in df.columns]
    if d < 1 or absent:
        raise CapeDataError(f"{epath}: missing columns {absent[:6]} (manifest d={d})")
    if len(df) != int(manifest.get("n_features", len(df))):
        raise CapeDataError(
            f"{epath}: {len(df)} rows, manifest says n_features={manifest.get('n_features')}"
        )

    def block(prefix: str, n: int) -> np.ndarray:
        return df[[f"{prefix}_{i}" for i in range(n)]].to_numpy(dtype=np.float64)

    graph = CausalGraph.read_parquet(root / DAG_FILE) if manifest.get("has_dag") else None
    enc = CapeEncodings(
        feature_names=df["feature"].astype(str).to_numpy(dtype=object),
        angles=block("angle", d),
        poincare=block("poincare", d),
        hyperboloid=block("hyperboloid", d + 1),
        pagerank=df["pagerank"].to_numpy(dtype=np.float64),
        scale=scale,
        frequencies=None if freq is None else np.asarray(freq, dtype=np.float64),
        graph=graph,
        params=dict(manifest.get("embed_params") or {}),
        geometry=str(manifest.get("geometry", "hyperbolic")),
        manifest=manifest,
    )
    _validate_arrays(enc, where=str(epath))
    if (
        graph is not None
        and graph.feature_names.astype(str).tolist() != enc.feature_names.astype(str).tolist()
    ):
        raise CapeDataError(f"{root / DAG_FILE}: feature names differ from {ENCODINGS_FILE}")
    return enc
