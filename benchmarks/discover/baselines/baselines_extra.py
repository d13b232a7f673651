"""CAPE (default) vs DAGMA (linear, MLP), correlation and partial-correlation on synth20/synth50.

Each (dataset, method) case runs in a subprocess at one torch thread with a wall-clock limit
(``--limit``; ``--mlp-limit`` for dagma-mlp) and is recorded in ``../cases.jsonl`` (``common.CASES``) as
case ``{dataset}__x-{method}``; a case over its limit is recorded as ``"not run (time)"``.
The table goes to ``RESULTS.md``.

Usage: OMP_NUM_THREADS=1 python benchmarks/discover/baselines/baselines_extra.py \
          --datasets synth20,synth50 --limit 900 --mlp-limit 180
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

METHODS = ("cape", "dagma", "dagma-mlp", "correlation", "partial-correlation")
OUT = HERE / "RESULTS.md"
NOTES = "<!-- notes (kept on rerun) -->"


def key(method: str) -> str:
    return f"x-{method}"


def one(dataset: str, method: str) -> None:
    rec, _ = common.measure(dataset, method=method)
    rec["method"] = method
    common.write_cache(dataset, key(method), rec)
    print(json.dumps({k: rec[k] for k in ("dataset", "method", "seconds", "metrics")}, default=float))


def table(datasets: list[str]) -> str:
    rows = [
        "| data | method | F1 | skeleton F1 | SHD | AUPRC | entries kept | seconds | load avg (before, after) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for ds in datasets:
        for me in METHODS:
            r = common.read_cache(ds, key(me))
            if r is None:
                rows.append(f"| {ds} | {me} | not run | | | | | | |")
            elif r.get("status") != "ok":
                la = ", ".join(f"{v:.2f}" for v in r.get("load_average", []))
                rows.append(
                    f"| {ds} | {me} | {r['status']}: stopped at its {r['limit_seconds']:.0f} s limit | "
                    f"| | | | > {r['limit_seconds']:.0f} | {la} |"
                )
            else:
                mt = r["metrics"]
                la = ", ".join(f"{v:.2f}" for v in r["load_average"])
                rows.append(
                    f"| {ds} | {me} | {mt['f1']:.3f} | {mt['skeleton_f1']:.3f} | {mt['shd']} | "
                    f"{mt['auprc']:.3f} | {mt['nnz']} | {r['seconds']:.1f} | {la} |"
                )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="synth20,synth50")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--limit", type=float, default=900.0)
    ap.add_argument("--mlp-limit", type=float, default=180.0)
    ap.add_argument("--one", nargs=2, metavar=("DATASET", "METHOD"))
    a = ap.parse_args()
    if a.one:
        one(*a.one)
        return
    datasets = a.datasets.split(",")
    for ds in datasets:
        for me in a.methods.split(","):
            if common.read_cache(ds, key(me)) is not None:
                print(f"cached: {ds} {me}")
                continue
            limit = a.mlp_limit if me == "dagma-mlp" else a.limit
            seconds = common.run_case(__file__, ds, me, limit=limit, cache_key=key(me))
            print(f"{ds} {me}: {seconds:.1f} s")
    # hand-written notes below the marker survive a rerun
    notes = OUT.read_text().split(NOTES, 1)[1] if OUT.is_file() and NOTES in OUT.read_text() else "\n"
    recs = [common.read_cache(ds, key(me)) for ds in datasets for me in METHODS]
    recs = [r for r in recs if r is not None]
    machine = recs[0]["machine"] if recs else common.machine()
    OUT.write_text(
        "# Step I baselines beside CAPE: DAGMA, correlation, partial correlation\n\n"
        "Data: `cape_pipeline.datasets.synthetic_mlp(n_nodes=M, n_edges=2M, n_obs=2000, seed=0)`\n"
        "(scale-free MLP SEM, gcastle IIDSimulation), M = 20 (`synth20`) and 50 (`synth50`).\n"
        "Every method at its defaults through `discover_scored(x, method=..., seed=0)`: CAPE\n"
        "(`method=\"cape\"`, τ = 0.2), DAGMA linear and MLP (package `dagma` 1.1.1, its own defaults\n"
        "and `w_threshold` 0.3; MLP `dims=[M, 10, 1]`), correlation and partial correlation\n"
        "(|r| or |ρ| > 0.2, undirected: both directions present, so directed F1 counts each\n"
        "true edge once and its reverse as an extra entry; `GraphicalLassoCV` at these M).\n"
        "One subprocess per case, one torch thread; dagma-mlp limited to "
        f"{a.mlp_limit:.0f} s per run, others to {a.limit:.0f} s (this invocation; a row's own "
        "limit is in its seconds column when it was stopped).\n\n"
        f"Command: `OMP_NUM_THREADS=1 {common.command()}`  \nSeed: 0  \nMachine: {machine}\n\n"
        + table(datasets)
        + "\n\nF1 and precision/recall count directed entries (gcastle definitions); skeleton F1 "
        "ignores direction; AUPRC is over |continuous score| before thresholding. Numbers as "
        "measured on the shared 2-core machine (load average in the last column).\n\n"
        + NOTES + notes
    )
    print(OUT.read_text())


if __name__ == "__main__":
    main()
