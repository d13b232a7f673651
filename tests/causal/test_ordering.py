"""The ordered re-test of the regression support on perturbation screens (issue 43)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ttest_ind
from statsmodels.stats.multitest import multipletests

from cape_pipeline.causal import discover
from cape_pipeline.causal.metrics import dag_metrics
from cape_pipeline.causal.ordering import causal_order, perturbation_shifts
from cape_pipeline.causal.regression import fit_regression
from cape_pipeline.datasets import simulate_perturbation_data
from cape_pipeline.errors import CapeConfigError


def _screen(seed: int = 0, n_ctrl: int = 400, n_per: int = 30):
    """a → b → c, d independent; a, b and d each perturbed alone, one row with two targets."""
    rng = np.random.default_rng(seed)
    n = n_ctrl + 3 * n_per + 1
    keep = np.ones((n, 4), dtype=bool)
    for j, col in enumerate((0, 1, 3)):
        keep[n_ctrl + j * n_per : n_ctrl + (j + 1) * n_per, col] = False
    keep[-1, [0, 3]] = False
    a = np.where(keep[:, 0], rng.normal(size=n), 3.0)
    b = np.where(keep[:, 1], 0.8 * a + 0.6 * rng.normal(size=n), -3.0)
    c = 0.8 * b + 0.6 * rng.normal(size=n)
    d = np.where(keep[:, 3], rng.normal(size=n), 3.0)
    return np.column_stack([a, b, c, d]), keep


@pytest.mark.filterwarnings("ignore:Precision loss")
def test_perturbation_shifts_are_welch_t_tests_with_benjamini_hochberg():
    z, keep = _screen()
    src, tgt, p = perturbation_shifts(z, keep, fdr=0.05)
    # the reference: scipy's Welch test of every other feature, statsmodels' BH over all of them
    ctrl = keep.all(1)
    ref_pairs, ref_p = [], []
    for t in (0, 1, 3):
        rows = (~keep).sum(1) == 1
        rows &= ~keep[:, t]
        pv = ttest_ind(z[rows], z[ctrl], axis=0, equal_var=False).pvalue
        for g in range(4):
            if g != t:
                ref_pairs.append((t, g))
                ref_p.append(pv[g])
    rej = multipletests(ref_p, alpha=0.05, method="fdr_bh")[0]
    want = {pair for pair, r in zip(ref_pairs, rej, strict=True) if r}
    assert set(zip(src.tolist(), tgt.tolist(), strict=True)) == want
    assert {(0, 1), (0, 2), (1, 2)} <= want and not any(s == 3 or t == 3 for s, t in want)
    got_p = dict(zip(zip(src.tolist(), tgt.tolist(), strict=True), p.tolist(), strict=True))
    for pair, pv in zip(ref_pairs, ref_p, strict=True):
        if pair in got_p:
            assert got_p[pair] == pytest.approx(pv, rel=1e-9)


def test_perturbation_shifts_need_controls_and_single_targets():
    z, keep = _screen()
    assert perturbation_shifts(z, np.ones_like(keep))[0].size == 0  # no perturbation
    no_ctrl = keep.copy()
    no_ctrl[keep.all(1), 2] = False  # every control row now has a target
    assert perturbation_shifts(z, no_ctrl)[0].size == 0


def test_causal_order_puts_shifts_before_conflicting_dag_edges():
    # DAG says 2 → 1, a perturbation says 1 shifts 2: the shift wins; 0 → 3 is kept
    rank = causal_order(4, np.array([2, 0]), np.array([1, 3]), np.array([1]), np.array([2]), np.array([1e-6]))
    assert rank[1] < rank[2] and rank[0] < rank[3]
    assert sorted(rank.tolist()) == [0, 1, 2, 3]
    # with no edges at all, the order is the features' own
    np.testing.assert_array_equal(causal_order(3, *(np.zeros(0, dtype=np.int64),) * 4, np.zeros(0)), [0, 1, 2])


def test_the_ordered_retest_regresses_a_child_on_its_predecessors_only():
    z, keep = _screen(seed=1, n_ctrl=2000, n_per=200)
    z = (z - z.mean(0)) / z.std(0)
    fit = fit_regression(z, n_candidates=3, intervened=~keep, order_rounds=1)
    stages = [h["stage"] for h in fit.history]
    assert stages[-2:] == ["perturbation shifts", "ordered re-test 1"]
    a = fit.adjacency.toarray() != 0
    assert a[0, 1] and a[1, 2] and not a[0, 2] and not a[:, 3].any() and not a[3].any()
    # observational: the option changes nothing, bit for bit
    plain = [fit_regression(z, n_candidates=3, order_rounds=r) for r in (0, 2)]
    assert (plain[0].adjacency != plain[1].adjacency).nnz == 0
    np.testing.assert_array_equal(plain[0].pvalue, plain[1].pvalue)


@pytest.mark.filterwarnings("ignore")
def test_order_rounds_raise_f1_where_the_counting_noise_is_corrected():
    """60 genes, 40 single and 20 double perturbations, log1p of Poisson counts (declared as
    counts with library size 1, as the benchmark does). Measured at this seed: F1 0.635 without
    the re-test, 0.739 with it; without the correction the re-test is 0.613 → 0.590, so "auto"
    leaves it off there."""
    data = simulate_perturbation_data(n_genes=60, n_single=40, n_double=20, n_ctrl=800, cells_per_condition=40, seed=3)
    data.uns["cape_preprocess"] = {"input_state": "counts", "config": {"target_sum": 1.0}, "modality": "scrna"}
    data.obs["cape_library_size"] = 1.0
    truth = data.varp["true_dag"]
    kw = {"support": "regression", "covariates": "none"}
    thin = {r: discover(data, measurement_error="thinning", order_rounds=r, **kw) for r in (0, "auto")}
    assert thin["auto"].params["order_rounds_used"] == 2 and thin[0].params["order_rounds_used"] == 0
    assert "causal order" in thin["auto"].params["edge_rule"]
    f1 = {r: dag_metrics(g.adjacency, truth)["f1"] for r, g in thin.items()}
    assert f1["auto"] > f1[0] + 0.05
    plain = {r: discover(data, measurement_error="none", order_rounds=r, **kw) for r in (0, "auto")}
    assert plain["auto"].params["order_rounds_used"] == 0
    assert (plain["auto"].adjacency != plain[0].adjacency).nnz == 0
    with pytest.raises(CapeConfigError, match="order_rounds"):
        discover(data, support="regression", order_rounds=-1)
