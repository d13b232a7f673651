"""Score SDCD predictions with cape_pipeline's metrics; append one JSON line per case to
results.jsonl. Run with the MAIN env:

    /work/main/.venv/bin/python benchmarks/discover/sdcd/score.py --d 100 --seed 0
    # a fit killed at the hard stop:
    /work/main/.venv/bin/python benchmarks/discover/sdcd/score.py --d 200 --seed 0 \
        --not-finished-seconds 3000
"""
from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

import numpy as np

from cape_pipeline.causal.metrics import dag_metrics

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def sdcd_versions() -> dict:
    out = {}
    freeze = HERE / ".venv" / "freeze.txt"
    if freeze.exists():
        for line in freeze.read_text().splitlines():
            name = line.split("==")[0].lower()
            if name in {"sdcd", "torch", "numpy", "pandas", "numba", "wandb", "setuptools"}:
                out[name] = line.split("==", 1)[1]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--not-finished-seconds", type=float, default=None,
                    help="record the fit as killed at the hard stop after this many seconds")
    ap.add_argument("--note", default=None, help="free-text note stored with the record")
    a = ap.parse_args()
    true = np.load(DATA / f"sdcd_gen_d{a.d}_s{a.seed}.npz")["true"].astype(np.int8)
    rec = {
        "method": "SDCD (PyPI sdcd 0.1.4, published defaults)",
        "d": a.d,
        "seed": a.seed,
        "n": 10_000,
        "n_true_edges": int(true.sum()),
        "machine": {"cpu": cpu_model(), "n_cpu_visible": os.cpu_count(), "torch_threads": 1,
                    "nice": 5, "note": "2 cores shared with another running benchmark"},
        "versions": sdcd_versions(),
        "commands": {
            "install": "bash benchmarks/discover/sdcd/install.sh",
            "data": f"/work/main/.venv/bin/python benchmarks/discover/sdcd/make_data.py --d {a.d} --seed {a.seed}",
            "fit": ("OMP_NUM_THREADS=1 nice -n 5 benchmarks/discover/sdcd/.venv/bin/python "
                    f"benchmarks/discover/sdcd/run_sdcd.py --d {a.d} --seed {a.seed}"),
            "score": f"/work/main/.venv/bin/python benchmarks/discover/sdcd/score.py --d {a.d} --seed {a.seed}",
        },
    }
    if a.not_finished_seconds is not None:
        rec.update(status="not finished", limit_seconds=a.not_finished_seconds)
        if a.note:
            rec["note"] = a.note
    else:
        p = np.load(DATA / f"pred_d{a.d}_s{a.seed}.npz")
        meta = json.loads((DATA / f"pred_d{a.d}_s{a.seed}.json").read_text())
        pred = (p["pred"] != 0).astype(np.int8)
        cont = p["cont"] if "cont" in p.files else None
        m = dag_metrics(pred, true, scores=cont)
        rec.update(
            status="finished",
            seconds=meta["seconds"],
            sdcd_internal_train_seconds=meta.get("sdcd_internal_train_seconds"),
            metrics=m,
            auprc_scores="unthresholded SDCD adjacency (get_adjacency_matrix(threshold=False))"
            if cont is not None else "binary prediction",
            load_before=meta["load_before"],
            load_after=meta["load_after"],
            call=meta["call"],
        )
        rec["versions"].update(sdcd_runtime=meta["sdcd"], torch_runtime=meta["torch"])
        rec["machine"]["torch_threads"] = meta.get("torch_threads", 1)
    with open(HERE / "results.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec, indent=1))


if __name__ == "__main__":
    main()
