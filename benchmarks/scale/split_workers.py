"""Step I's random splits on dask workers: time with 1 and 2 local workers beside the serial run.

On one simulated counts file (``cape_pipeline.datasets.simulated_counts``), Step I runs three
times from the same cached preprocess stage, each in a fresh process::

    cape discover FILE --set 'ingest.label_columns=[cell_type]' --workdir W [--set discover.regression.workers=local:N]

and records the discover stage's seconds (from its manifest), the edges and whether the DAG
equals the serial run's. One JSON line per run goes to ``split_workers.jsonl``.

Usage::

    python benchmarks/scale/split_workers.py --cells 10000 --genes 20000 [--seed 0] [--work /tmp/cape_workers]
    python benchmarks/scale/split_workers.py --cells 10000 --genes 20000 --threads 1 --variants serial local:2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _record import append, commit, provenance  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "split_workers.jsonl"
CAPE = str(Path(sys.executable).with_name("cape"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=10000)
    ap.add_argument("--genes", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default="/tmp/cape_workers")
    ap.add_argument("--variants", nargs="+", default=["serial", "local:1", "local:2"])
    ap.add_argument("--threads", type=int, default=None, help="--threads of every cape run (and so of each worker)")
    a = ap.parse_args()
    import pandas as pd

    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"sim{a.cells}x{a.genes}s{a.seed}.h5ad"
    if not src.is_file():
        from cape_pipeline.datasets import simulated_counts

        simulated_counts(a.cells, a.genes, seed=a.seed).write_h5ad(src)
    wd = work / "work"
    base = [CAPE, "discover", str(src), "--set", "ingest.label_columns=[cell_type]", "--workdir", str(wd)]
    if a.threads:
        base += ["--threads", str(a.threads)]
    subprocess.run([CAPE, "preprocess", *base[2:]], check=True, capture_output=True)  # cached for every variant
    dags: dict[str, pd.DataFrame] = {}
    for v in a.variants:
        extra = [] if v == "serial" else ["--set", f"discover.regression.workers={v}"]
        out = work / f"out-{v.replace(':', '')}-t{a.threads or 0}"
        load0 = os.getloadavg()
        t0 = time.perf_counter()
        subprocess.run([*base, *extra, "--out", str(out)], check=True, capture_output=True)
        wall = time.perf_counter() - t0
        man = json.loads((out / "discover_manifest.json").read_text()) if (out / "discover_manifest.json").is_file() else {}
        dag = pd.read_parquet(out / "dag.parquet")
        dags[v] = dag
        same = None
        if "serial" in dags and v != "serial":
            ref = dags["serial"]
            same = bool(ref[["source", "target", "weight"]].reset_index(drop=True).equals(dag[["source", "target", "weight"]].reset_index(drop=True)))
        rec = {
            "cells": a.cells, "genes": a.genes, "seed": a.seed, "workers": v, "threads": a.threads,
            "discover_s": man.get("timings", {}).get("seconds"), "wall_s": round(wall, 1),
            "n_edges": int(len(dag)), "dag_equals_serial": same, "commit": commit(),
            **provenance(load0),
        }
        append(OUT, rec)
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
