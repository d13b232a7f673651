"""How much of the DAG each per-feature table carries (paper 004's analysis tools).

Trains the annotation task once (seed 0, the benchmark's recipe) with `learned-small-norm` and
with `none`, then compares with a DAG over the same genes: the CAPE angles, the trained
learned-small-norm table, and the trained scGPT gene tokens (the `none` arm's identity; the arm
was called `default` when analysis.txt was written). The DAG is
the correlation graph (|r| > τ) that made the CAPE angles in benchmarks/tasks/cache; Step I's own
graph on pbmc68k_reduced has too few edges for these statistics.

Usage: OMP_NUM_THREADS=1 python benchmarks/peers/analysis.py > benchmarks/peers/analysis.txt
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tasks"))
from _data import BENCH_DATA  # noqa: E402
from pe_analysis import modularity, pe_table, procrustes_distance, rsa  # noqa: E402
from run import BUDGET, MODEL, load_angles  # noqa: E402

from cape_pipeline.causal.api import discover  # noqa: E402
from cape_pipeline.tasks import run_task  # noqa: E402

torch.set_num_threads(1)
print("command: python benchmarks/peers/analysis.py")
print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, torch {torch.__version__}, 1 thread; "
      f"load {os.getloadavg()}")
adata = BENCH_DATA["pbmc68k_reduced"]()
t0 = time.perf_counter()
graph = discover(adata, method="correlation")
print(f"DAG: correlation graph over {graph.n_features} genes, {graph.n_edges} edges ({time.perf_counter() - t0:.0f} s)")
angles, kind = load_angles("pbmc68k_reduced", adata.var_names, ("correlation",), MODEL["d_model"])
tables = {"cape angles (correlation graph)": angles}
for pe in ("learned-small-norm", "none"):
    t0 = time.perf_counter()
    res = run_task("annotation", adata, pe=pe, angles=None, backbone="scgpt", config={**BUDGET, "model": {**MODEL}},
                   label_key="bulk_labels", seed=0)
    bb = res.model.backbone
    tables[f"{pe} (trained)"] = pe_table(bb) if pe != "none" else bb.gene_embed.weight.detach().double().numpy()
    print(f"trained {pe}: macro-F1 {res.metrics['macro_f1']:.3f} ({time.perf_counter() - t0:.0f} s)")
print()
print("| table | shape | RSA ρ vs DAG hops | p (1000 perm.) | pairs | modularity vs DAG communities | Procrustes to CAPE |")
print("|---|---|---|---|---|---|---|")
for name, tab in tables.items():
    r = rsa(tab, graph, n_permutations=1000, seed=0)
    m = modularity(tab, graph, k=10, seed=0)
    pd_ = procrustes_distance(tab, tables["cape angles (correlation graph)"])
    print(f"| {name} | {tab.shape} | {r['rho']:+.3f} | {r['p_value']:.3g} | {r['n_pairs']} | "
          f"{m['modularity']:.3f} ({m['n_communities']} communities) | {pd_:.3f} |")
