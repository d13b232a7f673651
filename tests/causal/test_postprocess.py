from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.causal.postprocess import break_cycles, threshold_low_rank, threshold_matrix


def _is_dag(a):
    return CausalGraph.from_adjacency(a, [f"n{i}" for i in range(a.shape[0])]).is_dag()


def test_dense_cyclic_input_becomes_dag():
    rng = np.random.default_rng(0)
    a = rng.uniform(0.3, 1.0, size=(25, 25))  # complete digraph with self-loops
    dag, dropped = break_cycles(a)
    assert _is_dag(dag)
    # a tournament is the most a DAG on 25 nodes can keep; greedy dropping may keep fewer
    assert 0 < dag.nnz <= 25 * 24 // 2
    assert dropped == 25 * 25 - dag.nnz


def test_weakest_edge_of_cycle_is_dropped():
    a = np.zeros((3, 3))
    a[0, 1], a[1, 2], a[2, 0] = 0.9, 0.8, 0.3
    a[0, 2] = 0.5
    dag, dropped = break_cycles(a)
    assert dropped == 1
    assert dag[2, 0] == 0 and dag[0, 1] == 0.9 and dag[1, 2] == 0.8 and dag[0, 2] == 0.5


def test_dag_untouched():
    a = sp.csr_array(np.triu(np.ones((6, 6)), 1))
    dag, dropped = break_cycles(a)
    assert dropped == 0 and (dag != a).nnz == 0


def test_threshold_low_rank_matches_dense_and_topk():
    rng = np.random.default_rng(1)
    u, v = rng.normal(size=(30, 4)), rng.normal(size=(30, 4))
    a = u @ v.T
    np.fill_diagonal(a, 0)
    s = threshold_low_rank(u, v, 1.0)
    assert np.allclose(s.toarray(), np.where(np.abs(a) > 1.0, a, 0))
    assert np.allclose(threshold_matrix(a, 1.0).toarray(), s.toarray())
    top = threshold_low_rank(u, v, 0.0, max_edges_per_row=3)
    assert (np.diff(top.indptr) <= 3).all()
    for i in range(30):
        best = np.sort(np.abs(a[i]))[-3:]
        assert np.allclose(np.sort(np.abs(top[[i], :].toarray().ravel()))[-3:], best)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))])
def test_threshold_low_rank_torch_input_in_blocks(monkeypatch, device):
    """Tensor factors (any device) give the numpy result, also when split into row blocks."""
    from cape_pipeline.causal import postprocess

    rng = np.random.default_rng(2)
    u, v = rng.normal(size=(50, 5)), rng.normal(size=(50, 5))
    want = threshold_low_rank(u, v, 0.5, max_edges_per_row=4).toarray()
    monkeypatch.setattr(postprocess, "BLOCK_ENTRIES", 50 * 7)  # 7 rows per block
    ut, vt = torch.tensor(u, device=device), torch.tensor(v, device=device)
    got = threshold_low_rank(ut, vt, 0.5, max_edges_per_row=4).toarray()
    assert np.array_equal(got != 0, want != 0) and np.allclose(got, want)
    assert np.all(np.diag(got) == 0)
