"""Which ranking of regulator → target pairs holds on real cells and on simulated counts alike?

Question: Step I's ranking (``edge_scores.parquet``'s ``score``: the partial R² of a pair in its
target's neighbourhood regression, 0 for pairs it did not score) loses to RegDiffusion, GRNBoost2
and |Pearson| on BEELINE's real datasets (``../real/RESULTS.md``) but is far ahead of them on the
simulated counts of ``../counts/``. Does a ranking of every pair by a shrinkage partial
correlation, alone or after Step I's kept edges, do better on the real sets without losing on
the simulated ones?

Rankings (each an ``(M, M)`` score matrix; larger ranks first):

- ``cape``: Step I's own score, every default (``cape run FILE --until discover``);
- ``pcor-cv``: |partial correlation| from the ridge-regularized precision matrix
  ``Θ = (C + λI)⁻¹`` of the genes' correlation matrix ``C`` (Θ's off-diagonal ``−Θᵢⱼ/√(ΘᵢᵢΘⱼⱼ)``;
  ``−Θᵢⱼ/Θⱼⱼ`` is gene i's ridge coefficient in the regression of gene j on all other genes, with
  penalty λ on the correlation scale); λ chosen by 5-fold cross-validation of those regressions'
  held-out squared error over the grid ``LAMBDAS``;
- ``pcor-<λ>``: the same at a fixed λ of the grid (a sweep, to show how the answer moves with λ;
  λ → 0 is the partial correlation, λ → ∞ ranks as |Pearson|);
- ``pcor-lw``: the same with the Ledoit–Wolf shrinkage of the correlation matrix
  (``sklearn.covariance.LedoitWolf``: ``(1 − δ)C + δI``, δ the analytic estimate that minimizes
  the expected Frobenius loss, Ledoit & Wolf 2004), i.e. λ = δ / (1 − δ): a strength of
  conditioning that follows the number of cells against the number of genes;
- ``kept-then-pcor-cv``: Step I's kept edges first (by its score), then every other pair by
  ``pcor-cv``;
- ``kept-then-blend``: Step I's kept edges first, then the other pairs by the mean of two
  normalized ranks, Step I's score (weight 2; unscored pairs at 0) and ``pcor-cv`` (weight 1).

Data: the real sets of ``../real/`` (hHEP, mESC, mDC; Step I's scores read from that benchmark's
``_cache/scores/<set>/cape.npz``, so run ``../real/real.py fetch`` and ``run`` first) scored as
there (EPR and AUPRC ratio, on STRING, non-specific ChIP-seq and LOF/GOF); the generators of
``../counts/`` (``grn``, ``hill``; ``sergio`` where its environment is set up) at 10,000 cells ×
2,000 genes, log-normalized as there, scored as there (EPR, AUPRC ratio over every ordered pair);
with ``--cells N`` (N < 10,000) a random N of those cells (seeded by the seed; the same generator
and truth), so the simulated sets can be compared with the real ones at their size (~400 cells).
BEELINE's other real sets stay held out and are not run.

Usage::

    python benchmarks/discover/ranking/ranking.py run [--generators grn hill sergio] [--seeds 0 1 2] [--cells 400]
    python benchmarks/discover/ranking/ranking.py report     # the table in RESULTS.md

``run`` appends one row per set × truth × ranking to ``ranking.jsonl`` (a rerun of a set replaces
its rows); each row holds the command, commit, date, machine and the load before it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "counts"))
sys.path.insert(0, str(HERE.parent / "real"))
import common  # noqa: E402
import counts  # noqa: E402
import real  # noqa: E402

OUT = HERE / "ranking.jsonl"
RESULTS = HERE / "RESULTS.md"
CACHE = HERE / "_cache"
LAMBDAS = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
SWEEP = (3.0, 10.0, 30.0, 100.0)
CELLS = 10_000
#: the truths judged on the real sets (cell-type-specific ChIP-seq is near random for every method)
JUDGED = ("STRING", "non-specific ChIP-seq", "LOF/GOF")
BASELINES = ("pearson", "grnboost2", "regdiffusion", "pidc")


# ----------------------------------------------------------------------------- rankings
def _standardize(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(0)) / np.maximum(x.std(0), 1e-12)


def pcor(x: np.ndarray, lam: float) -> np.ndarray:
    """|partial correlation| ``(M, M)`` from ``(C + λI)⁻¹``, ``C`` the correlation of ``x`` ``(N, M)``;
    diagonal 0. Dense in M (this study's sets have M ≤ 2,000)."""
    z = _standardize(x)
    w, v = np.linalg.eigh(z.T @ z / len(z))
    theta = (v / (w + lam)) @ v.T
    d = np.sqrt(np.diag(theta))
    out = np.abs(theta / d[:, None] / d[None, :])
    np.fill_diagonal(out, 0.0)
    return out


def lw_lambda(x: np.ndarray) -> float:
    """λ = δ / (1 − δ) of the Ledoit–Wolf shrinkage δ of the correlation matrix of ``x`` ``(N, M)``
    (``sklearn.covariance.ledoit_wolf_shrinkage`` on the standardized columns)."""
    from sklearn.covariance import ledoit_wolf_shrinkage

    delta = float(ledoit_wolf_shrinkage(_standardize(x), assume_centered=True))
    return delta / max(1.0 - delta, 1e-12)


def cv_lambda(x: np.ndarray, seed: int = 0) -> tuple[float, list[float]]:
    """λ of ``LAMBDAS`` with the least 5-fold held-out squared error of the ridge regressions of
    every gene on all the others (standardized on the training folds); and the errors per λ."""
    fold = np.random.default_rng(seed).permutation(len(x)) % 5
    err = np.zeros(len(LAMBDAS))
    for f in range(5):
        tr, te = x[fold != f], x[fold == f]
        mu, sd = tr.mean(0), np.maximum(tr.std(0), 1e-12)
        ztr, zte = (tr - mu) / sd, (te - mu) / sd
        w, v = np.linalg.eigh(ztr.T @ ztr / len(ztr))
        for k, lam in enumerate(LAMBDAS):
            theta = (v / (w + lam)) @ v.T
            err[k] += float((((zte @ theta) / np.diag(theta)) ** 2).sum())
    err /= x.size
    return LAMBDAS[int(np.argmin(err))], [round(float(e), 5) for e in err]


def _normal_rank(s: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    r = rankdata(s.ravel()).reshape(s.shape) / s.size
    r[s == 0] = 0.0
    return r


def rankings(x: np.ndarray, kept: np.ndarray, cape: np.ndarray) -> tuple[dict[str, np.ndarray], dict]:
    """Every ranking of the module docstring on one matrix ``x`` ``(N, M)`` with Step I's kept
    adjacency ``kept`` (bool ``(M, M)``) and score ``cape`` ``(M, M)``; and the λ record."""
    lam, errors = cv_lambda(x)
    p_cv = pcor(x, lam)
    lam_lw = lw_lambda(x)
    out = {"cape": cape, "pcor-cv": p_cv, "pcor-lw": pcor(x, lam_lw)}
    out.update({f"pcor-{lam_:g}": pcor(x, lam_) for lam_ in SWEEP})
    top = 3.0 + cape  # kept edges above every other pair
    out["kept-then-pcor-cv"] = np.where(kept, top, p_cv / max(p_cv.max(), 1e-12))
    out["kept-then-blend"] = np.where(kept, top, (2 * _normal_rank(cape) + _normal_rank(p_cv)) / 3)
    return out, {"lambda_cv": lam, "lambda_lw": round(lam_lw, 4),
                 "cv_errors": dict(zip(map(str, LAMBDAS), errors, strict=True))}


# ----------------------------------------------------------------------------- sets
def _real_rows(ds: str, base: dict) -> list[dict]:
    import anndata as ad

    score_file = real.SCORES / ds / "cape.npz"
    if not score_file.exists():
        raise SystemExit(f"{score_file}: run `python benchmarks/discover/real/real.py run --datasets {ds}` first")
    a = ad.read_h5ad(real.DATA / ds / "expression.h5ad")
    x = np.asarray(a.X, dtype=np.float64)
    z = np.load(score_file)
    t0 = time.perf_counter()
    ranks, lam = rankings(x, z["adj"] != 0, z["score"].astype(np.float64))
    sec = time.perf_counter() - t0
    for b in BASELINES:
        f = real.SCORES / ds / f"{b}.npz"
        if f.exists():
            ranks[b] = np.load(f)["score"].astype(np.float64)
    # a baseline whose scores are not kept here: its row of ../real/real.jsonl, the same metrics of
    # the same scores (real.py's Universe), recorded when that row was made
    recorded = {(r["truth"], r["method"]): r for r in real._rows()
                if r.get("kind") == "method" and r["dataset"] == ds and r["method"] in BASELINES and r["method"] not in ranks}
    rows = []
    for truth, u in real._universes(ds).items():
        if truth not in JUDGED:
            continue
        scored = [(name, u.ranking(s), {"seconds_rankings": round(sec, 2)}) for name, s in ranks.items()]
        scored += [(name, r, {"from": f"../real/real.jsonl (commit {r.get('commit')})"})
                   for (t, name), r in recorded.items() if t == truth]
        rows += [{"kind": "real", "set": ds, "truth": truth, "ranking": name, "epr": r["epr"],
                  "auprc_ratio": r["auprc_ratio"], "cells": int(x.shape[0]), "genes": int(x.shape[1]), **extra,
                  **lam, **base} for name, r, extra in scored]
    return rows


def _subsample(path: Path, cells: int, seed: int) -> Path:
    """A random ``cells`` of the cells of the generator file ``path`` (seeded), written once."""
    import anndata as ad

    out = path.with_name(path.stem + f"_sub{cells}.h5ad")
    if not out.exists():
        a = ad.read_h5ad(path)
        keep = np.sort(np.random.default_rng(seed).choice(a.n_obs, cells, replace=False))
        tmp = out.with_suffix(".tmp.h5ad")
        a[keep].copy().write_h5ad(tmp)
        tmp.rename(out)
    return out


def _set_name(gen: str, cells: int) -> str:
    return f"{gen}-{cells // 1000}k" if cells % 1000 == 0 else f"{gen}-{cells}"


def _sim_rows(gen: str, seed: int, base: dict, cells: int = CELLS) -> list[dict]:
    data_dir = CACHE / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    path = counts.simulate(gen, CELLS, seed, data_dir)
    if cells < CELLS:
        path = _subsample(path, cells, seed)
    x, names, truth = counts.lognorm(path)
    x = x.astype(np.float64)
    kept_file = CACHE / f"cape_{gen}_{cells}_s{seed}.npz"
    if not kept_file.exists():
        adj, score, _, sec, _ = counts.cape_graph(counts.GENERATOR_SETS.get(gen, []), path, names)
        np.savez_compressed(kept_file, adj=adj.toarray() != 0, score=score, seconds=sec)
    z = np.load(kept_file)
    live = x.std(0) > 0  # a gene constant over the cells has no correlation
    sub = np.ix_(live, live)
    ranks, lam = rankings(x[:, live], z["adj"][sub], z["score"][sub])
    rows = []
    for name, s in ranks.items():
        full = np.zeros(z["score"].shape)
        full[sub] = s
        r = counts.ranking_metrics(full, truth)
        rows.append({"kind": "sim", "set": _set_name(gen, cells), "truth": "simulated", "seed": seed,
                     "ranking": name, "epr": r["epr"], "auprc_ratio": r["auprc_ratio"], "cells": int(x.shape[0]),
                     "genes": int(x.shape[1]), **lam, **base})
    return rows


def run(a: argparse.Namespace) -> None:
    print("command:", common.command())
    print("machine:", common.machine())
    base = common.row_provenance(HERE)

    for ds in a.datasets:
        new = _real_rows(ds, base())
        common.replace_rows(OUT, lambda r, ds=ds: r["kind"] == "real" and r["set"] == ds, new)
        print(ds, "done", flush=True)
    for gen in a.generators:
        for seed in a.seeds:
            new = _sim_rows(gen, seed, base(), a.cells)
            name = _set_name(gen, a.cells)
            common.replace_rows(OUT, lambda r, name=name, seed=seed: r["kind"] == "sim" and r["set"] == name
                     and r["seed"] == seed, new)
            print(gen, seed, "done", flush=True)


# ----------------------------------------------------------------------------- report
def report() -> None:
    import statistics

    rows = common.read_rows(OUT)
    by = {}
    for r in rows:
        by.setdefault((r["kind"], r["set"], r["truth"]), {}).setdefault(r["ranking"], []).append(r)
    names = ["cape", "pcor-cv", "pcor-lw", *(f"pcor-{lam:g}" for lam in SWEEP), "kept-then-pcor-cv",
             "kept-then-blend"]
    mean = {k: {n: (float(np.mean([r["epr"] for r in v])), float(np.mean([r["auprc_ratio"] for r in v])),
                    len(v)) for n, v in d.items()} for k, d in by.items()}
    lines = ["<!-- ranking: begin -->",
             "Made by `python benchmarks/discover/ranking/ranking.py report` from `ranking.jsonl`; each row there "
             "records its command, commit, date, machine and load. Simulated sets: the mean over the seeds "
             "(n in the last column).", ""]
    for metric, i in (("EPR", 0), ("AUPRC ratio", 1)):
        lines += [f"## {metric}", "",
                  "| set | truth | " + " | ".join(names) + " | best baseline | n |",
                  "|---|---|" + "---|" * (len(names) + 2)]
        for (_, s, truth), d in sorted(mean.items(), key=lambda kv: kv[0]):
            best = max((d[b][i] for b in BASELINES if b in d), default=float("nan"))
            bname = max((b for b in BASELINES if b in d), key=lambda b: d[b][i], default="")
            n = d["cape"][2]
            lines.append(f"| {s} | {truth} | " + " | ".join(f"{d[nm][i]:.2f}" if nm in d else "" for nm in names)
                         + (f" | {best:.2f} ({bname}) | {n} |" if bname else " | | " + str(n) + " |"))
        lines.append("")
    sizes = sorted({s.rsplit("-", 1)[1] for (k, s, _) in mean if k == "sim"},
                   key=lambda z: float(z.removesuffix("k")) * (1000 if z.endswith("k") else 1), reverse=True)
    lines += ["## Against Step I's own ranking", "",
              "Median over the sets (and truths) of each ranking's value over `cape`'s; real: over the 11 "
              "judged set × truth cells, also over the best baseline's; simulated: over the generators at "
              "each number of cells.", "",
              "| ranking | real EPR / cape | real AUPRC / cape | real EPR / best baseline | "
              + " | ".join(f"simulated {z} EPR / cape | simulated {z} AUPRC / cape" for z in sizes) + " |",
              "|---|---|---|---|" + "---|---|" * len(sizes)]
    for nm in names:
        rl = [d for (k, _, _), d in mean.items() if k == "real" and nm in d]

        def med(ds, i, ref, nm=nm):
            vals = [d[nm][i] / ref(d) for d in ds if ref(d) > 0]
            return f"{statistics.median(vals):.2f}" if vals else ""

        best = lambda d: max(d[b][0] for b in BASELINES if b in d)  # noqa: E731
        cells = []
        for z in sizes:
            sm = [d for (k, s, _), d in mean.items() if k == "sim" and s.endswith("-" + z) and nm in d]
            cells += [med(sm, 0, lambda d: d["cape"][0]), med(sm, 1, lambda d: d["cape"][1])]
        lines.append(f"| {nm} | {med(rl, 0, lambda d: d['cape'][0])} | {med(rl, 1, lambda d: d['cape'][1])} | "
                     f"{med(rl, 0, best)} | " + " | ".join(cells) + " |")
    lines.append("<!-- ranking: end -->")
    text = RESULTS.read_text() if RESULTS.exists() else ""
    block = "\n".join(lines)
    if "<!-- ranking: begin -->" in text:
        head, rest = text.split("<!-- ranking: begin -->", 1)
        text = head + block + rest.split("<!-- ranking: end -->", 1)[1]
    else:
        text = text + "\n" + block + "\n"
    RESULTS.write_text(text)
    print(block)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--datasets", nargs="*", default=list(real.DATASETS))
    r.add_argument("--generators", nargs="*", default=["grn", "hill"], choices=["grn", "hill", "sergio"])
    r.add_argument("--seeds", nargs="+", type=int, default=[0])
    r.add_argument("--cells", type=int, default=CELLS,
                   help=f"cells of each simulated set: a random subset of the {CELLS:,}-cell file below it")
    sub.add_parser("report")
    a = p.parse_args()
    if a.cmd == "run":
        run(a)
    else:
        report()


if __name__ == "__main__":
    main()
