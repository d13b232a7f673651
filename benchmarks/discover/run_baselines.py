"""Run gcastle baselines (default settings) on the Step I benchmark datasets and cache results.

Each (dataset, method) case runs in a subprocess with a wall-clock limit; results (metrics,
seconds, load average) are cached as JSON in ``cache/`` so reruns reuse them. A case over the
limit is cached as ``{"status": "not run (time)"}``.

Usage: python benchmarks/discover/run_baselines.py --methods notears,notears-low-rank \
          --datasets synth10,synth20,synth50,sachs --limit 1200
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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
            t0 = time.time()
            try:
                subprocess.run(
                    [sys.executable, __file__, "--one", ds, me], timeout=a.limit, check=True
                )
            except subprocess.TimeoutExpired:
                common.write_cache(
                    ds,
                    me,
                    {
                        "status": "not run (time)",
                        "limit_seconds": a.limit,
                        "machine": common.machine(),
                        "dataset": ds,
                        "method": me,
                    },
                )
            except subprocess.CalledProcessError as exc:
                common.write_cache(ds, me, {"status": f"failed ({exc.returncode})", "dataset": ds, "method": me})
            print(f"{ds} {me}: {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
