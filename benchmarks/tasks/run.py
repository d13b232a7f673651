"""Task benchmark: every PE of the zoo with the scGPT-style backbone on four tasks, 3 seeds.

Usage (from the repository root):

    python benchmarks/tasks/run.py [--seeds 0 1 2] [--tasks annotation clustering perturbation age]
                                   [--pes ...] [--out benchmarks/tasks/results]
                                   [--graph KIND] [--no-throughput]

Needs the CAPE angles made by ``benchmarks/tasks/angles.py`` in ``benchmarks/tasks/cache``.
Appends one row per run to ``OUT/raw.jsonl`` (re-running skips rows already there), then writes
``OUT/summary.md`` (mean ± sd over seeds) and the throughput comparison ``cape`` vs ``none``.
``--graph KIND`` uses only ``angles_<DATASET>_<KIND>_d16.npz`` (e.g. ``discover005``,
``discover005-euclidean``) instead of the first of GRAPH_PREFERENCE found; with it the skip key
includes the graph, so several graph kinds can share one OUT.
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
import torch
from _data import BENCH_DATA

from cape_pipeline.models import PE_NAMES, build_backbone
from cape_pipeline.tasks import run_task

HERE = Path(__file__).resolve().parent
CACHE = HERE / "cache"

D_MODEL = 32
MODEL = {"d_model": D_MODEL, "n_heads": 4, "n_layers": 2, "max_tokens": 64}
BUDGET = {
    "annotation": {"pretrain_epochs": 3, "finetune_epochs": 25, "lr": 2e-3, "model": MODEL},
    "clustering": {"pretrain_epochs": 5, "lr": 2e-3, "model": MODEL},
    "perturbation": {"pretrain_epochs": 2, "finetune_epochs": 12, "lr": 2e-3, "model": MODEL},
    "age": {"pretrain_epochs": 3, "finetune_epochs": 30, "lr": 2e-3, "model": MODEL},
}
DATASET = {"annotation": "pbmc68k_reduced", "clustering": "pbmc68k_reduced", "perturbation": "sim_perturbation", "age": "sim_methylation_age"}
GRAPH_PREFERENCE = ("discover", "true", "correlation")
LABEL = {"annotation": "bulk_labels", "clustering": "bulk_labels", "perturbation": "condition", "age": "age"}


def load_angles(dataset: str, var_names: pd.Index, graphs: tuple[str, ...] = GRAPH_PREFERENCE) -> tuple[np.ndarray, str]:
    """CAPE angles for ``dataset`` aligned by name; the first graph kind of ``graphs`` found in the cache."""
    d = D_MODEL // 2
    for graph in graphs:
        f = CACHE / f"angles_{dataset}_{graph}_d{d}.npz"
        if f.exists():
            z = np.load(f, allow_pickle=False)
            pos = pd.Index(z["var_names"]).get_indexer(var_names)
            if (pos < 0).any():
                raise SystemExit(f"{f}: missing features {list(var_names[pos < 0])[:5]}")
            return z["angles"][pos], graph
    raise SystemExit(f"no CAPE angles for {dataset} in {CACHE}; run benchmarks/tasks/angles.py first")


def throughput(adata, angles: np.ndarray, reps: int = 12, batch: int = 32) -> dict[str, float]:
    """Training-step throughput (cells/s) of cape vs none, interleaved to share the same load."""
    x = adata.X.toarray() if hasattr(adata.X, "toarray") else np.asarray(adata.X)
    xb = torch.as_tensor(x[:batch], dtype=torch.float32)
    times: dict[str, list[float]] = {"cape": [], "none": []}
    models = {}
    for pe in times:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            models[pe] = build_backbone("scgpt", MODEL, n_features=adata.n_vars, pe=pe, angles=angles)
    opts = {pe: torch.optim.AdamW(m.parameters(), lr=1e-4) for pe, m in models.items()}
    for r in range(reps + 2):
        for pe, m in models.items():
            t = time.perf_counter()
            tok = m.tokenize(xb)
            loss = m(tok).pow(2).mean()
            opts[pe].zero_grad()
            loss.backward()
            opts[pe].step()
            if r >= 2:  # warm-up
                times[pe].append(time.perf_counter() - t)
    return {pe: batch / float(np.median(v)) for pe, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--tasks", nargs="+", default=list(BUDGET))
    ap.add_argument("--pes", nargs="+", default=list(PE_NAMES))
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--graph", default=None, help="use only this graph kind's angles (ablations)")
    ap.add_argument("--no-throughput", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    raw_path = args.out / "raw.jsonl"
    print("command:", "python " + " ".join(sys.argv))
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, python {platform.python_version()}, torch {torch.__version__}, "
          f"torch threads {torch.get_num_threads()}")
    print("load average at start:", os.getloadavg())
    print("seeds:", args.seeds, "| backbone: scgpt |", "model:", MODEL)
    for t in args.tasks:
        print(f"  {t}: data {DATASET[t]}, budget {dict((k, v) for k, v in BUDGET[t].items() if k != 'model')}")
    done = pd.read_json(raw_path, lines=True) if raw_path.exists() else pd.DataFrame(columns=["task", "pe", "seed"])
    if args.graph is None:
        key = set(zip(done["task"], done["pe"], done["seed"].astype(int), strict=True))
    else:
        gcol = done["graph"].fillna("") if "graph" in done else pd.Series([""] * len(done))
        key = set(zip(done["task"], done["pe"], done["seed"].astype(int), gcol, strict=True))
    graphs = GRAPH_PREFERENCE if args.graph is None else (args.graph,)
    data_cache: dict[str, object] = {}
    t_all = time.perf_counter()
    for task in args.tasks:
        ds = DATASET[task]
        if ds not in data_cache:
            data_cache[ds] = BENCH_DATA[ds]()
        adata = data_cache[ds]
        angles, graph = load_angles(ds, adata.var_names, graphs)
        print(f"{task}: {ds} {adata.n_obs}x{adata.n_vars}; CAPE angles from the '{graph}' graph", flush=True)
        for pe in args.pes:
            for seed in args.seeds:
                k = (task, pe, seed) if args.graph is None else (task, pe, seed, graph if pe.startswith("cape") else "")
                if k in key:
                    continue
                res = run_task(task, adata, pe=pe, angles=angles, backbone="scgpt", config=BUDGET[task], label_key=LABEL[task], seed=seed)
                row = {"task": task, "dataset": ds, "pe": pe, "seed": seed, "graph": graph if pe.startswith("cape") else "",
                       "seconds": res.seconds, "cells_per_second": res.cells_per_second, "load1": os.getloadavg()[0], **res.metrics}
                print(f"  {pe:<19} seed {seed}: " + ", ".join(f"{k} {v:.4g}" for k, v in res.metrics.items() if not k.startswith("reference"))
                      + f" | {res.seconds:.0f}s, {res.cells_per_second:.0f} cells/s", flush=True)
                with raw_path.open("a") as fh:  # one JSON object per run (tasks have different metrics)
                    fh.write(json.dumps(row) + "\n")
    print(f"task runs: {time.perf_counter() - t_all:.0f}s; load average: {os.getloadavg()}")
    if args.no_throughput:
        return
    pbmc = data_cache.get("pbmc68k_reduced") or BENCH_DATA["pbmc68k_reduced"]()
    ang, _ = load_angles("pbmc68k_reduced", pbmc.var_names)
    tp = throughput(pbmc, ang)
    overhead = tp["none"] / tp["cape"] - 1.0
    print(f"throughput (pbmc, B=32, T=64+1, D={D_MODEL}, train step, median of 12 interleaved): cape {tp['cape']:.0f} cells/s, "
          f"none {tp['none']:.0f} cells/s, rotary overhead {100 * overhead:.1f} %")
    (args.out / "throughput.txt").write_text(f"cape {tp['cape']:.1f}\nnone {tp['none']:.1f}\noverhead_pct {100 * overhead:.2f}\nload {os.getloadavg()}\n")
    print("load average at end:", os.getloadavg())


if __name__ == "__main__":
    main()
