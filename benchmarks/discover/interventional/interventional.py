"""Step I on perturbation screens: observational vs interventional, beside SDCD.

Question: when the cells carry perturbation labels (Perturb-seq), does Step I's use of them as
interventions give a better graph — more true edges, the right directions, edges whose parent's
perturbation shifts the child in held-out cells — and how does it compare with SDCD, which
takes the same intervention masks?

Data (``cape_pipeline.datasets.simulate_perturbation_data``: a scale-free DAG, MLP mechanisms,
``do()`` interventions on the latent SEM, Poisson counts, log1p), seeds 0–2:

- ``norman``: Norman et al.'s size — 200 genes, 105 single and 131 double perturbations
  (CRISPRa, do = +3), 20 cells each, 1,000 control cells;
- ``replogle``: a Replogle-like knockdown screen — 2,000 genes, 400 genes knocked down one at a
  time (CRISPRi, do = −3), 30 cells each, 3,000 control cells.
- ``hill``: a second generator, ``simulated_hill_counts`` (SERGIO-like Hill kinetics, cell types,
  library sizes, dropout, Poisson counts): 400 genes, 4,000 control cells, 40 TFs knocked down
  (CRISPRi, 90 % of production removed) in 80 cells each; the counts go through ``pp.preprocess``
  as a user's would (so the default regresses out the library size and corrects for
  counting noise).
- ``avici``: a generator that is not ours, AVICI's SERGIO simulator (Lorch et al. 2022; the
  authors' PyPI release ``avici==1.0.7``, MIT, in its own virtual environment made by ``setup``;
  ``_avici.py``), whose knockouts set the gene's production to zero: a 400-gene module of the
  E. coli RegulonDB network, the authors' E. coli mechanism (10 cell types) and their 10x
  technical noise (library, dropout, Poisson UMI counts); every regulator of the module (38–39,
  the genes with a child; at most 40, the most children first) knocked out in 100 cells each
  beside 2,000 controls; the counts go through ``pp.preprocess`` as ``hill``'s do.
- ``boolode-gsd``, ``boolode-hsc``, ``boolode-vsc``, ``boolode-mcad``: a second generator that is
  not ours, BoolODE (Pratapa et al. 2020, the simulator of BEELINE; the authors' source at
  ba8884a, GPL-3.0, not on PyPI: ``setup`` clones it into ``_cache/`` and makes its own virtual
  environment; ``_boolode.py``), on BEELINE's four curated Boolean models (gonadal sex
  determination, 19 genes; haematopoietic stem cell, 11; ventral spinal cord, 8; mammalian
  cortical area development, 5) with their published settings. Every gene with a target is
  knocked out (transcription rate and initial mRNA 0) in 200 cells, beside 2,000 controls; one
  cell per simulated trajectory at a uniformly drawn time point, as BEELINE samples BoolODE. The
  truth is the Boolean rules' regulator → target pairs (cycles included, self-loops left out);
  the simulated mRNA is used as BEELINE gives it to the methods (no counts, no ``log1p``).

Half of each condition's cells are held out (seeded); the graph is fitted on the other half.

Methods, on the same cells:

- ``cape-obs``: ``discover(algorithm="regression", regression={"interventions": "none"})``, every other option
  default (no covariates on these log counts without library sizes): what the pipeline does
  with single-cell data whose labels it ignores;
- ``cape-int``: the same with the labels read from ``obs["condition"]`` (the default,
  ``interventions="auto"``);
- ``cape-int-floor``: ``cape-int`` with half the effect floor (``regression.min_effect=0.0015``);
- ``cape-int-thinning``: ``cape-int`` with the counting-noise correction
  (``measurement_error="thinning"``, no covariates). The simulator's ``X`` is ``log1p`` of
  unnormalized Poisson counts, so the data are declared as preprocessed counts with library
  size 1 and ``target_sum`` 1, and ``expm1(X)`` gives the counts back exactly. The pipeline
  turns the correction on by itself where a user's counts carry their library sizes (as
  ``pp.preprocess`` records them); these simulated log counts carry none;
- ``cape-int-states-thinning``: the same with cell states as covariates;
- ``cape-obs-states``, ``cape-int-states``, ``cape-int-states-floor``: the same with cell states
  as covariates (``covariates="states"``, the previous default; rows made before the default
  changed were relabelled, field ``relabelled_from``);
- ``-order0``: without the ordered re-test (``order_rounds=0``), Step I before d8da2cb
  (2026-11-26). By default (``order_rounds="auto"``) it runs wherever the labels are read (until
  e98d0fd, 2026-11-26, only where the counting-noise correction was on); rows made without it
  were relabelled ``-order0`` (field ``relabelled_from``);
- ``-s20``: the code of 66adfef (2026-11-26), where the counting-noise correction raised the
  corrected Gram's spectrum along the identity (a2a5fc7 and 79d8230, 2026-11-27, scale the
  correction back in the noise's metric, ``cape_pipeline.causal.regression.neighbourhood.partial_f``);
  rows of every run the correction touches (``-thinning``, and ``hill``, whose preprocessed
  counts get it by default), kept for the paired comparison. The ``-order0`` and ``-floor`` rows predate the change;
- ``-split1``: one random split of the cells (``regression.n_splits=1``), Step I before 802c626 (2026-11-27),
  which repeats the fit on 8 splits and keeps the edges at least half of them keep (the rows of the
  methods rerun then were relabelled ``-split1``, field ``relabelled_from``; every ``-order0``,
  ``-floor``, ``-s20`` and ``-states`` row without it was made with one split too);
- ``-s23``: the code of 63deb54 (2026-11-27), the split vote without the jackknife re-test of the
  voted edges (``cape_pipeline.causal.regression.jackknife``, f4b2c2d); the rows of the methods rerun with it
  were relabelled ``-s23`` (field ``relabelled_from``), kept for the paired comparison;
- ``cape-obs-jk``: ``cape-obs`` with that re-test, which the default runs only where the labels
  are read (measured on 2026-11-27 at 6cf31da; ``cape-obs`` is unchanged);
- ``-noshift``: without the perturbations' direct shifts as edges (``regression.shift_edges=False``,
  ``cape_pipeline.causal.regression.shift_edges``), Step I before 5d0d799 (2026-11-29);
- ``cape-int-eiv``: ``cape-int`` with the counting-noise correction forced on
  (``measurement_error="thinning"``) on the preprocessed counts, whose library sizes
  ``pp.preprocess`` recorded (``avici`` and ``hill``). The default has done the same at every
  number of cells since e954804; before, from 3,000 fitted cells on, and ``avici``'s fit half has 2,950;
- ``-noeiv`` (``cape-int-noeiv``, ``cape-obs-noeiv``, ``cape-int-noshift-noeiv``): the counting-noise
  correction off (``measurement_error="none"``), the default on ``avici``'s fit half until e954804
  (the rows made before then were relabelled, field ``relabelled_from``);
- ``cape-int-clean``, ``cape-int-noshift-clean`` (``avici`` only): ``cape-int`` and ``cape-int-noshift`` on the simulator's expression before its
  technical noise (``log1p``, the same cells and halves, no ``pp.preprocess``, so no library
  covariate): how much of what Step I misses the technical noise takes away;
- ``shift-test``: the knockout-shift baseline — an edge a → g wherever g's expression in the
  cells where a alone was perturbed differs from the controls' (Mann–Whitney, Benjamini–Hochberg
  at 0.05; :func:`run_shift_baseline`): what the labels give without a graph model;
- ``sdcd-int``: SDCD (PyPI ``sdcd==0.1.4``, its own virtual environment made by
  ``benchmarks/discover/sdcd/install.sh``) with its intervention masks from the same labels,
  every SDCD default (``_sdcd.py``); Norman size only (SDCD takes about an hour at 200 genes on
  this CPU and did not finish at 200 genes without interventions in ``../sdcd``).

Metrics: directed precision, recall, F1 and AUPRC against the true DAG; orientation accuracy
(the share of the predicted edges whose pair is in the true skeleton that point the true way);
the interventional score of ``cape_pipeline.causal.metrics.interventional_score`` on the held-out
cells (share of edges whose parent's perturbation shifts the child, Mann–Whitney p < 0.05, and
the mean Wasserstein distance), for the method's edges, the true graph's and 1,000 random pairs;
wall seconds of the fit.

Usage::

    python benchmarks/discover/interventional/interventional.py run [--sizes norman replogle]
        [--seeds 0 1 2] [--methods cape-obs cape-int sdcd-int]     # appends to results.jsonl
    python benchmarks/discover/interventional/interventional.py diagnose [--sizes norman hill avici]
        [--seeds 0 1 2]     # step 9's added edges against the truth, the shift tests' calibration
    python benchmarks/discover/interventional/interventional.py report   # RESULTS.md's tables
    python benchmarks/discover/interventional/interventional.py setup [--boolode-src URL_OR_DIR]
        # AVICI's and BoolODE's environments, BoolODE's source (_cache/)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

OUT = HERE / "results.jsonl"
RESULTS = HERE / "RESULTS.md"
SDCD_PY = HERE.parent / "sdcd" / ".venv" / "bin" / "python"
#: simulators that are not ours, each in its own virtual environment under _cache/ (git-ignored), made
#: by ``setup``: AVICI without the dependencies of its pretrained model (JAX, Haiku, TensorFlow), which
#: its simulator does not import (``_avici.py``); its E. coli loader needs pandas < 3
CACHE = HERE / "_cache"
SIMULATORS = {"avici": [["avici==1.0.7", "--no-deps"],
                        ["numpy==1.26.4", "pandas==2.0.3", "igraph==1.0.0", "pyyaml==6.0.4"]],
              # BoolODE is not on PyPI: its source at BOOLODE_COMMIT goes to _cache/boolode-src (``setup``)
              "boolode": [["numpy==1.26.4", "pandas==1.5.3", "scipy==1.13.1", "scikit-learn==1.5.2", "tqdm==4.70.1",
                           "pyyaml==6.0.4"]]}
BOOLODE_REPO, BOOLODE_COMMIT = "https://github.com/Murali-group/BoolODE", "ba8884a"
SIZES = {
    "norman": {"n_genes": 200, "n_single": 105, "n_double": 131, "n_ctrl": 1000, "cells_per_condition": 20,
               "do_value": 3.0},
    "replogle": {"n_genes": 2000, "n_single": 400, "n_double": 0, "n_ctrl": 3000, "cells_per_condition": 30,
                 "do_value": -3.0},
    # the second generator: SERGIO-like Hill kinetics with technical noise, CRISPRi knockdowns of TFs
    "hill": {"n_cells": 4000, "n_genes": 400, "n_types": 6, "knockdowns": 40, "knockdown_cells": 80},
    # another group's simulator: AVICI's SERGIO with knockouts (full loss of production) of the hubs
    "avici": {"n_genes": 400, "knockouts": 40, "n_ctrl": 2000, "ko_cells": 100},
    # another group's simulator: BoolODE's stochastic ODEs of BEELINE's curated Boolean models, every regulator knocked out
    "boolode-gsd": {"model": "GSD", "n_ctrl": 1000, "ko_cells": 100},
    "boolode-hsc": {"model": "HSC", "n_ctrl": 2000, "ko_cells": 200},
    "boolode-vsc": {"model": "VSC", "n_ctrl": 2000, "ko_cells": 200},
    "boolode-mcad": {"model": "mCAD", "n_ctrl": 2000, "ko_cells": 200},
}
BOOLODE = tuple(k for k in SIZES if k.startswith("boolode"))
#: the avici simulator's expression before technical noise
_CLEAN = ("cape-int-clean", "cape-int-noshift-clean")
#: methods not run on a screen: those that need the first generator's uncorrected log1p counts (the
#: hill screen goes through preprocess, where the default already corrects for counting noise),
#: SDCD's venv (Norman only), preprocess's record of the counts (-eiv) or the clean expression
_NOEIV = ("cape-int-noeiv", "cape-obs-noeiv", "cape-int-noshift-noeiv")
_NOT_ON = {"hill": ("cape-int-thinning", "cape-int-states-thinning", "sdcd-int", *_CLEAN),
           "avici": ("cape-int-thinning", "cape-int-states-thinning", "sdcd-int"),
           "norman": ("cape-int-eiv", *_NOEIV, *_CLEAN), "replogle": ("cape-int-eiv", *_NOEIV, *_CLEAN),
           **{b: ("cape-int-thinning", "cape-int-states-thinning", "sdcd-int", "cape-int-eiv", *_NOEIV, *_CLEAN)
              for b in BOOLODE}}


def truth_from_edges(genes, edges):
    """The true graph ``(M, M)`` CSR (1.0 per edge) of ``edges`` ``(E, 2)`` (regulator, target names)
    over ``genes`` ``(M,)``, in that order."""
    import scipy.sparse as sp

    index = {g: i for i, g in enumerate(genes)}
    m = len(genes)
    return sp.csr_matrix((np.ones(len(edges)), ([index[r] for r in edges[:, 0]], [index[t] for t in edges[:, 1]])),
                         shape=(m, m))


def simulator_python(name: str) -> Path:
    """The Python of a simulator's own environment; exits when ``setup`` has not made it."""
    py = CACHE / f"venv-{name}" / "bin" / "python"
    if not py.exists():
        raise SystemExit(f"{name}: run `python {Path(__file__).name} setup` first ({py} missing)")
    return py


