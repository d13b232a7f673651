"""Stage discover: Step I, the causal DAG among the features (paper 000, Sec. 3.3).

The stage's parameters are :class:`cape_pipeline.causal.DiscoverConfig`, the options of
:func:`cape_pipeline.causal.discover`, and ``hold_out_test_conditions`` (:class:`DiscoverStageConfig`);
``method="true-dag"`` takes the data's known graph (``varp["true_dag"]``) instead of learning
one, so later stages can run on ground truth.

Blind to the perturbation task's test conditions: when the run's train stage scores the
perturbation task, the cells of every condition that task holds out (for any of its seeds) are
left out of Step I, so the graph behind ``cape`` has not seen the perturbations it is scored on —
by their labels or by their expression. The split is the task's own
(:func:`cape_pipeline.tasks.perturbation.split_perturbations`); the price is data: each seed
draws its own split, so Step I loses the union (``DiscoverStageConfig.held_out_split``, derived
from the train stage's config). ``hold_out_test_conditions=False`` lets Step I see every cell.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cape_pipeline.causal.config import DiscoverConfig
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.errors import CapeConfigError
from cape_pipeline.pipeline.stages._base import Stage, StageContext

log = logging.getLogger(__name__)

#: the PerturbationConfig fields that decide its test split
_SPLIT_FIELDS = ("split", "test_fraction", "unseen_gene_fraction", "combo_seen2_test_fraction")
#: share of the perturbation conditions left out of Step I above which the stage warns
HELD_OUT_WARN_SHARE = 0.5
_OPT_OUT = "--set discover.hold_out_test_conditions=false"


@dataclass(frozen=True)
class DiscoverStageConfig(DiscoverConfig):
    """The discover stage's parameters: :class:`~cape_pipeline.causal.DiscoverConfig`'s, the
    user's choice ``hold_out_test_conditions`` and the split it derives, ``held_out_split``.

    Attributes
    ----------
    hold_out_test_conditions
        Leave the cells of the perturbation task's test conditions out of Step I (True, the
        default), so the graph behind ``cape`` has not seen the perturbations it is scored on, by
        their labels or by their expression; only where the run's train stage scores the
        perturbation task. Each seed draws its own test split, so Step I loses the union: with 3
        seeds about 64 % of a Norman-size screen's conditions, and above half of them the stage
        warns. False: Step I sees every cell, and the run's report says it was not blind.
    held_out_split
        Derived, not set: the perturbation task's test split that Step I is kept blind to, filled
        in by the pipeline from the train stage's config (:func:`blind_split`) whenever
        ``hold_out_test_conditions`` is True and the train stage runs the perturbation task
        (``train.tasks`` or the dataset's catalog entry), also when the run stops before the
        train stage (``--until discover`` keys Step I as the whole run does); empty where the task
        does not run, with ``train.encodings`` or ``method="true-dag"``. Its keys: ``label_key``
        (str, the task's condition column,
        :func:`~cape_pipeline.tasks.compare.perturbation_label_key`), ``seeds`` (list of ints ≥ 0,
        the train stage's seeds) and :class:`~cape_pipeline.tasks.PerturbationConfig`'s ``split``,
        ``test_fraction``, ``unseen_gene_fraction`` and ``combo_seen2_test_fraction``. The cells
        of every condition that split holds out for any of the seeds are left out of Step I
        (recorded in the graph's ``params["held_out_conditions"]``, ``["held_out_cells"]``,
        ``["held_out_share"]``, the share of the perturbation conditions, and
        ``["held_out_split"]``).

    Raises
    ------
    CapeConfigError
        ``hold_out_test_conditions`` not a bool; ``held_out_split`` with a key it does not know, a
        missing key, or a value of the wrong type or range (``held_out_split.FIELD: ...``).
    """

    hold_out_test_conditions: bool = True
    held_out_split: Mapping[str, Any] = field(default_factory=dict, metadata={"derived": True})

    def __post_init__(self, support: str | None = None) -> None:
        super().__post_init__(support)
        if not isinstance(self.hold_out_test_conditions, bool):
            raise CapeConfigError(f"hold_out_test_conditions: expected true or false, got {self.hold_out_test_conditions!r}")
        split = self.held_out_split
        if not isinstance(split, Mapping):
            raise CapeConfigError(f"held_out_split: expected a dict, got {split!r}")
        if not split:
            return
        seeds = split.get("seeds")
        if not isinstance(seeds, list | tuple) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in seeds):
            raise CapeConfigError(f"held_out_split.seeds: expected a list of integers >= 0, got {seeds!r}")
        known = {"label_key", "seeds", *_SPLIT_FIELDS}
        if set(split) != known:
            raise CapeConfigError(f"held_out_split: expected the keys {sorted(known)}, got {sorted(split)}")
        if not isinstance(split["label_key"], str) or not split["label_key"]:
            raise CapeConfigError(f"held_out_split.label_key: expected an obs column name, got {split['label_key']!r}")
        from cape_pipeline.tasks import PerturbationConfig

        try:
            PerturbationConfig(**{k: split[k] for k in _SPLIT_FIELDS})
        except CapeConfigError as exc:
            raise CapeConfigError(f"held_out_split.{str(exc).removeprefix('perturbation.')}") from exc

    @classmethod
    def stage_params(cls, params: Mapping[str, Any], *, where: str = "discover.") -> dict[str, Any]:
        """:meth:`DiscoverConfig.stage_params`, after the derived ``held_out_split``: the one
        setting it took before, ``{"seeds": []}`` (Step I sees every cell), becomes
        ``hold_out_test_conditions=False`` with a :class:`FutureWarning`; any other value is refused.

        Raises
        ------
        CapeConfigError
            ``held_out_split`` set to anything but ``{"seeds": []}``, or that beside
            ``hold_out_test_conditions=True``; as :meth:`DiscoverConfig.stage_params`.
        """
        out = dict(params)
        if "held_out_split" in out:
            split = out.pop("held_out_split")
            new = f"{where}hold_out_test_conditions"
            if not (isinstance(split, Mapping) and dict(split) == {"seeds": []}):
                raise CapeConfigError(
                    f"{where}held_out_split is derived from the train stage (the perturbation task's test split) "
                    f"and cannot be set; to let Step I see every cell, set {new}=false"
                )
            if out.get("hold_out_test_conditions", False) is not False:
                raise CapeConfigError(f"{where}held_out_split={{'seeds': []}} is the earlier spelling of {new}=false; "
                                      f"give only {new}")
            warnings.warn(f"{where}held_out_split={{'seeds': []}} is now {new}=false; the earlier spelling will be "
                          "removed", FutureWarning, stacklevel=3)
            out["hold_out_test_conditions"] = False
        return super().stage_params(out, where=where)


def blind_split(train: Any, source: str | None) -> dict[str, Any]:
    """The ``held_out_split`` the pipeline gives Step I for a train stage config ``train``
    (:class:`~cape_pipeline.tasks.compare.TrainConfig` or None): the split the train stage's
    perturbation task draws (:func:`~cape_pipeline.tasks.compare.compare_arms` passes it no split
    option, so :class:`~cape_pipeline.tasks.PerturbationConfig`'s defaults), or ``{}`` where the
    perturbation task does not run or the encodings come from a ready directory."""
    from cape_pipeline.tasks import PerturbationConfig
    from cape_pipeline.tasks.compare import declared_tasks, perturbation_label_key

    if train is None or train.encodings is not None or "perturbation" not in (declared_tasks(train, source) or []):
        return {}
    pcfg = PerturbationConfig()
    return {"label_key": perturbation_label_key(train), "seeds": list(range(train.seed, train.seed + train.n_seeds)),
            **{k: getattr(pcfg, k) for k in _SPLIT_FIELDS}}


def covers(recorded: Mapping[str, Any] | None, required: Mapping[str, Any]) -> bool:
    """Whether a Step I that left out ``recorded``'s split (its ``params["held_out_split"]``) is
    blind to ``required`` (:func:`blind_split`): the same column and split options, and every
    required seed among the recorded ones."""
    if not required:
        return True
    if not recorded or not recorded.get("seeds"):
        return False
    same = all(recorded.get(k) == required[k] for k in ("label_key", *_SPLIT_FIELDS))
    return same and set(required["seeds"]) <= set(recorded["seeds"])


def held_out_conditions(adata: Any, split: Mapping[str, Any]) -> tuple[list[str], int, np.ndarray]:
    """The conditions of ``adata`` that the perturbation task holds out under ``split``
    (:class:`DiscoverStageConfig`), for any of its seeds, sorted; the number of perturbation
    conditions (controls not counted); and the ``(N,)`` bool mask of the cells in the held-out
    conditions.

    Raises
    ------
    CapeDataError
        The task's split cannot be drawn on this data: ``obs`` lacks the condition column, a
        label names a gene that is not a feature, fewer than two perturbations
        (:func:`~cape_pipeline.tasks.perturbation.split_perturbations`); the message says how to
        go on.
    """
    from cape_pipeline._keys import condition_labels
    from cape_pipeline.errors import CapeDataError
    from cape_pipeline.tasks import PerturbationConfig
    from cape_pipeline.tasks.perturbation import split_perturbations

    key = split["label_key"]
    try:
        if key not in adata.obs.columns:
            raise CapeDataError(f"obs has no {key!r} column")
        labels = condition_labels(adata.obs, key, "")
        conditions = np.unique(labels).tolist()
        pcfg = PerturbationConfig(**{k: split[k] for k in _SPLIT_FIELDS})
        out: set[str] = set()
        targets: dict[str, list[int]] = {}
        for seed in split["seeds"]:
            targets, subgroup = split_perturbations(conditions, adata.var_names, pcfg, int(seed))
            out.update(c for c, g in subgroup.items() if g != "train")
    except CapeDataError as exc:
        raise CapeDataError(
            f"discover: Step I is kept blind to the perturbation task's test conditions (the run trains the "
            f"perturbation task: train.tasks or the dataset's catalog entry), but their split cannot be drawn: "
            f"{str(exc).removeprefix('perturbation: ')}. Label the conditions in obs[{key!r}] ('ctrl', 'gA+ctrl', "
            f"'gA+gB'), leave perturbation out of train.tasks, or let Step I see every cell: {_OPT_OUT}"
        ) from exc
    held = sorted(out)
    return held, len(targets), np.isin(labels, held)


COUNTS_NOT_FOUND = "counts not found: Step I ran without the counting-noise correction"
"""The start of Step I's warning (logged, and in the report's Step I section) on scRNA data without counts."""


def record_counts(params: dict[str, Any], adata: Any) -> None:
    """Record in Step I's ``params["counts"]`` where its counts came from (preprocess's
    ``counts_source``: ``"X"``, ``".raw"``, ``"layers['NAME']"``), or None; on scRNA data
    without counts (no library sizes), add the :data:`COUNTS_NOT_FOUND` warning to
    ``params["warnings"]``: Step I ran without the counting-noise correction and without the
    library-size covariate."""
    from cape_pipeline.causal.covariates import cell_context

    single_cell, library = cell_context(adata)
    found = None
    if library is not None:
        found = (adata.uns.get("cape_preprocess") or {}).get("counts_source") or "X"
    params["counts"] = found
    if single_cell and found is None:
        state = (adata.uns.get("cape_preprocess") or {}).get("input_state", "not counts")
        params.setdefault("warnings", []).append(
            f"{COUNTS_NOT_FOUND} or the library-size covariate (X holds {state} values"
            + (" that do not invert to whole counts" if state == "log-normalized" else "")
            + " and no counts layer was named); name the layer of raw counts: --counts-layer NAME "
            "(Python: counts_layer=NAME)"
        )


def _discover_derive(configs: Mapping[str, Any], source: str | None) -> DiscoverStageConfig:
    """``held_out_split`` from the train stage's config (:func:`blind_split`); empty where the user
    lets Step I see every cell (``hold_out_test_conditions=False``) or the graph is the true one."""
    cfg = configs["discover"]
    blind = cfg.hold_out_test_conditions and cfg.method != "true-dag"
    return dataclasses.replace(cfg, held_out_split=blind_split(configs.get("train"), source) if blind else {})


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
            held_out, n_conditions, unseen = held_out_conditions(adata, split)
            seen = ~unseen
            log.info("Step I leaves out the %d cells of the %d of %d perturbation conditions the perturbation task "
                     "holds out (seeds %s)", int((~seen).sum()), len(held_out), n_conditions, split["seeds"])
            adata = adata[seen]
        cfg = DiscoverConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(DiscoverConfig)})

        # under torchrun: each rank on its own GPU, Step I's minibatches split over the ranks
        cfg = dataclasses.replace(cfg, device=init_from_env(cfg.device))

        from cape_pipeline.io.readers import MISSING_ALLOWED

        if cfg.missing == "error" and adata.uns.get("cape_ingest", {}).get("modality") in MISSING_ALLOWED:
            # ingest lets NaN through only where the modality marks missing values with it
            # (methylation, proteomics): structure learning imputes feature means (logged there)
            cfg = dataclasses.replace(cfg, missing="mean")

        from cape_pipeline.errors import CapeWarning

        with warnings.catch_warnings():
            # the library warns (CapeWarning) and records the message in params["warnings"];
            # the stage logs it once, so a batch log carries it
            warnings.simplefilter("ignore", CapeWarning)
            graph, scores = discover_scored(adata, cfg, progress=ctx.progress)
        record_counts(graph.params, adata)
        if graph.n_edges == 0:
            top = float(np.abs(scores).max()) if scores is not None else float("nan")
            graph.params["empty_graph_max_abs_weight"] = top
        if held_out:
            share = len(held_out) / n_conditions
            graph.params.update(held_out_conditions=held_out, held_out_cells=int(inputs["preprocess"].n_obs - adata.n_obs),
                                held_out_share=share, held_out_split=split)
            if share > HELD_OUT_WARN_SHARE:
                graph.params.setdefault("warnings", []).append(
                    f"Step I left out {len(held_out)} of the {n_conditions} perturbation conditions ({100 * share:.0f} %): "
                    f"those the perturbation task holds out for any of its {len(split['seeds'])} seeds (each seed draws "
                    f"its own split), so the graph behind `cape` learns from few perturbations; fewer seeds "
                    f"(train.n_seeds) leave it more, {_OPT_OUT} gives it every cell (not blind)"
                )
        for msg in graph.params.get("warnings", []):
            log.warning("%s", msg)
    if truth is not None:
        from cape_pipeline.causal.metrics import dag_metrics

        graph.params["metrics_vs_truth"] = {k: float(v) for k, v in dag_metrics(graph.adjacency, truth).items()}
    return graph


def _discover_fingerprint(cfg: DiscoverConfig, ctx: StageContext) -> str:
    """The content of a regulator list read from a file or a bundled list
    (:func:`~cape_pipeline.causal.regulators.regulators_fingerprint`): the config holds only its
    path or name, and an edited file must not be served the graph of the old one."""
    from cape_pipeline.causal.regulators import regulators_fingerprint

    return regulators_fingerprint(cfg.regression.regulators)


def _discover_summary(graph: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"n_edges": graph.n_edges, "cycle_edges_dropped": graph.n_cycle_edges_dropped}
    algorithm = graph.params.get("algorithm", graph.params.get("support"))  # "support": its name in earlier graphs
    if algorithm is not None:
        out["algorithm"] = algorithm
    for key in ("n_isolated", "isolated_share", "covariates_used", "counts", "edge_rule", "intervention_column",
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
    export_files=("edge_scores.parquet", "dag.parquet", "history.json"),
    summary=_discover_summary,
    derive=_discover_derive,
    fingerprint=_discover_fingerprint,
    doc_from=("cape_pipeline.causal.config:DiscoverConfig", "cape_pipeline.causal.api:discover"),
)
