from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.errors import CapeConfigError
from cape_pipeline.hyperbolic import causal_pagerank, embed, k_hop_positives, lorentz


def _tree() -> CausalGraph:
    edges = [("r", f"c{i}") for i in range(3)]
    edges += [(f"c{i}", f"l{i}{j}") for i in range(3) for j in range(3)]
    return CausalGraph.from_edges(edges)


def _random_dag(m: int = 30, p: float = 0.1, seed: int = 0) -> CausalGraph:
    rng = np.random.default_rng(seed)
    a = np.triu(rng.random((m, m)) < p, k=1) * rng.uniform(0.5, 2.0, (m, m))
    a *= rng.choice([-1.0, 1.0], (m, m))
    return CausalGraph.from_adjacency(a, [f"g{i}" for i in range(m)])


def _dense_strongest_paths(a: np.ndarray, hops: int) -> np.ndarray:
    """Reference: max over paths of length ≤ hops of the product of |A|, by brute force."""
    a = np.abs(a)
    best = a.copy()
    power = a.copy()
    for _ in range(hops - 1):
        power = (power[:, :, None] * a[None, :, :]).max(axis=1)
        best = np.maximum(best, power)
    out = np.maximum(best, best.T)
    np.fill_diagonal(out, 0)
    return out


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_k_hop_positives_match_brute_force(hops):
    g = _random_dag(25, 0.15, seed=hops)
    w = k_hop_positives(g.adjacency, hops)
    assert sp.issparse(w)
    np.testing.assert_allclose(
        w.toarray(), _dense_strongest_paths(g.adjacency.toarray(), hops), atol=1e-12
    )


def test_k_hop_direct_edge_weight_and_two_hop():
    a = np.zeros((3, 3))
    a[0, 1], a[1, 2], a[0, 2] = 2.0, 3.0, -0.5  # direct 0→2 weaker than the path 0→1→2
    w = k_hop_positives(a, 2).toarray()
    assert w[0, 1] == 2.0 and w[1, 0] == 2.0
    assert w[0, 2] == 6.0  # strongest path: 2 * 3
    assert k_hop_positives(a, 1).toarray()[0, 2] == 0.5


def test_pagerank_roots_collect_mass():
    g = _tree()
    pr = dict(zip(g.feature_names, causal_pagerank(g), strict=True))
    assert pytest.approx(sum(pr.values())) == 1.0
    assert pr["r"] > pr["c0"] > pr["l00"]


def test_embedding_on_manifold_and_shapes():
    g = _random_dag(30)
    emb = embed(g, dim=4, max_epochs=20, tol=0, seed=1)
    assert emb.hyperboloid.shape == (30, 5) and emb.hyperboloid.dtype == np.float64
    assert emb.poincare.shape == (30, 4)
    assert emb.pagerank.shape == (30,)
    assert len(emb.loss_history) == 20
    assert list(emb.feature_names) == list(g.feature_names)
    p = torch.from_numpy(emb.hyperboloid)
    assert torch.max(torch.abs(lorentz.constraint_residual(p))) < 1e-9
    assert np.all(np.linalg.norm(emb.poincare, axis=1) < 1)
    np.testing.assert_allclose(emb.poincare, emb.hyperboloid[:, 1:] / (emb.hyperboloid[:, :1] + 1))
    assert emb.params["dim"] == 4 and emb.params["geometry"] == "hyperbolic"


def test_roots_nearer_origin_than_leaves():
    g = _tree()
    emb = embed(g, dim=2, max_epochs=200, tol=0, lr=1e-2, seed=0)
    norm = dict(zip(emb.feature_names, np.linalg.norm(emb.poincare, axis=1), strict=True))
    leaves = [v for k, v in norm.items() if k.startswith("l")]
    assert norm["r"] < min(leaves)
    assert emb.loss_history[-1] < emb.loss_history[0]


def test_reproducible_and_seed_dependent():
    g = _random_dag(20)
    a = embed(g, dim=3, max_epochs=10, tol=0, seed=5)
    b = embed(g, dim=3, max_epochs=10, tol=0, seed=5)
    c = embed(g, dim=3, max_epochs=10, tol=0, seed=6)
    np.testing.assert_array_equal(a.hyperboloid, b.hyperboloid)
    assert not np.allclose(a.hyperboloid, c.hyperboloid)


def test_does_not_touch_global_rng():
    torch.manual_seed(123)
    ref = torch.rand(3)
    torch.manual_seed(123)
    embed(_random_dag(10), dim=2, max_epochs=3, tol=0, negatives=4)
    assert torch.equal(torch.rand(3), ref)


