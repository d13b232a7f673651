"""Is a CUDA fit reproducible? Two same-seed runs, with and without the deterministic MLP backward.

``_PiecewiseLinear``'s backward sums per-bucket gradients. With ``scatter_add_`` on CUDA the
float additions are atomic and unordered, so two runs with one seed drift apart; the default
CUDA path (``cape_pipeline.causal.sem._DETERMINISTIC_CUDA = True``) sums with a one-hot
matrix product instead. This script fits the scaling benchmark's linear SEM
(M = 2000, N = 10⁴, 10 epochs in 10 outer steps) twice per setting and reports whether the
factors and the thresholded graphs agree, and the time per epoch. Writes ``cuda_repro.json``.

Usage (needs a CUDA device): python benchmarks/discover/lowrank/cuda_repro.py [--m 2000] [--epochs 10]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402


def main() -> None:
    import numpy as np
    import torch

    from cape_pipeline.causal import sem
    from cape_pipeline.causal.api import discover

    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=2000)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--epochs", type=int, default=10)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("cuda_repro.py needs a CUDA device")
    print("command:", common.command())
    print("machine:", common.machine())
    x = common.linear_sem(a.m, a.n, seed=0)
    rows = []
    for det in (True, False):
        sem._DETERMINISTIC_CUDA = det
        runs = []
        for _ in range(2):
            t0 = time.perf_counter()
            g = discover(x, algorithm="low-rank", low_rank={"epochs": a.epochs, "max_outer": a.epochs, "threshold": 0.05},
                         seed=0, device="cuda")
            runs.append((g, time.perf_counter() - t0))
        (g1, t1), (g2, t2) = runs
        d = abs(g1.adjacency - g2.adjacency)
        row = {
            "deterministic_backward": det,
            "M": a.m, "N": a.n, "epochs": a.epochs, "threshold": 0.05,
            "n_edges": [g1.n_edges, g2.n_edges],
            "max_abs_weight_difference": float(d.max()) if d.nnz else 0.0,
            "same_edge_set": bool(((g1.adjacency != 0) != (g2.adjacency != 0)).nnz == 0),
            "same_history": [h["recon"] for h in g1.history] == [h["recon"] for h in g2.history],
            "seconds_per_epoch": [float(np.sum([h["seconds"] for h in g.history])) / a.epochs
                                  for g in (g1, g2)],
            "seconds_total": [t1, t2],
        }
        rows.append(row)
        print(row, flush=True)
    sem._DETERMINISTIC_CUDA = True
    out = {"rows": rows, "machine": common.machine(), "command": common.command()}
    (HERE / "cuda_repro.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
