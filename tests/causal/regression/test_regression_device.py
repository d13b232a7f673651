"""The regression algorithm on a device: the CPU path keeps its DAG, CUDA gives the CPU's DAG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from cape_pipeline._utils import CUDA_BATCH_CAP, batch_entries
from cape_pipeline.causal.covariates import unit_sd, unit_sd_torch
from cape_pipeline.causal.regression import fit_regression

REFERENCE = Path(__file__).resolve().parents[2] / "data" / "regression_dag_b3beea7.npz"
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _counts_and_screen():
    """The two data sets of the reference file: simulated GRN counts (counting-noise correction,
    4 splits) and a perturbation screen (ordered re-tests, 2 splits, the jackknife re-test); k = 10
    candidates per round and no interventional edges, as when the reference was recorded (before
    ``n_candidates="auto"`` and ``shift_edges``)."""
    import cape_pipeline as cp
    from cape_pipeline.datasets._counts import simulated_grn_counts
    from cape_pipeline.datasets._interventions import simulate_perturbation_data

    a = simulated_grn_counts(3000, 400, seed=2)
    cp.pp.preprocess(a, n_top_genes=150, min_genes=10)
    b = simulate_perturbation_data(40, n_single=12, n_double=6, n_ctrl=400, cells_per_condition=30, seed=3)
    return {"counts": (a, {"regression": {"n_splits": 4, "n_candidates": 10}, "seed": 1}),
            "perturb": (b, {"regression": {"n_splits": 2, "n_candidates": 10, "shift_edges": False}, "seed": 0})}


def test_cpu_dag_equals_the_one_recorded_before_the_device_option():
    """The DAGs of b3beea7 (before ``device`` reached the regression algorithm), edge for edge.

    The weights agree to 1e-9 relative: both runs do the same float64 arithmetic; another CPU's
    BLAS may sum in another order, which moves a sum of N ≤ 3,000 terms by ≲ N·2⁻⁵³ ≈ 3e-13,
    amplified by the K × K solves (ridge-stabilised, condition ≲ 1e3) to ≲ 1e-9 at most. An edge
    could flip only where its p-value lies within that of the BH threshold."""
    from cape_pipeline.causal import discover

    ref = np.load(REFERENCE)
    for name, (data, opts) in _counts_and_screen().items():
        g = discover(data, algorithm="regression", device="cpu", **opts)
        adj = sp.coo_array(g.adjacency)
        order = np.lexsort((adj.col, adj.row))
        ref_order = np.lexsort((ref[f"{name}_c"], ref[f"{name}_r"]))
        np.testing.assert_array_equal(adj.row[order], ref[f"{name}_r"][ref_order])
        np.testing.assert_array_equal(adj.col[order], ref[f"{name}_c"][ref_order])
        np.testing.assert_allclose(adj.data[order], ref[f"{name}_w"][ref_order], rtol=1e-9)
        assert g.params["device"] == "cpu"
    assert adj.nnz > 20


def test_unit_sd_in_torch_is_numpys():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((500, 6)) * [1, 2, 3, 4, 5, 0] + 7.0
    np.testing.assert_allclose(unit_sd_torch(torch.from_numpy(z)).numpy(), unit_sd(z - z.mean(0)), rtol=1e-12,
                               atol=1e-12)
    assert (unit_sd_torch(torch.from_numpy(z))[:, 5] == 0).all()  # a constant column becomes 0, as in numpy


def test_batches_follow_the_free_memory_on_cuda_only(monkeypatch):
    assert batch_entries("cpu", 1 << 24, bytes_per_entry=80) == 1 << 24
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (64 * 2**30, 141 * 2**30))
    # a quarter of 64 GiB at 80 bytes an entry
    assert batch_entries("cuda", 1 << 24, bytes_per_entry=80) == int(0.25 * 64 * 2**30 // 80)
    assert batch_entries("cuda", 1 << 24, bytes_per_entry=1) == CUDA_BATCH_CAP
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2**20, 141 * 2**30))
    assert batch_entries("cuda", 1 << 24, bytes_per_entry=80) == 1 << 24  # never below the CPU's batch


def _chain(n: int = 2000, m: int = 40, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, m))
    for j in range(1, m):
        x[:, j] += 0.5 * np.tanh(x[:, j - 1]) + (0.4 * x[:, j - 3] if j >= 3 and j % 3 == 0 else 0.0)
    return (x - x.mean(0)) / x.std(0)


@cuda
@pytest.mark.parametrize("case", ["plain", "noise", "interventions"])
def test_cuda_gives_the_cpu_dag(case):
    """CUDA against the CPU on one problem: the same edges, weights to 1e-6 relative.

    The float64 regressions differ only in the order of their sums (≲ N·2⁻⁵³ ≈ 2e-13 relative at
    N = 2,000, amplified by the K × K solves to ≲ 1e-9); the screen's float32 correlations differ
    by ≲ N·2⁻²⁴ ≈ 1e-4 relative, which can swap two candidates only where their |r| tie that
    closely — not on this chain, whose candidates are separated by far more."""
    z = _chain()
    opts: dict = {"n_splits": 4, "seed": 2}
    if case == "noise":
        opts["reliability"] = np.linspace(0.6, 1.0, z.shape[1])
    if case == "interventions":
        keep = np.ones(z.shape, dtype=bool)
        keep[:200, 5] = keep[200:400, 11] = False
        opts.update(intervened=~keep, order_rounds=1, label_targets=np.r_[np.ones(400, int), np.zeros(1600, int)])
    cpu = fit_regression(z, device="cpu", **opts)
    gpu = fit_regression(z, device="cuda", **opts)
    assert cpu.adjacency.nnz > 10
    assert (cpu.adjacency != 0).toarray().tolist() == (gpu.adjacency != 0).toarray().tolist()
    np.testing.assert_allclose(gpu.adjacency.toarray(), cpu.adjacency.toarray(), rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(gpu.pvalue, cpu.pvalue, rtol=1e-5, atol=1e-300)


@cuda
def test_discover_records_the_device_it_ran_on():
    from cape_pipeline.causal import discover

    data, opts = _counts_and_screen()["counts"]
    g = discover(data, algorithm="regression", device="cuda", **opts)
    assert g.params["device"].startswith("cuda")
    ref = discover(data, algorithm="regression", device="cpu", **opts)
    assert (g.adjacency != 0).toarray().tolist() == (ref.adjacency != 0).toarray().tolist()
