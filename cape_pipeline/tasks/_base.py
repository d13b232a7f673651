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
from cape_pipeline.models import (
    ANGLE_PES,
    PE_NAMES,
    BackboneConfig,
    build_backbone,
    config_for,
)
from cape_pipeline.models.backbones.blocks import TokenTransformer
from cape_pipeline.models.loops import PRECISIONS
from cape_pipeline.models.pe import check_angles, coexpression_embedding, resolve_pe
from cape_pipeline.models.positions import FeaturePositions, as_positions, require

__all__ = [
    "TaskResult",
    "TaskConfig",
    "resolve_config",
    "dense_x",
    "build_model",
    "get_labels",
    "validation_split",
    "check_fraction",
    "check_pooling",
    "task_inputs",
]

POOLINGS: tuple[str, ...] = ("cls", "mean", "cls+mean")
"""Cell-embedding poolings a task config accepts."""


def check_fraction(name: str, value: float) -> None:
    """Validate a config fraction that must lie strictly between 0 and 1.

    Raises
    ------
    CapeConfigError
        ``value`` not in ``(0, 1)``; the message names the field ``name`` (e.g. ``age.test_size``).
    """
    if not 0.0 < value < 1.0:
        raise CapeConfigError(f"{name}: expected in (0, 1), got {value}")


def check_pooling(task: str, pooling: str) -> None:
    """Validate a task config's ``pooling`` (one of :data:`POOLINGS`).

    Raises
    ------
    CapeConfigError
        Any other value; the message names ``task``.
    """
    if pooling not in POOLINGS:
        raise CapeConfigError(f"{task}.pooling: expected cls, mean or cls+mean, got {pooling!r}")


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
        Everything that determined the result (task, backbone, pe, seed, configs, split sizes,
        the epoch kept by early stopping).
    model
        The fitted :class:`~cape_pipeline.tasks.TrainedModel` (backbone + head + feature
        names; ``model.save(dir)`` / ``cape_pipeline.tasks.load(dir)``), where the task has one.
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
    model: Any = None


