"""The simulated tasks with a known graph, every arm paired with ``none`` by seed.

``perturbation`` (the perturbation task at Norman et al.'s size). Data: ``sim_perturbation_norman`` (``benchmarks/tasks/_data.py``): a 200-gene scale-free
nonlinear SEM (397 edges), 1,000 control cells, 105 single and 131 double perturbations of 20
cells each, GEARS's unseen-gene split (``perturbation.split='gears'``; the seed draws the split,
the initialization and the batch order, so every arm is paired with ``none`` seed by seed).
Backbone: scGPT-style, D = 32, 4 heads, 2 layers, the task defaults (``benchmarks/tasks/run.py``).

Arms (``pe [graph]``):

* ``core``: ``none`` (Table 3's null; ``default`` in the rows written before it was renamed), ``cape [discover]`` (full CAPE on Step I's DAG),
  ``cape [correlation]`` (w/o-CSL), ``cape [discover-euclidean]`` (w/o-hyperbolic),
  ``cape-additive [discover]`` (w/o-rotary), ``cape [true]`` and ``ape-tree [true]`` (paper 002
  on the true DAG's spanning forest). The "no change" and linear-model references are computed
  inside every run, on its split.
* ``variants``: the angle variants on Step I's DAG: ``cape [discover-scale4]``,
  ``cape [discover-geometric]`` and ``cape-learned-scale [discover]``.

``age`` (a second data set for the angle variants). Data: ``sim_methylation_age``
(``simulate_methylation_age``: 400 samples, 60 CpG sites driven by a known DAG, missing values;
the MethylGPT-style task of ``run.py``, MedAE). ``core``: ``none``, ``cape [true]``,
``cape [discover]``; ``variants``: as for perturbation. The ElasticNet clock is the reference.

Each (arm, seed) is one ``run.py`` process with one torch thread; ``--workers`` run side by side
(the machine has 2 cores). A finished run leaves ``results_<task>/parts/<job>/raw.jsonl`` (and
its ``run.log``); at the end every part is gathered into ``results_<task>/raw.jsonl``, the one
tracked file of rows, which ``tasks_report.py <task>`` reads. The parts are scratch (ignored by
git, deletable once gathered): a job whose row is already in ``raw.jsonl`` or in a part is
skipped when the script runs again.

Usage (from the repository root)::

    python benchmarks/cape_value/tasks.py perturbation --seeds 0 1 2 3 4 --phase core --workers 2
    python benchmarks/cape_value/tasks.py age --seeds 0 1 2 3 4 5 6 7 8 9 --phase all --workers 2
    python benchmarks/cape_value/tasks.py perturbation --gather   # after a stopped run: gather what finished
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
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASKS = HERE.parent / "tasks"
CACHE = HERE / "_cache"
STEP_I = ("discover", "default", "hyperbolic,euclidean", "paper,scale4,geometric")
"""angles.py arguments after OUT D DATASET for Step I's graph: its Step I epochs, geometries, angle variants."""
VARIANTS = [("cape", "discover-scale4"), ("cape", "discover-geometric"), ("cape-learned-scale", "discover")]


@dataclass(frozen=True)
class Spec:
    run_task: str  # run.py's --tasks name
    dataset: str
    angles: tuple[tuple[str, ...], ...]  # angles.py arguments after OUT D DATASET, one tuple per call
    phases: dict[str, list[tuple[str, str]]]  # phase → (arm, graph) jobs


SPECS = {
    "perturbation": Spec("perturbation-norman", "sim_perturbation_norman",
                         (("true",), ("correlation",), STEP_I, ("interventional",)), {
        "core": [("none", "true"), ("cape", "true"), ("ape-tree", "true"), ("cape", "discover"),
                 ("cape-additive", "discover"), ("cape", "correlation"), ("cape", "discover-euclidean")],
        "variants": VARIANTS,
        "interventional": [("none", "true"), ("cape", "interventional")]}),
    "age": Spec("age", "sim_methylation_age", (("true",), STEP_I), {
        "core": [("none", "true"), ("cape", "true"), ("cape", "discover")], "variants": VARIANTS}),
}


def ensure_angles(spec: Spec, d_model: int, graphs: set[str] | None = None) -> None:
    """Run ``angles.py`` for every graph whose angle file is missing from :data:`CACHE` (with
    ``graphs``: only the calls that make those tags, ``true`` always: it scores the others)."""
    for args in spec.angles:
        if graphs is not None and args[0] != "true" and not any(g.startswith(args[0]) for g in graphs):
            continue
        if not (CACHE / f"angles_{spec.dataset}_{args[0]}_d{d_model // 2}.npz").exists():
            cmd = [sys.executable, "angles.py", str(CACHE), str(d_model), spec.dataset, *args]
            print("+", " ".join(cmd), flush=True)
            subprocess.run(cmd, cwd=TASKS, check=True)


