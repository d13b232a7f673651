"""Age prediction from methylation β values (paper 000 Supp. E.4): median absolute error."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any

import anndata as ad
import numpy as np
import pandas as pd
import torch
from sklearn.linear_model import ElasticNet

from cape_pipeline.errors import CapeDataError
from cape_pipeline.models import RegressionHead
from cape_pipeline.models.loops import as_tensor
from cape_pipeline.tasks._base import (
    TaskConfig,
    TaskResult,
    check_fraction,
    check_pe_inputs,
    check_pooling,
    dense_x,
    validation_split,
)
from cape_pipeline.tasks._fit import TaskRun, finetune_pooled_head, training_stats
from cape_pipeline.tasks.metrics import regression_metrics

__all__ = ["AgeConfig", "predict_age"]


@dataclass(frozen=True)
class AgeConfig(TaskConfig):
    """Age-regression protocol and budget.

    Attributes
    ----------
    test_size
        Held-out fraction of samples (seeded random split).
    pooling
        Sample embedding fed to the regression head.
    reference
        Also fit an ElasticNet epigenetic clock (mean-imputed β, sklearn) on the same split.
    """

    finetune_epochs: int = 60
    test_size: float = 0.3
    pooling: str = "cls+mean"
    reference: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_fraction("age.test_size", self.test_size)
        check_pooling("age", self.pooling)


def predict_age(adata: ad.AnnData, *, config: AgeConfig | None = None, **options: Any) -> TaskResult:
    """Pretrain (masked β), fine-tune a regression head on standardized age; MedAE in years.

    Pretraining sees the training samples only; fine-tuning holds out ``val_fraction`` of them
    for early stopping on the validation MSE and keeps the best checkpoint.

    Missing β values (NaN) are allowed: they are tokens with a <missing> value embedding
    (and, for ``methylgpt``, excluded as attention keys).

    Parameters
    ----------
    adata
        β values ``X`` (n_obs, n_vars), NaN where missing; ages in ``obs``.
    config
        The protocol and budget (``None``: :class:`AgeConfig` defaults).
    **options
        The run's settings (:class:`~cape_pipeline.tasks._fit.TaskRun`): the keywords of
        :func:`~cape_pipeline.tasks.run_task` with its defaults (``label_key`` default
        ``"age"``). ``pretrained``: a backbone already pretrained with these settings on the
        training samples; ``None`` pretrains here.

    Returns
    -------
    TaskResult
        ``metrics``: ``medae``, ``mae``, ``pearson_r`` (test samples) and ``reference_*`` of
        the ElasticNet clock; ``predictions``: true and predicted age of the test samples;
        ``embeddings`` (n_obs, D); ``model`` (predicts age of new samples).

    Raises
    ------
    CapeDataError
        No age column, non-numeric or missing ages, bad angles.
    TypeError
        An unknown keyword in ``options``.
    """
    t0 = time.perf_counter()
    run = TaskRun(**options)
    seed, device = run.seed, run.device
    cfg = config or AgeConfig()
    key = run.label_key or "age"
    if key not in adata.obs.columns:
        raise CapeDataError(f"age: obs has no {key!r} column; pass label_key=")
    age = pd.to_numeric(adata.obs[key], errors="coerce").to_numpy(dtype=np.float64)
    if np.isnan(age).any():
        raise CapeDataError(f"age: obs[{key!r}] has {int(np.isnan(age).sum())} missing or non-numeric values")
    x = dense_x(adata, allow_nan=True)
    if np.isnan(x).all(axis=1).any():
        raise CapeDataError("age: some samples have no observed value at all")
    positions = check_pe_inputs(run.pe, run.angles, adata.n_vars, cfg.attention)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(adata.n_obs)
    n_te = max(1, int(round(cfg.test_size * adata.n_obs)))
    te, tr = np.sort(perm[:n_te]), np.sort(perm[n_te:])
    if tr.size < 2:
        raise CapeDataError(f"age: only {tr.size} training samples")
    mu, sd = age[tr].mean(), max(age[tr].std(), 1e-6)
    pre = run.pretrain(x[tr], cfg, positions, adata.var_names)
    model = pre.model
    fit_pos, val_pos = validation_split(tr.size, cfg.val_fraction, seed)
    fit, val = tr[fit_pos], tr[val_pos]
    xt = as_tensor(x, device)
    yz = torch.as_tensor((age - mu) / sd, dtype=torch.float32, device=device)
    head, flog, emb, out = finetune_pooled_head(
        model, lambda: RegressionHead(model.config.d_model), xt, yz, fit=fit, val=val, test=te,
        loss=lambda p, t: ((p - t) ** 2).mean(), cfg=cfg, pooling=cfg.pooling, seed=seed, device=device,
        progress=run.progress, desc=f"age {run.pe} seed {seed}",
    )
    pred = out.cpu().numpy() * sd + mu
    metrics = regression_metrics(age[te], pred)
    if cfg.reference:
        col_mean = np.nan_to_num(np.nanmean(x[tr], axis=0), nan=0.0)
        xi = np.where(np.isnan(x), col_mean, x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            en = ElasticNet(alpha=1e-3, l1_ratio=0.5, max_iter=5000, random_state=seed).fit(xi[tr], age[tr])
        ref = regression_metrics(age[te], en.predict(xi[te]))
        metrics.update({f"reference_{k}": v for k, v in ref.items()})
    params = run.params(
        "age", label_key=key, cfg=cfg, model=model, flog=flog,
        n_train=int(tr.size), n_fit=int(fit.size), n_val=int(val.size), n_test=int(te.size),
    )
    return TaskResult(
        task="age",
        metrics=metrics,
        seconds=time.perf_counter() - t0,
        **training_stats(pre.log, flog),
        embeddings=emb,
        predictions=pd.DataFrame({"age": age[te], "predicted": pred}, index=adata.obs_names[te]),
        params=params,
        model=run.trained_model(
            adata, "age", model, pooling=cfg.pooling, label_key=key, head=head, target_mean=float(mu), target_sd=float(sd),
        ),
    )
