"""Step 9 of the regression algorithm: the perturbations' direct shifts as edges."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from cape_pipeline.causal import discover
from cape_pipeline.causal.regression import RegressionConfig
from cape_pipeline.causal.regression.ordering import shift_tests
from cape_pipeline.causal.regression.shift_edges import (
    INFLATION_WARNING,
    MIN_WEIGHT,
    add_shift_edges,
    direct_shifts,
    sign_concordant,
)
from cape_pipeline.datasets import simulate_perturbation_data
from cape_pipeline.errors import CapeConfigError


def test_direct_shifts_drops_pairs_a_two_step_path_explains():
    """a=0 shifts 1 and 2, 1 shifts 2: 0 → 2 runs through 1 (a shift pair), so it is indirect;
    3 shifts 4 and the DAG has 5 → 4 only, so 3 → 4 stays direct; with the DAG edge 3 → 5 it
    goes through 5."""
    src = np.array([0, 0, 1, 3], dtype=np.int64)
    tgt = np.array([1, 2, 2, 4], dtype=np.int64)
    none = np.zeros(0, dtype=np.int64)
    assert direct_shifts(src, tgt, np.array([5]), np.array([4]), 6).tolist() == [True, False, True, True]
    assert direct_shifts(src, tgt, np.array([5, 3]), np.array([4, 5]), 6).tolist() == [True, False, True, False]
    assert direct_shifts(none, none, none, none, 6).size == 0


def _screen(seed: int = 0, n_ctrl: int = 600, n_per: int = 40):
    """Four features: 0's knockdown shifts 1 by 1.5 sd, and 1 carries a weak observational signal
    of the same sign from 0 (coefficient −0.15: 0 down, 1 up); 2 and 3 independent, 3 knocked down
    too."""
    rng = np.random.default_rng(seed)
    n = n_ctrl + 2 * n_per
    keep = np.ones((n, 4), dtype=bool)
    keep[n_ctrl : n_ctrl + n_per, 0] = False
    keep[n_ctrl + n_per :, 3] = False
    z = rng.normal(size=(n, 4))
    z[:, 1] -= 0.15 * z[:, 0]
    z[~keep[:, 0], 0] = -2.0
    z[~keep[:, 0], 1] += 1.5
    z[~keep[:, 3], 3] = -2.0
    z = (z - z.mean(0)) / z.std(0)
    return z, keep


def test_sign_concordance_is_the_controls_correlation_against_the_shifts_direction():
    """Source 0 knocked down (down 2 sd). Its child 1 (coefficient +0.4) shifts down with it:
    concordant. Gene 2 is associated with 0 in the controls as 1 is (+0.4) but shifts up as 0
    goes down: discordant. Gene 3 shifts with no association: the sign of its chance correlation
    decides. Source 4 is knocked up. Against a loop over the pairs in numpy."""
    rng = np.random.default_rng(4)
    n_ctrl, n_per, m = 500, 40, 6
    n = n_ctrl + 2 * n_per
    keep = np.ones((n, m), dtype=bool)
    keep[n_ctrl : n_ctrl + n_per, 0] = False
    keep[n_ctrl + n_per :, 4] = False
    z = rng.normal(size=(n, m))
    z[:, 1] += 0.4 * z[:, 0]
    z[:, 2] += 0.4 * z[:, 0]
    z[~keep[:, 0], 0] = -2.0
    z[~keep[:, 0], 1] -= 0.8
    z[~keep[:, 0], 2] += 1.5  # against the controls' sign
    z[~keep[:, 0], 3] += 1.5
    z[~keep[:, 4], 4] = 2.0
    z[~keep[:, 4], 5] += 1.0
    resid = z + 0.1 * rng.normal(size=z.shape)
    src = np.array([0, 0, 0, 4, 4], dtype=np.int64)
    tgt = np.array([1, 2, 3, 5, 1], dtype=np.int64)
    got = sign_concordant(z, resid, keep, src, tgt)
    ctrl = keep.all(1)
    want = []
    for a, g in zip(src, tgt, strict=True):
        rows = ~keep[:, a]
        r = np.corrcoef(z[ctrl, a], resid[ctrl, g])[0, 1]
        d_g = resid[rows, g].mean() - resid[ctrl, g].mean()
        d_a = z[rows, a].mean() - z[ctrl, a].mean()
        want.append(np.sign(r) == np.sign(d_g * d_a))
    assert got.tolist() == want
    assert got[0] and not got[1]
    # controls from the labels: the same rows here; fewer than 3 controls: nothing is concordant
    labels = (~keep).sum(1)
    assert sign_concordant(z, resid, keep, src, tgt, label_targets=labels).tolist() == want
    assert not sign_concordant(z, resid, keep, src, tgt, label_targets=np.ones(n, dtype=np.int64)).any()
    assert sign_concordant(z, resid, keep, src[:0], tgt[:0]).size == 0


def _add(z, keep, adjacency, **kw):
    zt = torch.from_numpy(z)
    return add_shift_edges(z, zt, sp.csr_array(adjacency), keep, fdr=0.05, **kw)


def test_a_knockdowns_child_becomes_an_edge_with_a_positive_weight():
    z, keep = _screen()
    out, rec = _add(z, keep, np.zeros((4, 4)))
    assert rec["stage"] == "interventional edges"
    # every shift pair at the level is direct here (no two-step path), so each is an edge
    st = shift_tests(z, keep, 0.05)
    assert (0, 1) in set(zip(st.source.tolist(), st.target.tolist(), strict=True))
    assert rec["n_shift_pairs"] == rec["n_added"] == rec["n_edges"] == st.source.size
    a = out.toarray()
    assert set(zip(*np.nonzero(a), strict=True)) == set(zip(st.source.tolist(), st.target.tolist(), strict=True))
    assert (a[a != 0] >= MIN_WEIGHT).all()
    # the weight is step 5's: |partial correlation| of 1 on its only parent 0 over the rows where 1 was not perturbed
    r = np.corrcoef(z[:, 0], z[:, 1])[0, 1]
    assert a[0, 1] == pytest.approx(abs(r), rel=0.02)


def test_a_dag_edge_against_the_shift_gives_way_and_the_others_keep_their_weights():
    z, keep = _screen()
    dag = np.zeros((4, 4))
    dag[1, 0] = 0.3  # contradicts 0's knockdown shifting 1
    dag[3, 2] = 0.25  # a child whose parents do not change keeps its weight
    out, rec = _add(z, keep, dag)
    a = out.toarray()
    assert rec["n_dropped"] == 1
    assert a[1, 0] == 0 and a[0, 1] > 0 and a[3, 2] == 0.25


def test_without_shifts_or_with_regulators_that_exclude_the_source_nothing_changes():
    z, keep = _screen()
    dag = sp.csr_array(np.eye(4, k=1) * 0.5)
    dag[0, 1] = 0  # 1 → 2 → 3 only
    dag.eliminate_zeros()
    out, rec = _add(z, keep, dag, may_parent=np.array([False, True, True, True]))
    assert rec["n_added"] == 0 and (out != dag).nnz == 0
    empty = np.ones_like(keep)
    out, rec = _add(z, empty, dag)  # no perturbed rows: no shift pairs
    assert rec["n_shift_pairs"] == 0 and (out != dag).nnz == 0


def test_discover_on_a_screen_records_the_added_edges_and_the_option_turns_them_off():
    a = simulate_perturbation_data(n_genes=30, n_single=15, n_double=0, n_ctrl=300, cells_per_condition=20, seed=1)
    import networkx as nx

    on = discover(a, algorithm="regression", regression={"n_splits": 1})
    off = discover(a, algorithm="regression", regression={"n_splits": 1, "shift_edges": False})
    rec = [h for h in on.history if h["stage"] == "interventional edges"]
    assert len(rec) == 1 and not [h for h in off.history if h["stage"] == "interventional edges"]
    assert on.params["n_shift_edges"] == rec[0]["n_added"] > 0 and off.params["n_shift_edges"] == 0
    # the same fit up to step 9, which adds its edges and drops the DAG edges against them
    assert on.adjacency.nnz == off.adjacency.nnz + rec[0]["n_added"] - rec[0]["n_dropped"]
    assert nx.is_directed_acyclic_graph(nx.DiGraph(on.adjacency.toarray() != 0))
    assert "direct shifts" in on.params["edge_rule"] and "direct shifts" not in off.params["edge_rule"]
    assert on.params["shift_inflation"] == rec[0]["shift_inflation"] < INFLATION_WARNING
    assert not any("inflated" in w for w in on.params["warnings"])


def test_an_inflated_screen_is_recorded_and_warned_about():
    """40 features; 10 knocked down alone, each in 30 cells of its own condition. Calibrated, few
    features shift; with a run effect (every feature of a condition moved by its own N(0, 0.5²)
    offset, as between separate runs) most do, and the genomic-control λ says so."""
    import warnings

    from cape_pipeline.errors import CapeWarning

    rng = np.random.default_rng(3)
    m, n_ctrl, n_per, n_kd = 40, 600, 30, 10
    n = n_ctrl + n_kd * n_per
    keep = np.ones((n, m), dtype=bool)
    cond = np.r_[np.full(n_ctrl, -1), np.repeat(np.arange(n_kd), n_per)]
    keep[np.arange(n_ctrl, n), cond[n_ctrl:]] = False
    z = rng.normal(size=(n, m))
    z[~keep] = -2.0
    for run, scale in enumerate((0.0, 0.5)):
        x = z + scale * rng.normal(size=(n_kd + 1, m))[cond + 1] * (cond >= 0)[:, None]
        x = (x - x.mean(0)) / x.std(0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _, rec = _add(x, keep, np.zeros((m, m)))
        said = [str(w.message) for w in caught if issubclass(w.category, CapeWarning)]
        if run == 0:
            assert 0.8 < rec["shift_inflation"] < INFLATION_WARNING and not said and "warning" not in rec
        else:
            assert rec["shift_inflation"] > INFLATION_WARNING and said == [rec["warning"]]
            assert "inflated" in said[0] and "shift_edges=false" in said[0]


def test_discover_puts_the_inflation_warning_among_the_graphs_warnings(monkeypatch):
    import cape_pipeline.causal.regression.shift_edges as shift_mod
    from cape_pipeline.errors import CapeWarning

    a = simulate_perturbation_data(n_genes=30, n_single=15, n_double=0, n_ctrl=300, cells_per_condition=20, seed=1)
    monkeypatch.setattr(shift_mod, "INFLATION_WARNING", 0.0)  # any λ warns
    with pytest.warns(CapeWarning, match="shift tests are inflated"):
        g = discover(a, algorithm="regression", regression={"n_splits": 1})
    assert "inflated" in g.params["warnings"][0] and g.params["shift_inflation"] > 0


def test_the_option_must_be_a_bool():
    with pytest.raises(CapeConfigError, match="shift_edges: expected True or False"):
        RegressionConfig(shift_edges="yes")


def test_parent_residuals_are_each_features_least_squares_residual_on_its_dag_parents():
    """0 → 2 ← 1, 2 → 3; 3 perturbed in the last 50 rows, so its coefficients come from the
    other rows, while its residual is taken on every row; ridge 0 gives numpy's least squares."""
    from cape_pipeline.causal.regression.shift_edges import parent_residuals

    rng = np.random.default_rng(0)
    n = 300
    z = rng.normal(size=(n, 4))
    z[:, 2] += 0.7 * z[:, 0] - 0.5 * z[:, 1]
    z[:, 3] += 0.9 * z[:, 2]
    keep = np.ones((n, 4), dtype=bool)
    keep[-50:, 3] = False
    z[-50:, 3] = -2.0
    z = (z - z.mean(0)) / z.std(0)
    dag = sp.csr_array(([0.5, 0.5, 0.5], ([0, 1, 2], [2, 2, 3])), shape=(4, 4))
    r = parent_residuals(z, torch.from_numpy(z), dag, keep, ridge=0.0)
    np.testing.assert_array_equal(r[:, :2], z[:, :2])
    rows = keep[:, 3]

    def ols(y, x, on):  # centred on the fitting rows, as the regressions are
        xc, yc = x[on] - x[on].mean(0), y[on] - y[on].mean()
        return np.linalg.lstsq(xc, yc, rcond=None)[0]

    b2 = ols(z[:, 2], z[:, [0, 1]], np.ones(n, dtype=bool))
    b3 = ols(z[:, 3], z[:, [2]], rows)
    np.testing.assert_allclose(r[:, 2], z[:, 2] - z[:, [0, 1]] @ b2, atol=1e-9)
    np.testing.assert_allclose(r[:, 3], z[:, 3] - z[:, [2]] @ b3, atol=1e-9)