def describe_graphs(spec: Spec, out: Path, d_model: int) -> list[dict]:
    """Every cached angle file of the task's data set against the true DAG: edges, directed and
    skeleton precision / recall, and the |φ| quantiles; written to ``out/graphs.json`` (merged
    with the rows already there for graphs not cached now)."""
    import numpy as np

    def load(tag: str):
        return np.load(CACHE / f"angles_{spec.dataset}_{tag}_d{d_model // 2}.npz", allow_pickle=False)

    true = load("true")
    t_dir = set(zip(true["edge_src"].tolist(), true["edge_dst"].tolist(), strict=True))
    t_skel = {frozenset(e) for e in t_dir}
    rows = []
    for f in sorted(CACHE.glob(f"angles_{spec.dataset}_*_d{d_model // 2}.npz")):
        tag = f.name.removeprefix(f"angles_{spec.dataset}_").removesuffix(f"_d{d_model // 2}.npz")
        z = load(tag)
        if not (z["var_names"] == true["var_names"]).all():
            raise SystemExit(f"{f}: features differ from the true graph's file")
        e_dir = set(zip(z["edge_src"].tolist(), z["edge_dst"].tolist(), strict=True))
        e_skel = {frozenset(e) for e in e_dir}
        a = np.abs(z["angles"])
        rows.append({"graph": tag, "edges": len(e_dir), "true_edges": len(t_dir),
                     "precision": len(e_dir & t_dir) / max(len(e_dir), 1), "recall": len(e_dir & t_dir) / len(t_dir),
                     "skeleton_precision": len(e_skel & t_skel) / max(len(e_skel), 1), "skeleton_recall": len(e_skel & t_skel) / len(t_skel),
                     "phi_median": float(np.median(a)), "phi_q90": float(np.quantile(a, 0.9)), "phi_max": float(a.max()),
                     "features_at_origin": int((a.sum(1) < 1e-9).sum()), "features": int(a.shape[0])})
    out.mkdir(parents=True, exist_ok=True)
    old = out / "graphs.json"
    if old.exists():  # graphs described before whose angle files are not cached now keep their rows
        cached = {r["graph"] for r in rows}
        rows = sorted(rows + [r for r in json.loads(old.read_text()) if r["graph"] not in cached], key=lambda r: r["graph"])
    old.write_text(json.dumps(rows, indent=1) + "\n")
    return rows


def job_of(row: dict) -> tuple[str, str, int]:
    """The (arm, graph, seed) job of a row; a row written as ``default`` (the earlier name of the
    ``none`` arm) is the ``none`` job's."""
    return ("none" if row["pe"] == "default" else row["pe"], row["graph"], row["seed"])


def gathered(out: Path) -> set[tuple[str, str, int]]:
    """The (arm, graph, seed) jobs whose rows are already in ``out/raw.jsonl``."""
    f = out / "raw.jsonl"
    rows = [json.loads(line) for line in f.read_text().splitlines() if line] if f.exists() else []
    return {job_of(r) for r in rows}


def run_job(spec: Spec, out: Path, arm: str, graph: str, seed: int, d_model: int, done: frozenset = frozenset()) -> str:
    """One ``run.py`` process for (arm, graph, seed), unless ``done`` (the rows of ``raw.jsonl``)
    or a part already holds it; its stdout goes to the part's ``run.log``."""
    part = out / "parts" / f"{arm}_{graph}_s{seed}"
    raw = part / "raw.jsonl"
    if (arm, graph, seed) in done or (raw.exists() and raw.stat().st_size):
        return f"{part.name}: done before"
    part.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "run.py", "--tasks", spec.run_task, "--seeds", str(seed), "--arms", arm,
           "--graph", graph, "--d-model", str(d_model), "--cache", str(CACHE), "--out", str(part)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    with (part / "run.log").open("w") as log:
        rc = subprocess.run(cmd, cwd=TASKS, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    return f"{part.name}: rc {rc}, {time.perf_counter() - t0:.0f} s"


def gather(out: Path) -> int:
    """Add every part's rows to those already in ``out/raw.jsonl`` (a part's row replaces the
    gathered row of its arm, graph and seed), sorted by arm, graph, seed; the row count."""
    old = out / "raw.jsonl"
    rows = [json.loads(line) for line in old.read_text().splitlines() if line] if old.exists() else []
    new = [json.loads(line) for f in sorted((out / "parts").glob("*/raw.jsonl")) for line in f.read_text().splitlines() if line]
    fresh = {job_of(r) for r in new}
    rows = [r for r in rows if job_of(r) not in fresh] + new
    rows.sort(key=lambda r: (r["pe"], r["graph"], r["seed"]))
    tmp = out / "raw.jsonl.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(out / "raw.jsonl")
    return len(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("task", choices=sorted(SPECS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--phase", choices=["core", "variants", "interventional", "all"], default="core")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--gather", action="store_true", help="run nothing: gather the finished parts and describe the graphs")
    a = ap.parse_args()
    spec, out = SPECS[a.task], HERE / f"results_{a.task}"
    print("command:", "python " + " ".join(sys.argv), flush=True)
    arms = spec.phases["core"] + spec.phases["variants"] if a.phase == "all" else spec.phases[a.phase]
    if a.gather:
        arms = []
    ensure_angles(spec, a.d_model, None if a.phase == "all" and not a.gather else {g for _, g in arms})
    for g in describe_graphs(spec, out, a.d_model):
        print(f"graph {g['graph']}: {g['edges']} edges, precision {g['precision']:.2f} recall {g['recall']:.2f} "
              f"(true DAG {g['true_edges']}); |phi| median {g['phi_median']:.3f} max {g['phi_max']:.3f}", flush=True)
    jobs = [(arm, graph, seed) for seed in a.seeds for arm, graph in arms]  # seed-major: whole seeds first
    done = frozenset(gathered(out))
    with ThreadPoolExecutor(a.workers) as pool:
        for msg in pool.map(lambda j: run_job(spec, out, *j, a.d_model, done), jobs):
            print(msg, time.strftime("%H:%M:%S"), "load", os.getloadavg()[0], flush=True)
    print(f"{gather(out)} rows in {out / 'raw.jsonl'}")


if __name__ == "__main__":
    main()