def avici_screen(seed: int, clean: bool = False):
    """AVICI's knockout screen (``_avici.py`` in its own environment, cached under ``_cache/``) as
    AnnData: UMI counts (with ``clean``: ``log1p`` of the expression before technical noise),
    ``obs["condition"]`` ("ctrl" or the knocked-out gene), ``obs["cell_type"]``,
    ``varp["true_dag"]``, ``uns["avici"]`` (the generator's record)."""
    import anndata as ad
    import pandas as pd
    import scipy.sparse as sp

    p = SIZES["avici"]
    path = CACHE / f"avici_{p['n_genes']}g_s{seed}.npz"
    if not path.exists():
        subprocess.run([str(simulator_python("avici")), str(HERE / "_avici.py"), str(p["n_genes"]), str(p["knockouts"]),
                        str(p["n_ctrl"]), str(p["ko_cells"]), str(seed), str(path)], check=True)
    z = np.load(path)
    genes = z["genes"]
    truth = truth_from_edges(genes, z["edges"])
    obs = pd.DataFrame({"condition": pd.Categorical(z["condition"]), "cell_type": pd.Categorical(z["cell_type"].astype(str))},
                       index=[f"cell{i}" for i in range(len(z["condition"]))])
    x = np.log1p(z["clean"].astype(np.float64)).astype(np.float32) if clean else z["counts"].astype(np.float32)
    a = ad.AnnData(sp.csr_matrix(x), obs=obs, var=pd.DataFrame(index=genes))
    a.varp["true_dag"] = truth
    a.uns["avici"] = json.loads(str(z["info"]))
    return a


