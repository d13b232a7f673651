"""Stage embed: Step II, the DAG on the hyperboloid (paper 000, Sec. 3.4)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cape_pipeline._utils import atomic_path
from cape_pipeline.pipeline.stages._base import Stage, StageContext, _check_device, _torch_device


# ---------------------------------------------------------------------------- embed
@dataclass(frozen=True)
class EmbedConfig:
    """Parameters of the embed stage (Step II; see :func:`cape_pipeline.hyperbolic.embed`).

    Defaults equal :func:`~cape_pipeline.hyperbolic.embed`'s (a test keeps them in step).
    """

    dim: int = 64
    k_hop: int = 2
    lambda_g: float = 0.1
    restart: float = 0.15
    max_epochs: int = 1000
    batch_size: int | None = None
    lr: float | None = None
    optimizer: str = "radam"
    geometry: str = "hyperbolic"
    curvature: float = 1.0
    learn_curvature: bool = True
    negatives: int | None = 512
    burn_in: int = 10
    burn_in_factor: float = 0.1
    tol: float = 1e-3
    window: int | None = None
    isolated: str = "origin"
    device: str = "cpu"
    seed: int = 0

    def __post_init__(self) -> None:
        from cape_pipeline.hyperbolic.embed import check_options

        check_options(**asdict(self))
        _check_device(self.device)

def _embed_run(inputs: Mapping[str, Any], cfg: EmbedConfig, ctx: StageContext) -> Any:
    from cape_pipeline.hyperbolic import embed

    kwargs = {**asdict(cfg), "device": _torch_device(cfg.device)}
    return embed(inputs["discover"], progress=ctx.progress, **kwargs)


def _embed_save(emb: Any, d: Path) -> None:
    arrays = {
        "hyperboloid": np.asarray(emb.hyperboloid, dtype=np.float64),
        "poincare": np.asarray(emb.poincare, dtype=np.float64),
        "pagerank": np.asarray(emb.pagerank, dtype=np.float64),
        "feature_names": np.asarray(emb.feature_names).astype(str),
    }
    if emb.euclidean is not None:
        arrays["euclidean"] = np.asarray(emb.euclidean, dtype=np.float64)
    with atomic_path(d / "embedding.npz") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
    meta = {"params": emb.params, "geometry": emb.geometry, "loss_history": list(map(float, emb.loss_history))}
    with atomic_path(d / "embedding.json") as tmp:
        tmp.write_text(json.dumps(meta, indent=1, default=str))
    emb.graph.write_parquet(d / "dag.parquet")


def _embed_load(d: Path) -> Any:
    from cape_pipeline.causal.graph import CausalGraph
    from cape_pipeline.hyperbolic import HyperbolicEmbedding

    with np.load(d / "embedding.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads((d / "embedding.json").read_text())
    return HyperbolicEmbedding(
        hyperboloid=arrays["hyperboloid"],
        poincare=arrays["poincare"],
        pagerank=arrays["pagerank"],
        feature_names=arrays["feature_names"].astype(object),
        loss_history=meta["loss_history"],
        params=meta["params"],
        geometry=meta["geometry"],
        graph=CausalGraph.read_parquet(d / "dag.parquet"),
        euclidean=arrays.get("euclidean"),
    )


def _embed_summary(emb: Any) -> dict[str, Any]:
    q = emb.params.get("quality") or {}
    out = {
        "dim": int(np.asarray(emb.poincare).shape[1]),
        "final_loss": round(float(emb.loss_history[-1]), 4) if len(emb.loss_history) else None,
        "epochs": emb.params.get("epochs_run"),
        "converged": emb.params.get("converged"),
        "n_isolated": emb.params.get("n_isolated"),
    }
    if emb.params.get("curvature") is not None:
        out["curvature"] = round(float(emb.params["curvature"]), 4)
    for key in ("map", "mean_rank", "spearman_norm_vs_neg_pagerank"):
        if q.get(key) is not None:
            out[key] = round(float(q[key]), 3)
    return out


STAGE = Stage(
    name="embed",
    config_cls=EmbedConfig,
    inputs=("discover",),
    run=_embed_run,
    save=_embed_save,
    load=_embed_load,
    export_files=("embedding.npz", "embedding.json", "dag.parquet"),
    summary=_embed_summary,
    doc_from=("cape_pipeline.hyperbolic.embed:embed",),
)
