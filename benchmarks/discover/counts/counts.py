"""Step I on UMI counts with a known graph, beside the GRN tools users run.

Question: on counts — the data most users bring — does Step I's default keep a graph that grows
with the cells, is mostly right, and ranks pairs better than the tools users run today?

Data: two count generators with a known DAG, 2,000 genes (preprocessing keeps them all as HVGs,
so the truth is the whole graph), N ∈ {400, 1,000, 3,000, 10,000, 30,000} cells, seeds 0–2:
``simulated_grn_counts`` (ours: TF-like hubs, tanh mechanisms on log activities, cell types on
the roots, negative-binomial counts) and ``simulated_hill_counts`` (after SERGIO's description:
Hill kinetics on the linear scale, intrinsic noise that propagates, outlier genes, library size,
dropout, Poisson); and a third that is not ours, ``sergio``: SERGIO itself (Dibaeinia & Sinha
2020, the authors' PyPI release in its own virtual environment, ``_sergio.py``): 400 genes drawn
from its E. coli reference network (about 355 in the graph), 9 cell types, its steady-state
simulation and technical noise at the authors' notebook settings, N ∈ {400, 1,000, 3,000, 10,000}.

Methods, side by side on the same files:
- ``cape``: ``cape run FILE --until discover`` with every default (algorithm "regression" for
  single-cell data: library size as covariate, counting-noise correction,
  minimum-effect likelihood-ratio edge test, greedy likelihood DAG, repeated on 8 random splits
  of the cells with a majority vote on the edges);
- ``cape-jk``: the default with the jackknife re-test of the voted edges (f4b2c2d) applied
  without perturbation labels (``cape_pipeline.causal.regression.jackknife``; the default applies it only
  where labels are read). Measured on 2026-11-27 and not made the default; check out 6cf31da
  to rerun;
- ``cape-split1``: the same on one split of the cells (``discover.regression.n_splits=1``), the default
  until 802c626 (2026-11-27);
- ``cape-states``: the previous default (cell states and library size, no noise correction);
  ``learned``: the default before that, ``--set discover.algorithm=learned --set discover.covariates=none``;
- ablations (``--ablations``), each naming every option it sets (``CAPE_SETS``): covariates
  (none, states only, library only) with and without the noise correction, half and twice the
  effect floor (``cape-min-effect-0.0015`` / ``-0.006``);
- ``pearson``: |Pearson r| of log-normalized data (scanpy ``normalize_total`` + ``log1p``);
- ``regdiffusion``: RegDiffusion (Zhu & Slonim 2024; PyPI ``regdiffusion``, CPU, its defaults:
  1,000 steps) in its own virtual environment;
- ``grnboost2``: GRNBoost2 (arboreto, the GENIE3 family; its own virtual environment with
  ``dask<2024`` pinned, as users do) on all genes as regulators, on a random subsample of at most
  1,000 cells (``TREE_MAX_CELLS``: it takes 8.8 min per 1,000 cells at 2,000 genes here).

Metrics as BEELINE reports them (Pratapa et al. 2020), over ordered pairs without self-loops:
AUPRC, AUPRC ratio over a random predictor (the edge density), early precision ratio (precision
of the top-k pairs, k = number of true edges, over the density); skeleton AUPRC (unordered
pairs); for methods that return a graph, its precision, recall, F1, edges and share of genes
without an edge; wall seconds of the whole run and peak RSS.

Usage::

    python benchmarks/discover/counts/counts.py setup          # the baselines' and SERGIO's environments
    python benchmarks/discover/counts/counts.py run [--generators grn hill] [--cells ...]
        [--seeds 0 1 2] [--methods cape learned pearson regdiffusion grnboost2] [--ablations]
        [--data-dir DIR]                                        # appends to counts.jsonl (resumes)
    python benchmarks/discover/counts/counts.py report         # RESULTS.md tables and counts.png

The baselines' and SERGIO's environments live in ``_cache/`` (not tracked); ``_regdiffusion.py``,
``_arboreto.py`` and ``_sergio.py`` are the runners that this script starts inside them.
"""

from __future__ import annotations

import argparse
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
import common  # noqa: E402