def boolode_screen(size: str, seed: int):
    """BoolODE's knockout screen (``_boolode.py`` in its own environment, cached under ``_cache/``) as
    AnnData: the simulated mRNA of one time point per trajectory, as BEELINE gives BoolODE's data to
    the methods (no counts, no ``log1p``), ``obs["condition"]`` ("ctrl" or the knocked-out gene),
    ``obs["time"]``, ``varp["true_dag"]`` (the Boolean rules' regulators, self-loops left out),
    ``uns["boolode"]`` (the generator's record)."""
    import anndata as ad
    import pandas as pd

    p = SIZES[size]
    path = CACHE / f"boolode_{p['model']}_s{seed}.npz"
    src = CACHE / "boolode-src"
    if not path.exists():
        if not (src / "BoolODE").is_dir():
            raise SystemExit(f"boolode: run `python {Path(__file__).name} setup --boolode-src ...` first ({src} missing)")
        subprocess.run([str(simulator_python("boolode")), str(HERE / "_boolode.py"), str(src), p["model"], str(p["n_ctrl"]),
                        str(p["ko_cells"]), str(seed), str(path)], check=True)
    z = np.load(path)
    genes = z["genes"]
    truth = truth_from_edges(genes, z["edges"])
    obs = pd.DataFrame({"condition": pd.Categorical(z["condition"]), "time": z["time"]},
                       index=[f"cell{i}" for i in range(len(z["condition"]))])
    a = ad.AnnData(z["x"].astype(np.float32), obs=obs, var=pd.DataFrame(index=genes))
    a.varp["true_dag"] = truth
    a.uns["boolode"] = json.loads(str(z["info"]))
    return a


