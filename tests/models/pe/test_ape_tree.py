from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from cape_pipeline.encodings.rope import apply_rotary
from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.models.pe.ape_tree import APETreePE, branch_labels, spanning_forest

D, H = 16, 2
DH = D // H


def _roots_reached(parent: np.ndarray) -> bool:
    """True if every pointer chain ends at -1 (walk at most M steps)."""
    cur = np.arange(parent.size)
    for _ in range(parent.size + 1):
        cur = np.where(cur >= 0, parent[np.maximum(cur, 0)], -1)
    return bool((cur == -1).all())


def _random_forest(m: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    parent = np.array([-1] + [int(rng.integers(-1, i)) for i in range(1, m)])
    return parent


def _pe(parent, weight=None, **kw) -> APETreePE:
    weight = np.ones(len(parent)) if weight is None else weight
    return APETreePE(np.asarray(parent), np.asarray(weight, dtype=float), D, H, **kw)


# ---------------------------------------------------------------- spanning_forest


@pytest.mark.parametrize("sparse", [True, False])
def test_spanning_forest_keeps_strongest_parent(sparse):
    a = np.zeros((6, 6))
    a[0, 2], a[1, 2] = 0.5, -2.0  # |−2| wins → parent 1
    a[0, 3], a[1, 3] = 1.0, 1.0  # tie → smallest parent index 0
    a[2, 4] = 3.0
    a[5, 5] = 9.0  # self-loop ignored → 5 is a root
    parent, weight = spanning_forest(sp.csr_matrix(a) if sparse else a)
    assert parent.dtype == np.int64 and weight.dtype == np.float64
    np.testing.assert_array_equal(parent, [-1, -1, 1, 0, 2, -1])
    np.testing.assert_allclose(weight, [0, 0, 2, 1, 3, 0])


def test_spanning_forest_breaks_cycles_at_weakest_edge():
    a = np.zeros((7, 7))
    a[0, 1], a[1, 2], a[2, 0] = 2.0, 3.0, 1.0  # cycle 0→1→2→0, weakest kept edge at node 0
    a[3, 4], a[4, 3] = 1.5, 1.5  # 2-cycle, tie → node 3 becomes the root
    a[1, 5] = 0.7  # tail hanging off the first cycle
    a[5, 6] = 0.2
    parent, weight = spanning_forest(sp.csr_matrix(a))
    np.testing.assert_array_equal(parent, [-1, 0, 1, -1, 3, 1, 5])
    np.testing.assert_allclose(weight, [0, 2, 3, 0, 1.5, 0.7, 0.2])
    assert _roots_reached(parent)


def test_spanning_forest_random_cyclic_graph_has_no_cycle():
    rng = np.random.default_rng(0)
    a = sp.random(300, 300, density=0.03, random_state=rng, format="csr")
    parent, weight = spanning_forest(a)
    assert _roots_reached(parent)
    # only cycle breakers lose their strongest parent
    dense = np.abs(a.toarray())
    np.fill_diagonal(dense, 0)
    has_parent = dense.max(axis=0) > 0
    kept = parent >= 0
    np.testing.assert_array_equal(parent[kept], dense[:, kept].argmax(axis=0))
    assert (~kept & has_parent).sum() < 0.2 * has_parent.sum()
    assert (weight[~kept] == 0).all()


def test_spanning_forest_without_edges_is_all_roots():
    for a in (np.zeros((3, 3)), sp.csr_matrix((3, 3)), np.zeros((0, 0))):
        parent, weight = spanning_forest(a)
        np.testing.assert_array_equal(parent, -np.ones(a.shape[0]))
        np.testing.assert_array_equal(weight, np.zeros(a.shape[0]))
    assert branch_labels([], [], 2).shape == (0,)


def test_spanning_forest_errors():
    with pytest.raises(CapeDataError):
        spanning_forest(np.zeros((3, 4)))
    with pytest.raises(CapeDataError):
        spanning_forest(sp.csr_matrix(np.zeros((3, 4))))
    a = np.zeros((3, 3))
    a[0, 1] = np.nan
    with pytest.raises(CapeDataError):
        spanning_forest(sp.csr_matrix(a))
    a[0, 1] = np.inf
    with pytest.raises(CapeDataError):
        spanning_forest(a)


def test_spanning_forest_speed():
    rng = np.random.default_rng(1)
    m, e = 20000, 100_000
    a = sp.coo_matrix((rng.normal(size=e), (rng.integers(0, m, e), rng.integers(0, m, e))), shape=(m, m))
    a = a.tocsr()
    t0 = time.perf_counter()
    parent, _ = spanning_forest(a)
    assert time.perf_counter() - t0 < 2.0
    assert _roots_reached(parent)


# ---------------------------------------------------------------- branch_labels


def test_branch_labels_orders_by_weight_and_caps():
    parent = np.array([-1, 0, 0, 0, 0, -1, 5])
    weight = np.array([0, 0.1, 0.9, 0.5, 0.7, 0, 1.0])
    # children of 0 by weight: 2, 4, 3, 1; roots by subtree size: 0 (5 nodes), 5 (2 nodes)
    np.testing.assert_array_equal(branch_labels(parent, weight, 3), [0, 2, 0, 2, 1, 1, 0])
    np.testing.assert_array_equal(branch_labels(parent, weight, 5), [0, 3, 0, 2, 1, 1, 0])
    np.testing.assert_array_equal(branch_labels(parent, weight, 1), np.zeros(7))
    # ties among siblings → smaller index first
    np.testing.assert_array_equal(branch_labels([-1, 0, 0], [0, 1.0, 1.0], 4), [0, 0, 1])


def test_branch_labels_errors():
    with pytest.raises(CapeConfigError):
        branch_labels([-1, 0], [0, 1], 0)
    with pytest.raises(CapeDataError):
        branch_labels([-1, 2], [0, 1], 2)
    with pytest.raises(CapeDataError):
        branch_labels([1, 0], [1, 1], 2)  # cycle
    with pytest.raises(CapeDataError):
        branch_labels([-1, 0], [0, 1, 2], 2)


# ---------------------------------------------------------------- APETreePE


def test_constructor_errors():
    with pytest.raises(CapeConfigError):
        APETreePE(np.array([-1]), np.zeros(1), D, H, n_branches=0)
    with pytest.raises(CapeConfigError):
        APETreePE(np.array([-1]), np.zeros(1), 12, 4)  # Dh = 3, odd
    with pytest.raises(CapeConfigError):
        APETreePE(np.array([-1]), np.zeros(1), 10, 4)  # not divisible
    with pytest.raises(CapeConfigError):
        APETreePE(np.array([-1]), np.zeros(1), D, H, initial_generators="random")
    with pytest.raises(CapeDataError):
        APETreePE(np.array([[-1]]), np.zeros(1), D, H)
    with pytest.raises(CapeDataError):
        APETreePE(np.array([-1, 5]), np.zeros(2), D, H)


def test_words_are_root_paths():
    pe = _pe([-1, 0, 0, 1, -1], [0, 2.0, 1.0, 1.0, 0])
    # labels: node 0 root (subtree 4) → 0, node 4 root → 1; node 1 → 0, node 2 → 1, node 3 → 0
    w = pe.words(torch.tensor([3, 2, 0, 4]))
    assert w.tolist() == [[0, 0, 0], [0, 1, -1], [0, -1, -1], [1, -1, -1]]


def test_maps_are_orthogonal():
    torch.manual_seed(0)
    pe = _pe(_random_forest(60, 0), initial_generators="identity", noise=0.5)
    a = pe.maps(torch.arange(60))
    assert a.shape == (60, H, DH, DH) and a.dtype == torch.float32
    eye = torch.eye(DH).expand_as(a)
    torch.testing.assert_close(a.transpose(-1, -2) @ a, eye, atol=1e-5, rtol=0)
    assert (a - eye).abs().max() > 0.1


def test_relative_map_depends_only_on_path_between():
    # m = 4, n = 5; common ancestor 2; path 2→3→4 and 2→5 is shared by all three forests
    base = ([-1, 0, 1, 2, 3, 2], [0, 1, 1, 1, 1, 0.5])
    relabel = ([-1, 0, 1, 2, 3, 2, 0], [0, 1, 1, 1, 1, 0.5, 5.0])  # node 1 moves to branch 1
    deeper = ([6, 0, 1, 2, 3, 2, -1], [1, 1, 1, 1, 1, 0.5, 0])  # extra ancestor above 0
    torch.manual_seed(0)
    ref = _pe(*base, n_branches=3, initial_generators="identity", noise=0.5)
    rel, abs_ = [], []
    for parent, weight in (base, relabel, deeper):
        pe = _pe(parent, weight, n_branches=3, initial_generators="identity")
        pe.load_state_dict({"generators": ref.generators, "parent": pe.parent, "branch": pe.branch})
        a = pe.maps(torch.tensor([4, 5]))
        rel.append(a[0].transpose(-1, -2) @ a[1])
        abs_.append(a[0])
    for r, a in zip(rel[1:], abs_[1:], strict=True):
        torch.testing.assert_close(r, rel[0], atol=1e-5, rtol=0)
        assert (a - abs_[0]).abs().max() > 1e-2


def test_chain_with_rope_init_is_rope():
    m, base = 6, 10000.0
    pe = _pe(list(range(-1, m - 1)), initial_generators="rope", noise=0.0, base=base)
    assert pe.branch.tolist() == [0] * m
    idx = torch.tensor([[0, 5, 2, 3], [4, 4, 1, 0]])
    q, k = torch.randn(2, 2, H, 5, DH).unbind(0)
    q2, k2 = pe.qk_transform(idx)(q, k)
    theta = base ** (-2.0 * torch.arange(DH // 2) / DH)
    depth = torch.cat([torch.zeros(2, 1), (idx + 1).float()], dim=1)  # <cls> depth 0
    ang = (depth[..., None] * theta)[:, None]  # (B, 1, 1+T, Dh/2), same for every head
    torch.testing.assert_close(q2, apply_rotary(q, ang), atol=1e-5, rtol=0)
    torch.testing.assert_close(k2, apply_rotary(k, ang), atol=1e-5, rtol=0)
    assert torch.equal(q2[:, :, 0], q[:, :, 0]) and torch.equal(k2[:, :, 0], k[:, :, 0])


def test_cls_unchanged_and_gradients_flow():
    torch.manual_seed(1)
    pe = _pe(_random_forest(20, 1), initial_generators="identity", noise=0.3)
    idx = torch.randint(0, 20, (3, 7))
    q, k = torch.randn(2, 3, H, 8, DH).unbind(0)
    q2, k2 = pe.qk_transform(idx)(q, k)
    assert torch.equal(q2[:, :, 0], q[:, :, 0]) and torch.equal(k2[:, :, 0], k[:, :, 0])
    assert not torch.allclose(q2[:, :, 1:], q[:, :, 1:])
    (q2 @ k2.transpose(-1, -2)).square().sum().backward()
    assert pe.generators.grad is not None and pe.generators.grad.abs().sum() > 0


def test_state_dict_round_trip_into_placeholder():
    m = 25
    parent = _random_forest(m, 2)
    weight = np.random.default_rng(2).uniform(0.1, 1, m)
    torch.manual_seed(2)
    pe = _pe(parent, weight, n_branches=3, initial_generators="identity", noise=0.3)
    holder = _pe(-np.ones(m, dtype=np.int64), np.zeros(m), n_branches=3)
    idx = torch.randint(0, m, (2, 9))
    q, k = torch.randn(2, 2, H, 10, DH).unbind(0)
    want = pe.qk_transform(idx)(q, k)
    before = holder.qk_transform(idx)(q, k)
    assert not torch.allclose(before[0], want[0])
    holder.load_state_dict(pe.state_dict())
    got = holder.qk_transform(idx)(q, k)
    assert torch.equal(holder.parent, pe.parent) and torch.equal(holder.branch, pe.branch)
    torch.testing.assert_close(got[0], want[0], atol=0, rtol=0)
    torch.testing.assert_close(got[1], want[1], atol=0, rtol=0)


def test_init_is_the_earlier_name_of_initial_generators():
    """``init=`` (earlier name) warns and builds the same generators as ``initial_generators=``."""
    torch.manual_seed(0)
    new = _pe(_random_forest(20, 1), initial_generators="identity", noise=0.3)
    torch.manual_seed(0)
    with pytest.warns(FutureWarning, match="initial_generators"):
        old = _pe(_random_forest(20, 1), init="identity", noise=0.3)
    torch.testing.assert_close(old.generators, new.generators, rtol=0, atol=0)
    with pytest.raises(CapeConfigError, match="give only initial_generators"):
        _pe(_random_forest(20, 1), init="rope", initial_generators="rope")
