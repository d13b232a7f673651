"""A knockout screen from BoolODE (Pratapa et al. 2020, "Benchmarking algorithms for gene
regulatory network inference from single-cell transcriptomic data", Nature Methods; the authors'
source, github.com/Murali-group/BoolODE at ba8884a, GPL-3.0), run from that source in its own
virtual environment (made by ``interventional.py setup``). Writes .npz: ``x`` (cells × genes,
float32, the simulated mRNA of each cell), ``genes``, ``edges`` (regulator → target, from the
Boolean rules), ``condition`` ("ctrl" or the knocked-out gene), ``time`` (the sampled time point
of each cell's trajectory) and ``info`` (a JSON string).

BoolODE turns a Boolean model into stochastic ODEs — per gene an mRNA ``x`` and a protein ``p``,
``dx/dt = m·f(p_regulators) − l_x·x``, ``dp/dt = r·x − l_p·p``, with ``f`` the Hill form of the
gene's Boolean rule — and simulates one trajectory per cell (Euler–Maruyama, noise
``10·sqrt(x)``). A BEELINE data set is one time point drawn per trajectory. This runner makes
the calls of ``BoolODE.run_experiment.startRun`` / ``Experiment`` / ``simulateAndSample`` and of
``post_processing.genSamples`` in the same order, with the BEELINE curated models' settings
(``config-files/beeline-inputs-boolean.yaml``: the model, its initial conditions, its simulation
time, Hill kinetics, the default kinetic parameters), and these changes:

- a knockout of gene ``g`` sets its transcription rate ``m_g`` to 0 and its initial mRNA (hence
  protein) to 0 — a full loss of production from the first time point. BoolODE's own route to
  set a parameter (``parameter_set``) fails at this commit (``getParameters`` reads an undefined
  ``pvalue``), so the value is written into the generated model's parameters, where
  ``parameter_set`` would put it;
- every gene with a target in the model is knocked out, one at a time, each in its own
  trajectories; the controls are the model as it is;
- one cell per trajectory, at a time point drawn uniformly from the simulated ones (as
  ``genSamples``) — so the cells of one condition are independent replicates;
- each trajectory has its own noise seed (BoolODE seeds trajectory ``i`` with ``i + 1000·try`` in
  every run, which would give every condition the same noise); the authors' check that redraws a
  trajectory whose every gene stays under 10 % of the maximum mRNA at some time point is kept, at
  most 3 tries (a knockout can make that the true outcome).

The source is put on ``sys.path``; its package ``__init__`` (the config parser, post-processing
with matplotlib and t-SNE) is not imported: ``BoolODE`` is registered as a bare namespace so that
``model_generator``, ``simulator`` and ``utils`` import unmodified.

Usage: ``python _boolode.py SRC MODEL N_CTRL KO_CELLS SEED OUT.npz`` (``MODEL``: ``GSD``, ``HSC``,
``VSC`` or ``mCAD``).
The script runs itself again with ``PYTHONHASHSEED`` = SEED unless it is already set so: the
simulator iterates over sets of names, whose order follows Python's string hashing, so one seed
would otherwise give slightly other values in every process.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

#: BEELINE's curated models (beeline-inputs-boolean.yaml): initial conditions file, simulation time
MODELS = {"mCAD": ("mCAD_ics.txt", 5), "VSC": (None, 5), "HSC": ("HSC_ics.txt", 8), "GSD": ("GSD_ics.txt", 8)}
MAX_TRIES = 3

_STATE: dict = {}


def _import_boolode(src: Path):
    pkg = types.ModuleType("BoolODE")
    pkg.__path__ = [str(src / "BoolODE")]
    sys.modules["BoolODE"] = pkg
    from BoolODE import model_generator, simulator, utils

    return model_generator, simulator, utils


def _settings(src: Path, model: str, out: Path) -> dict:
    ics, tmax = MODELS[model]
    return {"name": model, "outprefix": out, "modelpath": src / "data" / f"{model}.txt",
            "simulation_time": tmax, "icsPath": src / "data" / (ics or ""), "num_cells": 0, "sample_cells": False,
            "nClusters": 1, "doParallel": False, "identical_pars": False, "sample_pars": False, "sample_std": 0.1,
            "integration_step_size": 0.01, "parameter_inputs_path": Path(""), "parameter_set": Path(""),
            "interaction_strengths": Path(""), "species_type": Path(""), "burnin": False, "writeProtein": False,
            "normalizeTrajectory": False, "add_dummy": False, "max_parents": 1, "modeltype": "hill"}


def _init(src: str, model: str, tmp: str) -> None:
    """Per worker: the authors' model generation (writes ``model.py``) and ``Experiment``'s set-up."""
    import ast
    from importlib.machinery import SourceFileLoader

    import pandas as pd

    model_generator, simulator, utils = _import_boolode(Path(src))
    out = Path(tmp) / str(os.getpid())  # each process writes and loads its own model.py
    out.mkdir()
    settings = _settings(Path(src), model, out)
    empty = pd.DataFrame()
    with open(os.devnull, "w") as null:
        stdout, sys.stdout = sys.stdout, null
        try:
            mg = model_generator.GenerateModel(settings, empty, empty, empty)
        finally:
            sys.stdout = stdout
    ode = SourceFileLoader(f"model_{os.getpid()}", mg.path_to_ode_model.as_posix()).load_module()
    # Experiment(): steady-state guesses, then the user's initial conditions
    revvarmapper = {v: k for k, v in mg.varmapper.items()}
    ss = np.zeros(len(mg.varmapper))
    for i, k in mg.varmapper.items():
        if "x_" in k:
            ss[i] = 1.0
    ics = utils.checkValidInputPath(settings["icsPath"])
    if not ics.empty:
        icsmap = dict(zip(ast.literal_eval(ics.loc[0]["Genes"]), ast.literal_eval(ics.loc[0]["Values"]), strict=True))
        for g in mg.genelist:
            ss[revvarmapper["x_" + g]] = icsmap.get(g, 0.01)
    tmax = settings["simulation_time"]
    _STATE.update(mg=mg, ode=ode, simulator=simulator, ss=ss, revvarmapper=revvarmapper,
                  tspan=np.linspace(0, tmax, int(tmax / settings["integration_step_size"])),
                  rna=[i for i in range(len(mg.varmapper)) if "x_" in mg.varmapper[i]],
                  protein=[i for i in range(len(mg.varmapper)) if "p_" in mg.varmapper[i]])


def _cell(job: tuple[int, int, int, str | None]) -> tuple[np.ndarray, int, int]:
    """One trajectory (``simulateAndSample``'s loop) and one time point of it (``genSamples``)."""
    seed, cond, cell, ko = job
    s = _STATE
    mg, simulator = s["mg"], s["simulator"]
    pars_d = dict(mg.ModelSpec["pars"])
    ss = s["ss"].copy()
    if ko is not None:
        pars_d["m_" + ko] = 0.0
        ss[s["revvarmapper"]["x_" + ko]] = 0.0
    spec = dict(mg.ModelSpec, pars=pars_d)
    pars = [pars_d[k] for k in sorted(pars_d)]
    gid = s["rna"]
    x_max = mg.kineticParameterDefaults["x_max"]
    n_t = len(s["tspan"])
    tries = 0
    while True:
        tries += 1
        traj_seed = int(np.random.SeedSequence([seed, cond, cell, tries]).generate_state(1)[0])
        y0 = simulator.getInitialCondition(ss, spec, s["rna"], s["protein"], mg.genelist, mg.proteinlist,
                                           mg.varmapper, s["revvarmapper"])
        p = simulator.simulateModel(s["ode"].Model, y0, pars, True, s["tspan"], traj_seed).T
        sub = p[gid][:, 1:n_t]
        if tries >= MAX_TRIES or not (sub.max(axis=0) < 0.1 * x_max).any():
            break
    t = np.random.default_rng([seed, cond, cell, 7]).integers(1, n_t)
    return p[gid, t].astype(np.float32), int(t), tries


def main(src: str, model: str, n_ctrl: int, ko_cells: int, seed: int, out: str) -> None:
    from tqdm import tqdm

    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        _init(src, model, tmp)
        from BoolODE.utils import getRegulatorsInRule

        mg = _STATE["mg"]
        genes = list(mg.genelist)
        edges = []  # the reference network as utils.generateInputFiles reads it from the rules, self-loops left out
        for _, row in mg.df.iterrows():
            regs = getRegulatorsInRule(row["Rule"], genes, [])[1]
            edges += [(r, row["Gene"]) for r in sorted(regs) if r != row["Gene"]]
        targets = sorted({r for r, _ in edges})
        jobs = [(seed, 0, i, None) for i in range(n_ctrl)]
        for c, g in enumerate(targets, start=1):
            jobs += [(seed, c, i, g) for i in range(ko_cells)]
        with mp.Pool(os.cpu_count(), initializer=_init, initargs=(src, model, tmp)) as pool:
            res = list(tqdm(pool.imap(_cell, jobs, chunksize=16), total=len(jobs), desc=f"BoolODE {model}"))
    x = np.stack([r[0] for r in res])
    cond = np.array(["ctrl" if j[3] is None else j[3] for j in jobs])
    tries = np.array([r[2] for r in res])
    redrawn = {c: int((tries[cond == c] > 1).sum()) for c in np.unique(cond)}
    info = {"simulator": "BoolODE", "source": "github.com/Murali-group/BoolODE", "commit": "ba8884a",
            "model": model, "n_ctrl": n_ctrl, "ko_cells": ko_cells, "seed": seed, "knockouts": targets,
            "n_edges": len(edges), "redrawn": redrawn, "kept_after_max_tries": int((tries >= MAX_TRIES).sum()),
            "seconds": round(time.time() - t0, 1)}
    tmp_out = out + ".tmp.npz"
    np.savez_compressed(tmp_out, x=x, genes=np.array(genes), edges=np.array(edges, dtype=str), condition=cond,
                        time=np.array([r[1] for r in res], dtype=np.int32), info=json.dumps(info))
    os.replace(tmp_out, out)
    print(json.dumps(info))


if __name__ == "__main__":
    a = sys.argv[1:]
    if os.environ.get("PYTHONHASHSEED") != a[4]:  # set iteration follows string hashing
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": a[4]})
    main(a[0], a[1], int(a[2]), int(a[3]), int(a[4]), a[5])
