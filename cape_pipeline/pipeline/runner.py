"""Run the stages in order with the content-keyed cache.

Keys are computed for every requested stage before anything runs (a key depends only on the
stage's parameters, its upstream keys, the input fingerprint and the code), so a changed
parameter re-runs that stage and everything downstream and nothing upstream. Outputs of cached
stages are loaded only when a later stage needs them.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cape_pipeline._utils import resolve_device
from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.io.layout import check_data_keys
from cape_pipeline.pipeline.cache import ArtifactCache, stage_key
from cape_pipeline.pipeline.config import build_config, data_keys, merge
from cape_pipeline.pipeline.stages import (
    STAGE_ORDER,
    STAGES,
    Stage,
    StageContext,
    config_params,
    export_artifact,
)

log = logging.getLogger(__name__)


@dataclass
class StageRecord:
    """What happened to one stage in a run."""

    stage: str
    key: str
    cached: bool
    seconds: float
    path: Path
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunResult:
    """Result of :func:`run_pipeline`: per-stage records and exported files."""

    records: list[StageRecord]
    exported: list[Path]
    outputs: dict[str, Any]

    def output(self, stage: str) -> Any:
        """The in-memory output of ``stage`` (loaded from the cache if it was a hit)."""
        return _resolve(self.outputs, stage)


def resolve_stages(until: str | None) -> list[str]:
    """The stages up to ``until`` (default: all), in pipeline order.

    Raises
    ------
    CapeConfigError
        If ``until`` is not a stage name.
    """
    if until is not None and until not in STAGE_ORDER:
        raise CapeConfigError(f"--until {until!r}: expected one of {', '.join(STAGE_ORDER)}")
    return list(STAGE_ORDER[: STAGE_ORDER.index(until) + 1] if until else STAGE_ORDER)


def build_stage_configs(
    stages: list[str], overrides: Mapping[str, Mapping[str, Any]], *, seed: int | None, device: str | None,
    source: str | None = None,
) -> dict[str, Any]:
    """Build each stage's frozen config from ``overrides`` plus the run-wide seed/device, fill in
    the parameters that follow from other stages (``Stage.derive``; ``source`` names the data
    for those that depend on its catalog entry), and validate every value (ranges, names,
    cross-stage checks) before any stage runs. Where a stage derives parameters, every stage's
    config is built (and its overrides validated), also those after the last stage run.

    Raises
    ------
    CapeConfigError
        Overrides for an unknown stage, unknown parameters, wrong types, values out of range;
        the message starts with ``stage.param``.
    """
    unknown = sorted(set(overrides) - set(STAGE_ORDER))
    if unknown:
        from cape_pipeline._config import did_you_mean

        hint = "".join(did_you_mean(u, STAGE_ORDER) for u in unknown)
        raise CapeConfigError(f"unknown stage(s) {unknown} in --set/--config{hint}; stages: {', '.join(STAGE_ORDER)}")
    def build(name: str) -> Any:
        st = STAGES[name]
        params = dict(overrides.get(name, {}))
        fields = st.config_cls.__dataclass_fields__
        if seed is not None and "seed" in fields and "seed" not in params:
            params["seed"] = seed
        if device is not None and "device" in fields and "device" not in params:
            params["device"] = device
        cfg = build_config(st.config_cls, name, params, extra_field=st.extra_field)
        seed_value = getattr(cfg, "seed", 0)
        if seed_value is not None and seed_value < 0:  # numpy and torch generators take seeds >= 0
            raise CapeConfigError(f"{name}.seed: expected an integer >= 0, got {seed_value}")
        return cfg

    out = {name: build(name) for name in stages}
    if any(STAGES[name].derive is not None for name in stages):
        # parameters that follow from other stages (discover's blind split), read from every
        # stage's config, run or not: `--until discover` keys Step I as the whole run does
        every = {name: out[name] if name in out else build(name) for name in STAGE_ORDER}
        for name in stages:
            if STAGES[name].derive is not None:
                out[name] = every[name] = STAGES[name].derive(every, source)
    for name in stages:  # parameters that depend on other stages (train's width on embed.dim)
        if STAGES[name].check is not None:
            STAGES[name].check(out)
    return out


def _run_keeping_threads(st: Any, inputs: dict, config: Any, ctx: Any) -> Any:
    """``st.run(inputs, config, ctx)``, then restore torch's thread count if the stage changed it.

    The thread count is part of every cache key, and UMAP's numba/OpenMP start-up in
    ``evaluate`` can change it (from 1 to 2 under ``OMP_NUM_THREADS=1``), so the next run in the
    same process would miss its cache.
    """
    import torch

    threads = torch.get_num_threads()
    try:
        return st.run(inputs, config, ctx)
    finally:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


def run_pipeline(
    source: str,
    *,
    until: str | None = None,
    workdir: str | os.PathLike[str] = "cape_work",
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    seed: int | None = None,
    device: str | None = None,
    out: str | os.PathLike[str] | None = None,
    progress: bool = False,
    report: Callable[[str, StageRecord | None, str], None] | None = None,
    labels: str | Sequence[str] | None = None,
    counts_layer: str | None = None,
) -> RunResult:
    """Run the stages up to ``until`` on ``source``, reusing valid cached artifacts.

    Parameters
    ----------
    source
        A file path or catalog name (see :func:`cape_pipeline.read`).
    labels
        The ``obs`` columns (``.h5ad``) or table columns (Parquet/CSV) holding labels, e.g.
        ``"cell_type"``; the first is the label annotation and clustering predict
        (``ingest.label_columns``; CLI ``--labels``).
    counts_layer
        The ``.h5ad`` layer of raw counts, e.g. ``"counts"``: preprocess normalizes it, and Step I
        takes the library sizes and its counting-noise correction from it
        (``preprocess.counts_layer``; CLI ``--counts-layer``).
    until
        Last stage to run (default: every implemented stage).
    workdir
        Cache root: artifacts go to ``<workdir>/<stage>/<key>/``.
    overrides
        ``{stage: {param: value}}`` from ``--config`` and ``--set``.
    seed, device
        Run-wide defaults for stages that take them.
    out
        If given, the exported files of the last stage run are copied there.
    progress
        Let stages draw progress bars.
    report
        ``report(stage, record_or_None, event)`` callback with events ``"start"``, ``"done"``,
        ``"cached"``; the CLI prints from it.

    Returns
    -------
    RunResult

    Raises
    ------
    CapeInputError
        Bad input or parameters (subclasses name the problem); a label column, ``train.label_key``
        or counts layer that the file lacks, before any stage runs (the message lists what it
        has). A stage that fails leaves the artifacts of earlier stages intact and stores
        nothing for itself.
    """
    stages = resolve_stages(until)
    overrides = merge(overrides or {}, data_keys(labels, counts_layer))
    configs = build_stage_configs(stages, overrides, seed=seed, device=device, source=source)
    check_data_keys(source, labels=configs["ingest"].label_columns, label_key=overrides.get("train", {}).get("label_key"),
                    counts_layer=overrides.get("preprocess", {}).get("counts_layer"))
    ctx = StageContext(source=source, progress=progress)
    cache = ArtifactCache(workdir)

    inputs = {name: STAGES[name].inputs_for(configs) for name in stages}
    needed = _needed(stages, inputs)
    stages = [s for s in stages if s in needed]

    keys: dict[str, str] = {}
    for name in stages:
        st = STAGES[name]
        fp = st.fingerprint(configs[name], ctx) if st.fingerprint else ""
        params = {**config_params(configs[name]), **({"source": source} if not inputs[name] else {})}
        keys[name] = stage_key(name, params, {u: keys[u] for u in inputs[name]}, fp)

    outputs: dict[str, Any] = {}
    records: list[StageRecord] = []

    for name in stages:
        st: Stage = STAGES[name]
        key = keys[name]
        hit = cache.lookup(name, key)
        if hit is None:
            # one computation per key: a run that finds another computing it waits and reuses it
            with cache.computing(name, key) as hit:
                if hit is None:
                    if report:
                        report(name, None, "start")
                    t0 = time.perf_counter()
                    result = _run_keeping_threads(st, {u: _resolve(outputs, u) for u in inputs[name]}, configs[name], ctx)
                    seconds = time.perf_counter() - t0
                    ctx.timings[name] = seconds
                    summary = st.summary(result) if st.summary else {}
                    manifest = {
                        "params": config_params(configs[name]),
                        "source": source,
                        "upstream": {u: keys[u] for u in inputs[name]},
                        "timings": {"seconds": round(seconds, 4)},
                        "summary": summary,
                    }
                    path = cache.store(name, key, lambda d, st=st, result=result: st.save(result, d), manifest)
                    outputs[name] = result
                    rec = StageRecord(name, key, False, seconds, path, summary)
                    records.append(rec)
                    if report:
                        report(name, rec, "done")
                    continue
        outputs[name] = _Cached(st, hit)
        man = cache.manifest(name, key)
        summary = man.get("summary", {})
        ctx.timings[name] = float(man.get("timings", {}).get("seconds", 0.0))
        rec = StageRecord(name, key, True, 0.0, hit, summary)
        records.append(rec)
        if report:
            report(name, rec, "cached")

    exported: list[Path] = []
    if out is not None and records:
        last = records[-1]
        by_stage = {r.stage: r for r in records}
        for extra in STAGES[last.stage].export_also:
            if extra in by_stage:  # not when skipped (train with a ready encodings directory)
                exported += export_artifact(STAGES[extra], by_stage[extra].path, Path(out))
        exported += export_artifact(STAGES[last.stage], last.path, Path(out))
    return RunResult(records=records, exported=exported, outputs=outputs)


@dataclass
class _Cached:
    """A cache hit whose output is read from disk only when a later stage asks for it."""

    stage: Stage
    path: Path

    def load(self) -> Any:
        return self.stage.load(self.path)


def _resolve(outputs: dict[str, Any], name: str) -> Any:
    """The output of stage ``name``, reading a cache hit from disk the first time it is asked for."""
    if isinstance(outputs[name], _Cached):
        outputs[name] = outputs[name].load()
    return outputs[name]


def _needed(stages: list[str], inputs: Mapping[str, tuple[str, ...]]) -> set[str]:
    """The last stage and every stage it depends on, transitively (others are skipped, e.g.
    Steps I–III when ``train.encodings`` names a ready encodings directory)."""
    need: set[str] = set()
    todo = [stages[-1]] if stages else []
    while todo:
        s = todo.pop()
        if s not in need:
            need.add(s)
            todo.extend(inputs[s])
    return need


def plan_pipeline(
    source: str,
    *,
    workdir: str | os.PathLike[str] = "cape_work",
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    seed: int | None = None,
    device: str | None = None,
    labels: str | Sequence[str] | None = None,
    counts_layer: str | None = None,
) -> list[str]:
    """What ``cape run`` would do on ``source``, and how long it should take (``--dry-run``).

    ``labels`` and ``counts_layer`` as in :func:`run_pipeline`; the names the run reads from the
    data (those and ``train.label_key``) are checked against it first.

    Runs the cheap stages (ingest, preprocess; cached like any run), then counts the train
    stage's work and times a few training steps of its model on this machine
    (:func:`cape_pipeline.pipeline.plan.train_plan`); Step I's time is a rough
    formula (:func:`cape_pipeline.pipeline.plan.discover_estimate`). Nothing else runs.

    Returns
    -------
    list of str
        The lines to print.

    Raises
    ------
    CapeInputError
        As :func:`run_pipeline` for the stages it runs and the configs it checks.
    """
    from cape_pipeline.pipeline.plan import discover_estimate, format_clock, plan_lines, train_plan
    from cape_pipeline.tasks.compare import resolve_tasks, task_settings

    overrides = merge(overrides or {}, data_keys(labels, counts_layer))
    configs = build_stage_configs(resolve_stages(None), overrides, seed=seed, device=device, source=source)
    res = run_pipeline(source, until="preprocess", workdir=workdir, overrides=overrides, seed=seed, device=device)
    adata = _resolve(res.outputs, "preprocess")
    cfg = configs["train"]
    if cfg.label_key is not None and cfg.label_key not in adata.obs.columns:  # a catalog dataset's obs
        from cape_pipeline.io.layout import _listing

        raise CapeDataError(f"{source}: train.label_key {cfg.label_key!r}: no such obs column; "
                            f"{_listing([str(c) for c in adata.obs.columns], cfg.label_key, 'obs columns')}")
    ctx = StageContext(source=source)
    tasks = resolve_tasks(cfg, ctx.source, adata)
    arms = cfg.arms
    d_model = cfg.d_model if cfg.d_model is not None else 2 * int(configs["embed"].dim)
    lines = [f"dry run on {source}: ingest and preprocess done ({adata.n_obs:,} cells × {adata.n_vars:,} features)"]
    skip = cfg.encodings is not None
    if not skip:
        from cape_pipeline.causal.covariates import cell_context

        single_cell, _ = cell_context(adata)
        algorithm = configs["discover"].algorithm_for(adata.n_vars, adata.n_obs, single_cell=single_cell)
        est = discover_estimate(adata.n_obs, adata.n_vars, algorithm, n_splits=configs["discover"].regression.n_splits)
        on_gpu = algorithm in ("regression", "learned") and resolve_device(configs["discover"].device).type == "cuda"
        lines.append(f"Step I (discover, algorithm={algorithm}): roughly {format_clock(est)} (a formula fitted to benchmarks/scale "
                     "on a 2-core CPU, not measured here" + ("; this run fits on the GPU, which takes less" if on_gpu else "")
                     + ")")
    if cfg.checkpoint:
        lines.append("train starts from a scGPT checkpoint: its sizes set the model; no calibration in a dry run")
    plan = train_plan(adata, cfg, tasks, arms, task_settings(cfg, d_model, True), measure=not cfg.checkpoint,
                      device=str(resolve_device(cfg.device)))
    lines += plan_lines(plan)
    return lines
