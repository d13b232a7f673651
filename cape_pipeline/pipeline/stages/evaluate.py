"""Stage evaluate: the report (does CAPE help on this data?), its JSON and figures."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cape_pipeline.pipeline.stages._base import Stage, StageContext, _copy_atomic
from cape_pipeline.pipeline.stages.train import encodings_from_dir


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
    from cape_pipeline.report.build import build_report

    train = inputs["train"]
    # without the encode stage, train used a ready encodings directory
    encode = inputs["encode"] if "encode" in inputs else encodings_from_dir(train.encodings_dir)
    return build_report(
        train=train,
        adata=inputs["preprocess"],
        encode=encode,
        source=ctx.source,
        timings=dict(ctx.timings),
        umap=cfg.umap,
        progress=ctx.progress,
    )


def _evaluate_save(rep: Any, d: Path) -> None:
    rep.write(d)


def _evaluate_load(d: Path) -> Any:
    from cape_pipeline.report.build import Report

    return Report.read(d)


def _evaluate_export(artifact: Path, out: Path) -> list[Path]:
    """Write the report, its JSON and ``figures/`` into ``out`` (not the cache manifest)."""
    return [
        _copy_atomic(src, out / src.relative_to(artifact))
        for src in sorted(artifact.rglob("*"))
        if src.is_file() and src.name != "manifest.json"
    ]


STAGE = Stage(
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
)
