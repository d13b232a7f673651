"""Write SDCD-style benchmark data for the SDCD baseline. Run with the MAIN env:

    /work/main/.venv/bin/python benchmarks/discover/sdcd/make_data.py --d 100 --seed 0

Writes data/sdcd_gen_d{d}_s{seed}.npz with x (N, d) float32 and true (d, d) int8, [i, j] = 1: i -> j.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from cape_pipeline.datasets import sdcd_sem

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=10_000)
    a = ap.parse_args()
    adata = sdcd_sem(a.d, a.n, a.seed)
    x = np.asarray(adata.X, dtype=np.float32)
    true = adata.varp["true_dag"]
    true = (np.asarray(true.toarray() if hasattr(true, "toarray") else true) != 0).astype(np.int8)
    out = HERE / "data" / f"sdcd_gen_d{a.d}_s{a.seed}.npz"
    out.parent.mkdir(exist_ok=True)
    np.savez_compressed(out, x=x, true=true)
    print(f"wrote {out}: x {x.shape}, {int(true.sum())} true edges")


if __name__ == "__main__":
    main()
