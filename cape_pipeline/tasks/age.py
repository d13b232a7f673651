"""Age prediction from methylation β values (paper 000 Supp. E.4): median absolute error."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import anndata as ad
import numpy as np
import pandas as pd
import torch
from sklearn.linear_model import ElasticNet

from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.models import RegressionHead, pool
from cape_pipeline.models.training import as_tensor, cell_embeddings, seeded, train_epochs
from cape_pipeline.tasks._base import (
    Pretrained,
    TaskConfig,
    TaskResult,
    check_pe_inputs,
    dense_x,
    use_pretrained,
    validation_split,
)
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
        if not 0.0 < self.test_size < 1.0:
            raise CapeConfigError(f"age.test_size: expected in (0, 1), got {self.test_size}")
        if self.pooling not in ("cls", "mean", "cls+mean"):
            raise CapeConfigError(f"age.pooling: expected cls, mean or cls+mean, got {self.pooling!r}")


def predict_age(
    adata: ad.AnnData,
    *,
    pe: str = "cape",
    angles: np.ndarray | None = None,
    backbone: str = "scgpt",
    config: AgeConfig | None = None,
    label_key: str | None = None,
    seed: int = 0,
    device: str | torch.device = "cpu",
    progress: bool = False,
    pretrained: Pretrained | None = None,
) -> TaskResult:
    """Pretrain (masked β), fine-tune a regression head on standardized age; MedAE in years.

    Pretraining sees the training samples only; fine-tuning holds out ``val_fraction`` of them
    for early stopping on the validation MSE and keeps the best checkpoint.

    Missing β values (NaN) are allowed: they are tokens with a <missing> value embedding
    (and, for ``methylgpt``, excluded as attention keys).

    Parameters
    ----------
    pretrained
        A backbone already pretrained with these settings on the training samples; ``None``
        pretrains here.

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
    """
    from cape_pipeline.models import TrainedModel

    t0 = time.perf_counter()
    cfg = config or AgeConfig()
    key = label_key or "age"
    if key not in adata.obs.columns:
        raise CapeDataError(f"age: obs has no {key!r} column; pass label_key=")
    age = pd.to_numeric(adata.obs[key], errors="coerce").to_numpy(dtype=np.float64)
    if np.isnan(age).any():
        raise CapeDataError(f"age: obs[{key!r}] has {int(np.isnan(age).sum())} missing or non-numeric values")
    x = dense_x(adata, allow_nan=True)
    if np.isnan(x).all(axis=1).any():
        raise CapeDataError("age: some samples have no observed value at all")
    angles = check_pe_inputs(pe, angles, adata.n_vars)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(adata.n_obs)
    n_te = max(1, int(round(cfg.test_size * adata.n_obs)))
    te, tr = np.sort(perm[:n_te]), np.sort(perm[n_te:])
    if tr.size < 2:
        raise CapeDataError(f"age: only {tr.size} training samples")
    mu, sd = age[tr].mean(), max(age[tr].std(), 1e-6)
    pre = use_pretrained(
        pretrained, x[tr], backbone=backbone, cfg=cfg, pe=pe, angles=angles, seed=seed, device=device, progress=progress
    )
    model = pre.model
    fit_pos, val_pos = validation_split(tr.size, cfg.val_fraction, seed)
    fit, val = tr[fit_pos], tr[val_pos]
    gen = torch.Generator().manual_seed(seed + 1)
    xt = as_tensor(x, device)
    yz = torch.as_tensor((age - mu) / sd, dtype=torch.float32, device=device)
    with seeded(seed + 1):
        head = RegressionHead(model.config.d_model).to(device)
        xfit, yfit = xt[fit], yz[fit]

        def predict_z(xb: torch.Tensor) -> torch.Tensor:
            tok = model.tokenize(xb)
            return head(pool(model(tok), tok, cfg.pooling))  # type: ignore[arg-type]

        def step(bi: torch.Tensor) -> torch.Tensor:
            return ((predict_z(xfit[bi]) - yfit[bi]) ** 2).mean()

        def validate() -> float:
            return -float(((predict_z(xt[val]) - yz[val]) ** 2).mean())

        flog = train_epochs(
            list(model.parameters()) + list(head.parameters()), step, fit.size,
            epochs=cfg.finetune_epochs, batch_size=cfg.batch_size, lr=cfg.lr, generator=gen,
            weight_decay=cfg.weight_decay, warmup=cfg.warmup, modules=[model, head],
            validate=validate if val.size else None, patience=cfg.patience, progress=progress, desc="age",
        )
        emb = cell_embeddings(model, xt, pooling=cfg.pooling)  # type: ignore[arg-type]
        head.eval()
        with torch.no_grad():
            pred = head(torch.as_tensor(emb[te], device=device)).cpu().numpy() * sd + mu
    metrics = regression_metrics(age[te], pred)
    if cfg.reference:
        col_mean = np.nan_to_num(np.nanmean(x[tr], axis=0), nan=0.0)
        xi = np.where(np.isnan(x), col_mean, x)
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            en = ElasticNet(alpha=1e-3, l1_ratio=0.5, max_iter=5000, random_state=seed).fit(xi[tr], age[tr])
        ref = regression_metrics(age[te], en.predict(xi[te]))
        metrics.update({f"reference_{k}": v for k, v in ref.items()})
    params: dict[str, Any] = {
        "task": "age", "backbone": backbone, "pe": pe, "seed": seed, "label_key": key,
        "n_train": int(tr.size), "n_fit": int(fit.size), "n_val": int(val.size), "n_test": int(te.size),
        "best_epoch": flog.best_epoch, "stopped_early": flog.stopped_early,
        "config": cfg.to_dict(), "model_config": dataclasses.asdict(model.config),
    }
    return TaskResult(
        task="age",
        metrics=metrics,
        curves={"pretrain_loss": pre.log.losses, "finetune_loss": flog.losses, "val_score": flog.val_scores},
        seconds=time.perf_counter() - t0,
        cells_per_second=(pre.log.n_seen + flog.n_seen) / max(pre.log.seconds + flog.seconds, 1e-9),
        embeddings=emb,
        predictions=pd.DataFrame({"age": age[te], "predicted": pred}, index=adata.obs_names[te]),
        params=params,
        model=TrainedModel(
            backbone=model, backbone_name=backbone, var_names=list(map(str, adata.var_names)), task="age", head=head,
            pooling=cfg.pooling, target_mean=float(mu), target_sd=float(sd), meta={"pe": pe, "seed": seed, "label_key": key},
        ),
    )
