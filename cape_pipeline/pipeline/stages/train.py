"""Stage train: the transformers with and without CAPE on the tasks of the data, side by side.

Glue: the options, their checks and the loop over arms, seeds and tasks are
:mod:`cape_pipeline.tasks.compare`; this module wires them to the stage's inputs, cache and plan.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from cape_pipeline._utils import hash_bytes, hash_file, resolve_device
from cape_pipeline.errors import CapeDataError, CapeFileError
from cape_pipeline.pipeline.plan import plan_lines, train_plan
from cape_pipeline.pipeline.stages._base import Stage, StageContext, _copy_atomic
from cape_pipeline.pipeline.stages.encode import EncodeOutput
from cape_pipeline.tasks.compare import (
    TrainConfig,
    check_train_config,
    compare_arms,
    resolve_tasks,
    task_settings,
    vocabulary_subset,
)
from cape_pipeline.tasks.results import TrainOutput

__all__ = ["STAGE", "TrainConfig", "encodings_from_dir"]

plan_log = logging.getLogger("cape_pipeline.plan")
"""The train plan's lines (INFO); the CLI shows this logger at INFO without ``--verbose``."""


def encodings_from_dir(path: str) -> EncodeOutput:
    """An :class:`EncodeOutput` for a ready encodings directory (validated by ``load_encodings``)."""
    from cape_pipeline.encodings import load_encodings

    enc = load_encodings(path)
    return EncodeOutput(enc, {**enc.manifest.get("provenance", {}), "encodings_dir": str(path)})


def _encodings_fingerprint(cfg: Any, ctx: StageContext) -> str:
    """Content hash of a ready encodings directory named by ``train.encodings`` and of the
    scGPT checkpoint of ``train.init``."""
    ckpt = getattr(cfg, "checkpoint", None)
    ckpt_hash = ""
    if ckpt:
        files = sorted(p for p in Path(ckpt).glob("*") if p.is_file())
        ckpt_hash = "init:" + hash_bytes(*[f"{p.name}:{hash_file(p)}" for p in files])
    if getattr(cfg, "encodings", None) is None:
        return ckpt_hash
    d = Path(cfg.encodings)
    files = sorted(p for p in d.glob("*") if p.is_file()) if d.is_dir() else []
    if not files:
        raise CapeFileError(f"train.encodings: {d} is not an encodings directory (expected encodings.parquet, manifest.json)")
    return hash_bytes(*[f"{p.name}:{hash_file(p)}" for p in files]) + ckpt_hash


def _blind(discovered: Mapping[str, Any], cfg: TrainConfig, source: str | None) -> bool:
    """Whether Step I (its ``params``) saw none of this train config's perturbation test cells."""
    from cape_pipeline.pipeline.stages.discover import blind_split, covers

    return discovered.get("method") == "true-dag" or covers(discovered.get("held_out_split"), blind_split(cfg, source))


def _train_run(inputs: Mapping[str, Any], cfg: TrainConfig, ctx: StageContext) -> TrainOutput:
    from cape_pipeline.distributed import init_from_env
    from cape_pipeline.models.positions import FeaturePositions
    from cape_pipeline.tasks._base import dense_x

    adata, genes = inputs["preprocess"], None
    if cfg.checkpoint:
        adata, genes = vocabulary_subset(adata, cfg.checkpoint)
    enc = (inputs["encode"] if cfg.encodings is None else encodings_from_dir(cfg.encodings)).encodings
    tasks = resolve_tasks(cfg, ctx.source, adata)
    provenance = getattr(inputs.get("encode"), "provenance", None) or {}
    blind = "perturbation" not in tasks or _blind(provenance.get("discover_params") or {}, cfg, ctx.source)
    if not blind:
        from cape_pipeline.report.sections import HELD_OUT_LABELS_WARNING

        plan_log.warning("%s", HELD_OUT_LABELS_WARNING)
    try:
        positions = FeaturePositions.from_encodings(enc, adata.var_names, missing=cfg.encodings_missing)
    except CapeDataError as exc:
        where = f"train.encodings={cfg.encodings}" if cfg.encodings else "encodings"
        shared = np.isin(np.asarray(adata.var_names, dtype=str), np.asarray(enc.feature_names, dtype=str)).any()
        raise CapeDataError(f"{where}: {exc}" + (" (CLI: --set train.encodings_missing=zero)" if shared else "")) from exc
    d_model = cfg.d_model if cfg.d_model is not None else 2 * int(positions.angles.shape[1])
    if genes is not None:
        from cape_pipeline.models.scgpt_import.warm_start import scgpt_checkpoint_config

        d_model = scgpt_checkpoint_config(cfg.checkpoint).d_model
    label_key = cfg.label_key or next(iter(adata.uns.get("cape_ingest", {}).get("label_columns") or []), None)
    # cuda:LOCAL_RANK under torchrun (WORLD_SIZE > 1), where the transformers train data-parallel
    device = init_from_env(str(resolve_device(cfg.device)))
    arms = cfg.arms
    x_all = dense_x(adata) if "annotation" in tasks and "clustering" in tasks else None
    plan = train_plan(adata, cfg, tasks, arms, task_settings(cfg, d_model, True), measure=genes is None, x=x_all,
                      device=device)
    for line in plan_lines(plan):
        plan_log.info(line)
    results = compare_arms(adata, positions, cfg, tasks, d_model=d_model, label_key=label_key, device=device,
                           x=x_all, progress=ctx.progress, source=ctx.source)
    return TrainOutput(
        results=results, tasks=tasks, arms=arms, d_model=d_model, encodings_dir=cfg.encodings, checkpoint_genes=genes,
        plan={**plan.to_dict(), "step1_blind": blind},
    )


def _train_check(configs: Mapping[str, Any]) -> None:
    """:func:`~cape_pipeline.tasks.compare.check_train_config` before any stage runs."""
    check_train_config(configs["train"], int(configs["embed"].dim) if "embed" in configs else None)


def _train_export(artifact: Path, out: Path) -> list[Path]:
    """``results.json`` and the saved models (``models/<task>_<arm>_seed<s>/``) into ``out``."""
    return [
        _copy_atomic(src, out / src.relative_to(artifact))
        for src in sorted(artifact.rglob("*"))
        if src.is_file() and (src.name == "results.json" or src.relative_to(artifact).parts[0] == "models")
    ]


def _train_summary(out: TrainOutput) -> dict[str, Any]:
    return {"runs": len(out.results), "tasks": ",".join(out.tasks) or "none", "arms": ",".join(out.arms)}


STAGE = Stage(
    name="train",
    config_cls=TrainConfig,
    inputs=("preprocess", "encode"),
    run=_train_run,
    save=lambda out, d: out.save(d),
    load=TrainOutput.load,
    export_files=("results.json",),
    summary=_train_summary,
    export=_train_export,
    export_also=("encode",),
    fingerprint=_encodings_fingerprint,
    needs=lambda cfgs: ("preprocess",) if cfgs["train"].encodings else ("preprocess", "encode"),
    check=_train_check,
)
