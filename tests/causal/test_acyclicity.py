from __future__ import annotations

import numpy as np
import pytest
import torch

from cape_pipeline.causal.acyclicity import (
    h_dense,
    h_majorant,
    h_spectral,
    hadamard_square_matvec,
    hadamard_square_rmatvec,
    power_iteration,
    spectral_radius_dense,
)


def _factors(m, r, seed, scale=0.3):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(m, r, generator=g, dtype=torch.float64) * scale,
        torch.randn(m, r, generator=g, dtype=torch.float64) * scale,
    )


def _a(u, v):
    a = u @ v.T
    return a - torch.diag(torch.diagonal(a))


@pytest.mark.parametrize(("m", "r", "seed"), [(4, 2, 0), (7, 3, 1), (12, 5, 2)])
def test_h_majorant_equals_dense_trace_exp(m, r, seed):
    u, v = _factors(m, r, seed)
    dense = h_dense(u.abs() @ v.abs().T)
    assert torch.allclose(h_majorant(u, v), dense, rtol=1e-10, atol=1e-12)
    assert h_majorant(u, v) > 0


def test_h_majorant_zero_for_disjoint_factor_supports():
    # node 0 feeds factor 0, factor 0 reaches node 1: a DAG node -> factor -> node
    u = torch.zeros(3, 2, dtype=torch.float64)
    v = torch.zeros(3, 2, dtype=torch.float64)
    u[0, 0], v[1, 0], u[1, 1], v[2, 1] = 1.0, 2.0, 1.5, 0.5
    assert abs(float(h_majorant(u, v))) < 1e-12


@pytest.mark.parametrize(("m", "r", "seed"), [(5, 2, 0), (9, 4, 3), (15, 6, 4)])
def test_matvecs_match_dense(m, r, seed):
    u, v = _factors(m, r, seed)
    b = _a(u, v) ** 2
    x = torch.rand(m, dtype=torch.float64)
    assert torch.allclose(hadamard_square_matvec(u, v, x), b @ x)
    assert torch.allclose(hadamard_square_rmatvec(u, v, x), b.T @ x)
    xs = torch.rand(m, 3, dtype=torch.float64)
    assert torch.allclose(hadamard_square_matvec(u, v, xs), b @ xs)


@pytest.mark.parametrize(("m", "r", "seed"), [(6, 3, 0), (10, 4, 5), (16, 5, 6)])
def test_spectral_radius_matches_eigvals(m, r, seed):
    u, v = _factors(m, r, seed)
    b = _a(u, v) ** 2
    rho_np = float(np.abs(np.linalg.eigvals(b.numpy())).max())
    _, _, rho = power_iteration(u, v, n_iter=500)
    assert rho.item() == pytest.approx(rho_np, rel=1e-4)
    assert float(h_spectral(u, v, n_iter=500)) == pytest.approx(rho_np, rel=1e-4)
    assert float(spectral_radius_dense(b)) == pytest.approx(rho_np, rel=1e-8)


def test_spectral_gradient_matches_finite_difference():
    u, v = _factors(6, 3, 7)
    u.requires_grad_(True)
    h = h_spectral(u, v, n_iter=500)
    (g,) = torch.autograd.grad(h, u)
    eps = 1e-6
    du = torch.zeros_like(u)
    du[2, 1] = eps

    def rho(uu):
        return float(np.abs(np.linalg.eigvals((_a(uu, v) ** 2).detach().numpy())).max())

    fd = (rho(u.detach() + du) - rho(u.detach() - du)) / (2 * eps)
    assert g[2, 1].item() == pytest.approx(fd, rel=1e-3, abs=1e-7)


def test_spectral_zero_on_dag():
    # strictly upper-triangular A = U Vᵀ (rank 2): acyclic => rho = 0
    u = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], dtype=torch.float64)
    v = torch.tensor([[0.0, 0.0], [0.8, 0.0], [0.5, 0.7]], dtype=torch.float64)
    assert float(h_spectral(u, v, n_iter=50)) < 1e-8
