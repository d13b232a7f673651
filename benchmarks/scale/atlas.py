"""Step I at atlas size: simulated counts with a known DAG, N cells × 2,000 genes, on a device.

One run: ``simulated_grn_counts(N, 2000, seed)`` (the generator with a known regulatory DAG),
written once to ``_cache/atlas_N_2000_sSEED.h5ad`` and ``pp.preprocess``-ed (every gene kept:
2,000 HVGs of 2,000) into ``…_pp.h5ad`` by separate processes (whose seconds and peak memory are
recorded; the simulator's and preprocess's own memory are not the measured process's), read
back, then Step I's default for single-cell
data (``cape_pipeline.causal.discover``: the regression algorithm, library size as covariate, the
counting-noise correction, 8 random splits) on ``--device``. It records the seconds of each part,
the process's peak resident memory, the peak GPU memory (CUDA), the DAG's edges and its F1
against the truth, the plan's CPU estimate (``discover_estimate``) beside the measured time, and
a hash of the preprocessed matrix, so that two runs (CPU here, GPU there) can be checked to have
seen the same data before their DAGs are compared. The edge list goes to ``--edges`` (``.npz``:
parent, child, weight).

Usage (from the repository root)::

    python benchmarks/scale/atlas.py --cells 100000 --device cpu --edges /tmp/atlas_cpu_100k.npz
    python benchmarks/scale/atlas.py --cells 100000 --device cuda --edges "$OUT/atlas_cuda_100k.npz" --jsonl "$OUT/atlas.jsonl"
    python benchmarks/scale/atlas.py --compare A.npz B.npz      # same DAG? edges and weights

Rows go to ``atlas.jsonl`` beside this file unless ``--jsonl`` names another file.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _record import append, commit, provenance  # noqa: E402


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run(cells: int, genes: int, seed: int, device: str, n_splits: int | None, edges_out: Path | None) -> dict:
    import anndata as ad
    import torch

    from cape_pipeline._utils import hash_array
    from cape_pipeline.causal import discover
    from cape_pipeline.causal.metrics import dag_metrics
    from cape_pipeline.pipeline.plan import discover_estimate

    load = os.getloadavg()
    rec: dict = {"cells": cells, "genes": genes, "seed": seed, "device": device, "commit": commit()}
    if device.startswith("cuda"):
        rec["gpu"] = torch.cuda.get_device_name(0)
        torch.cuda.reset_peak_memory_stats()
    path, pp_rec = preprocessed_file(cells, genes, seed)
    rec.update(pp_rec)
    t = time.perf_counter()
    a = ad.read_h5ad(path)
    rec["read_s"] = round(time.perf_counter() - t, 1)
    rec["genes_kept"] = int(a.n_vars)
    rec["data_hash"] = hash_array(a.X.data if hasattr(a.X, "data") else np.asarray(a.X))[:16]
    rec["rss_before_discover_mb"] = round(_rss_mb())
    opts = {} if n_splits is None else {"regression": {"n_splits": n_splits}}
    t = time.perf_counter()
    g = discover(a, device=device, progress=True, **opts)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        rec["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20)
    rec["discover_s"] = round(time.perf_counter() - t, 1)
    rec["peak_rss_mb"] = round(_rss_mb())
    rec["dense_matrix_mb"] = round(cells * a.n_vars * 8 / 2**20)
    p = g.params
    rec["estimate_s"] = round(discover_estimate(cells, a.n_vars, p.get("algorithm", p.get("support", "regression")),
                                                n_splits=int(p.get("n_splits_used", p.get("n_splits", 1)))))
    rec.update({k: p.get(k) for k in ("algorithm", "support", "device", "n_splits_used", "covariates_used", "measurement_error")})
    adj = g.adjacency.tocoo()
    truth = a[:, g.feature_names].varp["true_dag"] if "true_dag" in a.varp else None
    rec["n_edges"] = int(adj.nnz)
    if truth is not None:
        m = dag_metrics(adj, truth)
        rec.update({k: round(float(m[k]), 4) for k in ("f1", "precision", "recall", "shd") if k in m})
    stage_s: dict[str, float] = {}
    for h in g.history:  # seconds per stage, summed over the splits
        stage_s[h["stage"]] = round(stage_s.get(h["stage"], 0.0) + float(h.get("seconds", 0.0)), 2)
    rec["stage_seconds"] = stage_s
    rec.update(provenance(load))
    if edges_out is not None:
        edges_out.parent.mkdir(parents=True, exist_ok=True)
        np.savez(edges_out, parent=adj.row, child=adj.col, weight=adj.data, data_hash=rec["data_hash"])
    return rec


def simulated_file(cells: int, genes: int, seed: int) -> Path:
    """``_cache/atlas_{cells}_{genes}_s{seed}.h5ad``: the simulated counts, made by a child process
    the first time (written to a temporary name, then renamed)."""
    path = HERE / "_cache" / f"atlas_{cells}_{genes}_s{seed}.h5ad"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.h5ad")
    code = ("import sys; from cape_pipeline.datasets._counts import simulated_grn_counts; "
            "simulated_grn_counts(int(sys.argv[1]), int(sys.argv[2]), seed=int(sys.argv[3])).write_h5ad(sys.argv[4])")
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(cells), str(genes), str(seed), str(tmp)], check=True,
                   cwd=HERE.parents[1])
    tmp.rename(path)
    print(f"simulated {cells} x {genes} (seed {seed}) in {time.perf_counter() - t:.0f} s: {path}", flush=True)
    return path


_PREPROCESS = """
import json, resource, sys, time
import anndata as ad
import cape_pipeline as cp
t = time.perf_counter()
a = ad.read_h5ad(sys.argv[1])
cp.pp.preprocess(a, n_top_genes=int(sys.argv[2]), min_genes=10)
sec = time.perf_counter() - t
a.write_h5ad(sys.argv[3])
print(json.dumps({"preprocess_s": round(sec, 1),
                  "preprocess_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))
"""


def preprocessed_file(cells: int, genes: int, seed: int) -> tuple[Path, dict]:
    """``_cache/atlas_{cells}_{genes}_s{seed}_pp.h5ad``: :func:`simulated_file` read and
    ``pp.preprocess``-ed by a child process the first time, and that child's seconds and peak
    memory (kept beside it in ``_pp.json``), so that the measured process holds the preprocessed
    matrix only, as the pipeline's discover stage does."""
    raw = simulated_file(cells, genes, seed)
    path = raw.with_name(raw.stem + "_pp.h5ad")
    side = path.with_suffix(".json")
    if not (path.exists() and side.exists()):
        tmp = path.with_suffix(".tmp.h5ad")
        out = subprocess.run([sys.executable, "-c", _PREPROCESS, str(raw), str(genes), str(tmp)], check=True,
                             cwd=HERE.parents[1], capture_output=True, text=True).stdout
        side.write_text(out.strip().splitlines()[-1])
        tmp.rename(path)
    return path, json.loads(side.read_text())


def compare(a_path: Path, b_path: Path) -> dict:
    """Whether two edge lists are the same DAG: edge sets, and the largest relative weight gap."""
    a, b = np.load(a_path), np.load(b_path)
    ka = dict(zip(zip(a["parent"].tolist(), a["child"].tolist(), strict=True), a["weight"].tolist(), strict=True))
    kb = dict(zip(zip(b["parent"].tolist(), b["child"].tolist(), strict=True), b["weight"].tolist(), strict=True))
    common = ka.keys() & kb.keys()
    gap = max((abs(ka[e] - kb[e]) / max(abs(ka[e]), 1e-300) for e in common), default=0.0)
    return {"a": str(a_path), "b": str(b_path), "same_data": str(a["data_hash"]) == str(b["data_hash"]),
            "edges_a": len(ka), "edges_b": len(kb), "common": len(common), "only_a": len(ka.keys() - kb.keys()),
            "only_b": len(kb.keys() - ka.keys()), "max_rel_weight_gap": gap}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=100_000)
    ap.add_argument("--genes", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n-splits", type=int, default=None, help="discover.regression.n_splits (default: Step I's)")
    ap.add_argument("--edges", type=Path, default=None, help="write the DAG's edge list here (.npz)")
    ap.add_argument("--jsonl", type=Path, default=HERE / "atlas.jsonl")
    ap.add_argument("--compare", nargs=2, type=Path, default=None)
    a = ap.parse_args()
    if a.compare:
        print(json.dumps(compare(*a.compare)))
        return
    rec = run(a.cells, a.genes, a.seed, a.device, a.n_splits, a.edges)
    print(json.dumps(rec), flush=True)
    append(a.jsonl, rec)


if __name__ == "__main__":
    main()