@pytest.mark.parametrize(
    "kw", [dict(optimizer="rsgd"), dict(negatives=5), dict(geometry="euclidean")]
)
def test_variants_run_and_stay_valid(kw):
    g = _random_dag(25)
    emb = embed(g, dim=3, max_epochs=30, tol=0, lr=1e-2, **kw)
    assert np.isfinite(emb.loss_history).all()
    assert np.all(np.linalg.norm(emb.poincare, axis=1) < 1)
    p = torch.from_numpy(emb.hyperboloid)
    assert torch.max(torch.abs(lorentz.constraint_residual(p) / p[:, 0] ** 2)) < 1e-9
    if kw.get("geometry") == "euclidean":
        assert emb.euclidean.shape == (25, 3)
        # expmap0 keeps direction and maps the Euclidean norm to the hyperbolic radius
        np.testing.assert_allclose(
            lorentz.dist0(p).numpy(), np.linalg.norm(emb.euclidean, axis=1), rtol=1e-8, atol=1e-8
        )
        assert emb.params["optimizer"] == "adam"


def test_graph_without_edges():
    g = CausalGraph.from_adjacency(sp.csr_array((4, 4)), ["a", "b", "c", "d"])
    emb = embed(g, dim=2, max_epochs=3, tol=0)
    assert np.isfinite(emb.hyperboloid).all()


@pytest.mark.parametrize(
    "kw",
    [
        dict(dim=0),
        dict(k_hop=0),
        dict(max_epochs=0),
        dict(lr=-1.0),
        dict(optimizer="sgd"),
        dict(geometry="sphere"),
        dict(negatives=0),
        dict(restart=1.0),
        dict(lambda_g=-1.0),
    ],
)
def test_bad_config(kw):
    with pytest.raises(CapeConfigError):
        embed(_tree(), **kw)


def test_rejects_non_graph():
    with pytest.raises(TypeError):
        embed(np.eye(3))


def test_stops_at_the_plateau_and_spreads_the_points():
    """Defaults train to convergence (not to a step count) and leave the origin."""
    g = _random_dag(80, 0.08, seed=2)
    emb = embed(g, dim=4, seed=0)
    p = emb.params
    assert p["converged"] and p["epochs_run"] < p["max_epochs"]
    assert len(emb.loss_history) == p["epochs_run"]
    assert np.linalg.norm(emb.poincare, axis=1).max() > 0.5
    assert emb.loss_history[-1] < 0.8 * emb.loss_history[0]
    assert p["learn_curvature"] and p["curvature"] > 0
    chance = 2 * g.n_edges / (g.n_features * (g.n_features - 1))
    assert p["quality"]["map"] > 4 * chance


def test_tree_is_reconstructed_with_roots_near_the_origin():
    emb = embed(_tree(), dim=4, seed=0)
    q = emb.params["quality"]
    assert q["map"] > 0.95 and q["mean_rank"] < 1.1
    assert q["spearman_norm_vs_neg_pagerank"] > 0.5 and q["spearman_norm_vs_depth"] > 0.5


def test_plateau_rule():
    from cape_pipeline.hyperbolic.embed import has_plateaued, plateau_window

    assert not has_plateaued([5, 4, 3, 2], 2, 1e-3)
    assert has_plateaued([2, 2, 2, 2], 2, 1e-3)
    assert has_plateaued([2, 2, 2.1, 2.1], 2, 1e-3)  # rising counts as a plateau
    assert not has_plateaued([0.08, 0.08, 0.07, 0.07], 2, 1e-3)  # no absolute floor
    assert not has_plateaued([2, 2, 2, 2], 2, 0.0)
    assert plateau_window(1) == 200 and plateau_window(157) == 10 and plateau_window(3, 7) == 7


def test_plateau_action_decays_a_slow_fall_only_in_the_second_half():
    from cape_pipeline.hyperbolic.schedule import plateau_action

    slow = [1.0, 1.0, 0.995, 0.995]  # 0.5 % per window: between tol and 10 · tol
    assert plateau_action(slow, 2, 1e-3, 0.5, 10, anneal=True) == "decay"
    assert plateau_action(slow, 2, 1e-3, 0.5, 10, anneal=False) == "go"  # first half: untouched
    assert plateau_action(slow, 2, 1e-3, 1.0, 10, anneal=True) == "go"  # lr_decay=1: off
    assert plateau_action(slow, 2, 1e-3, 0.5, 1, anneal=True) == "go"  # a window at the new rate first
    assert plateau_action([1.0, 1.0, 0.9, 0.9], 2, 1e-3, 0.5, 10, anneal=True) == "go"  # fast fall
    assert plateau_action([1.0, 1.0, 0.9995, 0.9995], 2, 1e-3, 0.5, 10, anneal=True) == "stop"
    assert plateau_action(slow, 2, 0.0, 0.5, 10, anneal=True) == "go"  # tol=0: exactly max_epochs


