"""Ablations of the learned algorithm: ``fit_learned`` with some options changed, on SDCD's generator.

Each call fits once and appends one JSON line to ``learned_ablation.jsonl``: the options, the
data (``cape_pipeline.datasets.sdcd_sem(d, n, seed)``), F1 / precision / recall / SHD / AUPRC,
the recall of the candidate table and of the stage-2 support, seconds per stage, epochs per
stage, torch threads, load average before and after, machine and command.

Usage::

    python benchmarks/discover/learned/learned_ablation.py --d 200 --seed 0 --threads 1 \
        --set '{"refit": false}' --label "no refit"
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

OUT = HERE / "learned_ablation.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=200)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--set", default="{}", help="JSON of fit_learned keyword arguments")
    ap.add_argument("--label", default="defaults")
    a = ap.parse_args()
    import numpy as np
    import torch

    torch.set_num_threads(a.threads)
    from cape_pipeline.causal.learned import fit_learned
    from cape_pipeline.causal.metrics import dag_metrics
    from cape_pipeline.datasets import sdcd_sem

    adata = sdcd_sem(a.d, a.n, a.seed)
    true = (adata.varp["true_dag"].toarray() != 0).astype(int)
    kwargs = json.loads(a.set)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    fit = fit_learned(torch.tensor(np.asarray(adata.X)), seed=a.seed, **kwargs)
    sec = time.perf_counter() - t0
    pred = (fit.adjacency.toarray() != 0).astype(int)
    met = dag_metrics(pred, true, scores=fit.scores(a.d))
    t_edges = set(zip(*np.nonzero(true), strict=True))
    stage2 = set(zip(fit.parent.tolist(), fit.child.tolist(), strict=True))
    rec = {
        "label": a.label, "options": kwargs, "d": a.d, "n": a.n, "seed": a.seed,
        "data": f"sdcd_sem({a.d}, {a.n}, {a.seed})",
        "metrics": {k: float(v) for k, v in met.items()},
        "stage2_support_recall": len(stage2 & t_edges) / max(len(t_edges), 1),
        "n_candidate_pairs": fit.n_candidates, "n_screened_pairs": fit.n_screened,
        "epochs": [sum(h["stage"] == k for h in fit.history) for k in (1, 2, 3)],
        "seconds_per_stage": [round(sum(h["seconds"] for h in fit.history if h["stage"] == k), 1) for k in (1, 2, 3)],
        "screen_seconds": round(fit.screen_seconds, 1), "seconds": round(sec, 1),
        "n_cycle_edges_dropped": fit.n_cycle_edges_dropped,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "threads": a.threads, "load_average": [load0[0], os.getloadavg()[0]],
        "machine": common.machine(), "command": common.command(),
    }
    print(json.dumps(rec))
    with open(OUT, "a") as fh:
        fh.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
