"""The ordered re-test of the regression support on perturbation screens (issue 43)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ttest_ind
from statsmodels.stats.multitest import multipletests

from cape_pipeline.causal import discover
from cape_pipeline.causal.metrics import dag_metrics
from cape_pipeline.causal.ordering import causal_order, perturbation_shifts
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


def _reference_shifts(z, keep, label_targets, fdr=0.05, min_rows=3):
    """scipy's Welch test of every other feature for each target perturbed alone in ≥ min_rows
    rows, against the control rows; statsmodels' BH over all of those p-values."""
    n_hit = (~keep).sum(1)
    ctrl = (label_targets == 0) & (n_hit == 0)
    pairs, pvals = [], []
    for t in range(z.shape[1]):
        rows = (label_targets == 1) & (n_hit == 1) & ~keep[:, t]
        if rows.sum() < min_rows:
            continue
        pv = ttest_ind(z[rows], z[ctrl], axis=0, equal_var=False).pvalue
        pairs += [(t, g) for g in range(z.shape[1]) if g != t]
        pvals += [pv[g] for g in range(z.shape[1]) if g != t]
    rej = multipletests(pvals, alpha=fdr, method="fdr_bh")[0]
    return {pair: pv for pair, pv, r in zip(pairs, pvals, rej, strict=True) if r}


def test_perturbation_shifts_are_welch_t_tests_with_benjamini_hochberg(monkeypatch):
    """40 features, 12 targets of 2–30 rows (two with too few), rows shuffled, doubles and cells
    perturbed on a gene that is not a feature; blocks of one target at a time and of all."""
    import cape_pipeline.causal.ordering as ordering

    rng = np.random.default_rng(5)
    m, n_ctrl = 40, 500
    sizes = [30, 2, 25, 20, 1, 15, 30, 10, 12, 8, 6, 5]
    blocks = [np.zeros((n_ctrl, m), bool)]
    labels = [np.zeros(n_ctrl, dtype=np.int64)]
    for t, k in enumerate(sizes):
        b = np.zeros((k, m), bool)
        b[:, t] = True
        blocks.append(b)
        labels.append(np.ones(k, dtype=np.int64))
    double = np.zeros((20, m), bool)
    double[:, [0, 1]] = True  # a double: not used
    unknown = np.zeros((300, m), bool)  # "X+ctrl", X not a feature: neither control nor perturbation
    half = np.zeros((20, m), bool)
    half[:, 2] = True  # "2+X": not target 2 alone
    blocks += [double, unknown, half]
    labels += [np.full(20, 2), np.ones(300, dtype=np.int64), np.full(20, 2)]
    hit = np.vstack(blocks)
    named = np.concatenate(labels)
    z = rng.normal(size=(hit.shape[0], m))
    for t in range(len(sizes)):  # target t shifts features 20 + t and 21 + t
        z[hit[:, t], 20 + t] += 1.5
        z[hit[:, t], 21 + t] -= 1.0
    z[named.astype(bool) & ~hit.any(1), 5] += 3.0  # the unknown target moves feature 5
    order = rng.permutation(hit.shape[0])
    z, keep, named = z[order], ~hit[order], named[order]
    want = _reference_shifts(z, keep, named)
    assert len(want) >= 10 and not any(s in (1, 4) for s, _ in want) and not any(g == 5 for _, g in want)
    for entries in (1, 1 << 22):  # one target per block, and all of them in one
        monkeypatch.setattr(ordering, "_BLOCK_ENTRIES", entries)
        src, tgt, p = perturbation_shifts(z, keep, 0.05, label_targets=named)
        got = dict(zip(zip(src.tolist(), tgt.tolist(), strict=True), p.tolist(), strict=True))
        assert got.keys() == want.keys()
        for pair, pv in want.items():
            assert got[pair] == pytest.approx(pv, rel=1e-9)
    # without the labels the "X+ctrl" cells pass for controls, and the shift of feature 5 is theirs
    src, tgt, _ = perturbation_shifts(z, keep, 0.05)
    assert (tgt == 5).any()


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
    # unordered features: more outgoing edges first, then the features' own order
    rank = causal_order(5, np.array([3, 3, 4]), np.array([0, 1, 2]), *(np.zeros(0, dtype=np.int64),) * 2, np.zeros(0))
    np.testing.assert_array_equal(np.argsort(rank), [3, 4, 0, 1, 2])
    np.testing.assert_array_equal(causal_order(3, *(np.zeros(0, dtype=np.int64),) * 4, np.zeros(0)), [0, 1, 2])


def test_the_ordered_retest_regresses_a_child_on_its_predecessors_only(monkeypatch):
    import cape_pipeline.causal.regression as reg

    ranks, tested = [], []
    real_order, real_test = reg.causal_order, reg._test

    def order_spy(*a):
        ranks.append(real_order(*a))
        return ranks[-1]

    def test_spy(z_test, cand, live, *a):
        tested.append((len(ranks), cand.numpy().copy(), live.numpy().copy()))
        return real_test(z_test, cand, live, *a)

    monkeypatch.setattr(reg, "causal_order", order_spy)
    monkeypatch.setattr(reg, "_test", test_spy)
    z, keep = _screen(seed=1, n_ctrl=2000, n_per=200)
    z = (z - z.mean(0)) / z.std(0)
    fit = reg.fit_regression(z, n_candidates=3, intervened=~keep, order_rounds=2)
    assert [h["stage"] for h in fit.history][-3:] == ["perturbation shifts", "ordered re-test 1", "ordered re-test 2"]
    assert len(ranks) == 2 and [t[0] for t in tested] == [0, 0, 1, 1, 2, 2]  # two halves per round
    for n_round, cand, live in tested[2:]:
        rank = ranks[n_round - 1]
        child = np.repeat(np.arange(4), cand.shape[1]).reshape(cand.shape)
        assert (rank[cand[live]] < rank[child[live]]).all()
        assert live.sum() < tested[0][2].sum()  # successors left out
    # the returned pairs are the last round's, and they hold every edge of the graph
    a = fit.adjacency.tocoo()
    accepted = set(zip(fit.parent[fit.accepted].tolist(), fit.child[fit.accepted].tolist(), strict=True))
    assert set(zip(a.row.tolist(), a.col.tolist(), strict=True)) <= accepted
    assert (ranks[-1][fit.parent] < ranks[-1][fit.child]).all()
    assert a.nnz and (a.toarray() != 0)[0, 1] and (a.toarray() != 0)[1, 2]
    # without interventions the option changes nothing
    plain = [reg.fit_regression(z, n_candidates=3, order_rounds=r) for r in (0, 2)]
    assert (plain[0].adjacency != plain[1].adjacency).nnz == 0
    np.testing.assert_array_equal(plain[0].pvalue, plain[1].pvalue)


@pytest.mark.filterwarnings("ignore")
def test_order_rounds_raise_f1_where_the_counting_noise_is_corrected():
    """60 genes, 40 single and 20 double perturbations, log1p of Poisson counts (declared as
    counts with library size 1, as the benchmark does). Measured at this seed: F1 0.635 without
    the re-test, 0.735 with it; without the correction the re-test is 0.613 → 0.577, so "auto"
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
    with pytest.raises(CapeConfigError, match="order_rounds"):
        discover(data, support="low-rank", order_rounds=2)