def test_the_demo_graph_reaches_its_plateau_by_default():
    """Step II on the DAG Step I learns on the bundled pbmc68k_reduced (110 edges, 121 of 765
    genes with one): its separated points drift at a constant step size, so without the decay the
    loss still fell by > tol per window at max_epochs=1000. With the decay it plateaus within
    max_epochs, and edge reconstruction is that of the full 1,000 epochs (mAP within 0.01)."""
    g = CausalGraph.read_parquet(Path(__file__).parents[1] / "data" / "pbmc68k_reduced_dag" / "dag.parquet")
    emb = embed(g, seed=0)
    p = emb.params
    assert p["converged"] and p["epochs_run"] < p["max_epochs"] and p["lr_decays_at"]
    assert all(e >= p["max_epochs"] // 2 for e in p["lr_decays_at"])
    assert p["lr_final"] < p["lr"]
    flat = embed(g, seed=0, lr_decay=1.0)
    assert not flat.params["converged"] and flat.params["epochs_run"] == 1000
    assert abs(p["quality"]["map"] - flat.params["quality"]["map"]) < 0.01


def test_isolated_features_sit_at_the_origin():
    edges = [("a", "b"), ("b", "c"), ("a", "d")]
    g = CausalGraph.from_edges(edges, feature_names=["a", "b", "c", "d", "x", "y"])
    emb = embed(g, dim=3, max_epochs=30, tol=0, seed=0)
    iso = np.isin(emb.feature_names, ["x", "y"])
    assert emb.params["n_isolated"] == 2 and emb.params["n_trained"] == 4
    np.testing.assert_array_equal(emb.poincare[iso], 0.0)
    np.testing.assert_array_equal(emb.hyperboloid[iso], [[1, 0, 0, 0]] * 2)
    assert np.all(np.linalg.norm(emb.poincare[~iso], axis=1) > 0)
    lit = embed(g, dim=3, max_epochs=30, tol=0, seed=0, isolated="embed")
    assert lit.params["n_trained"] == 6 and np.all(np.linalg.norm(lit.poincare[iso], axis=1) > 0)


@pytest.mark.parametrize("kw", [dict(optimizer="radam", lr=1e6), dict(geometry="hyperbolic", lr=1e3, burn_in=0)])
def test_divergence_is_a_clear_error(kw):
    from cape_pipeline.errors import CapeFitError

    with pytest.raises(CapeFitError, match=r"Lower `lr`"):
        embed(_random_dag(30, 0.2), dim=4, max_epochs=50, tol=0, seed=0, **kw)


def test_rsgd_steps_are_clipped():
    """RSGD moves a point by at most RSGD_MAX_STEP per step, so even a huge lr stays finite."""
    from cape_pipeline.hyperbolic.embed import RSGD_MAX_STEP

    emb = embed(_random_dag(30, 0.2), dim=4, max_epochs=3, tol=0, burn_in=0, optimizer="rsgd", lr=1e8, seed=0)
    steps = emb.params["steps"]
    assert np.isfinite(emb.hyperboloid).all()
    assert lorentz.dist0(torch.from_numpy(emb.hyperboloid)).max() <= steps * RSGD_MAX_STEP + 1e-6


def test_fixed_curvature_scales_distances():
    g = _tree()
    emb = embed(g, dim=2, max_epochs=20, tol=0, curvature=0.25, learn_curvature=False)
    assert emb.params["curvature"] == 0.25
    p = torch.from_numpy(emb.hyperboloid[:3])
    np.testing.assert_allclose(emb.distances([0, 1, 2]), 2.0 * lorentz.pairwise_dist(p, torch.from_numpy(emb.hyperboloid)).numpy())


def test_sampled_and_exact_negatives_agree_on_small_graphs():
    """With K ≥ n − 1 the sampled path is not taken: exactly Eq. 16."""
    g = _random_dag(20)
    a = embed(g, dim=3, max_epochs=5, tol=0, negatives=128)
    b = embed(g, dim=3, max_epochs=5, tol=0, negatives=None)
    assert a.params["negatives_exact"]
    np.testing.assert_allclose(a.hyperboloid, b.hyperboloid)


@pytest.mark.parametrize(
    "device",
    ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))],
)
def test_runs_on_the_device_in_float64(device):
    g = _random_dag(40, 0.1)
    emb = embed(g, dim=4, max_epochs=20, tol=0, negatives=8, seed=0, device=device)
    assert emb.hyperboloid.dtype == np.float64 and np.isfinite(emb.hyperboloid).all()
    assert emb.params["device"].startswith(device)
    ref = embed(g, dim=4, max_epochs=20, tol=0, negatives=8, seed=0, device="cpu")
    # same seeds (negatives are drawn on the CPU generator): the same fit up to float round-off
    np.testing.assert_allclose(emb.hyperboloid, ref.hyperboloid, rtol=1e-6, atol=1e-6)
