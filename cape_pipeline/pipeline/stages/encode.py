"""Stage encode: Step III, rotary angles from the Poincaré coordinates (paper 000, Sec. 3.5)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cape_pipeline._utils import atomic_path
from cape_pipeline.encodings.config import EncodeConfig
from cape_pipeline.pipeline.stages._base import (
    Stage,
    StageContext,
    _copy_atomic,
    _write_export_manifest,
    data_fingerprint,
)


# ---------------------------------------------------------------------------- encode
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
    from cape_pipeline.report.build import angle_quantiles

    enc = encode(emb, cfg, graph=graph)
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
    from cape_pipeline import pl

    pl.save_encoding_figures(out.encodings, d / "figures", embed_loss=out.embed_loss, discover_history=out.discover_history)


def _encode_load(d: Path) -> EncodeOutput:
    from cape_pipeline.encodings import load_encodings

    enc = load_encodings(d / "encodings")
    hist = json.loads((d / "histories.json").read_text())
    return EncodeOutput(enc, enc.manifest.get("provenance", {}), hist["embed_loss"], hist["discover"])


def _encode_export(artifact: Path, out: Path) -> list[Path]:
    """Write the encodings directory's files (encodings.parquet, dag.parquet,
    edge_scores.parquet when Step I scored pairs, manifest.json;
    :mod:`cape_pipeline.encodings.export` lists their columns) and the figures into ``out``,
    each copied under a temporary name and renamed, and ``encode_manifest.json``: the stage's
    cache manifest with ``files`` listing the exported files by their names in ``out``
    (checksums and sizes) and ``cache_artifact`` the cache directory they came from
    (:func:`~cape_pipeline.pipeline.stages._base._write_export_manifest` lists its fields).
    A ``dag.parquet`` or ``edge_scores.parquet`` in ``out`` that this export does not replace
    is removed: it would be an earlier run's."""
    from cape_pipeline.causal.graph import DAG_FILE, EDGE_SCORES_FILE

    for name in (EDGE_SCORES_FILE, DAG_FILE):
        if not (artifact / "encodings" / name).is_file():
            (out / name).unlink(missing_ok=True)
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
    if enc.frequencies is not None:
        summary["frequencies"] = f"geometric {enc.frequencies[0]:.3g}…{enc.frequencies[-1]:.3g}"
    spread = (out.provenance or {}).get("angle_spread") or {}
    if spread.get("max") is not None:
        summary["max_abs_angle"] = round(float(spread["max"]), 4)
        summary["median_abs_angle"] = round(float(spread["q50"]), 4)
    return summary


STAGE = Stage(
    name="encode",
    config_cls=EncodeConfig,
    inputs=("embed", "discover", "preprocess"),
    run=_encode_run,
    save=_encode_save,
    load=_encode_load,
    export_files=(),
    summary=_encode_summary,
    export=_encode_export,
)
