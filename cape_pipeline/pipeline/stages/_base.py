"""What every stage shares: :class:`Stage`, :class:`StageContext`, the AnnData artifact helpers,
device checks and the export of an artifact into ``--out``."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anndata as ad

from cape_pipeline._utils import atomic_path, hash_array, hash_bytes, write_json_atomic
from cape_pipeline.errors import CapeFileError

log = logging.getLogger(__name__)


@dataclass
class StageContext:
    """What a stage sees besides its inputs and config: the source and whether to draw progress
    bars (the run's seed and device reach the stages through their configs)."""

    source: str
    progress: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds each earlier stage took (for cache hits: when it was computed), for the report."""


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
    export_also
        Upstream stages whose products ``--out`` also receives when this stage is the last
        (train and evaluate add the encodings export).
    needs
        ``needs(configs) -> inputs`` when the inputs depend on parameters (train with a ready
        ``encodings`` directory does not need Steps I–III); default: ``inputs``.
    check
        ``check(configs)`` validates parameters that depend on other stages' configs (train's
        model width follows ``embed.dim``); raises :class:`CapeConfigError`. Called with every
        stage's config before the first stage runs.
    derive
        ``derive(configs, source) -> config``: this stage's config with the parameters that
        follow from the other stages' configs filled in (discover: the perturbation task's test
        split, which Step I must not see), before the cache keys are computed, so they are
        part of the key.
    doc_from
        ``"module:function"`` names of the functions whose numpydoc ``Parameters`` describe
        the config fields that the config's own ``Attributes`` section does not
        (``cape params``; imported only when asked for).
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
    export_also: tuple[str, ...] = ()
    needs: Callable[[Mapping[str, Any]], tuple[str, ...]] | None = None
    check: Callable[[Mapping[str, Any]], None] | None = None
    derive: Callable[[Mapping[str, Any], str | None], Any] | None = None
    doc_from: tuple[str, ...] = ()

    def inputs_for(self, configs: Mapping[str, Any]) -> tuple[str, ...]:
        """Upstream stages this run of the stage reads, given every stage's config."""
        return self.needs(configs) if self.needs is not None else self.inputs


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


def _copy_atomic(src: Path, dst: Path) -> Path:
    """Copy ``src`` to ``dst`` under a temporary name, then rename (never a half-copied file)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)
    return dst



def config_params(cfg: Any) -> dict[str, Any]:
    """A stage config as a plain JSON-able dict (hashed into the cache key)."""
    d = asdict(cfg)
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


def export_artifact(stage: Stage, artifact: Path, out: Path) -> list[Path]:
    """Copy the stage's exported files and its manifest from ``artifact`` into ``out``.

    Each file is copied to a temporary name and renamed, so ``out`` never holds a half-copied
    file. Existing files of the same names are replaced, and a file of ``export_files`` that
    this artifact lacks (``edge_scores.parquet`` of a graph without scores) is removed from
    ``out``, so an earlier run's file is never left beside this run's. A stage with an
    ``export`` hook decides itself what to write.
    """
    out.mkdir(parents=True, exist_ok=True)
    if stage.export is not None:
        return stage.export(artifact, out)
    for name in stage.export_files:
        if not (artifact / name).is_file():
            (out / name).unlink(missing_ok=True)
    names = {name: name for name in stage.export_files if (artifact / name).is_file()}
    written = [_copy_atomic(artifact / name, out / name) for name in names]
    return [*written, _write_export_manifest(stage.name, artifact, out, names)]


def _write_export_manifest(stage: str, artifact: Path, out: Path, names: Mapping[str, str]) -> Path:
    """Write ``<stage>_manifest.json`` (``discover_manifest.json``, ``encode_manifest.json``, …)
    into ``out``: the artifact's cache manifest with ``files`` rewritten for ``out`` (``names``:
    name in ``out`` → path inside the artifact). Every path it lists exists in ``out``.

    Fields: ``stage`` (str) and ``key`` (32 hex, the cache key: hash of the parameters, the
    upstream keys, the input data, the code and the thread count); ``params`` (the stage's
    config, every field); ``source`` (the data source as given to ``cape run``); ``upstream``
    (upstream stage → its cache key); ``timings`` (``seconds``, the stage's wall time when it
    ran); ``summary`` (the few numbers printed after the stage, e.g. ``n_edges``; encode:
    ``d``, ``scale``, ``max_norm_e``, ``max_abs_angle``, ``median_abs_angle``); ``files``
    (exported file name → ``size`` in bytes and ``blake2b``, its BLAKE2b-128 hex checksum);
    ``versions`` (Python and library versions); ``code_fingerprint`` (hash of the package's
    files); ``created`` (UTC time the artifact was stored, ISO 8601); ``cache_artifact`` (the
    cache directory the files came from)."""
    cache_manifest = json.loads((artifact / "manifest.json").read_text())
    files = {dst: cache_manifest["files"][src] for dst, src in names.items()}
    path = out / f"{stage}_manifest.json"
    write_json_atomic(path, {**cache_manifest, "files": files, "cache_artifact": str(artifact.resolve())})
    return path


