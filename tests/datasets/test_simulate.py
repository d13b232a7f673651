from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from cape_pipeline.datasets._interventions import (
    MLPSEM,
    parse_condition,
    scale_free_dag,
    simulate_methylation_age,
    simulate_perturbation_data,
)
from cape_pipeline.errors import CapeConfigError


def test_scale_free_dag_is_acyclic_and_seeded():
    a = scale_free_dag(40, 2, np.random.default_rng(0))
    b = scale_free_dag(40, 2, np.random.default_rng(0))
    assert np.array_equal(a, b)
    assert nx.is_directed_acyclic_graph(nx.from_numpy_array(a, create_using=nx.DiGraph))
    assert 70 <= a.sum() <= 80
    deg = a.sum(0) + a.sum(1)
    assert deg.max() >= 3 * np.median(deg)  # hubs


def test_intervention_moves_descendants_only():
    rng = np.random.default_rng(1)
    dag = scale_free_dag(15, 2, rng)
    sem = MLPSEM.random(dag, rng)
    g = nx.from_numpy_array(dag, create_using=nx.DiGraph)
    n_desc = np.array([len(nx.descendants(g, i)) for i in range(15)])
    j = int(np.flatnonzero((n_desc > 0) & (n_desc < 10))[0])
    obs = sem.sample(3000, np.random.default_rng(2))
    do = sem.sample(3000, np.random.default_rng(2), {j: 3.0})
    assert np.allclose(do[:, j], 3.0)
    shift = np.abs(do.mean(0) - obs.mean(0))
    desc = sorted(nx.descendants(g, j))
    others = [i for i in range(15) if i != j and i not in desc]
    assert others and shift[others].max() < 1e-12  # non-descendants: untouched (same noise draws)
    assert shift[desc].max() > 0.3


def test_perturbation_data_layout():
    a = simulate_perturbation_data(n_genes=20, n_single=5, n_double=3, n_ctrl=50, cells_per_condition=10, seed=3)
    b = simulate_perturbation_data(n_genes=20, n_single=5, n_double=3, n_ctrl=50, cells_per_condition=10, seed=3)
    assert np.array_equal(a.X, b.X)
    conds = set(a.obs["condition"].astype(str))
    assert "ctrl" in conds and len(conds) == 1 + 5 + 3
    assert all(len(parse_condition(c)) in (0, 1, 2) for c in conds)
    assert any(c.endswith("+ctrl") for c in conds)
    assert a.n_obs == 50 + 8 * 10 and (a.X >= 0).all()
    assert a.varp["true_dag"].shape == (20, 20)
    assert len(a.uns["cape_simulation"]["dag_source"]) == a.varp["true_dag"].nnz
    single = next(c for c in conds if c.endswith("+ctrl"))
    g = parse_condition(single)[0]
    gi = list(a.var_names).index(g)
    x, c = a.X, a.obs["condition"].astype(str).to_numpy()
    assert x[c == single, gi].mean() > x[c == "ctrl", gi].mean() + 0.5  # do(z = +3) overexpresses
    with pytest.raises(CapeConfigError):
        simulate_perturbation_data(n_genes=5, n_single=6)


def test_methylation_age_layout():
    a = simulate_methylation_age(n_samples=200, n_cpgs=30, seed=0, missing_rate=0.1)
    x = a.X
    assert ((x[~np.isnan(x)] >= 0) & (x[~np.isnan(x)] <= 1)).all()
    assert 0.07 < np.isnan(x).mean() < 0.13
    age = a.obs["age"].to_numpy()
    clock = a.var["clock_site"].to_numpy()
    r = [abs(np.corrcoef(np.nan_to_num(x[:, j], nan=np.nanmean(x[:, j])), age)[0, 1]) for j in range(30)]
    assert np.mean(np.array(r)[clock]) > np.mean(np.array(r)[~clock])
    with pytest.raises(CapeConfigError):
        simulate_methylation_age(missing_rate=1.0)
