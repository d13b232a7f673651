"""Step I with every default on a user-sized UMI-count dataset, run as a user would (`cape run`).

Data: ``cape_pipeline.datasets.simulated_counts`` (our generator: cell types, co-regulated gene
modules, negative-binomial counts, ~10 % non-zero, median ~3,000 UMIs), written to an
``.h5ad``; then ``cape run FILE --until discover`` with no other option (preprocessing keeps
2,000 HVGs; Step I at its defaults). Prints the command, machine, load, seconds per stage, the
number of edges and the share of genes without an edge, and appends a JSON line to
``user_counts.jsonl``.

Usage::

    python benchmarks/discover/learned/user_counts.py [--cells 3000] [--genes 15000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

OUT = HERE / "user_counts.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=3000)
    ap.add_argument("--genes", type=int, default=15000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    from cape_pipeline.causal.graph import CausalGraph
    from cape_pipeline.datasets import simulated_counts

    print("command:", common.command())
    print("machine:", common.machine())
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "cells.h5ad"
        simulated_counts(a.cells, a.genes, seed=a.seed).write_h5ad(src)
        cape = Path(sys.executable).with_name("cape")
        cmd = [str(cape), "run", str(src), "--until", "discover", "--workdir", f"{tmp}/work", "--out", f"{tmp}/out"]
        load0 = os.getloadavg()
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        sec = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        g = CausalGraph.read_parquet(Path(tmp) / "out" / "dag.parquet")
    rec = {
        "cells": a.cells, "genes": a.genes, "seed": a.seed, "seconds_total": round(sec, 1),
        "seconds_discover": round(float(g.params.get("seconds", float("nan"))), 1),
        "n_features": g.n_features, "n_edges": g.n_edges,
        "n_isolated": g.params.get("n_isolated"), "isolated_share": g.params.get("isolated_share"),
        "support": g.params.get("support"), "warnings": g.params.get("warnings"),
        "peak_rss_mib_child": round(rss), "load_average_before": load0, "load_average_after": os.getloadavg(),
        "command": common.command(), "cape_command": " ".join(cmd[1:]), "machine": common.machine(),
    }
    print(json.dumps(rec, indent=1))
    with open(OUT, "a") as fh:
        fh.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
