"""The regression algorithm's edge test and pruning with their moments read from one Gram matrix per
half, against the same regressions on gathered columns, side by side on the same data.

Step I's default for single-cell data (``cape_pipeline.causal.discover``: the regression algorithm,
library size as covariate, the counting-noise correction from 3,000 cells) on
``simulated_grn_counts(N, 2000, seed)`` after ``pp.preprocess`` (every gene kept), run twice in
one process: ``gram`` (the default: ``GRAM_MAX_FEATURES`` = 5,000) and ``gathered``
(``GRAM_MAX_FEATURES`` = 0, so every regression gathers its ``(N, K)`` candidate columns). Each
row records the seconds of every stage (summed over the splits), the edges, whether the two DAGs
are equal, the load and the commit.

Usage (from the repository root)::

    python benchmarks/scale/gram_regressions.py --cells 30000 --n-splits 2
    python benchmarks/scale/gram_regressions.py --report     # the table in RESULTS.md

Rows go to ``gram_regressions.jsonl`` beside this file.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _record import append, commit, provenance  # noqa: E402


def report() -> str:
    """RESULTS.md's table (between ``<!-- gram: begin -->`` and ``<!-- gram: end -->``) from the
    rows of ``gram_regressions.jsonl``, replaced in place."""
    import json

    rows = [json.loads(ln) for ln in (HERE / "gram_regressions.jsonl").read_text().splitlines() if ln.strip()]
    lines = ["| cells | splits | mode | Step I | screen | edge test | orientation | pruning | edges | same DAG | "
             "commit, date | load before |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        st = r["stage_seconds"]
        same = {True: "yes", False: "no"}.get(r.get("dag_equal_to_gram"), "")
        lines.append(f"| {r['cells']:,} | {r['n_splits']} | {r['mode']} | {r['discover_s']:.1f} s | "
                     f"{st.get('screen', 0):.1f} s | {st.get('edge test', 0):.1f} s | {st.get('orientation', 0):.1f} s | "
                     f"{st.get('pruning', 0):.1f} s | {r['n_edges']:,} | {same} | {r['commit']}, {r['date'][:10]} | "
                     f"{r['load_before'][0]} |")
    body = "\n".join(lines)
    path = HERE / "RESULTS.md"
    text = path.read_text()
    head, rest = text.split("<!-- gram: begin -->", 1)
    text = head + "<!-- gram: begin -->\n" + body + "\n<!-- gram: end -->" + rest.split("<!-- gram: end -->", 1)[1]
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return body


def main() -> None:
    if "--report" in sys.argv:
        print(report())
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=int, default=30_000)
    ap.add_argument("--genes", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-splits", type=int, default=2)
    a = ap.parse_args()

    import cape_pipeline.causal.regression.neighbourhood as nbh
    from cape_pipeline.causal import discover
    from cape_pipeline.datasets import simulated_grn_counts
    from cape_pipeline.pp import PreprocessConfig, preprocess

    adata = preprocess(simulated_grn_counts(a.cells, a.genes, seed=a.seed), PreprocessConfig(min_genes=1), copy=True)
    default_max = nbh.GRAM_MAX_FEATURES
    dags = {}
    for mode in ("gram", "gathered"):
        nbh.GRAM_MAX_FEATURES = default_max if mode == "gram" else 0
        load = os.getloadavg()
        t = time.perf_counter()
        g = discover(adata, algorithm="regression", regression={"n_splits": a.n_splits}, device="cpu", seed=a.seed)
        sec = time.perf_counter() - t
        stages: dict[str, float] = {}
        for h in g.history:
            stages[h["stage"]] = stages.get(h["stage"], 0.0) + float(h.get("seconds", 0.0))
        dags[mode] = g.adjacency.tocsr()
        rec = {"mode": mode, "cells": a.cells, "genes": a.genes, "seed": a.seed, "n_splits": a.n_splits,
               "discover_s": round(sec, 1), "stage_seconds": {k: round(v, 1) for k, v in stages.items()},
               "n_edges": int(g.adjacency.nnz), "commit": commit(), **provenance(load)}
        if mode == "gathered":
            rec["dag_equal_to_gram"] = bool(((dags["gram"] != 0) != (dags["gathered"] != 0)).nnz == 0)
        append(HERE / "gram_regressions.jsonl", rec)
        print(rec, flush=True)
    nbh.GRAM_MAX_FEATURES = default_max


if __name__ == "__main__":
    main()
