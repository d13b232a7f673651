"""Shared helpers for the Step I benchmarks: datasets, machine description, caching."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases.jsonl"
"""Every measured case of ``lowrank/accuracy.py``, ``lowrank/run_baselines.py``,
``baselines/baselines_extra.py`` and ``lowrank/seeds.py`` (read by ``lowrank/speed.py`` and
``learned/learned_report.py``): one JSON line per case, ``{"case": "DATASET__METHOD", **record}``,
appended as cases finish (the last line of a case wins). Shared by several question folders, so it
stays here beside this module. Until commit fef7ab6 (2026-11-26) these were one file per case in ``cache/``; the
records are the same."""
SYNTH_SIZES = (10, 20, 50)
SEED = 0


def load(name: str):
    """Return (X (N, M) float64, feature_names, true_dag (M, M) int) for a benchmark dataset.

    ``synth{M}``: cape_pipeline.datasets.synthetic_mlp(n_nodes=M, n_edges=2M, n_obs=2000, seed=0).
    ``sachs``: cape_pipeline.datasets.sachs() with log1p applied (SPEC Step I).
    """
    from cape_pipeline import datasets

    if name == "sachs":
        ad = datasets.sachs()
        x = np.log1p(np.asarray(ad.X, dtype=np.float64))
    else:
        m = int(name.removeprefix("synth"))
        ad = datasets.synthetic_mlp(n_nodes=m, n_edges=2 * m, n_obs=2000, seed=SEED)
        x = np.asarray(ad.X, dtype=np.float64)
    true = (ad.varp["true_dag"].toarray() != 0).astype(int)
    return x, np.asarray(ad.var_names), true


def machine() -> str:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = f"GPU {torch.cuda.get_device_name()}; " if torch.cuda.is_available() else ""
    return (
        f"{gpu}CPU {cpu}; {os.cpu_count()} cores; torch {torch.__version__} "
        f"(threads {torch.get_num_threads()}); python {platform.python_version()}; "
        f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )


def linear_sem(m: int, n: int, seed: int = 0, *, return_edges: bool = False):
    """``(n, m)`` float32 draws of a random sparse linear SEM: node j has min(2, j) parents
    among 0..j−1, weights U(0.5, 1), unit Gaussian noise (the scaling benchmark's data).
    With ``return_edges``, also the true edges as an ``(E, 2)`` int array of (parent, child)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, m)).astype(np.float32)
    edges = []
    for j in range(1, m):
        par = rng.choice(j, size=min(2, j), replace=False)
        x[:, j] += (x[:, par] * rng.uniform(0.5, 1.0, size=par.size)).sum(1)
        edges.extend((int(p), j) for p in par)
    return (x, np.array(edges, dtype=int).reshape(-1, 2)) if return_edges else x


def command() -> str:
    return "python " + " ".join(shlex.quote(a) for a in sys.argv)


def read_rows(path: Path) -> list[dict]:
    """The rows of a ``.jsonl`` results file (none where it does not exist)."""
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []


def replace_rows(path: Path, drop, new: list[dict]) -> None:
    """Rewrite ``path`` without the rows for which ``drop(row)`` is true, ``new`` appended;
    atomically (a temporary file, then a rename)."""
    rows = [r for r in read_rows(path) if not drop(r)] + new
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(path)


