"""The stages of the pipeline: each a plain function (inputs, config) → output, plus how its
output is saved, loaded and exported. Caching lives in :mod:`cape_pipeline.pipeline.runner`.

Order (SPEC.md): ingest, preprocess, discover, embed, encode, train, evaluate. A stage is listed
in :data:`STAGES` once it is implemented; the runner reports the others as missing.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anndata as ad
import numpy as np

from cape_pipeline._utils import (
    atomic_path,
    canonical_json,
    hash_array,
    hash_bytes,
    hash_file,
    write_json_atomic,
)
from cape_pipeline.errors import CapeConfigError, CapeDataError, CapeFileError
from cape_pipeline.pp import PreprocessConfig, preprocess

log = logging.getLogger(__name__)

STAGE_ORDER = ("ingest", "preprocess", "discover", "embed", "encode", "train", "evaluate")


@dataclass
class StageContext:
    """What a stage sees besides its inputs and config: the source, the run's seed/device and
    whether to draw progress bars."""

    source: str
    seed: int = 0
    device: str = "auto"
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


def _torch_device(device: str) -> str:
    """``"auto"`` → ``"cuda"`` when available, else ``"cpu"``; other names unchanged."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _check_device(device: str) -> None:
    """Raise :class:`CapeConfigError` unless ``device`` is ``auto``, ``cpu`` or an available
    ``cuda[:i]``."""
    import torch

    try:
        dev = None if device == "auto" else torch.device(device)
    except (RuntimeError, TypeError):
        raise CapeConfigError(f"device: expected auto, cpu or cuda[:i], got {device!r}") from None
    if dev is not None and dev.type == "cuda" and not torch.cuda.is_available():
        raise CapeConfigError(f"device: {device!r} requested but CUDA is not available; use auto or cpu")


