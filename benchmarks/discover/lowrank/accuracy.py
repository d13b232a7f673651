"""Step I accuracy benchmark: CAPE (both acyclicity variants), correlation, gcastle baselines.

Runs CAPE (default = spectral acyclicity, sampled posterior; the majorant acyclicity; the
DAG-GNN-style mean posterior) and the correlation ablation with the package defaults on synthetic-mlp M = 10, 20,
50 (scale-free, 2M edges, N = 2000, seed 0) and Sachs (log1p), recording each case in
``../cases.jsonl`` like ``run_baselines.py`` (which runs the gcastle methods in the background), then
writes ``RESULTS.md`` from every cached case.

Usage: python benchmarks/discover/lowrank/accuracy.py [--datasets synth10,...] [--report-only]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

OURS = {"cape-spectral": {"method": "cape", "acyclicity": "spectral"},
        "cape-majorant": {"method": "cape", "acyclicity": "majorant"},
        "cape-mean": {"method": "cape", "posterior": "mean"},
        "correlation": {"method": "correlation"}}
ROWS = ["cape-spectral", "cape-majorant", "cape-mean", "correlation", "notears", "dag-gnn", "notears-low-rank"]
DATASETS = ["synth10", "synth20", "synth50", "sachs"]


def run(ds: str, name: str) -> None:
    rec, g = common.measure(ds, **OURS[name])
    rec["method"] = name
    rec["final_h"] = g.history[-1]["h"] if g.history else None
    common.write_cache(ds, name, rec)
    print(ds, name, f"{rec['seconds']:.1f}s", rec["metrics"], flush=True)


def report() -> str:
    lines = ["| dataset | method | SHD | F1 | skeleton F1 | AUPRC | #edges | seconds | load avg | note |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for ds in DATASETS:
        for me in ROWS:
            rec = common.read_cache(ds, me)
            if rec is None:
                lines.append(f"| {ds} | {me} | | | | | | | | not run (time: not attempted in the time budget) |")
                continue
            if rec["status"] != "ok":
                lim = rec.get("limit_seconds")
                lines.append(f"| {ds} | {me} | | | | | | >{lim:.0f} | | {rec['status']} |"
                             if lim else f"| {ds} | {me} | | | | | | | | {rec['status']} |")
                continue
            m = rec["metrics"]
            src = "cached gcastle run (run_baselines.py)" if me in ("notears", "dag-gnn", "notears-low-rank") else ""
            if me == "correlation":
                src = "symmetric, not a DAG"
            lines.append(
                f"| {ds} | {me} | {m['shd']} | {m['f1']:.3f} | {m['skeleton_f1']:.3f} | "
                f"{m['auprc']:.3f} | {m['nnz']} | {rec['seconds']:.1f} | "
                f"{rec['load_average'][0]:.1f} | {src} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--methods", default=",".join(OURS))
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    print("command:", common.command())
    print("machine:", common.machine())
    if not a.report_only:
        for ds in a.datasets.split(","):
            for me in a.methods.split(","):
                if common.read_cache(ds, me) is None or a.force:
                    run(ds, me)
    print(report())


if __name__ == "__main__":
    main()
