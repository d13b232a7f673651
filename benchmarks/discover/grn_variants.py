"""Step I's learned fit on simulated counts with a known graph, with options changed one at a time.

Loads an ``.h5ad`` made by ``cape_pipeline.datasets.simulated_grn_counts`` (e.g. by
``grn_counts.py --data-dir DIR``), preprocesses it as the pipeline does
(``pp.preprocess``, ``n_top_features`` from ``NTOP``, default 2,000), standardizes it as
``discover`` does, runs ``fit_learned(x, **OPTIONS)`` and prints one JSON line: the options,
seconds, pairs kept by the learned screen, the recall and precision of the stage-2 support,
stage epochs, the stage-1 trajectory (epoch, pairs above the screen threshold, mean ‖v‖ of
the output layers, validation NLL) and the final DAG's precision, recall and F1.

Usage::

    python benchmarks/discover/grn_variants.py DATA.h5ad '{"output_decay": 0.01}'   # T=threads NTOP=HVGs
"""

from __future__ import annotations

import json
import os
import sys
import time

import anndata as ad
import numpy as np
import scipy.sparse as sp
import torch


def main() -> None:
    import cape_pipeline as cp
    from cape_pipeline.causal.api import prepare_matrix
    from cape_pipeline.causal.learned import fit_learned
    from cape_pipeline.causal.metrics import dag_metrics

    torch.set_num_threads(int(os.environ.get("T", "2")))
    path = sys.argv[1]
    opts = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    a = ad.read_h5ad(path)
    truth = sp.csr_matrix(a.varp["true_dag"])
    p = cp.pp.preprocess(a, copy=True, n_top_features=int(os.environ.get("NTOP", "2000")))
    x, _ = prepare_matrix(p, None, missing="error")
    pos = np.array([a.var_names.get_loc(g) for g in p.var_names])
    t = truth[pos][:, pos]
    t0 = time.time()
    fit = fit_learned(torch.from_numpy(x.astype(np.float32)), **opts)
    sec = time.time() - t0
    tc = t.tocoo()
    true_pairs = set(zip(tc.row.tolist(), tc.col.tolist()))
    support = set(zip(fit.parent.tolist(), fit.child.tolist()))
    st1 = [h for h in fit.history if h["stage"] == 1]
    st2 = [h for h in fit.history if h["stage"] == 2]
    m = dag_metrics((fit.adjacency != 0).astype(float), t)
    print(json.dumps({
        "data": path, "n_top_features": int(p.n_vars), "opts": opts, "threads": torch.get_num_threads(),
        "seconds": round(sec), "load_average": os.getloadavg(), "n_screened": fit.n_screened,
        "stage2_support_recall": round(len(true_pairs & support) / max(len(true_pairs), 1), 3),
        "stage2_support_precision": round(len(true_pairs & support) / max(len(support), 1), 3),
        "epochs": [len(st1), len(st2), len(fit.history) - len(st1) - len(st2)],
        "stage1": [(h["epoch"], h["n_support"], round(h["v_norm"], 2), round(h["val_nll"], 1)) for h in st1][::5],
        "edges": int(fit.adjacency.nnz),
        **{k: round(float(m[k]), 3) for k in ("precision", "recall", "f1", "skeleton_f1")},
    }))


if __name__ == "__main__":
    main()
