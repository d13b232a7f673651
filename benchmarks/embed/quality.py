"""Step II quality: does the embedding carry the DAG? Hyperbolic vs the Euclidean ablation.

Every run uses ``embed()``'s defaults (Riemannian Adam, lr 0.05, burn-in, sampled negatives
K = 128, plateau stopping rule, learned curvature) except the arguments named in its config.
The Euclidean ablation is the same loss and schedule with ``geometry="euclidean"`` (Adam).
The properties come from ``cape_pipeline.hyperbolic.quality.embedding_quality``.

Usage (rows are appended to a JSONL file, so runs can be split over processes)::

    python benchmarks/embed/quality.py run --graphs tree121,sf100 --dims 2,4,8,16 --raw benchmarks/embed/results/quality.jsonl
    python benchmarks/embed/quality.py summarize --raw benchmarks/embed/results/quality.jsonl --out benchmarks/embed/results_quality.md
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

from cape_pipeline.hyperbolic import embed

sys.path.insert(0, str(Path(__file__).parent))
from _common import GRAPHS, machine  # noqa: E402

CONFIGS = {
    "hyperbolic": {},
    "hyperbolic κ=1 fixed": {"learn_curvature": False},
    "hyperbolic RSGD": {"optimizer": "rsgd"},
    "euclidean": {"geometry": "euclidean"},
}


def run(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)  # a benchmark script, not library code
    cmd = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    raw = Path(args.raw)
    raw.parent.mkdir(parents=True, exist_ok=True)
    for gname in args.graphs.split(","):
        g = GRAPHS[gname]()
        for d in [int(x) for x in args.dims.split(",")]:
            for cname in args.configs.split(","):
                kw = CONFIGS[cname]
                load = machine()
                t0 = time.perf_counter()
                try:
                    emb = embed(g, dim=d, seed=args.seed, **kw)
                    err = None
                except Exception as exc:  # a diverged config is a result too
                    emb, err = None, f"{type(exc).__name__}: {exc}"
                dt = time.perf_counter() - t0
                row = {"graph": gname, "n_features": g.n_features, "n_edges": g.n_edges, "d": d,
                       "config": cname, "kwargs": kw, "seed": args.seed, "time_s": round(dt, 2),
                       "command": cmd, "machine": load, "error": err}
                if emb is not None:
                    p = emb.params
                    row.update({k: p[k] for k in ("epochs_run", "steps", "converged", "curvature", "lr", "optimizer")})
                    row["quality"] = p["quality"]
                    row["final_loss"] = emb.loss_history[-1] if emb.loss_history else None
                    row["max_abs_angle"] = float(np.abs(emb.poincare).max() * math.pi / 4)
                with raw.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
                q = row.get("quality") or {}
                print(f"{gname} d={d} {cname}: mAP {q.get('map')} rank {q.get('mean_rank')} "
                      f"rhoPR {q.get('spearman_norm_vs_neg_pagerank')} ep {row.get('epochs_run')} "
                      f"{dt:.1f}s {err or ''}", flush=True)


def _f(v: object, spec: str = ".3f") -> str:
    return "–" if v is None else format(v, spec)


def summarize(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in Path(args.raw).read_text().splitlines() if line.strip()]
    out = [
        "# Step II quality: does the embedding carry the DAG? (hyperbolic vs the Euclidean ablation)",
        "",
        "- commands: " + "; ".join(sorted({f"`{r['command']}`" for r in rows})),
        f"- raw rows: `{args.raw}` (one JSON object per run, with the machine and its load average at the start)",
        f"- machine at the first run: {rows[0]['machine']}" if rows else "",
        "- defaults of `embed()` unless the config says otherwise: Riemannian Adam lr 0.05, 10 burn-in epochs at lr/10, "
        "K = 512 negatives shared per step (all negatives when M ≤ 513), batch 32 (ceil(M/20) above M = 640), plateau "
        "stopping (tol 1e-3, windows ≥ 10 epochs and ≥ 200 steps), max 1000 epochs, learned curvature (init κ = 1), "
        "radius clip 12, isolated features at the origin, embedding seed 0, graph seed 1, one run per cell",
        "- mAP / mean rank: Nickel & Kiela edge reconstruction from distances (DAG neighbours in either direction, all "
        "other features as candidates; ≤ 2000 anchors); distortion: mean |d_emb/(s·hops) − 1|, s = median ratio; "
        "ρ_PR = Spearman(‖e‖, −PageRank), ρ_depth = Spearman(‖e‖, topological depth), both over connected features; "
        "max |φ| = π/4 · max |e_i|",
        "",
        "## Targets: hyperbolic mAP above the Euclidean ablation (d ≤ 16), ρ_PR > 0.3, max |φ| ≥ 0.2 rad",
        "",
        "| graph | M | d | mAP hyperbolic | mAP euclidean | hyperbolic wins | ρ_PR (hyp) | > 0.3 | max abs φ (hyp) | ≥ 0.2 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    by = {(r["graph"], r["d"], r["config"]): r for r in rows}
    keys = sorted({(r["graph"], r["n_features"], r["d"]) for r in rows}, key=lambda k: (k[1], k[0], k[2]))
    wins = total = ties = 0
    for gname, m, d in keys:
        h, e = by.get((gname, d, "hyperbolic")), by.get((gname, d, "euclidean"))
        if not h or not e or h.get("error") or e.get("error"):
            continue
        hm, em = h["quality"]["map"], e["quality"]["map"]
        rho = h["quality"]["spearman_norm_vs_neg_pagerank"]
        win = hm is not None and em is not None and hm > em + 1e-3
        tie = hm is not None and em is not None and abs(hm - em) <= 1e-3
        if d <= 16:
            total += 1
            wins += int(win)
            ties += int(tie)
        verdict = "yes" if win else ("tie" if tie else "**no**")
        out.append(f"| {gname} | {m} | {d} | {_f(hm)} | {_f(em)} | {verdict} | {_f(rho)} | "
                   f"{'yes' if rho is not None and rho > 0.3 else '**no**'} | {_f(h['max_abs_angle'])} | "
                   f"{'yes' if h['max_abs_angle'] >= 0.2 else '**no**'} |")
    out += ["", f"Hyperbolic mAP above Euclidean (by more than 0.001) in {wins} of {total} (graph, d ≤ 16) cells, "
            f"tied in {ties}, below in {total - wins - ties}.", "",
            "## Every run", "",
            "| graph | M | edges | d | config | mAP | mean rank | distortion | ρ_PR | ρ_depth | max abs φ | κ | epochs | converged | final loss | time (s) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["n_features"], r["graph"], r["d"], r["config"])):
        if r.get("error"):
            out.append(f"| {r['graph']} | {r['n_features']} | {r['n_edges']} | {r['d']} | {r['config']} | "
                       f"error: {r['error'][:120]} | | | | | | | | | | {r['time_s']} |")
            continue
        q = r["quality"]
        out.append(
            f"| {r['graph']} | {r['n_features']} | {r['n_edges']} | {r['d']} | {r['config']} | {_f(q['map'])} | "
            f"{_f(q['mean_rank'], '.2f')} | {_f(q['distortion'])} | {_f(q['spearman_norm_vs_neg_pagerank'])} | "
            f"{_f(q['spearman_norm_vs_depth'])} | {_f(r['max_abs_angle'])} | {_f(r['curvature'], '.3g')} | "
            f"{r['epochs_run']} | {r['converged']} | {_f(r['final_loss'], '.3g')} | {r['time_s']} |"
        )
    Path(args.out).write_text("\n".join(out) + "\n")
    print("\n".join(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--graphs", default="tree121,sachs,synthetic20,sf100,sf500")
    r.add_argument("--dims", default="2,4,8,16")
    r.add_argument("--configs", default="hyperbolic,euclidean")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--raw", default=str(Path(__file__).parent / "results" / "quality.jsonl"))
    s = sub.add_parser("summarize")
    s.add_argument("--raw", default=str(Path(__file__).parent / "results" / "quality.jsonl"))
    s.add_argument("--out", default=str(Path(__file__).parent / "results_quality.md"))
    args = ap.parse_args()
    (run if args.cmd == "run" else summarize)(args)


if __name__ == "__main__":
    main()
