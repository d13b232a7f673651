"""Screened sparse algorithm of Step I (``discover(method="cape", algorithm="screened")``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cape_pipeline.causal.api import discover, discover_scored
from cape_pipeline.causal.metrics import dag_metrics
from cape_pipeline.causal.screened import ScreenedSEMVAE, h_spectral_sparse, screen_parents
from cape_pipeline.causal.screened.fit import _SparseProduct
from cape_pipeline.errors import CapeConfigError


def _random_parents(m: int, k: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    p = torch.randint(0, m - 1, (m, k), generator=g)
    return p + (p >= torch.arange(m)[:, None]).long()  # never a self-loop


def _dense(model: ScreenedSEMVAE) -> torch.Tensor:
    m = model.n_features
    a = torch.zeros(m, m, dtype=torch.float64)
    p, c, w = model.edges()
    a.index_put_((p, c), w.double(), accumulate=True)
    return a


def test_sparse_product_matches_dense_and_gradcheck() -> None:
    m, k, b = 12, 4, 5
    model = ScreenedSEMVAE(_random_parents(m, k)).double()
    with torch.no_grad():
        model.w.normal_()
    fx = torch.randn(b, m, dtype=torch.float64, requires_grad=True)
    dense = _dense(model)
    assert torch.allclose(model.predict(fx), fx @ dense, atol=1e-12)

    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return _SparseProduct.apply(
            x, w, model.parents, model.crow_child, model.crow_parent, model.by_parent, model.child_of
        )

    assert torch.autograd.gradcheck(f, (fx, model.w.detach().clone().requires_grad_()))


def test_repeated_candidates_are_masked() -> None:
    parents = torch.tensor([[1, 1, 2], [0, 2, 2], [0, 1, 0]])
    model = ScreenedSEMVAE(parents)
    assert model.mask.sum().item() == 6  # one duplicate per row
    with torch.no_grad():
        model.w.fill_(1.0)
    # every distinct edge counted once
    assert torch.equal(_dense(model) != 0, ~torch.eye(3, dtype=torch.bool))
    assert model.l1().item() == pytest.approx(6.0)


def test_spectral_sparse_matches_dense_radius() -> None:
    m, k = 15, 3
    model = ScreenedSEMVAE(_random_parents(m, k, seed=1)).double()
    with torch.no_grad():
        model.w.uniform_(0.2, 1.0)
    a = _dense(model)
    rho = torch.linalg.eigvals(a * a).abs().max().item()
    h = h_spectral_sparse(model.weights(), model.parents, n_iter=500)
    assert h.item() == pytest.approx(rho, rel=1e-4)
    # acyclic support (every parent index below its child): h = 0
    low = torch.tensor([[max(c - 1, 0)] if c else [1] for c in range(m)])
    low[0, 0] = 1
    dag = ScreenedSEMVAE(low).double()
    with torch.no_grad():
        dag.w.fill_(1.0)
        dag.w[0] = 0.0  # 1 → 0 would close the cycle 0 → 1 → 0
    assert h_spectral_sparse(dag.weights(), dag.parents, n_iter=50).item() < 1e-8


def test_screen_finds_parents_and_never_self() -> None:
    rng = np.random.default_rng(0)
    n, m = 2000, 60
    x = rng.normal(size=(n, m))
    # x1 = x0 + x2 + noise: both parents must be candidates of x1 even though x2 is weak
    x[:, 1] = 2.0 * x[:, 0] + 0.4 * x[:, 2] + 0.5 * rng.normal(size=n)
    x = (x - x.mean(0)) / x.std(0)
    p = screen_parents(torch.from_numpy(x).float(), 3)
    assert p.shape == (m, 9)
    assert not bool((p == torch.arange(m)[:, None]).any())
    assert {0, 2} <= set(p[1].tolist())


def _chain(n: int = 1500, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Linear-Gaussian chain with a fork: x0 → x1 → x2, x1 → x3 → x4, plus 7 noise features."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 12))
    x[:, 1] += 0.9 * x[:, 0]
    x[:, 2] += 0.8 * x[:, 1]
    x[:, 3] += 0.9 * x[:, 1]
    x[:, 4] += -0.8 * x[:, 3]
    true = np.zeros((12, 12), dtype=int)
    true[0, 1] = true[1, 2] = true[1, 3] = true[3, 4] = 1
    return x, true


def test_screened_discover_recovers_chain_skeleton_and_is_deterministic() -> None:
    x, true = _chain()
    g1, scores = discover_scored(x, algorithm="screened", screened={"n_candidates": 3, "epochs": 60}, device="cpu", seed=0)
    assert g1.is_dag()
    met = dag_metrics(g1, true, scores=scores)
    assert met["skeleton_f1"] >= 0.85, met
    assert g1.params["support"] == "screened" and g1.params["posterior"] == "mean"
    assert g1.history[0]["phase"] == 1 and g1.history[-1]["phase"] == 2
    g2 = discover(x, algorithm="screened", screened={"n_candidates": 3, "epochs": 60}, device="cpu", seed=0)
    assert (g1.adjacency != g2.adjacency).nnz == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"algorithm": "dense"}, "algorithm"),
        ({"algorithm": "screened", "screened": {"n_candidates": 0}}, r"screened\.n_candidates"),
        ({"algorithm": "screened", "low_rank": {"posterior": "mean"}}, r"low_rank\.posterior: not used"),
        ({"algorithm": "screened", "low_rank": {"l1": "exact"}}, r"low_rank\.l1: not used"),
        ({"algorithm": "screened", "low_rank": {"acyclicity": "majorant"}}, r"low_rank\.acyclicity: not used"),
        ({"algorithm": "screened", "posterior": "mean"}, r"low_rank\.posterior: not used by algorithm='screened'"),
    ],
)
def test_screened_options_validated(kwargs: dict, match: str) -> None:
    x, _ = _chain(n=50)
    with pytest.raises(CapeConfigError, match=match):
        discover(x, device="cpu", **kwargs)


def test_algorithm_is_cape_only() -> None:
    x, _ = _chain(n=50)
    with pytest.raises(CapeConfigError, match="only for method 'cape'"):
        discover(x, method="correlation", algorithm="screened")
