"""Comparing arms on the tasks: the train options (:class:`TrainConfig`), their checks, and
the loop that trains every arm on every task and seed (:func:`compare_arms`) — what the
pipeline's train stage runs."""

from __future__ import annotations

import functools
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import anndata as ad

from cape_pipeline._utils import check_device
from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.tasks._base import resolve_config
from cape_pipeline.tasks.arms import Arm

__all__ = ["TrainConfig", "check_train_config", "compare_arms", "declared_tasks", "perturbation_label_key", "resolve_tasks", "task_settings", "vocabulary_subset"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig:
    """Parameters of the train stage: which tasks, backbone and arms (positional encodings).

    Every arm in ``(arm, *compare)`` is trained with the same backbone size, budget and seeds.
    By default the main job answers "does CAPE help on this data?": ``cape`` against the
    backbone's ``none`` (its native feature identity alone, no PE: the same model without the
    rotary angles) and ``none/no-id`` (no identity, no PE: a control that shows how much the
    identity itself carries), over 3 seeds, and the report leads with the paired difference
    cape − none.

    Attributes
    ----------
    tasks
        Subset of ``annotation``, ``clustering``, ``perturbation``, ``age``; ``None`` takes the
        tasks of the dataset's catalog entry (files: annotation + clustering when
        ``label_key`` or an ingest label column is given, else none).
    backbone
        ``scgpt``, ``scbert`` or ``methylgpt``.
    arm
        The arm of interest (default ``cape``; :class:`~cape_pipeline.tasks.arms.Arm`). An arm is a PE name
        (:data:`cape_pipeline.models.PE_NAMES`), applied on top of the backbone's feature
        identity, or ``NAME/no-id`` with the identity removed (the literal reading of Eq. F.109:
        the PE replaces the identity); a suffix ``@ATTENTION`` picks the attention of that arm
        (``cape@cone-umbral``; default ``dot``). Earlier name: ``pe`` (``--set train.pe=``,
        ``TrainConfig(pe=...)``, the attribute ``.pe``), taken with a :class:`FutureWarning`;
        so is ``default``, the earlier name of the arm ``none``, in ``arm`` and ``compare``.
    compare
        The arms trained beside ``arm``, same budget and seeds (default ``none``, the
        backbone's identity alone, and ``none/no-id``, no identity and no PE). CLI:
        ``--compare arm=cape,none`` or
        ``--compare attention=dot,cone-umbral``.
    n_seeds
        Seeds ``seed, seed+1, …``; metrics are reported as mean ± sd over them (sd is null for
        one seed) and the paired differences against ``none`` get a 95 % t-interval. With the
        perturbation task each seed draws its own test split, and Step I leaves out the cells of
        all of them (``discover.hold_out_test_conditions``): more seeds leave it fewer perturbations, and a
        change of ``seed`` or ``n_seeds`` reruns Steps I–III.
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
    arm: str = "cape"
    compare: tuple[str, ...] = ("none", "none/no-id")
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

    renamed: ClassVar[dict[str, str]] = {"pe": "arm"}
    """Earlier option names → current ones (``--set train.pe=`` is taken with a FutureWarning)."""

    def __post_init__(self) -> None:
        from cape_pipeline.tasks import TASKS

        if self.encodings_missing not in ("error", "zero"):
            raise CapeConfigError(f"train.encodings_missing: expected error or zero, got {self.encodings_missing!r}")
        bad = sorted(set(self.tasks or ()) - set(TASKS))
        if bad:
            raise CapeConfigError(f"train.tasks: unknown task(s) {bad}; expected some of {list(TASKS)}")
        if self.n_seeds < 1:
            raise CapeConfigError(f"train.n_seeds: expected >= 1, got {self.n_seeds}")
        # the earlier PE name ``default`` becomes ``none`` (a FutureWarning), so results say none
        object.__setattr__(self, "arm", Arm.current(self.arm))
        object.__setattr__(self, "compare", tuple(Arm.current(a) for a in self.compare))
        for arm in self.arms:
            Arm.parse(arm)
        check_device(self.device, "train.device")
        if self.init is not None:
            kind, _, where = self.init.partition(":")
            if kind != "scgpt" or not where:
                raise CapeConfigError(f"train.init: expected scgpt:DIR (a released scGPT checkpoint), got {self.init!r}")
            if not Path(where).expanduser().is_dir():
                raise CapeConfigError(f"train.init: {where}: no such directory (expected args.json, vocab.json, best_model.pt)")

    @property
    def arms(self) -> list[str]:
        """Every arm trained, in order: ``arm``, then ``compare`` (repeats dropped)."""
        return list(dict.fromkeys([self.arm, *self.compare]))

    @property
    def checkpoint(self) -> str | None:
        """The scGPT checkpoint directory of ``init``, or None."""
        return None if self.init is None else str(Path(self.init.partition(":")[2]).expanduser())


def _deprecated_pe(self: TrainConfig) -> str:
    warnings.warn("TrainConfig.pe is now TrainConfig.arm; the earlier name will be removed", FutureWarning, stacklevel=2)
    return self.arm


def _taking_pe(dataclass_init: Any) -> Any:
    """``TrainConfig.__init__`` that also takes the earlier keyword ``pe`` of ``arm`` (warning)."""

    @functools.wraps(dataclass_init)
    def __init__(self: TrainConfig, *args: Any, pe: str | None = None, **kwargs: Any) -> None:
        if pe is not None:
            if "arm" in kwargs:
                raise CapeConfigError("train.pe is the earlier name of train.arm; give only arm")
            warnings.warn("TrainConfig(pe=...) is now TrainConfig(arm=...); the earlier name will be removed",
                          FutureWarning, stacklevel=2)
            kwargs["arm"] = pe
        dataclass_init(self, *args, **kwargs)

    return __init__


TrainConfig.pe = property(_deprecated_pe, doc="Earlier name of :attr:`arm` (warns with a FutureWarning).")  # type: ignore[attr-defined]
TrainConfig.__init__ = _taking_pe(TrainConfig.__init__)  # type: ignore[method-assign]


def perturbation_label_key(cfg: TrainConfig) -> str:
    """The condition column the train stage's perturbation task reads: ``"condition"``, the
    task's default (``cfg.label_key`` names the labels of annotation and clustering only)."""
    return "condition"


def declared_tasks(cfg: TrainConfig, source: str | None) -> list[str] | None:
    """The tasks known before the data is read: ``cfg.tasks`` when set, else the catalog entry's
    for a named dataset, else None (:func:`resolve_tasks` then reads the labels; the perturbation
    task is never chosen that way)."""
    from cape_pipeline.tasks import TASKS

    if cfg.tasks is not None:
        return list(cfg.tasks)
    from cape_pipeline.io.catalog import load_catalog

    entry = load_catalog().get(source) if source is not None else None
    return None if entry is None else [t for t in entry.tasks if t in TASKS]


def resolve_tasks(cfg: TrainConfig, source: str | None, adata: ad.AnnData) -> list[str]:
    """The tasks to train: ``cfg.tasks`` when set, else the catalog entry's ``tasks`` for a named
    dataset (``source``), else those the data's labels allow (annotation and clustering when
    ``label_key`` or an ingest label column is given, else none)."""
    declared = declared_tasks(cfg, source)
    if declared is not None:
        return declared
    labelled = cfg.label_key or adata.uns.get("cape_ingest", {}).get("label_columns")
    return ["annotation", "clustering"] if labelled else []


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


def _check_init(cfg: TrainConfig, embed_dim: int | None) -> None:
    """With ``train.init``: the backbone, arms, sizes and ``embed.dim`` a checkpoint allows."""
    from cape_pipeline.models.scgpt_import.warm_start import scgpt_checkpoint_config

    if cfg.backbone != "scgpt":
        raise CapeConfigError(f"train.init: a scGPT checkpoint needs train.backbone=scgpt, got {cfg.backbone!r}")
    no_id = [a for a in cfg.arms if not Arm.parse(a).identity]
    if no_id:
        raise CapeConfigError(
            f"train.init: arms {no_id} drop the checkpoint's gene tokens; compare with none instead "
            "(--set 'train.compare=[none]')"
        )
    fixed = [k for k in ("d_model", "n_layers", "n_heads") if getattr(cfg, k) is not None]
    if fixed:
        raise CapeConfigError(f"train.init: {', '.join(fixed)} come from the checkpoint; leave them unset")
    width = scgpt_checkpoint_config(cfg.checkpoint).d_model
    if cfg.encodings is None and embed_dim is not None and 2 * int(embed_dim) != width:
        raise CapeConfigError(
            f"train.init: the checkpoint's width is {width}, so the angles need embed.dim = {width // 2} "
            f"(got {embed_dim}; --set embed.dim={width // 2})"
        )


def check_train_config(cfg: TrainConfig, embed_dim: int | None) -> None:
    """Build the backbone and task configs train will use, before any stage runs: the model
    width (``d_model``, default 2 × ``embed_dim``, the encodings' dimension d) against
    ``n_heads``, the budget's ranges; with ``init``, what the checkpoint allows.

    Raises
    ------
    CapeConfigError
        Prefixed ``train:``, naming the parameter.
    """
    from cape_pipeline.models import config_for
    from cape_pipeline.tasks import TASK_CONFIGS, TASKS

    if cfg.checkpoint:
        _check_init(cfg, embed_dim)
        return
    d_model = cfg.d_model
    if d_model is None and cfg.encodings is None and embed_dim is not None:
        d_model = 2 * int(embed_dim)
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


def compare_arms(
    adata: ad.AnnData,
    positions: Any,
    cfg: TrainConfig,
    tasks: list[str],
    *,
    d_model: int,
    label_key: str | None,
    device: Any,
    x: Any = None,
    progress: bool = False,
    source: str | None = None,
) -> list[Any]:
    """Train every arm of ``cfg`` (``arm`` and ``compare``) on ``tasks`` for each seed.

    Annotation and clustering both pretrain on all cells with the same settings, so one
    pretraining per (arm, seed) serves both. The first seed's annotation model gets the angle
    ablation (:func:`~cape_pipeline.tasks.ablation.angle_use`) in its params.

    Parameters
    ----------
    adata
        ``(N, M)`` preprocessed AnnData (the genes of the encodings' ``positions``).
    positions
        :class:`~cape_pipeline.models.positions.FeaturePositions` aligned to ``adata.var_names``.
    cfg, tasks
        The train options and the tasks to run (names of :data:`cape_pipeline.tasks.TASKS`).
    d_model
        Model width D.
    label_key
        ``obs`` column of the labels of annotation and clustering, or None.
    device
        torch device.
    x
        ``(N, M)`` dense float32 expression of ``adata`` when the caller has it (the shared
        pretraining's input), else computed here when needed.
    progress, source
        Show a progress bar; the data's name, recorded in each saved model's ``meta``.

    Returns
    -------
    list of TaskResult
        One per (seed, arm, task), with ``params`` ``task``, ``arm`` (as written in
        ``cfg.arms``; ``pe`` stays the arm's positional encoding), ``identity`` and ``seed``;
        ``model`` None unless ``cfg.save_models``.

    Raises
    ------
    CapeConfigError, CapeDataError
        From the tasks (an arm's PE needs inputs the encodings lack, labels missing, ...).
    """
    from cape_pipeline.tasks import TASK_CONFIGS, pretrain, run_task
    from cape_pipeline.tasks._base import check_pe_inputs, dense_x
    from cape_pipeline.tasks.ablation import angle_use

    arms = cfg.arms
    share = "annotation" in tasks and "clustering" in tasks
    x_all = (dense_x(adata) if x is None else x) if share else None
    results = []
    jobs = [(seed, arm) for seed in range(cfg.seed, cfg.seed + cfg.n_seeds) for arm in arms]
    for seed, text in _progress(jobs, progress, "run", label=lambda j: f"{j[1]} seed {j[0]}"):
        arm = Arm.parse(text)
        task_cfg = {**task_settings(cfg, d_model, arm.identity), "attention": arm.attention}
        # only what this arm's PE and attention use, so a shared pretraining is keyed by it
        arm_angles = check_pe_inputs(arm.pe, positions, adata.n_vars, arm.attention)
        shared = None
        if share:
            pcfg = resolve_config(TASK_CONFIGS["annotation"], task_cfg)
            shared = pretrain(
                x_all, backbone=cfg.backbone, cfg=pcfg, pe=arm.pe, angles=arm_angles, seed=seed,
                device=device, progress=progress, feature_names=adata.var_names,
            )
        for task in tasks:
            labelled = task in ("annotation", "clustering")
            res = run_task(
                task, adata, pe=arm.pe, angles=arm_angles, backbone=cfg.backbone, config=task_cfg,
                label_key=label_key if labelled else perturbation_label_key(cfg) if task == "perturbation" else None,
                seed=seed, device=device, progress=progress,
                pretrained=shared if labelled else None,
            )
            res.params.update({"task": task, "arm": text, "identity": arm.identity, "seed": seed})
            if seed == cfg.seed and task == "annotation" and res.model is not None:
                res.params["angle_ablation"] = angle_use(res.model, adata)  # the report's line
            if not cfg.save_models:
                res.model = None
            elif res.model is not None:
                res.model.meta.update({"arm": text, "source": source})
            results.append(res)
    return results


def vocabulary_subset(adata: ad.AnnData, checkpoint: str) -> tuple[ad.AnnData, dict[str, Any]]:
    """The data's genes that are in the checkpoint's vocabulary, and what was dropped.

    Raises
    ------
    CapeDataError
        No gene of the data is in ``vocab.json``.
    """
    from cape_pipeline.models.scgpt_import.warm_start import vocabulary_genes

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
