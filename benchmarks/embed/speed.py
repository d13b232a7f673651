"""Step II speed: M = 5000, d = 64, default epochs (budget: ≤ 2 minutes on the 2-core CPU).

Usage:  python benchmarks/embed/speed.py [--threads 1] [--m 5000] [--dim 64]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

from cape_pipeline.hyperbolic import embed, k_hop_positives

sys.path.insert(0, str(Path(__file__).parent))
from _common import hierarchy_rho, machine, mean_average_precision, scale_free  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = leave torch's default)")
    ap.add_argument("--m", type=int, default=5000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=1000)
    ap.add_argument("--geometry", default="hyperbolic")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)  # a benchmark script, not library code
    cmd = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    g = scale_free(args.m, 1)
    t0 = time.perf_counter()
    pos = k_hop_positives(g.adjacency, 2)
    t_pos = time.perf_counter() - t0
    before = machine()
    t0 = time.perf_counter()
    emb = embed(g, dim=args.dim, epochs=args.epochs, geometry=args.geometry, seed=args.seed)
    dt = time.perf_counter() - t0
    rows = np.random.default_rng(0).choice(args.m, size=min(args.m, 500), replace=False)
    lines = [
        f"## Speed: M = {args.m}, d = {args.dim}, epochs = {args.epochs}, geometry = {args.geometry}",
        "",
        f"- command: `{cmd}`",
        f"- data: gcastle scale-free DAG, M = {args.m}, {g.n_edges} edges, graph seed 1; embedding seed {args.seed}",
        f"- machine (before): {before}",
        f"- machine (after):  {machine()}",
        f"- k-hop positives (sparse max-product): {t_pos:.2f} s, {pos.nnz // 2} positive pairs",
        f"- embed(): **{dt:.1f} s** ({emb.params['steps_per_epoch'] * args.epochs} steps, "
        f"{1e3 * dt / (emb.params['steps_per_epoch'] * args.epochs):.1f} ms/step); budget 120 s",
        f"- quality on 500 sampled anchors: mAP {mean_average_precision(emb, g, rows):.3f}, "
        f"ρ(‖e‖, −π) {hierarchy_rho(emb):.3f}, max ‖e‖ {np.linalg.norm(emb.poincare, axis=1).max():.3f}",
        "",
    ]
    text = "\n".join(lines)
    print(text, flush=True)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
