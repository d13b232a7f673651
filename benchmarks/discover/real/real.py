"""Step I on real cells with literature ground truths (BEELINE's real datasets), beside the GRN
tools biologists run.

Question: on data no one here wrote — real single cells, scored against networks from the
literature as BEELINE scores them — does Step I rank regulator → target pairs and keep a graph
at least as well as GENIE3, GRNBoost2, RegDiffusion, PIDC and a correlation?

Data: BEELINE's processed real datasets (Pratapa et al. 2020, Nature Methods 17:147,
doi:10.1038/s41592-019-0690-6), the log-normalized values BEELINE distributes, TFs + 500 and
TFs + 1000 genes (every significantly varying TF, and the 500 or 1000 most varying genes):

- ``hHEP``: human hepatocyte differentiation (Camp et al. 2017), 425 cells;
- ``mESC``: mouse embryonic stem cell differentiation (Hayashi et al. 2018), 421 cells
  (TFs + 500 only: the TFs + 1000 expression is not in either source below);
- ``mDC``: mouse dendritic cells (Shalek et al. 2014), 383 cells.

Ground truths: STRING, non-specific ChIP-seq, cell-type-specific ChIP-seq and, for mESC, the
LOF/GOF network. BEELINE's other real datasets (hESC, mHSC-E/GM/L) are kept back as an
independent check and are not offered here.

Sources (read at a pinned commit; ``fetch`` records each file's blob id):

- ``haohaostats/bridge-grn`` (MIT): ``data/benchmark_datasets/<truth> Dataset/<cells>/TFs+<n>/``
  ``BL--ExpressionData.csv.gz`` (genes × cells), ``BL--network.csv.gz`` (Gene1, Gene2) and
  ``TF.csv.gz`` (the set's TFs), in GENELink's layout of BEELINE's files;
- ``zpliulab/GENELink`` (no licence file; read, not redistributed): the mESC LOF/GOF network,
  ``Dataset/Benchmark Dataset/Lofgof Dataset/mESC/TFs+<n>/BL--network.csv``.

Scoring, as BEELINE's ``BLEval`` scores experimental data (``computeEarlyPrec.py`` with
``TFEdges=True``): the truth without self-loops and duplicates, restricted to the set's genes; the
candidate pairs are (source of a true edge) → (any gene of the truth), no self-loops; a method's
scores are taken in absolute value, rounded to 6 decimals, and only its non-zero scores count as
predictions. Early precision: the share of true edges among the predictions whose score is at
least the k-th largest (k = the number of true edges; ties at the k-th score are all taken); EPR:
early precision over the random predictor's (the density: true edges over candidate pairs).
AUPRC as BEELINE's ``computePRROC`` (directed, no self-loops): over every ordered pair of the
truth's genes (not only TF → gene), unscored pairs at 0, ``sklearn.metrics.precision_recall_curve``
integrated by the trapezoidal ``auc``; AUPRC ratio: over the random predictor's (the truth's
density over those pairs).
For a method that keeps a graph (Step I): its edges among the candidate pairs, their precision,
recall and F1, and the share of the set's genes without any kept edge; and beside it every
ranking method's precision at the same number of its own top candidate pairs.

Methods, on the same matrix (cells × genes, the distributed values):

- ``cape``: ``cape run FILE --until discover``, every default;
- ``cape-regulators``: the same with the set's TFs as regulators (``discover.regulators``);
- ``pearson``: |Pearson r| over every pair; ``pearson-tfs``: the same from the set's TFs only
  (the TF list the other methods take);
- ``grnboost2`` / ``genie3``: arboreto 0.1.6 (in its own environment, ``../counts/_arboreto.py``)
  with the set's TFs as ``tf_names``;
- ``regdiffusion``: RegDiffusion 0.2.3 (Zhu & Slonim 2024), its defaults, CPU
  (``../counts/_regdiffusion.py``);
- ``pidc``: PIDC (Chan et al. 2017), the information-theoretic method BEELINE runs, written from
  its paper and its reference implementation's definitions (``pidc.py``; it reproduces
  NetworkInference.jl's test values), undirected;
- ``random``: uniform scores (seeded).

Usage::

    python benchmarks/discover/real/real.py fetch [--mirror DIR]   # the sources, then _cache/data/
    python benchmarks/discover/counts/counts.py setup regdiffusion grnboost2   # baselines' environments
    python benchmarks/discover/real/real.py run [--datasets hHEP-500 ...] [--methods ...] [--force]
    python benchmarks/discover/real/real.py rescore                # metrics again from the kept scores
    python benchmarks/discover/real/real.py report                 # RESULTS.md and real.png

``fetch`` clones each source (``git clone --filter=blob:none``) into ``_cache/src/``, or reads
``DIR/<owner>+<name>/repo`` (a bare copy) with ``--mirror``. ``run`` appends one row per
dataset × truth × method to ``real.jsonl`` (a rerun replaces its rows) and keeps each method's
scores in ``_cache/scores/`` for the top-k comparison.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "counts"))
import common  # noqa: E402
import counts  # noqa: E402

OUT = HERE / "real.jsonl"
RESULTS = HERE / "RESULTS.md"
FIGURE = HERE / "real.png"
CACHE = HERE / "_cache"
DATA = CACHE / "data"
SCORES = CACHE / "scores"

SOURCES = {
    "bridge-grn": {"repo": "haohaostats/bridge-grn", "commit": "27d21d94f6f96f5d2a8a7b41d392cb12410e46ea",
                   "licence": "MIT"},
    "genelink": {"repo": "zpliulab/GENELink", "commit": "4eb816af27f5fe0cb26f9230286401801b251129",
                 "licence": "none stated (read at run time, not redistributed)"},
}
BRIDGE = "data/benchmark_datasets/{truth} Dataset/{cells}/TFs+{n}/{file}.csv.gz"
#: truth → (source, path of its network; ``{truth}`` is bridge-grn's folder name)
TRUTHS = {
    "STRING": ("bridge-grn", BRIDGE, "STRING"),
    "non-specific ChIP-seq": ("bridge-grn", BRIDGE, "Non-Specific"),
    "cell-type-specific ChIP-seq": ("bridge-grn", BRIDGE, "Specific"),
    "LOF/GOF": ("genelink", "Dataset/Benchmark Dataset/Lofgof Dataset/{cells}/TFs+{n}/BL--network.csv", None),
}
CELLS = {"hHEP": ("human", 425), "mESC": ("mouse", 421), "mDC": ("mouse", 383)}
#: dataset → the truths shipped for it (LOF/GOF exists for mESC only)
DATASETS = {
    f"{c}-{n}": [t for t in TRUTHS if t != "LOF/GOF" or c == "mESC"]
    for c in CELLS for n in (500, 1000) if (c, n) != ("mESC", 1000)
}
CAPE_SETS = {"cape": [], "cape-regulators": ["discover.regression.regulators={regulators}"]}
RANKERS = ("pearson", "pearson-tfs", "grnboost2", "genie3", "regdiffusion", "pidc", "random")
METHODS = (*CAPE_SETS, *RANKERS)


# ----------------------------------------------------------------------------- sources
def _git_dir(name: str, mirror: Path | None) -> Path:
    """A git directory holding source ``name``'s pinned commit: the bare copy under ``mirror``, or
    a blob-less clone under ``_cache/src/`` (blobs are fetched as they are read)."""
    src = SOURCES[name]
    if mirror is not None:
        d = mirror / src["repo"].replace("/", "+") / "repo"
        if not d.is_dir():
            raise SystemExit(f"--mirror {mirror}: no copy of {src['repo']} at {d}")
        return d
    d = CACHE / "src" / (src["repo"].replace("/", "+") + ".git")
    if not d.exists():
        d.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "--bare", "--filter=blob:none",
                        f"https://github.com/{src['repo']}.git", str(d)], check=True)
    return d


def _read(git_dir: Path, name: str, path: str) -> tuple[bytes, str]:
    """(content, blob id) of ``path`` at the pinned commit of source ``name``; gunzipped for ``.gz``."""
    import gzip

    spec = f"{SOURCES[name]['commit']}:{path}"
    blob = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", spec], capture_output=True, text=True)
    if blob.returncode != 0:
        raise FileNotFoundError(f"{SOURCES[name]['repo']}@{SOURCES[name]['commit'][:10]}: no file {path!r}")
    data = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "blob", blob.stdout.strip()],
                          capture_output=True, check=True).stdout
    if data.startswith(b"version https://git-lfs"):
        raise SystemExit(f"{path}: a Git LFS pointer, not the file's content")
    return (gzip.decompress(data) if path.endswith(".gz") else data), blob.stdout.strip()


def fetch(mirror: Path | None) -> None:
    """Write ``_cache/data/<dataset>/``: ``expression.h5ad`` (cells × genes, the distributed
    values), ``regulators.txt`` (the set's TFs), ``truth/<truth>.csv`` and ``source.json``."""
    import anndata as ad
    import pandas as pd

    gits = {name: _git_dir(name, mirror) for name in SOURCES}
    for ds, truths in DATASETS.items():
        cells, n = ds.split("-")
        out = DATA / ds
        (out / "truth").mkdir(parents=True, exist_ok=True)
        files = {}
        raw, files["expression"] = _read(gits["bridge-grn"], "bridge-grn",
                                         BRIDGE.format(truth="STRING", cells=cells, n=n, file="BL--ExpressionData"))
        expr = pd.read_csv(io.BytesIO(raw), index_col=0)
        x = expr.to_numpy(dtype=np.float32).T
        if not np.isfinite(x).all() or x.min() < 0 or x.max() > 30 or expr.shape[1] != CELLS[cells][1]:
            raise SystemExit(f"{ds}: expression is not BEELINE's log-normalized {CELLS[cells][1]} cells "
                             f"(shape {expr.shape}, range {x.min():.2f}..{x.max():.2f})")
        genes = expr.index.astype(str)
        raw, files["tfs"] = _read(gits["bridge-grn"], "bridge-grn",
                                  BRIDGE.format(truth="STRING", cells=cells, n=n, file="TF"))
        tfs = sorted(set(pd.read_csv(io.BytesIO(raw))["TF"].astype(str)) & set(genes))
        a = ad.AnnData(x, obs=pd.DataFrame(index=expr.columns.astype(str)), var=pd.DataFrame(index=genes))
        a.var["is_tf"] = a.var_names.isin(tfs)
        a.uns["source"] = f"BEELINE {ds} via {SOURCES['bridge-grn']['repo']}@{SOURCES['bridge-grn']['commit']}"
        a.write_h5ad(out / "expression.h5ad")
        (out / "regulators.txt").write_text(f"# TFs of BEELINE's {ds} set ({SOURCES['bridge-grn']['repo']})\n"
                                            + "\n".join(tfs) + "\n")
        for truth in truths:
            src, tmpl, folder = TRUTHS[truth]
            path = tmpl.format(truth=folder, cells=cells, n=n, file="BL--network")
            raw, files[truth] = _read(gits[src], src, path)
            net = pd.read_csv(io.BytesIO(raw)).iloc[:, :2]
            net.columns = ["Gene1", "Gene2"]
            inside = net["Gene1"].isin(genes) & net["Gene2"].isin(genes)
            if not inside.all():
                raise SystemExit(f"{ds} {truth}: {int((~inside).sum())} of {len(net)} edges name genes outside the set")
            net.to_csv(out / "truth" / f"{_slug(truth)}.csv", index=False)
        (out / "source.json").write_text(json.dumps({
            "dataset": ds, "cells": int(a.n_obs), "genes": int(a.n_vars), "tfs": len(tfs),
            "sources": {k: SOURCES[k] for k in SOURCES}, "blobs": files}, indent=1))
        print(f"{ds}: {a.n_obs} cells × {a.n_vars} genes, {len(tfs)} TFs; truths: {', '.join(truths)}")


def _slug(truth: str) -> str:
    return truth.replace("/", "-").replace(" ", "_")


# ----------------------------------------------------------------------------- scoring
class Universe:
    """BEELINE's candidate pairs for one truth: (source of a true edge) → (gene of the truth),
    no self-loops, as boolean masks over the set's ``(M, M)`` gene pairs."""

    #: the fields :meth:`ranking` and :meth:`graph` write
    METRIC_KEYS = ("early_precision", "epr", "auprc", "auprc_ratio", "scored_true_share", "edges", "edges_scored",
               "precision", "recall", "f1", "genes_without_edge")

    def __init__(self, truth_csv: Path, genes: np.ndarray):
        import pandas as pd

        net = pd.read_csv(truth_csv)
        net = net[net["Gene1"] != net["Gene2"]].drop_duplicates()
        index = {g: i for i, g in enumerate(genes)}
        m = len(genes)
        src, dst = net["Gene1"].map(index).to_numpy(), net["Gene2"].map(index).to_numpy()
        self.true = np.zeros((m, m), dtype=bool)
        self.true[src, dst] = True
        tf = np.zeros(m, dtype=bool)
        tf[src] = True
        node = np.zeros(m, dtype=bool)
        node[src] = node[dst] = True
        self.pairs = tf[:, None] & node[None, :]
        np.fill_diagonal(self.pairs, False)
        self.node_pairs = node[:, None] & node[None, :]
        np.fill_diagonal(self.node_pairs, False)
        self.n_true = int(self.true.sum())
        self.density = self.n_true / int(self.pairs.sum())
        self.node_density = self.n_true / int(self.node_pairs.sum())

    def ranking(self, score: np.ndarray) -> dict[str, float]:
        """BEELINE's early precision, EPR, AUPRC and AUPRC ratio of a score matrix."""
        from sklearn.metrics import auc, precision_recall_curve

        s = np.round(np.abs(np.nan_to_num(score[self.pairs].astype(np.float64))), 6)
        y = self.true[self.pairs]
        pred = s > 0
        k = min(int(pred.sum()), self.n_true)
        if k == 0:
            ep = 0.0
        else:
            kth = np.sort(s[pred])[::-1][k - 1]
            top = s >= max(kth, s[pred].min())
            ep = float(y[top].mean())
        prec, rec, _ = precision_recall_curve(self.true[self.node_pairs], np.abs(np.nan_to_num(score[self.node_pairs])))
        ap = float(auc(rec, prec))
        return {"early_precision": ep, "epr": ep / self.density, "auprc": ap, "auprc_ratio": ap / self.node_density,
                "scored_true_share": float(pred[y].mean())}

    def graph(self, adj: np.ndarray) -> dict[str, float]:
        """The kept graph's edges among the candidate pairs against the truth."""
        kept = (adj != 0) & self.pairs
        tp = int((kept & self.true).sum())
        e = int(kept.sum())
        p, r = (tp / e if e else 0.0), tp / self.n_true
        return {"edges": int((adj != 0).sum()), "edges_scored": e, "precision": p, "recall": r,
                "f1": 2 * p * r / (p + r) if p + r else 0.0,
                "genes_without_edge": float((((adj != 0).sum(0) + (adj != 0).sum(1)) == 0).mean())}

    def precision_at(self, score: np.ndarray, k: int) -> float:
        """Precision of a ranking's ``k`` best candidate pairs (ties broken by position)."""
        if k == 0:
            return float("nan")
        s = np.abs(np.nan_to_num(score[self.pairs]))
        top = np.argsort(-s, kind="stable")[:k]
        return float(self.true[self.pairs][top].mean())


# ----------------------------------------------------------------------------- methods
def _scores(ds: str, method: str, seed: int) -> tuple[np.ndarray, np.ndarray | None, dict]:
    """(score (M, M), kept adjacency (M, M) or None, record) of one method on one dataset."""
    import anndata as ad

    path = DATA / ds / "expression.h5ad"
    a = ad.read_h5ad(path)
    names = np.asarray(a.var_names).astype(str)
    if method in CAPE_SETS:
        sets = [s.format(regulators=DATA / ds / "regulators.txt") for s in CAPE_SETS[method]]
        adj, score, p, sec, rss = counts.cape_graph(sets, path, names)
        return score, adj.toarray(), {"seconds": sec, "peak_rss_gb": rss,
                                      "step1_seconds": float(p.get("seconds", float("nan"))),
                                      "support": p.get("support"), "edge_rule": p.get("edge_rule")}
    x = np.asarray(a.X, dtype=np.float32)
    if method in ("pearson", "pearson-tfs"):
        t0 = time.perf_counter()
        z = (x - x.mean(0)) / np.maximum(x.std(0), 1e-12)
        c = np.abs(z.T @ z / z.shape[0])
        np.fill_diagonal(c, 0.0)
        if method == "pearson-tfs":
            c[~a.var["is_tf"].to_numpy()] = 0.0
        return c, None, {"seconds": time.perf_counter() - t0}
    if method == "pidc":
        from pidc import pidc

        t0 = time.perf_counter()
        return pidc(x), None, {"seconds": time.perf_counter() - t0}
    if method == "random":
        return np.random.default_rng(seed).uniform(size=(x.shape[1],) * 2), None, {"seconds": 0.0}
    tfs = np.flatnonzero(a.var["is_tf"].to_numpy())
    py = counts.venv_python("regdiffusion" if method == "regdiffusion" else "grnboost2")
    with tempfile.TemporaryDirectory() as tmp:
        np.save(f"{tmp}/x.npy", x)
        np.save(f"{tmp}/tfs.npy", tfs)
        if method == "regdiffusion":
            cmd = [str(py), str(counts.HERE / "_regdiffusion.py"), f"{tmp}/x.npy", f"{tmp}/adj.npy", str(seed)]
        else:
            cmd = [str(py), str(counts.HERE / "_arboreto.py"), f"{tmp}/x.npy", f"{tmp}/adj.npy", str(seed),
                   method, f"{tmp}/tfs.npy"]
        sec, rss = counts.run_measured(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return np.load(f"{tmp}/adj.npy").astype(np.float64), None, {"seconds": sec, "peak_rss_gb": rss}


def _rows() -> list[dict]:
    return [json.loads(ln) for ln in OUT.read_text().splitlines() if ln.strip()] if OUT.exists() else []


def _update_rows(drop, new: list[dict]) -> None:
    """Replace the rows for which ``drop(row)`` is true by ``new``: read, filter and write under an
    exclusive lock (runs side by side keep each other's rows), atomically (a temporary file,
    then a rename)."""
    import fcntl

    with open(OUT.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows = [r for r in _rows() if not drop(r)] + new
        tmp = OUT.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        tmp.replace(OUT)


def _score_file(ds: str, method: str) -> Path:
    return SCORES / ds / f"{method}.npz"


def run(a: argparse.Namespace) -> None:
    print("command:", common.command())
    print("machine:", common.machine())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()
    for ds in a.datasets:
        if not (DATA / ds / "expression.h5ad").exists():
            raise SystemExit(f"{ds}: run `python {Path(__file__).name} fetch` first")
        universes = _universes(ds)
        done = {(r["dataset"], r["method"]) for r in _rows() if r.get("kind") == "method"}
        for method in a.methods:
            if (ds, method) in done and not a.force:
                continue
            load = os.getloadavg()[0]
            score, adj, rec = _scores(ds, method, a.seed)
            _score_file(ds, method).parent.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(_score_file(ds, method), score=score.astype(np.float32),
                                **({"adj": adj.astype(np.float32)} if adj is not None else {}))
            base = {"seed": a.seed, **rec, "load_before": round(load, 2), "commit": commit,
                    "date": time.strftime("%Y-%m-%d"), "machine": common.machine(), "command": common.command()}
            new = _method_rows(ds, method, universes, score, adj, base)
            for row in new:
                print(f"{ds} {row['truth']} {method}: EPR {row['epr']:.2f} AUPRC ratio {row['auprc_ratio']:.2f}"
                      + (f" edges {row['edges_scored']} P {row['precision']:.3f} R {row['recall']:.4f}"
                         if adj is not None else "") + f" {rec['seconds']:.0f}s", flush=True)
            _update_rows(lambda r, ds=ds, method=method: r["kind"] == "method" and r["dataset"] == ds
                         and r["method"] == method, new)
        _topk(ds, universes)


def _universes(ds: str) -> dict:
    import anndata as ad

    genes = np.asarray(ad.read_h5ad(DATA / ds / "expression.h5ad", backed="r").var_names).astype(str)
    return {t: Universe(DATA / ds / "truth" / f"{_slug(t)}.csv", genes) for t in DATASETS[ds]}


def _method_rows(ds: str, method: str, universes: dict, score: np.ndarray, adj: np.ndarray | None,
                 base: dict) -> list[dict]:
    """One row per truth: ``base`` (the run's own fields) with the ranking and graph metrics."""
    return [{"kind": "method", "dataset": ds, "truth": truth, "method": method, "n_true": u.n_true,
             "density": u.density, **u.ranking(score), **(u.graph(adj) if adj is not None else {}), **base}
            for truth, u in universes.items()]


def rescore() -> None:
    """Recompute every row's metrics from the kept scores (``_cache/scores/``), keeping each row's
    own fields (seconds, commit, command, ...): for a change of the scoring, not of a method."""
    rows, out = _rows(), []
    metric_keys = {"n_true", "density", *Universe.METRIC_KEYS}
    for ds in DATASETS:
        universes = _universes(ds)
        for method in METHODS:
            old = [r for r in rows if r["kind"] == "method" and r["dataset"] == ds and r["method"] == method]
            if not old or not _score_file(ds, method).exists():
                out += old
                continue
            z = np.load(_score_file(ds, method))
            base = {k: v for k, v in old[0].items() if k not in metric_keys and k not in ("kind", "dataset", "truth",
                                                                                          "method")}
            out += _method_rows(ds, method, universes, z["score"], z["adj"] if "adj" in z else None, base)
    _update_rows(lambda r: True, out)
    for ds in DATASETS:
        if any(_score_file(ds, m).exists() for m in METHODS):
            _topk(ds, _universes(ds))


def _topk(ds: str, universes: dict) -> None:
    """Rows ``kind="topk"``: each ranking method's precision at each kept graph's number of
    candidate-pair edges (the kept graph's own precision beside it). Only the (graph, method) rows
    whose two score files are in ``_cache/scores/`` are replaced; the others are kept as they are."""
    methods = [m for m in METHODS if _score_file(ds, m).exists()]
    loaded = {m: np.load(_score_file(ds, m)) for m in methods}
    new = []
    for gm in (m for m in methods if "adj" in loaded[m]):
        adj = loaded[gm]["adj"]
        for truth, u in universes.items():
            k = int(((adj != 0) & u.pairs).sum())
            for m in methods:
                new.append({"kind": "topk", "dataset": ds, "truth": truth, "graph": gm, "method": m, "k": k,
                            "precision": u.precision_at(loaded[m]["score"], k)})
    made = {(r["graph"], r["method"]) for r in new}
    _update_rows(lambda r: r["kind"] == "topk" and r["dataset"] == ds and (r["graph"], r["method"]) in made, new)


# ----------------------------------------------------------------------------- report
def report() -> None:
    rows = _rows()
    meth = [r for r in rows if r["kind"] == "method"]
    by = {(r["dataset"], r["truth"], r["method"]): r for r in meth}
    cells = sorted({(r["dataset"], r["truth"]) for r in meth}, key=lambda c: (c[1], c[0]))
    methods = [m for m in METHODS if any(r["method"] == m for r in meth)]
    baselines = [m for m in methods if m not in CAPE_SETS and m != "random"]
    out = ["Tables made by `python benchmarks/discover/real/real.py report` from `real.jsonl`; each row there "
           "records its command, commit, date, machine and the load before it.", ""]
    for metric, label in (("epr", "Early precision ratio (EPR)"), ("auprc_ratio", "AUPRC ratio")):
        out += [f"## {label}", "", "| dataset | truth | " + " | ".join(methods) + " | best baseline |",
                "|---|---|" + "---|" * (len(methods) + 1)]
        for ds, truth in cells:
            vals = {m: by[(ds, truth, m)][metric] for m in methods if (ds, truth, m) in by}
            best = max((vals[m] for m in baselines if m in vals), default=float("nan"))
            out.append(f"| {ds} | {truth} | " + " | ".join(
                (f"**{vals[m]:.2f}**" if m in vals and vals[m] >= best else f"{vals[m]:.2f}") if m in vals else "–"
                for m in methods) + f" | {best:.2f} |")
        out.append("")
    graphs = [m for m in methods if m in CAPE_SETS]
    topk = {(r["dataset"], r["truth"], r["graph"], r["method"]): r for r in rows if r["kind"] == "topk"}
    out += ["## The kept graph", "",
            "Edges among the candidate pairs, their precision and recall, the share of genes without any kept "
            "edge; beside it each baseline's precision at the same number of its own best candidate pairs.", "",
            "| dataset | truth | graph | edges (scored) | precision | recall | genes without edge | "
            + " | ".join(f"{b} top-k" for b in baselines) + " |", "|---|---|---|---|---|---|---|" + "---|" * len(baselines)]
    for ds, truth in cells:
        for gm in graphs:
            r = by.get((ds, truth, gm))
            if r is None:
                continue
            out.append(f"| {ds} | {truth} | {gm} | {r['edges']} ({r['edges_scored']}) | {r['precision']:.3f} | "
                       f"{r['recall']:.4f} | {r['genes_without_edge']:.2f} | " + " | ".join(
                           f"{topk[(ds, truth, gm, b)]['precision']:.3f}" if (ds, truth, gm, b) in topk else "–"
                           for b in baselines) + " |")
    secs = {}
    for r in meth:
        secs.setdefault((r["dataset"], r["method"]), r["seconds"])
    out += ["", "## Seconds per dataset (whole run, 2 shared cores)", "",
            "| dataset | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
    for ds in sorted({d for d, _ in secs}):
        out.append(f"| {ds} | " + " | ".join(f"{secs[(ds, m)]:.0f}" if (ds, m) in secs else "–" for m in methods) + " |")
    out += _targets(by, topk, cells, baselines)
    start, end = "<!-- real: begin -->", "<!-- real: end -->"
    text = RESULTS.read_text() if RESULTS.exists() else f"# Step I on BEELINE's real datasets\n\n{start}\n{end}\n"
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    tmp = RESULTS.with_suffix(".md.tmp")
    tmp.write_text(f"{head}{start}\n" + "\n".join(out) + f"\n{end}{tail}")
    tmp.replace(RESULTS)
    _figure(by, cells, methods)
    print(f"wrote {RESULTS} and {FIGURE}")


#: the truths the targets are judged on (cell-type-specific ChIP-seq: every method ≈ random, as in BEELINE)
TARGET_TRUTHS = ("STRING", "non-specific ChIP-seq", "LOF/GOF")


def _targets(by: dict, topk: dict, cells: list, baselines: list) -> list[str]:
    """The targets of Step I on real data, each Step I variant against the best baseline per cell."""
    judged = [(d, t) for d, t in cells if t in TARGET_TRUTHS]
    out = ["", "## Targets", "",
           f"Judged on {', '.join(TARGET_TRUTHS)} ({len(judged)} dataset × truth cells); \"best baseline\" is the "
           f"best of {', '.join(baselines)} in each cell.", "",
           "| Step I | EPR ≥ best in every cell | median EPR / best | AUPRC ratio ≥ best in every cell | "
           "median AUPRC ratio / best | hHEP-1000 STRING EPR (≥ 3.97) | kept-graph precision / best top-k "
           "(median; ≥ 1.5) | genes with an edge (min over sets; ≥ 0.30) | Step I seconds (max; ≤ 120) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for gm in CAPE_SETS:
        if not any((d, t, gm) in by for d, t in judged):
            continue
        cols = []
        for metric in ("epr", "auprc_ratio"):
            ratios = [by[(d, t, gm)][metric] / max(by[(d, t, b)][metric] for b in baselines if (d, t, b) in by)
                      for d, t in judged if (d, t, gm) in by and any((d, t, b) in by for b in baselines)]
            cols += [f"{sum(r >= 1 for r in ratios)} of {len(ratios)}", f"{np.median(ratios):.2f}"]
        h = by.get(("hHEP-1000", "STRING", gm))
        best_topk = {(d, t): max(topk[(d, t, gm, b)]["precision"] for b in baselines if (d, t, gm, b) in topk)
                     for d, t in judged if any((d, t, gm, b) in topk for b in baselines)}
        prec = [by[(d, t, gm)]["precision"] / best_topk[(d, t)] for d, t in judged
                if (d, t, gm) in by and best_topk.get((d, t), 0) > 0]
        cover = [1 - r["genes_without_edge"] for (d, t, m), r in by.items() if m == gm]
        secs = [r.get("step1_seconds", float("nan")) for (d, t, m), r in by.items() if m == gm]
        cols += [f"{h['epr']:.2f}" if h else "–", f"{np.median(prec):.2f}" if prec else "–",
                 f"{min(cover):.2f}", f"{np.nanmax(secs):.0f}"]
        out.append(f"| {gm} | " + " | ".join(cols) + " |")
    return out


def _figure(by: dict, cells: list, methods: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(4 + 1.1 * len(methods) * 2, 0.45 * len(cells) + 2))
    for ax, (metric, label) in zip(axes, (("epr", "EPR"), ("auprc_ratio", "AUPRC ratio")), strict=True):
        v = np.array([[by[(d, t, m)][metric] if (d, t, m) in by else np.nan for m in methods] for d, t in cells])
        im = ax.imshow(v, cmap="viridis", aspect="auto")
        for (i, j), val in np.ndenumerate(v):
            if np.isfinite(val):
                ax.text(j, i, f"{val:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if val < np.nanmean(v) else "black")
        ax.set_xticks(range(len(methods)), methods, rotation=45, ha="right")
        ax.set_yticks(range(len(cells)), [f"{d} · {t}" for d, t in cells], fontsize=7)
        ax.set_title(f"{label} (1 = random)")
        fig.colorbar(im, ax=ax, shrink=0.7)
    fig.tight_layout()
    fig.savefig(FIGURE, dpi=120)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch")
    f.add_argument("--mirror", type=Path, default=None, help="a folder of bare copies, <owner>+<name>/repo")
    r = sub.add_parser("run")
    r.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    r.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--force", action="store_true", help="rerun methods that have rows")
    sub.add_parser("rescore", help="recompute the rows' metrics from the kept scores")
    sub.add_parser("report")
    args = ap.parse_args()
    {"fetch": lambda: fetch(args.mirror), "run": lambda: run(args), "rescore": rescore, "report": report}[args.cmd]()
