"""Stage train: the transformers with and without CAPE on the tasks of the data, side by side."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anndata as ad
import numpy as np

from cape_pipeline._utils import check_device, hash_bytes, hash_file
from cape_pipeline.errors import CapeConfigError, CapeDataError, CapeFileError
from cape_pipeline.pipeline.plan import plan_lines, train_plan
from cape_pipeline.pipeline.stages._base import (
    Stage,
    StageContext,
    _copy_atomic,
    _torch_device,
)
from cape_pipeline.pipeline.stages.encode import EncodeOutput
from cape_pipeline.tasks import TASKS
from cape_pipeline.tasks.results import TrainOutput

# ---------------------------------------------------------------------------- train


log = logging.getLogger(__name__)
plan_log = logging.getLogger("cape_pipeline.plan")
"""The train plan's lines (INFO); the CLI shows this logger at INFO without ``--verbose``."""

NO_IDENTITY = "/no-id"
"""Arm suffix: the backbone without its native feature identity (literal reading of Eq. F.109)."""


ATTENTION_SEP = "@"
"""Arm suffix naming the attention: ``cape@cone-umbral`` (default: ``dot``)."""


def arm_attention(arm: str) -> str:
    """The attention of an arm: ``"cape@cone-umbral"`` → ``"cone-umbral"``; ``"cape"`` → ``"dot"``.

    Raises
    ------
    CapeConfigError
        An attention name that is not registered (:data:`cape_pipeline.models.ATTENTIONS`).
    """
    from cape_pipeline.models.attention import ATTENTIONS

    _, sep, att = arm.partition(ATTENTION_SEP)
    att = att if sep else "dot"
    if att not in ATTENTIONS:
        raise CapeConfigError(f"train: attention {att!r} of arm {arm!r} unknown; expected one of {sorted(ATTENTIONS)}")
    return att


