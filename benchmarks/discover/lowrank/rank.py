"""What the low rank costs in accuracy once M ≫ r (Supp. G.4: A = U Vᵀ, r = 40).

The accuracy benchmark (accuracy.py) has M ≤ 50, where the default rank 40 is (almost) full,
so it never tests the low-rank constraint. Here M = 200 (synthetic-mlp: scale-free, 2M edges,
N = 2000, seed 0; the same generator as accuracy.py) and CAPE runs at rank 40 (the default)
and at rank M − 1 (full), beside the correlation graph. The "oracle" line is what *any* rank-r
matrix can do on this graph: the top-|E| entries of the best rank-r approximation (SVD) of the
true 0/1 adjacency, as a precision. Writes the run ``rank_m{M}`` of ``rank.jsonl``.

Usage: python benchmarks/discover/lowrank/rank.py [--m 200] [--ranks 40,199]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402


def oracle_precision(true, r: int) -> float:
    import numpy as np

    w = true.astype(float)
    u, s, vt = np.linalg.svd(w)
    a = (u[:, :r] * s[:r]) @ vt[:r]
    np.fill_diagonal(a, 0.0)
    n = int(true.sum())
    top = np.argsort(-np.abs(a).ravel())[:n]
    return float((w.ravel()[top] != 0).mean())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=200)
    ap.add_argument("--ranks", default="40,199")
    a = ap.parse_args()
    name = f"synth{a.m}"
    print("command:", common.command())
    print("machine:", common.machine())
    _, _, true = common.load(name)
    rows = []
    for r in map(int, a.ranks.split(",")):
        rec, _ = common.measure(name, rank=r)
        rows.append({"method": f"cape rank {r}", "oracle_precision_rank_r": oracle_precision(true, r),
                     "seconds": rec["seconds"], **rec["metrics"]})
        print(rows[-1], flush=True)
    rec, _ = common.measure(name, method="correlation")
    rows.append({"method": "correlation", "seconds": rec["seconds"], **rec["metrics"]})
    print(rows[-1])
    print(f"\n| {name} | SHD | F1 | skeleton F1 | AUPRC | edges | oracle precision at rank r | s |")
    print("|---|---|---|---|---|---|---|---|")
    for w in rows:
        orc = w.get("oracle_precision_rank_r")
        print(f"| {w['method']} | {w['shd']} | {w['f1']:.3f} | {w['skeleton_f1']:.3f} | {w['auprc']:.3f} "
              f"| {w['nnz']} | {'' if orc is None else f'{orc:.3f}'} | {w['seconds']:.0f} |")
    out = {"rows": rows, "machine": common.machine(), "command": common.command()}
    common.save_record(HERE / "rank.jsonl", f"rank_m{a.m}", out)


if __name__ == "__main__":
    main()
