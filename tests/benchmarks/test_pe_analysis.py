"""Tests of ``benchmarks/peers/pe_analysis.py``, the PE-vs-DAG analyses behind the peers table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.models import ScGPTConfig, build_backbone

_PATH = Path(__file__).parents[2] / "benchmarks" / "peers" / "pe_analysis.py"
_spec = importlib.util.spec_from_file_location("pe_analysis", _PATH)
pe_analysis = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pe_analysis)
modularity, pe_table = pe_analysis.modularity, pe_analysis.pe_table
procrustes_distance, rsa = pe_analysis.procrustes_distance, pe_analysis.rsa


def _graph(adj: np.ndarray) -> CausalGraph:
    return CausalGraph.from_adjacency(adj, [f"g{i}" for i in range(adj.shape[0])])


def _random_dag(m: int = 60, extra: int = 20, seed: int = 0) -> CausalGraph:
    """A connected DAG: a random recursive tree (parent < child) plus a few forward edges."""
    rng = np.random.default_rng(seed)
    adj = np.zeros((m, m))
    for j in range(1, m):
        adj[rng.integers(0, j), j] = 1.0
    for _ in range(extra):
        i, j = sorted(rng.choice(m, 2, replace=False))
        adj[i, j] = 1.0
    return _graph(adj)


def _nx_hops(graph: CausalGraph) -> np.ndarray:
    g = graph.to_networkx().to_undirected()
    names = list(graph.feature_names.astype(str))
    h = np.full((len(names), len(names)), np.inf)
    for s, lengths in nx.all_pairs_shortest_path_length(g):
        for t, n in lengths.items():
            h[names.index(s), names.index(t)] = n
    return h


def _mds(h: np.ndarray, dim: int = 8) -> np.ndarray:
    """Classical MDS of a distance matrix."""
    m = h.shape[0]
    j = np.eye(m) - 1.0 / m
    b = -0.5 * j @ (h**2) @ j
    w, v = np.linalg.eigh(b)
    top = np.argsort(w)[::-1][:dim]
    return v[:, top] * np.sqrt(np.clip(w[top], 0, None))


# ------------------------------------------------------------------ Procrustes
def test_procrustes_zero_for_rotated_scaled_shifted_copy():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(100, 8))
    q, _ = np.linalg.qr(rng.normal(size=(8, 8)))
    assert procrustes_distance(3.7 * a @ q + 5.0, a) < 1e-8
    # different widths: zero-padding embeds the narrower table isometrically
    wide = np.hstack([a @ q, np.zeros((100, 4))])
    q12, _ = np.linalg.qr(rng.normal(size=(12, 12)))
    assert procrustes_distance(a, 0.1 * wide @ q12) < 1e-8


def test_procrustes_large_for_independent_tables():
    rng = np.random.default_rng(1)
    d = procrustes_distance(rng.normal(size=(200, 8)), rng.normal(size=(200, 8)))
    assert 0.5 < d <= 2.0


def test_procrustes_errors():
    rng = np.random.default_rng(2)
    a = rng.normal(size=(10, 4))
    with pytest.raises(CapeDataError, match="rows"):
        procrustes_distance(a, a[:9])
    bad = a.copy()
    bad[0, 0] = np.nan
    with pytest.raises(CapeDataError, match="NaN"):
        procrustes_distance(bad, a)
    with pytest.raises(CapeDataError, match=r"\(M, D\)"):
        procrustes_distance(a[:, 0], a)
    with pytest.raises(CapeDataError, match="constant"):
        procrustes_distance(np.ones((10, 4)), a)


# ------------------------------------------------------------------ RSA
def test_hops_match_networkx_and_rho_matches_scipy():
    graph = _random_dag(40, seed=3)
    np.testing.assert_array_equal(pe_analysis._hops(graph), _nx_hops(graph))
    pe = np.random.default_rng(3).normal(size=(40, 6))
    res = rsa(pe, graph, n_permutations=0)
    iu = np.triu_indices(40, 1)
    ref = spearmanr(np.linalg.norm(pe[iu[0]] - pe[iu[1]], axis=1), _nx_hops(graph)[iu]).statistic
    assert res["rho"] == pytest.approx(ref, abs=1e-10)
    assert res["n_pairs"] == 40 * 39 // 2 and np.isnan(res["p_value"])


def test_rsa_high_for_pe_built_from_graph_distances():
    graph = _random_dag(60, seed=0)
    pe = _mds(_nx_hops(graph))
    res = rsa(pe, graph, n_permutations=200, seed=0)
    assert res["rho"] > 0.5 and res["p_value"] < 0.05
    assert res["p_value"] == pytest.approx(1 / 201)


def test_rsa_null_for_random_pe():
    graph = _random_dag(60, seed=0)
    res = rsa(np.random.default_rng(5).normal(size=(60, 8)), graph, n_permutations=200, seed=0)
    assert abs(res["rho"]) < 0.15 and res["p_value"] > 0.05


def test_rsa_excludes_pairs_across_components():
    # two chains 0-1-2-3 and 4-5-6: 6 + 3 within-component pairs, plus an isolated node 7
    adj = np.zeros((8, 8))
    for i, j in [(0, 1), (1, 2), (2, 3), (4, 5), (5, 6)]:
        adj[i, j] = 1.0
    graph = _graph(adj)
    pe = np.array([[0.0], [1], [2], [3], [10], [11], [12], [50]])
    res = rsa(pe, graph, n_permutations=50)
    assert res["n_pairs"] == 9
    assert res["rho"] == pytest.approx(1.0)


def test_rsa_errors():
    graph = _random_dag(10)
    with pytest.raises(CapeDataError, match="graph has 10"):
        rsa(np.zeros((9, 3)), graph)
    with pytest.raises(CapeDataError, match="NaN"):
        rsa(np.full((10, 3), np.nan), graph)
    with pytest.raises(CapeDataError, match="need >= 3"):
        rsa(np.random.default_rng(0).normal(size=(4, 2)), _graph(np.zeros((4, 4))))  # no edges
    with pytest.raises(CapeDataError, match="n_permutations"):
        rsa(np.random.default_rng(0).normal(size=(10, 2)), graph, n_permutations=-1)


# ------------------------------------------------------------------ modularity
def _clustered_dag(
    n_clusters: int = 3, size: int = 15, seed: int = 0
) -> tuple[CausalGraph, np.ndarray]:
    rng = np.random.default_rng(seed)
    m = n_clusters * size
    adj = np.zeros((m, m))
    label = np.repeat(np.arange(n_clusters), size)
    for c in range(n_clusters):
        idx = np.arange(c * size, (c + 1) * size)
        for a in range(size):
            for b in range(a + 1, size):
                if rng.random() < 0.5:
                    adj[idx[a], idx[b]] = 1.0
        if c:
            adj[idx[0] - 1, idx[0]] = 1.0  # one bridge to the previous cluster
    return _graph(adj), label


def test_modularity_higher_for_pe_clustered_by_community():
    graph, label = _clustered_dag()
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 16)) * 3
    clustered = centres[label] + rng.normal(size=(label.size, 16))
    random = rng.normal(size=(label.size, 16))
    q_c, q_r = modularity(clustered, graph, k=5), modularity(random, graph, k=5)
    assert q_c["n_communities"] == 3 == q_r["n_communities"]
    assert q_c["modularity"] > 0.5 > q_r["modularity"] + 0.3
    assert modularity(clustered, graph, k=5, method="greedy")["modularity"] > 0.5


def test_modularity_errors():
    graph, _ = _clustered_dag()
    pe = np.random.default_rng(0).normal(size=(45, 4))
    with pytest.raises(CapeConfigError, match="k must be"):
        modularity(pe, graph, k=0)
    with pytest.raises(CapeConfigError, match="method"):
        modularity(pe, graph, method="spectral")
    with pytest.raises(CapeDataError, match="graph has 45"):
        modularity(pe[:40], graph)
    assert modularity(pe, graph, k=500)["n_communities"] == 3  # k clipped to M - 1


# ------------------------------------------------------------------ pe_table
M, D = 12, 16
CFG = ScGPTConfig(d_model=D, n_heads=2, n_layers=1, max_tokens=0, tokens="all")


@pytest.mark.parametrize(
    ("pe", "width"),
    [
        ("learned-small-norm", D),
        ("trainable-absolute", D),
        ("static-absolute", D),
        ("cape", D // 2),
        ("cape-input", D // 2),
    ],
)
def test_pe_table_of_backbones(pe, width):
    rng = np.random.default_rng(0)
    angles = rng.uniform(-0.7, 0.7, (M, D // 2))
    table = rng.normal(size=(M, D)).astype(np.float32)
    model = build_backbone("scgpt", CFG, n_features=M, pe=pe, angles=angles, static_table=table)
    t = pe_table(model)
    assert t.shape == (M, width) and t.dtype == np.float64
    if pe == "cape":
        np.testing.assert_allclose(t, angles, atol=1e-6)
    if pe == "static-absolute":
        np.testing.assert_allclose(t, table, atol=1e-6)
    if pe == "learned-small-norm":  # the effective table e^g·P, not the raw P
        with torch.no_grad():
            model.pe.log_gain.fill_(np.log(2.0))
        np.testing.assert_allclose(
            pe_table(model.pe), 2.0 * model.pe.table.detach().numpy(), rtol=1e-6
        )


@pytest.mark.parametrize("pe", ["none", "cape-additive", "trainable-relative"])
def test_pe_table_missing_raises(pe):
    angles = np.zeros((M, D // 2))
    model = build_backbone("scgpt", CFG, n_features=M, pe=pe, angles=angles)
    with pytest.raises(CapeConfigError, match="no per-feature table"):
        pe_table(model)