def _copy_atomic(src: Path, dst: Path) -> Path:
    """Copy ``src`` to ``dst`` under a temporary name, then rename (never a half-copied file)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)
    return dst


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


# ---------------------------------------------------------------------------- discover
@dataclass(frozen=True)
class DiscoverConfig:
    """Parameters of the discover stage (Step I; see :func:`cape_pipeline.causal.api.discover`).

    ``method="true-dag"`` takes the data's known graph (``varp["true_dag"]``) instead of learning
    one, so later stages can run on ground truth. ``acyclicity=None`` uses the package default;
    ``epochs=None`` the paper's 100 epochs raised to at least ``min_steps`` (5000) AdamW steps;
    ``posterior``, ``min_steps``, ``support`` and ``n_candidates`` (method ``"cape"`` only; None =
    the defaults ``"sampled"``, 5000, ``"low-rank"`` and 20) are passed on as
    :func:`~cape_pipeline.causal.api.discover` options (``--set discover.support=screened`` for
    the screened sparse A at thousands of genes).

    Attributes
    ----------
    method
        ``cape`` (the low-rank NOTEARS-VAE of paper 000), a baseline (``correlation``,
        ``partial-correlation``, ``notears``, ``dag-gnn``, ``notears-low-rank``, ``dagma``,
        ``dagma-mlp``) or ``true-dag`` (the data's known graph, ``varp["true_dag"]``).
    posterior
        ``cape``: ``sampled`` (default; reparameterised Z) or ``mean`` (decoder on μ).
    min_steps
        ``cape`` with ``epochs=None``: the epochs are raised to at least this many AdamW steps
        (default 5000).
    support
        ``cape``: ``low-rank`` (default; A = U Vᵀ, the paper's) or ``screened`` (A sparse on
        screened candidate parents, for thousands of features).
    n_candidates
        ``cape`` with ``support=screened``: candidate parents per feature and screening round
        (default 20).
    """

    method: str = "cape"
    rank: int = 40
    lambda_sparse: float = 1.0
    threshold: float = 0.2
    epochs: int | None = None
    batch_size: int = 128
    lr: float = 3e-3
    acyclicity: str | None = None
    max_outer: int = 20
    device: str = "auto"
    seed: int = 0
    posterior: str | None = None
    min_steps: int | None = None
    support: str | None = None
    n_candidates: int | None = None

    def __post_init__(self) -> None:
        if self.method == "true-dag":
            return
        from cape_pipeline.causal.api import check_options

        check_options(**{k: v for k, v in asdict(self).items() if v is not None and k != "seed"})

def _discover_run(inputs: Mapping[str, Any], cfg: DiscoverConfig, ctx: StageContext) -> Any:
    from cape_pipeline.causal.graph import CausalGraph
    from cape_pipeline.datasets import TRUE_DAG_KEY

    adata = inputs["preprocess"]
    truth = adata.varp[TRUE_DAG_KEY] if TRUE_DAG_KEY in adata.varp else None
    if cfg.method == "true-dag":
        if truth is None:
            raise CapeConfigError(
                f"discover.method='true-dag': {ctx.source} has no known graph (varp['{TRUE_DAG_KEY}'])"
            )
        graph = CausalGraph.from_adjacency(truth, adata.var_names, params={"method": "true-dag"})
    else:
        from cape_pipeline.causal.api import discover_scored

        kwargs = {k: v for k, v in asdict(cfg).items() if v is not None}
        graph, scores = discover_scored(adata, progress=ctx.progress, **kwargs)
        if graph.n_edges == 0:
            top = float(np.abs(scores).max()) if scores is not None else float("nan")
            graph.params["empty_graph_max_abs_weight"] = top
            log.warning(
                "discover: no edge has |weight| above threshold %.3g (largest |A_ij| = %.3g), so the DAG is "
                "empty and the CAPE angles carry no causal structure; lower it, e.g. --set discover.threshold=%.2g",
                cfg.threshold,
                top,
                max(top / 3, 1e-3) if np.isfinite(top) else cfg.threshold / 4,
            )
    if truth is not None:
        from cape_pipeline.causal.metrics import dag_metrics

        graph.params["metrics_vs_truth"] = {k: float(v) for k, v in dag_metrics(graph.adjacency, truth).items()}
    return graph


def _discover_save(graph: Any, d: Path) -> None:
    graph.write_parquet(d / "dag.parquet")
    with atomic_path(d / "history.json") as tmp:
        tmp.write_text(json.dumps(graph.history, indent=1, default=float))


def _discover_load(d: Path) -> Any:
    from cape_pipeline.causal.graph import CausalGraph

    graph = CausalGraph.read_parquet(d / "dag.parquet")
    graph.history = json.loads((d / "history.json").read_text())
    return graph


def _discover_summary(graph: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"n_edges": graph.n_edges, "cycle_edges_dropped": graph.n_cycle_edges_dropped}
    m = graph.params.get("metrics_vs_truth")
    if m:
        out.update({f"{k}_vs_truth": round(m[k], 4) for k in ("shd", "f1") if k in m})
    return out


# ---------------------------------------------------------------------------- embed
@dataclass(frozen=True)
class EmbedConfig:
    """Parameters of the embed stage (Step II; see :func:`cape_pipeline.hyperbolic.embed`).

    Defaults equal :func:`~cape_pipeline.hyperbolic.embed`'s (a test keeps them in step).
    """

    dim: int = 64
    k_hop: int = 2
    lambda_g: float = 0.1
    restart: float = 0.15
    max_epochs: int = 1000
    batch_size: int | None = None
    lr: float | None = None
    optimizer: str = "radam"
    geometry: str = "hyperbolic"
    curvature: float = 1.0
    learn_curvature: bool = True
    negatives: int | None = 512
    burn_in: int = 10
    burn_in_factor: float = 0.1
    tol: float = 1e-3
    window: int | None = None
    isolated: str = "origin"
    device: str = "cpu"
    seed: int = 0

    def __post_init__(self) -> None:
        from cape_pipeline.hyperbolic.embed import check_options

        check_options(**asdict(self))
        _check_device(self.device)

def _embed_run(inputs: Mapping[str, Any], cfg: EmbedConfig, ctx: StageContext) -> Any:
    from cape_pipeline.hyperbolic import embed

    kwargs = {**asdict(cfg), "device": _torch_device(cfg.device)}
    return embed(inputs["discover"], progress=ctx.progress, **kwargs)


def _embed_save(emb: Any, d: Path) -> None:
    arrays = {
        "hyperboloid": np.asarray(emb.hyperboloid, dtype=np.float64),
        "poincare": np.asarray(emb.poincare, dtype=np.float64),
        "pagerank": np.asarray(emb.pagerank, dtype=np.float64),
        "feature_names": np.asarray(emb.feature_names).astype(str),
    }
    if emb.euclidean is not None:
        arrays["euclidean"] = np.asarray(emb.euclidean, dtype=np.float64)
    with atomic_path(d / "embedding.npz") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
    meta = {"params": emb.params, "geometry": emb.geometry, "loss_history": list(map(float, emb.loss_history))}
    with atomic_path(d / "embedding.json") as tmp:
        tmp.write_text(json.dumps(meta, indent=1, default=str))
    emb.graph.write_parquet(d / "dag.parquet")


def _embed_load(d: Path) -> Any:
    from cape_pipeline.causal.graph import CausalGraph
    from cape_pipeline.hyperbolic import HyperbolicEmbedding

    with np.load(d / "embedding.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads((d / "embedding.json").read_text())
    return HyperbolicEmbedding(
        hyperboloid=arrays["hyperboloid"],
        poincare=arrays["poincare"],
        pagerank=arrays["pagerank"],
        feature_names=arrays["feature_names"].astype(object),
        loss_history=meta["loss_history"],
        params=meta["params"],
        geometry=meta["geometry"],
        graph=CausalGraph.read_parquet(d / "dag.parquet"),
        euclidean=arrays.get("euclidean"),
    )


def _embed_summary(emb: Any) -> dict[str, Any]:
    q = emb.params.get("quality") or {}
    out = {
        "dim": int(np.asarray(emb.poincare).shape[1]),
        "final_loss": round(float(emb.loss_history[-1]), 4) if len(emb.loss_history) else None,
        "epochs": emb.params.get("epochs_run"),
        "converged": emb.params.get("converged"),
        "n_isolated": emb.params.get("n_isolated"),
    }
    if emb.params.get("curvature") is not None:
        out["curvature"] = round(float(emb.params["curvature"]), 4)
    for key in ("map", "mean_rank", "spearman_norm_vs_neg_pagerank"):
        if q.get(key) is not None:
            out[key] = round(float(q[key]), 3)
    return out


# ---------------------------------------------------------------------------- encode
@dataclass(frozen=True)
class EncodeConfig:
    """Parameters of the encode stage (Step III; see :func:`cape_pipeline.encodings.encode`).

    ``scale`` is c in φ = c·e (Eq. 25), radians per unit of Poincaré coordinate.
    """

    scale: float = math.pi / 4

    def __post_init__(self) -> None:
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise CapeConfigError(f"scale: expected a finite number > 0 (radians per unit of e), got {self.scale!r}")


@dataclass
class EncodeOutput:
    """Output of the encode stage: the encodings plus what the export manifest and figures need.

    Attributes
    ----------
    encodings
        :class:`~cape_pipeline.encodings.CapeEncodings`.
    provenance
        Source, data fingerprint and shape, discovery parameters and metrics against a known
        graph; stored in the encodings manifest.
    embed_loss
        Loss per epoch of Step II.
    discover_history
        Per-outer-step history of Step I.
    """

    encodings: Any
    provenance: dict[str, Any]
    embed_loss: list[float] = field(default_factory=list)
    discover_history: list[dict[str, Any]] = field(default_factory=list)


def _encode_run(inputs: Mapping[str, Any], cfg: EncodeConfig, ctx: StageContext) -> EncodeOutput:
    from cape_pipeline.encodings import encode

    emb = inputs["embed"]
    adata = inputs["preprocess"]
    graph = inputs["discover"]
    provenance = {
        "source": ctx.source,
        "data_fingerprint": data_fingerprint(adata),
        "data_shape": [int(adata.n_obs), int(adata.n_vars)],
        "discover_params": {k: v for k, v in graph.params.items() if k != "metrics_vs_truth"},
        "metrics_vs_truth": graph.params.get("metrics_vs_truth"),
    }
    from cape_pipeline.pipeline.report import angle_quantiles

    enc = encode(emb, scale=cfg.scale, graph=graph)
    off_origin = np.linalg.norm(np.asarray(enc.poincare), axis=1) > 0
    provenance["angle_spread"] = angle_quantiles(enc.angles, off_origin)  # |φ| in rad, features off the origin
    return EncodeOutput(
        encodings=enc,
        provenance=provenance,
        embed_loss=[float(x) for x in emb.loss_history],
        discover_history=list(graph.history),
    )


def _encode_save(out: EncodeOutput, d: Path) -> None:
    out.encodings.save(d / "encodings", manifest_extra={"provenance": out.provenance})
    with atomic_path(d / "histories.json") as tmp:
        tmp.write_text(json.dumps({"embed_loss": out.embed_loss, "discover": out.discover_history}, default=float))
    save_export_figures(out, d / "figures")


def _encode_load(d: Path) -> EncodeOutput:
    from cape_pipeline.encodings import load_encodings

    enc = load_encodings(d / "encodings")
    hist = json.loads((d / "histories.json").read_text())
    return EncodeOutput(enc, enc.manifest.get("provenance", {}), hist["embed_loss"], hist["discover"])


def save_export_figures(out: EncodeOutput, d: Path) -> list[Path]:
    """Render the export figures into ``d`` (PNG, 120 dpi): ``dag.png`` (the DAG),
    ``poincare.png`` (the Poincaré disk colored by PageRank) and ``loss.png`` (Step II loss per
    epoch; Step I −ELBO and h(A) per augmented-Lagrangian outer step)."""
    from matplotlib.figure import Figure

    from cape_pipeline import pl

    d.mkdir(parents=True, exist_ok=True)
    enc = out.encodings
    loss = Figure(figsize=(11, 4), layout="constrained")
    ax_embed, ax_disc = loss.subplots(1, 2)
    if out.embed_loss:
        pl.plot_loss(out.embed_loss, ax=ax_embed, label="contrastive + PageRank loss (Eq. 15)")
    else:
        _no_curve(ax_embed, "no Step II loss recorded")
    ax_embed.set_title("Step II: hyperboloid embedding")
    steps = [h for h in out.discover_history if "h" in h]
    if steps:
        x = np.arange(1, len(steps) + 1)
        if all("neg_elbo" in h for h in steps):
            ax_disc.plot(x, [float(h["neg_elbo"]) for h in steps], marker="o", label="−ELBO")
        ax_disc.plot(x, [max(float(h["h"]), 1e-16) for h in steps], marker="s", label="h(A)")
        ax_disc.set_yscale("log")
        ax_disc.set_xlabel("outer step (augmented Lagrangian)")
        ax_disc.set_ylabel("value at the end of the outer step (log scale)")
        ax_disc.legend()
    else:
        _no_curve(ax_disc, "no Step I history:\nthe graph was given (discover.method=true-dag)\nor came from a baseline")
    ax_disc.set_title("Step I: causal discovery")
    figs = {"poincare.png": pl.plot_poincare(enc), "loss.png": loss}
    if enc.graph is not None:
        figs["dag.png"] = pl.plot_dag(enc.graph, pagerank=enc.pagerank)
    written = []
    for name, fig in figs.items():
        with atomic_path(d / name) as tmp:
            fig.savefig(tmp, dpi=120, bbox_inches="tight", format="png")
        written.append(d / name)
    return written


def _no_curve(ax: Any, text: str) -> None:
    """An empty panel that says why it is empty (no axes with meaningless ticks)."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=10, color="0.35")
    ax.set_axis_off()


def _encode_export(artifact: Path, out: Path) -> list[Path]:
    """Write the encodings directory's files (encodings.parquet, dag.parquet, manifest.json)
    and the figures into ``out``, each copied under a temporary name and renamed, and
    ``encode_manifest.json``: the stage's cache manifest with ``files`` listing the exported
    files by their names in ``out`` (checksums and sizes) and ``cache_artifact`` the cache
    directory they came from."""
    written = []
    names: dict[str, str] = {}
    for sub in ("encodings", "figures"):  # histories.json stays in the cache
        for src in sorted((artifact / sub).glob("*")):
            if src.is_file():
                written.append(_copy_atomic(src, out / src.name))
                names[src.name] = f"{sub}/{src.name}"
    return [*written, _write_export_manifest("encode", artifact, out, names)]


def _encode_summary(out: EncodeOutput) -> dict[str, Any]:
    enc = out.encodings
    norms = np.linalg.norm(np.asarray(enc.poincare), axis=1)
    summary = {"d": int(enc.d), "scale": round(float(enc.scale), 6), "max_norm_e": round(float(norms.max()), 4)}
    spread = (out.provenance or {}).get("angle_spread") or {}
    if spread.get("max") is not None:
        summary["max_abs_angle"] = round(float(spread["max"]), 4)
        summary["median_abs_angle"] = round(float(spread["q50"]), 4)
    return summary


# ---------------------------------------------------------------------------- train
TASKS = ("annotation", "clustering", "perturbation", "age")


NO_IDENTITY = "/no-id"
"""Arm suffix: the backbone without its native feature identity (literal reading of Eq. F.109)."""


def parse_arm(arm: str) -> tuple[str, bool]:
    """``"cape"`` → ``("cape", True)``; ``"cape/no-id"`` → ``("cape", False)`` (identity off).

    Raises
    ------
    CapeConfigError
        Unknown PE name.
    """
    from cape_pipeline.models import PE_NAMES

    pe, identity = (arm[: -len(NO_IDENTITY)], False) if arm.endswith(NO_IDENTITY) else (arm, True)
    if pe not in PE_NAMES:
        raise CapeConfigError(
            f"train: pe {arm!r} unknown; expected one of {list(PE_NAMES)}, optionally with "
            f"'{NO_IDENTITY}' (no feature identity, the literal reading of Eq. F.109)"
        )
    return pe, identity


@dataclass(frozen=True)
class TrainConfig:
    """Parameters of the train stage: which tasks, backbone and positional encodings (arms).

    Every arm in ``(pe, *compare)`` is trained with the same backbone size, budget and seeds.
    By default the main job answers "does CAPE help on this data?": ``cape`` against the
    backbone's ``default`` (its native feature identity alone, the same model without the
    rotary angles) and ``none/no-id`` (no identity, no PE: a control that shows how much the
    identity itself carries), over 3 seeds, and the report leads with the paired difference
    cape − default.

    Attributes
    ----------
    tasks
        Subset of ``annotation``, ``clustering``, ``perturbation``, ``age``; ``None`` takes the
        tasks of the dataset's catalog entry (files: annotation + clustering when
        ``label_key`` or an ingest label column is given, else none).
    backbone
        ``scgpt``, ``scbert`` or ``methylgpt``.
    pe, compare
        The arm of interest and the arms trained beside it. An arm is a PE name
        (:data:`cape_pipeline.models.PE_NAMES`), applied on top of the backbone's feature
        identity, or ``NAME/no-id`` with the identity removed (the literal reading of Eq. F.109:
        the PE replaces the identity). ``default`` is the identity alone; ``none`` (with the
        identity) is the same model as ``default``.
    n_seeds
        Seeds ``seed, seed+1, …``; metrics are reported as mean ± sd over them (sd is null for
        one seed) and the paired differences against ``default`` get a 95 % t-interval.
    d_model
        Model width D; ``None`` = 2·d of the encodings, so rotary gets one angle per pair.
    n_layers, n_heads, max_tokens
        Transformer blocks, attention heads per block, and the most feature tokens per
        observation; ``None`` keeps the backbone's CPU defaults.
    pretrain_epochs, finetune_epochs, batch_size, lr, pretrain_lr
        Training budget: masked-value pretraining epochs, most fine-tuning epochs, mini-batch
        size, fine-tuning and pretraining peak learning rates; ``None`` keeps each task's
        default (see :class:`cape_pipeline.tasks.TaskConfig`).
    label_key
        ``obs`` column with labels; ``None`` takes the task's default.
    save_models
        Store each run's fitted model (backbone + head + gene list) under ``models/`` of the
        artifact and of ``--out`` (``cape_pipeline.models.load(dir)`` reads one back).
    encodings
        A ready encodings directory (``cape ... --out DIR`` or ``CapeEncodings.save``) to use
        instead of running Steps I–III on this data; its angles are aligned to the data's
        features by name.
    encodings_missing
        With ``encodings``: ``error`` (default) fails naming the data's features that the
        encodings lack; ``zero`` gives them angle 0.
    device
        ``auto`` (CUDA when available), ``cpu`` or ``cuda[:i]``; ``--device`` sets it for
        every stage.
    seed
        First seed (the runs use ``seed … seed + n_seeds − 1``); ``--seed`` sets it for every
        stage.
    """

    tasks: tuple[str, ...] | None = None
    backbone: str = "scgpt"
    pe: str = "cape"
    compare: tuple[str, ...] = ("default", "none/no-id")
    n_seeds: int = 3
    d_model: int | None = None
    n_layers: int | None = None
    n_heads: int | None = None
    max_tokens: int | None = None
    pretrain_epochs: int | None = None
    finetune_epochs: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    pretrain_lr: float | None = None
    label_key: str | None = None
    save_models: bool = True
    encodings: str | None = None
    encodings_missing: str = "error"
    device: str = "auto"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.encodings_missing not in ("error", "zero"):
            raise CapeConfigError(f"train.encodings_missing: expected error or zero, got {self.encodings_missing!r}")
        bad = sorted(set(self.tasks or ()) - set(TASKS))
        if bad:
            raise CapeConfigError(f"train.tasks: unknown task(s) {bad}; expected some of {list(TASKS)}")
        if self.n_seeds < 1:
            raise CapeConfigError(f"train.n_seeds: expected >= 1, got {self.n_seeds}")
        for arm in (self.pe, *self.compare):
            parse_arm(arm)
        _check_device(self.device)


@dataclass
class TrainOutput:
    """Results of the train stage: one :class:`~cape_pipeline.tasks.TaskResult` per
    (task, arm, seed), in run order, and the label column used per task."""

    results: list[Any]
    tasks: list[str]
    pes: list[str]
    d_model: int
    encodings_dir: str | None = None


def _resolve_tasks(cfg: TrainConfig, ctx: StageContext, adata: ad.AnnData) -> list[str]:
    if cfg.tasks is not None:
        return list(cfg.tasks)
    from cape_pipeline.io.catalog import load_catalog

    entry = load_catalog().get(ctx.source)
    if entry is not None:
        return [t for t in entry.tasks if t in TASKS]
    labelled = cfg.label_key or adata.uns.get("cape_ingest", {}).get("label_columns")
    return ["annotation", "clustering"] if labelled else []


def _train_encodings(inputs: Mapping[str, Any], cfg: TrainConfig) -> EncodeOutput:
    """The encodings train uses: the encode stage's, or those of ``cfg.encodings``."""
    return inputs["encode"] if cfg.encodings is None else _encodings_from_dir(cfg.encodings)


def _encodings_from_dir(path: str) -> EncodeOutput:
    """An :class:`EncodeOutput` for a ready encodings directory (validated by ``load_encodings``)."""
    from cape_pipeline.encodings import load_encodings

    enc = load_encodings(path)
    return EncodeOutput(enc, {**enc.manifest.get("provenance", {}), "encodings_dir": str(path)})


def _encodings_fingerprint(cfg: Any, ctx: StageContext) -> str:
    """Content hash of a ready encodings directory named by ``train.encodings``."""
    if getattr(cfg, "encodings", None) is None:
        return ""
    d = Path(cfg.encodings)
    files = sorted(p for p in d.glob("*") if p.is_file()) if d.is_dir() else []
    if not files:
        raise CapeFileError(f"train.encodings: {d} is not an encodings directory (expected encodings.parquet, manifest.json)")
    return hash_bytes(*[f"{p.name}:{hash_file(p)}" for p in files])


def _train_run(inputs: Mapping[str, Any], cfg: TrainConfig, ctx: StageContext) -> TrainOutput:
    from cape_pipeline.tasks import TASK_CONFIGS, pretrain, run_task
    from cape_pipeline.tasks._base import dense_x, resolve_config

    adata = inputs["preprocess"]
    enc = _train_encodings(inputs, cfg).encodings
    tasks = _resolve_tasks(cfg, ctx, adata)
    arms = list(dict.fromkeys([cfg.pe, *cfg.compare]))
    try:
        angles = enc.align(adata.var_names, missing=cfg.encodings_missing)
    except CapeDataError as exc:
        where = f"train.encodings={cfg.encodings}" if cfg.encodings else "encodings"
        shared = np.isin(np.asarray(adata.var_names, dtype=str), np.asarray(enc.feature_names, dtype=str)).any()
        hint = " (CLI: --set train.encodings_missing=zero)" if shared else ""
        raise CapeDataError(f"{where}: {exc}{hint}") from exc
    d_model = cfg.d_model if cfg.d_model is not None else 2 * int(angles.shape[1])
    label_key = cfg.label_key
    if label_key is None:
        cols = adata.uns.get("cape_ingest", {}).get("label_columns") or []
        label_key = cols[0] if cols else None
    device = _torch_device(cfg.device)
    # annotation and clustering both pretrain on all cells with the same settings: one
    # pretraining per (arm, seed) serves both
    share = "annotation" in tasks and "clustering" in tasks
    x_all = dense_x(adata) if share else None
    results = []
    jobs = [(seed, arm) for seed in range(cfg.seed, cfg.seed + cfg.n_seeds) for arm in arms]
    for seed, arm in _progress(jobs, ctx.progress, "train"):
        pe, identity = parse_arm(arm)
        task_cfg = _task_settings(cfg, d_model, identity)
        arm_angles = angles if pe.startswith("cape") else None
        shared = None
        if share:
            pcfg = resolve_config(TASK_CONFIGS["annotation"], task_cfg)
            shared = pretrain(
                x_all, backbone=cfg.backbone, cfg=pcfg, pe=pe, angles=arm_angles, seed=seed,
                device=device, progress=ctx.progress,
            )
        for task in tasks:
            res = run_task(
                task,
                adata,
                pe=pe,
                angles=arm_angles,
                backbone=cfg.backbone,
                config=task_cfg,
                label_key=label_key if task in ("annotation", "clustering") else None,
                seed=seed,
                device=device,
                progress=ctx.progress,
                pretrained=shared if task in ("annotation", "clustering") else None,
            )
            res.params.update({"task": task, "pe": arm, "identity": identity, "seed": seed})
            if not cfg.save_models:
                res.model = None
            elif res.model is not None:
                res.model.meta.update({"arm": arm, "source": ctx.source})
            results.append(res)
    return TrainOutput(results=results, tasks=tasks, pes=arms, d_model=d_model, encodings_dir=cfg.encodings)


def _task_settings(cfg: TrainConfig, d_model: int, identity: bool) -> dict[str, Any]:
    """The task config overrides (``{"model": {...}, budget...}``) of one arm of ``cfg``."""
    model: dict[str, Any] = {"d_model": d_model, "identity": identity}
    for k in ("n_layers", "n_heads", "max_tokens"):
        if getattr(cfg, k) is not None:
            model[k] = getattr(cfg, k)
    budget = {
        k: getattr(cfg, k)
        for k in ("pretrain_epochs", "finetune_epochs", "batch_size", "lr", "pretrain_lr")
        if getattr(cfg, k) is not None
    }
    return {"model": model, **budget}


def _train_check(configs: Mapping[str, Any]) -> None:
    """Build the backbone and task configs train will use, before any stage runs: the model
    width (``d_model``, default 2 × ``embed.dim``) against ``n_heads``, the budget's ranges.

    Raises
    ------
    CapeConfigError
        Prefixed ``train:``, naming the parameter.
    """
    from cape_pipeline.models import config_for
    from cape_pipeline.tasks import TASK_CONFIGS
    from cape_pipeline.tasks._base import resolve_config

    cfg: TrainConfig = configs["train"]
    d_model = cfg.d_model
    if d_model is None and cfg.encodings is None and "embed" in configs:
        d_model = 2 * int(configs["embed"].dim)
    try:
        settings = _task_settings(cfg, d_model or 0, True)
        if d_model is None:  # the width comes from a ready encodings directory: check it at run time
            del settings["model"]["d_model"]
        config_for(cfg.backbone, settings["model"])
        for task in cfg.tasks or TASKS:
            resolve_config(TASK_CONFIGS[task], {k: v for k, v in settings.items() if k != "model"})
    except CapeConfigError as exc:
        msg = str(exc)
        hint = " (d_model defaults to 2 × embed.dim)" if cfg.d_model is None and "d_model" in msg else ""
        msg = f"train.{msg[len('task.'):]}" if msg.startswith("task.") else f"train: {msg}"
        raise CapeConfigError(msg + hint) from None


def _progress(items: list[Any], show: bool, desc: str) -> Any:
    """Iterate ``items`` with a rich progress bar when ``show``."""
    if not show:
        yield from items
        return
    from rich.progress import Progress

    from cape_pipeline._progress import progress

    with progress(lambda: Progress(transient=True), unit="runs", prefix="train") as bar:
        t = bar.add_task(desc, total=len(items))
        for it in items:
            yield it
            bar.advance(t)


def _train_save(out: TrainOutput, d: Path) -> None:
    from cape_pipeline.pipeline.report import write_results

    write_results(out, d)


def _train_export(artifact: Path, out: Path) -> list[Path]:
    """``results.json`` and the saved models (``models/<task>_<arm>_seed<s>/``) into ``out``."""
    return [
        _copy_atomic(src, out / src.relative_to(artifact))
        for src in sorted(artifact.rglob("*"))
        if src.is_file() and (src.name == "results.json" or src.relative_to(artifact).parts[0] == "models")
    ]


def _train_load(d: Path) -> TrainOutput:
    from cape_pipeline.pipeline.report import read_results

    return read_results(d)


def _train_summary(out: TrainOutput) -> dict[str, Any]:
    return {"runs": len(out.results), "tasks": ",".join(out.tasks) or "none", "pes": ",".join(out.pes)}


# ---------------------------------------------------------------------------- evaluate
@dataclass(frozen=True)
class EvaluateConfig:
    """Parameters of the evaluate stage (the report).

    Attributes
    ----------
    umap
        Draw a UMAP (scanpy) of the cell embeddings of the first seed of each PE in the report.
    """

    umap: bool = True


def _evaluate_run(inputs: Mapping[str, Any], cfg: EvaluateConfig, ctx: StageContext) -> Any:
    from cape_pipeline.pipeline.report import build_report

    train = inputs["train"]
    # without the encode stage, train used a ready encodings directory
    encode = inputs["encode"] if "encode" in inputs else _encodings_from_dir(train.encodings_dir)
    return build_report(
        train=train,
        adata=inputs["preprocess"],
        encode=encode,
        source=ctx.source,
        timings=dict(ctx.timings),
        umap=cfg.umap,
    )


def _evaluate_save(rep: Any, d: Path) -> None:
    rep.write(d)


def _evaluate_load(d: Path) -> Any:
    from cape_pipeline.pipeline.report import Report

    return Report.read(d)


def _evaluate_export(artifact: Path, out: Path) -> list[Path]:
    """Write the report, its JSON and ``figures/`` into ``out`` (not the cache manifest)."""
    return [
        _copy_atomic(src, out / src.relative_to(artifact))
        for src in sorted(artifact.rglob("*"))
        if src.is_file() and src.name != "manifest.json"
    ]


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
        doc_from=("cape_pipeline.io.readers:read",),
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
    "discover": Stage(
        name="discover",
        config_cls=DiscoverConfig,
        inputs=("preprocess",),
        run=_discover_run,
        save=_discover_save,
        load=_discover_load,
        export_files=("dag.parquet", "history.json"),
        summary=_discover_summary,
        doc_from=("cape_pipeline.causal.api:discover",),
    ),
    "embed": Stage(
        name="embed",
        config_cls=EmbedConfig,
        inputs=("discover",),
        run=_embed_run,
        save=_embed_save,
        load=_embed_load,
        export_files=("embedding.npz", "embedding.json", "dag.parquet"),
        summary=_embed_summary,
        doc_from=("cape_pipeline.hyperbolic.embed:embed",),
    ),
    "encode": Stage(
        name="encode",
        config_cls=EncodeConfig,
        inputs=("embed", "discover", "preprocess"),
        run=_encode_run,
        save=_encode_save,
        load=_encode_load,
        export_files=(),
        summary=_encode_summary,
        doc_from=("cape_pipeline.encodings.angles:encode",),
        export=_encode_export,
    ),
    "train": Stage(
        name="train",
        config_cls=TrainConfig,
        inputs=("preprocess", "encode"),
        run=_train_run,
        save=_train_save,
        load=_train_load,
        export_files=("results.json",),
        summary=_train_summary,
        export=_train_export,
        export_also=("encode",),
        fingerprint=_encodings_fingerprint,
        needs=lambda cfgs: ("preprocess",) if cfgs["train"].encodings else ("preprocess", "encode"),
        check=_train_check,
    ),
    "evaluate": Stage(
        name="evaluate",
        config_cls=EvaluateConfig,
        inputs=("train", "preprocess", "encode"),
        run=_evaluate_run,
        save=_evaluate_save,
        load=_evaluate_load,
        export_files=(),
        summary=lambda rep: rep.summary(),
        export=_evaluate_export,
        export_also=("encode", "train"),
        needs=lambda cfgs: ("train", "preprocess") if cfgs["train"].encodings else ("train", "preprocess", "encode"),
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
    names = {name: name for name in stage.export_files if (artifact / name).is_file()}
    written = [_copy_atomic(artifact / name, out / name) for name in names]
    return [*written, _write_export_manifest(stage.name, artifact, out, names)]


def _write_export_manifest(stage: str, artifact: Path, out: Path, names: Mapping[str, str]) -> Path:
    """Write ``<stage>_manifest.json`` into ``out``: the artifact's cache manifest (parameters,
    upstream keys, versions, timings) whose ``files`` lists the exported files by their names in
    ``out`` (``names``: name in ``out`` → path inside the artifact) with their sizes and
    checksums, plus ``cache_artifact``, the cache directory they came from. Every path it lists
    exists in ``out``."""
    cache_manifest = json.loads((artifact / "manifest.json").read_text())
    files = {dst: cache_manifest["files"][src] for dst, src in names.items()}
    path = out / f"{stage}_manifest.json"
    write_json_atomic(path, {**cache_manifest, "files": files, "cache_artifact": str(artifact.resolve())})
    return path


