"""Build CAPE angles for the task benchmark via the project's Steps I–III.

Usage: python benchmarks/tasks/angles.py OUT_DIR D DATASET GRAPH [DISCOVER_EPOCHS]

GRAPH is ``discover`` (Step I, ``cape_pipeline.causal.api.discover``), ``true`` (the simulator's
known DAG; simulated data only) or ``correlation`` (the w/o-CSL ablation graph). The graph is
then embedded (``cape_pipeline.hyperbolic.embed``, d = D/2) and encoded
(``cape_pipeline.encodings.encode``, φ = (π/4)·e). Writes
OUT_DIR/angles_<DATASET>_<GRAPH>_d<D/2>.npz with ``angles`` (M, D/2) and ``var_names``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from _data import BENCH_DATA

from cape_pipeline.causal.api import discover
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.encodings import encode
from cape_pipeline.hyperbolic import embed

EMBED_EPOCHS = 300


def main() -> None:
    out, d_model, name, graph = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    epochs = int(sys.argv[5]) if len(sys.argv) > 5 else 100
    out.mkdir(parents=True, exist_ok=True)
    d = d_model // 2
    adata = BENCH_DATA[name]()
    f = out / f"angles_{name}_{graph}_d{d}.npz"
    x = adata.X.toarray() if sp.issparse(adata.X) else np.asarray(adata.X)
    if np.isnan(x).any():  # methylation: mean-impute for structure learning only
        x = np.where(np.isnan(x), np.nanmean(x, axis=0), x)
    names = list(adata.var_names)
    t0 = time.perf_counter()
    if graph == "true":
        g = CausalGraph(np.asarray(names, dtype=object), sp.csr_array(adata.varp["true_dag"].astype(np.float64)))
    elif graph == "correlation":
        g = discover(x, feature_names=names, method="correlation", seed=0)
    else:
        g = discover(x, feature_names=names, epochs=epochs, seed=0)
    t1 = time.perf_counter()
    e = embed(g, dim=d, epochs=EMBED_EPOCHS, seed=0)
    t2 = time.perf_counter()
    enc = encode(e)
    a = np.asarray(enc.angles, dtype=np.float64)
    print(f"{name} graph={graph}: M={adata.n_vars} edges={g.n_edges} graph {t1 - t0:.0f}s embed {t2 - t1:.0f}s "
          f"(embed epochs {EMBED_EPOCHS}, discover epochs {epochs if graph == 'discover' else '-'}); "
          f"|phi| max {np.abs(a).max():.3f} mean row norm {np.linalg.norm(a, axis=1).mean():.3f}", flush=True)
    np.savez(f, angles=a, var_names=np.asarray(names, dtype=str), n_edges=g.n_edges, graph_s=t1 - t0, embed_s=t2 - t1)


if __name__ == "__main__":
    main()