@dataclass(frozen=True)
class TaskConfig:
    """Training recipe shared by the tasks (subclassed per task).

    Masked-value pretraining (no labels), then supervised fine-tuning of backbone + head with
    AdamW, linear warmup + cosine decay, gradient clipping at norm 1, a validation split carved
    from the fine-tuning split, early stopping on it and the checkpoint with the best
    validation score.

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
        Most epochs of supervised fine-tuning (early stopping may end it sooner).
    batch_size
        Mini-batch size (observations).
    lr
        Peak AdamW learning rate of fine-tuning.
    pretrain_lr
        Peak AdamW learning rate of masked-value pretraining. Lower than ``lr``: at ``lr``'s
        2e-3 pretraining washed out the co-expression start of the gene tokens and lowered the
        clustering ARI on pbmc68k_reduced.
    weight_decay
        AdamW weight decay.
    mask_ratio
        Fraction of observed tokens hidden per observation during pretraining.
    warmup
        Fraction of each run's steps with linear LR warmup (then cosine decay to 0).
    val_fraction
        Fraction of the fine-tuning split held out for validation (early stopping and the
        checkpoint choice); 0 disables both (the last epoch is kept).
    patience
        Fine-tuning epochs without a better validation score before stopping.
    pretrain_max_steps
        Most optimizer steps of pretraining (0: no cap). With ``batch_size`` 32 the default
        600 (19,200 cells) leaves 5 epochs untouched up to 3,840 cells; a larger dataset is
        pretrained on a seeded subsample of its cells by this step budget instead of 5 full
        epochs, so its cost stops growing with N (``benchmarks/scale/RESULTS.md``).
    finetune_max_steps
        Most optimizer steps of fine-tuning (0: no cap); early stopping may end it sooner.
        The default 1,000 leaves ``finetune_epochs`` untouched up to 800 fine-tuning cells.
    init
        A released scGPT checkpoint directory (``args.json``, ``vocab.json``,
        ``best_model.pt``) the ``scgpt`` backbone starts from instead of a random
        initialization (:func:`~cape_pipeline.models.scgpt_import.warm_start.init_from_scgpt`). Its sizes,
        layers and value encoding come from the checkpoint (``model`` may set the others, e.g.
        ``max_tokens``); every feature of the data must be in its vocabulary.
    precision
        Compute precision of the model's forward passes: ``"fp32"`` (default, float32
        throughout) or ``"bf16"``: pretraining and fine-tuning steps (forward and loss), the
        validation passes and the task's final predictions / embeddings run under
        ``torch.autocast(device_type, dtype=torch.bfloat16)`` (CUDA or CPU;
        :func:`cape_pipeline.models.loops.autocast`), while the weights, their gradients
        and the optimizer stay float32 (backward and optimizer steps run outside autocast).
        On a GPU with bf16 tensor cores it is several times faster at scGPT's width; on a CPU
        it is valid but usually slower. A :class:`~cape_pipeline.tasks.TrainedModel` used
        later (``predict``, ``embed``) computes in float32.
    """

    model: BackboneConfig | dict[str, Any] | str | None = None
    attention: str = "dot"
    pretrain_epochs: int = 5
    finetune_epochs: int = 40
    batch_size: int = 32
    lr: float = 2e-3
    pretrain_lr: float = 1e-3
    weight_decay: float = 0.01
    mask_ratio: float = 0.4
    warmup: float = 0.1
    val_fraction: float = 0.15
    patience: int = 8
    pretrain_max_steps: int = 600
    finetune_max_steps: int = 1000
    init: str | None = None
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if self.pretrain_epochs < 0 or self.finetune_epochs < 0:
            raise CapeConfigError("task: pretrain_epochs and finetune_epochs must be >= 0")
        if not 0.0 <= self.warmup < 1.0:
            raise CapeConfigError(f"task.warmup: expected in [0, 1), got {self.warmup}")
        if not 0.0 <= self.val_fraction < 0.9:
            raise CapeConfigError(f"task.val_fraction: expected in [0, 0.9), got {self.val_fraction}")
        if self.pretrain_max_steps < 0 or self.finetune_max_steps < 0:
            raise CapeConfigError("task: pretrain_max_steps and finetune_max_steps must be >= 0 (0: no cap)")
        if self.patience < 1:
            raise CapeConfigError(f"task.patience: expected >= 1, got {self.patience}")
        if self.batch_size < 1:
            raise CapeConfigError(f"task.batch_size: expected >= 1, got {self.batch_size}")
        if not self.pretrain_lr > 0:
            raise CapeConfigError(f"task.pretrain_lr: expected > 0, got {self.pretrain_lr}")
        if not self.lr > 0:
            raise CapeConfigError(f"task.lr: expected > 0, got {self.lr}")
        check_fraction("task.mask_ratio", self.mask_ratio)
        if self.precision not in PRECISIONS:
            raise CapeConfigError(f"task.precision: expected one of {', '.join(map(repr, PRECISIONS))}, got {self.precision!r}")

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


def check_pe_inputs(pe: str, angles: Any, n_vars: int, attention: str = "dot") -> FeaturePositions | None:
    """Validate ``pe``, ``attention`` and their positional inputs early, before any training.

    Parameters
    ----------
    pe, attention
        The PE (:data:`~cape_pipeline.models.pe.PE_NAMES`) and attention names.
    angles
        ``(n_vars, d)`` CAPE angles, or a
        :class:`~cape_pipeline.models.positions.FeaturePositions` (also the DAG's spanning
        forest for ``ape-tree`` and the hyperboloid points for ``riemann``), or ``None``.
    n_vars
        M, the number of features of the data.

    Returns
    -------
    FeaturePositions or None
        Only the fields this PE and attention use (angles as float32), so a shared pretraining
        is keyed by what the model sees; ``None`` when they use none.

    Raises
    ------
    CapeConfigError
        Unknown ``pe`` or ``attention``.
    CapeDataError
        A needed input is missing, misshapen or not finite.
    """
    from cape_pipeline.models.attention import ATTENTIONS

    if resolve_pe(pe) not in PE_NAMES:  # the backbone takes an earlier name (``default``) itself
        raise CapeConfigError(f"pe {pe!r} unknown; expected one of {list(PE_NAMES)}")
    if attention not in ATTENTIONS:
        raise CapeConfigError(f"attention {attention!r} unknown; expected one of {sorted(ATTENTIONS)}")
    need_angles, need_tree = pe in ANGLE_PES, pe == "ape-tree"
    need_points = bool(getattr(ATTENTIONS[attention], "needs_positions", False))
    if not (need_angles or need_tree or need_points):
        return None
    pos = as_positions(angles)
    a = None
    if need_angles:
        a = check_angles(None if pos is None else pos.angles, n_vars, name=f"pe={pe!r} angles").numpy()
    if need_tree:
        pos = require(pos, "parent", f"pe={pe!r}", n_vars)
    if need_points:
        pos = require(pos, "hyperboloid", f"attention={attention!r}", n_vars)
    assert pos is not None
    return FeaturePositions(
        angles=a,
        hyperboloid=pos.hyperboloid if need_points else None,
        parent=pos.parent if need_tree else None,
        parent_weight=pos.parent_weight if need_tree else None,
    )


