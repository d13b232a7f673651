"""Stages ingest (read a file or catalog dataset into AnnData) and preprocess (QC, normalization, feature selection)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anndata as ad

from cape_pipeline._utils import array_bytes, atomic_path, canonical_json, hash_bytes, hash_file
from cape_pipeline.errors import CapeConfigError
from cape_pipeline.pipeline.stages._base import (
    Stage,
    StageContext,
    _adata_summary,
    load_adata,
    save_adata,
)
from cape_pipeline.pp import PreprocessConfig, preprocess


# ---------------------------------------------------------------------------- ingest
@dataclass(frozen=True)
class IngestConfig:
    """Parameters of the ingest stage (see :func:`cape_pipeline.read`).

    Unknown ``ingest.*`` parameters go to ``loader_kwargs`` and on to the catalog loader
    (e.g. ``ingest.n_nodes=50`` for ``synthetic-mlp``, ``ingest.path=FILE`` for ``norman``).

    Attributes
    ----------
    loader_kwargs
        Every other ``ingest.NAME=VALUE``: passed to the catalog entry's loader (e.g.
        ``ingest.path=FILE`` for a dataset read from a local copy, ``ingest.n_nodes=50`` for
        ``synthetic-mlp``).
    """

    modality: str | None = None
    label_columns: tuple[str, ...] | None = None
    index_column: str | None = None
    backed: bool | None = None
    loader_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from cape_pipeline.io.catalog import MODALITIES

        if self.modality is not None and self.modality not in MODALITIES:
            raise CapeConfigError(f"modality: expected one of {', '.join(MODALITIES)}, got {self.modality!r}")


def _ingest_run(inputs: Mapping[str, Any], cfg: IngestConfig, ctx: StageContext) -> ad.AnnData:
    from cape_pipeline._lazy import is_lazy
    from cape_pipeline.io import read

    adata = read(
        ctx.source,
        modality=cfg.modality,
        label_columns=list(cfg.label_columns) if cfg.label_columns is not None else None,
        index_column=cfg.index_column,
        backed=cfg.backed,
        **cfg.loader_kwargs,
    )
    if is_lazy(adata.X):  # what _ingest_load needs to open the same lazy table again
        adata.uns["cape_ingest"]["index_column"] = cfg.index_column
    return adata


# Content hashes of source files by their stat signature: the cache key and the saved reference
# of one run hash a file larger than memory once.
_HASHES: dict[tuple[str, int, int, int, int], str] = {}


def _stat_signature(path: Path) -> tuple[int, int, int, int]:
    """Size, mtime, ctime and inode: any write, rename or ``touch`` changes one of them."""
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def _source_hash(path: Path, *, fresh: bool = False) -> str:
    """Streamed content hash of ``path`` (:func:`hash_file`), memoized on its stat signature;
    ``fresh`` hashes it again (the cache key always does)."""
    key = (str(path.resolve()), *_stat_signature(path))
    if fresh or key not in _HASHES:
        _HASHES[key] = hash_file(path)
    return _HASHES[key]


def _lazy_source(adata: ad.AnnData) -> tuple[str, Path] | None:
    """``("h5ad", file)`` for a backed AnnData, ``("parquet", file)`` for a lazily read Parquet
    file source, ``None`` for data held in memory (saved as ``adata.h5ad``)."""
    from cape_pipeline._lazy import is_lazy

    if adata.isbacked:
        return "h5ad", Path(adata.filename).resolve()
    src = Path(str(adata.uns.get("cape_ingest", {}).get("source", ""))).expanduser()
    if is_lazy(adata.X) and src.suffix.lower() in (".parquet", ".pq") and src.is_file():
        return "parquet", src.resolve()
    return None


def _ingest_save(adata: ad.AnnData, d: Path) -> None:
    """In-memory data is written as ``adata.h5ad``. A backed ``.h5ad`` or a lazily read Parquet
    file (larger than memory) is not copied: ``backed_source.json`` records its path, format,
    stat signature and content hash (the one in the cache key), so a changed file never matches
    this artifact and is refused when the artifact is loaded."""
    lazy = _lazy_source(adata)
    if lazy is None:
        save_adata(adata, d / "adata.h5ad")
        return
    fmt, path = lazy
    uns = adata.uns.get("cape_ingest", {})
    ref = {
        "path": str(path),
        "format": fmt,
        "stat": list(_stat_signature(path)),
        "content": _source_hash(path),
        "n_obs": int(adata.n_obs),
        "n_vars": int(adata.n_vars),
        "uns": uns,
    }
    with atomic_path(d / "backed_source.json") as tmp:
        tmp.write_text(json.dumps(ref, indent=1, default=str))


def _check_unchanged(info: Mapping[str, Any], d: Path) -> Path:
    """The referenced source file, after checking that it still holds the content the artifact
    was made from (its stat signature first; the content hash when that differs)."""
    from cape_pipeline.errors import CapeFileError

    path = Path(info["path"])
    if not path.is_file():
        raise CapeFileError(f"{path}: source of the cached ingest artifact {d} is gone; run again")
    same_stat = list(_stat_signature(path)) == info.get("stat")
    if "content" in info and not same_stat and _source_hash(path) != info["content"]:
        raise CapeFileError(
            f"{path}: changed since the cached ingest artifact {d} was made from it; "
            "run again to ingest the new content"
        )
    return path


def _ingest_load(d: Path) -> ad.AnnData:
    ref = d / "backed_source.json"
    if not ref.is_file():
        return load_adata(d / "adata.h5ad")
    info = json.loads(ref.read_text())
    path = _check_unchanged(info, d)
    uns = info["uns"]
    if info.get("format") == "parquet":
        from cape_pipeline.io.readers import read_parquet_lazy

        adata = read_parquet_lazy(path, label_columns=uns.get("label_columns") or None,
                                  index_column=uns.get("index_column"))
    else:
        from cape_pipeline.io import read_h5ad

        adata = read_h5ad(path, backed=True)
    adata.uns["cape_ingest"] = uns
    return adata


def _streamed_x_hash(adata: ad.AnnData) -> str:
    """Content hash of a backed or lazy ``X``, one row block in memory at a time. For a dense
    ``X`` it equals :func:`cape_pipeline._utils.hash_array` of the matrix in memory; a sparse
    one hashes each block's canonical CSR parts (another digest than the in-memory one)."""
    import hashlib

    import dask
    import numpy as np
    import scipy.sparse as sp

    from cape_pipeline._lazy import backed_as_dask

    x = backed_as_dask(adata)
    h = hashlib.blake2b(digest_size=16)
    sparse = sp.issparse(getattr(x, "_meta", None))
    h.update(f"{'csr-blocks' if sparse else 'dense'}{tuple(x.shape)}{x.dtype}".encode())
    for part in x.to_delayed().ravel():
        (block,) = dask.compute(part, scheduler="synchronous")
        for buf in array_bytes(block if sp.issparse(block) else np.asarray(block, dtype=x.dtype)):
            h.update(buf)
        del block
    return h.hexdigest()


