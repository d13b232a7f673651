"""Issue 31 item 3: the perturbation task at Norman et al.'s size, every arm paired by seed.

Data: ``sim_perturbation_norman`` (``benchmarks/tasks/_data.py``): a 200-gene scale-free
nonlinear SEM (397 edges), 1,000 control cells, 105 single and 131 double perturbations of 20
cells each, GEARS's unseen-gene split (``perturbation.split='gears'``; the seed draws the split,
the initialization and the batch order, so every arm is paired with ``default`` seed by seed).
Backbone: scGPT-style, D = 32, 4 heads, 2 layers, the task defaults (``benchmarks/tasks/run.py``).

Arms (``pe [graph]``):

* ``core``: ``default`` (Table 3's null), ``cape [discover]`` (full CAPE on Step I's DAG),
  ``cape [correlation]`` (w/o-CSL), ``cape [discover-euclidean]`` (w/o-hyperbolic),
  ``cape-additive [discover]`` (w/o-rotary), ``cape [true]`` and ``ape-tree [true]`` (paper 002
  on the true DAG's spanning forest). The "no change" and linear-model references are computed
  inside every run, on its split.
* ``variants``: issue 31's angle variants on Step I's DAG: ``cape [discover-scale4]``,
  ``cape [discover-geometric]`` and ``cape-learned-scale [discover]``.

Each (arm, seed) is one ``run.py`` process with one torch thread; ``--workers`` run side by side
(the machine has 2 cores). A finished run leaves ``results_perturbation/parts/<job>/raw.jsonl``
and is skipped when the script runs again; at the end every part is gathered into
``results_perturbation/raw.jsonl``, which ``tasks_report.py perturbation`` reads.

Usage (from the repository root)::

    python benchmarks/cape_value/perturbation.py --seeds 0 1 2 3 4 --phase core --workers 2
    python benchmarks/cape_value/tasks_report.py perturbation --write
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASKS = HERE.parent / "tasks"
CACHE = HERE / "_cache"
OUT = HERE / "results_perturbation"
DATASET = "sim_perturbation_norman"
ANGLES = (  # angles.py arguments after OUT D DATASET: graph, Step I epochs, geometries, encodings
    ("true",),
    ("correlation",),
    ("discover", "default", "hyperbolic,euclidean", "paper,scale4,geometric"),
)
PHASES = {
    "core": [("default", "true"), ("cape", "true"), ("ape-tree", "true"), ("cape", "discover"),
             ("cape-additive", "discover"), ("cape", "correlation"), ("cape", "discover-euclidean")],
    "variants": [("cape", "discover-scale4"), ("cape", "discover-geometric"), ("cape-learned-scale", "discover")],
}


def ensure_angles(d_model: int) -> None:
    """Run ``angles.py`` for every graph whose angle file is missing from :data:`CACHE`."""
    for args in ANGLES:
        if not (CACHE / f"angles_{DATASET}_{args[0]}_d{d_model // 2}.npz").exists():
            cmd = [sys.executable, "angles.py", str(CACHE), str(d_model), DATASET, *args]
            print("+", " ".join(cmd), flush=True)
            subprocess.run(cmd, cwd=TASKS, check=True)


def run_job(arm: str, graph: str, seed: int, d_model: int) -> str:
    """One ``run.py`` process for (arm, graph, seed); its stdout goes to the part's ``run.log``."""
    part = OUT / "parts" / f"{arm}_{graph}_s{seed}"
    raw = part / "raw.jsonl"
    if raw.exists() and raw.stat().st_size:
        return f"{part.name}: done before"
    part.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "run.py", "--tasks", "perturbation-norman", "--seeds", str(seed), "--arms", arm,
           "--graph", graph, "--d-model", str(d_model), "--cache", str(CACHE), "--out", str(part)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    with (part / "run.log").open("w") as log:
        rc = subprocess.run(cmd, cwd=TASKS, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    return f"{part.name}: rc {rc}, {time.perf_counter() - t0:.0f} s"


def gather() -> int:
    """Concatenate every part's rows into ``OUT/raw.jsonl`` (sorted by arm, graph, seed); the row count."""
    rows = [json.loads(line) for f in sorted((OUT / "parts").glob("*/raw.jsonl")) for line in f.read_text().splitlines() if line]
    rows.sort(key=lambda r: (r["pe"], r["graph"], r["seed"]))
    tmp = OUT / "raw.jsonl.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(OUT / "raw.jsonl")
    return len(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--phase", choices=[*PHASES, "all"], default="core")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=32)
    a = ap.parse_args()
    print("command:", "python " + " ".join(sys.argv), flush=True)
    ensure_angles(a.d_model)
    arms = PHASES["core"] + PHASES["variants"] if a.phase == "all" else PHASES[a.phase]
    jobs = [(arm, graph, seed) for seed in a.seeds for arm, graph in arms]  # seed-major: whole seeds first
    with ThreadPoolExecutor(a.workers) as pool:
        for msg in pool.map(lambda j: run_job(*j, a.d_model), jobs):
            print(msg, time.strftime("%H:%M:%S"), "load", os.getloadavg()[0], flush=True)
    print(f"{gather()} rows in {OUT / 'raw.jsonl'}")


if __name__ == "__main__":
    main()
