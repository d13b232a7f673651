"""The stages of the pipeline: each a plain function (inputs, config) → output, plus how its
output is saved, loaded and exported. Caching lives in :mod:`cape_pipeline.pipeline.runner`.

Order (SPEC.md): ingest, preprocess, discover, embed, encode, train, evaluate. A stage is listed
in :data:`STAGES` once it is implemented; the runner reports the others as missing.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anndata as ad

from cape_pipeline._utils import atomic_path, hash_array, hash_bytes, hash_file
from cape_pipeline.errors import CapeFileError
from cape_pipeline.pp import PreprocessConfig, preprocess

STAGE_ORDER = ("ingest", "preprocess", "discover", "embed", "encode", "train", "evaluate")


@dataclass
class StageContext:
    """What a stage sees besides its inputs and config: the source, the run's seed/device and
    whether to draw progress bars."""

    source: str
    seed: int = 0
    device: str = "auto"
    progress: bool = False


@dataclass(frozen=True)
class Stage:
    """One pipeline stage.

    Attributes
    ----------
    name
        Stage name (CLI subcommand, cache folder).
    config_cls
        Frozen dataclass of the stage's parameters.
    inputs
        Names of the upstream stages whose outputs ``run`` receives.
    run
        ``run(inputs: {stage: output}, config, ctx) -> output``.
    save / load
        Write the output into a directory / read it back.
    export_files
        File names (inside the artifact) copied to ``--out``.
    fingerprint
        Optional ``fingerprint(config, ctx) -> str`` identifying external input data (files).
    summary
        ``summary(output) -> dict`` of a few numbers recorded in the manifest and printed.
    extra_field
        Config field that collects unknown parameters (ingest: loader arguments).
    export
        ``export(artifact_dir, out_dir) -> written paths``; default copies ``export_files``.
    """

    name: str
    config_cls: type
    inputs: tuple[str, ...]
    run: Callable[[Mapping[str, Any], Any, StageContext], Any]
    save: Callable[[Any, Path], None]
    load: Callable[[Path], Any]
    export_files: tuple[str, ...]
    fingerprint: Callable[[Any, StageContext], str] | None = None
    summary: Callable[[Any], dict[str, Any]] | None = None
    extra_field: str | None = None
    export: Callable[[Path, Path], list[Path]] | None = None


# ---------------------------------------------------------------------------- AnnData artifacts
def _jsonable_uns(adata: ad.AnnData) -> None:
    """Store our provenance records in ``uns`` as JSON strings (h5ad cannot hold ``None``)."""
    for k in list(adata.uns.keys()):
        if k.startswith("cape_") and isinstance(adata.uns[k], dict):
            adata.uns[k] = json.dumps(adata.uns[k], default=str)


def _restore_uns(adata: ad.AnnData) -> ad.AnnData:
    for k in list(adata.uns.keys()):
        v = adata.uns[k]
        if k.startswith("cape_") and isinstance(v, str) and v[:1] in "{[":
            adata.uns[k] = json.loads(v)
    return adata


def _str_keys(obj: Any) -> Any:
    """Mappings with str keys all the way down (h5ad stores only str keys)."""
    if isinstance(obj, Mapping):
        return {str(k): _str_keys(v) for k, v in obj.items()}
    return obj


def save_adata(adata: ad.AnnData, path: Path) -> None:
    """Write ``adata`` to ``path`` (.h5ad), atomically; ``uns`` mapping keys become str."""
    out = adata.copy()
    for k in list(out.uns.keys()):
        out.uns[k] = _str_keys(out.uns[k])
    _jsonable_uns(out)
    with atomic_path(path) as tmp:
        out.write_h5ad(tmp)


def load_adata(path: Path) -> ad.AnnData:
    """Read an AnnData written by :func:`save_adata`."""
    try:
        return _restore_uns(ad.read_h5ad(path))
    except Exception as exc:
        raise CapeFileError(f"{path}: cannot read cached AnnData ({exc})") from exc


def data_fingerprint(adata: ad.AnnData) -> str:
    """Hash of ``X`` (values, shape, dtype), ``var_names`` and ``obs_names``."""
    return hash_bytes(
        hash_array(adata.X),
        "\x00".join(adata.var_names.astype(str)),
        "\x00".join(adata.obs_names.astype(str)),
    )


def _adata_summary(adata: ad.AnnData) -> dict[str, Any]:
    return {"n_obs": int(adata.n_obs), "n_vars": int(adata.n_vars), "data_fingerprint": data_fingerprint(adata)}


# ---------------------------------------------------------------------------- ingest
@dataclass(frozen=True)
class IngestConfig:
    """Parameters of the ingest stage (see :func:`cape_pipeline.read`).

    Unknown ``ingest.*`` parameters go to ``loader_kwargs`` and on to the catalog loader
    (e.g. ``ingest.n_nodes=50`` for ``synthetic-mlp``, ``ingest.path=FILE`` for ``norman``).
    """

    modality: str | None = None
    label_columns: tuple[str, ...] | None = None
    index_column: str | None = None
    backed: bool | None = None
    loader_kwargs: dict[str, Any] = field(default_factory=dict)


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
    """Content hash of the source file, or of the local copy behind a catalog entry; bundled
    catalog data is identified by its name (it is fixed per package version, which every key
    includes)."""
    from cape_pipeline.io.catalog import get_entry
    from cape_pipeline.io.readers import _READERS

    p = Path(ctx.source).expanduser()
    if p.suffix.lower() in _READERS or os.sep in ctx.source or p.exists():
        if not p.is_file():
            raise CapeFileError(f"{ctx.source}: no such file")
        return "file:" + hash_file(p)
    entry = get_entry(ctx.source)
    if entry.bundled:
        return "bundled:" + entry.name
    local = cfg.loader_kwargs.get("path") or (os.environ.get(entry.path_env) if entry.path_env else None)
    if local and Path(local).is_file():
        return "local:" + hash_file(Path(local))
    return "missing:" + entry.name  # the loader will raise a clear error


# ---------------------------------------------------------------------------- preprocess
def _preprocess_run(inputs: Mapping[str, Any], cfg: PreprocessConfig, ctx: StageContext) -> ad.AnnData:
    return preprocess(inputs["ingest"], cfg)


STAGES: dict[str, Stage] = {
    "ingest": Stage(
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
    ),
    "preprocess": Stage(
        name="preprocess",
        config_cls=PreprocessConfig,
        inputs=("ingest",),
        run=_preprocess_run,
        save=lambda a, d: save_adata(a, d / "preprocessed.h5ad"),
        load=lambda d: load_adata(d / "preprocessed.h5ad"),
        export_files=("preprocessed.h5ad",),
        summary=_adata_summary,
    ),
}


def config_params(cfg: Any) -> dict[str, Any]:
    """A stage config as a plain JSON-able dict (hashed into the cache key)."""
    d = asdict(cfg)
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


def export_artifact(stage: Stage, artifact: Path, out: Path) -> list[Path]:
    """Copy the stage's exported files and its manifest from ``artifact`` into ``out``.

    Each file is copied to a temporary name and renamed, so ``out`` never holds a half-copied
    file. Existing files of the same names are replaced. A stage with an ``export`` hook
    decides itself what to write.
    """
    out.mkdir(parents=True, exist_ok=True)
    if stage.export is not None:
        return stage.export(artifact, out)
    written = []
    for name in (*stage.export_files, "manifest.json"):
        src = artifact / name
        if not src.exists():
            continue
        dst = out / (name if name != "manifest.json" else f"{stage.name}_manifest.json")
        if src.is_dir():
            tmp = out / f".{dst.name}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(src, tmp)
            shutil.rmtree(dst, ignore_errors=True)
            os.rename(tmp, dst)
        else:
            with atomic_path(dst) as tmp:
                shutil.copyfile(src, tmp)
        written.append(dst)
    return written