def _ingest_summary(adata: ad.AnnData) -> dict[str, Any]:
    """:func:`_adata_summary`; for a backed or lazy ``X`` its fingerprint is streamed (the
    in-memory one would load ``X``), equal to the in-memory one for dense data."""
    from cape_pipeline._lazy import is_lazy

    if not (adata.isbacked or is_lazy(adata.X)):
        return _adata_summary(adata)
    fp = hash_bytes(
        _streamed_x_hash(adata),
        "\x00".join(adata.var_names.astype(str)),
        "\x00".join(adata.obs_names.astype(str)),
    )
    return {"n_obs": int(adata.n_obs), "n_vars": int(adata.n_vars), "data_fingerprint": fp}


def _ingest_fingerprint(cfg: IngestConfig, ctx: StageContext) -> str:
    """Content hash of the source file, or of the local copy behind a catalog entry. Bundled
    catalog data is identified by its whole catalog entry (name, loader, every field), so a
    catalog (``$CAPE_CATALOG``) that points a known name at other data gets another key; the
    loader's code and the package data it reads are in the code fingerprint of every key."""
    from cape_pipeline.io.catalog import get_entry
    from cape_pipeline.io.readers import check_file_source, is_file_source

    p = Path(ctx.source).expanduser()
    if is_file_source(ctx.source):
        check_file_source(ctx.source)  # missing, a directory, unreadable: one line each
        return "file:" + _source_hash(p, fresh=True)
    entry = get_entry(ctx.source)
    definition = hash_bytes(canonical_json(asdict(entry)))
    if entry.bundled:
        return f"bundled:{entry.name}:{definition}"
    local = cfg.loader_kwargs.get("path") or (os.environ.get(entry.path_env) if entry.path_env else None)
    if local and Path(local).is_file():
        return f"local:{definition}:" + _source_hash(Path(local), fresh=True)
    return "missing:" + entry.name  # the loader will raise a clear error


# ---------------------------------------------------------------------------- preprocess
def _preprocess_run(inputs: Mapping[str, Any], cfg: PreprocessConfig, ctx: StageContext) -> ad.AnnData:
    return preprocess(inputs["ingest"], cfg, copy=True)


INGEST_STAGE = Stage(
    name="ingest",
    config_cls=IngestConfig,
    inputs=(),
    run=_ingest_run,
    save=_ingest_save,
    load=_ingest_load,
    export_files=("adata.h5ad", "backed_source.json"),
    fingerprint=_ingest_fingerprint,
    summary=_ingest_summary,
    extra_field="loader_kwargs",
    doc_from=("cape_pipeline.io.readers:read",),
)

PREPROCESS_STAGE = Stage(
    name="preprocess",
    config_cls=PreprocessConfig,
    inputs=("ingest",),
    run=_preprocess_run,
    save=lambda a, d: save_adata(a, d / "preprocessed.h5ad"),
    load=lambda d: load_adata(d / "preprocessed.h5ad"),
    export_files=("preprocessed.h5ad",),
    summary=_adata_summary,
)
