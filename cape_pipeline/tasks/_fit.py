"""How a task fits its model: masked-value pretraining reused across tasks (:class:`Pretrained`),
fine-tuning of backbone + head, and the run records every task returns (:class:`TaskRun`). The
optimizer loops themselves are :mod:`cape_pipeline.models.loops`."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from cape_pipeline.errors import CapeConfigError
from cape_pipeline.models import pool
from cape_pipeline.models.backbones.blocks import TokenTransformer
from cape_pipeline.models.loops import (
    TrainLog,
    as_tensor,
    autocast,
    cell_embeddings,
    masked_pretrain,
    seeded,
    train_epochs,
)
from cape_pipeline.models.positions import FeaturePositions, as_positions
from cape_pipeline.tasks._base import TaskConfig, build_model, model_config
from cape_pipeline.tasks.trained import TrainedModel

__all__ = [
    "Pretrained",
    "TaskRun",
    "pretrain",
    "finetune",
    "finetune_pooled_head",
    "training_stats",
]


@dataclass
class Pretrained:
    """A backbone after masked-value pretraining, to be shared by the tasks of one run.

    Tasks given one (``pretrained=``) fine-tune a deep copy, so it stays as it is.

    Attributes
    ----------
    model
        The backbone (eval mode).
    log
        The pretraining :class:`~cape_pipeline.models.loops.TrainLog`.
    key
        Everything that determined it (backbone, model config, pe, seed, budget, data shape);
        a task checks it against its own settings.
    """

    model: TokenTransformer
    log: Any
    key: dict[str, Any]


def pretrain_key(
    backbone: str,
    cfg: TaskConfig,
    pe: str,
    seed: int,
    x: np.ndarray,
    angles: np.ndarray | FeaturePositions | None,
    overrides: dict[str, Any] | None,
) -> dict[str, Any]:
    """What determines a pretrained backbone (compared before one is shared between tasks):
    the settings, and content hashes of the pretraining data ``x`` and the angles."""
    from cape_pipeline._utils import hash_bytes

    mcfg = model_config(backbone, cfg, overrides)
    return {
        "backbone": backbone, "model": dataclasses.asdict(mcfg), "attention": cfg.attention, "pe": pe, "seed": seed,
        "pretrain_epochs": cfg.pretrain_epochs, "pretrain_max_steps": cfg.pretrain_max_steps, "batch_size": cfg.batch_size, "pretrain_lr": cfg.pretrain_lr,
        "weight_decay": cfg.weight_decay, "mask_ratio": cfg.mask_ratio, "warmup": cfg.warmup, "init": cfg.init,
        "precision": cfg.precision,
        "n_obs": int(x.shape[0]), "n_vars": int(x.shape[1]),
        "data": hash_bytes(np.ascontiguousarray(x, dtype=np.float32).tobytes()),
        "angles": None if angles is None else as_positions(angles).fingerprint(),
    }


def pretrain(
    x: np.ndarray,
    *,
    backbone: str,
    cfg: TaskConfig,
    pe: str,
    angles: np.ndarray | FeaturePositions | None,
    seed: int,
    device: str | torch.device = "cpu",
    overrides: dict[str, Any] | None = None,
    progress: bool = False,
    feature_names: Any = None,
) -> Pretrained:
    """Build a backbone (seeded) and pretrain it by masked-value reconstruction on ``x``.

    Parameters
    ----------
    x
        ``(N, M)`` float32, every observation to pretrain on (no labels are used); also the
        data that fits data-dependent buffers (bin edges, static tables).
    backbone, cfg, pe, angles
        As in :func:`build_model`.
    seed
        Seeds the initialization, batch order and masks.
    feature_names
        ``(M,)`` names of the columns of ``x``; needed with ``cfg.init`` (a scGPT checkpoint).

    Returns
    -------
    Pretrained
    """
    gen = torch.Generator().manual_seed(seed)
    with seeded(seed):
        model = build_model(
            backbone, cfg, n_features=x.shape[1], pe=pe, angles=angles, x_train=x, overrides=overrides, device=device,
            feature_names=feature_names,
        )
        _, log = masked_pretrain(
            model, as_tensor(x, device), epochs=cfg.pretrain_epochs, batch_size=cfg.batch_size, lr=cfg.pretrain_lr,
            mask_ratio=cfg.mask_ratio, generator=gen, weight_decay=cfg.weight_decay, warmup=cfg.warmup,
            progress=progress, max_steps=cfg.pretrain_max_steps, desc=f"pretrain {pe} seed {seed}",
            precision=cfg.precision,
        )
    model.eval()
    return Pretrained(model=model, log=log, key=pretrain_key(backbone, cfg, pe, seed, x, angles, overrides))


def use_pretrained(pretrained: Pretrained | None, x: np.ndarray, **settings: Any) -> Pretrained:
    """A private copy of ``pretrained`` (checked against these settings), or a fresh pretraining.

    Parameters
    ----------
    pretrained
        A shared pretrained backbone, or ``None`` to pretrain here.
    x
        ``(N, M)`` float32, the data the task pretrains on.
    **settings
        The keyword arguments of :func:`pretrain` (``backbone``, ``cfg``, ``pe``, ``angles``,
        ``seed``, ``device``, optional ``overrides`` and ``progress``).

    Raises
    ------
    TypeError
        ``settings`` that :func:`pretrain` does not take, or required ones missing.
    CapeConfigError
        ``pretrained`` was made with other settings than the task's.
    """
    import copy

    a = inspect.signature(pretrain).bind(x, **settings)
    a.apply_defaults()
    if pretrained is None:
        return pretrain(x, **settings)
    kw = a.arguments
    want = pretrain_key(kw["backbone"], kw["cfg"], kw["pe"], kw["seed"], x, kw["angles"], kw["overrides"])
    diff = sorted(k for k in want if want[k] != pretrained.key.get(k))
    if diff:
        raise CapeConfigError(f"pretrained backbone does not match this task's settings: {diff} differ")
    return Pretrained(model=copy.deepcopy(pretrained.model), log=pretrained.log, key=pretrained.key)


@dataclass(frozen=True)
class TaskRun:
    """How one task runs: the settings every task takes besides its data and its config.

    The fields are the keywords of :func:`cape_pipeline.tasks.run_task` after ``config``, with
    the same defaults and meanings (see there). Each task function builds one from its keywords
    (``TaskRun(**options)``), so an unknown keyword raises ``TypeError`` as before.
    """

    pe: str = "cape"
    angles: np.ndarray | FeaturePositions | None = None
    backbone: str = "scgpt"
    label_key: str | None = None
    seed: int = 0
    device: str | torch.device = "cpu"
    progress: bool = False
    pretrained: Pretrained | None = None

    def pretrain(
        self,
        x: np.ndarray,
        cfg: TaskConfig,
        positions: FeaturePositions | None,
        feature_names: Any,
        overrides: dict[str, Any] | None = None,
    ) -> Pretrained:
        """:func:`use_pretrained` with this run's settings: a checked copy of :attr:`pretrained`,
        or a fresh pretraining on ``x`` ``(N, M)`` float32.

        ``positions`` are the checked inputs of the PE (:func:`~cape_pipeline.tasks._base.check_pe_inputs`
        of :attr:`angles`), ``feature_names`` the ``(M,)`` names of the columns of ``x``.

        Raises
        ------
        CapeConfigError
            :attr:`pretrained` was made with other settings than these.
        """
        return use_pretrained(
            self.pretrained, x, backbone=self.backbone, cfg=cfg, pe=self.pe, angles=positions, seed=self.seed,
            device=self.device, overrides=overrides, progress=self.progress, feature_names=feature_names,
        )

    def params(
        self, task: str, *, label_key: str, cfg: TaskConfig, model: TokenTransformer, flog: TrainLog | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """``TaskResult.params``: the run's settings (``task``, ``backbone``, ``pe``, ``seed``, the
        resolved ``label_key``), then ``extra`` (split sizes etc.), the early stopping outcome of
        ``flog`` (if given), the task config and the backbone config, in this order."""
        params: dict[str, Any] = {
            "task": task, "backbone": self.backbone, "pe": self.pe, "seed": self.seed, "label_key": label_key, **extra,
        }
        if flog is not None:
            params.update(best_epoch=flog.best_epoch, stopped_early=flog.stopped_early)
        params.update(config=cfg.to_dict(), model_config=dataclasses.asdict(model.config))
        return params

    def trained_model(
        self, adata: Any, task: str, model: TokenTransformer, *, pooling: str, label_key: str | None = None,
        **fields: Any,
    ) -> TrainedModel:
        """The task's :class:`~cape_pipeline.tasks.TrainedModel`: ``model`` with this run's
        backbone name, the feature names and preprocessing record of ``adata``, ``meta`` with
        the PE, the seed and ``label_key`` (when given), and ``fields`` (``head``, ``classes``,
        the target scale)."""
        meta: dict[str, Any] = {"pe": self.pe, "seed": self.seed}
        if label_key is not None:
            meta["label_key"] = label_key
        return TrainedModel(
            backbone=model, backbone_name=self.backbone, var_names=list(map(str, adata.var_names)), task=task,
            pooling=pooling, meta=meta, preprocess=adata.uns.get("cape_preprocess"), **fields,
        )


def finetune(
    model: TokenTransformer,
    head: nn.Module,
    step: Callable[[torch.Tensor], torch.Tensor],
    n: int,
    *,
    cfg: TaskConfig,
    generator: torch.Generator,
    validate: Callable[[], float] | None,
    progress: bool,
    desc: str,
) -> TrainLog:
    """Fine-tune backbone + head end to end with the recipe of ``cfg``
    (:func:`~cape_pipeline.models.loops.train_epochs` over ``n`` observations: AdamW with
    ``cfg.lr``, ``cfg.weight_decay``, ``cfg.warmup``, ``cfg.finetune_epochs``, ``cfg.batch_size``
    and early stopping after ``cfg.patience`` epochs without a better ``validate()`` score, at
    most ``cfg.finetune_max_steps`` optimizer steps; ``step`` and ``validate`` under the
    autocast of ``cfg.precision``).

    ``step(batch_index (b,) long) -> scalar loss``. Both modules are left in eval mode with the
    weights of the best validation epoch (the last one without ``validate``).
    """
    return train_epochs(
        list(model.parameters()) + list(head.parameters()), step, n,
        epochs=cfg.finetune_epochs, batch_size=cfg.batch_size, lr=cfg.lr, generator=generator,
        weight_decay=cfg.weight_decay, warmup=cfg.warmup, modules=[model, head],
        validate=validate, patience=cfg.patience, progress=progress, desc=desc, max_steps=cfg.finetune_max_steps,
        precision=cfg.precision,
    )


def finetune_pooled_head(
    model: TokenTransformer,
    make_head: Callable[[], nn.Module],
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    fit: np.ndarray,
    val: np.ndarray,
    test: np.ndarray,
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    cfg: TaskConfig,
    pooling: str,
    seed: int,
    device: str | torch.device,
    progress: bool,
    desc: str,
    val_batch: int | None = None,
) -> tuple[nn.Module, TrainLog, np.ndarray, torch.Tensor]:
    """Fine-tune backbone + a head on pooled cell embeddings; embed all cells; apply the head to the test cells.

    Under the torch seed ``seed + 1`` (batch order from a generator seeded ``seed + 1``):
    build the head, fine-tune with :func:`finetune` on ``loss(head(pool(model(x[fit]))), y[fit])``
    with the validation score ``-loss`` on ``val`` (none when ``val`` is empty), then embed
    every row of ``x`` and run the head on the test embeddings (all forward passes under the
    autocast of ``cfg.precision``).

    Parameters
    ----------
    model
        The (pretrained) backbone; fine-tuned in place.
    make_head
        Builds the head (its initial weights draw from the seeded torch RNG).
    x
        ``(N, M)`` float32 tensor on ``device``, every observation.
    y
        ``(N, ...)`` targets on ``device`` (long class ids or float values).
    fit, val, test
        Integer row positions into ``x``.
    loss
        ``loss(prediction, target) -> scalar``.
    pooling
        Cell embedding fed to the head (``cls``, ``mean`` or ``cls+mean``).
    val_batch
        Validation forward batch size (``None``: all validation rows at once).

    Returns
    -------
    head, log, embeddings, test_output
        The fitted head (eval mode), the fine-tuning log, ``(N, D)`` float32 embeddings of
        all rows and the head's output tensor on the test rows (no grad).
    """
    gen = torch.Generator().manual_seed(seed + 1)
    with seeded(seed + 1):
        head = make_head().to(device)
        xfit, yfit = x[fit], y[fit]

        def predict(xb: torch.Tensor) -> torch.Tensor:
            tok = model.tokenize(xb)
            return head(pool(model(tok), tok, pooling))  # type: ignore[arg-type]

        def step(bi: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
            if rows is not None:  # data parallel: this rank's rows of the batch
                bi = bi[rows]
            return loss(predict(xfit[bi]), yfit[bi])

        def validate() -> float:
            if val_batch is None:
                out = predict(x[val])
            else:
                out = torch.cat([predict(x[val[s : s + val_batch]]) for s in range(0, val.size, val_batch)])
            return -float(loss(out, y[val]))

        flog = finetune(
            model, head, step, fit.size, cfg=cfg, generator=gen, validate=validate if val.size else None,
            progress=progress, desc=desc,
        )
        with autocast(cfg.precision, device):
            emb = cell_embeddings(model, x, pooling=pooling)  # type: ignore[arg-type]
        head.eval()
        with torch.no_grad(), autocast(cfg.precision, device):
            out = head(torch.as_tensor(emb[test], device=device)).float()
    return head, flog, emb, out


def training_stats(pre_log: TrainLog, flog: TrainLog | None = None) -> dict[str, Any]:
    """``curves`` and ``cells_per_second`` of a :class:`TaskResult` from the pretraining log and,
    if any, the fine-tuning log (observations seen per second of training, both phases)."""
    if flog is None:
        return {"curves": {"pretrain_loss": pre_log.losses}, "cells_per_second": pre_log.n_seen / max(pre_log.seconds, 1e-9)}
    return {
        "curves": {"pretrain_loss": pre_log.losses, "finetune_loss": flog.losses, "val_score": flog.val_scores},
        "cells_per_second": (pre_log.n_seen + flog.n_seen) / max(pre_log.seconds + flog.seconds, 1e-9),
    }
