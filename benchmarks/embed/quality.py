"""Step II quality: edge reconstruction mAP and hierarchy ρ, hyperbolic vs Euclidean at equal d.

Usage:  python benchmarks/embed/quality.py [--threads 1] [--out benchmarks/embed/results_quality.md]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import torch

from cape_pipeline.hyperbolic import embed

sys.path.insert(0, str(Path(__file__).parent))
from _common import hierarchy_rho, machine, mean_average_precision, sachs, scale_free  # noqa: E402

CONFIGS = [
    ("hyperbolic, RSGD lr 1e-3 (default)", dict(geometry="hyperbolic", optimizer="rsgd", lr=1e-3)),
    ("hyperbolic, RSGD lr 1e-2", dict(geometry="hyperbolic", optimizer="rsgd", lr=1e-2)),
    ("hyperbolic, RAdam lr 1e-2", dict(geometry="hyperbolic", optimizer="radam", lr=1e-2)),
    ("euclidean, Adam lr 1e-3", dict(geometry="euclidean", lr=1e-3)),
    ("euclidean, Adam lr 1e-2", dict(geometry="euclidean", lr=1e-2)),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads for this script")
    ap.add_argument("--dims", default="2,16")
    ap.add_argument("--seed", type=int, default=0, help="embedding seed")
    ap.add_argument("--graph-seed", type=int, default=1)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results_quality.md"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)  # a benchmark script, not library code
    cmd = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    graphs = [
        ("Sachs consensus (M=11, 18 edges)", sachs()),
        (f"gcastle scale-free M=50, 100 edges, seed {args.graph_seed}", scale_free(50, args.graph_seed)),
        (f"gcastle scale-free M=500, 1000 edges, seed {args.graph_seed}", scale_free(500, args.graph_seed)),
    ]
    lines = [
        "# Step II quality: hyperbolic vs Euclidean (same loss, equal d)",
        "",
        f"- command: `{cmd}`",
        f"- machine (start): {machine()}",
        f"- embedding seed {args.seed}; all other embed() arguments at their defaults (epochs=1000, batch 32, k_hop 2, λg 0.1, all negatives)",
        "- mAP: Nickel & Kiela edge reconstruction from distances (neighbours in either direction); "
        "ρ: Spearman(‖e‖, −PageRank), positive = roots near the origin",
        "",
        "| graph | d | config | mAP | ρ(‖e‖, −π) | max ‖e‖ | final loss | steps | time (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    for gname, g in graphs:
        for d in [int(x) for x in args.dims.split(",")]:
            for cname, kw in CONFIGS:
                t0 = time.perf_counter()
                emb = embed(g, dim=d, seed=args.seed, **kw)
                dt = time.perf_counter() - t0
                import numpy as np

                row = (
                    f"| {gname} | {d} | {cname} | {mean_average_precision(emb, g):.3f} | {hierarchy_rho(emb):.3f} | "
                    f"{np.linalg.norm(emb.poincare, axis=1).max():.3f} | {emb.loss_history[-1]:.2f} | "
                    f"{emb.params['steps_per_epoch'] * emb.params['epochs']} | {dt:.1f} |"
                )
                lines.append(row)
                print(row, flush=True)
    lines += ["", f"- machine (end): {machine()}", ""]
    Path(args.out).write_text("\n".join(lines))


if __name__ == "__main__":
    main()
