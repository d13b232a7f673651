"""The results of training several arms on several tasks (the train stage's output), saved and
loaded as a directory."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cape_pipeline._utils import atomic_path
from cape_pipeline.tasks._base import TaskResult

RESULTS = "results.json"
"""File name of the results document inside a results directory."""


@dataclass
class TrainOutput:
    """Results of training: one :class:`~cape_pipeline.tasks.TaskResult` per (task, arm, seed),
    in run order.

    Attributes
    ----------
    results
        The runs.
    tasks, arms
        The tasks run and the arms (:class:`~cape_pipeline.tasks.arms.Arm` strings: PE names,
        ``NAME/no-id`` without the feature identity, ``@ATTENTION``). ``pes`` is the earlier
        name of ``arms`` (an attribute that warns with a :class:`FutureWarning`).
    d_model
        Model width D of every run.
    encodings_dir
        The ready encodings directory the runs used, or None (the pipeline's own Step III).
    checkpoint_genes
        With a scGPT checkpoint as the start (``train.init``): ``checkpoint``, ``n_genes_used``,
        ``n_genes_dropped`` (genes not in its vocabulary) and ``dropped_examples``; else None.
        ``init`` is its earlier name (an attribute that warns with a :class:`FutureWarning`).
    plan
        What the stage planned and estimated before training
        (:meth:`cape_pipeline.pipeline.plan.TrainPlan.to_dict`) and ``step1_blind`` (whether Step I
        saw none of the perturbation task's test cells; true without that task), or None.
    """

    results: list[Any]
    tasks: list[str]
    arms: list[str]
    d_model: int
    encodings_dir: str | None = None
    checkpoint_genes: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None

    def save(self, d: Path) -> None:
        """Store in directory ``d``: ``results.json`` (metrics, curves, timings, params per run),
        ``embeddings.npz`` (``run{i}`` → (n_obs, D) float32), ``predictions_{i}.parquet`` and
        ``confusion_{i}.csv`` where a run has them, and ``models/<task>_<arm>_seed<s>/`` for each
        run with a task head (see :meth:`cape_pipeline.tasks.TrainedModel.save`). Every file is
        written under a temporary name and renamed."""
        runs = []
        arrays: dict[str, np.ndarray] = {}
        for i, r in enumerate(self.results):
            runs.append(
                {
                    "task": r.task,
                    "metrics": {k: float(v) for k, v in r.metrics.items()},
                    "curves": {k: [float(x) for x in v] for k, v in r.curves.items()},
                    "seconds": float(r.seconds),
                    "cells_per_second": float(r.cells_per_second),
                    "params": r.params,
                }
            )
            if r.embeddings is not None:
                arrays[f"run{i}"] = np.asarray(r.embeddings, dtype=np.float32)
            if r.predictions is not None:
                with atomic_path(d / f"predictions_{i}.parquet") as tmp:
                    r.predictions.to_parquet(tmp)
            if r.confusion is not None:
                with atomic_path(d / f"confusion_{i}.csv") as tmp:
                    r.confusion.to_csv(tmp)
            if r.model is not None and r.model.head is not None:
                arm = r.params.get("arm", r.params.get("pe", "?"))  # "pe": a run_task result alone
                name = f"{r.task}_{arm}_seed{r.params.get('seed', 0)}".replace("/", "-")
                r.model.save(d / "models" / name, overwrite=True)
                runs[-1]["model_dir"] = f"models/{name}"
        if arrays:
            with atomic_path(d / "embeddings.npz") as tmp, open(tmp, "wb") as fh:
                np.savez(fh, **arrays)
        doc = {"tasks": self.tasks, "arms": self.arms, "d_model": self.d_model, "encodings_dir": self.encodings_dir,
               "checkpoint_genes": self.checkpoint_genes, "plan": self.plan,
               "runs": runs}
        with atomic_path(d / RESULTS) as tmp:
            tmp.write_text(json.dumps(doc, indent=1, default=str))

    @classmethod
    def load(cls, d: Path) -> TrainOutput:
        """Inverse of :meth:`save` (models are not loaded; ``cape_pipeline.tasks.load`` reads one).
        A ``results.json`` of an earlier version names the arms ``pes`` and the checkpoint's
        genes ``init``; it is read the same way."""
        doc = json.loads((d / RESULTS).read_text())
        arrays: dict[str, np.ndarray] = {}
        if (d / "embeddings.npz").is_file():
            with np.load(d / "embeddings.npz", allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        results = []
        for i, run in enumerate(doc["runs"]):
            pred = d / f"predictions_{i}.parquet"
            conf = d / f"confusion_{i}.csv"
            results.append(
                TaskResult(
                    task=run["task"],
                    metrics=run["metrics"],
                    curves=run["curves"],
                    seconds=run["seconds"],
                    cells_per_second=run["cells_per_second"],
                    embeddings=arrays.get(f"run{i}"),
                    predictions=pd.read_parquet(pred) if pred.is_file() else None,
                    confusion=pd.read_csv(conf, index_col=0) if conf.is_file() else None,
                    params=run["params"],
                )
            )
        return cls(
            results=results, tasks=doc["tasks"], arms=doc["arms"] if "arms" in doc else doc["pes"], d_model=doc["d_model"], encodings_dir=doc.get("encodings_dir"),
            checkpoint_genes=doc["checkpoint_genes"] if "checkpoint_genes" in doc else doc.get("init"),
            plan=doc.get("plan"),
        )

    @property
    def pes(self) -> list[str]:
        """Earlier name of :attr:`arms` (warns with a :class:`FutureWarning`)."""
        warnings.warn("TrainOutput.pes is now TrainOutput.arms; the earlier name will be removed", FutureWarning,
                      stacklevel=2)
        return self.arms

    @property
    def init(self) -> dict[str, Any] | None:
        """Earlier name of :attr:`checkpoint_genes` (warns with a :class:`FutureWarning`)."""
        warnings.warn("TrainOutput.init is now TrainOutput.checkpoint_genes; the earlier name will be removed",
                      FutureWarning, stacklevel=2)
        return self.checkpoint_genes
