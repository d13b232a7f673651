"""Stage discover: Step I, the causal DAG among the features (paper 000, Sec. 3.3).

The stage's parameters are :class:`cape_pipeline.causal.DiscoverConfig`, the options of
:func:`cape_pipeline.causal.discover`; ``method="true-dag"`` takes the data's known graph
(``varp["true_dag"]``) instead of learning one, so later stages can run on ground truth.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from cape_pipeline.causal.config import DiscoverConfig
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.errors import CapeConfigError
from cape_pipeline.pipeline.stages._base import Stage, StageContext

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------- discover
def _discover_run(inputs: Mapping[str, Any], cfg: DiscoverConfig, ctx: StageContext) -> Any:
    from cape_pipeline.datasets import TRUE_DAG_KEY

    adata = inputs["preprocess"]
    truth = adata.varp.get(TRUE_DAG_KEY)
    if cfg.method == "true-dag":
        if truth is None:
            raise CapeConfigError(
                f"discover.method='true-dag': {ctx.source} has no known graph (varp['{TRUE_DAG_KEY}'])"
            )
        graph = CausalGraph.from_adjacency(truth, adata.var_names, params={"method": "true-dag"})
    else:
        from cape_pipeline.causal.api import discover_scored
        from cape_pipeline.distributed import init_from_env

        # under torchrun: each rank on its own GPU, Step I's minibatches split over the ranks
        cfg = dataclasses.replace(cfg, device=init_from_env(cfg.device))

        from cape_pipeline.io.readers import MISSING_ALLOWED

        if cfg.missing == "error" and adata.uns.get("cape_ingest", {}).get("modality") in MISSING_ALLOWED:
            # ingest lets NaN through only where the modality marks missing values with it
            # (methylation, proteomics): structure learning imputes feature means (logged there)
            cfg = dataclasses.replace(cfg, missing="mean")
        import warnings

        from cape_pipeline.errors import CapeWarning

        with warnings.catch_warnings():
            # the library warns (CapeWarning) and records the message in params["warnings"];
            # the stage logs it once, so a batch log carries it
            warnings.simplefilter("ignore", CapeWarning)
            graph, scores = discover_scored(adata, cfg, progress=ctx.progress)
        if graph.n_edges == 0:
            top = float(np.abs(scores).max()) if scores is not None else float("nan")
            graph.params["empty_graph_max_abs_weight"] = top
        for msg in graph.params.get("warnings", []):
            log.warning("%s", msg)
    if truth is not None:
        from cape_pipeline.causal.metrics import dag_metrics

        graph.params["metrics_vs_truth"] = {k: float(v) for k, v in dag_metrics(graph.adjacency, truth).items()}
    return graph


def _discover_summary(graph: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"n_edges": graph.n_edges, "cycle_edges_dropped": graph.n_cycle_edges_dropped}
    for key in ("support", "n_isolated", "isolated_share", "covariates_used", "edge_rule", "intervention_column",
                "n_perturbed_features"):
        if key in graph.params:
            out[key] = graph.params[key]
    m = graph.params.get("metrics_vs_truth")
    if m:
        out.update({f"{k}_vs_truth": round(m[k], 4) for k in ("shd", "f1") if k in m})
    return out


STAGE = Stage(
    name="discover",
    config_cls=DiscoverConfig,
    inputs=("preprocess",),
    run=_discover_run,
    save=lambda graph, d: graph.save(d),
    load=CausalGraph.load,
    export_files=("dag.parquet", "history.json"),
    summary=_discover_summary,
    doc_from=("cape_pipeline.causal.api:discover",),
)