OUT = HERE / "counts.jsonl"
RESULTS = HERE / "RESULTS.md"
VENVS = HERE / "_cache"
GENES = 2000
#: Every ablation names all of the options it changes, so that its rows keep their meaning when the
#: default moves. ``STATES`` / ``NO_THINNING`` spell out the previous default (fcf5c10, 2026-11-26: cell
#: states and library size, no counting-noise correction); rows run as "cape" under that default
#: were relabelled "cape-states" when the default changed (field ``relabelled_from``), and rows run
#: as "cape" with one split of the cells were relabelled "cape-split1" when 802c626 (2026-11-27) made the
#: split vote (``discover.n_splits`` = 8) the default. The other ablations were all run with one split.
STATES, LIBRARY, NONE = ("discover.covariates=states+library",), ("discover.covariates=library",), ("discover.covariates=none",)
NO_THINNING, THINNING = ("discover.regression.measurement_error=none",), ("discover.regression.measurement_error=thinning",)
CAPE_SETS = {
    "cape": [],
    "cape-split1": ["discover.regression.n_splits=1"],
    "learned": ["discover.algorithm=learned", *NONE],
    "cape-states": [*STATES, *NO_THINNING],
    "cape-no-covariates": [*NONE, *NO_THINNING],
    "cape-states-only": ["discover.covariates=states", *NO_THINNING],
    "cape-library-only": [*LIBRARY, *NO_THINNING],
    "learned-covariates": ["discover.algorithm=learned", *STATES],
    "cape-states-min-effect-0.0015": [*STATES, *NO_THINNING, "discover.regression.min_effect=0.0015"],
    "cape-states-min-effect-0.006": [*STATES, *NO_THINNING, "discover.regression.min_effect=0.006"],
    "cape-states-thinning": [*STATES, *THINNING],
    "cape-thinning-no-covariates": [*NONE, *THINNING],
    "cape-thinning-states-only": ["discover.covariates=states", *THINNING],
    "cape-thinning-library-only": [*LIBRARY, *THINNING],
    "cape-states-thinning-min-effect-0.0015": [*STATES, *THINNING, "discover.regression.min_effect=0.0015"],
    "cape-states-thinning-min-effect-0.006": [*STATES, *THINNING, "discover.regression.min_effect=0.006"],
    "cape-min-effect-0.0015": ["discover.regression.min_effect=0.0015"],
    "cape-min-effect-0.006": ["discover.regression.min_effect=0.006"],
    "cape-no-thinning": [*LIBRARY, *NO_THINNING],
    "cape-no-thinning-min-effect-0.0015": [*LIBRARY, *NO_THINNING, "discover.regression.min_effect=0.0015"],
    "cape-k10": [*LIBRARY, *NO_THINNING, "discover.regression.n_candidates=10"],
    # the same counts handed over as a scanpy user often has them: X = log1p(normalize_total(counts)),
    # no counts layer (LOGNORM_INPUT); with the counts read back from X (the default) and without
    "cape-lognorm": [],
    "cape-lognorm-no-recovery": ["preprocess.recover_counts=false"],
}
#: arms that read the generator's file as log-normalized values only (:func:`lognorm_file`)
LOGNORM_INPUT = ("cape-lognorm", "cape-lognorm-no-recovery")
ABLATIONS = ("cape-states", "cape-no-covariates", "cape-states-only", "cape-library-only", "cape-thinning-no-covariates",
             "cape-thinning-library-only", "cape-min-effect-0.0015", "cape-min-effect-0.006")
#: GRNBoost2 runs on a random subsample of at most this many cells at 2,000 genes (8.8 min per
#: 1,000 cells there on the 2-core machine: the full 30,000-cell sets would take hours per run);
#: its cost grows as cells × genes², so a panel of M genes gets TREE_MAX_CELLS · (2,000 / M)²
TREE_MAX_CELLS = 1000
EXTERNAL = {
    "regdiffusion": ("regdiffusion", ["torch==2.13.0", "regdiffusion==0.2.3"]),
    "grnboost2": ("arboreto", ["arboreto==0.1.6", "dask[distributed]<2024", "distributed<2024", "numpy<2",
                               "pandas<2.2", "scikit-learn"]),
}
#: simulators that are not ours, each in its own virtual environment (SERGIO 1.9.3 needs pandas < 2.2)
SIMULATORS = {"sergio": ("sergio", ["sergio-scsim==1.9.3", "numpy<2", "pandas<2.2"])}
#: SERGIO: genes drawn from its E. coli reference network, and cell types (as its DS sets)
SERGIO_GENES, SERGIO_TYPES = 400, 9
#: options every cape run on a generator's files takes: SERGIO's 355-gene panel has about one
#: count per gene and cell, so scanpy's whole-transcriptome QC (200 genes per cell) would drop
#: every cell; only empty cells are dropped
GENERATOR_SETS = {"sergio": ["preprocess.min_genes=1"]}


