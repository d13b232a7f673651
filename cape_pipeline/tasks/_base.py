"""Shared pieces of the tasks: the result record, the config base class and input checks."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp
import torch

from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.models import ANGLE_PES, PE_NAMES, BackboneConfig, build_backbone, config_for
from cape_pipeline.models.blocks import TokenTransformer
from cape_pipeline.models.pe import check_angles, coexpression_embedding

__all__ = ["TaskResult", "TaskConfig", "resolve_config", "dense_x", "build_model", "get_labels"]


@dataclass
class TaskResult:
    """Outcome of :func:`cape_pipeline.tasks.run_task`.

    Attributes
    ----------
    task
        Task name.
    metrics
        Named floats (task metrics; ``reference_*`` for the non-transformer reference).
    curves
        Named lists, e.g. ``pretrain_loss`` and ``finetune_loss`` per epoch.
    seconds
        Wall time of the whole task.
    cells_per_second
        Training throughput: observations processed by pretraining + fine-tuning per second of
        training (forward + backward + optimizer step).
    embeddings
        ``(n_obs, D)`` float32 cell embeddings in ``adata`` order, where the task makes them.
    predictions
        Per-observation (or per-condition) predictions, where relevant.
    confusion
        Confusion matrix (true labels × predicted labels, test cells), annotation only.
    params
        Everything that determined the result (task, backbone, pe, seed, configs, split sizes).
    """

    task: str
    metrics: dict[str, float]
    curves: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0
    cells_per_second: float = float("nan")
    embeddings: np.ndarray | None = None
    predictions: pd.DataFrame | None = None
    confusion: pd.DataFrame | None = None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskConfig:
    """Training budget shared by the tasks (subclassed per task).

    Attributes
    ----------
    model
        Backbone config; ``None`` takes the backbone's CPU defaults
        (:func:`cape_pipeline.models.config_for`); a dict overrides fields of those.
    attention
        Attention name (``dot``).
    pretrain_epochs
        Epochs of masked-value pretraining (0 skips it).
    finetune_epochs
        Epochs of supervised fine-tuning.
    batch_size
        Mini-batch size (observations).
    lr
        AdamW learning rate (pretraining and fine-tuning).
    weight_decay
        AdamW weight decay.
    mask_ratio
        Fraction of observed tokens hidden per observation during pretraining.
    """

    model: BackboneConfig | dict[str, Any] | str | None = None
    attention: str = "dot"
    pretrain_epochs: int = 3
    finetune_epochs: int = 10
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01
    mask_ratio: float = 0.4

    def __post_init__(self) -> None:
        if self.pretrain_epochs < 0 or self.finetune_epochs < 0:
            raise CapeConfigError("task: pretrain_epochs and finetune_epochs must be >= 0")
        if self.batch_size < 1:
            raise CapeConfigError(f"task.batch_size: expected >= 1, got {self.batch_size}")
        if not self.lr > 0:
            raise CapeConfigError(f"task.lr: expected > 0, got {self.lr}")
        if not 0.0 < self.mask_ratio < 1.0:
            raise CapeConfigError(f"task.mask_ratio: expected in (0, 1), got {self.mask_ratio}")

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (for ``uns`` and cache keys)."""
        d = dataclasses.asdict(self)
        if isinstance(self.model, BackboneConfig):
            d["model"] = dataclasses.asdict(self.model)
        return d


def resolve_config(cls: type[TaskConfig], config: TaskConfig | dict[str, Any] | None) -> TaskConfig:
    """A task config from an instance, a dict of field overrides, or ``None`` (defaults).

    Raises
    ------
    CapeConfigError
        Wrong config class or unknown field.
    """
    if config is None:
        return cls()
    if isinstance(config, dict):
        known = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(config) - known)
        if bad:
            raise CapeConfigError(f"{cls.__name__}: unknown field(s) {bad}; known: {sorted(known)}")
        return cls(**config)
    if not isinstance(config, cls):
        raise CapeConfigError(f"expected a {cls.__name__} or a dict, got {type(config).__name__}")
    return config


def dense_x(adata: ad.AnnData, *, allow_nan: bool = False) -> np.ndarray:
    """``adata.X`` as a dense float32 ``(n_obs, n_vars)`` array.

    Raises
    ------
    CapeDataError
        Empty data, inf values, or NaN where not allowed.
    """
    if adata.n_obs == 0 or adata.n_vars == 0:
        raise CapeDataError(f"task: empty data ({adata.n_obs} obs × {adata.n_vars} vars)")
    x = adata.X
    x = x.toarray() if sp.issparse(x) else np.asarray(x)
    x = x.astype(np.float32, copy=False)
    if np.isinf(x).any():
        raise CapeDataError("task: adata.X contains inf")
    if not allow_nan and np.isnan(x).any():
        raise CapeDataError("task: adata.X contains NaN (only the age/methylation task allows missing values)")
    return x


def get_labels(adata: ad.AnnData, label_key: str | None, defaults: tuple[str, ...], task: str) -> tuple[str, pd.Series]:
    """The label column of ``adata.obs`` (``label_key`` or the first of ``defaults`` present).

    Raises
    ------
    CapeDataError
        No such column, or missing labels.
    """
    if label_key is None:
        label_key = next((k for k in defaults if k in adata.obs.columns), None)
        if label_key is None:
            raise CapeDataError(
                f"{task}: no label column; pass label_key= (none of {list(defaults)} is in obs; "
                f"obs has {list(adata.obs.columns)[:10]})"
            )
    if label_key not in adata.obs.columns:
        raise CapeDataError(f"{task}: label_key {label_key!r} not in adata.obs (columns: {list(adata.obs.columns)[:10]})")
    y = adata.obs[label_key]
    if y.isna().any():
        raise CapeDataError(f"{task}: obs[{label_key!r}] has {int(y.isna().sum())} missing labels")
    return label_key, y


def check_pe_inputs(pe: str, angles: Any, n_vars: int) -> np.ndarray | None:
    """Validate ``pe`` and ``angles`` early, before any training.

    Raises
    ------
    CapeConfigError
        Unknown ``pe``.
    CapeDataError
        ``pe`` starts with ``cape`` and ``angles`` is missing or misshapen.
    """
    if pe not in PE_NAMES:
        raise CapeConfigError(f"pe {pe!r} unknown; expected one of {list(PE_NAMES)}")
    if pe in ANGLE_PES:
        return check_angles(angles, n_vars, name=f"pe={pe!r} angles").numpy()
    return None


def build_model(
    backbone: str,
    cfg: TaskConfig,
    *,
    n_features: int,
    pe: str,
    angles: np.ndarray | None,
    x_train: np.ndarray,
    overrides: dict[str, Any] | None = None,
    device: str | torch.device = "cpu",
) -> TokenTransformer:
    """Backbone for a task: resolves the config, builds the static table, fits data buffers.

    ``static-absolute`` gets :func:`~cape_pipeline.models.pe.coexpression_embedding` of the
    training rows only.
    """
    mcfg = config_for(backbone, cfg.model)
    if overrides:
        mcfg = dataclasses.replace(mcfg, **overrides)
    table = coexpression_embedding(x_train, mcfg.d_model) if pe == "static-absolute" else None
    model = build_backbone(
        backbone, mcfg, n_features=n_features, pe=pe, attention=cfg.attention, angles=angles, static_table=table
    )
    model.fit_data(x_train)
    return model.to(device)