def make(size: str, seed: int, clean: bool = False):
    """(fit half, held-out half, true DAG) of one simulated screen. The hill and avici screens'
    counts go through ``pp.preprocess`` (library size recorded, ``normalize_total``, ``log1p``,
    every cell and gene kept), as a user's would; with ``clean`` (avici only) the expression
    before technical noise, ``log1p``, is used as it is, split into the same halves."""
    from cape_pipeline.datasets import simulate_perturbation_data, simulated_hill_counts

    if clean:
        if size != "avici":
            raise SystemExit(f"{size}: only the avici screen has expression before technical noise")
        a = avici_screen(seed, clean=True)
    elif size in ("hill", "avici"):
        from cape_pipeline import pp

        a = simulated_hill_counts(**SIZES[size], seed=seed) if size == "hill" else avici_screen(seed)
        pp.preprocess(a, min_genes=0, n_top_genes=a.n_vars)  # in place; varp["true_dag"] follows the genes
    elif size in BOOLODE:
        a = boolode_screen(size, seed)
    else:
        a = simulate_perturbation_data(**SIZES[size], seed=seed)
    cond = a.obs["condition"].astype(str).to_numpy()
    rng = np.random.default_rng(seed)
    held = np.zeros(a.n_obs, dtype=bool)
    for c in np.unique(cond):
        idx = np.flatnonzero(cond == c)
        held[rng.choice(idx, idx.size // 2, replace=False)] = True
    if size in ("hill", "avici"):  # a rare gene can be all zeros in one half: Step I refuses constant features
        x = a.X[~held]
        var = np.asarray(x.power(2).mean(0)).ravel() - np.asarray(x.mean(0)).ravel() ** 2
        a = a[:, var > 0].copy()
    return a[~held].copy(), a[held].copy(), a.varp["true_dag"]


def graph_metrics(adj, scores, truth) -> dict:
    """Precision, recall, F1, AUPRC and orientation accuracy of one predicted graph."""
    from sklearn.metrics import average_precision_score

    from cape_pipeline.causal.metrics import dag_metrics

    mm = dag_metrics(adj, truth)
    a = np.asarray(adj.toarray() if hasattr(adj, "toarray") else adj) != 0
    t = np.asarray(truth.toarray() if hasattr(truth, "toarray") else truth) != 0
    found = a & (t | t.T)
    off = ~np.eye(t.shape[0], dtype=bool)
    auprc = float(average_precision_score(t[off], np.abs(np.nan_to_num(scores))[off])) if scores is not None else None
    return {"edges": int(a.sum()), "precision": mm["precision"], "recall": mm["recall"], "f1": mm["f1"],
            "skeleton_f1": mm["skeleton_f1"], "auprc": auprc,
            "orientation": float((a & t).sum() / found.sum()) if found.sum() else float("nan")}


METHODS = ("cape-obs", "cape-obs-split1", "cape-obs-s20", "cape-int", "cape-int-split1", "cape-int-s20",
           "cape-int-order0", "cape-int-floor", "cape-int-floor-order0", "cape-int-thinning",
           "cape-int-thinning-split1", "cape-int-thinning-s20", "cape-int-thinning-order0",
           "cape-obs-states", "cape-obs-states-s20", "cape-int-states", "cape-int-states-s20",
           "cape-int-states-order0", "cape-int-states-floor", "cape-int-states-floor-order0",
           "cape-int-states-thinning", "cape-int-states-thinning-split1", "cape-int-states-thinning-s20",
           "cape-int-states-thinning-order0", "cape-obs-jk", "cape-int-s23", "cape-int-thinning-s23",
           "cape-int-states-thinning-s23", "cape-int-noshift", "cape-int-eiv", "cape-int-noeiv", "cape-obs-noeiv", "cape-int-noshift-noeiv", "cape-int-clean", "cape-int-noshift-clean",
           "sdcd-int", "shift-test")


#: method suffixes whose rows were made by code the package no longer has: what, and the commit to rerun them at
EARLIER_CODE = {
    # the counting-noise correction before a2a5fc7 (corrected spectrum floored along the identity)
    "-s20": ("the code of 66adfef (2026-11-26), kept for the paired comparison", "66adfef"),
    # the split vote without the jackknife re-test (before f4b2c2d)
    "-s23": ("the code of 63deb54 (2026-11-27), kept for the paired comparison", "63deb54"),
    # the jackknife re-test without labels
    "-jk": ("a variant measured on 2026-11-27 and not made the default", "6cf31da"),
}


def run_cape(method: str, fit, truth) -> tuple[dict, object]:
    from cape_pipeline.causal.api import discover_scored

    kw: dict = {"algorithm": "regression"}
    reg: dict = {}  # the regression algorithm's options
    if "-obs" in method:
        reg["interventions"] = "none"
    if "-states" in method:  # the previous default's cell states (with the library size where there is one)
        kw["covariates"] = "states+library" if "cape_library_size" in fit.obs else "states"
    if "-floor" in method:
        reg["min_effect"] = 0.0015  # half the default effect floor
    if "-noshift" in method:  # without the perturbations' direct shifts as edges (Step I before them)
        reg["shift_edges"] = False
    if method.endswith("-order0"):  # without the ordered re-test (Step I before d8da2cb)
        reg["order_rounds"] = 0
    if method.endswith("-split1"):  # one random split of the cells (Step I before 802c626's split vote)
        reg["n_splits"] = 1
        method = method.removesuffix("-split1")
    for suffix, (what, commit) in EARLIER_CODE.items():
        if method.endswith(suffix):
            raise SystemExit(f"{method}: rows of {what}; check out {commit} to rerun")
    if method == "cape-int-eiv":  # the correction forced on, with preprocess's own record of the counts
        reg["measurement_error"] = "thinning"
    if method.endswith("-noeiv"):  # the correction off (the default below 3,000 fitted cells until e954804)
        reg["measurement_error"] = "none"
    if "-thinning" in method:
        # log1p of unnormalized counts: library 1 and target_sum 1 give expm1(X) = the counts back
        fit = fit.copy()
        fit.uns["cape_preprocess"] = {"input_state": "counts", "config": {"target_sum": 1.0}, "modality": "scrna"}
        fit.obs["cape_library_size"] = 1.0
        reg["measurement_error"] = "thinning"
        kw["covariates"] = kw.get("covariates", "none")
    t0 = time.perf_counter()
    g, scores = discover_scored(fit, regression=reg, **kw)
    sec = time.perf_counter() - t0
    return {**graph_metrics(g.adjacency, scores, truth), "seconds": sec,
            "n_perturbed_features": g.params.get("n_perturbed_features"),
            "order_rounds_used": g.params.get("order_rounds_used"), "n_splits_used": g.params.get("n_splits_used"),
            "n_shift_edges": g.params.get("n_shift_edges")}, g.adjacency


def run_shift_baseline(fit, truth) -> tuple[dict, object]:
    """The knockout-shift baseline: an edge a → g wherever g's expression in the cells where a alone
    was perturbed differs from the controls' (two-sided Mann–Whitney over the fit half,
    Benjamini–Hochberg at 0.05 over every tested pair); the score is −log10 p. Every shift is read as
    a direct edge, so descendants further down come in as edges too: what the labels give without a
    graph model."""
    import scipy.sparse as sp
    from scipy.stats import false_discovery_control, mannwhitneyu

    from cape_pipeline.causal.interventions import intervention_targets

    t0 = time.perf_counter()
    iv = intervention_targets(fit.obs, fit.var_names, "condition")
    single, single_target = iv.single_targets
    x = fit.X.toarray() if sp.issparse(fit.X) else np.asarray(fit.X)
    x = x.astype(np.float64)
    x_ctrl = x[np.flatnonzero(iv.control_cells)]
    m = fit.n_vars
    pv = np.ones((m, m))
    for a in np.unique(single_target):  # one test per perturbed gene, vectorized over the genes
        pv[a] = np.nan_to_num(mannwhitneyu(x[single[single_target == a]], x_ctrl, axis=0).pvalue, nan=1.0)
        pv[a, a] = 1.0
    tested = np.zeros((m, m), dtype=bool)
    tested[np.unique(single_target)] = True
    np.fill_diagonal(tested, False)
    adj = np.zeros((m, m), dtype=np.int8)
    adj[tested] = false_discovery_control(pv[tested]) < 0.05
    sec = time.perf_counter() - t0
    return {**graph_metrics(adj, -np.log10(np.maximum(pv, 1e-300)) * tested, truth), "seconds": sec}, adj


def run_sdcd(fit, truth) -> tuple[dict, object]:
    """SDCD in its own venv on the fit half, its masks from obs["condition"]."""
    from cape_pipeline._keys import parse_condition

    x = np.asarray(fit.X.toarray() if hasattr(fit.X, "toarray") else fit.X, dtype=np.float32)
    labels = np.array([",".join(str(int(g[1:])) for g in parse_condition(c)) or "obs"
                       for c in fit.obs["condition"].astype(str)])
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(src, x=x, labels=labels)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
        subprocess.run([str(SDCD_PY), str(HERE / "_sdcd.py"), str(src), str(dst)], check=True, env=env)
        out = np.load(dst)
        pred, cont, sec = out["pred"], out["cont"], float(out["seconds"])
    return {**graph_metrics(pred, cont, truth), "seconds": sec}, pred


def run(a: argparse.Namespace) -> None:
    from cape_pipeline.causal.metrics import interventional_score

    done = set() if a.force else {(r["size"], r["seed"], r["method"]) for r in common.read_rows(OUT)}
    provenance = common.row_provenance(HERE)
    print("command:", common.command())
    print("machine:", common.machine())
    for size in a.sizes:
        for seed in a.seeds:
            todo = [m for m in a.methods if (size, seed, m) not in done and not (m == "sdcd-int" and size != "norman")
                    and m not in _NOT_ON.get(size, ())]
            if not todo:
                continue
            sets: dict[bool, tuple] = {}
            for method in todo:
                clean = method.endswith("-clean")
                if clean not in sets:
                    fit, held, truth = make(size, seed, clean=clean)
                    sets[clean] = (fit, held, truth, interventional_score(held, truth))
                fit, held, truth, truth_score = sets[clean]
                base = provenance()
                runner = {"sdcd-int": run_sdcd, "shift-test": run_shift_baseline}.get(method)
                rec, adj = runner(fit, truth) if runner else run_cape(method, fit, truth)
                score = interventional_score(held, adj)
                rec = {"size": size, "seed": seed, "method": method, "cells_fit": fit.n_obs, "genes": fit.n_vars,
                       "n_true": int(truth.nnz), **rec, "shifted": score["share_shifted"],
                       "wasserstein": score["mean_wasserstein"], "n_testable": score["n_testable"],
                       "truth_shifted": truth_score["share_shifted"], "truth_wasserstein": truth_score["mean_wasserstein"],
                       "random_shifted": score["random_share_shifted"],
                       "random_wasserstein": score["random_mean_wasserstein"], **base}
                key = (size, seed, method)
                common.replace_rows(OUT, lambda r, key=key: (r["size"], r["seed"], r["method"]) == key, [rec])
                print(f"{size} s{seed} {method}: F1 {rec['f1']:.3f} P {rec['precision']:.3f} R {rec['recall']:.3f} "
                      f"orient {rec['orientation']:.3f} shifted {rec['shifted']:.3f} (truth {rec['truth_shifted']:.3f}, "
                      f"random {rec['random_shifted']:.3f}) {rec['seconds']:.0f}s", flush=True)


DIAGNOSIS = HERE / "diagnosis.jsonl"


def _added_kinds(before, after, truth) -> dict:
    """Step 9's added edges a → g by what they are in the true DAG: an edge, reversed, g a further
    descendant of a (indirect), a a descendant of g, or neither (unrelated)."""
    import networkx as nx

    t = np.asarray(truth.toarray() if hasattr(truth, "toarray") else truth) != 0
    g = nx.DiGraph(zip(*np.nonzero(t), strict=True))
    new = (np.asarray(after.toarray()) != 0) & ~(np.asarray(before.toarray()) != 0)
    kinds = dict.fromkeys(("true", "reversed", "indirect", "ancestor", "unrelated"), 0)
    for a, c in zip(*np.nonzero(new), strict=True):
        if t[a, c]:
            kinds["true"] += 1
        elif t[c, a]:
            kinds["reversed"] += 1
        elif a in g and c in g and nx.has_path(g, a, c):
            kinds["indirect"] += 1
        elif a in g and c in g and nx.has_path(g, c, a):
            kinds["ancestor"] += 1
        else:
            kinds["unrelated"] += 1
    return kinds


def _shift_calibration(z, keep, label_targets, truth) -> dict:
    """Every (perturbed a, gene g) shift test of ``z`` (``regression.ordering.shift_tests``): the
    share with p < 0.05 where g is not a descendant of a in the true DAG (0.05 when the test is
    calibrated and non-descendants do not move), where it is one, the tests' genomic-control
    inflation λ (``ShiftTests.inflation``), and the median χ²₁ of the true edges' tests."""
    import networkx as nx
    from scipy.stats import chi2

    from cape_pipeline.causal.regression.ordering import shift_tests

    t = np.asarray(truth.toarray() if hasattr(truth, "toarray") else truth) != 0
    out = shift_tests(z, keep, 1.0, label_targets=label_targets)
    g = nx.DiGraph(zip(*np.nonzero(t), strict=True))
    desc = {a: nx.descendants(g, a) if a in g else set() for a in np.unique(out.source).tolist()}
    is_desc = np.array([c in desc[a] for a, c in zip(out.source.tolist(), out.target.tolist(), strict=True)])
    low = out.pvalue < 0.05
    x2 = chi2.isf(np.clip(out.pvalue, 1e-300, 1.0), 1)
    edge = t[out.source, out.target]
    return {"lambda": out.inflation, "true_chi2_median": float(np.median(x2[edge])),
            "nondesc_p05": float(low[~is_desc].mean()) if (~is_desc).any() else None, "desc_p05": float(low[is_desc].mean()) if is_desc.any() else None,
            "n_tests": int(out.pvalue.size)}


def _genomic_control(shift_tests):
    """``shift_tests`` with every statistic divided by its genomic-control λ (``ShiftTests.inflation``,
    floored at 1) before Benjamini–Hochberg: the what-if arm of ``diagnose``, not the package's test."""
    import dataclasses

    from scipy.stats import chi2

    from cape_pipeline.causal.regression.edge_test import bh

    def tests(z, keep, fdr, *, label_targets=None, pairs=None):
        out = shift_tests(z, keep, 1.0, label_targets=label_targets)
        x2 = chi2.isf(np.clip(out.pvalue, 1e-300, 1.0), 1)
        p = chi2.sf(x2 / max(out.inflation, 1.0), 1)
        acc, _ = bh(p, fdr)
        return dataclasses.replace(out, source=out.source[acc], target=out.target[acc], pvalue=p[acc])

    return tests


def diagnose(a: argparse.Namespace) -> None:
    """Why step 9 adds the edges it adds: per screen and seed (with ``avici`` also its expression
    before technical noise), the default fit's step 9 inputs are recorded, its added edges sorted
    by :func:`_added_kinds`, its residual shift tests and the expression's own checked by
    :func:`_shift_calibration`, and step 9 rerun with genomic control (:func:`_genomic_control`).
    Rows go to ``diagnosis.jsonl``."""
    import torch

    import cape_pipeline.causal.regression.fit as fit_mod
    import cape_pipeline.causal.regression.shift_edges as shift_mod
    from cape_pipeline.causal.api import discover_scored

    provenance = common.row_provenance(HERE)
    print("command:", common.command())
    print("machine:", common.machine())
    original = shift_mod.add_shift_edges
    for size in a.sizes:
        for clean in ((False, True) if size == "avici" else (False,)):
            for seed in a.seeds:
                fit, _, truth = make(size, seed, clean=clean)
                seen: dict = {}

                def record(z, zt, adjacency, keep, seen=seen, **kw):
                    seen.update(z=z, zt=zt, adjacency=adjacency, keep=keep, kw=kw)
                    out = original(z, zt, adjacency, keep, **kw)
                    seen["record"] = out[1]
                    return out

                fit_mod.add_shift_edges = record
                try:
                    g, scores = discover_scored(fit, algorithm="regression", regression={})
                finally:
                    fit_mod.add_shift_edges = original
                z, zt, before, keep, kw = seen["z"], seen["zt"], seen["adjacency"], seen["keep"], seen["kw"]
                gram = kw.get("gram")
                resid = shift_mod.parent_residuals(z, zt, before, keep, ridge=kw["ridge"], noise=kw["noise"], gram=gram)
                lt = kw.get("label_targets")
                tests = shift_mod.shift_tests
                shift_mod.shift_tests = _genomic_control(tests)
                try:
                    gc_adj, gc_rec = original(z, torch.as_tensor(zt), before, keep, **kw)
                finally:
                    shift_mod.shift_tests = tests
                after = graph_metrics(g.adjacency, scores, truth)
                row = {"size": size, "clean": clean, "seed": seed,
                       "f1_without": graph_metrics(before, scores, truth)["f1"],
                       "f1": after["f1"], "precision": after["precision"],
                       "f1_genomic_control": graph_metrics(gc_adj, scores, truth)["f1"],
                       "added_genomic_control": gc_rec["n_added"],
                       "added": _added_kinds(before, g.adjacency, truth),
                       "step9": {k: seen["record"][k] for k in ("n_shift_pairs", "n_discordant", "n_indirect", "n_added",
                                                                 "n_dropped")},
                       "residual": _shift_calibration(resid, keep, lt, truth),
                       "expression": _shift_calibration(z, keep, lt, truth), **provenance()}
                key = (size, clean, seed)
                common.replace_rows(DIAGNOSIS, lambda r, key=key: (r["size"], r["clean"], r["seed"]) == key, [row])
                nondesc = row["residual"]["nondesc_p05"]  # None where every gene descends from every target
                print(f"{size}{' clean' if clean else ''} s{seed}: added {row['added']}, residual shifts "
                      f"λ {row['residual']['lambda']:.2f}, non-descendants p<0.05 {np.nan if nondesc is None else nondesc:.3f}; "
                      f"F1 {row['f1_without']:.3f} → {row['f1']:.3f} (genomic control {row['f1_genomic_control']:.3f})",
                      flush=True)


def setup(boolode_src: str) -> None:
    """Create each simulator's virtual environment under ``_cache/`` from its PyPI release, and put
    BoolODE's source at ``BOOLODE_COMMIT`` in ``_cache/boolode-src`` (cloned from ``boolode_src``: its
    GitHub address, or a local copy of the repository)."""
    CACHE.mkdir(exist_ok=True)
    dst = CACHE / "boolode-src"
    if not (dst / "BoolODE").is_dir():
        tmp = CACHE / "boolode-src.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", boolode_src, str(tmp)], check=True)
        subprocess.run(["git", "-C", str(tmp), "checkout", "-q", BOOLODE_COMMIT], check=True)
        tmp.rename(dst)
    print("boolode source:", dst, "at", BOOLODE_COMMIT)
    for name, steps in SIMULATORS.items():
        venv = CACHE / f"venv-{name}"
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        for reqs in steps:
            subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *reqs], check=True)
        print(name, "ready:", venv / "bin" / "python")