def task_inputs(
    adata: ad.AnnData, pe: str, angles: Any, attention: str = "dot"
) -> tuple[np.ndarray, FeaturePositions | None]:
    """The dense input and the checked positions of a task: :func:`dense_x` (no NaN allowed),
    then :func:`check_pe_inputs`.

    Returns
    -------
    x, positions
        ``(n_obs, n_vars)`` float32 array; the :class:`~cape_pipeline.models.positions.FeaturePositions`
        the PE and attention use, or ``None``.

    Raises
    ------
    CapeDataError, CapeConfigError
        As :func:`dense_x` and :func:`check_pe_inputs` (data errors first).
    """
    x = dense_x(adata)
    return x, check_pe_inputs(pe, angles, adata.n_vars, attention)


def model_config(backbone: str, cfg: TaskConfig, overrides: dict[str, Any] | None = None) -> BackboneConfig:
    """The backbone config of a task: ``cfg.model`` resolved by
    :func:`~cape_pipeline.models.config_for`, then the task's own ``overrides`` (e.g. the
    perturbation task's flags and all-gene tokens)."""
    if cfg.init is not None:
        if backbone != "scgpt":
            raise CapeConfigError(f"task.init: a scGPT checkpoint needs backbone 'scgpt', got {backbone!r}")
        from cape_pipeline.models.scgpt_import.warm_start import scgpt_checkpoint_config

        user = cfg.model if isinstance(cfg.model, dict) else {}
        mcfg: BackboneConfig = scgpt_checkpoint_config(cfg.init, **user)
    else:
        mcfg = config_for(backbone, cfg.model)
    return dataclasses.replace(mcfg, **overrides) if overrides else mcfg


def build_model(
    backbone: str,
    cfg: TaskConfig,
    *,
    n_features: int,
    pe: str,
    angles: np.ndarray | FeaturePositions | None,
    x_train: np.ndarray,
    overrides: dict[str, Any] | None = None,
    device: str | torch.device = "cpu",
    feature_names: Any = None,
) -> TokenTransformer:
    """Backbone for a task: resolves the config, builds the static table, fits data buffers.

    ``static-absolute`` (and the backbones' data-fitted identities) get
    :func:`~cape_pipeline.models.pe.coexpression_embedding` of ``x_train``: the rows the task
    pretrains on, which for annotation/clustering with ``pretrain_on="all"`` include the
    unlabeled test cells (transductive, no labels). With ``cfg.init`` the backbone starts from
    that scGPT checkpoint, its gene tokens taken by ``feature_names`` ``(M,)`` from the vocabulary.

    Raises
    ------
    CapeConfigError
        ``cfg.init`` without ``feature_names``.
    """
    mcfg = model_config(backbone, cfg, overrides)
    table = coexpression_embedding(x_train, mcfg.d_model) if pe == "static-absolute" else None
    model = build_backbone(
        backbone, mcfg, n_features=n_features, pe=pe, attention=cfg.attention, angles=angles, static_table=table
    )
    model.fit_data(x_train)
    if cfg.init is not None:
        if feature_names is None:
            raise CapeConfigError("task.init: starting from a scGPT checkpoint needs the data's feature names")
        from cape_pipeline.models.scgpt_import.warm_start import init_from_scgpt

        init_from_scgpt(model, cfg.init, feature_names)  # type: ignore[arg-type]
    return model.to(device)


def validation_split(n: int, fraction: float, seed: int, y: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``(fit, val)`` into ``range(n)``: a seeded validation split of the fine-tune set.

    Stratified by ``y`` when every class has at least two members, else random. ``fraction``
    0 (or too few observations for both parts) gives an empty validation set.
    """
    from sklearn.model_selection import train_test_split

    idx = np.arange(n)
    n_val = int(round(fraction * n))
    if fraction <= 0 or n_val < 1 or n - n_val < 2:
        return idx, idx[:0]
    strat = None
    if y is not None:
        _, counts = np.unique(y, return_counts=True)
        if (counts >= 2).all() and n_val >= counts.size and n - n_val >= counts.size:
            strat = y
    fit, val = train_test_split(idx, test_size=n_val, stratify=strat, random_state=seed + 7919)
    return np.sort(fit), np.sort(val)
