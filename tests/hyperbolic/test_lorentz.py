from __future__ import annotations

import geoopt
import numpy as np
import pytest
import torch

from cape_pipeline.hyperbolic import lorentz

DT = torch.float64


def _points(n: int = 20, d: int = 5, scale: float = 2.0, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return lorentz.expmap0(scale * torch.randn(n, d, generator=g, dtype=DT))


def test_expmap0_on_manifold_and_logmap_roundtrip():
    g = torch.Generator().manual_seed(1)
    u = 3.0 * torch.randn(50, 7, generator=g, dtype=DT)
    p = lorentz.expmap0(u)
    assert p.shape == (50, 8)
    assert torch.all(p[:, 0] > 0)
    assert torch.allclose(
        lorentz.constraint_residual(p) / p[:, 0] ** 2, torch.zeros(50, dtype=DT), atol=1e-12
    )
    assert torch.allclose(lorentz.logmap0(p), u, atol=1e-9)
    assert torch.allclose(lorentz.dist0(p), torch.linalg.vector_norm(u, dim=-1), atol=1e-9)


def test_expmap0_of_zero_is_origin():
    p = lorentz.expmap0(torch.zeros(3, 4, dtype=DT))
    assert torch.equal(p, torch.cat([torch.ones(3, 1, dtype=DT), torch.zeros(3, 4, dtype=DT)], 1))


def test_matches_geoopt():
    man = geoopt.Lorentz().to(DT)
    x, y = _points(seed=2), _points(seed=3)
    assert torch.allclose(lorentz.dist(x, y), man.dist(x, y), atol=1e-8)
    assert torch.allclose(lorentz.dist0(x), man.dist0(x), atol=1e-8)
    assert torch.allclose(lorentz.minkowski_inner(x, y), man.inner(None, x, y), atol=1e-10)
    u = torch.randn(20, 5, dtype=DT, generator=torch.Generator().manual_seed(4))
    assert torch.allclose(
        lorentz.expmap0(u), man.expmap0(torch.cat([torch.zeros(20, 1, dtype=DT), u], 1)), atol=1e-9
    )
    # Eq. A.22 equals geoopt's lorentz_to_poincare at k = 1
    from geoopt.manifolds.lorentz import math as lmath

    assert torch.allclose(lorentz.to_poincare(x), lmath.lorentz_to_poincare(x, man.k), atol=1e-12)


def test_pairwise_matches_elementwise():
    x, y = _points(7, seed=5), _points(11, seed=6)
    d = lorentz.pairwise_dist(x, y)
    ref = lorentz.dist(x[:, None, :], y[None, :, :])
    assert d.shape == (7, 11)
    assert torch.allclose(d, ref, atol=1e-10)


def test_poincare_roundtrip_and_norm():
    x = _points(100, 6, scale=1.0, seed=7)
    e = lorentz.to_poincare(x)
    assert torch.all(torch.linalg.vector_norm(e, dim=-1) < 1)
    # ‖e‖ = tanh(d(p, o)/2)
    assert torch.allclose(
        torch.linalg.vector_norm(e, dim=-1), torch.tanh(lorentz.dist0(x) / 2), atol=1e-12
    )
    assert torch.allclose(lorentz.from_poincare(e), x, rtol=1e-9, atol=1e-9)


def test_dist_is_finite_with_finite_gradient_at_coincident_points():
    x = _points(4, seed=8).requires_grad_(True)
    d = lorentz.pairwise_dist(x, x)
    assert torch.allclose(torch.diagonal(d), torch.zeros(4, dtype=DT), atol=1e-5)
    d.sum().backward()
    assert torch.isfinite(x.grad).all()


def test_project_restores_constraint():
    x = _points(10, seed=9)
    noisy = x + 1e-3 * torch.randn_like(x)
    assert torch.allclose(
        lorentz.constraint_residual(lorentz.project(noisy)), torch.zeros(10, dtype=DT), atol=1e-9
    )


@pytest.mark.parametrize("r", [1e-6, 1.0, 10.0])
def test_distance_known_value(r):
    # the point at geodesic distance r from the origin along axis 1
    p = torch.tensor([[np.cosh(r), np.sinh(r), 0.0]], dtype=DT)
    o = torch.tensor([[1.0, 0.0, 0.0]], dtype=DT)
    assert float(lorentz.dist(p, o)) == pytest.approx(r, rel=1e-6, abs=2e-6)
