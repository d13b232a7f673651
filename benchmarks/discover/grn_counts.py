"""Step I as a user runs it (`cape run FILE --until discover`) on UMI counts with a known graph.

Data: ``cape_pipeline.datasets.simulated_grn_counts`` (our generator: a regulatory DAG with
TF-like hubs, nonlinear mechanisms, cell types, negative-binomial counts), M = 2,000 genes so
that preprocessing keeps them all as HVGs and the truth is the whole graph. For each N the job
is ``cape run FILE --until discover`` with every default except the ``--set`` options given
here; the learned DAG is scored against the truth (directed precision, recall, F1, skeleton
F1). Prints the command, machine and load, and appends a JSON line per N to
``grn_counts.jsonl``.

Usage::

    python benchmarks/discover/grn_counts.py --cells 1000 3000 10000 [--genes 2000] [--seed 0]
        [--set discover.KEY=VALUE ...] [--label TEXT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

OUT = common.HERE / "grn_counts.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, nargs="+", default=[1000, 3000, 10000])
    ap.add_argument("--genes", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--label", default="defaults")
    ap.add_argument("--data-dir", default=None, help="keep the simulated .h5ad files here (reused)")
    a = ap.parse_args()
    import anndata as ad
    import numpy as np

    from cape_pipeline.causal.graph import CausalGraph
    from cape_pipeline.causal.metrics import dag_metrics
    from cape_pipeline.datasets import TRUE_DAG_KEY, simulated_grn_counts

    print("command:", common.command())
    print("machine:", common.machine())
    data_dir = Path(a.data_dir) if a.data_dir else None
    for n in a.cells:
        with tempfile.TemporaryDirectory() as tmp:
            src = (data_dir or Path(tmp)) / f"grn{n}x{a.genes}s{a.seed}.h5ad"
            if not src.exists():
                simulated_grn_counts(n, a.genes, seed=a.seed).write_h5ad(src)
            truth_ad = ad.read_h5ad(src, backed="r")
            names = list(truth_ad.var_names)
            truth = truth_ad.varp[TRUE_DAG_KEY]
            params = dict(truth_ad.uns["cape_dataset_params"])
            cape = Path(sys.executable).with_name("cape")
            cmd = [str(cape), "run", str(src), "--until", "discover", "--workdir", f"{tmp}/work", "--out", f"{tmp}/out"]
            for s in a.sets:
                cmd += ["--set", s]
            load0 = os.getloadavg()
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True)
            sec = time.perf_counter() - t0
            g = CausalGraph.read_parquet(Path(tmp) / "out" / "dag.parquet")
        # the learned graph on the truth's gene order (preprocessing may drop genes)
        idx = {nm: i for i, nm in enumerate(names)}
        pos = np.array([idx[f] for f in g.feature_names])
        a_pred = g.adjacency.tocoo()
        m = len(names)
        import scipy.sparse as sp

        pred = sp.csr_matrix((np.ones(a_pred.nnz), (pos[a_pred.row], pos[a_pred.col])), shape=(m, m))
        kept = np.zeros(m, bool)
        kept[pos] = True
        t = sp.csr_matrix(truth)[kept][:, kept]
        metrics = dag_metrics(pred[kept][:, kept], t)
        rec = {
            "label": a.label, "cells": n, "genes": a.genes, "seed": a.seed, "sets": a.sets,
            "n_features": g.n_features, "n_true_edges_kept": int(t.nnz), "n_edges": g.n_edges,
            "isolated_share": g.params.get("isolated_share"),
            "metrics": {k: round(float(v), 4) for k, v in metrics.items()},
            "seconds_total": round(sec, 1), "seconds_discover": round(float(g.params.get("seconds", float("nan"))), 1),
            "data_params": params, "load_average_before": load0, "load_average_after": os.getloadavg(),
            "command": common.command(), "cape_command": " ".join(cmd[1:]), "machine": common.machine(),
        }
        print(json.dumps(rec))
        with open(OUT, "a") as fh:
            fh.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
