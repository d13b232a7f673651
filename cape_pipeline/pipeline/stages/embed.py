"""Stage embed: Step II, the DAG on the hyperboloid (paper 000, Sec. 3.4).

The stage's parameters are :class:`cape_pipeline.hyperbolic.EmbedConfig`, the options of
:func:`cape_pipeline.hyperbolic.embed`; the result saves and loads itself
(:meth:`~cape_pipeline.hyperbolic.HyperbolicEmbedding.save`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from cape_pipeline._utils import check_device, resolve_device
from cape_pipeline.hyperbolic import EmbedConfig, HyperbolicEmbedding
from cape_pipeline.pipeline.stages._base import Stage, StageContext


def _embed_run(inputs: Mapping[str, Any], cfg: EmbedConfig, ctx: StageContext) -> Any:
    from cape_pipeline.hyperbolic import embed

    return embed(inputs["discover"], replace(cfg, device=str(resolve_device(cfg.device))), progress=ctx.progress)


def _embed_check(configs: Mapping[str, Any]) -> None:
    """``embed.device``: ``auto``, ``cpu`` or an available ``cuda[:i]`` (``auto`` is the pipeline's)."""
    check_device(configs["embed"].device, "embed.device")


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
    save=lambda emb, d: emb.save(d),
    load=HyperbolicEmbedding.load,
    export_files=("embedding.npz", "embedding.json", "edge_scores.parquet", "dag.parquet"),
    summary=_embed_summary,
    check=_embed_check,
)
