"""Stage discover: Step I, the causal DAG among the features (paper 000, Sec. 3.3).

The stage's parameters are :class:`cape_pipeline.causal.DiscoverConfig`, the options of
:func:`cape_pipeline.causal.discover`, and ``held_out_split`` (:class:`DiscoverStageConfig`);
``method="true-dag"`` takes the data's known graph (``varp["true_dag"]``) instead of learning
one, so later stages can run on ground truth.

Blind to the perturbation task's test conditions: when the run's train stage scores the
perturbation task and Step I reads perturbation labels, the cells of every condition that
task holds out (for any of its seeds) are left out of Step I, so the graph behind ``cape`` has
not seen the perturbations it is scored on — by their labels or by their expression. The split
is the task's own (:func:`cape_pipeline.tasks.perturbation.split_perturbations`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cape_pipeline.causal.config import DiscoverConfig
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.errors import CapeConfigError
from cape_pipeline.pipeline.stages._base import Stage, StageContext

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class DiscoverStageConfig(DiscoverConfig):
    """The discover stage's parameters: :class:`~cape_pipeline.causal.DiscoverConfig`'s and one more.

    Attributes
    ----------
    held_out_split
        The perturbation task's test split that Step I is kept blind to: ``label_key`` (the
        condition column), ``seeds`` (the train stage's seeds) and :class:`~cape_pipeline.tasks.PerturbationConfig`'s
        ``split``, ``test_fraction``, ``unseen_gene_fraction`` and ``combo_seen2_test_fraction``.
        The cells of every condition that split holds out for any of the seeds are left out of
        Step I (recorded in the graph's ``params["held_out_conditions"]`` and
        ``params["held_out_cells"]``). Filled in by the pipeline when the train stage runs the
        perturbation task (``train.tasks`` or the dataset's catalog entry) and Step I reads
        perturbation labels (``interventions`` not ``none``), also when the run stops before the
        train stage (``--until discover`` keys Step I as the whole run does); ``{"seeds": []}``
        (CLI: ``--set 'discover.held_out_split={"seeds": []}'``): Step I sees every cell.
    """

    held_out_split: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.held_out_split, Mapping):
            raise CapeConfigError(f"held_out_split: expected a dict, got {self.held_out_split!r}")
        split = self.held_out_split
        missing = {"seeds"} - set(split) if split.get("seeds") == [] else {"label_key", "seeds", *_SPLIT_FIELDS} - set(split)
        if split and missing:
            raise CapeConfigError(f"held_out_split: missing {sorted(missing)} (or {{'seeds': []}}: Step I sees every cell)")


#: the PerturbationConfig fields that decide its test split
_SPLIT_FIELDS = ("split", "test_fraction", "unseen_gene_fraction", "combo_seen2_test_fraction")


def blind_split(train: Any, interventions: str, source: str | None) -> dict[str, Any]:
    """The ``held_out_split`` the pipeline gives Step I for a train stage config ``train``
    (empty where the perturbation task does not run or Step I reads no labels)."""
    from cape_pipeline.tasks import PerturbationConfig
    from cape_pipeline.tasks.compare import declared_tasks

    if train is None or train.encodings is not None or interventions == "none":
        return {}
    if "perturbation" not in (declared_tasks(train, source) or []):
        return {}
    pcfg = PerturbationConfig()
    return {"label_key": train.label_key or "condition", "seeds": list(range(train.seed, train.seed + train.n_seeds)),
            **{k: getattr(pcfg, k) for k in _SPLIT_FIELDS}}


def held_out_conditions(adata: Any, split: Mapping[str, Any]) -> list[str]:
    """The conditions of ``adata`` that the perturbation task holds out under ``split``
    (:class:`DiscoverStageConfig`), for any of its seeds, sorted.

    Raises
    ------
    CapeDataError
        ``obs`` lacks the condition column, or the task's split fails on it
        (:func:`~cape_pipeline.tasks.perturbation.split_perturbations`).
    """
    from cape_pipeline._keys import condition_labels
    from cape_pipeline.errors import CapeDataError
    from cape_pipeline.tasks import PerturbationConfig
    from cape_pipeline.tasks.perturbation import split_perturbations

    key = split["label_key"]
    if key not in adata.obs.columns:
        raise CapeDataError(f"discover: the perturbation task's split reads obs[{key!r}], which this data lacks")
    conditions = np.unique(condition_labels(adata.obs, key, "discover: ")).tolist()
    pcfg = PerturbationConfig(**{k: split[k] for k in _SPLIT_FIELDS})
    out: set[str] = set()
    for seed in split["seeds"]:
        _, subgroup = split_perturbations(conditions, adata.var_names, pcfg, int(seed))
        out.update(c for c, g in subgroup.items() if g != "train")
    return sorted(out)


def _discover_derive(configs: Mapping[str, Any], source: str | None) -> DiscoverStageConfig:
    """``held_out_split`` from the train stage's config (:func:`blind_split`), unless set."""
    cfg = configs["discover"]
    if cfg.held_out_split or cfg.method == "true-dag":
        return cfg
    return dataclasses.replace(cfg, held_out_split=blind_split(configs.get("train"), cfg.interventions, source))


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

        held_out: list[str] = []
        split = dict(cfg.held_out_split)
        if split.get("seeds"):
            from cape_pipeline._keys import condition_labels

            held_out = held_out_conditions(adata, split)
            seen = ~np.isin(condition_labels(adata.obs, split["label_key"], "discover: "), held_out)
            log.info("Step I leaves out the %d cells of the %d conditions the perturbation task holds out",
                     int((~seen).sum()), len(held_out))
            adata = adata[seen]
        cfg = DiscoverConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(DiscoverConfig)})

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
        if held_out:
            graph.params.update(held_out_conditions=held_out, held_out_cells=int(inputs["preprocess"].n_obs - adata.n_obs),
                                held_out_split=split)
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
    config_cls=DiscoverStageConfig,
    inputs=("preprocess",),
    run=_discover_run,
    save=lambda graph, d: graph.save(d),
    load=CausalGraph.load,
    export_files=("dag.parquet", "history.json"),
    summary=_discover_summary,
    derive=_discover_derive,
    doc_from=("cape_pipeline.causal.config:DiscoverConfig", "cape_pipeline.causal.api:discover"),
)
