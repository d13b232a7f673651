"""Task benchmark: PE arms on the scGPT-style backbone with its gene identity, 3 seeds.

Usage (from the repository root):

    python benchmarks/tasks/run.py [--seeds 0 1 2] [--tasks annotation annotation-louvain clustering perturbation age]
                                   [--arms none cape none/no-id ...] [--graph KIND] [--d-model D] [--out DIR] [--cache DIR]

An arm is a PE name applied on top of the backbone's feature identity (the default reading), or
``NAME/no-id`` with the identity removed (the literal reading of paper 000 Eq. F.109: the PE
replaces the identity), optionally with ``@ATTENTION`` (``cape@cone-umbral``; default ``dot``). Needs the CAPE angles made by ``benchmarks/tasks/angles.py`` in
``benchmarks/tasks/cache`` (or ``--cache DIR``); ``--graph KIND`` picks ``angles_<DATASET>_<KIND>_d16.npz`` (default:
the first of GRAPH_PREFERENCE found). On pbmc68k_reduced the three tasks share one masked-value
pretraining per (arm, seed). ``perturbation-norman`` is the perturbation task at Norman et al.'s
size (``sim_perturbation_norman``: 200 genes, 105 single and 131 double perturbations) with
GEARS's unseen-gene split. Appends one row per run to ``OUT/raw.jsonl`` (re-running skips rows
already there); ``summarize.py OUT`` writes the tables.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp
import torch
from _data import BENCH_DATA

from cape_pipeline.models.pe.ape_tree import spanning_forest
from cape_pipeline.models.positions import FeaturePositions
from cape_pipeline.tasks import TASK_CONFIGS, pretrain, run_task
from cape_pipeline.tasks._base import check_pe_inputs, dense_x, resolve_config
from cape_pipeline.tasks.arms import Arm

HERE = Path(__file__).resolve().parent
CACHE = HERE / "cache"

D_MODEL = 32
MODEL = {"d_model": D_MODEL, "n_heads": 4, "n_layers": 2}
BUDGET = {"model": MODEL}  # every other setting: the tasks' defaults (the recipe of TaskConfig)
TASK_OF = {"annotation": "annotation", "annotation-louvain": "annotation", "clustering": "clustering",
           "perturbation": "perturbation", "perturbation-norman": "perturbation", "age": "age"}
DATASET = {"annotation": "pbmc68k_reduced", "annotation-louvain": "pbmc68k_reduced", "clustering": "pbmc68k_reduced",
           "perturbation": "sim_perturbation", "perturbation-norman": "sim_perturbation_norman", "age": "sim_methylation_age"}
LABEL = {"annotation": "bulk_labels", "annotation-louvain": "louvain", "clustering": "bulk_labels",
         "perturbation": "condition", "perturbation-norman": "condition", "age": "age"}
TASK_CONFIG = {"perturbation-norman": {"split": "gears"}}  # on top of BUDGET
SHARED = ("annotation", "annotation-louvain", "clustering")  # pretrain on all pbmc cells, once per (arm, seed)
GRAPH_PREFERENCE = ("discover", "true", "correlation")
ARMS = ["none", "cape", "none/no-id", "cape/no-id", "static-absolute", "trainable-absolute",
        "learned-small-norm", "cape-additive", "cape-input", "trainable-relative"]
#: the earlier name of an arm → its name now (rows written before the rename say ``default``)
EARLIER_ARMS = {"default": "none"}


def load_angles(dataset: str, var_names: pd.Index, graphs: tuple[str, ...], d_model: int, cache: Path = CACHE) -> tuple[FeaturePositions, str]:
    """CAPE positions for ``dataset`` aligned by name (angles; with them, when the cache file has
    them, the hyperboloid points and the graph's spanning forest for ``riemann`` and ``ape-tree``);
    the first graph kind of ``graphs`` in the cache."""
    for graph in graphs:
        f = cache / f"angles_{dataset}_{graph}_d{d_model // 2}.npz"
        if f.exists():
            z = np.load(f, allow_pickle=False)
            pos = pd.Index(z["var_names"]).get_indexer(var_names)
            if (pos < 0).any():
                raise SystemExit(f"{f}: missing features {list(var_names[pos < 0])[:5]}")
            if "poincare" not in z:  # a cache file from before the peer methods: angles only
                return FeaturePositions(angles=z["angles"][pos]), graph
            e = z["poincare"][pos]
            sq = (e**2).sum(1, keepdims=True)
            hyp = np.hstack([(1 + sq) / (1 - sq), 2 * e / (1 - sq)])  # Poincaré ball → hyperboloid
            m = len(z["var_names"])
            adj = sp.csr_array((z["edge_weight"], (z["edge_src"], z["edge_dst"])), shape=(m, m))[pos][:, pos]
            parent, weight = spanning_forest(adj)
            return FeaturePositions(angles=z["angles"][pos], hyperboloid=hyp, parent=parent, parent_weight=weight), graph
    raise SystemExit(f"no CAPE angles for {dataset} ({graphs}) in {cache}; run benchmarks/tasks/angles.py first")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--tasks", nargs="+", default=list(DATASET))
    ap.add_argument("--arms", nargs="+", default=ARMS)
    ap.add_argument("--out", type=Path, default=HERE / "results_identity")
    ap.add_argument("--graph", default=None, help="use only this graph kind's angles")
    ap.add_argument("--d-model", type=int, default=D_MODEL, help="model width D (angles with d = D/2 are needed)")
    ap.add_argument("--cache", type=Path, default=CACHE, help="folder of angles.py's output")
    args = ap.parse_args()
    model = {**MODEL, "d_model": args.d_model}
    args.out.mkdir(parents=True, exist_ok=True)
    raw_path = args.out / "raw.jsonl"
    print("command:", "python " + " ".join(sys.argv))
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, python {platform.python_version()}, torch {torch.__version__}, "
          f"torch threads {torch.get_num_threads()}; load average at start {os.getloadavg()}")
    print("seeds:", args.seeds, "| backbone: scgpt |", "model:", model, "| recipe: task defaults", flush=True)
    done = pd.read_json(raw_path, lines=True) if raw_path.exists() and raw_path.stat().st_size else pd.DataFrame()
    if done.empty:
        done = pd.DataFrame(columns=["task", "pe", "seed", "graph"])
    gcol = done["graph"].fillna("") if "graph" in done else pd.Series([""] * len(done))
    arms_done = done["pe"].map(lambda a: EARLIER_ARMS.get(a, a))  # a "default" row is the "none" arm's
    key = set(zip(done["task"], arms_done, done["seed"].astype(int), gcol, strict=True))
    graphs = GRAPH_PREFERENCE if args.graph is None else (args.graph,)
    data: dict[str, object] = {}
    t_all = time.perf_counter()
    datasets = list(dict.fromkeys(DATASET[t] for t in args.tasks))
    for ds in datasets:
        adata = data.setdefault(ds, BENCH_DATA[ds]())
        angles, graph = load_angles(ds, adata.var_names, graphs, args.d_model, args.cache)
        tasks = [t for t in args.tasks if DATASET[t] == ds]
        print(f"{ds} {adata.n_obs}x{adata.n_vars}: tasks {tasks}; CAPE angles from the '{graph}' graph "
              f"(max |phi| {np.abs(angles.angles).max():.3f})", flush=True)
        for seed in args.seeds:
            for arm in args.arms:
                parsed = Arm.parse(arm)
                pe = parsed.pe
                g = graph if parsed.uses_graph else ""
                todo = [t for t in tasks if (t, EARLIER_ARMS.get(arm, arm), seed, g) not in key]
                if not todo:
                    continue
                cfg = {**BUDGET, "model": {**model, "identity": parsed.identity}, "attention": parsed.attention}
                arm_angles = check_pe_inputs(pe, angles, adata.n_vars, cfg["attention"])  # what this arm uses
                shared = None
                if sum(t in SHARED for t in todo) > 1:
                    shared = pretrain(dense_x(adata), backbone="scgpt", cfg=resolve_config(TASK_CONFIGS["annotation"], cfg),
                                      pe=pe, angles=arm_angles, seed=seed)
                for t in todo:
                    res = run_task(TASK_OF[t], adata, pe=pe, angles=arm_angles, backbone="scgpt", config={**cfg, **TASK_CONFIG.get(t, {})},
                                   label_key=LABEL[t], seed=seed, pretrained=shared if t in SHARED else None)
                    row = {"task": t, "dataset": ds, "pe": arm, "identity": parsed.identity, "seed": seed, "graph": g, "d_model": args.d_model,
                           "seconds": res.seconds, "cells_per_second": res.cells_per_second,
                           "best_epoch": res.params.get("best_epoch"), "load1": os.getloadavg()[0], **res.metrics}
                    print(f"  {t:<18} {arm:<19} seed {seed}: " + ", ".join(
                        f"{k} {v:.4g}" for k, v in res.metrics.items() if not k.startswith("reference"))
                        + f" | {res.seconds:.0f}s best epoch {res.params.get('best_epoch')}", flush=True)
                    with raw_path.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
    print(f"task runs: {time.perf_counter() - t_all:.0f}s; load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