def report() -> None:
    """The table between RESULTS.md's markers: mean ± sd over seeds."""
    recs = common.read_rows(OUT)
    cols = ("f1", "precision", "recall", "auprc", "orientation", "shifted", "wasserstein", "truth_shifted",
            "random_shifted", "edges", "seconds")
    lines = ["| screen | method | n | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 3)]
    for size in SIZES:
        for method in METHODS:
            rows = [r for r in recs if r["size"] == size and r["method"] == method]
            if not rows:
                continue
            cells = []
            for c in cols:
                v = np.array([r[c] for r in rows if r.get(c) is not None], dtype=float)
                if v.size == 0:
                    cells.append("–")
                    continue
                fmt = ".0f" if c in ("edges", "seconds") else ".3f"
                cells.append(f"{v.mean():{fmt}}" + (f" ± {v.std(ddof=1):{fmt}}" if v.size > 1 else ""))
            lines.append(f"| {size} | {method} | {len(rows)} | " + " | ".join(cells) + " |")
    text = RESULTS.read_text()
    for (start, end), body in ((("<!-- table: begin -->", "<!-- table: end -->"), lines),
                               (("<!-- diagnosis: begin -->", "<!-- diagnosis: end -->"), _diagnosis_table()),
                               (("<!-- boolode: begin -->", "<!-- boolode: end -->"), _boolode_table())):
        if end in text:
            i, j = text.index(start) + len(start), text.index(end)
            text = text[:i] + "\n" + "\n".join(body) + "\n" + text[j:]
        print("\n".join(body))
    tmp = RESULTS.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(RESULTS)


def _diagnosis_table() -> list[str]:
    """``diagnosis.jsonl`` as a table: the mean over seeds of each screen."""
    recs = common.read_rows(DIAGNOSIS) if DIAGNOSIS.exists() else []
    kinds = ("true", "reversed", "indirect", "ancestor", "unrelated")
    steps = ("n_shift_pairs", "n_discordant", "n_indirect", "n_added", "n_dropped")
    lines = ["| screen | n | step 9: shift pairs / discordant / indirect / added / DAG edges given way | added: "
             + " / ".join(kinds) + " | residual shifts: λ | non-descendants p < 0.05 "
             "(residual / expression) | descendants p < 0.05 (residual) | true edges' median χ² (residual) | "
             "F1 without step 9 | F1 | F1 with genomic control |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for size in SIZES:
        for clean in (False, True):
            rows = [r for r in recs if r["size"] == size and r["clean"] == clean]
            if not rows:
                continue

            def mean(get, rows=rows) -> float:  # a share recorded as None (nothing to test) reads NaN
                return float(np.mean([np.nan if get(r) is None else get(r) for r in rows]))

            added = " / ".join(f"{mean(lambda r, k=k: r['added'][k]):.0f}" for k in kinds)
            step9 = (" / ".join(f"{mean(lambda r, k=k: r['step9'][k]):.0f}" for k in steps)
                     if all("step9" in r for r in rows) else "–")
            lines.append(
                f"| {size}{' (before technical noise)' if clean else ''} | {len(rows)} | {step9} | {added} | "
                f"{mean(lambda r: r['residual']['lambda']):.2f} | {mean(lambda r: r['residual']['nondesc_p05']):.3f} / "
                f"{mean(lambda r: r['expression']['nondesc_p05']):.3f} | {mean(lambda r: r['residual']['desc_p05']):.3f} | "
                f"{mean(lambda r: r['residual'].get('true_chi2_median', float('nan'))):.1f} | "
                f"{mean(lambda r: r['f1_without']):.3f} | {mean(lambda r: r['f1']):.3f} | "
                f"{mean(lambda r: r['f1_genomic_control']):.3f} |")
    return lines


def acyclic_ceiling(truth) -> int:
    """The most edges of ``truth`` (a directed graph that may have cycles, ≤ 24 nodes) that one DAG can
    hold: the maximum acyclic subgraph, by dynamic programming over node subsets in topological
    order (best(S) = max over v in S of best(S − v) + edges from S − v into v)."""
    t = np.asarray(truth.toarray() if hasattr(truth, "toarray") else truth) != 0
    n = t.shape[0]
    if n > 24:
        raise ValueError(f"acyclic_ceiling: {n} nodes, at most 24")
    np.fill_diagonal(t, False)
    into = [sum(1 << u for u in np.flatnonzero(t[:, v])) for v in range(n)]  # each node's parents as a bit mask
    best = [0] * (1 << n)
    for s in range(1, 1 << n):
        b, rest = 0, s
        while rest:
            low = rest & -rest
            v = low.bit_length() - 1
            p = s ^ low
            b = max(b, best[p] + (p & into[v]).bit_count())
            rest ^= low
        best[s] = b
    return best[-1]


def _boolode_table() -> list[str]:
    """BoolODE's screens: each model's truth, the most of it a DAG can hold, and F1 / orientation per
    method (mean ± sd over seeds)."""
    recs = common.read_rows(OUT)
    methods = ("cape-obs", "cape-int", "cape-int-noshift", "shift-test")
    lines = ["| model | genes | true edges (2-cycles) | a DAG's most: recall / F1 | "
             + " | ".join(f"{m}: F1 / orientation" for m in methods) + " | seeds |",
             "|" + "---|" * (len(methods) + 5)]
    for size in BOOLODE:
        path = CACHE / f"boolode_{SIZES[size]['model']}_s0.npz"
        rows = [r for r in recs if r["size"] == size]
        if not rows or not path.exists():
            continue
        z = np.load(path)
        genes = z["genes"]
        t = truth_from_edges(genes, z["edges"]).toarray() != 0
        ceiling = acyclic_ceiling(t)
        cells = []
        for m in methods:
            got = [r for r in rows if r["method"] == m]
            f1 = np.array([r["f1"] for r in got])
            ori = np.array([r["orientation"] for r in got])
            cells.append(f"{f1.mean():.2f} ± {f1.std(ddof=1):.2f} / {ori.mean():.2f}" if len(got) > 1 else
                         (f"{f1.mean():.2f} / {ori.mean():.2f}" if got else "–"))
        seeds = sorted({r["seed"] for r in rows})
        lines.append(f"| {SIZES[size]['model']} | {len(genes)} | {int(t.sum())} ({int((t & t.T).sum() // 2)}) | "
                     f"{ceiling / t.sum():.2f} / {2 * ceiling / (ceiling + t.sum()):.2f} | " + " | ".join(cells)
                     + f" | {', '.join(map(str, seeds))} |")
    return lines


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    r.add_argument("--methods", nargs="+", default=["cape-obs", "cape-int"], choices=METHODS)
    r.add_argument("--force", action="store_true", help="rerun rows that are already in results.jsonl")
    d = sub.add_parser("diagnose")
    d.add_argument("--sizes", nargs="+", default=["norman", "hill", "avici"], choices=list(SIZES))
    d.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    sub.add_parser("report")
    st = sub.add_parser("setup")
    st.add_argument("--boolode-src", default=BOOLODE_REPO,
                    help="where to clone BoolODE's source from: its GitHub address (default) or a local copy")
    args = ap.parse_args()
    {"run": lambda: run(args), "diagnose": lambda: diagnose(args), "report": report,
     "setup": lambda: setup(args.boolode_src)}[args.cmd]()
