"""Effect of sampled negatives (``embed(..., negatives=K)``) on Step II quality and time.

Run from the repository root:
    python benchmarks/embed/negatives.py > benchmarks/embed/results_negatives.md
"""

from __future__ import annotations

import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import hierarchy_rho, machine, mean_average_precision, scale_free  # noqa: E402

from cape_pipeline.hyperbolic import embed  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)  # benchmark script, not library code
    graph = scale_free(500, seed=1)
    print("# Step II: all negatives vs sampled negatives\n")
    print("- command: `python benchmarks/embed/negatives.py > benchmarks/embed/results_negatives.md`")
    print(f"- machine (before): {machine()}")
    print(f"- data: gcastle scale-free DAG, M = {graph.n_features}, {graph.n_edges} edges, graph seed 1; embedding seed 0")
    print("- embed(): d = 16, lr 1e-2 (RSGD; the lr at which the embedding moves, see results_quality.md), "
          "other arguments at their defaults (1000 epochs, batch 32, k_hop 2)\n")
    print("| negatives per anchor | mAP | ρ(‖e‖, −π) | time (s) |")
    print("|---|---|---|---|")
    for k in (None, 128, 32):
        t = time.perf_counter()
        emb = embed(graph, dim=16, lr=1e-2, negatives=k, seed=0)
        sec = time.perf_counter() - t
        label = "all (Eq. 16 exactly)" if k is None else f"{k} sampled"
        print(f"| {label} | {mean_average_precision(emb, graph):.3f} | {hierarchy_rho(emb):.3f} | {sec:.1f} |", flush=True)
    print(f"\n- machine (after): {machine()}")


if __name__ == "__main__":
    main()
