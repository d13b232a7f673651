"""Tests of two helpers of ``benchmarks/discover/interventional/interventional.py``: the most edges
of a cyclic truth one DAG can hold (the ceiling beside BoolODE's screens), against every node
order, and the knockout-shift baseline on a screen whose answer is known."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).parents[2] / "benchmarks" / "discover" / "interventional" / "interventional.py"
_spec = importlib.util.spec_from_file_location("interventional_benchmark", _PATH)
interventional = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(interventional)


def _by_every_order(t: np.ndarray) -> int:
    n = t.shape[0]
    return max(sum(int(t[a, b]) for i, a in enumerate(order) for b in order[i + 1:])
               for order in itertools.permutations(range(n)))


def test_acyclic_ceiling_small_cases():
    two_cycle = np.array([[0, 1], [1, 0]], dtype=bool)
    assert interventional.acyclic_ceiling(two_cycle) == 1
    three_cycle = np.roll(np.eye(3, dtype=bool), 1, axis=1)
    assert interventional.acyclic_ceiling(three_cycle) == 2
    dag = np.triu(np.ones((5, 5), dtype=bool), 1)
    assert interventional.acyclic_ceiling(dag) == 10
    with pytest.raises(ValueError, match="at most 24"):
        interventional.acyclic_ceiling(np.zeros((25, 25), dtype=bool))


@pytest.mark.parametrize("seed", range(4))
def test_acyclic_ceiling_is_the_best_node_order(seed):
    rng = np.random.default_rng(seed)
    t = rng.random((6, 6)) < 0.4
    np.fill_diagonal(t, False)
    assert interventional.acyclic_ceiling(t) == _by_every_order(t)


def test_shift_baseline_reads_each_knockouts_shifted_genes():
    import anndata as ad
    import pandas as pd
    import scipy.sparse as sp

    rng = np.random.default_rng(3)  # a draw whose null pairs are all far from p < 0.05 (BH over 4 tests)
    cond = np.array(["ctrl"] * 300 + ["a"] * 100 + ["c"] * 100)
    x = rng.normal(size=(cond.size, 3))
    x[cond == "a", 0] -= 3.0  # a knocked out: a and its child b fall; c does not move
    x[cond == "a", 1] -= 2.0
    x[cond == "c", 2] -= 3.0  # c knocked out: nothing else moves
    fit = ad.AnnData(x.astype(np.float32), obs=pd.DataFrame({"condition": cond}, index=[f"c{i}" for i in range(cond.size)]),
                     var=pd.DataFrame(index=["a", "b", "c"]))
    truth = sp.csr_matrix(np.array([[0, 1, 0], [0, 0, 0], [0, 0, 0]]))
    rec, adj = interventional.run_shift_baseline(fit, truth)
    assert adj.tolist() == [[0, 1, 0], [0, 0, 0], [0, 0, 0]]
    assert rec["f1"] == 1.0 and rec["edges"] == 1
