"""Step I benchmark suite at M = 200–2000: CAPE low-rank vs CAPE screened vs DAGMA vs correlation.

Data: ``cape_pipeline.datasets.synthetic_sem`` (gcastle IIDSimulation): scale-free ("sf") and
Erdős–Rényi ("er") DAGs with 2M edges, MLP and linear-Gaussian SEMs, N = 2000, seeds 0–2; plus
gcastle's version of SDCD's setting ("sdcd": ER, 4·d edges, gcastle MLP-Gaussian, n = 10⁴) and
SDCD's own generator in our code ("sdcd-gen": ``cape_pipeline.datasets.sdcd_sem``, exactly 4·d
edges, n = 10⁴). Every feature is standardized (``prepare_matrix``), as for every method.

Methods (each through ``discover_scored`` at its defaults, one torch thread unless
``CAPE_BENCH_THREADS`` says otherwise): ``cape`` (the paper's low-rank A, rank 40,
``algorithm="low-rank"``), ``cape-screened`` (``algorithm="screened"``), ``cape-learned``
(``algorithm="learned"``, the default above 20 features),
``dagma`` (package defaults; stopped at ``--dagma-limit``), ``correlation`` (|r| > τ = 0.2,
undirected); every ``correlation`` row also records the F1 of the correlation graph at its
*best* threshold on a grid (an oracle: the threshold is chosen on the truth).

Each case runs in its own subprocess under a wall-clock limit; a finished case appends one JSON
line to ``suite.jsonl`` (command, seed, machine, load average before/after, seconds, peak RSS);
a stopped one is recorded as ``not run (time)``. ``--report`` writes ``RESULTS.md``.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/discover/suite/suite.py --sizes 200,1000 --seeds 0,1,2 [--shard 0/2]
    python benchmarks/discover/suite/suite.py --report
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

OUT = HERE / "suite.jsonl"
REPORT = HERE / "RESULTS.md"
METHODS = ("cape", "cape-screened", "cape-learned", "dagma", "correlation")
SETTINGS = ("sf-mlp", "sf-linear", "er-mlp", "er-linear")
GRID = [round(0.05 * i, 2) for i in range(1, 19)]


def dataset(setting: str, m: int, seed: int):
    """``(x (N, M) float64, true (M, M) int, description)`` of one suite dataset."""
    import numpy as np

    from cape_pipeline.datasets import synthetic_sem

    if setting == "sdcd":
        ad = synthetic_sem(m, 4 * m, 10_000, seed, graph="er", sem="mlp")
        desc = f"gcastle ER, {4 * m} edges, MLP-Gaussian, N=10000, seed {seed}"
    elif setting == "sdcd-gen":
        from cape_pipeline.datasets import sdcd_sem

        ad = sdcd_sem(m, 10_000, seed)
        desc = f"SDCD's generator (our code): ER, exactly {4 * m} edges, MLP(100 sigmoid) of standardized parents + N(0, 0.5²), standardized, N=10000, seed {seed}"
    else:
        graph, sem = setting.split("-")
        ad = synthetic_sem(m, 2 * m, 2000, seed, graph="scale-free" if graph == "sf" else "er", sem=sem)
        desc = f"{'scale-free' if graph == 'sf' else 'ER'}, {2 * m} edges, {sem}, N=2000, seed {seed}"
    return np.asarray(ad.X, dtype=np.float64), (ad.varp["true_dag"].toarray() != 0).astype(int), desc


def run_one(setting: str, m: int, seed: int, method: str) -> dict:
    """Fit one case in this process and return its record."""
    import numpy as np
    import torch

    torch.set_num_threads(int(os.environ.get("CAPE_BENCH_THREADS", "1")))
    from cape_pipeline.causal.api import discover_scored
    from cape_pipeline.causal.metrics import dag_metrics

    x, true, desc = dataset(setting, m, seed)
    kwargs: dict = {"device": "cpu", "seed": seed}
    name = method
    if method == "cape":  # the paper's low rank (the default before algorithm="auto")
        kwargs["algorithm"] = "low-rank"
    if method in ("cape-screened", "cape-learned"):
        kwargs["algorithm"] = method.removeprefix("cape-")
        name = "cape"
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    g, scores = discover_scored(x, method=name, **kwargs)
    sec = time.perf_counter() - t0
    rec = {
        "setting": setting, "m": m, "seed": seed, "method": method, "status": "ok", "data": desc,
        "seconds": sec, "load_average": [load0, os.getloadavg()[0]],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "metrics": dag_metrics(g, true, scores=scores),
        "params": {k: v for k, v in g.params.items() if k in ("support", "effective_epochs", "threshold", "n_candidates", "screen_seconds",
                                                            "n_candidate_pairs", "n_screened_pairs", "epochs_stage1", "epochs_stage2")},
        "machine": common.machine(), "command": common.command(),
    }
    if method == "correlation" and scores is not None:
        best = max(
            (dag_metrics(np.where(np.abs(scores) > t, scores, 0.0), true)["f1"], t) for t in GRID
        )
        rec["best_threshold"] = {"f1": best[0], "threshold": best[1]}
    return rec


def done() -> set[tuple]:
    if not OUT.is_file():
        return set()
    return {(r["setting"], r["m"], r["seed"], r["method"]) for r in map(json.loads, OUT.read_text().splitlines())}


def append(rec: dict) -> None:
    with open(OUT, "a") as fh:
        fh.write(json.dumps(rec, default=float) + "\n")


def cases(sizes: list[int], seeds: list[int], settings: list[str], methods: list[str]) -> list[tuple]:
    out = []
    for m in sizes:
        for seed in seeds:
            for st in settings:
                for me in methods:
                    out.append((st, m, seed, me))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="200,1000")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--limit", type=float, default=1800.0, help="wall-clock limit per case (s)")
    ap.add_argument("--dagma-limit", type=float, default=900.0)
    ap.add_argument("--shard", default="0/1", help="i/n: run every n-th case starting at i")
    ap.add_argument("--one", nargs=4, metavar=("SETTING", "M", "SEED", "METHOD"))
    ap.add_argument("--report", action="store_true")
    a = ap.parse_args()
    if a.report:
        report()
        return
    if a.one:
        st, m, seed, me = a.one
        append(run_one(st, int(m), int(seed), me))
        return
    i, n = map(int, a.shard.split("/"))
    todo = cases(
        [int(s) for s in a.sizes.split(",")], [int(s) for s in a.seeds.split(",")],
        a.settings.split(","), a.methods.split(","),
    )[i::n]
    for st, m, seed, me in todo:
        if (st, m, seed, me) in done():
            continue
        limit = a.dagma_limit if me == "dagma" else a.limit
        load0 = os.getloadavg()[0]
        t0 = time.time()
        try:
            subprocess.run([sys.executable, __file__, "--one", st, str(m), str(seed), me], timeout=limit, check=True)
        except subprocess.TimeoutExpired:
            append({"setting": st, "m": m, "seed": seed, "method": me, "status": "not run (time)",
                    "limit_seconds": limit, "load_average": [load0, os.getloadavg()[0]],
                    "machine": common.machine(), "command": common.command()})
        except subprocess.CalledProcessError as exc:
            append({"setting": st, "m": m, "seed": seed, "method": me, "status": f"failed ({exc.returncode})",
                    "machine": common.machine(), "command": common.command()})
        print(f"{st} M={m} seed={seed} {me}: {time.time() - t0:.0f} s", flush=True)


def _fmt(v, nd=3):
    return "" if v is None else f"{v:.{nd}f}"


def report() -> None:
    import numpy as np

    recs = [json.loads(line) for line in OUT.read_text().splitlines()]
    lines = [
        "# Step I suite: CAPE low-rank vs screened vs learned vs DAGMA vs correlation (M = 200–5000)",
        "",
        "Made by `benchmarks/discover/suite/suite.py` (see its docstring); every row is one subprocess (one",
        "torch thread unless the row's machine says otherwise) on the shared 2-core CPU, with its own command, seed, load average and machine in",
        "`suite.jsonl`. F1 counts directed entries (gcastle's definition; the undirected correlation",
        "graph has both directions, so its F1 is at most 2/3); skeleton F1 ignores direction; AUPRC is",
        "over |score| before thresholding; *corr-best* is the correlation graph at the threshold that",
        "maximizes F1 on the truth (an oracle, grid 0.05–0.90).",
        "",
        f"Machine: {recs[0]['machine'] if recs else ''}",
        "",
        "## Mean over seeds",
        "",
        "| setting | M | method | seeds | F1 | skeleton F1 | AUPRC | SHD | seconds | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(r["setting"], r["m"]) for r in recs}, key=lambda k: (k[1], k[0]))
    for st, m in keys:
        for me in (*METHODS, "corr-best"):
            src = "correlation" if me == "corr-best" else me
            rs = [r for r in recs if r["setting"] == st and r["m"] == m and r["method"] == src]
            ok = [r for r in rs if r["status"] == "ok"]
            if not rs:
                continue
            if not ok:
                lim = max(r.get("limit_seconds", 0) for r in rs)
                lines.append(f"| {st} | {m} | {me} | {len(rs)} | {rs[0]['status']} (limit {lim:.0f} s) | | | | > {lim:.0f} | |")
                continue
            if me == "corr-best":
                f1 = np.mean([r["best_threshold"]["f1"] for r in ok])
                th = ", ".join(f"{r['best_threshold']['threshold']:.2f}" for r in ok)
                lines.append(f"| {st} | {m} | corr-best (τ = {th}) | {len(ok)} | {f1:.3f} | | | | | |")
                continue
            mt = {k: np.mean([r["metrics"][k] for r in ok]) for k in ("f1", "skeleton_f1", "auprc", "shd")}
            sec = np.mean([r["seconds"] for r in ok])
            rss = max(r["peak_rss_mib"] for r in ok)
            extra = f" ({len(rs) - len(ok)} stopped)" if len(ok) < len(rs) else ""
            lines.append(
                f"| {st} | {m} | {me} | {len(ok)}{extra} | {mt['f1']:.3f} | {mt['skeleton_f1']:.3f} | "
                f"{mt['auprc']:.3f} | {mt['shd']:.0f} | {sec:.0f} | {rss:.0f} |"
            )
    lines += ["", "## Every case", "", "| setting | M | seed | method | F1 | skeleton F1 | AUPRC | SHD | edges | seconds | load avg (before, after) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(recs, key=lambda r: (r["m"], r["setting"], r["seed"], r["method"])):
        la = ", ".join(f"{v:.1f}" for v in r.get("load_average", []))
        if r["status"] != "ok":
            lines.append(f"| {r['setting']} | {r['m']} | {r['seed']} | {r['method']} | {r['status']} | | | | | > {r.get('limit_seconds', 0):.0f} | {la} |")
            continue
        mt = r["metrics"]
        lines.append(
            f"| {r['setting']} | {r['m']} | {r['seed']} | {r['method']} | {mt['f1']:.3f} | {mt['skeleton_f1']:.3f} | "
            f"{_fmt(mt['auprc'])} | {mt['shd']} | {mt['nnz']} | {r['seconds']:.0f} | {la} |"
        )
    REPORT.write_text("\n".join(lines) + "\n")
    print(REPORT.read_text())


if __name__ == "__main__":
    main()
