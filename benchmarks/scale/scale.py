"""The main job at user sizes: time and peak RSS per stage.

For each size, simulated UMI counts with labels (``cape_pipeline.datasets.simulated_counts``:
8 cell types, gene modules, ~10 % non-zero, median ~3,000 UMIs) are written to an ``.h5ad``
and the main job runs on it exactly as a user would, with every default::

    cape run FILE --set 'ingest.label_columns=[cell_type]' --workdir W --out O

one stage at a time (``--until STAGE``, the earlier stages from the cache), so each stage's
peak RSS is that of its own process (``os.wait4``). ``pbmc68k_reduced`` runs with its
workflow config. One JSON line per size goes to ``scale.jsonl``; ``scale_report.py`` makes the
table, the log-log slopes and ``scale.png``.

Usage::

    python benchmarks/scale/scale.py --cells 3000 --genes 15000 [--seed 0] [--work /tmp/cape_scale]
    python benchmarks/scale/scale.py --pbmc
    python benchmarks/scale/scale.py --cells 3000 --genes 15000 --step1-only   # Step I alone → step1.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _record import append, commit, provenance  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = HERE / "scale.jsonl"
#: Step I alone (``--step1-only``) on the same files, after a change of Step I's default
STEP1 = HERE / "step1.jsonl"
STAGES = ("ingest", "preprocess", "discover", "embed", "encode", "train", "evaluate")


def run_stage(cmd: list[str], log) -> tuple[float, float, str]:
    """Run one ``cape`` command; (wall seconds, peak RSS in MB of that process, its output)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        log.write(line)
        log.flush()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{shlex.join(cmd)} failed with exit code {proc.returncode}")
    return wall, usage.ru_maxrss / 1024, "".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=3000)
    ap.add_argument("--genes", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pbmc", action="store_true", help="pbmc68k_reduced with its workflow config instead")
    ap.add_argument("--work", default="/tmp/cape_scale")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="extra --set for cape run")
    ap.add_argument("--device", default=None, help="cape run --device (cpu, cuda, auto); default: cape's own")
    ap.add_argument("--step1-only", action="store_true",
                    help="ingest, preprocess and discover only; the record goes to step1.jsonl")
    ap.add_argument("--plan", action="store_true",
                    help="first run `cape run --dry-run` and keep its plan (the estimates) in the record")
    a = ap.parse_args()

    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    cape = str(Path(sys.executable).with_name("cape"))
    if a.pbmc:
        name, src = "pbmc68k_reduced", "pbmc68k_reduced"
        extra = ["--config", str(ROOT / "workflows" / "pbmc68k_reduced.yaml")]
    else:
        name = f"sim{a.cells}x{a.genes}s{a.seed}"
        src = str(work / f"{name}.h5ad")
        if not Path(src).is_file():
            from cape_pipeline.datasets import simulated_counts

            simulated_counts(a.cells, a.genes, seed=a.seed).write_h5ad(src)
        extra = ["--set", "ingest.label_columns=[cell_type]"]
    for s in a.sets:
        extra += ["--set", s]
    if a.device:
        extra += ["--device", a.device]
    wd, out = work / f"{name}.work", work / f"{name}.out"
    load0 = os.getloadavg()
    stages = {}
    todo = STAGES[: STAGES.index("discover") + 1] if a.step1_only else STAGES
    plan_text = None
    with open(work / f"{name}.log", "a") as log:
        if a.plan:
            wall, _, plan_text = run_stage([cape, "run", src, *extra, "--workdir", str(wd), "--dry-run"], log)
            print(f"dry run ({wall:.1f} s):\n{plan_text}", flush=True)
        for st in todo:
            cmd = [cape, "run", src, *extra, "--workdir", str(wd), "--until", st]
            if st == todo[-1]:
                cmd += ["--out", str(out)]
            wall, rss, text = run_stage(cmd, log)
            m = re.search(rf"✓ {st} done in ([0-9.]+) s", text)
            stages[st] = {"seconds": float(m.group(1)) if m else None, "process_seconds": round(wall, 1),
                          "peak_rss_mb": round(rss, 1)}
            print(st, stages[st], flush=True)
    if a.step1_only:
        from cape_pipeline.causal import CausalGraph

        g = CausalGraph.read_parquet(out / "dag.parquet")
        rec = {
            "data": name, "cells": a.cells if not a.pbmc else 700, "genes": a.genes if not a.pbmc else 765,
            "seed": a.seed, "stages": stages, "peak_rss_mb": max(v["peak_rss_mb"] for v in stages.values()),
            "commit": commit(),
            "dag": {k: g.params.get(k) for k in ("n_edges", "n_isolated", "isolated_share", "support",
                                                    "covariates_used", "edge_rule", "n_splits_used")},
            **provenance(load0, threads=False),
        }
        append(STEP1, rec)
        print(json.dumps({k: rec[k] for k in ("data", "dag", "peak_rss_mb", "load_before")}))
        return
    results = json.loads((out / "results.json").read_text()) if (out / "results.json").is_file() else {}
    report = (out / "report.json")
    rep = json.loads(report.read_text()) if report.is_file() else {}
    rec = {
        "data": name, "cells": a.cells if not a.pbmc else 700, "genes": a.genes if not a.pbmc else 765, "seed": a.seed,
        "stages": stages,
        "total_seconds": round(sum(v["seconds"] or 0 for v in stages.values()), 1),
        "peak_rss_mb": max(v["peak_rss_mb"] for v in stages.values()),
        "plan": rep.get("training", {}).get("plan") or results.get("plan"),
        "dag": {k: rep.get("dag", {}).get(k) for k in ("n_edges", "n_isolated", "isolated_share")},
        "comparison": {"verdict": rep.get("comparison", {}).get("verdict"),
                       "differences": [{k: d.get(k) for k in ("task", "metric", "mean", "ci_low", "ci_high")}
                                       for d in rep.get("comparison", {}).get("differences", [])]},
        "metrics": rep.get("metrics"),
        **({"dry_run": plan_text.strip().splitlines()} if plan_text else {}),
        **provenance(load0, threads=False),
    }
    append(OUT, rec)
    print(json.dumps({k: rec[k] for k in ("data", "total_seconds", "peak_rss_mb", "load_before")}))


if __name__ == "__main__":
    main()
