"""Cell-type annotation (paper 000 Supp. E.2, split of Supp. F.1): fine-tune on 30 %, test on 70 %."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import anndata as ad
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import confusion_matrix
from sklearn.model_selection import train_test_split

from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.models import ClassifierHead
from cape_pipeline.models.loops import as_tensor
from cape_pipeline.tasks._base import (
    TaskConfig,
    TaskResult,
    check_fraction,
    check_pooling,
    dense_x,
    get_labels,
    task_inputs,
    validation_split,
)
from cape_pipeline.tasks._fit import TaskRun, finetune_pooled_head, training_stats
from cape_pipeline.tasks.metrics import classification_metrics

__all__ = ["AnnotationConfig", "annotate", "annotate_logreg", "stratified_split", "LABEL_KEYS"]

LABEL_KEYS: tuple[str, ...] = ("cell_type", "celltype", "bulk_labels", "cell_types", "label", "labels")
"""obs columns tried, in order, when no ``label_key`` is given."""


@dataclass(frozen=True)
class AnnotationConfig(TaskConfig):
    """Annotation budget and protocol.

    Attributes
    ----------
    test_size
        Fraction of cells held out for testing (paper: 0.7, i.e. fine-tune:test = 3:7).
    pooling
        Cell embedding fed to the classifier: ``cls``, ``mean`` or ``cls+mean``.
    pretrain_on
        ``all`` (default: every cell, the test cells too, transductive self-supervision as a
        practitioner pretrains on all the data at hand; labels are never used) or ``train``
        (the fine-tuning cells only).
    reference
        Also fit the logistic-regression reference on the same input and split.
    """

    test_size: float = 0.7
    pooling: str = "cls"
    pretrain_on: str = "all"
    reference: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_fraction("annotation.test_size", self.test_size)
        check_pooling("annotation", self.pooling)
        if self.pretrain_on not in ("train", "all"):
            raise CapeConfigError(f"annotation.pretrain_on: expected train or all, got {self.pretrain_on!r}")


def stratified_split(y: np.ndarray, test_size: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified train/test indices of integer labels ``(n,)``.

    Raises
    ------
    CapeDataError
        Fewer than two classes, or a class with fewer than two cells (cannot be stratified).
    """
    classes, counts = np.unique(y, return_counts=True)
    if classes.size < 2:
        raise CapeDataError(f"annotation: need at least 2 classes, got {classes.size}")
    if (counts < 2).any():
        raise CapeDataError(
            f"annotation: classes {classes[counts < 2].tolist()} have fewer than 2 cells; a stratified "
            "split needs at least 2 per class (drop or merge them)"
        )
    idx = np.arange(y.size)
    tr, te = train_test_split(idx, test_size=test_size, stratify=y, random_state=seed)
    return np.sort(tr), np.sort(te)


def _labels(adata: ad.AnnData, label_key: str | None) -> tuple[str, np.ndarray, np.ndarray]:
    key, y = get_labels(adata, label_key, LABEL_KEYS, "annotation")
    codes, names = pd.factorize(y.astype(str), sort=True)
    return key, codes.astype(np.int64), np.asarray(names)


def annotate_logreg(
    adata: ad.AnnData, *, label_key: str | None = None, config: AnnotationConfig | None = None, seed: int = 0
) -> TaskResult:
    """Logistic-regression reference on the log-normalized input with the same split (sklearn)."""
    t0 = time.perf_counter()
    cfg = config or AnnotationConfig()
    x = dense_x(adata)
    key, y, names = _labels(adata, label_key)
    tr, te = stratified_split(y, cfg.test_size, seed)
    clf = LogisticRegression(max_iter=2000, random_state=seed)
    t1 = time.perf_counter()
    clf.fit(x[tr], y[tr])
    fit_s = time.perf_counter() - t1
    pred = clf.predict(x[te])
    m = classification_metrics(y[te], pred)
    return TaskResult(
        task="annotation-logreg",
        metrics=m,
        seconds=time.perf_counter() - t0,
        cells_per_second=tr.size / max(fit_s, 1e-9),
        predictions=_predictions(adata, te, y, pred, names),
        confusion=_confusion(y[te], pred, names),
        params={"task": "annotation-logreg", "label_key": key, "seed": seed, "n_train": int(tr.size), "n_test": int(te.size)},
    )


def _predictions(adata: ad.AnnData, te: np.ndarray, y: np.ndarray, pred: np.ndarray, names: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {"true": pd.Categorical(names[y[te]], categories=names), "predicted": pd.Categorical(names[pred], categories=names)},
        index=adata.obs_names[te],
    )


