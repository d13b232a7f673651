"""Step II speed to convergence: M = 5000, d = 64, `embed()` defaults (target ≤ 2 min on the 2-core CPU).

Usage:  python benchmarks/embed/speed.py [--threads 1] [--m 5000] [--dim 64] [--device cpu]
            [--out benchmarks/embed/results_speed.md] [--figure benchmarks/embed/speed_loss.png]

Trains with the defaults until the stopping rule fires (no step cap), then records the time, the
epochs, whether it converged, the quality properties and the loss curve.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import torch

from cape_pipeline.hyperbolic import embed, k_hop_positives

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, scale_free  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = leave torch's default)")
    ap.add_argument("--m", type=int, default=5000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--geometry", default="hyperbolic")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--figure", default=None)
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
    emb = embed(g, dim=args.dim, geometry=args.geometry, seed=args.seed, device=args.device)
    dt = time.perf_counter() - t0
    p, q = emb.params, emb.params["quality"]
    dev = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    lines = [
        f"## Speed to convergence: M = {args.m}, d = {args.dim}, geometry {args.geometry}, device {dev}",
        "",
        f"- command: `{cmd}`",
        f"- data: gcastle scale-free DAG, M = {args.m}, {g.n_edges} edges, graph seed 1; embedding seed {args.seed}",
        f"- machine (before): {before}",
        f"- machine (after):  {machine()}",
        f"- k-hop positives (sparse max-product): {t_pos:.2f} s, {pos.nnz // 2} positive pairs",
        f"- embed() with defaults: **{dt:.1f} s** in all ({p['train_s']:.1f} s training, the rest the quality "
        f"evaluation); {p['epochs_run']} epochs × {p['steps_per_epoch']} steps of {p['batch_size_used']} anchors "
        f"= {p['steps']} steps ({1e3 * p['train_s'] / max(1, p['steps']):.1f} ms/step); converged: {p['converged']}; "
        f"learned curvature −{p['curvature']:.3g}" if p.get("curvature") else "",
        f"- quality: mAP {q['map']:.3f}, mean rank {q['mean_rank']:.1f}, distortion {q['distortion']:.3f}, "
        f"ρ(‖e‖, −π) {q['spearman_norm_vs_neg_pagerank']:.3f}, ρ(‖e‖, depth) {q['spearman_norm_vs_depth']:.3f}, "
        f"max ‖e‖ {q['max_norm']:.3f}",
        f"- loss (Eq. 15, per anchor): first epoch {emb.loss_history[0]:.2f}, last {emb.loss_history[-1]:.2f}",
        "",
    ]
    text = "\n".join(line for line in lines if line is not None)
    print(text, flush=True)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(text + "\n")
    if args.figure:
        from cape_pipeline import pl

        fig = pl.plot_loss(emb.loss_history, label=f"M = {args.m}, d = {args.dim} ({dt:.0f} s, {dev})")
        fig.axes[0].axvline(p["burn_in"], color="0.6", ls=":", lw=1)
        fig.axes[0].set_title("Step II loss per epoch to the plateau (dotted: end of burn-in)")
        fig.savefig(args.figure, dpi=110, bbox_inches="tight")


if __name__ == "__main__":
    main()
