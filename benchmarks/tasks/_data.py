"""The benchmark's datasets (all offline, seeded)."""

from __future__ import annotations

import warnings

import cape_pipeline as cp
import cape_pipeline.datasets as ds
from cape_pipeline.tasks import simulate_methylation_age, simulate_perturbation_data


def pbmc():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cp.pp.preprocess(ds.pbmc68k_reduced(), copy=True)


def perturbation():
    return simulate_perturbation_data(n_genes=40, n_single=16, n_double=16, n_ctrl=400, cells_per_condition=25, seed=0)


def perturbation_norman():
    """Norman et al. 2019's size (105 single, 131 double perturbations) on a 200-gene simulated SEM."""
    return simulate_perturbation_data(n_genes=200, n_single=105, n_double=131, n_ctrl=1000, cells_per_condition=20, seed=0)


def age():
    return simulate_methylation_age(n_samples=400, n_cpgs=60, seed=0)


BENCH_DATA = {"pbmc68k_reduced": pbmc, "sim_perturbation": perturbation,
              "sim_perturbation_norman": perturbation_norman, "sim_methylation_age": age}
