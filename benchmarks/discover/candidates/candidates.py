"""How many candidate parents should each feature's regression hold when there are few cells?

Question: Step I's regression algorithm regresses every feature on up to 4k screened candidate
parents (k = ``discover.regression.n_candidates``) on one cross-fitting half of the cells. With
k = 10 at every size, a 400-cell set (BEELINE's real sets: halves of ~200 cells) fits 40
candidates on 200 rows, and the kept graph is small (49–201 edges; 66–93 % of the genes without
an edge, ``../real/RESULTS.md``). Does ``n_candidates="auto"`` — k cut so that a half keeps
``ROWS_PER_CANDIDATE`` (20) rows per candidate, ``cape_pipeline.causal.regression.resolve_candidates``:
k = 2 at 400 cells, 6 at 1,000, 10 from 1,600 on — keep more of the true edges on real cells and
on simulated counts of the same size, without losing the ranking?

Arms (``--arms``): ``10`` (``--set discover.regression.n_candidates=10``, the default before
``"auto"``), ``auto`` (every default), and any other fixed k (a sweep, to show the trend).

Data:

- the five BEELINE real sets of ``../real/`` (hHEP, mESC, mDC; TFs + 500 / 1,000 genes; 383–425
  cells; run ``../real/real.py fetch`` and ``run`` first, for the data and the baselines'
  scores), scored as there on the judged truths (STRING, non-specific ChIP-seq, LOF/GOF): EPR,
  AUPRC ratio, and the kept graph's TF → gene edges (their number, precision, recall) beside the
  best baseline's precision at the same number of its own best pairs (|Pearson|, |Pearson| from
  the TFs, GRNBoost2, RegDiffusion), and the share of genes without an edge;
- the three generators of ``../counts/`` (``grn``, ``hill``, ``sergio``; seeds 0–2) at 400 and
  1,000 cells, a seeded random subset of their 10,000-cell files (as ``../ranking/`` makes them),
  scored against the generator's graph: EPR, AUPRC ratio, precision, recall, F1, edges and the
  share of genes without an edge. From 1,600 cells on ``"auto"`` is k = 10, so the 10,000-cell
  rows of ``../counts/`` and the screens of ``../interventional/`` (2,860 or more fit cells) are
  the same graphs.

BEELINE's other real sets stay held out and are not run.

Usage::

    python benchmarks/discover/candidates/candidates.py run [--arms 10 auto] [--real] [--cells 400 1000] [--seeds 0 1 2]
    python benchmarks/discover/candidates/candidates.py report     # the tables in RESULTS.md

``run`` appends one row per set × truth × arm to ``candidates.jsonl`` (a rerun replaces the same
set, seed and arm); each row holds the command, commit, date, machine and the load before it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "counts"))
sys.path.insert(0, str(HERE.parent / "real"))
sys.path.insert(0, str(HERE.parent / "ranking"))
import common  # noqa: E402
import counts  # noqa: E402
import ranking  # noqa: E402
import real  # noqa: E402

OUT = HERE / "candidates.jsonl"
RESULTS = HERE / "RESULTS.md"
JUDGED = ("STRING", "non-specific ChIP-seq", "LOF/GOF")
BASELINES = ("pearson", "pearson-tfs", "grnboost2", "regdiffusion")
GENERATORS = ("grn", "hill", "sergio")


def _sets(arm: str) -> list[str]:
    return [] if arm == "auto" else [f"discover.regression.n_candidates={int(arm)}"]


def _real_rows(ds: str, arm: str, base: dict) -> list[dict]:
    import anndata as ad

    path = real.DATA / ds / "expression.h5ad"
    names = np.asarray(ad.read_h5ad(path, backed="r").var_names).astype(str)
    adj, score, params, sec, rss = counts.cape_graph(_sets(arm), path, names)
    adj = adj.toarray()
    rows = []
    for truth, u in real._universes(ds).items():
        if truth not in JUDGED:
            continue
        g = u.graph(adj)
        best = max(u.precision_at(np.load(real.SCORES / ds / f"{b}.npz")["score"], g["edges_scored"])
                   for b in BASELINES)
        rows.append({"kind": "real", "set": ds, "truth": truth, "arm": arm,
                     "n_candidates_used": params.get("n_candidates_used", int(arm) if arm != "auto" else None),
                     **u.ranking(score), **g, "best_baseline_topk_precision": best,
                     "seconds": round(sec, 2), "step1_seconds": float(params.get("seconds", float("nan"))), **base})
    return rows


def _sim_row(gen: str, seed: int, cells: int, arm: str, base: dict) -> dict:
    path = counts.simulate(gen, ranking.CELLS, seed, ranking.CACHE / "data")
    if cells < ranking.CELLS:
        path = ranking._subsample(path, cells, seed)
    _, names, truth = counts.lognorm(path)
    adj, score, params, sec, rss = counts.cape_graph([*counts.GENERATOR_SETS.get(gen, []), *_sets(arm)], path, names)
    return {"kind": "sim", "set": f"{gen}-{cells}", "truth": "simulated", "seed": seed, "arm": arm,
            "n_candidates_used": params.get("n_candidates_used", int(arm) if arm != "auto" else None),
            **counts.ranking_metrics(score, truth), **counts.graph_metrics(adj, truth),
            "seconds": round(sec, 2), **base}


def run(a: argparse.Namespace) -> None:
    print("command:", common.command())
    print("machine:", common.machine())
    base = common.row_provenance(HERE)

    for arm in a.arms:
        if a.real:
            for ds in real.DATASETS:
                new = _real_rows(ds, arm, base())
                common.replace_rows(OUT, lambda r, ds=ds, arm=arm: r["kind"] == "real" and r["set"] == ds and r["arm"] == arm, new)
                print(arm, ds, "done", flush=True)
        for cells in a.cells:
            for gen in a.generators:
                for seed in a.seeds:
                    new = _sim_row(gen, seed, cells, arm, base())
                    common.replace_rows(OUT, lambda r, s=new["set"], seed=seed, arm=arm: r["kind"] == "sim" and r["set"] == s
                             and r["seed"] == seed and r["arm"] == arm, [new])
                    print(arm, new["set"], seed, "done", flush=True)


def _fmt(v: float, digits: int = 2) -> str:
    return f"{v:.{digits}f}" if v == v else "nan"


def report() -> None:
    rows = common.read_rows(OUT)
    arms = sorted({r["arm"] for r in rows}, key=lambda s: (s == "auto", int(s) if s != "auto" else 0))
    lines = ["<!-- candidates: begin -->",
             "Made by `python benchmarks/discover/candidates/candidates.py report` from `candidates.jsonl`; each "
             "row there records its command, commit, date, machine and load. Simulated sets: mean ± sd over "
             "the seeds.", ""]
    real_rows = [r for r in rows if r["kind"] == "real"]
    if real_rows:
        lines += ["## Real sets (BEELINE)", "",
                  "k: candidates per round as used; edges: the kept graph's TF → gene edges among the truth's "
                  "pairs; best top-k: the best baseline's precision at that many of its own best pairs.", "",
                  "| set | truth | arm | k | EPR | AUPRC ratio | edges | precision | best top-k | recall | "
                  "genes without edge |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sorted(real_rows, key=lambda r: (r["set"], r["truth"], arms.index(r["arm"]))):
            lines.append(f"| {r['set']} | {r['truth']} | {r['arm']} | {r['n_candidates_used']} | {_fmt(r['epr'])} | "
                         f"{_fmt(r['auprc_ratio'])} | {r['edges_scored']} | {_fmt(r['precision'], 3)} | "
                         f"{_fmt(r['best_baseline_topk_precision'], 3)} | {_fmt(r['recall'], 4)} | "
                         f"{_fmt(r['genes_without_edge'])} |")
        lines += ["", "Summary over the judged set × truth cells (median; genes without edge: the largest over "
                  "the sets; kept-graph precision over the best baseline's top-k precision at the same number "
                  "of pairs, where that is above 0):", "",
                  "| arm | EPR | AUPRC ratio | kept TF → gene edges | precision / best top-k | genes without edge (max) |",
                  "|---|---|---|---|---|---|"]
        for arm in arms:
            rr = [r for r in real_rows if r["arm"] == arm]
            if not rr:
                continue
            ratio = [r["precision"] / r["best_baseline_topk_precision"] for r in rr
                     if r["best_baseline_topk_precision"] > 0]
            lines.append(f"| {arm} | {statistics.median(r['epr'] for r in rr):.2f} | "
                         f"{statistics.median(r['auprc_ratio'] for r in rr):.2f} | "
                         f"{statistics.median(r['edges_scored'] for r in rr):.0f} | "
                         f"{statistics.median(ratio):.2f} | {max(r['genes_without_edge'] for r in rr):.2f} |")
        lines.append("")
    sim = [r for r in rows if r["kind"] == "sim"]
    if sim:
        lines += ["## Simulated counts", "",
                  "| set | arm | k | n | EPR | AUPRC ratio | edges | precision | recall | F1 | no edge |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        keys = sorted({(r["set"], r["arm"]) for r in sim},
                      key=lambda t: (t[0].split("-")[0], int(t[0].split("-")[1]), arms.index(t[1])))
        for s, arm in keys:
            rr = [r for r in sim if r["set"] == s and r["arm"] == arm]

            def ms(f, d=2, rr=rr):
                v = np.array([r[f] for r in rr], dtype=float)
                return f"{v.mean():.{d}f} ± {v.std():.{d}f}" if len(v) > 1 else f"{v.mean():.{d}f}"
            lines.append(f"| {s} | {arm} | {rr[0]['n_candidates_used']} | {len(rr)} | {ms('epr', 1)} | "
                         f"{ms('auprc_ratio', 1)} | {ms('edges', 0)} | {ms('precision', 3)} | {ms('recall', 3)} | "
                         f"{ms('f1', 3)} | {ms('isolated_share')} |")
        lines.append("")
    lines.append("<!-- candidates: end -->")
    block = "\n".join(lines)
    text = RESULTS.read_text() if RESULTS.exists() else ""
    if "<!-- candidates: begin -->" in text:
        head, rest = text.split("<!-- candidates: begin -->", 1)
        text = head + block + rest.split("<!-- candidates: end -->", 1)[1]
    else:
        text = text + "\n" + block + "\n"
    RESULTS.write_text(text)
    print(block)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--arms", nargs="+", default=["10", "auto"], help="'auto' or a fixed k per arm")
    r.add_argument("--real", action=argparse.BooleanOptionalAction, default=True, help="run the real sets")
    r.add_argument("--cells", nargs="*", type=int, default=[400, 1000])
    r.add_argument("--generators", nargs="*", default=list(GENERATORS), choices=GENERATORS)
    r.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    sub.add_parser("report")
    a = p.parse_args()
    if a.cmd == "run":
        run(a)
    else:
        report()


if __name__ == "__main__":
    main()