def parse_arm(arm: str) -> tuple[str, bool]:
    """``"cape"`` → ``("cape", True)``; ``"cape/no-id"`` → ``("cape", False)`` (identity off); an
    attention suffix (``"cape@cone-umbral"``, see :func:`arm_attention`) is ignored here.

    Raises
    ------
    CapeConfigError
        Unknown PE name.
    """
    from cape_pipeline.models import PE_NAMES

    arm = arm.partition(ATTENTION_SEP)[0]
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
    pe
        The arm of interest (default ``cape``). An arm is a PE name
        (:data:`cape_pipeline.models.PE_NAMES`), applied on top of the backbone's feature
        identity, or ``NAME/no-id`` with the identity removed (the literal reading of Eq. F.109:
        the PE replaces the identity); a suffix ``@ATTENTION`` picks the attention of that arm
        (``cape@cone-umbral``; default ``dot``).
    compare
        The arms trained beside ``pe``, same budget and seeds (default ``default``, the
        backbone's identity alone, and ``none/no-id``, no identity and no PE); ``none`` with
        the identity is the same model as ``default``. CLI: ``--compare pe=cape,default`` or
        ``--compare attention=dot,cone-umbral``.
    n_seeds
        Seeds ``seed, seed+1, …``; metrics are reported as mean ± sd over them (sd is null for
        one seed) and the paired differences against ``default`` get a 95 % t-interval.
    d_model
        Model width D; ``None`` = 2·d of the encodings, so rotary gets one angle per pair.
    n_layers
        Transformer blocks; ``None`` keeps the backbone's CPU default (2).
    n_heads
        Attention heads per block; ``None`` keeps the backbone's CPU default (4).
    max_tokens
        Most feature tokens per cell: each cell keeps its ``max_tokens`` highest expressed
        features (0: every expressed feature; ``None``: the backbone's 512). Default 128:
        attention costs O(T²), and on pbmc68k_reduced (median 243 expressed genes) and a
        simulated 1,000-cell count set, 128 tokens changed no metric by more than one seed sd
        against 512, at 2.8× less training time (``benchmarks/scale/RESULTS.md``).
    pretrain_epochs
        Epochs of masked-value pretraining; ``None`` keeps the tasks' default (5).
    finetune_epochs
        Most epochs of fine-tuning (early stopping may end it sooner); ``None`` keeps each
        task's default (annotation 40, age 60, clustering 0: it uses the pretrained embeddings).
    batch_size
        Cells per optimizer step; ``None`` keeps the tasks' default (32).
    lr
        Peak AdamW learning rate of fine-tuning; ``None`` keeps the tasks' default (2e-3).
    pretrain_lr
        Peak AdamW learning rate of pretraining; ``None`` keeps the tasks' default (1e-3).
    pretrain_max_steps
        Most optimizer steps of each pretraining (0: no cap); ``None`` keeps the tasks' default
        600, which cuts in above 3,840 cells: a larger dataset is pretrained on a seeded
        subsample by this step budget instead of full epochs.
    finetune_max_steps
        Most optimizer steps of each fine-tuning (0: no cap); ``None`` keeps the tasks' default
        1,000 (early stopping usually ends fine-tuning sooner).
    label_key
        ``obs`` column with labels; ``None`` takes the task's default.
    save_models
        Store each run's fitted model (backbone + head + gene list) under ``models/`` of the
        artifact and of ``--out`` (``cape_pipeline.tasks.load(dir)`` reads one back).
    encodings
        A ready encodings directory (``cape ... --out DIR`` or ``CapeEncodings.save``) to use
        instead of running Steps I–III on this data; its angles are aligned to the data's
        features by name.
    encodings_missing
        With ``encodings``: ``error`` (default) fails naming the data's features that the
        encodings lack; ``zero`` gives them angle 0.
    init
        ``scgpt:DIR``: every arm starts from the released scGPT checkpoint in ``DIR``
        (``args.json``, ``vocab.json``, ``best_model.pt``) instead of a random backbone
        (paper 000's "scGPT + CAPE"). The backbone is ``scgpt`` with the checkpoint's sizes, layers
        and value binning; the data's genes missing from ``vocab.json`` are dropped and counted in
        the report (none in common is an error); ``embed.dim`` must be half the checkpoint's
        width; arms keep the checkpoint's gene tokens, so compare ``cape`` with ``none``
        (``--set 'train.compare=[none]'``), not ``/no-id`` arms.
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
    max_tokens: int | None = 128
    pretrain_epochs: int | None = None
    finetune_epochs: int | None = None
    pretrain_max_steps: int | None = None
    finetune_max_steps: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    pretrain_lr: float | None = None
    label_key: str | None = None
    save_models: bool = True
    encodings: str | None = None
    encodings_missing: str = "error"
    init: str | None = None
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
            arm_attention(arm)
        check_device(self.device, "train.device")
        if self.init is not None:
            kind, _, where = self.init.partition(":")
            if kind != "scgpt" or not where:
                raise CapeConfigError(f"train.init: expected scgpt:DIR (a released scGPT checkpoint), got {self.init!r}")
            if not Path(where).expanduser().is_dir():
                raise CapeConfigError(f"train.init: {where}: no such directory (expected args.json, vocab.json, best_model.pt)")

    @property
    def checkpoint(self) -> str | None:
        """The scGPT checkpoint directory of ``init``, or None."""
        return None if self.init is None else str(Path(self.init.partition(":")[2]).expanduser())


def resolve_tasks(cfg: TrainConfig, ctx: StageContext, adata: ad.AnnData) -> list[str]:
    """The tasks to train: ``cfg.tasks`` when set, else the catalog entry's ``tasks`` for a named
    dataset, else those the data's labels allow (used by the stage and the dry run)."""
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
    return inputs["encode"] if cfg.encodings is None else encodings_from_dir(cfg.encodings)


def encodings_from_dir(path: str) -> EncodeOutput:
    """An :class:`EncodeOutput` for a ready encodings directory (validated by ``load_encodings``)."""
    from cape_pipeline.encodings import load_encodings

    enc = load_encodings(path)
    return EncodeOutput(enc, {**enc.manifest.get("provenance", {}), "encodings_dir": str(path)})


def _encodings_fingerprint(cfg: Any, ctx: StageContext) -> str:
    """Content hash of a ready encodings directory named by ``train.encodings`` and of the
    scGPT checkpoint of ``train.init``."""
    ckpt = getattr(cfg, "checkpoint", None)
    init = ""
    if ckpt:
        files = sorted(p for p in Path(ckpt).glob("*") if p.is_file())
        init = "init:" + hash_bytes(*[f"{p.name}:{hash_file(p)}" for p in files])
    if getattr(cfg, "encodings", None) is None:
        return init
    d = Path(cfg.encodings)
    files = sorted(p for p in d.glob("*") if p.is_file()) if d.is_dir() else []
    if not files:
        raise CapeFileError(f"train.encodings: {d} is not an encodings directory (expected encodings.parquet, manifest.json)")
    return hash_bytes(*[f"{p.name}:{hash_file(p)}" for p in files]) + init


def _train_run(inputs: Mapping[str, Any], cfg: TrainConfig, ctx: StageContext) -> TrainOutput:
    from cape_pipeline.models.positions import FeaturePositions
    from cape_pipeline.tasks import TASK_CONFIGS, pretrain, run_task
    from cape_pipeline.tasks._base import check_pe_inputs, dense_x, resolve_config

    adata = inputs["preprocess"]
    init = None
    if cfg.checkpoint:
        adata, init = _vocabulary_subset(adata, cfg.checkpoint)
    enc = _train_encodings(inputs, cfg).encodings
    tasks = resolve_tasks(cfg, ctx, adata)
    arms = list(dict.fromkeys([cfg.pe, *cfg.compare]))
    try:
        positions = FeaturePositions.from_encodings(enc, adata.var_names, missing=cfg.encodings_missing)
    except CapeDataError as exc:
        where = f"train.encodings={cfg.encodings}" if cfg.encodings else "encodings"
        shared = np.isin(np.asarray(adata.var_names, dtype=str), np.asarray(enc.feature_names, dtype=str)).any()
        hint = " (CLI: --set train.encodings_missing=zero)" if shared else ""
        raise CapeDataError(f"{where}: {exc}{hint}") from exc
    angles = positions.angles
    assert angles is not None
    d_model = cfg.d_model if cfg.d_model is not None else 2 * int(angles.shape[1])
    if init is not None:
        from cape_pipeline.models.scgpt_init import scgpt_checkpoint_config

        d_model = scgpt_checkpoint_config(cfg.checkpoint).d_model
    label_key = cfg.label_key
    if label_key is None:
        cols = adata.uns.get("cape_ingest", {}).get("label_columns") or []
        label_key = cols[0] if cols else None
    from cape_pipeline.distributed import init_from_env

    # cuda:LOCAL_RANK under torchrun (WORLD_SIZE > 1), where the transformers train data-parallel
    device = init_from_env(_torch_device(cfg.device))
    # annotation and clustering both pretrain on all cells with the same settings: one
    # pretraining per (arm, seed) serves both
    share = "annotation" in tasks and "clustering" in tasks
    x_all = dense_x(adata) if share else None
    plan = train_plan(adata, cfg, tasks, arms, task_settings(cfg, d_model, True), measure=init is None, x=x_all)
    for line in plan_lines(plan):
        plan_log.info(line)
    from cape_pipeline.tasks.ablation import angle_use

    results = []
    jobs = [(seed, arm) for seed in range(cfg.seed, cfg.seed + cfg.n_seeds) for arm in arms]
    for seed, arm in _progress(jobs, ctx.progress, "run", label=lambda j: f"{j[1]} seed {j[0]}"):
        pe, identity = parse_arm(arm)
        task_cfg = {**task_settings(cfg, d_model, identity), "attention": arm_attention(arm)}
        # only what this arm's PE and attention use, so a shared pretraining is keyed by it
        arm_angles = check_pe_inputs(pe, positions, adata.n_vars, task_cfg["attention"])
        shared = None
        if share:
            pcfg = resolve_config(TASK_CONFIGS["annotation"], task_cfg)
            shared = pretrain(
                x_all, backbone=cfg.backbone, cfg=pcfg, pe=pe, angles=arm_angles, seed=seed,
                device=device, progress=ctx.progress, feature_names=adata.var_names,
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
            if seed == cfg.seed and task == "annotation" and res.model is not None:
                res.params["angle_ablation"] = angle_use(res.model, adata)  # the report's line
            if not cfg.save_models:
                res.model = None
            elif res.model is not None:
                res.model.meta.update({"arm": arm, "source": ctx.source})
            results.append(res)
    return TrainOutput(
        results=results, tasks=tasks, pes=arms, d_model=d_model, encodings_dir=cfg.encodings, init=init,
        plan=plan.to_dict(),
    )


def _vocabulary_subset(adata: ad.AnnData, checkpoint: str) -> tuple[ad.AnnData, dict[str, Any]]:
    """The data's genes that are in the checkpoint's vocabulary, and what was dropped.

    Raises
    ------
    CapeDataError
        No gene of the data is in ``vocab.json``.
    """
    from cape_pipeline.models.scgpt_init import vocabulary_genes

    keep = vocabulary_genes(checkpoint, adata.var_names)
    if not keep.any():
        raise CapeDataError(
            f"train.init: none of the data's {adata.n_vars} genes (e.g. {list(adata.var_names[:3])}) is in "
            f"{Path(checkpoint) / 'vocab.json'}; the checkpoint's vocabulary uses other gene names"
        )
    dropped = adata.var_names[~keep]
    if dropped.size:
        log.warning("train.init: %d of %d genes are not in the checkpoint's vocabulary and are dropped, e.g. %s",
                    dropped.size, adata.n_vars, list(dropped[:5]))
    info = {"checkpoint": checkpoint, "n_genes_used": int(keep.sum()), "n_genes_dropped": int(dropped.size),
            "dropped_examples": [str(g) for g in dropped[:10]]}
    return adata[:, keep].copy(), info


def task_settings(cfg: TrainConfig, d_model: int, identity: bool) -> dict[str, Any]:
    """The task config overrides (``{"model": {...}, budget...}``) of one arm of ``cfg``; with a
    checkpoint (``init``) the sizes come from it and only ``max_tokens`` is passed on."""
    model: dict[str, Any] = {} if cfg.checkpoint else {"d_model": d_model, "identity": identity}
    for k in ("max_tokens",) if cfg.checkpoint else ("n_layers", "n_heads", "max_tokens"):
        if getattr(cfg, k) is not None:
            model[k] = getattr(cfg, k)
    budget = {
        k: getattr(cfg, k)
        for k in ("pretrain_epochs", "finetune_epochs", "pretrain_max_steps", "finetune_max_steps", "batch_size", "lr",
                  "pretrain_lr")
        if getattr(cfg, k) is not None
    }
    return {"model": model, **budget, **({"init": cfg.checkpoint} if cfg.checkpoint else {})}


def _check_init(cfg: TrainConfig, configs: Mapping[str, Any]) -> None:
    """With ``train.init``: the backbone, arms, sizes and ``embed.dim`` a checkpoint allows."""
    from cape_pipeline.models.scgpt_init import scgpt_checkpoint_config

    if cfg.backbone != "scgpt":
        raise CapeConfigError(f"train.init: a scGPT checkpoint needs train.backbone=scgpt, got {cfg.backbone!r}")
    no_id = [a for a in (cfg.pe, *cfg.compare) if a.endswith(NO_IDENTITY)]
    if no_id:
        raise CapeConfigError(
            f"train.init: arms {no_id} drop the checkpoint's gene tokens; compare with none instead "
            "(--set 'train.compare=[none]')"
        )
    fixed = [k for k in ("d_model", "n_layers", "n_heads") if getattr(cfg, k) is not None]
    if fixed:
        raise CapeConfigError(f"train.init: {', '.join(fixed)} come from the checkpoint; leave them unset")
    width = scgpt_checkpoint_config(cfg.checkpoint).d_model
    if cfg.encodings is None and "embed" in configs and 2 * int(configs["embed"].dim) != width:
        raise CapeConfigError(
            f"train.init: the checkpoint's width is {width}, so the angles need embed.dim = {width // 2} "
            f"(got {configs['embed'].dim}; --set embed.dim={width // 2})"
        )


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
    if cfg.checkpoint:
        _check_init(cfg, configs)
        return
    d_model = cfg.d_model
    if d_model is None and cfg.encodings is None and "embed" in configs:
        d_model = 2 * int(configs["embed"].dim)
    try:
        settings = task_settings(cfg, d_model or 0, True)
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


def _progress(items: list[Any], show: bool, desc: str, label: Any = None) -> Any:
    """Iterate ``items`` with a progress bar when ``show`` (outside a terminal: a line per
    ``$CAPE_PROGRESS_INTERVAL`` seconds); ``label(item)`` names the item being run, and the
    training loops inside add their own step counts to the same bar."""
    if not show:
        yield from items
        return
    from rich.progress import Progress

    from cape_pipeline._progress import active, progress

    with progress(lambda: Progress(transient=True), unit="runs", prefix="train") as bar, active(bar):
        t = bar.add_task(desc, total=len(items))
        for i, it in enumerate(items):
            if label is not None:
                bar.update(t, description=f"{desc} {i + 1}/{len(items)}: {label(it)}")
            yield it
            bar.advance(t)


def _train_export(artifact: Path, out: Path) -> list[Path]:
    """``results.json`` and the saved models (``models/<task>_<arm>_seed<s>/``) into ``out``."""
    return [
        _copy_atomic(src, out / src.relative_to(artifact))
        for src in sorted(artifact.rglob("*"))
        if src.is_file() and (src.name == "results.json" or src.relative_to(artifact).parts[0] == "models")
    ]


def _train_summary(out: TrainOutput) -> dict[str, Any]:
    return {"runs": len(out.results), "tasks": ",".join(out.tasks) or "none", "pes": ",".join(out.pes)}


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
