"""A knockout screen from AVICI's SERGIO simulator (Lorch et al. 2022, "Amortized Inference for
Causal Structure Learning", NeurIPS; the authors' PyPI release ``avici==1.0.7``, MIT licence),
run in its own virtual environment (made by ``interventional.py setup``). Writes .npz:
``counts`` (cells × genes, int32, after the simulator's technical noise), ``clean`` (the same
cells' expression before technical noise, float32), ``genes``, ``edges`` (regulator → target),
``condition`` ("ctrl" or the knocked-out gene), ``cell_type`` and ``info`` (a JSON string).

AVICI ships a SERGIO simulator (Dibaeinia & Sinha 2020) extended with gene knockouts
(``avici.synthetic.sergio.sim.Sergio(kout=...)``: the knocked-out gene's production rate is 0
and its initial concentration 0 — a full loss of production) and drives it with
``avici.synthetic.GRNSergio``, which draws the knockout targets at random. This runner makes the
same calls as ``GRNSergio.__call__`` in the same order, with one change: the targets are the
hubs of the graph (the genes with most children) instead of a random draw, and each condition
gets its own number of cells. Everything else is the authors':

- graph: ``avici.synthetic.Ecoli``'s source and extraction — a module of the E. coli RegulonDB
  6.7 network drawn by Marbach et al.'s (2009) module extraction (``topk`` 0.2, at least one
  regulator, cycles broken at random) — with the genes' names kept (``Ecoli`` permutes them
  away; its draws for the source's edge signs and that permutation, which the mechanism does not
  use, are not made here);
- mechanism: the authors' E. coli example (``avici/config/examples/gene-ecoli.yaml``):
  interaction strength k ~ U(1, 5), sign positive with a per-regulator probability
  ~ Beta(0.5, 0.5), master-regulator production ~ U(1, 3) per cell type, Hill n = 2, decay 1,
  noise amplitude 1 (``dpd``), 10 cell types, ``sampling_state`` 15, dt 0.01, 10 safety steps;
- technical noise: outlier genes, library size, dropout, then Poisson UMI counts, applied per
  condition as ``GRNSergio`` does, with the first profile of the noise config's
  ``10x-chromium`` entry (the SERGIO paper's estimate from a 10x data set: outliers p 0.01,
  lognormal(3, 1); library lognormal(6, 0.3); dropout shape 8 at the 74th percentile) —
  GRNSergio draws each of these from the entry's lists; the first profile is fixed here so
  that seeds differ only in their draws.

The package's top-level ``avici/__init__.py`` loads the pretrained inference model (JAX, Haiku,
TensorFlow), which the simulator does not use: the package is installed without those
dependencies and ``avici`` is registered as a bare namespace so that ``avici.synthetic`` and the
simulator import unmodified.

Usage: ``python _avici.py N_GENES N_KNOCKOUTS N_CTRL KO_CELLS SEED OUT.npz``
The script runs itself again with ``PYTHONHASHSEED`` = SEED unless it is already set so: the
simulator iterates over sets of names, whose order follows Python's string hashing, so one seed
would otherwise give slightly other values in every process.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import os
import sys
import time
import types

import numpy as np

_spec = importlib.util.find_spec("avici")
_pkg = types.ModuleType("avici")
_pkg.__path__ = list(_spec.submodule_search_locations)
sys.modules["avici"] = _pkg

import pandas as pd  # noqa: E402
from avici.definitions import GRAPH_ECOLI, ROOT_DIR, SERGIO_NOISE_CONFIG  # noqa: E402
from avici.synthetic import Beta, Uniform  # noqa: E402
from avici.synthetic.graph import _module_extraction  # noqa: E402
from avici.synthetic.sergio.sim import Sergio  # noqa: E402
from avici.utils.load import load_yaml  # noqa: E402

#: gene-ecoli.yaml's mechanism
K_PARAM, K_SIGN_P, B = Uniform(1.0, 5.0), Beta(0.5, 0.5), Uniform(1.0, 3.0)
HILL, DECAYS, NOISE, N_TYPES = 2.0, 1.0, 1.0, 10
NOISE_CONFIG, NOISE_PROFILE = "10x-chromium", 0


def ecoli_module(rng: np.random.Generator, n_vars: int) -> tuple[np.ndarray, np.ndarray]:
    """``avici.synthetic.Ecoli.__call__``'s source network and module extraction, the names kept."""
    raw = pd.read_csv(ROOT_DIR / GRAPH_ECOLI, sep="\t", index_col=False, header=None)
    genes = sorted(set(raw[0].unique().tolist() + raw[1].unique().tolist()))
    index = {g: i for i, g in enumerate(genes)}
    g_raw = np.zeros((len(genes), len(genes)), dtype=np.int32)
    g_raw[raw[0].map(index).to_numpy(), raw[1].map(index).to_numpy()] = 1
    g, subnet = _module_extraction(rng, g_raw, n_vars, topk=0.2, at_least_n_regulators=1, make_acyclic=True,
                                   return_node_indices=True)
    return g, np.array([genes[i] for i in subnet], dtype=str)  # _extract_subnetwork's order: the set's


