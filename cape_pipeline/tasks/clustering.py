"""Cell clustering of self-supervised cell embeddings (paper 000 Supp. E.3): k-means; ARI, NMI, ASW."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import anndata as ad
import numpy as np
import pandas as pd
from sklearn.cluster import KMeans
from sklearn.decomposition import PCA

from cape_pipeline.errors import CapeDataError
from cape_pipeline.models.loops import as_tensor, autocast, cell_embeddings
from cape_pipeline.tasks._base import TaskConfig, TaskResult, check_pooling, get_labels, task_inputs
from cape_pipeline.tasks._fit import TaskRun, training_stats
from cape_pipeline.tasks.annotation import LABEL_KEYS
from cape_pipeline.tasks.metrics import clustering_metrics

__all__ = ["ClusteringConfig", "cluster"]


@dataclass(frozen=True)
class ClusteringConfig(TaskConfig):
    """Clustering budget.

    Attributes
    ----------
    pretrain_epochs
        Masked-value pretraining epochs on all cells (labels unused); the only training here.
    pooling
        Cell embedding: ``mean`` of token outputs (default; it is what pretraining trains),
        ``cls`` or ``cls+mean``.
    n_init
        k-means restarts.
    reference
        Also cluster the top-50 PCs of the input (``reference_*`` metrics).
    """

    finetune_epochs: int = 0
    pooling: str = "mean"
    n_init: int = 10
    reference: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_pooling("clustering", self.pooling)


def _kmeans(emb: np.ndarray, k: int, seed: int, n_init: int) -> np.ndarray:
    return KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit_predict(emb)


def cluster(adata: ad.AnnData, *, config: ClusteringConfig | None = None, **options: Any) -> TaskResult:
    """Pretrain (masked values, all cells), embed the cells, k-means with k = number of labels.

    Labels are used only to choose k and to score (ARI, NMI against labels; ASW of the
    embeddings w.r.t. labels, rescaled to [0, 1]). ``reference_*`` metrics cluster the top-50
    principal components of the same input.

    Parameters
    ----------
    adata
        Log-normalized expression ``X`` (n_obs, n_vars); labels in ``obs``.
    config
        The budget (``None``: :class:`ClusteringConfig` defaults).
    **options
        The run's settings (:class:`~cape_pipeline.tasks._fit.TaskRun`): the keywords of
        :func:`~cape_pipeline.tasks.run_task` with its defaults. ``pretrained``: a backbone
        already pretrained with these settings on all cells
        (:func:`cape_pipeline.tasks.pretrain`), shared with the annotation task; ``None``
        pretrains here.

    Returns
    -------
    TaskResult
        ``embeddings`` (n_obs, D); ``predictions`` with the cluster of every cell; ``model``
        (the pretrained backbone, which embeds new cells).

    Raises
    ------
    CapeDataError
        Missing labels, fewer than 2 label values, bad angles.
    CapeConfigError
        ``pretrained`` made with other settings.
    TypeError
        An unknown keyword in ``options``.
    """
    t0 = time.perf_counter()
    run = TaskRun(**options)
    seed = run.seed
    cfg = config or ClusteringConfig()
    x, positions = task_inputs(adata, run.pe, run.angles, cfg.attention)
    key, ys = get_labels(adata, run.label_key, LABEL_KEYS, "clustering")
    y, names = pd.factorize(ys.astype(str), sort=True)
    k = int(names.size)
    if k < 2 or k >= adata.n_obs:
        raise CapeDataError(f"clustering: need 2 <= number of labels < n_obs, got {k} labels for {adata.n_obs} cells")
    pre = run.pretrain(x, cfg, positions, adata.var_names)
    model, plog = pre.model, pre.log
    with autocast(cfg.precision, run.device):
        emb = cell_embeddings(model, as_tensor(x, run.device), pooling=cfg.pooling)  # type: ignore[arg-type]
    clusters = _kmeans(emb, k, seed, cfg.n_init)
    metrics = clustering_metrics(emb, y, clusters, seed=seed)
    if cfg.reference:
        n_pc = int(min(50, x.shape[0] - 1, x.shape[1]))
        pcs = PCA(n_components=n_pc, random_state=seed).fit_transform(x)
        ref = clustering_metrics(pcs, y, _kmeans(pcs, k, seed, cfg.n_init), seed=seed)
        metrics.update({f"reference_{m}": v for m, v in ref.items()})
    params = run.params("clustering", label_key=key, cfg=cfg, model=model, k=k)
    return TaskResult(
        task="clustering",
        metrics=metrics,
        seconds=time.perf_counter() - t0,
        **training_stats(plog),
        embeddings=emb,
        predictions=pd.DataFrame({"label": ys.astype(str).to_numpy(), "cluster": clusters}, index=adata.obs_names),
        params=params,
        model=run.trained_model(adata, "clustering", model, pooling=cfg.pooling),
    )