def row_provenance(cwd: Path):
    """A function giving each new row's provenance: the checkout's short commit (read once), the
    date, the machine, the load average before the row and the command."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=cwd).stdout.strip()

    def base() -> dict:
        return {"commit": commit, "date": time.strftime("%Y-%m-%d"), "machine": machine(),
                "load_before": round(os.getloadavg()[0], 2), "command": command()}
    return base


def measure(dataset: str, *, seed: int = SEED, **discover_kwargs):
    """Run ``discover_scored`` once on a benchmark dataset at one torch thread and score it.

    Returns ``(record, graph)``: the record holds ``status``, ``dataset``, ``seed``,
    ``seconds`` (wall time of the call), ``load_average`` (before, after), ``metrics``
    (``dag_metrics`` against the true graph, AUPRC over the continuous scores),
    ``n_cycle_edges_dropped``, ``params`` (the graph's, less its own timing), ``machine`` and
    ``command``. Callers add their own keys and cache it.
    """
    import time

    import torch

    torch.set_num_threads(1)
    from cape_pipeline.causal.api import discover_scored
    from cape_pipeline.causal.metrics import dag_metrics

    x, names, true = load(dataset)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    g, scores = discover_scored(x, feature_names=names, seed=seed, **discover_kwargs)
    sec = time.perf_counter() - t0
    rec = {
        "status": "ok", "dataset": dataset, "seed": seed, "seconds": sec,
        "load_average": [load0, os.getloadavg()[0]],
        "metrics": dag_metrics(g, true, scores=scores),
        "n_cycle_edges_dropped": g.n_cycle_edges_dropped,
        "params": {k: v for k, v in g.params.items() if k != "seconds"},
        "machine": machine(), "command": command(),
    }
    return rec, g


def read_cache(dataset: str, method: str) -> dict | None:
    """The last record of case ``dataset__method`` in :data:`CASES`, or None."""
    key, rec = f"{dataset}__{method}", None
    if CASES.is_file():
        for line in CASES.read_text().splitlines():
            if line.strip() and (r := json.loads(line))["case"] == key:
                rec = r
    return None if rec is None else {k: v for k, v in rec.items() if k != "case"}


def write_cache(dataset: str, method: str, rec: dict) -> None:
    """Append ``rec`` as case ``dataset__method`` to :data:`CASES` (one write of one line, so
    scripts running side by side do not mix their records)."""
    line = json.dumps({"case": f"{dataset}__{method}", **rec}, default=float) + "\n"
    with CASES.open("a") as f:
        f.write(line)


def save_record(path: Path, run: str, rec: dict) -> None:
    """Put ``rec`` as the line ``{"run": run, **rec}`` of the JSON-lines file ``path``, in place of
    an earlier line of that run (written atomically: a temporary file, then a rename)."""
    lines = [ln for ln in (path.read_text().splitlines() if path.is_file() else [])
             if ln.strip() and json.loads(ln)["run"] != run]
    lines.append(json.dumps({"run": run, **rec}, default=float))
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def load_record(path: Path, run: str) -> dict:
    """The record of ``run`` in the JSON-lines file ``path`` (without its ``run`` key)."""
    for ln in path.read_text().splitlines():
        if ln.strip() and (r := json.loads(ln))["run"] == run:
            return {k: v for k, v in r.items() if k != "run"}
    raise KeyError(f"{path}: no run {run!r}")


def run_case(script: str, dataset: str, method: str, *, limit: float, cache_key: str | None = None) -> float:
    """Run ``script --one DATASET METHOD`` in a subprocess under a wall-clock ``limit`` (s).

    The subprocess caches its own result; a case over the limit is cached here as
    ``{"status": "not run (time)"}`` (with the limit, machine, command and load average before
    and after), a case that exits non-zero as ``{"status": "failed (CODE)"}``. ``cache_key``
    defaults to ``method``. Returns the elapsed seconds.
    """
    key = cache_key or method
    load0 = os.getloadavg()[0]
    t0 = time.time()
    try:
        subprocess.run([sys.executable, script, "--one", dataset, method], timeout=limit, check=True)
    except subprocess.TimeoutExpired:
        write_cache(dataset, key, {
            "status": "not run (time)", "limit_seconds": limit, "dataset": dataset, "method": method,
            "load_average": [load0, os.getloadavg()[0]], "machine": machine(), "command": command(),
        })
    except subprocess.CalledProcessError as exc:
        write_cache(dataset, key, {"status": f"failed ({exc.returncode})", "dataset": dataset, "method": method})
    return time.time() - t0