def main() -> None:
    n_vars, n_ko, n_ctrl, ko_cells, seed = (int(v) for v in sys.argv[1:6])
    if os.environ.get("PYTHONHASHSEED") != str(seed):  # set iteration follows string hashing
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": str(seed)})
    out = os.path.abspath(sys.argv[6])
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    g, names = ecoli_module(rng, n_vars)

    # GRNSergio.__call__: interaction terms, signs, cell types' basal rates, Hill coefficients
    k = np.abs(K_PARAM(rng, shape=(n_vars, n_vars)))
    effect_sgn = rng.binomial(1, K_SIGN_P(rng, shape=(n_vars, 1)), size=g.shape) * 2.0 - 1.0
    k = k * effect_sgn.astype(np.float32)
    basal_rates = B(rng, shape=(n_vars, N_TYPES))
    hills = HILL * np.ones((n_vars, n_vars))
    cfg = load_yaml(path=SERGIO_NOISE_CONFIG)[NOISE_CONFIG]
    noise = {key: cfg[key][NOISE_PROFILE] for key in ("outlier_prob", "outlier_mean", "outlier_scale", "lib_size_mean",
                                                      "lib_size_scale", "dropout_shape", "dropout_percentile")}

    # the knockout targets: the hubs (most children; ties by name), at most n_ko of the regulators
    children = g.sum(1)
    order = sorted(np.flatnonzero(children > 0), key=lambda i: (-children[i], names[i]))
    targets = order[:n_ko]

    counts, clean, cond, ctype = [], [], [], []
    for target in [None, *targets]:
        n_cells = n_ctrl if target is None else ko_cells
        kout = np.zeros(n_vars, dtype=bool)
        if target is not None:
            kout[target] = True
        number_sc = math.ceil(n_cells / N_TYPES)
        sim = Sergio(rng=rng, number_genes=n_vars, number_bins=N_TYPES, number_sc=number_sc, noise_params=NOISE,
                     noise_type="dpd", decays=DECAYS, sampling_state=15, kout=kout, dt=0.01, safety_steps=10)
        sim.custom_graph(g=g, k=k, b=basal_rates, hill=hills)
        sim.simulate()
        expr = sim.getExpressions()  # [types, genes, cells per type]
        x_clean = np.concatenate(expr, axis=1).T
        expr = sim.outlier_effect(expr, noise["outlier_prob"], noise["outlier_mean"], noise["outlier_scale"])
        _, expr = sim.lib_size_effect(expr, noise["lib_size_mean"], noise["lib_size_scale"])
        expr = np.multiply(sim.dropout_indicator(expr, noise["dropout_shape"], int(noise["dropout_percentile"])), expr)
        expr = sim.convert_to_UMIcounts(expr)
        x = np.concatenate(expr, axis=1).T  # [types × cells per type, genes]
        types_ = np.repeat(np.arange(N_TYPES), number_sc)
        keep = np.arange(min(n_cells, x.shape[0]))  # the cells asked for (GRNSergio clips the same way)
        rng = copy.deepcopy(sim.rng)
        counts.append(x[keep])
        clean.append(x_clean[keep])
        cond += ["ctrl" if target is None else names[target]] * len(keep)
        ctype.append(types_[keep])
        print(f"{'ctrl' if target is None else names[target]}: {len(keep)} cells, "
              f"{time.perf_counter() - t0:.0f}s", flush=True)

    src, dst = np.nonzero(g)
    info = {"simulator": "avici 1.0.7 (SERGIO with knockouts)", "graph": "E. coli RegulonDB 6.7 module (Marbach)",
            "n_genes": n_vars, "n_edges": int(g.sum()), "n_regulators": int((children > 0).sum()),
            "knockouts": [names[t] for t in targets], "knockout_children": [int(children[t]) for t in targets],
            "n_ctrl": n_ctrl, "ko_cells": ko_cells, "n_types": N_TYPES, "noise_config": NOISE_CONFIG,
            "noise": {key: float(v) for key, v in noise.items()}, "seed": seed,
            "seconds": round(time.perf_counter() - t0, 1)}
    tmp = out + ".tmp.npz"
    np.savez_compressed(tmp, counts=np.concatenate(counts).astype(np.int32),
                        clean=np.concatenate(clean).astype(np.float32), genes=names,
                        edges=np.stack([names[src], names[dst]], axis=1), condition=np.array(cond, dtype=str),
                        cell_type=np.concatenate(ctype), info=json.dumps(info))
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