def _confusion(y_true: np.ndarray, y_pred: np.ndarray, names: np.ndarray) -> pd.DataFrame:
    cm = confusion_matrix(y_true, y_pred, labels=np.arange(names.size))
    return pd.DataFrame(cm, index=pd.Index(names, name="true"), columns=pd.Index(names, name="predicted"))


def annotate(adata: ad.AnnData, *, config: AnnotationConfig | None = None, **options: Any) -> TaskResult:
    """Fine-tune a backbone + classifier on 30 % of the cells, report accuracy/macro-F1 on 70 %.

    Steps: seeded stratified split → masked-value pretraining (on all cells by default; labels
    are never used) → a validation split carved from the fine-tune cells → end-to-end
    fine-tuning with cross-entropy on the pooled cell embedding (AdamW, warmup + cosine decay,
    gradient clipping), early stopping on the validation loss and the best checkpoint →
    prediction on the test cells. ``metrics`` also holds ``reference_accuracy`` /
    ``reference_macro_f1`` from :func:`annotate_logreg` when ``config.reference``.

    Parameters
    ----------
    adata
        Log-normalized expression ``X`` (n_obs, n_vars); labels in ``obs``.
    config
        The budget and protocol (``None``: :class:`AnnotationConfig` defaults).
    **options
        The run's settings (:class:`~cape_pipeline.tasks._fit.TaskRun`): the keywords of
        :func:`~cape_pipeline.tasks.run_task` with its defaults. ``pretrained``: a backbone
        already pretrained with these settings on this data (see
        :func:`cape_pipeline.tasks.pretrain`; needs ``pretrain_on="all"``); it is copied, not
        changed. ``None`` pretrains here.

    Returns
    -------
    TaskResult
        ``embeddings`` (n_obs, D) of all cells after fine-tuning; ``predictions`` and
        ``confusion`` on the test cells; ``model`` (a :class:`~cape_pipeline.tasks.TrainedModel`
        that predicts cell types of new cells).

    Raises
    ------
    CapeDataError
        Missing labels, unsplittable classes, bad angles.
    CapeConfigError
        ``pretrained`` made with other settings.
    TypeError
        An unknown keyword in ``options``.
    """
    t0 = time.perf_counter()
    run = TaskRun(**options)
    seed, device = run.seed, run.device
    cfg = config or AnnotationConfig()
    x, positions = task_inputs(adata, run.pe, run.angles, cfg.attention)
    key, y, names = _labels(adata, run.label_key)
    tr, te = stratified_split(y, cfg.test_size, seed)
    pre_rows = tr if cfg.pretrain_on == "train" else np.arange(adata.n_obs)
    if run.pretrained is not None and cfg.pretrain_on != "all":
        raise CapeConfigError("annotation: a shared pretrained backbone needs pretrain_on='all'")
    pre = run.pretrain(x[pre_rows], cfg, positions, adata.var_names)
    model = pre.model
    fit_pos, val_pos = validation_split(tr.size, cfg.val_fraction, seed, y[tr])
    fit, val = tr[fit_pos], tr[val_pos]
    xt = as_tensor(x, device)
    yt = torch.as_tensor(y, device=device)
    head, flog, emb, out = finetune_pooled_head(
        model, lambda: ClassifierHead(model.config.d_model, names.size), xt, yt, fit=fit, val=val, test=te,
        loss=F.cross_entropy, cfg=cfg, pooling=cfg.pooling, seed=seed, device=device, progress=run.progress,
        desc=f"finetune {run.pe} seed {seed}", val_batch=256,
    )
    pred = out.argmax(1).cpu().numpy()
    metrics = classification_metrics(y[te], pred)
    params = run.params(
        "annotation", label_key=key, cfg=cfg, model=model, flog=flog,
        n_train=int(tr.size), n_fit=int(fit.size), n_val=int(val.size), n_test=int(te.size), n_classes=int(names.size),
    )
    params["n_parameters"] = int(sum(p.numel() for p in model.parameters()) + sum(p.numel() for p in head.parameters()))
    if cfg.reference:
        ref = annotate_logreg(adata, label_key=key, config=cfg, seed=seed)
        metrics.update({f"reference_{k}": v for k, v in ref.metrics.items()})
    trained = run.trained_model(
        adata, "annotation", model, pooling=cfg.pooling, label_key=key, head=head, classes=[str(c) for c in names],
    )
    return TaskResult(
        task="annotation",
        metrics=metrics,
        seconds=time.perf_counter() - t0,
        **training_stats(pre.log, flog),
        embeddings=emb,
        predictions=_predictions(adata, te, y, pred, names),
        confusion=_confusion(y[te], pred, names),
        params=params,
        model=trained,
    )
