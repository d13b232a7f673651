"""Several ``cape`` processes at once on one machine: wall time of N concurrent runs.

Batch users run several jobs per node (a SLURM array, Snakemake ``--cores``, a shell loop with
``&``). This starts N copies of one job at the same moment, each in its own workdir (nothing
cached), and records every copy's wall time; N = 1 gives the single run's time. ``--shared``
puts all N in one workdir instead: runs that want the same stage key then compute it once
(the others wait for it and reuse it).

Jobs:

* ``discover``: ``cape discover krumsiek11``;
* ``encode``: the demo up to Step III, ``cape run pbmc68k_reduced --until encode
  --config workflows/pbmc68k_reduced.yaml``.

Variants (what is set besides the job's command):

* ``default``: nothing: the ``cape`` command's own defaults at this commit;
* ``threads1``: ``--threads 1``;
* ``active``: ``OMP_WAIT_POLICY=ACTIVE`` (OpenMP threads spin while they wait);
* ``passive``: ``OMP_WAIT_POLICY=PASSIVE`` (they sleep);
* ``spin-10k``: ``GOMP_SPINCOUNT=10000`` (GNU OpenMP's threads spin 10,000 rounds, then sleep);
* ``spin-1k``: ``GOMP_SPINCOUNT=1000``;
* ``all-cores``: ``--threads`` = every core of the machine (torch's own default).

One JSON line per (job, variant, N) goes to ``concurrent_runs.jsonl``; ``--report`` prints the table
that ``RESULTS.md`` quotes, with the bound ``1.5 × ⌈N·threads/cores⌉ × single``.

Usage::

    python benchmarks/scale/concurrent_runs.py --job discover --n 1 2 4 8 --variants default threads1
    python benchmarks/scale/concurrent_runs.py --job encode --n 8 --shared
    python benchmarks/scale/concurrent_runs.py --report
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _record import append, commit, provenance  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = HERE / "concurrent_runs.jsonl"
CAPE = str(Path(sys.executable).with_name("cape"))

JOBS = {
    "discover": ["discover", "krumsiek11"],
    "encode": ["run", "pbmc68k_reduced", "--until", "encode", "--config", str(ROOT / "workflows" / "pbmc68k_reduced.yaml")],
}


def _variant(name: str) -> tuple[dict[str, str], list[str]]:
    cores = os.cpu_count() or 1
    return {
        "default": ({}, []),
        "threads1": ({}, ["--threads", "1"]),
        "active": ({"OMP_WAIT_POLICY": "ACTIVE"}, []),
        "passive": ({"OMP_WAIT_POLICY": "PASSIVE"}, []),
        "spin-10k": ({"GOMP_SPINCOUNT": "10000"}, []),
        "spin-1k": ({"GOMP_SPINCOUNT": "1000"}, []),
        "all-cores": ({}, ["--threads", str(cores)]),
    }[name]


def run_batch(job: str, variant: str, n: int, shared: bool, timeout: float) -> dict:
    """Start ``n`` copies at once; wait for all (or ``timeout`` seconds); their wall times."""
    env_extra, args = _variant(variant)
    base = Path(tempfile.mkdtemp(prefix="cape_concurrent_"))
    procs = []
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    for i in range(n):
        wd = base / ("shared" if shared else f"w{i}")
        log = open(base / f"log{i}.txt", "w")  # noqa: SIM115 - closed below
        env = {**os.environ, **env_extra}
        cmd = [CAPE, *JOBS[job], "--workdir", str(wd), "-v", *args]
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=base), log, time.perf_counter()))
    walls: list[float | None] = []
    codes: list[int | None] = []
    for p, log, start in procs:
        left = max(0.0, timeout - (time.perf_counter() - t0))
        try:
            p.wait(timeout=left)
            walls.append(round(time.perf_counter() - start, 1))
            codes.append(p.returncode)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            walls.append(None)
            codes.append(None)
        log.close()
    logs = [(base / f"log{i}.txt").read_text(errors="replace") for i in range(n)]
    threads = [int(m.group(1)) for t in logs for m in [re.search(r"torch threads (\d+)", t)] if m]
    waited = sum("waiting for another run computing" in t for t in logs)
    computed = sum(bool(re.search(r"✓ discover done", t)) for t in logs)
    shutil.rmtree(base, ignore_errors=True)
    rec = {
        "job": job, "variant": variant, "n": n, "shared_workdir": shared,
        "walls_s": walls, "exit_codes": codes, "timeout_s": timeout,
        "max_wall_s": None if None in walls else max(walls),
        "threads_logged": sorted(set(threads)), "discover_computed": computed, "waited": waited,
        "commit": commit(), **provenance(load0, threads=False),
    }
    return rec


def report() -> None:
    rows = [json.loads(line) for line in OUT.read_text().splitlines() if line.strip()]
    cores = os.cpu_count() or 1
    print("| job | variant | commit | N | workdirs | wall of the slowest (s) | bound 1.5·⌈N·t/cores⌉·single (s) | within | load before |")
    print("|---|---|---|---|---|---|---|---|---|")
    single = {(r["job"], r["variant"], r["commit"]): r["max_wall_s"] for r in rows if r["n"] == 1 and not r["shared_workdir"]}
    for r in rows:
        s = single.get((r["job"], r["variant"], r["commit"]))
        t = (r["threads_logged"] or [cores])[0]
        bound = None if s is None else 1.5 * math.ceil(r["n"] * t / cores) * s
        wall = r["max_wall_s"]
        within = "" if bound is None or r["shared_workdir"] else ("yes" if wall is not None and wall <= bound else "**no**")
        wall_txt = f"{wall:.0f}" if wall is not None else f"not finished in {r['timeout_s']:.0f}"
        wd = "one shared" if r["shared_workdir"] else "own"
        extra = f" (Step I computed {r['discover_computed']}×, {r['waited']} waited)" if r["shared_workdir"] else ""
        print(f"| {r['job']} | {r['variant']} | {r['commit']} | {r['n']} | {wd}{extra} | {wall_txt} | "
              f"{'' if bound is None else f'{bound:.0f}'} | {within} | {r['load_before'][0]} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--job", choices=sorted(JOBS), default="discover")
    ap.add_argument("--n", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--variants", nargs="+", default=["default"])
    ap.add_argument("--shared", action="store_true", help="all N runs in one workdir")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--report", action="store_true")
    a = ap.parse_args()
    if a.report:
        report()
        return
    for v in a.variants:
        for n in a.n:
            rec = run_batch(a.job, v, n, a.shared, a.timeout)
            append(OUT, rec)
            print(json.dumps({k: rec[k] for k in ("job", "variant", "n", "walls_s", "threads_logged", "load_before")}), flush=True)


if __name__ == "__main__":
    main()
