"""Paper 000 Fig. S5 with this package's code: Step I and Step II time per epoch vs N and vs M.

Sweeps (each case in its own subprocess, one torch thread, data from the random sparse linear SEM
of ``benchmarks/discover/common.py``, 2 parents per node):

* Step I (``discover``, package defaults except ``epochs = max_outer = 2``) vs N at M = 200;
* Step I vs M at N = 5000;
* Step II (``embed`` of the true DAG, d = 16, package defaults except ``max_epochs``) vs M
  (Step II does not see N); seconds per epoch = the time of a 400-epoch run minus a 100-epoch
  run, over 300 (setup and the final quality metrics cancel; plateau stopping off, after a
  warm-up call).

Writes ``figS5.json`` (every row, the command, the machine) and ``figS5.png`` (log-log, one
panel per sweep, with the fitted slope of log(seconds/epoch) on log(size)).

Usage: python benchmarks/scaling/figS5.py [--n 1000,3000,10000,30000] [--m 100,300,1000,3000]
       [--embed-m 100,300,1000,3000] [--device cpu|cuda] [--report]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "discover"))
import common  # noqa: E402

M_FIXED, N_FIXED, EMBED_EPOCHS = 200, 5000, 400


def one(kind: str, m: int, n: int, device: str) -> dict:
    """Time one case in this process; returns a row."""
    import time

    import numpy as np
    import scipy.sparse as sp
    import torch

    torch.set_num_threads(1)
    load0 = os.getloadavg()[0]
    x, edges = common.linear_sem(m, n, seed=0, return_edges=True)
    if kind == "discover":
        from cape_pipeline.causal.api import discover

        t0 = time.perf_counter()
        g = discover(x, algorithm="low-rank", low_rank={"epochs": 2, "max_outer": 2}, seed=0, device=device)
        total = time.perf_counter() - t0
        per_epoch = float(np.median([h["seconds"] for h in g.history]))
        epochs = int(g.params["effective_epochs"])
    else:
        from cape_pipeline.causal.graph import CausalGraph
        from cape_pipeline.hyperbolic import embed

        adj = sp.csr_array((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(m, m))
        g = CausalGraph(np.asarray([f"g{i}" for i in range(m)], dtype=object), adj)
        embed(g, dim=16, seed=0, max_epochs=5, device=device)  # warm-up (first-call costs)
        runs = []
        for max_epochs in (EMBED_EPOCHS // 4, EMBED_EPOCHS):  # the difference cancels setup and quality metrics
            t0 = time.perf_counter()
            e = embed(g, dim=16, seed=0, max_epochs=max_epochs, window=EMBED_EPOCHS, device=device)  # no plateau stop
            runs.append((time.perf_counter() - t0, int(e.params["epochs_run"])))
        (t_short, e_short), (total, epochs) = runs
        per_epoch = (total - t_short) / max(epochs - e_short, 1)
    return {"kind": kind, "M": m, "N": n, "device": device, "epochs": epochs, "seconds_total": total,
            "seconds_per_epoch": per_epoch, "load_average": [load0, os.getloadavg()[0]]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="1000,3000,10000,30000")
    ap.add_argument("--m", default="100,300,1000,3000")
    ap.add_argument("--embed-m", default="100,300,1000,3000")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--one", nargs=3, metavar=("KIND", "M", "N"))
    ap.add_argument("--report", action="store_true", help="re-plot from figS5.json")
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one[0], int(a.one[1]), int(a.one[2]), a.device)))
        return
    sfx = "" if a.device == "cpu" else "_" + a.device.split(":")[0]
    path = HERE / f"figS5{sfx}.json"
    if a.report:
        saved = json.loads(path.read_text())
        rows, cmd, machine = saved["rows"], saved["command"], saved["machine"]
    else:
        cmd, machine = common.command(), common.machine()
        print("command:", cmd)
        print("machine:", machine, flush=True)
        cases = ([("discover", M_FIXED, int(n), "N") for n in a.n.split(",")]
                 + [("discover", int(m), N_FIXED, "M") for m in a.m.split(",")]
                 + [("embed", int(m), N_FIXED, "M") for m in a.embed_m.split(",")])
        rows = []
        for kind, m, n, axis in cases:
            out = subprocess.run([sys.executable, __file__, "--one", kind, str(m), str(n), "--device", a.device],
                                 capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            rows.append({**json.loads(out), "axis": axis})
            print(rows[-1], flush=True)
        path.write_text(json.dumps({"rows": rows, "command": cmd, "machine": machine}, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    panels = [("discover", "N", f"Step I vs N (M = {M_FIXED})"), ("discover", "M", f"Step I vs M (N = {N_FIXED})"),
              ("embed", "M", "Step II vs M (d = 16)")]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, (kind, axis, title) in zip(axes, panels, strict=True):
        sel = [r for r in rows if r["kind"] == kind and r["axis"] == axis]
        size = np.array([r[axis] for r in sel], dtype=float)
        sec = np.array([r["seconds_per_epoch"] for r in sel])
        slope = np.polyfit(np.log(size), np.log(sec), 1)[0]
        print(f"{title}: slope of log(s/epoch) on log({axis}) = {slope:.2f}; "
              + ", ".join(f"{int(s)}: {t:.3g} s" for s, t in zip(size, sec, strict=True)))
        ax.loglog(size, sec, "o-", label=f"measured (slope {slope:.2f})")
        ax.loglog(size, sec[0] * size / size[0], ":", color="gray", label="slope 1")
        ax.loglog(size, sec[0] * (size / size[0]) ** 2, "--", color="lightgray", label="slope 2")
        ax.set_xlabel(axis)
        ax.set_ylabel("seconds per epoch")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(f"{machine}", fontsize=7)
    fig.tight_layout()
    fig.savefig(HERE / f"figS5{sfx}.png", dpi=120)


if __name__ == "__main__":
    main()
