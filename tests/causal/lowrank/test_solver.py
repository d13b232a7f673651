"""The low-rank algorithm's augmented Lagrangian (cape_pipeline.causal.lowrank.solver)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cape_pipeline.causal._input import prepare_matrix
from cape_pipeline.causal.lowrank import SolverConfig, fit_low_rank_vae


def _chain(n=600, seed=0):
    rng = np.random.default_rng(seed)
    x = np.zeros((n, 5))
    x[:, 0] = rng.normal(size=n)
    for j in range(1, 5):
        x[:, j] = x[:, j - 1] + rng.normal(size=n)
    return x


def test_penalty_held_once_thresholded_graph_is_dag():
    x = torch.from_numpy(prepare_matrix(_chain(n=300))[0].astype(np.float32))

    def history(tau):
        cfg = SolverConfig(rank=4, epochs=4, max_outer=4, dag_threshold=tau, l1="exact")
        return fit_low_rank_vae(x, cfg, device="cpu").history

    # tau = 0.2: after 1-epoch steps no entry exceeds tau, the output is a DAG: held at start
    held = history(0.2)
    assert all(h["thresholded_dag"] for h in held)
    assert {(h["rho"], h["alpha"]) for h in held} == {(1.0, 0.0)}
    # tau = 0: every nonzero entry counts, cycles remain, the plain AL rule raises alpha, rho
    plain = history(0.0)
    assert not any(h["thresholded_dag"] for h in plain)
    assert plain[-1]["alpha"] > 0 and plain[-1]["rho"] > plain[0]["rho"]
    with pytest.raises(ValueError, match="l1"):
        fit_low_rank_vae(x, SolverConfig(rank=4, epochs=1, l1="bogus"), device="cpu")
