"""Downstream tasks of paper 000 (Supp. E) on AnnData, with one entry point: :func:`run_task`.

=====================  ===============================================  ========================
task                   protocol                                         metrics
=====================  ===============================================  ========================
``annotation``         fine-tune on 30 %, test on 70 % (stratified)     accuracy, macro-F1
``annotation-logreg``  logistic regression, same input and split        accuracy, macro-F1
``clustering``         masked pretraining → embeddings → k-means        ARI, NMI, ASW
``perturbation``       control + flags → post-perturbation profile,     MSE top-20 DE genes
                       unseen perturbations (GEARS)                     (single / double)
``age``                pretrain + regression head on β values           median absolute error
=====================  ===============================================  ========================

:func:`simulate_perturbation_data` and :func:`simulate_methylation_age` make offline data with a
known DAG for the last two.
"""

from __future__ import annotations

from typing import Any

import anndata as ad
import numpy as np
import torch

from cape_pipeline.datasets import simulate_methylation_age, simulate_perturbation_data
from cape_pipeline.errors import CapeConfigError
from cape_pipeline.models.positions import FeaturePositions
from cape_pipeline.tasks._base import TaskConfig, TaskResult
from cape_pipeline.tasks._fit import Pretrained, pretrain
from cape_pipeline.tasks.age import AgeConfig, predict_age
from cape_pipeline.tasks.annotation import AnnotationConfig, annotate, annotate_logreg
from cape_pipeline.tasks.clustering import ClusteringConfig, cluster
from cape_pipeline.tasks.perturbation import PerturbationConfig, predict_perturbation
from cape_pipeline.tasks.results import TrainOutput
from cape_pipeline.tasks.trained import TrainedModel, load

__all__ = [
    "TrainedModel",
    "load",
    "TrainOutput",
    "TASKS",
    "TASK_CONFIGS",
    "AgeConfig",
    "AnnotationConfig",
    "ClusteringConfig",
    "PerturbationConfig",
    "Pretrained",
    "TaskConfig",
    "TaskResult",
    "pretrain",
    "run_task",
    "simulate_methylation_age",
    "simulate_perturbation_data",
]

TASK_CONFIGS: dict[str, type[TaskConfig]] = {
    "annotation": AnnotationConfig,
    "annotation-logreg": AnnotationConfig,
    "clustering": ClusteringConfig,
    "perturbation": PerturbationConfig,
    "age": AgeConfig,
}
"""Task name → its frozen config class."""

TASKS: tuple[str, ...] = tuple(TASK_CONFIGS)
"""Task names accepted by :func:`run_task`."""

_RUNNERS = {"annotation": annotate, "clustering": cluster, "perturbation": predict_perturbation, "age": predict_age}


def _width_from_angles(cfg: TaskConfig, pe: str, angles: Any) -> TaskConfig:
    """The rotary's d follows the width and the width the angles: with a rotary PE and no width
    given (``config.model`` without ``d_model``), the backbone gets D = 2·d of ``angles``."""
    import dataclasses

    from cape_pipeline.models.pe import ROTARY_PES
    from cape_pipeline.models.positions import as_positions

    if pe not in ROTARY_PES or angles is None or cfg.init is not None:
        return cfg
    model = cfg.model
    if model is not None and (not isinstance(model, dict) or "d_model" in model):  # the width was given
        return cfg
    a = as_positions(angles).angles
    if a is None or getattr(a, "ndim", 0) != 2:
        return cfg
    return dataclasses.replace(cfg, model={**(model or {}), "d_model": 2 * int(a.shape[1])})


def run_task(
    task: str,
    adata: ad.AnnData,
    *,
    pe: str = "cape",
    angles: np.ndarray | FeaturePositions | None = None,
    backbone: str = "scgpt",
    config: TaskConfig | dict[str, Any] | None = None,
    label_key: str | None = None,
    seed: int = 0,
    device: str | torch.device = "cpu",
    progress: bool = False,
    pretrained: Pretrained | None = None,
) -> TaskResult:
    """Train and evaluate one backbone + PE on one task.

    Parameters
    ----------
    task
        One of :data:`TASKS`.
    adata
        Preprocessed data: log-normalized ``X`` (dense or sparse; β values with NaN for
        ``age``); labels in ``obs``. Not modified.
    pe
        Positional encoding (:data:`cape_pipeline.models.PE_NAMES`).
    angles
        ``(n_vars, d)`` float CAPE angles aligned to ``adata.var_names``; required when ``pe``
        starts with ``cape``; ``d = D/2`` for ``cape`` and ``cape-input`` (default D = 64 →
        d = 32); any ``d`` for ``cape-additive``. ``pe="ape-tree"`` and
        ``attention="riemann"`` need more of Steps I–II (the DAG, the hyperboloid points): pass
        :meth:`FeaturePositions.from_encodings(encodings, adata.var_names)
        <cape_pipeline.models.positions.FeaturePositions.from_encodings>` instead.
    backbone
        ``scgpt`` (default), ``scbert`` or ``methylgpt``.
    config
        The task's config (:data:`TASK_CONFIGS`), a dict of its fields, or ``None`` for the
        CPU defaults; ``config.model`` sets the backbone (instance, preset name or dict).
    label_key
        ``obs`` column of the labels (default: ``cell_type``/``bulk_labels``/... for
        annotation and clustering, ``condition`` for perturbation, ``age`` for age).
    seed
        Seeds the split, the initialization, batch order and masks (the global torch RNG is
        restored afterwards; threads and dtype are left alone).
    device
        Torch device.
    progress
        Log per-epoch losses (``logging`` INFO).
    pretrained
        A backbone already pretrained with the same settings (:func:`pretrain`), shared by
        several tasks of one run (annotation and clustering pretrain on all cells); it is
        copied, never changed. ``None`` pretrains inside the task.

    Returns
    -------
    TaskResult
        Metrics, loss curves, timings, training throughput, embeddings/predictions.

    Raises
    ------
    CapeConfigError
        Unknown task, PE, backbone or config field.
    CapeDataError
        Missing labels, angles missing or of the wrong shape, unusable data.

    Examples
    --------
    >>> from cape_pipeline.tasks import run_task, simulate_methylation_age
    >>> adata = simulate_methylation_age(n_samples=60, n_cpgs=12, seed=0)
    >>> cfg = {"pretrain_epochs": 1, "finetune_epochs": 1, "model": {"d_model": 16, "n_heads": 2, "n_layers": 1}}
    >>> res = run_task("age", adata, pe="trainable-absolute", config=cfg, seed=0)
    >>> sorted(k for k in res.metrics if not k.startswith("reference"))
    ['mae', 'medae', 'pearson_r']
    """
    if task not in TASK_CONFIGS:
        raise CapeConfigError(f"task {task!r} unknown; expected one of {list(TASKS)}")
    from cape_pipeline.tasks._base import resolve_config

    cfg = _width_from_angles(resolve_config(TASK_CONFIGS[task], config), pe, angles)
    if task == "annotation-logreg":
        return annotate_logreg(adata, label_key=label_key, config=cfg, seed=seed)  # type: ignore[arg-type]
    return _RUNNERS[task](
        adata, pe=pe, angles=angles, backbone=backbone, config=cfg, label_key=label_key,  # type: ignore[arg-type]
        seed=seed, device=device, progress=progress, pretrained=pretrained,
    )