# ----------------------------------------------------------------------------- data
def simulate(gen: str, n: int, seed: int, data_dir: Path) -> Path:
    """The generator's counts as ``.h5ad`` (written once, reused).

    ``"<gen>-hidden"``: the same counts with half of the regulators (genes with a child) removed,
    chosen at random (seeded), and the truth restricted to the genes left: the regulators a
    user's HVG selection leaves out act as hidden common causes of their children, which
    covary within and between cell states without an edge among them.
    """
    from cape_pipeline.datasets import TRUE_DAG_KEY, simulated_grn_counts, simulated_hill_counts

    path = data_dir / f"{gen}_{n}x{SERGIO_GENES if gen == 'sergio' else GENES}_s{seed}.h5ad"
    if path.exists():
        return path
    if gen == "sergio":
        a = _sergio(n, seed)
    elif gen.endswith("-hidden"):
        import anndata as ad

        a = ad.read_h5ad(simulate(gen.removesuffix("-hidden"), n, seed, data_dir))
        regulators = np.flatnonzero(np.asarray((a.varp[TRUE_DAG_KEY] != 0).sum(axis=1)).ravel() > 0)
        hidden = np.random.default_rng(seed).choice(regulators, len(regulators) // 2, replace=False)
        a = a[:, np.setdiff1d(np.arange(a.n_vars), hidden)].copy()
    else:
        a = (simulated_grn_counts if gen == "grn" else simulated_hill_counts)(n, GENES, seed=seed)
    tmp = path.with_suffix(".tmp.h5ad")
    a.write_h5ad(tmp)
    tmp.rename(path)
    return path


def _sergio(n: int, seed: int):
    """SERGIO's counts (``_sergio.py`` in its own environment) as AnnData with the true DAG."""
    import anndata as ad
    import pandas as pd
    import scipy.sparse as sp

    py = venv_python("sergio")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([str(py), str(HERE / "_sergio.py"), str(SERGIO_GENES), str(n), str(SERGIO_TYPES), str(seed),
                        f"{tmp}/s.npz"], check=True)
        z = np.load(f"{tmp}/s.npz")
        genes, edges, counts, types = z["genes"], z["edges"], z["counts"], z["cell_type"]
    index = {g: i for i, g in enumerate(genes)}
    m = len(genes)
    truth = sp.csr_matrix((np.ones(len(edges)), ([index[r] for r in edges[:, 0]], [index[t] for t in edges[:, 1]])),
                          shape=(m, m))
    a = ad.AnnData(sp.csr_matrix(counts.astype(np.float32)), obs=pd.DataFrame(
        {"cell_type": pd.Categorical(types.astype(str))}, index=[f"cell{i}" for i in range(len(types))]),
        var=pd.DataFrame(index=genes))
    a.varp["true_dag"] = truth
    return a


def lognorm(path: Path) -> tuple[np.ndarray, np.ndarray, object]:
    """(log-normalized dense float32 X, gene names, true DAG csr) of a generator file, without its
    empty cells (as cape's QC drops them: RegDiffusion's per-cell scaling divides by zero there
    and its loss turns NaN)."""
    import anndata as ad
    import scanpy as sc

    a = ad.read_h5ad(path)
    a = a[np.asarray(a.X.sum(axis=1)).ravel() > 0].copy()
    truth = a.varp["true_dag"].tocsr()
    sc.pp.normalize_total(a, target_sum=1e4)
    sc.pp.log1p(a)
    x = a.X.toarray() if hasattr(a.X, "toarray") else np.asarray(a.X)
    return x.astype(np.float32), np.asarray(a.var_names).astype(str), truth


def lognorm_file(path: Path) -> Path:
    """The generator file with ``X`` = ``log1p(normalize_total(counts, 1e4))`` (scanpy) and no
    counts anywhere, beside it as ``<stem>_lognorm.h5ad`` (written once, atomically)."""
    import anndata as ad
    import scanpy as sc

    out = path.with_name(path.stem + "_lognorm.h5ad")
    if not out.exists():
        a = ad.read_h5ad(path)
        sc.pp.normalize_total(a, target_sum=1e4)
        sc.pp.log1p(a)
        a.uns.pop("log1p", None)
        tmp = out.with_suffix(".tmp.h5ad")
        a.write_h5ad(tmp)
        tmp.rename(out)
    return out


# ----------------------------------------------------------------------------- metrics
def ranking_metrics(score: np.ndarray, truth) -> dict[str, float]:
    """BEELINE-style AUPRC, AUPRC ratio, early precision ratio (directed) and skeleton AUPRC."""
    from sklearn.metrics import average_precision_score

    m = score.shape[0]
    t = truth.toarray() != 0
    s = np.abs(np.nan_to_num(np.asarray(score, dtype=np.float64)))
    off = ~np.eye(m, dtype=bool)
    y, sc = t[off], s[off]
    density = y.mean()
    ap = average_precision_score(y, sc)
    k = int(y.sum())
    top = np.argpartition(-sc, k)[:k]
    iu = np.triu_indices(m, 1)
    ys, ss = (t | t.T)[iu], np.maximum(s, s.T)[iu]
    ap_sk = average_precision_score(ys, ss)
    return {
        "auprc": float(ap), "auprc_ratio": float(ap / density), "epr": float(y[top].mean() / density),
        "auprc_skeleton": float(ap_sk), "auprc_skeleton_ratio": float(ap_sk / ys.mean()),
    }


def graph_metrics(adj, truth) -> dict[str, float]:
    """The kept graph against the truth (cape_pipeline.causal.dag_metrics) and its isolated share."""
    from cape_pipeline.causal.graph import degree
    from cape_pipeline.causal.metrics import dag_metrics

    mm = dag_metrics(adj, truth)
    return {
        "edges": int(mm["nnz"]), "precision": mm["precision"], "recall": mm["recall"], "f1": mm["f1"],
        "skeleton_f1": mm["skeleton_f1"], "isolated_share": float((degree(adj) == 0).mean()),
    }


def run_measured(cmd: list[str], **kw) -> tuple[float, float]:
    """Run a command; (wall seconds, peak RSS of the process tree's largest child in GiB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, **kw)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return time.perf_counter() - t0, usage.ru_maxrss / 2**20


# ----------------------------------------------------------------------------- methods
def cape_graph(sets: list[str] | tuple, path: Path, names: np.ndarray) -> tuple:
    """``cape run FILE --until discover`` with ``--set`` options ``sets``: (kept DAG as a csr matrix
    and every scored pair's score as a dense ``(M, M)`` array, both indexed as ``names``; Step I's
    params; wall seconds; peak RSS in GiB). Pairs that Step I did not score are 0."""
    import scipy.sparse as sp

    from cape_pipeline.causal.graph import CausalGraph

    with tempfile.TemporaryDirectory() as tmp:
        cape = Path(sys.executable).with_name("cape")
        cmd = [str(cape), "run", str(path), "--until", "discover", "--workdir", f"{tmp}/w", "--out", f"{tmp}/o"]
        for s in sets:
            cmd += ["--set", s]
        sec, rss = run_measured(cmd, stdout=subprocess.DEVNULL)
        g = CausalGraph.read_parquet(Path(tmp) / "o" / "dag.parquet")
    index = {nm: i for i, nm in enumerate(names)}
    pos = np.array([index[f] for f in g.feature_names.astype(str)])
    m = len(names)
    coo = g.adjacency.tocoo()
    adj = sp.csr_matrix((coo.data, (pos[coo.row], pos[coo.col])), shape=(m, m))
    score = np.zeros((m, m))
    if g.edge_scores is not None and len(g.edge_scores):
        es = g.edge_scores
        si = np.array([index[v] for v in es["source"].astype(str)])
        ti = np.array([index[v] for v in es["target"].astype(str)])
        np.maximum.at(score, (si, ti), es["score"].to_numpy(dtype=float))
    else:  # the learned algorithm exports its kept DAG's strengths only
        score[pos[coo.row], pos[coo.col]] = np.abs(coo.data)
    return adj, score, g.params, sec, rss


def run_cape(method: str, path: Path, names: np.ndarray, truth, extra: list[str] | tuple = ()) -> dict:
    adj, score, p, sec, rss = cape_graph([*CAPE_SETS[method], *extra], path, names)
    return {
        **ranking_metrics(score, truth), **graph_metrics(adj, truth), "seconds": sec, "peak_rss_gb": rss,
        "step1_seconds": float(p.get("seconds", float("nan"))), "support": p.get("support"),
        "covariates_used": p.get("covariates_used"), "edge_rule": p.get("edge_rule"),
    }


def run_pearson(x: np.ndarray, truth) -> dict:
    t0 = time.perf_counter()
    z = (x - x.mean(0)) / np.maximum(x.std(0), 1e-12)
    c = np.abs(z.T @ z / z.shape[0])
    np.fill_diagonal(c, 0.0)
    return {**ranking_metrics(c, truth), "seconds": time.perf_counter() - t0}


def venv_python(name: str) -> Path:
    """The Python of a baseline's or simulator's own environment; exits when ``setup`` has not made it."""
    py = VENVS / f"venv-{EXTERNAL.get(name, SIMULATORS.get(name))[0]}" / "bin" / "python"
    if not py.exists():
        raise SystemExit(f"{name}: run `python {Path(__file__).name} setup {name}` first ({py} missing)")
    return py


def run_external(method: str, x: np.ndarray, truth, seed: int) -> dict:
    py = venv_python(method)
    extra = {}
    max_cells = int(TREE_MAX_CELLS * (GENES / x.shape[1]) ** 2)
    if method == "grnboost2" and x.shape[0] > max_cells:
        rows = np.sort(np.random.default_rng(seed).choice(x.shape[0], max_cells, replace=False))
        x = x[rows]
        extra["cells_used"] = max_cells
    with tempfile.TemporaryDirectory() as tmp:
        np.save(f"{tmp}/x.npy", x)
        script = HERE / ("_arboreto.py" if method == "grnboost2" else f"_{method}.py")
        sec, rss = run_measured([str(py), str(script), f"{tmp}/x.npy", f"{tmp}/adj.npy", str(seed)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        adj = np.load(f"{tmp}/adj.npy").astype(np.float64)
    return {**ranking_metrics(adj, truth), "seconds": sec, "peak_rss_gb": rss, **extra}


# ----------------------------------------------------------------------------- report
LABELS = {
    "cape": "cape (default)",
    "cape-jk": "cape + jackknife re-test without labels (f4b2c2d, 2026-11-27, not the default)",
    "cape-split1": "cape, one split of the cells (default until 802c626, 2026-11-27)",
    "cape-s20": "cape (default until a2a5fc7, 2026-11-27: corrected spectrum floored along the identity)",
    "cape-states": "cape + states, no noise correction (previous default)",
    "learned": "learned (default before that)", "pearson": "|Pearson|",
    "regdiffusion": "RegDiffusion", "grnboost2": "GRNBoost2",
    "cape-no-covariates": "cape, no covariates, no noise correction",
    "cape-states-only": "cape, states only, no noise correction",
    "cape-library-only": "cape, library size only, no noise correction",
    "learned-covariates": "learned + states + library size",
    "cape-states-min-effect-0.0015": "cape + states, min_effect 0.0015", "cape-states-min-effect-0.006": "cape + states, min_effect 0.006",
    "cape-states-thinning": "cape + states + noise correction",
    "cape-thinning-no-covariates": "cape, no covariates, noise correction",
    "cape-thinning-states-only": "cape, states only, noise correction",
    "cape-thinning-library-only": "cape, library size only, noise correction",
    "cape-states-thinning-min-effect-0.0015": "cape + states + noise correction, min_effect 0.0015",
    "cape-states-thinning-min-effect-0.006": "cape + states + noise correction, min_effect 0.006",
    "cape-min-effect-0.0015": "cape, min_effect 0.0015", "cape-min-effect-0.006": "cape, min_effect 0.006",
    "cape-no-thinning": "cape without the noise correction (the default below 3,000 cells until e954804)",
    "cape-no-thinning-min-effect-0.0015": "cape without the noise correction, min_effect 0.0015",
    "cape-k10": "cape, k = 10 candidates per round (default until 341a94c, 2026-11-29)",
    "cape-lognorm": "cape on log1p(normalize_total) X without counts (the counts read back from X)",
    "cape-lognorm-no-recovery": "cape on log1p(normalize_total) X without counts, not read back (before that)",
}
GEN_NAMES = {"grn": "simulated_grn_counts (ours)", "hill": "simulated_hill_counts (after SERGIO)",
             "grn-hidden": "simulated_grn_counts, half of the regulators hidden",
             "hill-hidden": "simulated_hill_counts, half of the regulators hidden",
             "sergio": "SERGIO 1.9.3 (the authors' code)"}
GENERATORS = tuple(GEN_NAMES)


def _records() -> list[dict]:
    return [json.loads(line) for line in OUT.read_text().splitlines()] if OUT.exists() else []


def _summary(recs: list[dict]) -> dict[tuple, dict]:
    """Mean and sd over seeds per (generator, cells, method), with the number of seeds."""
    groups: dict[tuple, list[dict]] = {}
    for r in recs:
        groups.setdefault((r["generator"], r["cells"], r["method"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        agg = {"n": len(rs)}
        for f in ("auprc", "auprc_ratio", "epr", "auprc_skeleton", "edges", "precision", "recall", "f1",
                  "isolated_share", "seconds", "step1_seconds", "peak_rss_gb", "load_before"):
            v = [r[f] for r in rs if r.get(f) is not None]
            if v:
                agg[f] = (float(np.mean(v)), float(np.std(v)))
        out[key] = agg
    return out


def _fmt(a: dict, f: str, spec: str = ".3f") -> str:
    if f not in a:
        return "–"
    mu, sd = a[f]
    return f"{mu:{spec}}" + (f" ± {sd:{spec}}" if a["n"] > 1 else "")


def report() -> None:
    """Write the generated blocks of RESULTS.md and counts.png from counts.jsonl."""
    recs = _records()
    summ = _summary(recs)
    gens = sorted({k[0] for k in summ})
    cells = sorted({k[1] for k in summ})
    blocks = []
    for gen in gens:
        lines = [f"**{GEN_NAMES.get(gen, gen)}** (mean ± sd over seeds; n = seeds)", "",
                 "| cells | method | n | AUPRC | ratio | EPR | skeleton AUPRC | edges | precision | recall | F1 | "
                 "no edge | seconds | peak GB | load |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for n in cells:
            for method in LABELS:
                a = summ.get((gen, n, method))
                if a is None:
                    continue
                lines.append(
                    f"| {n:,} | {LABELS[method].replace('|', chr(92) + '|')} | {a['n']} | {_fmt(a, 'auprc', '.4f')} | {_fmt(a, 'auprc_ratio', '.0f')} | "
                    f"{_fmt(a, 'epr', '.0f')} | {_fmt(a, 'auprc_skeleton', '.3f')} | {_fmt(a, 'edges', '.0f')} | "
                    f"{_fmt(a, 'precision')} | {_fmt(a, 'recall')} | {_fmt(a, 'f1')} | {_fmt(a, 'isolated_share', '.2f')} | "
                    f"{_fmt(a, 'seconds', '.0f')} | {_fmt(a, 'peak_rss_gb', '.2f')} | {_fmt(a, 'load_before', '.1f')} |"
                )
        blocks.append("\n".join(lines))
    text = RESULTS.read_text() if RESULTS.exists() else "<!-- counts: begin -->\n<!-- counts: end -->\n"
    start, end = "<!-- counts: begin -->", "<!-- counts: end -->"
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    body = "\n\n".join(blocks)
    tmp = RESULTS.with_suffix(".md.tmp")
    tmp.write_text(f"{head}{start}\n{body}\n{end}{tail}")
    tmp.replace(RESULTS)
    _figure(summ, [g for g in gens if not g.endswith("-hidden")], cells)


def _figure(summ: dict, gens: list[str], cells: list[int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # the defaults and the baselines, one colour each; the ablations are in the tables
    shown = {"cape": "C0", "cape-split1": "C6", "cape-states": "C1", "learned": "C2", "pearson": "C3",
             "regdiffusion": "C4", "grnboost2": "C5"}
    fig, axes = plt.subplots(len(gens), 3, figsize=(13, 3.6 * len(gens)), squeeze=False)
    for i, gen in enumerate(gens):
        for method, color in shown.items():
            pts = [(n, summ[(gen, n, method)]) for n in cells if (gen, n, method) in summ]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            style = {"color": color, "label": LABELS[method], "ls": "-" if method.startswith("cape") else ":"}
            axes[i, 0].plot(xs, [p[1]["auprc_ratio"][0] for p in pts], "o", **style)
            if "edges" in pts[0][1]:
                axes[i, 1].plot(xs, [p[1]["precision"][0] for p in pts], "o", **style)
                axes[i, 2].plot(xs, [p[1]["recall"][0] for p in pts], "o", **style)
        for j, what in enumerate(("AUPRC ratio over random", "precision of the kept graph", "recall of the kept graph")):
            ax = axes[i, j]
            ax.set_xscale("log")
            ax.set_xlabel("cells")
            ax.set_title(f"{GEN_NAMES.get(gen, gen)}: {what}", fontsize=9)
            if j == 1:
                ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(HERE / "counts.png", dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------- commands
def setup(only: list[str] | None = None) -> None:
    """Create each baseline's and simulator's virtual environment under ``_cache/`` from its PyPI
    release (``only``: those named)."""
    VENVS.mkdir(exist_ok=True)
    for key, (name, reqs) in {**EXTERNAL, **SIMULATORS}.items():
        if only and key not in only:
            continue
        venv = VENVS / f"venv-{name}"
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        py = str(venv / "bin" / "python")
        if name == "regdiffusion":  # the CPU build of torch first (a bare torch pulls CUDA wheels)
            subprocess.run([py, "-m", "pip", "install", "-q", reqs[0]], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", *reqs], check=True)
        print(name, "ready:", py)


def done_keys() -> set[tuple]:
    if not OUT.exists():
        return set()
    return {(r["generator"], r["cells"], r["seed"], r["method"]) for r in map(json.loads, OUT.read_text().splitlines())}


def run(a: argparse.Namespace) -> None:
    data_dir = Path(a.data_dir or os.environ.get("CAPE_BENCH_DATA", Path(tempfile.gettempdir()) / "cape_counts"))
    data_dir.mkdir(parents=True, exist_ok=True)
    methods = list(a.methods) + (list(ABLATIONS) if a.ablations else [])
    print("command:", common.command())
    print("machine:", common.machine())
    done = done_keys()
    provenance = common.row_provenance(HERE)
    for gen in a.generators:
        for n in a.cells:
            for seed in a.seeds:
                todo = [mt for mt in methods if (gen, n, seed, mt) not in done]
                if not todo:
                    continue
                path = simulate(gen, n, seed, data_dir)
                x, names, truth = lognorm(path)
                for method in todo:
                    base = provenance()
                    if method in CAPE_SETS:
                        src = lognorm_file(path) if method in LOGNORM_INPUT else path
                        rec = run_cape(method, src, names, truth, GENERATOR_SETS.get(gen, ()))
                    elif method == "pearson":
                        rec = run_pearson(x, truth)
                    else:
                        rec = run_external(method, x, truth, seed)
                    rec = {"generator": gen, "cells": n, "genes": len(names), "seed": seed, "method": method,
                           "n_true": int(truth.nnz), **rec, **base}
                    with OUT.open("a") as fh:
                        fh.write(json.dumps(rec) + "\n")
                    print(f"{gen} {n} s{seed} {method}: AUPRC {rec['auprc']:.4f} (x{rec['auprc_ratio']:.0f}) "
                          f"EPR {rec['epr']:.0f}" + (f" edges {rec['edges']} P {rec['precision']:.3f} "
                          f"R {rec['recall']:.3f}" if "edges" in rec else "") + f" {rec['seconds']:.0f}s", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("setup")
    st.add_argument("only", nargs="*", choices=[*EXTERNAL, *SIMULATORS], help="only these (default: all)")
    r = sub.add_parser("run")
    r.add_argument("--generators", nargs="+", default=["grn", "hill"], choices=GENERATORS)
    r.add_argument("--cells", type=int, nargs="+", default=[1000, 3000, 10000, 30000])
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    r.add_argument("--methods", nargs="+", default=["cape", "pearson", "regdiffusion", "grnboost2", "learned"],
                   choices=[*CAPE_SETS, "pearson", *EXTERNAL])
    r.add_argument("--ablations", action="store_true", help="also the default's ablations (covariates, support)")
    r.add_argument("--data-dir", default=None)
    sub.add_parser("report")
    args = ap.parse_args()
    if args.cmd == "setup":
        setup(args.only)
    elif args.cmd == "run":
        run(args)
    else:
        report()
