"""Stages ingest (read a file or catalog dataset into AnnData) and preprocess (QC, normalization, feature selection)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anndata as ad

from cape_pipeline._utils import atomic_path, canonical_json, hash_bytes, hash_file
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
    from cape_pipeline.io import read

    return read(
        ctx.source,
        modality=cfg.modality,
        label_columns=list(cfg.label_columns) if cfg.label_columns is not None else None,
        index_column=cfg.index_column,
        backed=cfg.backed,
        **cfg.loader_kwargs,
    )


def _ingest_save(adata: ad.AnnData, d: Path) -> None:
    """In-memory data is written as ``adata.h5ad``; a backed (larger than memory) file is not
    copied: ``backed_source.json`` records its path, and the cache key already holds its
    content hash, so a changed file never matches this artifact."""
    if adata.isbacked:
        ref = {"path": str(Path(adata.filename).resolve()), "uns": adata.uns.get("cape_ingest", {})}
        with atomic_path(d / "backed_source.json") as tmp:
            tmp.write_text(json.dumps(ref, indent=1, default=str))
    else:
        save_adata(adata, d / "adata.h5ad")


def _ingest_load(d: Path) -> ad.AnnData:
    ref = d / "backed_source.json"
    if ref.is_file():
        from cape_pipeline.io import read_h5ad

        info = json.loads(ref.read_text())
        adata = read_h5ad(info["path"], backed=True)
        adata.uns["cape_ingest"] = info["uns"]
        return adata
    return load_adata(d / "adata.h5ad")


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
        return "file:" + hash_file(p)
    entry = get_entry(ctx.source)
    definition = hash_bytes(canonical_json(asdict(entry)))
    if entry.bundled:
        return f"bundled:{entry.name}:{definition}"
    local = cfg.loader_kwargs.get("path") or (os.environ.get(entry.path_env) if entry.path_env else None)
    if local and Path(local).is_file():
        return f"local:{definition}:" + hash_file(Path(local))
    return "missing:" + entry.name  # the loader will raise a clear error


# ---------------------------------------------------------------------------- preprocess
def _preprocess_run(inputs: Mapping[str, Any], cfg: PreprocessConfig, ctx: StageContext) -> ad.AnnData:
    return preprocess(inputs["ingest"], cfg)


INGEST_STAGE = Stage(
    name="ingest",
    config_cls=IngestConfig,
    inputs=(),
    run=_ingest_run,
    save=_ingest_save,
    load=_ingest_load,
    export_files=("adata.h5ad", "backed_source.json"),
    fingerprint=_ingest_fingerprint,
    summary=_adata_summary,
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
