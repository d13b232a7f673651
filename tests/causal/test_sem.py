"""The SEM-VAE pieces the low-rank and screened algorithms share (cape_pipeline.causal.sem)."""

from __future__ import annotations

import pytest
import torch

from cape_pipeline.causal import sem
from cape_pipeline.causal.sem import EntrywiseMLP

CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))


def _forward_dense(f, x):
    """EntrywiseMLP's reference evaluation through the ``(..., M, H)`` hidden layer."""
    return x + torch.relu(x.unsqueeze(-1) * f.w1 + f.b1) @ f.w2 + f.b2


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_piecewise_mlp_equals_dense_mlp_and_gradients(device):
    f = EntrywiseMLP(16, generator=torch.Generator().manual_seed(1)).double().to(device)
    with torch.no_grad():
        f.w2.normal_()
    x = torch.randn(40, 5, dtype=torch.float64, device=device, requires_grad=True)
    params = [x, f.w1, f.b1, f.w2, f.b2]
    assert torch.allclose(f(x), _forward_dense(f, x))
    g1 = torch.autograd.grad((f(x) ** 2).sum(), params)
    g2 = torch.autograd.grad((_forward_dense(f, x) ** 2).sum(), params)
    for a, b in zip(g1, g2, strict=True):
        assert torch.allclose(a, b)


def test_bucket_sums_equal_scatter_add(monkeypatch):
    g = torch.Generator().manual_seed(0)
    k = torch.randint(0, 9, (1000,), generator=g)
    vals = torch.randn(2, 1000, dtype=torch.float64, generator=g)
    want = torch.zeros(2, 9, dtype=torch.float64).scatter_add_(1, k.expand(2, -1), vals)
    monkeypatch.setattr(sem, "_ONE_HOT_ENTRIES", 9 * 64)  # 16 chunks of 64 entries
    assert torch.allclose(sem._bucket_sums(k, vals, 9), want)
