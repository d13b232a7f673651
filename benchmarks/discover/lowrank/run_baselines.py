"""Run gcastle baselines (default settings) on the Step I benchmark datasets and cache results.

Each (dataset, method) case runs in a subprocess with a wall-clock limit; results (metrics,
seconds, load average) are recorded in ``../cases.jsonl`` so reruns reuse them. A case over the
limit is recorded as ``{"status": "not run (time)"}``.

Usage: python benchmarks/discover/lowrank/run_baselines.py --methods notears,notears-low-rank \
          --datasets synth10,synth20,synth50,sachs --limit 1200
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402


def one(dataset: str, method: str) -> None:
    rec, _ = common.measure(dataset, method=method)
    rec["method"] = method
    common.write_cache(dataset, method, rec)
    print(json.dumps(rec, default=float))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--methods", default="notears,notears-low-rank,dag-gnn")
    ap.add_argument("--datasets", default="synth10,synth20,sachs,synth50")
    ap.add_argument("--limit", type=float, default=1200.0)
    ap.add_argument("--one", nargs=2, metavar=("DATASET", "METHOD"))
    a = ap.parse_args()
    if a.one:
        one(*a.one)
        return
    for ds in a.datasets.split(","):
        for me in a.methods.split(","):
            if common.read_cache(ds, me) is not None:
                print(f"cached: {ds} {me}")
                continue
            seconds = common.run_case(__file__, ds, me, limit=a.limit)
            print(f"{ds} {me}: {seconds:.0f} s", flush=True)

if __name__ == "__main__":
    main()
